"""Batched z-buffered triangle rasterization into caller-owned frames: the public face of the
compiled kernels in ``visgym.render._raster3d``, shared by every family that draws a 3-D scene
(textured rooms, rotated objects, robot scenes).

A scene is drawn by one or more *draws*. Draw n renders the triangles
``triangles[tri_start[n]:tri_stop[n]]`` of one shared mesh table into frame ``idx[n]``, after
transforming the vertices by ``model[n]`` (object to world) and ``view_proj[n]`` (world to clip,
see ``camera``), lit by ``light_dir[n]`` / ``ambient[n]`` / ``diffuse[n]`` and mapped to the pixel
rectangle ``viewport[n]``. So a batch of B different scenes is B draws over per-scene triangle
ranges, an instanced object (a sphere placed per episode) is a draw of one shared range with a
per-draw model matrix, and side-by-side views are draws with different viewports. Draws run in
order, each testing and writing the depth buffer of its frame (``float32[B, H, W]``, NDC z,
smaller is nearer; ``clear`` sets it to +inf).

Meshes: ``vertices`` float32[V, 3], ``triangles`` int32[T, 3] (counter-clockwise = front, seen
from the camera, as OpenGL), and per face a flat colour ``face_colors`` uint8[T, 3] or a texture
``face_textures`` int32[T] (-1 = flat colour) with per-vertex ``uvs`` float32[V, 2] into a texture
atlas (``pack_textures``): u runs across a texture's columns, v down its rows, and both repeat
every 1.0. ``face_flags`` uint8[T]: FLAG_LIT applies Lambert light (ambient + diffuse * max(0,
n.l), per face from the triangle's own normal, or per vertex from ``normals`` float32[V, 3]);
FLAG_TWO_SIDED keeps back faces (lit as seen from their side). Faces without FLAG_LIT show their
raw colour. Triangles are clipped against the near plane, and against a guard band far outside
the viewport; there is no far-plane clipping. This layer checks and converts arguments, raising
ValueError naming the offending one, and then makes one kernel call.

Shortcuts that leave every pixel as the plain paths draw it (tests/test_raster3d.py compares
them, ``_raster3d.set_fast_paths(False)``): a ``MeshTable`` keeps each triangle's facing plane
(``_facing_planes``), so a back face is skipped after one dot product with the camera's side,
before its corners are transformed; small solid triangles find each row's covered run four pixel
centres at a time (SSE2, exact integers); a long solid span skips its end where its row's
record (a run of columns with a bound on their depths, kept by long spans) shows every test
there would fail, so a big occluder drawn first spares what it hides; ``boxes_outside`` tells a
caller which draws lie wholly outside their view before it lists them.
"""
from __future__ import annotations

import numpy as np

from . import _raster3d
from .raster import _colors, _frames, _idx, _per_item

__all__ = ["FLAG_LIT", "FLAG_TWO_SIDED", "DrawList", "MeshTable", "clear", "downsample",
           "draw_list", "draw_meshes", "raycast_grid", "pack_textures", "uv_sphere"]

FLAG_LIT = 1
FLAG_TWO_SIDED = 2
SAMPLING = ("nearest", "bilinear")


# ---------------------------------------------------------------------------------------------
# argument checks

def _depth(depth, frames: np.ndarray) -> np.ndarray:
    if not isinstance(depth, np.ndarray):
        raise ValueError(f"depth must be a numpy array, got {type(depth).__name__}")
    if depth.dtype != np.float32:
        raise ValueError(f"depth must have dtype float32, got {depth.dtype}")
    if depth.shape != frames.shape[:3]:
        raise ValueError(f"depth must have shape {frames.shape[:3]} (frames without the colour "
                         f"axis), got {depth.shape}")
    if not depth.flags.c_contiguous or not depth.flags.writeable:
        raise ValueError("depth must be C-contiguous and writeable")
    return depth


