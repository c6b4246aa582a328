"""Observation encoding for the agent loop (agent_loop.md section 3): an env frame (RGB or gray
uint8 array) is downscaled so its long side is at most L (default 336; never upscaled), encoded
as a JPEG at Pillow's default quality 75 and written as standard base64 without line breaks or
data-URL header, which is the string the model message embeds (behind ``data_url``) and the step
records store. ``decode_b64_image`` is the inverse, for tests and GIF assembly.

Size rule: both sides are scaled by L / max(w, h) and truncated. The truncation is done in exact
integer arithmetic (``w * L // max(w, h)``), so the long side is always exactly L; computing
``int(w * (L / max(w, h)))`` in floats instead lands one pixel short for some sizes (570 -> 335).

Cost: this runs once per step of the evaluation loop. Measured with Pillow 13.0 on one core of
the dev machine (AMD EPYC; median of 1000 calls; smooth gradient / uniform noise content): a
225x225 frame encodes in 0.15 / 0.27 ms and a 336x336 frame in 0.28 / 0.61 ms (neither needs a
resize at L = 336). A 1024x576 frame (maze_3d) takes about 7 ms, almost all of it the Lanczos
downscale to 336x189, which is kept for fidelity to the reference. ``python -m
visgym.bridges.imaging`` prints the figures for the current machine; the tests do not time.

``frame_encoder`` returns the same bytes for a sequence of frames through an incremental encoder
(``render.jpeg.JpegStream``: only the 16x16 blocks that changed since the previous frame are
transformed again, ~20 us instead of ~170 us for a maze step) and, for frames over the size
limit, ``render.resample.LanczosResizer`` (Pillow's Lanczos pixels, redone only where a frame
changed). The evaluation loop and the demonstration synthesizer keep one per batch slot.
"""
from __future__ import annotations

import base64
import binascii
import io

import numpy as np
from PIL import Image

from ..render.jpeg import JpegStream, pillow_jpeg
from ..render.resample import LanczosResizer, fit_long_side, pillow_resize

__all__ = ["DEFAULT_MAX_LONG_SIDE", "fit_long_side", "encode_jpeg_b64", "frame_encoder",
           "data_url",
           "decode_b64_image"]

DEFAULT_MAX_LONG_SIDE = 336
_DATA_URL_PREFIX = "data:image/jpeg;base64,"
_PIL_DEFAULT_QUALITY = 75


def _check_frame(frame) -> None:
    if not isinstance(frame, np.ndarray):
        raise ValueError(f"frame must be a numpy array, got {type(frame).__name__}")
    if frame.dtype != np.uint8:
        raise ValueError(f"frame must have dtype uint8, got {frame.dtype}")
    if frame.ndim == 3:
        if frame.shape[2] != 3:
            raise ValueError(
                f"frame must be HxWx3 (RGB) or HxW (gray); got shape {frame.shape} "
                f"with {frame.shape[2]} channels")
    elif frame.ndim != 2:
        raise ValueError(f"frame must be HxWx3 (RGB) or HxW (gray); got shape {frame.shape}")
    if frame.shape[0] == 0 or frame.shape[1] == 0:
        raise ValueError(f"frame must not be empty; got shape {frame.shape}")


def encode_jpeg_b64(frame: np.ndarray, max_long_side: int | None = DEFAULT_MAX_LONG_SIDE,
                    quality: int = _PIL_DEFAULT_QUALITY) -> str:
    """Header-less base64 of ``encode_jpeg(frame, max_long_side, quality)``."""
    return base64.b64encode(encode_jpeg(frame, max_long_side, quality)).decode("ascii")


def encode_jpeg(frame: np.ndarray, max_long_side: int | None = DEFAULT_MAX_LONG_SIDE,
                quality: int = _PIL_DEFAULT_QUALITY) -> bytes:
    """JPEG bytes of an RGB (HxWx3) or gray (HxW) uint8 ``frame``.

    The long side is fitted into ``max_long_side`` with Lanczos (None = no resize). Gray stays
    a one-channel JPEG, as the reference keeps mode "L". For a sequence of frames (an episode),
    ``frame_encoder`` gives the same bytes faster.
    """
    _check_frame(frame)
    if isinstance(quality, bool) or not isinstance(quality, (int, np.integer)) \
            or not 1 <= quality <= 100:
        raise ValueError(f"quality must be an integer in 1..100, got {quality!r}")
    height, width = frame.shape[:2]
    size = fit_long_side(width, height, max_long_side)
    if size != (width, height):
        frame = pillow_resize(frame, size)
    return pillow_jpeg(frame, int(quality))


