"""The one label builder of the photo families: digit and text sprites rendered once with the
bundled font, cropped to their ink, placed relative to a reference point, optionally on a
background box (alpha-blended).

``label(text, size, bold=False, engine="atlas")`` returns a cached, immutable ``Label``:

* ``engine="atlas"`` (default): render/text.py's glyph atlas (Pillow's bundled scalable font,
  hinted integer advances), drawn by ``text.draw_text``; ``bold`` draws the glyphs four times at
  the offsets of a 2 x 2 square (one pixel bolder). ``engine="pillow"``: Pillow's own
  ``ImageDraw.text`` with the same bundled font, for labels whose pixels a reference drew with
  Pillow (Pillow's blend and hinting, not ours; no ``bold``).
* ``label.coverage`` uint8 (h, w), read-only: the label drawn white on black, cropped to the
  pixels it inks (what a compiled kernel blends with its own colour, or copies as a white-on-black
  patch). ``label.ink`` = (x0, y0, x1, y1): that crop relative to the pen, where the pen is the
  (x, y) text.draw_text / ImageDraw.text receive (x at the start of the first advance, y at the
  ascender line). ``label.layout`` = (x0, y0, x1, y1): the text's layout box relative to the pen
  (Pillow's ``textbbox`` for the pillow engine; for the atlas engine the advances and the line:
  (0, 0, sum of advances, line height)). ``label.width``/``label.height``: the ink size.
  ``label.ascent``: the font's ascent (pen y to baseline).

Placement: ``label.place(anchor, x, y)`` returns the top-left (left, top) of the ink box so that
the ink box's ``anchor`` point lands on (x, y). ``anchor`` is two letters, horizontal then
vertical (as Pillow's text anchors): horizontal ``l`` (ink left), ``m`` (ink middle: x - w // 2),
``r`` (ink right edge, exclusive: x - w), ``p`` (the pen x); vertical ``t`` (ink top), ``m`` (ink
middle: y - h // 2), ``b`` (ink bottom, exclusive), ``a`` (the pen y, the ascender line), ``s``
(the baseline: pen y + ascent). ``centred(lo, hi, size, round_up=False)`` is the start of a
span of ``size`` centred in [lo, hi) (families pinned by a reference's rounding choose it).

Drawing:

* ``label.draw(frames, idx, left, top, color, background=None, pad=0, alpha=1.0)`` draws into
  frames (B, H, W, 3) uint8, one frame index or a list, with the ink box's top-left at
  (left, top) (clipped to the frame): first, with ``background``, a box reaching ``pad`` pixels
  beyond the ink box filled with that colour (``alpha`` < 1 blends it: round(bg * alpha +
  pixel * (1 - alpha))), then the text exactly as ``text.draw_text`` (or Pillow) draws it there,
  so a label's pixels on any background equal a direct draw of its text.
* ``label.draw_at_pen(frames, idx, x, y, color)``: the same with the pen at (x, y).
* ``label.patch(color, background, pad=(0, 0, 0, 0))``: a new (h + top + bottom, w + left +
  right, 3) uint8 tile of the label on a filled box (pad = left, top, right, bottom).

Used by zoom_in_puzzle (slot numbers on black boxes), patch_reassembly (coverage masks blended by
its kernel), sliding_block (bold block ids and titles) and matchstick_equation (Pillow-drawn
index labels, engine "pillow").
"""
from __future__ import annotations

import numpy as np

from ..core.cache import BoundedCache
from . import raster, text

__all__ = ["Label", "label", "centred", "ANCHORS_X", "ANCHORS_Y"]

ANCHORS_X = "lmrp"
ANCHORS_Y = "tmbas"
ENGINES = ("atlas", "pillow")
_BOLD = ((0, 0), (1, 0), (0, 1), (1, 1))
_PAD = 8


