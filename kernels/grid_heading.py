"""Batched egocentric navigation on grid mazes (Numba): a walker with a heading that moves
forward and turns left, right or around; the initial-heading rule; and a breadth-first planner
over (cell, heading) states that returns the fewest move/turn actions to a goal cell.

Nothing here knows a family by name. Mazes are the uint8 wall maps of ``kernels.grid`` (1 =
wall, outer ring wall). Headings index the forward vectors (d_row, d_col) 0: (+1, 0),
1: (0, +1), 2: (-1, 0), 3: (0, -1); with row 0 drawn at the top ("north"), turning left is
heading + 1, turning right heading + 3 and turning around heading + 2 (mod 4), which are the
geometric left/right of a walker on a north-up map. Actions are coded ACT_MOVE = 0 and
ACT_TURN_LEFT / ACT_TURN_RIGHT / ACT_TURN_AROUND = 1 / 2 / 3.
"""
import numpy as np
from numba import njit, prange

from .batching import row_kernel
from .grid import try_move
from .rng import below, seed_state

FWD_DROW = np.array([1, 0, -1, 0], dtype=np.int64)
FWD_DCOL = np.array([0, 1, 0, -1], dtype=np.int64)
# Heading change of each turn payload (index = payload; 0 is unused).
TURN_DELTA = np.array([0, 1, 3, 2], dtype=np.int64)

ACT_MOVE = 0
ACT_TURN_LEFT = 1
ACT_TURN_RIGHT = 2
ACT_TURN_AROUND = 3

STREAM_HEADING = np.uint64(3)
STREAM_PADDING = np.uint64(4)


@njit(cache=True, nogil=True)
def _target_in_line(walls, r, c, d, tr, tc):
    """True if the target lies straight ahead of (r, c) along heading d with only floor cells
    strictly between them."""
    height, width = walls.shape
    nr = r + FWD_DROW[d]
    nc = c + FWD_DCOL[d]
    while 0 <= nr < height and 0 <= nc < width:
        if nr == tr and nc == tc:
            return True
        if walls[nr, nc] != 0:
            return False
        nr += FWD_DROW[d]
        nc += FWD_DCOL[d]
    return False


@njit(cache=True, nogil=True)
def _wall_distance(walls, r, c, d):
    """Cells from (r, c) to the first wall (or the map edge) along heading d."""
    height, width = walls.shape
    n = 1
    nr = r + FWD_DROW[d]
    nc = c + FWD_DCOL[d]
    while 0 <= nr < height and 0 <= nc < width and walls[nr, nc] == 0:
        n += 1
        nr += FWD_DROW[d]
        nc += FWD_DCOL[d]
    return n


@row_kernel(4)
def initial_headings(walls, agent, target, heading, rows, seeds):
    """The reference's initial-heading rule: uniform over the open headings that do not look
    straight at the target; else the open heading with the nearest wall ahead (lowest index on
    ties); else 0. Draws from the episode's own heading stream."""
    height = walls.shape[1]
    width = walls.shape[2]
    for k in prange(rows.shape[0]):
        b = rows[k]
        r = agent[b, 0]
        c = agent[b, 1]
        safe = np.empty(4, np.int64)
        nsafe = 0
        best = -1
        best_dist = 1 << 30
        for d in range(4):
            nr = r + FWD_DROW[d]
            nc = c + FWD_DCOL[d]
            if not (0 <= nr < height and 0 <= nc < width) or walls[b, nr, nc] != 0:
                continue
            if not _target_in_line(walls[b], r, c, d, target[b, 0], target[b, 1]):
                safe[nsafe] = d
                nsafe += 1
            dist = _wall_distance(walls[b], r, c, d)
            if dist < best_dist:
                best_dist = dist
                best = d
        if nsafe > 0:
            s = seed_state(seeds[k], STREAM_HEADING)
            s, pick = below(s, nsafe)
            heading[b] = safe[pick]
        elif best >= 0:
            heading[b] = best
        else:
            heading[b] = 0


@njit(cache=True, nogil=True)
def step_heading(walls, agent, heading, kind, ints, rows, move_kind, turn_kind, wall_code,
                 feedback, changed):
    """The moves and turns of one step, in place, for the rows where ``rows`` is true (the step
    template in core handles errors and stop). move: one cell forward unless a wall is there
    (then ``wall_code``); turn p: heading += TURN_DELTA[p]. ``changed[b]`` says whether the
    walker's pose (cell or heading) changed."""
    for b in range(agent.shape[0]):
        changed[b] = False
        if not rows[b]:
            continue
        k = kind[b]
        if k == move_kind:
            d = heading[b]
            if try_move(walls[b], agent[b], FWD_DROW[d], FWD_DCOL[d]):
                changed[b] = True
            else:
                feedback[b] = wall_code
        elif k == turn_kind:
            heading[b] = (heading[b] + TURN_DELTA[ints[b, 0]]) % 4
            changed[b] = True


@njit(cache=True, nogil=True, inline="always")
def _successor(walls, width, state, a):
    """The search state ((row * width + col) * 4 + heading) that action ``a`` leads to from
    ``state``; -1 for a move into a wall or off the map."""
    cell = state // 4
    d = state % 4
    if a != ACT_MOVE:
        return cell * 4 + (d + TURN_DELTA[a]) % 4
    nr = cell // width + FWD_DROW[d]
    nc = cell % width + FWD_DCOL[d]
    if not (0 <= nr < walls.shape[0] and 0 <= nc < width) or walls[nr, nc] != 0:
        return -1
    return (nr * width + nc) * 4 + d


