"""COCO-style annotations for the real-data loaders of ``counting`` (LVIS v1 + COCO 2017 images)
and ``referring_dot_pointing`` (RefCOCO+ UNC: a refs pickle + COCO 2014 ``instances.json``).

Formats read
------------
* A COCO-style JSON (LVIS v1 train, RefCOCO's ``instances.json``): a top-level object with
  ``images`` (int ``id``, positive int ``height``/``width``, ``file_name`` or ``coco_url``, LVIS's
  ``not_exhaustive_category_ids``), ``annotations`` (int ``id``/``image_id``/``category_id``,
  ``bbox`` [x, y, w, h], ``segmentation`` as a polygon list, an uncompressed RLE dict
  ``{"size": [h, w], "counts": [ints]}`` or a compressed one with a ``counts`` string) and
  ``categories`` (int ``id``, ``name``). Other top-level keys (``info``, ``licenses``) and other
  record fields are skipped without being kept.
* The REFER project's refs pickle and the RefCOCO dataset on top of this index: see
  envs/assets/refcoco.py.

Bounds
------
The JSON is streamed: text is read in chunks of ``CHUNK_CHARS`` and each element of the three
arrays is decoded on its own with ``json.JSONDecoder.raw_decode`` and turned at once into compact
``array.array`` storage, so the parsed JSON is never held whole (peak memory ~ the compact arrays
plus one chunk). An element cut by a chunk end is retried after reading more (the read doubles so
a huge element is not quadratic); one element may hold at most ``MAX_ELEMENT_CHARS`` characters.
Syntax errors (at the end of the file too) raise :class:`AnnotationFileError` naming the file and
the character offset. Polygon coordinates must lie within +-``MAX_COORD`` (C's int conversion in
the COCO rasteriser is undefined beyond), and one annotation's polygons may make the rasteriser
walk at most ``MAX_WALK`` unit steps (so no single mask can take long to decode); a file past
either is refused naming the annotation.

Cache
-----
The index is saved once as ``.npy`` files plus a small ``meta.json`` (strings, counts, key) in
``<json file name>.visgym-index/`` beside the JSON, or, where that folder is not writable (no
access, or no write bit in its mode: a read-only data folder is respected even by root), in
``<cache_dir or $VISGYM_CACHE_DIR or ~/.cache/visgym/coco-index>/<sha1 of the real path>``. It is
written into a temporary folder and renamed into place (atomic), keyed by the file's size,
``mtime_ns`` and ``FORMAT_VERSION``; a cache whose key differs is rebuilt, one that does not load
or fails the consistency checks (shapes, offsets, index ranges) is ignored and rebuilt. Large
arrays are memory-mapped read-only. Loaded indexes are also kept per process in a
:class:`BoundedCache` keyed by (real path, size, mtime_ns).

Masks and centres
-----------------
``CocoIndex.mask`` decodes like pycocotools (``frPyObjects`` + ``decode``; several polygons are
united), through our Numba port in ``kernels/coco_masks.py``. ``centre`` is the mean column and
mean row of the mask pixels (exact integer sums divided once, which is what NumPy's mean of the
``np.where`` indices gives), or the bbox centre when the mask is empty or missing.

Deviations from pycocotools / the reference
-------------------------------------------
* A polygon list whose first polygon has exactly 4 numbers makes pycocotools 2.0.8 raise (it
  takes it for a box and wants an ndarray); one whose first polygon has fewer than 4 numbers
  raises "input type is not supported". Here every polygon is rasterised as a polygon (a 1- or
  2-point polygon covers no pixel, as pycocotools gives for such a polygon in a later position).
* Uncompressed RLE counts must sum to h * w (pycocotools raises past it and reads uninitialised
  memory short of it): refused at load. Compressed strings must use characters 48..111 and at
  most ``MAX_RLE_CHARS`` characters per value (C shifts past its int beyond).
* An RLE mask whose size differs from the size asked: ``mask`` raises ValueError (pycocotools
  would silently return the RLE's own size); ``centre``/``is_empty`` use the RLE's own geometry.
"""
from __future__ import annotations

import array
import collections
import hashlib
import json
import math
import os
import shutil
import tempfile
from typing import Iterable, NamedTuple

import numpy as np

from ...core.cache import BoundedCache
from ...core.validate import describe, show_path
from ...kernels import coco_masks as K

FORMAT_VERSION = 1
CACHE_ENV = "VISGYM_CACHE_DIR"
CHUNK_CHARS = 16 << 20
MAX_ELEMENT_CHARS = 256 << 20
MAX_COORD = K.MAX_COORD
MAX_RLE_CHARS = 6
#: At most this many unit steps (at COCO's 5x scale) in one annotation's polygon walk, so no
#: mask takes long to decode (a walk of 2**22 = 4.2 M steps takes ~0.1 s): 300x the walk around
#: a whole 640 x 640 image (~13 k steps); real LVIS/COCO polygons stay far below.
MAX_WALK = 1 << 22

_SEG_NONE, _SEG_POLY, _SEG_RLE = 0, 1, 2

