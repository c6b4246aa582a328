"""kernels/coco_masks.py against pycocotools (the test oracle): polygons, unions, RLE strings,
and every annotation of both parity datasets decoded through envs/assets/coco.py."""
import json
from pathlib import Path

import numpy as np
import pytest

mask_api = pytest.importorskip("pycocotools.mask")
pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")

from parity_data import parity_dir
from visgym.envs.assets import coco as C
from visgym.kernels import coco_masks as K

PARITY = parity_dir() / "inputs"


def ours_poly(polys, h, w):
    flat = np.zeros(h * w, bool)
    for p in polys:
        K.paint_counts(flat, K.poly_counts(np.asarray(p, np.float64), h, w))
    return K.flat_to_mask(flat, h, w)


def theirs_poly(polys, h, w):
    m = mask_api.decode(mask_api.frPyObjects([list(map(float, p)) for p in polys], h, w))
    return m.sum(axis=2) > 0


def random_polygon(rng, kind, h, w):
    k = int(rng.integers(3, 10))
    if kind == "inside":
        xy = np.column_stack([rng.uniform(0, w, k), rng.uniform(0, h, k)])
    elif kind == "outside":
        xy = np.column_stack([rng.uniform(-3 * w, 4 * w, k), rng.uniform(-3 * h, 4 * h, k)])
    elif kind == "negative":
        xy = np.column_stack([rng.uniform(-w, w / 2, k), rng.uniform(-h, h / 2, k)])
    elif kind == "large":
        xy = rng.uniform(-20000, 20000, (k, 2))
    elif kind == "degenerate":       # repeated vertices, collinear points, zero-length edges
        base = np.round(rng.uniform(0, max(w, h), (k, 2)) * 2) / 2
        base[1] = base[0]
        base[3 % k] = base[2]
        xy = base
    elif kind == "tiny":
        x0, y0 = rng.uniform(0, w), rng.uniform(0, h)
        xy = np.column_stack([x0 + rng.uniform(0, 0.8, k), y0 + rng.uniform(0, 0.8, k)])
    elif kind == "edges":            # vertices exactly on the image border and pixel grid
        xy = np.column_stack([rng.choice([0.0, w, w / 2, 0.5, w - 0.5], k),
                              rng.choice([0.0, h, h / 2, 0.5, h - 0.5], k)])
    elif kind == "halves":           # x.5 coordinates, where C's rounding matters most
        xy = np.column_stack([rng.integers(-3, w + 3, k) + 0.5 * rng.integers(0, 2, k),
                              rng.integers(-3, h + 3, k) + 0.5 * rng.integers(0, 2, k)])
        xy = xy + rng.choice([0.0, 0.1, -0.1, 0.4, 0.6], (k, 2))
    else:
        raise AssertionError(kind)
    return xy.ravel().tolist()


KINDS = ["inside", "outside", "negative", "large", "degenerate", "tiny", "edges", "halves"]


@pytest.mark.parametrize("kind", KINDS)
def test_random_polygons_equal_pycocotools(kind):
    """Random (often self-intersecting) polygons of every kind decode bit for bit as in
    pycocotools, at random image sizes including 1-pixel-wide ones."""
    rng = np.random.default_rng(KINDS.index(kind))
    for _ in range(250):
        h, w = int(rng.integers(1, 70)), int(rng.integers(1, 70))
        p = random_polygon(rng, kind, h, w)
        ours = ours_poly([p], h, w)
        assert np.array_equal(ours, theirs_poly([p], h, w)), (h, w, p)


def test_several_polygons_are_united():
    """Several polygons (overlapping, disjoint, and degenerate 1- and 2-point ones after the
    first) give pycocotools' summed-then-positive mask."""
    rng = np.random.default_rng(7)
    for _ in range(150):
        h, w = int(rng.integers(5, 60)), int(rng.integers(5, 60))
        polys = [random_polygon(rng, "inside", h, w) for _ in range(int(rng.integers(1, 4)))]
        if rng.random() < 0.3:
            polys.append(rng.uniform(0, w, 2).tolist())     # one point
        if rng.random() < 0.3:
            polys.append(rng.uniform(0, w, 4).tolist())     # two points
        assert np.array_equal(ours_poly(polys, h, w), theirs_poly(polys, h, w))


def test_compressed_strings_equal_pycocotools():
    """Strings written by pycocotools' encoder (negative differences, long runs, empty and full
    masks) decode to the same masks; the counts equal pycocotools' own."""
    rng = np.random.default_rng(3)
    masks = [np.zeros((7, 9), bool), np.ones((7, 9), bool)]
    for _ in range(200):
        h, w = int(rng.integers(1, 120)), int(rng.integers(1, 120))
        masks.append(rng.random((h, w)) < rng.random())
    big = np.zeros((600, 640), bool)
    big[100:500, 37:600] = True
    masks.append(big)
    for m in masks:
        h, w = m.shape
        rle = mask_api.encode(np.asfortranarray(m.astype(np.uint8)))
        counts, err = K.string_counts(np.frombuffer(rle["counts"], np.uint8), C.MAX_RLE_CHARS)
        assert err == 0
        flat = np.zeros(h * w, bool)
        K.paint_counts(flat, counts)
        assert np.array_equal(K.flat_to_mask(flat, h, w), m)
        assert np.array_equal(K.flat_to_mask(flat, h, w), mask_api.decode(rle).astype(bool))
        assert K.counts_area(counts) == int(m.sum())


