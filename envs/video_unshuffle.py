"""video_unshuffle: N frames of a short clip shown side by side in a shuffled order with the
clip's caption; swap or reorder them into chronological order, then stop.

Implements spec/envs/video_unshuffle.md: the clip table (the reference's Something-Something v2
layout, or the built-in procedural clips, envs/assets/clips.py), frame choice by the "uniform",
"salient" or "distinct" strategy, a uniform shuffle of the N frame ids, the swap (two 1-based
slots, tuple or list) / reorder (a list: new[k] = old[L[k] - 1]) / stop grammar with the
reference's own payload messages ("Swap payload ... is invalid. It must contain two distinct
1-based indices between 1 and N." -- although equal indices are accepted, as there), reward 1
on a stop when slot k shows frame k, the 224 x 224 N frame with each slot's 1-based number at
its bottom-right on a 60 % black box, the prompt, and the swap / reorder solvers.

Presets (DESIGN "Presets"): ``easy``/``hard`` are the evaluation harness's configuration,
``sampling_strategy="salient", min_frame_diff=0.15, max_frames_to_analyze=100`` with 4 / 5
frames, because that is what the benchmark reports. The reference constructor's defaults
(``"distinct"``, 0.1, 10000) are one keyword away:
``make("video_unshuffle/easy", sampling_strategy="distinct", min_frame_diff=0.1,
max_frames_to_analyze=10000)``.

An episode seeded s on a folder is the reference's ``reset(seed=s)`` on an env constructed with
``seed=s`` (how the parity recordings were made): the clips sorted by id and shuffled by
RandomState(s) are tried in that order (the first that gives N frames is used; the reference's
100 attempts), and the display order is RandomState(s)'s shuffle of [1..N]. Seeds >= 2**32
seed the RandomState with their two 32-bit halves.

State: ``clip`` (index into the family's clip table), ``positions`` (frame indices in the clip,
ascending), ``order`` (frame id shown in each slot, 1-based) and ``start_order`` (the order at
reset or load); pixels do not live in the State (DESIGN "Assets and real data"). The frames of
an episode are a pure function of (clip, positions): the family keeps them, read-only, in a
store keyed by that pair (a ``core.cache.BoundedCache`` of ``FRAME_STORE_BYTES``, shared by its
BatchEnvs and threads; a reset stores the frames it chose, a load the frames it read, and a
frame set the store has dropped is decoded again). Each BatchEnv copies its episodes' frames into
its workspace (``VideoWorkspace.tiles``, uint8 (B, N, 224, 224, 3): counted per episode by
``Family.row_bytes``) when a row shows a new (clip, positions), i.e. once per reset or load; a
step redraws only the slots whose frame changed (the label boxes: kernels/video_unshuffle.py;
the swap / reorder gathers and the solved test: kernels/slot_orders.py, shared with
zoom_in_puzzle).

Deviations from the reference, on purpose:
- Clip source: ``root_dir``, else ``$VIS_GYM_VIDEO_DIR``, else ``partial_datasets/ssv2`` under the
  working directory, else the built-in procedural clips (the reference had no offline fallback).
  The clip is a function of the episode seed, never "the next clip" of a stateful walk.
- An unreadable clip (empty, truncated, undecodable, too large) raises an error naming the file
  instead of being skipped (the reference skipped up to 100 clips silently); a readable clip
  that cannot give N frames is still skipped, as there.
- Bug fixed: uniform sampling's top-up after de-duplication drew from NumPy's unseeded global
  RNG; here it draws from a RandomState seeded by the episode seed (a separate stream, so the
  display order stays the reference's).
- Bug fixed (crashes): swap values must be ints (bools count, as in the reference); floats, even
  whole ones, are invalid payloads with the swap message, where the reference raised TypeError.
  A reorder must be a list; a tuple or a string is an invalid payload (AttributeError there).
- Bug fixed: ``correct_order`` (``correct_order(state, i)``) is the inverse of the order at the
  start of the episode after a plain reset and after an init-state load alike (the reference gave
  the identity after a load).
- Labels: the digits are drawn with the bundled font (render/labels.py, bold) instead of
  OpenCV's Hershey Simplex; the box has the reference's geometry (a one-digit box covers the last
  28 x 28 px of its tile, 16 px wider per further digit) and blend, and the digits are centred on
  the reference's ink, so every pixel outside the digits' ink equals the reference's frame (the
  parity test checks: at most 160 differing pixels per tile, all inside its label box; 138 at
  most in the recorded frames).
- Init states: ``label`` must be the caption of ``video_id`` in the clip table; fields are checked
  with errors naming the field. ``state_dicts()`` adds ``start_order`` (the order when the episode
  began) to the reference's four fields, so a mid-episode state reloads with its
  ``correct_order``; a state without it, as the reference writes them, starts its episode at the
  order it holds.

Kept from the reference, as interface: the start order may already be solved (probability
1/N!); frames are squashed to square tiles; ``tau`` is the success flag, not a rank correlation;
``solve(num_steps=...)`` is ignored.
"""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ..core import threads
from ..core.cache import BoundedCache
from ..core.family import Family
from ..core.grammar import STOP, STOP_ACTION, ActionSpec, Grammar, IntArray, Permutation
from ..core.validate import InitSchema, describe, integer, is_integer, one_of, real
from ..kernels.video_unshuffle import draw_boxes
from ..render import blit, labels
from . import slot_puzzle
from .assets.clips import (FRAME_PX, MAX_DECODED_FRAMES, STRATEGIES, ClipFileError,
                           ClipSourceError, clip_source)

