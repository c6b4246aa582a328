"""fetch_pick_and_place behaves as spec/envs/fetch_pick_and_place.md says: object and goal
sampling, the sticky gripper command, finger timing, success on the cube's position, prompt,
frames and the staged oracle."""
import numpy as np
import pytest

import visgym
from visgym.core.rollout import run_plans

ENV = "fetch_pick_and_place/easy"


def _env(n=1, **kw):
    return visgym.make(ENV, num_envs=n, autoreset="disabled", max_steps=None, **kw)


def test_settled_constants_match_the_reference():
    sc = _env().family.scene
    np.testing.assert_allclose(sc.initial_grip, (1.34193, 0.74910, 0.53472), atol=2e-4)
    assert abs(sc.height_offset - 0.42470) < 5e-4


def test_objects_keep_their_distance_and_goals_are_on_the_table_or_in_the_air():
    env = _env(300)
    env.reset(seeds=range(300))
    grip = env.family.scene.initial_grip
    d = np.linalg.norm(env.state.obj[:, :2] - grip[:2], axis=1)
    assert (d >= 0.0999).all()
    assert (np.abs(env.state.obj[:, :2] - grip[:2]) <= 0.1501).all()
    on_table = np.isclose(env.state.goal[:, 2], env.family.scene.height_offset)
    assert 0.35 < on_table.mean() < 0.65
    assert (env.state.goal[:, 2] <= env.family.scene.height_offset + 0.45).all()
    assert (np.abs(env.state.camera[:, 3:] - (1.3, 0.75, 0.55)) <= 0.2).all()


def test_gripper_is_sticky_and_starts_on_hold():
    env = _env()
    env.reset(seeds=[0])
    env.step(["('move', [0, 0, 0])"])
    assert env.state.fingers[0].sum() < 0.005
    env.step(["('gripper', 0)"])
    assert 0.07 < env.state.fingers[0].sum() < 0.095 and env.state.gripper_cmd[0] == 1
    env.step(["('move', [0, 0, 1])"])
    assert env.state.fingers[0].sum() > 0.095
    env.step(["('gripper', True)"])
    assert env.state.gripper_cmd[0] == -1
    for _ in range(3):
        env.step(["('move', [0, 0, 0])"])
    assert env.state.fingers[0].sum() < 0.005


@pytest.mark.parametrize("action", ["('gripper', 2)", "('gripper', 1.0)", "('gripper', '0')",
                                    "('gripper', [1])", "('gripper', -1)"])
def test_bad_gripper_payloads_change_nothing(action):
    env = _env()
    env.reset(seeds=[0])
    before = env.state.phys.copy()
    _, _, _, _, info = env.step([action])
    assert "not in the valid action space of gripper" in info["feedback"][0]
    np.testing.assert_array_equal(env.state.phys, before)
    assert env.state.gripper_cmd[0] == 0


def test_success_is_judged_on_the_cube_not_the_gripper():
    env = _env(2)
    env.reset(seeds=[0, 1])
    env.state.goal[0] = env.state.obj[0] + (0.049, 0, 0)
    env.state.goal[1] = env.state.grip[1]
    _, reward, term, _, _ = env.step(["('stop', 'stop')"] * 2)
    assert reward.tolist() == [1.0, 0.0] and term.all()


def test_prompt_keeps_the_truncated_gripper_paragraph():
    env = _env()
    env.reset(seeds=[0])
    assert env.prompt().endswith("once you open or close it, ")
    assert "('gripper', 1)" in env.prompt()


def test_frames_show_the_dark_cube():
    env = _env()
    frames, _ = env.reset(seeds=[0])
    dark = (frames[0, :, :480] < 60).all(-1)
    assert dark.sum() > 20


def test_init_state_object_pos_is_required_and_loaded():
    env = _env()
    env.reset(seeds=[0])
    good = env.state_dicts()[0]
    ref = {k: good[k] for k in ("object_pos", "goal_pos", "camera_config")}
    ref["object_pos"] = [1.3, 0.9, 0.4247]
    env.reset(init_states=[ref])
    np.testing.assert_allclose(env.state.obj[0], ref["object_pos"], atol=1e-6)
    with pytest.raises(ValueError, match=r"init_states\[0\]\.object_pos"):
        env.reset(init_states=[{k: v for k, v in ref.items() if k != "object_pos"}])


def test_staged_oracle_succeeds_on_at_least_ninety_percent_of_100_seeds():
    env = _env(100)
    env.reset(seeds=range(100))
    result = run_plans(env, env.solve())
    assert result.terminated.all()
    assert result.reward.mean() >= 0.9, result.reward.mean()
