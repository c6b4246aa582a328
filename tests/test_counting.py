"""counting behaviour from spec/envs/counting.md: the grammar (section 5), dynamics, reward,
frames, prompt and solvers on both sources: the procedural scenes (the offline default) and an
LVIS dataset the test writes in the real format (an LVIS v1 JSON and COCO-named JPEGs), with
samples, counts and centres checked against values computed here (pycocotools as the oracle for
masks); the data paths (keywords, environment variables, the bundle layout), init states and bad
input (malformed marks, hostile init states, corrupt annotation files)."""
import json
import os

import numpy as np
import pytest
from PIL import Image

import visgym
from contract_checks import assert_frames_equal_a_full_redraw, assert_hostile_init_refused
from visgym.envs.assets import scenes as scene_lib
from visgym.envs.pointing import scenes_of

STOP = "('stop', 'stop')"
SUCCESS = "Action executed successfully."


def _env(difficulty="easy", n=1, **kw):
    return visgym.make(f"counting/{difficulty}", num_envs=n, autoreset="disabled",
                       max_steps=None, **kw)


# ----------------------------------------------------------------------------- a tiny LVIS
def _square(x, y, s):
    return [[x, y, x + s, y, x + s, y + s, x, y + s]]


def _write_lvis(root, coco_url=True):
    """Three images and their annotations in the LVIS v1 layout; returns (json path, folder)."""
    rng = np.random.default_rng(0)
    images, annotations = [], []
    sizes = {10: (60, 80), 20: (50, 70), 30: (40, 40)}
    for image_id, (h, w) in sizes.items():
        name = f"{image_id:012d}.jpg"
        Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(root / name)
        record = {"id": image_id, "height": h, "width": w, "not_exhaustive_category_ids": [],
                  "neg_category_ids": []}
        if coco_url:
            record["coco_url"] = f"http://images.cocodataset.org/train2017/{name}"
        else:
            record["file_name"] = name
        images.append(record)
    images[1]["not_exhaustive_category_ids"] = [2]

    def ann(image_id, cat, seg, bbox):
        annotations.append({"id": len(annotations) + 1, "image_id": image_id,
                            "category_id": cat, "segmentation": seg, "bbox": bbox,
                            "area": 1.0})

    # image 10: cat 5 first (3 instances), then cat 2 (2 instances)
    ann(10, 5, _square(2, 2, 6), [2, 2, 6, 6])
    ann(10, 2, _square(30, 10, 9.5), [30, 10, 9.5, 9.5])
    ann(10, 5, _square(20, 30, 4), [20, 30, 4, 4])
    ann(10, 5, [[50, 40, 70, 42, 60, 55]], [50, 40, 20, 15])
    ann(10, 2, _square(5, 40, 7) + _square(40, 45, 3), [5, 40, 38, 8])
    # image 20: cat 2 (not exhaustive there) x2, cat 7 x2 (one empty mask: bbox centre)
    ann(20, 2, _square(1, 1, 5), [1, 1, 5, 5])
    ann(20, 2, _square(10, 10, 5), [10, 10, 5, 5])
    ann(20, 7, _square(30, 20, 8), [30, 20, 8, 8])
    ann(20, 7, [[100, 100, 101, 100, 100, 101]], [3, 4, 10, 6])
    # image 30: one instance only
    ann(30, 5, _square(5, 5, 10), [5, 5, 10, 10])
    data = {"info": {}, "licenses": [], "images": images, "annotations": annotations,
            "categories": [{"id": 2, "name": "trash_can"}, {"id": 5, "name": "bow_(weapon)"},
                           {"id": 7, "name": "sock"}]}
    path = root / "lvis_v1_train.json"
    path.write_text(json.dumps(data))
    return str(path), str(root)


def _centre(ann, h, w):
    """The spec's centre with pycocotools as the mask oracle."""
    mask_api = pytest.importorskip("pycocotools.mask")
    rles = mask_api.frPyObjects(ann["segmentation"], h, w)
    mask = mask_api.decode(rles)
    mask = mask.sum(axis=2) > 0 if mask.ndim == 3 else mask > 0
    ys, xs = np.nonzero(mask)
    if ys.size == 0:
        x, y, bw, bh = ann["bbox"]
        return x + bw / 2, y + bh / 2
    return xs.mean(), ys.mean()


