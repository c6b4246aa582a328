"""Batched kernels for polyomino tiling puzzles: a board partitioned into pieces that are parked
around it and snapped back onto it by an anchor cell (Numba).

Nothing here knows a family by name. A piece k of episode b is ``n_cells[b, k]`` offsets
``offsets[b, k, :n]`` (row, col) relative to its anchor, sorted row-major; ``pos[b, k]`` is the
anchor's current board coordinate (inside [0, R) x [0, C) = placed, else parked at
``park[b, k]``); ``board[b]`` (R, C) holds k + 1 for the cells covered by placed piece k, 0 for
empty ones. Generation is the round-robin multi-source BFS of the patch_reassembly spec drawn
from the episode's own SplitMix64 stream; the solver is the spec's row-major backtracking with
its (wrong place, right place) / (remove, place again) padding; frames are drawn by one region
renderer, so a step redraws only the cell boxes a moved piece left and entered.
"""
import numpy as np
from numba import njit, prange

from .batching import row_kernel
from .rng import below, seed_state

STREAM_GENERATE = np.uint64(11)
STREAM_SOLVER = np.uint64(12)

# Neighbour order of the BFS growth: (r+1, c), (r-1, c), (r, c+1), (r, c-1).
NB_DR = np.array([1, -1, 0, 0], dtype=np.int64)
NB_DC = np.array([0, 0, 1, -1], dtype=np.int64)

# Plan entries are (kind, piece, row, col).
ACT_PLACE = 0
ACT_REMOVE = 1


# --------------------------------------------------------------------------- generation
@njit(cache=True)
def _generate_one(R, C, P, s, offsets, n_cells, anchor, park):
    """One puzzle into offsets[P, S, 2], n_cells[P], anchor[P, 2], park[P, 2]."""
    n = R * C
    cells = np.arange(n)
    # P distinct seed cells without replacement (partial Fisher-Yates).
    for k in range(P):
        s, j = below(s, n - k)
        j += k
        t = cells[k]
        cells[k] = cells[j]
        cells[j] = t
    owner = np.full(n, -1, np.int64)
    queue = np.empty((P, n), np.int64)
    head = np.zeros(P, np.int64)
    tail = np.zeros(P, np.int64)
    for k in range(P):
        owner[cells[k]] = k
        queue[k, 0] = cells[k]
        tail[k] = 1
    claimed = P
    while claimed < n:
        for k in range(P):
            if claimed >= n:
                break
            if head[k] == tail[k]:
                continue
            cell = queue[k, head[k]]
            head[k] += 1
            r = cell // C
            c = cell % C
            for d in range(4):
                rr = r + NB_DR[d]
                cc = c + NB_DC[d]
                if 0 <= rr < R and 0 <= cc < C and owner[rr * C + cc] < 0:
                    owner[rr * C + cc] = k
                    queue[k, tail[k]] = rr * C + cc
                    tail[k] += 1
                    claimed += 1
    n_cells[:] = 0
    anchor[:, 0] = -1
    for cell in range(n):   # row-major: the first cell of a piece is its anchor
        k = owner[cell]
        r = cell // C
        c = cell % C
        if anchor[k, 0] < 0:
            anchor[k, 0] = r
            anchor[k, 1] = c
        m = n_cells[k]
        offsets[k, m, 0] = r - anchor[k, 0]
        offsets[k, m, 1] = c - anchor[k, 1]
        n_cells[k] = m + 1
    parking_slots(R, C, P, offsets, n_cells, park)
    return s


