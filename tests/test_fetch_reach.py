"""fetch_reach behaves as spec/envs/fetch_reach.md says (and the shared Fetch machinery as both
Fetch specs say): settling, goal and camera sampling, grammar and feedback, mocap control,
blocked gripper, success on stop, frames, prompt, oracle, init-state and params validation."""
import numpy as np
import pytest

import visgym
from visgym.core.batch_env import BatchEnv
from visgym.core.family import FAMILY_BASE, copy_state
from visgym.core.registry import make_family
from visgym.core.rollout import run_plans
from visgym.core.rollout import run_plans

ENV = "fetch_reach/easy"


def _env(n=1, **kw):
    return visgym.make(ENV, num_envs=n, autoreset="disabled", max_steps=None, **kw)


def test_settled_grip_matches_the_reference():
    env = _env()
    env.reset(seeds=[0])
    np.testing.assert_allclose(env.family.scene.initial_grip, (1.34183, 0.74910, 0.53473),
                               atol=2e-4)
    np.testing.assert_allclose(env.state.grip[0], env.family.scene.initial_grip, atol=1e-5)


def test_goals_and_cameras_lie_in_the_reference_boxes():
    env = _env(200)
    env.reset(seeds=range(200))
    off = env.state.goal - env.family.scene.initial_grip
    assert (np.abs(off) <= 0.15).all() and np.abs(off).max() > 0.14
    cam = env.state.camera
    assert (np.abs(cam[:, 0] - 132) <= 10).all() and (np.abs(cam[:, 1] + 14) <= 10).all()
    assert (np.abs(cam[:, 2] - 1.75) <= 0.1).all()
    assert (np.abs(cam[:, 3:] - (1.3, 0.75, 0.55)) <= 0.1).all()


def test_move_displaces_the_grip_about_three_centimetres_per_unit():
    env = _env()
    env.reset(seeds=[1])
    start = env.state.grip[0].copy()
    env.step(["('move', [1, 0, 0])"])
    first = env.state.grip[0] - start
    assert 0.028 < first[0] < 0.033 and np.abs(first[1:]).max() < 0.002
    env.step(["('move', [0.5, 0, 0])"])
    half = env.state.grip[0, 0] - start[0] - first[0]
    assert 0.012 < half < 0.02


def test_blocked_gripper_keeps_fingers_at_zero():
    env = _env()
    env.reset(seeds=[2])
    for _ in range(3):
        env.step(["('move', [0, 0, -1])"])
    assert np.abs(env.state.fingers[0]).max() < 1e-12


@pytest.mark.parametrize("action, fragment", [
    ("('move', [2, 0, 0])", "The action [2, 0, 0] is not in the valid action space of move"),
    ("('move', [1, 0])", "The action [1, 0] is not in the valid action space of move"),
    ("('move', [float('nan'), 0, 0])", "Cannot parse action string"),
    ("('move', [1e999, 0, 0])", "not in the valid action space of move"),
    ("('stop', 'stop!')", "The action stop! is not in the valid action space of stop"),
    ("('gripper', 0)", "The action name 'gripper' is not recognized"),
])
def test_invalid_actions_give_feedback_and_run_no_physics(action, fragment):
    env = _env()
    env.reset(seeds=[3])
    before = env.state.phys.copy()
    _, reward, term, _, info = env.step([action])
    assert fragment in info["feedback"][0]
    assert not term[0] and reward[0] == 0
    np.testing.assert_array_equal(env.state.phys, before)


def test_fractional_and_bool_payloads_are_accepted():
    env = _env()
    env.reset(seeds=[3])
    for action in ("('move', [0.25, -0.5, 0])", "('move', [True, 0, False])",
                   "('move', (1, 0, 0))"):
        _, _, _, _, info = env.step([action])
        assert info["feedback"][0] == "Action executed successfully."


def test_stop_rewards_only_success_and_runs_no_physics():
    env = _env(2)
    env.reset(seeds=[0, 1])
    env.state.goal[0] = env.state.grip[0] + (0.0, 0.0, 0.099)
    env.state.goal[1] = env.state.grip[1] + (0.0, 0.0, 0.101)
    before = env.state.phys.copy()
    _, reward, term, _, info = env.step(["('stop', 'ok')"] * 2)
    assert reward.tolist() == [1.0, 0.0] and term.all()
    np.testing.assert_array_equal(env.state.phys, before)


