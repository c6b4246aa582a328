"""The contract every registered env id fulfils (one shared test, as Pgx's api_test).

Seeding, determinism, batch independence, init-state round trips, the step budget, auto-reset
semantics, and robustness to arbitrary action text. Parametrized over ``visgym.list_envs()`` so
each new family is held to it automatically.
"""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import visgym
from visgym.core.grammar import OK

ENV_IDS = visgym.list_envs()


def _random_actions(env, rng, n):
    from visgym.bridges.gym import ActionText

    space = ActionText(env.grammar, seed=int(rng.integers(2**31)))
    return [space.sample() for _ in range(n)]


def _states_equal(a, b):
    return all(np.array_equal(x, y) for x, y in zip(a, b))


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_episode_depends_only_on_its_seed(env_id):
    """Seed 1234 stepped alone and at position 37 of a batch of 64 gives identical frames and
    states at every step."""
    rng = np.random.default_rng(0)
    alone = visgym.make(env_id, num_envs=1, autoreset="disabled", max_steps=None)
    batch = visgym.make(env_id, num_envs=64, autoreset="disabled", max_steps=None)
    seeds = list(range(5000, 5064))
    seeds[37] = 1234
    f1, _ = alone.reset(seeds=[1234])
    f64, _ = batch.reset(seeds=seeds)
    np.testing.assert_array_equal(f1[0], f64[37])
    plan = alone.solve()[0]
    actions = _random_actions(alone, rng, 12) + plan
    others = _random_actions(batch, rng, 64 * len(actions))
    for t, action in enumerate(actions):
        batch_actions = others[64 * t: 64 * (t + 1)]
        batch_actions[37] = action
        f1, r1, term1, _, info1 = alone.step([action])
        f64, r64, term64, _, info64 = batch.step(batch_actions)
        np.testing.assert_array_equal(f1[0], f64[37])
        assert r1[0] == r64[37] and term1[0] == term64[37]
        assert info1["feedback"][0] == info64["feedback"][37]
        assert alone.state_dicts()[0] == batch.state_dicts()[37]


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_reset_is_deterministic_and_seeds_differ(env_id):
    env = visgym.make(env_id, num_envs=8)
    a, _ = env.reset(seeds=range(8))
    a = a.copy()
    b, _ = env.reset(seeds=range(8))
    np.testing.assert_array_equal(a, b)
    states = [str(d) for d in env.state_dicts()]
    assert len(set(states)) > 1


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_unseeded_resets_follow_the_env_seed(env_id):
    a = visgym.make(env_id, num_envs=4, seed=7)
    b = visgym.make(env_id, num_envs=4, seed=7)
    fa, _ = a.reset()
    fb, _ = b.reset()
    np.testing.assert_array_equal(fa, fb)
    first = fa.copy()
    fa, _ = a.reset()
    assert not np.array_equal(first, fa)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_state_dicts_round_trip(env_id):
    """reset(init_states=state_dicts()) rebuilds the same episodes, mid-episode too."""
    rng = np.random.default_rng(1)
    env = visgym.make(env_id, num_envs=6, autoreset="disabled", max_steps=None)
    env.reset(seeds=range(100, 106))
    for _ in range(5):
        env.step(_random_actions(env, rng, 6))
    dicts = env.state_dicts()
    frames = env.frames.copy()
    state = [a.copy() for a in env.state]
    other = visgym.make(env_id, num_envs=6)
    f2, _ = other.reset(init_states=dicts)
    np.testing.assert_array_equal(frames, f2)
    assert other.state_dicts() == dicts
    assert env.solve() == other.solve()
    assert _states_equal(state, env.state)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_solver_plans_succeed_and_leave_the_episode_alone(env_id):
    env = visgym.make(env_id, num_envs=16, autoreset="disabled", max_steps=None)
    env.reset(seeds=range(16))
    before = [a.copy() for a in env.state]
    plans = env.solve()
    assert _states_equal(before, env.state)
    longest = max(len(p) for p in plans)
    got = np.zeros(16)
    done = np.zeros(16, bool)
    for t in range(longest):
        _, reward, terminated, _, _ = env.step([p[min(t, len(p) - 1)] for p in plans])
        got += np.where(done, 0, reward)
        done |= terminated
    assert done.all() and (got == 1).all()


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_step_budget_truncates(env_id):
    budget = visgym.core.spec(env_id).default_max_steps
    env = visgym.make(env_id, num_envs=2, autoreset="disabled")
    env.reset(seeds=[1, 2])
    bad = ["not an action"] * 2
    for t in range(1, budget):
        _, _, terminated, truncated, info = env.step(bad)
        assert not truncated.any() and not terminated.any()
        assert (info["step"] == t).all()
    _, _, terminated, truncated, _ = env.step(bad)
    assert truncated.all() and not terminated.any()


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_next_step_autoreset(env_id):
    """After an episode ends, the next step ignores its action, starts a new episode (reset
    frame, zero reward, step 0, empty feedback) and leaves the other episodes alone."""
    env = visgym.make(env_id, num_envs=2)
    env.reset(seeds=[3, 4])
    stop = "('stop', 'stop')"
    _, _, terminated, _, _ = env.step([stop, "junk"])
    assert terminated.tolist() == [True, False]
    seed_before = int(env.seeds[0])
    frames, reward, terminated, truncated, info = env.step([stop, "junk"])
    assert not terminated[0] and reward[0] == 0 and info["step"][0] == 0
    assert info["feedback"][0] == ""
    assert info["step"][1] == 2
    assert int(env.seeds[0]) != seed_before
    fresh = visgym.make(env_id, num_envs=1)
    f_fresh, _ = fresh.reset(seeds=[int(env.seeds[0])])
    np.testing.assert_array_equal(frames[0], f_fresh[0])


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_env_does_not_lock_after_stop_without_autoreset(env_id):
    env = visgym.make(env_id, num_envs=1, autoreset="disabled")
    env.reset(seeds=[5])
    env.step(["('stop', 'stop')"])
    _, _, terminated, _, info = env.step(["('stop', 'stop')"])
    assert terminated[0] and info["step"][0] == 2


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_step_writes_into_the_env_buffers(env_id):
    env = visgym.make(env_id, num_envs=3)
    frames0, _ = env.reset(seeds=[1, 2, 3])
    frames1, reward, *_ = env.step(["x"] * 3)
    assert frames0 is frames1 is env.frames and reward is env.reward


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_goal_frames_show_a_solved_configuration(env_id):
    env = visgym.make(env_id, num_envs=4, autoreset="disabled", max_steps=None)
    env.reset(seeds=range(4))
    goal = env.goal_frames()
    plans = env.solve()
    for t in range(max(len(p) for p in plans)):
        # Step every plan up to (not including) its stop, then compare with the goal frames.
        env.step([p[t] if t < len(p) - 1 else "('noop', 0)" for p in plans])
    np.testing.assert_array_equal(env.frames, goal)


