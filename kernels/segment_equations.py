"""Batched kernels for arithmetic equations written in segment glyphs (Numba): evaluation,
stick moves, puzzle generation and the searches over stick moves.

An equation is a row of symbol codes (digits 0-9 are codes 0-9, then + - * / = and a blank for
padding, see SYM_*) with a length. Which strokes make up which symbol is the caller's glyph model:
the kernels only see two lookup tables, ``remove_to[g, s]`` (the symbol left when stroke s is taken
from symbol g, or -1) and ``add_to[g, t]`` (the symbol made by adding stroke t to g, or -1). A
move takes stroke s from symbol i and adds it as stroke t of symbol j (i != j); both results must
be symbols. Moves are enumerated in the order (i, s, j, t), each ascending, which is what makes
the breadth- and depth-first searches below visit states in a fixed, documented order.

Correctness is decided by a small evaluator instead of Python's ``eval``: each side of the single
'=' is read as a Python expression over these symbols (unary and binary + -, * / // **, Python's
precedence and associativity, true division, integer literals with no leading zeros except all
zeros), and the sides are equal when |lhs - rhs| < 1e-6. Anything Python would reject (syntax,
division by zero, 0 ** negative) makes the equation wrong. Integers are exact in int64 and fall
back to float64 beyond it, where Python would stay exact; a negative base raised to a fractional
power (a complex number in Python) counts as an error.

Search states are packed into two 64-bit words (4 bits a symbol, up to 32 symbols) and kept in an
open-addressing hash set, so breadth-first search and the depth-first trace visit each state once.
"""
import math

import numpy as np
from numba import njit, prange

from .batching import row_kernel
from .rng import below, seed_state

# Symbol codes.
SYM_PLUS = 10
SYM_MINUS = 11
SYM_TIMES = 12
SYM_DIVIDE = 13
SYM_EQUALS = 14
SYM_BLANK = 15
N_SYMBOLS = 15
MAX_SYMBOLS = 32  # two 64-bit words of 4-bit codes

# Plan operations written by the planners: (op, i, s, j, t) rows.
PLAN_MOVE = 0
PLAN_UNDO = 1

STREAM_GENERATE = np.uint64(11)
STREAM_SOLVER = np.uint64(12)

# Evaluator operators and their binding power (unary minus/plus bind tighter than * and /,
# looser than ** on their right: -2**2 == -4, 2**-1 == 0.5).
_OP_ADD, _OP_SUB, _OP_MUL, _OP_DIV, _OP_FLOORDIV, _OP_POW, _OP_NEG, _OP_POS = range(8)
_PREC = np.array([1, 1, 2, 2, 2, 4, 3, 3], dtype=np.int64)
_I64_MAX = np.iinfo(np.int64).max
_I64_MIN = np.iinfo(np.int64).min
_EXACT_PRODUCT = 4.0e18  # |a*b| below this (in float) cannot overflow int64


# ------------------------------------------------------------------------------ evaluation
@njit(cache=True, inline="always")
def _as_float(is_int, ival, fval):
    return float(ival) if is_int else fval


@njit(cache=True)
def _float_pow(x, y):
    """Python's float ** float: (ok, value)."""
    if y == 0.0:
        return True, 1.0
    if math.isnan(x):
        return True, x
    if math.isnan(y):
        return True, (1.0 if x == 1.0 else y)
    if x == 0.0 and y < 0.0:
        return False, 0.0  # ZeroDivisionError
    if x < 0.0 and math.isfinite(y) and y != math.floor(y):
        return False, 0.0  # complex in Python; treated as an error here
    r = math.pow(x, y)
    if math.isinf(r) and math.isfinite(x) and math.isfinite(y):
        return False, 0.0  # OverflowError
    return True, r


@njit(cache=True)
def _float_floordiv(x, y):
    """Python's float // float for y != 0."""
    mod = np.fmod(x, y)
    div = (x - mod) / y
    if mod != 0.0 and ((y < 0.0) != (mod < 0.0)):
        div -= 1.0
    if div != 0.0:
        floordiv = math.floor(div)
        if div - floordiv > 0.5:
            floordiv += 1.0
        return floordiv
    return math.copysign(0.0, x / y)