@njit(cache=True)
def parking_slots(R, C, P, offsets, n_cells, park):
    """The spec's parking slots: piece k on side k mod 4 (top, right, bottom, left), one empty
    row/column from the board, 2 (top/left) or 1 (right/bottom) empty cells between pieces."""
    cursor = np.zeros(4, np.int64)
    for k in range(P):
        min_dr = offsets[k, 0, 0]
        max_dr = min_dr
        min_dc = offsets[k, 0, 1]
        max_dc = min_dc
        for m in range(n_cells[k]):
            min_dr = min(min_dr, offsets[k, m, 0])
            max_dr = max(max_dr, offsets[k, m, 0])
            min_dc = min(min_dc, offsets[k, m, 1])
            max_dc = max(max_dc, offsets[k, m, 1])
        h = max_dr - min_dr + 1
        w = max_dc - min_dc + 1
        side = k % 4
        if side == 0:
            park[k, 0] = -(2 + max_dr)
            park[k, 1] = cursor[0] - min_dc
            cursor[0] += w + 2
        elif side == 1:
            park[k, 1] = C + 1 - min_dc
            park[k, 0] = cursor[1] - min_dr
            cursor[1] += h + 1
        elif side == 2:
            park[k, 0] = R + 1 - min_dr
            park[k, 1] = cursor[2] - min_dc
            cursor[2] += w + 1
        else:
            park[k, 1] = -(2 + max_dc)
            park[k, 0] = cursor[3] - min_dr
            cursor[3] += h + 2


@row_kernel(3)
def generate_puzzles(R, C, P, rows, seeds, offsets, n_cells, anchor, park, pos, board):
    """Fresh puzzles for ``rows`` (every piece parked, the board empty)."""
    for i in prange(rows.shape[0]):
        b = rows[i]
        s = seed_state(seeds[i], STREAM_GENERATE)
        _generate_one(R, C, P, s, offsets[b], n_cells[b], anchor[b], park[b])
        pos[b] = park[b]
        board[b] = 0


@njit(cache=True)
def fill_boards(pos, offsets, n_cells, rows, board):
    """board[b] from the placed pieces of each row (placements assumed legal)."""
    R = board.shape[1]
    C = board.shape[2]
    for i in range(rows.shape[0]):
        b = rows[i]
        board[b] = 0
        for k in range(pos.shape[1]):
            r = pos[b, k, 0]
            c = pos[b, k, 1]
            if 0 <= r < R and 0 <= c < C:
                for m in range(n_cells[b, k]):
                    board[b, r + offsets[b, k, m, 0], c + offsets[b, k, m, 1]] = k + 1


@njit(cache=True)
def extents(R, C, offsets, n_cells, park, rows, out):
    """out[b] = (min_r, min_c, max_r, max_c) of the board and every parked piece's cells."""
    for i in range(rows.shape[0]):
        b = rows[i]
        min_r = 0
        min_c = 0
        max_r = R - 1
        max_c = C - 1
        for k in range(park.shape[1]):
            for m in range(n_cells[b, k]):
                r = park[b, k, 0] + offsets[b, k, m, 0]
                c = park[b, k, 1] + offsets[b, k, m, 1]
                min_r = min(min_r, r)
                max_r = max(max_r, r)
                min_c = min(min_c, c)
                max_c = max(max_c, c)
        out[b, 0] = min_r
        out[b, 1] = min_c
        out[b, 2] = max_r
        out[b, 3] = max_c


# --------------------------------------------------------------------------- stepping
@njit(cache=True)
def can_place(board, offsets, n, k, r, c):
    """Do piece k's n cells fit with its anchor at (r, c): inside the board, over no cell of
    another placed piece?"""
    R = board.shape[0]
    C = board.shape[1]
    for m in range(n):
        rr = r + offsets[m, 0]
        cc = c + offsets[m, 1]
        if rr < 0 or rr >= R or cc < 0 or cc >= C:
            return False
        v = board[rr, cc]
        if v != 0 and v != k + 1:
            return False
    return True


@njit(cache=True)
def _lift(board, offsets, n, k, r, c):
    R = board.shape[0]
    C = board.shape[1]
    if 0 <= r < R and 0 <= c < C:
        for m in range(n):
            board[r + offsets[m, 0], c + offsets[m, 1]] = 0


@njit(cache=True)
def _put(board, offsets, n, k, r, c):
    for m in range(n):
        board[r + offsets[m, 0], c + offsets[m, 1]] = k + 1