@pytest.fixture
def lvis(tmp_path):
    return _write_lvis(tmp_path)


def test_lvis_samples_counts_centres_and_prompts(lvis):
    annotation, folder = lvis
    data = json.load(open(annotation))
    env = _env(annotation_file=annotation, sample_dir=folder)
    assert not env.family.scene_mode
    # Samples: image 10 -> its first category (5, count 3); image 20: cat 2 is not exhaustive,
    # so cat 7 (2); image 30: 1 instance, below min_count 2.
    seen = set()
    for seed in range(40):
        env.reset(seeds=[seed])
        got = env.state_dicts()[0]
        seen.add((got["img_id"], got["cat_id"], got["true_count"], got["category_name"]))
        n = 2
        want = [(10, 5), (20, 7)][int(np.random.default_rng(seed).permutation(n)[0])]
        assert (got["img_id"], got["cat_id"]) == want
        assert got["file_name"] == f"{got['img_id']:012d}.jpg"
        assert env.prompt() == env.prompt()   # stable
        assert f"a {got['category_name']}-counting task" in env.prompt()
        assert "between 2 and 20" in env.prompt()
        h, w = env.frame_hw[0].tolist()
        image = next(i for i in data["images"] if i["id"] == got["img_id"])
        assert (h, w) == (image["height"], image["width"])
        np.testing.assert_array_equal(
            env.frame(0), np.asarray(Image.open(os.path.join(folder, got["file_name"]))))
        centres = env.family.centres(env.state, 0)
        want_centres = [_centre(a, h, w) for a in data["annotations"]
                        if a["image_id"] == got["img_id"] and a["category_id"] == got["cat_id"]]
        np.testing.assert_allclose(centres, want_centres, rtol=0, atol=1e-9)
    assert seen == {(10, 5, 3, "bow_(weapon)"), (20, 7, 2, "sock")}
    # require_exhaustive=False: image 20 gives its first category (2, count 2).
    env = _env(annotation_file=annotation, sample_dir=folder, require_exhaustive=False)
    assert {tuple(env.family.samples.category_id.tolist())} == {(5, 2)}
    # categories restrict the walk; data_chunk slices the sorted list.
    env = _env(annotation_file=annotation, sample_dir=folder, categories=["trash_can"],
               require_exhaustive=False)
    env.reset(seeds=[0])
    assert env.state_dicts()[0]["category_name"] == "trash_can"
    env = _env(annotation_file=annotation, sample_dir=folder, data_chunk=(1, 2))
    for seed in range(5):
        env.reset(seeds=[seed])
        assert env.state_dicts()[0]["img_id"] == 20


def test_lvis_solver_marks_every_centre_and_succeeds(lvis):
    annotation, folder = lvis
    env = _env(annotation_file=annotation, sample_dir=folder)
    for init in ({"file_name": "000000000010.jpg", "category_name": "bow_(weapon)",
                  "true_count": 3, "cat_id": 5, "img_id": 10},
                 {"file_name": "000000000020.jpg", "category_name": "sock", "true_count": 2,
                  "cat_id": 7}):           # img_id absent: found by file name
        env.reset(init_states=[init])
        h, w = env.frame_hw[0].tolist()
        plan = env.solve()[0]
        centres = env.family.centres(env.state, 0)
        assert plan[:-2] == [f"('mark', ({min(max(x / (w - 1), 0), 1):.4f}, "
                             f"{min(max(y / (h - 1), 0), 1):.4f}))" for x, y in centres]
        assert plan[-2:] == [f"('guess', {init['true_count']})", STOP]
        assert env.solve(strategy="guess_only")[0] == plan[-2:]
        for action in plan:
            _, reward, terminated, _, info = env.step([action])
        assert terminated[0] and reward[0] == 1.0
        assert len(env.state_dicts()[0]["dots"]) == len(centres)
    with pytest.raises(ValueError, match="strategy"):
        env.solve(strategy="count_all")