_INDEXES = BoundedCache("coco-index", max_items=4)


class AnnotationFileError(ValueError):
    """An annotation file (COCO JSON or refs pickle) is unreadable or malformed (message names
    the file and the problem)."""


def _err(path, message: str) -> AnnotationFileError:
    return AnnotationFileError(f"{show_path(path)}: {message}")


def _is_int(v) -> bool:
    return type(v) is int


def _is_num(v) -> bool:
    return (type(v) is int or type(v) is float)


# ---------------------------------------------------------------------------------------------
# Streaming JSON reader
# ---------------------------------------------------------------------------------------------

class _Stream:
    """Chunked text reader: ``buf[pos:]`` is unread text; ``base`` is buf[0]'s file offset."""

    _WS = " \t\n\r"

    def __init__(self, f, path, chunk: int):
        self.f = f
        self.path = path
        self.chunk = chunk
        self.buf = ""
        self.pos = 0
        self.base = 0
        self.eof = False
        self.decoder = json.JSONDecoder()

    def _more(self, need: int) -> bool:
        """Read at least ``need`` more characters (fewer at EOF); False when nothing was read."""
        if self.eof:
            return False
        if self.pos:
            self.base += self.pos
            self.buf = self.buf[self.pos:]
            self.pos = 0
        text = self.f.read(max(need, self.chunk))
        if not text:
            self.eof = True
            return False
        self.buf += text
        return True

    def peek(self) -> str:
        """The next non-blank character ('' at EOF), not consumed."""
        while True:
            buf, pos = self.buf, self.pos
            n = len(buf)
            while pos < n and buf[pos] in self._WS:
                pos += 1
            self.pos = pos
            if pos < n:
                return buf[pos]
            if not self._more(self.chunk):
                return ""

    def expect(self, chars: str, what: str) -> str:
        c = self.peek()
        if c == "" or c not in chars:
            found = "the end of the file" if c == "" else repr(c)
            raise _err(self.path, f"JSON: expected {what} at character offset "
                                  f"{self.base + self.pos}, found {found}")
        self.pos += 1
        return c

    def value(self):
        """Decode one JSON value; a value touching the buffer's end is re-read with more text."""
        self.peek()
        need = self.chunk
        while True:
            try:
                obj, end = self.decoder.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as e:
                if self.eof:
                    raise _err(self.path, f"JSON syntax error at character offset "
                                          f"{self.base + e.pos}: {e.msg}") from None
                if len(self.buf) - self.pos > MAX_ELEMENT_CHARS:
                    raise _err(self.path, f"JSON: a value starting at character offset "
                                          f"{self.base + self.pos} is malformed or longer than "
                                          f"{MAX_ELEMENT_CHARS} characters") from None
                self._more(need)
                need *= 2
                continue
            except RecursionError:
                raise _err(self.path, f"JSON nested too deeply at character offset "
                                      f"{self.base + self.pos}") from None
            if end < len(self.buf) or self.eof:
                self.pos = end
                return obj
            # a number or literal may continue past the buffer: read on and decode again
            if not self._more(need):
                continue
            need *= 2

    def array_items(self, what: str):
        """Yield the elements of the JSON array that starts here, one at a time."""
        self.expect("[", f"'[' opening {what}")
        if self.peek() == "]":
            self.pos += 1
            return
        i = 0
        while True:
            start = self.base + self.pos
            yield i, start, self.value()
            i += 1
            if self.expect(",]", f"',' or ']' in {what}") == "]":
                return


# ---------------------------------------------------------------------------------------------
# The index
# ---------------------------------------------------------------------------------------------

_ARRAYS = ("image_ids", "image_height", "image_width", "ne_offsets", "ne_ids",
           "ann_ids", "ann_image", "ann_category", "ann_bbox",
           "seg_kind", "seg_offsets", "poly_offsets", "coords", "rle_size", "rle_offsets",
           "rle_counts", "category_ids", "image_order", "ann_order", "img_ann_offsets",
           "img_ann")


