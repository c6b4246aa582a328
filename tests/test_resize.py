"""The incremental Lanczos resizer (render/resize.py) gives Pillow's pixels, frame after frame."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import visgym
from visgym.bridges.imaging import encode_jpeg, fit_long_side, frame_encoder
from visgym.core.rollout import run_plans
from visgym.render import resize
from visgym.render.resize import LanczosResizer, pillow_resize


@pytest.fixture(autouse=True)
def _warnings_are_errors():
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        yield


@pytest.mark.parametrize("in_shape,size", [
    ((290, 420, 3), (336, 232)), ((400, 400, 3), (336, 336)), ((100, 808, 3), (336, 41)),
    ((480, 960, 3), (336, 168)), ((500, 17, 3), (11, 336)), ((60, 17, 3), (11, 40)),
    ((53, 56), (44, 31)), ((120, 103, 3), (62, 6)), ((40, 30, 3), (30, 40)),
])
def test_equals_pillow_through_edits(in_shape, size):
    rng = np.random.default_rng(sum(in_shape) + sum(size))
    frame = rng.integers(0, 256, in_shape, dtype=np.uint8)
    resizer = LanczosResizer(in_shape, size)
    for _ in range(5):
        assert np.array_equal(resizer.resize(frame), pillow_resize(frame, size))
        frame = frame.copy()
        y, x = int(rng.integers(0, in_shape[0])), int(rng.integers(0, in_shape[1]))
        frame[y:y + int(rng.integers(1, 25)), x:x + int(rng.integers(1, 25))] = rng.integers(256)
    assert np.array_equal(resizer.resize(frame), pillow_resize(frame, size))  # unchanged frame


def test_random_sizes_both_pass_orders():
    rng = np.random.default_rng(11)
    orders = set()
    for t in range(40):
        h, w = (int(v) for v in rng.integers(8, 120, 2))
        size = (int(rng.integers(3, w + 1)), int(rng.integers(3, h + 1)))
        if size == (w, h):
            continue
        shape = (h, w, 3) if t % 3 else (h, w)
        frame = rng.integers(0, 256, shape, dtype=np.uint8)
        resizer = LanczosResizer(shape, size)
        orders.add(resizer._order)
        assert np.array_equal(resizer.resize(frame), pillow_resize(frame, size)), (shape, size)
    assert orders == {"h", "v"}   # Pillow uses both orders over these sizes


def test_wrong_shape_raises():
    with pytest.raises(ValueError, match="shape"):
        LanczosResizer((20, 30, 3), (10, 15)).resize(np.zeros((20, 31, 3), np.uint8))


def test_disagreement_falls_back_to_pillow(monkeypatch):
    monkeypatch.setattr(resize, "_ORDERS", {})
    real = resize.coefficients

    def skewed(in_size, out_size):
        bounds, weights = real(in_size, out_size)
        return bounds, weights + 1000   # no longer Pillow's weights

    monkeypatch.setattr(resize, "coefficients", skewed)
    frame = np.random.default_rng(0).integers(0, 256, (30, 40, 3), dtype=np.uint8)
    with pytest.warns(RuntimeWarning, match="disagrees with Pillow"):
        resizer = LanczosResizer(frame.shape, (20, 15))
    assert np.array_equal(resizer.resize(frame), pillow_resize(frame, (20, 15)))


@pytest.mark.parametrize("env_id", ["sliding_block/easy", "matchstick_rotation/hard",
                                    "matchstick_equation/easy", "fetch_reach/easy"])
def test_frame_encoder_with_resize_is_encode_jpeg(env_id):
    """The evaluation loop's and the demos' path for frames larger than 336 px."""
    env = visgym.make(env_id, 2, autoreset="disabled")
    env.reset(seeds=[5, 6])
    plans = env.solve()
    height, width = env.frames.shape[1:3]
    assert fit_long_side(width, height, 336) != (width, height)
    encoders = [frame_encoder(env.frames.shape[1:]) for _ in range(2)]

    def check(*_):
        for b in range(2):
            assert encoders[b](env.frames[b]) == encode_jpeg(env.frames[b], 336)

    check()
    run_plans(env, [p[:5] for p in plans], on_step=check)
