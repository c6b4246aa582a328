"""The gymnasium face: registration, the single env (reference methods, check_env) and the
vector env."""
import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import visgym
from visgym.bridges.gym import ActionText, VisGymVectorEnv


@pytest.mark.parametrize("env_id", visgym.list_envs())
def test_every_id_is_registered_with_gymnasium(env_id):
    assert env_id in gymnasium.registry


@pytest.mark.parametrize("env_id", visgym.list_envs())
def test_single_env_passes_check_env(env_id):
    env = gymnasium.make(env_id)
    check_env(env.unwrapped)


def test_single_env_offers_the_reference_methods():
    env = gymnasium.make("maze_2d/easy").unwrapped
    obs, info = env.reset(seed=3)
    assert obs.shape == (225, 225, 3) and obs.dtype == np.uint8
    init = env.get_init_state()
    assert set(init) == {"maze_map", "agent_location", "target_location"}
    assert "9x9 maze" in env.get_prompt()
    plan = env.solve()
    assert plan[-1] == "('stop', 'stop')"
    for action in plan:
        obs, reward, terminated, truncated, info = env.step(action)
    assert terminated and reward == 1.0 and info["success"]
    assert env.env_feedback == "Action executed successfully."
    obs2, _ = env.reset(init_state=init)
    assert env.get_init_state() == init
    np.testing.assert_array_equal(env.render(), obs2)


def test_ansi_render_mode_and_text_prompt():
    env = gymnasium.make("maze_2d/hard", render_mode="ansi").unwrapped
    env.reset(seed=0)
    text = env.render()
    assert isinstance(text, str) and text.count("\n") == 12
    assert "'#'" in env.get_prompt()


def test_single_env_built_directly_truncates_at_the_budget_unless_disabled():
    from visgym.bridges.gym import VisGymEnv

    env = VisGymEnv("maze_2d/easy")
    env.reset(seed=0)
    for _ in range(19):
        assert not env.step("nope")[3]
    assert env.step("nope")[3]
    env = VisGymEnv("maze_2d/easy", max_steps=None)
    env.reset(seed=0)
    assert not any(env.step("nope")[3] for _ in range(50))


def test_action_space_samples_valid_actions_deterministically():
    space = ActionText(visgym.make("maze_2d/easy").grammar, seed=5)
    samples = [space.sample() for _ in range(50)]
    assert all(space.contains(s) for s in samples)
    assert not space.contains("('move', 9)") and not space.contains(3)
    again = ActionText(visgym.make("maze_2d/easy").grammar, seed=5)
    assert samples == [again.sample() for _ in range(50)]


def test_make_vec_gives_a_next_step_autoreset_vector_env():
    envs = gymnasium.make_vec("maze_2d/easy", num_envs=4, vectorization_mode="vector_entry_point")
    assert isinstance(envs.unwrapped, VisGymVectorEnv)
    obs, info = envs.reset(seed=0)
    assert obs.shape == (4, 225, 225, 3)
    obs, reward, terminated, truncated, info = envs.step(["('stop', 'stop')"] * 4)
    assert terminated.all() and reward.shape == (4,)
    assert list(info["feedback"]) == ["Action executed successfully."] * 4 and info["_feedback"].all()
    obs, reward, terminated, truncated, info = envs.step(["('move', 0)"] * 4)
    assert not terminated.any() and (info["step"] == 0).all()
    envs.close()


def test_reset_options_init_state_through_the_wrappers():
    """gymnasium's wrappers take reset(seed=, options=) only: the init state travels in options."""
    env = gymnasium.make("maze_2d/easy")
    env.reset(seed=3)
    env.step("('move', 0)")
    init = env.unwrapped.get_init_state()
    other = gymnasium.make("maze_2d/easy")
    obs, _ = other.reset(seed=99, options={"init_state": init})
    assert other.unwrapped.get_init_state() == init
    np.testing.assert_array_equal(obs, env.unwrapped.render())


def test_budget_is_gymnasiums_time_limit():
    env = gymnasium.make("maze_2d/easy")
    assert env.spec.max_episode_steps == 20
    assert gymnasium.make("maze_2d/hard").spec.max_episode_steps == 30
    env.reset(seed=0)
    flags = [env.step("('move', 0)")[3] for _ in range(20)]
    assert flags == [False] * 19 + [True]
    longer = gymnasium.make("maze_2d/easy", max_episode_steps=25)
    longer.reset(seed=0)
    assert not any(longer.step("('move', 0)")[3] for _ in range(24))
    assert longer.step("('move', 0)")[3]


def test_vector_env_keeps_the_registered_budget():
    envs = gymnasium.make_vec("maze_2d/easy", num_envs=2, vectorization_mode="vector_entry_point")
    envs.reset(seed=0)
    flags = [envs.step(["('move', 0)"] * 2)[3] for _ in range(20)]
    assert not any(f.any() for f in flags[:19]) and flags[19].all()


@pytest.mark.timeout(120)
def test_async_vector_env():
    envs = gymnasium.make_vec("maze_2d/easy", num_envs=2, vectorization_mode="async")
    try:
        obs, _ = envs.reset(seed=0)
        assert obs.shape == (2, 225, 225, 3)
        _, reward, terminated, truncated, info = envs.step(["('move', 0)", "('stop', 'stop')"])
        assert not terminated[0] and terminated[1]
    finally:
        envs.close()
