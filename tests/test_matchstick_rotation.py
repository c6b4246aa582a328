"""matchstick_rotation behaviour from spec/envs/matchstick_rotation.md: generation, grammar,
dynamics (unit coordinates, s*s canvas px per unit move, clipping, heading modulo 360), success in
canvas px, frame layout and colours, the tile redraw, prompt facts, solvers, init-state and
params validation."""
import math

import numpy as np
import pytest

import visgym
from contract_checks import assert_frames_equal_a_full_redraw
from visgym.core.family import copy_state
from visgym.core.rollout import run_plans
from visgym.envs.matchstick_rotation import AXES_BOX, MatchstickRotationParams

STOP = "('stop', 'stop')"
EASY = "matchstick_rotation/easy"
HARD = "matchstick_rotation/hard"


def _env(env_id=HARD, n=1, **kwargs):
    return visgym.make(env_id, num_envs=n, max_steps=None, autoreset="disabled", **kwargs)


def _loaded(init, env_id=HARD, **kwargs):
    env = _env(env_id, **kwargs)
    env.reset(init_states=[init])
    return env


BASE = {"scale": 2.0, "target_mid": [20.0, 30.0], "target_ang": 30.0,
        "initial_mid": [10.0, 10.0], "initial_ang": 100.0}


# ---------------------------------------------------------------------------- generation
@pytest.mark.parametrize("canvas", [(100, 100), (120, 120)])
def test_generated_poses_lie_in_the_canvas_with_scale_in_range(canvas):
    env = _env(EASY, 2000, canvas_size=list(canvas))
    env.reset(seeds=range(2000))
    st = env.state
    width, height = canvas
    assert ((st.scale >= 0.3) & (st.scale < 3.0)).all()
    for mid in (st.mid, st.target_mid):
        assert (mid >= 0).all()
        assert (mid[:, 0] < width / st.scale).all() and (mid[:, 1] < height / st.scale).all()
    for ang in (st.ang, st.target_ang):
        assert ((ang >= 0) & (ang < 360)).all()
    # Uniform draws: the canvas-px midpoints spread over the whole canvas, scales over the range.
    assert abs(st.scale.mean() - 1.65) < 0.05
    assert abs((st.mid[:, 0] * st.scale).mean() - width / 2) < 0.05 * width


def test_scale_range_param_is_honoured():
    env = _env(EASY, 500, scale_range=(1.0, 1.5))
    env.reset(seeds=range(500))
    assert env.state.scale.min() >= 1.0 and env.state.scale.max() < 1.5


# ---------------------------------------------------------------------------- grammar
@pytest.mark.parametrize("action", [
    "('move', [1, 2, 3])", "('move', (0.25, -0.25, 180))", "('move', ['1', '2', '3'])",
    "('move', [True, False, 1])", "('move', [-0, 0.0, -720])", "\t(  \"move\" , [1, 2, 3] )",
    "('move', [3e38, 0, 0])",
])
def test_move_accepts_reference_payloads(action):
    env = _env()
    env.reset(seeds=[1])
    _, _, _, _, info = env.step([action])
    assert info["feedback"][0] == "Action executed successfully."


@pytest.mark.parametrize("action,shown", [
    ("('move', [1, 2])", "[1, 2]"), ("('move', 5)", "5"), ("('move', [1, 2, 'a'])", "[1, 2, 'a']"),
    ("('move', [[1], [2], [3]])", "[[1], [2], [3]]"), ("('move', None)", "None"),
    ("('move', [0, 0, 'nan'])", "[0, 0, 'nan']"),
    # Non-finite values (a deliberate deviation: the reference accepted them).
    ("('move', [1e999, 0, 0])", "[inf, 0, 0]"), ("('move', [0, 0, -1e999])", "[0, 0, -inf]"),
    ("('move', ['inf', 0, 0])", "['inf', 0, 0]"), ("('move', [1e39, 0, 0])", "[1e+39, 0, 0]"),
])
def test_invalid_move_payloads_change_nothing(action, shown):
    env = _env()
    env.reset(seeds=[1])
    before = env.state_dicts()
    frame = env.frames.copy()
    _, reward, terminated, _, info = env.step([action])
    assert info["feedback"][0] == (f"The action {shown} is not in the valid action space of move "
                                   "so nothing is executed.")
    assert env.state_dicts() == before and not terminated[0] and reward[0] == 0
    np.testing.assert_array_equal(env.frames, frame)


