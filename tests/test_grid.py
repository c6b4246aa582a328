"""The framed-piece grid painter (render/grid.py, render/_blit.pyx) against a NumPy paste written
the reference's way (black canvas, every framed piece pasted in row-major order), on every path:
whole frames and changed cells, one call or split across threads, cached or streamed stores; and
the parts splitter of core/threads.py it runs on."""
from __future__ import annotations

import numpy as np
import pytest

from visgym.core import threads
from visgym.core.threads import ProcessThreadPool, contiguous_parts
from visgym.render import blit, grid


def _split(total, parts):
    base, extra = divmod(total, parts)
    return [(i * base + min(i, extra), base + (i < extra)) for i in range(parts)]


def reference_paste(picture, R, C, border, current, target):
    """The reference's frame: black, then piece current[p] (crop inv[current[p]] of the picture,
    framed in white) pasted at grid position p's cell, row-major, later pastes on top."""
    h, w = picture.shape[:2]
    frame = np.zeros((h + 2 * R * border, w + 2 * C * border, 3), np.uint8)
    inv = np.argsort(target)
    cols, rows = _split(w, C), _split(h, R)
    for p in range(R * C):
        r, c = divmod(p, C)
        dx = cols[c][0] + 2 * border * c
        dy = rows[r][0] + 2 * border * r
        k = inv[current[p]]
        sx, pw = cols[k % C]
        sy, ph = rows[k // C]
        piece = np.full((ph + 2 * border, pw + 2 * border, 3), 255, np.uint8)
        piece[border:border + ph, border:border + pw] = picture[sy:sy + ph, sx:sx + pw]
        y1, x1 = min(dy + piece.shape[0], frame.shape[0]), min(dx + piece.shape[1], frame.shape[1])
        frame[dy:y1, dx:x1] = piece[:y1 - dy, :x1 - dx]
    return frame


class Batch:
    def __init__(self, rng, B, R, C, border, tiny=False):
        self.R, self.C, self.border, self.n = R, C, border, R * C
        hi = (R + 1, C + 1) if tiny else (60, 70)
        self.pictures = [rng.integers(0, 256, (int(rng.integers(1 if tiny else R, hi[0])),
                                               int(rng.integers(1 if tiny else C, hi[1])), 3),
                                      np.uint8) for _ in range(B)]
        self.atlas = np.concatenate([p.reshape(-1) for p in self.pictures])
        self.slot_off = np.cumsum([0] + [p.size for p in self.pictures])[:B].astype(np.int64)
        self.slot_of = np.arange(B, dtype=np.int64)
        self.image_id = np.arange(B, dtype=np.int64)
        self.hw = np.array([p.shape[:2] for p in self.pictures], np.int32)
        self.current = np.stack([rng.permutation(self.n) for _ in range(B)]).astype(np.int32)
        self.target = np.stack([rng.permutation(self.n) for _ in range(B)]).astype(np.int32)
        H = int(self.hw[:, 0].max()) + 2 * R * border + 2
        W = int(self.hw[:, 1].max()) + 2 * C * border + 3
        self.frames = rng.integers(0, 256, (B, H, W, 3), np.uint8)

    def draw(self, rows, changed=None, frames=None):
        grid.draw_grid(self.frames if frames is None else frames, self.atlas, self.slot_off,
                       self.slot_of, self.image_id, self.hw, self.current, self.target, self.R,
                       self.C, self.border, rows, changed)

    def check(self, rows, where):
        for b in rows:
            expected = reference_paste(self.pictures[b], self.R, self.C, self.border,
                                       self.current[b], self.target[b])
            h, w = expected.shape[:2]
            np.testing.assert_array_equal(self.frames[b, :h, :w], expected,
                                          err_msg=f"{where}: episode {b}")


@pytest.fixture(params=["one call", "threads and streamed stores"])
def path(request, monkeypatch):
    if request.param != "one call":
        monkeypatch.setattr(grid, "SMALL_CALL", 1)
        monkeypatch.setattr(threads, "THREAD_BYTES", 0)
        monkeypatch.setattr(blit, "STREAM_BYTES", 0)
    return request.param


@pytest.mark.parametrize("tiny", [False, True], ids=["pictures", "crops under a pixel"])
def test_whole_frames_and_changed_cells_equal_the_reference_paste(path, tiny):
    rng = np.random.default_rng(11 if tiny else 7)
    for trial in range(40):
        R, C = int(rng.integers(1, 6)), int(rng.integers(1, 6))
        if R * C == 1:
            C = 2
        batch = Batch(rng, 6, R, C, int(rng.integers(0, 4)), tiny=tiny)
        rows = np.arange(6)
        outside = batch.frames.copy()
        batch.draw(rows)
        batch.check(rows, f"trial {trial} full")
        # Outside each episode's frame nothing is touched.
        for b in rows:
            h, w = batch.hw[b] + 2 * np.array([R, C]) * batch.border
            np.testing.assert_array_equal(batch.frames[b, h:], outside[b, h:])
            np.testing.assert_array_equal(batch.frames[b, :, w:], outside[b, :, w:])
        for step in range(3):
            new = batch.current.copy()
            for b in range(6):   # a swap or a whole new order
                if rng.random() < 0.5:
                    i, j = rng.integers(0, batch.n, 2)
                    new[b, [i, j]] = new[b, [j, i]]
                else:
                    new[b] = rng.permutation(batch.n)
            changed = new != batch.current
            batch.current[:] = new
            moved = rng.permutation(6)[:4]
            batch.draw(moved, changed)
            batch.check(moved, f"trial {trial} step {step}")
            batch.draw(rows, changed)   # the rest catch up
            batch.check(rows, f"trial {trial} step {step} (all)")


def test_bad_arguments_raise_and_draw_nothing():
    rng = np.random.default_rng(3)
    batch = Batch(rng, 4, 2, 3, 1)
    before = batch.frames.copy()
    with pytest.raises(ValueError, match="rows"):
        batch.draw(np.array([0, 1, 7]))
    batch.current[2, 0] = 99
    with pytest.raises(ValueError, match="rows\\[2\\]"):
        batch.draw(np.arange(4))
    batch.current[2, 0] = 0
    batch.slot_off[1] = batch.atlas.size   # picture 1 would read past the atlas
    with pytest.raises(ValueError, match="rows\\[1\\]"):
        batch.draw(np.arange(4))
    np.testing.assert_array_equal(batch.frames, before)
    small = np.zeros((4, 5, 5, 3), np.uint8)   # frames too small for the pictures
    with pytest.raises(ValueError):
        batch.draw(np.arange(4), frames=small)
    with pytest.raises(ValueError, match="frames"):
        batch.draw(np.arange(4), frames=np.zeros((4, 80, 80), np.uint8))


def test_contiguous_parts_balance_the_weights():
    assert contiguous_parts([1] * 10, 2) == [slice(0, 5), slice(5, 10)]
    assert contiguous_parts([1, 1, 1, 1, 1, 10], 2) == [slice(0, 5), slice(5, 6)]
    assert contiguous_parts([], 2) == []
    assert contiguous_parts([3], 4) == [slice(0, 1)]
    rng = np.random.default_rng(0)
    for _ in range(200):
        n, k = int(rng.integers(1, 40)), int(rng.integers(1, 5))
        weights = rng.integers(0, 100, n).tolist()
        parts = contiguous_parts(weights, k)
        assert parts[0].start == 0 and parts[-1].stop == n
        assert all(a.stop == b.start for a, b in zip(parts, parts[1:]))
        assert all(p.stop > p.start for p in parts) and len(parts) <= k


def test_run_parts_covers_every_row_once_and_raises_a_parts_error():
    pool = ProcessThreadPool(2, "test-parts")
    seen = []
    rows = np.arange(10)
    pool.run_parts(lambda part: seen.extend(part.tolist()), rows, [1] * 10, 0)
    assert sorted(seen) == rows.tolist()
    done = []

    def fail_first(part):
        if part[0] == 0:
            raise RuntimeError("part failed")
        done.append(part.tolist())

    with pytest.raises(RuntimeError, match="part failed"):
        pool.run_parts(fail_first, rows, [1] * 10, 0)
    assert done == [list(range(5, 10))]   # the other part still ran to its end
    pool.shutdown()



def _reference_tiles(tiles, order, labels, label_w):
    """Slot 0 shows tile 0, slot s + 1 tile order[s] + 1 with label s over its bottom-right."""
    n, T = order.shape[0], tiles.shape[1]
    lh, lw_max = labels.shape[1], labels.shape[2]
    frame = np.zeros((T, (n + 1) * T, 3), np.uint8)
    frame[:, :T] = tiles[0]
    for s in range(n):
        x0 = (s + 1) * T
        frame[:, x0:x0 + T] = tiles[order[s] + 1]
        w = int(label_w[s])
        if w:
            frame[T - lh:, x0 + T - w:x0 + T] = labels[s, :, lw_max - w:]
    return frame


def test_tile_rows_equal_the_reference_on_every_path(path):
    rng = np.random.default_rng(4)
    B, n, T = 5, 4, 24
    tiles = rng.integers(0, 256, (B, n + 1, T, T, 3), np.uint8)
    labels = rng.integers(0, 256, (n, 9, 13, 3), np.uint8)
    label_w = np.array([13, 7, 0, 10], np.int64)
    frames = np.zeros((B, T, (n + 1) * T, 3), np.uint8)
    flat = frames.reshape(B, T, -1)
    flat_tiles, flat_labels = tiles.reshape(B, n + 1, T, T * 3), labels.reshape(n, 9, -1)
    order = np.stack([rng.permutation(n) for _ in range(B)]).astype(np.int32)
    drawn = np.full((B, n), -1, np.int32)
    blit.draw_tiles(flat, flat_tiles, order, drawn, flat_labels, label_w, np.arange(B), True)
    for step in range(6):
        for b in range(B):
            np.testing.assert_array_equal(frames[b], _reference_tiles(tiles[b], order[b], labels,
                                                                      label_w), f"step {step}")
        np.testing.assert_array_equal(drawn, order)
        for b in range(B):   # a swap, or a whole new order
            if rng.random() < 0.5:
                i, j = rng.integers(0, n, 2)
                order[b, [i, j]] = order[b, [j, i]]
            else:
                order[b] = rng.permutation(n)
        blit.draw_tiles(flat, flat_tiles, order, drawn, flat_labels, label_w, np.arange(B), False)
    before = frames.copy()
    order[3, 0] = n   # not a tile
    with pytest.raises(ValueError, match="rows\\[3\\]"):
        blit.draw_tiles(flat, flat_tiles, order, drawn, flat_labels, label_w, np.arange(B), True)
    np.testing.assert_array_equal(frames, before)


def test_clear_outside_equals_the_default_padding_clear():
    """blit.clear_outside (compiled, prefetched strips, streamed rows) leaves the frames exactly
    as Family.clear_padding's NumPy slices do, on frames whose pixels outside the old size are
    zero (BatchEnv's invariant); bad entries raise and clear nothing."""
    from visgym.core.family import Family

    rng = np.random.default_rng(6)
    B, H, W = 6, 70, 90
    for trial in range(30):
        old = np.stack([rng.integers(1, H + 1, B), rng.integers(1, W + 1, B)], axis=1)
        sizes = np.stack([rng.integers(1, H + 1, B), rng.integers(1, W + 1, B)], axis=1)
        frames = np.zeros((B, H, W, 3), np.uint8)
        for b, (h, w) in enumerate(old):
            frames[b, :h, :w] = rng.integers(1, 256, (h, w, 3))
        rows = rng.permutation(B)[:4]
        want = frames.copy()
        Family.clear_padding(None, want, rows, sizes[rows], old[rows])
        blit.clear_outside(frames, rows, sizes[rows], old[rows])
        np.testing.assert_array_equal(frames, want, f"trial {trial}")
    before = frames.copy()
    with pytest.raises(ValueError, match="rows\\[1\\]"):
        blit.clear_outside(frames, [0, 1], [[5, 5], [H + 1, 5]], [[9, 9], [9, 9]])
    np.testing.assert_array_equal(frames, before)


def test_copy_frame_writes_the_picture_and_nothing_else():
    rng = np.random.default_rng(9)
    frames = rng.integers(0, 256, (3, 40, 70, 3), np.uint8)
    for h, w in ((40, 70), (17, 33), (1, 1), (0, 5)):
        picture = rng.integers(0, 256, (h, w, 3), np.uint8)
        want = frames.copy()
        want[1, :h, :w] = picture
        src = np.concatenate([picture.reshape(-1), np.zeros(7, np.uint8)])   # longer is fine
        blit.copy_frame(frames, 1, src, h, w)
        np.testing.assert_array_equal(frames, want)
    for x, h, w, stream in ((37, 40, 33, True), (1, 9, 69, False), (20, 3, 50, True)):
        picture = rng.integers(0, 256, (h, w, 3), np.uint8)
        want = frames.copy()
        want[2, :h, x:x + w] = picture
        blit.copy_frame(frames, 2, picture.reshape(-1), h, w, x=x, stream=stream)
        np.testing.assert_array_equal(frames, want)
    before = frames.copy()
    for b, h, w, n, x in ((3, 1, 1, 3, 0), (0, 41, 1, 200, 0), (0, 1, 71, 300, 0),
                          (0, 10, 10, 299, 0), (0, 1, 10, 30, 61), (0, 1, 1, 3, -1)):
        with pytest.raises(ValueError, match="copy_frame"):
            blit.copy_frame(frames, b, np.zeros(n, np.uint8), h, w, x=x)
    np.testing.assert_array_equal(frames, before)
