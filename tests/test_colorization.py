"""colorization behaviour from spec/envs/colorization.md: presets and thresholds, the target
search, the grammar (section 5, the int32-cast payloads included), dynamics, reward, frames
(against an OpenCV rendering of the reference's drawing), prompt, solver, the photo folder,
init states and params."""
import json
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

import visgym
from contract_checks import assert_frames_equal_a_full_redraw
from visgym.envs.colorization import REFERENCE_GREY_PHRASE
from visgym.render.hsv import rgb_to_hsv

STOP = "('stop', 'stop')"
INVALID = "The action {payload} is not in the valid action space of {name} so nothing is executed."
SPACE = math.sqrt(360 ** 2 + 255 ** 2 + 255 ** 2)
KEYS = ("circle_size", "region_radius", "min_brightness", "max_brightness")


def _scene(h, w, seed=0):
    """A photo of flat-coloured blocks with a brightness gradient (H and S locally constant)."""
    rng = np.random.default_rng(seed)
    hsv = np.zeros((h, w, 3), np.uint8)
    for y0 in range(0, h, 32):
        for x0 in range(0, w, 32):
            hsv[y0:y0 + 32, x0:x0 + 32, 0] = rng.integers(0, 180)
            hsv[y0:y0 + 32, x0:x0 + 32, 1] = rng.integers(60, 256)
    hsv[..., 2] = np.linspace(40, 220, w, dtype=np.float64).astype(np.uint8)[None, :]
    from visgym.render.hsv import hsv_to_rgb

    return hsv_to_rgb(hsv)


def _folder(tmp_path, sizes, seed=0, ext="png"):
    for k, (h, w) in enumerate(sizes):
        Image.fromarray(_scene(h, w, seed + k)).save(tmp_path / f"p{k}.{ext}")
    return str(tmp_path)


def _env(difficulty="easy", n=1, **kw):
    return visgym.make(f"colorization/{difficulty}", num_envs=n, autoreset="disabled",
                       max_steps=None, **kw)


def _init(**kw):
    base = {"user_image_path": "p0.png", "target_pos": [40, 30], "target_hue": 100.0,
            "target_sat": 120, "target_val": 150, "current_hue": 10.0, "current_sat": 30}
    return {**base, **kw}


def _loaded(tmp_path, init=None, difficulty="easy", **kw):
    folder = _folder(tmp_path, [(96, 128)])
    env = _env(difficulty, sample_dir=folder, **kw)
    env.reset(init_states=[init or _init()])
    return env


# --------------------------------------------------------------------------- presets
def test_presets_are_the_harness_configuration():
    easy = visgym.make("colorization/easy").family.params
    hard = visgym.make("colorization/hard").family.params
    for p in (easy, hard):
        assert [p.setting(k) for k in KEYS] == [20, 30, 25, 230]
        assert p.img_size == 256
    assert easy.threshold == pytest.approx(11 / 20 * SPACE * 0.3) == pytest.approx(84.077, 1e-4)
    assert hard.threshold == pytest.approx(16 / 20 * SPACE * 0.3) == pytest.approx(122.294, 1e-4)
    # The inversion: "hard" accepts larger errors.
    assert hard.threshold > easy.threshold


def test_registered_behaviour_is_one_keyword_away():
    easy = visgym.make("colorization/easy", setup="registered").family.params
    hard = visgym.make("colorization/hard", setup="registered").family.params
    assert [easy.setting(k) for k in KEYS] == [50, None, 45, 210]
    assert easy.threshold == pytest.approx(33.63, abs=0.01)
    assert hard.threshold == pytest.approx(48.92, abs=0.01)
    plain = visgym.make("colorization/easy", setup="registered", accuracy_radius=None)
    assert plain.family.params.effective_accuracy_radius == 28.0   # 50 // 1.75
    custom = visgym.make("colorization/easy", setup="registered", region_radius=60)
    assert [custom.family.params.setting(k) for k in KEYS] == [50, 60, 45, 210]


