"""Batched image compositing for the photo puzzle families (jigsaw, zoom_in_puzzle,
patch_reassembly): rectangle blits from an image table, crop + resample with Pillow's exact
pixels, and slot labels.

* ``ImageTable(images)`` packs a list of (h, w, 3) uint8 images once into one atlas; image k sits
  at ``table.rects[k] = (ox, oy, w, h)``.
* ``blit_rects`` copies source rectangles of table images into frames (clipped to the frame); a
  step's redraw is the list of rectangles it changed. All range checks run in the compiled
  pre-pass (render/_compose.pyx): with any bad entry nothing is drawn and ValueError is raised.
* ``resample(image, box, size, filter, mode)`` gives Pillow's pixels for
  ``Image.crop(box).resize(size, filter)`` (mode "crop") or ``Image.resize(size, filter,
  box=box)`` (mode "box", whose filter windows read pixels outside the box), Lanczos or
  bilinear. The coefficients are Pillow's (``precompute_coeffs``, generalised here to a box and to
  the bilinear filter; for the whole image they equal render/resize.py's), and the two passes are
  render/_resize.pyx's. Pillow runs the horizontal or the vertical pass first depending on the
  sizes; the order is found once per (source size, box, size, filter) on a noise probe, as
  render/resize.py does, and if neither order reproduces Pillow, Pillow itself is called.
* ``resample_into`` draws a batch of resampled table regions into frames (all checked first).
* ``draw_labels`` draws slot labels: an optional opaque box around the text, then the text from
  render/text.py's glyph atlas, all labels of a batch in two calls.
"""
from __future__ import annotations

import functools

import numpy as np
from PIL import Image

from ..core.cache import BoundedCache
from . import _compose, _resize, raster, text
from .resize import _bilinear, _lanczos, interval_coefficients

__all__ = ["ImageTable", "blit_rects", "blit_images", "resample", "resample_into",
           "draw_labels", "coefficients"]

_INT64 = np.dtype(np.int64)
_INT32 = np.dtype(np.int32)

FILTERS = {
    "lanczos": (_lanczos, 3.0, Image.Resampling.LANCZOS),
    "bilinear": (_bilinear, 1.0, Image.Resampling.BILINEAR),
}
MODES = ("crop", "box")


# ---------------------------------------------------------------------------------------------
# argument checks

def _frames_arg(frames):
    if not (isinstance(frames, np.ndarray) and frames.dtype == np.uint8 and frames.ndim == 4
            and frames.shape[3] == 3 and frames.flags.c_contiguous and frames.flags.writeable):
        raise ValueError("frames: expected a writeable C-contiguous uint8 array of shape "
                         "(B, H, W, 3)")
    return frames


def _ints(values, name: str, n: int | None, dtype=_INT32) -> np.ndarray:
    """A 1-D C-contiguous integer array (one value broadcast to n); floats that are not whole
    numbers and values that do not fit the dtype are refused."""
    arr = np.asarray(values)
    if arr.dtype.kind == "b" or arr.dtype.kind not in "iuf":
        raise ValueError(f"{name}: expected integers, got dtype {arr.dtype}")
    if arr.ndim == 0 and n is not None:
        arr = np.full(n, arr)
    if arr.ndim != 1:
        raise ValueError(f"{name}: expected a 1-D array, got shape {arr.shape}")
    if n is not None and arr.shape[0] != n:
        raise ValueError(f"{name}: expected {n} entries (one per idx), got {arr.shape[0]}")
    if arr.size:
        info = np.iinfo(dtype)
        if arr.dtype.kind == "f" and not np.all(np.isfinite(arr) & (arr == np.round(arr))):
            raise ValueError(f"{name}: expected whole numbers")
        if arr.min() < info.min or arr.max() > info.max:
            raise ValueError(f"{name}: values must fit {np.dtype(dtype).name}")
    return np.ascontiguousarray(arr, dtype=dtype)


def _image_arg(image, name="image") -> np.ndarray:
    if not (isinstance(image, np.ndarray) and image.dtype == np.uint8 and image.ndim == 3
            and image.shape[2] == 3):
        raise ValueError(f"{name}: expected a uint8 array of shape (h, w, 3)")
    return np.ascontiguousarray(image)


# ---------------------------------------------------------------------------------------------
# image table + blits