@njit(cache=True)
def step_pieces(board, pos, park, offsets, n_cells, kind, ints, rows, place_kind, remove_kind,
                place_base, remove_base, moved, moved_from, feedback):
    """The place/remove actions of one step, in place, for the rows where ``rows`` is true.
    ints[b] = (piece, row, col, spelling) for place, (piece, spelling) for remove; a refused
    action sets feedback ``place_base`` / ``remove_base`` + its spelling. ``moved[b]`` is the
    piece that moved (-1 none) and ``moved_from[b]`` its previous anchor, for redrawing."""
    R = board.shape[1]
    C = board.shape[2]
    for b in range(board.shape[0]):
        moved[b] = -1
        moved_from[b, 0] = 0
        moved_from[b, 1] = 0
        if not rows[b]:
            continue
        k = ints[b, 0]
        n = n_cells[b, k]
        r0 = pos[b, k, 0]
        c0 = pos[b, k, 1]
        if kind[b] == place_kind:
            r = ints[b, 1]
            c = ints[b, 2]
            if not can_place(board[b], offsets[b, k], n, k, r, c):
                feedback[b] = place_base + ints[b, 3]
                continue
            if r == r0 and c == c0:
                continue   # its own anchor: a valid no-op
            _lift(board[b], offsets[b, k], n, k, r0, c0)
            _put(board[b], offsets[b, k], n, k, r, c)
        elif kind[b] == remove_kind:
            if not (0 <= r0 < R and 0 <= c0 < C):
                feedback[b] = remove_base + ints[b, 1]
                continue
            _lift(board[b], offsets[b, k], n, k, r0, c0)
            r = park[b, k, 0]
            c = park[b, k, 1]
        else:
            continue
        pos[b, k, 0] = r
        pos[b, k, 1] = c
        moved[b] = k
        moved_from[b, 0] = r0
        moved_from[b, 1] = c0


# --------------------------------------------------------------------------- solver
# Placements the exact search may try per episode before it gives up (see solve_puzzles).
SEARCH_BUDGET = 200_000


