# cython: language_level=3
"""Baseline JPEG entropy data, bit for bit what libjpeg(-turbo) writes for Pillow's default save,
with a per-stream cache so that a frame which differs little from the previous one is cheap.

What Pillow's ``save(format="JPEG")`` does for an 8-bit RGB or gray image (libjpeg defaults):
fixed-point RGB->YCbCr (16 fraction bits), 2x2 chroma subsampling by the rounding-bias average
(bias 1, 2, 1, 2, ... along a row), edges padded by replicating the last row and column, the
accurate integer forward DCT ("islow", 13-bit constants, 2 extra bits in the first pass),
quantization by rounding to the nearest multiple of 8*q, and Huffman coding with the tables of the
header, with 0xFF byte stuffing and the last byte padded with 1 bits. Blocks that the MCU grid
needs past the image's edge are "dummy" blocks: zero AC, DC copied from the block before.

The tables (quantization, Huffman, sampling, which component uses which table) are not written
here: ``render/jpeg.py`` reads them from the header Pillow writes for an image of the same size,
so this module only does arithmetic. ``jpeg.py`` also checks the output against Pillow's once per
size before trusting it.

Incremental use, four levels of reuse, none of which changes a bit of the output:
- ``Stream`` keeps the previous frame and its coded blocks; only MCUs (16x16 pixels, 8x8 for
  gray) whose pixels changed are handled again;
- a changed MCU whose exact pixels are in the ``BlockCache`` (shared by a thread's streams with
  the same tables) takes its coded blocks from there instead of being transformed;
- each block keeps its AC coefficients' Huffman bits, so coding it again is a copy plus its DC;
- each MCU row keeps its bit string, reused while the row is unchanged and starts from the same
  DC predictors (the only state that crosses rows).
"""
from cpython.bytes cimport PyBytes_FromStringAndSize
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcmp, memcpy, memset

cdef extern from *:
    """
    static inline int vg_ctz64(unsigned long long x) { return __builtin_ctzll(x); }
    static inline int vg_bitlen(unsigned int x) { return x ? 32 - __builtin_clz(x) : 0; }
    """
    int vg_ctz64(unsigned long long x) nogil
    int vg_bitlen(unsigned int x) nogil

# Position in the 8x8 block (row-major) of the k-th coefficient in zigzag order.
cdef int ZIGZAG[64]
ZIGZAG[:] = [0, 1, 8, 16, 9, 2, 3, 10, 17, 24, 32, 25, 18, 11, 4, 5, 12, 19, 26, 33, 40, 48,
             41, 34, 27, 20, 13, 6, 7, 14, 21, 28, 35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15,
             23, 30, 37, 44, 51, 58, 59, 52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63]

# libjpeg's fixed-point colour conversion: FIX(x) = round(x * 2^16).
DEF SCALEBITS = 16
DEF ONE_HALF = 1 << 15
DEF CBCR_OFFSET = 128 << 16
DEF FIX_Y_R = 19595      # 0.29900
DEF FIX_Y_G = 38470      # 0.58700
DEF FIX_Y_B = 7471       # 0.11400
DEF FIX_CB_R = 11059     # 0.16874
DEF FIX_CB_G = 21709     # 0.33126
DEF FIX_HALF = 32768     # 0.50000
DEF FIX_CR_G = 27439     # 0.41869
DEF FIX_CR_B = 5329      # 0.08131

# The accurate integer DCT's constants (13 fraction bits).
DEF CONST_BITS = 13
DEF AC_WORDS = 8           # cached AC bits per block: 256 (longer blocks are coded each time)
DEF AC_UNCACHED = 0xFFFF
DEF ROW_WORDS_PER_BLOCK = 64  # 2048 bits: more than a baseline block can take (~1700)
DEF PASS1_BITS = 2
DEF F_0_298 = 2446
DEF F_0_390 = 3196
DEF F_0_541 = 4433
DEF F_0_765 = 6270
DEF F_0_899 = 7373
DEF F_1_175 = 9633
DEF F_1_501 = 12299
DEF F_1_847 = 15137
DEF F_1_961 = 16069
DEF F_2_053 = 16819
DEF F_2_562 = 20995
DEF F_3_072 = 25172


cdef inline int32_t descale(int64_t x, int n) noexcept nogil:
    return <int32_t>((x + (<int64_t>1 << (n - 1))) >> n)