class ImageTable:
    """Source images packed once into one atlas (stacked top to bottom, left-aligned)."""

    def __init__(self, images):
        images = [_image_arg(im, f"images[{k}]") for k, im in enumerate(images)]
        width = max((im.shape[1] for im in images), default=0)
        height = sum(im.shape[0] for im in images)
        self.atlas = np.zeros((max(height, 1), max(width, 1), 3), np.uint8)
        self.rects = np.zeros((len(images), 4), np.int32)
        y = 0
        for k, im in enumerate(images):
            h, w = im.shape[:2]
            self.atlas[y:y + h, :w] = im
            self.rects[k] = (0, y, w, h)
            y += h
        self.atlas.flags.writeable = False
        self.rects.flags.writeable = False

    def __len__(self) -> int:
        return self.rects.shape[0]

    def image(self, k: int) -> np.ndarray:
        """A read-only view of image k."""
        if not 0 <= int(k) < len(self):
            raise ValueError(f"image id {k} out of range [0, {len(self)})")
        ox, oy, w, h = (int(v) for v in self.rects[k])
        return self.atlas[oy:oy + h, ox:ox + w]

    def size(self, k: int) -> tuple[int, int]:
        """(width, height) of image k."""
        self.image(k)
        return int(self.rects[k, 2]), int(self.rects[k, 3])

    def __repr__(self) -> str:
        return f"ImageTable({len(self)} images, atlas {self.atlas.shape[1]}x{self.atlas.shape[0]})"


def _table_arg(table) -> ImageTable:
    if not isinstance(table, ImageTable):
        raise ValueError(f"table: expected an ImageTable, got {type(table).__name__}")
    return table


def blit_rects(frames, idx, table, image_ids, sx, sy, sw, sh, dx, dy) -> None:
    """Copy rectangle (sx[n], sy[n], sw[n], sh[n]) of table image image_ids[n] (coordinates
    within the image) with its top-left corner at (dx[n], dy[n]) of frame idx[n], clipped to the
    frame. A source rectangle must lie inside its image; with any bad entry (frame index, image
    id or source rectangle) nothing is drawn and ValueError says how many there were."""
    _frames_arg(frames)
    _table_arg(table)
    idx = _ints(idx, "idx", None, _INT64)
    n = idx.shape[0]
    args = [_ints(v, name, n) for v, name in ((image_ids, "image_ids"), (sx, "sx"), (sy, "sy"),
                                              (sw, "sw"), (sh, "sh"), (dx, "dx"), (dy, "dy"))]
    bad = _compose.blit_rects(frames, idx, table.atlas, table.rects, *args)
    if bad:
        raise ValueError(
            f"idx, image_ids, sx, sy, sw, sh: {bad} entries out of range (frame indices in "
            f"[0, {frames.shape[0]}), image ids in [0, {len(table)}), source rectangles inside "
            "their image, sizes >= 0); nothing was drawn")


def blit_images(frames, idx, table, image_ids, dx, dy) -> None:
    """Copy whole table images image_ids[n] to (dx[n], dy[n]) of frame idx[n], clipped."""
    _table_arg(table)
    idx = _ints(idx, "idx", None, _INT64)
    ids = _ints(image_ids, "image_ids", idx.shape[0])
    if ids.size and (ids.min() < 0 or ids.max() >= len(table)):
        raise ValueError(f"image_ids: must be in [0, {len(table)}); nothing was drawn")
    sizes = table.rects[ids]
    zeros = np.zeros(idx.shape[0], np.int32)
    blit_rects(frames, idx, table, ids, zeros, zeros, sizes[:, 2], sizes[:, 3], dx, dy)


# ---------------------------------------------------------------------------------------------
# crop + resample

def coefficients(in_size: int, in0: float, in1: float, out_size: int, filter: str = "lanczos"):
    """Pillow's precompute_coeffs + 8-bit normalisation for output samples covering the source
    interval [in0, in1) of in_size samples: (bounds int32[out, 2] = (first, count),
    weights int32[out, ksize])."""
    func, support0, _ = FILTERS[filter]
    # Pillow holds the box in C floats: the width is a float difference, widened to double.
    in0 = float(np.float32(in0))
    span = float(np.float32(in1) - np.float32(in0))
    return interval_coefficients(in_size, in0, span, out_size, func, support0)


def _pillow(image, box, size, filter, mode) -> np.ndarray:
    im = Image.fromarray(np.ascontiguousarray(image))
    resample = FILTERS[filter][2]
    if mode == "crop":
        return np.asarray(im.crop(tuple(box)).resize(size, resample))
    return np.asarray(im.resize(size, resample, box=tuple(box)))


@functools.lru_cache(maxsize=4096)
def _cached_coefficients(in_size, in0, in1, out_size, filter):
    """coefficients(), computed once per argument tuple (~50 us compiled); the arrays
    are shared and read-only."""
    bounds, weights = coefficients(in_size, in0, in1, out_size, filter)
    bounds.setflags(write=False)
    weights.setflags(write=False)
    return bounds, weights


