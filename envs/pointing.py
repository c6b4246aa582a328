"""What the pointing families (counting, referring_dot_pointing) share, written once.

Both show a picture at its own size and let the agent put dots on it at fractions of that size
(``mark (x, y)``). The picture comes from one of two sources:

* **scenes** (the offline default): procedural scenes of object silhouettes over photographic
  backgrounds (envs/assets/scenes.py), drawn by kernels/scenes.py. The State holds each
  episode's scene geometry (the ``scene_*`` fields, a fixed number of objects per row) and the
  key of its background picture; a scene is a pure function of its seed.
* **dataset**: COCO photographs named by real annotations (envs/assets/coco.py: LVIS for
  counting, RefCOCO+ for referring). The State holds the photo's index in the annotation file.

Pictures (photos, or scene backgrounds) are decoded once per family instance into a
``PictureStore`` and packed per BatchEnv into a ``PictureAtlas`` (render/atlas.py); the State
holds only their ids. A frame is the base picture (copied, or the scene composed over its
background) with the family's dots on top; a step redraws only the square of a dot that moved
or vanished (the base picture again, then the dots that reach into it).

Here: ``PointingState`` (the State class of a family: its own fields plus the scene fields),
``PointingBase`` (a Family mixin with the picture store, the workspace and the base drawing),
the ``mark`` action, data-path resolution (``resolve_path``) and the solvers' mark text.
"""
from __future__ import annotations

import os
from collections import namedtuple
from typing import NamedTuple

import numpy as np

from ..core import threads
from ..core.grammar import FloatVector
from ..core.validate import describe, integer, show_path
from ..kernels import pointing as kernels
from ..render import atlas, blit
from ..render.circles import disk_mask
from .assets import scenes as scene_lib
from .assets.images import ImageFileError, decode_rgb

#: ``mark (x, y)``: fractions of the episode's own frame, compared and kept as float32 (a
#: gymnasium Box(0, 1, (2,), float32) in the reference: ``1.00000001`` is 1.0).
MARK_PAYLOAD = FloatVector(2, 0.0, 1.0, float32=True, decimals=4)
STORE_BYTES = 512 << 20      # decoded pictures kept per family instance
ATLAS_BYTES = 512 << 20      # pictures packed per BatchEnv before its atlas starts over
SCENE_FIELDS = tuple(f"scene_{name}" for name in scene_lib.Scenes._fields)
#: Scene pixels (summed rect areas) a draw call needs before it is split over the frame pool.
SCENE_THREAD_AREA = 2 * 640 * 480
#: Scenes a reset must make before their making is split over the frame pool.
SCENE_THREAD_ROWS = 4
#: The frame capacity of the scene source: every canvas size fits.
SCENE_CAPACITY = (max(h for h, _ in scene_lib.CANVAS_SIZES),
                  max(w for _, w in scene_lib.CANVAS_SIZES))
_CANVAS_H = np.array([h for h, _ in scene_lib.CANVAS_SIZES], np.int32)
_CANVAS_W = np.array([w for _, w in scene_lib.CANVAS_SIZES], np.int32)


def state_class(name: str, fields: tuple[str, ...]):
    """A State NamedTuple class: the family's ``fields`` then the scene fields."""
    return namedtuple(name, (*fields, *SCENE_FIELDS))


def scenes_of(state) -> "scene_lib.Scenes":
    """The scene arrays of a State, as envs/assets/scenes.py's ``Scenes``."""
    return scene_lib.Scenes(*(getattr(state, f) for f in SCENE_FIELDS))


def scene_arrays(batch: int) -> dict:
    """The scene fields of a new State, by field name."""
    return dict(zip(SCENE_FIELDS, scene_lib.new_scenes(batch)))


def mark_text(x: float, y: float) -> str:
    """A solver's mark action, both fractions with 4 decimals (the reference's format)."""
    return f"('mark', ({x:.4f}, {y:.4f}))"


