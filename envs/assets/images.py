"""The image layer: where a photo family's pictures come from, and a decoded-image table.

Sources, in DESIGN's order ("Assets and real data"):

1. a directory the caller names (a family's ``sample_dir`` keyword, given here as ``image_dir``);
2. else the reference's environment variable ``VIS_GYM_IMAGE_DIR``;
3. else the published evaluation bundle's ``partial_datasets/<task>`` folder under ``bundle_root``
   (default: the working directory), when the family names its bundle task;
4. else the built-in photos: CC0 / public-domain samples shipped inside scikit-image's wheel
   (``skimage/data``), read from the installed package's files with Pillow -- never through
   scikit-image's download helpers -- and listed with licence, SHA-256 and size in ``BUILTIN_IMAGES``.

A named directory (1 or 2) may be the image folder itself or a bundle root that holds
``partial_datasets/<task>``; the latter wins when both fit. A named directory that is missing,
not a directory, unreadable or without matching images raises :class:`ImageSourceError` naming
the path (no silent fall-through to the built-ins: a mistyped path must not quietly change the
data). The reference falls back from a missing ``$VIS_GYM_IMAGE_DIR`` to the bundle, and scans an
implicit ``data/images``; this layer does neither: name the folder explicitly.

How a folder is scanned is a :class:`ScanRule` the family passes (extensions, case sensitivity,
depth), so one source serves every family's reference rule; see ``JIGSAW_SCAN``, ``ZOOM_IN_SCAN``
and ``COLORIZATION_SCAN``. Files are ordered by their path relative to the folder, as POSIX strings
(the reference sorts full path strings; with one common prefix that is the same order).

Links and bounds of a scan: each real folder is listed once (keyed by device and inode), so links
back into the folder add nothing and cannot make a scan endless, and a photo reached through links
is listed once, named by its real path relative to the folder (a link's own name is never a
table name; a folder without links keeps its sorted relative paths exactly). A link the rule
would follow (a folder link, or a link named like an image) that leads out of the folder raises
:class:`ImageSourceError` naming the link: photos are read only from inside the folder named. A
scan lists at most ``MAX_SCAN_ENTRIES`` entries (5,000,000: nine times the reference's 558k
photos) and ``MAX_SCAN_DEPTH`` folder levels (32); past either it raises naming the folder and
the bound. A named folder may start with ``~`` (the user's home, as ``os.path.expanduser``).

Unreadable files: the scan only lists names (decoding 558k photos up front is not affordable), but
a zero-byte file fails the scan with :class:`ImageFileError` naming it. A file that cannot be decoded
raises :class:`ImageFileError` naming the file and the decoder's reason every time it is loaded --
it is never skipped, so the same seed can never silently show a different photo.
``ImageSource.verify()`` decodes every file and names all bad ones at once, for checking a folder
before a run.

Which image an episode uses is a pure function of its seed (``pick(seed)``/``pick_id(seed)``) or is
named in its init state (``load(name)``/``id_of(name)``); there is no "next image". Images are
uint8 RGB arrays (H, W, 3), decoded lazily and cached per process (least recently used first
out past ``CACHE_BYTES``), read-only. Built-ins are
normalised to the reference's image scale (see :func:`normalise_size`); folder images keep their
native size unless the family passes ``scale`` (the reference's init states address native pixels).

Decoding is bounded: the size a file declares is read from its header first, and a photo of more
than ``MAX_PIXELS`` pixels (2**26: 8192 x 8192, or any 64-megapixel shape; see the constant) is
not decoded at its native size. Native pixels are what a source without ``scale`` hands out
(zoom_in_puzzle's crop boxes address them; jigsaw fits pictures itself), so a reduced copy would
change its episodes: such a photo raises :class:`ImageFileError` naming the file and its size.
A source with ``scale`` resizes every photo anyway; there a JPEG past the cap is decoded by
libjpeg at 1/2, 1/4 or 1/8 scale (Pillow's ``draft``), still at least the target size, then
resized (Lanczos) to the same ``normalise_size`` as a full decode would give; other formats past
the cap (which Pillow decodes only whole) are refused. Photos within the cap decode exactly as
always. Pillow's own decompression-bomb refusal becomes an :class:`ImageFileError` naming the file.
Messages quote paths and names cut to about 120 characters (``show_path``, ``describe``).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from ...core.cache import BoundedCache
from ...core.validate import describe, show_path

ENV_VAR = "VIS_GYM_IMAGE_DIR"
BUNDLE_DIR = "partial_datasets"

#: The reference's photos are LLaVA-Pretrain images, ~336 px on the shorter side (e.g. 336x507);
#: jigsaw asks for sizes divisible by 6 so 2x2 and 3x3 grids cut into equal pieces.
REFERENCE_SHORT_SIDE = 336
SIZE_MULTIPLE = 6

#: The most pixels decoded at a photo's native size. 2**26 = 8192 x 8192: four times the largest
#: picture a family shows (jigsaw's max_image_height x max_image_width <= 4096 x 4096;
#: zoom_in_puzzle's tiles are 224 px), above every common phone or camera photo (<= 50 MP) and
#: under Pillow's own bomb warning (89.5 M pixels). Not 4096 a side: zoom_in_puzzle crops native
#: pixels, and that would refuse an ordinary 6000 x 4000 photo. A decode at the cap peaks near
#: 0.7 GB and takes 1-2 s (a 12000 x 12000 PNG took 2.0 GB and 10-12 s before the cap).
MAX_PIXELS = 1 << 26
#: A scan lists at most this many directory entries (9x the reference's 558k photos) and descends
#: at most this many folder levels: bounds against a folder that never ends (/proc, network mounts).
MAX_SCAN_ENTRIES = 5_000_000
MAX_SCAN_DEPTH = 32


class ImageSourceError(ValueError):
    """A folder of images is missing, not a folder, unreadable or empty (message names the path)."""


class ImageFileError(ValueError):
    """One image file is empty or cannot be decoded (message names the file)."""


@dataclass(frozen=True)
class ScanRule:
    """How a family's reference lists the images of a folder.

    ``extensions``: suffixes with the dot (".jpg"); ``case_sensitive``: whether ".JPG" matches
    ".jpg"; ``max_depth``: 0 = the folder only, 1 = the folder and its direct sub-folders,
    None = recursive. Hidden entries (names starting with ".") are ignored.
    """

    extensions: tuple[str, ...] = (".jpg", ".jpeg", ".png")
    case_sensitive: bool = True
    max_depth: int | None = None

    def __post_init__(self):
        if not self.extensions or not all(
            isinstance(e, str) and e.startswith(".") and len(e) > 1 for e in self.extensions
        ):
            raise ValueError(f"ScanRule.extensions: expected suffixes like '.jpg', got "
                             f"{describe(self.extensions)}")
        if self.max_depth is not None and (not isinstance(self.max_depth, int) or self.max_depth < 0):
            raise ValueError(f"ScanRule.max_depth: expected None or an int >= 0, got "
                             f"{describe(self.max_depth)}")

    def matches(self, filename: str) -> bool:
        if self.case_sensitive:
            return filename.endswith(self.extensions)
        low = filename.lower()
        return any(low.endswith(e.lower()) for e in self.extensions)

    def describe(self) -> str:
        depth = {None: "recursive", 0: "folder only", 1: "folder + one sub-folder level"}.get(
            self.max_depth, f"{self.max_depth} sub-folder levels")
        case = "case-sensitive" if self.case_sensitive else "case-insensitive"
        return f"{'/'.join('*' + e for e in self.extensions)}, {depth}, {case}"


#: jigsaw: .jpg/.jpeg/.png in the folder and exactly one sub-folder deep, case-sensitive.
JIGSAW_SCAN = ScanRule((".jpg", ".jpeg", ".png"), case_sensitive=True, max_depth=1)
#: zoom_in_puzzle: .png/.jpg/.jpeg anywhere under the folder, case-sensitive.
ZOOM_IN_SCAN = ScanRule((".png", ".jpg", ".jpeg"), case_sensitive=True, max_depth=None)
#: colorization: jpg/jpeg/png/bmp/tiff/tif anywhere under the folder, case-insensitive.
COLORIZATION_SCAN = ScanRule((".jpg", ".jpeg", ".png", ".bmp", ".tiff", ".tif"),
                             case_sensitive=False, max_depth=None)


# ---------------------------------------------------------------------------------------------
# Built-in photos (scikit-image's sample data, shipped inside its wheel)
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class BuiltinImage:
    name: str
    file: str          # relative to the installed skimage/data folder
    licence: str
    credit: str
    sha256: str        # of the file as shipped (equals skimage.data._registry's entry)
    bytes: int
    width: int         # native size of the file
    height: int
    mode: str          # Pillow mode of the file ("RGB", "L", "RGBA")


#: Manifest of the built-in photos. Licences as stated in scikit-image's ``skimage/data/_fetchers.py``
#: docstrings for version 0.26 (files identical since 0.19: the hashes equal its ``_registry.py``).
#: Only images stated CC0 or public domain are listed; "no known copyright restrictions" ones
#: (coins, immunohistochemistry) and textures/diagrams are left out.
BUILTIN_IMAGES: tuple[BuiltinImage, ...] = (
    BuiltinImage("astronaut", "astronaut.png", "public domain",
                 "NASA, Eileen Collins (no known copyright restrictions, released into the public domain)",
                 "88431cd9653ccd539741b555fb0a46b61558b301d4110412b5bc28b5e3ea6cb5", 791555, 512, 512, "RGB"),
    BuiltinImage("camera", "camera.png", "CC0", "Lav Varshney (CC0 by the photographer)",
                 "b0793d2adda0fa6ae899c03989482bff9a42d3d5690fc7e3648f2795d730c23a", 139512, 512, 512, "L"),
    BuiltinImage("chelsea", "chelsea.png", "CC0", "Stefan van der Walt (CC0 by the photographer)",
                 "596aa1e7cb875eb79f437e310381d26b338a81c2da23439704a73c4651e8c4bb", 240512, 451, 300, "RGB"),
    BuiltinImage("clock_motion", "clock_motion.png", "public domain",
                 "Stefan van der Walt (released into the public domain by the photographer)",
                 "f029226b28b642e80113d86622e9b215ee067a0966feaf5e60604a1e05733955", 58784, 400, 300, "L"),
    BuiltinImage("coffee", "coffee.png", "CC0", "Rachel Michetti (CC0 by the photographer)",
                 "cc02f8ca188b167c775a7101b5d767d1e71792cf762c33d6fa15a4599b5a8de7", 466706, 600, 400, "RGB"),
    BuiltinImage("horse", "horse.png", "CC0", "Andreas Preuss (marauder) (CC0 given by owner)",
                 "c7fb60789fe394c485f842291ea3b21e50d140f39d6dcb5fb9917cc178225455", 16633, 400, 328, "RGBA"),
    BuiltinImage("hubble_deep_field", "hubble_deep_field.jpg", "public domain",
                 "NASA / Hubble (may be freely used in the public domain)",
                 "3a19c5dd8a927a9334bb1229a6d63711b1c0c767fb27e2286e7c84a3e2c2f5f4", 527940, 1000, 872, "RGB"),
    BuiltinImage("retina", "retina.jpg", "CC0",
                 "Häggström, Mikael (2014), Medical gallery of Mikael Häggström 2014 (CC0 1.0)",
                 "38a07f36f27f095e818aea7b96d34202c05176d30253c66733f2e00379e9e0e6", 269564, 1411, 1411, "RGB"),
    BuiltinImage("rocket", "rocket.jpg", "public domain",
                 "SpaceX (released into the public domain)",
                 "c2dd0de7c538df8d111e479619b129464d0269d0ae5fd18ca91d33a7fdfea95c", 112525, 640, 427, "RGB"),
)


def skimage_data_dir() -> Path:
    """The installed scikit-image's ``data`` folder, found without importing the package."""
    spec = importlib.util.find_spec("skimage")
    if spec is None or not spec.submodule_search_locations:
        raise ImageSourceError("built-in images: scikit-image is not installed "
                               "(pip install scikit-image), and no image folder was named")
    return Path(list(spec.submodule_search_locations)[0]) / "data"


