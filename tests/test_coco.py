"""envs/assets/coco.py: the streaming COCO/LVIS index, its cache, the LVIS counting samples, the
restricted refs unpickler and the RefCOCO loader. Datasets are written here in the real formats;
expected values are computed independently (plain-Python walk, pycocotools masks)."""
import json
import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from parity_data import parity_dir
from visgym.envs.assets import coco as C
from visgym.envs.assets import refcoco as R

mask_api = pytest.importorskip("pycocotools.mask")
pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")

PARITY = parity_dir()
REAL_PARSE = C.parse_coco_json


@pytest.fixture(autouse=True)
def _fresh_process_cache(monkeypatch, tmp_path):
    C._INDEXES.clear()
    monkeypatch.setenv(C.CACHE_ENV, str(tmp_path / "env-cache"))
    yield
    C._INDEXES.clear()


# ---------------------------------------------------------------------------------------------
# tiny LVIS datasets
# ---------------------------------------------------------------------------------------------

def make_lvis(rng, n_images=12, n_cats=6):
    cats = [{"id": int(c), "name": f"cat_{c}", "synonyms": [f"cat_{c}"], "frequency": "f"}
            for c in rng.permutation(np.arange(1, 40))[:n_cats]]
    images, anns = [], []
    ids = rng.permutation(np.arange(100, 100000))[:n_images]
    aid = 1
    for k, img_id in enumerate(ids):
        h, w = int(rng.integers(20, 48)), int(rng.integers(20, 48))
        rec = {"id": int(img_id), "height": h, "width": w, "license": 1,
               "neg_category_ids": [],
               "not_exhaustive_category_ids": [int(c["id"]) for c in cats if rng.random() < 0.15]}
        if k % 3 == 0:
            rec["file_name"] = f"{int(img_id):012d}.jpg"
        else:
            rec["coco_url"] = f"http://images.cocodataset.org/train2017/{int(img_id):012d}.jpg"
        images.append(rec)
        if k == 1:
            continue                        # an image without annotations
        for _ in range(int(rng.integers(0, 25))):
            c = cats[int(rng.integers(0, len(cats)))]["id"]
            x, y = rng.uniform(-2, w - 2), rng.uniform(-2, h - 2)
            pts = [float(v) for t in range(int(rng.integers(3, 7)))
                   for v in (x + rng.uniform(0, 6), y + rng.uniform(0, 6))]
            if rng.random() < 0.1:
                pts = [x, y, x, y, x, y]      # decodes empty: bbox centre
            anns.append({"id": aid, "image_id": int(img_id), "category_id": int(c),
                         "bbox": [x, y, 6.0, 6.0], "area": 10.0, "segmentation": [pts]})
            aid += 1
    anns.append({"id": aid, "image_id": 5, "category_id": cats[0]["id"], "bbox": [0, 0, 1, 1],
                 "segmentation": [[0, 0, 1, 0, 1, 1]]})         # image 5 is not listed
    order = rng.permutation(len(anns))              # annotations not grouped by image
    return {"info": {"year": 2020}, "licenses": [], "images": images,
            "annotations": [anns[i] for i in order], "categories": cats}


def write_lvis(tmp_path, doc, images=True, name="lvis_v1_train.json", **dump):
    folder = tmp_path / "train2017"
    folder.mkdir(exist_ok=True)
    if images:
        for im in doc["images"]:
            fn = im.get("file_name") or im["coco_url"].rsplit("/", 1)[-1]
            Image.new("RGB", (im["width"], im["height"]), (im["id"] % 256, 9, 9)).save(folder / fn)
    p = tmp_path / name
    p.write_text(json.dumps(doc, **dump))
    return p


def plain_walk(doc, lo, hi, categories=None, require_exhaustive=True, data_chunk=None):
    """The spec's section 3 steps 1-3 transcribed literally."""
    names = {c["id"]: c["name"] for c in doc["categories"]}
    by_image = {}
    for a in doc["annotations"]:
        by_image.setdefault(a["image_id"], []).append(a)
    out = []
    for im in doc["images"]:
        counts = {}
        for a in by_image.get(im["id"], []):
            counts[a["category_id"]] = counts.get(a["category_id"], 0) + 1
        for cid, n in counts.items():
            if categories is not None and names.get(cid) not in categories:
                continue
            if require_exhaustive and cid in im.get("not_exhaustive_category_ids", []):
                continue
            if lo <= n <= hi:
                fn = im.get("file_name") or im["coco_url"].rsplit("/", 1)[-1]
                out.append((im["id"], cid, n, fn))
                break
    out.sort(key=lambda s: (s[0], s[1]))
    return out if data_chunk is None else out[data_chunk[0]:data_chunk[1]]


def as_tuples(index, s):
    return [(int(index.image_ids[i]), int(c), int(n), index.image_file[i])
            for i, c, n in zip(s.image_index, s.category_id, s.count)]