def test_bad_arguments_name_the_field():
    env_id = ENV_IDS[0]
    cases = [
        (dict(num_envs=0), "num_envs"),
        (dict(max_steps=0), "max_steps"),
        (dict(autoreset="same_step"), "autoreset"),
        (dict(seed=-1), "seed"),
        (dict(no_such_param=1), "no_such_param"),
    ]
    for kwargs, field in cases:
        with pytest.raises(ValueError, match=field):
            visgym.make(env_id, **kwargs)
    with pytest.raises(ValueError, match="env_id"):
        visgym.make("no_such/env")
    env = visgym.make(env_id, num_envs=2)
    with pytest.raises(RuntimeError, match="reset"):
        env.step(["x", "x"])
    with pytest.raises(ValueError, match="seeds"):
        env.reset(seeds=[1])
    with pytest.raises(ValueError, match=r"seeds\[1\]"):
        env.reset(seeds=[1, -5])
    with pytest.raises(ValueError, match="init_states"):
        env.reset(init_states=[{}])
    env.reset(seeds=[1, 2])
    with pytest.raises(ValueError, match="actions"):
        env.step("('stop', 'stop')")
    with pytest.raises(ValueError, match="actions"):
        env.step(["x"])
    with pytest.raises(ValueError, match="strategy"):
        env.solve(strategy="no_such_strategy")
    with pytest.raises(ValueError, match="num_steps"):
        env.solve(num_steps=0)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_bad_init_state_changes_nothing(env_id):
    env = visgym.make(env_id, num_envs=2)
    env.reset(seeds=[1, 2])
    good = env.state_dicts()
    frames = env.frames.copy()
    broken = dict(good[1])
    broken.pop(sorted(broken)[0])
    with pytest.raises(ValueError, match=r"init_states\[1\]"):
        env.reset(init_states=[good[0], broken])
    assert env.state_dicts() == good
    np.testing.assert_array_equal(env.frames, frames)


