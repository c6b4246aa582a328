"""What the slot-order puzzles (zoom_in_puzzle, video_unshuffle) do alike, written once.

Both show N items in a row of slots in a permuted order, moved by swapping two slots (two 1-based
slots) or by a whole new ordering (a 1-based list, new[k] = old[L[k] - 1]), and are solved when
slot k shows item k. Their State's ``order`` (B, N) holds the id of the item in each slot, ids
numbered from the family's ``first_id`` (zoom_in_puzzle 0, video_unshuffle 1, as their
reference init states number them).

Both also draw from per-episode tiles that are a pure function of a few State fields (the crops
of an image's boxes, the frames of a clip's positions), kept in each BatchEnv's workspace (pixels
do not live in the State), and a step redraws only the slots whose item changed.

``SlotOrderPuzzle`` is a mixin placed before ``Family`` in a family's bases. The family sets the
class attributes ``first_id``, ``plan_stop`` (the stop action its solver plans end with) and
``workspace_type`` (its workspace NamedTuple, with a ``drawn`` int32 (B, N) field: the item each
slot of each frame shows, -1 none), calls ``self._init_slots(params, grammar, n)`` from its
``__init__`` (it sets ``self.grammar`` and ``self.n_slots``, runs ``Family.__init__`` and finds
the swap and reorder kinds), and defines ``_stale_tiles(state, work, rows)`` (bool per row: its
tiles are not those of the State), ``_fill_tiles(state, work, rows)`` and ``_draw(state, frames,
rows, work, full)``. The mixin then provides ``step_rows``, ``is_success``, ``goal_state``,
``potential`` (slots not showing their own item), ``render_rows`` (re-fills only stale rows, then
draws the rows in full), ``render_after_step`` (the changed slots) and ``slot_plans`` (the two
solver plans: "reorder", one reorder then stop; any other strategy, left-to-right selection swaps
then stop); the compiled parts are kernels/slot_orders.py's.
"""
from __future__ import annotations

from typing import ClassVar

import numpy as np

from ..core.grammar import Grammar
from ..kernels.slot_orders import solved_rows, step_orders

__all__ = ["SlotOrderPuzzle"]


class SlotOrderPuzzle:
    """Mixin for Family subclasses whose State has ``order`` (see the module docstring)."""

    first_id: ClassVar[int]
    plan_stop: ClassVar[str]
    workspace_type: ClassVar[type]

    def _init_slots(self, params, grammar: Grammar, n: int) -> None:
        self.grammar = grammar
        self.n_slots = int(n)
        super().__init__(params)   # Family's
        self.swap_kind = grammar.index("swap")
        self.reorder_kind = grammar.index("reorder")

    def _identity(self, state) -> np.ndarray:
        n = state.order.shape[1]
        return np.arange(self.first_id, self.first_id + n, dtype=np.int32)

    def step_rows(self, state, actions, rows, reward, terminated, feedback) -> None:
        step_orders(state.order, actions.kind, actions.ints, rows, self.swap_kind,
                    self.reorder_kind)

    def is_success(self, state) -> np.ndarray:
        out = np.empty(state.order.shape[0], np.bool_)
        solved_rows(state.order, self.first_id, out)
        return out

    def goal_state(self, state):
        state.order[:] = self._identity(state)
        return state

    def potential(self, state, out) -> None:
        # Slots not showing their own item (0 exactly when the order is solved).
        np.sum(state.order != self._identity(state), axis=1, out=out, dtype=np.float32)

    # -- pixels ---------------------------------------------------------------------------
    def _fits(self, work, batch: int) -> bool:
        return isinstance(work, self.workspace_type) and work.drawn.shape == (batch,
                                                                               self.n_slots)

    def _work(self, work, batch: int):
        """``work`` if it is this family's workspace for ``batch`` episodes, else a new one."""
        return work if self._fits(work, batch) else self.new_workspace(batch)

    def render_rows(self, state, frames, rows, work) -> None:
        rows = np.ascontiguousarray(rows, dtype=np.int64)
        if rows.shape[0] == 0:
            return
        work = self._work(work, frames.shape[0])
        # Tiles are a pure function of State fields: re-fill only rows showing new ones.
        stale = self._stale_tiles(state, work, rows)
        if stale.any():
            self._fill_tiles(state, work, rows[stale].tolist())
        self._draw(state, frames, rows, work, True)

    def render_after_step(self, state, frames, work) -> None:
        all_rows = np.arange(frames.shape[0], dtype=np.int64)
        if not self._fits(work, frames.shape[0]):
            self.render_rows(state, frames, all_rows, None)
            return
        # A step changes only the order: the tiles are those of the last reset or load.
        self._draw(state, frames, all_rows, work, False)

    # -- solvers --------------------------------------------------------------------------
    def slot_plans(self, state, rows, strategy: str) -> list[list[str]]:
        """Per row: ``"reorder"``: one reorder putting every item in its slot; otherwise
        left-to-right selection (for each slot i not showing item i, swap it with the slot that
        does). Each plan ends with ``plan_stop``."""
        first = self.first_id
        plans = []
        for b in np.asarray(rows).tolist():
            order = [int(v) - first for v in state.order[b]]   # 0-based item ids
            plan = []
            if strategy == "reorder":
                slot_of = [0] * len(order)
                for slot, item in enumerate(order):
                    slot_of[item] = slot
                plan.append(f"('reorder', {[s + 1 for s in slot_of]})")
            else:
                for i in range(len(order)):
                    if order[i] != i:
                        j = order.index(i)
                        order[i], order[j] = order[j], order[i]
                        plan.append(f"('swap', ({i + 1}, {j + 1}))")
            plan.append(self.plan_stop)
            plans.append(plan)
        return plans
