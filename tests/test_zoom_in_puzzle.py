"""zoom_in_puzzle behaviour from spec/envs/zoom_in_puzzle.md: grammar and feedback (section 5),
dynamics (6), reward and termination (7), frames (8), generation (3), solvers (10), the image
source (4) and init states."""
import numpy as np
import pytest
from PIL import Image

import visgym
from visgym.core.grammar import FORMAT_MESSAGE
from visgym.core.rollout import run_plans
from visgym.envs.zoom_in_puzzle import (LABEL_BOX_H, TILE_PX, ZOOM_SETUPS, crop_boxes,
                                        label_box_w, zoom_levels)

STOP = "('stop', 'stop')"
OK = "Action executed successfully."


def _env(difficulty="easy", n=1, **kw):
    return visgym.make(f"zoom_in_puzzle/{difficulty}", num_envs=n, autoreset="disabled",
                       max_steps=None, **kw)


def _write_images(root, names, size=(96, 80)):
    """Photos with detail at every scale (random blocks), one per name, under ``root``."""
    rng = np.random.default_rng(len(names))
    for name in names:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        w, h = size
        pixels = rng.integers(0, 256, (h // 8 + 1, w // 8 + 1, 3), dtype=np.uint8)
        big = np.kron(pixels, np.ones((8, 8, 1), np.uint8))[:h, :w]
        noise = rng.integers(0, 40, (h, w, 3), dtype=np.uint8)
        fmt = "PNG" if name.endswith(".png") else "JPEG"
        Image.fromarray(big // 2 + noise).save(path, fmt)


def _started(order, env=None, **kw):
    """An easy env whose episode 0 shows ``order`` (a loaded copy of seed 0's episode)."""
    env = env or _env(**kw)
    env.reset(seeds=[0])
    state = env.state_dicts()[0]
    state["current_view_order"] = list(order)
    env.reset(init_states=[state])
    return env


# --------------------------------------------------------------------------- grammar (spec 5)
VALID = [
    "('swap', (1, 3))", "('swap', [1, 3])", "('swap', (2, 2))", "('swap', (True, 2))",
    "('swap', (4, 1))", "('reorder', [1, 3, 2, 4])", "('reorder', [4, 3, 2, 1])",
    "('reorder', [True, 2, 3, 4])", "('stop', 'stop')", "('stop', 'ok')", "('stop', 'STOP')",
    "('stop', '1')", '("stop", "stop")', "  ('stop','stop')\n",
]
INVALID_PAYLOAD = [
    ("('swap', (0, 1))", "(0, 1)", "swap"), ("('swap', (5, 1))", "(5, 1)", "swap"),
    ("('swap', (-1, 2))", "(-1, 2)", "swap"), ("('swap', (1,))", "(1,)", "swap"),
    ("('swap', (1, 2, 3))", "(1, 2, 3)", "swap"), ("('swap', 1)", "1", "swap"),
    ("('swap', None)", "None", "swap"), ("('swap', (1.5, 2))", "(1.5, 2)", "swap"),
    ("('swap', (1.0, 2.0))", "(1.0, 2.0)", "swap"), ("('swap', ('1', '2'))", "('1', '2')", "swap"),
    ("('reorder', (1, 2, 3, 4))", "(1, 2, 3, 4)", "reorder"),
    ("('reorder', 'abc')", "abc", "reorder"),
    ("('reorder', [1, 2, 3])", "[1, 2, 3]", "reorder"),
    ("('reorder', [0, 1, 2, 3])", "[0, 1, 2, 3]", "reorder"),
    ("('reorder', [1, 1, 2, 3])", "[1, 1, 2, 3]", "reorder"),
    ("('reorder', [1.0, 2.0, 3.0, 4.0])", "[1.0, 2.0, 3.0, 4.0]", "reorder"),
    ("('reorder', [1, 2, 3, 4, 5])", "[1, 2, 3, 4, 5]", "reorder"),
    ("('stop', 'stop!')", "stop!", "stop"), ("('stop', '')", "", "stop"),
    ("('stop', 5)", "5", "stop"), ("('stop', b'stop')", "b'stop'", "stop"),
    ("('stop', 'st p')", "st p", "stop"),
]


@pytest.mark.parametrize("action", VALID)
def test_valid_actions_execute(action):
    env = _started([1, 2, 3, 0])
    _, _, _, _, info = env.step([action])
    assert info["feedback"][0] == OK


@pytest.mark.parametrize("action,payload,name", INVALID_PAYLOAD)
def test_payload_outside_the_space_is_refused_with_the_reference_text(action, payload, name):
    env = _started([1, 2, 3, 0])
    before = env.state_dicts()
    frames = env.frames.copy()
    _, reward, terminated, _, info = env.step([action])
    assert info["feedback"][0] == (f"The action {payload} is not in the valid action space of "
                                   f"{name} so nothing is executed.")
    assert env.state_dicts() == before and reward[0] == 0 and not terminated[0]
    np.testing.assert_array_equal(env.frames, frames)


@pytest.mark.parametrize("action,feedback", [
    ("'stop'", FORMAT_MESSAGE), ("('stop',)", FORMAT_MESSAGE),
    ("('stop', 'stop', 'stop')", FORMAT_MESSAGE), ("['stop', 'stop']", FORMAT_MESSAGE),
    ("('jump', 1)", "The action name 'jump' is not recognized in the available action space."),
    ("('Stop', 'stop')", "The action name 'Stop' is not recognized in the available action space."),
    ("(1, 2)", "The action name '1' is not recognized in the available action space."),
])
def test_malformed_actions_get_the_reference_feedback(action, feedback):
    env = _started([1, 2, 3, 0])
    before = env.state_dicts()
    _, reward, terminated, _, info = env.step([action])
    assert info["feedback"][0] == feedback
    assert env.state_dicts() == before and reward[0] == 0 and not terminated[0]


@pytest.mark.parametrize("action", ["hello world", "", "('stop', stop)", "('swap', (1, 2)"])
def test_unparsable_text_is_a_parse_error(action):
    env = _started([1, 2, 3, 0])
    _, _, terminated, _, info = env.step([action])
    assert info["feedback"][0].startswith(f"Cannot parse action string {action!r}:")
    assert info["feedback"][0].endswith("so the action is invalid.") and not terminated[0]


def test_hard_takes_five_slots():
    env = _env("hard")
    env.reset(seeds=[0])
    assert env.step(["('swap', (5, 1))"])[4]["feedback"][0] == OK
    assert env.step(["('reorder', [5, 4, 3, 2, 1])"])[4]["feedback"][0] == OK
    assert "not in the valid action space" in env.step(["('swap', (6, 1))"])[4]["feedback"][0]
    assert "not in the valid action space" in env.step(
        ["('reorder', [1, 2, 3, 4])"])[4]["feedback"][0]


# --------------------------------------------------------------------------- dynamics (spec 6)
def test_swap_exchanges_two_slots():
    env = _started([1, 2, 3, 0])
    env.step(["('swap', (1, 3))"])
    assert env.state_dicts()[0]["current_view_order"] == [3, 2, 1, 0]
    env.step(["('swap', (2, 2))"])
    assert env.state_dicts()[0]["current_view_order"] == [3, 2, 1, 0]


def test_reorder_gathers_from_the_current_slots():
    # new[k] = old[L[k] - 1]: L[k] names the slot whose tile moves to slot k.
    env = _started([1, 2, 3, 0])
    env.step(["('reorder', [4, 1, 2, 3])"])
    assert env.state_dicts()[0]["current_view_order"] == [0, 1, 2, 3]
    env.step(["('reorder', [2, 3, 4, 1])"])
    assert env.state_dicts()[0]["current_view_order"] == [1, 2, 3, 0]


# --------------------------------------------------------------------------- reward (spec 7)
def test_stop_rewards_only_the_ascending_order():
    env = _started([1, 0, 2, 3])
    _, reward, terminated, truncated, _ = env.step([STOP])
    assert reward[0] == 0 and terminated[0] and not truncated[0]
    env.step(["('swap', (1, 2))"])
    assert env.success()[0]
    _, reward, terminated, _, _ = env.step(["('stop', 'done')"])
    assert reward[0] == 1 and terminated[0]


def test_only_a_valid_stop_terminates_and_steps_after_it_still_apply():
    env = _started([0, 1, 2, 3])
    for action in ["('swap', (1, 2))", "('swap', (1, 2))", "('stop', 'stop!')", "junk"]:
        _, reward, terminated, _, _ = env.step([action])
        assert reward[0] == 0 and not terminated[0]
    env.step([STOP])
    _, _, terminated, _, info = env.step(["('swap', (3, 4))"])
    assert info["feedback"][0] == OK and not terminated[0]
    assert env.state_dicts()[0]["current_view_order"] == [0, 1, 3, 2]


def test_default_step_budget_is_the_harness_budget():
    assert visgym.core.spec("zoom_in_puzzle/easy").default_max_steps == 20
    assert visgym.core.spec("zoom_in_puzzle/hard").default_max_steps == 30


# --------------------------------------------------------------------------- frames (spec 8)
@pytest.mark.parametrize("difficulty,width", [("easy", 1120), ("hard", 1344)])
def test_frame_is_224_by_224_times_n_plus_one(difficulty, width):
    env = visgym.make(f"zoom_in_puzzle/{difficulty}", num_envs=3)
    frames, _ = env.reset(seeds=[0, 1, 2])
    assert frames.shape == (3, 224, width, 3) and frames.dtype == np.uint8
    assert env.frame_hw.tolist() == [[224, width]] * 3


def _pillow_tile(image, box):
    return np.asarray(Image.fromarray(image).crop(tuple(box)).resize(
        (TILE_PX, TILE_PX), Image.Resampling.LANCZOS))


def _label_mask(n):
    """Pixels of the frame covered by the slot labels' black boxes."""
    mask = np.zeros((TILE_PX, TILE_PX * (n + 1)), bool)
    for k in range(1, n + 1):
        mask[TILE_PX - LABEL_BOX_H:, TILE_PX * (k + 1) - label_box_w(k):TILE_PX * (k + 1)] = True
    return mask


@pytest.mark.parametrize("seed", [0, 7, 21])
def test_tiles_are_pillow_lanczos_crops_in_display_order(seed):
    env = _env("hard")
    env.reset(seeds=[seed])
    state = env.state_dicts()[0]
    image = env.family.source.load(state["image_name"])
    frame = env.frames[0].copy()
    h, w = image.shape[:2]
    np.testing.assert_array_equal(frame[:, :TILE_PX], _pillow_tile(image, (0, 0, w, h)))
    mask = _label_mask(5)
    for slot, crop in enumerate(state["current_view_order"]):
        x0 = TILE_PX * (slot + 1)
        want = _pillow_tile(image, state["crop_boxes"][crop])
        keep = ~mask[:, x0:x0 + TILE_PX]
        np.testing.assert_array_equal(frame[:, x0:x0 + TILE_PX][keep], want[keep])


def test_labels_are_white_slot_numbers_on_black_boxes():
    env = _env()
    env.reset(seeds=[3])
    frame = env.frames[0]
    for k in range(1, 5):
        box = frame[TILE_PX - LABEL_BOX_H:, TILE_PX * (k + 1) - label_box_w(k):TILE_PX * (k + 1)]
        grey = box.max(axis=2)
        assert (box.min(axis=2) == grey).all(), "labels are grey levels only"
        assert (grey[:8] == 0).all() and (grey[:, :8] == 0).all(), "10 px of black padding"
        assert 60 < (grey > 128).sum() < 400, "a digit of white ink"
    # Labels belong to slots, not tiles: swapping two tiles keeps every label in place.
    before = frame.copy()
    env.step(["('swap', (1, 4))"])
    mask = _label_mask(4)
    np.testing.assert_array_equal(env.frames[0][mask], before[mask])
    np.testing.assert_array_equal(env.frames[0][:178, 224:448], before[:178, 896:1120])


def test_goal_frames_show_the_tiles_in_ascending_zoom():
    env = _env("hard")
    env.reset(seeds=[5])
    goal = env.goal_frames()
    env.reset(init_states=[{**env.state_dicts()[0], "current_view_order": [0, 1, 2, 3, 4]}])
    np.testing.assert_array_equal(goal, env.frames)


# --------------------------------------------------------------------------- generation (spec 3)
def test_zoom_levels_are_sorted_clamped_normals_around_the_harness_means():
    zooms = np.array([zoom_levels(np.random.RandomState(s), 5, 0.75, 0.75, 0.2)
                      for s in range(400)])
    assert (np.diff(zooms, axis=1) >= 0).all() and (zooms >= 0.75).all()
    np.testing.assert_allclose(zooms.mean(axis=0), [1.5, 2.25, 3.0, 3.75, 4.5], atol=0.06)


def test_zoom_levels_are_clamped_at_the_minimum():
    zooms = np.array([zoom_levels(np.random.RandomState(s), 4, 2.0, 0.0, 1.0)
                      for s in range(100)])
    assert zooms.min() == 2.0 and (np.diff(zooms, axis=1) >= 0).all()


@pytest.mark.parametrize("width,height", [(128, 128), (336, 504), (451, 300), (33, 17)])
def test_nested_boxes_lie_inside_the_previous_box_without_overshoot(width, height):
    for seed in range(300):
        rng = np.random.RandomState(seed)
        zooms = zoom_levels(rng, 5, 0.75, 0.75, 0.2)
        prev = (0, 0, width, height)
        for z, (left, top, right, bottom) in zip(zooms, crop_boxes(rng, zooms, width, height,
                                                                   True)):
            assert prev[0] <= left < right <= prev[2] and prev[1] <= top < bottom <= prev[3]
            assert right - left == max(1, min(int(width / z), prev[2] - prev[0]))
            assert bottom - top == max(1, min(int(height / z), prev[3] - prev[1]))
            prev = (left, top, right, bottom)


def test_a_zoom_below_one_gives_the_whole_image():
    rng = np.random.RandomState(0)
    assert crop_boxes(rng, [0.5, 0.9], 100, 60, True) == [[0, 0, 100, 60], [0, 0, 100, 60]]
    # Not nested, the reference's centre range was empty and reset crashed.
    assert crop_boxes(rng, [0.5], 100, 60, False) == [[0, 0, 100, 60]]
    env = _env(zoom_setup="registered", min_zoom_level=0.5, zoom_gap=0.1, zoom_std=0.0)
    env.reset(seeds=range(1))
    assert env.state_dicts()[0]["zoom_levels"][0] == pytest.approx(0.6)


def test_registered_setup_is_one_keyword_away():
    harness = _env().family
    registered = _env(zoom_setup="registered").family
    assert (harness.min_zoom, harness.zoom_gap, harness.zoom_std, harness.nested) == (
        0.75, 0.75, 0.2, True)
    assert (registered.min_zoom, registered.zoom_gap, registered.zoom_std, registered.nested) == (
        2.0, 1.0, 0.3, False)
    assert ZOOM_SETUPS["registered"]["nested"] is False
    env = _env(zoom_setup="registered", n=64)
    env.reset(seeds=range(64))
    zooms = np.array([d["zoom_levels"] for d in env.state_dicts()])
    np.testing.assert_allclose(zooms.mean(axis=0), [3, 4, 5, 6], atol=0.15)
    for d in env.state_dicts():
        h, w = env.family.source.load(d["image_name"]).shape[:2]
        for (left, top, right, bottom), z in zip(d["crop_boxes"], d["zoom_levels"]):
            assert 0 <= left < right <= w and 0 <= top < bottom <= h
            assert (right - left, bottom - top) == (int(w / z), int(h / z))


def test_order_is_a_uniform_shuffle():
    env = _env(n=600)
    env.reset(seeds=range(600))
    orders = [tuple(d["current_view_order"]) for d in env.state_dicts()]
    assert len(set(orders)) == 24
    first = np.bincount([o[0] for o in orders], minlength=4)
    assert first.min() > 110


def test_episode_is_a_function_of_its_seed_alone():
    a = _env(n=3)
    a.reset(seeds=[5, 6, 7])
    b = _env(n=1)
    b.reset(seeds=[6])
    assert a.state_dicts()[1] == b.state_dicts()[0]
    np.testing.assert_array_equal(a.frames[1], b.frames[0])
    big = _env(n=1)
    big.reset(seeds=[2**40 + 6])
    assert big.state_dicts()[0] != b.state_dicts()[0]


# --------------------------------------------------------------------------- solvers (spec 10)
@pytest.mark.parametrize("strategy", [None, "reorder", "swap"])
@pytest.mark.parametrize("difficulty", ["easy", "hard"])
def test_solvers_succeed_from_many_seeds(strategy, difficulty):
    env = _env(difficulty, n=64)
    env.reset(seeds=range(1000, 1064))
    plans = env.solve(strategy=strategy)
    n = env.family.n_views
    for plan in plans:
        assert plan[-1] == "('stop','stop')"
        if strategy == "swap":
            assert len(plan) <= n and all(a.startswith("('swap', (") for a in plan[:-1])
        else:
            assert len(plan) == 2 and plan[0].startswith("('reorder', [")
    result = run_plans(env, plans)
    assert result.terminated.all() and (result.reward == 1).all()


def test_solver_plans_for_a_known_order():
    env = _started([1, 3, 2, 0])
    assert env.solve()[0] == ["('reorder', [4, 1, 3, 2])", "('stop','stop')"]
    assert env.solve("swap")[0] == ["('swap', (1, 4))", "('swap', (2, 4))", "('stop','stop')"]
    assert env.solve("swap", num_steps=9)[0] == env.solve("swap")[0]   # num_steps is ignored
    solved = _started([0, 1, 2, 3])
    assert solved.solve("swap")[0] == ["('stop','stop')"]
    assert solved.solve()[0] == ["('reorder', [1, 2, 3, 4])", "('stop','stop')"]
    with pytest.raises(ValueError, match="strategy"):
        env.solve("bfs")


# --------------------------------------------------------------------------- images (spec 4)
def test_user_folder_is_scanned_recursively_with_case_sensitive_extensions(tmp_path):
    _write_images(tmp_path, ["b.png", "a.jpg", "sub/c.jpeg", "sub/deeper/d.png", "e.JPG",
                             "f.PNG", "g.jpeg.txt"])
    (tmp_path / "notes.txt").write_text("not an image")
    env = _env(n=40, sample_dir=str(tmp_path))
    assert env.family.source.names == ("a.jpg", "b.png", "sub/c.jpeg", "sub/deeper/d.png")
    env.reset(seeds=range(40))
    shown = {d["image_name"] for d in env.state_dicts()}
    assert shown == set(env.family.source.names)
    state = {**env.state_dicts()[0], "image_name": "sub/deeper/d.png"}
    state["crop_boxes"] = [[0, 0, 40, 30]] * 4
    env.reset(init_states=[state] + env.state_dicts()[1:])
    assert env.state_dicts()[0]["image_name"] == "sub/deeper/d.png"   # not a stale name
    image = np.asarray(Image.open(tmp_path / "sub/deeper/d.png").convert("RGB"))
    np.testing.assert_array_equal(env.frames[0, :, :TILE_PX], _pillow_tile(image, (0, 0, 96, 80)))


def test_image_dir_environment_variable(tmp_path, monkeypatch):
    _write_images(tmp_path, ["only.png"])
    monkeypatch.setenv("VIS_GYM_IMAGE_DIR", str(tmp_path))
    env = _env(n=2)
    env.reset(seeds=[0, 1])
    assert [d["image_name"] for d in env.state_dicts()] == ["only.png", "only.png"]


def test_bundle_layout_is_found_under_a_named_root(tmp_path):
    _write_images(tmp_path / "partial_datasets" / "zoomin", ["x.png"])
    _write_images(tmp_path, ["outside.png"])
    env = _env(sample_dir=str(tmp_path))
    assert env.family.source.names == ("x.png",)


def test_missing_or_empty_folder_names_the_path(tmp_path):
    missing = tmp_path / "nope"
    with pytest.raises(ValueError, match=f"sample_dir: {missing}"):
        _env(sample_dir=str(missing))
    empty = tmp_path / "empty"
    (empty / "sub").mkdir(parents=True)
    (empty / "sub" / "x.JPG").write_bytes(b"upper-case extension: not scanned")
    with pytest.raises(ValueError, match=str(empty)):
        _env(sample_dir=str(empty))


def test_builtin_photos_without_a_folder(monkeypatch):
    monkeypatch.delenv("VIS_GYM_IMAGE_DIR", raising=False)
    env = _env(n=9)
    assert env.family.source.kind == "builtin"
    env.reset(seeds=range(9))
    assert len({d["image_name"] for d in env.state_dicts()}) > 3


def test_overshooting_loaded_boxes_are_padded_with_black(tmp_path):
    _write_images(tmp_path, ["p.png"], size=(64, 64))
    env = _env(sample_dir=str(tmp_path))
    env.reset(seeds=[0])
    state = env.state_dicts()[0]
    state["crop_boxes"] = [[32, 32, 65, 65]] * 4
    state["current_view_order"] = [0, 1, 2, 3]
    env.reset(init_states=[state])
    image = Image.open(tmp_path / "p.png").convert("RGB")
    want = np.asarray(image.crop((32, 32, 65, 65)).resize((224, 224), Image.Resampling.LANCZOS))
    keep = ~_label_mask(4)[:, 224:448]
    np.testing.assert_array_equal(env.frames[0, :, 224:448][keep], want[keep])


# --------------------------------------------------------------------------- init states
def _good():
    env = _env()
    env.reset(seeds=[0])
    return env, env.state_dicts()[0]


@pytest.mark.parametrize("change,field", [
    (lambda s: s.pop("image_name"), "image_name"),
    (lambda s: s.pop("current_view_order"), "current_view_order"),
    (lambda s: s.update(image_name="no_such.png"), "image_name"),
    (lambda s: s.update(image_name=5), "image_name"),
    (lambda s: s.update(zoom_levels=[1.0, 2.0, 3.0]), "zoom_levels"),
    (lambda s: s.update(zoom_levels=[3.0, 2.0, 4.0, 5.0]), "zoom_levels"),
    (lambda s: s.update(zoom_levels=[1.0, 2.0, 3.0, float("nan")]), "zoom_levels"),
    (lambda s: s.update(zoom_levels="1 2 3 4"), "zoom_levels"),
    (lambda s: s.update(crop_boxes=[[0, 0, 10, 10]] * 3), "crop_boxes"),
    (lambda s: s.update(crop_boxes=[[0, 0, 10]] * 4), r"crop_boxes\[0\]"),
    (lambda s: s.update(crop_boxes=[[10, 0, 5, 10]] * 4), r"crop_boxes\[0\]"),
    (lambda s: s.update(crop_boxes=[[0.5, 0, 10, 10]] * 4), r"crop_boxes\[0\]"),
    (lambda s: s.update(crop_boxes=[[5000, 0, 6000, 10]] * 4), r"crop_boxes\[0\]"),
    (lambda s: s.update(current_view_order=[0, 1, 2, 2]), "current_view_order"),
    (lambda s: s.update(current_view_order=[1, 2, 3, 4]), "current_view_order"),
    (lambda s: s.update(current_view_order=[0, 1, 2]), "current_view_order"),
    (lambda s: s.update(current_view_order=[0.0, 1, 2, 3]), "current_view_order"),
])
def test_hostile_init_states_name_the_field(change, field):
    env, state = _good()
    frames = env.frames.copy()
    change(state)
    with pytest.raises(ValueError, match=rf"init_states\[0\]\.{field}"):
        env.reset(init_states=[state])
    assert env.state_dicts()[0] == _good()[1]
    np.testing.assert_array_equal(env.frames, frames)


def test_init_state_must_be_a_dict():
    env, _ = _good()
    with pytest.raises(ValueError, match=r"init_states\[0\]"):
        env.reset(init_states=[["not", "a", "dict"]])


def test_init_state_round_trip_uses_the_reference_field_names():
    env, state = _good()
    assert list(state) == ["image_name", "zoom_levels", "crop_boxes", "current_view_order"]
    other = _env()
    other.reset(init_states=[state])
    assert other.state_dicts()[0] == state
    np.testing.assert_array_equal(other.frames, env.frames)


@pytest.mark.parametrize("kwargs,field", [
    (dict(num_zoom_views=0), "num_zoom_views"), (dict(num_zoom_views=17), "num_zoom_views"),
    (dict(num_zoom_views=4.0), "num_zoom_views"), (dict(min_zoom_level=0), "min_zoom_level"),
    (dict(zoom_std=-1), "zoom_std"), (dict(zoom_gap=float("inf")), "zoom_gap"),
    (dict(nested=1), "nested"), (dict(zoom_setup="eval"), "zoom_setup"),
    (dict(sample_dir=5), "sample_dir"),
])
def test_bad_params_name_the_keyword(kwargs, field):
    with pytest.raises(ValueError, match=field):
        visgym.make("zoom_in_puzzle/easy", **kwargs)


def test_custom_number_of_views():
    env = _env(num_zoom_views=2, n=8)
    frames, _ = env.reset(seeds=range(8))
    assert frames.shape == (8, 224, 672, 3)
    assert "2 zoomed-in views" in env.prompt()
    result = run_plans(env, env.solve("swap"))
    assert (result.reward == 1).all()


def test_params_are_plain_python_values():
    params = visgym.make("zoom_in_puzzle/easy", num_zoom_views=np.int64(3),
                         min_zoom_level=np.float32(0.75), zoom_gap=np.float64(0.5),
                         nested=np.bool_(False)).params
    assert (type(params.num_zoom_views), type(params.min_zoom_level), type(params.zoom_gap),
            type(params.nested)) == (int, float, float, bool)
    hash(params)


def test_two_digit_slot_labels_get_a_wider_box():
    env = _env(num_zoom_views=10)
    frames, _ = env.reset(seeds=[4])
    assert frames.shape == (1, 224, 224 * 11, 3) and label_box_w(10) == 56
    box = frames[0, TILE_PX - LABEL_BOX_H:, TILE_PX * 11 - 56:]
    grey = box.max(axis=2)
    assert (grey[:8] == 0).all() and (grey[:, :8] == 0).all() and (grey > 128).sum() > 150
    result = run_plans(env, env.solve())
    assert (result.reward == 1).all()


def test_threaded_redraw_of_a_batch_equals_a_single_threaded_one():
    from visgym.core.threads import THREAD_BYTES

    n = 24   # enough slot bytes to be split between threads; two episodes are not
    assert n * 150_000 >= THREAD_BYTES > 2 * 150_000
    big = _env(n=n)
    big.reset(seeds=range(n))
    small = _env(n=2)
    small.reset(seeds=[0, n - 1])
    np.testing.assert_array_equal(big.frames[[0, n - 1]], small.frames)
    actions = ["('reorder', [2, 3, 4, 1])"] * n
    big.step(actions)
    small.step(actions[:2])
    np.testing.assert_array_equal(big.frames[[0, n - 1]], small.frames)


def test_whole_photo_tiles_are_cached_with_a_bound(tmp_path, monkeypatch):
    import visgym.envs.zoom_in_puzzle as zoom

    _write_images(tmp_path, [f"i{k}.png" for k in range(5)])
    monkeypatch.setattr(zoom, "WHOLE_TILE_CACHE", 2)
    env = _env(n=10, sample_dir=str(tmp_path))
    env.reset(seeds=range(10))
    assert env.family._whole.held == 2 and env.family._whole.evictions > 0
    again = _env(n=10, sample_dir=str(tmp_path))
    again.reset(seeds=range(10))
    np.testing.assert_array_equal(again.frames, env.frames)


def test_pixels_live_in_the_workspace_and_are_resampled_once_per_episode(monkeypatch):
    """The State holds no pixels (DESIGN); a redraw of rows whose image and boxes did not
    change copies the workspace's tiles instead of resampling them again."""
    import visgym.envs.zoom_in_puzzle as zoom

    env = _env(n=3)
    env.reset(seeds=[4, 5, 6])
    assert not any(a.dtype == np.uint8 for a in env.state)
    first = env.frames.copy()
    calls = []
    real = zoom.resample_tile
    monkeypatch.setattr(zoom, "resample_tile", lambda *a: calls.append(1) or real(*a))
    env.family.render_rows(env.state, env.frames, np.arange(3), env.work)
    assert calls == []
    np.testing.assert_array_equal(env.frames, first)
    env.reset(seeds=[7], rows=[1])   # one new episode: its four crops (and a new whole photo)
    assert 4 <= len(calls) <= 5
    fresh = _env(n=3)
    fresh.reset(seeds=[4, 7, 6])
    np.testing.assert_array_equal(env.frames, fresh.frames)
