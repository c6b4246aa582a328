"""Batched 2-D drawing into caller-owned ``uint8[B, H, W, 3]`` frame buffers: the public face of
the compiled kernels in ``visgym.render._raster``. Every drawing call takes the frame buffer, an
``idx`` array naming the frame each of its N items goes into, and per-item arrays (length N, or a
scalar / a single colour applied to every item); items are drawn in order, later over earlier.
This layer only checks and converts arguments (dtype, shape, contiguity, index ranges), raising
``ValueError`` that names the offending argument, and then makes one kernel call, so the cost of
a call does not grow with Python work per item. Pixel (x, y) covers [x, x+1) x [y, y+1) with its
centre at (x+0.5, y+0.5), x is the column, and all shapes clip silently at the frame border:
any finite coordinate is safe (nothing is written outside the frames), and geometry stays
sub-pixel exact while coordinates are within about 1e9 of the frame, beyond which double precision
rather than the rasterizer limits where a shape crossing the frame lands.
"""
from __future__ import annotations

import numpy as np

from . import _raster

__all__ = [
    "fill",
    "fill_rects",
    "draw_lines",
    "draw_circles",
    "fill_polygons",
    "blit_rgba",
    "blit_masks",
]


# ---------------------------------------------------------------------------------------------
# argument checks

def _image_batch(arr, name: str, channels: int | None, writeable: bool) -> np.ndarray:
    """A uint8 C-contiguous batch of images. Never copied: buffers are written in place and
    tables (sprites, masks, sources) can be large, so a silent copy would either lose the
    caller's writes or hide a cost; the caller is told to fix the array instead."""
    if not isinstance(arr, np.ndarray):
        raise ValueError(f"{name} must be a numpy array, got {type(arr).__name__}")
    ndim = 3 if channels is None else 4
    if arr.dtype != np.uint8:
        raise ValueError(f"{name} must have dtype uint8, got {arr.dtype}")
    if arr.ndim != ndim or (channels is not None and arr.shape[3] != channels):
        want = "[S, h, w]" if channels is None else f"[B, H, W, {channels}]"
        raise ValueError(f"{name} must have shape {want}, got {arr.shape}")
    if not arr.flags.c_contiguous:
        raise ValueError(f"{name} must be C-contiguous (use np.ascontiguousarray)")
    if writeable and not arr.flags.writeable:
        raise ValueError(f"{name} must be writeable")
    return arr


def _frames(frames) -> np.ndarray:
    return _image_batch(frames, "frames", 3, writeable=True)


def _idx(idx, n_frames: int) -> np.ndarray:
    arr = np.asarray(idx)
    if arr.ndim != 1:
        raise ValueError(f"idx must be a 1-D array of frame indices, got shape {arr.shape}")
    if arr.size and arr.dtype.kind not in "iu":
        raise ValueError(f"idx must have an integer dtype, got {arr.dtype}")
    if arr.size and (arr.min() < 0 or arr.max() >= n_frames):
        raise ValueError(
            f"idx values must lie in [0, {n_frames}) for {n_frames} frames, "
            f"got range [{arr.min()}, {arr.max()}]"
        )
    return np.ascontiguousarray(arr, dtype=np.int64)


def _per_item(values, name: str, n: int, kind: str) -> np.ndarray:
    """Length-n int64 (kind 'int') or float64 (kind 'float') array; a scalar is broadcast.
    Small per-item arrays are converted rather than rejected, since copying N numbers is free
    next to drawing them; only a dtype that would change meaning (floats for integer pixel
    offsets, bools, objects) is refused."""
    arr = np.asarray(values)
    allowed = "iu" if kind == "int" else "iuf"
    if arr.dtype.kind not in allowed and not (arr.size == 0 and arr.dtype.kind == "f"):
        want = "an integer" if kind == "int" else "a real (integer or float)"
        raise ValueError(f"{name} must have {want} dtype, got {arr.dtype}")
    if arr.ndim == 0:
        arr = np.broadcast_to(arr, (n,))
    elif arr.shape != (n,):
        raise ValueError(f"{name} must have shape ({n},) to match idx, got {arr.shape}")
    dtype = np.int64 if kind == "int" else np.float64
    if kind == "int" and arr.dtype == np.uint64 and arr.size and arr.max() > np.iinfo(np.int64).max:
        raise ValueError(f"{name} has values beyond the int64 range")
    return np.ascontiguousarray(arr, dtype=dtype)


def _colors(colors, n: int, name: str = "colors") -> np.ndarray:
    arr = np.asarray(colors)
    if arr.dtype.kind not in "iu":
        raise ValueError(
            f"{name} must be integer RGB in 0..255 (uint8 preferred), got dtype {arr.dtype}"
        )
    if arr.shape == (3,):
        arr = np.broadcast_to(arr, (n, 3))
    elif arr.shape != (n, 3):
        raise ValueError(f"{name} must have shape (3,) or ({n}, 3), got {arr.shape}")
    if arr.dtype != np.uint8 and arr.size and (arr.min() < 0 or arr.max() > 255):
        raise ValueError(f"{name} values must lie in 0..255")
    return np.ascontiguousarray(arr, dtype=np.uint8)


def _table_ids(ids, name: str, n: int, n_table: int, table: str) -> np.ndarray:
    arr = _per_item(ids, name, n, "int")
    if arr.size and (arr.min() < 0 or arr.max() >= n_table):
        raise ValueError(
            f"{name} values must lie in [0, {n_table}) for {n_table} {table}, "
            f"got range [{arr.min()}, {arr.max()}]"
        )
    return arr


