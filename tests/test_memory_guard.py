"""BatchEnv's memory guard counts every per-episode buffer a family allocates (its State and
workspace, ``Family.row_bytes``), not only the frame buffer: zoom_in_puzzle's tiles are as large
as its frames. The machine's memory is a monkeypatched figure and the family's allocations are
watched, so nothing large is allocated here."""
import numpy as np
import pytest

import visgym
from visgym.core import batch_env
from visgym.core.family import array_bytes
from visgym.envs.mental_rotation_3d_objaverse import MentalRotation3DObjaverse
from visgym.envs.zoom_in_puzzle import ZoomInPuzzle

TILE = 224 * 224 * 3


def _no_big_allocations(monkeypatch, cls):
    """new_state / new_workspace of ``cls`` fail the test for more than 2 episodes."""
    for name in ("new_state", "new_workspace"):
        original = getattr(cls, name)

        def guarded(self, batch, original=original):
            assert batch <= 2, f"allocated {batch} episodes"
            return original(self, batch)

        monkeypatch.setattr(cls, name, guarded)


def test_zoom_tiles_count_and_a_batch_they_overflow_is_refused_before_allocating(monkeypatch):
    family = visgym.make("zoom_in_puzzle/easy", num_envs=1, num_zoom_views=16).family
    h, w = family.frame_shape
    assert family.row_bytes() >= 17 * TILE           # the views' tiles and the whole picture
    frames, tiles = 3000 * h * w * 3, 3000 * 17 * TILE
    # Half of this machine holds the 3000 frames (and half the tiles), not frames and tiles.
    monkeypatch.setattr(batch_env, "_physical_memory", lambda: 2 * (frames + tiles // 2))
    _no_big_allocations(monkeypatch, ZoomInPuzzle)
    with pytest.raises(ValueError, match=r"^num_envs: 3000 episodes need (\d+\.\d) GiB .*"
                                         r"GiB for the family's per-episode state"):
        visgym.make("zoom_in_puzzle/easy", num_envs=3000, num_zoom_views=16)
    # The same batch on a machine with room for both is admitted by the guard.
    monkeypatch.setattr(batch_env, "_physical_memory", lambda: 2 * (frames + tiles) + 2**30)
    batch_env._check_frame_memory(3000, h, w, family.row_bytes())


def test_objaverse_scratch_larger_than_its_frame_counts(monkeypatch):
    """The objaverse workspace (a float32 depth buffer of S x 2S per episode) outweighs its
    uint8 frame."""
    family = visgym.make("mental_rotation_3d_objaverse/easy", num_envs=1).family
    h, w = family.frame_shape
    assert family.row_bytes() >= h * w * 4
    monkeypatch.setattr(batch_env, "_physical_memory", lambda: 2 * 1000 * h * w * 3 * 2)
    _no_big_allocations(monkeypatch, MentalRotation3DObjaverse)
    with pytest.raises(ValueError, match=r"^num_envs: 1000 episodes need"):
        visgym.make("mental_rotation_3d_objaverse/easy", num_envs=1000)


@pytest.mark.parametrize("env_id", ["maze_2d/easy", "jigsaw/easy", "patch_reassembly/easy",
                                    "fetch_reach/easy", "sliding_block/easy"])
def test_row_bytes_is_what_one_more_episode_allocates(env_id):
    family = visgym.make(env_id, num_envs=1).family
    one = array_bytes((family.new_state(3), family.new_workspace(3)))
    two = array_bytes((family.new_state(5), family.new_workspace(5)))
    assert family.row_bytes() * 2 == two - one
    assert family.row_bytes() is family.row_bytes()   # measured once


def test_array_bytes_counts_each_buffer_once():
    x = np.zeros(10)
    assert array_bytes((x, x[2:], {"a": x}, [np.broadcast_to(x, (100, 10))])) == 80
    assert array_bytes(np.broadcast_to(np.int64(1), (10**6, 10**6))) == 8

    class Work:
        def __init__(self):
            self.depth = np.zeros((4, 4), np.float32)
            self.rows = (np.zeros(3, np.int64),)

    assert array_bytes((Work(), None, 3, "x")) == 64 + 24