def test_integer_too_large_for_a_float_is_an_invalid_payload():
    env = _env()
    env.reset(seeds=[1])
    before = env.state_dicts()
    _, _, _, _, info = env.step(["('move', [1" + "0" * 400 + ", 0, 0])"])
    assert "is not in the valid action space of move" in info["feedback"][0]
    assert env.state_dicts() == before


@pytest.mark.parametrize("payload,ok", [("'stop'", True), ("'ok'", True), ("'1'", True),
                                        ("'DONE'", True), ("'stop!'", False), ("''", False),
                                        ("'st p'", False), ("5", False), ("'stopp'", False)])
def test_stop_accepts_one_to_four_alphanumerics(payload, ok):
    env = _env()
    env.reset(seeds=[1])
    _, _, terminated, _, info = env.step([f"('stop', {payload})"])
    assert bool(terminated[0]) == ok
    if not ok:
        assert info["feedback"][0].endswith("is not in the valid action space of stop so nothing "
                                            "is executed.")


def test_unknown_action_name_feedback():
    env = _env()
    env.reset(seeds=[1])
    _, _, _, _, info = env.step(["('rotate', [0, 0, 10])"])
    assert info["feedback"][0] == ("The action name 'rotate' is not recognized in the available "
                                   "action space.")


# ---------------------------------------------------------------------------- dynamics
def test_move_adds_payload_times_scale_in_unit_coordinates():
    """One unit of dx moves the midpoint s unit coordinates, i.e. s*s canvas px (quirk 1, kept)."""
    env = _loaded(BASE)
    env.step(["('move', [1.5, -2, 0])"])
    d = env.state_dicts()[0]
    assert d["initial_mid"] == [10.0 + 1.5 * 2.0, 10.0 - 2 * 2.0]
    canvas_shift = (d["initial_mid"][0] - 10.0) * 2.0
    assert canvas_shift == 1.5 * 2.0 ** 2


def test_positive_dy_moves_up_and_positive_dtheta_turns_counter_clockwise():
    env = _loaded({**BASE, "initial_ang": 0.0})
    frame0 = env.frames[0].copy()
    env.step(["('move', [0, 3, 0])"])
    blue = (env.frames[0, :, :, 2] > 200) & (env.frames[0, :, :, 0] < 60)
    blue0 = (frame0[:, :, 2] > 200) & (frame0[:, :, 0] < 60)
    assert np.nonzero(blue)[0].mean() < np.nonzero(blue0)[0].mean() - 15  # higher on screen
    env.step(["('move', [0, 0, 45])"])
    ys, xs = np.nonzero((env.frames[0, :, :, 2] > 200) & (env.frames[0, :, :, 0] < 60))
    # Counter-clockwise on screen: the right end is higher (smaller row) than the left end.
    assert np.corrcoef(xs, ys)[0, 1] < -0.9


def test_heading_wraps_modulo_360():
    env = _loaded(BASE)
    env.step(["('move', [0, 0, 300])"])
    assert env.state_dicts()[0]["initial_ang"] == 40.0
    env.step(["('move', [0, 0, -50])"])
    assert env.state_dicts()[0]["initial_ang"] == 350.0
    env.step(["('move', [0, 0, -350])"])
    assert env.state_dicts()[0]["initial_ang"] == 0.0


def test_midpoint_clips_to_the_canvas():
    env = _loaded(BASE)
    env.step(["('move', [1000, -1000, 0])"])
    assert env.state_dicts()[0]["initial_mid"] == [100 / 2.0, 0.0]
    env = _loaded(BASE, canvas_size=[120, 120])
    env.step(["('move', [-1e30, 1e30, 0])"])
    assert env.state_dicts()[0]["initial_mid"] == [0.0, 120 / 2.0]