class CocoIndex:
    """A compact, read-only index of a COCO-style annotation file (see the module docstring).

    Images: ``image_ids`` int64[I], ``image_height``/``image_width`` int32[I], ``image_file``
    tuple[str], not-exhaustive category ids as CSR (``ne_offsets`` int64[I+1], ``ne_ids``).
    Annotations (JSON order): ``ann_ids``, ``ann_image`` (image index or -1), ``ann_category``
    (category id), ``ann_bbox`` float64[A, 4]; segmentations: ``seg_kind`` int8[A] (0 none,
    1 polygons, 2 RLE), polygons ``seg_offsets`` int64[A+1] into the polygon table
    ``poly_offsets`` int64[P+1] into ``coords`` float64 (as written in the JSON); RLE ``rle_size``
    int64[A, 2] and counts ``rle_offsets`` int64[A+1] into ``rle_counts`` int64 (compressed
    strings are decoded at load). Categories: ``category_ids`` int64[C], ``category_names``.
    """

    def __init__(self, path: str, arrays: dict, image_file: tuple, category_names: tuple):
        self.path = path
        for name in _ARRAYS:
            a = arrays[name]
            if isinstance(a, np.ndarray) and a.flags.writeable:
                a.setflags(write=False)
            setattr(self, name, a)
        self.image_file = tuple(image_file)
        self.category_names = tuple(category_names)
        self._cat_name = dict(zip((int(c) for c in self.category_ids), self.category_names))

    # -- sizes
    @property
    def n_images(self) -> int:
        return int(self.image_ids.shape[0])

    @property
    def n_annotations(self) -> int:
        return int(self.ann_ids.shape[0])

    def __repr__(self) -> str:
        return (f"CocoIndex({show_path(self.path)!r}, {self.n_images} images, "
                f"{self.n_annotations} annotations, {len(self.category_ids)} categories)")

    # -- lookups
    @staticmethod
    def _find(ids, order, key) -> int | None:
        if type(key) is bool or not isinstance(key, (int, np.integer)):
            return None
        key = int(key)
        if not -(1 << 63) <= key < (1 << 63) or ids.shape[0] == 0:
            return None
        j = int(np.searchsorted(ids, key, sorter=order))
        if j < order.shape[0] and ids[order[j]] == key:
            return int(order[j])
        return None

    def image_index(self, image_id) -> int | None:
        """Index of the image with this id, or None."""
        return self._find(self.image_ids, self.image_order, image_id)

    def ann_index(self, ann_id) -> int | None:
        """Index of the first annotation with this id (JSON order), or None."""
        return self._find(self.ann_ids, self.ann_order, ann_id)

    def image_annotations(self, i: int) -> np.ndarray:
        """Annotation indices of image index ``i``, in JSON order."""
        i = self._check_image(i)
        return self.img_ann[self.img_ann_offsets[i]:self.img_ann_offsets[i + 1]]

    def not_exhaustive(self, i: int) -> np.ndarray:
        """The not-exhaustive category ids of image index ``i``."""
        i = self._check_image(i)
        return self.ne_ids[self.ne_offsets[i]:self.ne_offsets[i + 1]]

    def category_name(self, cat_id) -> str | None:
        if type(cat_id) is bool or not isinstance(cat_id, (int, np.integer)):
            return None
        return self._cat_name.get(int(cat_id))

    def _check_image(self, i) -> int:
        if type(i) is bool or not isinstance(i, (int, np.integer)) or not 0 <= i < self.n_images:
            raise IndexError(f"image index: expected an int in [0, {self.n_images}), got "
                             f"{describe(i)}")
        return int(i)

    def _check_ann(self, a) -> int:
        n = self.n_annotations
        if type(a) is bool or not isinstance(a, (int, np.integer)) or not 0 <= a < n:
            raise IndexError(f"annotation index: expected an int in [0, {n}), got {describe(a)}")
        return int(a)

    @staticmethod
    def _check_size(height, width) -> tuple[int, int]:
        for name, v in (("height", height), ("width", width)):
            if type(v) is bool or not isinstance(v, (int, np.integer)) or not 0 < v <= 1 << 15:
                raise ValueError(f"{name}: expected an int in [1, 32768], got {describe(v)}")
        return int(height), int(width)

    # -- masks
    def _flat(self, a: int, h: int, w: int):
        """(flat column-major mask, its height) or (None, h) when there is no segmentation."""
        kind = int(self.seg_kind[a])
        if kind == _SEG_POLY:
            p0, p1 = int(self.seg_offsets[a]), int(self.seg_offsets[a + 1])
            return K.polygons_flat(self.coords, self.poly_offsets, p0, p1, h, w), h
        if kind == _SEG_RLE:
            rh, rw = (int(v) for v in self.rle_size[a])
            flat = np.zeros(rh * rw, np.bool_)
            K.paint_counts(flat, self._rle(a))
            return flat, rh
        return None, h

    def _rle(self, a: int) -> np.ndarray:
        return np.asarray(self.rle_counts[self.rle_offsets[a]:self.rle_offsets[a + 1]])

    def mask(self, a, height, width) -> np.ndarray:
        """Annotation ``a``'s segmentation decoded at height x width as pycocotools decodes it
        (bool[height, width]; all False when it has none)."""
        a = self._check_ann(a)
        h, w = self._check_size(height, width)
        if int(self.seg_kind[a]) == _SEG_RLE:
            rh, rw = (int(v) for v in self.rle_size[a])
            if (rh, rw) != (h, w):
                raise ValueError(f"annotation {int(self.ann_ids[a])}: its RLE mask is {rh}x{rw}, "
                                 f"not the {h}x{w} asked")
        flat, fh = self._flat(a, h, w)
        if flat is None:
            return np.zeros((h, w), np.bool_)
        return K.flat_to_mask(flat, h, w)

    def centre(self, a, height, width) -> tuple[float, float]:
        """(mean column, mean row) of the mask's pixels; the bbox centre when it is empty."""
        a = self._check_ann(a)
        h, w = self._check_size(height, width)
        flat, fh = self._flat(a, h, w)
        if flat is not None:
            n, sx, sy = K.flat_centre(flat, fh)
            if n > 0:
                return float(np.float64(sx) / np.float64(n)), float(np.float64(sy) / np.float64(n))
        x, y, bw, bh = (float(v) for v in self.ann_bbox[a])
        return x + bw / 2, y + bh / 2

    def is_empty(self, a, height, width) -> bool:
        """Whether the mask of ``a`` at height x width has no pixel (from run lengths)."""
        a = self._check_ann(a)
        h, w = self._check_size(height, width)
        kind = int(self.seg_kind[a])
        if kind == _SEG_POLY:
            p0, p1 = int(self.seg_offsets[a]), int(self.seg_offsets[a + 1])
            return not K.polygons_area_positive(self.coords, self.poly_offsets, p0, p1, h, w)
        if kind == _SEG_RLE:
            return K.counts_area(self._rle(a)) == 0
        return True