def test_bad_strings_report_why():
    bad = lambda s: int(K.string_counts(np.frombuffer(s, np.uint8), C.MAX_RLE_CHARS)[1])
    assert bad(b"12 3") == 1          # a character below '0'
    assert bad(b"1p") == 1            # a character above 'o'
    assert bad(b"oooooo0") == 2       # seven characters in one value
    assert bad(b"1o") == 3            # continuation bit on the last character


def test_poly_counts_are_pycocotools_counts():
    """Not only the decoded mask: the run lengths themselves equal pycocotools' (compared
    through its string encoding)."""
    rng = np.random.default_rng(11)
    for _ in range(200):
        h, w = int(rng.integers(1, 50)), int(rng.integers(1, 50))
        p = random_polygon(rng, "outside" if rng.random() < 0.5 else "inside", h, w)
        rle = mask_api.frPyObjects([p], h, w)[0]
        theirs, err = K.string_counts(np.frombuffer(rle["counts"], np.uint8), 7)
        assert err == 0
        assert np.array_equal(K.poly_counts(np.asarray(p), h, w), theirs)


def _all_annotations(json_path, tmp_path):
    data = json.loads(Path(json_path).read_text())
    index = C.load_coco_index(json_path, cache_dir=tmp_path)
    sizes = {im["id"]: (im["height"], im["width"]) for im in data["images"]}
    return data, index, sizes


@pytest.mark.parametrize("rel", ["counting/lvis_v1_train.json",
                                 "referring_dot_pointing/refcoco+/instances.json"])
def test_every_parity_annotation(rel, tmp_path):
    """Every annotation of both parity datasets: mask, emptiness and centre equal what
    pycocotools + NumPy give from the JSON itself."""
    path = PARITY / rel
    if not path.is_file():
        pytest.skip(f"parity input {path} not present")
    data, index, sizes = _all_annotations(path, tmp_path)
    assert index.n_annotations == len(data["annotations"])
    empties = 0
    for a, ann in enumerate(data["annotations"]):
        if ann["image_id"] not in sizes:
            continue
        h, w = sizes[ann["image_id"]]
        seg = ann["segmentation"]
        theirs = (mask_api.decode(mask_api.frPyObjects(seg, h, w)).sum(axis=2) > 0) if seg \
            else np.zeros((h, w), bool)
        ours = index.mask(a, h, w)
        assert ours.shape == (h, w) and ours.dtype == bool
        assert np.array_equal(ours, theirs), ann["id"]
        assert index.is_empty(a, h, w) == (not theirs.any())
        ys, xs = np.where(theirs)
        if xs.size:
            expect = (xs.mean(), ys.mean())
        else:
            empties += 1
            x, y, bw, bh = ann["bbox"]
            expect = (x + bw / 2, y + bh / 2)
        assert index.centre(a, h, w) == expect       # exact, not approximate
    if "counting" in rel:
        assert empties >= 1     # the dataset's annotation whose mask decodes empty


def test_rle_annotations_in_a_file(tmp_path):
    """Uncompressed and compressed RLE segmentations in a COCO JSON decode as pycocotools
    decodes them (frPyObjects for the uncompressed one, decode for the string)."""
    rng = np.random.default_rng(5)
    m1 = rng.random((30, 40)) < 0.3
    m2 = np.zeros((30, 40), bool)
    m2[3:9, 10:31] = True
    rle2 = mask_api.encode(np.asfortranarray(m2.astype(np.uint8)))
    flat = m1.T.ravel()
    runs, cur, n = [], False, 0
    for v in flat:
        if v != cur:
            runs.append(n)
            cur, n = v, 0
        n += 1
    runs.append(n)
    doc = {"images": [{"id": 1, "height": 30, "width": 40, "file_name": "a.jpg"}],
           "annotations": [
               {"id": 1, "image_id": 1, "category_id": 1, "bbox": [0, 0, 1, 1],
                "segmentation": {"size": [30, 40], "counts": runs}},
               {"id": 2, "image_id": 1, "category_id": 1, "bbox": [0, 0, 1, 1],
                "segmentation": {"size": [30, 40], "counts": rle2["counts"].decode()}}],
           "categories": [{"id": 1, "name": "x"}]}
    p = tmp_path / "rle.json"
    p.write_text(json.dumps(doc))
    ix = C.load_coco_index(p, cache_dir=tmp_path / "c")
    theirs1 = mask_api.decode(mask_api.frPyObjects(doc["annotations"][0]["segmentation"], 30, 40))
    assert np.array_equal(ix.mask(0, 30, 40), theirs1.astype(bool))
    assert np.array_equal(ix.mask(1, 30, 40), m2)
    ys, xs = np.where(m2)
    assert ix.centre(1, 30, 40) == (xs.mean(), ys.mean())
    assert not ix.is_empty(0, 30, 40)
    with pytest.raises(ValueError, match="30x40"):
        ix.mask(0, 40, 30)
