"""zoom_in_puzzle: a photograph and N zoomed-in crops of it, shown in a random order; swap or
reorder the crops until they run from least to most zoomed, then stop.

Implements spec/envs/zoom_in_puzzle.md: zoom levels max(Normal(min_zoom_level + (i + 1) *
zoom_gap, zoom_std), min_zoom_level) sorted ascending, crop boxes at the source aspect ratio
(nested: each inside the previous one), a uniform shuffle of the display order, the swap
(1-based slots) / reorder (1-based list) / stop grammar with the reference's feedback wording,
reward 1 on a stop with slot k showing crop k, the 224 x 224 (N + 1) frame (slot 0 the whole
photo, slot k the crop shown there, each resized to 224 x 224 with Pillow's Lanczos pixels and
labelled k at the bottom-right on a black box), the prompt, and the reorder / swap solvers.

Presets (DESIGN "Presets"): ``easy``/``hard`` are the evaluation harness's configuration,
``min_zoom_level=0.75, zoom_gap=0.75, zoom_std=0.2, nested=True`` with 4 / 5 views, because that
is what the benchmark reports. The registered ids of the reference (``min_zoom_level=2.0,
zoom_gap=1.0, zoom_std=0.3, nested=False``: non-nested crops anywhere in the photo) are one
keyword away: ``make("zoom_in_puzzle/easy", zoom_setup="registered")``. Any of the four numbers
given explicitly overrides the setup's value.

Generation draws from a legacy NumPy ``RandomState`` exactly as the reference does, so an
episode with seed s < 2**32 on a folder of images is the reference's ``reset(seed=s)`` on an env
constructed with ``seed=s`` (how the parity recordings were made): the image is the first of the
folder's sorted list permuted by ``RandomState(s)``, and zoom levels, boxes and order come, in
the reference's draw order, from a fresh ``RandomState(s)``. Seeds >= 2**32 seed the RandomState
with their two 32-bit halves.

Frames: each episode's N + 1 tiles are resampled once per new episode (the first draw after a
reset or init-state load) into the BatchEnv's workspace (``ZoomWorkspace.tiles``: pixels do
not live in the State, DESIGN "Assets and real data"); a step only copies the tiles of the
slots whose content changed, with the slot's constant label patch (render/labels.py). The
whole-photo tile is kept per image in a render/atlas.py ``PictureStore``. Resampling uses
render/resample.region (the Cython passes with Pillow's coefficients, cached per crop size,
and the pass order that reproduces Pillow for that size, probed once per size), so
tiles equal Pillow's ``image.crop(box).resize((224, 224), LANCZOS)`` pixel for pixel.
Resets resample their tiles on both cores (the SSE2 passes release the GIL); slot copies are
render/blit.py's (a frame where most slots change is rewritten row by row with streamed stores).
Cost, 2-core machine, easy: a tile 0.2-0.7 ms; a step changes ~300 KB of frame per episode (a
changed slot is 150 KB). At B=256 with random actions and auto-resets (``python -m visgym.bench
step``) ~13,000 env-steps/s; a fresh process probes Pillow's pass order once per new
crop size (~1 ms each; ~10 a step at first, under one a step after ~10 s).

Deviations from the reference, on purpose:
- Image source (quirk 2): ``sample_dir`` (the reference's keyword), else ``$VIS_GYM_IMAGE_DIR``,
  else the evaluation bundle's ``partial_datasets/zoomin`` under the working directory, else the
  built-in photos (envs/assets/images.py). The reference had no fallback: construction failed
  when its image folder was missing. A folder that is named but missing or without images raises
  a ValueError naming the path. Folders are scanned as the reference scans them (recursive,
  .png/.jpg/.jpeg, case-sensitive extensions).
- The image is a pure function of the episode seed (see above), never "the next image": there is
  no "All samples exhausted" after the last image, and an episode's image does not depend on how
  many episodes ran before it on the same env.
- Init states name their image (``image_name``, relative to the folder, or a built-in's name),
  and ``state_dicts()`` reports the image actually shown (quirk: the reference reported a stale
  name from its sequential index after ``reset(init_state=...)``). ``zoom_levels`` must be in
  ascending order (the reference always stores them so; its reward compares against their
  argsort, which is then the identity).
- Crop boxes (quirk: overshoot): a nested box whose odd width or height would reach 1 px beyond
  the previous box (or the image) is moved back inside it. The random draws are the
  reference's, so every box before the first overshoot is the reference's box and the later ones
  have the reference's sizes, drawn inside the corrected box (12 of the 40 public recordings have
  an overshoot). A crop is at least 1 x 1 px. With
  nesting off, a zoom below 1 takes the whole image width or height (the reference's centre range
  was empty and reset crashed). Loaded boxes may lie partly outside the image (the reference's
  crop pads with black there, and so do we).
- Payloads (quirk: crashes): swap values must be ints (bools count, as in the reference);
  floats, even whole ones such as ``(1.0, 2.0)``, are invalid payloads, where the reference
  raised TypeError. A reorder must be a list (a tuple raised AttributeError there).
- Labels: the slot numbers are drawn with the bundled font (render/text.py) instead of the
  first system TrueType font the reference found. The black box has the reference's geometry
  for DejaVuSans at 28 px, the font of the recorded frames (a one-digit text box of 18 x 26 px,
  so the box spans the last 38 x 46 px of the tile; 18 px more per extra digit), and our digits
  are centred on the ink of the reference's digits, so every pixel outside the boxes is the
  reference's. The crop's own rank is not baked into the tile (the reference baked it under the
  slot label, where a renderer with other digit widths could leak it).
- Solver plans end with ``('stop','stop')``, the reference solver's spelling (no blank).

Kept from the reference, as interface: the start order may already be solved (a plain shuffle,
probability 1/N!); zoom levels clamped at the minimum may tie, and the tied crops then count in
index order (NumPy's argsort of such short arrays); photos and crops are squashed into square
tiles whatever their aspect ratio; the prompt's reorder example has 4 entries even for 5 views;
``solve(num_steps=...)`` is ignored (both plans have a fixed length).
"""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ..core import threads
from ..core.family import Family
from ..core.grammar import STOP, ActionSpec, Grammar, IntArray, Permutation
from ..core.validate import (InitSchema, boolean, describe, integer, is_integer, one_of,
                             real, reals)
