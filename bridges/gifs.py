"""Episode GIFs for evaluation runs (agent_loop.md section 8.3): each observation the model saw
is shown above a white caption band holding that step's lines (step number, action, feedback,
reply, ...), word-wrapped and drawn with the package's glyph-atlas text, and the frames are
written as one looping GIF with a long hold on the first and last frame. GIFs are a debugging
aid, so a failure to build one is logged and never interrupts the evaluation.
"""
from __future__ import annotations

import logging
import os

import numpy as np

from .files import atomic_file

__all__ = ["caption_frames", "write_episode_gif", "truncate_text", "wrap_text"]

logger = logging.getLogger(__name__)

MIN_WIDTH_PX = 336  # small renders are upscaled so that 14 px text fits a useful line length
MAX_WIDTH_PX = 1024  # the reference downscales only beyond --gif-max-width 1024
FONT_SIZE = 14
PAD_PX = 12  # caption padding left, right, above and below
LINE_GAP_PX = 8
MAX_TEXT_CHARS = 400
MIN_FRAME_MS = 20  # browsers treat shorter GIF delays as "default speed" (about 100 ms)

_WHITE = 255
_TEXT = (0, 0, 0)

# The glyph atlas covers printable ASCII only; map the punctuation models commonly emit to
# ASCII look-alikes instead of letting it turn into '?'.
_ASCII_LOOKALIKES = str.maketrans({
    "\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2013": "-", "\u2014": "-",
    "\u2026": "...", "\u2192": "->", "\u00a0": " ", "\u00d7": "x",
})


def truncate_text(text: str, limit: int = MAX_TEXT_CHARS) -> str:
    """``text`` cut to at most ``limit`` characters ending in "...", at a word boundary when one
    lies in the last 20 % of the kept part (as the reference's --gif-max-text-chars does)."""
    if len(text) <= limit:
        return text
    kept = text[: max(0, limit - 3)]
    space = kept.rfind(" ")
    if space >= 0.8 * len(kept):
        kept = kept[:space]
    return kept.rstrip() + "..."


def wrap_text(text: str, max_width_px: int, atlas) -> list[str]:
    """Greedy word wrap of one caption line into lines no wider than ``max_width_px`` when
    drawn with ``atlas``; a word wider than the whole line is broken between characters."""
    from ..render.text import text_size

    def width(s: str) -> int:
        return text_size(s, atlas)[0]

    words = text.split()
    if not words:
        return [""]
    lines: list[str] = []
    current = ""
    for word in words:
        candidate = f"{current} {word}" if current else word
        if width(candidate) <= max_width_px:
            current = candidate
            continue
        if current:
            lines.append(current)
            current = ""
        while width(word) > max_width_px:
            # Longest prefix that fits, at least one character so that wrapping always advances.
            cut = 1
            while cut < len(word) and width(word[: cut + 1]) <= max_width_px:
                cut += 1
            lines.append(word[:cut])
            word = word[cut:]
        current = word
    lines.append(current)
    return lines


def _clean(line) -> str:
    text = str(line).translate(_ASCII_LOOKALIKES)
    # Newlines and tabs would be drawn as '?': a caption line is one paragraph.
    return truncate_text(" ".join(text.split()))


def _as_rgb(frame, i: int) -> np.ndarray:
    if not isinstance(frame, np.ndarray):
        raise ValueError(f"frame {i} must be a numpy array, got {type(frame).__name__}")
    if frame.dtype != np.uint8:
        raise ValueError(f"frame {i} must have dtype uint8, got {frame.dtype}")
    if frame.ndim == 2:
        frame = np.repeat(frame[:, :, None], 3, axis=2)
    elif frame.ndim == 3 and frame.shape[2] == 4:
        frame = frame[:, :, :3]  # observations are opaque; alpha carries nothing to show
    if frame.ndim != 3 or frame.shape[2] != 3 or frame.shape[0] == 0 or frame.shape[1] == 0:
        raise ValueError(f"frame {i} must be a non-empty H x W x 3 RGB image, got shape {frame.shape}")
    return np.ascontiguousarray(frame)


def _scale_to_width(frame: np.ndarray, width: int) -> np.ndarray:
    from ..render import raster

    h, w = frame.shape[:2]
    if w == width:
        return frame
    if width > w and width % w == 0:
        # Integer upscale by pixel repetition keeps grid renders crisp (no blurred cell edges).
        k = width // w
        return np.repeat(np.repeat(frame, k, axis=0), k, axis=1)
    height = max(1, int(round(h * width / w)))
    dst = np.empty((1, height, width, 3), dtype=np.uint8)
    src = frame[None]
    if width > w:
        raster.resize_bilinear(src, dst)
    else:
        raster.resize_area(src, dst)  # area averaging avoids aliasing when shrinking
    return dst[0]


