"""The incremental JPEG encoder (render/jpeg.py) writes exactly Pillow's bytes, frame after frame."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import visgym
from visgym.bridges.imaging import encode_jpeg, frame_encoder
from visgym.core.cache import BoundedCache
from visgym.core.rollout import run_plans
from visgym.render import jpeg
from visgym.render.jpeg import JpegStream, pillow_jpeg


def _frames(shape, rng):
    """Contents that exercise different coefficient paths."""
    yield rng.integers(0, 256, shape, dtype=np.uint8)                    # every AC non-zero
    yield np.full(shape, 255, np.uint8)                                   # flat, 0xFF samples
    yield (rng.integers(0, 2, shape) * 255).astype(np.uint8)            # hard edges, long codes
    h, w = shape[:2]
    ramp = (np.add.outer(np.arange(h), np.arange(w)) * 255 // max(1, h + w - 2)).astype(np.uint8)
    yield np.broadcast_to(ramp[..., None] if len(shape) == 3 else ramp, shape).copy()


@pytest.fixture(autouse=True)
def _warnings_are_errors():
    # A disagreement with Pillow is reported as a warning and hidden by the fallback.
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        yield


@pytest.mark.parametrize("height,width", [(1, 1), (8, 8), (15, 17), (16, 16), (17, 33),
                                          (100, 808), (189, 336), (225, 225), (50, 7)])
@pytest.mark.parametrize("channels", [3, 1])
def test_bytes_equal_pillow(height, width, channels):
    rng = np.random.default_rng(height * 1000 + width + channels)
    shape = (height, width, 3) if channels == 3 else (height, width)
    stream = JpegStream()
    for frame in _frames(shape, rng):
        assert stream.encode(frame) == pillow_jpeg(frame)
        assert JpegStream().encode(frame) == pillow_jpeg(frame)  # and from a fresh stream


def test_even_height_padding_rows():
    # libjpeg pads to an even row count before chroma averaging, then repeats the last averaged
    # row: heights 2 mod 16 .. 14 mod 16 (even) take that path, odd heights do not.
    rng = np.random.default_rng(7)
    for height in range(2, 34, 2):
        frame = rng.integers(0, 256, (height, 24, 3), dtype=np.uint8)
        assert JpegStream().encode(frame) == pillow_jpeg(frame), height


def test_other_qualities():
    frame = np.random.default_rng(3).integers(0, 256, (40, 56, 3), dtype=np.uint8)
    for quality in (1, 30, 90, 100):
        assert JpegStream(quality).encode(frame) == pillow_jpeg(frame, quality)


def test_incremental_reencodes_only_changed_mcus():
    rng = np.random.default_rng(11)
    frame = rng.integers(0, 256, (64, 80, 3), dtype=np.uint8)   # 4 x 5 MCUs
    stream = JpegStream()
    stream.encode(frame)
    assert stream.mcus_encoded == 20
    assert stream.encode(frame) == pillow_jpeg(frame)
    assert stream.mcus_encoded == 20                              # nothing changed
    frame[20, 40] ^= 0xFF                                         # one pixel, in MCU (1, 2)
    assert stream.encode(frame) == pillow_jpeg(frame)
    assert stream.mcus_encoded == 21
    frame[15:17, 15:17] = 0                                       # straddles four MCUs
    assert stream.encode(frame) == pillow_jpeg(frame)
    assert stream.mcus_encoded == 25
    stream.reset()
    assert stream.encode(frame) == pillow_jpeg(frame)
    assert stream.mcus_encoded == 45


def test_random_edit_sequences():
    rng = np.random.default_rng(5)
    for trial in range(40):
        height, width = (int(v) for v in rng.integers(1, 60, 2))
        shape = (height, width, 3) if trial % 3 else (height, width)
        frame = rng.integers(0, 256, shape, dtype=np.uint8)
        stream = JpegStream()
        for _ in range(6):
            y, x = int(rng.integers(0, height)), int(rng.integers(0, width))
            frame[y:y + int(rng.integers(1, 20)), x:x + int(rng.integers(1, 20))] = \
                rng.integers(0, 256)
            assert stream.encode(frame) == pillow_jpeg(frame), trial


def test_size_and_mode_changes_mid_stream():
    rng = np.random.default_rng(2)
    stream = JpegStream()
    for shape in [(30, 40, 3), (30, 40), (30, 40, 1), (31, 40, 3), (30, 40, 3)]:
        frame = rng.integers(0, 256, shape, dtype=np.uint8)
        expected = pillow_jpeg(frame[..., 0] if shape[-1:] == (1,) and len(shape) == 3 else frame)
        assert stream.encode(frame) == expected


def test_non_contiguous_frames():
    base = np.random.default_rng(4).integers(0, 256, (40, 60, 3), dtype=np.uint8)
    view = base[:, ::2]
    assert JpegStream().encode(view) == pillow_jpeg(np.ascontiguousarray(view))


@pytest.mark.parametrize("env_id", ["maze_2d/easy", "maze_2d/hard", "maze_3d/easy",
                                    "sliding_block/easy", "matchstick_equation/hard",
                                    "matchstick_rotation/easy", "fetch_reach/easy"])
def test_episode_frames_through_encode_jpeg(env_id):
    """What the evaluation loop and the demos do: one stream per slot, frames resized to 336."""
    env = visgym.make(env_id, 2, autoreset="disabled")
    env.reset(seeds=[3, 4])
    plans = env.solve()
    encoders = [frame_encoder(env.frames.shape[1:]) for _ in range(2)]

    def check(*_):
        for b in range(2):
            frame = env.frames[b]
            assert encoders[b](frame) == encode_jpeg(frame, 336)

    check()
    run_plans(env, [p[:6] for p in plans], on_step=check)


@settings(max_examples=60, deadline=None)
@given(height=st.integers(1, 40), width=st.integers(1, 40), gray=st.booleans(),
       seed=st.integers(0, 2**32 - 1), levels=st.sampled_from([2, 4, 256]))
def test_hypothesis_sequences(height, width, gray, seed, levels):
    rng = np.random.default_rng(seed)
    shape = (height, width) if gray else (height, width, 3)
    frame = (rng.integers(0, levels, shape) * (255 // (levels - 1))).astype(np.uint8)
    stream = JpegStream()
    for _ in range(3):
        assert stream.encode(frame) == pillow_jpeg(frame)
        frame = frame.copy()
        frame[rng.integers(0, height), rng.integers(0, width)] = rng.integers(0, 256)


def test_disagreement_falls_back_to_pillow(monkeypatch):
    class Broken:
        def __init__(self, *args):
            self.mcus_encoded = 0

        def encode(self, frame):
            return b"not a jpeg"

        def forget(self):
            pass

    monkeypatch.setattr(jpeg, "_LAYOUTS", BoundedCache("test layouts", max_items=8))
    monkeypatch.setattr(jpeg._jpeg, "Stream", Broken)
    frame = np.random.default_rng(0).integers(0, 256, (24, 24, 3), dtype=np.uint8)
    stream = JpegStream()
    with pytest.warns(RuntimeWarning, match="disagrees with Pillow"):
        first = stream.encode(frame)
    assert first == pillow_jpeg(frame)
    assert stream.encode(frame) == pillow_jpeg(frame)   # remembered: no second warning


@pytest.mark.parametrize("bad", [np.zeros((4, 4, 3), np.float32), np.zeros((0, 4, 3), np.uint8),
                                 np.zeros((4, 4, 4), np.uint8), np.zeros(4, np.uint8), "frame"])
def test_bad_frames_raise(bad):
    with pytest.raises(ValueError, match="frame"):
        JpegStream().encode(bad)


@pytest.mark.parametrize("quality", [0, 101, 7.5, True])
def test_bad_quality_raises(quality):
    with pytest.raises(ValueError, match="quality"):
        JpegStream(quality)
