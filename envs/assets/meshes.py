"""The mesh layer: where mental_rotation_3d_objaverse's objects come from.

Sources, in DESIGN's order ("Assets and real data"):

1. a folder the caller names (the family's ``sample_dir`` keyword);
2. else the reference's environment variable ``VIS_GYM_3D_DIR``;
3. else the published evaluation bundle's ``partial_datasets/objaverse`` under the working
   directory, when it exists;
4. else procedural Shepard-Metzler-style objects (``procedural_mesh``): chains of 6-10 unit cubes
   with three or more bends, every cube its own colour along a hue ramp, so no two orientations
   look alike; the lattice is turned to an oblique canonical pose so that the identity view
   shows every arm. An object is a pure function of its id (``procedural/<id>``).

A named folder (1 or 2) holds the reference's Objaverse layout, ``glbs/000-xxx/<uid>.glb``: it
may be the ``glbs`` folder itself or any folder above the GLBs; every file ending in .glb or
.gltf (any case) below it counts, ordered by its POSIX path relative to the folder (the
reference walked the filesystem unsorted). A named folder that is missing, not a folder or
without GLBs raises :class:`MeshSourceError` naming the path (no fall-through to the procedural
objects: a mistyped path must not quietly change the data).

Loading (``load_glb``) follows the reference: the file is read as a scene with trimesh (materials
kept iff ``use_textures``), the scene graph is flattened (each geometry transformed by its node
transform), only triangle meshes with faces are kept, meshes above the face budget (900) are
simplified by quadric decimation when trimesh has a backend for it (else by vertex clustering,
``cluster_faces``: the reference kept them whole), and the result is centred on the centroid
of the oriented bounding box of all vertices and scaled by 1 / (half the diagonal of the
axis-aligned extents). Colours: per face, from vertex colours, the material's base colour, or
the texture sampled at the vertices' UVs (trimesh's ``to_color``), averaged over the face's
corners: textures become per-face colours (a deviation; the rasterizer could draw them through
an atlas, but a 128 px view of a 900-face object shows little more). A file that fails to load
or holds no triangles raises :class:`MeshFileError` naming the file (the reference rendered
such objects white, silently).

Before trimesh reads a file, its glTF JSON alone (a .gltf file, or a GLB's 12-byte header and
JSON chunk: the binary body is not read) is checked (``check_gltf``): the faces it declares
(per primitive, the ``indices`` accessor's count / 3, else the POSITION accessor's; strips and
fans count - 2; times the nodes that instance the mesh) must be at most ``MAX_FACES``
(1,000,000) and its vertices at most ``MAX_VERTICES``: a 2 M-face object costs about 19 s and
0.5 GB to load, a 10 M-face one 106 s and 1.8 GB, per object and process, while Objaverse objects
are mostly far below 1 M faces (the cap admits them; it is about what is read at all, the face
budget about what is kept). Every buffer and image URI must be a ``data:`` URI or a relative
path inside the file's folder (no ``..`` out of it, no absolute path, no ``file:`` or other
scheme): trimesh 5 refuses escaping paths itself, trimesh 4 did not. A file that breaks either
rule raises :class:`MeshFileError` naming the file and the count or URI.

Meshes are cached per process (by path, mtime, size and options), read-only.
"""
from __future__ import annotations

import colorsys
import json
import math
import os
import posixpath
import re
import struct
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...core.cache import BoundedCache
from ...core.validate import describe, show_path

ENV_VAR = "VIS_GYM_3D_DIR"
BUNDLE = Path("partial_datasets") / "objaverse"
EXTENSIONS = (".glb", ".gltf")
PROCEDURAL_PREFIX = "procedural/"
FACE_BUDGET = 900
MAX_FACES = 1_000_000           # faces a file may declare at all (see the module docstring)
MAX_VERTICES = 3 * MAX_FACES
MAX_JSON_BYTES = 256 << 20      # a glTF JSON (a .gltf with data: URIs holds its buffers)
DEFAULT_COLOR = (200, 200, 200)
CACHE_ITEMS = 512


class MeshSourceError(ValueError):
    """A folder of meshes is missing, not a folder, unreadable or empty (message names the path)."""


class MeshFileError(ValueError):
    """One mesh file cannot be loaded or holds no triangles (message names the file)."""