@njit(cache=True)
def _binary(op, a_int, ai, af, b_int, bi, bf):
    """(ok, is_int, ival, fval) of a <op> b with Python's semantics."""
    if op == _OP_ADD or op == _OP_SUB:
        if a_int and b_int:
            if op == _OP_SUB:
                if bi == _I64_MIN:
                    return True, False, 0, float(ai) - float(bi)
                bi = -bi
            if (bi > 0 and ai > _I64_MAX - bi) or (bi < 0 and ai < _I64_MIN - bi):
                return True, False, 0, float(ai) + float(bi)
            return True, True, ai + bi, 0.0
        x = _as_float(a_int, ai, af)
        y = _as_float(b_int, bi, bf)
        return True, False, 0, (x + y if op == _OP_ADD else x - y)
    if op == _OP_MUL:
        if a_int and b_int:
            p = float(ai) * float(bi)
            if abs(p) < _EXACT_PRODUCT:
                return True, True, ai * bi, 0.0
            return True, False, 0, p
        return True, False, 0, _as_float(a_int, ai, af) * _as_float(b_int, bi, bf)
    if op == _OP_DIV:
        y = _as_float(b_int, bi, bf)
        if y == 0.0:
            return False, False, 0, 0.0
        return True, False, 0, _as_float(a_int, ai, af) / y
    if op == _OP_FLOORDIV:
        if a_int and b_int:
            if bi == 0:
                return False, False, 0, 0.0
            if ai == _I64_MIN and bi == -1:
                return True, False, 0, -float(ai)
            return True, True, ai // bi, 0.0
        y = _as_float(b_int, bi, bf)
        if y == 0.0:
            return False, False, 0, 0.0
        return True, False, 0, _float_floordiv(_as_float(a_int, ai, af), y)
    # power
    if a_int and b_int:
        if bi < 0:
            if ai == 0:
                return False, False, 0, 0.0
            ok, r = _float_pow(float(ai), float(bi))
            return ok, False, 0, r
        if ai == 0 or ai == 1:
            return True, True, (1 if bi == 0 else ai), 0.0
        if ai == -1:
            return True, True, (1 if bi % 2 == 0 else -1), 0.0
        result = np.int64(1)
        base = ai
        e = bi
        exact = True
        while e > 0:
            if e & 1:
                p = float(result) * float(base)
                if abs(p) >= _EXACT_PRODUCT:
                    exact = False
                    break
                result = result * base
            e >>= 1
            if e > 0:
                q = float(base) * float(base)
                if abs(q) >= _EXACT_PRODUCT:
                    exact = False
                    break
                base = base * base
        if exact:
            return True, True, result, 0.0
        # Python stays exact here; float64 approximates (inf when even that overflows).
        return True, False, 0, math.pow(float(ai), float(bi))
    ok, r = _float_pow(_as_float(a_int, ai, af), _as_float(b_int, bi, bf))
    return ok, False, 0, r


@njit(cache=True)
def _reduce(op, v_int, v_i, v_f, top):
    """Apply operator ``op`` to the value stack; return (ok, new top)."""
    if op == _OP_NEG or op == _OP_POS:
        k = top - 1
        if op == _OP_NEG:
            if v_int[k]:
                if v_i[k] == _I64_MIN:
                    v_int[k] = False
                    v_f[k] = -float(v_i[k])
                else:
                    v_i[k] = -v_i[k]
            else:
                v_f[k] = -v_f[k]
        return True, top
    a = top - 2
    b = top - 1
    ok, is_int, ival, fval = _binary(op, v_int[a], v_i[a], v_f[a], v_int[b], v_i[b], v_f[b])
    v_int[a] = is_int
    v_i[a] = ival
    v_f[a] = fval
    return ok, top - 1


@njit(cache=True)
def _eval_side(sym, lo, hi, v_int, v_i, v_f, ops):
    """Evaluate sym[lo:hi] as a Python expression: (ok, is_int, ival, fval)."""
    top = 0
    nops = 0
    expect_operand = True
    p = lo
    while p < hi:
        c = sym[p]
        if c <= 9:
            if not expect_operand:
                return False, False, 0, 0.0
            q = p
            nonzero = False
            while q < hi and sym[q] <= 9:
                if sym[q] != 0:
                    nonzero = True
                q += 1
            if sym[p] == 0 and nonzero:
                return False, False, 0, 0.0  # leading zeros in a decimal literal
            ival = np.int64(0)
            fval = 0.0
            is_int = True
            for r in range(p, q):
                d = np.int64(sym[r])
                if is_int and ival > (_I64_MAX - d) // 10:
                    is_int = False
                    fval = float(ival)
                if is_int:
                    ival = ival * 10 + d
                else:
                    fval = fval * 10.0 + float(d)
            v_int[top] = is_int
            v_i[top] = ival
            v_f[top] = fval
            top += 1
            expect_operand = False
            p = q
            continue
        if c == SYM_PLUS or c == SYM_MINUS:
            if expect_operand:
                ops[nops] = _OP_POS if c == SYM_PLUS else _OP_NEG
                nops += 1
                p += 1
                continue
            op = _OP_ADD if c == SYM_PLUS else _OP_SUB
            p += 1
        elif c == SYM_TIMES or c == SYM_DIVIDE:
            if expect_operand:
                return False, False, 0, 0.0
            # Python's tokenizer reads '**' and '//' greedily.
            if p + 1 < hi and sym[p + 1] == c:
                op = _OP_POW if c == SYM_TIMES else _OP_FLOORDIV
                p += 2
            else:
                op = _OP_MUL if c == SYM_TIMES else _OP_DIV
                p += 1
        else:
            return False, False, 0, 0.0
        prec = _PREC[op]
        right_assoc = op == _OP_POW
        while nops > 0:
            top_prec = _PREC[ops[nops - 1]]
            if top_prec > prec or (top_prec == prec and not right_assoc):
                nops -= 1
                ok, top = _reduce(ops[nops], v_int, v_i, v_f, top)
                if not ok:
                    return False, False, 0, 0.0
            else:
                break
        ops[nops] = op
        nops += 1
        expect_operand = True
    if expect_operand:
        return False, False, 0, 0.0  # empty side or trailing operator
    while nops > 0:
        nops -= 1
        ok, top = _reduce(ops[nops], v_int, v_i, v_f, top)
        if not ok:
            return False, False, 0, 0.0
    return True, v_int[0], v_i[0], v_f[0]


