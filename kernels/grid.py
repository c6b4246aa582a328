"""Batched grid-maze dynamics: perfect-maze generation, moves, and shortest paths (Numba).

Shared by the grid families: nothing here knows a family by name.
A maze is a uint8 wall map (1 = wall) whose outer ring is wall and whose cells sit at odd-odd
positions (spec/envs/maze_2d.md section 3).

Generation is Wilson's algorithm (loop-erased random walks), which samples a spanning tree of the
cell graph uniformly, as the reference does. Each episode draws from its own SplitMix64 stream
seeded by its seed, so the maze is a function of the seed alone; the reference's exact mazes are
not reproduced bit for bit (the spec asks only for the same distribution), and recorded mazes are
loaded from their init states instead.
"""
import numpy as np
from numba import njit, prange

from .batching import row_kernel
from .rng import below, seed_state

# Direction d as (d_row, d_col), the maze_2d convention: 0 right, 1 up, 2 left, 3 down.
DIR_DROW = np.array([0, -1, 0, 1], dtype=np.int64)
DIR_DCOL = np.array([1, 0, -1, 0], dtype=np.int64)

STREAM_GENERATE = np.uint64(1)
STREAM_SOLVER = np.uint64(2)


@njit(cache=True, nogil=True)
def _wilson_one(walls, s):
    """Carve a uniform spanning-tree maze into ``walls`` (H, W) in place; return the RNG state."""
    height, width = walls.shape
    ch = (height - 1) // 2
    cw = (width - 1) // 2
    ncells = ch * cw
    walls[:, :] = 1
    visited = np.zeros(ncells, np.bool_)
    # Unvisited cells with O(1) removal: a dense list plus each cell's slot in it.
    pending = np.arange(ncells)
    slot = np.arange(ncells)
    npending = ncells
    exit_dir = np.zeros(ncells, np.int64)

    s, first = below(s, ncells)
    visited[first] = True
    walls[1 + 2 * (first // cw), 1 + 2 * (first % cw)] = 0
    last = pending[npending - 1]
    pending[slot[first]] = last
    slot[last] = slot[first]
    npending -= 1

    while npending > 0:
        s, k = below(s, npending)
        start = pending[k]
        # Random walk until the tree is hit, remembering the last exit of each cell; the
        # overwrite is what erases loops.
        cur = start
        while not visited[cur]:
            r = cur // cw
            c = cur % cw
            while True:
                s, d = below(s, 4)
                nr = r + DIR_DROW[d]
                nc = c + DIR_DCOL[d]
                if 0 <= nr < ch and 0 <= nc < cw:
                    break
            exit_dir[cur] = d
            cur = nr * cw + nc
        # Retrace the loop-erased path and carve it.
        cur = start
        while not visited[cur]:
            r = cur // cw
            c = cur % cw
            d = exit_dir[cur]
            visited[cur] = True
            walls[1 + 2 * r, 1 + 2 * c] = 0
            walls[1 + 2 * r + DIR_DROW[d], 1 + 2 * c + DIR_DCOL[d]] = 0
            last = pending[npending - 1]
            pending[slot[cur]] = last
            slot[last] = slot[cur]
            npending -= 1
            cur = (r + DIR_DROW[d]) * cw + (c + DIR_DCOL[d])
    return s


@row_kernel(3)
def generate_mazes(walls, agent, target, rows, seeds):
    """Fresh episodes into ``rows``: a maze plus an opposite-corner agent/target pair (one of the
    four, uniformly), as the reference's generation (spec 3, steps 2-3)."""
    height = walls.shape[1]
    width = walls.shape[2]
    for k in prange(rows.shape[0]):
        b = rows[k]
        s = seed_state(seeds[k], STREAM_GENERATE)
        s = _wilson_one(walls[b], s)
        s, corner = below(s, 4)
        lo_r, hi_r, lo_c, hi_c = 1, height - 2, 1, width - 2
        if corner == 0:
            agent[b, 0], agent[b, 1], target[b, 0], target[b, 1] = lo_r, lo_c, hi_r, hi_c
        elif corner == 1:
            agent[b, 0], agent[b, 1], target[b, 0], target[b, 1] = hi_r, hi_c, lo_r, lo_c
        elif corner == 2:
            agent[b, 0], agent[b, 1], target[b, 0], target[b, 1] = hi_r, lo_c, lo_r, hi_c
        else:
            agent[b, 0], agent[b, 1], target[b, 0], target[b, 1] = lo_r, hi_c, hi_r, lo_c


@njit(cache=True, inline="always")
def try_move(walls, agent, d_row, d_col):
    """Move ``agent`` (row, col) one cell by (d_row, d_col) unless a wall is there; return
    whether it moved."""
    nr = agent[0] + d_row
    nc = agent[1] + d_col
    if walls[nr, nc] != 0:
        return False
    agent[0] = nr
    agent[1] = nc
    return True


@njit(cache=True, nogil=True)
def step_moves(walls, agent, prev_agent, ints, rows, wall_code, feedback):
    """The moves of one maze_2d step, in place, for the rows where ``rows`` is true (valid
    moves: the step template in core handles errors and stop). A move into a wall sets
    ``wall_code``. ``prev_agent`` receives every row's position before the step (the renderer
    redraws both cells)."""
    for b in range(agent.shape[0]):
        prev_agent[b, 0] = agent[b, 0]
        prev_agent[b, 1] = agent[b, 1]
        if not rows[b]:
            continue
        d = ints[b, 0]
        if not try_move(walls[b], agent[b], DIR_DROW[d], DIR_DCOL[d]):
            feedback[b] = wall_code


@njit(cache=True, nogil=True)
def shortest_path_dirs(walls, start_r, start_c, goal_r, goal_c, out_dirs):
    """BFS over floor cells (expansion order up, down, left, right, as the reference); write the
    move directions of the shortest path into ``out_dirs``; return its length, or -1 if the goal
    cannot be reached."""
    height, width = walls.shape
    parent_dir = np.full(height * width, -1, np.int64)
    seen = np.zeros(height * width, np.bool_)
    queue = np.empty(height * width, np.int64)
    head = 0
    tail = 0
    start = start_r * width + start_c
    goal = goal_r * width + goal_c
    seen[start] = True
    queue[tail] = start
    tail += 1
    order = (1, 3, 2, 0)  # up, down, left, right
    while head < tail:
        cur = queue[head]
        head += 1
        if cur == goal:
            break
        r = cur // width
        c = cur % width
        for d in order:
            nr = r + DIR_DROW[d]
            nc = c + DIR_DCOL[d]
            if 0 <= nr < height and 0 <= nc < width and walls[nr, nc] == 0:
                nxt = nr * width + nc
                if not seen[nxt]:
                    seen[nxt] = True
                    parent_dir[nxt] = d
                    queue[tail] = nxt
                    tail += 1
    if not seen[goal]:
        return -1
    length = 0
    cur = goal
    while cur != start:
        d = parent_dir[cur]
        out_dirs[length] = d
        length += 1
        cur = (cur // width - DIR_DROW[d]) * width + (cur % width - DIR_DCOL[d])
    out_dirs[:length] = out_dirs[:length][::-1].copy()
    return length


@row_kernel(3)
def solve_mazes(walls, agent, target, rows, seeds, num_steps, plans, plan_len):
    """Batched solver: shortest path, then (if ``num_steps`` > 0) detour padding as the reference
    (spec 9): pairs = ceil((num_steps - count) / 2) random (cell on path, open direction) picks,
    each inserted as d then its reverse. ``count`` includes one final stop, which the caller adds.
    ``plans[k]`` receives move directions, ``plan_len[k]`` their number (-1 if unsolvable)."""
    height = walls.shape[1]
    width = walls.shape[2]
    for k in prange(rows.shape[0]):
        b = rows[k]
        path_dirs = np.empty(height * width, np.int64)
        n = shortest_path_dirs(walls[b], agent[b, 0], agent[b, 1], target[b, 0], target[b, 1],
                               path_dirs)
        if n < 0:
            plan_len[k] = -1
            continue
        count = n + 1
        pairs = 0
        if num_steps > count:
            pairs = (num_steps - count + 1) // 2
        if pairs == 0:
            plans[k, :n] = path_dirs[:n]
            plan_len[k] = n
            continue
        # Opportunities: (index i along the path, direction d) with an open neighbour.
        cells_r = np.empty(n + 1, np.int64)
        cells_c = np.empty(n + 1, np.int64)
        cells_r[0] = agent[b, 0]
        cells_c[0] = agent[b, 1]
        for i in range(n):
            cells_r[i + 1] = cells_r[i] + DIR_DROW[path_dirs[i]]
            cells_c[i + 1] = cells_c[i] + DIR_DCOL[path_dirs[i]]
        opp_i = np.empty(4 * (n + 1), np.int64)
        opp_d = np.empty(4 * (n + 1), np.int64)
        nopp = 0
        for i in range(n + 1):
            for d in range(4):
                rr = cells_r[i] + DIR_DROW[d]
                cc = cells_c[i] + DIR_DCOL[d]
                if 0 <= rr < height and 0 <= cc < width and walls[b, rr, cc] == 0:
                    opp_i[nopp] = i
                    opp_d[nopp] = d
                    nopp += 1
        # Count the pairs inserted before each path index, then lay the plan out in one pass.
        s = seed_state(seeds[k], STREAM_SOLVER)
        extra_at = np.zeros((n + 1, 4), np.int64)
        for p in range(pairs):
            s, pick = below(s, nopp)
            extra_at[opp_i[pick], opp_d[pick]] += 1
        pos = 0
        for i in range(n + 1):
            for d in range(4):
                for _ in range(extra_at[i, d]):
                    plans[k, pos] = d
                    plans[k, pos + 1] = (d + 2) % 4
                    pos += 2
            if i < n:
                plans[k, pos] = path_dirs[i]
                pos += 1
        plan_len[k] = pos


@njit(cache=True, nogil=True)
def maze_distances(walls, agent, target, unreachable, out):
    """out[b] = the fewest one-cell moves that take ``agent[b]`` to ``target[b]`` through the
    floor cells of ``walls[b]`` (breadth-first, level by level, stopped when the target is
    reached), or ``unreachable`` when the target cannot be reached. Relies on the maze
    convention above (outer ring wall, so a floor cell's four neighbours are its flat index
    +-1 and +-width); ``walls`` must be C-contiguous. A pure function of each row: rows share
    scratch only through a per-row stamp, so no row sees another's search."""
    nrows = walls.shape[0]
    width = walls.shape[2]
    ncells = walls.shape[1] * width
    flat = walls.reshape(nrows, ncells)
    # seen[c] == b + 1 marks cell c as reached in row b's search: one allocation per call, and
    # no clearing between rows.
    seen = np.zeros(ncells, np.int64)
    queue = np.empty(ncells, np.int64)
    for b in range(nrows):
        start = agent[b, 0] * width + agent[b, 1]
        goal = target[b, 0] * width + target[b, 1]
        if start == goal:
            out[b] = 0
            continue
        stamp = b + 1
        seen[start] = stamp
        queue[0] = start
        head = 0
        tail = 1
        level = 0
        found = -1
        while head < tail and found < 0:
            level += 1
            layer_end = tail
            while head < layer_end and found < 0:
                cur = queue[head]
                head += 1
                for offset in (1, -1, width, -width):
                    nxt = cur + offset
                    if nxt < 0 or nxt >= ncells or flat[b, nxt] != 0 or seen[nxt] == stamp:
                        continue
                    if nxt == goal:
                        found = level
                        break
                    seen[nxt] = stamp
                    queue[tail] = nxt
                    tail += 1
        out[b] = found if found >= 0 else unreachable