def normalise_size(width: int, height: int, short_side: int = REFERENCE_SHORT_SIDE,
                   multiple: int = SIZE_MULTIPLE) -> tuple[int, int]:
    """(width, height) at the reference scale: the shorter side becomes ``short_side``, the longer
    one keeps the aspect ratio, rounded half-up to the nearest multiple of ``multiple`` (at least one
    multiple). ``short_side`` itself is rounded the same way. E.g. 451x300 -> 504x336, 512x512 -> 336x336."""
    if width <= 0 or height <= 0:
        raise ValueError(f"normalise_size: expected a positive size, got {width}x{height}")
    if short_side <= 0 or multiple <= 0:
        raise ValueError(f"normalise_size: short_side and multiple must be > 0, got {short_side}, {multiple}")

    def snap(x: float) -> int:
        return max(multiple, int(np.floor(x / multiple + 0.5)) * multiple)

    s = snap(short_side)
    if width <= height:
        return s, snap(height * s / width)
    return snap(width * s / height), s


# ---------------------------------------------------------------------------------------------
# Decoding and the per-process cache
# ---------------------------------------------------------------------------------------------

# Decoded images, least recently used first, bounded in bytes so a long run over a large folder
# (the reference's 558k photos) keeps a working set, not every image it ever showed.
CACHE_BYTES = 1 << 30
DECODED = BoundedCache("decoded images", max_bytes=CACHE_BYTES)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _reduce_or_refuse(im, path, scale: int | None) -> None:
    """Past ``MAX_PIXELS`` (the size read from the header; nothing is decoded yet): draft a JPEG
    that is resized anyway (``scale``) to the smallest libjpeg scale still at least the target,
    else raise ImageFileError naming the file and its size (see the module docstring)."""
    width, height = im.size
    if width * height <= MAX_PIXELS:
        return
    if scale is not None and im.format == "JPEG":
        im.draft(None, normalise_size(width, height, scale))
        if im.width * im.height <= MAX_PIXELS:
            return
        why = "even at the reduced scale its target size allows"
    elif scale is not None:
        why = "only JPEGs are decoded at a reduced scale"
    else:
        why = "photos are used at their native size here, so a reduced copy would change episodes"
    raise ImageFileError(f"{show_path(path)}: {width}x{height} px ({width * height:,} pixels) is "
                         f"beyond the {MAX_PIXELS:,} pixels decoded at most ({why}); shrink the "
                         f"file")