@njit(cache=True)
def _correct(sym, n, v_int, v_i, v_f, ops):
    eq = -1
    for p in range(n):
        if sym[p] == SYM_EQUALS:
            if eq >= 0:
                return False
            eq = p
    if eq < 0:
        return False
    ok, l_int, li, lf = _eval_side(sym, 0, eq, v_int, v_i, v_f, ops)
    if not ok:
        return False
    ok, r_int, ri, rf = _eval_side(sym, eq + 1, n, v_int, v_i, v_f, ops)
    if not ok:
        return False
    if l_int and r_int:
        return li == ri
    d = abs(_as_float(l_int, li, lf) - _as_float(r_int, ri, rf))
    return d < 1e-6


@njit(cache=True, inline="always")
def _scratch():
    return (np.zeros(MAX_SYMBOLS, np.bool_), np.zeros(MAX_SYMBOLS, np.int64),
            np.zeros(MAX_SYMBOLS, np.float64), np.zeros(MAX_SYMBOLS, np.int64))


@njit(cache=True)
def equation_correct(sym, n):
    """True if the equation sym[:n] is correct (two sides, equal within 1e-6)."""
    v_int, v_i, v_f, ops = _scratch()
    return _correct(sym, n, v_int, v_i, v_f, ops)


@njit(cache=True)
def correct_rows(hist, depth, length, rows, out):
    """out[b] = is the current equation of each row in ``rows`` correct."""
    v_int, v_i, v_f, ops = _scratch()
    for k in range(rows.shape[0]):
        b = rows[k]
        out[b] = _correct(hist[b, depth[b]], length[b], v_int, v_i, v_f, ops)


# ------------------------------------------------------------------------------ packing
@njit(cache=True, inline="always")
def _pack(sym, n):
    k0 = np.uint64(0)
    k1 = np.uint64(0)
    for p in range(n):
        code = np.uint64(sym[p] + 1)
        if p < 16:
            k0 |= code << np.uint64(4 * p)
        else:
            k1 |= code << np.uint64(4 * (p - 16))
    return k0, k1


@njit(cache=True, inline="always")
def _unpack(k0, k1, n, out):
    for p in range(n):
        if p < 16:
            out[p] = np.int64((k0 >> np.uint64(4 * p)) & np.uint64(15)) - 1
        else:
            out[p] = np.int64((k1 >> np.uint64(4 * (p - 16))) & np.uint64(15)) - 1


@njit(cache=True, inline="always")
def _hash(k0, k1):
    z = k0 ^ (k1 * np.uint64(0x9E3779B97F4A7C15))
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@njit(cache=True)
def _set_new(capacity):
    """An empty hash set of packed states: (keys0, keys1, used, [count])."""
    size = 64
    while size < 2 * capacity:
        size *= 2
    return (np.zeros(size, np.uint64), np.zeros(size, np.uint64), np.zeros(size, np.bool_),
            np.zeros(1, np.int64))


@njit(cache=True)
def _set_insert_raw(keys0, keys1, used, k0, k1):
    """Insert; return True if the key was new."""
    mask = np.uint64(keys0.shape[0] - 1)
    h = _hash(k0, k1) & mask
    while used[h]:
        if keys0[h] == k0 and keys1[h] == k1:
            return False
        h = (h + np.uint64(1)) & mask
    used[h] = True
    keys0[h] = k0
    keys1[h] = k1
    return True


@njit(cache=True)
def _set_add(table, k0, k1):
    """Insert into a growable set; return (table, was_new)."""
    keys0, keys1, used, count = table
    if 2 * (count[0] + 1) > keys0.shape[0]:
        size = keys0.shape[0] * 2
        n0 = np.zeros(size, np.uint64)
        n1 = np.zeros(size, np.uint64)
        nu = np.zeros(size, np.bool_)
        for h in range(keys0.shape[0]):
            if used[h]:
                _set_insert_raw(n0, n1, nu, keys0[h], keys1[h])
        table = (n0, n1, nu, count)
        keys0, keys1, used = n0, n1, nu
    new = _set_insert_raw(keys0, keys1, used, k0, k1)
    if new:
        count[0] += 1
    return table, new


# ------------------------------------------------------------------------------ moves
@njit(cache=True, inline="always")
def move_result(sym, n, i, s, j, t, remove_to, add_to):
    """(legal, new symbol at i, new symbol at j) of moving stroke s of i to stroke t of j."""
    if i < 0 or j < 0 or s < 0 or t < 0 or i >= n or j >= n or i == j:
        return False, 0, 0
    if s >= remove_to.shape[1] or t >= add_to.shape[1]:
        return False, 0, 0
    gi = remove_to[sym[i], s]
    gj = add_to[sym[j], t]
    if gi < 0 or gj < 0:
        return False, 0, 0
    return True, gi, gj


