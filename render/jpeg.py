"""JPEG frames, byte-identical to Pillow's default ``save(format="JPEG")``, fast for sequences.

``JpegStream`` encodes a sequence of frames (one episode's observations) and returns, for every
frame, exactly the bytes ``Image.fromarray(frame).save(buf, "JPEG", quality=q)`` returns. It does
it by keeping the quantized DCT blocks of the previous frame: only the 16x16 MCUs whose pixels
changed are transformed again (render/_jpeg.pyx), so a maze step that moves one marker costs a
handful of MCUs plus the Huffman pass instead of a whole encode.

Nothing about the format is hard-coded here: for each (height, width, channels, quality) the
header Pillow writes for a blank image of that size is parsed (quantization tables, Huffman
tables, component sampling and table selectors) and reused verbatim as our header. Before a size
is trusted, one pseudo-random probe frame is encoded both ways and must match byte for byte;
if it does not (a Pillow built with different defaults, an unusual libjpeg) the stream falls back
to calling Pillow for that size, so the output is Pillow's in every case.
"""
from __future__ import annotations

import io
import threading
import warnings

import numpy as np
from PIL import Image

from ..core.cache import BoundedCache
from . import _jpeg

__all__ = ["JpegStream", "pillow_jpeg"]

_PIL_DEFAULT_QUALITY = 75


def pillow_jpeg(frame: np.ndarray, quality: int = _PIL_DEFAULT_QUALITY) -> bytes:
    """Pillow's JPEG of an (H, W, 3) RGB or (H, W) gray uint8 frame (the reference encoder)."""
    buffer = io.BytesIO()
    image = Image.fromarray(np.ascontiguousarray(frame))
    if quality == _PIL_DEFAULT_QUALITY:
        image.save(buffer, format="JPEG")  # the reference passes no quality
    else:
        image.save(buffer, format="JPEG", quality=int(quality))
    return buffer.getvalue()


class _Layout:
    """What one Pillow header says: the header bytes and the tables the scan needs."""

    def __init__(self, header: bytes, channels: int):
        self.header = header
        self.channels = channels
        self.qtables = np.ones((2, 64), np.int_)
        self.dc_code = np.zeros((2, 16), np.uintc)
        self.dc_size = np.zeros((2, 16), np.uint8)
        self.ac_code = np.zeros((2, 256), np.uintc)
        self.ac_size = np.zeros((2, 256), np.uint8)
        self.comp_q: list[int] = []
        self.comp_dc: list[int] = []
        self.comp_ac: list[int] = []
        self.sampling: list[tuple[int, int]] = []
        self.supported = True
        self._parse()
        # Everything an MCU's coded blocks depend on besides its pixels.
        self.table_key = (channels, self.qtables.tobytes(), tuple(self.comp_q),
                          tuple(self.comp_dc), tuple(self.comp_ac), self.dc_code.tobytes(),
                          self.dc_size.tobytes(), self.ac_code.tobytes(), self.ac_size.tobytes())

    def _parse(self) -> None:
        data = self.header
        if data[:2] != b"\xff\xd8":
            raise ValueError("not a JPEG header")
        pos = 2
        comp_ids: list[int] = []
        while pos + 4 <= len(data):
            if data[pos] != 0xFF:
                raise ValueError(f"bad marker at byte {pos}")
            marker = data[pos + 1]
            length = int.from_bytes(data[pos + 2:pos + 4], "big")
            body = data[pos + 4:pos + 2 + length]
            if marker == 0xDB:  # DQT: one or more tables, stored in zigzag order
                i = 0
                while i < len(body):
                    precision, table = body[i] >> 4, body[i] & 15
                    if precision != 0 or table > 1:
                        self.supported = False
                        return
                    zz = np.frombuffer(body[i + 1:i + 65], np.uint8).astype(np.int_)
                    natural = np.zeros(64, np.int_)
                    natural[_ZIGZAG] = zz
                    self.qtables[table] = natural
                    i += 65
            elif marker == 0xC4:  # DHT
                i = 0
                while i < len(body):
                    kind, table = body[i] >> 4, body[i] & 15
                    counts = list(body[i + 1:i + 17])
                    values = list(body[i + 17:i + 17 + sum(counts)])
                    if table > 1:
                        self.supported = False
                        return
                    codes, sizes = (self.dc_code, self.dc_size) if kind == 0 else \
                        (self.ac_code, self.ac_size)
                    code, k = 0, 0
                    for length_bits in range(1, 17):
                        for _ in range(counts[length_bits - 1]):
                            if values[k] >= codes.shape[1]:
                                self.supported = False
                                return
                            codes[table, values[k]] = code
                            sizes[table, values[k]] = length_bits
                            code += 1
                            k += 1
                        code <<= 1
                    i += 17 + sum(counts)
            elif marker == 0xC0:  # SOF0, baseline
                if body[0] != 8:
                    self.supported = False
                    return
                ncomp = body[5]
                for c in range(ncomp):
                    cid, hv, tq = body[6 + 3 * c:9 + 3 * c]
                    comp_ids.append(cid)
                    self.sampling.append((hv >> 4, hv & 15))
                    self.comp_q.append(tq)
            elif marker == 0xDA:  # SOS: table selectors per component
                n = body[0]
                order = []
                for c in range(n):
                    cid, tables = body[1 + 2 * c:3 + 2 * c]
                    order.append(cid)
                    self.comp_dc.append(tables >> 4)
                    self.comp_ac.append(tables & 15)
                ss, se, ahal = body[1 + 2 * n:4 + 2 * n]
                if order != comp_ids or (ss, se, ahal) != (0, 63, 0):
                    self.supported = False
                return
            elif marker in (0xC1, 0xC2, 0xC3, 0xDD) or 0xC5 <= marker <= 0xCF:
                self.supported = False  # not baseline, or restart intervals
                return
            pos += 2 + length
        raise ValueError("no SOS segment in the header")

    def matches_pipeline(self) -> bool:
        """Whether the layout is the one _jpeg implements (4:2:0 colour or plain gray)."""
        if not self.supported:
            return False
        if self.channels == 3:
            return self.sampling == [(2, 2), (1, 1), (1, 1)]
        return self.sampling == [(1, 1)]


