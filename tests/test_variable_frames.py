"""Per-episode frame sizes (DESIGN.md "Frames") on a test-only family whose size differs per
episode (tests/variable_family.py): the capacity buffer, ``frame_hw`` at reset, after auto-reset
and in the goal frames, zero padding outside every episode's frame (also where a smaller episode
follows a larger one in the same row), the exact view ``frame(i)``, the gymnasium single env's
``render()`` and info, and the JPEG encoder starting afresh when a slot's size changes.
"""
import base64

import numpy as np
import pytest

import visgym
from variable_family import CELL, VariableRect, registered
from visgym.bridges.imaging import decode_b64_image, encode_jpeg, frame_encoder
from visgym.core.batch_env import BatchEnv
from visgym.core.family import Family


@pytest.fixture(autouse=True)
def variable_ids():
    with registered():
        yield


def _sizes(env):
    return [tuple(hw) for hw in env.frame_hw.tolist()]


def _check_padding(env):
    for i, (h, w) in enumerate(_sizes(env)):
        assert not env.frames[i, h:].any() and not env.frames[i, :h, w:].any(), i
        assert env.frame(i).shape == (h, w, 3)
        assert env.frame(i).base is not None   # a view of the buffer, not a copy


def test_sizes_at_reset_are_the_familys_and_padding_is_zero():
    env = visgym.make("variable_rect/easy", num_envs=16)
    frames, info = env.reset(seeds=range(16))
    assert frames.shape == (16, 40, 56, 3)          # the capacity
    sizes = _sizes(env)
    assert len(set(sizes)) > 3                       # sizes really differ per episode
    assert all(CELL * 2 <= h <= 40 and CELL * 2 <= w <= 56 for h, w in sizes)
    assert np.array_equal(info["frame_hw"], env.frame_hw)
    _check_padding(env)
    # Episode i depends on its seed alone, frame size included.
    single = visgym.make("variable_rect/easy", num_envs=1)
    single.reset(seeds=[5])
    assert tuple(single.frame_hw[0]) == sizes[5]
    assert np.array_equal(single.frame(0), env.frame(5))


def test_autoreset_to_a_smaller_episode_clears_the_old_pixels():
    env = visgym.make("variable_rect/easy", num_envs=8, autoreset="next_step", max_steps=1)
    env.reset(seeds=range(8))
    seen = set()
    for _ in range(24):   # budget 1: every other step resets every row anew
        env.step(["('move', 2)"] * 8)
        _check_padding(env)
        seen.update(_sizes(env))
    assert len(seen) > 6


def test_fixed_size_families_keep_the_capacity():
    env = visgym.make("maze_2d/easy", num_envs=3)
    env.reset(seeds=[0, 1, 2])
    h, w = env.frames.shape[1:3]
    assert _sizes(env) == [(h, w)] * 3
    assert env.frame(1).shape == (h, w, 3)
    assert not type(env.family).variable_frames


def test_goal_frames_have_the_goal_sizes():
    env = visgym.make("variable_rect/hard", num_envs=4)
    env.reset(seeds=range(4))
    goals = env.goal_frames()
    assert np.array_equal(env.goal_frame_hw, env.frame_hw)
    for i, (h, w) in enumerate(_sizes(env)):
        assert not goals[i, h:].any() and not goals[i, :h, w:].any()
        assert (goals[i, h - CELL:h, w - CELL:w] == 255).all()   # marker in the goal corner


class _Oversized(VariableRect):
    name = "oversized_rect"

    def frame_hw(self, state, out):
        super().frame_hw(state, out)
        out[0, 1] = self.frame_shape[1] + 1


def test_a_size_outside_the_capacity_is_an_error_naming_the_episode():
    env = BatchEnv(_Oversized(_Oversized.presets["easy"]), 2)
    with pytest.raises(RuntimeError, match=r"oversized_rect.frame_hw: episode 0 .*capacity"):
        env.reset(seeds=[0, 1])


def test_gymnasium_render_is_the_exact_view_and_the_observation_stays_padded():
    from visgym.bridges.gym import VisGymEnv

    env = VisGymEnv("variable_rect/easy", render_mode="rgb_array")
    obs, info = env.reset(seed=3)
    h, w = info["frame_hw"]
    assert obs.shape == (40, 56, 3)
    frame = env.render()
    assert frame.shape == (h, w, 3)
    assert np.array_equal(frame, obs[:h, :w])
    obs, _, _, _, info = env.step("('move', 2)")
    assert info["frame_hw"] == (h, w)
    assert np.array_equal(env.render(), obs[:h, :w])
    assert env.goal_frame().shape == (h, w, 3)


def test_jpeg_encoder_follows_the_slots_size():
    env = visgym.make("variable_rect/hard", num_envs=6)
    env.reset(seeds=range(6))
    encode = frame_encoder(env.frame(0).shape, max_long_side=None)
    for i in range(6):
        view = env.frame(i)   # not contiguous: a slice of the padded row
        data = encode(view)
        assert data == encode_jpeg(np.ascontiguousarray(view), None)
        decoded = decode_b64_image(base64.b64encode(data).decode())
        assert decoded.shape[:2] == view.shape[:2]


def test_family_default_frame_hw_is_the_capacity():
    fam = visgym.make("maze_2d/easy").family
    out = np.zeros((2, 2), np.int32)
    Family.frame_hw(fam, None, out)
    assert out.tolist() == [list(fam.frame_shape)] * 2
