"""mental_rotation_2d: two circular crops of one photograph side by side, the left upright, the
right turned by a hidden angle; rotate the right one by integer degrees until it matches the
left, then stop.

Implements spec/envs/mental_rotation_2d.md: the secret angle (a uniform integer in [0, 359],
drawn exactly as the reference draws it after ``reset(seed=s)``: ``np.random.default_rng(s)
.integers(0, 360)``), the agent angle starting at 0 (no rejection: a secret within the tolerance
of 0 starts solved, as in the reference), the rotate (an int in [-180, 180], bools count, floats
such as 45.0 do not) / stop grammar with the reference's feedback wording, agent <- (agent + d)
mod 360, reward 1 on a stop with |(agent - secret) mod 360, folded into (-180, 180]| <= tolerance
(inclusive), the S x 2S frame and the prompt (the tolerance printed with one decimal), and the
solver (chunks of the remaining turn at random cut points).

Frame: left the photo resized to S x S (``cv2.resize(INTER_LINEAR)`` exactly:
render/resample.linear) and masked by OpenCV's filled disk of radius S // 2 centred at
(S // 2, S // 2) (render/circles.disk_mask); right that masked picture turned clockwise on screen
by (agent - secret) mod 360 about (S // 2, S // 2) with OpenCV 4's fixed-point bilinear warp and
zero border, masked again (render/rotate.rotate_rows). Both reference frames are reproduced pixel
for pixel. The prepared pictures (masked, packed three channels to a uint64 for the warp) are
kept in the family's PictureStore and packed per BatchEnv into a PictureAtlas (render/atlas.py);
the State holds picture ids, never pixels. A reset draws both panels (the left one is the warp
at angle 0, an exact copy); a step redraws only the right panel of the episodes that rotated, on
the shared frame pool (about 42 us of one core a panel; docs/envs/mental_rotation_2d.md, "Speed").

Presets: ``easy`` tolerance 10.0, ``hard`` 5.0, image_size 128 (the registered ids and the
evaluation harness agree here).

Deviations from the reference, on purpose:
- Image source: ``sample_dir`` (the reference's keyword), else ``$VIS_GYM_IMAGE_DIR``, else the
  evaluation bundle's ``partial_datasets/2d_rotation`` under the working directory, else the
  built-in photos (envs/assets/images.py, at the reference photos' 336-px scale). The reference
  also looked for an implicit ``data/images``. A named folder that is missing or holds no images
  raises a ValueError naming ``sample_dir`` and the path. Folders are scanned as the reference
  scans them: jpg/jpeg/png/bmp/tiff/tif anywhere below the folder, case-insensitive, sorted by
  path.
- The photo is a pure function of the episode seed (``ImageSource.pick_id``), never "the next
  image" of a list shuffled by a constructor seed, so there is no "No more images to load".
- Init states name the photo by basename (``image_name``, interface). Where two photos of a
  folder share a basename, the reference took the first in its shuffled order; here a name that
  is a photo's path relative to the folder (``sub/img.png``, or ``img.png`` at the top) picks
  that photo, and any other basename the first photo of that name in sorted path order
  (deterministic); ``state_dicts()`` writes the relative path for a photo whose basename is
  shared, so round trips stay exact. A name that is no photo of the folder (also any path
  leading out of it) is a ValueError naming ``image_name`` (the reference's error did not say
  which field or file); an unreadable photo is a ValueError naming the field and the file.
  ``secret_angle`` and ``agent_angle`` must be finite numbers in [0, 360) (the reference copied
  anything).
- Payloads: a huge int such as ``('rotate', 100000000000000000000)`` is an invalid payload
  (feedback), never an exception (the reference's gymnasium Discrete check raised
  OverflowError past int64).
- The solver's random draws (the number of chunks, the cut points) come from a generator seeded
  by the episode's state (both angles and the photo: ``solver_seed``), so a plan is a pure
  function of the state, reproducible and equal after a JSON round trip of ``state_dicts()``;
  the reference drew them from the env's RNG (and so did not repeat). ``solve`` takes no
  strategy (a strategy raises ValueError).
- Photos are decoded by Pillow (envs/assets/images.py) instead of cv2.imread: grey, palette,
  16-bit, BMP, TIFF and JPEG photos give the same pixels here (tested against cv2), but a photo
  with transparency is composited onto white (the shared image layer's rule), where
  cv2.imread(IMREAD_COLOR) drops the alpha channel.
- ``max_steps`` is BatchEnv's step budget (the reference silently ignored it), and the
  reference's constructor ``seed`` (its image order) has no counterpart.

Kept as interface: a possibly solved start; basename ids; ints in [-180, 180] only; any 1-4
character alphanumeric stop payload.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ..core.family import Family, goal_distance
from ..core.grammar import STOP, STOP_ACTION, ActionSpec, Grammar, IntChoice
from ..core.validate import InitSchema, describe, integer, real
from ..kernels.mental_rotation_2d import (apply_rotations, changed_rows, rotation_errors,
                                          shown_angles)
# Modules, not names: bridges/warmup.py finds the compiled kernels through the modules a family
# module refers to.
from ..render import atlas, resample, rotate
from ..render.circles import disk_mask
from .assets.images import COLORIZATION_SCAN, ImageFileError
from .photo_common import bounded, open_image_source, random_chunks, sample_dir_param

BUNDLE_TASK = "2d_rotation"
#: The reference's scan: jpg/jpeg/png/bmp/tiff/tif anywhere below the folder, case-insensitive
#: (the same rule as colorization's).
MENTAL_ROTATION_SCAN = COLORIZATION_SCAN
MIN_IMAGE_SIZE = 8
MAX_IMAGE_SIZE = 1024
STORE_BYTES = 128 << 20     # prepared pictures kept per family instance (shared by its envs)
ATLAS_BYTES = 256 << 20     # prepared pictures packed per BatchEnv before its atlas starts over,
ATLAS_ROWS = 4              # ... or this many pictures per episode if more: a large batch on a
                            # large folder then starts over once per ~3 B new photos, not a step
PACKED_CHANNELS = 8         # a packed pixel (uint64) as 8 bytes in the atlas
SOLVER_SALT = 0x6D723264    # "mr2d": keeps the solver's stream apart from other uses of a state


@dataclass(frozen=True)
class MentalRotation2DParams:
    """tolerance: the largest error (degrees, 0..180, inclusive) a stop is rewarded at;
    image_size: S, the side of each panel (frame S x 2S; 8..1024); sample_dir: the photo folder
    (None: $VIS_GYM_IMAGE_DIR, the bundle's partial_datasets/2d_rotation, the built-in
    photos)."""

    tolerance: float = 5.0
    image_size: int = 128
    sample_dir: str | None = None

    def __post_init__(self):
        object.__setattr__(self, "tolerance", real("tolerance", self.tolerance, 0.0, 180.0))
        object.__setattr__(self, "image_size", integer("image_size", self.image_size,
                                                       MIN_IMAGE_SIZE, MAX_IMAGE_SIZE))
        object.__setattr__(self, "sample_dir", sample_dir_param(self.sample_dir))


class MentalRotation2DState(NamedTuple):
    secret: np.ndarray      # float64[B] hidden angle, degrees in [0, 360)
    agent: np.ndarray       # float64[B] the agent's accumulated turn, degrees in [0, 360)
    image_id: np.ndarray    # int64[B] the photo's index in the family's image source (-1: none)
    changed: np.ndarray     # bool[B] rows whose right panel the last step turned (redraw)


class MentalRotation2DWorkspace(NamedTuple):
    rows: np.ndarray        # int64[B] rows to redraw after a step
    angles: np.ndarray      # float64[B] clockwise turn of each right panel
    zeros: np.ndarray       # float64[B] 0: the left panel is a rotation by 0
    offsets: np.ndarray     # int64[B] where each row's picture starts in the atlas (pixels)
    atlas: atlas.PictureAtlas


GRAMMAR = Grammar([ActionSpec("rotate", IntChoice(361, -180)), STOP])


def _prompt(tolerance: float) -> str:
    return (
        "You are solving a mental rotation task. Two panels appear side by side:\n"
        "- Left: the original circular image.\n"
        "- Right: the image has been rotated by a secret angle.\n"
        "Your job is to undo that rotation and align the right image back to match the left.\n"
        "\nAvailable actions:\n"
        "1. 'rotate': Rotate the right image by an integer angle. Format: `('rotate', angle)` "
        "where angle is an integer between -180 and 180 degrees (positive is clockwise, "
        "negative is counterclockwise).\n"
        "2. 'stop': Submit your final adjustment. Format: `('stop', 'stop')`\n"
        f"\nSuccess: You succeed if your final adjustment undoes the secret rotation within "
        f"±{tolerance:.1f}°.\n"
        "\nPlease respond with exactly one action and its arguments in the specified format. "
        "For example:\n"
        "- To rotate clockwise: `('rotate', 45)`\n"
        "- To rotate counterclockwise: `('rotate', -30)`\n"
        "- To submit: `('stop', 'stop')`"
    )


def secret_for_seed(seed: int) -> int:
    """The reference's secret angle after ``reset(seed=seed)``."""
    return int(np.random.default_rng(int(seed)).integers(0, 360))


