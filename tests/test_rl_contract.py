"""The RL layer's contract, over every registered id (issue 26; DESIGN.md "Tests").

Shaped rewards telescope: with ``reward="progress"`` and gamma 1, an episode's shaped return is
its sparse return plus the potential at its start less the potential at its end, and every
step's reward is its task part plus its shaping part; the potential is 0 exactly on success
states. Equal seeds give equal starts (GRPO groups). ``fork`` copies running episodes exactly.
``info["state_hash"]`` is equal for equal states in any batch position, after any history of
the row, and in another process, and different for different states.

Fetch ids (physics, large frames) run with at most 3 episodes.
"""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import visgym
from contract_checks import assert_frames_equal_a_full_redraw
from visgym.core.grammar import STOP

ENV_IDS = visgym.list_envs()


def _batch(env_id, n):
    return min(n, 3) if env_id.startswith("fetch_") else n


def _random_actions(env, rng, n, stops=False):
    from visgym.bridges.gym import ActionText

    space = ActionText(env.grammar, seed=int(rng.integers(2**31)))
    stop = env.grammar.index(STOP.name)
    out = []
    while len(out) < n:
        action = space.sample()
        if stops or env.grammar.parse_one(action)[0] != stop:
            out.append(action)
    return out


# ------------------------------------------------------------------------------ shaped rewards
@pytest.mark.parametrize("env_id", ENV_IDS)
def test_shaped_rewards_telescope_to_the_potential_difference(env_id):
    """Random then solver rollouts (rows 0..n/2 random actions, the rest the solver's plan):
    reward = task + shaping at every step; the per-episode sums telescope; the potential is 0
    exactly where a stop would be rewarded, and the solver's episodes end at potential 0."""
    n = _batch(env_id, 6)
    env = visgym.make(env_id, num_envs=n, reward="progress", autoreset="disabled",
                      max_steps=None)
    rng = np.random.default_rng(11)
    _, info = env.reset(seeds=range(300, 300 + n))
    start = env.potential()
    assert (start >= 0).all() and ((start == 0) == info["success"]).all()
    plans = env.solve()
    half = n // 2
    for b in range(half):
        plans[b] = _random_actions(env, rng, 6) + plans[b][-1:]
    shaped = np.zeros(n)
    task = np.zeros(n)
    active = np.ones(n, bool)
    end = start.copy()
    for t in range(max(len(p) for p in plans)):
        actions = [plans[b][t] if active[b] and t < len(plans[b]) else None for b in range(n)]
        stepping = active & np.array([a is not None for a in actions])
        if not stepping.any():
            break
        _, reward, terminated, truncated, info = env.step(actions, active=stepping)
        parts = info["reward_components"]
        np.testing.assert_allclose(reward, parts["task"] + parts["shaping"], rtol=0, atol=1e-6)
        assert (parts["shaping"][~stepping] == 0).all()
        shaped += np.where(stepping, reward, 0.0)
        task += np.where(stepping, parts["task"], 0.0)
        potential = env.potential()
        assert ((potential == 0) == info["success"]).all(), (
            f"step {t}: potential {potential.tolist()} success {info['success'].tolist()}")
        assert (potential >= 0).all()
        end = np.where(stepping, potential, end)
        active &= ~terminated & ~truncated
    np.testing.assert_allclose(shaped, task + start - end, rtol=1e-5, atol=1e-3)
    # The solver's rows solved their episodes: they end at the goal, potential 0.
    assert (end[half:] == 0).all() and (task[half:] == 1).all(), (end, task)


def test_gamma_discounts_the_next_potential():
    env = visgym.make("jigsaw/easy", num_envs=2, reward="progress", gamma=0.5)
    env.reset(seeds=[3, 4])
    before = env.potential()
    _, reward, _, _, info = env.step([p[0] for p in env.solve()])
    after = env.potential()
    np.testing.assert_allclose(info["reward_components"]["shaping"], before - 0.5 * after)
    np.testing.assert_allclose(reward, info["reward_components"]["task"] + before - 0.5 * after)


