"""Session setup shared by every test module.

Shared helpers are plain modules in tests/ (on sys.path through pyproject's ``pythonpath``):
``contract_checks`` (redraw and state comparisons), ``parity_data`` (the reference recordings;
missing ones skip, or fail under CI) and ``maze_checks``. Time limits come from pyproject's
pytest-timeout settings.
"""
import os
import tempfile

# Indexes of annotation files (envs/assets/coco.py) go beside the file when its folder is
# writable, else here: one fresh folder per test session, never the user's ~/.cache.
os.environ.setdefault("VISGYM_CACHE_DIR", tempfile.mkdtemp(prefix="visgym-test-cache-"))


def pytest_report_header(config):
    """Say where the parity recordings were looked for and whether missing ones fail."""
    from parity_data import parity_dir

    parity = parity_dir()
    families = sorted(p.stem for p in parity.glob("*.jsonl")) if parity.is_dir() else []
    found = f"{len(families)} families" if families else "NOT FOUND"
    mode = ("a missing recording fails (CI is set)" if os.environ.get("CI")
            else "a missing recording skips (set CI to make it fail)")
    return f"visgym parity recordings: {parity} ({found}); {mode}"