@pytest.mark.parametrize("seed", range(6))
def test_samples_match_the_plain_walk(seed, tmp_path):
    rng = np.random.default_rng(seed)
    doc = make_lvis(rng)
    index = C.load_coco_index(write_lvis(tmp_path, doc, images=False))
    chosen = [c["name"] for c in doc["categories"][:3]]
    for lo, hi in ((2, 20), (5, 30), (1, 3), (4, 4), (0, 100)):
        for req in (True, False):
            for cats in (None, chosen, []):
                for chunk in (None, (1, 4), (-3, None), (2, 1)):
                    got = as_tuples(index, C.lvis_samples(index, lo, hi, cats, req, chunk))
                    assert got == plain_walk(doc, lo, hi, cats, req, chunk)
    assert len(as_tuples(index, C.lvis_samples(index, 1, 100, require_exhaustive=False))) > 3


def test_centres_and_files(tmp_path):
    """Counting's instance centres from the index equal pycocotools' mask means (bbox centre when
    empty), and every sample's file exists where the LVIS record names it."""
    rng = np.random.default_rng(21)
    doc = make_lvis(rng)
    p = write_lvis(tmp_path, doc)
    index = C.load_coco_index(p)
    sizes = {im["id"]: (im["height"], im["width"]) for im in doc["images"]}
    for a, ann in enumerate(doc["annotations"]):
        if ann["image_id"] not in sizes:
            assert index.ann_image[a] == -1
            continue
        h, w = sizes[ann["image_id"]]
        m = mask_api.decode(mask_api.frPyObjects(ann["segmentation"], h, w)).sum(axis=2) > 0
        ys, xs = np.where(m)
        x, y, bw, bh = ann["bbox"]
        expect = (xs.mean(), ys.mean()) if xs.size else (x + bw / 2, y + bh / 2)
        assert index.centre(a, h, w) == expect
        assert index.ann_index(ann["id"]) == a
    s = C.lvis_samples(index, 1, 50, require_exhaustive=False)
    for i in s.image_index:
        assert (tmp_path / "train2017" / index.image_file[i]).is_file()
    for i, im in enumerate(doc["images"]):
        assert index.image_index(im["id"]) == i
        assert list(index.not_exhaustive(i)) == im["not_exhaustive_category_ids"]
        expect = [a for a, ann in enumerate(doc["annotations"]) if ann["image_id"] == im["id"]]
        assert index.image_annotations(i).tolist() == expect
    assert index.image_index(5) is None and index.image_index(True) is None
    assert index.category_name(doc["categories"][2]["id"]) == doc["categories"][2]["name"]
    assert index.category_name(10 ** 6) is None


def test_sample_arguments_are_checked(tmp_path):
    index = C.load_coco_index(write_lvis(tmp_path, make_lvis(np.random.default_rng(1)), False))
    for kwargs, field in (({"min_count": -1}, "min_count"), ({"min_count": 2.0}, "min_count"),
                          ({"max_count": True}, "max_count"), ({"categories": "sock"}, "categories"),
                          ({"categories": [1, 2]}, "categories"),
                          ({"data_chunk": (1, 2, 3)}, "data_chunk"),
                          ({"data_chunk": (0.5, 2)}, "data_chunk"),
                          ({"require_exhaustive": "yes"}, "require_exhaustive")):
        args = {"min_count": 2, "max_count": 20, **kwargs}
        with pytest.raises(ValueError, match=field):
            C.lvis_samples(index, **args)


# ---------------------------------------------------------------------------------------------
# parity datasets
# ---------------------------------------------------------------------------------------------

def parity_file(rel):
    p = PARITY / rel
    if not p.exists():
        pytest.skip(f"parity data {p} not present")
    return p


def test_parity_counting_samples_and_centres(tmp_path):
    """Each recorded episode's init state is sample permutation(seed)[0] of the list built with
    its difficulty's range, and the recorded solver marks are the centres of the sample's
    instances (clip(c / (size - 1)), 4 decimals)."""
    rec = parity_file("counting.jsonl")
    index = C.load_coco_index(parity_file("inputs/counting/lvis_v1_train.json"), cache_dir=tmp_path)
    episodes = [json.loads(line) for line in rec.read_text().splitlines() if line.strip()]
    assert len(episodes) == 32
    checked_marks = 0
    for e in episodes:
        mk = e["make_kwargs"]
        lo, hi = (2, 20) if e["env_id"] == "counting/easy" else (5, 30)
        s = C.lvis_samples(index, lo, hi, require_exhaustive=mk.get("require_exhaustive", True))
        k = np.random.default_rng(mk["seed"]).permutation(len(s.count))[0]
        i, cat = int(s.image_index[k]), int(s.category_id[k])
        st = e["init_state"]
        assert (int(index.image_ids[i]), cat, int(s.count[k]), index.image_file[i],
                index.category_name(cat)) == (st["img_id"], st["cat_id"], st["true_count"],
                                              st["file_name"], st["category_name"])
        h, w = int(index.image_height[i]), int(index.image_width[i])
        assert e["obs_shape"] == [h, w, 3]
        if e["episode_kind"] == "solver" and e["solver_call"] == {}:
            anns = [int(a) for a in index.image_annotations(i) if index.ann_category[a] == cat]
            marks = [st["action"] for st in e["steps"] if st["action"].startswith("('mark'")]
            expect = []
            for a in anns:
                cx, cy = index.centre(a, h, w)
                expect.append("('mark', (%.4f, %.4f))" % (min(max(cx / (w - 1), 0), 1),
                                                          min(max(cy / (h - 1), 0), 1)))
            assert marks == expect[:len(marks)] and marks
            checked_marks += len(marks)
    assert checked_marks > 20