# ---------------------------------------------------------------------------------------------
# Parsing
# ---------------------------------------------------------------------------------------------

def _first_bad_coord(coords, block: int = 1 << 20) -> int:
    """Index of the first coordinate that is not finite or past +-MAX_COORD, or -1 (checked in
    blocks, so no temporary as large as the coordinates is made)."""
    for s in range(0, coords.shape[0], block):
        bad = ~(np.abs(coords[s:s + block]) <= MAX_COORD)
        if bad.any():
            return s + int(np.argmax(bad))
    return -1


class _Builder:
    def __init__(self, path):
        self.path = path
        self.image_ids = array.array("q")
        self.image_h = array.array("i")
        self.image_w = array.array("i")
        self.image_file: list[str] = []
        self.ne_offsets = array.array("q", [0])
        self.ne_ids = array.array("q")
        self.ann_ids = array.array("q")
        self.ann_image_id = array.array("q")
        self.ann_category = array.array("q")
        self.ann_bbox = array.array("d")
        self.seg_kind = array.array("b")
        self.seg_offsets = array.array("q", [0])
        self.poly_offsets = array.array("q", [0])
        self.coords = array.array("d")
        self.rle_size = array.array("q")
        self.rle_offsets = array.array("q", [0])
        self.rle_counts = array.array("q")
        self.category_ids = array.array("q")
        self.category_names: list[str] = []

    def fail(self, where: str, message: str):
        raise _err(self.path, f"{where}: {message}")

    def _int(self, where, rec, key, positive=False):
        v = rec.get(key)
        if not _is_int(v) or not -(1 << 63) <= v < (1 << 63) or (positive and not 0 < v < 1 << 31):
            need = "a positive int" if positive else "an int"
            got = "missing" if key not in rec else describe(v)
            self.fail(where, f"field '{key}' must be {need}, got {got}")
        return v

    def image(self, i, rec):
        where = f"images[{i}]"
        if type(rec) is not dict:
            self.fail(where, f"expected an object, got {describe(rec)}")
        self.image_ids.append(self._int(where, rec, "id"))
        self.image_h.append(self._int(where, rec, "height", positive=True))
        self.image_w.append(self._int(where, rec, "width", positive=True))
        name = rec.get("file_name")
        if name is None:
            url = rec.get("coco_url")
            if url is not None and type(url) is not str:
                self.fail(where, f"field 'coco_url' must be a string, got {describe(url)}")
            name = url.rsplit("/", 1)[-1] if url else ""
        elif type(name) is not str:
            self.fail(where, f"field 'file_name' must be a string, got {describe(name)}")
        self.image_file.append(name)
        ne = rec.get("not_exhaustive_category_ids", [])
        if type(ne) is not list or not all(_is_int(v) for v in ne):
            self.fail(where, f"field 'not_exhaustive_category_ids' must be a list of ints, "
                             f"got {describe(ne)}")
        try:
            self.ne_ids.extend(ne)
        except OverflowError:
            self.fail(where, "field 'not_exhaustive_category_ids' holds an int past 64 bits")
        self.ne_offsets.append(len(self.ne_ids))

    def annotation(self, i, rec):
        where = f"annotations[{i}]"
        if type(rec) is not dict:
            self.fail(where, f"expected an object, got {describe(rec)}")
        self.ann_ids.append(self._int(where, rec, "id"))
        self.ann_image_id.append(self._int(where, rec, "image_id"))
        self.ann_category.append(self._int(where, rec, "category_id"))
        bbox = rec.get("bbox")
        if (type(bbox) is not list or len(bbox) != 4 or not all(_is_num(v) for v in bbox)
                or not all(math.isfinite(v) for v in bbox)):
            got = "missing" if "bbox" not in rec else describe(bbox)
            self.fail(where, f"field 'bbox' must be 4 finite numbers [x, y, w, h], got {got}")
        self.ann_bbox.extend(bbox)
        seg = rec.get("segmentation")
        if seg is None or (type(seg) is list and not seg):
            self.seg_kind.append(_SEG_NONE)
        elif type(seg) is list:
            for j, poly in enumerate(seg):
                if type(poly) is not list or len(poly) % 2:
                    self.fail(where, f"segmentation[{j}] must be a list of an even count of "
                                     f"numbers (x, y pairs), got {describe(poly)}")
                if not set(map(type, poly)) <= {int, float}:
                    self.fail(where, f"segmentation[{j}] must hold only numbers, got "
                                     f"{describe(poly)}")
                try:
                    self.coords.extend(poly)
                except OverflowError:
                    self.fail(where, f"segmentation[{j}] holds a number too large for a double")
                self.poly_offsets.append(len(self.coords))
            self.seg_kind.append(_SEG_POLY)
        elif type(seg) is dict:
            self._rle(where, seg)
            self.seg_kind.append(_SEG_RLE)
        else:
            self.fail(where, f"field 'segmentation' must be a polygon list or an RLE object, "
                             f"got {describe(seg)}")
        self.seg_offsets.append(len(self.poly_offsets) - 1)
        if self.seg_kind[-1] != _SEG_RLE:
            self.rle_size.extend((0, 0))
        self.rle_offsets.append(len(self.rle_counts))

    def _rle(self, where, seg):
        size = seg.get("size")
        if (type(size) is not list or len(size) != 2 or not all(_is_int(v) for v in size)
                or not all(0 < v <= 1 << 15 for v in size)):
            self.fail(where, f"segmentation 'size' must be [height, width] (ints in 1..32768), "
                             f"got {describe(size)}")
        h, w = size
        counts = seg.get("counts")
        if type(counts) is list:
            if not all(_is_int(v) and 0 <= v < 1 << 32 for v in counts):
                self.fail(where, f"segmentation 'counts' must be ints in [0, 2**32), got "
                                 f"{describe(counts)}")
            values = counts
        elif type(counts) is str:
            try:
                raw = counts.encode("ascii")
            except UnicodeEncodeError:
                self.fail(where, "segmentation 'counts' string holds a non-ASCII character")
            got, err = K.string_counts(np.frombuffer(raw, np.uint8), MAX_RLE_CHARS)
            if err:
                why = {1: "a character outside '0'..'o'",
                       2: f"a value longer than {MAX_RLE_CHARS} characters",
                       3: "a value cut short at its end"}[int(err)]
                self.fail(where, f"segmentation 'counts' string has {why}")
            values = got.tolist()
        else:
            self.fail(where, f"segmentation 'counts' must be a list of ints or a string, got "
                             f"{describe(counts)}")
        if sum(values) != h * w:
            self.fail(where, f"segmentation 'counts' sum to {sum(values)}, not height * width = "
                             f"{h * w}")
        self.rle_size.extend((h, w))
        self.rle_counts.extend(values)

    def category(self, i, rec):
        where = f"categories[{i}]"
        if type(rec) is not dict:
            self.fail(where, f"expected an object, got {describe(rec)}")
        self.category_ids.append(self._int(where, rec, "id"))
        name = rec.get("name", "")
        if type(name) is not str:
            self.fail(where, f"field 'name' must be a string, got {describe(name)}")
        self.category_names.append(name)

    def finish(self) -> tuple[dict, tuple, tuple]:
        p = self.path
        arr = lambda a, dt: np.frombuffer(a, dtype=dt) if len(a) else np.zeros(0, dt)  # no copy
        image_ids = arr(self.image_ids, np.int64)
        I = image_ids.shape[0]
        image_order = np.argsort(image_ids, kind="stable")
        if I > 1:
            dup = np.nonzero(image_ids[image_order][1:] == image_ids[image_order][:-1])[0]
            if dup.size:
                j = int(image_order[dup[0] + 1])
                raise _err(p, f"images[{j}]: duplicate image id {int(image_ids[j])}")
        coords = arr(self.coords, np.float64)
        poly_offsets = arr(self.poly_offsets, np.int64)
        seg_offsets = arr(self.seg_offsets, np.int64)
        q = _first_bad_coord(coords)
        if q >= 0:
            poly = int(np.searchsorted(poly_offsets, q, side="right")) - 1
            ann = int(np.searchsorted(seg_offsets, poly, side="right")) - 1
            raise _err(p, f"annotations[{ann}]: segmentation coordinate {float(coords[q])!r} is not a "
                          f"finite number within +-{MAX_COORD:g}")
        seg_kind = arr(self.seg_kind, np.int8)
        walk = K.walk_lengths(coords, poly_offsets, seg_offsets, seg_kind, _SEG_POLY)
        if walk.shape[0] and walk.max() > MAX_WALK:
            a = int(np.argmax(walk > MAX_WALK))
            raise _err(p, f"annotations[{a}]: its polygons are too long to rasterise ("
                          f"{int(walk[a])} steps at 5x scale, at most {MAX_WALK}; coordinates "
                          f"far outside the image?)")
        ann_image_id = arr(self.ann_image_id, np.int64)
        A = ann_image_id.shape[0]
        if I:
            j = np.searchsorted(image_ids, ann_image_id, sorter=image_order)
            j = np.minimum(j, I - 1)
            cand = image_order[j]
            ann_image = np.where(image_ids[cand] == ann_image_id, cand, -1).astype(np.int64)
        else:
            ann_image = np.full(A, -1, np.int64)
        ann_ids = arr(self.ann_ids, np.int64)
        keyed = np.nonzero(ann_image >= 0)[0]
        by_image = keyed[np.argsort(ann_image[keyed], kind="stable")]
        img_ann_offsets = np.zeros(I + 1, np.int64)
        np.cumsum(np.bincount(ann_image[keyed], minlength=I), out=img_ann_offsets[1:])
        arrays = dict(
            image_ids=image_ids, image_height=arr(self.image_h, np.int32),
            image_width=arr(self.image_w, np.int32), ne_offsets=arr(self.ne_offsets, np.int64),
            ne_ids=arr(self.ne_ids, np.int64), ann_ids=ann_ids, ann_image=ann_image,
            ann_category=arr(self.ann_category, np.int64),
            ann_bbox=arr(self.ann_bbox, np.float64).reshape(A, 4),
            seg_kind=seg_kind, seg_offsets=seg_offsets,
            poly_offsets=poly_offsets, coords=coords,
            rle_size=arr(self.rle_size, np.int64).reshape(A, 2),
            rle_offsets=arr(self.rle_offsets, np.int64), rle_counts=arr(self.rle_counts, np.int64),
            category_ids=arr(self.category_ids, np.int64),
            image_order=image_order.astype(np.int64),
            ann_order=np.argsort(ann_ids, kind="stable").astype(np.int64),
            img_ann_offsets=img_ann_offsets, img_ann=by_image.astype(np.int64))
        return arrays, tuple(self.image_file), tuple(self.category_names)


