"""mental_rotation_3d_cube against its specification (spec/envs/mental_rotation_3d_cube.md):
presets and frames of reference, shape generation, the rotate grammar, object- and world-frame
dynamics, success, rendering, solvers in both frames, and hostile init states."""
import json
import math

import numpy as np
import pytest

import visgym
from rotation_checks import make_env, rx, ry, rz
from visgym.kernels.polycube import AXES
from visgym.kernels.rotations import (CUBE_CODEC, OBJAVERSE_CODEC, axis_angle_from_matrix,
                                      euler_szyx_from_matrix, euler_szyx_matrix,
                                      geodesic_angle, matrix_from_axis_angle, plan_payloads)

EASY = "mental_rotation_3d_cube/easy"
HARD = "mental_rotation_3d_cube/hard"
STRATEGIES = ("pad3_by-axis", "by-axis", "axis-angle", "pad1_axis-angle", "pad3_axis-angle",
              "pad1_by-axis", "axis-angle-random", "pad3_axis-angle-random")


def _env(env_id=EASY, n=1, **kwargs):
    return make_env(env_id, n, **kwargs)


def _with_rot(env, rot, i=0):
    init = env.state_dicts()[i]
    init["current_rot"] = np.asarray(rot, float).tolist()
    return init


# ----------------------------------------------------------------------------- presets
def test_presets_are_the_harness_world_frame_with_4_and_6_segments():
    easy, hard = _env(EASY).family.params, _env(HARD).family.params
    assert (easy.action_frame, easy.num_segments) == ("world", 4)
    assert (hard.action_frame, hard.num_segments) == ("world", 6)
    assert easy.angle_tol == hard.angle_tol == pytest.approx(math.radians(10))
    assert visgym.make(EASY).max_steps == 20 and visgym.make(HARD).max_steps == 30


def test_registered_object_frame_is_one_keyword_away_and_the_prompt_says_which():
    world = _env(EASY)
    obj = _env(EASY, action_frame="object")
    world.reset(seeds=[0])
    obj.reset(seeds=[0])
    assert "world (extrinsic) axes" in world.prompt()
    assert "object's local (intrinsic) axes" in obj.prompt()
    assert "within 10.0 degrees" in obj.prompt()
    with pytest.raises(ValueError, match="action_frame"):
        _env(EASY, action_frame="camera")


@pytest.mark.parametrize("kwargs, field", [
    (dict(num_segments=0), "num_segments"), (dict(length_range=(3, 2)), "length_range"),
    (dict(image_size=(128, 64)), "image_size"), (dict(angle_tol=-0.1), "angle_tol"),
    (dict(cube_size=0), "cube_size"), (dict(angle_tol=float("nan")), "angle_tol")])
def test_bad_params_name_the_field(kwargs, field):
    with pytest.raises(ValueError, match=field):
        _env(EASY, **kwargs)


# ----------------------------------------------------------------------------- generation
def test_shapes_follow_the_generation_rules_and_are_seeded():
    env = _env(HARD, 64)
    env.reset(seeds=range(64))
    again = _env(HARD, 64)
    again.reset(seeds=range(64))
    assert env.state_dicts() == again.state_dicts()
    counts = []
    for d in env.state_dicts():
        lens, dirs = d["shape_state"]["seg_lens"], d["shape_state"]["dir_indices"]
        assert len(lens) == len(dirs) == 6 and all(2 <= v <= 5 for v in lens)
        prev = 0  # segment 0 runs along +x
        for k in dirs:
            assert k // 2 != prev // 2   # orthogonal to the current direction
            prev = k
        cells, pos, axis = {(0, 0, 0)}, np.zeros(3, int), 0
        for length, k in zip(lens, dirs):
            for _ in range(length):
                pos = pos + AXES[axis]
                cells.add(tuple(pos))
            axis = k
        counts.append(len(cells))
        for name in ("secret_yaw", "secret_pitch", "secret_roll"):
            assert 0 <= d[name] < 2 * math.pi
        np.testing.assert_allclose(
            d["current_rot"], euler_szyx_matrix(d["secret_yaw"], d["secret_pitch"],
                                                d["secret_roll"]), atol=1e-15)
    assert len(set(map(str, env.state_dicts()))) == 64
    n_cells = env.state.n_cells
    assert list(n_cells) == counts
    assert 10 <= np.mean(counts) <= 31


def test_cells_are_distinct_and_start_at_the_origin():
    env = _env(HARD, 32)
    env.reset(seeds=range(32))
    for b in range(32):
        n = env.state.n_cells[b]
        cells = env.state.cells[b, :n]
        assert tuple(cells[0]) == (0, 0, 0)
        assert len({tuple(c) for c in cells}) == n
        assert (env.state.cells[b, n:] == 0).all()