def test_parity_refcoco(tmp_path):
    root = parity_file("inputs/referring_dot_pointing")
    data = R.load_refcoco(root, cache_dir=tmp_path)
    assert data.valid_ids == (11, 14, 17, 20, 23, 26, 29, 32, 35, 38, 41, 44, 47, 50, 53, 56, 59,
                              62, 65, 68, 80)
    assert 71 not in data.refs and {74, 77} <= set(data.refs)     # dropped / kept but invalid
    raw = pickle.load(open(root / "refcoco+" / "refs(unc).p", "rb"))
    inst = json.loads((root / "refcoco+" / "instances.json").read_text())
    anns = {a["id"]: a for a in inst["annotations"]}
    imgs = {im["id"]: im for im in inst["images"]}
    for ref in raw:
        if ref["ref_id"] not in data.refs:
            continue
        r = data.refs[ref["ref_id"]]
        assert r.sentences == tuple(s["sent"] for s in ref["sentences"])
        assert r.split == ref["split"] and r.category_id == ref["category_id"]
        if ref["ref_id"] not in data.valid_ids:
            continue
        im = imgs[ref["image_id"]]
        h, w = im["height"], im["width"]
        theirs = mask_api.decode(mask_api.frPyObjects(anns[ref["ann_id"]]["segmentation"], h, w))
        assert np.array_equal(R.ref_mask(data, ref["ref_id"]), theirs.sum(axis=2) > 0)
        same = np.zeros((h, w), bool)
        for a in inst["annotations"]:
            if a["image_id"] == ref["image_id"] and a["category_id"] == ref["category_id"]:
                same |= mask_api.decode(mask_api.frPyObjects(a["segmentation"], h, w)).sum(2) > 0
        assert np.array_equal(R.ref_mask(data, ref["ref_id"], same_category=True), same)
        path = R.image_path(data, r.image_index)
        assert os.path.isfile(path) and path.endswith(im["file_name"])
        with Image.open(path) as pic:
            assert pic.size == (w, h)
    with pytest.raises(KeyError, match="ref_id"):
        R.ref_mask(data, 71)


# ---------------------------------------------------------------------------------------------
# a tiny RefCOCO+ written here
# ---------------------------------------------------------------------------------------------

def square(x, y, s):
    return [[x, y, x + s, y, x + s, y + s, x, y + s]]


def write_refcoco(tmp_path, refs_protocol=2):
    root = tmp_path / "refcoco+"
    img_dir = root / "images" / "mscoco" / "images" / "train2014"
    img_dir.mkdir(parents=True)
    images = [{"id": 9, "height": 30, "width": 40}, {"id": 77, "height": 24, "width": 20},
              {"id": 5, "height": 10, "width": 10}]
    for im in images:
        im["file_name"] = f"COCO_train2014_{im['id']:012d}.jpg"
        if im["id"] != 5:                                       # image 5's file is missing
            Image.new("RGB", (im["width"], im["height"])).save(img_dir / im["file_name"])
    anns = [
        {"id": 100, "image_id": 9, "category_id": 1, "bbox": [2, 2, 10, 10],
         "segmentation": square(2.3, 2.7, 10)},
        {"id": 101, "image_id": 9, "category_id": 1, "bbox": [20, 5, 8, 8],
         "segmentation": square(20, 5, 8) + square(30.5, 20, 4)},
        {"id": 102, "image_id": 9, "category_id": 3, "bbox": [5, 18, 6, 6],
         "segmentation": square(5, 18, 6)},
        {"id": 103, "image_id": 77, "category_id": 1, "bbox": [3, 3, 1, 1],
         "segmentation": [[3.1, 3.1, 3.2, 3.1, 3.2, 3.2]]},      # decodes empty
        {"id": 104, "image_id": 5, "category_id": 1, "bbox": [1, 1, 5, 5],
         "segmentation": square(1, 1, 5)},
    ]
    inst = {"images": images, "annotations": anns,
            "categories": [{"id": 1, "name": "person"}, {"id": 3, "name": "car"}]}
    (root / "instances.json").write_text(json.dumps(inst))
    sent = lambda *t: [{"sent": s, "raw": s, "tokens": s.split(), "sent_id": i}
                       for i, s in enumerate(t)]
    refs = [
        {"ref_id": 3, "ann_id": 101, "image_id": 9, "category_id": 1, "split": "val",
         "sent_ids": [0, 1], "sentences": sent("right person", "guy on right"), "file_name": "x"},
        {"ref_id": 1, "ann_id": 100, "image_id": 9, "category_id": 1, "split": "train",
         "sent_ids": [0], "sentences": sent("left person"), "file_name": "x"},
        {"ref_id": 2, "ann_id": 999, "image_id": 9, "category_id": 1, "split": "testA",
         "sent_ids": [0], "sentences": sent("missing annotation"), "file_name": "x"},
        {"ref_id": 4, "ann_id": 103, "image_id": 77, "category_id": 1, "split": "testB",
         "sent_ids": [0], "sentences": sent("empty mask"), "file_name": "x"},
        {"ref_id": 5, "ann_id": 104, "image_id": 5, "category_id": 1, "split": "val",
         "sent_ids": [0], "sentences": sent("image missing"), "file_name": "x"},
        {"ref_id": 6, "ann_id": 102, "image_id": 9, "category_id": 3, "split": "val",
         "sent_ids": [0], "sentences": sent("the car"), "file_name": "x"},
    ]
    with open(root / "refs(unc).p", "wb") as f:
        pickle.dump(refs, f, protocol=refs_protocol)
    return tmp_path, inst, refs