def caption_frames(frames: list[np.ndarray], captions: list[list[str]],
                   width_px: int | None = None) -> list[np.ndarray]:
    """Each frame scaled to a common width with its caption band below it, all padded with
    white to the tallest frame's height (a GIF has a single canvas size).

    ``width_px`` defaults to the widest frame, but at least 336 and at most 1024 px. Every
    caption line is flattened to one paragraph, cut to 400 characters and word-wrapped to the
    width minus 2 x 12 px; lines are black 14 px text 8 px apart with 12 px above and below.
    Raises ValueError for frames that are not uint8 RGB images or a caption list of another
    length.
    """
    from ..render import text

    frames = list(frames)
    captions = list(captions)
    if len(frames) != len(captions):
        raise ValueError(f"need one caption list per frame, got {len(frames)} frames and "
                         f"{len(captions)} captions")
    if not frames:
        return []
    images = [_as_rgb(f, i) for i, f in enumerate(frames)]
    if width_px is None:
        width_px = min(MAX_WIDTH_PX, max(MIN_WIDTH_PX, max(im.shape[1] for im in images)))
    width_px = int(width_px)
    if width_px < 2 * PAD_PX + 1:
        raise ValueError(f"width_px must exceed {2 * PAD_PX} (the caption padding), got {width_px}")

    atlas = text.glyph_atlas(FONT_SIZE)
    images = [_scale_to_width(im, width_px) for im in images]
    wrapped: list[list[str]] = []
    for cap in captions:
        lines = [cap] if isinstance(cap, str) else list(cap or [])
        out: list[str] = []
        for line in lines:
            out.extend(wrap_text(_clean(line), width_px - 2 * PAD_PX, atlas))
        wrapped.append(out)

    pitch = atlas.line_height + LINE_GAP_PX
    band_heights = [2 * PAD_PX + (len(w) * pitch - LINE_GAP_PX if w else 0) for w in wrapped]
    height = max(im.shape[0] + band for im, band in zip(images, band_heights))

    canvas = np.full((len(images), height, width_px, 3), _WHITE, dtype=np.uint8)
    idx, texts, ys = [], [], []
    for b, (im, lines) in enumerate(zip(images, wrapped)):
        canvas[b, : im.shape[0]] = im
        y0 = im.shape[0] + PAD_PX
        for j, line in enumerate(lines):
            if line:
                idx.append(b)
                texts.append(line)
                ys.append(y0 + j * pitch)
    if texts:
        # One draw call for every line of every frame.
        text.draw_text(canvas, np.array(idx, np.int64), texts, PAD_PX, np.array(ys, np.int64),
                       _TEXT, atlas)
    return list(canvas)


def _durations(count: int, ms_per_frame: int, start_hold_ms: int, end_hold_ms: int) -> list[int]:
    durations = [int(ms_per_frame)] * count
    if count:
        durations[-1] = int(end_hold_ms)
        durations[0] = int(start_hold_ms)  # a single frame is a first frame: hold it at start
    return [max(MIN_FRAME_MS, d) for d in durations]


def write_episode_gif(path, frames: list[np.ndarray], captions: list[list[str]],
                      ms_per_frame: int = 800, start_hold_ms: int = 2500,
                      end_hold_ms: int = 2000) -> None:
    """Write the captioned episode to ``path`` as an infinitely looping GIF (first frame held
    ``start_hold_ms``, last ``end_hold_ms``, the rest ``ms_per_frame``; at least 20 ms each),
    atomically through a temp file. Never raises: any failure is logged as a warning, because
    a missing GIF must not cost the episode it illustrates. Pillow merges consecutive frames
    that are pixel-identical into one (summing their durations); captions carry the step
    number, so in practice every step keeps its own frame."""
    try:
        from PIL import Image

        path = os.fspath(path)
        captioned = caption_frames(frames, captions)
        if not captioned:
            logger.warning("GIF %s not written: the episode has no frames", path)
            return
        durations = _durations(len(captioned), ms_per_frame, start_hold_ms, end_hold_ms)
        images = [Image.fromarray(f) for f in captioned]
        with atomic_file(path) as fh:
            images[0].save(fh, format="GIF", save_all=True, append_images=images[1:],
                           duration=durations, loop=0, disposal=2, optimize=True)
    except Exception as exc:  # noqa: BLE001 - documented: GIF failures are logged, not raised
        logger.warning("could not write episode GIF %s: %s: %s", path, type(exc).__name__, exc)