def _table(arr, name: str, dtype, cols: int) -> np.ndarray:
    """A large per-vertex / per-face table: exact dtype and C order required (never copied)."""
    if not isinstance(arr, np.ndarray):
        raise ValueError(f"{name} must be a numpy array, got {type(arr).__name__}")
    if arr.dtype != dtype:
        raise ValueError(f"{name} must have dtype {np.dtype(dtype).name}, got {arr.dtype}")
    if arr.ndim != 2 or arr.shape[1] != cols:
        raise ValueError(f"{name} must have shape (n, {cols}), got {arr.shape}")
    if not arr.flags.c_contiguous:
        raise ValueError(f"{name} must be C-contiguous (use np.ascontiguousarray)")
    return arr


def _matrices(value, name: str, n: int) -> np.ndarray:
    arr = np.asarray(value)
    if arr.dtype.kind not in "iuf":
        raise ValueError(f"{name} must be real 4x4 matrices, got dtype {arr.dtype}")
    if arr.shape == (4, 4):
        arr = np.broadcast_to(arr, (n, 4, 4))
    elif arr.shape != (n, 4, 4):
        raise ValueError(f"{name} must have shape (4, 4) or ({n}, 4, 4) to match idx, got {arr.shape}")
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} must be finite")
    return arr


def _per_face(value, name: str, t: int, dtype, default) -> np.ndarray:
    if value is None:
        return np.full(t, default, dtype)
    arr = np.asarray(value)
    if arr.dtype.kind not in "iu":
        raise ValueError(f"{name} must have an integer dtype, got {arr.dtype}")
    if arr.ndim == 0:
        arr = np.broadcast_to(arr, (t,))
    elif arr.shape != (t,):
        raise ValueError(f"{name} must be a scalar or have shape ({t},) to match triangles, "
                         f"got {arr.shape}")
    return np.ascontiguousarray(arr, dtype=dtype)


# ---------------------------------------------------------------------------------------------
# drawing

def clear(frames: np.ndarray, depth: np.ndarray, idx, colors=(0, 0, 0)) -> None:
    """Fill frames idx[n] with colors[n] (one RGB for all, or one per item) and set their depth
    to +inf."""
    frames = _frames(frames)
    depth = _depth(depth, frames)
    idx = _idx(idx, frames.shape[0])
    colors = _colors(colors, idx.shape[0])
    _raster3d.clear(frames, depth, idx, colors)


def _facing_planes(vertices: np.ndarray, triangles: np.ndarray) -> np.ndarray:
    """Per triangle the 4-vector L with L[j] = (-1)^j det(X without row j), X the 4 x 3 matrix of
    its corners (x, y, z, 1) as columns (compiled). By Cauchy-Binet, the facing determinant the
    kernel computes from clip-space (x, y, w) of the corners is C . L, where C[j] = (-1)^j det(Q
    without column j) for Q the (x, y, w) rows of view_proj @ model: one dot product per triangle
    tells a back face before its corners are transformed."""
    out = np.empty((triangles.shape[0], 4))
    _raster3d.facing_planes(vertices, triangles, out)
    return out


def boxes_outside(view_proj, model, lo, hi) -> np.ndarray:
    """bool[K]: whether box k ([lo[k], hi[k]], float (K, 3), in model space) lies wholly beyond
    one side of the view of view_proj[k] @ model[k] ((K, 4, 4) each), every corner past the same
    clip plane (x > w, x < -w, y > w, y < -w or z < -w) by a margin above rounding. A draw whose
    vertices all lie in its box then cannot reach a pixel: culling it leaves the picture as it
    was and spares transforming its vertices."""
    vp = np.ascontiguousarray(view_proj, dtype=np.float64)
    mo = np.ascontiguousarray(model, dtype=np.float64)
    lo = np.ascontiguousarray(lo, dtype=np.float64)
    hi = np.ascontiguousarray(hi, dtype=np.float64)
    k = vp.shape[0] if vp.ndim == 3 else -1
    for name, a, shape in (("view_proj", vp, (k, 4, 4)), ("model", mo, (k, 4, 4)),
                           ("lo", lo, (k, 3)), ("hi", hi, (k, 3))):
        if a.shape != shape:
            raise ValueError(f"{name} must have shape {shape}, got {a.shape}")
    out = np.zeros(max(k, 0), np.uint8)
    _raster3d.boxes_outside(vp, mo, lo, hi, out)
    return out.astype(bool)


