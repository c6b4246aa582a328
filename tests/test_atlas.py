"""render/atlas.py: the shared picture store (lazy, byte-capped, locked) and the per-BatchEnv
flat atlas (slots, offsets, rects, byte cap with restart, errors that change nothing, threads)."""
import threading

import numpy as np
import pytest

from visgym.render.atlas import PictureAtlas, PictureStore, changed_rows, missing_pictures


def _picture(k: int) -> np.ndarray:
    """A distinct picture per id, of an id-dependent size."""
    h, w = 5 + k % 7, 3 + (3 * k) % 11
    return np.random.default_rng(k).integers(0, 256, (h, w, 3), np.uint8)


def _read(atlas: PictureAtlas, k: int) -> np.ndarray:
    """Picture k read the way a kernel reads it: buffer + slot_off + slot_hw."""
    s = atlas.slot_of[k]
    h, w = atlas.slot_hw[s]
    off = atlas.slot_off[s]
    return atlas.buffer[off:off + h * w * 3].reshape(h, w, 3)


def test_slots_hold_each_picture_at_its_offset_and_rect():
    atlas = PictureAtlas(_picture, 50)
    atlas.ensure([3, 7, 3, -1, 12])
    assert atlas.count == 3
    for k in (3, 7, 12):
        assert np.array_equal(_read(atlas, k), _picture(k))
        assert np.array_equal(atlas.view(k), _picture(k))
    assert atlas.slot_of[0] == -1 and atlas.slot_of[3] >= 0
    assert atlas.slots([12, -1]).tolist() == [atlas.slot_of[12], -1]
    # Many slots: the buffer and the slot tables grow, earlier pictures stay intact.
    atlas.ensure(range(50))
    assert atlas.count == 50
    for k in range(50):
        assert np.array_equal(_read(atlas, k), _picture(k))


def test_byte_cap_restarts_with_only_what_the_call_needs():
    sizes = {k: _picture(k).nbytes for k in range(20)}
    cap = sizes[0] + sizes[1] + sizes[2]
    atlas = PictureAtlas(_picture, 20, byte_cap=cap)
    atlas.ensure([0, 1, 2])
    assert atlas.restarts == 0 and atlas.used == cap
    atlas.ensure([2, 5])            # over the cap: start over with 2 and 5 only
    assert atlas.restarts == 1
    assert sorted(np.nonzero(atlas.slot_of >= 0)[0].tolist()) == [2, 5]
    assert atlas.used == sizes[2] + sizes[5]
    for k in (2, 5):
        assert np.array_equal(_read(atlas, k), _picture(k))
    # A single call larger than the cap is still served whole.
    atlas.ensure(range(10))
    for k in range(10):
        assert np.array_equal(_read(atlas, k), _picture(k))
    # Bounded between calls: repeated restarts never let `used` pass the largest call.
    for start in range(0, 20, 2):
        atlas.ensure([start, start + 1])
        assert atlas.used <= max(cap, sum(sizes[k] for k in range(10)))


def test_loader_error_changes_nothing():
    def loader(k):
        if k == 4:
            raise OSError("picture 4: unreadable file /x/4.png")
        return _picture(k)

    atlas = PictureAtlas(loader, 8)
    atlas.ensure([1, 2])
    before = (atlas.slot_of.copy(), atlas.used, atlas.count, atlas.buffer[:atlas.used].copy())
    with pytest.raises(OSError, match="4.png"):
        atlas.ensure([3, 4])
    assert np.array_equal(atlas.slot_of, before[0])
    assert (atlas.used, atlas.count) == before[1:3]
    assert np.array_equal(atlas.buffer[:atlas.used], before[3])


def test_bad_pictures_and_ids_are_refused():
    atlas = PictureAtlas(lambda k: np.zeros((4, 4), np.uint8), 3)
    with pytest.raises(ValueError, match="picture 0"):
        atlas.ensure([0])
    atlas = PictureAtlas(_picture, 3)
    with pytest.raises(ValueError, match="image id"):
        atlas.ensure([3])
    grey = PictureAtlas(lambda k: np.full((2, 3), k, np.uint8), 4, channels=1)
    assert np.array_equal(grey.view(2)[:, :, 0], np.full((2, 3), 2, np.uint8))


def test_ensure_rows_and_missing_pictures():
    atlas = PictureAtlas(_picture, 30)
    image_id = np.array([4, 4, -1, 9, 17, 9], np.int64)
    rows = np.array([0, 1, 2, 3, 5], np.int64)
    out = np.empty(6, np.int64)
    n = missing_pictures(atlas.slot_of, image_id, rows, out)
    assert out[:n].tolist() == [4, 9]
    assert atlas.ensure_rows(image_id, rows) == 2
    assert atlas.ensure_rows(image_id, rows) == 0
    assert atlas.slot_of[17] == -1
    assert atlas.ensure_rows(image_id, np.arange(6, dtype=np.int64)) == 1


def test_changed_rows():
    changed = np.zeros((6, 4), np.bool_)
    changed[1, 3] = changed[4, 0] = changed[4, 2] = True
    out = np.empty(6, np.int64)
    n = changed_rows(changed, out)
    assert out[:n].tolist() == [1, 4]


def test_store_is_lazy_capped_and_read_only():
    calls = []

    def loader(k):
        calls.append(k)
        return _picture(k)

    cap = _picture(0).nbytes + _picture(1).nbytes
    store = PictureStore("test store", loader, 10, max_bytes=cap)
    assert calls == []
    a = store.picture(0)
    assert store.picture(0) is a and calls == [0]
    assert not a.flags.writeable and a.flags.c_contiguous
    assert store.dims(1) == _picture(1).shape[:2]
    store.picture(2)                       # evicts the least recently used
    assert store.nbytes <= cap
    with pytest.raises(ValueError, match="out of range"):
        store.picture(10)


def test_threads_share_a_store_and_fill_their_own_atlases():
    store = PictureStore("threaded store", _picture, 64, max_bytes=1 << 20)
    errors = []

    def work(seed):
        try:
            rng = np.random.default_rng(seed)
            atlas = PictureAtlas(store.picture, 64, byte_cap=4000)
            for _ in range(200):
                ids = rng.integers(-1, 64, 5)
                atlas.ensure_rows(ids, np.arange(5, dtype=np.int64))
                for k in ids.tolist():
                    if k >= 0:
                        assert np.array_equal(_read(atlas, k), _picture(k))
        except Exception as exc:   # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_one_atlas_from_several_threads_stays_consistent():
    atlas = PictureAtlas(_picture, 40, byte_cap=1 << 30)
    barrier = threading.Barrier(4)

    def work(seed):
        barrier.wait()
        for k in np.random.default_rng(seed).permutation(40).tolist():
            atlas.ensure([k])

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert atlas.count == 40
    assert sorted(atlas.slot_of.tolist()) == list(range(40))
    for k in range(40):
        assert np.array_equal(_read(atlas, k), _picture(k))