def test_tiny_refcoco(tmp_path):
    sample_dir, inst, refs = write_refcoco(tmp_path)
    data = R.load_refcoco(sample_dir, cache_dir=tmp_path / "c")
    assert sorted(data.refs) == [1, 3, 4, 5, 6]
    assert data.valid_ids == (1, 3, 6)
    assert data.refs[3].sentences == ("right person", "guy on right")
    anns = {a["id"]: a for a in inst["annotations"]}

    def coco(ann_ids, h, w):
        m = np.zeros((h, w), bool)
        for a in ann_ids:
            m |= mask_api.decode(mask_api.frPyObjects(anns[a]["segmentation"], h, w)).sum(2) > 0
        return m

    assert np.array_equal(R.ref_mask(data, 3), coco([101], 30, 40))
    assert np.array_equal(R.ref_mask(data, 3, same_category=True), coco([100, 101], 30, 40))
    assert np.array_equal(R.ref_mask(data, 6, same_category=True), coco([102], 30, 40))
    assert not R.ref_mask(data, 4).any() and not R.ref_mask(data, 4, True).any()
    assert R.image_path(data, data.refs[1].image_index).endswith("COCO_train2014_000000000009.jpg")
    with pytest.raises(ValueError, match="split_by"):
        R.load_refcoco(sample_dir, split_by="../unc")
    with pytest.raises(C.AnnotationFileError, match="refcoco"):
        R.load_refcoco(tmp_path / "nowhere")


# ---------------------------------------------------------------------------------------------
# the refs pickle
# ---------------------------------------------------------------------------------------------

MARKS = []


def leave_a_mark(path):
    """Would run if an unpickler resolved it: records the call and creates a file."""
    MARKS.append(path)
    Path(path).write_text("ran")
    return []


class Evil:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (leave_a_mark, (self.path,))


class Foreign:
    """A class of this test module: a pickle naming it must be refused, not imported."""


def test_malicious_pickle_runs_nothing(tmp_path):
    marker = tmp_path / "marker"
    p = tmp_path / "refs(unc).p"
    for proto in range(0, pickle.HIGHEST_PROTOCOL + 1):
        p.write_bytes(pickle.dumps([{"ref_id": 1}, Evil(str(marker))], protocol=proto))
        with pytest.raises(C.AnnotationFileError) as e:
            R.load_refs_pickle(p)
        assert "refs(unc).p" in str(e.value) and "leave_a_mark" in str(e.value)
        assert not marker.exists() and MARKS == []
    # os.system and builtins.eval as REDUCE targets, hand-written (protocol 0)
    for module, name in ((b"os", b"system"), (b"builtins", b"eval"), (b"posix", b"system")):
        payload = (b"c" + module + b"\n" + name + b"\n(S'touch " + str(marker).encode() +
                   b"'\ntR.")
        p.write_bytes(payload)
        with pytest.raises(C.AnnotationFileError, match=name.decode()):
            R.load_refs_pickle(p)
        assert not marker.exists()
    # the control: the stock unpickler does run it
    pickle.loads(pickle.dumps(Evil(str(marker))))
    assert marker.exists() and MARKS == [str(marker)]
    MARKS.clear()


