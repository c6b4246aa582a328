"""counting: count the instances of a named category in a picture, with dots to keep track
(``mark``, ``undo``), a recorded count (``guess``) and ``stop``.

Implements spec/envs/counting.md: the mark (a float32 pair in [0, 1] -> pixel
``floor(x * (W - 1))``) / undo (any 1-6 character alphanumeric string) / guess (an int in
[0, max_count], bools count, floats do not) / stop grammar with the reference's feedback wording,
reward 1 on a stop with a recorded guess equal to the true count, red dots of radius ``radius``
drawn in placement order (OpenCV's filled LINE_8 disk), the prompt (the category's name as
given, the guess range stated as [min_count, max_count]), and the ``mark_all`` / ``guess_only``
solvers.

Pictures, two sources (envs/pointing.py):
- **scenes** (the default, offline): procedural scenes of object silhouettes over photographic
  backgrounds (envs/assets/scenes.py): a target category and a count drawn from the episode's
  seed (the category uniform over the scene vocabulary, or over ``categories``; the count uniform
  in [min_count, max_count]), the targets with varied scale, rotation, colour and shading,
  partly occluded, among distractors of other categories. Init states: ``scene_seed``,
  ``category_name``, ``true_count`` (the scene is rebuilt from them).
- **LVIS** (real data): LVIS v1 annotations and COCO images, found as ``annotation_file`` /
  ``sample_dir``, else ``$VIS_GYM_LVIS_ANNOTATION_FILE`` / ``$VIS_GYM_LVIS_DIR``, else the
  evaluation bundle's ``partial_datasets/counting`` (JSON and flat image folder) under the
  working directory or under a ``sample_dir`` that is a bundle root. The sample list is built as
  spec section 3 says (envs/assets/coco.lvis_samples: image order, first-appearance category
  walk, ``not_exhaustive_category_ids`` with ``require_exhaustive``, ``categories``,
  ``data_chunk``); the JSON is parsed once and cached as a compact index
  (envs/assets/coco.load_coco_index). Init states are the reference's (``file_name``,
  ``category_name``, ``true_count``, ``cat_id``, ``img_id``).

Deviations from the reference, on purpose (bugs the spec lists are fixed):
- A plain reset picks sample ``np.random.default_rng(seed).permutation(S)[0]``: the reference's
  first sample for a constructor seed equal to the episode seed, as a pure function of the
  seed; there is no "next sample" and no "All LVIS samples exhausted.".
- ``reset(init_state=...)`` keeps ``img_id`` (the reference set it to None, so its centres were
  lost and ``get_init_state`` reported a stale sample): the solver marks every instance after a
  reload too, and the init state read back is the one loaded. An init state is checked against
  the annotations (the image, the category and its name, the count): a mismatch is a
  ValueError naming the field.
- ``mark_all`` places at most ``max_marks`` dots (18 easy, 28 hard: the step budget less the
  guess and the stop), so the solver always fits its budget (the reference's exceeded it for
  counts near max_count).
- ``categories`` works (it crashed the reference's constructor).
- The dots of an episode are bounded by ``max_dots`` (64, beyond any step budget); a mark past
  it is refused with feedback (the reference's list grew without bound). Init states carry the
  dots and the guess when there are any (``dots``, ``guess``), so a mid-episode state round-trips.
- Photos are decoded by Pillow (identical to cv2.imread on the COCO JPEGs).

Kept as interface: guesses below min_count are accepted; the prompt states [min_count,
max_count] while guesses in [0, max_count] are valid; category names are shown raw
(``trash_can``, ``bow_(weapon)``).
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from ..core.family import FAMILY_BASE, Family, goal_distance
from ..core.grammar import STOP, STOP_ACTION, ActionSpec, Grammar, IntChoice, StopToken
from ..core.validate import InitSchema, boolean, describe, integer, rule, show_path
from ..kernels import pointing as kernels
from .assets import coco
from .assets import scenes as scene_lib
from .assets.images import ImageFileError
from .photo_common import bounded, path_param
from .pointing import (MARK_PAYLOAD, PointingBase, check_in_frame, mark_text,
                       pixel_field, resolve_path, scene_arrays, scenes_of,
                       state_class)

BUNDLE_DIR = os.path.join("partial_datasets", "counting")
ANNOTATION_NAME = "lvis_v1_train.json"
MAX_DOTS = 64
MAX_SCENE_COUNT = 30
FULL_CODE = FAMILY_BASE
SOLVER_STRATEGIES = ("mark_all", "guess_only")


def _categories_param(value):
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, (list, tuple)) or not value or not all(
            isinstance(v, str) and v for v in value):
        raise ValueError(f"categories: expected a non-empty list of category names, got "
                         f"{describe(value)}")
    return tuple(value)


def _chunk_param(value):
    if value is None:
        return None
    if (not isinstance(value, (list, tuple)) or len(value) != 2
            or not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) or v is None
                       for v in value)):
        raise ValueError(f"data_chunk: expected (start, end) ints, got {describe(value)}")
    return tuple(None if v is None else int(v) for v in value)


@dataclass(frozen=True)
class CountingParams:
    """min_count / max_count: the count range of a sample (max_count also bounds a guess);
    radius: the dot radius (px); annotation_file / sample_dir: LVIS JSON and COCO image folder
    (None: $VIS_GYM_LVIS_ANNOTATION_FILE / $VIS_GYM_LVIS_DIR, the bundle, the procedural
    scenes); categories: restrict to these category names; require_exhaustive: skip
    non-exhaustively annotated image/category pairs; data_chunk: (start, end) slice of the
    sorted sample list; max_marks: the most dots mark_all places; max_dots: the most dots an
    episode holds."""

    min_count: int = 2
    max_count: int = 10
    radius: int = 5
    annotation_file: str | None = None
    sample_dir: str | None = None
    categories: tuple | None = None
    require_exhaustive: bool = True
    data_chunk: tuple | None = None
    max_marks: int = 18
    max_dots: int = MAX_DOTS

    def __post_init__(self):
        set_ = object.__setattr__
        set_(self, "max_count", integer("max_count", self.max_count, 0, 10_000))
        set_(self, "min_count", integer("min_count", self.min_count, 0, self.max_count))
        rule("min_count", "at most max_count")
        rule("max_count", f"at most {MAX_SCENE_COUNT} on the built-in scenes (no LVIS data)")
        set_(self, "radius", integer("radius", self.radius, 0, 64))
        set_(self, "annotation_file", path_param("annotation_file", self.annotation_file))
        set_(self, "sample_dir", path_param("sample_dir", self.sample_dir))
        set_(self, "categories", _categories_param(self.categories))
        set_(self, "require_exhaustive", boolean("require_exhaustive", self.require_exhaustive))
        set_(self, "data_chunk", _chunk_param(self.data_chunk))
        set_(self, "max_dots", integer("max_dots", self.max_dots, 1, 4096))
        set_(self, "max_marks", integer("max_marks", self.max_marks, 0, 4096))


CountingState = state_class("CountingState", (
    "hw",           # int32[B, 2] the frame's (height, width)
    "picture",      # int64[B] the base picture's id (photo index; scenes: background key)
    "sample",       # int64[B] LVIS: the sample's index in the sample list (-1: loaded pair)
    "image",        # int64[B] LVIS: the image's index in the annotation index
    "category",     # int64[B] LVIS category id; scenes: index into scenes.CATEGORIES
    "true_count",   # int32[B]
    "guess",        # int32[B] -1: none
    "dots",         # int32[B, max_dots, 2] (x, y) pixels, placement order
    "n_dots",       # int32[B]
    "scene_seed",   # uint64[B] scenes: the scene's seed
    "changed",      # int8[B] what the last step changed (kernels.pointing UNCHANGED/...)
    "removed",      # int32[B, 2] the dot the last step removed
))


def _grammar(max_count: int) -> Grammar:
    return Grammar([ActionSpec("mark", MARK_PAYLOAD),
                    ActionSpec("undo", StopToken(max_length=6)),
                    ActionSpec("guess", IntChoice(max_count + 1)),
                    STOP])


def _prompt(category: str, min_count: int, max_count: int) -> str:
    return (
        f"You are solving a {category}-counting task. Count the number of {category} in the "
        "image. You can place dots to mark instances and then record your final count.\n\n"
        "Available actions:\n"
        "1. 'mark': Place a dot at normalized coordinates. Format: `('mark', (x, y))` where x "
        "and y are normalized coordinates between 0.0 and 1.0.\n"
        "2. 'undo': Remove your last placed dot. Format: `('undo', 'undo')`\n"
        "3. 'guess': Record your count guess. Format: `('guess', N)` where N is an integer "
        f"between {min_count} and {max_count}.\n"
        "4. 'stop': End the counting session. Format: `('stop', 'stop')`\n\n"
        "Success: You succeed if your final count guess matches the true number of objects.\n\n"
        "Please respond with exactly one action and its arguments in the specified format. "
        "For example:\n"
        "- To mark a point: `('mark', (0.5, 0.3))`\n"
        "- To undo: `('undo', 'undo')`\n"
        "- To guess count: `('guess', 5)`\n"
        "- To stop: `('stop', 'stop')`"
    )


class Counting(PointingBase, Family):
    name = "counting"
    Params = CountingParams
    presets = {"easy": CountingParams(min_count=2, max_count=20, max_marks=18),
               "hard": CountingParams(min_count=5, max_count=30, max_marks=28)}
    grammar = _grammar(20)   # the instance's own (its guess range) is set in __init__
    feedback_texts = ("There is no room for another dot (at most {max_dots} on the image); "
                      "undo a dot first.",)
    solver_strategies = SOLVER_STRATEGIES
    data_dir_keyword = "sample_dir"


    def live_counts(self, state) -> dict:
        return {**super().live_counts(state), "dots": state.n_dots}

    def __init__(self, params: CountingParams):
        self.grammar = _grammar(params.max_count)
        super().__init__(params)
        self.mark_kind = self.grammar.index("mark")
        self.undo_kind = self.grammar.index("undo")
        self.guess_kind = self.grammar.index("guess")
        self.radius = params.radius
        self.max_dots = params.max_dots
        self.feedback_texts = (type(self).feedback_texts[0].format(max_dots=params.max_dots),)
        files = self._find_data(params)
        self.scene_mode = files is None
        if self.scene_mode:
            self._init_scenes(params)
        else:
            self._init_lvis(params, *files)

    # -- sources ------------------------------------------------------------------------
    @staticmethod
    def _find_data(params) -> tuple[str, str] | None:
        """(annotation file, image folder) of the LVIS source, or None for the scenes."""
        bundle_json = os.path.join(BUNDLE_DIR, ANNOTATION_NAME)
        sample_dir = params.sample_dir
        if sample_dir is not None:
            sample_dir = resolve_path("sample_dir", sample_dir, None, None, os.path.isdir)
            inside = os.path.join(sample_dir, BUNDLE_DIR)
            if os.path.isfile(os.path.join(inside, ANNOTATION_NAME)):
                sample_dir = inside       # a bundle root
        annotation = resolve_path("annotation_file", params.annotation_file,
                                  "VIS_GYM_LVIS_ANNOTATION_FILE", None, os.path.isfile)
        if annotation is None and sample_dir is not None:
            beside = os.path.join(sample_dir, ANNOTATION_NAME)
            if not os.path.isfile(beside):
                raise ValueError(
                    f"annotation_file: none given, $VIS_GYM_LVIS_ANNOTATION_FILE is not set and "
                    f"sample_dir {show_path(sample_dir)} holds no {ANNOTATION_NAME}")
            annotation = beside
        if sample_dir is None:
            sample_dir = resolve_path("sample_dir", None, "VIS_GYM_LVIS_DIR", None, os.path.isdir)
        if annotation is None and sample_dir is None:
            if os.path.isfile(bundle_json):
                return bundle_json, BUNDLE_DIR
            return None
        if annotation is None:
            raise ValueError(f"annotation_file: the image folder {show_path(sample_dir)} was "
                             f"named but no LVIS annotation file (annotation_file or "
                             f"$VIS_GYM_LVIS_ANNOTATION_FILE)")
        if sample_dir is None:
            sample_dir = os.path.dirname(os.path.abspath(annotation))
        return annotation, sample_dir

    def _init_scenes(self, params) -> None:
        names = scene_lib.CATEGORIES
        if params.categories is None:
            self.scene_categories = tuple(range(len(names)))
        else:
            unknown = [c for c in params.categories if c not in names]
            if unknown:
                raise ValueError(f"categories: {describe(unknown)} are not scene categories "
                                 f"(the procedural scenes draw {', '.join(names)})")
            self.scene_categories = tuple(names.index(c) for c in params.categories)
        if params.max_count > MAX_SCENE_COUNT:
            raise ValueError(f"max_count: the procedural scenes hold at most {MAX_SCENE_COUNT} "
                             f"instances, got {params.max_count}")
        self._init_scene_pictures("counting backgrounds")

    def _init_lvis(self, params, annotation: str, image_dir: str) -> None:
        try:
            self.index = coco.load_coco_index(annotation)
        except coco.AnnotationFileError as error:
            raise ValueError(f"annotation_file: {bounded(error)}") from None
        self.image_dir = image_dir
        try:
            self.samples = coco.lvis_samples(self.index, params.min_count, params.max_count,
                                             params.categories, params.require_exhaustive,
                                             params.data_chunk)
        except ValueError as error:
            raise ValueError(bounded(error)) from None
        if len(self.samples.image_index) == 0:
            raise ValueError(f"annotation_file: {show_path(annotation)} has no image with "
                             f"{params.min_count}..{params.max_count} instances of a category"
                             f"{' among categories' if params.categories else ''}")
        index = self.index
        self._by_file: dict[str, int] = {}
        for i, name in enumerate(index.image_file):
            self._by_file.setdefault(name, i)
        heights = index.image_height[self.samples.image_index]
        widths = index.image_width[self.samples.image_index]
        self.capacity = (int(max(heights.max(), 1)), int(max(widths.max(), 1)))
        self._init_pictures(self._photo, len(index.image_ids), "counting photos")

    def _photo(self, image: int) -> np.ndarray:
        return self.decode_photo(os.path.join(self.image_dir, self.index.image_file[image]))

    # -- shapes -------------------------------------------------------------------------
    def new_state(self, batch: int):
        return CountingState(
            hw=np.ones((batch, 2), np.int32),
            picture=np.zeros(batch, np.int64),
            sample=np.full(batch, -1, np.int64),
            image=np.full(batch, -1, np.int64),
            category=np.zeros(batch, np.int64),
            true_count=np.zeros(batch, np.int32),
            guess=np.full(batch, -1, np.int32),
            dots=np.zeros((batch, self.max_dots, 2), np.int32),
            n_dots=np.zeros(batch, np.int32),
            scene_seed=np.zeros(batch, np.uint64),
            changed=np.zeros(batch, np.int8),
            removed=np.zeros((batch, 2), np.int32),
            **scene_arrays(batch),
        )

    # -- episodes -----------------------------------------------------------------------
    def _clear(self, state, b) -> None:
        """No guess, no dots, nothing changed, for row(s) ``b``."""
        state.guess[b] = -1
        state.dots[b] = 0
        state.n_dots[b] = 0
        state.changed[b] = 0
        state.removed[b] = 0

    def _start_scenes(self, state, rows: list, seeds: list, categories: list,
                      counts: list) -> None:
        scenes = scenes_of(state)
        self._generate(lambda r, s, c, k: scene_lib.generate_counting_rows(scenes, r, s, c, k),
                       rows, np.asarray(seeds, np.uint64), categories, counts)
        self._scene_started(state, rows)
        state.scene_seed[rows] = seeds
        state.category[rows] = categories
        state.true_count[rows] = counts
        state.sample[rows] = -1
        state.image[rows] = -1

    def _start_sample(self, state, b: int, image: int, category: int, count: int,
                      sample: int) -> None:
        h, w = self.pictures.dims(image)
        state.picture[b] = image
        state.image[b] = image
        state.hw[b] = (h, w)
        state.category[b] = category
        state.true_count[b] = count
        state.sample[b] = sample
        state.scene_seed[b] = 0

    def reset_rows(self, state, rows, seeds) -> None:
        rows = np.asarray(rows, dtype=np.int64).tolist()
        seeds = [int(s) for s in np.asarray(seeds, dtype=np.uint64).tolist()]
        p = self.params
        if self.scene_mode:
            choices = [scene_lib.counting_choice(seed, p.min_count, p.max_count,
                                                 self.scene_categories)
                       for seed in seeds]
            self._start_scenes(state, rows, seeds, [c for c, _ in choices],
                               [n for _, n in choices])
            self._clear(state, rows)
            return
        n = len(self.samples.image_index)
        picks = [int(np.random.default_rng(seed).permutation(n)[0]) for seed in seeds]
        for k in picks:   # decode first: an unreadable photo changes nothing
            self.pictures.picture(int(self.samples.image_index[k]))
        for b, k in zip(rows, picks):
            self._start_sample(state, b, int(self.samples.image_index[k]),
                               int(self.samples.category_id[k]), int(self.samples.count[k]), k)
            self._clear(state, b)

    # -- init states --------------------------------------------------------------------
    def _dots_field(self, field: str, value):
        if not isinstance(value, (list, tuple)) or len(value) > self.max_dots:
            raise ValueError(f"{field}: expected a list of at most {self.max_dots} [x, y] "
                             f"pixels, got {describe(value)}")
        return [pixel_field(f"{field}[{k}]", d) for k, d in enumerate(value)]

    def _guess_field(self, field: str, value):
        return None if value is None else integer(field, value, 0, self.params.max_count)

    def _schema(self) -> InitSchema:
        common = {"category_name": lambda f, v: self._str(f, v),
                  "true_count": lambda f, v: integer(f, v, 0),
                  "dots": (self._dots_field, []), "guess": (self._guess_field, None)}
        if self.scene_mode:
            return InitSchema({"scene_seed": lambda f, v: integer(f, v, 0, 2**64 - 1),
                               **common}, finish=self._finish_scene)
        return InitSchema({"file_name": lambda f, v: self._str(f, v),
                           "cat_id": lambda f, v: integer(f, v),
                           "img_id": (lambda f, v: None if v is None else integer(f, v), None),
                           **common}, finish=self._finish_lvis)

    @staticmethod
    def _str(field: str, value) -> str:
        if not isinstance(value, str):
            raise ValueError(f"{field}: expected a str, got {describe(value)}")
        return value

    def _finish_scene(self, parsed: dict, where: str) -> dict:
        names = scene_lib.CATEGORIES
        if parsed["category_name"] not in names:
            raise ValueError(f"{where}.category_name: {describe(parsed['category_name'])} is not "
                             f"a scene category ({', '.join(names)})")
        parsed["category"] = names.index(parsed["category_name"])
        if parsed["true_count"] > MAX_SCENE_COUNT:
            raise ValueError(f"{where}.true_count: a scene holds at most {MAX_SCENE_COUNT} "
                             f"instances, got {parsed['true_count']}")
        probe = scene_lib.new_scenes(1)
        scene_lib.generate_counting(probe, 0, parsed["scene_seed"], parsed["category"],
                                    parsed["true_count"])
        h, w = int(probe.height[0]), int(probe.width[0])
        self._check_dots(parsed, where, h, w)
        return parsed

    def _finish_lvis(self, parsed: dict, where: str) -> dict:
        index = self.index
        if parsed["img_id"] is not None:
            image = index.image_index(parsed["img_id"])
            if image is None:
                raise ValueError(f"{where}.img_id: no image {parsed['img_id']} in "
                                 f"{show_path(index.path)}")
            if index.image_file[image] != parsed["file_name"]:
                raise ValueError(f"{where}.file_name: image {parsed['img_id']} is "
                                 f"{describe(index.image_file[image])}, not "
                                 f"{describe(parsed['file_name'])}")
        else:
            image = self._by_file.get(parsed["file_name"])
            if image is None:
                raise ValueError(f"{where}.file_name: {describe(parsed['file_name'])} is no "
                                 f"image of {show_path(index.path)}")
        name = index.category_name(parsed["cat_id"])
        if name is None:
            raise ValueError(f"{where}.cat_id: no category {parsed['cat_id']} in "
                             f"{show_path(index.path)}")
        if name != parsed["category_name"]:
            raise ValueError(f"{where}.category_name: category {parsed['cat_id']} is "
                             f"{describe(name)}, not {describe(parsed['category_name'])}")
        count = len(self._targets(image, parsed["cat_id"]))
        if count != parsed["true_count"]:
            raise ValueError(f"{where}.true_count: image {int(index.image_ids[image])} has "
                             f"{count} instances of {name}, not {parsed['true_count']}")
        try:
            h, w = self.pictures.dims(image)
        except ImageFileError as error:
            raise ValueError(f"{where}.file_name: {bounded(error)}") from None
        parsed["image"] = image
        self._check_dots(parsed, where, h, w)
        return parsed

    @staticmethod
    def _check_dots(parsed: dict, where: str, h: int, w: int) -> None:
        for k, xy in enumerate(parsed["dots"]):
            check_in_frame(f"{where}.dots[{k}]", xy, h, w)

    def load_rows(self, state, rows, init_states) -> None:
        parsed = self._schema().parse_all(init_states)
        for b, init in zip(np.asarray(rows, dtype=np.int64).tolist(), parsed):
            if self.scene_mode:
                self._start_scenes(state, [b], [init["scene_seed"]], [init["category"]],
                                   [init["true_count"]])
            else:
                self._start_sample(state, b, init["image"], init["cat_id"], init["true_count"],
                                   -1)
            self._clear(state, b)
            for k, d in enumerate(init["dots"]):
                state.dots[b, k] = d
            state.n_dots[b] = len(init["dots"])
            state.guess[b] = -1 if init["guess"] is None else init["guess"]

    def category_name(self, state, i: int) -> str:
        if self.scene_mode:
            return scene_lib.CATEGORIES[int(state.category[i])]
        return self.index.category_name(int(state.category[i]))

    def to_init_state(self, state, i: int) -> dict:
        if self.scene_mode:
            out = {"scene_seed": int(state.scene_seed[i])}
        else:
            image = int(state.image[i])
            out = {"file_name": self.index.image_file[image]}
        out["category_name"] = self.category_name(state, i)
        out["true_count"] = int(state.true_count[i])
        if not self.scene_mode:
            out["cat_id"] = int(state.category[i])
            out["img_id"] = int(self.index.image_ids[int(state.image[i])])
        n = int(state.n_dots[i])
        if n:
            out["dots"] = state.dots[i, :n].tolist()
        if state.guess[i] >= 0:
            out["guess"] = int(state.guess[i])
        return out

    # -- dynamics -------------------------------------------------------------------------
    def step_rows(self, state, actions, rows, reward, terminated, feedback) -> None:
        kernels.counting_step(actions.kind, actions.floats, actions.ints, rows, state.hw,
                              state.dots, state.n_dots, state.guess, state.changed,
                              state.removed, feedback, self.mark_kind, self.undo_kind,
                              self.guess_kind, FULL_CODE)

    def is_success(self, state) -> np.ndarray:
        return state.guess == state.true_count

    def potential(self, state, out) -> None:
        # |guess - true count|; true count + 1 before any guess.
        error = np.where(state.guess >= 0, np.abs(state.guess - state.true_count),
                         state.true_count + 1)
        goal_distance(error, self.is_success(state), out)

    def metrics(self, state) -> dict:
        # -1 before any guess (not NaN: equal episodes give equal infos).
        error = np.where(state.guess >= 0, np.abs(state.guess - state.true_count), -1)
        return {"count_error": error.astype(np.float64), "dots": state.n_dots.astype(np.float64)}

    # -- pixels -----------------------------------------------------------------------------
    def render_rows(self, state, frames, rows, work) -> None:
        rows = np.ascontiguousarray(rows, dtype=np.int64)
        if rows.shape[0] == 0:
            return
        work = self._work(work, frames.shape[0])
        self._draw_base(state, frames, rows, work.whole[:rows.shape[0]], work)
        kernels.stamp_dot_lists(frames, rows, state.dots, state.n_dots, self.disk, state.hw,
                                work.whole[:rows.shape[0]], 255, 0, 0)

    def render_after_step(self, state, frames, work) -> None:
        work = self._work(work, frames.shape[0])
        count = kernels.rows_with(state.changed, kernels.ADDED, work.rows)
        if count:
            kernels.stamp_last_dots(frames, work.rows[:count], state.dots, state.n_dots,
                                    self.disk, state.hw, 255, 0, 0)
        count = kernels.rows_with(state.changed, kernels.REMOVED, work.rows)
        if count:
            rows = work.rows[:count].copy()
            rects = self._redraw_squares(state, frames, rows, state.removed, work)
            kernels.stamp_dot_lists(frames, rows, state.dots, state.n_dots, self.disk,
                                    state.hw, rects, 255, 0, 0)

    def prompt(self, state, i: int, text_mode: bool = False) -> str:
        return _prompt(self.category_name(state, i), self.params.min_count,
                       self.params.max_count)

    # -- solver -----------------------------------------------------------------------------
    def _targets(self, image: int, category: int) -> list[int]:
        """The annotation indices of ``category`` in image ``image``, in annotation order."""
        anns = self.index.image_annotations(image)
        return [int(a) for a in anns if int(self.index.ann_category[a]) == category]

    def centres(self, state, i: int) -> list[tuple[float, float]]:
        """Episode i's instance centres in pixels (x, y), in the solver's order: LVIS: each
        target annotation's mask centre (its bbox centre when the mask is empty), decoded at
        the image's annotated size; scenes: a pixel well inside each target's visible part."""
        if self.scene_mode:
            scenes = scenes_of(state)
            targets = scene_lib.target_indices(scenes, i, int(state.category[i]))
            return [(float(x), float(y)) for x, y in
                    scene_lib.visible_points(scenes, i, targets).tolist()]
        image = int(state.image[i])
        h = int(self.index.image_height[image])
        w = int(self.index.image_width[image])
        return [tuple(map(float, self.index.centre(a, h, w)))
                for a in self._targets(image, int(state.category[i]))]

    def solve(self, state, rows, strategy, num_steps, seeds) -> list[list[str]]:
        strategy = "mark_all" if strategy is None else strategy
        if strategy not in SOLVER_STRATEGIES:
            raise ValueError(f"strategy: expected one of {', '.join(SOLVER_STRATEGIES)}, got "
                             f"{describe(strategy)}")
        plans = []
        for b in np.asarray(rows, dtype=np.int64).tolist():
            plan = []
            if strategy == "mark_all":
                h, w = (int(v) for v in state.hw[b])
                room = min(self.params.max_marks, self.max_dots - int(state.n_dots[b]))
                for cx, cy in self.centres(state, b)[:max(room, 0)]:
                    if self.scene_mode:   # pixel centres, so floor(x * (W - 1)) gives them back
                        cx, cy = cx + 0.5, cy + 0.5
                    plan.append(mark_text(min(max(cx / max(w - 1, 1), 0.0), 1.0),
                                          min(max(cy / max(h - 1, 1), 0.0), 1.0)))
            plan.append(f"('guess', {int(state.true_count[b])})")
            plan.append(STOP_ACTION)
            plans.append(plan)
        return plans
