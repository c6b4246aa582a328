# cython: language_level=3
"""Memory-bound frame writes: grids of framed picture pieces (jigsaw).

``draw_grid`` paints grids of framed picture pieces: a picture cut into an R x C grid of crops,
each crop framed by ``border`` white pixels, pasted in a permuted order on black.

Geometry (kernels/jigsaw.py's module docstring has the whole of it): column j of a W-pixel-wide
picture is ``W // C`` pixels plus one for the first ``W % C`` columns (rows likewise); grid
position p's framed cell starts at the widths of the columns before it plus ``2 * border`` per
column; the piece shown there keeps its own crop's size, so unequal crops overlap the next cell by
a pixel (later pastes win, pastes go row-major) or leave a black pixel. Every paint repaints a
rectangle of the frame exactly as the full paste leaves it, row by row: each frame row of the
rectangle is written once, left to right, from the pieces that reach it.

Writes are memory-bound (a 3 x 3 reorder rewrites ~0.45 MB of a frame). With ``stream`` on, each
frame row of a painted rectangle is composed in a scratch row (in the cache) and written out in
one run whose whole 64-byte lines go through SSE2 non-temporal stores (``copy_run``): no read of
a line about to be overwritten, and no line split between streamed and cached stores (which is
slower than either). On the 2-core machine a whole-line streamed write is ~1.7x a cached one on
one core and ~2.2x on two (a B=256 redraw of every cell: 10.3 ms cached, 6.5 ms streamed, on two
threads). Streamed lines leave the cache, which only pays when far more is written than the
caches hold, so callers turn ``stream`` on for big batches.
"""
from libc.stdint cimport int32_t, int64_t, uint8_t, uintptr_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy, memset

cdef extern from *:
    """
    #if defined(__GNUC__)
    #define visgym_prefetch_write(p) __builtin_prefetch((p), 1, 3)
    #else
    #define visgym_prefetch_write(p) ((void)(p))
    #endif
    #if defined(__SSE2__)
    #include <emmintrin.h>
    #define VISGYM_STREAM 1
    static inline void visgym_copy_lines(uint8_t *d, const uint8_t *s, Py_ssize_t n) {
        /* d is 64-byte aligned, n a multiple of 64 */
        for (Py_ssize_t i = 0; i < n; i += 64) {
            __m128i a = _mm_loadu_si128((const __m128i *)(s + i));
            __m128i b = _mm_loadu_si128((const __m128i *)(s + i + 16));
            __m128i c = _mm_loadu_si128((const __m128i *)(s + i + 32));
            __m128i e = _mm_loadu_si128((const __m128i *)(s + i + 48));
            _mm_stream_si128((__m128i *)(d + i), a);
            _mm_stream_si128((__m128i *)(d + i + 16), b);
            _mm_stream_si128((__m128i *)(d + i + 32), c);
            _mm_stream_si128((__m128i *)(d + i + 48), e);
        }
    }
    static inline void visgym_fill_lines(uint8_t *d, uint8_t value, Py_ssize_t n) {
        __m128i v = _mm_set1_epi8((char)value);
        for (Py_ssize_t i = 0; i < n; i += 64) {
            _mm_stream_si128((__m128i *)(d + i), v);
            _mm_stream_si128((__m128i *)(d + i + 16), v);
            _mm_stream_si128((__m128i *)(d + i + 32), v);
            _mm_stream_si128((__m128i *)(d + i + 48), v);
        }
    }
    static inline void visgym_store_fence(void) { _mm_sfence(); }
    #else
    #define VISGYM_STREAM 0
    static inline void visgym_copy_lines(uint8_t *d, const uint8_t *s, Py_ssize_t n) {
        memcpy(d, s, (size_t)n);
    }
    static inline void visgym_fill_lines(uint8_t *d, uint8_t value, Py_ssize_t n) {
        memset(d, value, (size_t)n);
    }
    static inline void visgym_store_fence(void) {}
    #endif
    """
    void visgym_copy_lines(uint8_t* d, const uint8_t* s, Py_ssize_t n) noexcept nogil
    void visgym_fill_lines(uint8_t* d, uint8_t value, Py_ssize_t n) noexcept nogil
    void visgym_store_fence() noexcept nogil
    void visgym_prefetch_write(const uint8_t* p) noexcept nogil

