"""BatchEnv's own checks: sizes refused up front, with the field named."""
import numpy as np
import pytest

import visgym


@pytest.mark.parametrize("num_envs", [2**63, 10**7])
def test_a_batch_too_large_for_memory_is_refused_up_front(num_envs):
    with pytest.raises(ValueError, match=r"num_envs: .* GiB"):
        visgym.make("maze_2d/easy", num_envs=num_envs)


@pytest.mark.parametrize("num_envs", [0, -1, True, 2.0, "4", None])
def test_num_envs_must_be_a_positive_integer(num_envs):
    with pytest.raises(ValueError, match="num_envs"):
        visgym.make("maze_2d/easy", num_envs=num_envs)


def _deep(n):
    value = 0
    for _ in range(n):
        value = [value]
    return value


@pytest.mark.parametrize("kwargs,field", [
    ({"max_steps": _deep(5000)}, "max_steps"), ({"seed": _deep(5000)}, "seed"),
    ({"seed": -1}, "seed"), ({"autoreset": __import__("numpy").zeros(3)}, "autoreset"),
    ({"num_envs": _deep(5000)}, "num_envs"),
])
def test_bad_constructor_values_are_named_with_a_bounded_quote(kwargs, field):
    with pytest.raises(ValueError, match=f"^{field}") as err:
        visgym.make("maze_2d/easy", **kwargs)
    assert len(str(err.value)) < 300


@pytest.mark.parametrize("call,field", [
    (lambda env: env.reset(init_states=(d for d in [{}])), "init_states"),
    (lambda env: env.reset(init_states=5), "init_states"),
    (lambda env: env.reset(rows=[_deep(5000)]), "rows"),
    (lambda env: env.reset(rows=["a"]), "rows"),
    (lambda env: env.reset(seeds=[_deep(5000), 1]), "seeds"),
    (lambda env: env.solve(rows=["a"]), "rows"),
    (lambda env: env.solve(num_steps=10**12), "num_steps"),
])
def test_bad_call_arguments_are_named(call, field):
    env = visgym.make("maze_2d/easy", num_envs=2)
    env.reset(seeds=[1, 2])
    with pytest.raises(ValueError, match=f"^{field}") as err:
        call(env)
    assert len(str(err.value)) < 300


def test_a_refused_reset_does_not_advance_the_seed_sequence():
    """reset() without seeds draws from the env's seed sequence; a call refused for a bad init
    state must not have drawn, or the next episodes would differ from an env that never saw it."""
    a = visgym.make("maze_2d/easy", num_envs=1, seed=7)
    b = visgym.make("maze_2d/easy", num_envs=1, seed=7)
    with pytest.raises(ValueError):
        a.reset(init_states=[{"maze_map": "nonsense"}])
    a.reset()
    b.reset()
    assert a.seeds.tolist() == b.seeds.tolist()
    assert a.state_dicts() == b.state_dicts()


@pytest.mark.parametrize("env_id", ["maze_2d/easy", "jigsaw/hard", "sliding_block/easy"])
def test_goal_frames_of_a_family_without_goal_state_replay_the_solver(env_id, monkeypatch):
    """goal_state is optional: without it, goal frames are where the solver's plans end (as
    the evaluation's final-goal image is made); for these families both give the same frames."""
    from visgym.core.family import Family

    env = visgym.make(env_id, num_envs=3)
    env.reset(seeds=[5, 6, 7])
    exact = env.goal_frames().copy()
    monkeypatch.setattr(type(env.family), "goal_state", Family.goal_state)
    replayed = env.goal_frames()
    np.testing.assert_array_equal(replayed, exact)
    assert env.goal_frame_hw.tolist() == env.frame_hw.tolist()
