"""mental_rotation_2d behaviour from spec/envs/mental_rotation_2d.md: generation, grammar
(section 5), dynamics, reward, frames (OpenCV's resize, disk and rotation; cv2 is a test oracle
only), prompt, solver, the image folder, init states (basename ids, hostile values), unreadable
photos and params."""
import json

import numpy as np
import pytest
from PIL import Image

import visgym
from contract_checks import assert_frames_equal_a_full_redraw, assert_hostile_init_refused
from visgym.envs.mental_rotation_2d import solver_plan
from visgym.render.rotate import rotate

cv2 = pytest.importorskip("cv2")

STOP = "('stop', 'stop')"
SUCCESS = "Action executed successfully."
INVALID = "The action {payload} is not in the valid action space of {name} so nothing is executed."


def _picture(h, w, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, (h, w, 3), dtype=np.uint8)


def _folder(tmp_path, sizes, seed=0, names=None):
    names = names or [f"p{k}.png" for k in range(len(sizes))]
    for k, ((h, w), name) in enumerate(zip(sizes, names)):
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(_picture(h, w, seed + k)).save(path)
    return str(tmp_path)


def _env(difficulty="easy", n=1, **kw):
    return visgym.make(f"mental_rotation_2d/{difficulty}", num_envs=n, autoreset="disabled",
                       max_steps=None, **kw)


def _loaded(secret, agent=0.0, difficulty="easy", image="astronaut", **kw):
    env = _env(difficulty, **kw)
    env.reset(init_states=[{"image_name": image, "secret_angle": secret, "agent_angle": agent}])
    return env