def _run(src, box, size, filter, mode, order, out=None) -> np.ndarray:
    """Both passes in the given order over src (h, w, C) contiguous, into ``out`` (a new array
    when None)."""
    h, w, channels = src.shape
    x0, y0, x1, y1 = box
    out_w, out_h = size
    if mode == "crop":
        hb, hk = _cached_coefficients(x1 - x0, 0, x1 - x0, out_w, filter)
        vb, vk = _cached_coefficients(y1 - y0, 0, y1 - y0, out_h, filter)
        if x0:
            hb = hb.copy()
            hb[:, 0] += x0
        if y0:
            vb = vb.copy()
            vb[:, 0] += y0
    else:
        hb, hk = _cached_coefficients(w, x0, x1, out_w, filter)
        vb, vk = _cached_coefficients(h, y0, y1, out_h, filter)
    if out is None:
        out = np.zeros((out_h, out_w, channels), np.uint8)
    if order == "h":
        y_first = int(vb[0, 0])
        y_last = int(vb[-1, 0] + vb[-1, 1])
        vb = vb.copy()
        vb[:, 0] -= y_first
        tmp = np.zeros((max(y_last - y_first, 1), out_w, channels), np.uint8)
        _resize.horizontal(src, tmp, y_first, y_first, y_last, 0, out_w, hb, hk)
        _resize.vertical(tmp, out, 0, out_h, 0, out_w, vb, vk)
    else:
        c0 = int(hb[:, 0].min())
        c1 = int((hb[:, 0] + hb[:, 1]).max())
        tmp = np.zeros((out_h, w, channels), np.uint8)
        _resize.vertical(src, tmp, 0, out_h, c0, c1, vb, vk)
        _resize.horizontal(tmp, out, 0, 0, out_h, 0, out_w, hb, hk)
    return out


# Resampling key -> "h", "v" or None, probed once per key.
_ORDERS = BoundedCache("resampling pass orders", max_items=1 << 16)


def _order(shape, box, size, filter, mode):
    """The pass order that reproduces Pillow ("h", "v", or None for neither), found once on a
    noise probe. A crop's resize depends only on the crop's size, so crop mode is keyed (and
    probed) by that, not by the source and box: random crop boxes share one probe per size.
    Pillow picks the order from the sizes alone, so the probe has one channel (a third of the
    work; a one-channel and a three-channel probe agreed on 500 of 500 random size pairs)."""
    if mode == "crop":
        x0, y0, x1, y1 = box
        shape, box = (y1 - y0, x1 - x0), (0, 0, x1 - x0, y1 - y0)
    key = (tuple(shape[:2]), box, size, filter, mode)

    def probe_order():
        seed = [int(v) for v in (*shape[:2], *box, *size)] + [11]
        probe = np.random.default_rng(seed).integers(0, 256, shape[:2], np.uint8)
        expected = _pillow(probe, box, size, filter, mode)[:, :, None]
        for order in ("h", "v"):
            if np.array_equal(_run(probe[:, :, None], box, size, filter, mode, order), expected):
                return order
        return None

    return _ORDERS.get_or_build(key, probe_order)


def _resample_args(shape, box, size, filter, mode):
    if filter not in FILTERS:
        raise ValueError(f"filter: expected one of {sorted(FILTERS)}, got {filter!r}")
    if mode not in MODES:
        raise ValueError(f"mode: expected one of {MODES}, got {mode!r}")
    try:
        box = tuple(int(v) for v in box)
        size = tuple(int(v) for v in size)
    except (TypeError, ValueError):
        raise ValueError("box, size: expected integer (x0, y0, x1, y1) and (width, height)") \
            from None
    if len(box) != 4:
        raise ValueError(f"box: expected (x0, y0, x1, y1), got {box}")
    if len(size) != 2 or size[0] < 1 or size[1] < 1:
        raise ValueError(f"size: expected positive (width, height), got {size}")
    h, w = shape[:2]
    x0, y0, x1, y1 = box
    if not (0 <= x0 < x1 <= w and 0 <= y0 < y1 <= h):
        raise ValueError(f"box: {box} must be a non-empty rectangle inside the {w}x{h} image")
    return box, size