def test_data_paths_keywords_environment_and_bundle(lvis, tmp_path, monkeypatch):
    annotation, folder = lvis
    # A folder holding the JSON beside the images.
    assert not _env(sample_dir=folder).family.scene_mode
    # The environment variables.
    monkeypatch.setenv("VIS_GYM_LVIS_ANNOTATION_FILE", annotation)
    monkeypatch.setenv("VIS_GYM_LVIS_DIR", folder)
    assert _env().family.image_dir == folder
    monkeypatch.delenv("VIS_GYM_LVIS_ANNOTATION_FILE")
    monkeypatch.delenv("VIS_GYM_LVIS_DIR")
    # The bundle layout under the working directory, and a bundle root as sample_dir.
    bundle = tmp_path / "run" / "partial_datasets" / "counting"
    bundle.mkdir(parents=True)
    for name in os.listdir(folder):
        if name.endswith((".jpg", ".json")):
            os.link(os.path.join(folder, name), bundle / name)
    assert not _env(sample_dir=str(tmp_path / "run")).family.scene_mode
    monkeypatch.chdir(tmp_path / "run")
    env = _env()
    assert not env.family.scene_mode and env.family.image_dir.endswith("counting")
    monkeypatch.chdir(tmp_path)
    assert _env().family.scene_mode          # nothing found: the procedural scenes
    # Missing paths name the field.
    with pytest.raises(ValueError, match="annotation_file"):
        _env(annotation_file=str(tmp_path / "nope.json"))
    with pytest.raises(ValueError, match="sample_dir"):
        _env(sample_dir=str(tmp_path / "nope"))
    monkeypatch.setenv("VIS_GYM_LVIS_ANNOTATION_FILE", str(tmp_path / "gone.json"))
    with pytest.raises(ValueError, match="VIS_GYM_LVIS_ANNOTATION_FILE"):
        _env()


@pytest.mark.parametrize("text, why", [
    ("{", "offset"), ('{"images": 3, "annotations": [], "categories": []}', "images"),
    ('{"images": [{"id": 1, "height": 10, "width": 10}], "annotations": '
     '[{"id": 1, "image_id": 1, "category_id": 1, "bbox": [0, 0, 1], "segmentation": []}],'
     ' "categories": []}', "bbox"),
    ("", "")])
def test_a_corrupt_annotation_file_is_named(tmp_path, text, why):
    path = tmp_path / "lvis_v1_train.json"
    path.write_text(text)
    with pytest.raises(ValueError, match="annotation_file") as error:
        _env(annotation_file=str(path), sample_dir=str(tmp_path))
    assert "lvis_v1_train.json" in str(error.value) and why in str(error.value)


def test_hostile_lvis_init_states_change_nothing(lvis):
    annotation, folder = lvis
    env = _env(n=2, annotation_file=annotation, sample_dir=folder)
    env.reset(seeds=[0, 1])
    good = env.state_dicts()[0]
    for init, field in [
            ({**good, "img_id": 999}, "img_id"),
            ({**good, "file_name": "other.jpg"}, "file_name"),
            ({**good, "cat_id": 2, "category_name": "trash_can"}, "true_count"),
            ({**good, "category_name": "Sock"}, "category_name"),
            ({**good, "cat_id": 99}, "cat_id"),
            ({**good, "true_count": "3"}, "true_count"),
            ({**good, "dots": [[1, 2, 3]]}, "dots"),
            ({**good, "dots": [[10**6, 1]]}, "dots"),
            ({**good, "guess": 21}, "guess"),
            ({**good, "guess": 2.0}, "guess"),
            ({k: v for k, v in good.items() if k != "true_count"}, "init_states"),
            ("counting", "init_states")]:
        assert_hostile_init_refused(env, init, field)