cdef void fdct_islow(int32_t* d) noexcept nogil:
    """In-place forward DCT of 64 level-shifted samples (row-major), output scaled by 8."""
    cdef int i
    cdef int64_t t0, t1, t2, t3, t4, t5, t6, t7, t10, t11, t12, t13, z1, z2, z3, z4, z5
    cdef int32_t* p
    for i in range(8):  # rows
        p = d + 8 * i
        t0 = p[0] + p[7]; t7 = p[0] - p[7]
        t1 = p[1] + p[6]; t6 = p[1] - p[6]
        t2 = p[2] + p[5]; t5 = p[2] - p[5]
        t3 = p[3] + p[4]; t4 = p[3] - p[4]
        t10 = t0 + t3; t13 = t0 - t3
        t11 = t1 + t2; t12 = t1 - t2
        p[0] = <int32_t>((t10 + t11) << PASS1_BITS)
        p[4] = <int32_t>((t10 - t11) << PASS1_BITS)
        z1 = (t12 + t13) * F_0_541
        p[2] = descale(z1 + t13 * F_0_765, CONST_BITS - PASS1_BITS)
        p[6] = descale(z1 - t12 * F_1_847, CONST_BITS - PASS1_BITS)
        z1 = t4 + t7; z2 = t5 + t6; z3 = t4 + t6; z4 = t5 + t7
        z5 = (z3 + z4) * F_1_175
        t4 = t4 * F_0_298; t5 = t5 * F_2_053; t6 = t6 * F_3_072; t7 = t7 * F_1_501
        z1 = -z1 * F_0_899; z2 = -z2 * F_2_562; z3 = -z3 * F_1_961; z4 = -z4 * F_0_390
        z3 = z3 + z5; z4 = z4 + z5
        p[7] = descale(t4 + z1 + z3, CONST_BITS - PASS1_BITS)
        p[5] = descale(t5 + z2 + z4, CONST_BITS - PASS1_BITS)
        p[3] = descale(t6 + z2 + z3, CONST_BITS - PASS1_BITS)
        p[1] = descale(t7 + z1 + z4, CONST_BITS - PASS1_BITS)
    for i in range(8):  # columns
        p = d + i
        t0 = p[0] + p[56]; t7 = p[0] - p[56]
        t1 = p[8] + p[48]; t6 = p[8] - p[48]
        t2 = p[16] + p[40]; t5 = p[16] - p[40]
        t3 = p[24] + p[32]; t4 = p[24] - p[32]
        t10 = t0 + t3; t13 = t0 - t3
        t11 = t1 + t2; t12 = t1 - t2
        p[0] = descale(t10 + t11, PASS1_BITS)
        p[32] = descale(t10 - t11, PASS1_BITS)
        z1 = (t12 + t13) * F_0_541
        p[16] = descale(z1 + t13 * F_0_765, CONST_BITS + PASS1_BITS)
        p[48] = descale(z1 - t12 * F_1_847, CONST_BITS + PASS1_BITS)
        z1 = t4 + t7; z2 = t5 + t6; z3 = t4 + t6; z4 = t5 + t7
        z5 = (z3 + z4) * F_1_175
        t4 = t4 * F_0_298; t5 = t5 * F_2_053; t6 = t6 * F_3_072; t7 = t7 * F_1_501
        z1 = -z1 * F_0_899; z2 = -z2 * F_2_562; z3 = -z3 * F_1_961; z4 = -z4 * F_0_390
        z3 = z3 + z5; z4 = z4 + z5
        p[56] = descale(t4 + z1 + z3, CONST_BITS + PASS1_BITS)
        p[40] = descale(t5 + z2 + z4, CONST_BITS + PASS1_BITS)
        p[24] = descale(t6 + z2 + z3, CONST_BITS + PASS1_BITS)
        p[8] = descale(t7 + z1 + z4, CONST_BITS + PASS1_BITS)


cdef struct BitWriter:
    uint64_t acc
    int nacc
    Py_ssize_t n
    uint8_t* out


cdef inline void flush_bytes(BitWriter* w) noexcept nogil:
    """Move whole bytes out of the accumulator, stuffing a 0 after every 0xFF."""
    cdef uint8_t byte
    while w.nacc >= 8:
        w.nacc -= 8
        byte = <uint8_t>(w.acc >> w.nacc)
        w.out[w.n] = byte
        w.n += 1
        if byte == 0xFF:
            w.out[w.n] = 0
            w.n += 1


cdef inline void put_bits(BitWriter* w, uint32_t code, int size) noexcept nogil:
    """Append ``size`` (<= 32) bits; the accumulator holds < 32 pending bits between calls."""
    cdef uint32_t word
    w.acc = (w.acc << size) | code
    w.nacc += size
    if w.nacc >= 32:
        word = <uint32_t>(w.acc >> (w.nacc - 32))
        if ((~word - 0x01010101u) & word & 0x80808080u) == 0:  # no 0xFF byte: 4 at once
            w.out[w.n] = <uint8_t>(word >> 24)
            w.out[w.n + 1] = <uint8_t>(word >> 16)
            w.out[w.n + 2] = <uint8_t>(word >> 8)
            w.out[w.n + 3] = <uint8_t>word
            w.n += 4
            w.nacc -= 32
        else:
            flush_bytes(w)


cdef struct WordWriter:
    uint64_t acc
    int nacc
    Py_ssize_t n
    uint32_t* out


cdef inline void ww_put(WordWriter* w, uint32_t code, int size) noexcept nogil:
    """Append ``size`` (<= 32) bits to 32-bit words, MSB first, without byte stuffing."""
    w.acc = (w.acc << size) | code
    w.nacc += size
    if w.nacc >= 32:
        w.nacc -= 32
        w.out[w.n] = <uint32_t>(w.acc >> w.nacc)
        w.n += 1