@pytest.mark.parametrize("kwargs, field", [
    ({"circle_size": 0}, "circle_size"), ({"circle_size": 2.5}, "circle_size"),
    ({"region_radius": -1}, "region_radius"), ({"min_brightness": 300}, "min_brightness"),
    ({"min_brightness": 200, "max_brightness": 100}, "min_brightness"),
    ({"accuracy_radius": 0}, "accuracy_radius"), ({"accuracy_radius": float("nan")},
                                                   "accuracy_radius"),
    ({"img_size": 4}, "img_size"), ({"setup": "other"}, "setup"),
    ({"hue_tolerance": -1}, "hue_tolerance"), ({"sample_dir": 5}, "sample_dir"),
    ({"max_image_width": 0}, "max_image_width"), ({"bogus": 1}, "bogus"),
])
def test_bad_params_name_the_field(kwargs, field):
    with pytest.raises(ValueError, match=field):
        visgym.make("colorization/easy", **kwargs)


# --------------------------------------------------------------------------- generation
def test_target_search_follows_the_spec(tmp_path):
    folder = _folder(tmp_path, [(120, 160), (90, 200), (150, 100)])
    env = _env(n=64, sample_dir=folder)
    env.reset(seeds=range(64))
    fam = env.family
    for i, d in enumerate(env.state_dicts()):
        photo = fam.picture(fam.source.id_of(d["user_image_path"]))
        h, w = photo.shape[:2]
        x, y = d["target_pos"]
        assert 20 <= x < w - 20 and 20 <= y < h - 20
        hh, ss, vv = (int(c) for c in rgb_to_hsv(photo[y, x]))
        assert (d["target_hue"], d["target_sat"], d["target_val"]) == (2.0 * hh, ss, vv)
        window = rgb_to_hsv(photo[max(y - 10, 0):y + 11, max(x - 10, 0):x + 11]).astype(float)
        assert 25 <= window[..., 2].mean() <= 230
        score = 2 * window[..., 0].var() + window[..., 1].var() + window[..., 2].var()
        assert score <= 1500 + 1e-6
        assert 0.0 <= d["current_hue"] < 360.0 and 0 <= d["current_sat"] <= 255
        assert list(env.frame_hw[i]) == [max(256, h), 256 + w]


def test_target_prefers_the_calmest_windows(tmp_path):
    """Half the photo flat, half noise: the chosen window is always a flat one."""
    rng = np.random.default_rng(3)
    photo = np.full((100, 200, 3), (200, 90, 40), np.uint8)
    photo[:, 100:] = rng.integers(0, 256, (100, 100, 3), dtype=np.uint8)
    Image.fromarray(photo).save(tmp_path / "half.png")
    env = _env(n=32, sample_dir=str(tmp_path))
    env.reset(seeds=range(32))
    for d in env.state_dicts():
        assert d["target_pos"][0] + 10 < 100


def test_too_dark_photo_falls_back_to_the_centre(tmp_path):
    Image.fromarray(np.full((80, 90, 3), 5, np.uint8)).save(tmp_path / "dark.png")
    env = _env(sample_dir=str(tmp_path))
    env.reset(seeds=[3])
    assert env.state_dicts()[0]["target_pos"] == [45, 40]


def test_photo_smaller_than_the_margin_uses_its_centre_line(tmp_path):
    Image.fromarray(_scene(30, 100)).save(tmp_path / "thin.png")
    env = _env(n=8, sample_dir=str(tmp_path))
    env.reset(seeds=range(8))
    assert {d["target_pos"][1] for d in env.state_dicts()} == {15}


def test_episode_is_a_pure_function_of_its_seed(tmp_path):
    folder = _folder(tmp_path, [(96, 128), (128, 96), (100, 100)])
    a = _env(n=5, sample_dir=folder)
    b = _env(n=9, sample_dir=folder)
    a.reset(seeds=[11, 12, 13, 14, 15])
    b.reset(seeds=[7, 7, 13, 7, 7, 7, 7, 7, 7])
    assert a.state_dicts()[2] == b.state_dicts()[2]
    np.testing.assert_array_equal(a.frame(2), b.frame(2))


