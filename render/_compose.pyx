# cython: language_level=3
"""Rectangle compositing for the photo puzzle families (jigsaw, zoom_in_puzzle, patch_reassembly).

Frames are assembled from an image table: one uint8 atlas (AH, AW, 3) holding every source image
of the batch at its own offset, with ``images[k] = (ox, oy, w, h)`` the place of image k. A blit
copies the source rectangle (sx, sy, sw, sh) of image k (coordinates relative to the image) to
(dx, dy) of frame b, clipped to the frame. A step's redraw is the list of the rectangles it
changed, so a step costs a few row copies per changed piece.

Every entry is checked in a pre-pass before anything is drawn: frame index, image id, the image's
place inside the atlas and the source rectangle inside the image. With any bad entry nothing is
drawn and the number of bad entries is returned (the Python face in render/compose.py raises).
"""
from libc.string cimport memcpy

ctypedef unsigned char u8


cdef inline bint _image_ok(const int[:, ::1] images, Py_ssize_t k, Py_ssize_t AH,
                           Py_ssize_t AW) noexcept nogil:
    cdef Py_ssize_t ox = images[k, 0], oy = images[k, 1], w = images[k, 2], h = images[k, 3]
    return ox >= 0 and oy >= 0 and w >= 0 and h >= 0 and ox + w <= AW and oy + h <= AH


def blit_rects(u8[:, :, :, ::1] frames, const long long[::1] idx, const u8[:, :, ::1] atlas,
               const int[:, ::1] images, const int[::1] image_ids, const int[::1] sx,
               const int[::1] sy, const int[::1] sw, const int[::1] sh, const int[::1] dx,
               const int[::1] dy):
    """Copy rectangle (sx, sy, sw, sh) of image image_ids[n] to (dx[n], dy[n]) of frame idx[n].

    Returns the number of bad entries (nothing is drawn when there is any)."""
    cdef Py_ssize_t n, row, b, k, x0, y0, cx0, cx1, cy0, cy1, bad = 0
    cdef Py_ssize_t B = frames.shape[0], H = frames.shape[1], W = frames.shape[2]
    cdef Py_ssize_t AH = atlas.shape[0], AW = atlas.shape[1], K = images.shape[0]
    cdef Py_ssize_t N = idx.shape[0], ax, ay
    if images.shape[1] != 4:
        raise ValueError(f"images: expected shape (K, 4) of (ox, oy, w, h), got "
                         f"({images.shape[0]}, {images.shape[1]})")
    for name, arr in (("image_ids", image_ids), ("sx", sx), ("sy", sy), ("sw", sw), ("sh", sh),
                      ("dx", dx), ("dy", dy)):
        if arr.shape[0] != N:
            raise ValueError(f"{name}: expected {N} entries (one per idx), got {arr.shape[0]}")
    with nogil:
        for n in range(N):
            k = image_ids[n]
            if idx[n] < 0 or idx[n] >= B or k < 0 or k >= K:
                bad += 1
            elif not _image_ok(images, k, AH, AW):
                bad += 1
            elif (sx[n] < 0 or sy[n] < 0 or sw[n] < 0 or sh[n] < 0
                  or <Py_ssize_t>sx[n] + sw[n] > images[k, 2]
                  or <Py_ssize_t>sy[n] + sh[n] > images[k, 3]):
                bad += 1
        if bad:
            N = 0
        for n in range(N):
            b = idx[n]
            k = image_ids[n]
            x0 = dx[n]
            y0 = dy[n]
            cx0 = x0 if x0 > 0 else 0
            cy0 = y0 if y0 > 0 else 0
            cx1 = x0 + sw[n] if x0 + sw[n] < W else W
            cy1 = y0 + sh[n] if y0 + sh[n] < H else H
            if cx1 <= cx0 or cy1 <= cy0:
                continue
            ax = images[k, 0] + sx[n] + (cx0 - x0)
            ay = images[k, 1] + sy[n] - y0
            for row in range(cy0, cy1):
                memcpy(&frames[b, row, cx0, 0], &atlas[ay + row, ax, 0], (cx1 - cx0) * 3)
    return bad


def paste_clipped(u8[:, :, :, ::1] frames, Py_ssize_t b, const u8[:, :, ::1] tile,
                  Py_ssize_t x0, Py_ssize_t y0):
    """Copy a whole (h, w, 3) tile to (x0, y0) of frame b, clipped to the frame (b checked by
    the caller)."""
    cdef Py_ssize_t H = frames.shape[1], W = frames.shape[2], row
    cdef Py_ssize_t h = tile.shape[0], w = tile.shape[1]
    cdef Py_ssize_t cx0 = x0 if x0 > 0 else 0, cy0 = y0 if y0 > 0 else 0
    cdef Py_ssize_t cx1 = x0 + w if x0 + w < W else W, cy1 = y0 + h if y0 + h < H else H
    if b < 0 or b >= frames.shape[0]:
        raise ValueError(f"frame index {b} out of range [0, {frames.shape[0]})")
    if cx1 <= cx0 or cy1 <= cy0:
        return
    with nogil:
        for row in range(cy0, cy1):
            memcpy(&frames[b, row, cx0, 0], &tile[row - y0, cx0 - x0, 0], (cx1 - cx0) * 3)