class MeshTable:
    """A shared vertex / index table with its per-face and texture data, checked once (see the
    module docstring for each field). Building one is what ``draw_meshes`` does on every call;
    a caller that draws the same table every step builds it once and calls ``draw_list``.

    vertices float32[V, 3], triangles int32[T, 3] (C order, never copied). face_colors None
    (white), RGB (3,) or uint8[T, 3]; face_textures None (all flat) or int[T] in [-1, K);
    face_flags None (0), a scalar or uint8[T] of FLAG_* bits; uvs float32[V, 2] (needed when a
    face is textured); normals None or float32[V, 3]; atlas uint8[AH, AW, 3] and texture_rects
    int[K, 4] of (x, y, width, height) in the atlas (``pack_textures``); sampling "nearest" or
    "bilinear". facing_planes: keep each triangle's facing plane, so the kernel skips a back face
    before transforming its corners (worth it for a table drawn more than once; ``draw_meshes``
    builds its one-use table without)."""

    def __init__(self, vertices: np.ndarray, triangles: np.ndarray, *, face_colors=None,
                 face_textures=None, face_flags=None, uvs=None, normals=None, atlas=None,
                 texture_rects=None, sampling: str = "nearest", facing_planes: bool = True):
        vertices = _table(vertices, "vertices", np.float32, 3)
        triangles = _table(triangles, "triangles", np.int32, 3)
        nv, nt = vertices.shape[0], triangles.shape[0]
        if nt and (triangles.min() < 0 or triangles.max() >= nv):
            raise ValueError(f"triangles must index vertices in [0, {nv}), got range "
                             f"[{triangles.min()}, {triangles.max()}]")
        if not np.isfinite(vertices).all():
            raise ValueError("vertices must be finite")
        if face_colors is None:
            face_colors = np.full((nt, 3), 255, np.uint8)
        else:
            face_colors = _colors(face_colors, nt, "face_colors")
        face_textures = _per_face(face_textures, "face_textures", nt, np.int32, -1)
        face_flags = _per_face(face_flags, "face_flags", nt, np.uint8, 0)
        if nt and face_flags.max() > (FLAG_LIT | FLAG_TWO_SIDED):
            raise ValueError("face_flags must combine only FLAG_LIT (1) and FLAG_TWO_SIDED (2)")

        textured = nt > 0 and face_textures.max() >= 0
        if textured:
            if atlas is None or texture_rects is None or uvs is None:
                raise ValueError("face_textures: textured faces need uvs, atlas and texture_rects")
            if face_textures.min() < -1:
                raise ValueError("face_textures must be -1 (flat colour) or a texture index")
        if atlas is None:
            atlas = np.zeros((1, 1, 3), np.uint8)
        elif not (isinstance(atlas, np.ndarray) and atlas.dtype == np.uint8 and atlas.ndim == 3
                  and atlas.shape[2] == 3 and atlas.flags.c_contiguous):
            raise ValueError("atlas must be a C-contiguous uint8 array of shape (AH, AW, 3)")
        if texture_rects is None:
            texture_rects = np.zeros((0, 4), np.int32)
        else:
            rects = np.asarray(texture_rects)
            if rects.dtype.kind not in "iu" or rects.ndim != 2 or rects.shape[1] != 4:
                raise ValueError("texture_rects must be an integer array of shape (K, 4) "
                                 "(x, y, width, height)")
            if rects.size and ((rects[:, 2] <= 0).any() or (rects[:, 3] <= 0).any()
                               or (rects[:, :2] < 0).any()
                               or (rects[:, 0] + rects[:, 2] > atlas.shape[1]).any()
                               or (rects[:, 1] + rects[:, 3] > atlas.shape[0]).any()):
                raise ValueError(f"texture_rects must be non-empty rectangles inside the "
                                 f"{atlas.shape[1]}x{atlas.shape[0]} atlas")
            texture_rects = np.ascontiguousarray(rects, dtype=np.int32)
        if textured and face_textures.max() >= texture_rects.shape[0]:
            raise ValueError(f"face_textures must be < {texture_rects.shape[0]} (the number of "
                             f"texture_rects), got {face_textures.max()}")
        if uvs is None:
            uvs = np.zeros((0, 2), np.float32)
        else:
            uvs = _table(uvs, "uvs", np.float32, 2)
            if uvs.shape[0] != nv:
                raise ValueError(f"uvs must have one row per vertex ({nv}), got {uvs.shape[0]}")
            if not np.isfinite(uvs).all():
                raise ValueError("uvs must be finite")
        self.has_normals = normals is not None
        if self.has_normals:
            normals = _table(normals, "normals", np.float32, 3)
            if normals.shape[0] != nv:
                raise ValueError(f"normals must have one row per vertex ({nv}), got "
                                 f"{normals.shape[0]}")
            if not np.isfinite(normals).all():
                raise ValueError("normals must be finite")
        else:
            normals = np.zeros((0, 3), np.float32)
        if sampling not in SAMPLING:
            raise ValueError(f"sampling must be one of {SAMPLING}, got {sampling!r}")
        self.vertices, self.triangles = vertices, triangles
        # Facing planes pay for a table drawn many times; none are needed when every face is
        # two-sided.
        one_sided = nt > 0 and bool((face_flags & FLAG_TWO_SIDED == 0).any())
        self.planes = (_facing_planes(vertices, triangles) if facing_planes and one_sided
                       else np.zeros((0, 4)))
        self.face_colors, self.face_textures, self.face_flags = face_colors, face_textures, face_flags
        self.uvs, self.normals, self.atlas, self.texture_rects = uvs, normals, atlas, texture_rects
        self.bilinear = sampling == "bilinear"

    @property
    def num_triangles(self) -> int:
        return self.triangles.shape[0]