def test_diverged_simulation_resets_the_episode_with_feedback(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # MuJoCo writes its warning log (MUJOCO_LOG.TXT) to the cwd
    env = _env(2)
    env.reset(seeds=[0, 1])
    start = env.state.phys.copy()
    env.state.phys[0, env.family.scene.ofs_qvel] = np.nan
    _, _, _, _, info = env.step(["('move', [1, 0, 0])"] * 2)
    assert "unstable" in info["feedback"][0]
    assert info["feedback"][1] == "Action executed successfully."
    np.testing.assert_array_equal(env.state.phys[0], start[0])
    assert np.isfinite(env.state.phys).all()
    assert env.family.feedback_texts[0].startswith("The simulation became unstable")
    assert FAMILY_BASE == 16


def test_frames_show_two_views_background_and_red_target():
    env = _env()
    frames, _ = env.reset(seeds=[0])
    assert frames.shape == (1, 480, 960, 3)
    assert (frames[0, 2, 2] == (114, 219, 145)).all()
    red = (frames[0, ..., 0] > 150) & (frames[0, ..., 1] < 60) & (frames[0, ..., 2] < 60)
    assert red[:, :480].sum() > 10
    single = _env(use_follow_camera=False)
    f1, _ = single.reset(seeds=[0])
    assert f1.shape == (1, 480, 480, 3)
    np.testing.assert_array_equal(f1[0], frames[0, :, :480])


def test_frames_are_redrawn_only_when_physics_ran():
    env = _env()
    frames, _ = env.reset(seeds=[0])
    first = frames.copy()
    env.step(["junk"])
    np.testing.assert_array_equal(env.frames, first)
    env.step(["('move', [0, 0, 1])"])
    assert not np.array_equal(env.frames, first)


def test_prompt_facts():
    env = _env()
    env.reset(seeds=[0])
    text = env.prompt()
    assert "('move', [x, y, z])" in text and "('stop', 'stop')" in text
    assert "red target marker" in text and "Feedback" not in text


def test_oracle_reaches_the_marker_in_a_few_multi_axis_moves():
    env = _env(100)
    env.reset(seeds=range(100))
    plans = env.solve()
    # Multi-axis, fractional moves: at most 7 actions (stop included) on these seeds.
    assert all(len(p) <= 7 for p in plans), max(len(p) for p in plans)
    assert any("0." in a for p in plans for a in p)
    result = run_plans(env, plans)
    assert result.solved.all()
    dist = np.linalg.norm(env.state.grip - env.state.goal, axis=1)
    # Stopped at the marker, except for goals below the lowest grip height (~0.415 m).
    reachable = env.state.goal[:, 2] > 0.42
    assert (dist[reachable] < 0.02).all() and (dist < 0.05).all()


def test_oracle_plans_parse_to_the_floats_they_were_planned_with():
    env = _env(8)
    env.reset(seeds=range(8))
    plans = env.solve()
    replay = _env(8)
    replay.reset(seeds=range(8))
    run_plans(replay, plans)
    goal = env.family.goal_state(copy_state(env.state))
    np.testing.assert_array_equal(replay.state.phys, goal.phys)


def test_batch_stepping_is_identical_to_single_stepping():
    a = _env(5)
    a.reset(seeds=range(5))
    b = _env(1)
    b.reset(seeds=[3])
    for action in ("('move', [1, 1, 0])", "('move', [0, 0, -1])"):
        a.step([action] * 5)
        b.step([action])
    np.testing.assert_array_equal(a.state.phys[3], b.state.phys[0])


def test_reference_init_state_loads_and_sim_state_is_optional():
    env = _env()
    env.reset(init_states=[{"goal_pos": [1.3, 0.7, 0.5], "camera_config": None}])
    assert env.state.camera[0].tolist() == [132.0, -14.0, 1.75, 1.3, 0.75, 0.55]
    np.testing.assert_allclose(env.state.grip[0], env.family.scene.initial_grip, atol=1e-5)


@pytest.mark.parametrize("field, value", [
    ("goal_pos", [1, 2]), ("goal_pos", "x"), ("camera_config", {"azimuth": 1}),
    ("camera_config", 3), ("sim_state", [0.0, 1.0]), ("gripper_cmd", 2),
])
def test_bad_init_state_fields_are_named(field, value):
    env = _env()
    env.reset(seeds=[0])
    good = env.state_dicts()[0]
    with pytest.raises(ValueError, match=rf"init_states\[0\]\.{field}"):
        env.reset(init_states=[{**good, field: value}])


@pytest.mark.parametrize("field, value, fragment", [
    ("sim_state", "huge", r"sim_state\[\d+\]: must be within"),
    ("sim_state", "nan", r"sim_state: expected finite numbers"),
    ("sim_state", "text", r"sim_state: expected real numbers"),
    ("goal_pos", [1.3, 0.7, 1e308], r"goal_pos\[2\]: must be <= 10"),
    ("camera_config", "far", r"camera_config\.distance: must be <= 100"),
    ("camera_config", "lookat", r"camera_config\.lookat\[0\]: must be >= -10"),
])
def test_finite_but_absurd_init_values_are_refused_and_nothing_changes(field, value, fragment):
    env = _env(2)
    env.reset(seeds=[0, 1])
    good = env.state_dicts()
    bad = dict(good[1])
    if field == "sim_state":
        sim_state = list(bad["sim_state"])
        sim_state[env.family.scene.ofs_qpos + 3] = {"huge": 1e308, "nan": float("nan"),
                                                    "text": "1"}[value]
        bad["sim_state"] = sim_state
    elif field == "camera_config":
        cam = dict(bad["camera_config"])
        if value == "far":
            cam["distance"] = 1e300
        else:
            cam["lookat"] = [-1e300, 0.0, 0.0]
        bad["camera_config"] = cam
    else:
        bad[field] = value
    before = [a.copy() for a in env.state]
    frames = env.frames.copy()
    with pytest.raises(ValueError, match=rf"init_states\[1\]\.{fragment}"):
        env.reset(init_states=[good[0], bad])
    # The first, valid row was not applied either.
    assert all(np.array_equal(a, b) for a, b in zip(before, env.state))
    np.testing.assert_array_equal(env.frames, frames)
    with pytest.raises(ValueError, match=rf"init_states\[1\]\.{fragment}"):
        env.family.load_rows(env.state, np.array([0, 1]), [good[0], bad])
    assert all(np.array_equal(a, b) for a, b in zip(before, env.state))


def test_one_family_instance_serves_two_batch_envs():
    shared = make_family(ENV)
    envs = [BatchEnv(shared, n, max_steps=None) for n in (2, 5)]
    alone = [BatchEnv(make_family(ENV), n, max_steps=None) for n in (2, 5)]
    for k in range(2):
        for env in (envs[k], alone[k]):
            env.reset(seeds=range(10 * k, 10 * k + env.num_envs))
    for t, action in enumerate(["('move', [1, 0, -1])", "('move', [0, -0.5, 1])",
                                "('move', [-1, 1, 0])", "('move', [0, 0, 1])"]):
        k = t % 2
        for env in (envs[k], alone[k]):
            env.step([action] * env.num_envs)
        for j in range(2):
            np.testing.assert_array_equal(envs[j].frames, alone[j].frames,
                                          err_msg=f"env {j} after step {t}")
    goal = envs[1].goal_frames()
    assert goal.shape == envs[1].frames.shape and goal.any()
    np.testing.assert_array_equal(goal, alone[1].goal_frames())


@pytest.mark.parametrize("kwargs, field", [
    (dict(distance_threshold=0), "distance_threshold"), (dict(width=3), "width"),
    (dict(backend="gpu"), "backend"), (dict(renderer="gl"), "renderer"),
    (dict(reward_type="x"), "reward_type"), (dict(follow_cam_elevation=95), "follow_cam_elevation"),
    (dict(camera_base_lookat=[1, 2]), "camera_base_lookat"),
])
def test_bad_params_are_named(kwargs, field):
    with pytest.raises(ValueError, match=field):
        visgym.make(ENV, **kwargs)


def test_reference_keywords_are_accepted():
    env = visgym.make(ENV, reward_type="sparse", render_mode="rgb_array", use_follow_camera=True,
                      follow_cam_azimuth=200.0, follow_cam_elevation=-65.0,
                      follow_cam_distance=0.36, camera_default_distance=1.75)
    env.reset(seeds=[0])


@pytest.mark.parametrize("field", ["distance_threshold", "follow_cam_distance",
                                   "follow_cam_azimuth", "camera_jitter_azimuth",
                                   "camera_jitter_elevation", "camera_jitter_distance",
                                   "camera_jitter_lookat", "camera_default_azimuth",
                                   "camera_default_distance"])
@pytest.mark.parametrize("value", [10**30, 2**63, 1e300, -1e300, float("nan"), "1", None])
def test_camera_and_jitter_keywords_are_checked_at_construction(field, value):
    """Huge Python ints and floats used to pass construction and fail at reset inside Numba
    (TypingError) or the camera ("target: must differ from eye"), naming nothing."""
    with pytest.raises(ValueError, match=f"^{field}"):
        visgym.make("fetch_reach/easy", num_envs=1, **{field: value})


def test_numeric_keywords_are_stored_as_floats():
    env = visgym.make("fetch_reach/easy", num_envs=1, camera_default_azimuth=100,
                      camera_base_lookat=[1, 1, 1])
    assert type(env.params.camera_default_azimuth) is float
    assert env.params.camera_base_lookat == (1.0, 1.0, 1.0)
