"""The clip layer: where video_unshuffle's short clips come from, and how frames are chosen.

Sources, in DESIGN's order ("Assets and real data"), as envs/assets/images.py resolves photos:

1. a directory the caller names (video_unshuffle's ``root_dir`` keyword);
2. else the reference's environment variable ``VIS_GYM_VIDEO_DIR``;
3. else the published evaluation bundle's ``partial_datasets/ssv2`` under the working directory;
4. else the built-in procedural clips (``ProceduralClips``): ``PROCEDURAL_CLIPS`` animated
   224 x 224 scenes whose time direction is visible (an object moving between two posts, a
   container filling, an object being covered by a box, an object pushed off a table and
   falling, a stack growing, a shape shrinking until it disappears), with a distractor that
   swings back and forth and a textured background whose grain moves every frame. Clip k is a
   pure function of k.

A named directory (1 or 2) holds the Something-Something v2 layout -- ``labels/train.json`` (a
JSON array of objects with ``id`` and ``label``) and ``20bn-something-something-v2/<id>.webm`` --
or is a bundle root holding ``partial_datasets/ssv2`` in that layout (the latter wins). A named
folder that is missing, or has no readable labels file, raises :class:`ClipSourceError` naming
the path; there is no silent fall-through to the built-ins. The reference also looked in an
implicit ``data/videos``; this layer does not (name the folder).

Decoding (folders): PyAV (``av``, the optional extra ``pip install visgym[video]``), imported
only when a folder clip is first read; without it the error names the extra. Frames are decoded
in order (the same pixels as OpenCV's FFmpeg capture of the reference: the parity test checks),
each resized to 224 x 224 with OpenCV's INTER_LINEAR arithmetic (render/resample.linear) and
kept as RGB. Bounds: a file of 0 bytes, more than ``MAX_CLIP_BYTES``, a declared frame larger
than ``MAX_FRAME_PIXELS``, or that cannot be demuxed or decoded raises :class:`ClipFileError` naming
the file (never skipped: the same seed must never silently show another clip); at most
``MAX_DECODED_FRAMES`` frames of a clip are read.

Frame choice (spec section 3, step 2) by ``select_frames``: "uniform", "salient" (grey
difference to the last chosen frame at least ``min_frame_diff``; fewer than N: uniform) and
"distinct" (greedy max-min grey difference). Deviation: uniform's top-up after de-duplication
draws from the episode's own RandomState instead of NumPy's unseeded global RNG.

A clip's chosen frames are cached per process (``SELECTED``, bounded in bytes; keyed by the file
with its size and modification time, or by the built-in clip), read-only.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

import numpy as np

from ...core.cache import BoundedCache
from ...core.validate import describe, show_path
from ...kernels import clips as kern
from ...render import resample

ENV_VAR = "VIS_GYM_VIDEO_DIR"
BUNDLE_DIR = "partial_datasets"
BUNDLE_TASK = "ssv2"
LABELS_FILE = ("labels", "train.json")
VIDEO_DIR = "20bn-something-something-v2"
FRAME_PX = 224

#: Bounds of what is read from a folder: the labels file (SSv2's train.json is ~20 MB), one clip
#: file (SSv2 clips are ~0.1-1 MB), the frames decoded from a clip (SSv2 clips have <= ~80
#: frames; 1024 frames at 224 x 224 are 154 MB, the most a reset holds), a decoded frame's size
#: (a header may declare anything: 2**24 pixels = 4096 x 4096).
MAX_LABELS_BYTES = 1 << 30
MAX_CLIP_BYTES = 1 << 28
MAX_DECODED_FRAMES = 1024
MAX_FRAME_PIXELS = 1 << 24
#: The built-in table: how many procedural clips, and their lengths.
PROCEDURAL_CLIPS = 512
PROCEDURAL_FRAMES = (24, 40)

STRATEGIES = ("uniform", "salient", "distinct")


class ClipSourceError(ValueError):
    """A clip folder or its labels file is missing or unusable (message names the path)."""


class ClipFileError(ValueError):
    """One clip file is empty, too large or cannot be decoded (message names the file)."""


# ---------------------------------------------------------------------------------------------
# Frame selection (spec section 3, step 2)
# ---------------------------------------------------------------------------------------------

class FrameReader:
    """Frames of one clip, read on demand: ``rgb(k)`` (224 x 224 x 3 uint8) and ``grey(k)``
    (OpenCV's grey of it) for k < ``available`` (frames that could actually be read);
    ``reported`` is the frame count the container claims (the reference's T)."""

    def __init__(self, reported: int, available: int, frame: Callable[[int], np.ndarray]):
        self.reported = int(reported)
        self.available = int(available)
        self._frame = frame
        self._greys: dict[int, np.ndarray] = {}

    def rgb(self, k: int) -> np.ndarray:
        return self._frame(k)

    def grey(self, k: int) -> np.ndarray:
        g = self._greys.get(k)
        if g is None:
            g = np.empty((FRAME_PX, FRAME_PX), np.uint8)
            kern.grey(self._frame(k), g)
            self._greys[k] = g
        return g


def uniform_positions(analysed: int, n: int, rng) -> list[int]:
    """The reference's uniform choice among ``analysed`` frames: all of the last n (maybe
    fewer) when analysed <= n, else the n interior points of int(linspace(0, A - 1, n + 2)),
    de-duplicated and topped up with random frames from ``rng`` (a RandomState, or a function
    returning one; the reference used NumPy's unseeded global RNG there)."""
    if analysed <= n:
        return list(range(max(0, analysed - n), analysed))
    points = np.linspace(0, analysed - 1, n + 2).astype(int)[1:-1]
    chosen = sorted(set(int(p) for p in points))
    if len(chosen) < n:
        rng = rng() if callable(rng) else rng   # built only when needed (~200 us)
        rest = [k for k in range(analysed) if k not in chosen]
        extra = rng.choice(rest, n - len(chosen), replace=False)
        chosen = sorted(chosen + [int(v) for v in extra])
    return chosen


def salient_positions(reader: FrameReader, analysed: int, n: int, min_diff: float) -> list[int]:
    """Frame 0, then each frame whose grey difference to the last chosen one is at least
    ``min_diff``, until n are chosen (fewer: [] and the caller falls back to uniform)."""
    count = min(analysed, reader.available)
    if count < 1:
        return []
    chosen = [0]
    ref = reader.grey(0)
    for k in range(1, count):
        if len(chosen) >= n:
            break
        g = reader.grey(k)
        if kern.grey_difference(g, ref) >= min_diff:
            chosen.append(k)
            ref = g
    return chosen if len(chosen) >= n else []


def distinct_positions(reader: FrameReader, analysed: int, n: int) -> list[int]:
    """The most different pair of the analysed frames, then greedily the frame with the largest
    smallest difference to those chosen, until n; sorted."""
    count = min(analysed, reader.available)
    greys = np.stack([reader.grey(k) for k in range(count)])
    diffs = np.empty((count, count), np.float64)
    kern.pairwise_differences(greys, diffs)
    i, j = np.unravel_index(int(np.argmax(diffs)), diffs.shape)
    chosen = [int(i), int(j)]
    while len(chosen) < n:
        score = diffs[:, chosen].min(axis=1)
        score[chosen] = -1.0
        chosen.append(int(np.argmax(score)))
    return sorted(chosen[:n])


def select_frames(reader: FrameReader, n: int, strategy: str, min_diff: float,
                  max_analyze: int, rng) -> list[int] | None:
    """Frame positions of a clip per the spec's ``strategy``, clamped to the reported count;
    None when the clip cannot give n readable frames (the reference then tries another clip)."""
    total = reader.reported
    analysed = min(total, int(max_analyze), MAX_DECODED_FRAMES)
    if strategy == "salient":
        positions = salient_positions(reader, analysed, n, min_diff) or uniform_positions(
            analysed, n, rng)
    elif strategy == "distinct" and analysed > n:
        positions = distinct_positions(reader, analysed, n)
    else:
        positions = uniform_positions(analysed, n, rng)
    positions = [min(max(p, 0), max(total - 1, 0)) for p in positions]
    if len(positions) != n or any(p >= reader.available for p in positions):
        return None
    return positions


# ---------------------------------------------------------------------------------------------
# Decoding a clip file (PyAV)
# ---------------------------------------------------------------------------------------------

def _av():
    try:
        import av  # noqa: PLC0415 - optional extra, imported when a clip file is first read
    except ImportError:
        raise ClipSourceError("reading video clips needs PyAV: pip install 'visgym[video]' "
                              "(or pip install av)") from None
    return av


def _rgb_converter(av):
    """frame -> uint8 RGB array through a converter of this call's own, on one thread.

    PyAV's ``frame.to_ndarray(format=...)`` keeps a converter per thread, whose swscale context
    (FFmpeg 8) runs its own slice threads. A forked child then frees the copies held by its
    parent's other threads while those slice threads do not exist in the child, and waits for
    them forever (``visgym demos`` workers hung in ``os.fork`` after a clip was decoded on the
    frame pool). A converter that lives only for one decode, with one scaling thread, leaves
    nothing behind; the pixels are the same."""
    reformatter = av.video.reformatter.VideoReformatter()
    options = {"format": "rgb24", "threads": 1}

    def convert(frame):
        try:
            return reformatter.reformat(frame, **options).to_ndarray()
        except TypeError:   # a PyAV without the ``threads`` option
            if "threads" not in options:
                raise
            del options["threads"]
            return reformatter.reformat(frame, **options).to_ndarray()

    return convert


def decode_clip(path, max_frames: int = MAX_DECODED_FRAMES) -> tuple[int, np.ndarray]:
    """(reported frame count, frames uint8 (F, 224, 224, 3)) of a clip file: at most
    ``max_frames`` frames from the start, each resized as the reference resizes them.
    ClipFileError names the file when it is empty, too large or undecodable."""
    path = Path(path)
    shown = show_path(path)
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise ClipFileError(f"{shown}: clip file does not exist") from None
    except OSError as e:
        raise ClipFileError(f"{shown}: cannot stat clip file ({e.strerror})") from None
    if size == 0:
        raise ClipFileError(f"{shown}: clip file is empty (0 bytes)")
    if size > MAX_CLIP_BYTES:
        raise ClipFileError(f"{shown}: clip file is {size:,} bytes, beyond the "
                            f"{MAX_CLIP_BYTES:,} read at most")
    av = _av()
    max_frames = max(1, min(int(max_frames), MAX_DECODED_FRAMES))
    frames = []
    to_rgb = _rgb_converter(av)
    try:
        with av.open(str(path), mode="r") as container:
            if not container.streams.video:
                raise ClipFileError(f"{shown}: clip file has no video stream")
            stream = container.streams.video[0]
            ctx = stream.codec_context
            width, height = int(ctx.width or 0), int(ctx.height or 0)
            if width * height > MAX_FRAME_PIXELS:
                raise ClipFileError(f"{shown}: declares {width}x{height} frames, beyond the "
                                    f"{MAX_FRAME_PIXELS:,} pixels decoded at most")
            reported = _reported_frames(container, stream)
            for frame in container.decode(stream):
                if frame.width * frame.height > MAX_FRAME_PIXELS:
                    raise ClipFileError(f"{shown}: a {frame.width}x{frame.height} frame is "
                                        f"beyond the {MAX_FRAME_PIXELS:,} pixels decoded at most")
                rgb = to_rgb(frame)
                frames.append(resample.linear(rgb, (FRAME_PX, FRAME_PX)))
                if len(frames) >= max_frames:
                    break
    except ClipFileError:
        raise
    except Exception as e:  # PyAV raises its own error types (InvalidDataError, ...)
        if not frames:
            raise ClipFileError(f"{shown}: cannot decode clip ({type(e).__name__}: "
                                f"{str(e)[:200]})") from None
        # A clip that breaks off after some frames keeps those (as OpenCV's reads stop there).
    if not frames:
        raise ClipFileError(f"{shown}: clip file holds no decodable frames")
    return max(reported, 0) or len(frames), np.stack(frames)


def _reported_frames(container, stream) -> int:
    """The frame count the container declares, as OpenCV's FFmpeg capture computes it: the
    stream's count, else round(duration * fps)."""
    if stream.frames:
        return int(stream.frames)
    rate = stream.average_rate or stream.guessed_rate
    if stream.duration is not None and stream.time_base is not None:
        seconds = float(stream.duration * stream.time_base)
    elif container.duration is not None:
        seconds = container.duration / 1e6
    else:
        return 0
    return int(np.floor(seconds * float(rate) + 0.5)) if rate else 0


# ---------------------------------------------------------------------------------------------
# Sources
# ---------------------------------------------------------------------------------------------

# Chosen frames of a clip, per (source key, clip, selection settings): read-only arrays.
SELECTED = BoundedCache("clip frames", max_bytes=512 << 20)


@dataclass(frozen=True)
class Selection:
    """The frames a clip gives for one episode: positions (ascending) and uint8 (N, 224, 224, 3)."""
    positions: tuple
    frames: np.ndarray


def _pick_order(count: int, seed: int, rng=None) -> np.ndarray:
    """The reference's clip order for a constructor seeded ``seed``: the table (sorted by id)
    shuffled by RandomState(seed); seeds >= 2**32 seed it with their two 32-bit halves.
    ``rng``: a RandomState to re-seed (cheaper than a new one)."""
    seed = int(seed)
    rng = rng if rng is not None else np.random.RandomState()
    rng.seed(seed if seed < 2**32 else [seed & 0xFFFFFFFF, seed >> 32])
    order = np.arange(count)
    rng.shuffle(order)
    return order


@dataclass(eq=False)
class ClipSource:
    """An ordered table of clips: ``ids[i]`` (the reference's video id) with caption
    ``labels[i]``; ``kind`` is "directory" or "procedural"; ``origin`` says how it was chosen."""

    ids: tuple
    labels: tuple
    kind: str
    origin: str
    root: Path | None = None
    _index: dict = field(default_factory=dict, repr=False)

    def __post_init__(self):
        if not self.ids:
            raise ClipSourceError(f"{self.origin}: no clips")
        self._index = {v: i for i, v in enumerate(self.ids)}

    def __len__(self) -> int:
        return len(self.ids)

    def order(self, seed: int, rng=None) -> np.ndarray:
        """Clip ids in the order a reset seeded ``seed`` tries them (the first that gives N
        frames is used)."""
        return _pick_order(len(self.ids), seed, rng)

    def id_of(self, video_id) -> int:
        if not isinstance(video_id, str):
            raise ClipFileError(f"video_id: expected a str, got {describe(video_id)}")
        try:
            return self._index[video_id]
        except KeyError:
            raise ClipFileError(f"video_id {describe(video_id)}: not in the clip source "
                                f"{show_path(self.root or self.origin)} ({len(self.ids)} clips)"
                                ) from None

    def path(self, i: int) -> Path:
        return self.root / VIDEO_DIR / f"{self.ids[i]}.webm"

    def _file_key(self, i: int) -> tuple:
        """What a clip's cached frames are keyed by: its file and the file's size and
        modification time (a replaced file is read again), or the built-in clip's id."""
        path = self.path(i)
        if path is None:
            return (self.kind, self.ids[i])
        try:
            st = path.stat()
        except OSError:
            return (str(path), None, None)   # decoding it raises, naming the file
        return (str(path), st.st_size, st.st_mtime_ns)

    def reader(self, i: int, max_frames: int) -> FrameReader:
        """A reader of clip ``i`` (decoded now, up to ``max_frames`` frames)."""
        reported, frames = decode_clip(self.path(i), max_frames)
        return FrameReader(reported, frames.shape[0], lambda k: frames[k])

    def select(self, i: int, n: int, strategy: str, min_diff: float, max_analyze: int,
               rng) -> Selection | None:
        """Clip ``i``'s frames for an episode (None: it cannot give n frames); ``rng`` (or a
        function returning it) draws uniform's top-up."""
        key = (self._file_key(i), n, strategy, float(min_diff),
               int(max_analyze))
        cached = SELECTED.get(key)
        if cached is not None:
            return cached
        reader = self.reader(i, min(int(max_analyze), MAX_DECODED_FRAMES))
        positions = select_frames(reader, n, strategy, min_diff, max_analyze, rng)
        if positions is None:
            return None
        frames = np.stack([reader.rgb(p) for p in positions])
        frames.setflags(write=False)
        chosen = Selection(tuple(positions), frames)
        if strategy != "distinct" and self._padded(reader, n, max_analyze):
            return chosen   # uniform may have drawn from the episode's RNG: not cached
        return SELECTED.put(key, chosen)

    def frames_at(self, i: int, positions) -> np.ndarray:
        """Clip ``i``'s frames at ``positions`` (clamped to the reported count), as an init
        state names them; ClipFileError names the file when one cannot be read."""
        key = (self._file_key(i), "at", tuple(int(p) for p in positions))
        cached = SELECTED.get(key)
        if cached is not None:
            return cached
        top = max(int(max(positions)) + 1, 1)
        reader = self.reader(i, min(top, MAX_DECODED_FRAMES))
        out = []
        for p in positions:
            p = min(max(int(p), 0), max(reader.reported - 1, 0))
            if p >= reader.available:
                raise ClipFileError(f"{show_path(self.path(i)) if self.root else self.ids[i]}: "
                                    f"frame {p} cannot be read (the clip has "
                                    f"{reader.available} readable frames)")
            out.append(reader.rgb(p))
        frames = np.stack(out)
        frames.setflags(write=False)
        return SELECTED.put(key, frames)

    @staticmethod
    def _padded(reader: FrameReader, n: int, max_analyze: int) -> bool:
        analysed = min(reader.reported, int(max_analyze), MAX_DECODED_FRAMES)
        if analysed <= n:
            return False
        return len(set(np.linspace(0, analysed - 1, n + 2).astype(int)[1:-1].tolist())) < n


# --------------------------------------------------------------------------- folders (SSv2)
def read_labels(path: Path, video_label: str | None = None) -> tuple[tuple, tuple]:
    """(ids, captions) of an SSv2 labels file, optionally only captions containing
    ``video_label``, sorted by id string (ClipSourceError naming the file otherwise)."""
    shown = show_path(path)
    try:
        size = path.stat().st_size
        if size > MAX_LABELS_BYTES:
            raise ClipSourceError(f"{shown}: labels file is {size:,} bytes, beyond the "
                                  f"{MAX_LABELS_BYTES:,} read at most")
        with open(path, "rb") as f:
            data = json.loads(f.read())
    except FileNotFoundError:
        raise ClipSourceError(f"{shown}: labels file does not exist (expected the "
                              f"Something-Something v2 layout labels/train.json)") from None
    except OSError as e:
        raise ClipSourceError(f"{shown}: cannot read labels file ({e.strerror})") from None
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise ClipSourceError(f"{shown}: labels file is not valid JSON "
                              f"({type(e).__name__}: {str(e)[:120]})") from None
    if not isinstance(data, list):
        raise ClipSourceError(f"{shown}: expected a JSON array of {{id, label}} objects, got "
                              f"{type(data).__name__}")
    pairs = []
    for k, item in enumerate(data):
        if not isinstance(item, dict) or not isinstance(item.get("id"), str) or not isinstance(
                item.get("label"), str):
            raise ClipSourceError(f"{shown}: entry {k} is not an object with string 'id' and "
                                  f"'label' (got {describe(item)})")
        if "/" in item["id"] or "\\" in item["id"] or item["id"] in ("", ".", "..") or (
                "\x00" in item["id"]):
            raise ClipSourceError(f"{shown}: entry {k} has id {describe(item['id'])}, not a "
                                  f"clip file name")
        if video_label is None or video_label in item["label"]:
            pairs.append((item["id"], item["label"]))
    pairs.sort(key=lambda p: p[0])
    if not pairs:
        what = f" with a label containing {video_label!r}" if video_label is not None else ""
        raise ClipSourceError(f"{shown}: no clips{what}")
    return tuple(p[0] for p in pairs), tuple(p[1] for p in pairs)


def _check_dir(path: Path, what: str) -> None:
    try:
        if not path.exists():
            raise ClipSourceError(f"{show_path(path)}: {what} does not exist")
        if not path.is_dir():
            raise ClipSourceError(f"{show_path(path)}: {what} is not a directory")
    except OSError as e:
        raise ClipSourceError(f"{show_path(path)}: {what} cannot be looked up "
                              f"({e.strerror or type(e).__name__})") from None


def _resolve(path: str, what: str) -> Path:
    folder = Path(os.path.expanduser(path))
    _check_dir(folder, what)
    sub = folder / BUNDLE_DIR / BUNDLE_TASK
    return sub if sub.is_dir() else folder


def folder_source(root: Path, origin: str, video_label: str | None = None) -> ClipSource:
    ids, labels = read_labels(root.joinpath(*LABELS_FILE), video_label)
    return ClipSource(ids=ids, labels=labels, kind="directory", origin=origin, root=root)


# --------------------------------------------------------------------------- procedural clips
#: Colours of the moving objects: bright (grey >= 130), so a move changes the dark scene a lot.
COLOURS = {"yellow": (240, 220, 40), "white": (245, 245, 245), "orange": (250, 150, 30),
           "green": (60, 210, 80), "cyan": (40, 220, 230), "pink": (255, 130, 200),
           "lime": (170, 240, 60)}
#: Colours of the covering boxes.
BOX_COLOURS = {"red": (220, 40, 40), "blue": (40, 80, 230), "purple": (150, 60, 200),
               "brown": (140, 90, 40)}
SHAPES = ("square", "circle")
KINDS = ("move", "fill", "cover", "push", "stack", "shrink")


def _procedural_caption(k: int) -> str:
    spec = _procedural_spec(k)
    return spec["caption"]


def _procedural_spec(k: int) -> dict:
    """The numbers that fix procedural clip ``k`` (a pure function of k)."""
    rng = np.random.RandomState(k)
    kind = KINDS[k % len(KINDS)]
    colour = list(COLOURS)[rng.randint(len(COLOURS))]
    other = list(BOX_COLOURS)[rng.randint(len(BOX_COLOURS))]
    shape = SHAPES[rng.randint(2)]
    length = int(rng.randint(PROCEDURAL_FRAMES[0], PROCEDURAL_FRAMES[1] + 1))
    leftward = bool(rng.randint(2))
    thing = f"{colour} {shape}"
    caption = {
        "move": f"moving {thing} from {'right to left' if leftward else 'left to right'}",
        "fill": f"filling {colour} container",
        "cover": f"covering {thing} with {other} box",
        "push": f"pushing {thing} off table",
        "stack": f"stacking {colour} blocks",
        "shrink": f"{thing} shrinking until it disappears",
    }[kind]
    top = rng.randint(10, 60, 3).astype(np.float64)
    bottom = rng.randint(20, 80, 3).astype(np.float64)
    return dict(kind=kind, colour=COLOURS[colour], other=BOX_COLOURS[other], shape=shape,
                length=length, leftward=leftward, caption=caption, top=top, bottom=bottom,
                stripe=rng.randint(-12, 13, 3).astype(np.float64),
                swing=rng.uniform(0, 2 * np.pi), jitter=rng.uniform(-8, 8, 2))


def _shape_row(shape: str, cx: float, cy: float, half_w: float, half_h: float, colour) -> list:
    if shape == "circle":
        return [2, cx, cy, min(half_w, half_h), 0, *colour]
    return [1, cx - half_w, cy - half_h, cx + half_w, cy + half_h, *colour]


def _procedural_shapes(spec: dict, t: int) -> np.ndarray:
    """The shapes of frame t of a clip (rows of kernels.clips.paint_frame). Moving parts are
    large and bright on a dark scene, so consecutive chosen frames differ visibly (and the
    salient choice usually finds its frames)."""
    T = spec["length"]
    u = t / (T - 1)                       # time, 0 .. 1
    col, other, shape = spec["colour"], spec["other"], spec["shape"]
    jx, jy = spec["jitter"]
    post = (200, 200, 200)
    rows = []
    kind = spec["kind"]
    if kind == "move":
        rows.append([1, 2, 30, 12, 214, *post])             # the two landmarks
        rows.append([1, 212, 30, 222, 214, *post])
        x = 58 + 108 * (1 - u if spec["leftward"] else u)
        rows.append(_shape_row(shape, x, 122 + jy, 44, 90, col))
    elif kind == "fill":
        rows.append([1, 10, 8, 214, 216, 235, 235, 235])     # the container's wall
        rows.append([1, 16, 8, 208, 210, 12, 12, 12])       # its empty inside
        rows.append([1, 16, 210 - 202 * u, 208, 210, *col])
    elif kind == "cover":
        rows.append(_shape_row(shape, 112 + jx, 150, 60, 60, col))
        y = -210 + 220 * min(u * 1.1, 1.0)                  # the box comes down, then rests
        rows.append([1, 8, y, 216, y + 212, *other])
    elif kind == "push":
        rows.append([1, 0, 140, 150, 156, 150, 110, 60])    # the table
        if u < 0.5:
            x, y = 40 + 200 * u, 88.0
        else:
            x, y = 140 + 70 * (u - 0.5) * 2, 88 + 150 * ((u - 0.5) * 2) ** 2
        rows.append(_shape_row(shape, x, y, 52, 52, col))
    elif kind == "stack":
        rows.append([1, 4, 206, 220, 218, 120, 120, 120])   # the floor
        blocks = 1 + int(u * 3.999)
        for b in range(blocks):
            rows.append([1, 12, 206 - 50 * (b + 1), 212, 206 - 50 * b - 3, *col])
    else:  # shrink
        half = 104 * (1 - u)
        if half > 0.5:
            rows.append(_shape_row(shape, 112 + jx / 4, 112 + jy / 4, half, half, col))
    # The distractor: a small disc that swings back and forth (no time direction).
    sx = 112 + 80 * np.sin(spec["swing"] + t * 0.9)
    rows.append([2, sx, 14, 9, 0, 250, 250, 250])
    return np.array(rows, np.float64)


NOISE_AMP = 4
NOISE_PAD = 32


class ProceduralClips(ClipSource):
    """The built-in clips: ``PROCEDURAL_CLIPS`` animated scenes (see the module docstring)."""

    def __init__(self):
        ids = tuple(f"procedural-{k:04d}" for k in range(PROCEDURAL_CLIPS))
        labels = tuple(_procedural_caption(k) for k in range(PROCEDURAL_CLIPS))
        super().__init__(ids=ids, labels=labels, kind="procedural",
                         origin="built-in procedural clips")

    def path(self, i: int):
        return None

    def reader(self, i: int, max_frames: int) -> FrameReader:
        spec = _procedural_spec(i)
        background = np.empty((FRAME_PX, FRAME_PX, 3), np.uint8)
        kern.paint_background(background, spec["top"], spec["bottom"], spec["stripe"], i)
        noise = np.empty((FRAME_PX + NOISE_PAD, (FRAME_PX + NOISE_PAD) * 3), np.int16)
        kern.noise_texture(noise, i, NOISE_AMP)
        flat_bg = background.reshape(FRAME_PX, FRAME_PX * 3)
        cache: dict[int, np.ndarray] = {}

        def frame(t: int) -> np.ndarray:
            out = cache.get(t)
            if out is None:
                out = np.empty((FRAME_PX, FRAME_PX, 3), np.uint8)
                shift = int(kern._hash(np.uint32(i * 4096 + t)))
                kern.paint_frame(out.reshape(FRAME_PX, FRAME_PX * 3), flat_bg,
                                 _procedural_shapes(spec, t), noise, shift % NOISE_PAD,
                                 (shift >> 8) % NOISE_PAD)
                cache[t] = out
            return out

        length = min(spec["length"], max(int(max_frames), 1))
        return FrameReader(spec["length"], length, frame)


_PROCEDURAL: list = []


def procedural_clips() -> ProceduralClips:
    """The built-in table (built once per process; immutable)."""
    if not _PROCEDURAL:
        _PROCEDURAL.append(ProceduralClips())
    return _PROCEDURAL[0]


def clip_source(root_dir: str | os.PathLike | None = None, *, video_label: str | None = None,
                env: Mapping[str, str] | None = None,
                bundle_root: str | os.PathLike | None = None) -> ClipSource:
    """The clip source of video_unshuffle, in DESIGN's order (see the module docstring)."""
    env = os.environ if env is None else env
    if root_dir is not None and str(root_dir) != "":
        root = _resolve(os.fspath(root_dir), "root_dir")
        return folder_source(root, f"root_dir={show_path(root_dir)}", video_label)
    if env.get(ENV_VAR):
        root = _resolve(env[ENV_VAR], f"${ENV_VAR}")
        return folder_source(root, f"${ENV_VAR}={show_path(env[ENV_VAR])}", video_label)
    cand = Path(bundle_root if bundle_root is not None else os.getcwd()) / BUNDLE_DIR / BUNDLE_TASK
    if cand.is_dir():
        return folder_source(cand, f"bundle {cand}", video_label)
    source = procedural_clips()
    if video_label is not None:
        keep = [k for k, label in enumerate(source.labels) if video_label in label]
        if not keep:
            raise ClipSourceError(f"video_label {video_label!r}: no built-in clip caption "
                                  f"contains it")
        return _FilteredProcedural(source, keep)
    return source


class _FilteredProcedural(ProceduralClips):
    """The built-in clips whose caption contains a ``video_label``."""

    def __init__(self, full: ProceduralClips, keep: list):
        ClipSource.__init__(self, ids=tuple(full.ids[k] for k in keep),
                            labels=tuple(full.labels[k] for k in keep), kind="procedural",
                            origin=f"built-in procedural clips ({len(keep)} of them)")
        self._numbers = tuple(keep)

    def reader(self, i: int, max_frames: int) -> FrameReader:
        return ProceduralClips.reader(self, self._numbers[i], max_frames)