def solver_plan(secret: float, agent: float, tolerance: float, num_steps: int | None,
                rng) -> list[str]:
    """The reference's solver (spec 10) with ``rng`` for its draws: the signed remaining turn
    delta in (-180, 180]; a stop if it is within the tolerance; else T = round(|delta|) split
    into min(k, T) chunks at distinct random cut points (k = num_steps, or uniform in {2, 3,
    4}), one rotate each, then stop."""
    delta = (secret - agent) % 360.0
    if delta > 180.0:
        delta -= 360.0
    if abs(delta) <= tolerance:
        return [STOP_ACTION]
    total = round(abs(delta))
    if total <= 1:
        return [f"('rotate', {round(delta)})", STOP_ACTION]
    k = int(rng.integers(2, 5)) if num_steps is None else max(1, int(num_steps))
    sign = 1 if delta > 0 else -1
    return [f"('rotate', {sign * c})" for c in random_chunks(total, k, rng)] + [STOP_ACTION]


class MentalRotation2D(Family):
    name = "mental_rotation_2d"
    transient_fields = ("changed",)   # redraw bookkeeping (state_hash)
    Params = MentalRotation2DParams
    presets = {"easy": MentalRotation2DParams(tolerance=10.0),
               "hard": MentalRotation2DParams(tolerance=5.0)}
    grammar = GRAMMAR
    data_dir_keyword = "sample_dir"

    def __init__(self, params: MentalRotation2DParams):
        super().__init__(params)
        self.size = params.image_size
        self.center = params.image_size // 2
        self.tolerance = params.tolerance
        self.source = open_image_source(params.sample_dir, rule=MENTAL_ROTATION_SCAN,
                                        bundle_task=BUNDLE_TASK)
        # Basename -> the first photo of that name in sorted path order; shared basenames.
        by_base: dict[str, int] = {}
        shared: set[str] = set()
        for k, name in enumerate(self.source.names):
            base = name.rsplit("/", 1)[-1]
            if base in by_base:
                shared.add(base)
            else:
                by_base[base] = k
        self._by_basename = by_base
        self._shared_basenames = frozenset(shared)
        mask = self._disk(params.image_size)
        self.mask = mask
        self.mask.setflags(write=False)
        self.span_lo, self.span_hi = rotate.disk_spans(mask)
        self.span_lo.setflags(write=False)
        self.span_hi.setflags(write=False)
        self.picture_bytes = params.image_size ** 2 * PACKED_CHANNELS
        self.pictures = atlas.PictureStore("mental_rotation_2d pictures", self._prepare,
                                     len(self.source), STORE_BYTES)
        self._prompt = _prompt(params.tolerance)

    @staticmethod
    def _disk(size: int) -> np.ndarray:
        """bool[size, size]: OpenCV's filled disk of radius size // 2 at (size // 2, size // 2),
        clipped to the panel."""
        r = size // 2
        disk = disk_mask(r)
        out = np.zeros((size, size), np.bool_)
        n = min(size, 2 * r + 1)
        out[:n, :n] = disk[:n, :n]
        return out

    # -- shapes ---------------------------------------------------------------------------
    @property
    def frame_shape(self) -> tuple[int, int]:
        return (self.size, 2 * self.size)

    def new_state(self, batch: int) -> MentalRotation2DState:
        return MentalRotation2DState(
            secret=np.zeros(batch, np.float64),
            agent=np.zeros(batch, np.float64),
            image_id=np.full(batch, -1, np.int64),
            changed=np.zeros(batch, np.bool_),
        )

    def new_workspace(self, batch: int) -> MentalRotation2DWorkspace:
        return MentalRotation2DWorkspace(
            rows=np.empty(batch, np.int64), angles=np.empty(batch, np.float64),
            zeros=np.zeros(batch, np.float64), offsets=np.zeros(batch, np.int64),
            atlas=atlas.PictureAtlas(self.pictures.picture, len(self.source),
                                     max(ATLAS_BYTES, ATLAS_ROWS * batch * self.picture_bytes),
                                     channels=PACKED_CHANNELS))

    def _work(self, work, batch: int) -> MentalRotation2DWorkspace:
        if work is None or work.rows.shape[0] < batch:
            return self.new_workspace(batch)
        return work

    # -- pictures -------------------------------------------------------------------------
    def masked_picture(self, image_id: int) -> np.ndarray:
        """uint8[S, S, 3]: photo ``image_id`` resized to S x S and masked by the disk (the
        left panel). ImageFileError names an unreadable file."""
        photo = self.source.array(image_id)
        resized = resample.linear(photo, (self.size, self.size))
        resized[~self.mask] = 0
        return resized

    def _prepare(self, image_id: int) -> np.ndarray:
        # The atlas entry: the masked picture packed for the warp, as (S, S, 8) bytes.
        packed = rotate.pack_rgb(self.masked_picture(image_id))
        return packed.view(np.uint8).reshape(self.size, self.size, PACKED_CHANNELS)

    # -- episodes -------------------------------------------------------------------------
    def reset_rows(self, state, rows, seeds) -> None:
        rows = np.asarray(rows, dtype=np.int64)
        seeds = [int(s) for s in np.asarray(seeds, dtype=np.uint64).tolist()]
        ids = [self.source.pick_id(s) for s in seeds]
        for k in ids:   # decode first: an unreadable file changes nothing
            self.pictures.picture(k)
        state.secret[rows] = [float(secret_for_seed(s)) for s in seeds]
        state.agent[rows] = 0.0
        state.image_id[rows] = ids
        state.changed[rows] = False

    def _image_name(self, field: str, name) -> int:
        """An init state's photo: its source id (decoded here, so an unreadable file is refused
        before anything changes)."""
        if not isinstance(name, str):
            raise ValueError(f"{field}: expected an image file name (str), got {describe(name)}")
        try:
            image_id = self.source.id_of(name)     # an exact relative path first
        except ImageFileError:
            image_id = self._by_basename.get(name)
        if image_id is None:
            raise ValueError(
                f"{field}: {describe(name)} is not an image of "
                f"{bounded(self.source.origin, 200)} ({len(self.source)} images; named by "
                f"basename, e.g. {describe(self._name_of(0))})")
        try:
            self.pictures.picture(image_id)
        except ImageFileError as error:
            raise ValueError(f"{field}: {bounded(error)}") from None
        return image_id

    @staticmethod
    def _angle(field: str, value) -> float:
        angle = real(field, value, 0.0)
        if not angle < 360.0:
            raise ValueError(f"{field}: must be < 360, got {angle!r}")
        return angle + 0.0   # -0.0 becomes 0.0

    def load_rows(self, state, rows, init_states) -> None:
        schema = InitSchema({"image_name": self._image_name, "secret_angle": self._angle,
                             "agent_angle": self._angle})
        for b, init in zip(np.asarray(rows).tolist(), schema.parse_all(init_states)):
            state.image_id[b] = init["image_name"]
            state.secret[b] = init["secret_angle"]
            state.agent[b] = init["agent_angle"]
            state.changed[b] = False

    def _name_of(self, image_id: int) -> str:
        """The init-state name of a photo: its basename, or its relative path where another
        photo of the folder shares the basename."""
        name = self.source.names[image_id]
        base = name.rsplit("/", 1)[-1]
        return name if base in self._shared_basenames else base

    def to_init_state(self, state, i: int) -> dict:
        image_id = int(state.image_id[i])
        return {
            "image_name": self._name_of(image_id) if image_id >= 0 else None,
            "secret_angle": float(state.secret[i]),
            "agent_angle": float(state.agent[i]),
        }

    def step_rows(self, state, actions, rows, reward, terminated, feedback) -> None:
        # Only one non-stop action: every row in ``rows`` rotates by ints[b, 0].
        apply_rotations(state.agent, actions.ints, rows, state.changed)

    def rotation_error(self, state) -> np.ndarray:
        """float64[B]: degrees still to undo, |(agent - secret) mod 360| folded into [0, 180]
        (the reference's ``info['rotation_error']``)."""
        out = np.empty(state.agent.shape[0], np.float64)
        rotation_errors(state.agent, state.secret, out)
        return out

    def is_success(self, state) -> np.ndarray:
        return self.rotation_error(state) <= self.tolerance

    def potential(self, state, out) -> None:
        # Degrees still to undo (0 exactly on success states).
        error = self.rotation_error(state)
        goal_distance(error, error <= self.tolerance, out)

    def metrics(self, state) -> dict:
        return {"rotation_error": self.rotation_error(state)}

    def goal_state(self, state):
        state.agent[:] = state.secret
        state.changed[:] = False
        return state

    # -- pixels -----------------------------------------------------------------------------
    def _offsets(self, state, rows, work: MentalRotation2DWorkspace) -> np.ndarray:
        """The atlas (as uint64 pixels) and each row's picture offset in it."""
        pictures = work.atlas
        pictures.ensure_rows(state.image_id, rows)
        slots = pictures.slot_of[state.image_id[rows]]
        work.offsets[rows] = pictures.slot_off[slots] // PACKED_CHANNELS
        return pictures.buffer[:pictures.used].view(np.uint64)

    def _draw_right(self, state, frames, rows, work, src) -> None:
        shown_angles(state.agent, state.secret, work.angles)
        rotate.rotate_rows(src, work.offsets, self.size, frames, rows, work.angles, 0, self.size,
                    self.center, self.center, self.span_lo, self.span_hi)

    def render_rows(self, state, frames, rows, work) -> None:
        rows = np.ascontiguousarray(rows, dtype=np.int64)
        if rows.shape[0] == 0:
            return
        work = self._work(work, frames.shape[0])
        src = self._offsets(state, rows, work)
        # Left: the masked picture (a rotation by 0 copies it exactly, disk included).
        rotate.rotate_rows(src, work.offsets, self.size, frames, rows, work.zeros, 0, 0,
                           self.center, self.center, self.span_lo, self.span_hi)
        self._draw_right(state, frames, rows, work, src)

    def render_after_step(self, state, frames, work) -> None:
        work = self._work(work, frames.shape[0])
        count = changed_rows(state.changed, work.rows)
        if count == 0:
            return
        rows = work.rows[:count]
        src = self._offsets(state, rows, work)
        self._draw_right(state, frames, rows, work, src)

    def prompt(self, state, i: int, text_mode: bool = False) -> str:
        return self._prompt

    # -- solver -----------------------------------------------------------------------------
    @staticmethod
    def solver_seed(state, i: int) -> np.random.SeedSequence:
        """The seed of episode i's solver draws: its state (both angles' bits and its photo),
        so a plan is a pure function of what ``state_dicts()`` records (equal after a JSON
        round trip) and the same on every call."""
        bits = np.array([state.secret[i], state.agent[i]], np.float64).view(np.uint64)
        return np.random.SeedSequence([int(bits[0]), int(bits[1]), int(state.image_id[i]) + 1,
                                       SOLVER_SALT])

    def solve(self, state, rows, strategy, num_steps, seeds) -> list[list[str]]:
        if strategy is not None:
            raise ValueError(f"strategy: {self.name} has one solver and takes no strategy, got "
                             f"{describe(strategy)}")
        plans = []
        for b in np.asarray(rows, dtype=np.int64).tolist():
            rng = np.random.default_rng(self.solver_seed(state, b))
            plans.append(solver_plan(float(state.secret[b]), float(state.agent[b]),
                                     self.tolerance, num_steps, rng))
        return plans
