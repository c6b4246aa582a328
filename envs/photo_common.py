"""What the photo families (jigsaw, colorization, mental_rotation_2d) do alike, written once.

- ``sample_dir_param``: the ``sample_dir`` Params field (the reference's keyword for the photo
  folder): None, or a non-empty path string without NUL (an ``os.PathLike`` is taken as its
  string; kept as a plain ``str``); anything else is a ValueError naming the field.
- ``open_image_source``: the family's image source (envs/assets/images.image_source, the folder,
  then ``$VIS_GYM_IMAGE_DIR``, the bundle, the built-ins), a missing or empty folder a ValueError
  naming ``sample_dir``.
- ``bounded``: an error's (or any) text on one line, cut to a length, for quoting inside another
  error message.
- ``random_chunks``: a positive whole amount split into at most N positive chunks at distinct
  random cut points, the reference solvers' way of spreading one correction over several
  actions (colorization's hue and saturation moves, mental_rotation_2d's turns).
"""
from __future__ import annotations

import os

import numpy as np

from ..core.validate import describe
from .assets.images import ImageSource, image_source

__all__ = ["bounded", "open_image_source", "path_param", "random_chunks", "sample_dir_param"]


def bounded(error, limit: int = 300) -> str:
    """``str(error)`` with its whitespace runs made single spaces, cut to ``limit`` characters
    (the last three then "...")."""
    text = " ".join(str(error).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def path_param(field: str, value, what: str = "path") -> str | None:
    """A path-valued Params field: None, or a non-empty path string without NUL (an
    ``os.PathLike`` is taken as its string; kept as a plain ``str``); anything else is a
    ValueError naming ``field``."""
    text = os.fspath(value) if isinstance(value, os.PathLike) else value
    if text is not None and (not isinstance(text, str) or not text or "\x00" in text):
        raise ValueError(f"{field}: expected a {what} (str) or None, got {describe(value)}")
    return None if text is None else str(text)


def sample_dir_param(value) -> str | None:
    """The ``sample_dir`` field of a photo family's Params, checked (see the module docstring)."""
    return path_param("sample_dir", value, "folder path")


def open_image_source(sample_dir: str | None, **options) -> ImageSource:
    """``image_source(sample_dir, **options)``; its ValueError (a named folder that is missing,
    unreadable or holds no photos) raised again naming ``sample_dir``."""
    try:
        return image_source(sample_dir, **options)
    except ValueError as error:
        raise ValueError(f"sample_dir: {bounded(error)}") from None


def random_chunks(total: int, parts: int, rng) -> list[int]:
    """``total`` split into at most ``parts`` (>= 1) positive chunks, in order, at
    ``min(parts - 1, total - 1)`` distinct cut points drawn by ``rng.choice`` from 1..total-1
    without replacement: [] for total <= 0, [1] for total 1 (no draw either way)."""
    if total <= 0:
        return []
    if total == 1:
        return [1]
    cuts = sorted(int(c) for c in rng.choice(np.arange(1, total), min(parts - 1, total - 1),
                                              replace=False))
    bounds = [0, *cuts, total]
    return [bounds[i + 1] - bounds[i] for i in range(len(bounds) - 1)]
