"""Lanczos downscaling with Pillow's exact output, redone only where a frame changed.

``LanczosResizer(in_shape, out_size)`` returns, for every frame, the pixels
``Image.fromarray(frame).resize(out_size, Image.Resampling.LANCZOS)`` returns, but keeps the
previous frame, Pillow's intermediate image and the output: a step that changed one region of
the frame is resized again only in the output rectangle whose filter windows reach that region
(render/_resize.pyx). The coefficients are built here the way Pillow builds them (double
precision, normalised, then 22-bit fixed point). Pillow runs the horizontal or the vertical
pass first depending on the sizes; which one is found once per size pair on a noise probe
compared with Pillow, and if neither reproduces Pillow the resizer warns and calls Pillow.
"""
from __future__ import annotations

import math
import warnings

import numpy as np
from PIL import Image

from ..core.cache import BoundedCache
from ..core.validate import integer
from . import _coeffs, _resize

__all__ = ["LanczosResizer", "fit_long_side", "pillow_resize"]

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
    """Pillow's Lanczos resize of an (H, W, 3) or (H, W) uint8 frame to size = (w, h)."""
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
    ``support0`` (render/compose.py's crop and box resampling use it with other intervals and
    filters): (bounds int32[out, 2] = (first, count), weights int32[out, ksize]). The Lanczos
    and bilinear filters run compiled (render/_coeffs.pyx, bit for bit this code's result)."""
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
_ORDERS = BoundedCache("Lanczos pass orders", max_items=1 << 16)


def _pass_order(in_shape: tuple, size: tuple) -> str | None:
    """Which pass Pillow runs first for this size pair ("h" or "v"), found on a noise probe
    (Pillow picks the order from the sizes; both orders give different pixels), or None when
    neither of ours reproduces Pillow. The probe has one channel whatever the frames have (a
    third of the work; render/compose.py probes the same way)."""
    key = (tuple(int(v) for v in in_shape[:2]), tuple(int(v) for v in size))

    def probe_order():
        probe = np.random.default_rng([*key[0], *key[1], 7]).integers(0, 256, key[0], np.uint8)
        expected = pillow_resize(probe, size)
        for order in ("h", "v"):
            resizer = LanczosResizer(key[0], size, _order=order)
            if np.array_equal(resizer.resize(probe), expected):
                return order
        return None

    return _ORDERS.get_or_build(key, probe_order)


class LanczosResizer:
    """Resizes a sequence of frames of one shape to ``size`` = (width, height)."""

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