def test_invalid_actions_and_steps_after_stop_follow_the_reference():
    env = _loaded(BASE)
    env.step([STOP])
    _, _, terminated, _, info = env.step(["('move', [1, 0, 0])"])
    assert not terminated[0] and info["feedback"][0] == "Action executed successfully."
    assert env.state_dicts()[0]["initial_mid"] == [12.0, 10.0]


# ---------------------------------------------------------------------------- success
def _stop_reward(init, env_id=HARD):
    env = _loaded(init, env_id)
    _, reward, terminated, _, info = env.step([STOP])
    assert terminated[0]
    assert bool(info["success"][0]) == (reward[0] == 1.0)
    return float(reward[0])


def test_success_radius_is_in_canvas_px():
    """|mid - target| * s <= pos_tolerance (the prompt's px); the reference compared the unit
    distance, so these two cases flip relative to it."""
    # 4 units apart at s = 3: 12 canvas px > 10 (reference: 4 <= 10, success).
    assert _stop_reward({"scale": 3.0, "target_mid": [10.0, 10.0], "target_ang": 0.0,
                         "initial_mid": [14.0, 10.0], "initial_ang": 0.0}, EASY) == 0.0
    # 15 units apart at s = 0.5: 7.5 canvas px <= 10 (reference: 15 > 10, failure).
    assert _stop_reward({"scale": 0.5, "target_mid": [10.0, 10.0], "target_ang": 0.0,
                         "initial_mid": [10.0, 25.0], "initial_ang": 0.0}, EASY) == 1.0
    # Inclusive boundary: exactly 5 px on hard.
    assert _stop_reward({"scale": 1.0, "target_mid": [10.0, 10.0], "target_ang": 0.0,
                         "initial_mid": [13.0, 14.0], "initial_ang": 0.0}) == 1.0


@pytest.mark.parametrize("ang,target,ok", [(100.0, 95.0, True), (100.0, 90.0, True),
                                           (100.0, 89.0, False), (10.0, 185.0, True),
                                           (359.0, 1.0, True), (0.0, 170.5, True),
                                           (45.0, 135.0, False)])
def test_angle_error_is_modulo_180_inclusive(ang, target, ok):
    init = {"scale": 1.0, "target_mid": [10.0, 10.0], "target_ang": target,
            "initial_mid": [10.0, 10.0], "initial_ang": ang}
    assert _stop_reward(init) == (1.0 if ok else 0.0)


# ---------------------------------------------------------------------------- frames
def _colour_masks(frame):
    f = frame.astype(int)
    blue = (f[..., 2] > 200) & (f[..., 0] < 80) & (f[..., 1] < 80)
    red = (f[..., 0] > 200) & (f[..., 2] < 80) & (f[..., 1] < 80)
    return blue, red


def test_frame_layout_white_margins_and_axes_frame():
    """400x400, white outside the axes box, the 2 pt black frame as the reference draws it:
    opaque row 48 and column 50, grey 27 on row 49, row 355, columns 51 and 359, grey 2 where
    two of those cross."""
    env = _loaded({**BASE, "initial_mid": [25.0, 25.0], "target_mid": [20.0, 30.0]})
    f = env.frames[0]
    assert f.shape == (400, 400, 3)
    x0, y0, x1, y1 = AXES_BOX
    assert (f[:y0] == 255).all() and (f[y1:] == 255).all()
    assert (f[:, :x0] == 255).all() and (f[:, x1:] == 255).all()
    assert (f[y0, x0:x1] == 0).all() and (f[y0 + 1:y1, x0] == 0).all()
    assert (f[y0 + 1, x0 + 2:x1 - 1] == 27).all() and (f[y1 - 1, x0 + 2:x1 - 1] == 27).all()
    assert (f[y0 + 2:y1 - 1, x0 + 1] == 27).all() and (f[y0 + 2:y1 - 1, x1 - 1] == 27).all()
    for r in (y0 + 1, y1 - 1):
        for c in (x0 + 1, x1 - 1):
            assert tuple(f[r, c]) == (2, 2, 2)
    blue, red = _colour_masks(f)
    assert blue.sum() > 150 and red.sum() > 80