# ----------------------------------------------------------------------------- grammar
@pytest.mark.parametrize("action", [
    "('rotate', ['nan', 0, 0])", "('rotate', [' NaN', 0, 0])", "('rotate', [1e999, 0, 0])",
    "('rotate', ['inf', 0, 0])", "('rotate', [180.0001, 0, 0])", "('rotate', [0, -181, 0])",
    "('rotate', [0, 0])", "('rotate', [0, 0, 0, 0])", "('rotate', 'abc')", "('rotate', 90)",
    "('rotate', [[1, 2, 3]])", "('rotate', ['a', 0, 0])", "('rotate', None)",
    "('rotate', {'a': 1})", "('rotate', [1" + "0" * 400 + ", 0, 0])"])
def test_bad_payloads_are_invalid_and_change_nothing(action):
    env = _env()
    env.reset(seeds=[3])
    before = env.state_dicts()
    frames = env.frames.copy()
    _, reward, terminated, _, info = env.step([action])
    assert "is not in the valid action space of rotate so nothing is executed." in \
        info["feedback"][0]
    assert env.state_dicts() == before and not terminated[0] and reward[0] == 0
    np.testing.assert_array_equal(env.frames, frames)


@pytest.mark.parametrize("action, payload", [
    ("('rotate', [180, -180, 0])", (180, -180, 0)), ("('rotate', ['15', '0', '0'])", (15, 0, 0)),
    ("('rotate', (True, False, 0))", (1, 0, 0)), ("  ('rotate', [1.5, 2.5, -3.5])\n", (1.5, 2.5, -3.5)),
    ("('rotate', [180.00000001, 0, 0])", (180, 0, 0))])
def test_accepted_payloads_rotate_by_their_float32_value(action, payload):
    env = _env()
    env.reset(seeds=[4])
    rot = np.array(env.state_dicts()[0]["current_rot"])
    _, _, _, _, info = env.step([action])
    assert info["feedback"][0] == "Action executed successfully."
    rad = np.deg2rad(np.asarray(payload, np.float32)).astype(float)
    want = euler_szyx_matrix(*rad) @ rot
    np.testing.assert_allclose(env.state_dicts()[0]["current_rot"], want, atol=1e-12)


def test_stop_payloads():
    env = _env()
    env.reset(seeds=[5])
    for ok in ("'stop'", "'ok'", "'STOP'", "'1'", '"done"'):
        _, _, terminated, _, info = env.step([f"('stop', {ok})"])
        assert terminated[0], ok
    for bad in ("'stop!'", "''", "5", "None", "b'stop'", "'st p'", "'stops'"):
        _, _, terminated, _, info = env.step([f"('stop', {bad})"])
        assert not terminated[0], bad
        assert "not in the valid action space of stop" in info["feedback"][0]


# ----------------------------------------------------------------------------- dynamics
@pytest.mark.parametrize("frame", ["object", "world"])
def test_frames_compose_as_specified(frame):
    env = _env(action_frame=frame)
    env.reset(seeds=[6])
    rot = np.array(env.state_dicts()[0]["current_rot"])
    a, b, c = 30.0, -45.0, 60.0
    env.step([f"('rotate', [{a}, {b}, {c}])"])
    inc = rx(math.radians(c)) @ ry(math.radians(b)) @ rz(math.radians(a))
    want = rot @ inc if frame == "object" else inc @ rot
    np.testing.assert_allclose(env.state_dicts()[0]["current_rot"], want, atol=1e-6)


def test_yaw_is_about_the_object_z_axis_in_the_object_frame():
    env = _env(action_frame="object")
    env.reset(seeds=[7])
    env.reset(init_states=[_with_rot(env, np.eye(3))])
    env.step(["('rotate', [90, 0, 0])"])
    np.testing.assert_allclose(env.state_dicts()[0]["current_rot"], rz(math.pi / 2), atol=1e-6)


def test_success_is_the_geodesic_angle_within_the_tolerance():
    env = _env(n=4)
    env.reset(seeds=range(4))
    angles = [math.radians(v) for v in (0.0, 9.9, 10.1, 180.0)]
    axis = np.array([1.0, 2.0, -0.5]) / np.linalg.norm([1.0, 2.0, -0.5])
    inits = [_with_rot(env, matrix_from_axis_angle(axis, t), i) for i, t in enumerate(angles)]
    env.reset(init_states=inits)
    np.testing.assert_allclose(env.family.rotation_error(env.state), angles, atol=1e-7)
    _, reward, terminated, _, _ = env.step(["('stop', 'stop')"] * 4)
    assert terminated.all() and list(reward) == [1.0, 1.0, 0.0, 0.0]


