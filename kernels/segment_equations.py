"""Batched kernels for matchstick moves on arithmetic equations written in segment glyphs
(Numba): the step, puzzle generation, the searches over stick moves and a search-free lower
bound on the actions a fix takes.

An equation is a row of symbol codes (kernels/expressions: digits 0-9, then + - * / = and a blank
for padding, SYM_*) with a length; kernels/expressions decides whether it is correct. Which
strokes make up which symbol is the caller's glyph model: the kernels only see two lookup tables,
``remove_to[g, s]`` (the symbol left when stroke s is taken from symbol g, or -1) and
``add_to[g, t]`` (the symbol made by adding stroke t to g, or -1). A move takes stroke s from
symbol i and adds it as stroke t of symbol j (i != j); both results must be symbols. ``moves_into``
is the one enumeration of the legal moves, in the order (i, s, j, t), each ascending, which is
what makes the breadth- and depth-first searches below visit states in a fixed, documented order.

Search states are packed into two 64-bit words (4 bits a symbol, up to 32 symbols) and kept in a
hash set (kernels/keyset), so breadth-first search and the depth-first trace visit each state
once.
"""
import numpy as np
from numba import njit, prange

from .batching import row_kernel
from .expressions import (MAX_SYMBOLS, SYM_BLANK, SYM_DIVIDE, SYM_EQUALS, SYM_MINUS, SYM_PLUS,
                          SYM_TIMES, is_correct, scratch)
from .keyset import mix, new_set, set_add, set_full, set_grow
from .rng import below, seed_state

# Plan operations written by the planners: (op, i, s, j, t) rows.
PLAN_MOVE = 0
PLAN_UNDO = 1

STRATEGY_SOS = 0
STRATEGY_BFS = 1
STRATEGY_DFS = 2

STREAM_GENERATE = np.uint64(11)
STREAM_SOLVER = np.uint64(12)


@njit(cache=True, nogil=True)
def correct_rows(hist, depth, length, rows, out):
    """out[b] = is the current equation of each row in ``rows`` correct."""
    v_int, v_i, v_f, ops = scratch()
    for k in range(rows.shape[0]):
        b = rows[k]
        out[b] = is_correct(hist[b, depth[b]], length[b], v_int, v_i, v_f, ops)


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


@njit(cache=True, inline="always")
def _n_strokes(table, g):
    """How many strokes of symbol g ``table`` allows (remove_to: to take, add_to: to add)."""
    count = 0
    for q in range(table.shape[1]):
        if table[g, q] >= 0:
            count += 1
    return count


@njit(cache=True, inline="always")
def _nth_stroke(table, g, k):
    """The symbol that the k-th allowed stroke of symbol g makes (k < _n_strokes)."""
    for q in range(table.shape[1]):
        if table[g, q] >= 0:
            if k == 0:
                return table[g, q]
            k -= 1
    return -1


@njit(cache=True, nogil=True)
def moves_into(sym, n, remove_to, add_to, out):
    """Every legal move from sym[:n] in (i, s, j, t) order, as rows (i, s, j, t, new symbol at
    i, new symbol at j) of ``out`` (int64[M, 6]; replaced by a new array when too small).
    Returns (out, number of moves)."""
    n_rem = 0
    n_add = 0
    for p in range(n):
        n_rem += _n_strokes(remove_to, sym[p])
        n_add += _n_strokes(add_to, sym[p])
    if out.shape[0] < n_rem * n_add:
        out = np.empty((n_rem * n_add, 6), np.int64)
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
    return out, m


@njit(cache=True, nogil=True)
def neighbours(sym, n, remove_to, add_to):
    """The rows of ``moves_into`` as a new array of their own."""
    out, m = moves_into(sym, n, remove_to, add_to, np.empty((0, 6), np.int64))
    return out[:m]


@njit(cache=True, inline="always")
def _successor(sym, n, moves, r, out):
    """out[:n] = sym[:n] after move r of ``moves`` (out may be sym itself)."""
    out[:n] = sym[:n]
    out[moves[r, 0]] = moves[r, 4]
    out[moves[r, 2]] = moves[r, 5]