@dataclass(frozen=True)
class Mesh:
    """A normalised object: centred at the origin, radius 1 (see the module docstring)."""

    name: str
    vertices: np.ndarray      # float32[V, 3]
    triangles: np.ndarray     # int32[T, 3]
    face_colors: np.ndarray   # uint8[T, 3]

    @property
    def nbytes(self) -> int:
        return self.vertices.nbytes + self.triangles.nbytes + self.face_colors.nbytes


def _freeze(*arrays):
    for a in arrays:
        a.setflags(write=False)


def normalise(vertices: np.ndarray) -> np.ndarray:
    """The reference's normalisation: translate by -(centroid of the oriented bounding box),
    scale by 1 / (half the AABB diagonal; 1e-3 if degenerate)."""
    v = np.asarray(vertices, np.float64)
    centre = None
    try:
        import trimesh

        to_origin, extents = trimesh.bounds.oriented_bounds(v)
        # The OBB's centre in the input frame: to_origin maps it to the origin.
        centre = np.linalg.inv(to_origin)[:3, 3]
    except Exception:  # degenerate hulls: fall back to the AABB
        centre = None
    lo, hi = v.min(axis=0), v.max(axis=0)
    if centre is None or not np.isfinite(centre).all():
        centre = (lo + hi) / 2.0
    radius = float(np.linalg.norm(hi - lo)) / 2.0
    if not np.isfinite(radius) or radius < 1e-12:
        radius = 1e-3
    return ((v - centre) / radius).astype(np.float32)


# ------------------------------------------------------------------------------ procedural
_BOX_CORNERS = np.array([[sx, sy, sz] for sx in (-0.5, 0.5) for sy in (-0.5, 0.5)
                         for sz in (-0.5, 0.5)], np.float64)
_BOX_QUADS = ((0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3))
_BOX_TRIS = np.array([t for a, b, c, d in _BOX_QUADS for t in ((a, b, c), (a, c, d))], np.int32)
_DIRS = np.array([[1, 0, 0], [-1, 0, 0], [0, 1, 0], [0, -1, 0], [0, 0, 1], [0, 0, -1]])