def frame_encoder(shape: tuple, max_long_side: int | None = DEFAULT_MAX_LONG_SIDE,
                  quality: int = _PIL_DEFAULT_QUALITY):
    """``encode(frame) -> bytes`` for one slot's sequence of frames: the same bytes as
    ``encode_jpeg(frame, max_long_side, quality)``, with the checks and the resize decision
    made once per frame size and an incremental encoder kept between calls (batch loops call it
    per frame). ``shape`` is the first size expected; a frame of another size (an episode of a
    variable-size family, DESIGN.md "Frames") starts a fresh encoder for that size. Views such
    as ``frames[i, :h, :w]`` are accepted (copied to contiguous memory when they are not)."""
    current = [tuple(shape), _sized_encoder(tuple(shape), max_long_side, quality)]

    def encode(frame: np.ndarray) -> bytes:
        if not isinstance(frame, np.ndarray):
            _check_frame(frame)
        if frame.shape != current[0]:
            current[1] = _sized_encoder(frame.shape, max_long_side, quality)
            current[0] = frame.shape
        if not frame.flags.c_contiguous:
            frame = np.ascontiguousarray(frame)
        return current[1](frame)

    return encode


def _sized_encoder(shape: tuple, max_long_side, quality):
    """The encoder of ``frame_encoder`` for frames of exactly ``shape``."""
    frame = np.zeros(shape, np.uint8)
    _check_frame(frame)
    stream = JpegStream(quality)
    height, width = shape[:2]
    size = fit_long_side(width, height, max_long_side)
    if size == (width, height):
        return stream.encode
    resizer = LanczosResizer(tuple(shape), size)   # Pillow's Lanczos, redone where frames change
    return lambda f: stream.encode(resizer.resize(f))


def data_url(b64: str) -> str:
    """The data URL the chat message carries for a header-less base64 JPEG."""
    if not isinstance(b64, str):
        raise ValueError(f"b64 must be a str, got {type(b64).__name__}")
    return _DATA_URL_PREFIX + b64


def decode_b64_image(b64_or_data_url: str) -> np.ndarray:
    """Pixels of a base64 image (with or without a ``data:...;base64,`` header).

    Returns HxWx3 uint8 RGB, or HxW for a gray image. Raises ValueError on anything that is not
    base64 of a readable image.
    """
    if not isinstance(b64_or_data_url, str):
        raise ValueError(
            f"expected a base64 string or data URL, got {type(b64_or_data_url).__name__}")
    text = b64_or_data_url.strip()
    if text.startswith("data:"):
        comma = text.find(",")
        if comma < 0 or not text[:comma].endswith(";base64"):
            raise ValueError("the data URL must look like 'data:<type>;base64,<data>'")
        text = text[comma + 1:]
    if not text:
        raise ValueError("the image string is empty")
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"the image string is not valid base64 ({exc})") from None
    try:
        with Image.open(io.BytesIO(raw)) as image:
            image.load()
            if image.mode != "L":
                image = image.convert("RGB")
            return np.array(image)
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as exc:
        raise ValueError(f"the base64 data is not a readable image ({exc})") from None


def _benchmark(repeats: int = 1000) -> None:
    """Print the median encode time per frame size (not run by the tests)."""
    import time

    rng = np.random.default_rng(0)
    for height, width in ((225, 225), (336, 336), (576, 1024)):
        yy, xx = np.mgrid[0:height, 0:width]
        smooth = np.stack([xx * 255 // width, yy * 255 // height,
                           (xx + yy) * 127 // (width + height)], axis=-1).astype(np.uint8)
        noisy = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
        for label, frame in (("smooth", smooth), ("noise", noisy)):
            times = []
            for _ in range(repeats):
                start = time.perf_counter()
                encode_jpeg_b64(frame)
                times.append(time.perf_counter() - start)
            print(f"{width}x{height} {label:6s}: median {1e3 * float(np.median(times)):.3f} ms")


if __name__ == "__main__":
    _benchmark()