@njit(cache=True, inline="always")
def _apply(sym, n, i, s, j, t, remove_to, add_to):
    """Make the legal move (i, s, j, t) in sym."""
    _, gi, gj = move_result(sym, n, i, s, j, t, remove_to, add_to)
    sym[i] = gi
    sym[j] = gj


@njit(cache=True, inline="always")
def _push(hist, depth, b, i, gi, j, gj):
    """A move onto row b's stack: the next level is the current one with gi at i, gj at j."""
    d = depth[b]
    hist[b, d + 1, :] = hist[b, d, :]
    hist[b, d + 1, i] = gi
    hist[b, d + 1, j] = gj
    depth[b] = d + 1


@njit(cache=True, inline="always")
def _pop(hist, depth, b):
    """An undo on row b's stack (depth[b] > 0)."""
    d = depth[b]
    hist[b, d, :] = SYM_BLANK
    depth[b] = d - 1


# ------------------------------------------------------------------------------ stepping
@njit(cache=True, nogil=True)
def step_equations(hist, depth, length, correct, dirty, kind, ints, rows, move_kind, max_moves,
                   remove_to, add_to, budget_code, illegal_code, nothing_code, feedback):
    """The moves and undos of one step, in place, for the rows where ``rows`` is true.

    hist[b, d] is the equation after d moves in effect (d = depth[b]). A move (kind[b] ==
    move_kind) first checks the move budget (depth < max_moves), then legality; a legal one
    writes hist[b, d + 1]. Any other action (undo) pops one level. dirty[b] receives the (up to
    two) symbol positions whose glyph changed, -1 otherwise.
    """
    v_int, v_i, v_f, ops = scratch()
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
            _push(hist, depth, b, i, gi, j, gj)
            dirty[b, 0] = i
            dirty[b, 1] = j
        else:
            if d == 0:
                feedback[b] = nothing_code
                continue
            m = 0
            for p in range(n):
                if hist[b, d, p] != hist[b, d - 1, p] and m < 2:
                    dirty[b, m] = p
                    m += 1
            _pop(hist, depth, b)
        correct[b] = is_correct(hist[b, depth[b]], n, v_int, v_i, v_f, ops)


# ------------------------------------------------------------------------------ search
@njit(cache=True, nogil=True)
def _bfs_fix(start, n, cap, remove_to, add_to):
    """(found, moves): the first correct equation within ``cap`` moves of sym ``start`` in
    breadth-first order (moves expanded in (i, s, j, t) order, each state queued once,
    correctness tested when a state is dequeued), as int64[L, 4] rows (i, s, j, t)."""
    v_int, v_i, v_f, ops = scratch()
    cur = np.empty(MAX_SYMBOLS, np.int64)
    nxt = np.empty(MAX_SYMBOLS, np.int64)
    moves = np.empty((0, 6), np.int64)
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
    table = new_set(256)
    set_add(table, k0, k1)
    found = -1
    while head < tail:
        _unpack(nodes0[head], nodes1[head], n, cur)
        if is_correct(cur, n, v_int, v_i, v_f, ops):
            found = head
            break
        if level[head] >= cap:
            head += 1
            continue
        moves, n_moves = moves_into(cur, n, remove_to, add_to, moves)
        for r in range(n_moves):
            _successor(cur, n, moves, r, nxt)
            c0, c1 = _pack(nxt, n)
            if set_full(table):
                table = set_grow(table)
            if not set_add(table, c0, c1):
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
            move[tail, :] = moves[r, :4]
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