def test_foreign_class_and_persistent_ids_refused(tmp_path):
    p = tmp_path / "r.p"
    p.write_bytes(pickle.dumps([Foreign()], protocol=2))
    with pytest.raises(C.AnnotationFileError, match="Foreign"):
        R.load_refs_pickle(p)
    from collections import OrderedDict
    p.write_bytes(pickle.dumps([OrderedDict(a=1)], protocol=4))
    with pytest.raises(C.AnnotationFileError, match="OrderedDict"):
        R.load_refs_pickle(p)
    p.write_bytes(b"\x80\x02]q\x00P1\nq\x01a.")                  # PERSID
    with pytest.raises(C.AnnotationFileError, match="persistent"):
        R.load_refs_pickle(p)


def good_refs():
    return [{"ref_id": i, "ann_id": 10 + i, "image_id": 3, "category_id": 1, "split": "train",
             "sentences": [{"sent": f"thing {i}", "raw": "x", "tokens": [], "sent_id": 0}],
             "sent_ids": [0], "file_name": "f.jpg"} for i in range(3)]


@pytest.mark.parametrize("proto", range(0, pickle.HIGHEST_PROTOCOL + 1))
def test_refs_pickle_every_protocol(tmp_path, proto):
    p = tmp_path / "r.p"
    p.write_bytes(pickle.dumps(good_refs(), protocol=proto))
    assert R.load_refs_pickle(p) == good_refs()


def py2_pickle(refs):
    """Protocol 2 as Python 2 writes it: str values as SHORT_BINSTRING/BINSTRING bytes."""
    out = bytearray(b"\x80\x02]")

    def s(b):
        return (b"U" + bytes([len(b)]) + b) if len(b) < 256 else (
            b"T" + len(b).to_bytes(4, "little") + b)

    def val(v):
        if isinstance(v, bytes):
            return s(v)
        if isinstance(v, int):
            return b"J" + v.to_bytes(4, "little", signed=True)
        if isinstance(v, list):
            return b"](" + b"".join(val(x) for x in v) + b"e" if v else b"]"
        if isinstance(v, dict):
            return b"}(" + b"".join(val(k) + val(x) for k, x in v.items()) + b"u"
        raise TypeError(v)

    out += b"(" + b"".join(val(r) for r in refs) + b"e."
    return bytes(out)


def test_python2_strings(tmp_path):
    p = tmp_path / "r.p"
    ref = {b"ref_id": 7, b"ann_id": 8, b"image_id": 9, b"category_id": 1, b"split": b"val",
           b"sentences": [{b"sent": "caf\u00e9 table".encode("utf-8"), b"sent_id": 0}]}
    p.write_bytes(py2_pickle([ref]))
    assert pickle.loads(p.read_bytes(), encoding="bytes")[0][b"ref_id"] == 7   # well-formed
    got = R.load_refs_pickle(p)
    assert got[0]["sentences"][0]["sent"] == "caf\u00e9 table" and got[0]["split"] == "val"
    ref[b"sentences"][0][b"sent"] = b"na\xefve"                    # Latin-1, not UTF-8
    p.write_bytes(py2_pickle([ref]))
    assert R.load_refs_pickle(p)[0]["sentences"][0]["sent"] == "na\u00efve"