def parse_coco_json(path, chunk_chars: int = CHUNK_CHARS) -> CocoIndex:
    """Parse a COCO-style JSON into a :class:`CocoIndex` (streaming; no cache)."""
    b = _Builder(path)
    handlers = {"images": b.image, "annotations": b.annotation, "categories": b.category}
    try:
        f = open(path, "r", encoding="utf-8")
    except OSError as e:
        raise _err(path, f"cannot open: {e.strerror or e}") from None
    seen = set()
    try:
        with f:
            s = _Stream(f, path, chunk_chars)
            s.expect("{", "a top-level object '{'")
            if s.peek() == "}":
                s.pos += 1
            else:
                while True:
                    key = s.value() if s.peek() == '"' else s.expect('"', "a key string")
                    s.expect(":", "':' after a key")
                    handler = handlers.get(key)
                    if handler is not None:
                        if key in seen:
                            raise _err(path, f"key '{key}' appears twice")
                        seen.add(key)
                        if s.peek() != "[":
                            raise _err(path, f"'{key}' must be an array, got "
                                             f"{describe(s.value())}")
                        for i, _start, item in s.array_items(f"'{key}'"):
                            handler(i, item)
                    elif s.peek() == "[":   # another array: read through, element by element
                        collections.deque(s.array_items(f"'{describe(key)}'"), maxlen=0)
                    else:
                        s.value()
                    if s.expect(",}", "',' or '}' in the top-level object") == "}":
                        break
            if s.peek() != "":
                raise _err(path, f"JSON: extra data at character offset {s.base + s.pos}")
    except UnicodeDecodeError as e:
        raise _err(path, f"not UTF-8 text ({e.reason} at byte {e.start} of a read block)") from None
    except MemoryError:
        raise _err(path, "out of memory while reading") from None
    for key in ("images", "annotations"):
        if key not in seen:
            raise _err(path, f"top-level '{key}' array is missing")
    arrays, files, names = b.finish()
    return CocoIndex(os.fspath(path), arrays, files, names)