from ..render import blit, labels, resample
from ..render.atlas import PictureStore
from . import slot_puzzle
from .assets.images import ZOOM_IN_SCAN, ImageFileError, image_source

TILE_PX = 224
# A reset's tiles are resampled on the calling thread below this much work (source plus output
# pixels: ~4 tiles, ~1 ms), else split between the cores.
THREAD_PIXELS = 400_000
# Bound of min_zoom_level, |zoom_gap| and zoom_std: generated zoom levels then stay far below the
# 1e6 that init states may hold (min + N * gap + any plausible Normal draw), so every generated
# episode reloads from its own state dict.
MAX_ZOOM_PARAM = 1000.0
WHOLE_TILE_CACHE = 1024     # slot-0 tiles kept per family (150 KB each)
MAX_VIEWS = 16
BUNDLE_TASK = "zoomin"
# The reference's label font, DejaVuSans at 28 px: every digit's box at the origin is
# (0, 6, 18, 26), so a label of d digits measures tw = 18 d, th = 26; the text goes to
# (224 - tw - 10, 224 - th - 10) and the black box starts 10 px above and left of it.
LABEL_FONT_PX = 28
LABEL_PAD = 10
REF_DIGIT_W = 18
REF_INK_TOP = 6
REF_TEXT_H = 26
LABEL_BOX_H = REF_TEXT_H + 2 * LABEL_PAD          # 46
# Columns [x0, x1) that each DejaVuSans digit inks, drawn at the origin (rows 6..26 for all).
REF_DIGIT_INK_X = {"0": (1, 16), "1": (3, 16), "2": (2, 16), "3": (2, 16), "4": (1, 17),
                   "5": (2, 16), "6": (1, 17), "7": (2, 16), "8": (1, 16), "9": (1, 16)}


def label_box_w(slot: int) -> int:
    """Width of the black label box of 1-based slot ``slot`` (38 px for one digit)."""
    return REF_DIGIT_W * len(str(slot)) + 2 * LABEL_PAD


