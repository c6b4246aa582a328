"""Episode GIFs for evaluation runs (agent_loop.md section 8.3): each observation the model saw
is shown above a white caption band holding that step's lines (step number, parsed action,
feedback and an excerpt of the model's raw reply: ``episode_captions``), word-wrapped and drawn
with the package's glyph-atlas text, and the frames are written as one looping GIF with a long
hold on the first and last frame. GIFs are a debugging aid, so a failure to build one is logged
and never interrupts the evaluation.

Encoding: each captioned frame gets its own palette, exact when the frame has at most 256
colours (most 2-D puzzles with their caption) and Pillow's fast octree otherwise (3-D renders;
mean error about 1-2 levels of 255), instead of Pillow's default median cut, which was ~90 % of
the cost of a GIF (about 4x faster overall). The GIF's comment records where each frame's
observation ends and its caption band begins, so ``read_gif_frames`` (the HTML report) can give
back the observations without their captions.
"""
from __future__ import annotations

import json
import logging
import os

import numpy as np

from .files import atomic_file

__all__ = ["caption_frames", "episode_captions", "read_gif_frames", "reply_excerpt",
           "write_episode_gif", "truncate_text", "wrap_text"]

logger = logging.getLogger(__name__)

MIN_WIDTH_PX = 336  # small renders are upscaled so that 14 px text fits a useful line length
MAX_WIDTH_PX = 1024  # the reference downscales only beyond --gif-max-width 1024
FONT_SIZE = 14
PAD_PX = 12  # caption padding left, right, above and below
LINE_GAP_PX = 8
MAX_TEXT_CHARS = 400
MIN_FRAME_MS = 20  # browsers treat shorter GIF delays as "default speed" (about 100 ms)
# The raw reply in a caption: at most this many characters, and at most this many wrapped lines
# (a reasoning model's reply runs to thousands of characters; the HTML report has all of it).
REPLY_EXCERPT_CHARS = 240
REPLY_MAX_LINES = 4
GIF_COMMENT_PREFIX = b"visgym-gif "

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


def _clean(line, limit: int = MAX_TEXT_CHARS) -> str:
    text = str(line).translate(_ASCII_LOOKALIKES)
    # Newlines and tabs would be drawn as '?': a caption line is one paragraph.
    return truncate_text(" ".join(text.split()), limit)


def _cap_lines(lines: list[str], max_lines: int, max_width_px: int, atlas) -> list[str]:
    """At most ``max_lines`` wrapped lines; when some are dropped, the last kept line ends in
    "..." (shortened, at a word boundary where one is near, until it fits the width)."""
    from ..render.text import text_size

    if len(lines) <= max_lines:
        return lines
    kept = lines[:max_lines]
    last = kept[-1]
    while last and text_size(last + "...", atlas)[0] > max_width_px:
        space = last.rfind(" ")
        last = last[:space] if space >= 0.8 * len(last) else last[:-1]
    kept[-1] = last.rstrip() + "..."
    return kept


def reply_excerpt(reply, flag=None) -> str:
    """The caption line for a raw model reply: ``reply: <text>`` (``reply (<flag>): ...`` for
    an empty, refused, over-long or error-placeholder reply), flattened to one paragraph and cut
    to ``REPLY_EXCERPT_CHARS`` characters with "..."; ``caption_frames`` also caps it at
    ``REPLY_MAX_LINES`` wrapped lines when it is given as ``(line, REPLY_MAX_LINES)``."""
    head = f"reply ({flag})" if flag else "reply"
    text = "" if reply is None else str(reply)
    if not text.strip():
        return f"{head}: (empty)"
    return f"{head}: " + _clean(text, REPLY_EXCERPT_CHARS)


def episode_captions(record: dict) -> list[list]:
    """The caption lines of an evaluation episode's GIF, from its episodes.jsonl record: for
    step k (the frame the model saw before acting) ``step k``, the parsed action, the feedback
    and the reply excerpt (at most ``REPLY_MAX_LINES`` lines); then one caption for the final
    state (steps taken, reward, why the episode ended)."""
    captions: list[list] = []
    for entry in record.get("steps_log") or []:
        action = entry.get("action")
        captions.append([
            f"step {entry.get('step')}",
            f"action: {action if action not in (None, '') else '(none parsed)'}",
            f"feedback: {entry.get('feedback')}",
            (reply_excerpt(entry.get("reply"), entry.get("reply_flag")), REPLY_MAX_LINES),
        ])
    reward = record.get("reward")
    reward_text = f"{reward:.3f}" if isinstance(reward, (int, float)) else str(reward)
    end = f" ({record['end_reason']})" if record.get("end_reason") else ""
    captions.append([f"final state after {record.get('steps', len(captions))} steps",
                     f"reward={reward_text}{end}"])
    return captions


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
    from ..render import resample

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
        resample.bilinear(src, dst)
    else:
        resample.area(src, dst)  # area averaging avoids aliasing when shrinking
    return dst[0]


def caption_frames(frames: list[np.ndarray], captions: list[list[str]],
                   width_px: int | None = None) -> list[np.ndarray]:
    """Each frame scaled to a common width with its caption band below it, all padded with
    white to the tallest frame's height (a GIF has a single canvas size).

    ``width_px`` defaults to the widest frame, but at least 336 and at most 1024 px. Every
    caption line is flattened to one paragraph, cut to 400 characters and word-wrapped to the
    width minus 2 x 12 px; a line given as ``(text, max_lines)`` keeps at most ``max_lines``
    wrapped lines, the last ending in "...". Lines are black 14 px text 8 px apart with 12 px
    above and below. Raises ValueError for frames that are not uint8 RGB images or a caption
    list of another length.
    """
    return _caption_frames(frames, captions, width_px)[0]