def resolve_path(field: str, value, env_var: str | None, bundle: str | None,
                 exists=os.path.exists) -> str | None:
    """Where a data file or folder is: ``value`` when given (it must exist: ValueError naming
    ``field``), else ``$env_var`` when set (it must exist too, naming the variable), else the
    evaluation bundle's ``bundle`` path under the working directory when it exists, else None
    (the procedural default)."""
    if value is not None:
        path = os.path.expanduser(value)
        if not exists(path):
            raise ValueError(f"{field}: {show_path(value)} does not exist")
        return path
    if env_var and os.environ.get(env_var):
        path = os.path.expanduser(os.environ[env_var])
        if not exists(path):
            raise ValueError(f"{field}: ${env_var} names {show_path(path)}, which does not exist")
        return path
    if bundle is not None and exists(bundle):
        return bundle
    return None


def pixel_field(field: str, value) -> tuple[int, int]:
    """An init state's pixel [x, y] (two ints >= 0); ValueError naming ``field`` otherwise."""
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise ValueError(f"{field}: expected [x, y] pixels, got {describe(value)}")
    return integer(field, value[0], 0), integer(field, value[1], 0)


def check_in_frame(field: str, xy, h: int, w: int) -> None:
    """ValueError naming ``field`` when pixel ``xy`` lies outside a w x h frame."""
    if xy[0] >= w or xy[1] >= h:
        raise ValueError(f"{field}: ({xy[0]}, {xy[1]}) lies outside the {w} x {h} frame")


class PointingWorkspace(NamedTuple):
    rows: np.ndarray        # int64[B] rows of a redraw
    rects: np.ndarray       # int32[B, 4] (x0, y0, x1, y1) of each row's redraw
    whole: np.ndarray       # int32[B, 4] a rect covering any frame
    atlas: atlas.PictureAtlas


