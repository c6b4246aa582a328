"""The tile compositor (render/_tiles.pyx) against a plain NumPy composition."""
import numpy as np
import pytest

from visgym.render import tiles as T


def _atlas(rng):
    """Flat tiles (row-uniform, the fast path), striped ones, and random ones."""
    atlas = np.empty((6, 5, 4, 3), np.uint8)
    atlas[:2] = rng.integers(0, 256, (2, 1, 1, 3))
    atlas[2:4] = rng.integers(0, 256, (2, 1, 4, 3))          # uniform down, varied across
    atlas[4:] = rng.integers(0, 256, (2, 5, 4, 3))           # nothing uniform
    return atlas


def _compose(atlas, tilemap, height, width):
    th, tw = atlas.shape[1:3]
    big = np.concatenate([np.concatenate([atlas[t] for t in row], axis=1) for row in tilemap])
    out = np.zeros((height, width, 3), np.uint8)
    h, w = min(height, big.shape[0]), min(width, big.shape[1])
    out[:h, :w] = big[:h, :w]
    return out


@pytest.mark.parametrize("height,width", [(15, 12), (13, 10), (20, 20)])
def test_tilemaps_equal_numpy_composition(height, width):
    rng = np.random.default_rng(height * width)
    atlas = _atlas(rng)
    maps = rng.integers(0, 6, (8, 3, 3)).astype(np.int32)
    maps[0] = 0  # an all-flat map exercises the band copy
    frames = np.zeros((8, height, width, 3), np.uint8)
    T.blit_tilemaps(frames, np.arange(8), atlas, maps)
    for n in range(8):
        want = _compose(atlas, maps[n], height, width)
        h, w = min(height, 15), min(width, 12)
        np.testing.assert_array_equal(frames[n, :h, :w], want[:h, :w])


def test_blit_tiles_clips_and_only_touches_its_frame():
    rng = np.random.default_rng(0)
    atlas = _atlas(rng)
    frames = np.zeros((3, 10, 10, 3), np.uint8)
    xs = np.array([-2, 8, 3, -100, 10**6], np.int32)
    ys = np.array([-3, 7, 3, 0, 0], np.int32)
    T.blit_tiles(frames, np.array([0, 0, 1, 1, 1]), atlas, np.array([4, 5, 1, 4, 4]), xs, ys)
    np.testing.assert_array_equal(frames[0, 0:2, 0:2], atlas[4, 3:5, 2:4])
    np.testing.assert_array_equal(frames[0, 7:10, 8:10], atlas[5, 0:3, 0:2])
    np.testing.assert_array_equal(frames[1, 3:8, 3:7], atlas[1])
    assert (frames[2] == 0).all()
    assert frames[1].sum() == atlas[1].sum()


def test_bad_arguments_name_the_argument():
    atlas = _atlas(np.random.default_rng(1))
    frames = np.zeros((2, 10, 10, 3), np.uint8)
    with pytest.raises(ValueError, match="frames"):
        T.blit_tiles(frames.astype(np.int32), [0], atlas, [0], [0], [0])
    with pytest.raises(ValueError, match="idx"):
        T.blit_tiles(frames, [2], atlas, [0], [0], [0])
    with pytest.raises(ValueError, match="tile_ids"):
        T.blit_tiles(frames, [0, 1], atlas, [0], [0, 0], [0, 0])
    with pytest.raises(ValueError, match="tiles"):
        T.blit_tilemaps(frames, [0], atlas[..., :2], np.zeros((1, 2, 2), np.int32))
    with pytest.raises(ValueError, match="tilemaps"):
        T.blit_tilemaps(frames, [0], atlas, np.zeros((2, 2, 2), np.int32))


@pytest.mark.parametrize("n", [2, 40])  # the few-entry and the NumPy paths of the range check
def test_out_of_range_indices_raise_before_drawing(n):
    atlas = _atlas(np.random.default_rng(2))
    frames = np.zeros((2, 10, 10, 3), np.uint8)
    ok = np.zeros(n, np.int64)
    for idx, ids, name in [(ok - 1, ok, "idx"), (ok + 2, ok, "idx"), (ok, ok - 1, "tile_ids"),
                           (ok, ok + len(atlas), "tile_ids")]:
        idx, ids = idx.copy(), ids.copy()
        idx[1:] = ok[1:]  # only the first entry is bad
        ids[1:] = ok[1:]
        with pytest.raises(ValueError, match=name):
            T.blit_tiles(frames, idx, atlas, ids.astype(np.int32), ok, ok)
    assert not frames.any()
