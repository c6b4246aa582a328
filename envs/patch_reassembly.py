"""patch_reassembly: an empty R x C board and P coloured polyomino pieces ("patches") parked
around it that tile it exactly; snap each piece's anchor cell (the one showing its id) onto a
board coordinate until the board is full without overlaps, then stop.

Implements spec/envs/patch_reassembly.md: the round-robin multi-source BFS partition, anchors
(row-major first cell of a piece) and the four-sided parking layout; the place / remove / stop
grammar with the reference's validity rules and feedback wording; the dynamics (placing a placed
piece moves it, placing it on its own anchor is a valid no-op); reward 1 on a stop with every
cell covered by any tiling; the per-episode frame (the parking extent plus a one-cell margin,
40-px cells); the ansi text mode and both prompts; the row-major backtracking solver with its
padding. Kernels: kernels/patch_reassembly.py (Numba).

Frames: each episode's frame is ``frame_hw`` = ((rows of its extent) + 2) * 40 by ((cols) + 2)
* 40, inside a capacity that is the largest extent the parking rules allow for the params
(``variable_frames``). One region renderer draws any pixel rectangle from the state in the
reference's order. A step redraws only the 41x41 cell boxes the moved piece left (region
renders) and paints the piece at its new place (its own boxes cover those whole), after
reading both sets of boxes ahead (the frames of a batch are not in the cache). A few resets
into frames the workspace knows (origin, size, pieces of what it shows) erase only the old
drawing's piece boxes that the new one does not cover, its label cells and, when the board
moved, its board box, instead of whitening the whole frame; a batch of resets draws each frame
in a per-thread scratch frame (cached) and streams it out (render/blit.copy_frame). Drawing runs
on both cores. At B=256 on this 2-core machine ``bench step`` gives ~58,000-64,000 env-steps/s
(easy), ~46,000-50,000 (hard).

The ``place`` and ``remove`` payload kinds (``PlacePayload``, ``RemovePayload``) live here, as
sliding_block's ``BlockMovePayload`` does: the reference's range checks plus a record of how the
id, row and column were spelled (an int, ``True`` or ``False``), which selects the refusal text
that echoes them (``the patch False is already in the parking slot``).

Deviations from the reference, on purpose:
- Non-integer numbers in a ``place`` payload (``(0.5, 1, 1)``, also whole floats ``(1.0, 2, 3)``
  and complex numbers) are invalid payloads ("not in the valid action space"): the reference
  raised TypeError / IndexError out of ``step`` (quirk 3). Bools count as ints there as in
  ``remove`` (``True`` is 1) and the refusal echoes them as written.
- Puzzles are generated from our own per-episode random stream (SplitMix64), not from Python's
  ``random.Random(seed)``, so ``seed=k`` gives a different (equally distributed) puzzle than the
  reference's ``reset(seed=k)``; the constructor consumes no puzzles (quirk 2 does not apply:
  every episode is a function of its seed). Recorded episodes replay from their init states.
- The solver's padding draws from a stream of the episode's own seed (the reference used the
  env's Python RNG), so padded plans have the reference's length and structure but not its
  wrong anchors; unpadded plans equal the reference's string for string.
- The heuristic fallback (a puzzle the backtracking cannot finish from its current placements)
  ends with a stop like every plan (quirk 6: the reference returned it without one).
- The solver takes bounded time. The reference's backtracking (each parked piece in id order
  at its next legal anchor) can run for hours on large boards with many pieces (a 12x12 board
  with 16 pieces did not finish in 2 minutes). Ours finds the same first tiling by an
  exact-cover search (cover the first empty cell) that tries at most ``search_budget`` =
  200,000 placements per episode (about 30 ms at worst, measured; the presets need at most
  a few hundred). If the budget runs out first, the plan is the first tiling the search met, else the generating
  tiling (pieces placed elsewhere are removed first): it still completes the board, but may
  differ from the reference's plan, which would not have come in reasonable time.
- Labels (coordinate numbers and piece ids) are drawn with the bundled scalable font at 32 px
  (glyph atlas) instead of DejaVu Sans: same colours, ink centred where the reference's is, other
  glyph shapes. Everything else (background, grid, cells, outlines, layout, sizes) matches the
  reference pixel for pixel.
- Observation metadata: the capacity is this family's real largest frame, not 1024x1024
  (quirk 1).
- Init states are validated: the pieces must partition the board, anchors must be cells of their
  pieces, parked pieces must lie off the board and within the capacity, and current positions
  must be the parking slot or a legal placement. The reference accepted anything.
- Parameters are bounded (grid_size rows and cols in [1, 12], num_patches in [1, min(R*C, 16)])
  so that frames and feedback tables stay small; the presets are inside.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ..core import threads
from ..core.family import FAMILY_BASE, Family, goal_distance
from ..core.grammar import STOP, STOP_ACTION, ActionSpec, Grammar
from ..core.validate import InitSchema, describe, integer, integers, rule
from ..kernels.patch_reassembly import (ACT_PLACE, extents, fill_boards, generate_puzzles,
                                        render_full, render_moved, step_pieces)
from ..kernels.patch_reassembly_solver import SEARCH_BUDGET, solve_puzzles
from ..render import blit, labels

CELL_PX = 40
# Resets that redraw at least this many bytes of frames draw each in a scratch frame first.
SCRATCH_BYTES = 4 << 20
_NO_SCRATCH = np.zeros(0, np.uint8)
FONT_PX = 32
GRID_RGB = np.array([200, 200, 200], np.uint8)
AXIS_RGB = np.array([0, 120, 255], np.uint8)
# The reference's label ink is centred at (x + 20, y + 19) of its 40-px cell (DejaVu Sans 32).
LABEL_CX = 20
LABEL_CY = 19
MAX_SIDE = 12
MAX_PATCHES = 16
INIT_FIELDS = ("patches", "patch_anchor", "parking_slot", "current_state")


def patch_colors(n: int) -> np.ndarray:
    """The reference's constant piece colours: three integers in [50, 230) per piece from a
    NumPy generator seeded with 42."""
    rng = np.random.default_rng(42)
    return np.array([rng.integers(50, 230, 3) for _ in range(n)], np.uint8).reshape(n, 3)


# --------------------------------------------------------------------------- payload spellings
def _spell(x, n: int):
    """(value, spelling index) of an int or bool in [0, n): ints spell as themselves, True as
    n, False as n + 1; anything else (floats included, even whole ones) is None."""
    kind = type(x)
    if kind is bool:
        value, spelling = (1, n) if x else (0, n + 1)
    elif kind is int:
        value, spelling = x, x
    else:
        return None
    return (value, spelling) if 0 <= value < n else None


def _spelled(spelling: int, n: int) -> str:
    return str(spelling) if spelling < n else ("True" if spelling == n else "False")


@dataclass(frozen=True)
class PlacePayload:
    """``(patch_id, row, col)`` as a 3-tuple or 3-list of ints or bools with 0 <= patch_id < P,
    0 <= row < R, 0 <= col < C. ints = (id, row, col, spelling index of the three entries)."""

    n_patches: int
    rows: int
    cols: int
    width = 4

    def convert(self, payload, ints, floats) -> bool:
        if type(payload) not in (tuple, list) or len(payload) != 3:
            return False
        spelled = (_spell(payload[0], self.n_patches), _spell(payload[1], self.rows),
                   _spell(payload[2], self.cols))
        if None in spelled:
            return False
        (k, ks), (r, rs), (c, cs) = spelled
        ints[0] = k
        ints[1] = r
        ints[2] = c
        ints[3] = (ks * (self.rows + 2) + rs) * (self.cols + 2) + cs
        return True

    def sample(self, rng) -> tuple:
        return (int(rng.integers(self.n_patches)), int(rng.integers(self.rows)),
                int(rng.integers(self.cols)))

    def refusals(self) -> list[str]:
        return [f"The action is not valid because the patch {_spelled(ks, self.n_patches)} "
                f"cannot be placed at ({_spelled(rs, self.rows)}, {_spelled(cs, self.cols)})."
                for ks in range(self.n_patches + 2) for rs in range(self.rows + 2)
                for cs in range(self.cols + 2)]


@dataclass(frozen=True)
class RemovePayload:
    """A patch id: an int or bool in [0, P). ints = (id, spelling index)."""

    n_patches: int
    width = 2

    def convert(self, payload, ints, floats) -> bool:
        spelled = _spell(payload, self.n_patches)
        if spelled is None:
            return False
        ints[0], ints[1] = spelled
        return True

    def sample(self, rng) -> int:
        return int(rng.integers(self.n_patches))

    def refusals(self) -> list[str]:
        return [f"The action is not valid because the patch {_spelled(s, self.n_patches)} is "
                "already in the parking slot." for s in range(self.n_patches + 2)]


# --------------------------------------------------------------------------- params and state
@dataclass(frozen=True)
class PatchReassemblyParams:
    """grid_size: (rows, cols) of the board, each in [1, 12]; num_patches: pieces, in
    [1, min(rows * cols, 16)]."""

    grid_size: tuple = (5, 5)
    num_patches: int = 5

    def __post_init__(self):
        rows, cols = integers("grid_size", self.grid_size, 2, 1, MAX_SIDE)
        object.__setattr__(self, "grid_size", (rows, cols))
        patches = integer("num_patches", self.num_patches, 1, MAX_PATCHES)
        rule("num_patches", "at most grid_size rows x cols")
        if patches > rows * cols:
            # Either keyword may be the one to change: the message names both.
            raise ValueError(f"num_patches: {patches} patches do not fit a grid_size of "
                             f"{rows}x{cols} ({rows * cols} cells)")
        object.__setattr__(self, "num_patches", patches)


class PatchReassemblyState(NamedTuple):
    offsets: np.ndarray     # int8[B, P, S, 2] cells of each piece relative to its anchor, row-major
    n_cells: np.ndarray     # int16[B, P] cells per piece
    anchor: np.ndarray      # int16[B, P, 2] the generating tiling's anchor of each piece
    park: np.ndarray        # int16[B, P, 2] parking slot (an anchor off the board)
    pos: np.ndarray         # int16[B, P, 2] current anchor (on the board = placed)
    board: np.ndarray       # int8[B, R, C] piece id + 1 covering each cell, 0 = empty
    extent: np.ndarray      # int32[B, 4] min_r, min_c, max_r, max_c of board + parked pieces
    moved: np.ndarray       # int16[B] piece moved by the last step (-1 none), for redrawing
    moved_from: np.ndarray  # int16[B, 2] its anchor before that step


def _capacity_extent(rows: int, cols: int, n: int) -> tuple[int, int, int, int]:
    """The largest (min_r, min_c, max_r, max_c) the parking rules allow: a piece spans at most
    the board's rows and columns, and the pieces on one side have at most the cells the others
    leave them."""
    per_side = [len(range(s, n, 4)) for s in range(4)]

    def span(count, side_len):
        return min(count * side_len, rows * cols - (n - count)) if count else 0

    top, right, bottom, left = per_side
    min_r = -(rows + 1) if top else 0
    min_c = -(cols + 1) if left else 0
    max_r = max(rows - 1,
                rows + rows if bottom else 0,
                span(right, rows) + right - 2 if right else 0,
                span(left, rows) + 2 * left - 3 if left else 0)
    max_c = max(cols - 1,
                cols + cols if right else 0,
                span(top, cols) + 2 * top - 3 if top else 0,
                span(bottom, cols) + bottom - 2 if bottom else 0)
    return min_r, min_c, max_r, max_c


# --------------------------------------------------------------------------- prompt
_PROMPT_HEAD = (
    "You are solving a {R}×{C} patch-reassembly puzzle. There are {P} irregular pieces parked "
    "around the board. Your goal is to place them so the grid is completely filled—no gaps, no "
    "overlaps.\n"
)
_IMAGE_LEGEND = "You see an image of the board and the parked patches.\n"
_TEXT_LEGEND = (
    "You are given a text-based representation of the grid. Patches on the board are shown with "
    "their ID number, and empty cells are marked with '.'. Parked patches are displayed below "
    "the grid as small ASCII shapes. The anchor cell for each parked patch is marked with a '*' "
    "instead of its ID number.\n"
)
_PROMPT_BODY = (
    "\nAvailable actions:\n"
    "1. 'place': Snap a patch onto the grid by aligning its anchor (the cell that shows the "
    "patch's ID number) with a chosen board coordinate. Format: `('place', (patch_id, row, "
    "col))` where patch_id ∈ [0, {P1}], row ∈ [0, {R1}], col ∈ [0, {C1}].\n"
    "2. 'remove': Return a patch to its parking slot. Format: `('remove', patch_id)` where "
    "patch_id ∈ [0, {P1}].\n"
    "3. 'stop': End the episode and submit your solution. Format: `('stop', 'stop')`\n\n"
    "Success: You succeed if the grid is completely filled with no gaps or overlaps.\n\n"
    "Please respond with exactly one action and its arguments in the specified format. For "
    "example:\n"
    "- To place patch 0 at (2, 3): `('place', (0, 2, 3))`\n"
    "- To remove patch 0: `('remove', 0)`\n"
    "- To finish: `('stop', 'stop')`"
)


def _label_masks(count: int):
    """Coverage masks of the labels "0".."count-1" cropped to their ink (render/labels.py), and
    the offset of each from its cell's top-left pixel that centres the ink where the
    reference's is."""
    sprites = [labels.label(str(k), FONT_PX) for k in range(count)]
    height = max(s.height for s in sprites)
    width = max(s.width for s in sprites)
    masks = np.zeros((count, height, width), np.uint8)
    oy = np.zeros(count, np.int64)
    ox = np.zeros(count, np.int64)
    for k, sprite in enumerate(sprites):
        masks[k, :sprite.height, :sprite.width] = sprite.coverage
        ox[k], oy[k] = sprite.place("mm", LABEL_CX, LABEL_CY)
    return masks, oy, ox


