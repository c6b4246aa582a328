"""The Fetch oracles fit the evaluation budget: on the shipped evaluation episodes
(envs/assets/splits, 70 per task and split) the solver's plans, replayed through a BatchEnv
with the split's step budget (20 easy, 30 hard, stop included), solve at least 95 % of the
episodes of both tasks and both splits. Measured (MuJoCo 4.x, CPU): fetch_reach 100 % / 100 %
(plans of 2-6 actions), fetch_pick_and_place 98.6 % / 100 % (median 13 actions, at most 21)."""
import numpy as np
import pytest

import visgym
from visgym.bridges.splits import load_split
from visgym.core.rollout import run_plans


@pytest.mark.parametrize("split", ["easy", "hard"])
@pytest.mark.parametrize("task", ["fetch_reach", "fetch_pick_and_place"])
def test_solver_solves_the_shipped_episodes_within_the_budget(task, split):
    specs = load_split(task, split)
    env = visgym.make(f"{task}/{split}", num_envs=len(specs))
    assert env.max_steps == (20 if split == "easy" else 30)
    env.reset(init_states=[s.init_state for s in specs])
    plans = env.solve()
    assert all(p[-1] == "('stop', 'stop')" for p in plans)
    result = run_plans(env, plans)
    lengths = np.array([len(p) for p in plans])
    rate = result.solved.mean()
    assert rate >= 0.95, (rate, np.flatnonzero(~result.solved).tolist(), lengths.max())
    # What fails is over budget (truncated), never a plan that misses within it.
    assert result.solved[lengths <= env.max_steps].all()