def test_sticks_are_drawn_where_the_state_says():
    init = {"scale": 2.0, "target_mid": [10.0, 40.0], "target_ang": 0.0,
            "initial_mid": [40.0, 10.0], "initial_ang": 90.0}
    env = _loaded(init)
    blue, red = _colour_masks(env.frames[0])
    # Blue: vertical stick at canvas (80, 20): image x = 50 + 3.1 * 80 = 298, rows around
    # 356 - 3.08 * 20 = 294.4, spanning 20 canvas px = 61.6 image px plus projecting caps.
    ys, xs = np.nonzero(blue)
    assert abs(xs.mean() - 298) < 1 and abs(ys.mean() - 294.4) < 1.5
    assert 61 <= ys.max() - ys.min() + 1 <= 68 and xs.max() - xs.min() + 1 <= 5
    # Red: horizontal dashed stick at canvas (20, 80): x = 112, y = 109.6, about 62 px long.
    ys, xs = np.nonzero(red)
    assert abs(ys.mean() - 109.6) < 1.5 and 58 <= xs.max() - xs.min() + 1 <= 63
    row = red[int(round(ys.mean()))]
    runs = np.diff(np.flatnonzero(np.diff(np.r_[0, row.astype(int), 0])))
    on, off = runs[0::2], runs[1::2]
    assert len(on) == 5 and all(9 <= r <= 11 for r in on[:-1]) and all(4 <= r <= 5 for r in off)


def test_sticks_are_clipped_to_the_axes_box():
    init = {"scale": 1.0, "target_mid": [100.0, 50.0], "target_ang": 0.0,
            "initial_mid": [0.0, 0.0], "initial_ang": 45.0}
    env = _loaded(init)
    f = env.frames[0]
    x0, y0, x1, y1 = AXES_BOX
    assert (f[:, x1:] == 255).all() and (f[y1:] == 255).all() and (f[:, :x0] == 255).all()
    blue, red = _colour_masks(f)
    assert red.any() and (np.nonzero(red)[1] < x1).all()
    env.step(["('move', [5, 5, 0])"])  # the redrawn tile is clipped the same way
    assert (env.frames[0, :, x1:] == 255).all() and (env.frames[0, y1:] == 255).all()


@pytest.mark.parametrize("kwargs", [{"canvas_size": [120, 120]},
                                    {"stick_length": 300, "canvas_size": [100, 50]}])
def test_tile_redraw_equals_a_full_redraw_on_other_canvases(kwargs):
    """Other canvases and sticks longer than the canvas (clipped tiles; the presets are in the
    contract test): after every step the tiles redrawn equal frames drawn from scratch."""
    env = _env(HARD, 24, **kwargs)
    env.reset(seeds=range(24))
    rng = np.random.default_rng(0)
    for _ in range(25):
        actions = [f"('move', [{rng.normal(0, 4):.2f}, {rng.normal(0, 4):.2f}, "
                   f"{rng.normal(0, 60):.1f}])" if rng.random() < 0.8 else "junk"
                   for _ in range(24)]
        env.step(actions)
        assert_frames_equal_a_full_redraw(env)


def test_canvas_size_sets_the_data_limits():
    """With canvas_size (120, 120) the axes show [0, 120] x [0, 120]: a midpoint at canvas
    (60, 60) is drawn at the centre of the axes box."""
    init = {"scale": 1.0, "target_mid": [5.0, 5.0], "target_ang": 0.0,
            "initial_mid": [60.0, 60.0], "initial_ang": 0.0}
    env = _loaded(init, canvas_size=[120, 120])
    blue, _ = _colour_masks(env.frames[0])
    ys, xs = np.nonzero(blue)
    assert abs(xs.mean() - 205) < 1 and abs(ys.mean() - 202) < 1
    assert 51 <= xs.max() - xs.min() + 1 <= 58  # 20 canvas px * 310 / 120 + caps


