"""referring_dot_pointing behaviour from spec/envs/referring_dot_pointing.md: the grammar
(section 5), dynamics (the rounded pixel the prompt promises), reward (instance mask, or the
category's masks), frames, prompt and solver, on both sources: the procedural scenes (the
offline default) and a RefCOCO+ dataset the test writes in the real REFER layout (a refs pickle,
a COCO instances JSON, train2014 JPEGs), with masks checked against pycocotools; data paths,
init states and bad input (a pickle with a foreign class is refused and never run)."""
import json
import os
import pickle

import numpy as np
import pytest
from PIL import Image

import visgym
from contract_checks import assert_hostile_init_refused
from visgym.envs.assets import scenes as scene_lib
from visgym.envs.pointing import scenes_of

FAMILY = "referring_dot_pointing"
STOP = "('stop', 'stop')"
SUCCESS = "Action executed successfully."


def _env(n=1, difficulty="easy", **kw):
    return visgym.make(f"{FAMILY}/{difficulty}", num_envs=n, autoreset="disabled",
                       max_steps=None, **kw)


# ----------------------------------------------------------------------------- a tiny RefCOCO+
def _write_refcoco(root, refs=None):
    """Two images, four annotations (an L-shaped one whose centroid is outside it), four refs
    (one whose annotation is missing); returns the sample_dir."""
    base = root / "refcoco+"
    images_dir = base / "images" / "mscoco" / "images" / "train2014"
    images_dir.mkdir(parents=True)
    rng = np.random.default_rng(1)
    images = []
    for image_id, (h, w) in {7: (40, 60), 9: (50, 30)}.items():
        name = f"COCO_train2014_{image_id:012d}.jpg"
        Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(images_dir / name)
        images.append({"id": image_id, "file_name": name, "height": h, "width": w})
    annotations = [
        {"id": 100, "image_id": 7, "category_id": 1, "bbox": [2, 2, 30, 30], "area": 1,
         # an L: its centre of mass lies outside it
         "segmentation": [[2, 2, 8, 2, 8, 26, 32, 26, 32, 32, 2, 32]]},
        {"id": 101, "image_id": 7, "category_id": 1, "bbox": [40, 5, 10, 10], "area": 1,
         "segmentation": [[40, 5, 50, 5, 50, 15, 40, 15]]},
        {"id": 102, "image_id": 7, "category_id": 3, "bbox": [40, 25, 10, 10], "area": 1,
         "segmentation": [[40, 25, 50, 25, 50, 35, 40, 35]]},
        {"id": 103, "image_id": 9, "category_id": 3, "bbox": [5, 5, 10, 20], "area": 1,
         "segmentation": [[5, 5, 15, 5, 15, 25, 5, 25], [20, 30, 25, 30, 25, 40, 20, 40]]},
    ]
    (base / "instances.json").write_text(json.dumps(
        {"images": images, "annotations": annotations,
         "categories": [{"id": 1, "name": "person"}, {"id": 3, "name": "car"}]}))

    def ref(ref_id, ann_id, image_id, cat, sents, split="train"):
        return {"ref_id": ref_id, "ann_id": ann_id, "image_id": image_id, "category_id": cat,
                "split": split, "sent_ids": list(range(len(sents))),
                "file_name": f"COCO_train2014_{image_id:012d}_{ann_id}.jpg",
                "sentences": [{"sent": s, "raw": s, "tokens": s.split(), "sent_id": k}
                              for k, s in enumerate(sents)]}

    refs = refs if refs is not None else [
        ref(5, 100, 7, 1, ["man bent like an l", "left guy"]),
        ref(3, 101, 7, 1, ["small man on right"], "val"),
        ref(8, 103, 9, 3, ["two part car"], "testB"),
        ref(4, 555, 9, 3, ["nothing there"]),      # its annotation is missing: dropped
    ]
    with open(base / "refs(unc).p", "wb") as f:
        pickle.dump(refs, f, protocol=2)
    return str(root)


def _mask(seg, h, w):
    mask_api = pytest.importorskip("pycocotools.mask")
    m = mask_api.decode(mask_api.frPyObjects(seg, h, w))
    return (m.sum(axis=2) if m.ndim == 3 else m) > 0


@pytest.fixture
def refcoco(tmp_path):
    return _write_refcoco(tmp_path)