def resample(image, box, size, filter: str = "lanczos", mode: str = "crop",
             out: np.ndarray | None = None) -> np.ndarray:
    """Region box = (x0, y0, x1, y1) (integers, inside the image) of an (h, w, 3) uint8 image
    resampled to size = (width, height) with Pillow's pixels (see the module docstring), into
    ``out`` (a writeable C-contiguous uint8 (height, width, 3) array) or a new array."""
    image = _image_arg(image)
    box, size = _resample_args(image.shape, box, size, filter, mode)
    if out is not None and not (isinstance(out, np.ndarray) and out.dtype == np.uint8
                                and out.shape == (size[1], size[0], 3)
                                and out.flags.c_contiguous and out.flags.writeable):
        raise ValueError(f"out: expected a writeable C-contiguous uint8 array of shape "
                         f"{(size[1], size[0], 3)}")
    order = _order(image.shape, box, size, filter, mode)
    if order is None:
        pixels = _pillow(image, box, size, filter, mode)
        if out is None:
            return pixels
        out[:] = pixels
        return out
    return _run(image, box, size, filter, mode, order, out)


def resample_into(frames, idx, table, image_ids, boxes, sizes, dx, dy, filter: str = "lanczos",
                  mode: str = "crop") -> None:
    """For each n, draw region boxes[n] of table image image_ids[n] resampled to sizes[n] at
    (dx[n], dy[n]) of frame idx[n], clipped to the frame. Every entry is checked before anything
    is drawn."""
    _frames_arg(frames)
    _table_arg(table)
    idx = _ints(idx, "idx", None, _INT64)
    n = idx.shape[0]
    ids = _ints(image_ids, "image_ids", n)
    dx = _ints(dx, "dx", n)
    dy = _ints(dy, "dy", n)
    boxes = np.asarray(boxes)
    sizes = np.asarray(sizes)
    if boxes.shape != (n, 4) or sizes.shape != (n, 2):
        raise ValueError(f"boxes, sizes: expected shapes ({n}, 4) and ({n}, 2), got "
                         f"{boxes.shape} and {sizes.shape}")
    if n and (idx.min() < 0 or idx.max() >= frames.shape[0]):
        raise ValueError(f"idx: frame indices must be in [0, {frames.shape[0]}); nothing drawn")
    if n and (ids.min() < 0 or ids.max() >= len(table)):
        raise ValueError(f"image_ids: must be in [0, {len(table)}); nothing was drawn")
    jobs = []
    for i in range(n):
        k = int(ids[i])
        try:
            box, size = _resample_args((int(table.rects[k, 3]), int(table.rects[k, 2])),
                                       boxes[i], sizes[i], filter, mode)
        except ValueError as exc:
            raise ValueError(f"entry {i}: {exc}; nothing was drawn") from None
        jobs.append((k, box, size))
    for i, (k, box, size) in enumerate(jobs):
        tile = resample(table.image(k), box, size, filter, mode)
        _compose.paste_clipped(frames, int(idx[i]), tile, int(dx[i]), int(dy[i]))


# ---------------------------------------------------------------------------------------------
# labels

def draw_labels(frames, idx, texts, x, y, colors, atlas, background=None, pad: int = 0):
    """Draw label texts[n] with its top-left corner at (x[n], y[n]) of frame idx[n] in
    colors[n]; with ``background`` (one colour or one per label) an opaque box reaching ``pad``
    pixels beyond the text's extent (render/text.py's ``text_size``) is filled first. All
    arguments are checked before anything is drawn. Returns frames."""
    _frames_arg(frames)
    if isinstance(texts, str):
        raise ValueError("texts: expected a list of strings, not a single str")
    texts = list(texts)
    if not all(isinstance(t, str) for t in texts):
        raise ValueError("texts: expected only str")
    if not isinstance(atlas, text.GlyphAtlas):
        raise ValueError(f"atlas: expected a GlyphAtlas, got {type(atlas).__name__}")
    if int(pad) != pad or pad < 0:
        raise ValueError(f"pad: expected a non-negative integer, got {pad!r}")
    idx = raster._idx(idx, frames.shape[0])
    n = idx.shape[0]
    if len(texts) != n:
        raise ValueError(f"texts: expected {n} strings to match idx, got {len(texts)}")
    x = _ints(x, "x", n)
    y = _ints(y, "y", n)
    colors = raster._colors(colors, n)
    if background is not None:
        background = raster._colors(background, n, "background")
        widths = np.array([text.text_size(t, atlas)[0] for t in texts], np.int64)
        x0 = x.astype(np.int64) - pad
        y0 = y.astype(np.int64) - pad
        raster.fill_rects(frames, idx, x0, y0, x + widths + pad,
                          y.astype(np.int64) + atlas.line_height + pad, background)
    return text.draw_text(frames, idx, texts, x, y, colors, atlas)
