"""The patch_reassembly solver (Numba): the tiling the spec's row-major backtracking over the
parked pieces finds first, found by a bounded exact-cover search (``SEARCH_BUDGET`` placements an
episode; past it another completing tiling), then the spec's (wrong place, right place) /
(remove, place again) padding. Pieces, boards and positions are laid out as in
kernels/patch_reassembly.py, whose placement primitives this uses.
"""
import numpy as np
from numba import njit, prange

from .batching import row_kernel
from .patch_reassembly import ACT_PLACE, ACT_REMOVE, _lift, _put, can_place
from .rng import below, seed_state

STREAM_SOLVER = np.uint64(12)

# Placements the exact search may try per episode before it gives up (see solve_puzzles).
SEARCH_BUDGET = 200_000


@njit(cache=True, nogil=True)
def _first_empty(board, cell):
    """The first empty cell at or after ``cell`` in row-major order (R * C: none)."""
    C = board.shape[1]
    n = board.shape[0] * C
    while cell < n and board[cell // C, cell % C] != 0:
        cell += 1
    return cell


@njit(cache=True, nogil=True)
def _shape_classes(offsets, n_cells):
    """same[k]: the lowest-numbered piece with piece k's shape (offsets from the anchor)."""
    P = n_cells.shape[0]
    same = np.empty(P, np.int64)
    for k in range(P):
        same[k] = k
        for j in range(k):
            if same[j] == j and n_cells[j] == n_cells[k]:
                equal = True
                for m in range(n_cells[k]):
                    if (offsets[j, m, 0] != offsets[k, m, 0]
                            or offsets[j, m, 1] != offsets[k, m, 1]):
                        equal = False
                        break
                if equal:
                    same[k] = j
                    break
    return same


@njit(cache=True, nogil=True)
def _keep_if_first(order, same, where, taken, cand, best, n_best):
    """A tiling was found (``where[k]``: piece k's anchor cell, row-major index). The
    reference's backtracking would meet its pieces' positions in ``order``, pieces of one shape
    being interchangeable: the earliest such piece in ``order`` takes the first of their
    anchors, and so on. Keep the result in ``best`` if it comes before the best so far (the
    backtracking's first solution is the first in this order). Returns the new count of
    tilings kept (0 or 1)."""
    n = order.shape[0]
    taken[:] = False
    for t in range(n):
        k = order[t]
        pick = -1
        for u in range(n):
            j = order[u]
            if same[j] == same[k] and not taken[u] and (pick < 0 or where[j] < where[order[pick]]):
                pick = u
        taken[pick] = True
        cand[t] = where[order[pick]]
    if n_best > 0:
        for t in range(n):
            if cand[t] != best[t]:
                if cand[t] > best[t]:
                    return n_best
                break
    best[:] = cand
    return 1


@njit(cache=True, nogil=True)
def _behind(order, same, rank, where, mask, e, offsets, C, best, vals):
    """Does every tiling that completes the current placements come after ``best`` in
    ``_keep_if_first``'s order? A placed piece k is at ``where[k]``; a parked one will have its
    first cell at or after the first empty cell ``e``, so its anchor at or after e minus the
    offset of that cell. Position t of the order is the rank[t]-th smallest anchor among
    order[t]'s shape; from these bounds it is known exactly once that shape is all placed."""
    n = order.shape[0]
    for t in range(n):
        k = order[t]
        m = 0
        exact = True
        for u in range(n):
            j = order[u]
            if same[j] != same[k]:
                continue
            if (mask >> j) & 1:
                v = e - offsets[j, 0, 0] * C - offsets[j, 0, 1]
                exact = False
            else:
                v = where[j]
            i = m   # insertion sort: vals[:m + 1] ascending
            while i > 0 and vals[i - 1] > v:
                vals[i] = vals[i - 1]
                i -= 1
            vals[i] = v
            m += 1
        low = vals[rank[t]]
        if low != best[t]:
            return low > best[t]
        if not exact:
            return False
    return False


@njit(cache=True, nogil=True)
def _search(board, offsets, n_cells, order, known, out_rc, budget, nodes):
    """The reference's solution, found without its backtracking's blow-up. That backtracking
    places pieces ``order`` in order, each at the next legal anchor in row-major order, so its
    first full board is the first of all tilings when each is read as the list of its pieces'
    anchors in ``order``. Here every tiling of the empty cells by the pieces is enumerated by an
    exact-cover search and the first kept: the first empty cell in row-major order is covered
    by a piece whose row-major first cell lies on it (every cell before it is full), so each
    level tries each remaining piece at one anchor, and of pieces with equal shapes only the
    lowest-numbered remaining one (the others give the same tilings with pieces swapped, which
    ``_keep_if_first`` orders).

    At most ``budget`` placements are tried (``nodes[0]`` counts them). Returns 1 with out_rc[t]
    = order[t]'s anchor (the first tiling), 0 if no tiling exists, -1 if the budget ran out
    before the search did (out_rc then holds the first tiling met so far, if any:
    ``nodes[1]`` = 1). ``board`` is left as given."""
    R = board.shape[0]
    C = board.shape[1]
    P = n_cells.shape[0]
    n = order.shape[0]
    same = _shape_classes(offsets, n_cells)
    mask = 0
    for t in range(n):
        mask |= 1 << order[t]
    where = np.zeros(P, np.int64)
    taken = np.zeros(n, np.bool_)
    cand = np.zeros(n, np.int64)
    best = np.zeros(n, np.int64)
    n_best = 0
    rank = np.zeros(n, np.int64)   # how many pieces of order[t]'s shape come before it
    for t in range(n):
        for u in range(t):
            if same[order[u]] == same[order[t]]:
                rank[t] += 1
    vals = np.empty(n, np.int64)
    if known.shape[0] > 0:
        where[:] = known
        n_best = _keep_if_first(order, same, where, taken, cand, best, n_best)
    cell = np.empty(n + 1, np.int64)
    nxt = np.zeros(n + 1, np.int64)
    piece = np.empty(n + 1, np.int64)
    cell[0] = _first_empty(board, 0)
    result = 0
    d = 0
    while d >= 0:
        if nxt[d] == P:   # every piece tried on this level's cell: back up a level
            d -= 1
            if d >= 0:
                k = piece[d]
                _lift(board, offsets[k], n_cells[k], k, where[k] // C - offsets[k, 0, 0],
                      where[k] % C - offsets[k, 0, 1])
                mask |= 1 << k
            continue
        k = nxt[d]
        nxt[d] += 1
        if not (mask >> k) & 1:
            continue
        first = True
        for j in range(k):
            if (mask >> j) & 1 and same[j] == same[k]:
                first = False
                break
        if not first:
            continue
        nodes[0] += 1
        if nodes[0] > budget:
            result = -1
            break
        r = cell[d] // C - offsets[k, 0, 0]
        c = cell[d] % C - offsets[k, 0, 1]
        if not can_place(board, offsets[k], n_cells[k], k, r, c):
            continue
        where[k] = r * C + c
        if mask == 1 << k:   # the last piece fits: a tiling
            n_best = _keep_if_first(order, same, where, taken, cand, best, n_best)
            continue
        _put(board, offsets[k], n_cells[k], k, r, c)
        mask &= ~(1 << k)
        e = _first_empty(board, cell[d] + 1)
        if n_best > 0 and _behind(order, same, rank, where, mask, e, offsets, C, best, vals):
            _lift(board, offsets[k], n_cells[k], k, r, c)   # every completion comes later
            mask |= 1 << k
            continue
        piece[d] = k
        d += 1
        cell[d] = e
        nxt[d] = 0
    for t in range(d - 1, -1, -1):   # leave the board as given
        k = piece[t]
        _lift(board, offsets[k], n_cells[k], k, where[k] // C - offsets[k, 0, 0],
              where[k] % C - offsets[k, 0, 1])
    for t in range(n):
        out_rc[t, 0] = best[t] // C
        out_rc[t, 1] = best[t] % C
    nodes[1] = n_best
    if result == 0 and n_best > 0:
        result = 1
    return result


@njit(cache=True, nogil=True)
def _on_own_anchors(pos, anchor, R, C):
    """Is every placed piece at its anchor in the generating tiling (always so after a reset)?"""
    for k in range(pos.shape[0]):
        if 0 <= pos[k, 0] < R and 0 <= pos[k, 1] < C and (pos[k, 0] != anchor[k, 0]
                                                          or pos[k, 1] != anchor[k, 1]):
            return False
    return True


@njit(cache=True, nogil=True)
def _filled(board):
    n = 0
    for r in range(board.shape[0]):
        for c in range(board.shape[1]):
            if board[r, c] != 0:
                n += 1
    return n


@njit(cache=True, nogil=True)
def _heuristic(board, pos, park, offsets, n_cells, plan):
    """The spec's one-move fallback: place the first parked piece at its first legal anchor;
    else remove-and-replace a placed piece where that fills more cells. Returns the number of
    actions written (0: none)."""
    R = board.shape[0]
    C = board.shape[1]
    P = pos.shape[0]
    for k in range(P):
        if 0 <= pos[k, 0] < R and 0 <= pos[k, 1] < C:
            continue
        for r in range(R):
            for c in range(C):
                if can_place(board, offsets[k], n_cells[k], k, r, c):
                    plan[0, 0] = ACT_PLACE
                    plan[0, 1] = k
                    plan[0, 2] = r
                    plan[0, 3] = c
                    return 1
    # Every parked piece is stuck: lift a placed piece j and put a larger parked piece k
    # where it now fits (that covers more cells).
    for j in range(P):
        rj = pos[j, 0]
        cj = pos[j, 1]
        if not (0 <= rj < R and 0 <= cj < C):
            continue
        _lift(board, offsets[j], n_cells[j], j, rj, cj)
        for k in range(P):
            if k == j or (0 <= pos[k, 0] < R and 0 <= pos[k, 1] < C):
                continue
            if n_cells[k] <= n_cells[j]:
                continue
            for r in range(R):
                for c in range(C):
                    if can_place(board, offsets[k], n_cells[k], k, r, c):
                        _put(board, offsets[j], n_cells[j], j, rj, cj)
                        plan[0, 0] = ACT_REMOVE
                        plan[0, 1] = j
                        plan[1, 0] = ACT_PLACE
                        plan[1, 1] = k
                        plan[1, 2] = r
                        plan[1, 3] = c
                        return 2
        _put(board, offsets[j], n_cells[j], j, rj, cj)
    return 0


@njit(cache=True, nogil=True)
def _tiling_plan(board, pos, anchor, offsets, n_cells, budget, plan):
    """The moves that complete the board, written to ``plan`` (kind, piece, row, col); returns
    their number, or -1 when the board cannot be completed (then nothing is written).

    The reference's: one ``place`` per parked piece, in id order, at its anchor in the
    backtracking's first tiling (``_search``). If the search runs out of ``budget`` first: the
    first tiling it met, if any; else the generating tiling (the puzzle's own pieces at their
    ``anchor``): the parked pieces' places when every placed piece sits on its own anchor (always
    so from a reset), else a ``remove`` of each piece placed elsewhere, then those places."""
    R = board.shape[0]
    C = board.shape[1]
    P = pos.shape[0]
    order = np.empty(P, np.int64)
    n_order = 0
    for k in range(P):
        if not (0 <= pos[k, 0] < R and 0 <= pos[k, 1] < C):
            order[n_order] = k
            n_order += 1
    if n_order == 0:
        return -1   # every piece placed, the board not full
    order = order[:n_order]
    rc = np.zeros((n_order, 2), np.int64)
    nodes = np.zeros(2, np.int64)
    known = np.empty(0, np.int64)
    if _on_own_anchors(pos, anchor, R, C):
        known = anchor[:, 0].astype(np.int64) * C + anchor[:, 1]
    found = _search(board.copy(), offsets, n_cells, order, known, rc, budget, nodes)
    if found == 0:
        return -1
    if found == 1 or nodes[1] > 0:
        for t in range(n_order):
            plan[t, 0] = ACT_PLACE
            plan[t, 1] = order[t]
            plan[t, 2] = rc[t, 0]
            plan[t, 3] = rc[t, 1]
        return n_order
    length = 0
    for k in range(P):   # the generating tiling, lifting what lies elsewhere first
        if 0 <= pos[k, 0] < R and 0 <= pos[k, 1] < C and (pos[k, 0] != anchor[k, 0]
                                                          or pos[k, 1] != anchor[k, 1]):
            plan[length, 0] = ACT_REMOVE
            plan[length, 1] = k
            plan[length, 2] = 0
            plan[length, 3] = 0
            length += 1
    for k in range(P):
        if pos[k, 0] != anchor[k, 0] or pos[k, 1] != anchor[k, 1]:
            plan[length, 0] = ACT_PLACE
            plan[length, 1] = k
            plan[length, 2] = anchor[k, 0]
            plan[length, 3] = anchor[k, 1]
            length += 1
    return length


@row_kernel(6)
def solve_puzzles(board, pos, park, anchor, offsets, n_cells, rows, seeds, num_steps, budget,
                  plans, plan_len):
    """Batched solver. plans[i, t] = (kind, piece, row, col); plan_len[i] = actions before the
    final stop (the caller appends it). A solved row gets none; one that cannot be completed
    gets the heuristic move; else the moves of ``_tiling_plan`` (at most ``budget`` placements
    tried by its search). Padding (num_steps > 0 places wanted): up to 5,000 times, collect
    every (plan index, legal different anchor of that piece in the simulated pre-state) and turn
    one place into (wrong place, right place); with no such opportunity, insert (remove, same
    place) after a random place."""
    R = board.shape[1]
    C = board.shape[2]
    cap = plans.shape[1]
    for i in prange(rows.shape[0]):
        b = rows[i]
        if _filled(board[b]) == R * C:
            plan_len[i] = 0
            continue
        length = _tiling_plan(board[b], pos[b], anchor[b], offsets[b], n_cells[b], budget,
                              plans[i])
        if length < 0:
            plan_len[i] = _heuristic(board[b].copy(), pos[b], park[b], offsets[b], n_cells[b],
                                     plans[i])
            continue
        s = seed_state(seeds[i], STREAM_SOLVER)
        opp_t = np.empty(cap * R * C, np.int64)
        opp_r = np.empty(cap * R * C, np.int64)
        opp_c = np.empty(cap * R * C, np.int64)
        sim = np.empty_like(board[b])
        simpos = np.empty_like(pos[b])
        for _ in range(5000):
            places = 0
            for t in range(length):
                if plans[i, t, 0] == ACT_PLACE:
                    places += 1
            if places >= num_steps or length + 2 > cap:
                break
            # Opportunities: every legal anchor other than the planned one, in the state just
            # before each planned place.
            sim[:, :] = board[b]
            simpos[:, :] = pos[b]
            nopp = 0
            for t in range(length):
                k = plans[i, t, 1]
                n = n_cells[b, k]
                if plans[i, t, 0] == ACT_PLACE:
                    for r in range(R):
                        for c in range(C):
                            if (r != plans[i, t, 2] or c != plans[i, t, 3]) and can_place(
                                    sim, offsets[b, k], n, k, r, c):
                                opp_t[nopp] = t
                                opp_r[nopp] = r
                                opp_c[nopp] = c
                                nopp += 1
                    _lift(sim, offsets[b, k], n, k, simpos[k, 0], simpos[k, 1])
                    _put(sim, offsets[b, k], n, k, plans[i, t, 2], plans[i, t, 3])
                    simpos[k, 0] = plans[i, t, 2]
                    simpos[k, 1] = plans[i, t, 3]
                else:
                    _lift(sim, offsets[b, k], n, k, simpos[k, 0], simpos[k, 1])
                    simpos[k, 0] = park[b, k, 0]
                    simpos[k, 1] = park[b, k, 1]
            if nopp > 0:
                s, pick = below(s, nopp)
                t = opp_t[pick]
                for u in range(length - 1, t - 1, -1):
                    plans[i, u + 1] = plans[i, u]
                plans[i, t, 2] = opp_r[pick]
                plans[i, t, 3] = opp_c[pick]
                length += 1
            else:
                s, pick = below(s, places)
                t = 0
                seen = -1
                for u in range(length):
                    if plans[i, u, 0] == ACT_PLACE:
                        seen += 1
                        if seen == pick:
                            t = u
                            break
                for u in range(length - 1, t, -1):
                    plans[i, u + 2] = plans[i, u]
                plans[i, t + 1, 0] = ACT_REMOVE
                plans[i, t + 1, 1] = plans[i, t, 1]
                plans[i, t + 2] = plans[i, t]
                length += 2
        plan_len[i] = length