def test_bad_refs_named(tmp_path):
    p = tmp_path / "refs(unc).p"
    good = pickle.dumps(good_refs(), protocol=2)
    for cut in (1, 10, len(good) // 2, len(good) - 1):
        p.write_bytes(good[:cut])
        with pytest.raises(C.AnnotationFileError, match=r"refs\(unc\)\.p"):
            R.load_refs_pickle(p)
    p.write_bytes(b"not a pickle at all")
    with pytest.raises(C.AnnotationFileError, match=r"refs\(unc\)\.p"):
        R.load_refs_pickle(p)
    cases = [({"ann_id": "10"}, "ann_id"), ({"ref_id": True}, "ref_id"),
             ({"split": 3}, "split"), ({"sentences": "x"}, "sentences"),
             ({"sentences": [{"raw": "no sent"}]}, r"sentences\[0\]")]
    for change, field in cases:
        refs = good_refs()
        refs[2].update(change)
        p.write_bytes(pickle.dumps(refs, protocol=2))
        with pytest.raises(C.AnnotationFileError, match=rf"ref #2: .*{field}"):
            R.load_refs_pickle(p)
    refs = good_refs()
    del refs[1]["image_id"]
    p.write_bytes(pickle.dumps(refs))
    with pytest.raises(C.AnnotationFileError, match="ref #1: field 'image_id'.*missing"):
        R.load_refs_pickle(p)
    p.write_bytes(pickle.dumps({"refs": []}))
    with pytest.raises(C.AnnotationFileError, match="list"):
        R.load_refs_pickle(p)


# ---------------------------------------------------------------------------------------------
# the streaming parser and bad JSON
# ---------------------------------------------------------------------------------------------

def same_index(a, b):
    for name in C._ARRAYS:
        x, y = np.asarray(getattr(a, name)), np.asarray(getattr(b, name))
        assert x.dtype == y.dtype and np.array_equal(x, y), name
    assert a.image_file == b.image_file and a.category_names == b.category_names


def test_chunk_boundaries_do_not_matter(tmp_path):
    """Any chunk size (elements, numbers and literals cut anywhere) and any layout give the same
    index as one whole read."""
    doc = make_lvis(np.random.default_rng(4), n_images=5)
    doc["info"] = {"year": 2024, "flag": True, "none": None, "x": [1.5, -2e3]}
    doc["zz_number"] = 123456789
    p = write_lvis(tmp_path, doc, images=False)
    whole = C.parse_coco_json(p, chunk_chars=1 << 24)
    assert whole.n_annotations == len(doc["annotations"])
    for chunk in (1, 2, 7, 61, 500):
        same_index(whole, C.parse_coco_json(p, chunk_chars=chunk))
    pretty = write_lvis(tmp_path, doc, images=False, name="pretty.json", indent=3)
    same_index(whole, C.parse_coco_json(pretty, chunk_chars=13))


def bad_doc(**edits):
    doc = {"info": {}, "images": [{"id": 1, "height": 10, "width": 12, "coco_url": "u/a.jpg"}],
           "annotations": [{"id": 1, "image_id": 1, "category_id": 2, "bbox": [0, 0, 1, 1],
                            "segmentation": [[0, 0, 4, 0, 4, 4]]}],
           "categories": [{"id": 2, "name": "thing"}]}
    for where, change in edits.items():
        if where == "top":
            doc = change
        else:
            doc[where][0].update(change)
    return doc


BAD = [
    (dict(top=[1, 2]), "top-level object"),
    (dict(top={"images": {}, "annotations": []}), "'images' must be an array"),
    (dict(top={"images": []}), "'annotations' array is missing"),
    (dict(images={"id": "1"}), r"images\[0\]: field 'id'"),
    (dict(images={"id": True}), r"images\[0\]: field 'id'"),
    (dict(images={"height": 0}), r"images\[0\]: field 'height'"),
    (dict(images={"width": None}), r"images\[0\]: field 'width'"),
    (dict(images={"not_exhaustive_category_ids": [1, "2"]}), "not_exhaustive_category_ids"),
    (dict(annotations={"image_id": 1.0}), r"annotations\[0\]: field 'image_id'"),
    (dict(annotations={"category_id": False}), "category_id"),
    (dict(annotations={"id": 2 ** 70}), r"annotations\[0\]: field 'id'"),
    (dict(annotations={"bbox": [0, 0, 1]}), "bbox"),
    (dict(annotations={"bbox": [0, 0, 1, "2"]}), "bbox"),
    (dict(annotations={"segmentation": [[0, 0, 4, 0, 4]]}), r"segmentation\[0\]"),
    (dict(annotations={"segmentation": [[0, 0, 4, 0, "4", 4]]}), r"segmentation\[0\]"),
    (dict(annotations={"segmentation": [[0, 0, 4, 0, True, 4]]}), r"segmentation\[0\]"),
    (dict(annotations={"segmentation": [[0, 0, 4, 0, 4e9, 4]]}), "coordinate"),
    (dict(annotations={"segmentation": [[-9e5, -9e5, 9e5, -9e5, 9e5, 9e5]]}), "too long"),
    (dict(annotations={"segmentation": "abc"}), "segmentation"),
    (dict(annotations={"segmentation": {"size": [10, 12], "counts": [5, 3]}}), "sum to 8"),
    (dict(annotations={"segmentation": {"size": [10], "counts": [120]}}), "'size'"),
    (dict(annotations={"segmentation": {"size": [10, 12], "counts": [-1, 121]}}), "counts"),
    (dict(annotations={"segmentation": {"size": [10, 12], "counts": "0 1"}}), "character"),
    (dict(categories={"name": 5}), r"categories\[0\]: field 'name'"),
]


@pytest.mark.parametrize("edits,message", BAD)
def test_bad_fields_named(tmp_path, edits, message):
    p = tmp_path / "lvis_bad.json"
    p.write_text(json.dumps(bad_doc(**edits)))
    with pytest.raises(C.AnnotationFileError, match=message) as e:
        C.load_coco_index(p)
    assert "lvis_bad.json" in str(e.value)


def test_duplicate_image_ids_and_nan(tmp_path):
    doc = bad_doc()
    doc["images"].append(dict(doc["images"][0]))
    p = tmp_path / "dup.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(C.AnnotationFileError, match=r"images\[1\]: duplicate image id 1"):
        C.load_coco_index(p)
    p.write_text(json.dumps(bad_doc(annotations={"segmentation": [[0, 0, 4, 0, float("nan"), 4]]})))
    with pytest.raises(C.AnnotationFileError, match="coordinate nan"):
        C.load_coco_index(p)


def test_truncated_and_broken_json(tmp_path):
    text = json.dumps(make_lvis(np.random.default_rng(2), n_images=4))
    p = tmp_path / "cut.json"
    for cut in (0, 1, 30, len(text) // 3, len(text) // 2, len(text) - 2, len(text) - 1):
        p.write_text(text[:cut])
        with pytest.raises(C.AnnotationFileError, match="cut.json"):
            C.parse_coco_json(p, chunk_chars=64)
    broken = text.replace('"bbox": [', '"bbox": [,', 1)
    p.write_text(broken)
    with pytest.raises(C.AnnotationFileError) as e:
        C.parse_coco_json(p, chunk_chars=50)
    offset = broken.index('"bbox": [,') + len('"bbox": [')
    assert f"character offset {offset}" in str(e.value)
    p.write_text(text + " x")
    with pytest.raises(C.AnnotationFileError, match="extra data"):
        C.parse_coco_json(p)
    p.write_bytes(b'{"images": ["\xff\xfe"], "annotations": []}')
    with pytest.raises(C.AnnotationFileError, match="UTF-8"):
        C.parse_coco_json(p)
    with pytest.raises(C.AnnotationFileError, match="missing.json"):
        C.load_coco_index(tmp_path / "missing.json")


# ---------------------------------------------------------------------------------------------
# the cache
# ---------------------------------------------------------------------------------------------

def counting_parser(monkeypatch):
    calls = []
    real = REAL_PARSE

    def parse(path, *a, **k):
        calls.append(path)
        return real(path, *a, **k)
    monkeypatch.setattr(C, "parse_coco_json", parse)
    return calls


def test_cache_reused_and_invalidated(tmp_path, monkeypatch):
    doc = make_lvis(np.random.default_rng(8))
    p = write_lvis(tmp_path, doc, images=False)
    calls = counting_parser(monkeypatch)
    first = C.load_coco_index(p)
    assert len(calls) == 1
    folder = tmp_path / (p.name + ".visgym-index")
    assert (folder / "meta.json").is_file()
    assert C.load_coco_index(p) is first                      # the process cache
    C._INDEXES.clear()

    def refuse(*a, **k):
        raise AssertionError("parsed again")
    monkeypatch.setattr(C, "parse_coco_json", refuse)
    again = C.load_coco_index(p)                              # from disk, no parse
    same_index(first, again)
    assert again.centre(3, 40, 40) == first.centre(3, 40, 40)
    with pytest.raises(ValueError):
        np.asarray(again.ann_ids)[0] = 5                      # read-only
    calls = counting_parser(monkeypatch)
    st = p.stat()
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns + 10 ** 9))   # touched: re-parsed
    C._INDEXES.clear()
    C.load_coco_index(p)
    assert len(calls) == 1
    doc["annotations"] = doc["annotations"][:-3]                 # new content and size
    p.write_text(json.dumps(doc))
    C._INDEXES.clear()
    changed = C.load_coco_index(p)
    assert len(calls) == 2 and changed.n_annotations == first.n_annotations - 3
    C._INDEXES.clear()
    assert C.load_coco_index(p).n_annotations == changed.n_annotations and len(calls) == 2