@njit(cache=True, nogil=True)
def _fixable_within(start, n, cap, remove_to, add_to):
    """True if some correct equation is at most ``cap`` moves away (cap >= 1), the start itself
    excluded: the generator's minimum-distance test (breadth-first, each state once)."""
    v_int, v_i, v_f, ops = scratch()
    frontier = np.empty((1, 2), np.uint64)
    frontier[0, 0], frontier[0, 1] = _pack(start, n)
    table = new_set(256)
    set_add(table, frontier[0, 0], frontier[0, 1])
    cur = np.empty(MAX_SYMBOLS, np.int64)
    nxt_sym = np.empty(MAX_SYMBOLS, np.int64)
    moves = np.empty((0, 6), np.int64)
    for _level in range(cap):
        nxt = np.empty((16, 2), np.uint64)
        m = 0
        for f in range(frontier.shape[0]):
            _unpack(frontier[f, 0], frontier[f, 1], n, cur)
            moves, n_moves = moves_into(cur, n, remove_to, add_to, moves)
            for r in range(n_moves):
                _successor(cur, n, moves, r, nxt_sym)
                c0, c1 = _pack(nxt_sym, n)
                if set_full(table):
                    table = set_grow(table)
                if set_add(table, c0, c1):
                    if is_correct(nxt_sym, n, v_int, v_i, v_f, ops):
                        return True
                    if m == nxt.shape[0]:
                        grown = np.empty((2 * m, 2), np.uint64)
                        grown[:m] = nxt
                        nxt = grown
                    nxt[m, 0] = c0
                    nxt[m, 1] = c1
                    m += 1
        frontier = nxt[:m]
    return False


@njit(cache=True, nogil=True)
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



@njit(cache=True, nogil=True)
def _dfs_trace(start, n, cap, remove_to, add_to, buf, count):
    """The reference's depth-first trace: every tried move, an undo after each failed branch,
    one global visited set, depth cap ``cap``. Returns (found, buf, count)."""
    v_int, v_i, v_f, ops = scratch()
    if is_correct(start, n, v_int, v_i, v_f, ops):
        return True, buf, count
    if cap <= 0:
        return False, buf, count
    states = np.empty((cap + 1, MAX_SYMBOLS), np.int64)
    states[0, :n] = start[:n]
    lists = [neighbours(states[0], n, remove_to, add_to)]
    for _ in range(cap - 1):
        lists.append(np.empty((0, 6), np.int64))
    cursor = np.zeros(cap, np.int64)
    table = new_set(256)
    k0, k1 = _pack(states[0], n)
    set_add(table, k0, k1)
    d = 0
    while True:
        moves = lists[d]
        if cursor[d] < moves.shape[0]:
            r = cursor[d]
            cursor[d] += 1
            _successor(states[d], n, moves, r, states[d + 1])
            c0, c1 = _pack(states[d + 1], n)
            if set_full(table):
                table = set_grow(table)
            if not set_add(table, c0, c1):
                continue
            buf, count = _append(buf, count, PLAN_MOVE, moves[r, 0], moves[r, 1], moves[r, 2],
                                 moves[r, 3])
            if is_correct(states[d + 1], n, v_int, v_i, v_f, ops):
                return True, buf, count
            if d + 1 >= cap:
                buf, count = _append(buf, count, PLAN_UNDO, 0, 0, 0, 0)
                continue
            d += 1
            lists[d] = neighbours(states[d], n, remove_to, add_to)
            cursor[d] = 0
        else:
            if d == 0:
                return False, buf, count
            d -= 1
            buf, count = _append(buf, count, PLAN_UNDO, 0, 0, 0, 0)


@njit(cache=True, nogil=True)
def _state_seed(hist_b, d, n):
    """A 64-bit seed that is a function of the episode's history stack (levels 0..d)."""
    h = np.uint64(d + 1) * np.uint64(0x9E3779B97F4A7C15)
    for level in range(d + 1):
        k0, k1 = _pack(hist_b[level], n)
        h = mix(h ^ k0, k1)
    return h


@njit(cache=True, inline="always")
def _depth_cap(max_moves, used, cap_override):
    """Moves a search may make when ``used`` of the ``max_moves`` budget are in effect."""
    cap = max_moves - used
    if cap_override >= 0 and cap_override < cap:
        cap = cap_override
    return cap