def decode_rgb(path: Path, scale: int | None = None) -> np.ndarray:
    """Decode ``path`` to a uint8 (H, W, 3) RGB array. Transparent pixels are composited over white;
    greyscale is replicated to three channels. With ``scale``, resize (Lanczos) to
    ``normalise_size(W, H, scale)`` of the native size. Past ``MAX_PIXELS`` a JPEG with ``scale``
    is decoded reduced, anything else refused (see the module docstring). Raises ImageFileError
    naming the file when it cannot be read."""
    from PIL import Image, UnidentifiedImageError

    shown = show_path(path)
    try:
        with Image.open(path) as im:
            target = None if scale is None else normalise_size(im.width, im.height, scale)
            _reduce_or_refuse(im, path, scale)
            im.load()
            if im.mode == "P" and "transparency" in im.info:
                im = im.convert("RGBA")
            if im.mode in ("RGBA", "LA", "PA"):
                rgba = im.convert("RGBA")
                bg = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
                im = Image.alpha_composite(bg, rgba).convert("RGB")
            elif im.mode == "I;16" or im.mode == "I" or im.mode == "F":
                a = np.asarray(im, dtype=np.float64)
                lo, hi = float(a.min()), float(a.max())
                a = np.zeros_like(a) if hi <= lo else (a - lo) * (255.0 / (hi - lo))
                im = Image.fromarray(np.round(a).astype(np.uint8), "L").convert("RGB")
            elif im.mode != "RGB":   # converting RGB to RGB would only copy it
                im = im.convert("RGB")
            if target is not None and target != im.size:
                im = im.resize(target, Image.Resampling.LANCZOS)
            arr = np.array(im, dtype=np.uint8)
    except ImageFileError:
        raise
    except FileNotFoundError:
        raise ImageFileError(f"{shown}: image file does not exist") from None
    except PermissionError as e:
        raise ImageFileError(f"{shown}: image file is not readable ({e.strerror})") from None
    except Image.DecompressionBombError as e:
        raise ImageFileError(f"{shown}: refused by Pillow as a possible decompression bomb "
                             f"({str(e)[:120]})") from None
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as e:
        raise ImageFileError(f"{shown}: cannot decode image ({type(e).__name__}: "
                             f"{str(e)[:200]})") from None
    if arr.ndim != 3 or arr.shape[2] != 3 or arr.shape[0] == 0 or arr.shape[1] == 0:
        raise ImageFileError(f"{shown}: decoded to an unexpected shape {arr.shape}")
    return arr