MAX_FRAMES = 16
TILE_BYTES = FRAME_PX * FRAME_PX * 3
MAX_ATTEMPTS = 100          # clips a reset tries (the reference's bound)
# The family's store of episode frames, per (clip, frame positions): N frames of 150 KB each,
# shared by the instance's BatchEnvs (an easy episode's are 600 KB: ~430 clips' worth).
FRAME_STORE_BYTES = 256 << 20
# The reference's label: OpenCV Hershey Simplex at scale 0.8, thickness 2: a text of d digits
# measures tw = 16 d + 2, th = 18; its baseline-left corner is (224 - tw - 5, 224 - 5), and the
# box spans (x - 5, y - th - 5) .. (x + tw + 5, y + 5), clipped to the tile.
REF_DIGIT_W = 16
REF_TEXT_H = 18
LABEL_FONT_PX = 27
LABEL_BOLD = True   # one pixel bolder: the reference's strokes are 2 px thick
# 60 % black over 40 % image, rounded as OpenCV's addWeighted rounds (never a tie for ints).
DIM = np.rint(np.arange(256) * 0.4).astype(np.uint8)


def _label_geometry(slot: int) -> tuple[int, int, int, int]:
    """(box x0, box y0, text x, text y) of a 1-based slot's label in its tile."""
    tw = REF_DIGIT_W * len(str(slot)) + 2
    x, y = FRAME_PX - tw - 5, FRAME_PX - 5
    return x - 5, y - REF_TEXT_H - 5, x, y


# --------------------------------------------------------------------------- params and state
@dataclass(frozen=True)
class VideoUnshuffleParams:
    """num_frames: N, 2..16. sampling_strategy: "uniform", "salient" or "distinct";
    min_frame_diff: salient's threshold (0..1); max_frames_to_analyze: frames read from the
    start of a clip (1..10000; at most 1024 are decoded). root_dir: the clip folder (None:
    $VIS_GYM_VIDEO_DIR, the bundle's partial_datasets/ssv2, the built-in procedural clips).
    video_label: keep only clips whose caption contains it."""

    num_frames: int = 4
    sampling_strategy: str = "salient"
    min_frame_diff: float = 0.15
    max_frames_to_analyze: int = 100
    root_dir: str | None = None
    video_label: str | None = None

    def __post_init__(self):
        def put(name, value):
            object.__setattr__(self, name, value)

        put("num_frames", integer("num_frames", self.num_frames, 2, MAX_FRAMES))
        put("sampling_strategy", one_of("sampling_strategy", self.sampling_strategy, STRATEGIES))
        put("min_frame_diff", real("min_frame_diff", self.min_frame_diff, 0.0, 1.0))
        put("max_frames_to_analyze", integer("max_frames_to_analyze",
                                             self.max_frames_to_analyze, 1, 10000))
        if self.root_dir is not None:
            if isinstance(self.root_dir, os.PathLike):
                put("root_dir", os.fspath(self.root_dir))
            if not isinstance(self.root_dir, str) or not self.root_dir or "\x00" in self.root_dir:
                raise ValueError(f"root_dir: expected a folder path (str) or None, got "
                                 f"{describe(self.root_dir)}")
        if self.video_label is not None and (not isinstance(self.video_label, str)
                                             or len(self.video_label) > 1000):
            raise ValueError(f"video_label: expected a str (a caption substring) or None, got "
                             f"{describe(self.video_label)}")