def test_refcoco_refs_masks_prompts_and_rewards(refcoco):
    env = _env(sample_dir=refcoco)
    assert not env.family.scene_mode
    assert env.family.valid == (3, 5, 8)
    data = json.load(open(os.path.join(refcoco, "refcoco+", "instances.json")))
    anns = {a["id"]: a for a in data["annotations"]}
    for ref_id, ann_id, (h, w), sentence in [(5, 100, (40, 60), "left guy"),
                                              (3, 101, (40, 60), "small man on right"),
                                              (8, 103, (50, 30), "two part car")]:
        env.reset(init_states=[{"ref_id": ref_id, "sentence_idx": 1 if ref_id == 5 else 0}])
        assert env.frame_hw[0].tolist() == [h, w]
        assert env.prompt().startswith(f"Your goal is to point to '{sentence}' in the image.")
        assert f"x = round(x_norm*({w}-1)), y = round(y_norm*({h}-1))" in env.prompt()
        want = _mask(anns[ann_id]["segmentation"], h, w)
        np.testing.assert_array_equal(env.family.target_mask(env.state, 0), want)
        # A mark on every 7th pixel: hit is the mask at the rounded pixel.
        for y in range(0, h, 7):
            for x in range(0, w, 5):
                _, _, _, _, info = env.step([f"('mark', ({x / (w - 1)!r}, {y / (h - 1)!r}))"])
                assert env.state_dicts()[0]["dot"] == [x, y]
                assert info["success"][0] == want[y, x]
        # The solver ends inside the mask (the L's centre of mass is not) and scores.
        env.reset(init_states=[{"ref_id": ref_id, "sentence_idx": 0}])
        for action in env.solve()[0]:
            _, reward, terminated, _, _ = env.step([action])
        assert terminated[0] and reward[0] == 1.0
    # A sentence index out of range falls back to sentence 0.
    env.reset(init_states=[{"ref_id": 3, "sentence_idx": 7}])
    assert env.state_dicts()[0]["sentence_idx"] == 0
    # Plain resets pick from the valid refs as the reference's seeded shuffle does.
    for seed in range(6):
        env.reset(seeds=[seed])
        want = (3, 5, 8)[int(np.random.default_rng(seed).permutation(3)[0])]
        assert env.state_dicts()[0] == {"ref_id": want, "sentence_idx": 0}


def test_any_same_category_accepts_the_other_person(refcoco):
    env = _env(sample_dir=refcoco, accept_any_same_category=True)
    env.reset(init_states=[{"ref_id": 5, "sentence_idx": 0}])
    # (45, 10) is on annotation 101, the other person of image 7, not on the referred L.
    _, _, _, _, info = env.step([f"('mark', ({45 / 59!r}, {10 / 39!r}))"])
    assert info["success"][0]
    _, _, _, _, info = env.step([f"('mark', ({45 / 59!r}, {30 / 39!r}))"])   # the car
    assert not info["success"][0]
    strict = _env(sample_dir=refcoco)
    strict.reset(init_states=[{"ref_id": 5, "sentence_idx": 0}])
    _, _, _, _, info = strict.step([f"('mark', ({45 / 59!r}, {10 / 39!r}))"])
    assert not info["success"][0]


def test_a_pickle_with_a_foreign_class_is_refused_and_never_run(tmp_path):
    marker = tmp_path / "ran"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    root = _write_refcoco(tmp_path / "data", refs=[Evil()])
    with pytest.raises(ValueError, match="sample_dir") as error:
        _env(sample_dir=root)
    assert "refs(unc).p" in str(error.value)
    assert not marker.exists()
    # The same bytes through the stock unpickler would have run the command (the test is real).
    with open(os.path.join(root, "refcoco+", "refs(unc).p"), "rb") as f:
        pickle.load(f)
    assert marker.exists()