# ---------------------------------------------------------------------------------------------
# Cache
# ---------------------------------------------------------------------------------------------

_MMAP_MIN = 1 << 20


def _fallback_dir(real: str, cache_dir) -> str:
    base = cache_dir or os.environ.get(CACHE_ENV) or os.path.join(
        os.path.expanduser("~"), ".cache", "visgym", "coco-index")
    return os.path.join(os.fspath(base), hashlib.sha1(real.encode("utf-8", "surrogateescape"))
                        .hexdigest()[:20])


def _cache_dirs(real: str, cache_dir) -> list[str]:
    beside = os.path.join(os.path.dirname(real), os.path.basename(real) + ".visgym-index")
    return [beside, _fallback_dir(real, cache_dir)]


def _key(st) -> dict:
    return {"version": FORMAT_VERSION, "size": int(st.st_size), "mtime_ns": int(st.st_mtime_ns)}


def _read_cache(folder: str, key: dict, real: str) -> CocoIndex | None:
    """The cached index in ``folder`` if present, matching ``key`` and consistent; else None."""
    meta_path = os.path.join(folder, "meta.json")
    try:
        with open(meta_path, "r", encoding="utf-8") as f:
            meta = json.load(f)
        if not isinstance(meta, dict) or meta.get("key") != key:
            return None
        arrays = {}
        for name in _ARRAYS:
            fp = os.path.join(folder, name + ".npy")
            big = os.path.getsize(fp) >= _MMAP_MIN
            a = np.load(fp, mmap_mode="r" if big else None, allow_pickle=False)
            arrays[name] = a
        files = tuple(meta["image_file"])
        names = tuple(meta["category_names"])
        if not all(type(v) is str for v in files + names):
            return None
        if not _consistent(arrays, len(files), len(names)):
            return None
        return CocoIndex(real, arrays, files, names)
    except (OSError, ValueError, KeyError, TypeError, EOFError):
        return None