def _cached_decode(path: Path, scale: int | None, expected_sha256: str | None = None) -> np.ndarray:
    try:
        st = path.stat()
    except FileNotFoundError:
        raise ImageFileError(f"{show_path(path)}: image file does not exist") from None
    except OSError as e:
        raise ImageFileError(f"{show_path(path)}: cannot stat image file ({e.strerror})") from None
    key = (str(path), st.st_size, st.st_mtime_ns, scale)

    def decode() -> np.ndarray:
        if expected_sha256 is not None:
            got = _sha256(path)
            if got != expected_sha256:
                raise ImageFileError(f"{show_path(path)}: SHA-256 {got} does not match the "
                                     f"manifest's {expected_sha256} (a different scikit-image "
                                     f"data file?)")
        arr = decode_rgb(path, scale)
        arr.setflags(write=False)
        return arr

    return DECODED.get_or_build(key, decode)


def clear_cache() -> None:
    """Forget every decoded image of this process."""
    DECODED.clear()


# ---------------------------------------------------------------------------------------------
# Scanning a folder
# ---------------------------------------------------------------------------------------------

def scan_dir(root: Path, rule: ScanRule) -> tuple[str, ...]:
    """Relative POSIX paths of the images under ``root`` per ``rule``, sorted as strings. Each
    real folder is listed once and each photo named by its real path relative to ``root``; links
    out of ``root`` are refused; the scan is bounded (see the module docstring)."""
    root = Path(root)
    _check_dir(root, "image folder")
    real_root = os.path.realpath(root)
    inside = real_root.rstrip(os.sep) + os.sep   # every real path under the folder starts so
    found: dict[str, None] = {}   # real paths of the photos, in the order found
    listed: set[tuple[int, int]] = set()
    entries = depth = 0

    def linked(e: os.DirEntry) -> str:
        """The real path of a link the rule uses: it must stay inside the folder."""
        real = os.path.realpath(e.path)
        if real != real_root and not real.startswith(inside):
            raise ImageSourceError(f"{show_path(e.path)}: a link out of the image folder (to "
                                   f"{show_path(real)}); only what is inside the folder is read")
        return real

    # Breadth first, each level in sorted order, so a folder is listed at its least depth.
    level = [(str(root), real_root)]
    while level:
        deeper = []
        for d, real_dir in level:
            try:
                st = os.stat(d)
                if (st.st_dev, st.st_ino) in listed:
                    continue   # reached before (a link back into the folder, an alias)
                listed.add((st.st_dev, st.st_ino))
                if depth > MAX_SCAN_DEPTH:
                    raise ImageSourceError(
                        f"{show_path(root)}: folders nested more than {MAX_SCAN_DEPTH} levels "
                        f"deep (at {show_path(d)}), the most a scan descends")
                real_dir = real_dir.rstrip(os.sep) + os.sep
                descend = rule.max_depth is None or depth < rule.max_depth
                with os.scandir(d) as it:
                    for e in it:
                        entries += 1
                        if entries > MAX_SCAN_ENTRIES:
                            raise ImageSourceError(
                                f"{show_path(root)}: more than {MAX_SCAN_ENTRIES:,} entries under "
                                f"the image folder, the most a scan lists (name a smaller folder)")
                        if e.name.startswith("."):
                            continue
                        try:
                            is_dir = e.is_dir()
                            is_file = (not is_dir) and e.is_file()
                        except OSError:
                            continue
                        if is_dir and descend:
                            real = linked(e) if e.is_symlink() else real_dir + e.name
                            deeper.append((e.path, real))
                        elif is_file and rule.matches(e.name):
                            real = linked(e) if e.is_symlink() else real_dir + e.name
                            _check_file_size(e)
                            found[real] = None
            except PermissionError as e:
                raise ImageSourceError(f"{show_path(d)}: image folder is not readable "
                                       f"({e.strerror})") from None
            except OSError as e:
                raise ImageSourceError(f"{show_path(d)}: cannot list image folder "
                                       f"({e.strerror or type(e).__name__})") from None
        level = sorted(deeper)
        depth += 1
    if not found:
        raise ImageSourceError(f"{show_path(root)}: image folder contains no image files "
                               f"({rule.describe()})")
    names = (real[len(inside):] for real in found)
    return tuple(sorted(names if os.sep == "/" else (n.replace(os.sep, "/") for n in names)))


