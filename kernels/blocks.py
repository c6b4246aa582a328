"""Batched kernels for puzzles of labelled rectangular blocks that slide one cell at a time on a
small grid (Klotski-style boards): legal-move tests, the scramble that generates goal layouts,
the step, a breadth-first solver with detour padding, and the block-distance sum that bounds
the solver's plan length from below (Numba).

Nothing here knows a family by name. A layout is ``pos`` (n, 2): the top-left (row, col) of each
block, with constant block sizes ``size`` (n, 2); block k has id k + 1 and ``board`` (H, W) holds
ids, 0 = empty. Directions are 0 up, 1 right, 2 down, 3 left. A move is legal when the shifted
rectangle stays on the board and covers only empty cells or the block itself. The scramble (a
key-block phase, a non-reversing random walk, a displacement pass) and the breadth-first solver
with (move, reverse) padding follow the reference's procedures step for step, with every random
draw taken from the episode's own SplitMix64 stream, so a layout is a function of the seed alone.
"""
import numpy as np
from numba import njit, prange

from .batching import row_kernel
from .keyset import new_set, set_add, set_full, set_grow
from .rng import below, seed_state

DIR_DROW = np.array([-1, 0, 1, 0], dtype=np.int64)
DIR_DCOL = np.array([0, 1, 0, -1], dtype=np.int64)

STREAM_SCRAMBLE = np.uint64(3)
STREAM_SOLVER = np.uint64(4)

# Outcomes of the search besides a path length >= 0.
NOT_FOUND = -1       # the goal is not reachable within the state cap: plan is just a stop
PLAN_TOO_LONG = -2   # the plan does not fit the caller's buffer: call again with a larger one


# --------------------------------------------------------------------------- single layouts
@njit(cache=True, nogil=True)
def fill_board(pos, size, board):
    """Write the ids of layout ``pos`` into ``board`` (H, W)."""
    board[:, :] = 0
    for k in range(pos.shape[0]):
        r = pos[k, 0]
        c = pos[k, 1]
        for i in range(size[k, 0]):
            for j in range(size[k, 1]):
                board[r + i, c + j] = k + 1


@njit(cache=True, nogil=True)
def can_slide(board, pos, size, k, d):
    """Can block k move one cell in direction d?"""
    h = size[k, 0]
    w = size[k, 1]
    nr = pos[k, 0] + DIR_DROW[d]
    nc = pos[k, 1] + DIR_DCOL[d]
    if nr < 0 or nc < 0 or nr + h > board.shape[0] or nc + w > board.shape[1]:
        return False
    for i in range(h):
        for j in range(w):
            v = board[nr + i, nc + j]
            if v != 0 and v != k + 1:
                return False
    return True


@njit(cache=True, nogil=True)
def slide(board, pos, size, k, d):
    """Move block k one cell in direction d (the caller checked ``can_slide``)."""
    h = size[k, 0]
    w = size[k, 1]
    r = pos[k, 0]
    c = pos[k, 1]
    for i in range(h):
        for j in range(w):
            board[r + i, c + j] = 0
    r += DIR_DROW[d]
    c += DIR_DCOL[d]
    for i in range(h):
        for j in range(w):
            board[r + i, c + j] = k + 1
    pos[k, 0] = r
    pos[k, 1] = c


@njit(cache=True, nogil=True)
def _valid_moves(board, pos, size, out):
    """Legal moves as k * 4 + d, ids ascending then directions 0..3; return their number."""
    n = 0
    for k in range(pos.shape[0]):
        for d in range(4):
            if can_slide(board, pos, size, k, d):
                out[n] = k * 4 + d
                n += 1
    return n