class VideoUnshuffleState(NamedTuple):
    clip: np.ndarray          # int32[B] index into the family's clip table
    positions: np.ndarray     # int32[B, N] frame indices in the clip
    order: np.ndarray         # int32[B, N] 1-based frame id shown in each slot
    start_order: np.ndarray   # int32[B, N] the order at reset / load


class VideoWorkspace(NamedTuple):
    """One BatchEnv's render scratch: its episodes' frames, copied from the family's store."""
    drawn: np.ndarray         # int32[B, N] frame (0-based) each slot of each frame shows (-1: none)
    tiles: np.ndarray         # uint8[B, N, 224, 224, 3] the episode's frames, chronological
    tile_clip: np.ndarray     # int64[B] clip the row's tiles came from (-1: none)
    tile_positions: np.ndarray  # int32[B, N] the frame positions they came from


def _seeded(rng: np.random.RandomState, seed: int) -> np.random.RandomState:
    """``rng`` re-seeded as RandomState(seed) (re-seeding costs ~2 us, a new RandomState
    ~200 us); seeds >= 2**32 seed it with their two 32-bit halves."""
    seed = int(seed)
    rng.seed(seed if seed < 2**32 else [seed & 0xFFFFFFFF, seed >> 32])
    return rng


def _padding_rng(seed: int) -> np.random.RandomState:
    """The episode's stream for uniform sampling's top-up (apart from the order's stream)."""
    seed = int(seed)
    return np.random.RandomState([seed & 0xFFFFFFFF, seed >> 32, 0x5EED])


# --------------------------------------------------------------------------- labels and prompt
@functools.lru_cache(maxsize=None)
def _labels(n: int):
    """Per slot: the box's left edge, the digits' coverage (n, h, w) and their left edge; the
    boxes' top row and the digits' top row (shared). The digits are render/labels.py's, centred
    on the reference's digit ink."""
    glyphs = [labels.label(str(s), LABEL_FONT_PX, bold=LABEL_BOLD).coverage
              for s in range(1, n + 1)]
    gh = max(g.shape[0] for g in glyphs)
    gw = max(g.shape[1] for g in glyphs)
    ink = np.zeros((n, gh, gw), np.uint8)
    box_x = np.zeros(n, np.int64)
    ink_x = np.zeros(n, np.int64)
    box_y = ink_y = 0
    for s, g in enumerate(glyphs):
        bx, by, x, y = _label_geometry(s + 1)
        d = len(str(s + 1))
        # The reference's ink: columns x + 1 .. x + tw - 3, rows y - 18 .. y + 1.
        x_at = labels.centred(x + 1, x + REF_DIGIT_W * d, g.shape[1], round_up=True)
        y_at = labels.centred(y - 18, y + 2, g.shape[0], round_up=True)
        ink[s, :g.shape[0], :g.shape[1]] = g
        box_x[s], box_y = bx, by
        ink_x[s] = min(max(x_at, bx), FRAME_PX - gw)
        ink_y = max(min(y_at, FRAME_PX - gh), by)
    for a in (ink, box_x, ink_x):
        a.setflags(write=False)
    return box_x, box_y, ink, ink_x, ink_y