# Runs shorter than this are written with ordinary stores even when streaming (a run of a few
# lines gains little and splits its lines between the two kinds of store).
DEF STREAM_MIN = 256


cdef inline void copy_run(uint8_t* d, const uint8_t* s, Py_ssize_t n, bint stream) noexcept nogil:
    cdef Py_ssize_t head, body
    if n <= 0:
        return
    if not stream or n < STREAM_MIN:
        memcpy(d, s, n)
        return
    head = (64 - (<uintptr_t>d & 63)) & 63
    body = (n - head) & ~(<Py_ssize_t>63)
    memcpy(d, s, head)
    visgym_copy_lines(d + head, s + head, body)
    memcpy(d + head + body, s + head + body, n - head - body)


cdef inline void fill_run(uint8_t* d, uint8_t value, Py_ssize_t n, bint stream) noexcept nogil:
    cdef Py_ssize_t head, body
    if n <= 0:
        return
    if not stream or n < STREAM_MIN:
        memset(d, value, n)
        return
    head = (64 - (<uintptr_t>d & 63)) & 63
    body = (n - head) & ~(<Py_ssize_t>63)
    memset(d, value, head)
    visgym_fill_lines(d + head, value, body)
    memset(d + head + body, value, n - head - body)


cdef inline void span(Py_ssize_t i, Py_ssize_t total, Py_ssize_t parts, Py_ssize_t* start,
                      Py_ssize_t* length) noexcept nogil:
    """Part i of ``total`` pixels split into ``parts``, the first ``total % parts`` one longer."""
    cdef Py_ssize_t base = total // parts, extra = total % parts
    start[0] = i * base + (i if i < extra else extra)
    length[0] = base + (1 if i < extra else 0)


def copy_frame(uint8_t[:, ::1] frames, Py_ssize_t stride, Py_ssize_t b,
               const uint8_t[::1] src, Py_ssize_t h, Py_ssize_t w, Py_ssize_t x=0,
               bint stream=True):
    """Copy an h x w RGB picture (``src``, rows of ``w * 3`` bytes) into frame b (rows of
    ``stride`` bytes) at column x of its top rows; with ``stream`` each row's whole 64-byte
    lines go through streamed stores: a picture drawn in a cached scratch buffer, bound for a
    frame that is not in the cache. Only the picture's own bytes are written, so two threads
    may fill the two sides of one frame."""
    cdef Py_ssize_t y
    if b < 0 or b >= frames.shape[0] or h < 0 or w < 0 or x < 0 or (x + w) * 3 > stride \
            or h * stride > frames.shape[1] or h * w * 3 > src.shape[0]:
        raise ValueError(f"copy_frame: frame {b} of {frames.shape[0]}, picture {h} x {w} at "
                         f"column {x} does not fit (frame bytes {frames.shape[1]}, stride "
                         f"{stride}, source {src.shape[0]} bytes)")
    with nogil:
        for y in range(h):
            copy_run(&frames[b, y * stride + x * 3], &src[y * w * 3], w * 3, stream)
        if stream:
            visgym_store_fence()


