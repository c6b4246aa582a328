"""matchstick_equation: fix a false arithmetic equation drawn in matchsticks by moving matches.

Implements spec/envs/matchstick_equation.md: the 15-glyph segment model (digits as a 7-segment
display plus the + - * / = strokes) as fixed lookup tables for taking and adding a stick; puzzles
made from five equation templates broken by ``break_moves`` random stick moves (the agent's move
budget), rejected while still correct or, with ``enforce_min_distance``, while fixable in fewer
moves, so every puzzle is solvable within the budget (reversing the break is a fix) and, for
generated puzzles, not in fewer moves; the move/undo/stop grammar with the reference's feedback
(the budget is checked before legality; floats in a move are truncated); correctness by a safe
evaluator (kernels/expressions, no ``eval``) with Python's precedence, true division, the
leading-zero rule and errors (division by zero) counting as wrong; the ansi text mode; the prompt;
and the bfs, dfs and sos solvers as Numba searches.

Frame: the spec's layout drawn at its native scale, not squashed. Each symbol is a 60x80 box plus
an 8 px gap (pitch 68 px) with its index label in the 20 px band below, the matchsticks in the
reference's strokes and colours (outline, body, red head at the stroke's start, tail cap), on
white. The frame is 100 px high and 68 * max_symbols - 8 px wide: 100x808 for the default
max_symbols = 12, the longest equation the templates make ("20+20*10=220"), so every generated
equation is drawn at full size, centred. ``image_width``/``image_height``, when given, resample
that canvas to the requested size (area averaging), as the reference's final resize did.
Glyph and label tiles are drawn once per family instance; a reset blits one glyph and one label
tile per symbol, and a step re-blits only the (at most two) glyphs it changed.

Init states. ``state_dicts()`` returns ``{"broken": <initial equation>}``, exactly what the
reference's ``get_init_state()`` returns, and adds ``"history"`` (the stack of equations,
element 0 = ``broken``, one entry per move in effect, as the reference's state holds it) once a
move is in effect, so ``reset(init_states=state_dicts())`` reproduces the current episode,
including its undo stack and move budget, while the reference's own dicts (``broken`` only) load
unchanged as a fresh puzzle, and the reference itself would load ours as the episode's start.

Deviations from the reference, on purpose:
- ``get_init_state()`` in the reference never reflects the current equation; ``history`` (above)
  is the addition that lets a mid-episode state round-trip.
- Puzzles come from each episode's own random stream, so ``seed=k`` gives a different (equally
  distributed) puzzle than the reference's ``reset(seed=k)``; recorded puzzles are replayed from
  their init states. The generation fallback (after ``gen_retry_limit`` failed tries) uses the
  env's own glyph moves, not the helper module's extra mappings, and prints nothing.
- The frame is not squashed into 300x80 (see above), and the index labels use Pillow's bundled
  font at 16 px instead of the system's DejaVuSans-Bold, so frames do not depend on the machine.
- A move payload that made the reference raise (strings, UFuncTypeError) is an invalid payload
  here, with the usual feedback.
- Solvers plan from the current state with the move budget that is left: when the budget left
  cannot fix the current equation, the plan first undoes moves (the fewest actions overall). The
  reference searched from the current equation with the full budget, so its plans failed
  mid-episode. A dfs trace that misses the fix (its global visited set can) falls back to the
  bfs path instead of an empty plan, and an unsolvable loaded puzzle gives ``[stop]`` rather than
  ``[]``. sos detours draw from ``sos_seed`` when given, otherwise from a stream seeded by the
  episode's state, so ``solve()`` is a pure function of the state and does not advance any
  generator (the reference drew sos_seed from the env's generator).
- Correctness: integers beyond int64 are approximated by floats (Python is exact), and a negative
  base to a fractional power (complex in Python) counts as wrong; neither can arise from a
  generated puzzle, whose operators never become adjacent.
- ``max_steps`` is the BatchEnv's step budget (the reference stored an unenforced 1000); the
  reset info carries no stale feedback.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from PIL import Image, ImageDraw

from ..core.family import FAMILY_BASE, Family
from ..core.grammar import STOP, STOP_ACTION, ActionSpec, Grammar, StopToken, TruncatedIntVector
from ..core.validate import InitSchema, boolean, describe, integer, optional_integer
from ..kernels import segment_equations as seq
from ..kernels.expressions import SYM_BLANK
from ..render import labels, raster, resample, tiles as tile_render

SYMBOLS = "0123456789+-*/="  # symbol code = index (the kernels' convention)
N_SEGMENTS = 13
MAX_EQUATION_LEN = 30  # the reference's action-space bound on symbol indices

# The glyph model: which segments each symbol is made of (spec 3, "Glyph model"). Segment ids:
# 0 top, 1 upper right, 2 lower right, 3 bottom, 4 lower left, 5 upper left, 6 middle, 7 plus
# vertical, 8 "\" diagonal, 9 "/" diagonal, 10 divide diagonal (used by no glyph), 11/12 upper/
# lower equals bar.
GLYPH_SEGMENTS = (
    (0, 1, 2, 3, 4, 5), (1, 2), (0, 1, 3, 4, 6), (0, 1, 2, 3, 6), (1, 2, 5, 6),
    (0, 2, 3, 5, 6), (0, 2, 3, 4, 5, 6), (0, 1, 2), (0, 1, 2, 3, 4, 5, 6), (0, 1, 2, 3, 5, 6),
    (6, 7), (6,), (8, 9), (9,), (11, 12),
)
GLYPH_MASKS = np.array([sum(1 << s for s in segs) for segs in GLYPH_SEGMENTS], dtype=np.int64)


def _move_tables() -> tuple[np.ndarray, np.ndarray]:
    """remove_to[g, s] / add_to[g, t]: the symbol left after taking stroke s from g / made by
    adding stroke t to g, or -1. Row 15 (the padding blank) has no moves."""
    by_mask = {int(m): g for g, m in enumerate(GLYPH_MASKS)}
    remove_to = np.full((16, N_SEGMENTS), -1, np.int8)
    add_to = np.full((16, N_SEGMENTS), -1, np.int8)
    for g, mask in enumerate(GLYPH_MASKS.tolist()):
        for s in range(N_SEGMENTS):
            bit = 1 << s
            if mask & bit:
                remove_to[g, s] = by_mask.get(mask & ~bit, -1)
            else:
                add_to[g, s] = by_mask.get(mask | bit, -1)
    return remove_to, add_to


REMOVE_TO, ADD_TO = _move_tables()

# Rendering (spec 7): box-coordinate strokes, colours, layout.
SEGMENT_STROKES = (
    ((10, 5), (30, 5)), ((30, 5), (30, 25)), ((30, 25), (30, 45)), ((10, 45), (30, 45)),
    ((10, 25), (10, 45)), ((10, 5), (10, 25)), ((10, 25), (30, 25)), ((20, 5), (20, 45)),
    ((10, 10), (30, 40)), ((30, 10), (10, 40)), ((10, 40), (30, 10)), ((10, 15), (30, 15)),
    ((10, 35), (30, 35)),
)
OUTLINE_RGB = (100, 80, 40)
BODY_RGB = (235, 210, 150)
HEAD_RGB = (200, 0, 0)
BACKGROUND_RGB = (255, 255, 255)
LABEL_RGB = (0, 0, 0)
BOX_W, BOX_H, GAP, LABEL_H = 60, 80, 8, 20
LABEL_FONT_PX = 16
PITCH = BOX_W + GAP
FRAME_H = BOX_H + LABEL_H

# Text mode (spec 7, "ANSI mode"): strokes per segment as (row, col, text).
ASCII_STROKES = {
    0: ((0, 1, "---"),), 1: ((1, 4, "|"), (2, 4, "|")), 2: ((3, 4, "|"), (4, 4, "|")),
    3: ((5, 1, "---"),), 4: ((3, 0, "|"), (4, 0, "|")), 5: ((1, 0, "|"), (2, 0, "|")),
    6: ((2, 1, "---"),), 7: ((1, 2, "|"), (2, 2, "|"), (3, 2, "|")),
    8: ((1, 1, "\\"), (2, 2, "\\"), (3, 3, "\\")), 9: ((1, 3, "/"), (2, 2, "/"), (3, 1, "/")),
    10: ((1, 3, "/"), (2, 2, "/"), (3, 1, "/")), 11: ((1, 1, "---"),), 12: ((4, 1, "---"),),
}

BUDGET_CODE = FAMILY_BASE        # "Move budget exhausted. Please try to undo."
ILLEGAL_CODE = FAMILY_BASE + 1   # "Illegal move."
NOTHING_CODE = FAMILY_BASE + 2   # "Nothing to undo."

UNDO_ACTION = "('undo', 'undo')"
STRATEGIES = {"sos": seq.STRATEGY_SOS, "bfs": seq.STRATEGY_BFS, "dfs": seq.STRATEGY_DFS}


@dataclass(frozen=True)
class MatchstickEquationParams:
    """break_moves: matches moved to break the equation, also the move budget (1..3: the
    searches grow about a hundredfold per move). enforce_min_distance: reject puzzles fixable in
    fewer moves. gen_retry_limit: generation tries before the fallback. image_width /
    image_height: output frame size (None: the native layout, 68 * max_symbols - 8 by 100).
    max_symbols: the longest equation a state holds and a frame shows (12..30; generated
    equations have at most 12 symbols).

    Bounds and their costs (per episode, this 2-core machine): gen_retry_limit 0..100,000 (a
    try costs ~3 us at break_moves 1 and ~25 us at 3 with enforce_min_distance, so the limit
    caps a reset at ~2.5 s per episode; generation takes 0.02 ms per episode on average at
    break_moves 1 and 0.3 ms at 3); image_width/image_height 8..4096 (resampling costs ~7 ns
    per output pixel: 0.12 s for a 4096x4096 frame, paid at every reset and at every step that
    changes the equation)."""

    break_moves: int = 1
    enforce_min_distance: bool = True
    gen_retry_limit: int = 300
    image_width: int | None = None
    image_height: int | None = None
    max_symbols: int = 12

    def __post_init__(self):
        checked = {
            "break_moves": integer("break_moves", self.break_moves, 1, 3),
            "enforce_min_distance": boolean("enforce_min_distance", self.enforce_min_distance),
            "gen_retry_limit": integer("gen_retry_limit", self.gen_retry_limit, 0, 100_000),
            "max_symbols": integer("max_symbols", self.max_symbols, 12, MAX_EQUATION_LEN),
            "image_width": optional_integer("image_width", self.image_width, 8, 4096),
            "image_height": optional_integer("image_height", self.image_height, 8, 4096),
        }
        for name, value in checked.items():
            object.__setattr__(self, name, value)


class MatchstickEquationState(NamedTuple):
    hist: np.ndarray     # int8[B, break_moves + 1, max_symbols]: hist[b, d] = equation after d
    #                      moves in effect (symbol codes, padding 15); hist[b, 0] is the puzzle
    depth: np.ndarray    # int32[B]: moves in effect (the reference's current_moves)
    length: np.ndarray   # int32[B]: number of symbols
    correct: np.ndarray  # bool[B]: the current equation hist[b, depth[b]] is correct
    dirty: np.ndarray    # int32[B, 2]: symbols whose glyph the last step changed (-1: none)


class _Blits(NamedTuple):
    """Render workspace: blit lists with room for a full redraw of every episode."""
    glyph_ids: np.ndarray  # int32[B * max_symbols]: glyph tile per entry
    label_ids: np.ndarray  # int32[...]: index-label tile per entry
    idx: np.ndarray        # int64[...]: frame per entry
    xs: np.ndarray         # int32[...]: left edge per entry
    top: np.ndarray        # int32[...]: 0 (glyph row)
    label_top: np.ndarray  # int32[...]: BOX_H (label row)
    all_rows: np.ndarray   # int64[B]: 0..B-1


def _glyph_tiles() -> np.ndarray:
    """uint8[16, 80, 68, 3]: each symbol's box plus the gap after it, strokes drawn with the
    reference's Pillow calls (so glyph pixels equal its raw canvas); tile 15 is blank."""
    tiles = np.empty((16, BOX_H, PITCH, 3), np.uint8)
    tiles[:] = BACKGROUND_RGB
    for g, segs in enumerate(GLYPH_SEGMENTS):
        img = Image.new("RGB", (PITCH, BOX_H), BACKGROUND_RGB)
        draw = ImageDraw.Draw(img)
        for s in sorted(segs):
            start, end = SEGMENT_STROKES[s]
            draw.line([start, end], fill=OUTLINE_RGB, width=8)
            draw.line([start, end], fill=BODY_RGB, width=6)
            draw.ellipse((start[0] - 6, start[1] - 6, start[0] + 6, start[1] + 6), fill=HEAD_RGB)
            draw.ellipse((end[0] - 4, end[1] - 4, end[0] + 4, end[1] + 4), fill=BODY_RGB)
        tiles[g] = np.asarray(img)
    return tiles


