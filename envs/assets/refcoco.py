"""RefCOCO-style data for ``referring_dot_pointing`` (the REFER layout): the refs pickle, read
without resolving any global, and the dataset built on the COCO index of ``instances.json``
(envs/assets/coco.py).

* ``refs(<split>).p``: a pickled list of dicts (``ref_id``, ``ann_id``, ``image_id``,
  ``category_id``, ``split``, ``sentences`` with ``sent``). ``load_refs_pickle`` reads it with an
  unpickler whose ``find_class`` and ``persistent_load`` refuse everything: lists, dicts,
  strings and numbers need no global, so no class is built and no callable runs (a REDUCE of
  ``os.system`` is refused naming the global). Python-2 ``str`` values are decoded as UTF-8, and
  as Latin-1 if that fails. The structure is then validated, naming the ref and the field.
* ``load_refcoco(sample_dir)``: ``<sample_dir>/refcoco+/refs(unc).p``, ``instances.json`` and
  ``images/mscoco/images/train2014/``; the refs whose annotation exists (REFER drops the others)
  and the sorted ids usable for episodes (the image file exists and the mask is non-empty).
* ``ref_mask``: a ref's mask (or its category's in the image) at the annotated image size.
"""
from __future__ import annotations

import os
import pickle
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ...core.validate import describe
from .coco import AnnotationFileError, CocoIndex, _err, _is_int, load_coco_index

__all__ = ["AnnotationFileError", "RefCoco", "RefRecord", "image_path", "load_refcoco",
           "load_refs_pickle", "ref_mask"]

# ---------------------------------------------------------------------------------------------
# RefCOCO: the refs pickle
# ---------------------------------------------------------------------------------------------

class _RefusingUnpickler(pickle.Unpickler):
    """Resolves no global and no persistent id: only the pickle opcodes for builtin containers
    and scalars can build anything, so no class is instantiated and no callable is reached."""

    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"refused global {describe(module)}.{describe(name)}")

    def persistent_load(self, pid):
        raise pickle.UnpicklingError(f"refused persistent id {describe(pid)}")


def _unpickle(path, encoding):
    with open(path, "rb") as f:
        return _RefusingUnpickler(f, encoding=encoding).load()


def load_refs_pickle(path) -> list:
    """The REFER refs list of ``path``, read without resolving any global, then validated."""
    p = os.fspath(path)
    try:
        try:
            data = _unpickle(p, "utf-8")
        except UnicodeDecodeError:
            data = _unpickle(p, "latin1")   # Python-2 str bytes that are not UTF-8
    except OSError as e:
        raise _err(p, f"cannot read: {e.strerror or e}") from None
    except pickle.UnpicklingError as e:
        raise _err(p, f"not a plain refs pickle: {e}") from None
    except (EOFError, ValueError, TypeError, KeyError, IndexError, AttributeError,
            OverflowError, MemoryError, RecursionError, UnicodeDecodeError) as e:
        raise _err(p, f"corrupt or truncated pickle ({type(e).__name__}: {describe(str(e))})") \
            from None
    if type(data) is not list:
        raise _err(p, f"expected a list of refs, got {describe(type(data).__name__)}")
    for i, ref in enumerate(data):
        where = f"ref #{i}"
        if type(ref) is not dict:
            raise _err(p, f"{where}: expected a dict, got {describe(type(ref).__name__)}")
        for k in ("ref_id", "ann_id", "image_id", "category_id"):
            if not _is_int(ref.get(k)):
                got = "missing" if k not in ref else describe(ref.get(k))
                raise _err(p, f"{where}: field '{k}' must be an int, got {got}")
        if type(ref.get("split")) is not str:
            raise _err(p, f"{where}: field 'split' must be a string, got "
                          f"{describe(ref.get('split', 'missing'))}")
        sents = ref.get("sentences")
        if type(sents) is not list:
            raise _err(p, f"{where}: field 'sentences' must be a list, got {describe(sents)}")
        for j, s in enumerate(sents):
            if type(s) is not dict or type(s.get("sent")) is not str:
                raise _err(p, f"{where}: sentences[{j}] must be a dict with a string 'sent', "
                              f"got {describe(s)}")
    return data