def _check_file_size(e: os.DirEntry) -> None:
    """A listed photo must be statable and not empty (ImageFileError naming it)."""
    try:
        size = e.stat().st_size
    except OSError as err:
        raise ImageFileError(f"{show_path(e.path)}: cannot stat image file "
                             f"({err.strerror})") from None
    if size == 0:
        raise ImageFileError(f"{show_path(e.path)}: image file is empty (0 bytes)")


# ---------------------------------------------------------------------------------------------
# The source / decoded-image table
# ---------------------------------------------------------------------------------------------

@dataclass(eq=False)
class ImageSource:
    """An ordered table of images. Item ``i`` has name ``names[i]`` (a built-in's name, or the path
    relative to ``root``); ``array(i)`` is its decoded uint8 (H, W, 3) RGB array (read-only, cached
    per process). ``kind`` is "directory" or "builtin"; ``origin`` says how it was chosen."""

    names: tuple[str, ...]
    paths: tuple[Path, ...]
    kind: str
    origin: str
    root: Path | None = None
    scale: int | None = None
    order_seed: int = 0
    _sha256: tuple[str | None, ...] = field(default=(), repr=False)
    _index: dict[str, int] = field(default_factory=dict, repr=False)
    _order: np.ndarray = field(default=None, repr=False)

    def __post_init__(self):
        if not self.names:
            raise ImageSourceError(f"{self.origin}: no images")
        if not self._sha256:
            self._sha256 = (None,) * len(self.names)
        self._index = {n: i for i, n in enumerate(self.names)}
        # A fixed permutation of the table: consecutive seeds visit every image before any repeats.
        self._order = np.random.RandomState(self.order_seed).permutation(len(self.names)).astype(np.int64)
        self._order.setflags(write=False)

    def __len__(self) -> int:
        return len(self.names)

    # -- which image -------------------------------------------------------------------------

    def pick_id(self, seed) -> int:
        """Table id of the image for an episode seeded ``seed`` (pure: same seed, same image)."""
        if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise ValueError(f"seed: expected an int >= 0, got {seed!r}")
        return int(self._order[int(seed) % len(self.names)])

    def pick(self, seed) -> str:
        """Name of the image for an episode seeded ``seed``."""
        return self.names[self.pick_id(seed)]

    def id_of(self, name: str) -> int:
        """Table id of the image called ``name`` (e.g. an init state's ``image_name``)."""
        try:
            return self._index[name]
        except (KeyError, TypeError):
            where = show_path(self.root if self.root is not None else self.origin)
            raise ImageFileError(f"image_name {describe(name)}: not in the image source {where} "
                                 f"({len(self.names)} images)") from None

    # -- pixels --------------------------------------------------------------------------------

    def array(self, image_id) -> np.ndarray:
        """Decoded uint8 (H, W, 3) image of table id ``image_id`` (read-only; copy to modify)."""
        i = int(image_id)
        if not 0 <= i < len(self.names):
            raise IndexError(f"image_id {image_id!r}: out of range for {len(self.names)} images")
        return _cached_decode(self.paths[i], self.scale, self._sha256[i])

    def load(self, name: str) -> np.ndarray:
        """Decoded image called ``name``."""
        return self.array(self.id_of(name))

    def arrays(self, image_ids) -> list[np.ndarray]:
        return [self.array(i) for i in np.asarray(image_ids).reshape(-1)]

    def verify(self) -> None:
        """Decode every image; raise ImageFileError naming all that fail (one line each)."""
        bad = []
        for i in range(len(self.names)):
            try:
                self.array(i)
            except ImageFileError as e:
                bad.append(str(e))
        if bad:
            raise ImageFileError(f"{len(bad)} unreadable image(s): " + "; ".join(bad))