class DrawList:
    """N draws over one ``MeshTable`` (see the module docstring), checked once: idx int[N] of
    frames in [0, num_frames), tri_start / tri_stop int[N] (or scalars), view_proj (4, 4) or
    (N, 4, 4), model None (identity), (4, 4) or (N, 4, 4), light_dir (3,) or (N, 3), ambient and
    diffuse scalars or float[N], viewport None (the whole frame_hw), (4,) or (N, 4) ints.
    ``list[lo:hi]`` is the sub-list of draws lo..hi-1 (views, no checks repeated), so one list
    built for a batch can be drawn in parts from several threads."""

    def __init__(self, table: MeshTable, idx, tri_start, tri_stop, view_proj, *, num_frames: int,
                 frame_hw: tuple, model=None, light_dir=(0.0, 0.0, 1.0), ambient=1.0,
                 diffuse=0.0, viewport=None):
        idx = _idx(idx, num_frames)
        n = idx.shape[0]
        nt = table.num_triangles
        tri_start = _per_item(tri_start, "tri_start", n, "int")
        tri_stop = _per_item(tri_stop, "tri_stop", n, "int")
        if n and (tri_start.min() < 0 or tri_stop.max() > nt or (tri_stop < tri_start).any()):
            raise ValueError(f"tri_start/tri_stop must satisfy 0 <= tri_start <= tri_stop <= {nt} "
                             f"(the number of triangles)")
        view_proj = _matrices(view_proj, "view_proj", n)
        self.has_model = model is not None
        model = _matrices(model, "model", n) if self.has_model else np.zeros((n, 4, 4))
        light = np.asarray(light_dir)
        if light.dtype.kind not in "iuf":
            raise ValueError(f"light_dir must be real, got dtype {light.dtype}")
        if light.shape == (3,):
            light = np.broadcast_to(light, (n, 3))
        elif light.shape != (n, 3):
            raise ValueError(f"light_dir must have shape (3,) or ({n}, 3), got {light.shape}")
        light = np.ascontiguousarray(light, dtype=np.float64)
        if not np.isfinite(light).all():
            raise ValueError("light_dir must be finite")
        ambient = _per_item(ambient, "ambient", n, "float")
        diffuse = _per_item(diffuse, "diffuse", n, "float")
        if not (np.isfinite(ambient).all() and np.isfinite(diffuse).all()):
            raise ValueError("ambient and diffuse must be finite")
        height, width = frame_hw
        if viewport is None:
            viewport = np.broadcast_to(np.array([0, 0, width, height], np.int64), (n, 4))
        vp = np.asarray(viewport)
        if vp.dtype.kind not in "iu":
            raise ValueError(f"viewport must be integers (x, y, width, height), got dtype "
                             f"{vp.dtype}")
        if vp.shape == (4,):
            vp = np.broadcast_to(vp, (n, 4))
        elif vp.shape != (n, 4):
            raise ValueError(f"viewport must have shape (4,) or ({n}, 4), got {vp.shape}")
        if n and ((vp[:, 2] <= 0).any() or (vp[:, 3] <= 0).any()
                  or np.abs(vp).max() > (1 << 24)):
            raise ValueError("viewport width and height must be > 0 and every value within 2**24")
        self.table = table
        self.idx, self.tri_start, self.tri_stop = idx, tri_start, tri_stop
        self.view_proj, self.model, self.light = view_proj, model, light
        self.ambient, self.diffuse = ambient, diffuse
        self.viewport = np.ascontiguousarray(vp, dtype=np.int64)

    def __len__(self) -> int:
        return self.idx.shape[0]

    def __getitem__(self, key: slice) -> "DrawList":
        if not isinstance(key, slice) or key.step not in (None, 1):
            raise TypeError("a DrawList takes contiguous slices only")
        sub = object.__new__(DrawList)
        sub.table, sub.has_model = self.table, self.has_model
        for name in ("idx", "tri_start", "tri_stop", "view_proj", "model", "light", "ambient",
                     "diffuse", "viewport"):
            setattr(sub, name, getattr(self, name)[key])
        return sub