def test_sparse_reward_is_the_default_and_has_no_shaping():
    env = visgym.make("jigsaw/easy", num_envs=2)
    env.reset(seeds=[3, 4])
    _, reward, _, _, info = env.step([p[0] for p in env.solve()])
    assert (info["reward_components"]["shaping"] == 0).all()
    assert (reward == info["reward_components"]["task"]).all() and (reward == 0).all()


@pytest.mark.parametrize("kwargs, field", [({"reward": "dense"}, "reward"),
                                           ({"gamma": 1.5}, "gamma"),
                                           ({"gamma": "0.9"}, "gamma"),
                                           ({"state_hash": 1}, "state_hash")])
def test_bad_rl_options_name_the_field(kwargs, field):
    with pytest.raises(ValueError, match=f"^{field}:"):
        visgym.make("maze_2d/easy", **kwargs)


def test_autoreset_starts_a_new_shaping_episode():
    """An episode that ended restarts on the next step with reward 0 and no shaping, and the
    new episode's shaping starts from its own potential."""
    env = visgym.make("jigsaw/easy", num_envs=1, reward="progress")
    env.reset(seeds=[5])
    for action in env.solve()[0]:
        _, _, terminated, _, _ = env.step([action])
    assert terminated[0]
    _, reward, _, _, info = env.step(["('swap', 1, 2)"])   # ignored: the episode restarts
    assert reward[0] == 0 and info["reward_components"]["shaping"][0] == 0
    start = env.potential()[0]
    _, reward, _, _, info = env.step([env.solve()[0][0]])
    assert info["reward_components"]["shaping"][0] == start - env.potential()[0]


# ------------------------------------------------------------------------------------ groups
@pytest.mark.parametrize("env_id", ENV_IDS)
def test_equal_seeds_give_a_group_identical_starts(env_id):
    """reset(seeds=[s] * G) after other episodes ran in those rows: identical frames, frame
    sizes, prompts, state dicts and state hashes in every member of the group."""
    g = _batch(env_id, 4)
    env = visgym.make(env_id, num_envs=g)
    env.reset(seeds=range(900, 900 + g))
    env.step(_random_actions(env, np.random.default_rng(2), g))
    frames, info = env.reset(seeds=[77] * g)
    for i in range(1, g):
        np.testing.assert_array_equal(frames[i], frames[0])
    assert (info["frame_hw"] == info["frame_hw"][0]).all()
    assert len(set(env.prompts())) == 1
    dicts = [json.dumps(d, sort_keys=True) for d in env.state_dicts()]
    assert len(set(dicts)) == 1
    assert len(set(info["state_hash"].tolist())) == 1


# ------------------------------------------------------------------------------------- forks
@pytest.mark.parametrize("env_id", ENV_IDS)
def test_forked_rows_continue_exactly_like_their_source(env_id):
    """Mid-episode, row 0 is forked into every other row; stepping all rows with row 0's
    actions then gives the source's frames, rewards, flags, feedback and hashes in every row,
    equal to an unforked env running the same episode; frames equal a full redraw."""
    n = _batch(env_id, 4)
    rng = np.random.default_rng(5)
    kwargs = dict(num_envs=n, reward="progress", autoreset="disabled", max_steps=None)
    env = visgym.make(env_id, **kwargs)
    ref = visgym.make(env_id, **{**kwargs, "num_envs": 1})
    env.reset(seeds=range(40, 40 + n))
    ref.reset(seeds=[40])
    prefix = _random_actions(env, rng, 3)
    for action in prefix:
        env.step([action] + _random_actions(env, rng, n - 1))
        ref.step([action])
    env.fork([0] * (n - 1), list(range(1, n)))
    assert_frames_equal_a_full_redraw(env, "after fork")
    assert (env.state_hash() == ref.state_hash()[0]).all()
    np.testing.assert_array_equal(env.frame_hw, np.repeat(ref.frame_hw, n, axis=0))
    for action in _random_actions(env, rng, 3) + ref.solve()[0]:
        frames, reward, term, trunc, info = env.step([action] * n)
        rframes, rreward, rterm, _, rinfo = ref.step([action])
        for i in range(n):
            np.testing.assert_array_equal(frames[i], rframes[0])
        assert (reward == rreward[0]).all() and (term == rterm[0]).all()
        assert info["feedback"] == rinfo["feedback"] * n
        assert (info["state_hash"] == rinfo["state_hash"][0]).all()
        assert (info["step"] == rinfo["step"][0]).all()
        if rterm[0]:
            break
    assert_frames_equal_a_full_redraw(env, "after the forked steps")