def _consistent(a: dict, n_files: int, n_names: int) -> bool:
    dt = dict(image_ids=np.int64, image_height=np.int32, image_width=np.int32,
              seg_kind=np.int8, ann_bbox=np.float64, coords=np.float64)
    for name in _ARRAYS:
        if a[name].dtype != dt.get(name, np.int64):
            return False
    I = a["image_ids"].shape[0]
    A = a["ann_ids"].shape[0]
    C = a["category_ids"].shape[0]
    P = a["poly_offsets"].shape[0] - 1

    def csr(off, n, length):
        return (off.ndim == 1 and off.shape[0] == n + 1 and off[0] == 0 and off[-1] == length
                and bool(np.all(np.diff(off) >= 0)))

    def perm(o, n):
        return o.shape == (n,) and (n == 0 or (o.min() >= 0 and o.max() < n
                                               and np.unique(o).shape[0] == n))

    return bool(
        n_files == I and n_names == C
        and all(a[k].shape == (I,) for k in ("image_height", "image_width"))
        and all(a[k].shape == (A,) for k in ("ann_image", "ann_category", "seg_kind"))
        and a["ann_bbox"].shape == (A, 4) and a["rle_size"].shape == (A, 2)
        and csr(a["ne_offsets"], I, a["ne_ids"].shape[0])
        and P >= 0 and csr(a["seg_offsets"], A, P)
        and csr(a["poly_offsets"], P, a["coords"].shape[0])
        and csr(a["rle_offsets"], A, a["rle_counts"].shape[0])
        and csr(a["img_ann_offsets"], I, a["img_ann"].shape[0])
        and (I == 0 or (a["image_height"].min() > 0 and a["image_width"].min() > 0))
        and (A == 0 or (a["ann_image"].min() >= -1 and a["ann_image"].max() < I
                        and a["seg_kind"].min() >= 0 and a["seg_kind"].max() <= 2))
        and (a["img_ann"].shape[0] == 0 or (a["img_ann"].min() >= 0 and a["img_ann"].max() < A))
        and perm(a["image_order"], I) and perm(a["ann_order"], A)
        and _first_bad_coord(a["coords"]) < 0
        and (A == 0 or int(K.walk_lengths(np.asarray(a["coords"]), np.asarray(a["poly_offsets"]),
                                          np.asarray(a["seg_offsets"]), np.asarray(a["seg_kind"]),
                                          _SEG_POLY).max()) <= MAX_WALK)
        and (A == 0 or a["rle_size"].min() >= 0))


def _writable(folder: str) -> bool:
    """Whether ``folder`` may be written: access allowed and some write bit set in its mode (a
    folder made read-only is respected even by root, for whom access checks always pass)."""
    try:
        return os.access(folder, os.W_OK | os.X_OK) and bool(os.stat(folder).st_mode & 0o222)
    except OSError:
        return False


def _write_cache(folder: str, key: dict, index: CocoIndex) -> bool:
    """Write the index into ``folder`` atomically; False when the place is not writable."""
    parent = os.path.dirname(folder)
    try:
        os.makedirs(parent, exist_ok=True)
        if not _writable(parent):
            return False
        tmp = tempfile.mkdtemp(prefix="." + os.path.basename(folder) + ".tmp-", dir=parent)
    except OSError:
        return False
    try:
        for name in _ARRAYS:
            np.save(os.path.join(tmp, name + ".npy"), np.asarray(getattr(index, name)),
                    allow_pickle=False)
        meta = {"key": key, "source": index.path, "image_file": list(index.image_file),
                "category_names": list(index.category_names)}
        with open(os.path.join(tmp, "meta.json"), "w", encoding="utf-8") as f:
            json.dump(meta, f)
        try:
            os.rename(tmp, folder)
        except OSError:
            shutil.rmtree(folder, ignore_errors=True)   # a stale or corrupt cache
            os.rename(tmp, folder)
        return True
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        return False


def load_coco_index(path, cache_dir=None) -> CocoIndex:
    """The :class:`CocoIndex` of a COCO-style JSON, from the process cache, the disk cache, or
    parsed (then saved to the disk cache). See the module docstring."""
    p = os.fspath(path)
    try:
        real = os.path.realpath(p)
        st = os.stat(real)
    except (OSError, ValueError) as e:
        raise _err(p, f"cannot read: {getattr(e, 'strerror', None) or e}") from None
    if not os.path.isfile(real):
        raise _err(p, "not a file")
    key = _key(st)
    return _INDEXES.get_or_build((real, key["size"], key["mtime_ns"]),
                                 lambda: _load_uncached(real, key, cache_dir))