def _label_tiles(count: int) -> np.ndarray:
    """uint8[count, 20, 68, 3]: the index labels under the boxes, placed by the reference's rule
    (Pillow's text layout box centred horizontally in the box, top at (20 - its height) // 2 in
    the band), drawn as the reference drew them (render/labels.py's Pillow engine)."""
    tiles = np.empty((count, LABEL_H, PITCH, 3), np.uint8)
    tiles[:] = BACKGROUND_RGB
    for k in range(count):
        index = labels.label(str(k), LABEL_FONT_PX, engine="pillow")
        left, top, right, bottom = index.layout
        index.draw_at_pen(tiles, k, (BOX_W - (right - left)) // 2,
                          (LABEL_H - (bottom - top)) // 2, LABEL_RGB)
    return tiles


def _equation_text(row, n) -> str:
    return "".join(SYMBOLS[c] for c in row[:n].tolist())


_LEGEND_IMAGE = "\nYou see an image of the equation."
_LEGEND_TEXT = (
    "\nYou see an ASCII visualization in text for the equation. A single match could be "
    "represented by two or three characters depending on its orientation."
)
_PROMPT_HEAD = (
    "You see a broken matchstick equation.\n"
    "Your goal is to fix the equation by moving ONE match per action."
)
_PROMPT_BODY = (
    "\n\nSymbols are indexed 0..N-1 from left to right (N = number of symbols)."
    "\n\nAvailable actions:\n"
    "1. 'move': Remove one match from segment 'src_seg' of symbol at 'src_idx', then add it to "
    "segment 'dst_seg' of symbol at 'dst_idx'. Format: `('move', [src_idx, src_seg, dst_idx, "
    "dst_seg])` where:\n"
    "   \u2022 src_idx, dst_idx \u2208 [0, N\u22121], with src_idx \u2260 dst_idx\n"
    "   \u2022 src_seg, dst_seg \u2208 matchstick_puzzles.TOTAL (e.g., {0..12})\n"
    "   \u2022 The move must result in valid symbols at BOTH positions.\n"
    "2. 'undo': Revert the last move (if any). Format: `('undo', 'undo')`\n"
    "3. 'stop': Submit your current equation as final. Format: `('stop', 'stop')`"
    "\n\nSuccess: The submitted equation must be mathematically correct (evaluated as lhs == "
    "rhs)."
    "\n\nSegment legend (indices depend on symbol):\n"
    "  0..6 : 7-seg digits (a,b,c,d,e,f,g), 6 is also the horizontal stroke used by '+'\n"
    "  7    : plus vertical stroke (used by '+')\n"
    "  8    : the multiply sign that goes from top left to bottom right\n"
    "  9    : the multiply sign that goes from top right to bottom left\n"
    "  11,12: equals upper/lower bars (used by '=')\n"
    "A segment is valid for a symbol only if the resulting set of segments maps to a known glyph."
    "\n\nPlease respond with exactly one action and its arguments in the specified format. "
    "For example:\n"
    "- To move a match: `('move', [0, 6, 2, 0])`\n"
    "- To undo: `('undo', 'undo')`\n"
    "- To stop: `('stop', 'stop')`"
)


class MatchstickEquation(Family):
    name = "matchstick_equation"
    transient_fields = ("dirty",)   # redraw bookkeeping (state_hash)

    def live_counts(self, state) -> dict:
        # The equations of the moves in effect (undo pops back through them); deeper entries
        # are left over from moves already undone.
        return {"hist": state.depth + 1}
    Params = MatchstickEquationParams
    presets = {"easy": MatchstickEquationParams(break_moves=1),
               "hard": MatchstickEquationParams(break_moves=2)}
    grammar = Grammar([
        ActionSpec("move", TruncatedIntVector((MAX_EQUATION_LEN, N_SEGMENTS,
                                               MAX_EQUATION_LEN, N_SEGMENTS))),
        ActionSpec("undo", StopToken()),
        STOP,
    ])
    feedback_texts = ("Move budget exhausted. Please try to undo.", "Illegal move.",
                      "Nothing to undo.")
    has_text_mode = True
    solver_strategies = ("sos", "bfs", "dfs")

    def __init__(self, params: MatchstickEquationParams):
        super().__init__(params)
        self._move = self.grammar.index("move")
        self.glyph_tiles = _glyph_tiles()
        self.label_tiles = _label_tiles(params.max_symbols)
        self.native_shape = (FRAME_H, PITCH * params.max_symbols - GAP)
        self._scaled = params.image_width is not None or params.image_height is not None

    @property
    def frame_shape(self) -> tuple[int, int]:
        height, width = self.native_shape
        return (self.params.image_height or height, self.params.image_width or width)

    def new_state(self, batch: int) -> MatchstickEquationState:
        levels = self.params.break_moves + 1
        return MatchstickEquationState(
            hist=np.full((batch, levels, self.params.max_symbols), SYM_BLANK, np.int8),
            depth=np.zeros(batch, np.int32),
            length=np.ones(batch, np.int32),
            correct=np.zeros(batch, np.bool_),
            dirty=np.full((batch, 2), -1, np.int32),
        )

    # -- episodes -------------------------------------------------------------------------
    def reset_rows(self, state, rows, seeds) -> None:
        p = self.params
        seq.generate_puzzles(state.hist, state.depth, state.length, state.correct, state.dirty,
                             np.ascontiguousarray(rows, dtype=np.int64),
                             np.ascontiguousarray(seeds, dtype=np.uint64), p.break_moves,
                             bool(p.enforce_min_distance), p.gen_retry_limit, REMOVE_TO, ADD_TO)

    def _parse_equation(self, value, where: str) -> np.ndarray:
        if not isinstance(value, (list, tuple)):
            raise ValueError(f"{where}: expected a list of one-character symbols, got "
                             f"{type(value).__name__}")
        if not 1 <= len(value) <= self.params.max_symbols:
            raise ValueError(f"{where}: expected 1..{self.params.max_symbols} symbols, got "
                             f"{len(value)} (raise max_symbols, up to {MAX_EQUATION_LEN}, for "
                             "longer equations)")
        codes = np.empty(len(value), np.int8)
        for k, ch in enumerate(value):
            if not isinstance(ch, str) or len(ch) != 1 or ch not in SYMBOLS:
                raise ValueError(f"{where}[{k}]: expected one of the symbols {SYMBOLS!r}, "
                                 f"got {describe(ch)}")
            codes[k] = SYMBOLS.index(ch)
        return codes

    def load_rows(self, state, rows, init_states) -> None:
        levels = self.params.break_moves + 1

        def equation(field, value):
            return self._parse_equation(value, field)

        def history(field, value):
            if not isinstance(value, (list, tuple)) or not 1 <= len(value) <= levels:
                raise ValueError(f"{field}: expected a list of 1..{levels} equations (the "
                                 f"initial one plus one per move, at most break_moves = "
                                 f"{levels - 1} moves)")
            return [self._parse_equation(eq, f"{field}[{m}]") for m, eq in enumerate(value)]

        def moves_apart(parsed, where):
            broken, stack = parsed["broken"], parsed["history"]
            if stack is None:
                return {**parsed, "history": [broken]}
            if not np.array_equal(stack[0], broken):
                raise ValueError(f"{where}.history[0]: must equal broken (the initial equation)")
            for m in range(1, len(stack)):
                if stack[m].shape != broken.shape or not seq.one_move_apart(
                        stack[m - 1].astype(np.int64), stack[m].astype(np.int64),
                        broken.shape[0], REMOVE_TO, ADD_TO):
                    raise ValueError(f"{where}.history[{m}]: not one legal match move away "
                                     f"from history[{m - 1}]")
            return parsed

        schema = InitSchema({"broken": equation, "history": (history, None)}, moves_apart)
        staged = [init["history"] for init in schema.parse_all(init_states)]
        for b, stack in zip(np.asarray(rows).tolist(), staged):
            n = stack[0].shape[0]
            state.hist[b] = SYM_BLANK
            for d, eq in enumerate(stack):
                state.hist[b, d, :n] = eq
            state.depth[b] = len(stack) - 1
            state.length[b] = n
            state.dirty[b] = -1
        rows = np.ascontiguousarray(rows, dtype=np.int64)
        seq.correct_rows(state.hist, state.depth, state.length, rows, state.correct)

    def to_init_state(self, state, i: int) -> dict:
        n = int(state.length[i])
        depth = int(state.depth[i])
        out = {"broken": list(_equation_text(state.hist[i, 0], n))}
        if depth > 0:
            out["history"] = [list(_equation_text(state.hist[i, d], n))
                              for d in range(depth + 1)]
        return out

    def equation(self, state, i: int) -> str:
        """Episode i's current equation as a string (the reference's info["equation"])."""
        return _equation_text(state.hist[i, state.depth[i]], int(state.length[i]))

    def step_rows(self, state, actions, rows, reward, terminated, feedback) -> None:
        seq.step_equations(state.hist, state.depth, state.length, state.correct, state.dirty,
                           actions.kind, actions.ints, rows, self._move, self.params.break_moves,
                           REMOVE_TO, ADD_TO, BUDGET_CODE, ILLEGAL_CODE, NOTHING_CODE, feedback)

    def is_success(self, state) -> np.ndarray:
        return state.correct.copy()

    def potential(self, state, out) -> None:
        """Proxy, admissible: a lower bound on the actions (moves and undos, the stop not
        counted) that make the current equation correct, read from the move stack alone:
        0 when it is correct; 1 while moves are left in the budget; with the budget used up,
        1 if one undo gives back a correct equation, else 2 (an undo, then at least one move).
        Unit: actions. Exact under easy's one-move budget (every generated puzzle is fixed by
        one move, so it equals the bfs plan length minus its stop and falls by 1 per optimal
        action); under larger budgets it may undercount (a fresh hard puzzle needs 2, reads 1).
        The exact count is the bfs solver's search over moves and undos, which evaluates every
        successor equation (~300 ns each): ~2 ms for 256 hard episodes even to rule out a
        one-move fix, against ~0.1 ms for a whole step of 256."""
        seq.fix_lower_bounds(state.hist, state.depth, state.length, state.correct,
                             self.params.break_moves, out)

    def goal_state(self, state):
        rows = np.arange(state.depth.shape[0], dtype=np.int64)
        flat, offsets, _ = self._plans(state, rows, "bfs")
        seq.apply_plans(state.hist, state.depth, state.length, state.correct, state.dirty, rows,
                        flat, offsets, REMOVE_TO, ADD_TO)
        return state

    # -- pixels and text ------------------------------------------------------------------
    def new_workspace(self, batch: int) -> _Blits:
        size = batch * self.params.max_symbols
        return _Blits(np.empty(size, np.int32), np.empty(size, np.int32),
                      np.empty(size, np.int64), np.empty(size, np.int32),
                      np.zeros(size, np.int32), np.full(size, BOX_H, np.int32),
                      np.arange(batch, dtype=np.int64))

    def _draw(self, state, frames, rows, full: bool, work) -> None:
        """Blit glyph (and, when full, label) tiles of ``rows`` into native-size frames."""
        per_row = self.params.max_symbols if full else 2
        if work.glyph_ids.shape[0] < rows.shape[0] * per_row:
            work = self.new_workspace(rows.shape[0])
        glyph_ids, label_ids, idx, xs, top, label_top = work[:6]
        span = self.native_shape[1] + GAP
        m = seq.blit_lists(state.depth, state.length, state.hist, state.dirty, rows, full, span,
                           PITCH, glyph_ids, label_ids, idx, xs)
        if m == 0:
            return
        tile_render.blit_tiles(frames, idx[:m], self.glyph_tiles, glyph_ids[:m], xs[:m],
                               top[:m])
        if full:
            tile_render.blit_tiles(frames, idx[:m], self.label_tiles, label_ids[:m], xs[:m],
                                   label_top[:m])

    def _draw_full_native(self, state, frames, rows, work) -> None:
        raster.fill(frames, rows, np.array(BACKGROUND_RGB, np.uint8))
        self._draw(state, frames, rows, True, work)

    def render_rows(self, state, frames, rows, work) -> None:
        rows = np.ascontiguousarray(rows, dtype=np.int64)
        if rows.shape[0] == 0:
            return
        if not self._scaled:
            self._draw_full_native(state, frames, rows, work)
            return
        # Draw the native canvas of each row into a scratch batch, then resample it.
        native = np.empty((rows.shape[0], *self.native_shape, 3), np.uint8)
        local = np.arange(rows.shape[0], dtype=np.int64)
        sub = type(state)(*(a[rows] for a in state))
        self._draw_full_native(sub, native, local, work)
        out = np.empty((rows.shape[0], *frames.shape[1:]), np.uint8)
        resample.area(native, out)
        frames[rows] = out

    def render_after_step(self, state, frames, work) -> None:
        if not self._scaled:
            rows = work.all_rows
            if rows.shape[0] != frames.shape[0]:
                rows = np.arange(frames.shape[0], dtype=np.int64)
            self._draw(state, frames, rows, False, work)
            return
        changed = np.flatnonzero(state.dirty[:, 0] >= 0)
        if changed.size:
            self.render_rows(state, frames, changed, work)

    def render_text(self, state, i: int) -> str:
        n = int(state.length[i])
        row = state.hist[i, state.depth[i]]
        height, cell = 8, 5
        width = n * (cell + 1)
        canvas = [[" "] * width for _ in range(height)]
        for k in range(n):
            x0 = k * (cell + 1)
            for seg in GLYPH_SEGMENTS[int(row[k])]:
                for r, c, text in ASCII_STROKES[seg]:
                    for off, ch in enumerate(text):
                        canvas[r][x0 + c + off] = ch
            label = str(k)
            lx = x0 + (cell - len(label)) // 2
            for off, ch in enumerate(label):
                if lx + off < width:
                    canvas[6][lx + off] = ch
        return "\n".join("".join(line) for line in canvas)

    def prompt(self, state, i: int, text_mode: bool = False) -> str:
        return _PROMPT_HEAD + (_LEGEND_TEXT if text_mode else _LEGEND_IMAGE) + _PROMPT_BODY

    # -- solvers --------------------------------------------------------------------------
    def _plans(self, state, rows, strategy, max_moves=None, sos_seed=None, sos_max_len=None):
        if strategy not in STRATEGIES:
            raise ValueError(f"strategy: expected one of {tuple(STRATEGIES)}, got "
                             f"{describe(strategy)}")
        cap = -1 if max_moves is None else integer("max_moves", max_moves, 0, 3)
        use_seed = sos_seed is not None
        seed = np.uint64(0) if sos_seed is None else np.uint64(
            integer("sos_seed", sos_seed, 0, 2**64 - 1))
        max_len = -1 if sos_max_len is None else integer("sos_max_len", sos_max_len, 1)
        return seq.plan_rows(state.hist, state.depth, state.length,
                             np.ascontiguousarray(rows, dtype=np.int64), self.params.break_moves,
                             cap, STRATEGIES[strategy], use_seed, seed, max_len, REMOVE_TO,
                             ADD_TO)

    def solve_with(self, state, rows, strategy: str = "sos", *, max_moves: int | None = None,
                   sos_seed: int | None = None, sos_max_len: int | None = None) -> list[list[str]]:
        """The reference's solve() options: ``max_moves`` caps the search depth (default: the
        move budget left), ``sos_seed`` seeds the sos detours, ``sos_max_len`` bounds the sos
        plan length. Returns action strings per row, ending with a stop."""
        rows = np.ascontiguousarray(rows, dtype=np.int64)
        flat, offsets, _ = self._plans(state, rows, strategy, max_moves, sos_seed, sos_max_len)
        actions = []
        for op, i, s, j, t in flat.tolist():
            actions.append(UNDO_ACTION if op == seq.PLAN_UNDO
                           else f"('move', [{i}, {s}, {j}, {t}])")
        offsets = offsets.tolist()
        return [actions[offsets[k]:offsets[k + 1]] + [STOP_ACTION] for k in range(len(rows))]

    def solve(self, state, rows, strategy, num_steps, seeds) -> list[list[str]]:
        # num_steps is accepted and ignored, as in the reference; the plans depend only on the
        # state (see the module docstring), not on the seeds.
        return self.solve_with(state, rows, strategy or "sos")