def _prompt(n: int, caption: str) -> str:
    return (
        f"You are given {n} video frames extracted from a short clip, laid out left→right in a "
        f"shuffled order and labeled 1 through {n}. The action being performed in the video is: "
        f"'{caption}'.\n\n"
        "Your goal is to rearrange the frames so they appear in their original chronological "
        "order from left to right. Pay attention to the temporal progression of the action "
        "described above.\n\n"
        "Available actions:\n"
        "1. 'swap': Swap two frames by specifying their 1-based positions. Format: "
        "`('swap', (i, j))`\n"
        "2. 'reorder': Provide the complete ordering in one shot. Format: "
        f"`('reorder', [1, 2, ..., {n}])` where the list gives the desired left-to-right "
        "arrangement.\n"
        "3. 'stop': Finish and lock in the current ordering. Format: `('stop', 'stop')`\n\n"
        "Please respond with exactly one action and its arguments in the specified format. "
        "For example:\n"
        "- Swap the first and third frames: `('swap', (1, 3))`\n"
        f"- Reorder all frames: `('reorder', [2, 1, 4, 3, ..., {n}])`\n"
        "- Finalize the ordering: `('stop', 'stop')`"
    )


@functools.lru_cache(maxsize=None)
def _grammar(n: int) -> Grammar:
    return Grammar([
        ActionSpec("swap", IntArray((2,), n, start=1),
                   invalid=("Swap payload {payload} is invalid. It must contain two distinct "
                            f"1-based indices between 1 and {n}.")),
        ActionSpec("reorder", Permutation(n, start=1, list_only=True),
                   invalid=f"Reorder payload {{payload}} is invalid. It must be a permutation "
                           f"of [1, {n}]."),
        STOP,
    ])