cdef inline uint64_t hash_bytes(const uint8_t* p, int n) noexcept nogil:
    """64-bit multiply-xor hash of n bytes (n a multiple of 32), four independent lanes."""
    cdef uint64_t h0 = 0x9E3779B97F4A7C15ULL, h1 = 0xC2B2AE3D27D4EB4FULL
    cdef uint64_t h2 = 0x165667B19E3779F9ULL, h3 = 0x27D4EB2F165667C5ULL, w
    cdef int i
    for i in range(0, n, 32):
        memcpy(&w, p + i, 8)
        h0 = (h0 ^ w) * 0xBF58476D1CE4E5B9ULL
        memcpy(&w, p + i + 8, 8)
        h1 = (h1 ^ w) * 0xBF58476D1CE4E5B9ULL
        memcpy(&w, p + i + 16, 8)
        h2 = (h2 ^ w) * 0xBF58476D1CE4E5B9ULL
        memcpy(&w, p + i + 24, 8)
        h3 = (h3 ^ w) * 0xBF58476D1CE4E5B9ULL
    h0 ^= (h1 >> 29) ^ (h1 << 35)
    h0 = (h0 ^ (h2 >> 17) ^ (h2 << 47)) * 0x94D049BB133111EBULL
    h0 ^= h3 ^ (h0 >> 31)
    return h0 * 0xBF58476D1CE4E5B9ULL


cdef class BlockCache:
    """MCU pixels -> their coded blocks, shared by the streams of one table set (one thread).

    Frames of a family are built from few distinct 16x16 patches (a maze frame from a few
    hundred across 100 episodes), so most MCUs a step changes, and most of a new episode's first
    frame, were transformed before. Keys are the MCU's exact pixels (compared in full, not just
    hashed), so a hit gives the very blocks a transform would. Only MCUs wholly inside the frame
    are cached (edge MCUs depend on the frame size). When full, the cache starts over.
    """
    cdef int bpm, key_len, cap, nslots, count
    cdef uint8_t* keys
    cdef uint64_t* hashes
    cdef int32_t* slots
    cdef int16_t* dc
    cdef uint64_t* nzmask
    cdef uint16_t* aclen
    cdef uint32_t* acbits
    cdef int16_t* coef
    cdef public long long hits, misses

    def __cinit__(self, int channels, int capacity=4096):
        if channels not in (1, 3) or capacity < 1:
            raise ValueError("BlockCache: channels must be 1 or 3 and capacity positive")
        self.bpm = 6 if channels == 3 else 1
        self.key_len = 768 if channels == 3 else 64
        self.cap = capacity
        self.nslots = 1
        while self.nslots < 2 * capacity:
            self.nslots <<= 1
        self.keys = <uint8_t*>malloc(<size_t>capacity * self.key_len)
        self.hashes = <uint64_t*>malloc(<size_t>capacity * sizeof(uint64_t))
        self.slots = <int32_t*>malloc(<size_t>self.nslots * sizeof(int32_t))
        self.dc = <int16_t*>malloc(<size_t>capacity * self.bpm * sizeof(int16_t))
        self.nzmask = <uint64_t*>malloc(<size_t>capacity * self.bpm * sizeof(uint64_t))
        self.aclen = <uint16_t*>malloc(<size_t>capacity * self.bpm * sizeof(uint16_t))
        self.acbits = <uint32_t*>malloc(<size_t>capacity * self.bpm * AC_WORDS * sizeof(uint32_t))
        self.coef = <int16_t*>malloc(<size_t>capacity * self.bpm * 64 * sizeof(int16_t))
        if (self.keys == NULL or self.hashes == NULL or self.slots == NULL or self.dc == NULL
                or self.nzmask == NULL or self.aclen == NULL or self.acbits == NULL
                or self.coef == NULL):
            raise MemoryError()
        self.clear()

    def __dealloc__(self):
        free(self.keys)
        free(self.hashes)
        free(self.slots)
        free(self.dc)
        free(self.nzmask)
        free(self.aclen)
        free(self.acbits)
        free(self.coef)

    def clear(self):
        memset(self.slots, 0xFF, <size_t>self.nslots * sizeof(int32_t))
        self.count = 0

    def __len__(self):
        return self.count

    cdef int find(self, const uint8_t* key, uint64_t h) noexcept nogil:
        cdef uint64_t mask = <uint64_t>(self.nslots - 1)
        cdef uint64_t i = h & mask
        cdef int32_t e
        while True:
            e = self.slots[i]
            if e < 0:
                return -1
            if self.hashes[e] == h and memcmp(self.keys + <size_t>e * self.key_len, key,
                                              self.key_len) == 0:
                return e
            i = (i + 1) & mask

    cdef int insert(self, const uint8_t* key, uint64_t h) noexcept nogil:
        """A new entry for key (not present); its block data is for the caller to fill."""
        cdef uint64_t mask = <uint64_t>(self.nslots - 1)
        cdef uint64_t i
        cdef int32_t e
        if self.count == self.cap:
            memset(self.slots, 0xFF, <size_t>self.nslots * sizeof(int32_t))
            self.count = 0
        e = self.count
        self.count += 1
        memcpy(self.keys + <size_t>e * self.key_len, key, self.key_len)
        self.hashes[e] = h
        i = h & mask
        while self.slots[i] >= 0:
            i = (i + 1) & mask
        self.slots[i] = e
        return e