_ZIGZAG = np.array([0, 1, 8, 16, 9, 2, 3, 10, 17, 24, 32, 25, 18, 11, 4, 5, 12, 19, 26, 33, 40,
                    48, 41, 34, 27, 20, 13, 6, 7, 14, 21, 28, 35, 42, 49, 56, 57, 50, 43, 36, 29,
                    22, 15, 23, 30, 37, 44, 51, 58, 59, 52, 45, 38, 31, 39, 46, 53, 60, 61, 54,
                    47, 55, 62, 63])

# (height, width, channels, quality) -> its verified layout, or None: Pillow encodes that size.
_LAYOUTS = BoundedCache("JPEG layouts", max_items=1024)


def _probe_frame(height: int, width: int, channels: int) -> np.ndarray:
    """Smooth gradients, hard edges and noise: exercises every coefficient path."""
    rng = np.random.default_rng(height * 7919 + width * 104729 + channels)
    yy, xx = np.mgrid[0:height, 0:width]
    base = (xx * 255 // max(1, width - 1) + (yy // 5 % 2) * 90) % 256
    noise = rng.integers(-40, 41, (height, width, channels))
    frame = np.clip(base[..., None] + noise, 0, 255).astype(np.uint8)
    frame[height // 3: height // 2, width // 4: width // 2] = 255  # flat block, 0xFF runs
    return frame


def _layout(height: int, width: int, channels: int, quality: int):
    """The parsed layout for a frame size, or None when Pillow must be used for it."""
    return _LAYOUTS.get_or_build((height, width, channels, quality),
                                 lambda: _verified_layout(height, width, channels, quality))


def _verified_layout(height: int, width: int, channels: int, quality: int):
    shape = (height, width, 3) if channels == 3 else (height, width)
    blank = pillow_jpeg(np.zeros(shape, np.uint8), quality)
    sos = blank.find(b"\xff\xda")
    header = blank[:sos + 2 + int.from_bytes(blank[sos + 2:sos + 4], "big")]
    layout = _Layout(header, channels)
    if layout.matches_pipeline():
        probe = _probe_frame(height, width, channels)
        stream = _new_stream(layout, height, width)
        ours = stream.encode(probe)
        theirs = pillow_jpeg(probe.reshape(shape), quality)
        if ours != theirs:
            warnings.warn(f"visgym JPEG encoder disagrees with Pillow for {width}x{height}x"
                          f"{channels} at quality {quality}; using Pillow for this size",
                          RuntimeWarning, stacklevel=3)
            layout = None
    else:
        layout = None
    return layout


_THREAD_CACHES = threading.local()


def _block_cache(layout: _Layout):
    """This thread's MCU cache for the layout's tables (shared by all frame sizes)."""
    caches = getattr(_THREAD_CACHES, "caches", None)
    if caches is None:
        caches = _THREAD_CACHES.caches = {}
    cache = caches.get(layout.table_key)
    if cache is None:
        cache = caches[layout.table_key] = _jpeg.BlockCache(layout.channels)
    return cache


def _new_stream(layout: _Layout, height: int, width: int):
    return _jpeg.Stream(height, width, layout.channels, layout.qtables, layout.comp_q,
                        layout.comp_dc, layout.comp_ac, layout.dc_code, layout.dc_size,
                        layout.ac_code, layout.ac_size, layout.header)


class JpegStream:
    """Encodes successive frames; each result equals ``pillow_jpeg(frame, quality)``.

    Keep one stream per sequence of similar frames (an episode, a batch slot): the saving comes
    from the previous frame. Frames may change size or channel count at any time (the stream
    starts over). Not thread-safe: one stream per thread.
    """

    __slots__ = ("quality", "_key", "_stream", "_layout", "_cache", "_thread")

    def __init__(self, quality: int = _PIL_DEFAULT_QUALITY):
        if isinstance(quality, bool) or not isinstance(quality, (int, np.integer)) \
                or not 1 <= quality <= 100:
            raise ValueError(f"quality must be an integer in 1..100, got {quality!r}")
        self.quality = int(quality)
        self._key = None
        self._stream = None
        self._layout = None
        self._cache = None
        self._thread = None

    def reset(self) -> None:
        """Forget the previous frame (the next encode transforms every MCU)."""
        if self._stream is not None:
            self._stream.forget()

    def encode(self, frame: np.ndarray) -> bytes:
        stream = self._stream
        if stream is not None and isinstance(frame, np.ndarray) and frame.ndim == 3 \
                and frame.shape == self._key and frame.dtype == np.uint8 \
                and frame.flags.c_contiguous and self._thread == threading.get_ident():
            return stream.encode(frame, self._cache)  # the common case: same size, same thread
        if not (isinstance(frame, np.ndarray) and frame.dtype == np.uint8
                and (frame.ndim == 2 or (frame.ndim == 3 and frame.shape[2] in (1, 3)))
                and frame.shape[0] > 0 and frame.shape[1] > 0):
            raise ValueError("frame: expected a non-empty uint8 array of shape (H, W, 3) or "
                             f"(H, W); got {getattr(frame, 'dtype', type(frame).__name__)} "
                             f"{getattr(frame, 'shape', '')}")
        if frame.ndim == 3 and frame.shape[2] == 1:
            frame = frame[:, :, 0]
        height, width = frame.shape[:2]
        channels = 3 if frame.ndim == 3 else 1
        key = (height, width, channels) if channels == 3 else (height, width)
        if key != self._key:
            self._layout = _layout(height, width, channels, self.quality)
            self._stream = None if self._layout is None else \
                _new_stream(self._layout, height, width)
            self._key = key
        if self._stream is None:
            return pillow_jpeg(frame, self.quality)
        self._thread = threading.get_ident()
        self._cache = _block_cache(self._layout)
        return self._stream.encode(np.ascontiguousarray(frame).reshape(height, width, channels),
                                   self._cache)

    @property
    def mcus_encoded(self) -> int:
        """MCUs transformed so far by the current size's stream (for tests and benchmarks)."""
        return 0 if self._stream is None else self._stream.mcus_encoded
