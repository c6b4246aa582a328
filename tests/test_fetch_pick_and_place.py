"""fetch_pick_and_place behaves as spec/envs/fetch_pick_and_place.md says: object and goal
sampling, the sticky gripper command, finger timing, success on the cube's position, prompt,
frames and the staged oracle."""
import numpy as np
import pytest

import visgym
from visgym.core.rollout import run_plans
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


def test_staged_oracle_fits_the_easy_budget_on_100_seeds():
    env = visgym.make(ENV, num_envs=100, autoreset="disabled")   # the 20-step budget
    env.reset(seeds=range(100))
    plans = env.solve()
    lengths = np.array([len(p) for p in plans])
    assert np.median(lengths) <= 14, np.median(lengths)
    result = run_plans(env, plans)
    assert result.solved.mean() >= 0.95, result.solved.mean()
    # Every plan that fits the budget succeeds (the replay equals the oracle's own rollout).
    assert result.solved[lengths <= 20].all()


def test_oracle_picks_up_from_a_mid_episode_state():
    """The oracle's stage comes from the state: a held cube is carried on, an open gripper is
    not opened again, a closed one that holds nothing is opened first."""
    env = _env(1)
    env.reset(seeds=[5])
    plan = env.solve()[0]
    assert plan[0] == "('gripper', 0)"
    close = plan.index("('gripper', 1)")
    for t, action in enumerate(plan[:close + 3]):
        env.step([action])
        rest = env.solve()[0]
        if t == 0:
            assert "('gripper', 0)" not in rest
        if t >= close + 1:
            assert "('gripper', 0)" not in rest and "('gripper', 1)" not in rest
        assert run_plans(_copy(env), [rest]).solved.all(), (t, rest)


def _copy(env):
    other = _env(env.num_envs)
    other.reset(init_states=env.state_dicts())
    return other
