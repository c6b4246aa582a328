"""maze_2d: a top-down grid maze; move the blue disc to the red square, then stop.

Implements spec/envs/maze_2d.md: uniform spanning-tree mazes (Wilson's algorithm, kernels/grid),
opposite-corner agent and target, the move/stop grammar with the reference's feedback, reward 1
on a stop at the target, the 25-px-per-cell frame with the reference's colours and its exact
rasterised disc, the ansi text mode, the prompt, and the BFS solver with detour padding.

Frames are composed from a tile atlas (floor, wall, target, each with and without the disc);
a reset draws the whole tile map and a step redraws only the two cells the agent left and entered.

Deviations from the reference, on purpose:
- Rendering is a pure function of the state. This fixes the reference's stale reset image (quirk
  1: reset returned the previous maze) and the white hole left in the target square after the
  agent leaves it (quirk 2).
- The solver returns a single final stop (the reference returns two, quirk 3); the padding count
  is computed as the reference does, with one stop included. Its padding draws from a stream of
  the episode's own seed, so solving never changes later episodes (quirk 6).
- The reset info carries empty feedback instead of the previous episode's (quirk 5).
- ``('move', 100000000000000000000)`` raised OverflowError in the reference; here it is an
  invalid payload with the usual feedback and no state change.
- Mazes are generated from our own per-episode random stream, so ``seed=k`` gives a different
  (equally distributed) maze than the reference's ``reset(seed=k)``; recorded episodes are
  replayed from their init states.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numba import njit

from ..core.family import FAMILY_BASE, Family
from ..core.grammar import STOP, STOP_ACTION, ActionSpec, Grammar, IntChoice
from ..core.validate import InitSchema, describe, int_grid, integer, is_integer, rule
from ..kernels.grid import generate_mazes, maze_distances, solve_mazes, step_moves
from ..render import tiles as tile_render

CELL_PX = 25
FLOOR_RGB = (255, 255, 255)
WALL_RGB = (169, 169, 169)
TARGET_RGB = (255, 0, 0)
AGENT_RGB = (0, 0, 255)
# The reference's disc (pygame, radius 6.25 at the cell centre), as rasterised: the covered
# column span [start, stop) of each cell row 6..17. Matches parity/frames pixel for pixel.
_DISC_SPANS = {6: (10, 14), 7: (9, 15), 8: (8, 16), 9: (7, 17), 10: (6, 18), 11: (6, 18),
               12: (6, 18), 13: (6, 18), 14: (7, 17), 15: (8, 16), 16: (9, 15), 17: (10, 14)}

# Tile t + AGENT_OFFSET is tile t with the disc on it (the wall one is never used).
TILE_FLOOR, TILE_WALL, TILE_TARGET = range(3)
AGENT_OFFSET = 3
WALL_CODE = FAMILY_BASE  # "Cannot move into a wall."


MAX_MAZE_SIDE = 201


def check_maze_side(name: str, value) -> int:
    """A maze width or height: an odd integer 5..MAX_MAZE_SIDE (the outer wall included)."""
    value = integer(name, value, 5, MAX_MAZE_SIDE)
    if value % 2 == 0:
        raise ValueError(f"{name}: must be odd (width/height of maze should be odd), got {value}")
    return value


@dataclass(frozen=True)
class Maze2DParams:
    """maze_width/maze_height: columns/rows including the outer wall (odd, as the reference),
    5..201. Cost at the largest, 201x201 (10,000 cells), per episode on this 2-core machine:
    a 5025x5025 frame (76 MB; BatchEnv refuses a batch whose frames exceed half the memory),
    generation with a full draw ~3 ms, loading an init state ~5 ms, a step under 0.1 ms, a
    solve under 1 ms."""

    maze_width: int = 11
    maze_height: int = 11

    def __post_init__(self):
        for name in ("maze_width", "maze_height"):
            rule(name, "odd")
            object.__setattr__(self, name, check_maze_side(name, getattr(self, name)))


class Maze2DState(NamedTuple):
    walls: np.ndarray       # uint8[B, H, W], 1 = wall
    agent: np.ndarray       # int64[B, 2] (row, col)
    target: np.ndarray      # int64[B, 2]
    prev_agent: np.ndarray  # int64[B, 2], agent before the last step (for redrawing)


def _tile_atlas() -> np.ndarray:
    tiles = np.empty((2 * AGENT_OFFSET, CELL_PX, CELL_PX, 3), np.uint8)
    for t, rgb in enumerate((FLOOR_RGB, WALL_RGB, TARGET_RGB)):
        tiles[t] = rgb
        tiles[t + AGENT_OFFSET] = rgb
        for row, (x0, x1) in _DISC_SPANS.items():
            tiles[t + AGENT_OFFSET, row, x0:x1] = AGENT_RGB
    return tiles


@njit(cache=True, nogil=True)
def _tilemaps(walls, agent, target, rows, out):
    for k in range(rows.shape[0]):
        b = rows[k]
        for r in range(walls.shape[1]):
            for c in range(walls.shape[2]):
                out[k, r, c] = TILE_WALL if walls[b, r, c] else TILE_FLOOR
        out[k, target[b, 0], target[b, 1]] = TILE_TARGET
        out[k, agent[b, 0], agent[b, 1]] += AGENT_OFFSET


@njit(cache=True, nogil=True)
def _dirty_cells(walls, agent, prev_agent, target, ids, xs, ys):
    """Two tile blits per episode: the cell the agent left (without disc), then its cell now."""
    for b in range(agent.shape[0]):
        for j in range(2):
            if j == 0:
                r, c = prev_agent[b, 0], prev_agent[b, 1]
            else:
                r, c = agent[b, 0], agent[b, 1]
            tile = TILE_FLOOR
            if walls[b, r, c]:
                tile = TILE_WALL
            elif r == target[b, 0] and c == target[b, 1]:
                tile = TILE_TARGET
            if j == 1:
                tile += AGENT_OFFSET
            n = 2 * b + j
            ids[n] = tile
            xs[n] = c * CELL_PX
            ys[n] = r * CELL_PX


def maze_schema(height: int, width: int, extra: dict | None = None) -> InitSchema:
    """The maze fields of a reference init-state dict (maze_map, agent_location,
    target_location, plus ``extra``), parsed to (walls, (row, col), (row, col)). ``maze_map``
    must be a list of ``height`` lists of ``width`` ints 0 (floor) / 1 (wall), or an integer
    array of that shape: its structure is checked before anything is converted, so 0.5, "1" or
    True are refused rather than cast."""
    def maze_map(field, value):
        walls = int_grid(field, value, (height, width), 0, 1)
        if not (walls[0].all() and walls[-1].all() and walls[:, 0].all() and walls[:, -1].all()):
            raise ValueError(f"{field}: the outer ring must be wall")
        return walls

    def cell(field, value):
        if (not isinstance(value, (list, tuple)) or len(value) != 2
                or not all(is_integer(v) for v in value)):
            raise ValueError(f"{field}: expected [row, col], got {describe(value)}")
        if not (0 <= value[0] < height and 0 <= value[1] < width):
            raise ValueError(f"{field}: {describe(list(value))} is outside the "
                             f"{height}x{width} maze")
        return int(value[0]), int(value[1])

    def on_floor(parsed, where):
        for key in ("agent_location", "target_location"):
            r, c = parsed[key]
            if parsed["maze_map"][r, c]:
                raise ValueError(f"{where}.{key}: {[r, c]} is a wall cell")
        return parsed

    return InitSchema({"maze_map": maze_map, "agent_location": cell, "target_location": cell,
                       **(extra or {})}, on_floor)


def maze_init_state(state, i: int) -> dict:
    """The maze fields of episode i's reference init-state dict (``maze_schema``'s inverse)."""
    return {
        "maze_map": state.walls[i].astype(int).tolist(),
        "agent_location": [int(v) for v in state.agent[i]],
        "target_location": [int(v) for v in state.target[i]],
    }


_IMAGE_LEGEND = (
    "The maze consists of walls (gray) and paths (white). You are represented by a blue "
    "circle, and your goal is to reach the red target square."
)
_TEXT_LEGEND = (
    "You are given a text-based representation of the maze where:\n"
    "- Walls are represented by '#'.\n"
    "- Paths are represented by ' ' (empty space).\n"
    "- Your position is marked with 'A'.\n"
    "- The target is marked with 'T'.\n"
    "Your goal is to navigate from 'A' to 'T'."
)
_PROMPT_BODY = (
    "Available actions:\n"
    "1. 'move': Move in one of four directions. Format: `('move', direction)` where direction "
    "is an integer:\n"
    "   - 0=right, 1=up, 2=left, 3=down\n"
    "2. 'stop': End the navigation session. Format: `('stop', 'stop')`\n\n"
    "Success: You succeed if you reach the red target square.\n\n"
    "Please respond with exactly one action and its arguments in the specified format. "
    "For example:\n"
    "- To move right: `('move', 0)`\n"
    "- To move up: `('move', 1)`\n"
    "- To move left: `('move', 2)`\n"
    "- To move down: `('move', 3)`\n"
    "- To stop: `('stop', 'stop')`"
)

MOVE_ACTIONS = tuple(f"('move', {d})" for d in range(4))


class Maze2D(Family):
    name = "maze_2d"
    transient_fields = ("prev_agent",)   # redraw bookkeeping (state_hash)
    Params = Maze2DParams
    presets = {"easy": Maze2DParams(9, 9), "hard": Maze2DParams(11, 11)}
    grammar = Grammar([ActionSpec("move", IntChoice(4)), STOP])
    feedback_texts = ("Cannot move into a wall.",)
    has_text_mode = True
    solver_strategies = ("bfs",)

    def __init__(self, params: Maze2DParams):
        super().__init__(params)
        self.tiles = _tile_atlas()

    def new_workspace(self, batch: int):
        # The two cells each step redraws (the agent's old and new cell), per episode.
        return (np.repeat(np.arange(batch, dtype=np.int64), 2),
                np.empty(2 * batch, np.int32), np.empty(2 * batch, np.int32),
                np.empty(2 * batch, np.int32))

    @property
    def shape(self) -> tuple[int, int]:
        return self.params.maze_height, self.params.maze_width

    @property
    def frame_shape(self) -> tuple[int, int]:
        height, width = self.shape
        return height * CELL_PX, width * CELL_PX

    def new_state(self, batch: int) -> Maze2DState:
        height, width = self.shape
        return Maze2DState(
            walls=np.ones((batch, height, width), np.uint8),
            agent=np.ones((batch, 2), np.int64),
            target=np.ones((batch, 2), np.int64),
            prev_agent=np.ones((batch, 2), np.int64),
        )

    # -- episodes -------------------------------------------------------------------------
    def reset_rows(self, state, rows, seeds) -> None:
        generate_mazes(state.walls, state.agent, state.target, rows, seeds)
        state.prev_agent[rows] = state.agent[rows]

    def load_rows(self, state, rows, init_states) -> None:
        for b, init in zip(rows, maze_schema(*self.shape).parse_all(init_states)):
            state.walls[b] = init["maze_map"]
            state.agent[b] = init["agent_location"]
            state.target[b] = init["target_location"]
            state.prev_agent[b] = init["agent_location"]

    def to_init_state(self, state, i: int) -> dict:
        return maze_init_state(state, i)

    def step_rows(self, state, actions, rows, reward, terminated, feedback) -> None:
        step_moves(state.walls, state.agent, state.prev_agent, actions.ints, rows, WALL_CODE,
                   feedback)

    def is_success(self, state) -> np.ndarray:
        return (state.agent == state.target).all(axis=1)

    def potential(self, state, out) -> None:
        """Exact: the fewest ``move`` actions (one cell each) that take the agent to the target
        through the maze, by breadth-first search from the agent's cell (the final stop is not
        counted), so it equals the bfs solver's plan length minus its stop and falls by exactly
        1 per optimal step. Unit: actions. 0 exactly on the target. A loaded maze whose target
        cannot be reached gets height x width, more than any reachable distance."""
        height, width = self.shape
        # The kernel reads the wall map by flat index (a view when already contiguous).
        maze_distances(np.ascontiguousarray(state.walls), state.agent, state.target,
                       height * width, out)

    def goal_state(self, state):
        state.agent[:] = state.target
        state.prev_agent[:] = state.target
        return state

    # -- pixels and text ------------------------------------------------------------------
    def render_rows(self, state, frames, rows, work) -> None:
        rows = np.ascontiguousarray(rows, dtype=np.int64)
        height, width = self.shape
        maps = np.empty((rows.shape[0], height, width), np.int32)
        _tilemaps(state.walls, state.agent, state.target, rows, maps)
        tile_render.blit_tilemaps(frames, rows, self.tiles, maps)

    def render_after_step(self, state, frames, work) -> None:
        idx, ids, xs, ys = work
        _dirty_cells(state.walls, state.agent, state.prev_agent, state.target, ids, xs, ys)
        tile_render.blit_tiles(frames, idx, self.tiles, ids, xs, ys)

    def render_text(self, state, i: int) -> str:
        grid = np.where(state.walls[i] != 0, "#", " ")
        grid[tuple(state.target[i])] = "T"
        grid[tuple(state.agent[i])] = "A"
        width = grid.shape[1] + 2
        lines = ["#" * width] + ["#" + "".join(row) + "#" for row in grid] + ["#" * width]
        return "\n".join(lines)

    def prompt(self, state, i: int, text_mode: bool = False) -> str:
        height, width = self.shape
        legend = _TEXT_LEGEND if text_mode else _IMAGE_LEGEND
        return f"You are navigating a {height}x{width} maze. {legend}\n\n{_PROMPT_BODY}"

    # -- solver ---------------------------------------------------------------------------
    def solve(self, state, rows, strategy, num_steps, seeds) -> list[list[str]]:
        rows = np.ascontiguousarray(rows, dtype=np.int64)
        height, width = self.shape
        capacity = height * width + (num_steps or 0) + 2
        plans = np.zeros((rows.shape[0], capacity), np.int64)
        plan_len = np.zeros(rows.shape[0], np.int64)
        solve_mazes(state.walls, state.agent, state.target, rows, seeds[rows],
                    int(num_steps or 0), plans, plan_len)
        out = []
        for k in range(rows.shape[0]):
            n = int(plan_len[k])
            moves = [MOVE_ACTIONS[d] for d in plans[k, :max(n, 0)].tolist()]
            out.append(moves + [STOP_ACTION])
        return out