def test_a_symmetric_look_does_not_count_only_the_identity():
    """A planar snake turned 180 degrees about the axis normal to its plane may look alike;
    it scores 0."""
    env = _env()
    env.reset(seeds=[8])
    env.reset(init_states=[_with_rot(env, rz(math.pi))])
    _, reward, terminated, _, _ = env.step(["('stop', 'stop')"])
    assert terminated[0] and reward[0] == 0.0


def test_no_truncation_from_the_family_and_steps_after_stop_continue():
    env = _env()
    env.reset(seeds=[9])
    env.step(["('stop', 'stop')"])
    _, _, terminated, truncated, info = env.step(["('rotate', [1, 2, 3])"])
    assert not terminated[0] and not truncated[0]
    assert info["feedback"][0] == "Action executed successfully."


# ----------------------------------------------------------------------------- rendering
def test_frames_are_two_256_views_with_a_fixed_left_view():
    env = _env(n=2)
    frames, _ = env.reset(seeds=[10, 11])
    assert frames.shape == (2, 256, 512, 3)
    left = frames[:, :, :256].copy()
    for t in range(3):
        before = frames[:, :, 256:].copy()
        frames, *_ = env.step(["('rotate', [20, 10, 5])"] * 2)
        assert (frames[:, :, 256:] != before).any(axis=(1, 2, 3)).all()
        np.testing.assert_array_equal(frames[:, :, :256], left)
    for view in (frames[:, :, :256], frames[:, :, 256:]):
        dark = (view < 250).any(axis=-1).sum(axis=(1, 2))
        assert (dark > 500).all()          # never blank
    # Unrotated (left): up-facing faces are black, side faces grey 204 (inverted shading).
    assert ((left == 0).all(axis=-1).sum(axis=(1, 2)) > 50).all()
    assert ((left == 204).all(axis=-1).sum(axis=(1, 2)) > 50).all()


def test_identity_rotation_shows_two_identical_halves():
    env = _env(HARD)
    env.reset(seeds=[12])
    frames, _ = env.reset(init_states=[_with_rot(env, np.eye(3))])
    np.testing.assert_array_equal(frames[0, :, :256], frames[0, :, 256:])


def test_goal_frames_are_nearly_the_identity_view():
    env = _env(n=3)
    env.reset(seeds=range(3))
    goal = env.goal_frames()
    diff = np.abs(goal[:, :, :256].astype(int) - goal[:, :, 256:].astype(int))
    assert diff.mean() < 2.0


def test_image_size_scales_the_views():
    env = _env(image_size=(64, 64))
    frames, _ = env.reset(seeds=[1])
    assert frames.shape == (1, 128, 256, 3)
    assert (frames[0] < 250).any()


# ----------------------------------------------------------------------------- solvers
@pytest.mark.parametrize("frame", ["object", "world"])
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_every_strategy_succeeds_in_both_frames(strategy, frame):
    env = _env(HARD, 8, action_frame=frame)
    env.reset(seeds=range(100, 108))
    plans = env.solve(strategy=strategy)
    for t in range(max(map(len, plans))):
        env.step([p[t] if t < len(p) else "('rotate', [0, 0, 0])" for p in plans])
    assert (env.family.rotation_error(env.state) < math.radians(1.0)).all()
    _, reward, _, _, _ = env.step(["('stop', 'stop')"] * 8)
    assert (reward == 1.0).all()


def test_by_axis_order_depends_on_the_frame():
    """World frame: yaw, pitch, roll (the reference's plans); object frame: roll, pitch, yaw."""
    rng = np.random.default_rng(0)
    for _ in range(20):
        rot = euler_szyx_matrix(*rng.uniform(0, 2 * np.pi, 3))
        world = plan_payloads(rot, "world", "by-axis", 3, CUBE_CODEC)
        obj = plan_payloads(rot, "object", "by-axis", 3, CUBE_CODEC)
        assert obj == world[::-1]
        assert [np.flatnonzero(p).tolist() for p in world] == [[0], [1], [2]]


def test_axis_angle_plans_commute_so_both_frames_share_them():
    env_w = _env(action_frame="world")
    env_o = _env(action_frame="object")
    env_w.reset(seeds=[13])
    env_o.reset(init_states=env_w.state_dicts())
    for strategy in ("axis-angle", "pad1_axis-angle", "pad3_axis-angle"):
        assert env_w.solve(strategy=strategy) == env_o.solve(strategy=strategy)
    plan = env_w.solve(strategy="axis-angle", num_steps=5)[0]
    assert len(plan) == 6 and len(set(plan[:5])) == 1