def test_fork_checks_its_rows_and_changes_nothing_when_refused():
    env = visgym.make("maze_2d/easy", num_envs=3)
    env.reset(seeds=[1, 2, 3])
    before = env.frames.copy()
    for src, dst, field in (([0], [1, 2], "dst_rows"), ([0], [3], "rows"),
                            ([0, 0], [1, 1], "rows"), (["a"], [1], "rows")):
        with pytest.raises(ValueError, match=f"^{field}:"):
            env.fork(src, dst)
    np.testing.assert_array_equal(env.frames, before)


def test_a_row_can_be_a_source_and_a_destination():
    env = visgym.make("maze_2d/easy", num_envs=3, autoreset="disabled")
    env.reset(seeds=[1, 2, 3])
    hashes = env.state_hash()
    env.fork([1, 0], [0, 2])   # row 0 takes row 1's episode, row 2 row 0's old one
    assert env.state_hash().tolist() == [hashes[1], hashes[1], hashes[0]]


# ------------------------------------------------------------------------------ state hashes
def _canonical_rows(env):
    """Each row's canonical bytes, computed here from the definition (core/state_hash.py)."""
    family = env.family
    counts = family.live_counts(env.state)
    rows = []
    for b in range(env.num_envs):
        parts = []
        for name in env.state._fields:
            if name in family.transient_fields:
                continue
            array = getattr(env.state, name)
            row = array[b]
            count = counts.get(name)
            if count is not None and count.dtype == np.bool_:
                row = row if count[b] else row[:0]
            elif count is not None:
                row = row[:max(0, int(count[b]))]
            parts.append((name, row.tobytes()))
        rows.append(tuple(parts))
    return rows


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_state_hash_is_equal_for_equal_states_and_differs_otherwise(env_id):
    """Random episodes (several seeds, some repeated, random actions): two rows have equal
    hashes exactly when their canonical states are equal; the same seed and actions in
    another row, after that row ran other episodes, hash equally."""
    rng = np.random.default_rng(9)
    n = _batch(env_id, 12)
    env = visgym.make(env_id, num_envs=n, autoreset="disabled", max_steps=None)
    seen = {}
    for round_ in range(3 if env_id.startswith("fetch_") else 5):
        seeds = rng.integers(0, 4, n) + 1000 * round_
        env.reset(seeds=seeds.tolist())
        for t in range(3):
            actions = _random_actions(env, rng, n)
            # Half the rows repeat row 0's action, so equal seeds often stay equal.
            for b in range(0, n, 2):
                actions[b] = actions[0]
            _, _, _, _, info = env.step(actions)
            for key, h in zip(_canonical_rows(env), info["state_hash"].tolist()):
                other = seen.setdefault(key, h)
                assert other == h, "equal states hashed differently"
    by_hash = {}
    for key, h in seen.items():
        assert by_hash.setdefault(h, key) == key, "two different states share a hash"
    assert len(seen) > 3


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_state_hash_does_not_depend_on_the_rows_history(env_id):
    """Seed 5 with the same actions: alone in a fresh env, and in row 2 of an env whose row 2
    ran another, longer episode before: equal hashes at every step."""
    rng = np.random.default_rng(3)
    n = _batch(env_id, 3)
    alone = visgym.make(env_id, num_envs=1, autoreset="disabled", max_steps=None)
    other = visgym.make(env_id, num_envs=n, autoreset="disabled", max_steps=None)
    other.reset(seeds=range(60, 60 + n))
    for _ in range(4):
        other.step(_random_actions(other, rng, n))
    _, a = alone.reset(seeds=[5])
    _, b = other.reset(seeds=[5], rows=[n - 1])
    assert a["state_hash"][0] == b["state_hash"][n - 1]
    for action in _random_actions(alone, rng, 4):
        _, _, _, _, a = alone.step([action])
        _, _, _, _, b = other.step([None] * (n - 1) + [action],
                                   active=np.arange(n) == n - 1)
        assert a["state_hash"][0] == b["state_hash"][n - 1]


