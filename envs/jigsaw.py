"""jigsaw: a photograph cut into an R x C grid of rectangular pieces, each framed in white, shown
scrambled; swap pairs of cells or give a whole re-ordering until the picture is restored, then
stop.

Implements spec/envs/jigsaw.md: the target permutation (a uniform shuffle other than the
identity) with the board starting at the identity, the piece-id convention (crop k of the
unscrambled picture is piece ``target_state[k]``; position p shows piece ``current_state[p]``),
the swap ((row1, col1), (row2, col2)) / reorder (gather: new[k] = old[L[k]]) / stop grammar with
the reference's feedback wording, reward 1 on a stop with ``current_state == target_state``, the
(H + 2 R b) x (W + 2 C b) frame with the reference's exact piece geometry (the first W mod C
columns and H mod R rows one pixel larger, every piece keeping its crop's size where it is pasted,
pastes in row-major order on black, hence the 1-px overlaps and gaps of unequal pieces), the
prompt, and the reorder / swap solvers with (swap, same swap) padding. Dynamics are the Numba
kernels of kernels/jigsaw.py; drawing is render/grid.py (Cython, on both cores).

Frames: each episode's frame has its picture's own size (``frame_hw``); the capacity is
``max_image_height x max_image_width`` plus the borders. Pictures fitted to that size are kept in
the family's shared ``PictureStore`` and packed into one flat ``PictureAtlas`` per BatchEnv (its
workspace: only the pictures its episodes use, dropped and re-packed past ``ATLAS_BYTES``), both
from render/atlas.py, the photo families' one picture atlas; a
reset paints the whole frame, a step repaints only the cells whose piece changed
(grown by the one pixel an unequal piece can spill over), so it equals a full redraw.

Deviations from the reference, on purpose:
- Image source: ``sample_dir`` (the reference's keyword), else ``$VIS_GYM_IMAGE_DIR``, else the
  evaluation bundle's ``partial_datasets/jigsaw`` under the working directory, else the built-in
  photos (envs/assets/images.py, normalised to 336 px on the shorter side). The reference had no
  fallback and also looked for an implicit ``data/images``. A named folder that is missing or holds
  no images raises a ValueError naming ``sample_dir`` and the path. Folders are scanned as the
  reference scans them: .jpg/.jpeg/.png in the folder and exactly one sub-folder deep, extensions
  case-sensitive, sorted by relative path.
- The picture is a pure function of the episode seed (``ImageSource.pick_id``: a fixed
  permutation of the source's list, so consecutive seeds show every picture before any repeats),
  never "the next image" of a sequence fixed by a constructor seed: there is no "All samples
  exhausted". The target permutation is drawn exactly as the reference draws it after
  ``reset(seed=s)`` (``np.random.default_rng(s).shuffle``, repeated while it is the identity), so
  seed s gives the reference's ``target_state`` for ``reset(seed=s)``.
- Init states name their picture (``image_name``: the path relative to the folder, or a built-in's
  name) and ``state_dicts()`` reports the picture actually shown (quirk: the reference reported a
  stale name from its sequential index after ``reset(init_state=...)``, or crashed on a fresh env).
  The name must be one of the source's pictures (the reference opened any existing path under the
  folder, also deeper ones); both permutations must be permutations of 0..N-1 (the reference copied
  anything). A bad field raises a ValueError naming it.
- Payloads (quirk: crashes): swap coordinates must be ints (bools count, as in the reference);
  floats, even whole ones such as ``(1.0, 1.0)``, strings and complex numbers are invalid payloads,
  where the reference raised TypeError out of ``step``. A reorder must be a list of ints (a tuple or
  a string raised AttributeError there).
- The swap solver's random order and padding come from the episode's solver seed (BatchEnv's
  per-episode stream), so plans are reproducible (quirk: the reference used an unseeded RNG).
- Pictures larger than the frame capacity (``max_image_height`` x ``max_image_width``, default
  640 x 640: a 16:9 photo at the reference photos' 336-px shorter side fits) are shown downscaled
  to fit (Pillow's Lanczos, aspect ratio kept, sides rounded to the nearest pixel); the reference
  shows every picture at its native size. The built-in photos (at most 504 px) and the recorded
  inputs all fit.
- num_rows, num_cols are 1..16 with at least two pieces (a 1 x 1 puzzle has no non-identity target:
  the reference's shuffle looped forever); border_width is 0..32.
- Solvers: an unknown strategy raises even on a solved board (the reference answered a bare
  stop there before looking at the strategy).
- Step info: BatchEnv's info has ``success``; ``proportion_matched(state)`` gives the reference's
  ``proportion_matched``; the unscrambled image object is not returned (``goal_frames()`` draws the
  solved board). Observations are the frames (quirk: the reference declared a vector of ints).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ..core.family import Family
from ..core.grammar import STOP, STOP_ACTION, ActionSpec, Grammar, IntArray, Permutation
from ..core.validate import InitSchema, describe, integer, integers, rule
from ..kernels.jigsaw import apply_moves
from ..render import blit, resample
from ..render.atlas import PictureAtlas, PictureStore, changed_rows
from ..render.grid import draw_grid
from .assets.images import JIGSAW_SCAN, ImageFileError
from .photo_common import bounded, open_image_source, sample_dir_param

BUNDLE_TASK = "jigsaw"
MAX_GRID = 16
MAX_BORDER = 32
DEFAULT_MAX_IMAGE = 640     # a 16:9 photo at the reference photos' 336-px shorter side fits
MAX_IMAGE = 4096
ATLAS_BYTES = 512 << 20     # pictures packed per BatchEnv before its atlas starts over
FITTED_BYTES = 256 << 20    # fitted pictures kept per family instance (shared by its envs)


@dataclass(frozen=True)
class JigsawParams:
    """num_rows x num_cols pieces (1..16 each, at least 2 pieces); sample_dir: the image folder
    (None: $VIS_GYM_IMAGE_DIR, the bundle's partial_datasets/jigsaw, the built-in photos);
    border_width: white pixels around each piece (0..32); max_image_height / max_image_width:
    the largest picture shown at its own size (1..4096; larger ones are downscaled to fit), which
    with the borders makes the frame capacity."""

    num_rows: int = 2
    num_cols: int = 2
    sample_dir: str | None = None
    border_width: int = 1
    max_image_height: int = DEFAULT_MAX_IMAGE
    max_image_width: int = DEFAULT_MAX_IMAGE

    def __post_init__(self):
        rows = integer("num_rows", self.num_rows, 1, MAX_GRID)
        cols = integer("num_cols", self.num_cols, 1, MAX_GRID)
        for name in ("num_rows", "num_cols"):
            rule(name, "num_rows x num_cols >= 2")
        if rows * cols < 2:
            raise ValueError(f"num_rows, num_cols: a jigsaw needs at least 2 pieces, got "
                             f"{rows}x{cols}")
        object.__setattr__(self, "num_rows", rows)
        object.__setattr__(self, "num_cols", cols)
        object.__setattr__(self, "sample_dir", sample_dir_param(self.sample_dir))
        object.__setattr__(self, "border_width",
                           integer("border_width", self.border_width, 0, MAX_BORDER))
        for name in ("max_image_height", "max_image_width"):
            object.__setattr__(self, name, integer(name, getattr(self, name), 1, MAX_IMAGE))


class JigsawState(NamedTuple):
    current: np.ndarray     # int32[B, N] piece id shown at each grid position (row-major)
    target: np.ndarray      # int32[B, N] piece id of each crop of the unscrambled picture
    image_id: np.ndarray    # int64[B] index of the picture in the family's image source (-1: none)
    image_hw: np.ndarray    # int32[B, 2] size of the picture as shown (height, width)
    changed: np.ndarray     # bool[B, N] positions whose piece the last step changed (redraw)


# --------------------------------------------------------------------------- grammar and prompt
@functools.lru_cache(maxsize=64)
def _grammar(rows: int, cols: int) -> Grammar:
    # The grammar of a grid (immutable and shared; each env parses with its own Parser).
    return Grammar([
        ActionSpec("swap", IntArray((2, 2), (rows, cols))),
        ActionSpec("reorder", Permutation(rows * cols, list_only=True)),
        STOP,
    ])


def _prompt(rows: int, cols: int) -> str:
    last = rows * cols - 1
    return (
        f"You are solving a {rows}x{cols} jigsaw puzzle. The puzzle pieces are currently "
        "scrambled. Your goal is to rearrange the pieces to recover the image. "
        "\n\nAvailable actions:\n"
        "1. 'swap': Swap two pieces by specifying their coordinates. Format: "
        "`('swap', ((row1, col1), (row2, col2)))` where coordinates start from (0,0) at the "
        "top-left corner.\n"
        "2. 'reorder': Reorder all pieces at once. Format: "
        f"`('reorder', [0, 1, 2, ..., {last}])` where the list represents the desired order of "
        "pieces from top-left to bottom-right.\n"
        "3. 'stop': End the puzzle solving session. Format: `('stop', 'stop')`"
        "\n\nPlease respond with exactly one action and its arguments in the specified format. "
        "For example:\n"
        "- To swap two pieces: `('swap', ((0, 0), (1, 1)))`\n"
        f"- To reorder all pieces: `('reorder', [0, 1, 2, ..., {last}])`\n"
        "- To stop: `('stop', 'stop')`"
        "\n\nIndex-to-cell mapping (0-based rows/cols):\n"
        f"- Index = row * {cols} + col.\n"
        f"- Row 0 covers indices 0..{cols - 1}, row 1 covers {cols}..{2 * cols - 1}, etc.\n"
        "Example for 2x2: (0,0)->0, (0,1)->1, (1,0)->2, (1,1)->3.\n"
    )


# --------------------------------------------------------------------------- pictures
def fit_picture(image: np.ndarray, max_h: int, max_w: int) -> np.ndarray:
    """``image`` if it fits max_h x max_w, else downscaled to fit (Pillow's Lanczos, aspect
    ratio kept, each side rounded to the nearest pixel and at least 1)."""
    h, w = image.shape[:2]
    if h <= max_h and w <= max_w:
        return image
    scale = min(max_h / h, max_w / w)
    size = (min(max_w, max(1, round(w * scale))), min(max_h, max(1, round(h * scale))))
    return resample.pillow_resize(image, size)


class JigsawWorkspace(NamedTuple):
    rows: np.ndarray        # int64[B] rows to redraw after a step
    atlas: PictureAtlas     # render/atlas.py: this BatchEnv's pictures, packed


# --------------------------------------------------------------------------- the family
class Jigsaw(Family):
    name = "jigsaw"
    transient_fields = ("changed",)   # redraw bookkeeping (state_hash)
    Params = JigsawParams
    presets = {"easy": JigsawParams(2, 2), "hard": JigsawParams(3, 3)}
    grammar = _grammar(2, 2)   # the instance's own, for its grid, is set in __init__
    solver_strategies = ("reorder", "swap")
    data_dir_keyword = "sample_dir"

    def __init__(self, params: JigsawParams):
        self.grammar = _grammar(params.num_rows, params.num_cols)
        super().__init__(params)
        self.rows_n = params.num_rows
        self.cols_n = params.num_cols
        self.n = params.num_rows * params.num_cols
        self.border = params.border_width
        self.swap_kind = self.grammar.index("swap")
        self.reorder_kind = self.grammar.index("reorder")
        self.source = open_image_source(params.sample_dir, rule=JIGSAW_SCAN,
                                        bundle_task=BUNDLE_TASK)
        # Pictures as shown (fitted into the maximum size), shared by this instance's envs.
        self._fitted = PictureStore("jigsaw fitted pictures", self._fit, len(self.source),
                                    FITTED_BYTES)
        self._prompt = _prompt(params.num_rows, params.num_cols)
        self._identity = np.arange(self.n, dtype=np.int32)

    # -- shapes ---------------------------------------------------------------------------
    @property
    def frame_shape(self) -> tuple[int, int]:
        p = self.params
        return (p.max_image_height + 2 * p.num_rows * p.border_width,
                p.max_image_width + 2 * p.num_cols * p.border_width)

    def frame_hw(self, state, out: np.ndarray) -> None:
        out[:, 0] = state.image_hw[:, 0] + 2 * self.rows_n * self.border
        out[:, 1] = state.image_hw[:, 1] + 2 * self.cols_n * self.border

    def new_state(self, batch: int) -> JigsawState:
        identity = np.broadcast_to(self._identity, (batch, self.n))
        return JigsawState(
            current=identity.copy(),
            target=identity.copy(),
            image_id=np.full(batch, -1, np.int64),
            image_hw=np.ones((batch, 2), np.int32),
            changed=np.zeros((batch, self.n), np.bool_),
        )

    def new_workspace(self, batch: int) -> JigsawWorkspace:
        return JigsawWorkspace(np.empty(batch, np.int64),
                               PictureAtlas(self._fitted.picture, len(self.source), ATLAS_BYTES))

    def _work(self, work, batch: int) -> JigsawWorkspace:
        if work is None or work.rows.shape[0] < batch:
            return self.new_workspace(batch)
        return work

    def _fit(self, image_id: int) -> np.ndarray:
        return fit_picture(self.source.array(image_id), self.params.max_image_height,
                           self.params.max_image_width)

    def picture(self, image_id: int) -> np.ndarray:
        """Picture ``image_id`` as shown: fitted into the maximum size, read-only, contiguous
        (decoding raises ImageFileError naming the file)."""
        return self._fitted.picture(image_id)

    def dims(self, image_id: int) -> tuple[int, int]:
        """(height, width) of picture ``image_id`` as shown."""
        h, w = self.picture(image_id).shape[:2]
        return int(h), int(w)

    # -- episodes -------------------------------------------------------------------------
    def target_for_seed(self, seed: int) -> list[int]:
        """The reference's target after ``reset(seed=seed)``: a shuffle by
        ``np.random.default_rng(seed)``, repeated while it is the identity."""
        rng = np.random.default_rng(int(seed))
        order = list(range(self.n))
        identity = list(order)
        rng.shuffle(order)
        while order == identity:
            rng.shuffle(order)
        return order

    def reset_rows(self, state, rows, seeds) -> None:
        rows = np.asarray(rows, dtype=np.int64)
        seeds = [int(s) for s in np.asarray(seeds, dtype=np.uint64).tolist()]
        ids = [self.source.pick_id(s) for s in seeds]
        sizes = [self.dims(k) for k in ids]   # decode first: an unreadable file changes nothing
        targets = np.array([self.target_for_seed(s) for s in seeds], np.int32).reshape(-1, self.n)
        state.target[rows] = targets
        state.current[rows] = self._identity
        state.image_id[rows] = ids
        state.image_hw[rows] = sizes if ids else np.zeros((0, 2))
        state.changed[rows] = False

    def _permutation(self, field: str, value) -> list[int]:
        values = integers(field, value, self.n, 0, self.n - 1)
        if len(set(values)) != self.n:
            raise ValueError(f"{field}: expected a permutation of 0..{self.n - 1}, got "
                             f"{describe(value)}")
        return list(values)

    def _image_name(self, field: str, name):
        """An init state's image: its source id and size as shown (the picture is decoded,
        so an unreadable file is refused here, before anything changes)."""
        if not isinstance(name, str):
            raise ValueError(f"{field}: expected an image name (str), got {describe(name)}")
        try:
            image_id = self.source.id_of(name)
        except ImageFileError:
            raise ValueError(f"{field}: {describe(name)} is not an image of "
                             f"{bounded(self.source.origin, 200)} ({len(self.source)} images)"
                             ) from None
        try:
            return image_id, self.dims(image_id)
        except ImageFileError as error:
            raise ValueError(f"{field}: {bounded(error)}") from None

    def load_rows(self, state, rows, init_states) -> None:
        schema = InitSchema({"image_name": self._image_name, "current_state": self._permutation,
                             "target_state": self._permutation})
        for b, init in zip(np.asarray(rows).tolist(), schema.parse_all(init_states)):
            image_id, size = init["image_name"]
            state.current[b] = init["current_state"]
            state.target[b] = init["target_state"]
            state.image_id[b] = image_id
            state.image_hw[b] = size
            state.changed[b] = False

    def to_init_state(self, state, i: int) -> dict:
        image_id = int(state.image_id[i])
        return {
            "image_name": self.source.names[image_id] if image_id >= 0 else None,
            "current_state": [int(v) for v in state.current[i]],
            "target_state": [int(v) for v in state.target[i]],
        }

    def step_rows(self, state, actions, rows, reward, terminated, feedback) -> None:
        apply_moves(state.current, actions.kind, actions.ints, rows, self.swap_kind,
                    self.reorder_kind, self.cols_n, state.changed)

    def is_success(self, state) -> np.ndarray:
        return (state.current == state.target).all(axis=1)

    def proportion_matched(self, state) -> np.ndarray:
        """float[B]: the fraction of positions showing their target piece (the reference's
        ``info['proportion_matched']``)."""
        return (state.current == state.target).mean(axis=1)

    def potential(self, state, out) -> None:
        # Misplaced pieces (0 exactly when solved).
        np.sum(state.current != state.target, axis=1, out=out, dtype=np.float32)

    def metrics(self, state) -> dict:
        return {"proportion_matched": self.proportion_matched(state)}

    def goal_state(self, state):
        state.current[:] = state.target
        state.changed[:] = False
        return state

    # -- pixels -----------------------------------------------------------------------------
    def _draw(self, state, frames, rows, work: JigsawWorkspace, changed=None) -> None:
        atlas = work.atlas
        atlas.ensure_rows(state.image_id, rows)
        draw_grid(frames, atlas.buffer, atlas.slot_off, atlas.slot_of, state.image_id,
                  state.image_hw, state.current, state.target, self.rows_n, self.cols_n,
                  self.border, rows, changed)

    def clear_padding(self, frames, rows, sizes, old) -> None:
        blit.clear_outside(frames, rows, sizes, old)   # compiled (many rows of cold lines)

    def render_rows(self, state, frames, rows, work) -> None:
        rows = np.ascontiguousarray(rows, dtype=np.int64)
        if rows.shape[0] == 0:
            return
        self._draw(state, frames, rows, self._work(work, frames.shape[0]))

    def render_after_step(self, state, frames, work) -> None:
        work = self._work(work, frames.shape[0])
        count = changed_rows(state.changed, work.rows)
        if count == 0:
            return
        self._draw(state, frames, work.rows[:count], work, state.changed)

    def prompt(self, state, i: int, text_mode: bool = False) -> str:
        return self._prompt

    # -- solvers --------------------------------------------------------------------------
    def _cell(self, p: int) -> tuple[int, int]:
        return p // self.cols_n, p % self.cols_n

    def _swap_action(self, p1: int, p2: int) -> str:
        return f"('swap', ({self._cell(p1)}, {self._cell(p2)}))"

    def swap_plan(self, current: list, target: list, num_steps: int | None, rng) -> list[str]:
        """The reference's swap solver with ``rng`` for its draws: the misplaced positions in
        random order, each still-wrong position swapped with the position holding the piece it
        needs (a minimal, cycle-by-cycle solution); then, if ``num_steps`` is larger,
        ceil((num_steps - swaps) / 2) pairs of one random swap of two distinct positions given
        twice, each pair inserted at a random index; then stop."""
        state = list(current)
        where = {piece: p for p, piece in enumerate(state)}
        misplaced = [p for p in range(self.n) if state[p] != target[p]]
        rng.shuffle(misplaced)
        swaps = []
        while misplaced:
            i = misplaced.pop(0)
            if state[i] == target[i]:
                continue
            j = where[target[i]]
            piece_i = state[i]
            state[i], state[j] = state[j], piece_i
            where[piece_i] = j
            where[target[i]] = i
            swaps.append(self._swap_action(i, j))
            if state[j] == target[j] and j in misplaced:
                misplaced.remove(j)
        if num_steps is not None and num_steps > len(swaps):
            for _ in range((num_steps - len(swaps) + 1) // 2):
                p1, p2 = (int(v) for v in rng.choice(self.n, 2, replace=False))
                at = int(rng.integers(0, len(swaps) + 1))
                action = self._swap_action(p1, p2)
                swaps[at:at] = [action, action]
        return swaps + [STOP_ACTION]

    def solve(self, state, rows, strategy, num_steps, seeds) -> list[list[str]]:
        strategy = "reorder" if strategy is None else strategy
        if strategy not in self.solver_strategies:
            raise ValueError(f"strategy: expected one of {self.solver_strategies}, got "
                             f"{describe(strategy)}")
        seeds = np.asarray(seeds, dtype=np.uint64)
        plans = []
        for b in np.asarray(rows, dtype=np.int64).tolist():
            current = state.current[b].tolist()
            target = state.target[b].tolist()
            if current == target:
                plans.append([STOP_ACTION])
            elif strategy == "reorder":
                where = {piece: p for p, piece in enumerate(current)}
                plans.append([f"('reorder', {[where[t] for t in target]})", STOP_ACTION])
            else:
                rng = np.random.default_rng(int(seeds[b]))
                plans.append(self.swap_plan(current, target, num_steps, rng))
        return plans