def clear_outside(uint8_t[:, ::1] frames, Py_ssize_t stride, const int64_t[::1] rows,
                  const int64_t[:, ::1] sizes, const int64_t[:, ::1] old):
    """Zero what frame ``rows[i]`` (rows of ``stride`` bytes) showed inside its old size
    ``old[i]`` = (h, w) and outside its new size ``sizes[i]``: the rows below the new height and
    the columns right of the new width. The strip right of the new width is a short run in each
    of many rows of a frame that is usually not in the cache, so each row's lines are
    prefetched for writing a few rows ahead (the stores would otherwise wait for one row's lines
    at a time); the rows below are cleared whole, in one streamed run (past the old width they
    are zero already). Every entry is checked before anything is written (ValueError naming
    it)."""
    cdef Py_ssize_t i, y, b, h, w, ho, wo, top, B = frames.shape[0], F = frames.shape[1]
    cdef Py_ssize_t bad = -1, ahead = 8, t
    cdef uint8_t* row
    if sizes.shape[0] != rows.shape[0] or old.shape[0] != rows.shape[0] \
            or sizes.shape[1] != 2 or old.shape[1] != 2:
        raise ValueError(f"sizes/old: expected ({rows.shape[0]}, 2) each")
    for i in range(rows.shape[0]):
        b, h, w, ho, wo = rows[i], sizes[i, 0], sizes[i, 1], old[i, 0], old[i, 1]
        if b < 0 or b >= B or min(h, w, ho, wo) < 0 or max(w, wo) * 3 > stride \
                or max(h, ho) * stride > F:
            bad = i
            break
    if bad >= 0:
        raise ValueError(f"rows[{bad}]: frame {rows[bad]} with sizes ({sizes[bad, 0]}, "
                         f"{sizes[bad, 1]}) / ({old[bad, 0]}, {old[bad, 1]}) does not fit {B} "
                         f"frames of {F} bytes with rows of {stride}")
    with nogil:
        for i in range(rows.shape[0]):
            b, h, w, ho, wo = rows[i], sizes[i, 0], sizes[i, 1], old[i, 0], old[i, 1]
            if wo > w:
                top = h if h < ho else ho
                for y in range(top):
                    if y + ahead < top:
                        row = &frames[b, (y + ahead) * stride + w * 3]
                        for t in range(0, (wo - w) * 3, 64):
                            visgym_prefetch_write(row + t)
                    memset(&frames[b, y * stride + w * 3], 0, (wo - w) * 3)
            if ho > h:
                # Whole rows (past the old width they are zero already): one run, streamed.
                fill_run(&frames[b, h * stride], 0, (ho - h) * stride, True)
        visgym_store_fence()


DEF MAX_PIECES = 256


cdef inline void piece_row(uint8_t* row, const uint8_t* src, Py_ssize_t lo, Py_ssize_t hi,
                           Py_ssize_t dx, Py_ssize_t pw, Py_ssize_t border, bint inside,
                           bint stream) noexcept nogil:
    """Columns [lo, hi) of one frame row of a framed piece whose frame starts at column dx:
    white border, then the crop row ``src`` (its column 0 at frame column dx + border) when
    ``inside`` (the row is one of the crop's), else white all along."""
    cdef Py_ssize_t ilo, ihi
    if hi <= lo:
        return
    if not inside:
        fill_run(row + lo * 3, 255, (hi - lo) * 3, stream)
        return
    ilo = dx + border
    ihi = dx + border + pw
    if ilo < lo:
        ilo = lo
    if ihi > hi:
        ihi = hi
    if ihi < ilo:
        ihi = ilo
    if ilo > lo:
        fill_run(row + lo * 3, 255, (ilo - lo) * 3, stream)
    if ihi > ilo:
        copy_run(row + ilo * 3, src + (ilo - dx - border) * 3, (ihi - ilo) * 3, stream)
    if hi > ihi:
        fill_run(row + ihi * 3, 255, (hi - ihi) * 3, stream)