def builtin_source(names: Sequence[str] | None = None, *, scale: int | None = REFERENCE_SHORT_SIDE,
                   order_seed: int = 0, colour_only: bool = False) -> ImageSource:
    """The built-in photos (all of ``BUILTIN_IMAGES``, or those named), normalised to ``scale``.
    ``colour_only`` drops greyscale ones (camera, clock_motion) and the horse silhouette."""
    table = {b.name: b for b in BUILTIN_IMAGES}
    if names is None:
        chosen = list(BUILTIN_IMAGES)
    else:
        unknown = [n for n in names if n not in table]
        if unknown:
            raise ValueError(f"builtin images: unknown name(s) {describe(unknown)}; known: "
                             f"{sorted(table)}")
        chosen = [table[n] for n in names]
    if colour_only:
        chosen = [b for b in chosen if b.mode == "RGB"]
    data = skimage_data_dir()
    return ImageSource(
        names=tuple(b.name for b in chosen), paths=tuple(data / b.file for b in chosen),
        kind="builtin", origin=f"built-in photos ({data})", root=None, scale=scale,
        order_seed=order_seed, _sha256=tuple(b.sha256 for b in chosen))


def _check_dir(path: Path, what: str) -> None:
    """ImageSourceError naming ``what`` and the (cut) path unless ``path`` is a folder."""
    try:
        if not path.exists():
            raise ImageSourceError(f"{show_path(path)}: {what} does not exist")
        if not path.is_dir():
            raise ImageSourceError(f"{show_path(path)}: {what} is not a directory")
    except OSError as e:   # e.g. a name too long for the file system
        raise ImageSourceError(f"{show_path(path)}: {what} cannot be looked up "
                               f"({e.strerror or type(e).__name__})") from None