def _cv2_disk(size):
    m = np.zeros((size, size), np.uint8)
    cv2.circle(m, (size // 2, size // 2), size // 2, 1, thickness=-1, lineType=cv2.LINE_8)
    return m.astype(bool)


def _reference_frame(photo, size, secret, agent):
    """The reference's drawing with cv2 for the resize and the mask; the rotation through
    render/rotate (tested against cv2 and the reference frames in test_rotate.py)."""
    disk = _cv2_disk(size)
    resized = cv2.resize(photo, (size, size), interpolation=cv2.INTER_LINEAR)
    masked = resized * disk[..., None]
    right = rotate(masked, (agent - secret) % 360.0, mask=disk)
    return np.concatenate([masked, right], axis=1)


# ------------------------------------------------------------------------------ generation
def test_secret_is_the_reference_draw_for_the_seed_and_the_agent_starts_at_zero():
    env = _env(n=50)
    env.reset(seeds=range(1000, 1050))
    for s, d in zip(range(1000, 1050), env.state_dicts()):
        assert d["secret_angle"] == float(np.random.default_rng(s).integers(0, 360))
        assert d["agent_angle"] == 0.0


def test_secrets_cover_every_degree_and_a_start_may_already_be_solved():
    env = _env(n=4000)
    env.reset(seeds=range(4000))
    secrets = {d["secret_angle"] for d in env.state_dicts()}
    assert secrets == {float(a) for a in range(360)}
    success = env.success()
    assert success.any() and not success.all()
    errors = env.metrics()["rotation_error"]
    np.testing.assert_array_equal(success, errors <= 10.0)


def test_photo_is_a_pure_function_of_the_seed(tmp_path):
    folder = _folder(tmp_path, [(20, 30)] * 5)
    a, b = _env(n=8, sample_dir=folder), _env(n=3, sample_dir=folder)
    a.reset(seeds=range(10, 18))
    b.reset(seeds=[15, 11, 17])
    names = [d["image_name"] for d in a.state_dicts()]
    assert [d["image_name"] for d in b.state_dicts()] == [names[5], names[1], names[7]]
    assert set(names) == {f"p{k}.png" for k in range(5)}


# ------------------------------------------------------------------------------ grammar
GRAMMAR_TABLE = [
    ("('rotate', 45)", SUCCESS, 45.0, False),
    ("('rotate', -30)", SUCCESS, 330.0, False),
    ("('rotate', 180)", SUCCESS, 180.0, False),
    ("('rotate', -180)", SUCCESS, 180.0, False),
    ("('rotate', 0)", SUCCESS, 0.0, False),
    ("('rotate', True)", SUCCESS, 1.0, False),
    ("('rotate', False)", SUCCESS, 0.0, False),
    ("  ('rotate' ,   -14  )", SUCCESS, 346.0, False),
    ('("rotate", 93)', SUCCESS, 93.0, False),
    ("('rotate', 181)", INVALID.format(payload=181, name="rotate"), 0.0, False),
    ("('rotate', -181)", INVALID.format(payload=-181, name="rotate"), 0.0, False),
    ("('rotate', 360)", INVALID.format(payload=360, name="rotate"), 0.0, False),
    ("('rotate', 45.0)", INVALID.format(payload=45.0, name="rotate"), 0.0, False),
    ("('rotate', 0.5)", INVALID.format(payload=0.5, name="rotate"), 0.0, False),
    ("('rotate', '45')", INVALID.format(payload=45, name="rotate"), 0.0, False),
    ("('rotate', [45])", INVALID.format(payload=[45], name="rotate"), 0.0, False),
    ("('rotate', None)", INVALID.format(payload=None, name="rotate"), 0.0, False),
    ("('rotate', 1000000000000000000000000000000)",
     INVALID.format(payload=10**30, name="rotate"), 0.0, False),
    ("('rotate', -" + "9" * 400 + ")", None, 0.0, False),
    ("('turn', 45)", "The action name 'turn' is not recognized in the available action space.",
     0.0, False),
    ("('Stop', 'stop')", "The action name 'Stop' is not recognized in the available action "
     "space.", 0.0, False),
    ("['stop', 'stop']", "The action format is invalid. The action should be a tuple of two "
     "elements with the first element being the action name and the second element being the "
     "action payload.", 0.0, False),
    ("('stop', 'stop')", SUCCESS, 0.0, True),
    ("('stop', 'ok')", SUCCESS, 0.0, True),
    ("('stop', 'done')", SUCCESS, 0.0, True),
    ("('stop', 'STOP')", SUCCESS, 0.0, True),
    ("('stop', '1')", SUCCESS, 0.0, True),
    ("('stop', 'stop!')", INVALID.format(payload="stop!", name="stop"), 0.0, False),
    ("('stop', '')", INVALID.format(payload="", name="stop"), 0.0, False),
    ("('stop', 'st p')", INVALID.format(payload="st p", name="stop"), 0.0, False),
    ("('stop', 'stöp')", INVALID.format(payload="stöp", name="stop"), 0.0, False),
    ("('stop', b'stop')", INVALID.format(payload=b"stop", name="stop"), 0.0, False),
    ("('stop', 5)", INVALID.format(payload=5, name="stop"), 0.0, False),
]


@pytest.mark.parametrize("action,feedback,agent,terminated", GRAMMAR_TABLE,
                         ids=[a[:60] for a, *_ in GRAMMAR_TABLE])
def test_grammar_table(action, feedback, agent, terminated):
    env = _loaded(200.0)
    frames = env.frames.copy()
    _, reward, term, trunc, info = env.step([action])
    if feedback is not None:
        assert info["feedback"][0] == feedback
    assert bool(term[0]) == terminated and not trunc[0] and reward[0] == 0.0
    assert env.state_dicts()[0]["agent_angle"] == agent
    assert env.state_dicts()[0]["secret_angle"] == 200.0
    invalid = feedback is None or feedback not in (SUCCESS,)
    assert bool(info["invalid"][0]) == invalid
    if invalid:
        np.testing.assert_array_equal(env.frames, frames)


@pytest.mark.parametrize("action", ["", "   ", "stop", "('stop', 'stop'", "<answer>('stop', "
                                    "'stop')</answer>", "('stop', float('nan'))", "x" * 5000])
def test_unparsable_text_is_a_parse_error(action):
    env = _loaded(10.0)
    _, reward, term, _, info = env.step([action])
    assert info["feedback"][0].startswith("Cannot parse action string ")
    assert info["feedback"][0].endswith("so the action is invalid.")
    assert info["invalid"][0] and not term[0] and reward[0] == 0.0


# ------------------------------------------------------------------------------ dynamics, reward
def test_rotations_accumulate_modulo_360():
    env = _loaded(0.0)
    for delta, want in [(-15, 345.0), (-12, 333.0), (180, 153.0), (180, 333.0), (27, 0.0),
                        (-180, 180.0), (True, 181.0)]:
        env.step([f"('rotate', {delta})"])
        assert env.state_dicts()[0]["agent_angle"] == want


@pytest.mark.parametrize("difficulty,tolerance", [("easy", 10.0), ("hard", 5.0)])
def test_stop_reward_is_inclusive_at_the_tolerance(difficulty, tolerance):
    for secret, agent in [(tolerance, 0.0), (360.0 - tolerance, 0.0), (0.0, tolerance),
                          (180.0, 180.0 + tolerance), (359.0, 359.0 - tolerance)]:
        env = _loaded(secret, agent % 360.0, difficulty)
        assert env.success()[0]
        assert env.metrics()["rotation_error"][0] == tolerance
        _, reward, term, _, _ = env.step([STOP])
        assert term[0] and reward[0] == 1.0
    for secret, agent in [(tolerance + 1, 0.0), (0.0, 359.0 - tolerance), (180.0, 0.0)]:
        env = _loaded(secret, agent, difficulty)
        assert not env.success()[0]
        _, reward, term, _, _ = env.step([STOP])
        assert term[0] and reward[0] == 0.0


def test_only_a_stop_ends_an_episode_and_rewards_are_zero_before():
    env = _loaded(30.0)
    for _ in range(3):
        _, reward, term, trunc, _ = env.step(["('rotate', 10)"])
        assert reward[0] == 0.0 and not term[0] and not trunc[0]
    assert env.success()[0]
    _, reward, term, _, _ = env.step(["('stop', 'done')"])
    assert reward[0] == 1.0 and term[0]


def test_potential_is_the_error_and_zero_exactly_on_success():
    env = _env(n=64)
    env.reset(seeds=range(64))
    pot = env.potential()
    errors = env.metrics()["rotation_error"]
    success = env.success()
    assert (pot[success] == 0).all()
    np.testing.assert_allclose(pot[~success], errors[~success])


# ------------------------------------------------------------------------------ frames
@pytest.mark.parametrize("difficulty", ["easy", "hard"])
def test_frame_is_the_reference_drawing_after_every_step(tmp_path, difficulty):
    photos = [(200, 300), (128, 128), (90, 61), (336, 504)]
    folder = _folder(tmp_path, photos, seed=3)
    env = _env(difficulty, n=4, sample_dir=folder)
    env.reset(init_states=[{"image_name": f"p{k}.png", "secret_angle": float(s),
                            "agent_angle": 0.0} for k, s in enumerate([306, 73, 0, 181])])
    assert env.frames.shape == (4, 128, 256, 3)
    rng = np.random.default_rng(0)
    for t in range(6):
        d = env.state_dicts()
        for k in range(4):
            photo = np.asarray(Image.open(tmp_path / f"p{k}.png").convert("RGB"))
            want = _reference_frame(photo, 128, d[k]["secret_angle"], d[k]["agent_angle"])
            assert np.array_equal(env.frame(k), want), (t, k)
        env.step([f"('rotate', {int(v)})" for v in rng.integers(-180, 181, 4)])
        assert_frames_equal_a_full_redraw(env, f"step {t}")


@pytest.mark.parametrize("size", [64, 65, 32])
def test_other_panel_sizes(tmp_path, size):
    folder = _folder(tmp_path, [(100, 80)])
    env = _env(n=1, sample_dir=folder, image_size=size)
    env.reset(init_states=[{"image_name": "p0.png", "secret_angle": 40.0, "agent_angle": 0.0}])
    assert env.frames.shape == (1, size, 2 * size, 3)
    photo = np.asarray(Image.open(tmp_path / "p0.png").convert("RGB"))
    np.testing.assert_array_equal(env.frame(0), _reference_frame(photo, size, 40.0, 0.0))


def test_solved_state_shows_two_identical_panels_and_goal_frames_do_too():
    env = _env(n=3)
    env.reset(seeds=[1, 2, 3])
    goal = env.goal_frames()
    assert np.array_equal(goal[:, :, :128], goal[:, :, 128:])
    np.testing.assert_array_equal(goal[:, :, :128], env.frames[:, :, :128])
    env2 = _loaded(123.0)
    env2.step(["('rotate', 123)"])
    assert np.array_equal(env2.frame(0)[:, :128], env2.frame(0)[:, 128:])


def test_left_panel_is_the_masked_photo_and_outside_the_disk_is_black():
    env = _env(n=2)
    env.reset(seeds=[0, 1])
    disk = _cv2_disk(128)
    left, right = env.frames[:, :, :128], env.frames[:, :, 128:]
    assert not left[:, ~disk].any() and not right[:, ~disk].any()
    assert left[:, disk].any() and right[:, disk].any()


def test_a_step_redraws_only_rotated_rows():
    env = _env(n=3)
    env.reset(seeds=[4, 5, 6])
    before = env.frames.copy()
    env.step(["('rotate', 90)", "('rotate', 500)", STOP])
    assert not np.array_equal(env.frames[0], before[0])
    np.testing.assert_array_equal(env.frames[1:], before[1:])


def test_frames_stay_exact_when_the_picture_atlas_starts_over(tmp_path, monkeypatch):
    from visgym.envs import mental_rotation_2d as module

    folder = _folder(tmp_path, [(40 + k, 50) for k in range(12)], seed=9)
    monkeypatch.setattr(module, "ATLAS_BYTES", 0)
    monkeypatch.setattr(module, "ATLAS_ROWS", 1)      # room for 4 pictures: restarts
    env = visgym.make("mental_rotation_2d/easy", num_envs=4, sample_dir=folder, max_steps=3)
    env.reset(seeds=range(4))
    rng = np.random.default_rng(1)
    for t in range(12):
        env.step([f"('rotate', {int(v)})" for v in rng.integers(-180, 181, 4)])
        assert_frames_equal_a_full_redraw(env, f"step {t}")
        for k, d in enumerate(env.state_dicts()):
            photo = np.asarray(Image.open(tmp_path / d["image_name"]).convert("RGB"))
            want = _reference_frame(photo, 128, d["secret_angle"], d["agent_angle"])
            assert np.array_equal(env.frame(k), want), (t, k)
    assert env.work.atlas.restarts > 0


# ------------------------------------------------------------------------------ prompt
def test_prompt_prints_the_tolerance_with_one_decimal_and_names_every_action():
    for difficulty, text in [("easy", "±10.0°"), ("hard", "±5.0°")]:
        env = _env(difficulty)
        env.reset(seeds=[0])
        prompt = env.prompt()
        assert f"within {text}." in prompt
        assert "`('rotate', angle)`" in prompt and "`('stop', 'stop')`" in prompt
        assert "positive is clockwise, negative is counterclockwise" in prompt
    env = _env(tolerance=2.5)
    env.reset(seeds=[0])
    assert "±2.5°" in env.prompt()


# ------------------------------------------------------------------------------ solver
@pytest.mark.parametrize("difficulty", ["easy", "hard"])
@pytest.mark.parametrize("num_steps", [None, 1, 2, 3, 4, 7, 200])
def test_solver_succeeds_from_many_seeds(difficulty, num_steps):
    n = 120
    env = _env(difficulty, n=n)
    env.reset(seeds=range(7, 7 + n))
    plans = env.solve(num_steps=num_steps)
    assert plans == env.solve(num_steps=num_steps)    # reproducible
    tolerance = env.family.tolerance
    for b, plan in enumerate(plans):
        d = env.state_dicts()[b]
        delta = (d["secret_angle"] - d["agent_angle"]) % 360
        delta = delta - 360 if delta > 180 else delta
        assert plan[-1] == STOP
        if abs(delta) <= tolerance:
            assert plan == [STOP]
            continue
        total = round(abs(delta))
        moves = [int(a[len("('rotate', "):-1]) for a in plan[:-1]]
        assert sum(moves) == round(delta)
        assert all(-180 <= m <= 180 and m != 0 and (m > 0) == (delta > 0) for m in moves)
        if total <= 1:
            assert len(moves) == 1
        elif num_steps is None:
            assert len(moves) == min(total, len(moves)) and 2 <= len(moves) <= 4
        else:
            assert len(moves) == min(num_steps, total)
    # Replay every plan on the env: all end solved and rewarded.
    for t in range(max(len(p) for p in plans)):
        actions = [p[t] if t < len(p) else STOP for p in plans]
        active = np.array([t < len(p) for p in plans])
        _, reward, term, _, _ = env.step(actions, active=active)
        for b, p in enumerate(plans):
            if t == len(p) - 1:
                assert term[b] and reward[b] == 1.0, (b, p)


def test_solver_draws_cover_two_three_and_four_chunks():
    rng = np.random.default_rng(0)
    lengths = {len(solver_plan(100.0, 0.0, 5.0, None, rng)) for _ in range(200)}
    assert lengths == {3, 4, 5}
    assert solver_plan(1.0, 0.0, 0.0, None, rng) == ["('rotate', 1)", STOP]
    assert solver_plan(0.0, 1.0, 0.0, 3, rng) == ["('rotate', -1)", STOP]
    assert solver_plan(0.0, 180.0, 5.0, 1, rng) == ["('rotate', 180)", STOP]
    assert solver_plan(3.0, 0.0, 2.0, 200, rng) == ["('rotate', 1)"] * 3 + [STOP]


def test_solver_takes_no_strategy():
    env = _env()
    env.reset(seeds=[0])
    with pytest.raises(ValueError, match="strategy"):
        env.solve(strategy="swap")


# ------------------------------------------------------------------------------ data
def test_user_folder_is_scanned_recursively_case_insensitively(tmp_path):
    names = ["a.png", "B.JPG", "sub/c.bmp", "sub/deeper/d.TIFF", "e.tif", "f.jpeg"]
    _folder(tmp_path, [(16, 16)] * len(names), names=names)
    (tmp_path / "notes.txt").write_text("not an image")
    (tmp_path / "g.gif").write_bytes(b"GIF89a")
    env = _env(sample_dir=str(tmp_path))
    assert env.family.source.names == ("B.JPG", "a.png", "e.tif", "f.jpeg", "sub/c.bmp",
                                       "sub/deeper/d.TIFF")
    env.reset(init_states=[{"image_name": "d.TIFF", "secret_angle": 5.0, "agent_angle": 0.0}])
    assert env.state_dicts()[0]["image_name"] == "d.TIFF"


def test_photo_formats_decode_as_cv2_imread_does(tmp_path):
    """Grey, palette, 16-bit, BMP, TIFF and JPEG photos: the left panel equals the reference's
    pipeline in cv2 (imread IMREAD_COLOR, BGR -> RGB, resize INTER_LINEAR, disk). Transparent
    photos are the documented exception: composited onto white (envs/assets/images.py), where
    cv2.imread drops the alpha channel."""
    rng = np.random.default_rng(0)
    rgb = rng.integers(0, 256, (90, 70, 3), dtype=np.uint8)
    Image.fromarray(rgb[..., 0]).save(tmp_path / "grey.png")
    Image.fromarray(rgb).convert("P", palette=Image.Palette.ADAPTIVE).save(tmp_path / "pal.png")
    Image.fromarray(rgb).save(tmp_path / "x.bmp")
    Image.fromarray(rgb).save(tmp_path / "y.tif")
    Image.fromarray(rgb).save(tmp_path / "z.jpg", quality=90)
    cv2.imwrite(str(tmp_path / "w16.png"), rng.integers(0, 65536, (90, 70, 3)).astype(np.uint16))
    alpha = rng.integers(0, 256, (90, 70, 1), dtype=np.uint8)
    Image.fromarray(np.concatenate([rgb, alpha], axis=2)).save(tmp_path / "rgba.png")
    env = _env(sample_dir=str(tmp_path))
    disk = _cv2_disk(128)
    for name in env.family.source.names:
        env.reset(init_states=[{"image_name": name, "secret_angle": 0.0, "agent_angle": 0.0}])
        if name == "rgba.png":
            over_white = (rgb * (alpha / 255.0) + 255 * (1 - alpha / 255.0))
            photo = np.asarray(Image.alpha_composite(
                Image.new("RGBA", (70, 90), (255, 255, 255, 255)),
                Image.fromarray(np.concatenate([rgb, alpha], axis=2))).convert("RGB"))
            assert np.abs(photo - over_white).max() <= 1
        else:
            photo = cv2.cvtColor(cv2.imread(str(tmp_path / name), cv2.IMREAD_COLOR),
                                 cv2.COLOR_BGR2RGB)
        want = cv2.resize(photo, (128, 128), interpolation=cv2.INTER_LINEAR) * disk[..., None]
        assert np.array_equal(env.frame(0)[:, :128], want), name


def test_shared_basenames_resolve_deterministically_and_round_trip(tmp_path):
    names = ["x/img.png", "img.png", "y/img.png", "y/solo.png"]
    _folder(tmp_path, [(16, 16)] * len(names), names=names)
    env = _env(n=4, sample_dir=str(tmp_path))
    # A bare basename that is also a top-level path picks that file; "solo.png" its one file.
    for name, want in [("img.png", "img.png"), ("x/img.png", "x/img.png"),
                       ("y/img.png", "y/img.png"), ("solo.png", "y/solo.png")]:
        env.reset(rows=None, init_states=[{"image_name": name, "secret_angle": 0.0,
                                           "agent_angle": 0.0}] * 4)
        image_id = int(env.state.image_id[0])
        assert env.family.source.names[image_id] == want
    env.reset(seeds=range(4))
    dicts = json.loads(json.dumps(env.state_dicts()))
    other = _env(n=4, sample_dir=str(tmp_path))
    other.reset(init_states=dicts)
    np.testing.assert_array_equal(other.state.image_id, env.state.image_id)
    np.testing.assert_array_equal(other.frames, env.frames)
    shown = {env.family._name_of(k) for k in range(4)}
    assert shown == {"img.png", "x/img.png", "y/img.png", "solo.png"}


def test_bare_shared_basename_without_a_top_level_file_takes_the_first_sorted_path(tmp_path):
    names = ["b/pic.png", "a/pic.png"]
    _folder(tmp_path, [(16, 16)] * 2, names=names)
    env = _loaded(0.0, image="pic.png", sample_dir=str(tmp_path))
    assert env.family.source.names[int(env.state.image_id[0])] == "a/pic.png"
    assert env.state_dicts()[0]["image_name"] == "a/pic.png"


def test_bundle_layout_and_environment_variable(tmp_path, monkeypatch):
    bundle = tmp_path / "root" / "partial_datasets" / "2d_rotation"
    bundle.mkdir(parents=True)
    _folder(bundle, [(16, 16)])
    env = _loaded(0.0, image="p0.png", sample_dir=str(tmp_path / "root"))
    assert env.state_dicts()[0]["image_name"] == "p0.png"
    monkeypatch.setenv("VIS_GYM_IMAGE_DIR", str(bundle))
    env = _env()
    env.reset(seeds=[0])
    assert env.family.source.kind == "directory"
    assert env.state_dicts()[0]["image_name"] == "p0.png"


def test_default_is_the_builtin_photos(monkeypatch, tmp_path):
    monkeypatch.delenv("VIS_GYM_IMAGE_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    env = _env(n=9)
    env.reset(seeds=range(9))
    assert env.family.source.kind == "builtin"
    assert len({d["image_name"] for d in env.state_dicts()}) == 9


@pytest.mark.parametrize("make_path", [lambda p: p / "missing", lambda p: p / "file.txt",
                                       lambda p: p / "empty"])
def test_missing_or_empty_folder_error_names_sample_dir_and_the_path(tmp_path, make_path):
    (tmp_path / "file.txt").write_text("x")
    (tmp_path / "empty").mkdir()
    path = make_path(tmp_path)
    with pytest.raises(ValueError, match=rf"^sample_dir: .*{path.name}"):
        visgym.make("mental_rotation_2d/easy", sample_dir=str(path))


def test_unreadable_photo_errors_name_the_file(tmp_path):
    _folder(tmp_path, [(16, 16)])
    (tmp_path / "bad.png").write_bytes(b"this is not a png file")
    good = Image.fromarray(_picture(32, 32))
    good.save(tmp_path / "cut.png")
    data = (tmp_path / "cut.png").read_bytes()
    (tmp_path / "cut.png").write_bytes(data[: len(data) // 2])
    env = _env(n=1, sample_dir=str(tmp_path))
    ok = {"image_name": "p0.png", "secret_angle": 1.0, "agent_angle": 0.0}
    env.reset(init_states=[ok])
    before, frames = env.state_dicts(), env.frames.copy()
    for name in ("bad.png", "cut.png"):
        with pytest.raises(ValueError, match=rf"init_states\[0\]\.image_name: .*{name}"):
            env.reset(init_states=[{**ok, "image_name": name}])
        assert env.state_dicts() == before
        np.testing.assert_array_equal(env.frames, frames)
    ids = {env.family.source.pick_id(s): s for s in range(3)}
    bad_seed = ids[env.family.source.names.index("bad.png")]
    with pytest.raises(ValueError, match="bad.png"):
        env.reset(seeds=[bad_seed])
    assert env.state_dicts() == before


def test_a_photo_with_a_huge_declared_size_is_refused_naming_it(tmp_path):
    import struct
    import zlib

    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(
            ">I", zlib.crc32(kind + body) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", 60000, 60000, 8, 2, 0, 0, 0)
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"")) + \
        chunk(b"IEND", b"")
    (tmp_path / "huge.png").write_bytes(png)
    _folder(tmp_path, [(16, 16)])
    env = _env(sample_dir=str(tmp_path))
    with pytest.raises(ValueError, match=r"init_states\[0\]\.image_name: .*huge\.png"):
        env.reset(init_states=[{"image_name": "huge.png", "secret_angle": 0.0,
                                "agent_angle": 0.0}])


def test_an_empty_photo_file_fails_the_scan_naming_it(tmp_path):
    _folder(tmp_path, [(16, 16)])
    (tmp_path / "zero.jpg").write_bytes(b"")
    with pytest.raises(ValueError, match=r"sample_dir: .*zero\.jpg"):
        visgym.make("mental_rotation_2d/easy", sample_dir=str(tmp_path))


# ------------------------------------------------------------------------------ init states
INIT = {"image_name": "astronaut", "secret_angle": 40.0, "agent_angle": 0.0}
HOSTILE_INITS = [
    ({"secret_angle": 1.0, "agent_angle": 0.0}, "image_name: missing"),
    ({"image_name": "astronaut", "agent_angle": 0.0}, "secret_angle: missing"),
    ({"image_name": "astronaut", "secret_angle": 1.0}, "agent_angle: missing"),
    ({**INIT, "image_name": "no_such_photo.png"}, "image_name"),
    ({**INIT, "image_name": "../astronaut"}, "image_name"),
    ({**INIT, "image_name": "/etc/passwd"}, "image_name"),
    ({**INIT, "image_name": 5}, "image_name"),
    ({**INIT, "image_name": None}, "image_name"),
    ({**INIT, "image_name": ["astronaut"]}, "image_name"),
    ({**INIT, "secret_angle": 360.0}, "secret_angle"),
    ({**INIT, "secret_angle": -1.0}, "secret_angle"),
    ({**INIT, "secret_angle": float("nan")}, "secret_angle"),
    ({**INIT, "secret_angle": float("inf")}, "secret_angle"),
    ({**INIT, "secret_angle": "40"}, "secret_angle"),
    ({**INIT, "secret_angle": True}, "secret_angle"),
    ({**INIT, "secret_angle": 10**400}, "secret_angle"),
    ({**INIT, "agent_angle": [0.0]}, "agent_angle"),
    ({**INIT, "agent_angle": 1e300}, "agent_angle"),
    ({**INIT, "agent_angle": None}, "agent_angle"),
    ([1, 2, 3], "init_states"),
]


@pytest.mark.parametrize("init,field", HOSTILE_INITS, ids=[str(i)[:60] for i, _ in HOSTILE_INITS])
def test_hostile_init_states_raise_naming_the_field(init, field):
    env = _env(n=2)
    env.reset(seeds=[1, 2])
    assert_hostile_init_refused(env, init, field)


def test_init_states_accept_integer_and_fractional_angles():
    env = _loaded(40, 12.5)
    assert env.state_dicts()[0] == {"image_name": "astronaut", "secret_angle": 40.0,
                                    "agent_angle": 12.5}
    assert env.metrics()["rotation_error"][0] == 27.5


def test_init_state_field_names_are_the_references():
    env = _env()
    env.reset(seeds=[0])
    assert list(env.state_dicts()[0]) == ["image_name", "secret_angle", "agent_angle"]


# ------------------------------------------------------------------------------ params
@pytest.mark.parametrize("kwargs,field", [
    ({"tolerance": -1.0}, "tolerance"), ({"tolerance": 181}, "tolerance"),
    ({"tolerance": float("nan")}, "tolerance"), ({"tolerance": "5"}, "tolerance"),
    ({"image_size": 7}, "image_size"), ({"image_size": 2000}, "image_size"),
    ({"image_size": 128.0}, "image_size"), ({"sample_dir": 5}, "sample_dir"),
    ({"sample_dir": ""}, "sample_dir"), ({"angle": 3}, "angle"),
])
def test_bad_params_name_the_field(kwargs, field):
    with pytest.raises(ValueError, match=f"^{field}"):
        visgym.make("mental_rotation_2d/easy", **kwargs)


def test_presets():
    easy = visgym.make("mental_rotation_2d/easy")
    hard = visgym.make("mental_rotation_2d/hard")
    assert (easy.params.tolerance, easy.params.image_size) == (10.0, 128)
    assert (hard.params.tolerance, hard.params.image_size) == (5.0, 128)
    assert easy.frames.shape[1:] == (128, 256, 3)
    assert easy.max_steps == 20 and hard.max_steps == 30