# ---------------------------------------------------------------------------- prompt
@pytest.mark.parametrize("env_id,pos,ang", [(EASY, 10, 15), (HARD, 5, 10)])
def test_prompt_states_the_tolerances_and_grammar(env_id, pos, ang):
    env = _env(env_id)
    env.reset(seeds=[0])
    text = env.prompt()
    assert f"within {pos}px and {ang}° of the target" in text
    assert "`('move', [dx, dy, dθ])`" in text and "`('stop', 'stop')`" in text
    assert "*unknown* scale" in text
    with pytest.raises(ValueError, match="text_mode"):
        env.prompt(text_mode=True)


def test_no_text_rendering():
    env = _env()
    env.reset(seeds=[0])
    with pytest.raises(ValueError):
        env.render_text()


# ---------------------------------------------------------------------------- solvers
@pytest.mark.parametrize("strategy,num_steps,moves", [
    (None, None, 5), ("unit_first", 1, 2), ("unit_first", 2, 2), ("unit_first", 8, 8),
    ("stochastic", None, 5), ("stochastic", 3, 3), ("stochastic", 6, 6), ("stochastic", 1, 1),
])
@pytest.mark.parametrize("env_id,kwargs", [(HARD, {}), (HARD, {"canvas_size": [120, 120]}),
                                           (EASY, {})])
def test_every_solver_strategy_succeeds(strategy, num_steps, moves, env_id, kwargs):
    env = _env(env_id, 200, **kwargs)
    env.reset(seeds=range(200))
    plans = env.solve(strategy=strategy, num_steps=num_steps)
    assert all(len(p) == moves + 1 and p[-1] == STOP for p in plans)
    result = run_plans(env, plans)
    assert result.terminated.all() and (result.reward == 1).all()


def test_unit_first_moves_are_shrinking_unit_steps_then_one_correction():
    env = _env(HARD, 20)
    env.reset(seeds=range(20))
    for plan in env.solve():
        payloads = [eval(a[9:-1]) for a in plan[:-1]]  # noqa: S307 (our own plan strings)
        for i, (dx, dy, dth) in enumerate(payloads[:4]):
            assert dth == 0.0 and max(abs(dx), abs(dy)) == 4 - i
            assert {abs(dx), abs(dy)} <= {0.0, 4.0 - i}
        for value in payloads[4]:
            assert round(value, 1) == value
        assert -90 < payloads[4][2] <= 90


def test_unit_first_survives_moves_into_the_canvas_edge():
    """The reference's plan broke when a unit move clipped (quirk 4); ours simulates the clip.
    Target next to the right edge, stick just left of it: a 4-unit move overshoots and clips."""
    init = {"scale": 2.9, "target_mid": [34.0, 10.0], "target_ang": 10.0,
            "initial_mid": [33.0, 10.0], "initial_ang": 0.0}
    env = _loaded(init)
    plan = env.solve()[0]
    for action in plan:
        _, reward, terminated, _, _ = env.step([action])
    assert terminated[0] and reward[0] == 1.0


def test_stochastic_plans_depend_on_the_episode_seed_only():
    a = _env(HARD, 3)
    a.reset(seeds=[5, 6, 7])
    b = _env(HARD, 1)
    b.reset(seeds=[6])
    assert a.solve("stochastic", 4)[1] == b.solve("stochastic", 4)[0]
    assert a.solve("stochastic", 4) == a.solve("stochastic", 4)


def test_goal_state_is_where_the_default_solver_ends():
    env = _env(HARD, 8)
    env.reset(seeds=range(8))
    goal = env.goal_frames()
    plans = env.solve()
    for t in range(len(plans[0]) - 1):
        env.step([p[t] for p in plans])
    np.testing.assert_array_equal(env.frames, goal)
    assert env.success().all()


def test_stepping_a_plan_reaches_the_goal_pose_exactly():
    """The planners simulate the float64 payloads the parser stores, so the goal pose is the
    stepped pose to the last bit."""
    env = _env(EASY, 64)
    env.reset(seeds=range(64))
    goal = env.family.goal_state(copy_state(env.state))
    plans = env.solve()
    for t in range(len(plans[0]) - 1):
        env.step([p[t] for p in plans])
    np.testing.assert_array_equal(env.state.mid, goal.mid)
    np.testing.assert_array_equal(env.state.ang, goal.ang)


