"""The one resampling face of visgym: every resize of pictures and frames goes through here.

Five faces over the compiled passes (render/_resize.pyx: Pillow's two separable fixed-point
passes; render/_raster.pyx: area and bilinear; render/_linear.py: OpenCV's linear, in Numba),
one import point:

* ``LanczosResizer(in_shape, size)``: whole-image Lanczos, incremental. ``resizer.resize(frame)``
  returns the pixels ``Image.fromarray(frame).resize(size, Image.Resampling.LANCZOS)`` returns,
  keeping the previous frame, Pillow's intermediate image and the output: a step that changed
  one region of the frame is resized again only in the output rectangle whose filter windows
  reach that region. ``size`` is (width, height). (bridges/imaging.py's frame encoder.)
* ``region(image, box, size, filter="lanczos", mode="crop", out=None)``: Pillow-exact resampling
  of a region box = (x0, y0, x1, y1) of one (h, w, 3) image: mode "crop" is
  ``Image.crop(box).resize(size, filter)``, mode "box" ``Image.resize(size, filter, box=box)``;
  filter "lanczos" or "bilinear". (zoom_in_puzzle's tiles.)
* ``area(src, dst)``: a batch uint8 (B, h, w, 3) into the preallocated (B, H, W, 3) by averaging
  each destination pixel's exact fractional source footprint (OpenCV INTER_AREA; Pillow BOX
  for integer factors). (matchstick_equation's frames, the report GIFs.)
* ``bilinear(src, dst)``: the same shapes, bilinear with half-pixel centres (Pillow BILINEAR when
  upsampling; point-sampled bilinear without anti-alias pre-filter when downsampling).
* ``linear(image, size, out=None)``: the OpenCV-linear face, ``cv2.resize(image, size,
  interpolation=INTER_LINEAR)`` for one uint8 (h, w, 3) picture pixel for pixel (OpenCV's 11-bit
  coefficients and its vectorised vertical pass, which ``bilinear``'s single rounding misses by
  one level on ~12% of the pixels); ``size`` is (width, height). (mental_rotation_2d's photos,
  every decoded frame of the clip source.)

And the pieces they stand on: ``pillow_resize(frame, size)`` (Pillow's own Lanczos: the
reference, and the fallback), ``fit_long_side(w, h, max_long_side)`` (the size after fitting
the long side), ``coefficients`` / ``interval_coefficients`` / ``python_interval_coefficients``
(Pillow's precompute_coeffs with its 22-bit normalisation, whole image / any interval, compiled
in render/_coeffs.pyx and stated in Python), ``region_coefficients`` (the same for a region,
with Pillow's C-float box arithmetic), ``FILTERS``.

Pass order: Pillow runs the horizontal or the vertical pass first depending on the sizes, and
the two orders give different pixels; which one is found once per size pair (per crop size for
``region``'s crop mode) on a noise probe compared with Pillow, kept in a bounded cache
(core/cache.py). If neither order reproduces Pillow, ``LanczosResizer`` warns and ``region``
silently calls Pillow itself. The probe has one channel (a third of the work; a one-channel and a
three-channel probe agreed on 500 of 500 random size pairs).
"""
from __future__ import annotations

import math
import warnings

import numpy as np
from PIL import Image

from ..core.cache import BoundedCache
from ..core.validate import integer
from . import _coeffs, _raster, _resize, raster

__all__ = ["LanczosResizer", "region", "area", "bilinear", "linear", "pillow_resize",
           "fit_long_side", "coefficients", "interval_coefficients", "region_coefficients",
           "FILTERS"]

_PRECISION_BITS = 22
_SUPPORT = 3.0