class PointingBase:
    """Mixin for the two families (put before ``Family``). The family sets, in ``__init__``:
    ``self.scene_mode`` (bool), ``self.capacity`` ((H, W)), ``self.radius`` and calls
    ``self._init_pictures(loader, count)`` with its picture loader (id -> uint8 (h, w, 3)) and
    number of picture ids. Its State has ``hw`` (int32[B, 2]: the frame's (h, w)) and
    ``picture`` (int64[B]: the base picture's id) besides the scene fields."""

    scene_mode: bool
    capacity: tuple[int, int]
    transient_fields = ("changed", "removed")   # redraw bookkeeping (state_hash)

    def live_counts(self, state) -> dict:
        """The scene's objects up to its count (the family adds its own padded fields)."""
        n = state.scene_n
        return {f"scene_{name}": n for name in ("cat", "colour", "rgb", "cx", "cy", "size",
                                                "angle")}

    def _init_scene_pictures(self, name: str) -> None:
        """The scene source's pictures: every background variant at every canvas size (key
        ``background * len(CANVAS_SIZES) + canvas``)."""
        self.capacity = SCENE_CAPACITY
        self.n_canvases = len(scene_lib.CANVAS_SIZES)
        self._init_pictures(self._background, scene_lib.background_count() * self.n_canvases,
                            name)

    def _background(self, key: int) -> np.ndarray:
        bg, canvas = divmod(int(key), self.n_canvases)
        h, w = scene_lib.CANVAS_SIZES[canvas]
        return scene_lib.background_picture(bg, h, w)

    @staticmethod
    def _generate(generate, rows, *per_row) -> None:
        """``generate(rows, *per_row)`` (a scenes.generate_*_rows call bound to the State's
        scenes), split over the frame pool when there are enough rows: making a scene takes
        tens of microseconds and each row's is independent (the kernels release the GIL)."""
        rows = np.asarray(rows, dtype=np.int64)
        arrays = [np.asarray(a) for a in per_row]
        threads.FRAME_POOL.run_parts(
            lambda part: generate(rows[part], *(a[part] for a in arrays)),
            np.arange(rows.shape[0]), np.ones(rows.shape[0]), SCENE_THREAD_ROWS)

    def _scene_started(self, state, rows) -> None:
        """After scenes were generated into ``rows``: their frame sizes and background keys."""
        rows = np.asarray(rows, dtype=np.int64)
        scenes = scenes_of(state)
        h, w = scenes.height[rows], scenes.width[rows]
        canvas = np.argmax((h[:, None] == _CANVAS_H) & (w[:, None] == _CANVAS_W), axis=1)
        state.picture[rows] = scenes.background[rows].astype(np.int64) * self.n_canvases + canvas
        state.hw[rows, 0] = h
        state.hw[rows, 1] = w

    def _init_pictures(self, loader, count: int, name: str) -> None:
        self.picture_count = int(count)
        self.pictures = atlas.PictureStore(name, loader, self.picture_count, STORE_BYTES)
        self.disk = disk_mask(self.radius)

    @property
    def frame_shape(self) -> tuple[int, int]:
        return self.capacity

    def frame_hw(self, state, out: np.ndarray) -> None:
        out[:] = state.hw

    def decode_photo(self, path: str) -> np.ndarray:
        """A dataset photo, decoded (ImageFileError names an unreadable file, or one larger
        than the frame capacity its annotations gave)."""
        picture = decode_rgb(path)
        h, w = picture.shape[:2]
        if h > self.capacity[0] or w > self.capacity[1]:
            raise ImageFileError(f"{show_path(path)}: {w} x {h} pixels, larger than the "
                                 f"{self.capacity[1]} x {self.capacity[0]} its annotations give")
        return picture

    def clear_padding(self, frames, rows, sizes, old) -> None:
        blit.clear_outside(frames, rows, sizes, old)   # compiled

    def new_workspace(self, batch: int) -> PointingWorkspace:
        whole = np.zeros((batch, 4), np.int32)
        whole[:, 2] = self.capacity[1]
        whole[:, 3] = self.capacity[0]
        return PointingWorkspace(rows=np.empty(batch, np.int64),
                                 rects=np.empty((batch, 4), np.int32), whole=whole,
                                 atlas=atlas.PictureAtlas(self.pictures.picture,
                                                          self.picture_count, ATLAS_BYTES))

    def _work(self, work, batch: int) -> PointingWorkspace:
        if work is None or work.rows.shape[0] < batch:
            return self.new_workspace(batch)
        return work

    def _draw_base(self, state, frames, rows, rects, work) -> None:
        """The base picture (photo, or composed scene) of each row in ``rows`` inside
        ``rects[k]``."""
        pictures = work.atlas
        if self.scene_mode:
            scenes = scenes_of(state)
            if rows.shape[0] < 2:
                scene_lib.draw_rows(frames, rows, pictures, state.picture, scenes, rects)
                return
            # Composing a scene costs a few hundred microseconds: split the rows over the
            # frame pool by their rects' areas (the kernel releases the GIL).
            pictures.ensure_rows(state.picture, rows)
            area = ((rects[:, 2] - rects[:, 0]).astype(np.int64)
                    * (rects[:, 3] - rects[:, 1]))
            index = np.arange(rows.shape[0])
            threads.FRAME_POOL.run_parts(   # ensured above: the workers only read the atlas
                lambda part: scene_lib.draw_rows(frames, rows[part], pictures, state.picture,
                                                 scenes, rects[part], ensure=False),
                index, area, SCENE_THREAD_AREA)
        else:
            # Photos (the real-data source, not a speed path): a NumPy copy per row. (A kernel
            # here would be one the offline warm-up never runs, so bridges/warmup.is_cold
            # would find the family cold for ever.)
            pictures.ensure_rows(state.picture, rows)
            for k, b in enumerate(rows.tolist()):
                photo = pictures.view(int(state.picture[b]))
                h, w = photo.shape[:2]
                x0, y0 = max(int(rects[k, 0]), 0), max(int(rects[k, 1]), 0)
                x1, y1 = min(int(rects[k, 2]), w), min(int(rects[k, 3]), h)
                if x1 > x0 and y1 > y0:
                    frames[b, y0:y1, x0:x1] = photo[y0:y1, x0:x1]

    def _redraw_squares(self, state, frames, rows, centres, work) -> np.ndarray:
        """Redraw the base picture under the dot-sized squares at ``centres`` (int32[B, 2],
        read at ``rows``); returns the rects (int32[k, 4]) for restamping."""
        rects = work.rects[:rows.shape[0]]
        kernels.dot_rects(rows, centres, rows, self.radius, rects)
        self._draw_base(state, frames, rows, rects, work)
        return rects