# --------------------------------------------------------------------------- grammar, dynamics
@pytest.mark.parametrize("action, feedback, hue, sat", [
    ("('rotate', 30)", "Action executed successfully.", 40.0, 30),
    ("('rotate', 30.5)", "Action executed successfully.", 40.5, 30),
    ("('rotate', '30')", "Action executed successfully.", 40.0, 30),
    ("('rotate', -360)", "Action executed successfully.", 10.0, 30),
    ("('rotate', -15)", "Action executed successfully.", 355.0, 30),
    ("('rotate', True)", "Action executed successfully.", 11.0, 30),
    ("('rotate', 360.9)", "Action executed successfully.", 10.9, 30),
    ("('saturate', 12.7)", "Action executed successfully.", 10.0, 42),
    ("('saturate', -0.9)", "Action executed successfully.", 10.0, 30),
    ("('saturate', -255)", "Action executed successfully.", 10.0, 0),
    ("('saturate', 255)", "Action executed successfully.", 10.0, 255),
    ("('rotate', 361)", INVALID.format(payload=361, name="rotate"), 10.0, 30),
    ("('rotate', -361)", INVALID.format(payload=-361, name="rotate"), 10.0, 30),
    ("('saturate', 256)", INVALID.format(payload=256, name="saturate"), 10.0, 30),
    ("('rotate', '30.5')", INVALID.format(payload="30.5", name="rotate"), 10.0, 30),
    ("('saturate', '1e3')", INVALID.format(payload="1e3", name="saturate"), 10.0, 30),
    ("('rotate', None)", INVALID.format(payload=None, name="rotate"), 10.0, 30),
    ("('rotate', (1, 2))", INVALID.format(payload=(1, 2), name="rotate"), 10.0, 30),
    ("('rotate', [30])", INVALID.format(payload=[30], name="rotate"), 10.0, 30),
    ("('rotate', 10000000000)", INVALID.format(payload=10000000000, name="rotate"), 10.0, 30),
    ("('saturate', 4294967326)", INVALID.format(payload=4294967326, name="saturate"), 10.0, 30),
    ("('rotate', float('nan'))", None, 10.0, 30),
    ("('stop', 'stop!')", INVALID.format(payload="stop!", name="stop"), 10.0, 30),
    ("('hue', 30)", "The action name 'hue' is not recognized in the available action space.",
     10.0, 30),
    ("('rotate', 30, 1)", None, 10.0, 30),
])
def test_grammar_table(tmp_path, action, feedback, hue, sat):
    env = _loaded(tmp_path)
    _, reward, terminated, _, info = env.step([action])
    if feedback is not None:
        assert info["feedback"][0] == feedback
    else:
        assert info["invalid"][0]
    d = env.state_dicts()[0]
    assert d["current_hue"] == pytest.approx(hue, abs=1e-9) and d["current_sat"] == sat
    assert not terminated[0] and reward[0] == 0
    assert info["invalid"][0] == (feedback != "Action executed successfully.")


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(payload=st.one_of(
    st.integers(-2 ** 40, 2 ** 40), st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(), st.integers(-400, 400).map(str), st.floats(-400, 400).map(repr),
    st.text(max_size=6)))
def test_cast_scalar_payloads(tmp_path, payload):
    """A payload is accepted exactly when it casts to a 32-bit int within the range; rotate then
    adds the uncast value as a float, saturate the truncated int (clipped)."""
    env = _loaded(tmp_path, _init(current_hue=100.0, current_sat=128))
    for name, low, high in (("rotate", -360, 360), ("saturate", -255, 255)):
        env.reset(init_states=[_init(current_hue=100.0, current_sat=128)])
        action = f"({name!r}, {payload!r})"
        _, _, _, _, info = env.step([action])
        try:
            if isinstance(payload, float) and not math.isfinite(payload):
                raise ValueError
            cast = int(payload)
            value = float(payload)
            ok = -2 ** 31 <= cast < 2 ** 31 and low <= cast <= high
        except (ValueError, OverflowError):
            ok = False
        assert bool(info["invalid"][0]) == (not ok), action
        d = env.state_dicts()[0]
        if not ok:
            assert (d["current_hue"], d["current_sat"]) == (100.0, 128)
        elif name == "rotate":
            assert d["current_hue"] == (100.0 + value) % 360.0
        else:
            assert d["current_sat"] == min(max(128 + cast, 0), 255)


def test_stop_accepts_short_alphanumeric_payloads(tmp_path):
    for payload in ("stop", "done", "ok", "STOP", "1"):
        env = _loaded(tmp_path)
        _, _, terminated, _, info = env.step([f"('stop', '{payload}')"])
        assert terminated[0] and not info["invalid"][0]