def _pair(field: str, value) -> tuple[int, int]:
    return integers(field, value, 2, -(1 << 15), (1 << 15) - 1)


# --------------------------------------------------------------------------- the family
class PatchReassembly(Family):
    name = "patch_reassembly"
    transient_fields = ("moved", "moved_from")   # redraw bookkeeping (state_hash)
    Params = PatchReassemblyParams
    presets = {"easy": PatchReassemblyParams((6, 6), 5),
               "hard": PatchReassemblyParams((8, 8), 6)}
    grammar = Grammar([ActionSpec("place", PlacePayload(5, 5, 5)),
                       ActionSpec("remove", RemovePayload(5)), STOP])  # per instance: __init__
    has_text_mode = True
    solver_strategies = ()
    version = 2   # 2: solve() is bounded; past its search budget it plans another completing tiling
    search_budget = SEARCH_BUDGET

    def __init__(self, params: PatchReassemblyParams):
        rows, cols = params.grid_size
        n = params.num_patches
        self.rows, self.cols, self.n_patches = rows, cols, n
        place, remove = PlacePayload(n, rows, cols), RemovePayload(n)
        # The grammar of this grid and patch count (its bounds come from the params).
        self.grammar = Grammar([ActionSpec("place", place), ActionSpec("remove", remove), STOP])
        super().__init__(params)
        self.place_kind = self.grammar.index("place")
        self.remove_kind = self.grammar.index("remove")
        place_texts = place.refusals()
        self.feedback_texts = tuple(place_texts) + tuple(remove.refusals())
        self.place_base = FAMILY_BASE
        self.remove_base = FAMILY_BASE + len(place_texts)
        self.max_cells = rows * cols - n + 1
        self.colors = patch_colors(n)
        self.color_rows = np.ascontiguousarray(np.tile(self.colors, (1, CELL_PX - 1)))
        self.ink = np.where(self.colors.astype(np.int64).mean(axis=1, keepdims=True) > 128,
                            0, 255).repeat(3, axis=1).astype(np.uint8)
        self.label_masks, self.label_oy, self.label_ox = _label_masks(max(rows, cols, n))
        min_r, min_c, max_r, max_c = _capacity_extent(rows, cols, n)
        self.capacity = ((max_r - min_r + 3) * CELL_PX, (max_c - min_c + 3) * CELL_PX)

    @property
    def frame_shape(self) -> tuple[int, int]:
        return self.capacity

    def frame_hw(self, state, out) -> None:
        ext = state.extent
        out[:, 0] = (ext[:, 2] - ext[:, 0] + 3) * CELL_PX
        out[:, 1] = (ext[:, 3] - ext[:, 1] + 3) * CELL_PX

    def new_state(self, batch: int) -> PatchReassemblyState:
        n, rows, cols = self.n_patches, self.rows, self.cols
        return PatchReassemblyState(
            offsets=np.zeros((batch, n, self.max_cells, 2), np.int8),
            n_cells=np.ones((batch, n), np.int16),
            anchor=np.zeros((batch, n, 2), np.int16),
            park=np.full((batch, n, 2), -2, np.int16),
            pos=np.full((batch, n, 2), -2, np.int16),
            board=np.zeros((batch, rows, cols), np.int8),
            extent=np.tile(np.array([-2, 0, rows - 1, cols - 1], np.int32), (batch, 1)),
            moved=np.full(batch, -1, np.int16),
            moved_from=np.zeros((batch, 2), np.int16),
        )

    # -- episodes -------------------------------------------------------------------------
    def reset_rows(self, state, rows, seeds) -> None:
        rows = np.ascontiguousarray(rows, dtype=np.int64)
        seeds = np.ascontiguousarray(seeds, dtype=np.uint64)
        generate_puzzles(self.rows, self.cols, self.n_patches, rows, seeds, state.offsets,
                         state.n_cells, state.anchor, state.park, state.pos, state.board)
        extents(self.rows, self.cols, state.offsets, state.n_cells, state.park, rows,
                state.extent)
        state.moved[rows] = -1
        state.moved_from[rows] = 0

    def _per_patch(self, field: str, value) -> list:
        """A field with one entry per patch (the entries are checked with the tiling)."""
        if not isinstance(value, (list, tuple)) or len(value) != self.n_patches:
            raise ValueError(f"{field}: expected a list of {self.n_patches} entries (one per "
                             f"patch), got {describe(value)}")
        return list(value)

    def _tiling(self, lists: dict, where: str) -> dict:
        """The patches, anchors, parking slots and positions checked together: the patches
        tile the board, each anchor is a cell of its patch, parked patches lie off the board,
        placed ones do not overlap, and the parking area fits the frame capacity."""
        R, C, P = self.rows, self.cols, self.n_patches
        owner = np.full((R, C), -1, np.int64)
        cells = []
        for k, patch in enumerate(lists["patches"]):
            field = f"{where}.patches[{k}]"
            if not isinstance(patch, (list, tuple)) or not 1 <= len(patch) <= self.max_cells:
                raise ValueError(f"{field}: expected a list of 1..{self.max_cells} [row, col] "
                                 f"cells, got {describe(patch)}")
            mine = []
            for m, cell in enumerate(patch):
                r, c = integers(f"{field}[{m}]", cell, 2)
                if not (0 <= r < R and 0 <= c < C):
                    raise ValueError(f"{field}[{m}]: {describe([r, c])} is off the {R}x{C} board")
                if owner[r, c] >= 0:
                    raise ValueError(f"{field}[{m}]: cell {describe([r, c])} is already in "
                                     f"patch {int(owner[r, c])}")
                owner[r, c] = k
                mine.append((r, c))
            cells.append(sorted(mine))
        if (owner < 0).any():
            r, c = np.argwhere(owner < 0)[0].tolist()
            raise ValueError(f"{where}.patches: cell {[r, c]} is in no patch (the patches must "
                             f"tile the {R}x{C} board)")
        offsets, anchors, parks, current = [], [], [], []
        for k in range(P):
            anchor = _pair(f"{where}.patch_anchor[{k}]", lists["patch_anchor"][k])
            if anchor not in cells[k]:
                raise ValueError(f"{where}.patch_anchor[{k}]: {list(anchor)} is not a cell of "
                                 f"patch {k}")
            off = [(r - anchor[0], c - anchor[1]) for r, c in cells[k]]
            park = _pair(f"{where}.parking_slot[{k}]", lists["parking_slot"][k])
            if any(0 <= park[0] + dr < R and 0 <= park[1] + dc < C for dr, dc in off):
                raise ValueError(f"{where}.parking_slot[{k}]: patch {k} parked at {list(park)} "
                                 f"covers board cells (parked patches lie off the board)")
            offsets.append(off)
            anchors.append(anchor)
            parks.append(park)
        board = np.zeros((R, C), np.int64)
        for k in range(P):
            pos = _pair(f"{where}.current_state[{k}]", lists["current_state"][k])
            if pos != parks[k]:
                fits = all(0 <= pos[0] + dr < R and 0 <= pos[1] + dc < C for dr, dc in offsets[k])
                if not fits or any(board[pos[0] + dr, pos[1] + dc] for dr, dc in offsets[k]):
                    raise ValueError(f"{where}.current_state[{k}]: {list(pos)} is neither patch "
                                     f"{k}'s parking slot nor a free place on the board for it")
                for dr, dc in offsets[k]:
                    board[pos[0] + dr, pos[1] + dc] = k + 1
            current.append(pos)
        ext = [0, 0, R - 1, C - 1]
        for off, park in zip(offsets, parks):
            for dr, dc in off:
                ext = [min(ext[0], park[0] + dr), min(ext[1], park[1] + dc),
                       max(ext[2], park[0] + dr), max(ext[3], park[1] + dc)]
        h, w = (ext[2] - ext[0] + 3) * CELL_PX, (ext[3] - ext[1] + 3) * CELL_PX
        if h > self.capacity[0] or w > self.capacity[1]:
            raise ValueError(f"{where}.parking_slot: the parked patches need a {h}x{w} frame, "
                             f"beyond this family's largest ({self.capacity[0]}x"
                             f"{self.capacity[1]}) for these params")
        return {"offsets": offsets, "anchor": anchors, "park": parks, "pos": current}

    def load_rows(self, state, rows, init_states) -> None:
        schema = InitSchema({key: self._per_patch for key in INIT_FIELDS}, self._tiling)
        parsed = schema.parse_all(init_states)
        rows = np.ascontiguousarray(rows, dtype=np.int64)
        for b, p in zip(rows.tolist(), parsed):
            state.offsets[b] = 0
            for k, off in enumerate(p["offsets"]):
                state.n_cells[b, k] = len(off)
                state.offsets[b, k, :len(off)] = off
            state.anchor[b] = p["anchor"]
            state.park[b] = p["park"]
            state.pos[b] = p["pos"]
        fill_boards(state.pos, state.offsets, state.n_cells, rows, state.board)
        extents(self.rows, self.cols, state.offsets, state.n_cells, state.park, rows,
                state.extent)
        state.moved[rows] = -1
        state.moved_from[rows] = 0

    def _cells(self, state, i: int, k: int, anchor) -> list[list[int]]:
        n = int(state.n_cells[i, k])
        return [[int(anchor[0]) + dr, int(anchor[1]) + dc]
                for dr, dc in state.offsets[i, k, :n].tolist()]

    def to_init_state(self, state, i: int) -> dict:
        P = self.n_patches
        return {
            "patches": [self._cells(state, i, k, state.anchor[i, k]) for k in range(P)],
            "patch_anchor": state.anchor[i].tolist(),
            "parking_slot": state.park[i].tolist(),
            "current_state": state.pos[i].tolist(),
        }

    def step_rows(self, state, actions, rows, reward, terminated, feedback) -> None:
        step_pieces(state.board, state.pos, state.park, state.offsets, state.n_cells,
                    actions.kind, actions.ints, rows, self.place_kind, self.remove_kind,
                    self.place_base, self.remove_base, state.moved, state.moved_from, feedback)

    def placed(self, state) -> np.ndarray:
        """bool[B, P]: is each piece's anchor on the board."""
        pos = state.pos
        return ((pos[..., 0] >= 0) & (pos[..., 0] < self.rows) & (pos[..., 1] >= 0)
                & (pos[..., 1] < self.cols))

    def proportion_filled(self, state) -> np.ndarray:
        return (state.board != 0).sum(axis=(1, 2)) / (self.rows * self.cols)

    def is_success(self, state) -> np.ndarray:
        # Placements never overlap, so every cell covered means a complete tiling.
        return (state.board != 0).all(axis=(1, 2)) & self.placed(state).all(axis=1)

    def potential(self, state, out) -> None:
        # Uncovered cells plus pieces off the board (0 exactly on a complete tiling).
        missing = (state.board == 0).sum(axis=(1, 2)) + (~self.placed(state)).sum(axis=1)
        goal_distance(missing, self.is_success(state), out)

    def metrics(self, state) -> dict:
        return {"proportion_filled": self.proportion_filled(state)}

    def goal_state(self, state):
        rows = np.arange(state.pos.shape[0], dtype=np.int64)
        plans, plan_len = self._plans(state, rows, 0, np.zeros(rows.shape[0], np.uint64))
        for b in rows.tolist():
            for kind, k, r, c in plans[b, :plan_len[b]].tolist():
                state.pos[b, k] = (r, c) if kind == ACT_PLACE else state.park[b, k]
        fill_boards(state.pos, state.offsets, state.n_cells, rows, state.board)
        state.moved[:] = -1
        return state

    # -- pixels and text ------------------------------------------------------------------
    def _sizes(self, state) -> np.ndarray:
        hw = np.empty((state.extent.shape[0], 2), np.int64)
        ext = state.extent
        hw[:, 0] = (ext[:, 2] - ext[:, 0] + 3) * CELL_PX
        hw[:, 1] = (ext[:, 3] - ext[:, 1] + 3) * CELL_PX
        return hw

    def new_workspace(self, batch: int):
        """What each frame of the BatchEnv's buffer shows (drawn?, origin, size, pieces), so a
        reset erases only the previous episode's drawing instead of whitening the whole frame."""
        n, cells = self.n_patches, self.max_cells
        return (np.zeros(batch, np.bool_), np.zeros((batch, 2), np.int64),
                np.zeros((batch, 2), np.int64), np.zeros((batch, n, 2), np.int16),
                np.zeros((batch, n, cells, 2), np.int8), np.zeros((batch, n), np.int16))

    def _work(self, work, batch: int):
        if work is None or work[0].shape[0] != batch:
            return self.new_workspace(batch)   # a fresh one: nothing recorded, full redraws
        return work

    def clear_padding(self, frames, rows, sizes, old) -> None:
        blit.clear_outside(frames, rows, sizes, old)   # compiled (many rows of cold lines)

    def render_rows(self, state, frames, rows, work) -> None:
        rows = np.ascontiguousarray(rows, dtype=np.int64)
        if rows.shape[0] == 0:
            return
        work = self._work(work, frames.shape[0])
        sizes = self._sizes(state)
        args = (self.rows, self.cols, state.extent, sizes, CELL_PX, state.offsets, state.n_cells,
                state.pos, self.color_rows, self.ink, self.label_masks, self.label_oy,
                self.label_ox, AXIS_RGB, GRID_RGB, *work)
        # Whole frames (~1-2 MB each): the resets of a step are shared between the cores. A
        # batch of them is not in the cache: each is drawn in the thread's scratch frame (which
        # is) and copied out with streamed stores; a few frames are erased and redrawn in place.
        weights = sizes[rows, 0].astype(np.int64) * sizes[rows, 1] * 3
        if weights.sum() < SCRATCH_BYTES:
            threads.FRAME_POOL.run_parts(lambda part: render_full(frames, part, *args,
                                                                  _NO_SCRATCH),
                                         rows, weights, threads.THREAD_BYTES)
            return

        def draw_part(part):
            scratch = self._scratch()
            for i in range(part.shape[0]):
                render_full(frames, part[i:i + 1], *args, scratch)
                h, w = sizes[part[i]]
                blit.copy_frame(frames, part[i], scratch, h, w)   # streamed stores

        threads.FRAME_POOL.run_parts(draw_part, rows, weights, threads.THREAD_BYTES)

    def _scratch(self) -> np.ndarray:
        """The calling thread's scratch frame (flat, at least the frame capacity's bytes)."""
        height, width = self.frame_shape
        return threads.thread_buffer("patch_reassembly.frame", height * width * 3)

    def render_after_step(self, state, frames, work) -> None:
        work = self._work(work, frames.shape[0])
        rows = np.flatnonzero(state.moved >= 0)
        if rows.shape[0] == 0:
            return
        args = (self.rows, self.cols, state.extent, self._sizes(state), CELL_PX, state.offsets,
                state.n_cells, state.pos, state.moved, state.moved_from, self.color_rows,
                self.ink, self.label_masks, self.label_oy, self.label_ox, AXIS_RGB, GRID_RGB,
                work[3])
        # Each moved piece repaints the boxes it left and entered: weigh rows by its cells.
        weights = state.n_cells[rows, state.moved[rows]].astype(np.int64) * (2 * CELL_PX**2 * 3)
        threads.FRAME_POOL.run_parts(lambda part: render_moved(frames, part, *args), rows,
                                     weights, threads.THREAD_BYTES)

    def render_text(self, state, i: int) -> str:
        R, C = self.rows, self.cols
        board = state.board[i]
        lines = ["   " + " ".join(str(c).ljust(2) for c in range(C)), "  " + "-" * (3 * C)]
        for r in range(R):
            cells = "".join(" . " if v == 0 else " " + str(v - 1).ljust(2)
                            for v in board[r].tolist())
            lines.append(str(r).ljust(2) + "|" + cells)
        lines += ["", "--- Parked Patches ---"]
        placed = self.placed(state)[i]
        parked = [k for k in range(self.n_patches) if not placed[k]]
        for k in parked:
            n = int(state.n_cells[i, k])
            off = state.offsets[i, k, :n].tolist()
            r0 = min(dr for dr, _ in off)
            c0 = min(dc for _, dc in off)
            h = max(dr for dr, _ in off) - r0 + 1
            w = max(dc for _, dc in off) - c0 + 1
            art = [[" "] * w for _ in range(h)]
            for dr, dc in off:
                art[dr - r0][dc - c0] = "*" if dr == 0 and dc == 0 else str(k)
            lines += ["", f"Patch {k}:"] + ["  " + "".join(row) for row in art]
        if not parked:
            lines.append("  (None)")
        return "\n".join(lines)

    def prompt(self, state, i: int, text_mode: bool = False) -> str:
        R, C, P = self.rows, self.cols, self.n_patches
        return (_PROMPT_HEAD.format(R=R, C=C, P=P) + (_TEXT_LEGEND if text_mode else _IMAGE_LEGEND)
                + _PROMPT_BODY.format(P1=P - 1, R1=R - 1, C1=C - 1))

    # -- solver ---------------------------------------------------------------------------
    def _plans(self, state, rows, num_steps: int, seeds):
        capacity = 2 * max(self.n_patches, num_steps) + 4
        plans = np.zeros((rows.shape[0], capacity, 4), np.int64)
        plan_len = np.zeros(rows.shape[0], np.int64)
        solve_puzzles(state.board, state.pos, state.park, state.anchor, state.offsets,
                      state.n_cells, rows, seeds, num_steps, self.search_budget,
                      plans, plan_len)
        return plans, plan_len

    def solve(self, state, rows, strategy, num_steps, seeds) -> list[list[str]]:
        rows = np.ascontiguousarray(rows, dtype=np.int64)
        seeds = np.ascontiguousarray(seeds, dtype=np.uint64)[rows]
        plans, plan_len = self._plans(state, rows, int(num_steps or 0), seeds)
        out = []
        for j in range(rows.shape[0]):
            plan = [f"('place', ({k}, {r}, {c}))" if kind == ACT_PLACE else f"('remove', {k})"
                    for kind, k, r, c in plans[j, :plan_len[j]].tolist()]
            out.append(plan + [STOP_ACTION])
        return out