cdef class Stream:
    """Encoder state for frames of one size (H, W, C) with fixed tables.

    qtables: (2, 64) int of quantizer values in row-major (natural) order; comp_q / comp_dc /
    comp_ac: per component, which quantization / DC / AC table it uses; dc_code, dc_size (2, 16)
    and ac_code, ac_size (2, 256): the Huffman code and its length per symbol (length 0 = the
    symbol has no code, which a valid baseline table never needs for 8-bit data).
    """
    cdef int H, W, C, mcu_w, mcu_h, mcus_x, mcus_y, bpm, nblocks
    cdef int y_blocks_x, y_blocks_y
    cdef uint64_t divisor_mul[2][64]
    cdef int32_t divisor_half[2][64]
    cdef int comp_q[3]
    cdef int comp_dc[3]
    cdef int comp_ac[3]
    cdef uint32_t dc_code[2][16]
    cdef uint8_t dc_size[2][16]
    cdef uint32_t ac_code[2][256]
    cdef uint8_t ac_size[2][256]
    cdef int16_t* coef        # per block, 64 quantized coefficients in zigzag order (AC used)
    cdef int16_t* dc          # per block, its quantized DC (kept apart: flat blocks read only this)
    cdef uint64_t* nzmask     # per block, bit k set when AC coefficient k is non-zero
    cdef uint32_t* acbits     # per block, its AC Huffman bits (MSB first), AC_WORDS words
    cdef uint16_t* aclen      # per block, how many; AC_UNCACHED when they did not fit
    cdef uint32_t* rowbits    # per MCU row, its coded bits (before byte stuffing)
    cdef int32_t* row_nbits   # per MCU row, how many bits
    cdef int32_t* row_dc      # per MCU row, DC predictors (3) before and (3) after it
    cdef uint8_t* row_ok      # per MCU row, whether rowbits is current
    cdef uint8_t* prev
    cdef uint8_t* out
    cdef Py_ssize_t out_cap, header_len
    cdef bint valid
    cdef public long long mcus_encoded

    def __cinit__(self):
        self.coef = NULL
        self.dc = NULL
        self.nzmask = NULL
        self.acbits = NULL
        self.aclen = NULL
        self.rowbits = NULL
        self.row_nbits = NULL
        self.row_dc = NULL
        self.row_ok = NULL
        self.prev = NULL
        self.out = NULL

    def __init__(self, int height, int width, int channels, long[:, ::1] qtables,
                 comp_q, comp_dc, comp_ac, unsigned int[:, ::1] dc_code,
                 unsigned char[:, ::1] dc_size, unsigned int[:, ::1] ac_code,
                 unsigned char[:, ::1] ac_size, bytes header):
        cdef int t, k, c
        cdef long q
        if height < 1 or width < 1 or channels not in (1, 3):
            raise ValueError(f"unsupported frame shape ({height}, {width}, {channels})")
        self.H = height
        self.W = width
        self.C = channels
        self.mcu_w = 16 if channels == 3 else 8
        self.mcu_h = self.mcu_w
        self.mcus_x = (width + self.mcu_w - 1) // self.mcu_w
        self.mcus_y = (height + self.mcu_h - 1) // self.mcu_h
        self.bpm = 6 if channels == 3 else 1
        self.nblocks = self.mcus_x * self.mcus_y * self.bpm
        self.y_blocks_x = (width + 7) // 8
        self.y_blocks_y = (height + 7) // 8
        for t in range(2):
            for k in range(64):
                q = qtables[t, ZIGZAG[k]] * 8
                if q < 8 or q > 255 * 8:
                    raise ValueError("quantizer values must be in 1..255")
                # floor(n / q) == (n * mul) >> 40 for every n < 2^17 (|DCT output| < 2^15).
                self.divisor_mul[t][k] = ((<uint64_t>1 << 40) // <uint64_t>q) + 1
                self.divisor_half[t][k] = <int32_t>(q >> 1)
        for c in range(3):
            self.comp_q[c] = comp_q[c] if c < len(comp_q) else 0
            self.comp_dc[c] = comp_dc[c] if c < len(comp_dc) else 0
            self.comp_ac[c] = comp_ac[c] if c < len(comp_ac) else 0
        for t in range(2):
            for k in range(16):
                self.dc_code[t][k] = dc_code[t, k]
                self.dc_size[t][k] = dc_size[t, k]
            for k in range(256):
                self.ac_code[t][k] = ac_code[t, k]
                self.ac_size[t][k] = ac_size[t, k]
        self.coef = <int16_t*>malloc(self.nblocks * 64 * sizeof(int16_t))
        self.nzmask = <uint64_t*>malloc(self.nblocks * sizeof(uint64_t))
        self.dc = <int16_t*>malloc(self.nblocks * sizeof(int16_t))
        self.acbits = <uint32_t*>malloc(self.nblocks * AC_WORDS * sizeof(uint32_t))
        self.aclen = <uint16_t*>malloc(self.nblocks * sizeof(uint16_t))
        self.prev = <uint8_t*>malloc(<size_t>height * width * channels)
        # Worst case per block: DC (11 + 11 bits) and 63 AC codes of at most 16 + 10 bits, each
        # byte possibly doubled by stuffing.
        # The file is assembled in place: header (SOI .. SOS), scan, EOI.
        self.header_len = len(header)
        self.out_cap = <Py_ssize_t>self.nblocks * 64 * 8 + 64 + self.header_len
        self.out = <uint8_t*>malloc(self.out_cap)
        if self.out != NULL:
            memcpy(self.out, <const char*>header, self.header_len)
        self.rowbits = <uint32_t*>malloc(<size_t>self.nblocks * ROW_WORDS_PER_BLOCK
                                         * sizeof(uint32_t))
        self.row_nbits = <int32_t*>malloc(self.mcus_y * sizeof(int32_t))
        self.row_dc = <int32_t*>malloc(self.mcus_y * 6 * sizeof(int32_t))
        self.row_ok = <uint8_t*>malloc(self.mcus_y)
        if self.acbits == NULL or self.aclen == NULL or self.rowbits == NULL \
                or self.row_nbits == NULL or self.row_dc == NULL or self.row_ok == NULL:
            raise MemoryError()
        memset(self.row_ok, 0, self.mcus_y)
        if self.coef == NULL or self.dc == NULL or self.nzmask == NULL or self.prev == NULL or self.out == NULL:
            raise MemoryError()
        self.valid = False
        self.mcus_encoded = 0

    def __dealloc__(self):
        free(self.coef)
        free(self.dc)
        free(self.acbits)
        free(self.aclen)
        free(self.rowbits)
        free(self.row_nbits)
        free(self.row_dc)
        free(self.row_ok)
        free(self.nzmask)
        free(self.prev)
        free(self.out)

    def forget(self):
        """Drop the previous frame: the next encode transforms every MCU."""
        self.valid = False

    def encode(self, const unsigned char[:, :, ::1] frame, BlockCache cache=None):
        """The JPEG file (the header given, the scan, EOI) of an (H, W, C) uint8 frame.

        ``cache``: a BlockCache made for this stream's tables and channel count, or None."""
        cdef Py_ssize_t n
        if frame.shape[0] != self.H or frame.shape[1] != self.W or frame.shape[2] != self.C:
            raise ValueError(f"frame shape {tuple(frame.shape)[:3]} does not match the stream's "
                             f"({self.H}, {self.W}, {self.C})")
        if cache is not None and cache.bpm != self.bpm:
            raise ValueError("cache: made for another channel count")
        with nogil:
            self._update(&frame[0, 0, 0], cache)
            n = self._huffman()
            self.out[n] = 0xFF
            self.out[n + 1] = 0xD9
        return PyBytes_FromStringAndSize(<char*>self.out, n + 2)

    cdef void _update(self, const uint8_t* src, BlockCache cache) noexcept nogil:
        cdef int my, mx, y, y0, y1, x0, x1
        cdef Py_ssize_t row = <Py_ssize_t>self.W * self.C
        cdef bint changed
        if not self.valid:
            memset(self.row_ok, 0, self.mcus_y)
            for my in range(self.mcus_y):
                for mx in range(self.mcus_x):
                    self._mcu(src, mx, my, cache)
            memcpy(self.prev, src, <size_t>self.H * row)
            self.valid = True
            return
        for my in range(self.mcus_y):
            y0 = my * self.mcu_h
            y1 = min(y0 + self.mcu_h, self.H)
            if memcmp(src + y0 * row, self.prev + y0 * row, <size_t>((y1 - y0) * row)) == 0:
                continue
            for mx in range(self.mcus_x):
                x0 = mx * self.mcu_w * self.C
                x1 = min((mx + 1) * self.mcu_w, self.W) * self.C
                changed = False
                for y in range(y0, y1):
                    if memcmp(src + y * row + x0, self.prev + y * row + x0,
                              <size_t>(x1 - x0)) != 0:
                        changed = True
                        break
                if changed:
                    self._mcu(src, mx, my, cache)
                    self.row_ok[my] = 0
            memcpy(self.prev + y0 * row, src + y0 * row, <size_t>((y1 - y0) * row))

    cdef void _mcu(self, const uint8_t* src, int mx, int my, BlockCache cache) noexcept nogil:
        """The blocks of one MCU, from the cache when its pixels were seen before."""
        cdef uint8_t key[768]
        cdef Py_ssize_t row = <Py_ssize_t>self.W * self.C
        cdef int j, e, n = self.mcu_w * self.C, first = (my * self.mcus_x + mx) * self.bpm
        cdef uint64_t h
        cdef bint inside = (cache is not None and (mx + 1) * self.mcu_w <= self.W
                            and (my + 1) * self.mcu_h <= self.H)
        self.mcus_encoded += 1
        if not inside or (self.C == 3 and self._uniform(src + my * 16 * row + mx * 48, row)):
            self._transform(src, mx, my)   # edge MCUs; one-colour MCUs are quicker than a lookup
            return
        for j in range(self.mcu_h):
            memcpy(key + j * n, src + (my * self.mcu_h + j) * row + mx * n, n)
        h = hash_bytes(key, n * self.mcu_h)
        e = cache.find(key, h)
        if e >= 0:
            cache.hits += 1
            self._blocks_from(cache, e, first)
            return
        cache.misses += 1
        self._transform(src, mx, my)
        e = cache.insert(key, h)
        self._blocks_to(cache, e, first)

    cdef void _blocks_from(self, BlockCache c, int e, int first) noexcept nogil:
        cdef int k, b = self.bpm
        memcpy(self.dc + first, c.dc + e * b, b * sizeof(int16_t))
        memcpy(self.nzmask + first, c.nzmask + e * b, b * sizeof(uint64_t))
        memcpy(self.aclen + first, c.aclen + e * b, b * sizeof(uint16_t))
        memcpy(self.acbits + first * AC_WORDS, c.acbits + e * b * AC_WORDS,
               b * AC_WORDS * sizeof(uint32_t))
        for k in range(b):  # coefficients are read only for blocks whose bits did not fit
            if self.aclen[first + k] == AC_UNCACHED:
                memcpy(self.coef + (first + k) * 64, c.coef + (e * b + k) * 64,
                       64 * sizeof(int16_t))

    cdef void _blocks_to(self, BlockCache c, int e, int first) noexcept nogil:
        cdef int k, b = self.bpm
        memcpy(c.dc + e * b, self.dc + first, b * sizeof(int16_t))
        memcpy(c.nzmask + e * b, self.nzmask + first, b * sizeof(uint64_t))
        memcpy(c.aclen + e * b, self.aclen + first, b * sizeof(uint16_t))
        memcpy(c.acbits + e * b * AC_WORDS, self.acbits + first * AC_WORDS,
               b * AC_WORDS * sizeof(uint32_t))
        for k in range(b):
            if self.aclen[first + k] == AC_UNCACHED:
                memcpy(c.coef + (e * b + k) * 64, self.coef + (first + k) * 64,
                       64 * sizeof(int16_t))

    cdef void _transform(self, const uint8_t* src, int mx, int my) noexcept nogil:
        """Transform and quantize the blocks of one MCU into the stream's block arrays."""
        cdef int32_t ybuf[256]
        cdef int32_t cb[256]
        cdef int32_t cr[256]
        cdef int32_t blk[64]
        cdef int32_t blk2[64]
        cdef int i, j, sx, sy, r, g, b, by, bx, base, bias, cy, r0, r1, nx, rgb, last
        cdef int32_t yv = 0, cbv = 0, crv = 0
        cdef Py_ssize_t row = <Py_ssize_t>self.W * self.C
        cdef const uint8_t* p
        cdef int first = (my * self.mcus_x + mx) * self.bpm
        if self.C == 1:
            for j in range(8):
                sy = min(my * 8 + j, self.H - 1)
                for i in range(8):
                    sx = min(mx * 8 + i, self.W - 1)
                    blk[j * 8 + i] = <int32_t>src[sy * row + sx] - 128
            self._block(blk, first, self.comp_q[0])
            return
        if mx * 16 + 16 <= self.W and my * 16 + 16 <= self.H and \
                self._uniform(src + my * 16 * row + mx * 48, row):
            p = src + my * 16 * row + mx * 48
            r = p[0]; g = p[1]; b = p[2]
            yv = (FIX_Y_R * r + FIX_Y_G * g + FIX_Y_B * b + ONE_HALF) >> SCALEBITS
            cbv = (-FIX_CB_R * r - FIX_CB_G * g + FIX_HALF * b + CBCR_OFFSET
                   + ONE_HALF - 1) >> SCALEBITS
            crv = (FIX_HALF * r - FIX_CR_G * g - FIX_CR_B * b + CBCR_OFFSET
                   + ONE_HALF - 1) >> SCALEBITS
            for j in range(4):
                self._flat(first + j, yv - 128, self.comp_q[0])
            self._flat(first + 4, cbv - 128, self.comp_q[1])  # (4c + bias) >> 2 == c
            self._flat(first + 5, crv - 128, self.comp_q[2])
            return
        # Colour conversion of the 16x16 MCU (edge pixels replicated). Runs of equal pixels
        # (flat backgrounds) reuse the previous conversion.
        nx = min(16, self.W - mx * 16)
        last = -1
        for j in range(16):
            sy = min(my * 16 + j, self.H - 1)
            p = src + sy * row + mx * 48
            for i in range(16):
                if i < nx:
                    rgb = (<int>p[3 * i] << 16) | (<int>p[3 * i + 1] << 8) | p[3 * i + 2]
                    if rgb != last:
                        last = rgb
                        r = p[3 * i]; g = p[3 * i + 1]; b = p[3 * i + 2]
                        yv = (FIX_Y_R * r + FIX_Y_G * g + FIX_Y_B * b + ONE_HALF) >> SCALEBITS
                        cbv = (-FIX_CB_R * r - FIX_CB_G * g + FIX_HALF * b + CBCR_OFFSET
                               + ONE_HALF - 1) >> SCALEBITS
                        crv = (FIX_HALF * r - FIX_CR_G * g - FIX_CR_B * b + CBCR_OFFSET
                               + ONE_HALF - 1) >> SCALEBITS
                ybuf[j * 16 + i] = yv
                cb[j * 16 + i] = cbv
                cr[j * 16 + i] = crv
        # Luma: blocks (0,0) (0,1) (1,0) (1,1); blocks past the image are dummies.
        for by in range(2):
            for bx in range(2):
                base = first + by * 2 + bx
                if my * 2 + by >= self.y_blocks_y:
                    self._dummy(base, first + 1)   # below the image: DC of the block before row
                elif mx * 2 + bx >= self.y_blocks_x:
                    self._dummy(base, base - 1)    # right of the image: DC of the left block
                else:
                    for j in range(8):
                        for i in range(8):
                            blk[j * 8 + i] = ybuf[(by * 8 + j) * 16 + bx * 8 + i] - 128
                    self._block(blk, base, self.comp_q[0])
        # Chroma: 2x2 average with the alternating rounding bias 1, 2. libjpeg pads the image
        # to an even number of rows before averaging and below that repeats the last averaged
        # row (not the last image row), hence the row mapping.
        for j in range(8):
            cy = min(my * 8 + j, (self.H + 1) // 2 - 1)
            r0 = (min(2 * cy, self.H - 1) - my * 16) * 16
            r1 = (min(2 * cy + 1, self.H - 1) - my * 16) * 16
            for i in range(8):
                bias = 1 + (i & 1)
                blk[j * 8 + i] = ((cb[r0 + 2 * i] + cb[r0 + 2 * i + 1] + cb[r1 + 2 * i]
                                   + cb[r1 + 2 * i + 1] + bias) >> 2) - 128
                blk2[j * 8 + i] = ((cr[r0 + 2 * i] + cr[r0 + 2 * i + 1] + cr[r1 + 2 * i]
                                    + cr[r1 + 2 * i + 1] + bias) >> 2) - 128
        self._block(blk, first + 4, self.comp_q[1])
        self._block(blk2, first + 5, self.comp_q[2])

    cdef bint _uniform(self, const uint8_t* p, Py_ssize_t row) noexcept nogil:
        """Whether the 16x16 RGB pixels at p (row stride ``row``) are all the same colour."""
        cdef int i, j
        for i in range(1, 16):
            if p[3 * i] != p[0] or p[3 * i + 1] != p[1] or p[3 * i + 2] != p[2]:
                return False
        for j in range(1, 16):
            if memcmp(p + j * row, p, 48) != 0:
                return False
        return True

    cdef inline void _flat(self, int index, int32_t level, int table) noexcept nogil:
        """A block whose 64 level-shifted samples all equal ``level``: DCT DC = 64 * level."""
        self.dc[index] = self._quantize(64 * level, table, 0)
        self.nzmask[index] = 0
        self._ac_bits(index)

    cdef inline void _dummy(self, int index, int dc_from) noexcept nogil:
        self.dc[index] = self.dc[dc_from]
        self.nzmask[index] = 0
        self._ac_bits(index)

    cdef void _block(self, int32_t* blk, int index, int table) noexcept nogil:
        """DCT + quantization of one block of level-shifted samples into the cache (zigzag)."""
        cdef int k
        cdef int32_t v, first = blk[0]
        cdef bint flat = True
        cdef uint64_t mask = 0
        cdef int16_t* out = self.coef + index * 64
        for k in range(1, 64):
            if blk[k] != first:
                flat = False
                break
        if flat:
            self._flat(index, first, table)
            return
        fdct_islow(blk)
        for k in range(64):
            v = self._quantize(blk[ZIGZAG[k]], table, k)
            out[k] = <int16_t>v
            mask |= (<uint64_t>(v != 0)) << k
        self.dc[index] = out[0]
        self.nzmask[index] = mask & ~(<uint64_t>1)
        self._ac_bits(index)

    cdef void _ac_bits(self, int index) noexcept nogil:
        """Huffman-code the block's AC coefficients (runs, values, EOB) once, for every later
        frame in which the block does not change; blocks longer than AC_WORDS words are coded
        from their coefficients each time instead."""
        cdef uint32_t buf[ROW_WORDS_PER_BLOCK + 1]
        cdef WordWriter w
        cdef int total
        w.acc = 0
        w.nacc = 0
        w.n = 0
        w.out = buf
        self._code_ac(index, &w)
        total = <int>(w.n * 32 + w.nacc)
        if total > AC_WORDS * 32:
            self.aclen[index] = AC_UNCACHED
            return
        if w.nacc:
            buf[w.n] = <uint32_t>(w.acc << (32 - w.nacc))
        memcpy(self.acbits + index * AC_WORDS, buf, ((total + 31) >> 5) * sizeof(uint32_t))
        self.aclen[index] = <uint16_t>total

    cdef void _code_ac(self, int index, WordWriter* w) noexcept nogil:
        """The AC part of a block: zero runs, values, ZRL and EOB codes."""
        cdef uint64_t mask = self.nzmask[index]
        cdef int16_t* zz = self.coef + index * 64
        cdef int j = index % self.bpm
        cdef int act = self.comp_ac[0 if j < 4 else j - 3]
        cdef int k, prev_k = 0, run, nbits, t
        cdef int32_t v, v2
        while mask:
            k = vg_ctz64(mask)
            mask &= mask - 1
            run = k - prev_k - 1
            prev_k = k
            while run > 15:
                ww_put(w, self.ac_code[act][0xF0], self.ac_size[act][0xF0])
                run -= 16
            v = zz[k]
            v2 = v
            if v < 0:
                v = -v
                v2 = v2 - 1
            nbits = vg_bitlen(<uint32_t>v)
            t = (run << 4) + nbits
            ww_put(w, self.ac_code[act][t], self.ac_size[act][t])
            ww_put(w, <uint32_t>v2 & ((1u << nbits) - 1), nbits)
        if prev_k != 63:
            ww_put(w, self.ac_code[act][0], self.ac_size[act][0])

    cdef inline int16_t _quantize(self, int32_t v, int table, int k) noexcept nogil:
        """round(v / (8 q)) half away from zero, q the k-th (zigzag) quantizer; branch-free."""
        cdef int32_t sign = v >> 31
        cdef uint64_t a = <uint64_t>((v ^ sign) - sign + self.divisor_half[table][k])
        cdef int32_t m = <int32_t>((a * self.divisor_mul[table][k]) >> 40)
        return <int16_t>((m ^ sign) - sign)

    cdef Py_ssize_t _huffman(self) noexcept nogil:
        """Entropy-code the scan after the header. An MCU row none of whose MCUs changed, and
        which starts from the same DC predictors as when it was coded, is copied from its
        cached bits; other rows are coded into their cache first."""
        cdef BitWriter w
        cdef WordWriter rw
        cdef int r, c, nwords, tail, i
        cdef int last_dc[3]
        cdef int row_words = self.mcus_x * self.bpm * ROW_WORDS_PER_BLOCK
        cdef uint32_t* words
        w.acc = 0
        w.nacc = 0
        w.n = self.header_len
        w.out = self.out
        last_dc[0] = 0; last_dc[1] = 0; last_dc[2] = 0
        for r in range(self.mcus_y):
            words = self.rowbits + <Py_ssize_t>r * row_words
            if not (self.row_ok[r] and self.row_dc[6 * r] == last_dc[0]
                    and self.row_dc[6 * r + 1] == last_dc[1]
                    and self.row_dc[6 * r + 2] == last_dc[2]):
                for c in range(3):
                    self.row_dc[6 * r + c] = last_dc[c]
                rw.acc = 0
                rw.nacc = 0
                rw.n = 0
                rw.out = words
                self._code_row(r, &rw, last_dc)
                self.row_nbits[r] = <int32_t>(rw.n * 32 + rw.nacc)
                if rw.nacc:
                    words[rw.n] = <uint32_t>(rw.acc << (32 - rw.nacc))
                for c in range(3):
                    self.row_dc[6 * r + 3 + c] = last_dc[c]
                self.row_ok[r] = 1
            else:
                for c in range(3):
                    last_dc[c] = self.row_dc[6 * r + 3 + c]
            nwords = self.row_nbits[r] >> 5
            tail = self.row_nbits[r] & 31
            for i in range(nwords):
                put_bits(&w, words[i], 32)
            if tail:
                put_bits(&w, words[nwords] >> (32 - tail), tail)
        flush_bytes(&w)
        # Pad the last byte with 1 bits.
        if w.nacc > 0:
            put_bits(&w, 0x7F, 7)
            flush_bytes(&w)
        return w.n

    cdef void _code_row(self, int r, WordWriter* w, int* last_dc) noexcept nogil:
        """Huffman-code the blocks of MCU row r (no byte stuffing: that is done on output)."""
        cdef int comp, blk, j, nbits, dct, length, i
        cdef int32_t v, v2
        cdef uint32_t* words
        cdef int per_row = self.mcus_x * self.bpm
        for blk in range(r * per_row, (r + 1) * per_row):
            j = blk % self.bpm
            comp = 0 if j < 4 else j - 3
            dct = self.comp_dc[comp]
            v = self.dc[blk] - last_dc[comp]
            last_dc[comp] = self.dc[blk]
            v2 = v
            if v < 0:
                v = -v
                v2 = v2 - 1
            nbits = vg_bitlen(<uint32_t>v)
            ww_put(w, self.dc_code[dct][nbits], self.dc_size[dct][nbits])
            if nbits:
                ww_put(w, <uint32_t>v2 & ((1u << nbits) - 1), nbits)
            length = self.aclen[blk]
            if length == AC_UNCACHED:
                self._code_ac(blk, w)
                continue
            words = self.acbits + blk * AC_WORDS
            for i in range(length >> 5):
                ww_put(w, words[i], 32)
            if length & 31:
                ww_put(w, words[length >> 5] >> (32 - (length & 31)), length & 31)