def test_reward_only_on_a_stop_within_the_threshold(tmp_path):
    # Hue 40 degrees off, saturation exact: distance 80 <= 84.08 (easy), so a stop scores.
    init = _init(target_hue=100.0, current_hue=60.0, target_sat=50, current_sat=50)
    env = _loaded(tmp_path, init)
    _, reward, terminated, _, info = env.step(["('rotate', 0)"])
    assert reward[0] == 0 and not terminated[0] and info["success"][0]
    _, reward, terminated, _, _ = env.step([STOP])
    assert reward[0] == 1.0 and terminated[0]
    # 43 degrees off: 86 > 84.08 on easy, but within hard's 122.29 (the inversion).
    init = _init(target_hue=100.0, current_hue=57.0, target_sat=50, current_sat=50)
    env = _loaded(tmp_path, init)
    assert env.step([STOP])[1][0] == 0.0
    env = _loaded(tmp_path, init, difficulty="hard")
    assert env.step([STOP])[1][0] == 1.0


def test_hue_error_is_circular_and_metrics_are_the_reference_info(tmp_path):
    env = _loaded(tmp_path, _init(target_hue=350.0, current_hue=10.0, target_sat=100,
                                  current_sat=130))
    m = env.metrics()
    assert m["hue_error"][0] == 20.0 and m["sat_error"][0] == 30.0
    assert m["color_distance"][0] == pytest.approx(math.hypot(40, 30))
    assert m["threshold_distance"][0] == pytest.approx(84.077, 1e-4)
    assert m["accuracy_radius"][0] == 11.0


def test_steps_after_a_stop_are_still_processed(tmp_path):
    env = _loaded(tmp_path)
    env.step([STOP])
    _, _, terminated, _, info = env.step(["('rotate', 5)"])
    assert env.state_dicts()[0]["current_hue"] == 15.0 and not terminated[0]


# --------------------------------------------------------------------------- frames
def _reference_frame(photo, init, size=256, circle=20, region=30):
    """The reference's drawing with OpenCV: the wheel pixel by pixel (cvtColor of one pixel at
    a time: OpenCV's scalar path), the photo converted whole, recoloured under a filled circle,
    the grey ring by distance, the 2-px outline and the 2-px marker."""
    cv2 = pytest.importorskip("cv2")
    bgr = np.ascontiguousarray(photo[:, :, ::-1])
    h, w = bgr.shape[:2]
    cx, cy = init["target_pos"]
    mask = np.zeros((h, w), np.uint8)
    cv2.circle(mask, (cx, cy), circle, 255, -1)
    hsv = cv2.cvtColor(bgr, cv2.COLOR_BGR2HSV)
    hsv[mask > 0, 0] = int((init["current_hue"] % 360) / 2)
    hsv[mask > 0, 1] = init["current_sat"]
    out = bgr.copy()
    out[mask > 0] = cv2.cvtColor(hsv, cv2.COLOR_HSV2BGR)[mask > 0]
    yy, xx = np.mgrid[:h, :w]
    d = np.sqrt((xx - cx) ** 2 + (yy - cy) ** 2)
    if region is not None:
        out[(d > circle) & (d <= region)] = 128
    cv2.circle(out, (cx, cy), circle, (0, 0, 0), 2)
    mid = size // 2
    wheel = np.zeros((size, size, 3), np.uint8)
    cache = {}
    for y in range(size):
        for x in range(size):
            dist = math.sqrt((x - mid) ** 2 + (y - mid) ** 2)
            if dist <= mid:
                angle = math.degrees(math.atan2(y - mid, x - mid)) % 360
                key = (int(angle / 2), int(min(dist / mid * 255, 255)))
                if key not in cache:
                    px = np.uint8([[[key[0], key[1], init["target_val"]]]])
                    cache[key] = cv2.cvtColor(px, cv2.COLOR_HSV2BGR)[0, 0]
                wheel[y, x] = cache[key]
    r = int(init["current_sat"] / 255 * (mid - 2))
    theta = math.radians(init["current_hue"])
    cv2.circle(wheel, (mid + int(r * math.cos(theta)), mid + int(r * math.sin(theta))), 5,
               (0, 0, 0), 2)
    frame = np.zeros((max(size, h), size + w, 3), np.uint8)
    frame[:size, :size] = wheel[:, :, ::-1]
    frame[:h, size:] = out[:, :, ::-1]
    return frame