def _load_uncached(real: str, key: dict, cache_dir) -> CocoIndex:
    dirs = _cache_dirs(real, cache_dir)
    for folder in dirs:
        if os.path.isdir(folder):
            index = _read_cache(folder, key, real)
            if index is not None:
                return index
    index = parse_coco_json(real)
    for folder in dirs:
        if _write_cache(folder, key, index):
            break
    return index


# ---------------------------------------------------------------------------------------------
# LVIS counting samples (spec counting.md section 3, steps 1-3)
# ---------------------------------------------------------------------------------------------

class LvisSamples(NamedTuple):
    image_index: np.ndarray   # int64[S]
    category_id: np.ndarray   # int64[S]
    count: np.ndarray         # int64[S]


def _check_count(name, v):
    if type(v) is bool or not isinstance(v, (int, np.integer)) or not 0 <= v < 1 << 62:
        raise ValueError(f"{name}: expected a non-negative int, got {describe(v)}")
    return int(v)


def lvis_samples(index: CocoIndex, min_count, max_count, categories=None,
                 require_exhaustive=True, data_chunk=None) -> LvisSamples:
    """One (image, category, count) per image at most: the first category (in order of first
    appearance among the image's annotations) whose count lies in [min_count, max_count], that is
    in ``categories`` (names) when given and, with ``require_exhaustive``, not flagged as
    not-exhaustive for the image; sorted by (image id, category id); then ``data_chunk``."""
    lo = _check_count("min_count", min_count)
    hi = _check_count("max_count", max_count)
    if type(require_exhaustive) is not bool and not isinstance(require_exhaustive, np.bool_):
        raise ValueError(f"require_exhaustive: expected a bool, got {describe(require_exhaustive)}")
    allowed = None
    if categories is not None:
        if isinstance(categories, (str, bytes)) or not isinstance(categories, Iterable):
            raise ValueError(f"categories: expected a collection of category names, got "
                             f"{describe(categories)}")
        names = list(categories)
        if not all(type(n) is str for n in names):
            raise ValueError(f"categories: every entry must be a category name (str), got "
                             f"{describe(names)}")
        wanted = set(names)
        allowed = np.array(sorted({int(c) for c, n in zip(index.category_ids,
                                                          index.category_names) if n in wanted}),
                           np.int64)
    chunk = None
    if data_chunk is not None:
        if (not isinstance(data_chunk, (tuple, list)) or len(data_chunk) != 2 or not all(
                v is None or (type(v) is not bool and isinstance(v, (int, np.integer)))
                for v in data_chunk)):
            raise ValueError(f"data_chunk: expected (start, end) ints, got {describe(data_chunk)}")
        chunk = slice(*(None if v is None else int(v) for v in data_chunk))
    order = np.asarray(index.img_ann)                        # annotation indices, by image
    img = np.asarray(index.ann_image)[order]
    cat = np.asarray(index.ann_category)[order]
    empty = np.zeros(0, np.int64)
    if order.shape[0] == 0:
        return LvisSamples(empty, empty.copy(), empty.copy())
    ucat, code = np.unique(cat, return_inverse=True)
    C = ucat.shape[0]
    key = img * C + code
    ukey, first, count = np.unique(key, return_index=True, return_counts=True)
    p_img = ukey // C
    p_cat = ucat[ukey % C]
    keep = (count >= lo) & (count <= hi)
    if allowed is not None:
        keep &= np.isin(p_cat, allowed)
    if require_exhaustive and index.ne_ids.shape[0]:
        ne_img = np.repeat(np.arange(index.n_images, dtype=np.int64),
                           np.diff(np.asarray(index.ne_offsets)))
        ne_ids = np.asarray(index.ne_ids)
        j = np.minimum(np.searchsorted(ucat, ne_ids), C - 1)
        hit = ucat[j] == ne_ids
        ne_key = ne_img[hit] * C + j[hit]
        keep &= ~np.isin(ukey, ne_key)
    p_img, p_cat, count, first = p_img[keep], p_cat[keep], count[keep], first[keep]
    o = np.lexsort((first, p_img))                    # per image, by first appearance
    p_img, p_cat, count = p_img[o], p_cat[o], count[o]
    _, lead = np.unique(p_img, return_index=True)
    s_img, s_cat, s_cnt = p_img[lead], p_cat[lead], count[lead]
    o = np.lexsort((s_cat, np.asarray(index.image_ids)[s_img]))
    s_img, s_cat, s_cnt = s_img[o], s_cat[o], s_cnt[o]
    if chunk is not None:
        s_img, s_cat, s_cnt = s_img[chunk], s_cat[chunk], s_cnt[chunk]
    return LvisSamples(s_img.astype(np.int64), s_cat.astype(np.int64), s_cnt.astype(np.int64))