# ---------------------------------------------------------------------------- validation
@pytest.mark.parametrize("field,value", [
    ("scale", 0.0), ("scale", -1.0), ("scale", "2"), ("scale", float("nan")), ("scale", True),
    ("target_mid", [1.0]), ("target_mid", [1.0, float("inf")]), ("target_mid", "ab"),
    ("target_ang", None), ("initial_mid", [1.0, 2.0, 3.0]), ("initial_mid", [1.0, "x"]),
    ("initial_ang", float("nan")), ("initial_ang", [1.0]),
])
def test_bad_init_state_fields_are_named(field, value):
    env = _env(HARD, 2)
    env.reset(seeds=[1, 2])
    before = env.state_dicts()
    with pytest.raises(ValueError, match=rf"init_states\[1\]\.{field}"):
        env.reset(init_states=[BASE, {**BASE, field: value}])
    assert env.state_dicts() == before


def test_init_state_round_trips_and_accepts_integers():
    env = _loaded({"scale": 2, "target_mid": [20, 30], "target_ang": 30,
                   "initial_mid": [10, 10], "initial_ang": 100})
    d = env.state_dicts()[0]
    assert d == {"scale": 2.0, "target_mid": [20.0, 30.0], "target_ang": 30.0,
                 "initial_mid": [10.0, 10.0], "initial_ang": 100.0}
    env.step(["('move', [1, 1, 1])"])
    assert env.state_dicts()[0]["initial_mid"] == [12.0, 12.0]


@pytest.mark.parametrize("kwargs,field", [
    ({"pos_tolerance": -1}, "pos_tolerance"), ({"ang_tolerance": "10"}, "ang_tolerance"),
    ({"canvas_size": [100]}, "canvas_size"), ({"canvas_size": [0, 100]}, "canvas_size"),
    ({"stick_length": 0}, "stick_length"), ({"stick_length": float("inf")}, "stick_length"),
    ({"scale_range": (3.0, 0.3)}, "scale_range"), ({"scale_range": (0, 1)}, "scale_range"),
    ({"pos_tolerance": True}, "pos_tolerance"),
])
def test_bad_params_are_named(kwargs, field):
    with pytest.raises(ValueError, match=field):
        visgym.make(EASY, **kwargs)


def test_params_are_hashable_with_list_canvas_size():
    params = MatchstickRotationParams(canvas_size=[120, 120])
    assert params.canvas_size == (120, 120) and hash(params) == hash(
        MatchstickRotationParams(canvas_size=(120, 120)))


def test_random_action_samples_are_valid_moderate_moves():
    from visgym.bridges.gym import ActionText

    env = _env()
    space = ActionText(env.grammar, seed=0)
    for _ in range(200):
        action = space.sample()
        assert space.contains(action)
        if "move" in action:
            assert all(math.isfinite(v) for v in eval(action[9:-1]))  # noqa: S307


@pytest.mark.parametrize("kwargs,message", [
    ({"canvas_size": (1e-300, 1e-300)}, r"canvas_size\[0\]: must be >= 0\.001"),
    ({"canvas_size": (1e7, 100)}, r"canvas_size\[0\]: must be <= 1000000"),
    ({"canvas_size": (100, 0.01)}, r"stick_length: must be <= 100 x the smaller side"),
    ({"stick_length": 1e-300}, r"stick_length: must be >= 0\.001"),
    ({"scale_range": (1e-300, 1.0)}, r"scale_range\[0\]: must be >= 0\.001"),
    ({"scale_range": (1.0, 1e300)}, r"scale_range\[1\]: must be <= 1000"),
    ({"pos_tolerance": 1e300}, r"pos_tolerance: must be <= 1000000"),
    ({"ang_tolerance": 181}, r"ang_tolerance: must be <= 180"),
])
def test_params_outside_their_physical_range_fail_at_construction_naming_the_field(kwargs,
                                                                                   message):
    """canvas_size=(1e-300, 1e-300) used to pass construction and fail at reset with
    "Maximum allowed dimension exceeded" (a dash list of 1e302 entries), naming nothing."""
    with pytest.raises(ValueError, match=message):
        visgym.make(EASY, **kwargs)