@njit(cache=True)
def _first_empty(board, cell):
    """The first empty cell at or after ``cell`` in row-major order (R * C: none)."""
    C = board.shape[1]
    n = board.shape[0] * C
    while cell < n and board[cell // C, cell % C] != 0:
        cell += 1
    return cell


@njit(cache=True)
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


@njit(cache=True)
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


@njit(cache=True)
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


@njit(cache=True)
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


@njit(cache=True)
def _on_own_anchors(pos, anchor, R, C):
    """Is every placed piece at its anchor in the generating tiling (always so after a reset)?"""
    for k in range(pos.shape[0]):
        if 0 <= pos[k, 0] < R and 0 <= pos[k, 1] < C and (pos[k, 0] != anchor[k, 0]
                                                          or pos[k, 1] != anchor[k, 1]):
            return False
    return True


@njit(cache=True)
def _filled(board):
    n = 0
    for r in range(board.shape[0]):
        for c in range(board.shape[1]):
            if board[r, c] != 0:
                n += 1
    return n


@njit(cache=True)
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


@njit(cache=True)
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


# --------------------------------------------------------------------------- frames
@njit(cache=True)
def _blend(frame, y, x, a, color):
    if a == 0:
        return
    for ch in range(3):
        v = frame[y, x, ch]
        frame[y, x, ch] = (v * (255 - a) + color[ch] * a + 127) // 255


@njit(cache=True)
def _label(frame, mask, oy, ox, y, x, color, y0, y1, x0, x1):
    """Blend coverage ``mask`` with its top-left at (y + oy, x + ox), clipped to the region."""
    top = y + oy
    left = x + ox
    ia = max(0, y0 - top)
    ib = min(mask.shape[0], y1 - top)
    ja = max(0, x0 - left)
    jb = min(mask.shape[1], x1 - left)
    for i in range(ia, ib):
        for j in range(ja, jb):
            _blend(frame, top + i, left + j, mask[i, j], color)


@njit(cache=True)
def _fill_white(frame, y0, y1, x0, x1):
    """Rows of bytes set to 255 (a flat view, so each row is one vectorizable run)."""
    if y0 >= y1 or x0 >= x1:
        return
    width = frame.shape[1]
    flat = frame.reshape(frame.shape[0] * width * 3)
    for y in range(y0, y1):
        flat[(y * width + x0) * 3:(y * width + x1) * 3] = 255


@njit(cache=True)
def _paint_piece(frame, ar, ac, offsets, n, org_r, org_c, cell, color_row, y0, y1, x0, x1):
    """One piece's cell boxes (fill, 1-px black outline, corners inclusive) clipped to the
    region; each interior row run is copied from ``color_row`` (the colour repeated)."""
    width = frame.shape[1]
    flat = frame.reshape(frame.shape[0] * width * 3)
    for m in range(n):
        cy = (ar + offsets[m, 0] - org_r) * cell
        cx = (ac + offsets[m, 1] - org_c) * cell
        ya = max(y0, cy)
        yb = min(y1, cy + cell + 1)
        xa = max(x0, cx)
        xb = min(x1, cx + cell + 1)
        if ya >= yb or xa >= xb:
            continue
        ia = max(xa, cx + 1)
        ib = min(xb, cx + cell)
        for y in range(ya, yb):
            row = y * width * 3
            if y == cy or y == cy + cell:
                flat[row + xa * 3:row + xb * 3] = 0
                continue
            if ia < ib:
                flat[row + ia * 3:row + ib * 3] = color_row[(ia - cx - 1) * 3:(ib - cx - 1) * 3]
            if xa == cx:
                flat[row + cx * 3:row + cx * 3 + 3] = 0
            if xb == cx + cell + 1:
                flat[row + (cx + cell) * 3:row + (cx + cell) * 3 + 3] = 0


@njit(cache=True)
def render_region(frame, R, C, org_r, org_c, cell, offsets, n_cells, pos, color_rows, ink,
                  label_masks, label_oy, label_ox, axis_color, grid_color, y0, y1, x0, x1,
                  white=True):
    """Draw the pixels [y0, y1) x [x0, x1) of one frame from scratch, in the reference's order:
    white (skipped with ``white=False`` when the caller knows the region is white already), the
    board grid, the coordinate labels, then each piece's cells (filled, 1-px black outline,
    corners inclusive; ``color_rows[k]`` is piece k's colour repeated over a cell's interior
    width) and its id in its anchor cell. World cell (r, c) has its top-left pixel
    at ((r - org_r) * cell, (c - org_c) * cell)."""
    if y0 >= y1 or x0 >= x1:
        return
    if white:
        _fill_white(frame, y0, y1, x0, x1)
    by = -org_r * cell
    bx = -org_c * cell
    # Grid: R + 1 horizontal and C + 1 vertical 1-px lines spanning the board.
    for r in range(R + 1):
        y = by + r * cell
        if y0 <= y < y1:
            for x in range(max(x0, bx), min(x1, bx + C * cell + 1)):
                frame[y, x, 0] = grid_color[0]
                frame[y, x, 1] = grid_color[1]
                frame[y, x, 2] = grid_color[2]
    for c in range(C + 1):
        x = bx + c * cell
        if x0 <= x < x1:
            for y in range(max(y0, by), min(y1, by + R * cell + 1)):
                frame[y, x, 0] = grid_color[0]
                frame[y, x, 1] = grid_color[1]
                frame[y, x, 2] = grid_color[2]
    # Coordinate labels: column numbers in the row above the board, row numbers left of it.
    for c in range(C):
        _label(frame, label_masks[c], label_oy[c], label_ox[c], by - cell, bx + c * cell,
               axis_color, y0, y1, x0, x1)
    for r in range(R):
        _label(frame, label_masks[r], label_oy[r], label_ox[r], by + r * cell, bx - cell,
               axis_color, y0, y1, x0, x1)
    for k in range(pos.shape[0]):
        _paint_piece(frame, pos[k, 0], pos[k, 1], offsets[k], n_cells[k], org_r, org_c, cell,
                     color_rows[k], y0, y1, x0, x1)
        ar = pos[k, 0]
        ac = pos[k, 1]
        _label(frame, label_masks[k], label_oy[k], label_ox[k], (ar - org_r) * cell,
               (ac - org_c) * cell, ink[k], y0, y1, x0, x1)


@njit(cache=True)
def _covered(ry, rx, org_r, org_c, cell, offsets, n_cells, pos):
    """Is the cell box with top-left pixel (ry, rx) one of the drawing's piece cell boxes?"""
    for k in range(pos.shape[0]):
        for m in range(n_cells[k]):
            if ((pos[k, 0] + offsets[k, m, 0] - org_r) * cell == ry
                    and (pos[k, 1] + offsets[k, m, 1] - org_c) * cell == rx):
                return True
    return False


@njit(cache=True)
def _erase_drawn(frame, R, C, org_r, org_c, cell, offsets, n_cells, pos, h, w, new_org_r,
                 new_org_c, new_offsets, new_n, new_pos):
    """White over everything a drawing with origin (org_r, org_c) put on its white background,
    clipped to h x w: the coordinate-label cells, the board box (unless the new drawing's board
    lies at the same pixels: its grid is redrawn over it) and every piece cell box that is not
    also a cell box of the new drawing (those are painted over whole)."""
    by = -org_r * cell
    bx = -org_c * cell
    if org_r != new_org_r or org_c != new_org_c:
        _fill_white(frame, max(by, 0), min(by + R * cell + 1, h), max(bx, 0),
                    min(bx + C * cell + 1, w))
    _fill_white(frame, max(by - cell, 0), min(by, h), max(bx, 0), min(bx + C * cell, w))
    _fill_white(frame, max(by, 0), min(by + R * cell, h), max(bx - cell, 0), min(bx, w))
    for k in range(pos.shape[0]):
        for m in range(n_cells[k]):
            cy = (pos[k, 0] + offsets[k, m, 0] - org_r) * cell
            cx = (pos[k, 1] + offsets[k, m, 1] - org_c) * cell
            if _covered(cy, cx, new_org_r, new_org_c, cell, new_offsets, new_n, new_pos):
                continue
            _fill_white(frame, max(cy, 0), min(cy + cell + 1, h), max(cx, 0),
                        min(cx + cell + 1, w))


@njit(cache=True, nogil=True)
def render_full(frames, rows, R, C, extent, hw, cell, offsets, n_cells, pos, colors, ink,
                label_masks, label_oy, label_ox, axis_color, grid_color, drawn, d_org, d_hw,
                d_pos, d_offsets, d_n, scratch):
    """Whole frames of ``rows``, then the new drawings are recorded in the workspace.

    With a ``scratch`` buffer (flat uint8, at least a frame's bytes; empty for none) the frame is
    drawn whole there, where it stays in the cache, and left there for the caller to copy out
    with streamed stores (render/blit.copy_frame; one row per call then): a batch's frames are
    not in the cache, and the drawing's scattered writes (cell rows, grid lines, labels) would
    each wait for a line of memory.
    Without a scratch buffer, a row whose frame holds a drawing recorded in the workspace
    (``drawn``: origin, size, pieces) is not filled white again: only what that drawing put on
    its background is erased, and what lay outside its size is whitened (cheapest when the
    frame is cached)."""
    for i in range(rows.shape[0]):
        b = rows[i]
        org_r = extent[b, 0] - 1
        org_c = extent[b, 1] - 1
        h = hw[b, 0]
        w = hw[b, 1]
        frame = frames[b]
        if scratch.shape[0] >= h * w * 3:
            whole = scratch[:h * w * 3].reshape((h, w, 3))
            render_region(whole, R, C, org_r, org_c, cell, offsets[b], n_cells[b], pos[b],
                          colors, ink, label_masks, label_oy, label_ox, axis_color, grid_color,
                          0, h, 0, w, True)
        elif drawn[b]:
            _erase_drawn(frame, R, C, d_org[b, 0], d_org[b, 1], cell, d_offsets[b], d_n[b],
                         d_pos[b], h, w, org_r, org_c, offsets[b], n_cells[b], pos[b])
            oh = min(d_hw[b, 0], h)
            ow = min(d_hw[b, 1], w)
            _fill_white(frame, oh, h, 0, w)
            _fill_white(frame, 0, oh, ow, w)
        else:
            _fill_white(frame, 0, h, 0, w)
        if scratch.shape[0] < h * w * 3:
            render_region(frame, R, C, org_r, org_c, cell, offsets[b], n_cells[b], pos[b],
                          colors, ink, label_masks, label_oy, label_ox, axis_color, grid_color,
                          0, h, 0, w, False)
        drawn[b] = True
        d_org[b, 0] = org_r
        d_org[b, 1] = org_c
        d_hw[b, 0] = h
        d_hw[b, 1] = w
        d_pos[b] = pos[b]
        d_offsets[b] = offsets[b]
        d_n[b] = n_cells[b]


@njit(cache=True)
def _touch_cells(frame, ar, ac, offsets, n, org_r, org_c, cell, h, w):
    """Read a byte of each cache line of each row of a piece's cell boxes and return their sum.
    The frames of a batch are not in the cache: these loads are independent, so the core has
    many lines in flight at once, where the repaint's row-by-row stores would wait for them one
    row at a time."""
    acc = 0
    flat = frame.reshape(frame.shape[0] * frame.shape[1] * 3)
    width = frame.shape[1]
    for m in range(n):
        cy = (ar + offsets[m, 0] - org_r) * cell
        cx = (ac + offsets[m, 1] - org_c) * cell
        x0 = max(cx, 0)
        x1 = min(cx + cell + 1, w)
        if x1 <= x0:
            continue
        for y in range(max(cy, 0), min(cy + cell + 1, h)):
            row = (y * width + x0) * 3
            end = (y * width + x1) * 3
            for t in range(row, end, 64):
                acc += flat[t]
            acc += flat[end - 1]
    return acc


@njit(cache=True, nogil=True)
def render_moved(frames, rows, R, C, extent, hw, cell, offsets, n_cells, pos, moved, moved_from,
                 color_rows, ink, label_masks, label_oy, label_ox, axis_color, grid_color, d_pos):
    """Redraw, for each of ``rows`` whose step moved a piece, the cell boxes it left and entered
    (and record the piece's new position in the workspace's ``d_pos``). Both sets of boxes are
    read ahead first (``_touch_cells``: a B=256 step's moves took 3.5 ms of the two threads'
    time before, 1.85 after). Returns the sum of the bytes read (only so that they are read)."""
    touched = 0
    for i in range(rows.shape[0]):
        b = rows[i]
        k = moved[b]
        if k < 0:
            continue
        org_r = extent[b, 0] - 1
        org_c = extent[b, 1] - 1
        h = hw[b, 0]
        w = hw[b, 1]
        ar = moved_from[b, 0]
        ac = moved_from[b, 1]
        touched += _touch_cells(frames[b], ar, ac, offsets[b, k], n_cells[b, k], org_r, org_c,
                                cell, h, w)
        touched += _touch_cells(frames[b], pos[b, k, 0], pos[b, k, 1], offsets[b, k],
                                n_cells[b, k], org_r, org_c, cell, h, w)
        for m in range(n_cells[b, k]):
            cy = (ar + offsets[b, k, m, 0] - org_r) * cell
            cx = (ac + offsets[b, k, m, 1] - org_c) * cell
            render_region(frames[b], R, C, org_r, org_c, cell, offsets[b], n_cells[b], pos[b],
                          color_rows, ink, label_masks, label_oy, label_ox, axis_color,
                          grid_color, max(cy, 0), min(cy + cell + 1, h), max(cx, 0),
                          min(cx + cell + 1, w))
        # The boxes it entered: its own cells cover them whole (neighbours share only black
        # outline pixels, no other label reaches into them), so painting the piece suffices.
        _paint_piece(frames[b], pos[b, k, 0], pos[b, k, 1], offsets[b, k], n_cells[b, k], org_r,
                     org_c, cell, color_rows[k], 0, h, 0, w)
        _label(frames[b], label_masks[k], label_oy[k], label_ox[k], (pos[b, k, 0] - org_r) * cell,
               (pos[b, k, 1] - org_c) * cell, ink[k], 0, h, 0, w)
        d_pos[b, k, 0] = pos[b, k, 0]
        d_pos[b, k, 1] = pos[b, k, 1]
    return touched