def _chain(rng) -> list:
    """Cells of a self-avoiding chain of 6-10 cubes in 4-5 straight arms (3+ bends), each bend
    turning onto a new axis."""
    while True:
        arms = int(rng.integers(4, 6))
        n_cubes = int(rng.integers(max(6, arms + 1), 11))
        cuts = np.sort(rng.choice(np.arange(1, n_cubes - 1), arms - 1, replace=False))
        lengths = np.diff(np.concatenate([[0], cuts, [n_cubes - 1]]))
        if (lengths < 1).any():
            continue
        cells = [(0, 0, 0)]
        axis = -1
        ok = True
        for length in lengths:
            choices = [d for d in range(6) if d // 2 != axis]
            d = int(rng.choice(choices))
            axis = d // 2
            for _ in range(int(length)):
                nxt = tuple(int(v) for v in np.add(cells[-1], _DIRS[d]))
                if nxt in cells:
                    ok = False
                    break
                cells.append(nxt)
            if not ok:
                break
        if ok and len(cells) == n_cubes:
            # Non-planar (the chain spans all three axes), else it has a mirror plane.
            spans = np.ptp(np.array(cells), axis=0)
            if (spans > 0).all():
                return cells


def _display_rotation() -> np.ndarray:
    """The procedural objects' canonical pose: the cube lattice turned 35 degrees about +Y and
    then 25 degrees about +X, so an arm along any lattice axis shows in the identity view."""
    a, b = math.radians(35.0), math.radians(25.0)
    ry = np.array([[math.cos(a), 0, math.sin(a)], [0, 1, 0], [-math.sin(a), 0, math.cos(a)]])
    rx = np.array([[1, 0, 0], [0, math.cos(b), -math.sin(b)], [0, math.sin(b), math.cos(b)]])
    return rx @ ry


_DISPLAY = _display_rotation()


def procedural_mesh(object_id: int) -> Mesh:
    """Shepard-Metzler-style object ``procedural/<object_id>``: a pure function of the id."""
    object_id = int(object_id)
    rng = np.random.default_rng([object_id, 0x5EED])
    cells = np.array(_chain(rng), np.float64)
    n = cells.shape[0]
    verts = (cells[:, None, :] + _BOX_CORNERS[None]).reshape(-1, 3) @ _DISPLAY.T
    tris = (_BOX_TRIS[None] + 8 * np.arange(n)[:, None, None]).reshape(-1, 3).astype(np.int32)
    hue0 = rng.random()
    colors = np.empty((n, 3), np.uint8)
    for k in range(n):
        r, g, b = colorsys.hsv_to_rgb((hue0 + 0.8 * k / max(n - 1, 1)) % 1.0, 0.75, 0.95)
        colors[k] = (int(r * 255), int(g * 255), int(b * 255))
    face_colors = np.ascontiguousarray(np.repeat(colors, 12, axis=0))
    mesh = Mesh(f"{PROCEDURAL_PREFIX}{object_id}", normalise(verts), tris, face_colors)
    _freeze(mesh.vertices, mesh.triangles, mesh.face_colors)
    return mesh


def procedural_id(name: str) -> int | None:
    """The id of a ``procedural/<id>`` name, else None."""
    if not name.startswith(PROCEDURAL_PREFIX):
        return None
    digits = name[len(PROCEDURAL_PREFIX):]
    if not digits.isdigit() or len(digits) > 19:
        return None
    value = int(digits)
    return value if value < 2 ** 63 else None


# ------------------------------------------------------------------------------ GLB files
def _face_colors(mesh, use_textures: bool) -> np.ndarray:
    t = len(mesh.faces)
    if not use_textures:
        return np.full((t, 3), DEFAULT_COLOR, np.uint8)
    fc = None
    try:
        visual = mesh.visual
        if getattr(visual, "kind", None) == "texture" or type(visual).__name__ == "TextureVisuals":
            visual = visual.to_color()
        vc = getattr(visual, "vertex_colors", None)
        if visual.kind == "vertex" and vc is not None and len(vc) == len(mesh.vertices):
            fc = np.asarray(vc, np.float64)[np.asarray(mesh.faces)][:, :, :3].mean(axis=1)
        else:
            fc = np.asarray(visual.face_colors, np.float64)[:, :3]
    except Exception:  # unusable materials degrade to the default colour, as the reference's
        fc = None
    if fc is not None and fc.shape == (t, 3) and np.isfinite(fc).all():
        return np.clip(np.rint(fc), 0, 255).astype(np.uint8)
    return np.full((t, 3), DEFAULT_COLOR, np.uint8)


def _decimate(mesh, target: int):
    """Quadric decimation to about ``target`` faces (trimesh's backend); None when it is not
    available or fails."""
    if len(mesh.faces) <= 8:
        return mesh
    try:
        out = mesh.simplify_quadric_decimation(face_count=int(target))
    except Exception:
        return None
    return out if out is not None and len(out.faces) else None


def cluster_faces(vertices: np.ndarray, faces: np.ndarray, budget: int):
    """Vertex clustering down to at most ``budget`` faces (the fallback when trimesh has no
    quadric-decimation backend; the reference then kept full resolution): vertices sharing a
    grid cell merge into their mean, collapsed faces drop; the cell doubles until the budget
    holds. Returns (vertices, faces, kept face indices)."""
    v = np.asarray(vertices, np.float64)
    f = np.asarray(faces, np.int64)
    extent = float(np.ptp(v, axis=0).max()) or 1.0
    cell = extent / 256.0
    while True:
        keys = np.floor((v - v.min(axis=0)) / cell).astype(np.int64)
        _, inverse = np.unique(keys, axis=0, return_inverse=True)
        inverse = inverse.reshape(-1)
        t = inverse[f]
        keep = np.flatnonzero((t[:, 0] != t[:, 1]) & (t[:, 1] != t[:, 2]) & (t[:, 0] != t[:, 2]))
        if keep.size <= budget or cell > extent:
            break
        cell *= 1.5
    n = int(inverse.max()) + 1
    sums = np.zeros((n, 3))
    np.add.at(sums, inverse, v)
    counts = np.bincount(inverse, minlength=n)[:, None]
    return sums / np.maximum(counts, 1), t[keep], keep


_GLB_MAGIC = b"glTF"
_JSON_CHUNK = 0x4E4F534A
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def _gltf_json(path: Path) -> dict:
    """The glTF JSON of a .gltf file or of a GLB's first chunk (the GLB's body is not read)."""
    try:
        with open(path, "rb") as f:
            head = f.read(20)
            if head[:4] == _GLB_MAGIC:
                if len(head) < 20:
                    raise MeshFileError(f"{show_path(path)}: truncated GLB header")
                length, kind = struct.unpack_from("<II", head, 12)
                if kind != _JSON_CHUNK:
                    raise MeshFileError(f"{show_path(path)}: the GLB's first chunk is not its JSON")
                if length > MAX_JSON_BYTES:
                    raise MeshFileError(f"{show_path(path)}: the GLB's JSON chunk declares {length} "
                                        f"bytes, more than the {MAX_JSON_BYTES} read")
                text = f.read(length)
                if len(text) != length:
                    raise MeshFileError(f"{show_path(path)}: the GLB's JSON chunk is truncated")
            elif path.suffix.lower() == ".glb":
                raise MeshFileError(f"{show_path(path)}: not a GLB file (no glTF header)")
            else:
                size = os.fstat(f.fileno()).st_size
                if size > MAX_JSON_BYTES:
                    raise MeshFileError(f"{show_path(path)}: the glTF file has {size} bytes, more "
                                        f"than the {MAX_JSON_BYTES} read")
                text = head + f.read()
    except OSError as exc:
        raise MeshFileError(f"{show_path(path)}: cannot read the mesh file ({exc.strerror})") from None
    try:
        tree = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise MeshFileError(f"{show_path(path)}: the glTF JSON does not parse "
                            f"({str(exc)[:80]})") from None
    if not isinstance(tree, dict):
        raise MeshFileError(f"{show_path(path)}: the glTF JSON is not an object")
    return tree


def _list(tree: dict, key: str) -> list:
    value = tree.get(key, [])
    return value if isinstance(value, list) else []


def _accessor_count(path: Path, accessors: list, index) -> int:
    if type(index) is not int or not 0 <= index < len(accessors) or \
            not isinstance(accessors[index], dict):
        raise MeshFileError(f"{show_path(path)}: a primitive names accessor {describe(index)}, "
                            f"which the glTF JSON does not have")
    count = accessors[index].get("count")
    if type(count) is not int or count < 0:
        raise MeshFileError(f"{show_path(path)}: accessor {index} has no valid count "
                            f"({describe(count)})")
    return count


def gltf_counts(path, tree: dict | None = None) -> tuple[int, int]:
    """(faces, vertices) that a glTF file declares in its JSON: per triangle primitive, the
    indices accessor's count / 3 (else the POSITION accessor's; strips and fans count - 2), each
    mesh counted once per node that instances it (at least once); vertices: POSITION counts."""
    path = Path(path)
    tree = _gltf_json(path) if tree is None else tree
    accessors = _list(tree, "accessors")
    uses: dict[int, int] = {}
    for node in _list(tree, "nodes"):
        mesh = node.get("mesh") if isinstance(node, dict) else None
        if type(mesh) is int:
            uses[mesh] = uses.get(mesh, 0) + 1
    faces = vertices = 0
    for m, mesh in enumerate(_list(tree, "meshes")):
        prims = mesh.get("primitives", []) if isinstance(mesh, dict) else []
        for prim in prims if isinstance(prims, list) else []:
            if not isinstance(prim, dict):
                continue
            attributes = prim.get("attributes")
            position = attributes.get("POSITION") if isinstance(attributes, dict) else None
            n_vert = 0 if position is None else _accessor_count(path, accessors, position)
            indices = prim.get("indices")
            n = n_vert if indices is None else _accessor_count(path, accessors, indices)
            mode = prim.get("mode", 4)
            tris = n // 3 if mode == 4 else max(n - 2, 0) if mode in (5, 6) else 0
            times = max(1, uses.get(m, 0))
            faces += tris * times
            vertices += n_vert * times
    return faces, vertices


def check_gltf_uris(path, tree: dict | None = None) -> None:
    """MeshFileError unless every buffer and image URI of a glTF file is a ``data:`` URI or a
    relative path that stays inside the file's folder."""
    path = Path(path)
    tree = _gltf_json(path) if tree is None else tree
    for key in ("buffers", "images"):
        for k, item in enumerate(_list(tree, key)):
            uri = item.get("uri") if isinstance(item, dict) else None
            if uri is None:
                continue
            if not isinstance(uri, str):
                raise MeshFileError(f"{show_path(path)}: {key}[{k}].uri is not a string")
            if uri.startswith("data:"):
                continue
            for form in {uri, urllib.parse.unquote(uri)}:
                text = form.strip().replace("\\", "/")
                norm = posixpath.normpath(text) if text else ""
                if (text.startswith("/") or _SCHEME.match(text) or "\x00" in text
                        or norm == ".." or norm.startswith("../")):
                    raise MeshFileError(
                        f"{show_path(path)}: {key}[{k}].uri {describe(uri)} points outside the "
                        f"file's folder (only relative paths inside it and data: URIs are read)")


def check_gltf(path, max_faces: int = MAX_FACES) -> None:
    """Refuse, from the glTF JSON alone, a file that declares more than ``max_faces`` faces
    (or ``MAX_VERTICES`` vertices) or whose URIs leave its folder (see the module docstring)."""
    path = Path(path)
    tree = _gltf_json(path)
    check_gltf_uris(path, tree)
    faces, vertices = gltf_counts(path, tree)
    if faces > max_faces:
        raise MeshFileError(f"{show_path(path)}: the mesh file declares {faces} faces, more than "
                            f"the {max_faces} loaded at most (decimate it first)")
    if vertices > MAX_VERTICES:
        raise MeshFileError(f"{show_path(path)}: the mesh file declares {vertices} vertices, more "
                            f"than the {MAX_VERTICES} loaded at most (decimate it first)")


def load_glb(path, use_textures: bool = True, face_budget: int = FACE_BUDGET,
             name: str | None = None, max_faces: int = MAX_FACES) -> Mesh:
    """A GLB/glTF file as a normalised :class:`Mesh` (see the module docstring)."""
    path = Path(path)
    label = name or str(path)
    check_gltf(path, max_faces)
    try:
        import trimesh

        scene = trimesh.load(str(path), force="scene", process=True,
                             skip_materials=not use_textures)
        meshes = [m for m in scene.dump()
                  if isinstance(m, trimesh.Trimesh) and len(m.faces) > 0]
    except Exception as exc:
        raise MeshFileError(f"{path}: cannot load the mesh file ({type(exc).__name__}: "
                            f"{str(exc)[:200]})") from None
    if not meshes:
        raise MeshFileError(f"{path}: the mesh file holds no triangles (it would render empty)")
    total = sum(len(m.faces) for m in meshes)
    verts, tris, cols = [], [], []
    offset = 0
    for m in meshes:
        colors = None
        if face_budget > 0 and total > face_budget:
            target = max(1, math.ceil(len(m.faces) * face_budget / total))
            simplified = _decimate(m, target)
            if simplified is None:      # no backend: cluster, keeping each kept face's colour
                colors = _face_colors(m, use_textures)
                v, f, keep = cluster_faces(m.vertices, m.faces, target)
                colors = colors[keep]
            else:
                m = simplified
        if colors is None:
            v = np.asarray(m.vertices, np.float64)
            f = np.asarray(m.faces, np.int64)
            colors = _face_colors(m, use_textures)
        if not np.isfinite(v).all():
            raise MeshFileError(f"{path}: the mesh file has non-finite vertex coordinates")
        verts.append(v)
        tris.append(f + offset)
        cols.append(colors)
        offset += v.shape[0]
    if not sum(len(t) for t in tris):
        raise MeshFileError(f"{path}: the mesh file holds no triangles (it would render empty)")
    v = np.concatenate(verts)
    mesh = Mesh(label, normalise(v), np.ascontiguousarray(np.concatenate(tris), np.int32),
                np.ascontiguousarray(np.concatenate(cols), np.uint8))
    _freeze(mesh.vertices, mesh.triangles, mesh.face_colors)
    return mesh


# ------------------------------------------------------------------------------ sources
_MESHES = BoundedCache("meshes", max_items=CACHE_ITEMS)


def _cached(key, build):
    return _MESHES.get_or_build(key, build)


class MeshSource:
    """Objects of one source: a folder of GLBs (``files`` sorted, relative POSIX paths) or the
    procedural objects (``files`` empty)."""

    def __init__(self, root: Path | None, use_textures: bool = True,
                 face_budget: int = FACE_BUDGET):
        self.root = root
        self.use_textures = bool(use_textures)
        self.face_budget = int(face_budget)
        self.files: tuple[str, ...] = ()
        if root is not None:
            self.files = _scan(root)
            self._index = {name: k for k, name in enumerate(self.files)}

    @property
    def procedural(self) -> bool:
        return self.root is None

    def pick(self, seed: int) -> str:
        """The object of an episode seed."""
        rng = np.random.default_rng([int(seed), 0x0B1])
        if self.procedural:
            return f"{PROCEDURAL_PREFIX}{int(rng.integers(0, 2 ** 31))}"
        return self.files[int(rng.integers(0, len(self.files)))]

    def check_name(self, name) -> str:
        """``name`` if this source has that object, else ValueError."""
        if not isinstance(name, str):
            raise ValueError(f"expected a string, got {type(name).__name__}")
        if self.procedural:
            if procedural_id(name) is None:
                raise ValueError(f"expected 'procedural/<id>' (the procedural objects; pass "
                                 f"sample_dir for a GLB folder), got {name[:120]!r}")
            return name
        key = name[2:] if name.startswith("./") else name
        if key not in self._index:
            raise ValueError(f"no such object {name[:120]!r} in {self.root}")
        return key

    def index(self, name: str) -> int:
        """The position of file ``name`` in ``files`` (KeyError if absent)."""
        return self._index[name]

    def load(self, name: str) -> Mesh:
        pid = procedural_id(name)
        if self.procedural:
            return _cached(("proc", pid), lambda: procedural_mesh(pid))
        path = self.root / name
        try:
            st = path.stat()
        except OSError as exc:
            raise MeshFileError(f"{path}: cannot read the mesh file ({exc.strerror})") from None
        key = ("glb", str(path), st.st_mtime_ns, st.st_size, self.use_textures, self.face_budget)
        return _cached(key, lambda: load_glb(path, self.use_textures, self.face_budget, name))


def _scan(root: Path) -> tuple[str, ...]:
    try:
        exists, is_dir = root.exists(), root.is_dir()
    except (OSError, ValueError) as exc:
        raise MeshSourceError(f"{show_path(root)}: not a usable folder path ({exc})") from None
    if not exists:
        raise MeshSourceError(f"{show_path(root)}: the mesh folder does not exist")
    if not is_dir:
        raise MeshSourceError(f"{show_path(root)}: not a folder (expected the Objaverse 'glbs' folder)")
    found = []
    try:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
            for f in filenames:
                if not f.startswith(".") and f.lower().endswith(EXTENSIONS):
                    found.append(Path(dirpath, f).relative_to(root).as_posix())
    except OSError as exc:
        raise MeshSourceError(f"{show_path(root)}: cannot read the mesh folder ({exc})") from None
    if not found:
        raise MeshSourceError(f"{show_path(root)}: no .glb or .gltf files in the mesh folder (expected "
                              f"the Objaverse layout glbs/000-xxx/<uid>.glb)")
    return tuple(sorted(found))


def _named(path: Path) -> Path:
    """A named folder, or the ``partial_datasets/objaverse`` folder of a bundle root it holds
    (``visgym eval --dataset-root``)."""
    sub = path / BUNDLE
    try:
        return sub if sub.is_dir() else path
    except (OSError, ValueError):   # unusable path: _scan names it
        return path


def resolve_root(sample_dir: str | None) -> Path | None:
    """The folder of the sources above, or None for the procedural objects."""
    if sample_dir:
        return _named(Path(sample_dir).expanduser())
    env = os.environ.get(ENV_VAR)
    if env:
        return _named(Path(env).expanduser())
    bundle = Path.cwd() / BUNDLE
    if bundle.is_dir():
        return bundle
    return None


def mesh_source(sample_dir: str | None, use_textures: bool = True,
                face_budget: int = FACE_BUDGET) -> MeshSource:
    return MeshSource(resolve_root(sample_dir), use_textures, face_budget)