# ----------------------------------------------------------------------------- the grammar
@pytest.mark.parametrize("action, ok", [
    ("('mark', (0.5, 0.3))", True), ("('mark', [0, 1])", True), ("('mark', ('0.5', '1'))", True),
    ("('mark', (True, False))", True), ("('mark', (1.00000001, 0.5))", True),
    ("('mark', (1.01, 0.5))", False), ("('mark', (-0.1, 0.5))", False),
    ("('mark', (float('nan'), 0.5))", False), ("('mark', (1e999, 0.5))", False),
    ("('mark', (0.5,))", False), ("('mark', (0.1, 0.2, 0.3))", False),
    ("('mark', 'middle')", False), ("('mark', ((0.5,), (0.5,)))", False),
    ("('undo', 'undo')", True), ("('undo', 'abc123')", True), ("('undo', 'toolong')", False),
    ("('undo', '')", False), ("('undo', 1)", False),
    ("('guess', 5)", True), ("('guess', 0)", True), ("('guess', True)", True),
    ("('guess', 20)", True), ("('guess', 21)", False), ("('guess', -1)", False),
    ("('guess', 5.0)", False), ("('guess', '5')", False), ("('guess', 10**20)", False)])
def test_grammar(action, ok):
    env = _env()
    env.reset(seeds=[3])
    before = env.state_dicts()
    _, reward, terminated, _, info = env.step([action])
    assert reward[0] == 0 and not terminated[0]
    if ok:
        assert info["feedback"][0] == SUCCESS
    else:
        assert info["feedback"][0] != SUCCESS and info["invalid"][0]
        assert env.state_dicts() == before


def test_mark_undo_guess_stop_dynamics():
    env = _env()
    env.reset(init_states=[{"scene_seed": 11, "category_name": scene_lib.CATEGORIES[0],
                            "true_count": 4}])
    h, w = env.frame_hw[0].tolist()
    env.step(["('mark', (0.5, 0.25))"])
    env.step(["('mark', (1.00000001, 0.0))"])
    x0 = int(np.floor(np.float32(0.5) * np.float32(w - 1)))
    y0 = int(np.floor(np.float32(0.25) * np.float32(h - 1)))
    assert env.state_dicts()[0]["dots"] == [[x0, y0], [w - 1, 0]]
    env.step(["('undo', 'undo')"])
    assert env.state_dicts()[0]["dots"] == [[x0, y0]]
    env.step(["('undo', 'undo')"])
    _, _, _, _, info = env.step(["('undo', 'undo')"])      # empty: a no-op, success feedback
    assert info["feedback"][0] == SUCCESS and "dots" not in env.state_dicts()[0]
    _, _, _, _, info = env.step(["('guess', 3)"])
    assert env.state_dicts()[0]["guess"] == 3 and not info["success"][0]
    _, reward, terminated, _, _ = env.step([STOP])
    assert terminated[0] and reward[0] == 0.0
    env.reset(init_states=[{"scene_seed": 11, "category_name": scene_lib.CATEGORIES[0],
                            "true_count": 4}])
    _, reward, terminated, _, info = env.step([STOP])       # no guess: 0
    assert terminated[0] and reward[0] == 0.0
    env.reset(init_states=[{"scene_seed": 11, "category_name": scene_lib.CATEGORIES[0],
                            "true_count": 4}])
    env.step(["('guess', 7)"])
    env.step(["('guess', 4)"])                              # overwrites
    _, _, _, _, info = env.step(["('mark', (0.1, 0.1))"])
    assert info["success"][0]
    _, reward, terminated, _, _ = env.step([STOP])
    assert terminated[0] and reward[0] == 1.0


def test_the_dot_limit_is_feedback():
    env = _env(max_dots=3)
    env.reset(seeds=[0])
    for _ in range(3):
        env.step(["('mark', (0.2, 0.2))"])
    before = env.state_dicts()
    _, _, _, _, info = env.step(["('mark', (0.3, 0.3))"])
    assert "no room for another dot" in info["feedback"][0] and "3" in info["feedback"][0]
    assert env.state_dicts() == before and not info["invalid"][0]


