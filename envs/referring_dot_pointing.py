"""referring_dot_pointing: put a dot on the object a short expression refers to, then stop.

Implements spec/envs/referring_dot_pointing.md: the mark (a float32 pair in [0, 1]) / stop
grammar with the reference's feedback wording, one dot that each mark moves, reward 1 on a stop
with a dot inside the referred object's mask (the union of the category's masks in the image
with ``accept_any_same_category``), the dot drawn as a filled disk of radius ``radius``, green
where the mean luma of the 3 x 3 patch under it exceeds 127, else red, the prompt (quoting the
frame's W and H) and the solver (``num_steps`` marks from a random mask pixel to the target
point, then stop).

Pictures, two sources (envs/pointing.py):
- **scenes** (the default, offline): procedural scenes of 4-10 objects (envs/assets/scenes.py)
  with a template expression (category, colour, size, position, relation) that is generated and
  checked to pick out exactly one object; the mask is that object's visible part (exact, from
  the compositor's own geometry). Init states: ``scene_seed``.
- **RefCOCO+** (real data, UNC split): ``sample_dir`` holding ``refcoco+/refs(unc).p``,
  ``refcoco+/instances.json`` and ``refcoco+/images/mscoco/images/train2014/``, else
  ``$VIS_GYM_REFCOCO_DIR``, else the evaluation bundle's ``partial_datasets`` under the working
  directory. The pickle is read by a restricted unpickler (containers and scalars only; any
  class or callable is refused before anything runs); masks are decoded from the annotations'
  polygons / RLE exactly as pycocotools does (envs/assets/refcoco.py). The reference list is every
  ref of every split whose image exists and whose mask is non-empty, sorted by id (spec 3).
  Init states are the reference's (``ref_id``, ``sentence_idx``).

Deviations from the reference, on purpose:
- The pixel of a mark is ``round(x * (W - 1))`` (float32 product, half to even), as the prompt
  says; the reference floored while its prompt said round.
- The solver's last mark is the target's centre of mass when that pixel lies in the mask (the
  reference's plan), else the mask pixel nearest to it (ties: the first in row-major order):
  the reference's centroid fell outside non-convex or multi-part masks and its own solver then
  scored 0. Its random start pixel comes from a generator seeded by the episode's state (the
  ref or scene, the sentence and the dot), so a plan is a pure function of the state; the
  reference drew it from the env's RNG.
- A plain reset picks ref ``valid[np.random.default_rng(seed).permutation(len(valid))[0]]``
  (the reference's first ref for a constructor seed equal to the episode seed), as a pure
  function of the seed: no "All references exhausted".
- An init state may carry the dot (``dot``: [x, y] pixels), so a mid-episode state
  round-trips; a ``sentence_idx`` out of range falls back to sentence 0 as in the reference, a
  ref id not in the annotations is a ValueError naming ``ref_id``.
- Photos are decoded by Pillow (identical to cv2.imread on the COCO JPEGs).
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from ..core.family import Family, goal_distance
from ..core.grammar import STOP, STOP_ACTION, ActionSpec, Grammar
from ..core.validate import InitSchema, boolean, describe, integer, show_path
from ..kernels import pointing as kernels
from ..render import atlas
from .assets import refcoco
from .assets import scenes as scene_lib
from .assets.images import ImageFileError
from .photo_common import bounded, path_param
from .pointing import (MARK_PAYLOAD, PointingBase, check_in_frame, mark_text,
                       pixel_field, resolve_path, scene_arrays, scenes_of,
                       state_class)

BUNDLE_DIR = "partial_datasets"
DATASET = "refcoco+"
MASK_BYTES = 256 << 20
SOLVER_SALT = 0x72656670   # "refp"

GRAMMAR = Grammar([ActionSpec("mark", MARK_PAYLOAD), STOP])


def _prompt(expression: str, width: int, height: int) -> str:
    return (
        f"Your goal is to point to '{expression}' in the image.\n\n"
        "Available actions:\n"
        "1. 'mark': Mark a point at the specified coordinates. Format: `('mark', (x_norm, "
        "y_norm))` where x_norm, y_norm are normalized coordinates between 0.0 and 1.0, which "
        f"map to pixel x = round(x_norm*({width}-1)), y = round(y_norm*({height}-1)).\n"
        "2. 'stop': Submit your current mark as final answer. Format: `('stop', 'stop')`\n\n"
        "Please respond with exactly one action and its arguments in the specified format. "
        "For example:\n"
        "- To mark center: `('mark', (0.5, 0.5))`\n"
        "- To submit: `('stop', 'stop')`"
    )


@dataclass(frozen=True)
class ReferringParams:
    """sample_dir: the folder holding ``refcoco+/`` (None: $VIS_GYM_REFCOCO_DIR, the bundle's
    partial_datasets, the procedural scenes); splitBy: the REFER split file (``refs(<splitBy>).p``);
    radius: the dot radius (px); accept_any_same_category: any object of the referred category
    counts; data_chunk: (start, end) slice of the sorted valid ref ids."""

    sample_dir: str | None = None
    splitBy: str = "unc"
    radius: int = 5
    accept_any_same_category: bool = False
    data_chunk: tuple | None = None

    def __post_init__(self):
        set_ = object.__setattr__
        set_(self, "sample_dir", path_param("sample_dir", self.sample_dir))
        if not isinstance(self.splitBy, str) or not self.splitBy.isidentifier():
            raise ValueError(f"splitBy: expected a split name such as 'unc', got "
                             f"{describe(self.splitBy)}")
        set_(self, "radius", integer("radius", self.radius, 0, 64))
        set_(self, "accept_any_same_category",
             boolean("accept_any_same_category", self.accept_any_same_category))
        chunk = self.data_chunk
        if chunk is not None:
            if (not isinstance(chunk, (list, tuple)) or len(chunk) != 2 or not all(
                    v is None or (isinstance(v, (int, np.integer)) and not isinstance(v, bool))
                    for v in chunk)):
                raise ValueError(f"data_chunk: expected (start, end) ints, got "
                                 f"{describe(chunk)}")
            set_(self, "data_chunk", tuple(None if v is None else int(v) for v in chunk))


ReferringState = state_class("ReferringState", (
    "hw",           # int32[B, 2] the frame's (height, width)
    "picture",      # int64[B] the base picture's id (photo index; scenes: background key)
    "ref",          # int64[B] RefCOCO: the ref's position in the family's ref table
    "sentence",     # int32[B] RefCOCO: the expression's index among the ref's sentences
    "scene_seed",   # uint64[B] scenes: the scene's seed
    "dot",          # int32[B, 2] (x, y) pixels
    "has_dot",      # bool[B]
    "hit",          # bool[B] the dot lies in the mask (a stop now would score)
    "changed",      # int8[B] what the last step changed (kernels.pointing UNCHANGED/...)
    "removed",      # int32[B, 2] the dot the last step moved away from
))


class ReferringDotPointing(PointingBase, Family):
    name = "referring_dot_pointing"
    Params = ReferringParams
    presets = {"easy": ReferringParams(), "hard": ReferringParams()}
    difficulty_knobs = ("accept_any_same_category",)   # the presets differ in the step budget only
    grammar = GRAMMAR
    solver_strategies = ("mark",)
    data_dir_keyword = "sample_dir"


    def live_counts(self, state) -> dict:
        return {**super().live_counts(state), "dot": state.has_dot}

    def __init__(self, params: ReferringParams):
        super().__init__(params)
        self.mark_kind = self.grammar.index("mark")
        self.radius = params.radius
        self.same_category = params.accept_any_same_category
        root = self._find_data(params)
        self.scene_mode = root is None
        if self.scene_mode:
            self._init_scene_pictures("referring backgrounds")
        else:
            self._init_refcoco(params, root)

    # -- sources ------------------------------------------------------------------------
    @staticmethod
    def _find_data(params) -> str | None:
        def has_dataset(path):
            return os.path.isdir(os.path.join(path, DATASET))

        root = resolve_path("sample_dir", params.sample_dir, "VIS_GYM_REFCOCO_DIR", None,
                            os.path.isdir)
        if root is not None:
            if not has_dataset(root) and has_dataset(os.path.join(root, BUNDLE_DIR)):
                root = os.path.join(root, BUNDLE_DIR)       # a bundle root
            if not has_dataset(root):
                raise ValueError(f"sample_dir: {show_path(root)} holds no {DATASET}/ folder "
                                 f"(refs({params.splitBy}).p, instances.json, images/)")
            return root
        if has_dataset(BUNDLE_DIR):
            return BUNDLE_DIR
        return None

    def _init_refcoco(self, params, root: str) -> None:
        try:
            self.data = refcoco.load_refcoco(root, split_by=params.splitBy, dataset=DATASET)
        except refcoco.AnnotationFileError as error:
            raise ValueError(f"sample_dir: {bounded(error)}") from None
        valid = list(self.data.valid_ids)
        if params.data_chunk is not None:
            valid = valid[slice(*params.data_chunk)]
        if not valid:
            raise ValueError(f"sample_dir: {show_path(root)} has no usable reference (each "
                             f"needs its image and a non-empty mask)"
                             f"{' in data_chunk' if params.data_chunk else ''}")
        self.valid = tuple(valid)
        self.ref_ids = tuple(sorted(self.data.refs))
        self._ref_pos = {r: k for k, r in enumerate(self.ref_ids)}
        index = self.data.index
        images = [self.data.refs[r].image_index for r in self.valid]
        self.capacity = (int(max(index.image_height[images].max(), 1)),
                         int(max(index.image_width[images].max(), 1)))
        self._init_pictures(self._photo, len(index.image_ids), "referring photos")
        self.masks = atlas.PictureStore("referring masks", self._mask_picture,
                                        len(self.ref_ids), MASK_BYTES)

    def _photo(self, image: int) -> np.ndarray:
        return self.decode_photo(refcoco.image_path(self.data, image))

    def ref_mask(self, ref_pos: int, same_category: bool | None = None) -> np.ndarray:
        """bool[h, w]: the mask a dot must hit for ref ``ref_pos`` (``same_category``: the
        union of its category's masks; None: as the params say), at the photo's size (the
        annotation's size cropped or padded, should the two differ)."""
        ref_id = self.ref_ids[ref_pos]
        if same_category is None:
            same_category = self.same_category
        mask = refcoco.ref_mask(self.data, ref_id, same_category)
        h, w = self.pictures.dims(self.data.refs[ref_id].image_index)
        if mask.shape != (h, w):
            out = np.zeros((h, w), np.bool_)
            hh, ww = min(h, mask.shape[0]), min(w, mask.shape[1])
            out[:hh, :ww] = mask[:hh, :ww]
            mask = out
        return mask

    def _mask_picture(self, ref_pos: int) -> np.ndarray:
        return self.ref_mask(ref_pos).view(np.uint8)[:, :, None]

    # -- shapes -------------------------------------------------------------------------
    def new_state(self, batch: int):
        return ReferringState(
            hw=np.ones((batch, 2), np.int32),
            picture=np.zeros(batch, np.int64),
            ref=np.full(batch, -1, np.int64),
            sentence=np.zeros(batch, np.int32),
            scene_seed=np.zeros(batch, np.uint64),
            dot=np.zeros((batch, 2), np.int32),
            has_dot=np.zeros(batch, np.bool_),
            hit=np.zeros(batch, np.bool_),
            changed=np.zeros(batch, np.int8),
            removed=np.zeros((batch, 2), np.int32),
            **scene_arrays(batch),
        )

    # -- episodes -----------------------------------------------------------------------
    def _clear(self, state, b) -> None:
        state.dot[b] = 0
        state.has_dot[b] = False
        state.hit[b] = False
        state.changed[b] = 0
        state.removed[b] = 0

    def _start_scenes(self, state, rows: list, seeds: list) -> None:
        scenes = scenes_of(state)
        self._generate(lambda r, s: scene_lib.generate_referring_rows(scenes, r, s), rows,
                       np.asarray(seeds, np.uint64))
        self._scene_started(state, rows)
        state.scene_seed[rows] = seeds
        state.ref[rows] = -1
        state.sentence[rows] = 0

    def _start_ref(self, state, b: int, ref_pos: int, sentence: int) -> None:
        image = self.data.refs[self.ref_ids[ref_pos]].image_index
        h, w = self.pictures.dims(image)
        state.picture[b] = image
        state.hw[b] = (h, w)
        state.ref[b] = ref_pos
        state.sentence[b] = sentence
        state.scene_seed[b] = 0

    def reset_rows(self, state, rows, seeds) -> None:
        rows = np.asarray(rows, dtype=np.int64).tolist()
        seeds = [int(s) for s in np.asarray(seeds, dtype=np.uint64).tolist()]
        if self.scene_mode:
            self._start_scenes(state, rows, seeds)
            self._clear(state, rows)
            return
        n = len(self.valid)
        picks = [self._ref_pos[self.valid[int(np.random.default_rng(s).permutation(n)[0])]]
                 for s in seeds]
        for k in picks:   # decode first: an unreadable photo changes nothing
            self.pictures.picture(self.data.refs[self.ref_ids[k]].image_index)
            self.masks.picture(k)
        for b, k in zip(rows, picks):
            self._start_ref(state, b, k, 0)
            self._clear(state, b)

    @staticmethod
    def _dot_field(field: str, value):
        return None if value is None else pixel_field(field, value)

    def _schema(self) -> InitSchema:
        dot = (self._dot_field, None)
        if self.scene_mode:
            return InitSchema({"scene_seed": lambda f, v: integer(f, v, 0, 2**64 - 1),
                               "dot": dot}, finish=self._finish_scene)
        return InitSchema({"ref_id": lambda f, v: integer(f, v),
                           "sentence_idx": (lambda f, v: integer(f, v, 0), 0),
                           "dot": dot}, finish=self._finish_ref)

    def _finish_scene(self, parsed: dict, where: str) -> dict:
        probe = scene_lib.new_scenes(1)
        scene_lib.generate_referring(probe, 0, parsed["scene_seed"])
        self._check_dot(parsed, where, int(probe.height[0]), int(probe.width[0]))
        return parsed

    def _finish_ref(self, parsed: dict, where: str) -> dict:
        ref_pos = self._ref_pos.get(parsed["ref_id"])
        if ref_pos is None:
            raise ValueError(f"{where}.ref_id: no reference {parsed['ref_id']} in the "
                             f"annotations beside {show_path(self.data.image_dir)}")
        ref = self.data.refs[parsed["ref_id"]]
        if ref.image_index < 0:
            raise ValueError(f"{where}.ref_id: the image of reference {parsed['ref_id']} is "
                             f"not listed in instances.json")
        if parsed["sentence_idx"] >= len(ref.sentences):
            parsed["sentence_idx"] = 0      # the reference falls back to sentence 0
        try:
            h, w = self.pictures.dims(ref.image_index)
            self.masks.picture(ref_pos)
        except ImageFileError as error:
            raise ValueError(f"{where}.ref_id: {bounded(error)}") from None
        parsed["ref_pos"] = ref_pos
        self._check_dot(parsed, where, h, w)
        return parsed

    @staticmethod
    def _check_dot(parsed: dict, where: str, h: int, w: int) -> None:
        if parsed["dot"] is not None:
            check_in_frame(f"{where}.dot", parsed["dot"], h, w)

    def load_rows(self, state, rows, init_states) -> None:
        parsed = self._schema().parse_all(init_states)
        rows = np.asarray(rows, dtype=np.int64)
        for b, init in zip(rows.tolist(), parsed):
            if self.scene_mode:
                self._start_scenes(state, [b], [init["scene_seed"]])
            else:
                self._start_ref(state, b, init["ref_pos"], init["sentence_idx"])
            self._clear(state, b)
            if init["dot"] is not None:
                state.dot[b] = init["dot"]
                state.has_dot[b] = True
        self._update_hits(state, rows[state.has_dot[rows]])

    def to_init_state(self, state, i: int) -> dict:
        if self.scene_mode:
            out = {"scene_seed": int(state.scene_seed[i])}
        else:
            out = {"ref_id": int(self.ref_ids[int(state.ref[i])]),
                   "sentence_idx": int(state.sentence[i])}
        if state.has_dot[i]:
            out["dot"] = state.dot[i].tolist()
        return out

    # -- dynamics -------------------------------------------------------------------------
    def _update_hits(self, state, rows) -> None:
        """state.hit of ``rows`` (int64) from the mask at their dots."""
        rows = np.ascontiguousarray(rows, dtype=np.int64)
        if rows.shape[0] == 0:
            return
        if self.scene_mode:
            sc = scenes_of(state)
            t = scene_lib.TEMPLATES
            kernels.scene_hits(rows, state.dot, sc.target, self.same_category, sc.n, sc.cat,
                               sc.cx, sc.cy, sc.size, sc.angle, t.verts, t.ring_start,
                               t.cat_ring, state.hit)
            return
        for b in rows.tolist():   # a mask per moved dot (the store keeps them decoded)
            mask = self.masks.picture(int(state.ref[b]))
            state.hit[b] = bool(mask[state.dot[b, 1], state.dot[b, 0], 0])

    def step_rows(self, state, actions, rows, reward, terminated, feedback) -> None:
        kernels.pointing_step(actions.kind, actions.floats, rows, state.hw, state.dot,
                              state.has_dot, state.changed, state.removed, self.mark_kind)
        moved = np.flatnonzero(state.changed)
        if moved.shape[0]:
            self._update_hits(state, moved)

    def is_success(self, state) -> np.ndarray:
        return state.has_dot & state.hit

    def potential(self, state, out) -> None:
        # A documented proxy: 0 on a hit, 1 with a dot off the target, 2 without a dot.
        distance = np.where(state.has_dot, 1.0, 2.0)
        goal_distance(distance, self.is_success(state), out)

    def metrics(self, state) -> dict:
        return {"hit": (state.has_dot & state.hit).astype(np.float64)}

    # -- pixels -----------------------------------------------------------------------------
    def render_rows(self, state, frames, rows, work) -> None:
        rows = np.ascontiguousarray(rows, dtype=np.int64)
        if rows.shape[0] == 0:
            return
        work = self._work(work, frames.shape[0])
        self._draw_base(state, frames, rows, work.whole[:rows.shape[0]], work)
        kernels.stamp_contrast_dots(frames, rows, state.dot, state.has_dot, self.disk, state.hw)

    def render_after_step(self, state, frames, work) -> None:
        work = self._work(work, frames.shape[0])
        count = kernels.rows_with(state.changed, kernels.REMOVED, work.rows)
        if count:
            rows = work.rows[:count].copy()
            self._redraw_squares(state, frames, rows, state.removed, work)
            kernels.stamp_contrast_dots(frames, rows, state.dot, state.has_dot, self.disk,
                                        state.hw)
        count = kernels.rows_with(state.changed, kernels.ADDED, work.rows)
        if count:
            kernels.stamp_contrast_dots(frames, work.rows[:count], state.dot, state.has_dot,
                                        self.disk, state.hw)

    def expression(self, state, i: int) -> str:
        """Episode i's referring expression."""
        if self.scene_mode:
            return scene_lib.referring_expression(scenes_of(state), i)
        ref = self.data.refs[self.ref_ids[int(state.ref[i])]]
        return ref.sentences[int(state.sentence[i])]

    def prompt(self, state, i: int, text_mode: bool = False) -> str:
        h, w = (int(v) for v in state.hw[i])
        return _prompt(self.expression(state, i), w, h)

    # -- solver -----------------------------------------------------------------------------
    def target_mask(self, state, i: int, instance: bool = False) -> np.ndarray:
        """bool[h, w]: the pixels a dot of episode i must hit (``instance``: those of the
        referred object alone, even with ``accept_any_same_category``)."""
        h, w = (int(v) for v in state.hw[i])
        same_category = self.same_category and not instance
        if not self.scene_mode:
            return self.ref_mask(int(state.ref[i]), same_category)
        scenes = scenes_of(state)
        target = int(scenes.target[i])
        out = np.zeros((h, w), np.bool_)
        keep = np.zeros((h, w), np.bool_)
        for k in range(int(scenes.n[i])):
            if k == target or (same_category and scenes.cat[i, k] == scenes.cat[i, target]):
                scene_lib.visible_mask(scenes, i, k, keep)
                out |= keep
        return out

    @staticmethod
    def goal_point(mask: np.ndarray) -> tuple[float, float]:
        """The solver's last point (x, y): the mask's centre of mass when its rounded pixel lies
        in the mask, else the mask pixel nearest to it (ties: first in row-major order); the
        frame centre for an empty mask."""
        ys, xs = np.nonzero(mask)
        h, w = mask.shape
        if ys.shape[0] == 0:
            return (w - 1) / 2.0, (h - 1) / 2.0
        cx, cy = float(xs.mean()), float(ys.mean())
        px, py = int(np.rint(cx)), int(np.rint(cy))
        if 0 <= px < w and 0 <= py < h and mask[py, px]:
            return cx, cy
        k = int(np.argmin((xs - cx) ** 2 + (ys - cy) ** 2))
        return float(xs[k]), float(ys[k])

    def solver_seed(self, state, i: int) -> np.random.SeedSequence:
        """Episode i's solver draws: seeded by its state (what ``state_dicts()`` records)."""
        return np.random.SeedSequence([int(state.scene_seed[i]), int(state.ref[i]) + 1,
                                       int(state.sentence[i]), int(state.dot[i, 0]),
                                       int(state.dot[i, 1]), int(state.has_dot[i]), SOLVER_SALT])

    def solve(self, state, rows, strategy, num_steps, seeds) -> list[list[str]]:
        if strategy not in (None, "mark"):
            raise ValueError(f"strategy: {self.name} has one solver ('mark'), got "
                             f"{describe(strategy)}")
        steps = 3 if num_steps is None else max(1, int(num_steps))
        plans = []
        for b in np.asarray(rows, dtype=np.int64).tolist():
            mask = self.target_mask(state, b, instance=True)   # the referred object itself
            h, w = mask.shape
            cx, cy = self.goal_point(mask)
            ys, xs = np.nonzero(mask)
            rng = np.random.default_rng(self.solver_seed(state, b))
            if ys.shape[0]:
                k = int(rng.integers(ys.shape[0]))
                sx, sy = float(xs[k]), float(ys[k])
            else:
                sx, sy = cx, cy
            plan = []
            for t in range(1, steps + 1):
                x = sx + t / steps * (cx - sx) if t < steps else cx
                y = sy + t / steps * (cy - sy) if t < steps else cy
                plan.append(mark_text(min(max(x / max(w - 1, 1), 0.0), 1.0),
                                      min(max(y / max(h - 1, 1), 0.0), 1.0)))
            plan.append(STOP_ACTION)
            plans.append(plan)
        return plans