def test_params_at_the_corners_of_their_ranges_reset_step_and_solve():
    """Within the bounds nothing overflows: plans are finite float32 moves, frames are drawn,
    the tile redraw equals a full redraw (solving can fail at large scales, as the reference's
    0.1-unit rounding cannot aim finer than 0.05 s^2 canvas px)."""
    for kwargs in ({"canvas_size": (1e-3, 1e-3), "stick_length": 0.1,
                    "scale_range": (1e-3, 1e3)},
                   {"canvas_size": (1e-3, 1e6), "stick_length": 0.1,
                    "scale_range": (1e-3, 1e-3)},
                   {"canvas_size": (1e6, 1e6), "stick_length": 1e-3, "scale_range": (1e3, 1e3),
                    "pos_tolerance": 1e6, "ang_tolerance": 180}):
        env = _env(EASY, 4, **kwargs)
        env.reset(seeds=range(4))
        with np.errstate(all="raise"):
            plans = env.solve()
            run_plans(env, plans)
        assert all(np.isfinite(eval(a[9:-1])).all() for p in plans for a in p[:-1])  # noqa: S307
        assert_frames_equal_a_full_redraw(env, f"after a plan with {kwargs}")


def test_params_are_coerced_and_integer_tolerances_stay_integers_in_the_prompt():
    params = visgym.make(EASY, canvas_size=[np.int64(120), 120], pos_tolerance=np.int32(7),
                         ang_tolerance=12.5, scale_range=[1, 2]).params
    assert params.canvas_size == (120.0, 120.0) and type(params.canvas_size[0]) is float
    assert params.scale_range == (1.0, 2.0) and type(params.pos_tolerance) is int
    env = _env(EASY, canvas_size=[120, 120], pos_tolerance=np.int32(7), ang_tolerance=12.5)
    env.reset(seeds=[0])
    assert "within 7px and 12.5° of the target" in env.prompt()


@pytest.mark.parametrize("field,value,message", [
    ("scale", 1e300, r"scale: must be <= 1000"), ("scale", 1e-300, r"scale: must be >= 0\.001"),
    ("target_mid", [1e300, 1.0], r"target_mid: \[1e\+300, 1\.0\] lies outside the canvas"),
    ("initial_mid", [-0.5, 1.0], r"initial_mid: \[-0\.5, 1\.0\] lies outside the canvas"),
    ("initial_mid", [10.0, 50.5], r"initial_mid: .* within \[0, 50\] x \[0, 50\]"),
    ("target_ang", 1e300, r"target_ang: must be <= 360"),
    ("initial_ang", -361.0, r"initial_ang: must be >= -360"),
    pytest.param("initial_ang", 10**5000, r"initial_ang: an integer of about 5001 digits is "
                 r"too large", id="initial_ang-huge-int"),
])
def test_nonsense_init_states_are_refused(field, value, message):
    """A scale of 1e300 (unit moves of 1e600 px, midpoints of 1e-298) used to load silently, as
    did midpoints outside the canvas and headings of 1e300 degrees."""
    env = _env(HARD, 2)
    env.reset(seeds=[1, 2])
    before = env.state_dicts()
    with pytest.raises(ValueError, match=rf"init_states\[1\]\.{message}"):
        env.reset(init_states=[BASE, {**BASE, field: value}])
    assert env.state_dicts() == before


def test_init_states_on_the_canvas_edge_and_full_turns_load():
    edge = {"scale": 2.0, "target_mid": [50.0, 0.0], "target_ang": 360.0,
            "initial_mid": [0.0, 50.0], "initial_ang": -360.0}
    env = _loaded(edge)
    env.step(["('move', [100, 100, 0])"])   # clipped to the corner, which reloads as well
    again = _loaded(env.state_dicts()[0])
    assert again.state_dicts() == env.state_dicts()