def draw_list(frames: np.ndarray, depth: np.ndarray, draws: DrawList, *, first_frame: int = 0,
              clear=None) -> None:
    """Draw ``draws`` into ``frames`` / ``depth``, where draw n lands in frame
    ``draws.idx[n] - first_frame`` (so a list built with batch rows as idx can draw a slice
    ``frames[first_frame:...]`` of the batch; draws whose frame falls outside are skipped).
    clear: None, or an RGB colour: every frame of ``frames`` is filled with it (depth +inf),
    just before its first draw (a frame no draw reaches, every object culled, is filled too)."""
    frames = _frames(frames)
    _draw(frames, _depth(depth, frames), draws, first_frame, clear, every_frame=True)


def _draw(frames, depth, draws: DrawList, first_frame: int, clear, every_frame: bool) -> None:
    """The kernel call of draw_list / draw_meshes; ``clear`` fills every frame of ``frames``
    (every_frame) or only the frames the draws name."""
    t = draws.table
    pending = np.zeros(frames.shape[0], np.uint8)
    if clear is not None:
        clear_rgb = _colors(clear, 1, "clear")[0]
        if every_frame:
            pending[:] = 1
        else:
            local = draws.idx - first_frame
            pending[local[(local >= 0) & (local < frames.shape[0])]] = 1
    else:
        clear_rgb = np.zeros(3, np.uint8)
    _raster3d.draw(frames, depth, draws.idx, int(first_frame), t.vertices, t.triangles, t.planes,
                   draws.tri_start, draws.tri_stop, draws.view_proj, draws.model, draws.has_model,
                   t.face_colors, t.face_textures, t.face_flags, t.uvs, t.normals, t.has_normals,
                   t.atlas, t.texture_rects, draws.light, draws.ambient, draws.diffuse,
                   draws.viewport, t.bilinear, pending, clear_rgb)
    left = np.flatnonzero(pending)   # the kernel clears a frame at its first draw
    if left.size:
        _raster3d.clear(frames, depth, left, np.repeat(clear_rgb[None], left.size, 0))