@njit(cache=True, nogil=True)
def _sos_plan(buf, count, start, n, golden_moves, base, max_moves, detour_budget, rng,
              remove_to, add_to):
    """The sos plan from ``start`` (``base`` moves in effect): the golden moves, each preceded
    by a detour of 0..2 random moves (drawn from ``rng``, never onto the next golden state
    unless every move lands there) and as many undos, while the detour budget and the move
    budget allow. Returns (buf, count)."""
    cur = np.empty(MAX_SYMBOLS, np.int64)
    cur[:n] = start[:n]
    nxt_golden = np.empty(MAX_SYMBOLS, np.int64)
    detour = np.empty(MAX_SYMBOLS, np.int64)
    landing = np.empty(MAX_SYMBOLS, np.int64)
    moves = np.empty((0, 6), np.int64)
    for g in range(golden_moves.shape[0]):
        i, s, j, t = golden_moves[g, 0], golden_moves[g, 1], golden_moves[g, 2], golden_moves[g, 3]
        slack = max_moves - (base + g) - 1
        if detour_budget > 0 and slack > 0:
            per_cap = min(2, slack, detour_budget)
            rng, depth_draw = below(rng, per_cap + 1)
            nxt_golden[:n] = cur[:n]
            _apply(nxt_golden, n, i, s, j, t, remove_to, add_to)
            detour[:n] = cur[:n]
            done = 0
            for _ in range(depth_draw):
                moves, n_moves = moves_into(detour, n, remove_to, add_to, moves)
                if n_moves == 0:
                    break
                # Candidates: moves that do not land on the next golden state (all moves if
                # every one does).
                ok = np.ones(n_moves, np.bool_)
                n_ok = 0
                for r in range(n_moves):
                    _successor(detour, n, moves, r, landing)
                    ok[r] = not (landing[:n] == nxt_golden[:n]).all()
                    if ok[r]:
                        n_ok += 1
                if n_ok == 0:
                    ok[:] = True
                    n_ok = n_moves
                rng, pick = below(rng, n_ok)
                chosen = -1
                for r in range(n_moves):
                    if ok[r]:
                        if pick == 0:
                            chosen = r
                            break
                        pick -= 1
                buf, count = _append(buf, count, PLAN_MOVE, moves[chosen, 0], moves[chosen, 1],
                                     moves[chosen, 2], moves[chosen, 3])
                _successor(detour, n, moves, chosen, detour)
                done += 1
            for _ in range(done):
                buf, count = _append(buf, count, PLAN_UNDO, 0, 0, 0, 0)
            detour_budget -= done
        buf, count = _append(buf, count, PLAN_MOVE, i, s, j, t)
        _apply(cur, n, i, s, j, t, remove_to, add_to)
    return buf, count


