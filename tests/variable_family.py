"""A test-only family whose frame size differs per episode (DESIGN.md "Frames").

``variable_rect``: a coloured rectangle of a seed-dependent size (within a capacity of
``max_h`` x ``max_w``) with a one-pixel-per-cell marker that moves on a coarse grid towards a
goal corner. Used by tests/test_variable_frames.py, which registers it only for its own tests
(``registered()``) and unregisters it afterwards, so the contract suite of the shipped ids is
unchanged.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from visgym.core.family import FAMILY_BASE, Family
from visgym.core.grammar import STOP, STOP_ACTION, ActionSpec, Grammar, IntChoice
from visgym.core.registry import register, unregister

CELL = 8
MOVES = ((-1, 0), (0, 1), (1, 0), (0, -1))   # up, right, down, left
WALL = FAMILY_BASE


@dataclass(frozen=True)
class RectParams:
    max_h: int = 40       # capacity, in pixels (multiples of CELL)
    max_w: int = 56
    min_cells: int = 2    # smallest side, in cells


class RectState(NamedTuple):
    hw: np.ndarray      # int32[B, 2] frame size in pixels
    pos: np.ndarray     # int32[B, 2] marker cell (row, col)
    color: np.ndarray   # uint8[B, 3] background colour


class VariableRect(Family):
    name = "variable_rect"
    Params = RectParams
    presets = {"easy": RectParams(), "hard": RectParams(max_h=64, max_w=80)}
    grammar = Grammar([ActionSpec("move", IntChoice(4)), STOP])
    feedback_texts = ("You hit the border.",)

    @property
    def frame_shape(self):
        return self.params.max_h, self.params.max_w

    def frame_hw(self, state, out):
        np.copyto(out, state.hw)

    def new_state(self, batch):
        return RectState(np.full((batch, 2), CELL, np.int32), np.zeros((batch, 2), np.int32),
                         np.zeros((batch, 3), np.uint8))

    def _cells(self, state, rows):
        return state.hw[rows] // CELL

    def reset_rows(self, state, rows, seeds):
        p = self.params
        for r, seed in zip(rows.tolist(), np.asarray(seeds).tolist()):
            rng = np.random.default_rng(int(seed))
            h = int(rng.integers(p.min_cells, p.max_h // CELL + 1))
            w = int(rng.integers(p.min_cells, p.max_w // CELL + 1))
            state.hw[r] = (h * CELL, w * CELL)
            state.pos[r] = (0, 0)
            state.color[r] = rng.integers(40, 200, 3)

    def load_rows(self, state, rows, init_states):
        p = self.params
        for r, d in zip(rows.tolist(), init_states):
            try:
                h, w = (int(v) for v in d["size"])
                y, x = (int(v) for v in d["pos"])
                color = [int(v) for v in d["color"]]
            except (KeyError, TypeError, ValueError):
                raise ValueError("init_state: expected size, pos and color") from None
            if not (0 < h <= p.max_h // CELL and 0 < w <= p.max_w // CELL
                    and 0 <= y < h and 0 <= x < w and len(color) == 3):
                raise ValueError("init_state.size: outside the capacity")
            state.hw[r] = (h * CELL, w * CELL)
            state.pos[r] = (y, x)
            state.color[r] = color

    def to_init_state(self, state, i):
        return {"size": (state.hw[i] // CELL).tolist(), "pos": state.pos[i].tolist(),
                "color": state.color[i].tolist()}

    def step_rows(self, state, actions, rows, reward, terminated, feedback):
        for r in np.flatnonzero(rows).tolist():
            dy, dx = MOVES[int(actions.ints[r, 0])]
            y, x = int(state.pos[r, 0]) + dy, int(state.pos[r, 1]) + dx
            h, w = (state.hw[r] // CELL).tolist()
            if 0 <= y < h and 0 <= x < w:
                state.pos[r] = (y, x)
            else:
                feedback[r] = WALL

    def is_success(self, state):
        return np.all(state.pos == state.hw // CELL - 1, axis=1)

    def goal_state(self, state):
        state.pos[:] = state.hw // CELL - 1
        return state

    def render_rows(self, state, frames, rows, work):
        for r in rows.tolist():
            h, w = state.hw[r].tolist()
            frames[r, :h, :w] = state.color[r]
            y, x = (state.pos[r] * CELL).tolist()
            frames[r, y:y + CELL, x:x + CELL] = 255

    def prompt(self, state, i, text_mode=False):
        return ("Move the white square to the bottom-right corner. Actions: "
                "('move', d) with d in 0..3 (up, right, down, left); ('stop', 'stop').")

    def solve(self, state, rows, strategy, num_steps, seeds):
        plans = []
        for r in rows.tolist():
            h, w = (state.hw[r] // CELL).tolist()
            y, x = state.pos[r].tolist()
            plan = ["('move', 2)"] * (h - 1 - y) + ["('move', 1)"] * (w - 1 - x)
            plans.append(plan + [STOP_ACTION])
        return plans


@contextlib.contextmanager
def registered():
    """``variable_rect/easy`` and ``/hard`` registered for the duration of the block."""
    register(VariableRect)
    try:
        yield
    finally:
        unregister(VariableRect)