# ---------------------------------------------------------------------------------------------
# RefCOCO: the dataset
# ---------------------------------------------------------------------------------------------

class RefRecord(NamedTuple):
    ref_id: int
    ann_index: int          # into index's annotations
    image_index: int        # into index's images (-1 when the ref's image is not listed)
    category_id: int
    sentences: tuple        # 'sent' of each sentence
    split: str


@dataclass(frozen=True, eq=False)
class RefCoco:
    index: CocoIndex
    refs: dict              # ref_id -> RefRecord (refs whose ann_id is in instances.json)
    valid_ids: tuple        # sorted ids: image file exists and the mask is non-empty
    image_dir: str


_NAME_OK = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_+-.")


def _plain_name(field, v):
    if type(v) is not str or not v or v in (".", "..") or not set(v) <= _NAME_OK:
        raise ValueError(f"{field}: expected a plain folder/file name part, got {describe(v)}")
    return v


def load_refcoco(sample_dir, split_by="unc", dataset="refcoco+", cache_dir=None) -> RefCoco:
    """RefCOCO-style data under ``sample_dir/<dataset>/`` (REFER layout; see the module
    docstring): the refs whose annotation exists, and the sorted ids usable for episodes."""
    _plain_name("split_by", split_by)
    _plain_name("dataset", dataset)
    root = os.path.join(os.fspath(sample_dir), dataset)
    if not os.path.isdir(root):
        raise _err(root, "RefCOCO folder not found (expected <sample_dir>/" + dataset + ")")
    index = load_coco_index(os.path.join(root, "instances.json"), cache_dir=cache_dir)
    raw = load_refs_pickle(os.path.join(root, f"refs({split_by}).p"))
    image_dir = os.path.join(root, "images", "mscoco", "images", "train2014")
    refs: dict[int, RefRecord] = {}
    for ref in raw:
        a = index.ann_index(ref["ann_id"])
        if a is None:
            continue
        i = index.image_index(ref["image_id"])
        refs[ref["ref_id"]] = RefRecord(
            ref["ref_id"], a, -1 if i is None else i, ref["category_id"],
            tuple(s["sent"] for s in ref["sentences"]), ref["split"])
    valid = []
    exists: dict[int, bool] = {}
    for rid, r in refs.items():
        i = r.image_index
        if i < 0:
            continue
        if i not in exists:
            exists[i] = bool(index.image_file[i]) and os.path.isfile(
                os.path.join(image_dir, index.image_file[i]))
        if not exists[i]:
            continue
        try:
            if index.is_empty(r.ann_index, int(index.image_height[i]), int(index.image_width[i])):
                continue
        except (ValueError, IndexError):
            continue
        valid.append(rid)
    return RefCoco(index, refs, tuple(sorted(valid)), image_dir)


def ref_mask(data: RefCoco, ref_id, same_category=False) -> np.ndarray:
    """The ref's annotation mask at its image's size (bool[H, W]); with ``same_category`` the
    union of every annotation of that image with the ref's category (the instance mask when
    that union is empty)."""
    r = data.refs.get(ref_id) if type(ref_id) is not bool else None
    if r is None:
        raise KeyError(f"ref_id: {describe(ref_id)} is not a reference of this dataset")
    if r.image_index < 0:
        raise ValueError(f"ref {ref_id}: its image is not listed in instances.json")
    ix = data.index
    h, w = int(ix.image_height[r.image_index]), int(ix.image_width[r.image_index])
    inst = ix.mask(r.ann_index, h, w)
    if not same_category:
        return inst
    out = np.zeros((h, w), np.bool_)
    for a in ix.image_annotations(r.image_index):
        if int(ix.ann_category[a]) == r.category_id:
            out |= ix.mask(int(a), h, w)
    return out if out.any() else inst


def image_path(data: RefCoco, image_index) -> str:
    """The file of image index ``image_index`` in the dataset's image folder."""
    i = data.index._check_image(image_index)
    return os.path.join(data.image_dir, data.index.image_file[i])