def draw_meshes(frames: np.ndarray, depth: np.ndarray, idx, vertices: np.ndarray,
                triangles: np.ndarray, tri_start, tri_stop, view_proj, *, model=None,
                face_colors=None, face_textures=None, face_flags=None, uvs=None, normals=None,
                atlas=None, texture_rects=None, light_dir=(0.0, 0.0, 1.0), ambient=1.0,
                diffuse=0.0, viewport=None, sampling: str = "nearest", clear=None) -> None:
    """Draw N draws (see the module docstring) into ``frames`` / ``depth``: a ``MeshTable`` of
    the mesh arguments, a ``DrawList`` of the per-draw ones, then what ``draw_list`` does.

    idx int[N]: frame of each draw. tri_start, tri_stop int[N] (or scalars): triangle range.
    view_proj (4, 4) or (N, 4, 4): world to clip. model None (identity), (4, 4) or (N, 4, 4).
    face_colors None (white), RGB (3,) or uint8[T, 3]. face_textures None (all flat) or int[T]
    in [-1, K). face_flags None (0), a scalar or uint8[T] of FLAG_* bits. uvs float32[V, 2]
    (needed when a face is textured); normals None or float32[V, 3]. atlas uint8[AH, AW, 3]
    and texture_rects int[K, 4] of (x, y, width, height) in the atlas (``pack_textures``).
    light_dir (3,) or (N, 3): direction *toward* the light, world frame. ambient, diffuse:
    scalars or float[N]. viewport None (whole frame), (4,) or (N, 4) ints (x, y, width, height).
    sampling: "nearest" or "bilinear". clear: None, or an RGB colour: every frame named in idx
    is first filled with it (depth +inf), just before its first draw (cheaper than a separate
    ``clear`` call, whose writes have left the cache by the time a batch is drawn).
    """
    frames = _frames(frames)
    depth = _depth(depth, frames)
    table = MeshTable(vertices, triangles, face_colors=face_colors, face_textures=face_textures,
                      face_flags=face_flags, uvs=uvs, normals=normals, atlas=atlas,
                      texture_rects=texture_rects, sampling=sampling, facing_planes=False)
    draws = DrawList(table, idx, tri_start, tri_stop, view_proj, num_frames=frames.shape[0],
                     frame_hw=frames.shape[1:3], model=model, light_dir=light_dir,
                     ambient=ambient, diffuse=diffuse, viewport=viewport)
    _draw(frames, depth, draws, 0, clear, every_frame=False)