@pytest.mark.parametrize("case", [
    # (photo h, w, target, hue, sat): outlines clipped at each border, markers clipped at the
    # wheel's edge (saturation 255 along the axes), photos taller and shorter than the wheel.
    (128, 192, (20, 64), 0.0, 255), (300, 128, (107, 279), 90.0, 255),
    (96, 256, (128, 20), 180.0, 255), (200, 64, (43, 75), 270.0, 254),
    (64, 128, (64, 43), 45.3, 17), (260, 320, (300, 239), 359.9, 128),
])
def test_frames_are_the_reference_drawing(tmp_path, case):
    h, w, (x, y), hue, sat = case
    photo = _scene(h, w, seed=h + w)
    Image.fromarray(photo).save(tmp_path / "p0.png")
    init = _init(target_pos=[x, y], current_hue=hue, current_sat=sat, target_val=77)
    env = _env(sample_dir=str(tmp_path))
    env.reset(init_states=[init])
    want = _reference_frame(photo, init)
    got = env.frame(0)
    assert got.shape == want.shape
    differs = (got != want).any(axis=2)
    assert not differs.any(), f"{int(differs.sum())} pixels differ at {np.argwhere(differs)[:5]}"
    # And after steps, drawn incrementally.
    for action in ("('rotate', 91.5)", "('saturate', -200)", "('rotate', -181)",
                   "('saturate', 255)"):
        env.step([action])
        init = {**init, **{k: env.state_dicts()[0][k] for k in ("current_hue", "current_sat")}}
        assert_frames_equal_a_full_redraw(env, action)
        np.testing.assert_array_equal(env.frame(0), _reference_frame(photo, init))


def test_registered_setup_draws_no_grey_ring(tmp_path):
    photo = _scene(160, 192, seed=5)
    Image.fromarray(photo).save(tmp_path / "p0.png")
    init = _init(target_pos=[90, 80])
    env = _env(sample_dir=str(tmp_path), setup="registered")
    env.reset(init_states=[init])
    np.testing.assert_array_equal(env.frame(0),
                                  _reference_frame(photo, init, circle=50, region=None))


def test_prompt_says_what_is_true_about_the_grey(tmp_path):
    harness = _loaded(tmp_path).prompt()
    assert REFERENCE_GREY_PHRASE not in harness
    assert "thin gray ring" in harness and "original colors" in harness
    registered = _env(sample_dir=str(tmp_path), setup="registered")
    registered.reset(init_states=[_init()])
    assert "gray" not in registered.prompt() and "original colors" in registered.prompt()
    for name in ("'rotate'", "'saturate'", "'stop'", "-360 and 360", "-255 and 255"):
        assert name in harness


# --------------------------------------------------------------------------- solver
@pytest.mark.parametrize("difficulty, setup, num_steps", [
    ("easy", "harness", None), ("hard", "harness", 8), ("easy", "registered", None),
    ("hard", "registered", 12), ("easy", "harness", 3),
])
def test_solver_succeeds_from_many_seeds(difficulty, setup, num_steps):
    env = _env(difficulty, n=48, setup=setup)
    env.reset(seeds=range(300, 348))
    plans = env.solve(num_steps=num_steps)
    for b, plan in enumerate(plans):
        assert plan[-1] == STOP
        if num_steps:
            assert num_steps + 1 <= len(plan) <= num_steps + 3 or len(plan) - 1 > num_steps
    from visgym.core.rollout import run_plans

    result = run_plans(env, plans)
    metrics = env.metrics()
    assert (result.reward == 1.0).all() and result.terminated.all()
    assert (metrics["hue_error"] <= 0.5).all() and (metrics["sat_error"] == 0).all()


def test_solver_plan_is_a_function_of_the_state_and_pads_with_net_zero_blocks(tmp_path):
    env = _loaded(tmp_path, _init(target_hue=100.0, current_hue=96.0, target_sat=120,
                                  current_sat=110))
    plan = env.solve(num_steps=9)[0]
    assert plan == env.solve(num_steps=9)[0]
    # Already within the tolerances: only net-zero padding, then the stop.
    assert 10 <= len(plan) <= 12
    moves = [json.loads(a.replace("'", '"').replace("(", "[").replace(")", "]")) for a in plan[:-1]]
    assert sum(v for n, v in moves if n == "rotate") == 0
    assert sum(v for n, v in moves if n == "saturate") == 0
    assert plan[-1] == STOP
    assert env.solve()[0] == [STOP]