_CHILD = """
import json, sys, numpy as np, visgym
out = {}
for env_id in json.loads(sys.argv[1]):
    n = 2 if env_id.startswith("fetch_") else 3
    env = visgym.make(env_id, num_envs=n, autoreset="disabled", max_steps=None)
    _, info = env.reset(seeds=[n + 20] + list(range(20, 20 + n - 1)))
    out[env_id] = [int(h) for h in info["state_hash"]]
print(json.dumps(out))
"""


@pytest.mark.timeout(600)
def test_state_hash_is_the_same_in_another_process():
    """A child process (its own picture stores, caches and memory layout) computes the same
    hashes for the same episodes as this one, in other batch positions."""
    ids = [i for i in ENV_IDS if i.endswith("/easy")]
    result = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(ids)], text=True,
                            capture_output=True, timeout=540, env=dict(os.environ))
    assert result.returncode == 0, result.stderr[-3000:]
    child = json.loads(result.stdout.strip().splitlines()[-1])
    for env_id in ids:
        env = visgym.make(env_id, num_envs=1, autoreset="disabled", max_steps=None)
        n = len(child[env_id])
        got = [int(env.reset(seeds=[s])[1]["state_hash"][0])
               for s in [n + 20] + list(range(20, 20 + n - 1))]
        assert got == child[env_id], env_id


def test_compiled_and_numpy_hashes_agree_and_are_pinned():
    """The Numba kernels and the NumPy twin give the same numbers on random fields (padded,
    word-aligned and not, boolean and integer live counts), and a fixed input hashes to a
    pinned value, so a change of the algorithm (which would split GiGPO groups across
    versions) cannot go unnoticed."""
    from collections import namedtuple

    from visgym.core import state_hash as sh
    import visgym.kernels  # noqa: F401  (installs the compiled kernels)

    class Fake:
        name, version, transient_fields = "fake", 1, ("skip",)

        def __init__(self, counts):
            self.counts = counts

        def live_counts(self, state):
            return self.counts

    rng = np.random.default_rng(0)
    State = namedtuple("State", "a b c skip d")
    state = State(rng.integers(0, 255, (16, 13, 3), dtype=np.uint8), rng.random((16, 5)),
                  rng.integers(-9, 9, (16, 2)), rng.random(16), rng.integers(0, 9, (16, 4, 2),
                                                                          dtype=np.int32))
    family = Fake({"a": rng.integers(0, 14, 16), "c": rng.random(16) < 0.5,
                   "d": rng.integers(0, 5, 16).astype(np.int32)})
    compiled = sh.StateHasher(family, state)(np.empty(16, np.uint64))
    kernels, sh._kernels = sh._kernels, None
    try:
        plain = sh.StateHasher(family, state)(np.empty(16, np.uint64))
    finally:
        sh._kernels = kernels
    assert compiled.tolist() == plain.tolist()
    assert len(set(compiled.tolist())) == 16
    fixed = State(np.arange(16 * 39, dtype=np.uint8).reshape(16, 13, 3), np.ones((16, 5)),
                  np.zeros((16, 2), np.int64), np.zeros(16), np.ones((16, 4, 2), np.int32))
    pinned = sh.StateHasher(Fake({}), fixed)(np.empty(16, np.uint64))
    assert int(pinned[0]) == PINNED_HASH, int(pinned[0])


PINNED_HASH = 769747516908945995