# ----------------------------------------------------------------------------- scenes
@pytest.mark.parametrize("difficulty, low, high", [("easy", 2, 20), ("hard", 5, 30)])
def test_scene_episodes_have_the_asked_count_and_the_solver_succeeds(difficulty, low, high):
    env = visgym.make(f"counting/{difficulty}", num_envs=16, autoreset="disabled")
    env.reset(seeds=range(100, 116))
    scenes = scenes_of(env.state)
    counts = []
    for i in range(16):
        got = env.state_dicts()[i]
        category = scene_lib.CATEGORIES.index(got["category_name"])
        n = int(scenes.n[i])
        assert (scenes.cat[i, :n] == category).sum() == got["true_count"]
        assert low <= got["true_count"] <= high
        assert f"a {got['category_name']}-counting task" in env.prompt(index=i)
        assert (n > got["true_count"])            # distractors
        counts.append(got["true_count"])
        for x, y in env.family.centres(env.state, i):
            k = scene_lib.owner_at(scenes, i, int(x), int(y))
            assert scenes.cat[i, k] == category
        assert tuple(env.frame_hw[i].tolist()) in scene_lib.CANVAS_SIZES
    assert len(set(counts)) > 4
    plans = env.solve()
    assert all(len(p) <= env.max_steps for p in plans)
    done = np.zeros(16, bool)
    rewards = np.zeros(16)
    for t in range(max(map(len, plans))):
        _, reward, terminated, _, _ = env.step([p[t] if t < len(p) else "x" for p in plans])
        rewards += np.where(done, 0, reward)
        done |= terminated
    assert done.all() and (rewards == 1).all()


def test_scene_init_states_rebuild_the_scene():
    env = _env(n=2)
    env.reset(seeds=[5, 6])
    env.step(["('mark', (0.3, 0.4))", "('guess', 9)"])
    dicts = json.loads(json.dumps(env.state_dicts()))
    other = _env(n=2)
    other.reset(init_states=dicts)
    assert other.state_dicts() == dicts
    np.testing.assert_array_equal(other.frames, env.frames)
    for name in scenes_of(env.state)._fields:
        np.testing.assert_array_equal(getattr(scenes_of(other.state), name),
                                      getattr(scenes_of(env.state), name))
    assert_frames_equal_a_full_redraw(other)


def test_hostile_scene_init_states_change_nothing():
    env = _env(n=2)
    env.reset(seeds=[0, 1])
    good = env.state_dicts()[0]
    for init, field in [({**good, "scene_seed": -1}, "scene_seed"),
                        ({**good, "scene_seed": 2**64}, "scene_seed"),
                        ({**good, "category_name": "unicorn"}, "category_name"),
                        ({**good, "true_count": 31}, "true_count"),
                        ({**good, "true_count": -2}, "true_count"),
                        ({**good, "dots": "x"}, "dots"),
                        ({**good, "guess": None, "dots": [[0, 10**4]]}, "dots"),
                        ({"scene_seed": 1}, "init_states")]:
        assert_hostile_init_refused(env, init, field)


def test_categories_restrict_the_scenes_and_bad_params_are_named():
    env = _env(n=8, categories=[scene_lib.CATEGORIES[2]])
    env.reset(seeds=range(8))
    assert {d["category_name"] for d in env.state_dicts()} == {scene_lib.CATEGORIES[2]}
    for kwargs, field in [({"categories": ["unicorn"]}, "categories"),
                          ({"categories": "star"}, "categories"),
                          ({"max_count": 31}, "max_count"), ({"min_count": 25}, "min_count"),
                          ({"radius": -1}, "radius"), ({"max_dots": 0}, "max_dots"),
                          ({"data_chunk": (1,)}, "data_chunk"),
                          ({"require_exhaustive": "yes"}, "require_exhaustive")]:
        with pytest.raises(ValueError, match=field):
            visgym.make("counting/easy", **kwargs)


def test_dots_are_red_opencv_disks_over_the_scene():
    cv2 = pytest.importorskip("cv2")
    env = _env()
    env.reset(seeds=[42])
    base = env.frame(0).copy()
    for action in ["('mark', (0.0, 0.0))", "('mark', (0.5, 0.5))", "('mark', (0.51, 0.5))",
                   "('undo', 'u')", "('mark', (1, 1))"]:
        env.step([action])
    want = base[:, :, ::-1].copy()
    for x, y in env.state_dicts()[0]["dots"]:
        cv2.circle(want, (x, y), 5, (0, 0, 255), -1)
    np.testing.assert_array_equal(env.frame(0), want[:, :, ::-1])