# --------------------------------------------------------------------------- photos, init states
def test_user_folder_in_the_reference_layout(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    Image.fromarray(_scene(80, 96, 1)).save(tmp_path / "a" / "b" / "deep.PNG")
    Image.fromarray(_scene(80, 96, 2)).save(tmp_path / "top.jpg")
    Image.fromarray(_scene(80, 96, 3)).save(tmp_path / "c.BMP")
    (tmp_path / "notes.txt").write_text("not an image")
    env = _env(sample_dir=str(tmp_path))
    assert env.family.source.names == ("a/b/deep.PNG", "c.BMP", "top.jpg")
    env.reset(init_states=[_init(user_image_path="a/b/deep.PNG")])
    assert env.state_dicts()[0]["user_image_path"] == "a/b/deep.PNG"


def test_image_dir_environment_variable_and_bundle_layout(tmp_path, monkeypatch):
    bundle = tmp_path / "partial_datasets" / "colorization"
    bundle.mkdir(parents=True)
    Image.fromarray(_scene(80, 96)).save(bundle / "x.png")
    monkeypatch.setenv("VIS_GYM_IMAGE_DIR", str(tmp_path))
    env = _env()
    assert env.family.source.names == ("x.png",)


def test_builtin_photos_are_the_colour_ones_at_reference_scale():
    env = _env(n=8)
    env.reset(seeds=range(8))
    names = set(env.family.source.names)
    assert "camera" not in names and "astronaut" in names
    for i in range(8):
        h, w = env.frame_hw[i]
        assert h == 336 and 256 + 336 <= w <= 256 + 640


@pytest.mark.parametrize("path", ["img3.png", "{dir}/img3.png", "{abs}/img3.png",
                                  "./img3.png", "sub/../img3.png"])
def test_init_state_paths_are_relative_to_the_folder(tmp_path, path):
    folder = tmp_path / "photos"
    folder.mkdir()
    Image.fromarray(_scene(96, 128)).save(folder / "img3.png")
    (folder / "sub").mkdir()
    env = _env(sample_dir=str(folder))
    given = path.format(dir=str(folder), abs=str(folder.resolve()))
    env.reset(init_states=[_init(user_image_path=given)])
    assert env.state_dicts()[0]["user_image_path"] == "img3.png"
    # And the round trip through JSON loads unchanged.
    again = _env(sample_dir=str(folder))
    again.reset(init_states=json.loads(json.dumps(env.state_dicts())))
    assert again.state_dicts() == env.state_dicts()


@pytest.mark.parametrize("init, field", [
    ({"user_image_path": "../outside.png"}, "user_image_path"),
    ({"user_image_path": "/etc/passwd"}, "user_image_path"),
    ({"user_image_path": "nope.png"}, "user_image_path"),
    ({"user_image_path": 7}, "user_image_path"),
    ({"target_pos": [500, 10]}, "target_pos"),
    ({"target_pos": [1, 2, 3]}, "target_pos"),
    ({"target_pos": [1.5, 2]}, "target_pos"),
    ({"target_hue": 400.0}, "target_hue"),
    ({"target_hue": "90"}, "target_hue"),
    ({"target_sat": 256}, "target_sat"),
    ({"target_val": -1}, "target_val"),
    ({"current_hue": float("nan")}, "current_hue"),
    ({"current_sat": 3.5}, "current_sat"),
    ({"current_sat": None}, "current_sat"),
])
def test_hostile_init_states_raise_naming_the_field(tmp_path, init, field):
    (tmp_path / "f").mkdir()
    folder = _folder(tmp_path / "f", [(96, 128)])
    Image.fromarray(_scene(20, 20)).save(tmp_path / "outside.png")
    env = _env(sample_dir=folder)
    env.reset(init_states=[_init()])
    before = env.state_dicts()
    with pytest.raises(ValueError, match=f"init_states\\[0\\].{field}"):
        env.reset(init_states=[_init(**init)])
    assert env.state_dicts() == before
    bad = _init()
    del bad[field]
    with pytest.raises(ValueError, match=field):
        env.reset(init_states=[bad])


def test_missing_photo_in_an_init_state_names_the_file(tmp_path):
    folder = _folder(tmp_path, [(96, 128), (96, 128)])
    env = _env(sample_dir=folder)
    (tmp_path / "p1.png").unlink()
    with pytest.raises(ValueError, match="user_image_path.*p1.png"):
        env.reset(init_states=[_init(user_image_path="p1.png")])


def test_corrupt_photo_names_the_file(tmp_path):
    folder = _folder(tmp_path, [(96, 128)])
    data = (tmp_path / "p0.png").read_bytes()
    (tmp_path / "p0.png").write_bytes(data[: len(data) // 3])   # truncated
    env = _env(sample_dir=folder)
    with pytest.raises(ValueError, match="p0.png"):
        env.reset(seeds=[0])
    with pytest.raises(ValueError, match="user_image_path.*p0.png"):
        env.reset(init_states=[_init()])


def test_empty_photo_file_fails_the_scan_naming_it(tmp_path):
    _folder(tmp_path, [(96, 128)])
    (tmp_path / "zero.png").write_bytes(b"")
    with pytest.raises(ValueError, match="zero.png"):
        _env(sample_dir=str(tmp_path))


def test_missing_folder_names_sample_dir(tmp_path):
    with pytest.raises(ValueError, match="sample_dir"):
        _env(sample_dir=str(tmp_path / "nowhere"))


def test_a_photo_larger_than_the_capacity_is_downscaled_to_fit(tmp_path):
    Image.fromarray(_scene(100, 300)).save(tmp_path / "wide.png")
    env = _env(sample_dir=str(tmp_path), max_image_width=150, max_image_height=150)
    env.reset(seeds=[1])
    assert env.frame_hw[0].tolist() == [256, 256 + 150]
    assert env.frame_shape[:2] == (256, 256 + 150)


def _png_declaring(width: int, height: int) -> bytes:
    """A PNG whose header declares width x height (its pixel data is a stub)."""
    import struct
    import zlib

    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(b"\x00" * 16)) + chunk(b"IEND", b""))


def test_photo_declaring_a_huge_size_is_refused_naming_the_file(tmp_path):
    (tmp_path / "huge.png").write_bytes(_png_declaring(60000, 60000))
    env = _env(sample_dir=str(tmp_path))
    with pytest.raises(ValueError, match="huge.png"):
        env.reset(seeds=[0])
    with pytest.raises(ValueError, match="user_image_path.*huge.png"):
        env.reset(init_states=[_init(user_image_path="huge.png")])



def test_photo_columns_after_the_last_simd_block_round_like_opencvs_tail(tmp_path):
    """OpenCV converts the recoloured photo row by row; the last W mod 32 columns of each row
    take its rounding path. The disk drawn there equals render/hsv's whole-photo conversion
    with that block (which test_hsv checks against the installed OpenCV)."""
    from visgym.render.circles import disk_mask
    from visgym.render.hsv import SIMD_BLOCK, hsv_to_rgb

    photo = _scene(90, 150, seed=9)      # 150 = 4 * 32 + 22: columns 128..149 round
    Image.fromarray(photo).save(tmp_path / "p0.png")
    init = _init(target_pos=[130, 45], current_hue=77.0, current_sat=201)
    env = _env(sample_dir=str(tmp_path))
    env.reset(init_states=[init])
    full = rgb_to_hsv(photo)
    mask = np.zeros(photo.shape[:2], bool)
    disk = disk_mask(20)
    mask[45 - 20:45 + 21, 130 - 20:130 + 21] = disk[:, :150 - 110]
    full[mask, 0] = int(77.0 / 2)
    full[mask, 1] = 201
    want = hsv_to_rgb(full, block=SIMD_BLOCK)
    got = env.frame(0)[:90, 256:]
    inner = mask.copy()
    inner[:, :] &= (np.add.outer((np.arange(90) - 45) ** 2, (np.arange(150) - 130) ** 2)
                    <= 18 ** 2)   # inside the outline
    np.testing.assert_array_equal(got[inner], want[inner])
    assert inner[:, 128:].any() and inner[:, :128].any()
    rounded = hsv_to_rgb(full, block=10 ** 6)   # everything on the scalar path
    assert (rounded[inner] != want[inner]).any()