@njit(cache=True)
def _count_neighbours(sym, n, remove_to, add_to):
    n_rem = 0
    n_add = 0
    for p in range(n):
        for s in range(remove_to.shape[1]):
            if remove_to[sym[p], s] >= 0:
                n_rem += 1
        for t in range(add_to.shape[1]):
            if add_to[sym[p], t] >= 0:
                n_add += 1
    return n_rem * n_add


@njit(cache=True)
def _neighbours(sym, n, remove_to, add_to):
    """Every legal move from sym[:n] in (i, s, j, t) order: int64[M, 6] rows (i, s, j, t, new
    symbol at i, new symbol at j)."""
    out = np.empty((_count_neighbours(sym, n, remove_to, add_to), 6), np.int64)
    m = 0
    n_segs = remove_to.shape[1]
    for i in range(n):
        for s in range(n_segs):
            gi = remove_to[sym[i], s]
            if gi < 0:
                continue
            for j in range(n):
                if j == i:
                    continue
                for t in range(n_segs):
                    gj = add_to[sym[j], t]
                    if gj < 0:
                        continue
                    out[m, 0] = i
                    out[m, 1] = s
                    out[m, 2] = j
                    out[m, 3] = t
                    out[m, 4] = gi
                    out[m, 5] = gj
                    m += 1
    return out[:m]


# ------------------------------------------------------------------------------ stepping
@njit(cache=True)
def step_equations(hist, depth, length, correct, dirty, kind, ints, rows, move_kind, max_moves,
                   remove_to, add_to, budget_code, illegal_code, nothing_code, feedback):
    """The moves and undos of one step, in place, for the rows where ``rows`` is true (the step
    template in core handles errors and stop).

    hist[b, d] is the equation after d moves in effect (d = depth[b]). A move first checks the
    move budget (depth < max_moves), then legality; a legal one writes hist[b, d + 1]. Any other
    action (undo) pops one level. dirty[b] receives the (up to two) symbol positions whose glyph
    changed, -1 otherwise.
    """
    v_int, v_i, v_f, ops = _scratch()
    for b in range(hist.shape[0]):
        dirty[b, 0] = -1
        dirty[b, 1] = -1
        if not rows[b]:
            continue
        d = depth[b]
        n = length[b]
        if kind[b] == move_kind:
            if d >= max_moves:
                feedback[b] = budget_code
                continue
            i = ints[b, 0]
            j = ints[b, 2]
            legal, gi, gj = move_result(hist[b, d], n, i, ints[b, 1], j, ints[b, 3],
                                        remove_to, add_to)
            if not legal:
                feedback[b] = illegal_code
                continue
            hist[b, d + 1, :] = hist[b, d, :]
            hist[b, d + 1, i] = gi
            hist[b, d + 1, j] = gj
            depth[b] = d + 1
            dirty[b, 0] = i
            dirty[b, 1] = j
            correct[b] = _correct(hist[b, d + 1], n, v_int, v_i, v_f, ops)
        else:
            if d == 0:
                feedback[b] = nothing_code
                continue
            m = 0
            for p in range(n):
                if hist[b, d, p] != hist[b, d - 1, p] and m < 2:
                    dirty[b, m] = p
                    m += 1
            hist[b, d, :] = SYM_BLANK
            depth[b] = d - 1
            correct[b] = _correct(hist[b, d - 1], n, v_int, v_i, v_f, ops)


# ------------------------------------------------------------------------------ search
@njit(cache=True)
def _bfs_fix(start, n, cap, remove_to, add_to):
    """(found, moves): the first correct equation within ``cap`` moves of sym ``start`` in
    breadth-first order (moves expanded in (i, s, j, t) order, each state queued once,
    correctness tested when a state is dequeued), as int64[L, 4] rows (i, s, j, t)."""
    v_int, v_i, v_f, ops = _scratch()
    cur = np.empty(MAX_SYMBOLS, np.int64)
    nodes0 = np.empty(256, np.uint64)
    nodes1 = np.empty(256, np.uint64)
    parent = np.empty(256, np.int64)
    move = np.empty((256, 4), np.int64)
    level = np.empty(256, np.int64)
    k0, k1 = _pack(start, n)
    nodes0[0] = k0
    nodes1[0] = k1
    parent[0] = -1
    level[0] = 0
    tail = 1
    head = 0
    table = _set_new(256)
    table, _ = _set_add(table, k0, k1)
    found = -1
    n_segs = remove_to.shape[1]
    while head < tail:
        _unpack(nodes0[head], nodes1[head], n, cur)
        if _correct(cur, n, v_int, v_i, v_f, ops):
            found = head
            break
        if level[head] >= cap:
            head += 1
            continue
        for i in range(n):
            for s in range(n_segs):
                gi = remove_to[cur[i], s]
                if gi < 0:
                    continue
                for j in range(n):
                    if j == i:
                        continue
                    for t in range(n_segs):
                        gj = add_to[cur[j], t]
                        if gj < 0:
                            continue
                        old_i = cur[i]
                        old_j = cur[j]
                        cur[i] = gi
                        cur[j] = gj
                        c0, c1 = _pack(cur, n)
                        cur[i] = old_i
                        cur[j] = old_j
                        table, new = _set_add(table, c0, c1)
                        if not new:
                            continue
                        if tail == nodes0.shape[0]:
                            size = 2 * tail
                            g0 = np.empty(size, np.uint64)
                            g1 = np.empty(size, np.uint64)
                            gp = np.empty(size, np.int64)
                            gm = np.empty((size, 4), np.int64)
                            gl = np.empty(size, np.int64)
                            g0[:tail] = nodes0
                            g1[:tail] = nodes1
                            gp[:tail] = parent
                            gm[:tail] = move
                            gl[:tail] = level
                            nodes0, nodes1, parent, move, level = g0, g1, gp, gm, gl
                        nodes0[tail] = c0
                        nodes1[tail] = c1
                        parent[tail] = head
                        move[tail, 0] = i
                        move[tail, 1] = s
                        move[tail, 2] = j
                        move[tail, 3] = t
                        level[tail] = level[head] + 1
                        tail += 1
        head += 1
    if found < 0:
        return False, np.empty((0, 4), np.int64)
    length = level[found]
    out = np.empty((length, 4), np.int64)
    node = found
    for r in range(length - 1, -1, -1):
        out[r] = move[node]
        node = parent[node]
    return True, out