cdef void paint(uint8_t* fr, Py_ssize_t stride, const uint8_t* pic, Py_ssize_t h, Py_ssize_t w,
                Py_ssize_t R, Py_ssize_t C, Py_ssize_t border, const int32_t* current,
                const Py_ssize_t* inv, Py_ssize_t x0, Py_ssize_t y0, Py_ssize_t x1,
                Py_ssize_t y1, uint8_t* rowbuf) noexcept nogil:
    """Repaint frame rectangle [x0, x1) x [y0, y1) (inside the episode's frame) as the full
    paste leaves it. With ``rowbuf`` (a scratch row of ``stride`` bytes) each row is composed
    there and streamed out in one run (whole lines, no line split between kinds of store);
    without it rows are written in place with cached stores.

    A frame row that one grid row's pieces cover is written once, left to right: with every crop
    at least a pixel wide, piece c can only overlap piece c + 1 (by the one pixel a wider crop
    spills), where the later piece wins, so the row is piece ranges clipped at the next piece's
    start, with black between them. A frame row that two grid rows reach (a taller crop spilling
    into the next grid row) is painted as the paste does it: black, then each piece in order."""
    cdef Py_ssize_t q, r, c, y, k, v, ax, hi, lo, cx, cw, cy, ch, ph, top, bottom, nrows
    cdef Py_ssize_t first, last, b2 = 2 * border
    cdef bint fast = w >= C and h >= R
    cdef Py_ssize_t pdx[MAX_PIECES]
    cdef Py_ssize_t psx[MAX_PIECES]
    cdef Py_ssize_t psy[MAX_PIECES]
    cdef Py_ssize_t pph[MAX_PIECES]
    cdef Py_ssize_t ppw[MAX_PIECES]
    cdef Py_ssize_t rtop[MAX_PIECES]
    cdef Py_ssize_t rbot[MAX_PIECES]
    cdef uint8_t* row
    cdef bint stream = False   # the runs inside a row: cached (in place, or into rowbuf)
    if x1 <= x0 or y1 <= y0:
        return
    for r in range(R):
        span(r, h, R, &cy, &ch)
        rtop[r] = cy + b2 * r
        rbot[r] = rtop[r]
        for c in range(C):
            q = r * C + c
            span(c, w, C, &cx, &cw)
            pdx[q] = cx + b2 * c
            k = inv[current[q]]
            span(k % C, w, C, &psx[q], &ppw[q])
            span(k // C, h, R, &psy[q], &pph[q])
            if rtop[r] + pph[q] + b2 > rbot[r]:
                rbot[r] = rtop[r] + pph[q] + b2
    first = 0
    for y in range(y0, y1):
        row = fr + y * stride
        while first < R and rbot[first] <= y:
            first += 1
        nrows = 0
        last = first
        while last < R and rtop[last] <= y:
            if y < rbot[last]:
                nrows += 1
            last += 1
        if nrows <= 1 and fast:
            if rowbuf != NULL:
                row = rowbuf
            ax = x0   # columns [x0, ax) of this row are written
            for r in range(first, last):
                if y >= rbot[r]:
                    continue
                top = rtop[r]
                for c in range(C):
                    q = r * C + c
                    ph = pph[q]
                    if y >= top + ph + b2:
                        continue
                    lo = pdx[q] if pdx[q] > ax else ax
                    hi = pdx[q] + ppw[q] + b2
                    if hi > x1:
                        hi = x1
                    # The next piece of the grid row wins the pixel this one spills into it.
                    if c + 1 < C and y < top + pph[q + 1] + b2 and pdx[q + 1] < hi:
                        hi = pdx[q + 1]
                    if hi <= lo:
                        continue
                    if lo > ax:
                        fill_run(row + ax * 3, 0, (lo - ax) * 3, stream)
                    v = y - top - border
                    piece_row(row, pic + ((psy[q] + v) * w + psx[q]) * 3, lo, hi, pdx[q],
                              ppw[q], border, 0 <= v < ph, stream)
                    ax = hi
            if x1 > ax:
                fill_run(row + ax * 3, 0, (x1 - ax) * 3, stream)
            if rowbuf != NULL:
                if y + 4 < y1:   # the partial lines at a later row's ends take cached stores
                    visgym_prefetch_write(fr + (y + 4) * stride + x0 * 3)
                    visgym_prefetch_write(fr + (y + 4) * stride + x1 * 3 - 1)
                copy_run(fr + y * stride + x0 * 3, rowbuf + x0 * 3, (x1 - x0) * 3, True)
            continue
        # Overlapping grid rows (or crops under a pixel): black, then the pastes in order.
        fill_run(row + x0 * 3, 0, (x1 - x0) * 3, False)
        for r in range(first, last):
            top = rtop[r]
            for c in range(C):
                q = r * C + c
                ph = pph[q]
                if y < top or y >= top + ph + b2:
                    continue
                lo = pdx[q] if pdx[q] > x0 else x0
                hi = pdx[q] + ppw[q] + b2
                if hi > x1:
                    hi = x1
                v = y - top - border
                piece_row(row, pic + ((psy[q] + v) * w + psx[q]) * 3, lo, hi, pdx[q], ppw[q],
                          border, 0 <= v < ph, False)


def draw_grid(uint8_t[:, ::1] frames, Py_ssize_t stride, const uint8_t[::1] atlas,
              const int64_t[::1] slot_off, const int64_t[::1] slot_of,
              const int64_t[::1] image_id, const int32_t[:, ::1] image_hw,
              const int32_t[:, ::1] current, const int32_t[:, ::1] target, Py_ssize_t R,
              Py_ssize_t C, Py_ssize_t border, changed, const int64_t[::1] rows,
              bint stream=False, bint paint_rows=True):
    """Paint episodes ``rows`` of ``frames`` (B, frame bytes; rows of ``stride`` bytes): the
    whole frame when ``changed`` is None, else each position p with ``changed[b, p]`` (its framed
    cell, grown a pixel right and down where crops are unequal: the most a piece can spill).

    Episode b shows picture ``image_id[b]`` (skipped when negative), ``image_hw[b]`` = (h, w)
    pixels stored at ``atlas[slot_off[slot_of[image_id[b]]]:]`` as rows of ``w * 3`` bytes;
    ``current[b, p]`` is the piece at position p, ``target[b, k]`` the piece of crop k. Every
    argument is checked before anything is drawn (ValueError naming it); with ``paint_rows``
    off only the checks run (a caller that paints a batch in parts checks it whole first)."""
    cdef Py_ssize_t n = R * C, i, b, p, r, c, h, w, fh, fw, off, cx, cw, cy, ch, gx, gy
    cdef Py_ssize_t B = frames.shape[0], F = frames.shape[1], A = atlas.shape[0], bad = -1
    cdef Py_ssize_t inv[MAX_PIECES]
    cdef uint8_t* rowbuf = NULL
    cdef bint whole
    cdef const uint8_t[:, ::1] cells
    cdef bint full = changed is None
    if R < 1 or C < 1 or n > MAX_PIECES or border < 0:
        raise ValueError(f"grid: expected 1..{MAX_PIECES} pieces and border >= 0, got {R} x {C}"
                         f", border {border}")
    if current.shape[0] != B or target.shape[0] != B or current.shape[1] != n \
            or target.shape[1] != n:
        raise ValueError(f"current/target: expected ({B}, {n}), got ({current.shape[0]}, "
                         f"{current.shape[1]}) / ({target.shape[0]}, {target.shape[1]})")
    if image_id.shape[0] != B or image_hw.shape[0] != B or image_hw.shape[1] != 2:
        raise ValueError(f"image_id/image_hw: expected {B} entries")
    if not full:
        cells = changed
        if cells.shape[0] != B or cells.shape[1] != n:
            raise ValueError(f"changed: expected ({B}, {n}), got ({cells.shape[0]}, "
                             f"{cells.shape[1]})")
    with nogil:
        for i in range(rows.shape[0]):
            b = rows[i]
            if b < 0 or b >= B:
                bad = i
                break
            if image_id[b] < 0:
                continue
            h = image_hw[b, 0]
            w = image_hw[b, 1]
            if image_id[b] >= slot_of.shape[0] or slot_of[image_id[b]] < 0 \
                    or slot_of[image_id[b]] >= slot_off.shape[0] or h < 1 or w < 1:
                bad = i
                break
            off = slot_off[slot_of[image_id[b]]]
            fh = h + 2 * R * border
            fw = w + 2 * C * border
            if off < 0 or off + h * w * 3 > A or fw * 3 > stride or fh * stride > F:
                bad = i
                break
            for p in range(n):
                if current[b, p] < 0 or current[b, p] >= n or target[b, p] < 0 \
                        or target[b, p] >= n:
                    bad = i
                    break
            if bad >= 0:
                break
    if bad >= 0:
        raise ValueError(f"rows[{bad}]: episode {rows[bad]} has a bad frame index, picture slot"
                         f", size or permutation for these buffers")
    if not paint_rows:
        return
    if stream:
        rowbuf = <uint8_t*>malloc(stride + 64)
        if rowbuf == NULL:
            raise MemoryError("draw_grid: no memory for a row")
    with nogil:
        for i in range(rows.shape[0]):
            b = rows[i]
            if image_id[b] < 0:
                continue
            for p in range(n):
                inv[target[b, p]] = p
            h = image_hw[b, 0]
            w = image_hw[b, 1]
            fh = h + 2 * R * border
            fw = w + 2 * C * border
            off = slot_off[slot_of[image_id[b]]]
            if full:
                paint(&frames[b, 0], stride, &atlas[off], h, w, R, C, border, &current[b, 0],
                      inv, 0, 0, fw, fh, rowbuf)
                continue
            gx = 1 if w % C != 0 else 0
            gy = 1 if h % R != 0 else 0
            for r in range(R):
                span(r, h, R, &cy, &ch)
                cy = cy + 2 * border * r
                whole = True
                for c in range(C):
                    if not cells[b, r * C + c]:
                        whole = False
                        break
                if whole:   # the grid row's whole band: each frame row in one run
                    paint(&frames[b, 0], stride, &atlas[off], h, w, R, C, border,
                          &current[b, 0], inv, 0, cy, fw, min(cy + ch + 2 * border + gy, fh),
                          rowbuf)
                    continue
                for c in range(C):
                    if not cells[b, r * C + c]:
                        continue
                    span(c, w, C, &cx, &cw)
                    cx = cx + 2 * border * c
                    paint(&frames[b, 0], stride, &atlas[off], h, w, R, C, border,
                          &current[b, 0], inv, cx, cy, min(cx + cw + 2 * border + gx, fw),
                          min(cy + ch + 2 * border + gy, fh), rowbuf)
        if stream:
            visgym_store_fence()
    free(rowbuf)


def draw_tiles(uint8_t[:, :, ::1] frames, const uint8_t[:, :, :, ::1] tiles,
               const int32_t[:, ::1] order, int32_t[:, ::1] drawn,
               const uint8_t[:, :, ::1] labels, const int64_t[::1] label_w,
               const int64_t[::1] rows, bint full, bint stream=False, bint paint_rows=True):
    """A row of square tiles (zoom_in_puzzle): frames (B, T, W * 3) show tile 0 of the episode's
    ``tiles`` (B, N + 1, T, T * 3) in slot 0 and tile ``order[b, s] + 1`` in slot s + 1, with
    the constant label patch ``labels[s]`` (right-aligned, ``label_w[s]`` pixels of its width
    used) over the slot's bottom-right corner. With ``full`` every slot of ``rows`` is drawn,
    else only the slots whose tile differs from ``drawn`` (what the frame shows), which is
    updated. With ``stream``, a frame where at least half the slots change is rewritten whole,
    each row composed in a scratch row and streamed out. Returns the number of slots drawn. Everything is checked before anything is drawn
    (ValueError naming it); with ``paint_rows`` off only the checks run."""
    cdef Py_ssize_t B = frames.shape[0], N = order.shape[1], T = tiles.shape[2]
    cdef Py_ssize_t LH = labels.shape[1], LW = labels.shape[2] // 3, row_px = T * 3
    cdef Py_ssize_t i, b, s, c, y, x0, keep, changed, t, count = 0, bad = -1
    cdef uint8_t* rowbuf = NULL
    if tiles.shape[0] != B or tiles.shape[1] != N + 1 or tiles.shape[3] != row_px:
        raise ValueError(f"tiles: expected ({B}, {N + 1}, T, T * 3), got ({tiles.shape[0]}, "
                         f"{tiles.shape[1]}, {tiles.shape[2]}, {tiles.shape[3]})")
    if frames.shape[1] < T or frames.shape[2] < (N + 1) * row_px:
        raise ValueError(f"frames: ({frames.shape[1]}, {frames.shape[2]}) cannot hold {N + 1} "
                         f"tiles of {T} px")
    if order.shape[0] != B or drawn.shape[0] != B or drawn.shape[1] != N:
        raise ValueError(f"order/drawn: expected ({B}, {N})")
    if labels.shape[0] < N or label_w.shape[0] < N or LH > T:
        raise ValueError(f"labels: expected {N} patches of at most {T} rows")
    for s in range(N):
        if label_w[s] < 0 or label_w[s] > LW or label_w[s] > T:
            raise ValueError(f"label_w[{s}]: {label_w[s]} outside 0..{min(LW, T)}")
    for i in range(rows.shape[0]):
        b = rows[i]
        if b < 0 or b >= B:
            bad = i
            break
        for s in range(N):
            if order[b, s] < 0 or order[b, s] >= N:
                bad = i
        if bad >= 0:
            break
    if bad >= 0:
        raise ValueError(f"rows[{bad}]: episode {rows[bad]} is out of range or its order is not "
                         f"in 0..{N - 1}")
    if not paint_rows:
        return 0
    if stream:
        rowbuf = <uint8_t*>malloc((N + 1) * row_px + 64)
        if rowbuf == NULL:
            raise MemoryError("draw_tiles: no memory for a row")
    with nogil:
        for i in range(rows.shape[0]):
            b = rows[i]
            changed = 0
            for s in range(N):
                if drawn[b, s] != order[b, s]:
                    changed += 1
            if stream and (full or 2 * changed >= N):
                # Most slots change: every frame row is composed whole in the scratch row and
                # streamed out in one run (whole lines; the unchanged slots rewrite their own
                # pixels).
                for y in range(T):
                    memcpy(rowbuf, &tiles[b, 0, y, 0], row_px)
                    for s in range(N):
                        x0 = row_px * (s + 1)
                        if y < T - LH:
                            memcpy(rowbuf + x0, &tiles[b, order[b, s] + 1, y, 0], row_px)
                        else:
                            keep = (T - label_w[s]) * 3
                            memcpy(rowbuf + x0, &tiles[b, order[b, s] + 1, y, 0], keep)
                            memcpy(rowbuf + x0 + keep,
                                   &labels[s, y - (T - LH), (LW - label_w[s]) * 3],
                                   row_px - keep)
                    copy_run(&frames[b, y, 0], rowbuf, (N + 1) * row_px, True)
                for s in range(N):
                    count += full or drawn[b, s] != order[b, s]
                    drawn[b, s] = order[b, s]
                continue
            # A few slots: their rows in place with cached stores (a slot's rows start and end
            # inside 64-byte lines, and streaming part of a line is slower than either).
            if full:
                for y in range(T):
                    memcpy(&frames[b, y, 0], &tiles[b, 0, y, 0], row_px)
            for s in range(N):
                c = order[b, s]
                if not full and drawn[b, s] == c:
                    continue
                drawn[b, s] = <int32_t>c
                count += 1
                x0 = row_px * (s + 1)
                keep = (T - label_w[s]) * 3
                for y in range(T):
                    if y + 4 < T:   # the slot's lines of a later row, prefetched for writing
                        for t in range(0, row_px, 64):
                            visgym_prefetch_write(&frames[b, y + 4, x0 + t])
                        visgym_prefetch_write(&frames[b, y + 4, x0 + row_px - 1])
                    if y < T - LH:
                        memcpy(&frames[b, y, x0], &tiles[b, c + 1, y, 0], row_px)
                        continue
                    memcpy(&frames[b, y, x0], &tiles[b, c + 1, y, 0], keep)
                    memcpy(&frames[b, y, x0 + keep],
                           &labels[s, y - (T - LH), (LW - label_w[s]) * 3], row_px - keep)
        if stream:
            visgym_store_fence()
    free(rowbuf)
    return count
