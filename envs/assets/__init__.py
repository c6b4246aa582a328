"""Assets a family reads that are not generated: photos (``images``), and the episode splits
(``splits/``, data files only). See DESIGN.md, "Assets and real data"."""