ZOOM_SETUPS = {
    # The evaluation harness's keywords (our presets) and the reference constructor's defaults.
    "harness": dict(min_zoom_level=0.75, zoom_gap=0.75, zoom_std=0.2, nested=True),
    "registered": dict(min_zoom_level=2.0, zoom_gap=1.0, zoom_std=0.3, nested=False),
}
REFERENCE_STOP = "('stop','stop')"


# --------------------------------------------------------------------------- params and state
@dataclass(frozen=True)
class ZoomInPuzzleParams:
    """num_zoom_views: N crops, 1..16. zoom_setup: "harness" (the evaluation's zooms, nested) or
    "registered" (the reference constructor's defaults); min_zoom_level (> 0), zoom_gap,
    zoom_std (>= 0) and nested override the setup's values when given. sample_dir: the image
    folder (None: $VIS_GYM_IMAGE_DIR, the bundle's partial_datasets/zoomin, the built-ins)."""

    num_zoom_views: int = 4
    zoom_setup: str = "harness"
    min_zoom_level: float | None = None
    zoom_gap: float | None = None
    zoom_std: float | None = None
    nested: bool | None = None
    sample_dir: str | None = None

    def __post_init__(self):
        # Values are checked and coerced to plain Python types (NumPy scalars included).
        def put(name, value):
            object.__setattr__(self, name, value)

        put("num_zoom_views", integer("num_zoom_views", self.num_zoom_views, 1, MAX_VIEWS))
        put("zoom_setup", one_of("zoom_setup", self.zoom_setup, tuple(ZOOM_SETUPS)))
        if self.min_zoom_level is not None:
            put("min_zoom_level", real("min_zoom_level", self.min_zoom_level, None,
                                       MAX_ZOOM_PARAM, positive=True))
        if self.zoom_gap is not None:
            put("zoom_gap", real("zoom_gap", self.zoom_gap, -MAX_ZOOM_PARAM, MAX_ZOOM_PARAM))
        if self.zoom_std is not None:
            put("zoom_std", real("zoom_std", self.zoom_std, 0.0, MAX_ZOOM_PARAM))
        if self.nested is not None:
            put("nested", boolean("nested", self.nested))
        if self.sample_dir is not None:
            if isinstance(self.sample_dir, os.PathLike):
                put("sample_dir", os.fspath(self.sample_dir))
            if not isinstance(self.sample_dir, str) or not self.sample_dir or (
                    "\x00" in self.sample_dir):
                raise ValueError(f"sample_dir: expected a folder path (str) or None, got "
                                 f"{describe(self.sample_dir)}")
            put("sample_dir", str(self.sample_dir))

    def setting(self, name: str):
        """The effective value of min_zoom_level / zoom_gap / zoom_std / nested."""
        value = getattr(self, name)
        return ZOOM_SETUPS[self.zoom_setup][name] if value is None else value


class ZoomInPuzzleState(NamedTuple):
    image_id: np.ndarray      # int32[B] index into the family's image source
    zoom_levels: np.ndarray   # float64[B, N] ascending
    crop_boxes: np.ndarray    # int32[B, N, 4] (left, top, right, bottom), aligned with zooms
    order: np.ndarray         # int32[B, N] crop index shown in each display slot


class ZoomWorkspace(NamedTuple):
    drawn: np.ndarray         # int32[B, N] crop index each slot of each frame shows (-1: none)
    tiles: np.ndarray         # uint8[B, N + 1, 224, 224, 3]: the whole photo, then each crop
    tile_id: np.ndarray       # int64[B] image the row's tiles were resampled from (-1: none)
    tile_boxes: np.ndarray    # int32[B, N, 4] the crop boxes they were resampled from


# --------------------------------------------------------------------------- generation
def _seeded(rng: np.random.RandomState, seed: int) -> np.random.RandomState:
    """``rng`` re-seeded as ``RandomState(seed)`` (re-seeding costs ~2 us, a new RandomState
    ~200 us); seeds >= 2**32 seed it with their two 32-bit halves."""
    seed = int(seed)
    rng.seed(seed if seed < 2**32 else [seed & 0xFFFFFFFF, seed >> 32])
    return rng