def _resolve_named_dir(path: str, bundle_task: str | None, what: str) -> Path:
    folder = Path(os.path.expanduser(path))   # an unknown ~user stays as written (not found)
    _check_dir(folder, what)
    if bundle_task:
        sub = folder / BUNDLE_DIR / bundle_task
        if sub.is_dir():
            return sub
    return folder


def image_source(image_dir: str | os.PathLike | None = None, *, rule: ScanRule = ScanRule(),
                 bundle_task: str | None = None, bundle_root: str | os.PathLike | None = None,
                 env: Mapping[str, str] | None = None, scale: int | None = None,
                 builtin_scale: int | None = REFERENCE_SHORT_SIDE, order_seed: int = 0,
                 builtin_colour_only: bool = False) -> ImageSource:
    """The image source of a family, in DESIGN's order (see the module docstring).

    ``image_dir``: the family's keyword; ``rule``: the family's scan rule; ``bundle_task``: the
    folder name under ``partial_datasets`` (e.g. "jigsaw", "zoomin", "colorization"; None = the
    family has no bundle fallback); ``bundle_root``: where ``partial_datasets`` is looked for
    when nothing is named (default: the working directory); ``env``: environment (default
    ``os.environ``); ``scale``: resize folder images to that shorter side (None = native);
    ``builtin_scale``: the built-ins' shorter side.
    """
    env = os.environ if env is None else env
    if image_dir is not None and str(image_dir) != "":
        root = _resolve_named_dir(os.fspath(image_dir), bundle_task, "image_dir")
        origin = f"image_dir={show_path(image_dir)}"
    elif env.get(ENV_VAR):
        root = _resolve_named_dir(env[ENV_VAR], bundle_task, f"${ENV_VAR}")
        origin = f"${ENV_VAR}={show_path(env[ENV_VAR])}"
    else:
        root = None
        if bundle_task:
            cand = Path(bundle_root if bundle_root is not None else os.getcwd()) / BUNDLE_DIR / bundle_task
            if cand.is_dir():
                root, origin = cand, f"bundle {cand}"
        if root is None:
            return builtin_source(scale=builtin_scale, order_seed=order_seed,
                                  colour_only=builtin_colour_only)
    names = scan_dir(root, rule)
    return ImageSource(names=names, paths=tuple(root.joinpath(*n.split("/")) for n in names),
                       kind="directory", origin=origin, root=root, scale=scale,
                       order_seed=order_seed)