@njit(cache=True)
def _fixable_within(start, n, cap, remove_to, add_to):
    """True if some correct equation is at most ``cap`` moves away (cap >= 1), the start itself
    excluded: the generator's minimum-distance test (breadth-first, each state once)."""
    v_int, v_i, v_f, ops = _scratch()
    frontier = np.empty((1, 2), np.uint64)
    frontier[0, 0], frontier[0, 1] = _pack(start, n)
    table = _set_new(256)
    table, _ = _set_add(table, frontier[0, 0], frontier[0, 1])
    cur = np.empty(MAX_SYMBOLS, np.int64)
    for _level in range(cap):
        nxt = np.empty((16, 2), np.uint64)
        m = 0
        for f in range(frontier.shape[0]):
            _unpack(frontier[f, 0], frontier[f, 1], n, cur)
            moves = _neighbours(cur, n, remove_to, add_to)
            for r in range(moves.shape[0]):
                i = moves[r, 0]
                j = moves[r, 2]
                old_i = cur[i]
                old_j = cur[j]
                cur[i] = moves[r, 4]
                cur[j] = moves[r, 5]
                c0, c1 = _pack(cur, n)
                table, new = _set_add(table, c0, c1)
                if new:
                    if _correct(cur, n, v_int, v_i, v_f, ops):
                        return True
                    if m == nxt.shape[0]:
                        grown = np.empty((2 * m, 2), np.uint64)
                        grown[:m] = nxt
                        nxt = grown
                    nxt[m, 0] = c0
                    nxt[m, 1] = c1
                    m += 1
                cur[i] = old_i
                cur[j] = old_j
        frontier = nxt[:m]
    return False


@njit(cache=True)
def _append(buf, count, op, i, s, j, t):
    if count == buf.shape[0]:
        grown = np.empty((2 * count + 8, 5), np.int64)
        grown[:count] = buf[:count]
        buf = grown
    buf[count, 0] = op
    buf[count, 1] = i
    buf[count, 2] = s
    buf[count, 3] = j
    buf[count, 4] = t
    return buf, count + 1


@njit(cache=True)
def _dfs_trace(start, n, cap, remove_to, add_to, buf, count):
    """The reference's depth-first trace: every tried move, an undo after each failed branch,
    one global visited set, depth cap ``cap``. Returns (found, buf, count)."""
    v_int, v_i, v_f, ops = _scratch()
    if _correct(start, n, v_int, v_i, v_f, ops):
        return True, buf, count
    if cap <= 0:
        return False, buf, count
    states = np.empty((cap + 1, MAX_SYMBOLS), np.int64)
    states[0, :n] = start[:n]
    lists = [_neighbours(states[0], n, remove_to, add_to)]
    for _ in range(cap - 1):
        lists.append(np.empty((0, 6), np.int64))
    cursor = np.zeros(cap, np.int64)
    table = _set_new(256)
    k0, k1 = _pack(states[0], n)
    table, _ = _set_add(table, k0, k1)
    d = 0
    while True:
        moves = lists[d]
        if cursor[d] < moves.shape[0]:
            r = cursor[d]
            cursor[d] += 1
            i = moves[r, 0]
            j = moves[r, 2]
            states[d + 1, :n] = states[d, :n]
            states[d + 1, i] = moves[r, 4]
            states[d + 1, j] = moves[r, 5]
            c0, c1 = _pack(states[d + 1], n)
            table, new = _set_add(table, c0, c1)
            if not new:
                continue
            buf, count = _append(buf, count, PLAN_MOVE, i, moves[r, 1], j, moves[r, 3])
            if _correct(states[d + 1], n, v_int, v_i, v_f, ops):
                return True, buf, count
            if d + 1 >= cap:
                buf, count = _append(buf, count, PLAN_UNDO, 0, 0, 0, 0)
                continue
            d += 1
            lists[d] = _neighbours(states[d], n, remove_to, add_to)
            cursor[d] = 0
        else:
            if d == 0:
                return False, buf, count
            d -= 1
            buf, count = _append(buf, count, PLAN_UNDO, 0, 0, 0, 0)