def test_random_split_is_deterministic_per_episode_and_has_num_steps_parts():
    env = _env(n=2)
    env.reset(seeds=[14, 14])
    a = env.solve(strategy="axis-angle-random", num_steps=4)
    assert a[0] == a[1] and len(a[0]) == 5 and len(set(a[0][:4])) > 1
    assert env.solve(strategy="axis-angle-random", num_steps=4) == a


def test_identity_plans_are_just_stop_and_unknown_strategies_raise():
    env = _env()
    env.reset(seeds=[15])
    env.reset(init_states=[_with_rot(env, np.eye(3))])
    assert env.solve(strategy="axis-angle") == [["('stop', 'stop')"]]
    assert env.solve(strategy="by-axis") == [["('stop', 'stop')"]]
    assert len(env.solve(strategy="pad3_by-axis")[0]) == 1
    with pytest.raises(ValueError, match="strategy"):
        env.solve(strategy="pad2_by-axis")


def test_rotation_helpers_round_trip():
    rng = np.random.default_rng(1)
    for _ in range(50):
        a, b, c = rng.uniform(-3, 3, 3)
        m = euler_szyx_matrix(a, b, c)
        np.testing.assert_allclose(m, rx(c) @ ry(b) @ rz(a), atol=1e-14)
        np.testing.assert_allclose(euler_szyx_matrix(*euler_szyx_from_matrix(m)), m, atol=1e-12)
        axis, angle = axis_angle_from_matrix(m)
        np.testing.assert_allclose(matrix_from_axis_angle(axis, angle), m, atol=1e-9)
        assert abs(float(geodesic_angle(m)) - angle) < 1e-12
        p = OBJAVERSE_CODEC.from_matrix(m)
        np.testing.assert_allclose(OBJAVERSE_CODEC.matrix(np.array(p)), m, atol=1e-12)
    half_turn = matrix_from_axis_angle(np.array([0.0, 0.6, 0.8]), math.pi)
    axis, angle = axis_angle_from_matrix(half_turn)
    np.testing.assert_allclose(matrix_from_axis_angle(axis, angle), half_turn, atol=1e-9)


# ----------------------------------------------------------------------------- init states
@pytest.mark.parametrize("mutate, field", [
    (lambda d: d.update(current_rot=[[1, 0, 0], [0, 1, 0], [0, 0, 1.01]]), "current_rot"),
    (lambda d: d.update(current_rot=[[1, 0, 0], [0, 1, 0], [0, 0, -1]]), "current_rot"),
    (lambda d: d.update(current_rot=[[float("nan")] * 3] * 3), "current_rot"),
    (lambda d: d.update(current_rot=[[1, 0], [0, 1]]), "current_rot"),
    (lambda d: d.update(current_rot="identity"), "current_rot"),
    (lambda d: d.update(secret_yaw=float("inf")), "secret_yaw"),
    (lambda d: d["shape_state"].update(seg_lens=[2, 3]), "seg_lens"),
    (lambda d: d["shape_state"].update(seg_lens=[2, 3, 4, 99]), "seg_lens"),
    (lambda d: d["shape_state"].update(dir_indices=[0, 2, 6, 1]), "dir_indices"),
    (lambda d: d["shape_state"].update(dir_indices=[0, 2, 1.5, 1]), "dir_indices"),
    (lambda d: d.pop("shape_state"), "shape_state")])
def test_hostile_init_states_raise_naming_the_field_and_change_nothing(mutate, field):
    env = _env(n=2)
    env.reset(seeds=[16, 17])
    good = env.state_dicts()
    frames = env.frames.copy()
    bad = json.loads(json.dumps(good[1]))
    mutate(bad)
    with pytest.raises(ValueError, match=rf"init_states\[1\].*{field}"):
        env.reset(init_states=[good[0], bad])
    assert env.state_dicts() == good
    np.testing.assert_array_equal(env.frames, frames)


def test_init_states_round_trip_through_json():
    env = _env(HARD, 4)
    env.reset(seeds=range(4))
    env.step(["('rotate', [12.5, -33, 170])"] * 4)
    dicts = json.loads(json.dumps(env.state_dicts()))
    other = _env(HARD, 4)
    frames, _ = other.reset(init_states=dicts)
    assert other.state_dicts() == env.state_dicts()
    np.testing.assert_array_equal(frames, env.frames)


def test_threaded_painter_equals_the_serial_one():
    """Batches of PARALLEL_MIN_ITEMS or more views are painted on the thread pool; every view
    equals the one painted alone."""
    from visgym.render import painter3d

    n = painter3d.PARALLEL_MIN_ITEMS * 2
    env = _env(HARD, n)
    frames, _ = env.reset(seeds=range(300, 300 + n))
    for b in range(n):
        solo = _env(HARD, 1)
        f, _ = solo.reset(seeds=[300 + b])
        np.testing.assert_array_equal(f[0], frames[b])