@njit(cache=True, nogil=True)
def plan_actions(walls, start_r, start_c, start_d, goal_r, goal_c, out):
    """Breadth-first search over (cell, heading) with unit-cost actions (move, turn left, turn
    right, turn around, tried in that order): the fewest actions that bring the walker onto the
    goal cell. Writes the action codes into ``out`` and returns their number (-1 if the goal
    cannot be reached). On a perfect maze this is the unique cell path with exactly one turn
    wherever the heading must change, as the reference's solver produces."""
    height, width = walls.shape
    nstates = height * width * 4
    parent = np.full(nstates, -1, np.int64)
    action = np.zeros(nstates, np.int64)
    queue = np.empty(nstates, np.int64)
    start = (start_r * width + start_c) * 4 + start_d
    parent[start] = start
    queue[0] = start
    head = 0
    tail = 1
    found = -1
    if start_r == goal_r and start_c == goal_c:
        return 0
    while head < tail:
        cur = queue[head]
        head += 1
        for a in range(4):
            nxt = _successor(walls, width, cur, a)
            if nxt < 0 or parent[nxt] >= 0:
                continue
            parent[nxt] = cur
            action[nxt] = a
            if a == ACT_MOVE and nxt // 4 == goal_r * width + goal_c:
                found = nxt
                break
            queue[tail] = nxt
            tail += 1
        if found >= 0:
            break
    if found < 0:
        return -1
    n = 0
    cur = found
    while cur != start:
        out[n] = action[cur]
        n += 1
        cur = parent[cur]
    out[:n] = out[:n][::-1].copy()
    return n


@row_kernel(4)
def plan_batch(walls, agent, heading, target, rows, seeds, num_steps, plans, plan_len,
                end_heading):
    """Plans for ``rows``: the BFS plan, then (when ``num_steps`` exceeds its length) the
    reference's padding: ceil((num_steps - length) / 2) neutral pairs (turn left, turn right),
    each inserted at a uniform index in [0, length] of the unpadded plan, drawn from the
    episode's padding stream. ``plans[k]`` receives action codes, ``plan_len[k]`` their number
    (-1 if unsolvable) and ``end_heading[k]`` the heading after the plan."""
    height = walls.shape[1]
    width = walls.shape[2]
    for k in prange(rows.shape[0]):
        b = rows[k]
        path = np.empty(height * width * 4, np.int64)
        n = plan_actions(walls[b], agent[b, 0], agent[b, 1], heading[b], target[b, 0],
                         target[b, 1], path)
        if n < 0:
            plan_len[k] = -1
            end_heading[k] = heading[b]
            continue
        d = heading[b]
        for i in range(n):
            if path[i] != ACT_MOVE:
                d = (d + TURN_DELTA[path[i]]) % 4
        end_heading[k] = d
        pairs = 0
        if num_steps > n:
            pairs = (num_steps - n + 1) // 2
        extra = np.zeros(n + 1, np.int64)
        if pairs > 0:
            s = seed_state(seeds[k], STREAM_PADDING)
            for p in range(pairs):
                s, at = below(s, n + 1)
                extra[at] += 1
        pos = 0
        for i in range(n + 1):
            for _ in range(extra[i]):
                plans[k, pos] = ACT_TURN_LEFT
                plans[k, pos + 1] = ACT_TURN_RIGHT
                pos += 2
            if i < n:
                plans[k, pos] = path[i]
                pos += 1
        plan_len[k] = pos


@njit(cache=True, nogil=True)
def heading_distances(walls, agent, heading, target, unreachable, out):
    """out[b] = the fewest unit-cost actions (move forward, turn left, right or around) that
    bring the walker at ``agent[b]`` facing ``heading[b]`` onto the cell ``target[b]``, in any
    heading: the length of ``plan_actions``' plan, by the same breadth-first search over
    (cell, heading) without the path. 0 on the target; ``unreachable`` when it cannot be
    reached. Rows share scratch only through a per-row stamp, so each value is a function of
    its own row."""
    height = walls.shape[1]
    width = walls.shape[2]
    nstates = height * width * 4
    seen = np.zeros(nstates, np.int64)
    dist = np.empty(nstates, np.int64)
    queue = np.empty(nstates, np.int64)
    for b in range(agent.shape[0]):
        goal_cell = target[b, 0] * width + target[b, 1]
        start_cell = agent[b, 0] * width + agent[b, 1]
        if start_cell == goal_cell:
            out[b] = 0
            continue
        row_walls = walls[b]
        stamp = b + 1
        start = start_cell * 4 + heading[b]
        seen[start] = stamp
        dist[start] = 0
        queue[0] = start
        head = 0
        tail = 1
        found = -1
        while head < tail and found < 0:
            cur = queue[head]
            head += 1
            for a in range(4):
                nxt = _successor(row_walls, width, cur, a)
                if nxt < 0:
                    continue
                if a == ACT_MOVE and nxt // 4 == goal_cell:
                    found = dist[cur] + 1
                    break
                if seen[nxt] == stamp:
                    continue
                seen[nxt] = stamp
                dist[nxt] = dist[cur] + 1
                queue[tail] = nxt
                tail += 1
        out[b] = found if found >= 0 else unreachable