@pytest.mark.parametrize("damage", ["shape", "garbage", "meta", "offsets"])
def test_corrupt_cache_is_rebuilt(tmp_path, monkeypatch, damage):
    p = write_lvis(tmp_path, make_lvis(np.random.default_rng(9)), images=False)
    good = C.load_coco_index(p)
    folder = tmp_path / (p.name + ".visgym-index")
    if damage == "shape":
        np.save(folder / "ann_ids.npy", np.zeros(3, np.int64))
    elif damage == "garbage":
        (folder / "coords.npy").write_bytes(b"\x93NUMPY garbage")
    elif damage == "meta":
        (folder / "meta.json").write_text("{not json")
    else:
        off = np.load(folder / "poly_offsets.npy")
        off[1], off[2] = off[2], off[1]
        np.save(folder / "poly_offsets.npy", off)
    C._INDEXES.clear()
    calls = counting_parser(monkeypatch)
    rebuilt = C.load_coco_index(p)
    assert len(calls) == 1
    same_index(good, rebuilt)
    C._INDEXES.clear()
    C.load_coco_index(p)
    assert len(calls) == 1                                     # the rebuilt cache is good


def test_read_only_folder_uses_cache_dir(tmp_path, monkeypatch):
    data = tmp_path / "data"
    data.mkdir()
    p = write_lvis(data, make_lvis(np.random.default_rng(3)), images=False)
    data.chmod(0o555)
    try:
        C.load_coco_index(p, cache_dir=tmp_path / "mine")
        assert not (data / (p.name + ".visgym-index")).exists()
        made = list((tmp_path / "mine").iterdir())
        assert len(made) == 1 and (made[0] / "meta.json").is_file()
        C._INDEXES.clear()
        C.load_coco_index(p)                               # no cache_dir: $VISGYM_CACHE_DIR
        assert len(list((tmp_path / "env-cache").iterdir())) == 1
        calls = counting_parser(monkeypatch)
        C._INDEXES.clear()
        C.load_coco_index(p, cache_dir=tmp_path / "mine")
        assert calls == []
    finally:
        data.chmod(0o755)