# --------------------------------------------------------------------------- generation
@njit(cache=True, nogil=True)
def _scramble_one(pos, size, board, start, key_block, n_key, n_walk, n_spread, s):
    """Scramble ``pos`` (starting at ``start``) in place by the three phases of the spec (3):
    key-block moves, a random walk without immediate reversals, then one move for each block
    still at its start cell. Returns the RNG state."""
    n = pos.shape[0]
    moves = np.empty(4 * n, np.int64)
    fill_board(pos, size, board)
    # Phase 1: n_key counted moves, each a random direction of the key block or, if that is
    # blocked, a uniformly drawn legal move.
    count = 0
    while count < n_key:
        s, d = below(s, 4)
        if can_slide(board, pos, size, key_block, d):
            slide(board, pos, size, key_block, d)
        else:
            nv = _valid_moves(board, pos, size, moves)
            if nv == 0:
                # The reference would spin here forever; a jammed board just ends the phase.
                break
            s, pick = below(s, nv)
            m = moves[pick]
            slide(board, pos, size, m // 4, m % 4)
        count += 1
    # Phase 2: random walk that never undoes its previous move (unless nothing else is legal).
    last = -1
    for _ in range(n_walk):
        nv = _valid_moves(board, pos, size, moves)
        if nv == 0:
            break
        if last >= 0:
            reverse = (last // 4) * 4 + (last % 4 + 2) % 4
            kept = 0
            for t in range(nv):
                if moves[t] != reverse:
                    moves[kept] = moves[t]
                    kept += 1
            if kept == 0:
                nv = _valid_moves(board, pos, size, moves)
            else:
                nv = kept
        s, pick = below(s, nv)
        m = moves[pick]
        slide(board, pos, size, m // 4, m % 4)
        last = m
    # Phase 3 (deterministic): a block still at its start cell moves once, in the lowest
    # direction that takes it away (every such move reaches displacement 1), while budget lasts.
    budget = n_spread
    for k in range(n):
        disp = abs(pos[k, 0] - start[k, 0]) + abs(pos[k, 1] - start[k, 1])
        attempts = 0
        while disp < 1 and attempts < 10 and budget > 0:
            best_d = -1
            best_disp = -1
            for d in range(4):
                if can_slide(board, pos, size, k, d):
                    nd = (abs(pos[k, 0] + DIR_DROW[d] - start[k, 0])
                          + abs(pos[k, 1] + DIR_DCOL[d] - start[k, 1]))
                    if nd > disp and nd > best_disp:
                        best_d = d
                        best_disp = nd
            if best_d >= 0:
                slide(board, pos, size, k, best_d)
                disp = best_disp
                budget -= 1
            attempts += 1
    return s


@row_kernel(8)
def scramble_layouts(start, size, height, width, key_block, n_key, n_walk, n_spread, rows,
                      seeds, out_pos):
    """out_pos[rows[i]] = the scramble of ``start`` drawn from seeds[i]."""
    for i in prange(rows.shape[0]):
        b = rows[i]
        pos = start.astype(np.int64)
        board = np.zeros((height, width), np.int64)
        s = seed_state(seeds[i], STREAM_SCRAMBLE)
        _scramble_one(pos, size, board, start, key_block, n_key, n_walk, n_spread, s)
        for k in range(pos.shape[0]):
            out_pos[b, k, 0] = pos[k, 0]
            out_pos[b, k, 1] = pos[k, 1]


# --------------------------------------------------------------------------- stepping
@njit(cache=True, nogil=True)
def step_slides(board, pos, size, moves, last_block, last_dir, ints, rows, fail_base, feedback):
    """The moves of one step, in place, for the rows where ``rows`` is true (the step template
    in core handles errors and stop).

    A move (ints[b, 0] = block id, ints[b, 1] = direction) that is legal slides the block and
    counts in ``moves``; one that is not (id 0, off the board, blocked) sets feedback
    ``fail_base + ints[b, 2]`` (the caller's index of the message for that payload).
    ``last_block``/``last_dir`` record the move just made (0 = none) so the renderer can redraw
    only the cells it touched.
    """
    for b in range(pos.shape[0]):
        last_block[b] = 0
        last_dir[b] = 0
        if not rows[b]:
            continue
        block = ints[b, 0]
        d = ints[b, 1]
        if block >= 1 and can_slide(board[b], pos[b], size, block - 1, d):
            slide(board[b], pos[b], size, block - 1, d)
            moves[b] += 1
            last_block[b] = block
            last_dir[b] = d
        else:
            feedback[b] = fail_base + ints[b, 2]


# --------------------------------------------------------------------------- solver
@njit(cache=True, nogil=True)
def pack_layout(pos, width, bits):
    """A layout as one integer: block k's top-left cell index in bits [k * bits, (k+1) * bits)."""
    key = np.uint64(0)
    for k in range(pos.shape[0]):
        cell = np.uint64(pos[k, 0] * width + pos[k, 1])
        key |= cell << np.uint64(k * bits)
    return key


@njit(cache=True, nogil=True)
def _unpack_layout(key, width, bits, pos):
    cell_mask = (np.uint64(1) << np.uint64(bits)) - np.uint64(1)
    for k in range(pos.shape[0]):
        cell = np.int64((key >> np.uint64(k * bits)) & cell_mask)
        pos[k, 0] = cell // width
        pos[k, 1] = cell % width


@njit(cache=True, nogil=True)
def shortest_slides(start, target, size, height, width, bits, max_states, out_moves):
    """Breadth-first search from layout ``start`` to layout ``target`` (the reference's order:
    FIFO queue, ids ascending then directions 0..3, goal tested when a successor is generated),
    so the plan is the shortest one with ties broken by that order. Writes moves k * 4 + d into
    ``out_moves`` and returns their number, NOT_FOUND if the goal is not reached within
    ``max_states`` visited layouts, or PLAN_TOO_LONG if ``out_moves`` is too small."""
    n = start.shape[0]
    start_key = pack_layout(start, width, bits)
    target_key = pack_layout(target, width, bits)
    if start_key == target_key:
        return 0
    cap = 1 << 12
    keys = np.empty(cap, np.uint64)
    parent = np.empty(cap, np.int32)
    via = np.empty(cap, np.int8)
    table = new_set(cap)
    keys[0] = start_key
    parent[0] = -1
    via[0] = -1
    set_add(table, start_key, np.uint64(0))
    tail = 1
    head = 0
    pos = np.empty((n, 2), np.int64)
    board = np.zeros((height, width), np.int64)
    found_parent = -1
    found_move = -1
    while head < tail and found_parent < 0:
        key = keys[head]
        _unpack_layout(key, width, bits, pos)
        fill_board(pos, size, board)
        for k in range(n):
            shift = np.uint64(k * bits)
            cell = np.uint64(pos[k, 0] * width + pos[k, 1])
            for d in range(4):
                if not can_slide(board, pos, size, k, d):
                    continue
                new_cell = np.uint64(np.int64(cell) + DIR_DROW[d] * width + DIR_DCOL[d])
                nxt = (key & ~(cell << shift)) | (new_cell << shift)
                if set_full(table):
                    table = set_grow(table)
                if not set_add(table, nxt, np.uint64(0)):
                    continue
                if nxt == target_key:
                    found_parent = head
                    found_move = k * 4 + d
                    break
                if tail >= max_states:
                    return NOT_FOUND
                if tail == cap:
                    cap *= 2
                    keys2 = np.empty(cap, np.uint64)
                    keys2[:tail] = keys[:tail]
                    keys = keys2
                    parent2 = np.empty(cap, np.int32)
                    parent2[:tail] = parent[:tail]
                    parent = parent2
                    via2 = np.empty(cap, np.int8)
                    via2[:tail] = via[:tail]
                    via = via2
                keys[tail] = nxt
                parent[tail] = head
                via[tail] = k * 4 + d
                tail += 1
            if found_parent >= 0:
                break
        head += 1
    if found_parent < 0:
        return NOT_FOUND
    length = 1
    node = found_parent
    while parent[node] >= 0:
        length += 1
        node = parent[node]
    if length > out_moves.shape[0]:
        return PLAN_TOO_LONG
    out_moves[length - 1] = found_move
    node = found_parent
    t = length - 2
    while parent[node] >= 0:
        out_moves[t] = via[node]
        t -= 1
        node = parent[node]
    return length


@njit(cache=True, nogil=True)
def _reverse(m):
    return (m // 4) * 4 + (m % 4 + 2) % 4


@row_kernel(7)
def solve_layouts(pos, target_pos, size, height, width, bits, max_states, rows, seeds,
                   num_steps, plans, plan_len):
    """Batched solver: the BFS plan, padded to at least ``num_steps`` moves (when
    given, > 0) with (move, reverse) pairs. Pairs = ceil((num_steps - len) / 2) draws, with
    replacement, of (state index along the plan, legal move there); each pair is inserted before
    the plan's move at its index. An already solved episode gets ceil(num_steps / 2) pairs of
    legal moves from its layout. ``plans[i]`` receives moves k * 4 + d, ``plan_len[i]`` their
    number, or NOT_FOUND / PLAN_TOO_LONG."""
    n = pos.shape[1]
    for i in prange(rows.shape[0]):
        b = rows[i]
        start = pos[b].astype(np.int64)
        target = target_pos[b].astype(np.int64)
        cap = plans.shape[1]
        path = np.empty(cap, np.int64)
        length = shortest_slides(start, target, size, height, width, bits, max_states, path)
        if length < 0:
            plan_len[i] = length
            continue
        pairs = 0
        if num_steps > length:
            pairs = (num_steps - length + 1) // 2
        if pairs == 0:
            plans[i, :length] = path[:length]
            plan_len[i] = length
            continue
        if length + 2 * pairs > cap:
            plan_len[i] = PLAN_TOO_LONG
            continue
        # Opportunities: every legal move at every layout along the plan, final one included.
        opp_at = np.empty((length + 1) * 4 * n, np.int64)
        opp_move = np.empty((length + 1) * 4 * n, np.int64)
        nopp = 0
        cur = start.copy()
        board = np.zeros((height, width), np.int64)
        fill_board(cur, size, board)
        legal = np.empty(4 * n, np.int64)
        for t in range(length + 1):
            nv = _valid_moves(board, cur, size, legal)
            for v in range(nv):
                opp_at[nopp] = t
                opp_move[nopp] = legal[v]
                nopp += 1
            if t < length:
                slide(board, cur, size, path[t] // 4, path[t] % 4)
        if nopp == 0:
            plans[i, :length] = path[:length]
            plan_len[i] = length
            continue
        s = seed_state(seeds[i], STREAM_SOLVER)
        picks = np.empty(pairs, np.int64)
        for p in range(pairs):
            s, picks[p] = below(s, nopp)
        # The reference inserts the pairs from the highest index down, so at one index the last
        # drawn pair comes first.
        out = 0
        for t in range(length + 1):
            for p in range(pairs - 1, -1, -1):
                if opp_at[picks[p]] == t:
                    m = opp_move[picks[p]]
                    plans[i, out] = m
                    plans[i, out + 1] = _reverse(m)
                    out += 2
            if t < length:
                plans[i, out] = path[t]
                out += 1
        plan_len[i] = out


# --------------------------------------------------------------------------- measures
@njit(cache=True, nogil=True)
def layout_distances(pos, target_pos, out):
    """out[b] = the sum over blocks of the Manhattan distance (in cells) between each block's
    top-left cell in ``pos[b]`` and in ``target_pos[b]``. A move slides one block one cell, so
    it changes this sum by exactly 1 either way: the sum never exceeds the fewest moves to the
    target layout (an admissible bound), and it is 0 exactly when the layouts are equal."""
    for b in range(pos.shape[0]):
        total = 0
        for k in range(pos.shape[1]):
            total += abs(np.int64(pos[b, k, 0]) - np.int64(target_pos[b, k, 0]))
            total += abs(np.int64(pos[b, k, 1]) - np.int64(target_pos[b, k, 1]))
        out[b] = total
