"""Mixed-task batches (core/mixed.py): a mix's rows behave exactly like the same tasks stepped
as separate BatchEnvs, with per-task params, autoreset, active masks, partial resets, forks and
the gymnasium vector API."""
import numpy as np
import pytest

import visgym
from visgym.bridges.gym import ActionText, VisGymMixedVectorEnv

TASKS = [{"id": "maze_2d/easy", "num_envs": 3, "params": {"maze_width": 7, "maze_height": 7}},
         {"id": "jigsaw/easy", "num_envs": 2},
         {"id": "maze_2d/easy", "num_envs": 2, "max_steps": 4},
         {"id": "counting/easy", "num_envs": 2}]


def _separate(options, seeds):
    envs = []
    start = 0
    for task in TASKS:
        n = task["num_envs"]
        budget = task.get("max_steps", options.get("max_steps", "default"))
        env = visgym.make(task["id"], n, **{**options, "max_steps": budget},
                          **task.get("params", {}))
        env.reset(seeds=seeds[start:start + n])
        envs.append(env)
        start += n
    return envs


def _actions(envs, rng):
    out = []
    for env in envs:
        space = ActionText(env.grammar, seed=int(rng.integers(2**31)))
        plans = env.solve()
        out += [plan[0] if rng.random() < 0.5 else space.sample() for plan in plans]
    return out


def test_a_mix_steps_its_rows_exactly_like_separate_envs():
    """Random and solver actions over 12 steps (autoreset, budgets, rewards with shaping):
    frames, rewards, components, flags, feedback, codes, success, steps, seeds, frame sizes and
    state hashes of every row equal those of the same tasks as separate BatchEnvs."""
    options = {"reward": "progress", "max_steps": 6}
    seeds = list(range(10, 19))
    mix = visgym.make_mixed(TASKS, **options)
    frames, info = mix.reset(seeds=seeds)
    envs = _separate(options, seeds)
    rng = np.random.default_rng(0)
    for t in range(12):
        actions = _actions(envs, rng)
        frames, reward, term, trunc, info = mix.step(actions)
        start = 0
        for env in envs:
            n = env.num_envs
            rows = slice(start, start + n)
            f, r, te, tr, inf = env.step(actions[rows])
            for i in range(n):
                np.testing.assert_array_equal(frames[start + i], env.frame(i))
            assert reward[rows].tolist() == r.tolist()
            assert term[rows].tolist() == te.tolist() and trunc[rows].tolist() == tr.tolist()
            assert info["feedback"][rows] == inf["feedback"]
            for key in ("code", "invalid", "success", "step", "seed", "frame_hw", "state_hash"):
                np.testing.assert_array_equal(info[key][rows], inf[key], err_msg=f"{key}, {t}")
            for key in ("task", "shaping"):
                np.testing.assert_array_equal(info["reward_components"][key][rows],
                                              inf["reward_components"][key])
            start += n
    assert info["task"].tolist() == [0, 0, 0, 1, 1, 2, 2, 3, 3]
    assert mix.task_ids == ["maze_2d/easy", "jigsaw/easy", "maze_2d/easy", "counting/easy"]


def test_active_masks_and_idle_tasks():
    """Rows left out of a step (a whole task among them) report reward 0, no flags, feedback
    "" and keep their state; the stepped rows step."""
    mix = visgym.make_mixed({"maze_2d/easy": 2, "jigsaw/easy": 2}, autoreset="disabled")
    mix.reset(seeds=[1, 2, 3, 4])
    plans = mix.solve()
    before = mix.state_hash().copy()
    active = np.array([True, False, False, False])
    _, reward, term, _, info = mix.step([plans[0][0], None, None, None], active=active)
    assert info["feedback"][1:] == ["", "", ""] and (reward[1:] == 0).all()
    assert info["step"].tolist() == [1, 0, 0, 0]
    assert mix.state_hash()[1:].tolist() == before[1:].tolist()
    assert mix.state_hash()[0] != before[0]


def test_rows_depend_only_on_their_task_and_seed():
    """A row's episode is the same whatever else is in the mix and wherever it sits; seeds
    drawn by the mix follow its seed."""
    a = visgym.make_mixed({"jigsaw/easy": 2, "maze_2d/easy": 2})
    b = visgym.make_mixed({"maze_2d/easy": 3, "jigsaw/easy": 1})
    _, ia = a.reset(seeds=[5, 6, 7, 8])
    _, ib = b.reset(seeds=[9, 7, 8, 5])
    assert ia["state_hash"][0] == ib["state_hash"][3]
    assert ia["state_hash"][2:].tolist() == ib["state_hash"][1:3].tolist()
    c = visgym.make_mixed({"jigsaw/easy": 2, "maze_2d/easy": 2}, seed=3)
    d = visgym.make_mixed({"jigsaw/easy": 2, "maze_2d/easy": 2}, seed=3)
    assert c.reset()[1]["state_hash"].tolist() == d.reset()[1]["state_hash"].tolist()


