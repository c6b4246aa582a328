"""Glyph-atlas text for visgym frames: printable ASCII from Pillow's bundled scalable font
(``ImageFont.load_default(size=...)``, so no system font is needed) is rasterized once per size
into coverage masks, and a batch of strings is then drawn by laying out glyph positions with
NumPy and making a single ``blit_masks`` call, with no per-character drawing in Python. Layout is
left-to-right from each string's top-left corner using the font's integer (hinted) advances;
characters outside ASCII 32..126 (newlines included) are drawn as '?'.
"""
from __future__ import annotations

import functools

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from . import raster

__all__ = ["GlyphAtlas", "glyph_atlas", "draw_text", "text_size"]

FIRST_CHAR = 32
LAST_CHAR = 126
N_GLYPHS = LAST_CHAR - FIRST_CHAR + 1
_REPLACEMENT = ord("?") - FIRST_CHAR


class GlyphAtlas:
    """Coverage masks and metrics of printable ASCII at one pixel size.

    Attributes: ``masks`` uint8[95, cell_height, cell_width] (glyph ``ord(c) - 32``, drawn with
    its ascender line at the cell's top row and its pen origin at column ``x_offset``),
    ``advances`` int64[95], ``line_height`` (ascent + descent), ``ascent``, ``descent``.
    """

    def __init__(self, size: int):
        if int(size) != size or size < 1:
            raise ValueError(f"size must be a positive integer pixel size, got {size!r}")
        size = int(size)
        font = ImageFont.load_default(size=size)
        if not isinstance(font, ImageFont.FreeTypeFont):
            raise RuntimeError(
                "visgym text needs Pillow >= 10.1 built with FreeType, so that "
                "ImageFont.load_default(size=...) returns the scalable bundled font; "
                f"this Pillow returned {type(font).__name__}"
            )
        chars = [chr(c) for c in range(FIRST_CHAR, LAST_CHAR + 1)]
        ascent, descent = font.getmetrics()
        # Bounding boxes are relative to the pen origin with the ascender at y = 0 (anchor "la").
        # A few glyphs start left of the origin (negative bearing) or reach below the descender,
        # so the cell is padded to hold every glyph's full ink rather than clipping it.
        boxes = [font.getbbox(c, anchor="la") for c in chars]
        x_offset = max(0, -min(b[0] for b in boxes))
        top_pad = max(0, -min(b[1] for b in boxes))
        cell_w = x_offset + max(1, max(b[2] for b in boxes))
        cell_h = top_pad + max(ascent + descent, max(b[3] for b in boxes))
        masks = np.zeros((N_GLYPHS, cell_h, cell_w), dtype=np.uint8)
        canvas = Image.new("L", (cell_w, cell_h), 0)
        draw = ImageDraw.Draw(canvas)
        for i, c in enumerate(chars):
            draw.rectangle((0, 0, cell_w, cell_h), fill=0)
            draw.text((x_offset, top_pad), c, font=font, fill=255, anchor="la")
            masks[i] = np.asarray(canvas)
        self.size = size
        self.masks = masks
        self.advances = np.array([round(font.getlength(c)) for c in chars], dtype=np.int64)
        self.ascent = int(ascent)
        self.descent = int(descent)
        self.line_height = int(ascent + descent)
        self.cell_width = cell_w
        self.cell_height = cell_h
        self.x_offset = x_offset
        self.y_offset = top_pad
        # Glyphs with no ink (space) are skipped at draw time; they still advance the pen.
        self.has_ink = masks.reshape(N_GLYPHS, -1).max(axis=1) > 0

    def __repr__(self) -> str:
        return f"GlyphAtlas(size={self.size}, cell={self.cell_width}x{self.cell_height})"


@functools.lru_cache(maxsize=None)
def glyph_atlas(size: int) -> GlyphAtlas:
    """The shared atlas for one pixel size, built on first use."""
    return GlyphAtlas(size)


def _glyph_ids(text: str) -> np.ndarray:
    # 'replace' turns each non-ASCII code point into exactly one '?', keeping lengths aligned.
    codes = np.frombuffer(text.encode("ascii", "replace"), dtype=np.uint8).astype(np.int64)
    ids = codes - FIRST_CHAR
    ids[(ids < 0) | (ids >= N_GLYPHS)] = _REPLACEMENT
    return ids


def text_size(text: str, atlas: GlyphAtlas) -> tuple[int, int]:
    """(width, height) in pixels that ``draw_text`` gives one string: the sum of its advances
    and the atlas line height."""
    if not isinstance(text, str):
        raise ValueError(f"text must be a str, got {type(text).__name__}")
    return int(atlas.advances[_glyph_ids(text)].sum()), atlas.line_height


def draw_text(frames: np.ndarray, idx, texts, x, y, colors, atlas: GlyphAtlas) -> np.ndarray:
    """Draw texts[n] into frame idx[n] with its top-left corner at integer (x[n], y[n]) in
    colors[n] (or one colour for all). Returns frames."""
    if isinstance(texts, str):
        raise ValueError("texts must be a list of strings, not a single str")
    texts = list(texts)
    if not all(isinstance(t, str) for t in texts):
        raise ValueError("texts must contain only str")
    if not isinstance(atlas, GlyphAtlas):
        raise ValueError(f"atlas must be a GlyphAtlas, got {type(atlas).__name__}")
    frames = raster._frames(frames)
    idx = raster._idx(idx, frames.shape[0])
    n = idx.shape[0]
    if len(texts) != n:
        raise ValueError(f"texts must hold {n} strings to match idx, got {len(texts)}")
    x = raster._per_item(x, "x", n, "int")
    y = raster._per_item(y, "y", n, "int")
    colors = raster._colors(colors, n)
    lengths = np.fromiter((len(t) for t in texts), dtype=np.int64, count=n)
    if lengths.sum() == 0:
        return frames
    glyphs = _glyph_ids("".join(texts))
    owner = np.repeat(np.arange(n), lengths)
    # Pen position of each character = advances of the characters before it in its own string:
    # a global exclusive cumsum minus the value it had where that string began.
    adv = atlas.advances[glyphs]
    pen = np.cumsum(adv) - adv
    starts = np.cumsum(lengths) - lengths
    pen -= np.repeat(pen[np.minimum(starts, len(pen) - 1)], lengths)
    ink = atlas.has_ink[glyphs]
    owner = owner[ink]
    raster.blit_masks(
        frames,
        idx[owner],
        atlas.masks,
        glyphs[ink],
        x[owner] + pen[ink] - atlas.x_offset,
        y[owner] - atlas.y_offset,
        colors[owner],
    )
    return frames