HOSTILE = [
    "", " ", "\x00", "('stop', 'stop'\x00)", "(" * 100_000, "[" * 5000 + "]" * 5000,
    "a" * 1_000_000, "('move', " + "9" * 10_000 + ")", "('stop', '" + "\u00e9" * 10 + "')",
    "('\ud800', 1)", "𝔰𝔱𝔬𝔭", "((('stop', 'stop'),),)", "{'stop': 'stop'}", "__import__('os')",
    "('stop', 'stop') ; import os", "('move', float('inf'))", "('move', 1e999)", "\n" * 1000,
    "('move', [1" + "0" * 400 + ", 0, 0])", "('move', [1e999, 0, 0])", "('move', ['nan', 0, 0])",
]


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_hostile_text_never_raises_changes_or_terminates(env_id):
    env = visgym.make(env_id, num_envs=1, max_steps=None)
    env.reset(seeds=[9])
    before = env.state_dicts()
    frame = env.frames.copy()
    for text in HOSTILE:
        if env.grammar.parse_one(text)[3] == OK:
            continue
        _, reward, terminated, truncated, info = env.step([text])
        assert not terminated[0] and reward[0] == 0 and not truncated[0]
        assert info["feedback"][0]
        assert env.state_dicts() == before
        np.testing.assert_array_equal(env.frames, frame)


@pytest.mark.parametrize("env_id", ENV_IDS)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.one_of(
    st.text(max_size=200),
    st.text(alphabet="()[]{}'\",:0123456789-+.jeEbxstopmveSTOP \t\n\\", max_size=60),
    st.builds(lambda n, s: "(" * n + s + ")" * n, st.integers(0, 300), st.text(max_size=20)),
))
def test_arbitrary_text_never_raises_changes_or_terminates(env_id, text):
    env = _shared_env(env_id)
    if env.grammar.parse_one(text)[3] == OK:
        return
    before = env.state_dicts()
    _, reward, terminated, _, info = env.step([text])
    assert not terminated[0] and reward[0] == 0
    assert isinstance(info["feedback"][0], str) and info["feedback"][0]
    assert env.state_dicts() == before


_ENVS = {}


def _shared_env(env_id):
    if env_id not in _ENVS:
        env = visgym.make(env_id, num_envs=1, max_steps=None)
        env.reset(seeds=[11])
        _ENVS[env_id] = env
    return _ENVS[env_id]


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_masked_step_and_row_reset_leave_other_episodes_alone(env_id):
    """step(active=...) advances only the active episodes; reset(rows=...) restarts only those
    rows. Both are what the evaluation runner uses to share one BatchEnv among episodes."""
    env = visgym.make(env_id, num_envs=3, autoreset="disabled")
    env.reset(seeds=[1, 2, 3])
    plans = env.solve()
    before = env.state_dicts()
    frames = env.frames.copy()
    active = np.array([True, False, True])
    _, reward, terminated, _, info = env.step([plans[0][0], None, plans[2][0]], active=active)
    assert env.state_dicts()[1] == before[1]
    np.testing.assert_array_equal(env.frames[1], frames[1])
    assert info["step"].tolist() == [1, 0, 1] and info["feedback"][1] == ""
    solo = visgym.make(env_id, num_envs=1)
    solo.reset(seeds=[1])
    solo.step([plans[0][0]])
    assert solo.state_dicts()[0] == env.state_dicts()[0]
    row2 = env.state_dicts()[2]
    env.reset(rows=[0], seeds=[9])
    fresh = visgym.make(env_id, num_envs=1)
    fresh.reset(seeds=[9])
    assert env.state_dicts()[0] == fresh.state_dicts()[0]
    np.testing.assert_array_equal(env.frames[0], fresh.frames[0])
    assert env.state_dicts()[2] == row2 and env.steps.tolist() == [0, 0, 1]
    env.reset(rows=[1], init_states=[fresh.state_dicts()[0]])
    assert env.state_dicts()[1] == fresh.state_dicts()[0]
    with pytest.raises(ValueError, match="rows"):
        env.reset(rows=[3])
    with pytest.raises(ValueError, match="active"):
        env.step(["x"] * 3, active=[1, 0, 1])