# ---------------------------------------------------------------------------------------------
# 10**6 annotations: bounded time and memory (in a child process)
# ---------------------------------------------------------------------------------------------

CHILD = textwrap.dedent("""
    import json, os, resource, sys, time
    path, cache, mode = sys.argv[1], sys.argv[2], sys.argv[3]
    if mode == "write":
        n_img, n_ann = 100_000, 1_000_000
        with open(path, "w") as f:
            f.write('{"info": {"description": "synthetic"}, "images": [')
            f.write(", ".join('{"id": %d, "height": 480, "width": 640, "coco_url": '
                              '"http://x/%012d.jpg", "not_exhaustive_category_ids": [%d]}'
                              % (i + 1, i + 1, i % 7 + 1) for i in range(n_img)))
            f.write('], "annotations": [')
            for s in range(0, n_ann, 100_000):
                f.write((", " if s else "") + ", ".join(
                    '{"id": %d, "image_id": %d, "category_id": %d, "bbox": [10.5, 20.25, 30.0, '
                    '40.0], "area": 1200.0, "segmentation": [[10.5, 20.25, 40.5, 20.25, 40.5, '
                    '60.25, 10.5, 60.25, 25.0, %d.5]]}' % (a + 1, a // 10 + 1, (a % 10) // 4 + 1,
                    70 + a % 9) for a in range(s, s + 100_000)))
            f.write('], "categories": [' + ", ".join('{"id": %d, "name": "c%d"}' % (c, c)
                                                     for c in range(1, 14)) + ']}')
        sys.exit(0)
    import numpy as np
    from visgym.envs.assets import coco as C
    from visgym.kernels import coco_masks as K
    # warm Numba (LLVM's own ~100 MB are not the loader's): one call of each kernel used
    K.walk_lengths(np.zeros(6), np.array([0, 6]), np.array([0, 1]), np.ones(1, np.int8), 1)
    K.polygons_flat(np.zeros(6), np.array([0, 6]), 0, 1, 4, 4)
    K.flat_centre(np.zeros(16, np.bool_), 4)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t = time.perf_counter()
    ix = C.load_coco_index(path, cache_dir=cache)
    load = time.perf_counter() - t
    t = time.perf_counter()
    s = C.lvis_samples(ix, 2, 20)
    samples = time.perf_counter() - t
    c = ix.centre(999_999, 480, 640)
    print(json.dumps({"load_s": load, "samples_s": samples, "n_samples": len(s.count),
                      "base_mb": base / 1024, "peak_mb":
                      resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                      "n_ann": ix.n_annotations, "centre": c}))
""")


@pytest.mark.timeout(180)
def test_million_annotations_bounded(tmp_path):
    """A 10**6-annotation LVIS-style JSON (~200 MB): the first load streams it within bounded
    memory (peak growth below the file size), a second load comes from the cache quickly."""
    p = tmp_path / "big.json"
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    run = lambda mode: subprocess.run([sys.executable, str(script), str(p), str(tmp_path / "c"),
                                       mode], capture_output=True, text=True, timeout=170)
    assert run("write").returncode == 0
    size_mb = p.stat().st_size / 2 ** 20
    figures = []
    for _ in range(2):
        out = run("load")
        assert out.returncode == 0, out.stderr[-2000:]
        figures.append(json.loads(out.stdout.strip().splitlines()[-1]))
    first, second = figures
    print(f"\n10**6 annotations, {size_mb:.0f} MB JSON: first load {first['load_s']:.1f} s, "
          f"peak RSS +{first['peak_mb'] - first['base_mb']:.0f} MB; cached load "
          f"{second['load_s']:.2f} s, +{second['peak_mb'] - second['base_mb']:.0f} MB; "
          f"samples {second['samples_s']:.3f} s")
    for f in figures:
        assert f["n_ann"] == 1_000_000
        assert f["n_samples"] == 100_000    # every image: category 1 (4), or 2 where 1 is flagged
        assert f["samples_s"] < 1.0
    assert first["peak_mb"] - first["base_mb"] < size_mb * 1.5
    assert first["load_s"] < 60
    assert second["load_s"] < 3.0
    # the cached load maps the cache read-only: at most its pages become resident
    cache_mb = sum(f.stat().st_size for f in (tmp_path / "big.json.visgym-index").iterdir()) / 2 ** 20
    assert second["peak_mb"] - second["base_mb"] < cache_mb + 64
    assert first["centre"] == second["centre"]