# --------------------------------------------------------------------------- the family
class VideoUnshuffle(slot_puzzle.SlotOrderPuzzle, Family):
    name = "video_unshuffle"
    Params = VideoUnshuffleParams
    presets = {"easy": VideoUnshuffleParams(num_frames=4),
               "hard": VideoUnshuffleParams(num_frames=5)}
    grammar = _grammar(4)   # the instance's own is set in __init__
    solver_strategies = ("swap", "reorder")
    data_dir_keyword = "root_dir"
    first_id = 1                 # the State's frame ids are 1-based, as the reference's order
    plan_stop = STOP_ACTION
    workspace_type = VideoWorkspace

    def __init__(self, params: VideoUnshuffleParams):
        self.n_frames = n = int(params.num_frames)
        self._init_slots(params, _grammar(n), n)
        try:
            self.source = clip_source(params.root_dir, video_label=params.video_label)
        except (ClipSourceError, ClipFileError, OSError) as error:
            text_ = " ".join(str(error).split())
            raise ValueError(f"root_dir: {text_[:300]}") from None
        self.box_x, self.box_y, self.ink, self.ink_x, self.ink_y = _labels(n)
        # (clip, positions) -> the episode's frames, uint8 (N, 224, 224, 3) read-only, shared by
        # this instance's BatchEnvs and threads (locked, bounded; a pure function of its key).
        self._frames = BoundedCache("video_unshuffle episode frames", max_bytes=FRAME_STORE_BYTES)

    @property
    def frame_shape(self) -> tuple[int, int]:
        return FRAME_PX, FRAME_PX * self.n_frames

    def new_state(self, batch: int) -> VideoUnshuffleState:
        n = self.n_frames
        ident = np.broadcast_to(np.arange(1, n + 1, dtype=np.int32), (batch, n))
        return VideoUnshuffleState(
            clip=np.zeros(batch, np.int32),
            positions=np.broadcast_to(np.arange(n, dtype=np.int32), (batch, n)).copy(),
            order=ident.copy(), start_order=ident.copy())

    def new_workspace(self, batch: int) -> VideoWorkspace:
        n = self.n_frames
        return VideoWorkspace(
            drawn=np.full((batch, n), -1, np.int32),
            tiles=np.zeros((batch, n, FRAME_PX, FRAME_PX, 3), np.uint8),
            tile_clip=np.full(batch, -1, np.int64),
            tile_positions=np.zeros((batch, n), np.int32))

    # -- episodes -------------------------------------------------------------------------
    def _frames_at(self, clip: int, positions) -> np.ndarray:
        """The frames of clip ``clip`` at ``positions`` (read-only), from the store, decoded
        again when it has dropped them (ClipFileError names an unreadable file)."""
        key = (int(clip), tuple(int(p) for p in positions))
        return self._frames.get_or_build(key, lambda: self.source.frames_at(*key))

    def _select(self, clip: int, seed: int):
        p = self.params
        return self.source.select(clip, self.n_frames, p.sampling_strategy, p.min_frame_diff,
                                  p.max_frames_to_analyze, lambda: _padding_rng(seed))

    def _episode(self, seed: int, rng: np.random.RandomState):
        """(clip, selection, display order) of an episode seeded ``seed``."""
        n = self.n_frames
        candidates = self.source.order(seed, rng)
        for clip in candidates[:MAX_ATTEMPTS].tolist():
            chosen = self._select(clip, seed)
            if chosen is not None:
                order = list(range(1, n + 1))
                _seeded(rng, seed).shuffle(order)
                return clip, chosen, order
        raise ValueError(f"seed {seed}: none of the first {min(MAX_ATTEMPTS, len(candidates))}"
                         f" clips tried in {self.source.origin} gives {n} readable frames")

    def reset_rows(self, state, rows, seeds) -> None:
        rows = np.asarray(rows).tolist()
        seeds = np.asarray(seeds).tolist()
        episodes = [None] * len(rows)

        def part(picks):
            rng = np.random.RandomState()   # this part's own: parts run on several threads
            for k in picks.tolist():
                episodes[k] = self._episode(seeds[k], rng)

        # A clip not chosen before is rendered or decoded now (milliseconds; the compiled parts
        # release the GIL): the rows go to both cores when there are several.
        threads.FRAME_POOL.run_parts(part, np.arange(len(rows)), np.ones(len(rows)), 2)
        for b, (clip, chosen, order) in zip(rows, episodes):
            state.clip[b] = clip
            state.positions[b] = chosen.positions
            state.order[b] = order
            state.start_order[b] = order
            # The chosen frames are the clip's frames at their positions: stored for the draw.
            self._frames.put((clip, tuple(int(p) for p in chosen.positions)), chosen.frames)

    def _video_id(self, field: str, value) -> int:
        try:
            return self.source.id_of(value)
        except ClipFileError as exc:
            raise ValueError(f"{field}: {exc}") from None

    def _order(self, field: str, value) -> list:
        n = self.n_frames
        if not isinstance(value, (list, tuple)) or len(value) != n or not all(
                is_integer(v) for v in value) or sorted(int(v) for v in value) != list(
                range(1, n + 1)):
            raise ValueError(f"{field}: expected a permutation of 1..{n}, got {describe(value)}")
        return [int(v) for v in value]

    def _positions(self, field: str, value) -> list:
        n = self.n_frames
        if not isinstance(value, (list, tuple)) or len(value) != n or not all(
                is_integer(v) and 0 <= int(v) < MAX_DECODED_FRAMES for v in value):
            raise ValueError(f"{field}: expected {n} frame indices in 0..{MAX_DECODED_FRAMES - 1},"
                             f" got {describe(value)}")
        return [int(v) for v in value]

    def _check_label(self, parsed: dict, where: str) -> dict:
        caption = self.source.labels[parsed["video_id"]]
        if parsed["label"] != caption:
            raise ValueError(f"{where}.label: {describe(parsed['label'])} is not the caption of "
                             f"video_id {self.source.ids[parsed['video_id']]!r} "
                             f"({describe(caption)})")
        return parsed

    def load_rows(self, state, rows, init_states) -> None:
        def label(field, value):
            if not isinstance(value, str):
                raise ValueError(f"{field}: expected a str, got {describe(value)}")
            return value

        schema = InitSchema({"video_id": self._video_id, "label": label,
                             "shuffled_order": self._order,
                             "frame_positions": self._positions,
                             "start_order": (self._order, None)}, self._check_label)
        parsed = schema.parse_all(init_states)
        for k, init in enumerate(parsed):
            # Read now, so that an unreadable frame refuses the call before anything changes.
            try:
                self._frames_at(init["video_id"], init["frame_positions"])
            except ClipFileError as exc:
                raise ValueError(f"init_states[{k}].video_id: {exc}") from None
        for b, init in zip(np.asarray(rows).tolist(), parsed):
            state.clip[b] = init["video_id"]
            state.positions[b] = init["frame_positions"]
            state.order[b] = init["shuffled_order"]
            start = init["start_order"]
            # Without a start order the episode starts here, at the order it holds.
            state.start_order[b] = init["shuffled_order"] if start is None else start

    def to_init_state(self, state, i: int) -> dict:
        clip = int(state.clip[i])
        return {"video_id": self.source.ids[clip], "label": self.source.labels[clip],
                "shuffled_order": [int(v) for v in state.order[i]],
                "frame_positions": [int(v) for v in state.positions[i]],
                "start_order": [int(v) for v in state.start_order[i]]}

    def correct_order(self, state, i: int) -> list[int]:
        """The reference's info ``correct_order``: for frame f, the 1-based slot where it was
        placed at the start of the episode (the inverse of the start order)."""
        start = [int(v) for v in state.start_order[i]]
        return [start.index(f) + 1 for f in range(1, self.n_frames + 1)]

    # step_rows, is_success, goal_state, potential: envs/slot_puzzle.py.
    def metrics(self, state) -> dict:
        # The reference's info "tau": the success flag at the current state (not a correlation).
        return {"tau": self.is_success(state).astype(np.float64)}

    # -- pixels ---------------------------------------------------------------------------
    # render_rows, render_after_step: envs/slot_puzzle.py, with these three.
    def _stale_tiles(self, state, work: VideoWorkspace, rows) -> np.ndarray:
        return (work.tile_clip[rows] != state.clip[rows]) | (
            work.tile_positions[rows] != state.positions[rows]).any(axis=1)

    def _fill_tiles(self, state, work: VideoWorkspace, rows) -> None:
        """Copy the frames of ``rows`` from the family's store into the workspace."""
        for b in rows:
            work.tiles[b] = self._frames_at(state.clip[b], state.positions[b])
            work.tile_clip[b] = state.clip[b]
            work.tile_positions[b] = state.positions[b]

    def _draw(self, state, frames, rows, work: VideoWorkspace, full: bool) -> None:
        """Copy the slots of ``rows`` that need it (all with ``full``, else those whose frame
        changed) with streamed stores (render/blit.py), then blend their label boxes, in parts
        on both cores."""
        batch, n = frames.shape[0], self.n_frames
        rows = np.asarray(rows, dtype=np.int64)
        shown = state.order[rows] - 1
        need = np.ones(shown.shape, np.bool_) if full else shown != work.drawn[rows]
        where, slots = np.nonzero(need)
        if where.shape[0] == 0:
            return
        pair_rows = rows[where]
        tile_ids = shown[where, slots].astype(np.int64)
        slots = slots.astype(np.int64)
        work.drawn[pair_rows, slots] = tile_ids
        flat = frames.reshape(batch, frames.shape[1], frames.shape[2] * 3)
        tiles = work.tiles.reshape(batch, n, FRAME_PX, FRAME_PX * 3)
        pictures = work.tiles.reshape(batch, n, -1)
        stream = pair_rows.shape[0] * TILE_BYTES >= blit.STREAM_BYTES

        def part(idx):
            for k in idx.tolist():
                blit.copy_frame(frames, pair_rows[k], pictures[pair_rows[k], tile_ids[k]],
                                FRAME_PX, FRAME_PX, FRAME_PX * slots[k], stream)
            draw_boxes(flat, tiles, pair_rows[idx], slots[idx], tile_ids[idx], DIM,
                       self.box_x, self.box_y, self.ink, self.ink_x, self.ink_y)

        picks = np.arange(pair_rows.shape[0])
        threads.FRAME_POOL.run_parts(part, picks, np.full(picks.shape[0], TILE_BYTES),
                                     threads.THREAD_BYTES)

    def prompt(self, state, i: int, text_mode: bool = False) -> str:
        return _prompt(self.n_frames, self.source.labels[int(state.clip[i])])

    # -- solvers --------------------------------------------------------------------------
    def solve(self, state, rows, strategy, num_steps, seeds) -> list[list[str]]:
        # num_steps is ignored, as in the reference: both plans have a fixed length.
        strategy = strategy or "swap"
        if strategy not in self.solver_strategies:
            raise ValueError(f"strategy: expected one of {list(self.solver_strategies)}, got "
                             f"{describe(strategy)}")
        return self.slot_plans(state, rows, strategy)