def downsample(samples: np.ndarray, frames: np.ndarray, factor: int, x: int = 0,
               simd: bool = True) -> None:
    """Supersampling's last step: ``frames[k, :, x:x + w]`` becomes the mean of each factor x
    factor block of ``samples[k]`` (rounded half up) for every k < len(samples). samples
    uint8[n, H * factor, w * factor, 3], frames uint8[>= n, H, >= x + w, 3], both C-contiguous
    (x places a view drawn on its own in a frame of several). simd: factor 2 averages eight
    pixels at a time with SSSE3 where the CPU has it (the same bytes; off for comparison)."""
    samples = _frames(samples)
    frames = _frames(frames)
    if not (isinstance(factor, (int, np.integer)) and 1 <= factor <= 16):
        raise ValueError(f"factor: expected an integer in [1, 16], got {factor!r}")
    n, h, w = samples.shape[:3]
    if (frames.shape[0] < n or h != frames.shape[1] * factor or w % factor
            or not (isinstance(x, (int, np.integer)) and 0 <= x <= frames.shape[2] - w // factor)):
        raise ValueError(f"samples must have shape (n, {frames.shape[1] * factor}, w * {factor}, "
                         f"3) with n <= {frames.shape[0]} and x + w <= {frames.shape[2]} for frames "
                         f"of shape {frames.shape}, factor {factor} and x {x!r}; got "
                         f"{samples.shape}")
    _raster3d.downsample(samples, frames, int(factor), int(x), bool(simd))


# ---------------------------------------------------------------------------------------------
# helpers for building scenes

def pack_textures(textures) -> tuple[np.ndarray, np.ndarray]:
    """Stack RGB textures (uint8[h, w, 3] each) into one atlas, top to bottom. Returns
    (atlas uint8[sum h, max w, 3], rects int32[K, 4] of (x, y, width, height))."""
    textures = list(textures)
    if not textures:
        raise ValueError("textures: need at least one texture")
    for k, tex in enumerate(textures):
        if not (isinstance(tex, np.ndarray) and tex.dtype == np.uint8 and tex.ndim == 3
                and tex.shape[2] == 3 and tex.shape[0] > 0 and tex.shape[1] > 0):
            raise ValueError(f"textures[{k}]: expected a non-empty uint8 array (h, w, 3)")
    width = max(t.shape[1] for t in textures)
    height = sum(t.shape[0] for t in textures)
    atlas = np.zeros((height, width, 3), np.uint8)
    rects = np.zeros((len(textures), 4), np.int32)
    y = 0
    for k, tex in enumerate(textures):
        h, w = tex.shape[:2]
        atlas[y:y + h, :w] = tex
        rects[k] = (0, y, w, h)
        y += h
    return atlas, rects


def uv_sphere(radius: float = 1.0, n_lat: int = 12, n_lon: int = 24):
    """A closed sphere centred at the origin: (vertices float32[V, 3], triangles int32[T, 3]
    counter-clockwise seen from outside, normals float32[V, 3]) with n_lat bands between the
    poles and n_lon segments around the y axis."""
    if not (isinstance(n_lat, (int, np.integer)) and n_lat >= 2):
        raise ValueError(f"n_lat: expected an integer >= 2, got {n_lat!r}")
    if not (isinstance(n_lon, (int, np.integer)) and n_lon >= 3):
        raise ValueError(f"n_lon: expected an integer >= 3, got {n_lon!r}")
    if not (np.isfinite(radius) and radius > 0):
        raise ValueError(f"radius: expected a positive number, got {radius!r}")
    theta = np.linspace(0.0, np.pi, n_lat + 1)[1:-1]          # polar angle of the inner rings
    phi = np.linspace(0.0, 2 * np.pi, n_lon, endpoint=False)
    ring = np.stack([np.sin(theta)[:, None] * np.cos(phi)[None, :],
                     np.repeat(np.cos(theta)[:, None], n_lon, axis=1),
                     -np.sin(theta)[:, None] * np.sin(phi)[None, :]], axis=-1).reshape(-1, 3)
    normals = np.concatenate([[[0.0, 1.0, 0.0]], ring, [[0.0, -1.0, 0.0]]])
    top, bottom = 0, normals.shape[0] - 1
    tris = []
    for j in range(n_lon):
        j2 = (j + 1) % n_lon
        tris.append((top, 1 + j, 1 + j2))
        for i in range(n_lat - 2):
            a, b = 1 + i * n_lon + j, 1 + i * n_lon + j2
            c, d = a + n_lon, b + n_lon
            tris.append((a, c, d))
            tris.append((a, d, b))
        last = 1 + (n_lat - 2) * n_lon
        tris.append((bottom, last + j2, last + j))
    vertices = (normals * radius).astype(np.float32)
    return vertices, np.asarray(tris, np.int32), normals.astype(np.float32)


def raycast_grid(frames: np.ndarray, depth: np.ndarray, idx, grids: np.ndarray, grid_ids, eye,
                 forward, projection, *, origin=(0.0, 0.0), cell: float = 1.0,
                 height: float = 1.0, atlas: np.ndarray, texture_rects, textures=(0, 1, 2),
                 background=(0, 0, 0)) -> None:
    """Fast path for scenes made only of full-height boxes on a grid, seen level (no pitch or
    roll), as a Wolfenstein-style ray caster: the picture and depth buffer equal what
    ``draw_meshes`` produces for the same boxes (walls with u across each face from the
    viewer's left and v from top to bottom; floor and ceiling textured once per cell with u
    along x and v along z), up to rounding at texel and edge boundaries, at a fraction of the
    cost. Objects drawn afterwards with ``draw_meshes`` depth-test against it.

    Item n renders grid ``grids[grid_ids[n]]`` (uint8[G, R, C], nonzero = box) into frame
    ``idx[n]``: box (r, c) spans x in origin[0] + cell * [c, c+1], z in origin[1] + cell *
    [r, r+1] and y in [0, height]. eye (3,) or (N, 3): camera position; the cell it stands in
    counts as open (a camera inside a box sees out of it, as back-face culling shows it in a
    rasterizer), and floor and ceiling are drawn under and over it. forward (2,) or (N, 2):
    horizontal viewing direction (x, z);
    projection (4, 4) or (N, 4, 4): a symmetric perspective (``camera.perspective``) whose
    fields of view and depth mapping are used. textures: (wall, floor, ceiling) indices into
    texture_rects. Every pixel of the frame is written: pixels whose ray meets nothing get
    ``background`` and depth +inf (no separate ``clear`` is needed).
    """
    frames = _frames(frames)
    depth = _depth(depth, frames)
    idx = _idx(idx, frames.shape[0])
    n = idx.shape[0]
    if not (isinstance(grids, np.ndarray) and grids.dtype == np.uint8 and grids.ndim == 3
            and grids.flags.c_contiguous):
        raise ValueError("grids must be a C-contiguous uint8 array of shape (G, rows, cols)")
    grid_ids = _per_item(grid_ids, "grid_ids", n, "int")
    if n and (grid_ids.min() < 0 or grid_ids.max() >= grids.shape[0]):
        raise ValueError(f"grid_ids must lie in [0, {grids.shape[0]})")
    eye_arr = np.asarray(eye)
    if eye_arr.dtype.kind not in "iuf" or eye_arr.shape not in ((3,), (n, 3)):
        raise ValueError(f"eye must be real with shape (3,) or ({n}, 3), got {eye_arr.shape}")
    eye_arr = np.ascontiguousarray(np.broadcast_to(eye_arr, (n, 3)), dtype=np.float64)
    fwd = np.asarray(forward)
    if fwd.dtype.kind not in "iuf" or fwd.shape not in ((2,), (n, 2)):
        raise ValueError(f"forward must be real with shape (2,) or ({n}, 2), got {fwd.shape}")
    fwd = np.broadcast_to(fwd, (n, 2)).astype(np.float64)
    norm = np.linalg.norm(fwd, axis=1, keepdims=True)
    if n and not (norm > 0).all():
        raise ValueError("forward must be non-zero horizontal directions")
    fwd = np.ascontiguousarray(fwd / np.where(norm > 0, norm, 1.0))
    proj = _matrices(projection, "projection", n)
    zero = np.ones((4, 4), bool)
    zero[[0, 1, 2, 2, 3], [0, 1, 2, 3, 2]] = False
    if n and ((proj[:, 0, 0] <= 0).any() or (proj[:, 1, 1] <= 0).any()
              or (np.abs(proj[:, 3, 2] + 1) > 1e-12).any() or (proj[:, zero] != 0).any()):
        raise ValueError("projection must be a symmetric perspective (camera.perspective)")
    if not (np.isfinite(eye_arr).all() and np.isfinite([cell, height, *origin]).all()
            and cell > 0 and height > 0):
        raise ValueError("eye, origin must be finite and cell, height positive")
    if not (isinstance(atlas, np.ndarray) and atlas.dtype == np.uint8 and atlas.ndim == 3
            and atlas.shape[2] == 3 and atlas.flags.c_contiguous):
        raise ValueError("atlas must be a C-contiguous uint8 array of shape (AH, AW, 3)")
    rects = np.ascontiguousarray(texture_rects, dtype=np.int32)
    if rects.ndim != 2 or rects.shape[1] != 4 or (rects[:, 2:] <= 0).any() or (
            rects[:, :2] < 0).any() or (rects[:, 0] + rects[:, 2] > atlas.shape[1]).any() or (
            rects[:, 1] + rects[:, 3] > atlas.shape[0]).any():
        raise ValueError("texture_rects must be (K, 4) rectangles inside the atlas")
    if len(textures) != 3 or not all(isinstance(t, (int, np.integer)) and 0 <= t < len(rects)
                                     for t in textures):
        raise ValueError(f"textures must be three indices (wall, floor, ceiling) in [0, {len(rects)})")
    background = _colors(background, 1, "background")[0]
    _raster3d.raycast_grid(frames, depth, idx, grids, grid_ids, eye_arr, fwd, proj,
                           float(origin[0]), float(origin[1]), float(cell), float(height),
                           atlas, rects, int(textures[0]), int(textures[1]), int(textures[2]),
                           background)
