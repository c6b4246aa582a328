# cython: language_level=3
"""Tile compositing: frames assembled from a precomputed atlas of equal-size RGB tiles.

Grid families (mazes, boards) draw nothing per step: every cell's picture is one tile of an atlas
built once, and a frame is a grid of tile copies (Craftax's texture-atlas idea). A full frame is
``blit_tilemaps``; after a step only the cells that changed are copied with ``blit_tiles``, which
keeps the cost per step at a few kilobytes regardless of the frame size. Both release the GIL and
clip tiles that fall partly or wholly outside the frame.
"""
from libc.stdlib cimport free, malloc
from libc.string cimport memcmp, memcpy

ctypedef unsigned char u8


def blit_tiles(u8[:, :, :, ::1] frames, long long[::1] idx, u8[:, :, :, ::1] tiles,
               int[::1] tile_ids, int[::1] x, int[::1] y):
    """Copy tile tile_ids[n] with its top-left corner at (x[n], y[n]) of frame idx[n].

    Returns the number of entries whose frame or tile index is out of range; when there are
    any, nothing is drawn (the Python face raises)."""
    cdef Py_ssize_t n, row, b, t, x0, y0, cx0, cx1, cy0, cy1, bad = 0
    cdef Py_ssize_t H = frames.shape[1], W = frames.shape[2]
    cdef Py_ssize_t th = tiles.shape[1], tw = tiles.shape[2], T = tiles.shape[0]
    cdef Py_ssize_t B = frames.shape[0]
    cdef Py_ssize_t N = idx.shape[0]
    if tile_ids.shape[0] != N or x.shape[0] != N or y.shape[0] != N:
        raise ValueError(f"tile_ids, x, y: expected {N} entries each (one per idx), got "
                         f"{tile_ids.shape[0]}, {x.shape[0]}, {y.shape[0]}")
    with nogil:
        for n in range(N):
            if idx[n] < 0 or idx[n] >= B or tile_ids[n] < 0 or tile_ids[n] >= T:
                bad += 1
        if bad:
            N = 0
        for n in range(N):
            b = idx[n]
            t = tile_ids[n]
            x0 = x[n]
            y0 = y[n]
            cx0 = x0 if x0 > 0 else 0
            cy0 = y0 if y0 > 0 else 0
            cx1 = x0 + tw if x0 + tw < W else W
            cy1 = y0 + th if y0 + th < H else H
            if cx1 <= cx0 or cy1 <= cy0:
                continue
            for row in range(cy0, cy1):
                memcpy(&frames[b, row, cx0, 0], &tiles[t, row - y0, cx0 - x0, 0],
                       (cx1 - cx0) * 3)
    return bad


cdef bint _rows_equal(u8[:, :, :, ::1] tiles, Py_ssize_t t) noexcept nogil:
    """True if every pixel row of tile t equals its first row (a flat-coloured tile)."""
    cdef Py_ssize_t row, n = tiles.shape[2] * 3
    cdef u8* first = &tiles[t, 0, 0, 0]
    for row in range(1, tiles.shape[1]):
        if memcmp(first, &tiles[t, row, 0, 0], n) != 0:
            return False
    return True


def blit_tilemaps(u8[:, :, :, ::1] frames, long long[::1] idx, u8[:, :, :, ::1] tiles,
                  int[:, :, ::1] tilemaps):
    """Draw tilemaps[n] (rows x cols of tile ids) over the whole of frame idx[n].

    A band of cells whose tiles are all row-uniform (flat colours, the common case) is drawn as
    one pixel row copied down the band, instead of one small copy per cell and pixel row.
    """
    cdef Py_ssize_t n, r, c, row, b, t, x0, y0, w, band_h
    cdef Py_ssize_t H = frames.shape[1], W = frames.shape[2], B = frames.shape[0]
    cdef Py_ssize_t th = tiles.shape[1], tw = tiles.shape[2], T = tiles.shape[0]
    cdef Py_ssize_t rows = tilemaps.shape[1], cols = tilemaps.shape[2]
    cdef bint band_uniform
    cdef signed char* uniform = <signed char*> malloc(T if T > 0 else 1)
    if uniform == NULL:
        raise MemoryError()
    try:
        with nogil:
            for t in range(T):
                uniform[t] = -1  # not yet known
            for n in range(idx.shape[0]):
                b = idx[n]
                if b < 0 or b >= B:
                    continue
                for r in range(rows):
                    y0 = r * th
                    if y0 >= H:
                        break
                    band_h = th if y0 + th <= H else H - y0
                    band_uniform = True
                    for c in range(cols):
                        x0 = c * tw
                        if x0 >= W:
                            break
                        t = tilemaps[n, r, c]
                        if t < 0 or t >= T:
                            band_uniform = False
                            continue
                        if uniform[t] < 0:
                            uniform[t] = 1 if _rows_equal(tiles, t) else 0
                        w = tw if x0 + tw <= W else W - x0
                        if uniform[t]:
                            memcpy(&frames[b, y0, x0, 0], &tiles[t, 0, 0, 0], w * 3)
                        else:
                            band_uniform = False
                            for row in range(band_h):
                                memcpy(&frames[b, y0 + row, x0, 0], &tiles[t, row, 0, 0], w * 3)
                    if band_uniform:
                        for row in range(1, band_h):
                            memcpy(&frames[b, y0 + row, 0, 0], &frames[b, y0, 0, 0],
                                   (cols * tw if cols * tw <= W else W) * 3)
                    else:
                        # Rows 1.. of the uniform tiles in a mixed band still need copying.
                        for c in range(cols):
                            x0 = c * tw
                            if x0 >= W:
                                break
                            t = tilemaps[n, r, c]
                            if t < 0 or t >= T or not uniform[t]:
                                continue
                            w = tw if x0 + tw <= W else W - x0
                            for row in range(1, band_h):
                                memcpy(&frames[b, y0 + row, x0, 0], &frames[b, y0, x0, 0], w * 3)
    finally:
        free(uniform)