def fit_long_side(width: int, height: int, max_long_side: int | None) -> tuple[int, int]:
    """Size (w, h) after fitting the long side into ``max_long_side`` (None = keep the size).

    Scales both sides by L / max(w, h) and truncates; never upscales; each side stays >= 1 px
    (a 10000x1 strip would otherwise lose its short side).
    """
    width = integer("width", width, 1)
    height = integer("height", height, 1)
    if max_long_side is None:
        return width, height
    limit = integer("max_long_side", max_long_side, 1)
    long_side = max(width, height)
    if long_side <= limit:
        return width, height
    return max(1, width * limit // long_side), max(1, height * limit // long_side)


def pillow_resize(frame: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """Pillow's own Lanczos resize of an (H, W, 3) or (H, W) uint8 frame to size = (w, h) (the
    reference the compiled passes reproduce, and their fallback)."""
    image = Image.fromarray(np.ascontiguousarray(frame)).resize(size, Image.Resampling.LANCZOS)
    return np.asarray(image)


def _lanczos(x: float) -> float:
    if -3.0 <= x < 3.0:
        return _sinc(x) * _sinc(x / 3.0)
    return 0.0


def _sinc(x: float) -> float:
    if x == 0.0:
        return 1.0
    x *= math.pi
    return math.sin(x) / x


def coefficients(in_size: int, out_size: int):
    """Pillow's (bounds, fixed-point weights) for resampling in_size samples to out_size:
    bounds[i] = (first source sample, count), weights[i, :count]."""
    return interval_coefficients(in_size, 0.0, float(in_size), out_size)


def _bilinear(x: float) -> float:
    return 1.0 - abs(x) if -1.0 < x < 1.0 else 0.0


# Filters render/_coeffs.pyx computes (the same double arithmetic as below, compiled).
_COMPILED = {_lanczos: 0, _bilinear: 1}


def interval_coefficients(in_size: int, in0: float, span: float, out_size: int,
                          func=_lanczos, support0: float = _SUPPORT):
    """Pillow's precompute_coeffs with its fixed-point normalisation, for output samples covering
    the source interval [in0, in0 + span) of in_size samples and the filter ``func`` of support
    ``support0`` (``region`` uses it with other intervals and filters): (bounds int32[out, 2]
    = (first, count), weights int32[out, ksize]). The Lanczos and bilinear filters run
    compiled (render/_coeffs.pyx, bit for bit this code's result)."""
    kind = _COMPILED.get(func)
    if kind is not None:
        return _coeffs.interval_coefficients(int(in_size), float(in0), float(span),
                                             int(out_size), kind, float(support0))
    return python_interval_coefficients(in_size, in0, span, out_size, func, support0)


def python_interval_coefficients(in_size: int, in0: float, span: float, out_size: int,
                                 func=_lanczos, support0: float = _SUPPORT):
    """``interval_coefficients`` in Python: the statement of the arithmetic (Pillow's
    precompute_coeffs, in double precision) that render/_coeffs.pyx repeats."""
    scale = span / out_size
    filterscale = max(scale, 1.0)
    support = support0 * filterscale
    ksize = int(math.ceil(support)) * 2 + 1
    bounds = np.zeros((out_size, 2), np.int32)
    weights = np.zeros((out_size, ksize), np.int32)
    ss = 1.0 / filterscale
    one = 1 << _PRECISION_BITS
    for i in range(out_size):
        center = in0 + (i + 0.5) * scale
        lo = max(int(center - support + 0.5), 0)
        hi = min(int(center + support + 0.5), in_size)
        count = hi - lo
        k = [func((x + lo - center + 0.5) * ss) for x in range(count)]
        total = 0.0
        for w in k:
            total += w
        if total != 0.0:
            k = [w / total for w in k]
        for x, w in enumerate(k):
            weights[i, x] = int(-0.5 + w * one) if w < 0 else int(0.5 + w * one)
        bounds[i] = (lo, max(count, 0))
    return bounds, weights


# (input size, output size) -> "h", "v" or None, probed once per size pair.
_WHOLE_ORDERS = BoundedCache("Lanczos pass orders", max_items=1 << 16)


def _pass_order(in_shape: tuple, size: tuple) -> str | None:
    """Which pass Pillow runs first for this size pair ("h" or "v"), found on a noise probe
    (Pillow picks the order from the sizes; both orders give different pixels), or None when
    neither of ours reproduces Pillow. The probe has one channel whatever the frames have (a
    third of the work; ``region`` probes the same way)."""
    key = (tuple(int(v) for v in in_shape[:2]), tuple(int(v) for v in size))

    def probe_order():
        probe = np.random.default_rng([*key[0], *key[1], 7]).integers(0, 256, key[0], np.uint8)
        expected = pillow_resize(probe, size)
        for order in ("h", "v"):
            resizer = LanczosResizer(key[0], size, _order=order)
            if np.array_equal(resizer.resize(probe), expected):
                return order
        return None

    return _WHOLE_ORDERS.get_or_build(key, probe_order)


class LanczosResizer:
    """Resizes a sequence of frames of one shape to ``size`` = (width, height) with Pillow's
    Lanczos pixels, redoing only the output a frame's change reaches (see the module docstring)."""

    def __init__(self, in_shape: tuple, size: tuple[int, int], _order: str | None = None):
        height, width = in_shape[:2]
        self.channels = in_shape[2] if len(in_shape) == 3 else 1
        self.in_shape = tuple(in_shape)
        self.size = (int(size[0]), int(size[1]))
        out_w, out_h = self.size
        self._order = _order or _pass_order(self.in_shape, self.size)
        self._pillow = self._order is None
        if self._pillow:
            warnings.warn(f"visgym Lanczos resize disagrees with Pillow for {self.in_shape} -> "
                          f"{self.size}; using Pillow", RuntimeWarning, stacklevel=2)
            return
        self._hb, self._hk = coefficients(width, out_w)
        vb, self._vk = coefficients(height, out_h)
        # Output columns (rows) whose filter window starts / ends where.
        self._h_lo, self._h_hi = self._hb[:, 0], self._hb[:, 0] + self._hb[:, 1]
        self._v_lo, self._v_hi = vb[:, 0], vb[:, 0] + vb[:, 1]
        if self._order == "h":
            # Pillow runs the horizontal pass over the source rows the vertical pass reads.
            self._y_first = int(vb[0, 0])
            self._y_last = int(vb[-1, 0] + vb[-1, 1])
            vb = vb.copy()
            vb[:, 0] -= self._y_first
            self._tmp = np.zeros((self._y_last - self._y_first, out_w, self.channels), np.uint8)
        else:
            self._tmp = np.zeros((out_h, width, self.channels), np.uint8)
        self._vb = vb
        self._out = np.zeros((out_h, out_w, self.channels), np.uint8)
        self._prev = None

    def resize(self, frame: np.ndarray) -> np.ndarray:
        """The resized frame (a buffer the resizer reuses: copy it to keep it)."""
        if frame.shape != self.in_shape:
            raise ValueError(f"frame shape {frame.shape} does not match {self.in_shape}")
        if self._pillow:
            return pillow_resize(frame, self.size)
        src = np.ascontiguousarray(frame).reshape(frame.shape[0], frame.shape[1], self.channels)
        if self._prev is None:
            self._region(src, 0, src.shape[0], 0, src.shape[1])
            self._prev = src.copy()
        else:
            box = _resize.changed_box(src, self._prev)
            if box is not None:
                row0, row1, col0, col1 = box
                self._region(src, row0, row1, col0, col1)
                self._prev[row0:row1] = src[row0:row1]
        return self._out if self.channels == 3 else self._out[:, :, 0]

    def _region(self, src, row0: int, row1: int, col0: int, col1: int) -> None:
        """Redo the output affected by source rows [row0, row1) x columns [col0, col1)."""
        # Output columns / rows whose filter window meets the changed columns / rows.
        c0 = int(np.searchsorted(self._h_hi, col0, side="right"))
        c1 = int(np.searchsorted(self._h_lo, col1, side="left"))
        r0 = int(np.searchsorted(self._v_hi, row0, side="right"))
        r1 = int(np.searchsorted(self._v_lo, row1, side="left"))
        if self._order == "h":
            h0, h1 = max(row0, self._y_first), min(row1, self._y_last)
            if c0 < c1 and h0 < h1:
                _resize.horizontal(src, self._tmp, self._y_first, h0, h1, c0, c1, self._hb,
                                   self._hk)
            if c0 < c1 and r0 < r1:
                _resize.vertical(self._tmp, self._out, r0, r1, c0, c1, self._vb, self._vk)
        elif r0 < r1:
            _resize.vertical(src, self._tmp, r0, r1, col0, col1, self._vb, self._vk)
            if c0 < c1:
                _resize.horizontal(self._tmp, self._out, 0, r0, r1, c0, c1, self._hb, self._hk)


# --------------------------------------------------------------------------- regions (crop / box)
FILTERS = {
    "lanczos": (_lanczos, 3.0, Image.Resampling.LANCZOS),
    "bilinear": (_bilinear, 1.0, Image.Resampling.BILINEAR),
}
MODES = ("crop", "box")


def _image_arg(image, name="image") -> np.ndarray:
    if not (isinstance(image, np.ndarray) and image.dtype == np.uint8 and image.ndim == 3
            and image.shape[2] == 3):
        raise ValueError(f"{name}: expected a uint8 array of shape (h, w, 3)")
    return np.ascontiguousarray(image)


def region_coefficients(in_size: int, in0: float, in1: float, out_size: int,
                        filter: str = "lanczos"):
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


_REGION_COEFFS = BoundedCache("region resampling coefficients", max_items=4096)


def _cached_coefficients(in_size, in0, in1, out_size, filter):
    """region_coefficients(), computed once per argument tuple (~50 us compiled); the arrays
    are shared and read-only."""
    key = (in_size, in0, in1, out_size, filter)

    def build():
        bounds, weights = region_coefficients(in_size, in0, in1, out_size, filter)
        bounds.setflags(write=False)
        weights.setflags(write=False)
        return bounds, weights

    return _REGION_COEFFS.get_or_build(key, build)


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
_REGION_ORDERS = BoundedCache("resampling pass orders", max_items=1 << 16)


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

    return _REGION_ORDERS.get_or_build(key, probe_order)


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


def region(image, box, size, filter: str = "lanczos", mode: str = "crop",
           out: np.ndarray | None = None) -> np.ndarray:
    """Region box = (x0, y0, x1, y1) (integers, inside the image) of an (h, w, 3) uint8 image
    resampled to size = (width, height) with Pillow's pixels: mode "crop" is
    ``Image.crop(box).resize(size, filter)``, mode "box" ``Image.resize(size, filter, box=box)``
    (whose filter windows read pixels outside the box); filter "lanczos" or "bilinear". Into
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


# --------------------------------------------------------------------------- area and bilinear
def _batch_args(src, dst) -> tuple[np.ndarray, np.ndarray]:
    src = raster._image_batch(src, "src", 3, writeable=False)
    dst = raster._image_batch(dst, "dst", 3, writeable=True)
    if src.shape[0] != dst.shape[0]:
        raise ValueError(f"src and dst must hold the same number of frames, got {src.shape[0]} "
                         f"and {dst.shape[0]}")
    if dst.shape[1] and dst.shape[2] and (src.shape[1] == 0 or src.shape[2] == 0):
        raise ValueError(f"src must have non-empty frames to resample from, got {src.shape}")
    if np.shares_memory(src, dst):
        raise ValueError("src and dst must not overlap in memory")
    return src, dst


def bilinear(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Resample src uint8[B, h, w, 3] into the preallocated dst uint8[B, H, W, 3] bilinearly
    with half-pixel centres (Pillow BILINEAR when upsampling; plain point-sampled bilinear, with
    no anti-alias pre-filter, when downsampling). Returns dst."""
    src, dst = _batch_args(src, dst)
    _raster.resize_bilinear(src, dst)
    return dst


def area(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Resample src into dst by averaging each destination pixel's exact fractional source
    footprint (OpenCV INTER_AREA; Pillow BOX for integer factors). Returns dst."""
    src, dst = _batch_args(src, dst)
    _raster.resize_area(src, dst)
    return dst


# --------------------------------------------------------------------------- OpenCV linear
def linear(image: np.ndarray, size: tuple[int, int], out: np.ndarray | None = None) -> np.ndarray:
    """``cv2.resize(image, size, interpolation=cv2.INTER_LINEAR)`` for one uint8 (h, w, 3)
    picture, pixel for pixel; ``size`` is (width, height). Written into ``out`` (uint8[height,
    width, 3], not overlapping ``image``) or a new array; returns it. An unchanged size is a
    copy, as in OpenCV."""
    image = np.ascontiguousarray(image)
    if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3 or \
            image.shape[0] < 1 or image.shape[1] < 1:
        raise ValueError(f"image: expected uint8[h, w, 3], got {image.dtype}{list(image.shape)}")
    width, height = size
    if isinstance(width, bool) or isinstance(height, bool) or int(width) != width or \
            int(height) != height or width < 1 or height < 1:
        raise ValueError(f"size: expected a positive (width, height), got {size!r}")
    width, height = int(width), int(height)
    if out is None:
        out = np.empty((height, width, 3), np.uint8)
    elif out.dtype != np.uint8 or out.shape != (height, width, 3) or \
            not out.flags.writeable or np.shares_memory(image, out):
        raise ValueError(f"out: expected a writeable uint8[{height}, {width}, 3] apart from "
                         f"image, got {out.dtype}{list(out.shape)}")
    if image.shape[:2] == (height, width):
        out[...] = image
        return out
    from . import _linear  # Numba: loaded on first use, so the Pillow faces import without it

    _linear.resize(image, out)
    return out