def _caption_frames(frames, captions, width_px=None) -> tuple[list[np.ndarray], list[int]]:
    """caption_frames plus each frame's observation height (where its caption band begins)."""
    from ..render import text

    frames = list(frames)
    captions = list(captions)
    if len(frames) != len(captions):
        raise ValueError(f"need one caption list per frame, got {len(frames)} frames and "
                         f"{len(captions)} captions")
    if not frames:
        return [], []
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
            max_lines = None
            if isinstance(line, tuple):
                line, max_lines = line
            pieces = wrap_text(_clean(line), width_px - 2 * PAD_PX, atlas)
            if max_lines is not None:
                pieces = _cap_lines(pieces, max(1, int(max_lines)), width_px - 2 * PAD_PX, atlas)
            out.extend(pieces)
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
    return list(canvas), [int(im.shape[0]) for im in images]


def _durations(count: int, ms_per_frame: int, start_hold_ms: int, end_hold_ms: int) -> list[int]:
    durations = [int(ms_per_frame)] * count
    if count:
        durations[-1] = int(end_hold_ms)
        durations[0] = int(start_hold_ms)  # a single frame is a first frame: hold it at start
    return [max(MIN_FRAME_MS, d) for d in durations]


def _to_palette(frame: np.ndarray):
    """One captioned frame as a palette image: exact when it has at most 256 colours, else
    Pillow's fast octree without dithering (far cheaper than the median cut Pillow applies to
    RGB frames by default, at a mean error of 1-2 levels)."""
    from PIL import Image

    im = Image.fromarray(frame)
    colours = im.getcolors(256)
    if colours is None:
        return im.quantize(colors=256, method=Image.Quantize.FASTOCTREE,
                           dither=Image.Dither.NONE)
    # Pillow's own mapping onto a given palette goes through a reduced-precision cache, so the
    # exact lookup is done here: colours packed into 24-bit keys, each pixel's key looked up.
    rgb = np.array([c[:3] for _, c in colours], np.uint32)
    keys = np.sort((rgb[:, 0] << 16) | (rgb[:, 1] << 8) | rgb[:, 2])
    pixels = ((frame[..., 0].astype(np.uint32) << 16) | (frame[..., 1].astype(np.uint32) << 8)
              | frame[..., 2])
    out = Image.fromarray(np.searchsorted(keys, pixels).astype(np.uint8), "P")
    palette = np.stack([keys >> 16, (keys >> 8) & 255, keys & 255], axis=1).astype(np.uint8)
    out.putpalette(palette.tobytes())
    return out


def write_episode_gif(path, frames: list[np.ndarray], captions: list[list[str]],
                      ms_per_frame: int = 800, start_hold_ms: int = 2500,
                      end_hold_ms: int = 2000) -> None:
    """Write the captioned episode to ``path`` as an infinitely looping GIF (first frame held
    ``start_hold_ms``, last ``end_hold_ms``, the rest ``ms_per_frame``; at least 20 ms each),
    atomically through a temp file (mode 0644 minus the umask). Never raises: any failure is
    logged as a warning, because a missing GIF must not cost the episode it illustrates. Pillow
    merges consecutive frames that are pixel-identical into one (summing their durations);
    captions carry the step number, so in practice every step keeps its own frame. The GIF
    comment holds ``visgym-gif {"image_heights": [...]}``, each frame's observation height."""
    try:
        path = os.fspath(path)
        captioned, heights = _caption_frames(frames, captions)
        if not captioned:
            logger.warning("GIF %s not written: the episode has no frames", path)
            return
        durations = _durations(len(captioned), ms_per_frame, start_hold_ms, end_hold_ms)
        images = [_to_palette(f) for f in captioned]
        comment = GIF_COMMENT_PREFIX + json.dumps({"image_heights": heights},
                                                  separators=(",", ":")).encode("ascii")
        with atomic_file(path) as fh:
            images[0].save(fh, format="GIF", save_all=True, append_images=images[1:],
                           duration=durations, loop=0, disposal=2, optimize=True,
                           comment=comment)
    except Exception as exc:  # noqa: BLE001 - documented: GIF failures are logged, not raised
        logger.warning("could not write episode GIF %s: %s: %s", path, type(exc).__name__, exc)


def read_gif_frames(path, crop_captions: bool = True) -> list[np.ndarray]:
    """The frames of a GIF as RGB uint8 arrays, in order. For a GIF written by
    ``write_episode_gif`` (its comment records the observation heights) and ``crop_captions``,
    each frame is cut to its observation, without the caption band; any other GIF's frames are
    returned whole. Raises OSError/ValueError for a file that is not a readable GIF."""
    from PIL import Image

    with Image.open(os.fspath(path)) as im:
        heights = None
        comment = im.info.get("comment")
        if crop_captions and isinstance(comment, bytes) and comment.startswith(GIF_COMMENT_PREFIX):
            try:
                meta = json.loads(comment[len(GIF_COMMENT_PREFIX):].decode("ascii"))
                heights = [int(h) for h in meta["image_heights"]]
            except (ValueError, KeyError, TypeError):
                heights = None
        frames = []
        for k in range(getattr(im, "n_frames", 1)):
            im.seek(k)
            frame = np.asarray(im.convert("RGB"))
            if heights is not None and k < len(heights) and 0 < heights[k] <= frame.shape[0]:
                frame = frame[: heights[k]]
            frames.append(frame)
    return frames