@njit(cache=True)
def _state_seed(hist_b, d, n):
    """A 64-bit seed that is a function of the episode's history stack (levels 0..d)."""
    h = np.uint64(d + 1) * np.uint64(0x9E3779B97F4A7C15)
    for level in range(d + 1):
        k0, k1 = _pack(hist_b[level], n)
        h = _hash(h ^ k0, k1)
    return h


STRATEGY_SOS = 0
STRATEGY_BFS = 1
STRATEGY_DFS = 2


@njit(cache=True)
def _plan_one(hist_b, d, n, max_moves, cap_override, strategy, use_seed, sos_seed,
              sos_max_len, remove_to, add_to):
    """The plan (int64[P, 5] rows op, i, s, j, t; stop not included) for one episode, and
    whether it reaches a correct equation."""
    buf = np.empty((16, 5), np.int64)
    count = 0
    # Fewest actions over "undo k moves, then the shortest fix within the budget left".
    best_k = -1
    best_total = 0
    best_moves = np.empty((0, 4), np.int64)
    for k in range(d + 1):
        cap = max_moves - (d - k)
        if cap_override >= 0 and cap_override < cap:
            cap = cap_override
        if cap < 0:
            continue
        found, moves = _bfs_fix(hist_b[d - k], n, cap, remove_to, add_to)
        if found and (best_k < 0 or k + moves.shape[0] < best_total):
            best_k = k
            best_total = k + moves.shape[0]
            best_moves = moves
    if best_k < 0:
        return False, buf[:0]
    for _ in range(best_k):
        buf, count = _append(buf, count, PLAN_UNDO, 0, 0, 0, 0)
    start = hist_b[d - best_k]
    base = d - best_k
    golden = best_moves.shape[0]
    if strategy == STRATEGY_DFS:
        cap = max_moves - base
        if cap_override >= 0 and cap_override < cap:
            cap = cap_override
        found, buf2, count2 = _dfs_trace(start, n, cap, remove_to, add_to, buf.copy(), count)
        if found:
            return True, buf2[:count2]
        # The reference's global visited set can miss a fix; fall back to the golden path.
    if strategy == STRATEGY_SOS and golden > 0:
        seed = sos_seed if use_seed else _state_seed(hist_b, d, n)
        rng = seed_state(seed, STREAM_SOLVER)
        if sos_max_len >= 0:
            detour_budget = max(0, (sos_max_len - 1 - best_k - golden) // 2)
        else:
            detour_budget = 2 * golden
        cur = np.empty(MAX_SYMBOLS, np.int64)
        cur[:n] = start[:n]
        nxt_golden = np.empty(MAX_SYMBOLS, np.int64)
        detour = np.empty(MAX_SYMBOLS, np.int64)
        for g in range(golden):
            i, s, j, t = best_moves[g, 0], best_moves[g, 1], best_moves[g, 2], best_moves[g, 3]
            slack = max_moves - (base + g) - 1
            if detour_budget > 0 and slack > 0:
                per_cap = min(2, slack, detour_budget)
                rng, depth_draw = below(rng, per_cap + 1)
                nxt_golden[:n] = cur[:n]
                _, gi, gj = move_result(cur, n, i, s, j, t, remove_to, add_to)
                nxt_golden[i] = gi
                nxt_golden[j] = gj
                detour[:n] = cur[:n]
                done = 0
                for _ in range(depth_draw):
                    moves = _neighbours(detour, n, remove_to, add_to)
                    if moves.shape[0] == 0:
                        break
                    # Candidates: moves that do not land on the next golden state (all moves
                    # if every one does).
                    ok = np.ones(moves.shape[0], np.bool_)
                    n_ok = 0
                    for r in range(moves.shape[0]):
                        same = True
                        for p in range(n):
                            v = detour[p]
                            if p == moves[r, 0]:
                                v = moves[r, 4]
                            elif p == moves[r, 2]:
                                v = moves[r, 5]
                            if v != nxt_golden[p]:
                                same = False
                                break
                        ok[r] = not same
                        if ok[r]:
                            n_ok += 1
                    if n_ok == 0:
                        ok[:] = True
                        n_ok = moves.shape[0]
                    rng, pick = below(rng, n_ok)
                    chosen = -1
                    for r in range(moves.shape[0]):
                        if ok[r]:
                            if pick == 0:
                                chosen = r
                                break
                            pick -= 1
                    buf, count = _append(buf, count, PLAN_MOVE, moves[chosen, 0],
                                         moves[chosen, 1], moves[chosen, 2], moves[chosen, 3])
                    detour[moves[chosen, 0]] = moves[chosen, 4]
                    detour[moves[chosen, 2]] = moves[chosen, 5]
                    done += 1
                for _ in range(done):
                    buf, count = _append(buf, count, PLAN_UNDO, 0, 0, 0, 0)
                detour_budget -= done
            buf, count = _append(buf, count, PLAN_MOVE, i, s, j, t)
            _, gi, gj = move_result(cur, n, i, s, j, t, remove_to, add_to)
            cur[i] = gi
            cur[j] = gj
        return True, buf[:count]
    for g in range(golden):
        buf, count = _append(buf, count, PLAN_MOVE, best_moves[g, 0], best_moves[g, 1],
                             best_moves[g, 2], best_moves[g, 3])
    return True, buf[:count]


@njit(cache=True)
def plan_rows(hist, depth, length, rows, max_moves, cap_override, strategy, use_seed,
              sos_seed, sos_max_len, remove_to, add_to):
    """Plans for ``rows``: (flat int64[P, 5] actions, int64[R + 1] offsets, bool[R] solvable).
    Serial, because plan lengths (the depth-first trace especially) are not known in advance."""
    n_rows = rows.shape[0]
    offsets = np.zeros(n_rows + 1, np.int64)
    solvable = np.zeros(n_rows, np.bool_)
    flat = np.empty((64, 5), np.int64)
    total = 0
    for k in range(n_rows):
        b = rows[k]
        ok, plan = _plan_one(hist[b], depth[b], length[b], max_moves, cap_override, strategy,
                             use_seed, sos_seed, sos_max_len, remove_to, add_to)
        solvable[k] = ok
        while total + plan.shape[0] > flat.shape[0]:
            grown = np.empty((2 * flat.shape[0], 5), np.int64)
            grown[:total] = flat[:total]
            flat = grown
        flat[total:total + plan.shape[0]] = plan
        total += plan.shape[0]
        offsets[k + 1] = total
    return flat[:total], offsets, solvable


@njit(cache=True)
def apply_plans(hist, depth, length, correct, dirty, rows, flat, offsets, remove_to, add_to):
    """Play the plans of ``plan_rows`` (moves and undos) into the state of ``rows``."""
    v_int, v_i, v_f, ops = _scratch()
    for k in range(rows.shape[0]):
        b = rows[k]
        n = length[b]
        for r in range(offsets[k], offsets[k + 1]):
            d = depth[b]
            if flat[r, 0] == PLAN_UNDO:
                if d > 0:
                    hist[b, d, :] = SYM_BLANK
                    depth[b] = d - 1
            else:
                legal, gi, gj = move_result(hist[b, d], n, flat[r, 1], flat[r, 2], flat[r, 3],
                                            flat[r, 4], remove_to, add_to)
                if legal and d + 1 < hist.shape[1]:
                    hist[b, d + 1, :] = hist[b, d, :]
                    hist[b, d + 1, flat[r, 1]] = gi
                    hist[b, d + 1, flat[r, 3]] = gj
                    depth[b] = d + 1
        correct[b] = _correct(hist[b, depth[b]], n, v_int, v_i, v_f, ops)
        dirty[b, 0] = -1
        dirty[b, 1] = -1


# ------------------------------------------------------------------------------ generation
@njit(cache=True)
def _write_number(out, pos, value):
    """Write the decimal digits of ``value`` >= 0 at out[pos:]; return the new position."""
    digits = np.empty(20, np.int64)
    m = 0
    while True:
        digits[m] = value % 10
        m += 1
        value //= 10
        if value == 0:
            break
    for r in range(m - 1, -1, -1):
        out[pos] = digits[r]
        pos += 1
    return pos


@njit(cache=True)
def _template(s, out):
    """A random correct equation from one of five templates (add, sub, mul, div, mixed) written
    into ``out``; return (rng state, length)."""
    s, which = below(s, 5)
    op = SYM_PLUS
    if which == 0:
        s, a = below(s, 100)
        s, b = below(s, 100)
        c = a + b
    elif which == 1:
        s, a = below(s, 100)
        s, b = below(s, a + 1)
        c = a - b
        op = SYM_MINUS
    elif which == 2:
        s, a = below(s, 21)
        s, b = below(s, 21)
        c = a * b
        op = SYM_TIMES
    elif which == 3:
        s, b = below(s, 20)
        b += 1
        s, c = below(s, 21)
        a = b * c
        op = SYM_DIVIDE
    else:
        s, a = below(s, 21)
        s, b = below(s, 21)
        s, c = below(s, 11)
        pos = _write_number(out, 0, a)
        out[pos] = SYM_PLUS
        pos = _write_number(out, pos + 1, b)
        out[pos] = SYM_TIMES
        pos = _write_number(out, pos + 1, c)
        out[pos] = SYM_EQUALS
        pos = _write_number(out, pos + 1, a + b * c)
        return s, pos
    pos = _write_number(out, 0, a)
    out[pos] = op
    pos = _write_number(out, pos + 1, b)
    out[pos] = SYM_EQUALS
    pos = _write_number(out, pos + 1, c)
    return s, pos


@njit(cache=True)
def _random_move(s, sym, n, remove_to, add_to):
    """One random legal move as the reference draws it (up to 200 tries of a random ordered
    pair i != j; the stroke taken is uniform among those i can give, the stroke added uniform
    among those j can take). Returns (rng state, moved?)."""
    n_segs = remove_to.shape[1]
    for _try in range(200):
        s, i = below(s, n)
        s, j = below(s, n)
        if i == j:
            continue
        n_rem = 0
        for q in range(n_segs):
            if remove_to[sym[i], q] >= 0:
                n_rem += 1
        n_add = 0
        for q in range(n_segs):
            if add_to[sym[j], q] >= 0:
                n_add += 1
        if n_rem == 0 or n_add == 0:
            continue
        s, pick_s = below(s, n_rem)
        s, pick_t = below(s, n_add)
        for q in range(n_segs):
            if remove_to[sym[i], q] >= 0:
                if pick_s == 0:
                    new_i = remove_to[sym[i], q]
                    break
                pick_s -= 1
        for q in range(n_segs):
            if add_to[sym[j], q] >= 0:
                if pick_t == 0:
                    new_j = add_to[sym[j], q]
                    break
                pick_t -= 1
        sym[i] = new_i
        sym[j] = new_j
        return s, True
    return s, False


@njit(cache=True)
def _break_first(sym, n, remove_to, add_to, v_int, v_i, v_f, ops):
    """Apply the first single move, in (i, j, s, t) order, that makes sym[:n] wrong (the
    reference's generation fallback); return whether one exists."""
    n_segs = remove_to.shape[1]
    for i in range(n):
        for j in range(n):
            if i == j:
                continue
            for q in range(n_segs):
                gi = remove_to[sym[i], q]
                if gi < 0:
                    continue
                for t in range(n_segs):
                    gj = add_to[sym[j], t]
                    if gj < 0:
                        continue
                    old_i = sym[i]
                    old_j = sym[j]
                    sym[i] = gi
                    sym[j] = gj
                    if not _correct(sym, n, v_int, v_i, v_f, ops):
                        return True
                    sym[i] = old_i
                    sym[j] = old_j
    return False


@row_kernel(5)
def generate_puzzles(hist, depth, length, correct, dirty, rows, seeds, break_moves,
                      enforce_min_distance, retry_limit, remove_to, add_to):
    """Fresh puzzles into ``rows``: a correct template equation broken by ``break_moves`` random
    moves, rejected while still correct or (enforce_min_distance) fixable in fewer moves, up to
    ``retry_limit`` times; then the fallback: the first single move, in (i, j, s, t) order, that
    makes a fresh template equation wrong."""
    n_cols = hist.shape[2]
    for k in prange(rows.shape[0]):
        b = rows[k]
        s = seed_state(seeds[k], STREAM_GENERATE)
        sym = np.empty(MAX_SYMBOLS, np.int64)
        v_int, v_i, v_f, ops = _scratch()
        n = 0
        accepted = False
        for _retry in range(retry_limit):
            s, n = _template(s, sym)
            if n > n_cols:
                continue
            ok = True
            for _m in range(break_moves):
                s, moved = _random_move(s, sym, n, remove_to, add_to)
                if not moved:
                    ok = False
                    break
            if not ok or _correct(sym, n, v_int, v_i, v_f, ops):
                continue
            if enforce_min_distance and break_moves > 1 and _fixable_within(
                    sym, n, break_moves - 1, remove_to, add_to):
                continue
            accepted = True
            break
        if not accepted:
            for _attempt in range(100):
                s, n = _template(s, sym)
                if n > n_cols:
                    continue
                if _break_first(sym, n, remove_to, add_to, v_int, v_i, v_f, ops):
                    accepted = True
                    break
            if not accepted:
                s, n = _template(s, sym)
        hist[b, :, :] = SYM_BLANK
        hist[b, 0, :n] = sym[:n]
        depth[b] = 0
        length[b] = n
        correct[b] = _correct(sym, n, v_int, v_i, v_f, ops)
        dirty[b, 0] = -1
        dirty[b, 1] = -1


@njit(cache=True)
def one_move_apart(a, b, n, remove_to, add_to):
    """True if equation b follows from a by one legal move."""
    first = -1
    second = -1
    for p in range(n):
        if a[p] != b[p]:
            if first < 0:
                first = p
            elif second < 0:
                second = p
            else:
                return False
    if second < 0:
        return False
    for i, j in ((first, second), (second, first)):
        for s in range(remove_to.shape[1]):
            if remove_to[a[i], s] == b[i]:
                for t in range(add_to.shape[1]):
                    if add_to[a[j], t] == b[j]:
                        return True
    return False


@njit(cache=True)
def blit_lists(depth, length, hist, dirty, rows, full, span, pitch, glyph_ids, label_ids, idx,
               xs):
    """Tile blits for ``rows``: every symbol (full) or only the dirty ones. Symbol p of n sits at
    x = (span - pitch * n) // 2 + pitch * p, which centres the equation when ``span`` is the
    frame width plus the gap between symbol boxes. Fills glyph_ids (the symbol shown), label_ids
    (its index), idx (the frame) and xs; returns how many entries were written."""
    m = 0
    for k in range(rows.shape[0]):
        b = rows[k]
        n = length[b]
        x0 = (span - pitch * n) // 2
        d = depth[b]
        for c in range(n if full else 2):
            p = c if full else dirty[b, c]
            if p < 0:
                continue
            glyph_ids[m] = hist[b, d, p]
            label_ids[m] = p
            idx[m] = b
            xs[m] = x0 + pitch * p
            m += 1
    return m