def test_data_paths(refcoco, tmp_path, monkeypatch):
    monkeypatch.setenv("VIS_GYM_REFCOCO_DIR", refcoco)
    assert not _env().family.scene_mode
    monkeypatch.delenv("VIS_GYM_REFCOCO_DIR")
    run = tmp_path / "run"
    (run / "partial_datasets").mkdir(parents=True)
    os.symlink(os.path.join(refcoco, "refcoco+"), run / "partial_datasets" / "refcoco+")
    assert not _env(sample_dir=str(run)).family.scene_mode          # a bundle root
    monkeypatch.chdir(run)
    assert not _env().family.scene_mode                             # the bundle under cwd
    monkeypatch.chdir(tmp_path)
    assert _env().family.scene_mode
    with pytest.raises(ValueError, match="sample_dir"):
        _env(sample_dir=str(tmp_path / "missing"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="sample_dir"):
        _env(sample_dir=str(tmp_path / "empty"))                     # no refcoco+/ in it
    with pytest.raises(ValueError, match="splitBy"):
        _env(splitBy="../x")


def test_hostile_refcoco_init_states_change_nothing(refcoco):
    env = _env(n=2, sample_dir=refcoco)
    env.reset(seeds=[0, 1])
    good = env.state_dicts()[0]
    for init, field in [({"ref_id": 4, "sentence_idx": 0}, "ref_id"),
                        ({"ref_id": 999}, "ref_id"), ({"ref_id": "5"}, "ref_id"),
                        ({"ref_id": 5, "sentence_idx": -1}, "sentence_idx"),
                        ({**good, "dot": [1]}, "dot"), ({**good, "dot": [10**5, 0]}, "dot"),
                        ({"sentence_idx": 0}, "init_states"), ([5], "init_states")]:
        assert_hostile_init_refused(env, init, field)


# ----------------------------------------------------------------------------- the grammar
@pytest.mark.parametrize("action, ok", [
    ("('mark', (0.5, 0.5))", True), ("('mark', [0, 1])", True), ("('mark', ('0.5', '1'))", True),
    ("('mark', (1.00000001, 0.5))", True), ("('mark', (1.001, 0.5))", False),
    ("('mark', (float('inf'), 0.5))", False), ("('mark', (float('nan'), 0.5))", False),
    ("('mark', 0.5)", False), ("('mark', (0.5, 0.5, 0.5))", False), ("('mark', None)", False),
    ("('stop', 'x')", True), ("('undo', 'undo')", False), ("('guess', 3)", False)])
def test_grammar(action, ok):
    env = _env()
    env.reset(seeds=[3])
    before = env.state_dicts()
    _, reward, terminated, _, info = env.step([action])
    if ok:
        assert info["feedback"][0] == SUCCESS
    else:
        assert info["feedback"][0] != SUCCESS and info["invalid"][0]
        assert env.state_dicts() == before and not terminated[0] and reward[0] == 0


def test_the_pixel_is_rounded_as_the_prompt_says():
    env = _env()
    env.reset(seeds=[0])
    h, w = env.frame_hw[0].tolist()
    for x in (0.0, 0.1234, 0.5, 0.99, 1.0):
        env.step([f"('mark', ({x}, {x}))"])
        want = [int(np.rint(np.float32(x) * np.float32(w - 1))),
                int(np.rint(np.float32(x) * np.float32(h - 1)))]
        assert env.state_dicts()[0]["dot"] == want


# ----------------------------------------------------------------------------- scenes
def test_scene_rewards_follow_the_visible_target():
    env = _env(n=12)
    env.reset(seeds=range(300, 312))
    scenes = scenes_of(env.state)
    for i in range(12):
        h, w = env.frame_hw[i].tolist()
        target = int(scenes.target[i])
        mask = env.family.target_mask(env.state, i)
        assert mask.any()
        ys, xs = np.nonzero(mask)
        assert all(scene_lib.owner_at(scenes, i, int(x), int(y)) == target
                   for x, y in zip(xs[::97], ys[::97]))
        assert env.prompt(index=i).startswith(
            f"Your goal is to point to '{scene_lib.referring_expression(scenes, i)}'")
        assert f"round(x_norm*({w}-1))" in env.prompt(index=i)
    plans = env.solve()
    done = np.zeros(12, bool)
    total = np.zeros(12)
    for t in range(max(map(len, plans))):
        _, reward, terminated, _, _ = env.step([p[t] if t < len(p) else "x" for p in plans])
        total += np.where(done, 0, reward)
        done |= terminated
    assert done.all() and (total == 1).all()


def test_scene_same_category_objects_count_only_when_accepted():
    strict, loose = _env(), _env(accept_any_same_category=True)
    checked = 0
    for seed in range(40):
        strict.reset(seeds=[seed])
        loose.reset(seeds=[seed])
        scenes = scenes_of(strict.state)
        t = int(scenes.target[0])
        others = [k for k in range(int(scenes.n[0]))
                  if k != t and scenes.cat[0, k] == scenes.cat[0, t]]
        for k in others:
            x, y = scene_lib.visible_point(scenes, 0, k)
            if x < 0:
                continue
            h, w = strict.frame_hw[0].tolist()
            action = f"('mark', ({x / (w - 1)!r}, {y / (h - 1)!r}))"
            assert not strict.step([action])[4]["success"][0]
            assert loose.step([action])[4]["success"][0]
            checked += 1
            break
    assert checked >= 10


def test_scene_init_states_round_trip_with_a_dot():
    env = _env(n=2)
    env.reset(seeds=[8, 9])
    env.step(["('mark', (0.25, 0.5))", "x"])
    dicts = json.loads(json.dumps(env.state_dicts()))
    assert "dot" in dicts[0] and "dot" not in dicts[1]
    other = _env(n=2)
    other.reset(init_states=dicts)
    assert other.state_dicts() == dicts
    np.testing.assert_array_equal(other.frames, env.frames)
    assert other.state.hit.tolist() == env.state.hit.tolist()
    for init, field in [({"scene_seed": "1"}, "scene_seed"), ({"scene_seed": -5}, "scene_seed"),
                        ({"scene_seed": 1, "dot": [0, 10**4]}, "dot"), ({}, "init_states")]:
        assert_hostile_init_refused(other, init, field)