@njit(cache=True, nogil=True)
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
        cap = _depth_cap(max_moves, d - k, cap_override)
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
        found, buf2, count2 = _dfs_trace(start, n, _depth_cap(max_moves, base, cap_override),
                                         remove_to, add_to, buf.copy(), count)
        if found:
            return True, buf2[:count2]
        # The reference's global visited set can miss a fix; fall back to the golden path.
    if strategy == STRATEGY_SOS and golden > 0:
        seed = sos_seed if use_seed else _state_seed(hist_b, d, n)
        if sos_max_len >= 0:
            detour_budget = max(0, (sos_max_len - 1 - best_k - golden) // 2)
        else:
            detour_budget = 2 * golden
        buf, count = _sos_plan(buf, count, start, n, best_moves, base, max_moves, detour_budget,
                               seed_state(seed, STREAM_SOLVER), remove_to, add_to)
        return True, buf[:count]
    for g in range(golden):
        buf, count = _append(buf, count, PLAN_MOVE, best_moves[g, 0], best_moves[g, 1],
                             best_moves[g, 2], best_moves[g, 3])
    return True, buf[:count]


@njit(cache=True, nogil=True)
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



@njit(cache=True, nogil=True)
def apply_plans(hist, depth, length, correct, dirty, rows, flat, offsets, remove_to, add_to):
    """Play the plans of ``plan_rows`` (moves and undos) into the state of ``rows``."""
    v_int, v_i, v_f, ops = scratch()
    for k in range(rows.shape[0]):
        b = rows[k]
        n = length[b]
        for r in range(offsets[k], offsets[k + 1]):
            d = depth[b]
            if flat[r, 0] == PLAN_UNDO:
                if d > 0:
                    _pop(hist, depth, b)
            else:
                legal, gi, gj = move_result(hist[b, d], n, flat[r, 1], flat[r, 2], flat[r, 3],
                                            flat[r, 4], remove_to, add_to)
                if legal and d + 1 < hist.shape[1]:
                    _push(hist, depth, b, flat[r, 1], gi, flat[r, 3], gj)
        correct[b] = is_correct(hist[b, depth[b]], n, v_int, v_i, v_f, ops)
        dirty[b, 0] = -1
        dirty[b, 1] = -1


# ------------------------------------------------------------------------------ generation
@njit(cache=True, nogil=True)
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


@njit(cache=True, nogil=True)
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



@njit(cache=True, nogil=True)
def _random_move(s, sym, n, remove_to, add_to):
    """One random legal move as the reference draws it (up to 200 tries of a random ordered
    pair i != j; the stroke taken is uniform among those i can give, the stroke added uniform
    among those j can take). Returns (rng state, moved?)."""
    for _try in range(200):
        s, i = below(s, n)
        s, j = below(s, n)
        if i == j:
            continue
        n_rem = _n_strokes(remove_to, sym[i])
        n_add = _n_strokes(add_to, sym[j])
        if n_rem == 0 or n_add == 0:
            continue
        s, pick_s = below(s, n_rem)
        s, pick_t = below(s, n_add)
        new_i = _nth_stroke(remove_to, sym[i], pick_s)
        sym[j] = _nth_stroke(add_to, sym[j], pick_t)
        sym[i] = new_i
        return s, True
    return s, False


@njit(cache=True, nogil=True)
def _break_first(sym, n, remove_to, add_to, v_int, v_i, v_f, ops):
    """Apply the first single move, in (i, j, s, t) order, that makes sym[:n] wrong (the
    reference's generation fallback); return whether one exists."""
    moves = neighbours(sym, n, remove_to, add_to)
    n_segs = remove_to.shape[1]
    order = np.empty(moves.shape[0], np.int64)
    for r in range(moves.shape[0]):
        order[r] = ((moves[r, 0] * n + moves[r, 2]) * n_segs + moves[r, 1]) * n_segs + moves[r, 3]
    after = np.empty(MAX_SYMBOLS, np.int64)
    for r in np.argsort(order):
        _successor(sym, n, moves, r, after)
        if not is_correct(after, n, v_int, v_i, v_f, ops):
            sym[:n] = after[:n]
            return True
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
        v_int, v_i, v_f, ops = scratch()
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
            if not ok or is_correct(sym, n, v_int, v_i, v_f, ops):
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
        correct[b] = is_correct(sym, n, v_int, v_i, v_f, ops)
        dirty[b, 0] = -1
        dirty[b, 1] = -1



@njit(cache=True, nogil=True)
def one_move_apart(a, b, n, remove_to, add_to):
    """True if equation b follows from a by one legal move."""
    moves = neighbours(a, n, remove_to, add_to)
    for r in range(moves.shape[0]):
        i = moves[r, 0]
        j = moves[r, 2]
        if moves[r, 4] != b[i] or moves[r, 5] != b[j]:
            continue
        same = True
        for p in range(n):
            if p != i and p != j and a[p] != b[p]:
                same = False
                break
        if same:
            return True
    return False


@njit(cache=True, nogil=True)
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


# ------------------------------------------------------------------------------ measures
@njit(cache=True, nogil=True)
def fix_lower_bounds(hist, depth, length, correct, max_moves, out):
    """out[b] = a lower bound on the actions (moves and undos) that make row b's equation
    correct, from its move stack alone: 0 when the current equation is correct (``correct``);
    1 while the move budget ``max_moves`` is not used up (a move might fix it); with the budget
    used up an undo must come first, so 1 when the equation one undo back is correct, else 2.
    Never above the true count, and equal to it under a one-move budget whenever the puzzle
    (level 0) can be fixed in one move. One equation evaluation per budget-exhausted row, none
    otherwise (the exact count needs a search that evaluates every successor: ~300 ns each)."""
    v_int, v_i, v_f, ops = scratch()
    for b in range(depth.shape[0]):
        d = depth[b]
        if correct[b]:
            out[b] = 0
        elif d < max_moves:
            out[b] = 1
        elif d > 0 and is_correct(hist[b, d - 1], length[b], v_int, v_i, v_f, ops):
            out[b] = 1
        else:
            out[b] = 2