def test_partial_resets_and_init_states_cross_tasks():
    mix = visgym.make_mixed({"maze_2d/easy": 2, "jigsaw/easy": 2}, autoreset="disabled")
    mix.reset(seeds=[1, 2, 3, 4])
    dicts = mix.state_dicts()
    hashes = mix.state_hash().copy()
    mix.reset(seeds=[11, 12], rows=[1, 2])
    assert mix.state_hash()[[0, 3]].tolist() == hashes[[0, 3]].tolist()
    assert mix.state_hash()[1] != hashes[1] and mix.state_hash()[2] != hashes[2]
    other = visgym.make_mixed({"maze_2d/easy": 2, "jigsaw/easy": 2})
    other.reset(seeds=[1, 2, 3, 4], init_states=dicts)
    assert other.state_hash().tolist() == hashes.tolist()
    # A bad dict for the second task changes nothing in either task.
    bad = [dicts[0], dicts[1], {"nonsense": 1}, dicts[3]]
    before = other.state_hash().copy()
    with pytest.raises(ValueError, match="init_states"):
        other.reset(seeds=[0, 0, 0, 0], init_states=[dicts[2]] * 2 + bad[2:])
    assert other.state_hash().tolist() == before.tolist()


def test_fork_within_a_task_and_refused_across_tasks():
    mix = visgym.make_mixed({"maze_2d/easy": 2, "jigsaw/easy": 2}, autoreset="disabled")
    mix.reset(seeds=[1, 2, 3, 4])
    mix.fork([2], [3])
    assert mix.state_hash()[2] == mix.state_hash()[3]
    np.testing.assert_array_equal(mix.frames[2], mix.frames[3])
    before = mix.state_hash().copy()
    with pytest.raises(ValueError, match="^dst_rows: row 2 holds jigsaw/easy"):
        mix.fork([0], [2])
    assert mix.state_hash().tolist() == before.tolist()


@pytest.mark.parametrize("tasks, message", [
    ([], "^tasks: a mix needs at least one task"),
    ("maze_2d/easy", "^tasks: expected a dict"),
    ({"maze_2d/easy": 0}, r"^tasks\[0\].num_envs"),
    ([{"id": "maze_2d/easy"}], r"^tasks\[0\]: a task needs an id and num_envs"),
    ([{"id": "maze_2d/easy", "num_envs": 1, "size": 3}], r"^tasks\[0\].size: not a task field"),
    ([("maze_2d/easy", 1), ("nope/easy", 1)], r"^tasks\[1\] \(nope/easy\): env_id"),
    ([("maze_2d/easy", 1, {"maze_width": 8})], r"^tasks\[0\] \(maze_2d/easy\): maze_width"),
    ([("maze_2d/easy", 1, [1])], r"^tasks\[0\].params"),
])
def test_bad_task_specs_name_the_entry_and_field(tasks, message):
    with pytest.raises(ValueError, match=message):
        visgym.make_mixed(tasks)


def test_frames_buffers_padding_and_memory():
    mix = visgym.make_mixed({"maze_2d/easy": 2, "jigsaw/easy": 1})
    frames, info = mix.reset(seeds=[1, 2, 3])
    assert len(frames) == 3 and frames.capacity == (max(225, frames.buffers[1][1].shape[1]),
                                                    max(225, frames.buffers[1][1].shape[2]))
    padded = frames.padded()
    for i in range(3):
        h, w = info["frame_hw"][i]
        np.testing.assert_array_equal(padded[i, :h, :w], frames[i])
        assert not padded[i, h:].any() and not padded[i, :, w:].any()
    assert mix.frame_bytes() == sum(b.nbytes for _, b in frames.buffers)


def test_the_gymnasium_vector_api_takes_a_mix():
    env = VisGymMixedVectorEnv({"maze_2d/easy": 2, "jigsaw/easy": 2}, reward="progress")
    obs, info = env.reset(seed=[1, 2, 3, 4])
    assert obs.shape == env.observation_space.shape and env.observation_space.contains(obs)
    assert info["task"].tolist() == [0, 0, 1, 1]
    actions = env.action_space.sample()
    assert env.action_space.contains(actions)
    obs, reward, term, trunc, info = env.step(actions)
    assert obs.shape[0] == 4 and reward.shape == (4,)
    assert set(info) >= {"feedback", "state_hash", "reward_task", "reward_shaping", "task"}
    np.testing.assert_allclose(reward, info["reward_task"] + info["reward_shaping"])