def zoom_levels(rng, n: int, min_zoom: float, gap: float, std: float) -> list[float]:
    """The reference's zoom draws: n normals clamped at min_zoom, sorted ascending."""
    return sorted(max(float(rng.normal(min_zoom + (i + 1) * gap, std)), min_zoom)
                  for i in range(n))


def crop_boxes(rng, zooms, width: int, height: int, nested: bool) -> list[list[int]]:
    """Boxes (left, top, right, bottom) for ascending ``zooms`` in a width x height image, with
    the reference's draws (cx, then cy, per crop), kept inside the image (and, nested, inside
    the previous box)."""
    boxes = []
    pl, pt, pr, pb = 0, 0, width, height
    for z in zooms:
        if nested:
            w = max(1, min(int(width / z), pr - pl))
            h = max(1, min(int(height / z), pb - pt))
            cx = int(rng.randint(pl + w // 2, pr - w // 2 + 1))
            cy = int(rng.randint(pt + h // 2, pb - h // 2 + 1))
            left = min(cx - w // 2, pr - w)
            top = min(cy - h // 2, pb - h)
            pl, pt, pr, pb = left, top, left + w, top + h
        else:
            w = max(1, min(int(width / z), width))
            h = max(1, min(int(height / z), height))
            # An empty range crashed the reference (a zoom below 1): the crop then spans the image.
            cx = int(rng.randint(w // 2, width - w // 2)) if width - w // 2 > w // 2 else w // 2
            cy = int(rng.randint(h // 2, height - h // 2)) if height - h // 2 > h // 2 else h // 2
            left = min(cx - w // 2, width - w)
            top = min(cy - h // 2, height - h)
        boxes.append([left, top, left + w, top + h])
    return boxes


# --------------------------------------------------------------------------- resampling
def _crop(image: np.ndarray, box) -> np.ndarray:
    """image[box] as a contiguous array, black where the box leaves the image (Pillow's crop)."""
    left, top, right, bottom = box
    height, width = image.shape[:2]
    if left >= 0 and top >= 0 and right <= width and bottom <= height:
        return np.ascontiguousarray(image[top:bottom, left:right])
    out = np.zeros((bottom - top, right - left, 3), np.uint8)
    x0, y0 = max(left, 0), max(top, 0)
    x1, y1 = min(right, width), min(bottom, height)
    if x1 > x0 and y1 > y0:
        out[y0 - top:y1 - top, x0 - left:x1 - left] = image[y0:y1, x0:x1]
    return out


def resample_tile(image: np.ndarray, box, out: np.ndarray) -> None:
    """Pillow's ``image.crop(box).resize((224, 224), LANCZOS)`` into ``out`` (224, 224, 3): the
    crop (black where the box leaves the image, as Pillow crops) resampled by
    render/resample.region."""
    crop = _crop(image, box)
    h, w = crop.shape[:2]
    resample.region(crop, (0, 0, w, h), (TILE_PX, TILE_PX), "lanczos", "crop", out=out)


# --------------------------------------------------------------------------- labels
def _label_patches(n: int):
    """Constant label patches, right-aligned in one array (n, 46, max width, 3), and each
    slot's width: black box, white digits (render/labels.py, cropped to ink) centred where the
    reference's digits are."""
    widths = [label_box_w(s + 1) for s in range(n)]
    lw_max = max(widths)
    patches = np.zeros((n, LABEL_BOX_H, lw_max, 3), np.uint8)
    for s in range(n):
        text_ = str(s + 1)
        glyphs = labels.label(text_, LABEL_FONT_PX)
        gh, gw = glyphs.height, glyphs.width
        # Centred on the reference's ink inside the label box: the text starts LABEL_PAD px in,
        # its digits 18 px apart, inking rows 6..26.
        ink_x0 = LABEL_PAD + REF_DIGIT_INK_X[text_[0]][0]
        ink_x1 = LABEL_PAD + REF_DIGIT_W * (len(text_) - 1) + REF_DIGIT_INK_X[text_[-1]][1]
        x = max(labels.centred(ink_x0, ink_x1, gw, round_up=True), 0)
        y = max(labels.centred(LABEL_PAD + REF_INK_TOP, LABEL_PAD + REF_TEXT_H, gh,
                               round_up=True), 0)
        gh, gw = min(gh, LABEL_BOX_H - y), min(gw, widths[s] - x)
        box = patches[s, :, lw_max - widths[s]:]
        box[y:y + gh, x:x + gw] = glyphs.coverage[:gh, :gw, None]   # white on black
    return patches, np.array(widths, np.int64)


# --------------------------------------------------------------------------- prompt
def _prompt(n: int) -> str:
    return (
        f"You are given an original image and {n} zoomed-in views laid out left→right. Your goal "
        "is to rearrange them so they are ordered from *least* to *most* zoomed.\n\n"
        "Available actions:\n"
        "1. 'swap': Swap two zoom-tiles by specifying their 1-based positions. Format: "
        "`('swap', (i, j))` where i and j are 1-based positions.\n"
        "2. 'reorder': Provide the complete ordering in one shot. Format: "
        f"`('reorder', [1, 2, ..., {n}])` where the list gives the desired left-to-right "
        "arrangement.\n"
        "3. 'stop': Finish and lock in the current ordering. Format: `('stop', 'stop')`\n\n"
        "Success: Arrange the views from least to most zoomed (ascending zoom level order).\n\n"
        "Please respond with exactly one action and its arguments in the specified format. "
        "For example:\n"
        "- To swap views: `('swap', (1, 3))`\n"
        "- To reorder all: `('reorder', [1, 3, 2, 4])`\n"
        "- To finalize: `('stop', 'stop')`"
    )


@functools.lru_cache(maxsize=None)   # a few sizes: num_zoom_views is bounded
def _grammar(n: int) -> Grammar:
    """The grammar of a number of views (immutable: shared by every env of that size)."""
    return Grammar([
        ActionSpec("swap", IntArray((2,), n, start=1)),
        ActionSpec("reorder", Permutation(n, start=1, list_only=True)),
        STOP,
    ])


def _whole_tile(image: np.ndarray) -> np.ndarray:
    """Slot 0: the whole photo resampled to a tile (read-only, shared)."""
    whole = np.empty((TILE_PX, TILE_PX, 3), np.uint8)
    resample_tile(image, (0, 0, image.shape[1], image.shape[0]), whole)
    whole.setflags(write=False)
    return whole


# --------------------------------------------------------------------------- the family
class ZoomInPuzzle(slot_puzzle.SlotOrderPuzzle, Family):
    name = "zoom_in_puzzle"
    Params = ZoomInPuzzleParams
    presets = {"easy": ZoomInPuzzleParams(num_zoom_views=4),
               "hard": ZoomInPuzzleParams(num_zoom_views=5)}
    grammar = _grammar(4)   # the instance's own, for its number of views, is set in __init__
    solver_strategies = ("reorder", "swap")
    data_dir_keyword = "sample_dir"
    first_id = 0                 # the State's crop ids are 0-based, as the reference's order
    plan_stop = REFERENCE_STOP
    workspace_type = ZoomWorkspace

    def __init__(self, params: ZoomInPuzzleParams):
        self.n_views = n = int(params.num_zoom_views)
        self._init_slots(params, _grammar(n), n)
        self.min_zoom = float(params.setting("min_zoom_level"))
        self.zoom_gap = float(params.setting("zoom_gap"))
        self.zoom_std = float(params.setting("zoom_std"))
        self.nested = bool(params.setting("nested"))
        try:
            self.source = image_source(params.sample_dir, rule=ZOOM_IN_SCAN,
                                       bundle_task=BUNDLE_TASK)
        except (ValueError, OSError) as error:
            text_ = " ".join(str(error).split())
            raise ValueError(f"sample_dir: {text_[:300]}") from None
        labels, self.label_w = _label_patches(n)
        self.labels = np.ascontiguousarray(labels.reshape(n, LABEL_BOX_H, -1))
        # image id -> its slot-0 tile (the whole photo), shared by this instance's envs
        # (render/atlas.py's store: lazy, locked, bounded).
        self._whole = PictureStore("zoom_in_puzzle whole-photo tiles",
                                   lambda image_id: _whole_tile(self._image(image_id)),
                                   len(self.source), WHOLE_TILE_CACHE * TILE_PX * TILE_PX * 3)
        self._prompt = _prompt(n)

    @property
    def frame_shape(self) -> tuple[int, int]:
        return TILE_PX, TILE_PX * (self.n_views + 1)

    def new_state(self, batch: int) -> ZoomInPuzzleState:
        n = self.n_views
        return ZoomInPuzzleState(
            image_id=np.zeros(batch, np.int32),
            zoom_levels=np.ones((batch, n), np.float64),
            crop_boxes=np.zeros((batch, n, 4), np.int32),
            order=np.broadcast_to(np.arange(n, dtype=np.int32), (batch, n)).copy(),
        )

    def new_workspace(self, batch: int) -> ZoomWorkspace:
        n = self.n_views
        return ZoomWorkspace(
            drawn=np.full((batch, n), -1, np.int32),
            tiles=np.zeros((batch, n + 1, TILE_PX, TILE_PX, 3), np.uint8),
            tile_id=np.full(batch, -1, np.int64),
            tile_boxes=np.zeros((batch, n, 4), np.int32),
        )

    # -- episodes -------------------------------------------------------------------------
    def _image(self, image_id: int) -> np.ndarray:
        return self.source.array(image_id)

    def _fill_tiles(self, state, work: ZoomWorkspace, rows) -> None:
        """Resample the tiles of ``rows`` from their images and boxes into the workspace (many
        tiles on both cores)."""
        jobs = []
        for b in rows:
            image_id = int(state.image_id[b])
            image = self._image(image_id)
            work.tiles[b, 0] = self._whole.picture(image_id)
            for k in range(self.n_views):
                jobs.append((image, state.crop_boxes[b, k].tolist(), work.tiles[b, k + 1]))
            work.tile_id[b] = image_id
            work.tile_boxes[b] = state.crop_boxes[b]
        # The passes release the GIL: the jobs go to the cores in two runs of about equal work
        # (a tile's resampling costs about its source plus its output pixels).
        sizes = np.array([(box[2] - box[0]) * (box[3] - box[1]) + TILE_PX**2
                          for _, box, _ in jobs], np.int64)

        def resample_part(part):
            for k in part.tolist():
                resample_tile(*jobs[k])

        threads.FRAME_POOL.run_parts(resample_part, np.arange(len(jobs)), sizes, THREAD_PIXELS)

    def pick_image(self, seed: int, rng: np.random.RandomState | None = None) -> int:
        """The image of an episode seeded ``seed``: the first of the source's list permuted by
        RandomState(seed), as the reference's constructor permutes it."""
        count = len(self.source)
        if count == 1:
            return 0
        return int(_seeded(rng or np.random.RandomState(), seed).permutation(count)[0])

    def reset_rows(self, state, rows, seeds) -> None:
        n = self.n_views
        rng = np.random.RandomState()   # this call's own: a family may serve several threads
        for b, seed in zip(np.asarray(rows).tolist(), np.asarray(seeds).tolist()):
            image_id = self.pick_image(seed, rng)
            height, width = self._image(image_id).shape[:2]
            _seeded(rng, seed)   # the reference's reset draws from a fresh RandomState(seed)
            zooms = zoom_levels(rng, n, self.min_zoom, self.zoom_gap, self.zoom_std)
            boxes = crop_boxes(rng, zooms, width, height, self.nested)
            order = list(range(n))
            rng.shuffle(order)
            state.image_id[b] = image_id
            state.zoom_levels[b] = zooms
            state.crop_boxes[b] = boxes
            state.order[b] = order

    def _image_name(self, field: str, name):
        """An init state's image: its source id and (height, width), decoded now."""
        if not isinstance(name, str):
            raise ValueError(f"{field}: expected a str, got {describe(name)}")
        try:
            image_id = self.source.id_of(name)
            return image_id, self._image(image_id).shape[:2]
        except ImageFileError as exc:
            raise ValueError(f"{field}: {exc}") from None

    def _zoom_levels(self, field: str, value) -> list:
        zooms = reals(field, value, self.n_views, 1e-6, 1e6)
        if any(b < a for a, b in zip(zooms, zooms[1:])):
            raise ValueError(f"{field}: must be in ascending order (crop 0 the least zoomed), "
                             f"got {describe(list(zooms))}")
        return zooms

    def _view_order(self, field: str, value) -> list:
        n = self.n_views
        if not isinstance(value, (list, tuple)) or len(value) != n or not all(
                is_integer(v) for v in value) or sorted(int(v) for v in value) != list(range(n)):
            raise ValueError(f"{field}: expected a permutation of 0..{n - 1}, got "
                             f"{describe(value)}")
        return [int(v) for v in value]

    def _crop_boxes(self, parsed: dict, where: str) -> dict:
        """The crop boxes, checked against the image (after every field is parsed)."""
        n = self.n_views
        _, (height, width) = parsed["image_name"]
        boxes_in = parsed["crop_boxes"]
        if not isinstance(boxes_in, (list, tuple)) or len(boxes_in) != n:
            raise ValueError(f"{where}.crop_boxes: expected a list of {n} boxes "
                             f"[left, top, right, bottom], got {describe(boxes_in)}")
        boxes = []
        for k, box in enumerate(boxes_in):
            field = f"{where}.crop_boxes[{k}]"
            if not isinstance(box, (list, tuple)) or len(box) != 4 or not all(
                    is_integer(v) for v in box):
                raise ValueError(f"{field}: expected 4 integers [left, top, right, bottom], got "
                                 f"{describe(box)}")
            left, top, right, bottom = (int(v) for v in box)
            if not (-width <= left < right <= 2 * width and -height <= top < bottom <= 2 * height):
                raise ValueError(f"{field}: {describe(list(box))} is not a non-empty box "
                                 f"overlapping the {width}x{height} image")
            if right <= 0 or bottom <= 0 or left >= width or top >= height:
                raise ValueError(f"{field}: {describe(list(box))} lies outside the "
                                 f"{width}x{height} image")
            boxes.append([left, top, right, bottom])
        return {**parsed, "crop_boxes": boxes}

    def load_rows(self, state, rows, init_states) -> None:
        schema = InitSchema({"image_name": self._image_name, "zoom_levels": self._zoom_levels,
                             "crop_boxes": lambda field, value: value,   # checked in finish
                             "current_view_order": self._view_order}, self._crop_boxes)
        for b, init in zip(np.asarray(rows).tolist(), schema.parse_all(init_states)):
            state.image_id[b] = init["image_name"][0]
            state.zoom_levels[b] = init["zoom_levels"]
            state.crop_boxes[b] = init["crop_boxes"]
            state.order[b] = init["current_view_order"]

    def to_init_state(self, state, i: int) -> dict:
        return {
            "image_name": self.source.names[int(state.image_id[i])],
            "zoom_levels": [float(v) for v in state.zoom_levels[i]],
            "crop_boxes": [[int(v) for v in box] for box in state.crop_boxes[i]],
            "current_view_order": [int(v) for v in state.order[i]],
        }

    # step_rows, is_success, goal_state, potential: envs/slot_puzzle.py.

    # -- pixels ---------------------------------------------------------------------------
    # render_rows, render_after_step: envs/slot_puzzle.py, with _stale_tiles, _fill_tiles and
    # _draw. Tiles are a pure function of (image, boxes): only rows showing new ones resample.
    def _stale_tiles(self, state, work: ZoomWorkspace, rows) -> np.ndarray:
        return (work.tile_id[rows] != state.image_id[rows]) | (
            work.tile_boxes[rows] != state.crop_boxes[rows]).any(axis=(1, 2))

    def _draw(self, state, frames, rows, work: ZoomWorkspace, full: bool) -> None:
        batch = frames.shape[0]
        tiles = work.tiles.reshape(batch, self.n_views + 1, TILE_PX, TILE_PX * 3)
        flat = frames.reshape(batch, frames.shape[1], frames.shape[2] * 3)
        blit.draw_tiles(flat, tiles, state.order, work.drawn, self.labels, self.label_w, rows,
                        full)

    def prompt(self, state, i: int, text_mode: bool = False) -> str:
        return self._prompt

    # -- solvers --------------------------------------------------------------------------
    def solve(self, state, rows, strategy, num_steps, seeds) -> list[list[str]]:
        # num_steps is ignored, as in the reference: both plans have a fixed length.
        return self.slot_plans(state, rows, strategy or "reorder")
