"""sliding_block: a 5x4 Klotski board of ten numbered blocks; slide blocks one cell at a time
until the current board (right) matches the target board (left) block id by block id, then stop.

Implements spec/envs/sliding_block.md: the classic start layout and the three-phase scramble that
makes the *target* (the agent always starts from the classic layout), the move/stop grammar with
the reference's validity rules and feedback wording, reward 1 on a stop with every block at its
target, the 290x420 two-board frame, the ansi text mode, the prompt, and the breadth-first solver
with (move, reverse) padding. Dynamics, generation and the solver are the batched Numba kernels of
kernels/blocks.py.

Frames are composed from an atlas of 50x50 cell tiles cut from ten block sprites (fill colour,
2-px black outline inside the block's box, centred id) plus the empty cell in each of its 256
looks (the reference's outline also blackens the pixel row just outside a block, visible where it
borders an empty cell), all drawn once per instance: a reset copies the title band and the 40
cells of both boards, and a step redraws only the cells of the block that moved (old and new,
at most six) and the two empty cells.

The ``move`` payload kind (``BlockMovePayload``) lives here rather than in core/grammar.py: it is
the reference's MultiDiscrete check plus a record of how the payload was spelled, which only this
family's feedback needs.

Deviations from the reference, on purpose:
- Reset shows the same RGB frame as step (quirk 1: the reference's reset returned the 5x4 board).
- Payloads: the reference checks ``move`` payloads with MultiDiscrete([11, 4]). Ints, bools and
  integral floats pass as there (``(10.0, 2)`` moves block 10, ``(True, 2)`` moves block 1) and a
  refused move echoes the id and direction as written (``the block True cannot move ...``).
  Fractional values are invalid payloads here ("not in the valid action space"): the reference
  moved a fractional direction *left*, or raised KeyError when that failed (quirk 2), and
  answered a fractional block id with "cannot move". Payloads that made the reference raise
  (strings such as ``('a', 'b')``, ragged ``((1, 2), 0)``) and complex numbers are invalid
  payloads too.
- Init states: ids may be ints or the strings "1".."10" and positions/sizes tuples or lists, so
  JSON-stored states load (quirk 3: after a JSON round trip every move of the reference failed).
  ``state_dicts()`` writes string ids and lists, the JSON form, which reloads identically. The
  live board is rebuilt from ``current_blocks`` (quirk 4: the reference rebuilt it from
  ``original_blocks``; the two are equal in every state the reference records right after a reset).
  Mid-episode, ``state_dicts()`` also holds ``moves`` (the reference's move counter, which its
  init states lack), so a reloaded episode continues with every state array equal.
- The solver keeps the whole last (move, reverse) pair when padding an already solved episode to
  an odd ``num_steps`` (quirk 5: the reference cut the reverse off and the plan failed). Its
  padding draws from a stream of the episode's own seed, so solving never changes later episodes.
  The search gives up (plan = stop alone, as the reference's "no solution") after 4,000,000
  layouts (about 7 s), which only hand-made targets very far from (or unreachable from) the
  current layout need; 1,024 generated hard episodes solve in under 2 s together.
- Generation: where the reference's key-block phase would loop forever on a board with no legal
  move, the phase ends (never observed; the spec asks for the guard).
- Digits and titles are drawn with the bundled scalable font (glyph atlas), not OpenCV's Hershey
  font: same positions (ink centred in the block, titles centred on baseline y = 29) and colours,
  different glyph shapes. Block fills, outlines, empty cells and layout match pixel for pixel.
- Targets are scrambled from our own per-episode random stream, so ``seed=k`` gives a different
  (equally distributed) target than the reference's ``reset(seed=k)``; recorded episodes are
  replayed from their init states.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numba import njit

from ..core.family import FAMILY_BASE, Family
from ..core.grammar import STOP, STOP_ACTION, ActionSpec, Grammar
from ..core.validate import (InitSchema, boolean, check_with, describe, integer, integers,
                             is_integer, mapping)
from ..kernels.blocks import (DIR_DCOL, DIR_DROW, PLAN_TOO_LONG, fill_board, layout_distances,
                              scramble_layouts, solve_layouts, step_slides)
from ..render import labels
from ..render import tiles as tile_render

ROWS, COLS = 5, 4
N_BLOCKS = 10
# Per block id 1..10: size (rows, cols), colour name, classic position (row, col).
BLOCK_SIZE = np.array([(2, 2), (1, 2), (2, 1), (2, 1), (2, 1), (2, 1), (1, 1), (1, 1), (1, 1),
                       (1, 1)], dtype=np.int64)
BLOCK_COLOR = ("red", "green", "blue", "blue", "blue", "blue", "yellow", "yellow", "yellow",
               "yellow")
CLASSIC_POS = np.array([(0, 1), (2, 1), (0, 0), (0, 3), (2, 0), (2, 3), (4, 0), (4, 3), (3, 1),
                        (3, 2)], dtype=np.int64)
KEY_BLOCK = 0  # block 1, the red "target" block the scramble pushes first
COLOR_RGB = {"red": (255, 0, 0), "green": (0, 255, 0), "blue": (0, 0, 255),
             "yellow": (255, 255, 0)}
DIR_NAMES = ("up", "right", "down", "left")
CELL_BITS = 5      # a cell index 0..19 per block in the solver's packed layouts
MAX_SEARCH_STATES = 4_000_000

# Frame layout (spec 7): a 40-px title band over two 200x250 boards 20 px apart.
CELL_PX = 50
TITLE_PX = 40
GAP_PX = 20
BOARD_W = COLS * CELL_PX
BOARD_H = ROWS * CELL_PX
FRAME_H = TITLE_PX + BOARD_H
FRAME_W = 2 * BOARD_W + GAP_PX
TARGET_X0 = 0
CURRENT_X0 = BOARD_W + GAP_PX
# The bundled font at these sizes, drawn 1 px bolder, matches the extent and stroke weight of
# the reference's Hershey text (scale 0.8, thickness 2): digits ~19 px tall, titles ~160 px wide.
DIGIT_FONT_PX = 26
TITLE_FONT_PX = 28
TITLE_BASELINE_Y = 29   # (40 + 18) // 2 in the reference
WHITE = (255, 255, 255)
BLACK = (0, 0, 0)
OUTLINE_PX = 2
MAX_DIRTY_CELLS = 2 * 3 + 2  # a moved 2x2 block's old and new cells, plus the two empty cells

# --------------------------------------------------------------------------- payload spellings
# A refused move echoes the payload as Python prints it, so the payload kind below records how
# the id and direction were written; each (container, id spelling, direction spelling) has its
# own fixed message. Spellings: ints 0..n-1, True, False, integral floats 0.0..(n-1).0, -0.0.


def _spellings(n: int) -> list[tuple[int, str]]:
    return ([(k, str(k)) for k in range(n)] + [(1, "True"), (0, "False")]
            + [(k, f"{k}.0") for k in range(n)] + [(0, "-0.0")])


ID_SPELLINGS = _spellings(N_BLOCKS + 1)
DIR_SPELLINGS = _spellings(4)


def _spell(x, n: int):
    """(value, spelling index) of one payload entry accepted as an integer in [0, n), or None."""
    kind = type(x)
    if kind is bool:
        return (1, n) if x else (0, n + 1)
    if kind is int:
        return (x, x) if 0 <= x < n else None
    if kind is float:
        if not (math.isfinite(x) and 0 <= x < n and x.is_integer()):
            return None
        value = int(x)
        if value == 0 and math.copysign(1.0, x) < 0:
            return 0, 2 * n + 2
        return value, n + 2 + value
    return None


@dataclass(frozen=True)
class BlockMovePayload:
    """``(block_id, direction)`` as a 2-tuple or 2-list, as the reference's MultiDiscrete([11, 4])
    accepts it: each entry an int, a bool or an integral float, 0 <= block_id < 11 and
    0 <= direction < 4. Fills ints[0] = block id, ints[1] = direction, ints[2] = the index of the
    payload's spelling (container, id, direction), which selects the echoing feedback text.
    Fractional, complex, string and nested entries are refused."""

    n_ids: int = N_BLOCKS + 1
    n_dirs: int = 4
    width = 3

    def convert(self, payload, ints, floats) -> bool:
        container = type(payload)
        if container not in (tuple, list) or len(payload) != 2:
            return False
        block = _spell(payload[0], self.n_ids)
        direction = _spell(payload[1], self.n_dirs)
        if block is None or direction is None:
            return False
        ints[0] = block[0]
        ints[1] = direction[0]
        ints[2] = (((container is list) * len(ID_SPELLINGS) + block[1]) * len(DIR_SPELLINGS)
                   + direction[1])
        return True

    def sample(self, rng) -> tuple:
        return int(rng.integers(self.n_ids)), int(rng.integers(self.n_dirs))


def _refusal_texts() -> tuple[str, ...]:
    texts = []
    for opening, closing in (("(", ")"), ("[", "]")):
        for _, id_text in ID_SPELLINGS:
            for direction, dir_text in DIR_SPELLINGS:
                texts.append(f"The action {opening}{id_text}, {dir_text}{closing} is not valid "
                             f"because the block {id_text} cannot move in the direction "
                             f"{DIR_NAMES[direction]}.")
    return tuple(texts)


REFUSED_BASE = FAMILY_BASE  # + the payload's spelling index


# --------------------------------------------------------------------------- params and state
MAX_SHUFFLE_MOVES = 10_000


@dataclass(frozen=True)
class SlidingBlockParams:
    """num_shuffle_moves: size N of the scramble that makes the target (0: target = start),
    0..10,000. A scramble costs ~0.14 us per move (1.4 ms per episode at 10,000); the solver
    is what grows: targets of up to ~1,000 moves solve in ~10 ms, while by 10,000 moves the
    target is a random layout whose search takes 2-5.5 s per episode and may give up at its cap
    (4,000,000 layouts: the plan is then a bare stop). Longer scrambles would only cost reset
    time (0.14 s per episode at 1,000,000) for the same distribution of targets."""

    num_shuffle_moves: int = 0

    def __post_init__(self):
        object.__setattr__(self, "num_shuffle_moves", integer(
            "num_shuffle_moves", self.num_shuffle_moves, 0, MAX_SHUFFLE_MOVES))


class SlidingBlockState(NamedTuple):
    pos: np.ndarray           # int8[B, 10, 2] top-left (row, col) of each block, block k = id k+1
    target_pos: np.ndarray    # int8[B, 10, 2] the goal layout
    original_pos: np.ndarray  # int8[B, 10, 2] the start layout (classic unless loaded otherwise)
    board: np.ndarray         # int8[B, 5, 4] block ids of the current layout, 0 = empty
    moves: np.ndarray         # int32[B] successful moves this episode
    last_block: np.ndarray    # int8[B] id moved by the last step (0 = none), for redrawing
    last_dir: np.ndarray      # int8[B] its direction


# --------------------------------------------------------------------------- frame composition
@njit(cache=True, nogil=True)
def _occupied(board, r, c):
    return 0 <= r < board.shape[0] and 0 <= c < board.shape[1] and board[r, c] != 0


@njit(cache=True, nogil=True)
def _cell_tile(board, pos, size, tile_base, r, c):
    """Tile of cell (r, c): a block's own cell, or the empty tile showing the 1-px outline spill
    of its neighbours (bits 0-3: block above, right, below, left; bits 4-7: a block at any of the
    three cells toward the top-left, top-right, bottom-right, bottom-left corner)."""
    v = board[r, c]
    if v != 0:
        k = v - 1
        return tile_base[k] + (r - pos[k, 0]) * size[k, 1] + (c - pos[k, 1])
    up = _occupied(board, r - 1, c)
    right = _occupied(board, r, c + 1)
    down = _occupied(board, r + 1, c)
    left = _occupied(board, r, c - 1)
    mask = up | (right << 1) | (down << 2) | (left << 3)
    mask |= (up or left or _occupied(board, r - 1, c - 1)) << 4
    mask |= (up or right or _occupied(board, r - 1, c + 1)) << 5
    mask |= (down or right or _occupied(board, r + 1, c + 1)) << 6
    mask |= (down or left or _occupied(board, r + 1, c - 1)) << 7
    return mask


@njit(cache=True, nogil=True)
def _board_cells(board, pos, target_pos, size, tile_base, rows, ids, xs, ys):
    """Tile id and pixel position of all 40 cells (target board, then current) of each row."""
    target_board = np.zeros(board.shape[1:], np.int64)
    n = 0
    for i in range(rows.shape[0]):
        b = rows[i]
        fill_board(target_pos[b], size, target_board)
        for r in range(board.shape[1]):
            for c in range(board.shape[2]):
                ids[n] = _cell_tile(target_board, target_pos[b], size, tile_base, r, c)
                xs[n] = TARGET_X0 + c * CELL_PX
                ys[n] = TITLE_PX + r * CELL_PX
                ids[n + 1] = _cell_tile(board[b], pos[b], size, tile_base, r, c)
                xs[n + 1] = CURRENT_X0 + c * CELL_PX
                ys[n + 1] = TITLE_PX + r * CELL_PX
                n += 2


@njit(cache=True, nogil=True)
def _moved_cells(board, pos, size, tile_base, last_block, last_dir, idx, ids, xs, ys):
    """The cells of the current board that the last step changed: the union of the moved
    block's old and new footprints (at most 3x2 cells) and every empty cell outside it, whose
    outline spill may have changed. Returns their number."""
    n = 0
    for b in range(board.shape[0]):
        if last_block[b] == 0:
            continue
        k = last_block[b] - 1
        d = last_dir[b]
        r_new = pos[b, k, 0]
        c_new = pos[b, k, 1]
        r_old = r_new - DIR_DROW[d]
        c_old = c_new - DIR_DCOL[d]
        r0 = min(r_new, r_old)
        c0 = min(c_new, c_old)
        r1 = max(r_new, r_old) + size[k, 0]
        c1 = max(c_new, c_old) + size[k, 1]
        for r in range(board.shape[1]):
            for c in range(board.shape[2]):
                if (r0 <= r < r1 and c0 <= c < c1) or board[b, r, c] == 0:
                    idx[n] = b
                    ids[n] = _cell_tile(board[b], pos[b], size, tile_base, r, c)
                    xs[n] = CURRENT_X0 + c * CELL_PX
                    ys[n] = TITLE_PX + r * CELL_PX
                    n += 1
    return n


def _block_sprite(k: int, font_px: int) -> np.ndarray:
    """Block id k+1 as drawn on a board: fill, 2-px outline inside its box, centred id (bold:
    the glyphs at the four offsets of a 2x2 square, render/labels.py)."""
    h, w = (int(v) * CELL_PX for v in BLOCK_SIZE[k])
    sprite = np.empty((1, h, w, 3), np.uint8)
    sprite[:] = COLOR_RGB[BLOCK_COLOR[k]]
    sprite[0, :OUTLINE_PX] = BLACK
    sprite[0, h - OUTLINE_PX:] = BLACK
    sprite[0, :, :OUTLINE_PX] = BLACK
    sprite[0, :, w - OUTLINE_PX:] = BLACK
    digits = labels.label(str(k + 1), font_px, bold=True)
    digits.draw(sprite, 0, labels.centred(0, w, digits.width),
                labels.centred(0, h, digits.height), BLACK)
    return sprite[0]


def _empty_tile(mask: int) -> np.ndarray:
    """An empty cell with the neighbours' outline spill of ``mask`` (see ``_cell_tile``): the
    reference's 2-px outline is a thickness-2 OpenCV rectangle through the block's first and
    last pixel rows/columns, so it also blackens the pixel row/column just outside the block,
    which shows where that falls on an empty cell."""
    tile = np.full((CELL_PX, CELL_PX, 3), 255, np.uint8)
    last = CELL_PX - 1
    for bit, (rows, cols) in enumerate(((0, slice(None)), (slice(None), last), (last, slice(None)),
                                        (slice(None), 0), (0, 0), (0, last), (last, last),
                                        (last, 0))):
        if mask >> bit & 1:
            tile[rows, cols] = BLACK
    return tile


def _tile_atlas(font_px: int) -> tuple[np.ndarray, np.ndarray]:
    """50x50 tiles: 0..255 the empty cell for each neighbour mask, then each block's cells row
    by row; and tile_base[k], the first tile of block k."""
    tiles = [_empty_tile(mask) for mask in range(256)]
    tile_base = np.zeros(N_BLOCKS, np.int64)
    for k in range(N_BLOCKS):
        sprite = _block_sprite(k, font_px)
        tile_base[k] = len(tiles)
        for i in range(int(BLOCK_SIZE[k, 0])):
            for j in range(int(BLOCK_SIZE[k, 1])):
                tiles.append(sprite[i * CELL_PX:(i + 1) * CELL_PX, j * CELL_PX:(j + 1) * CELL_PX])
    return np.ascontiguousarray(np.stack(tiles)), tile_base


def _title_band(font_px: int) -> np.ndarray:
    """The constant top of every frame: white, with both titles (bold) centred over their
    boards, their baseline at TITLE_BASELINE_Y."""
    band = np.full((1, TITLE_PX, FRAME_W, 3), 255, np.uint8)
    for text_, board_x0 in (("target board", TARGET_X0), ("current board", CURRENT_X0)):
        title = labels.label(text_, font_px, bold=True)
        _, top = title.place("ls", 0, TITLE_BASELINE_Y)
        title.draw(band, 0, labels.centred(board_x0, board_x0 + BOARD_W, title.width), top,
                   BLACK)
    return band


# --------------------------------------------------------------------------- prompt
_PROMPT_HEAD = (
    "You are solving a 5x4 sliding block puzzle (Klotski). The puzzle consists of rectangular "
    "blocks that can be moved in four directions. Your goal is to rearrange the blocks to match "
    "the target configuration."
)
_IMAGE_LEGEND = (
    "\nYou see two boards side-by-side:\n"
    "- Left: the target configuration\n"
    "- Right: the current configuration that you need to rearrange\n"
)
_TEXT_LEGEND = (
    "\nYou are given a text-based representation of the puzzle. You see two boards side-by-side:\n"
    "- Left: the target configuration\n"
    "- Right: the current configuration that you need to rearrange\n"
    "Each number on the board represents a block, and '.' represents an empty space."
)
_PROMPT_BODY = (
    "\n\nAvailable actions:\n"
    "1. 'move': Move a block in one of four directions. Format: `('move', (block_id, direction))` "
    "where:\n"
    "   - block_id is the number of the block to move (1-10)\n"
    "   - direction is 0=up, 1=right, 2=down, 3=left\n"
    "2. 'stop': End the puzzle solving session. Format: `('stop', 'stop')`\n\n"
    "Success: You succeed if all blocks are in their target positions when you stop.\n\n"
    "Please respond with exactly one action and its arguments in the specified format. "
    "For example:\n"
    "- To move block 1 up: `('move', (1, 0))`\n"
    "- To move block 2 right: `('move', (2, 1))`\n"
    "- To move block 3 down: `('move', (3, 2))`\n"
    "- To move block 4 left: `('move', (4, 3))`\n"
    "- To stop: `('stop', 'stop')`"
)

MOVE_ACTIONS = tuple(f"('move', ({k + 1}, {d}))" for k in range(N_BLOCKS) for d in range(4))
BLOCK_FIELDS = ("original_blocks", "target_blocks", "current_blocks")


# --------------------------------------------------------------------------- init states
def _block_key(key, where: str) -> int:
    """A block id from an init-state key: the int 1..10 or its JSON string form "1".."10"."""
    if is_integer(key):
        value = key
    elif isinstance(key, str) and key.isascii() and key.isdigit() and len(key) <= 2:
        value = int(key)
    else:
        raise ValueError(f"{where}: block ids must be 1..{N_BLOCKS} (ints or their strings), "
                         f"got {describe(key)}")
    if not 1 <= value <= N_BLOCKS:
        raise ValueError(f"{where}: block ids must be 1..{N_BLOCKS}, got {describe(key)}")
    return int(value)


def _parse_layout(blocks, where: str) -> np.ndarray:
    """Positions (10, 2) from a reference blocks dict, checked against the fixed block set and
    for a legal layout (on the board, no overlaps)."""
    mapping(where, blocks)
    pos = np.full((N_BLOCKS, 2), -1, np.int64)
    for key, block in blocks.items():
        bid = _block_key(key, where)
        field = f"{where}.{bid}"
        if pos[bid - 1, 0] >= 0:
            raise ValueError(f"{field}: block {bid} is listed twice")
        mapping(field, block, ("size", "position"))
        want = [int(v) for v in BLOCK_SIZE[bid - 1]]
        if list(integers(f"{field}.size", block["size"], 2)) != want:
            raise ValueError(f"{field}.size: block {bid} is {want}, got {describe(block['size'])}")
        color = block.get("color", BLOCK_COLOR[bid - 1])
        if not isinstance(color, str) or color != BLOCK_COLOR[bid - 1]:
            raise ValueError(f"{field}.color: block {bid} is {BLOCK_COLOR[bid - 1]!r}, "
                             f"got {describe(color)}")
        if "is_target" in block and boolean(f"{field}.is_target", block["is_target"]) != (
                bid == 1):
            raise ValueError(f"{field}.is_target: must be {bid == 1}, got {block['is_target']}")
        r, c = integers(f"{field}.position", block["position"], 2)
        h, w = BLOCK_SIZE[bid - 1]
        if not (0 <= r <= ROWS - h and 0 <= c <= COLS - w):
            raise ValueError(f"{field}.position: a {h}x{w} block at {describe([r, c])} "
                             f"leaves the {ROWS}x{COLS} board")
        pos[bid - 1] = (r, c)
    missing = [k + 1 for k in range(N_BLOCKS) if pos[k, 0] < 0]
    if missing:
        raise ValueError(f"{where}.{missing[0]}: missing (blocks 1..{N_BLOCKS} are all required)")
    board = np.zeros((ROWS, COLS), np.int64)
    for k in range(N_BLOCKS):
        (r, c), (h, w) = pos[k], BLOCK_SIZE[k]
        cells = board[r:r + h, c:c + w]
        if cells.any():
            raise ValueError(f"{where}: blocks {int(cells.max())} and {k + 1} overlap")
        cells[:] = k + 1
    return pos


def _layout_dict(pos) -> dict:
    return {
        str(k + 1): {
            "size": [int(v) for v in BLOCK_SIZE[k]],
            "color": BLOCK_COLOR[k],
            "is_target": k == KEY_BLOCK,
            "position": [int(pos[k, 0]), int(pos[k, 1])],
        }
        for k in range(N_BLOCKS)
    }


# --------------------------------------------------------------------------- the family
class SlidingBlock(Family):
    name = "sliding_block"
    transient_fields = ("last_block", "last_dir")   # redraw bookkeeping (state_hash)
    Params = SlidingBlockParams
    presets = {"easy": SlidingBlockParams(30), "hard": SlidingBlockParams(90)}
    grammar = Grammar([
        ActionSpec("move", BlockMovePayload()),
        STOP,
    ])
    feedback_texts = _refusal_texts()
    has_text_mode = True
    solver_strategies = ("bfs",)
    version = 2   # 2: mid-episode state dicts carry the move counter

    def __init__(self, params: SlidingBlockParams):
        super().__init__(params)
        self.tiles, self.tile_base = _tile_atlas(DIGIT_FONT_PX)
        self.title_band = _title_band(TITLE_FONT_PX)
        self.gap = np.full((1, BOARD_H, GAP_PX, 3), 255, np.uint8)
        n = params.num_shuffle_moves
        self._phases = (n // 3, (2 * n) // 3, n // 6)
        self.classic_board = np.zeros((ROWS, COLS), np.int8)
        fill_board(CLASSIC_POS, BLOCK_SIZE, self.classic_board)

    def new_workspace(self, batch: int):
        # The cells a step redraws (frame, tile, x, y), at most MAX_DIRTY_CELLS per episode.
        cap = MAX_DIRTY_CELLS * batch
        return (np.empty(cap, np.int64), np.empty(cap, np.int32), np.empty(cap, np.int32),
                np.empty(cap, np.int32))

    @property
    def frame_shape(self) -> tuple[int, int]:
        return FRAME_H, FRAME_W

    def new_state(self, batch: int) -> SlidingBlockState:
        classic = np.broadcast_to(CLASSIC_POS.astype(np.int8), (batch, N_BLOCKS, 2))
        board = np.zeros((ROWS, COLS), np.int8)
        fill_board(CLASSIC_POS, BLOCK_SIZE, board)
        return SlidingBlockState(
            pos=classic.copy(),
            target_pos=classic.copy(),
            original_pos=classic.copy(),
            board=np.broadcast_to(board, (batch, ROWS, COLS)).copy(),
            moves=np.zeros(batch, np.int32),
            last_block=np.zeros(batch, np.int8),
            last_dir=np.zeros(batch, np.int8),
        )

    # -- episodes -------------------------------------------------------------------------
    def reset_rows(self, state, rows, seeds) -> None:
        rows = np.ascontiguousarray(rows, dtype=np.int64)
        seeds = np.ascontiguousarray(seeds, dtype=np.uint64)
        n_key, n_walk, n_spread = self._phases
        scramble_layouts(CLASSIC_POS, BLOCK_SIZE, ROWS, COLS, KEY_BLOCK, n_key, n_walk, n_spread,
                         rows, seeds, state.target_pos)
        self._start_rows(state, rows)

    def _start_rows(self, state, rows) -> None:
        """Rows begin at the classic layout (the reference puts the blocks back after the
        scramble; the scramble produced only the target)."""
        state.pos[rows] = CLASSIC_POS
        state.original_pos[rows] = CLASSIC_POS
        state.board[rows] = self.classic_board
        state.moves[rows] = 0
        state.last_block[rows] = 0
        state.last_dir[rows] = 0

    def load_rows(self, state, rows, init_states) -> None:
        layout = (lambda field, value: _parse_layout(value, field))
        # Our own extra field (the reference's init states have none): moves made so far.
        schema = InitSchema({**{key: layout for key in BLOCK_FIELDS},
                             "moves": (check_with(integer, 0, 2**31 - 1), 0)})
        for b, parsed in zip(rows, schema.parse_all(init_states)):
            state.original_pos[b] = parsed["original_blocks"]
            state.target_pos[b] = parsed["target_blocks"]
            state.pos[b] = parsed["current_blocks"]
            fill_board(parsed["current_blocks"], BLOCK_SIZE, state.board[b])
            state.moves[b] = parsed["moves"]
            state.last_block[b] = 0
            state.last_dir[b] = 0

    def to_init_state(self, state, i: int) -> dict:
        out = {
            "original_blocks": _layout_dict(state.original_pos[i]),
            "target_blocks": _layout_dict(state.target_pos[i]),
            "current_blocks": _layout_dict(state.pos[i]),
        }
        if state.moves[i]:
            # Mid-episode only, so a fresh episode's dict is exactly the reference's.
            out["moves"] = int(state.moves[i])
        return out

    def step_rows(self, state, actions, rows, reward, terminated, feedback) -> None:
        step_slides(state.board, state.pos, BLOCK_SIZE, state.moves, state.last_block,
                    state.last_dir, actions.ints, rows, REFUSED_BASE, feedback)

    def is_success(self, state) -> np.ndarray:
        return (state.pos == state.target_pos).all(axis=(1, 2))

    def potential(self, state, out) -> None:
        """Proxy, admissible: the sum over the ten blocks of the Manhattan distance (in cells)
        from each block's current top-left cell to its target one. Unit: moves (one block, one
        cell), a lower bound on the fewest moves left, since a move changes the sum by exactly
        1. 0 exactly when every block is at its target (success). Not the exact remaining
        count: that is the bfs solver's breadth-first search over layouts, about 2 ms per hard
        episode (~0.5 s for 256), against ~0.1 ms for a whole step of 256 episodes."""
        layout_distances(state.pos, state.target_pos, out)

    def goal_state(self, state):
        state.pos[:] = state.target_pos
        for b in range(state.pos.shape[0]):
            fill_board(state.pos[b], BLOCK_SIZE, state.board[b])
        state.last_block[:] = 0
        return state

    # -- pixels and text ------------------------------------------------------------------
    def render_rows(self, state, frames, rows, work) -> None:
        rows = np.ascontiguousarray(rows, dtype=np.int64)
        count = rows.shape[0]
        if count == 0:
            return
        zeros = np.zeros(count, np.int32)
        tile_render.blit_tiles(frames, rows, self.title_band, zeros, zeros, zeros)
        tile_render.blit_tiles(frames, rows, self.gap, zeros, np.full(count, BOARD_W, np.int32),
                               np.full(count, TITLE_PX, np.int32))
        cells = 2 * ROWS * COLS
        ids = np.empty(count * cells, np.int32)
        xs = np.empty(count * cells, np.int32)
        ys = np.empty(count * cells, np.int32)
        _board_cells(state.board, state.pos, state.target_pos, BLOCK_SIZE, self.tile_base, rows,
                     ids, xs, ys)
        tile_render.blit_tiles(frames, np.repeat(rows, cells), self.tiles, ids, xs, ys)

    def render_after_step(self, state, frames, work) -> None:
        if work[0].shape[0] < MAX_DIRTY_CELLS * frames.shape[0]:
            work = self.new_workspace(frames.shape[0])
        idx, ids, xs, ys = work
        n = _moved_cells(state.board, state.pos, BLOCK_SIZE, self.tile_base, state.last_block,
                         state.last_dir, idx, ids, xs, ys)
        if n:
            tile_render.blit_tiles(frames, idx[:n], self.tiles, ids[:n], xs[:n], ys[:n])

    def render_text(self, state, i: int) -> str:
        def lines(pos):
            board = np.zeros((ROWS, COLS), np.int64)
            fill_board(np.asarray(pos, np.int64), BLOCK_SIZE, board)
            return ["".join("." if v == 0 else str(v % 10) for v in row) for row in board.tolist()]

        target, current = lines(state.target_pos[i]), lines(state.pos[i])
        header = "Target".center(COLS) + "   " + "Current".center(COLS)
        body = [f"{t} | {c}" for t, c in zip(target, current)]
        return "\n".join([header, "-" * (2 * COLS + 3)] + body)

    def prompt(self, state, i: int, text_mode: bool = False) -> str:
        return _PROMPT_HEAD + (_TEXT_LEGEND if text_mode else _IMAGE_LEGEND) + _PROMPT_BODY

    # -- solver ---------------------------------------------------------------------------
    def solve(self, state, rows, strategy, num_steps, seeds) -> list[list[str]]:
        rows = np.ascontiguousarray(rows, dtype=np.int64)
        seeds = np.ascontiguousarray(seeds, dtype=np.uint64)[rows]
        steps = int(num_steps or 0)
        capacity = 256 + steps + 2
        plans = np.zeros((rows.shape[0], capacity), np.int64)
        plan_len = np.zeros(rows.shape[0], np.int64)
        solve_layouts(state.pos, state.target_pos, BLOCK_SIZE, ROWS, COLS, CELL_BITS,
                      MAX_SEARCH_STATES, rows, seeds, steps, plans, plan_len)
        out = [None] * rows.shape[0]
        redo = np.flatnonzero(plan_len == PLAN_TOO_LONG)
        while redo.size:
            # Rare long plans: search those rows again with a buffer four times larger.
            capacity *= 4
            big = np.zeros((redo.size, capacity), np.int64)
            big_len = np.zeros(redo.size, np.int64)
            solve_layouts(state.pos, state.target_pos, BLOCK_SIZE, ROWS, COLS, CELL_BITS,
                          MAX_SEARCH_STATES, rows[redo], seeds[redo], steps, big, big_len)
            for j, k in enumerate(redo.tolist()):
                if big_len[j] != PLAN_TOO_LONG:
                    out[k] = self._plan(big[j], int(big_len[j]))
            redo = redo[big_len == PLAN_TOO_LONG]
            if capacity > 1 << 24:  # pragma: no cover - far beyond any reachable layout graph
                break
        for k in range(rows.shape[0]):
            if out[k] is None:
                out[k] = self._plan(plans[k], int(plan_len[k]))
        return out

    @staticmethod
    def _plan(moves, length: int) -> list[str]:
        return [MOVE_ACTIONS[m] for m in moves[:max(length, 0)].tolist()] + [STOP_ACTION]