# ---------------------------------------------------------------------------------------------
# drawing

def fill(frames: np.ndarray, idx, colors) -> np.ndarray:
    """Set every pixel of frame idx[n] to colors[n]. Returns frames."""
    frames = _frames(frames)
    idx = _idx(idx, frames.shape[0])
    colors = _colors(colors, idx.shape[0])
    _raster.fill(frames, idx, colors)
    return frames


def fill_rects(frames: np.ndarray, idx, x0, y0, x1, y1, colors) -> np.ndarray:
    """Fill integer half-open rectangles [x0, x1) x [y0, y1), clipped. Returns frames."""
    frames = _frames(frames)
    idx = _idx(idx, frames.shape[0])
    n = idx.shape[0]
    args = [_per_item(v, name, n, "int") for v, name in ((x0, "x0"), (y0, "y0"), (x1, "x1"), (y1, "y1"))]
    colors = _colors(colors, n)
    _raster.fill_rects(frames, idx, *args, colors)
    return frames


def draw_lines(frames: np.ndarray, idx, x0, y0, x1, y1, width, colors) -> np.ndarray:
    """Anti-aliased segments from (x0, y0) to (x1, y1) of the given width with butt caps.
    Width below 1 draws a proportionally faint line; zero width or length draws nothing."""
    frames = _frames(frames)
    idx = _idx(idx, frames.shape[0])
    n = idx.shape[0]
    args = [
        _per_item(v, name, n, "float")
        for v, name in ((x0, "x0"), (y0, "y0"), (x1, "x1"), (y1, "y1"), (width, "width"))
    ]
    colors = _colors(colors, n)
    _raster.draw_lines(frames, idx, *args, colors)
    return frames


def draw_circles(frames: np.ndarray, idx, cx, cy, radius, colors, thickness=None) -> np.ndarray:
    """Anti-aliased circles centred at (cx, cy). thickness None or <= 0 fills the disc;
    otherwise a ring of that thickness lies inside the radius (outer edge at radius), as
    Pillow's ``ellipse(width=...)`` does."""
    frames = _frames(frames)
    idx = _idx(idx, frames.shape[0])
    n = idx.shape[0]
    cx = _per_item(cx, "cx", n, "float")
    cy = _per_item(cy, "cy", n, "float")
    radius = _per_item(radius, "radius", n, "float")
    thickness = _per_item(0.0 if thickness is None else thickness, "thickness", n, "float")
    colors = _colors(colors, n)
    _raster.draw_circles(frames, idx, cx, cy, radius, thickness, colors)
    return frames


def fill_polygons(frames: np.ndarray, idx, verts, nverts, colors) -> np.ndarray:
    """Fill polygons (even-odd rule, sampled at pixel centres, not anti-aliased).
    verts is float[N, Vmax, 2] of (x, y); polygon n uses its first nverts[n] vertices."""
    frames = _frames(frames)
    idx = _idx(idx, frames.shape[0])
    n = idx.shape[0]
    verts = np.asarray(verts)
    if verts.dtype.kind not in "iuf":
        raise ValueError(f"verts must have a real dtype, got {verts.dtype}")
    if verts.ndim != 3 or verts.shape[0] != n or verts.shape[2] != 2:
        raise ValueError(f"verts must have shape ({n}, Vmax, 2), got {verts.shape}")
    verts = np.ascontiguousarray(verts, dtype=np.float64)
    nverts = _per_item(nverts, "nverts", n, "int")
    if nverts.size and (nverts.min() < 0 or nverts.max() > verts.shape[1]):
        raise ValueError(f"nverts values must lie in [0, {verts.shape[1]}] (Vmax of verts)")
    colors = _colors(colors, n)
    _raster.fill_polygons(frames, idx, verts, nverts, colors)
    return frames


def blit_rgba(frames: np.ndarray, idx, sprites: np.ndarray, sprite_ids, x, y) -> np.ndarray:
    """Alpha-blend sprites[sprite_ids[n]] (uint8[S, h, w, 4], straight alpha) with its top-left
    pixel at integer (x[n], y[n]), clipped. Returns frames."""
    frames = _frames(frames)
    idx = _idx(idx, frames.shape[0])
    n = idx.shape[0]
    sprites = _image_batch(sprites, "sprites", 4, writeable=False)
    sprite_ids = _table_ids(sprite_ids, "sprite_ids", n, sprites.shape[0], "sprites")
    x = _per_item(x, "x", n, "int")
    y = _per_item(y, "y", n, "int")
    _raster.blit_rgba(frames, idx, sprites, sprite_ids, x, y)
    return frames


def blit_masks(frames: np.ndarray, idx, masks: np.ndarray, mask_ids, x, y, colors) -> np.ndarray:
    """Blend colors[n] through the coverage mask masks[mask_ids[n]] (uint8[S, h, w], 255 = fully
    covered) with its top-left pixel at integer (x[n], y[n]), clipped. Returns frames."""
    frames = _frames(frames)
    idx = _idx(idx, frames.shape[0])
    n = idx.shape[0]
    masks = _image_batch(masks, "masks", None, writeable=False)
    mask_ids = _table_ids(mask_ids, "mask_ids", n, masks.shape[0], "masks")
    x = _per_item(x, "x", n, "int")
    y = _per_item(y, "y", n, "int")
    colors = _colors(colors, n)
    _raster.blit_masks(frames, idx, masks, mask_ids, x, y, colors)
    return frames