def centred(lo: int, hi: int, size: int, round_up: bool = False) -> int:
    """The start of a span of ``size`` centred in [lo, hi): the odd pixel left over goes after
    it (``round_up`` False) or before it (True)."""
    return int(lo) + (int(hi) - int(lo) - int(size) + (1 if round_up else 0)) // 2


def _pillow_font(size: int):
    from PIL import ImageFont

    return ImageFont.load_default(size=size)


class Label:
    """One text rendered once (see the module docstring). Build with ``label(...)``."""

    def __init__(self, text_: str, size: int, bold: bool = False, engine: str = "atlas"):
        if not isinstance(text_, str) or not text_:
            raise ValueError(f"text: expected a non-empty str, got {text_!r}")
        if int(size) != size or size < 1:
            raise ValueError(f"size: expected a positive integer pixel size, got {size!r}")
        if engine not in ENGINES:
            raise ValueError(f"engine: expected one of {ENGINES}, got {engine!r}")
        if bold and engine != "atlas":
            raise ValueError("bold: only the atlas engine draws bold labels")
        self.text = text_
        self.size = int(size)
        self.bold = bool(bold)
        self.engine = engine
        if engine == "atlas":
            atlas = text.glyph_atlas(self.size)
            self.ascent = atlas.ascent
            width = int(atlas.advances[text._glyph_ids(text_)].sum())
            self.layout = (0, 0, width, atlas.line_height)
            canvas_h = atlas.cell_height + 2 * _PAD + 1
            canvas_w = width + atlas.cell_width + 2 * _PAD + 1
        else:
            from PIL import Image, ImageDraw

            font = _pillow_font(self.size)
            self.ascent = int(font.getmetrics()[0])
            self.layout = tuple(int(v) for v in ImageDraw.Draw(Image.new("L", (1, 1))).textbbox(
                (0, 0), text_, font=font))
            x0, y0, x1, y1 = self.layout
            canvas_h = max(y1, 0) - min(y0, 0) + 2 * _PAD + 1
            canvas_w = max(x1, 0) - min(x0, 0) + 2 * _PAD + 1
        scratch = np.zeros((1, canvas_h, canvas_w, 3), np.uint8)
        self.draw_at_pen(scratch, 0, _PAD, _PAD, (255, 255, 255))
        inked = scratch[0].max(axis=2) > 0
        if not inked.any():
            raise ValueError(f"text: {text_!r} inks no pixel")
        ys, xs = np.nonzero(inked)
        y0, y1, x0, x1 = int(ys.min()), int(ys.max()) + 1, int(xs.min()), int(xs.max()) + 1
        coverage = np.ascontiguousarray(scratch[0, y0:y1, x0:x1, 0])
        coverage.setflags(write=False)
        self.coverage = coverage
        self.ink = (x0 - _PAD, y0 - _PAD, x1 - _PAD, y1 - _PAD)
        self.width = x1 - x0
        self.height = y1 - y0

    # -- placement ------------------------------------------------------------------------
    def place(self, anchor: str, x: int, y: int) -> tuple[int, int]:
        """(left, top) of the ink box putting its ``anchor`` point at (x, y)."""
        if not (isinstance(anchor, str) and len(anchor) == 2 and anchor[0] in ANCHORS_X
                and anchor[1] in ANCHORS_Y):
            raise ValueError(f"anchor: expected one of {ANCHORS_X!r} then one of "
                             f"{ANCHORS_Y!r}, got {anchor!r}")
        x, y = int(x), int(y)
        h_, v_ = anchor
        left = {"l": x, "m": x - self.width // 2, "r": x - self.width, "p": x + self.ink[0]}[h_]
        top = {"t": y, "m": y - self.height // 2, "b": y - self.height, "a": y + self.ink[1],
               "s": y - self.ascent + self.ink[1]}[v_]
        return left, top

    # -- drawing --------------------------------------------------------------------------
    def draw_at_pen(self, frames, idx, x: int, y: int, color) -> np.ndarray:
        """The text drawn with its pen at (x, y) into frames[idx] (clipped). Returns frames."""
        idx = [int(idx)] if np.ndim(idx) == 0 else [int(i) for i in idx]
        if self.engine == "atlas":
            atlas = text.glyph_atlas(self.size)
            for dx, dy in (_BOLD if self.bold else _BOLD[:1]):
                text.draw_text(frames, idx, [self.text] * len(idx), int(x) + dx, int(y) + dy,
                               color, atlas)
            return frames
        from PIL import Image, ImageDraw

        frames = raster._frames(frames)
        font = _pillow_font(self.size)
        fill = tuple(int(v) for v in np.broadcast_to(np.asarray(color), (3,)))
        for i in idx:
            image = Image.fromarray(frames[i])
            ImageDraw.Draw(image).text((int(x), int(y)), self.text, fill=fill, font=font)
            frames[i] = np.asarray(image)
        return frames

    def draw(self, frames, idx, left: int, top: int, color, background=None, pad: int = 0,
             alpha: float = 1.0) -> np.ndarray:
        """The label with its ink box's top-left at (left, top), on an optional background box
        (see the module docstring). Returns frames."""
        frames = raster._frames(frames)
        if int(pad) != pad or pad < 0:
            raise ValueError(f"pad: expected a non-negative integer, got {pad!r}")
        if not 0.0 <= float(alpha) <= 1.0:
            raise ValueError(f"alpha: expected a number in [0, 1], got {alpha!r}")
        idx_list = [int(idx)] if np.ndim(idx) == 0 else [int(i) for i in idx]
        if background is not None:
            x0, y0 = int(left) - pad, int(top) - pad
            x1, y1 = int(left) + self.width + pad, int(top) + self.height + pad
            if float(alpha) == 1.0:
                n = len(idx_list)
                raster.fill_rects(frames, idx_list, [x0] * n, [y0] * n, [x1] * n, [y1] * n,
                                  background)
            else:
                H, W = frames.shape[1:3]
                cx0, cy0, cx1, cy1 = max(x0, 0), max(y0, 0), min(x1, W), min(y1, H)
                if cx1 > cx0 and cy1 > cy0:
                    bg = np.asarray(background, np.float64).reshape(-1)[:3]
                    for i in idx_list:
                        region = frames[i, cy0:cy1, cx0:cx1].astype(np.float64)
                        frames[i, cy0:cy1, cx0:cx1] = np.clip(
                            np.rint(bg * alpha + region * (1.0 - alpha)), 0, 255)
        return self.draw_at_pen(frames, idx_list, int(left) - self.ink[0],
                                int(top) - self.ink[1], color)

    def patch(self, color, background, pad=(0, 0, 0, 0)) -> np.ndarray:
        """A new uint8 tile: the label on a ``background`` box, ``pad`` = (left, top, right,
        bottom) pixels around the ink."""
        pl, pt, pr, pb = (int(v) for v in pad)
        tile = np.empty((1, self.height + pt + pb, self.width + pl + pr, 3), np.uint8)
        tile[:] = np.asarray(background, np.uint8)
        self.draw(tile, 0, pl, pt, color)
        return tile[0]

    def __repr__(self) -> str:
        return (f"Label({self.text!r}, size={self.size}, bold={self.bold}, "
                f"engine={self.engine!r}, ink {self.width}x{self.height})")


_LABELS = BoundedCache("rendered labels", max_items=4096)


def label(text_: str, size: int, bold: bool = False, engine: str = "atlas") -> Label:
    """The shared, immutable ``Label`` of these arguments (rendered on first use, kept in a
    bounded, locked cache)."""
    key = (text_, int(size), bool(bold), engine) if isinstance(text_, str) else None
    if key is None:
        return Label(text_, size, bold, engine)   # raises, naming the field
    return _LABELS.get_or_build(key, lambda: Label(text_, size, bold, engine))
