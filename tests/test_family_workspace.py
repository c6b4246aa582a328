"""One family instance serves several BatchEnvs: render scratch lives in each BatchEnv's
workspace (``new_workspace``), not on the family, so two envs of different batch sizes stepped
alternately through one instance show the frames that separate instances show."""
import numpy as np
import pytest

from visgym.bridges.gym import ActionText
from visgym.core.batch_env import BatchEnv
from visgym.core.registry import make_family

IDS = ["maze_2d/easy", "maze_3d/easy", "maze_3d/hard", "sliding_block/easy",
       "matchstick_equation/hard", "matchstick_rotation/easy"]


def _actions(grammar, rng, n):
    space = ActionText(grammar, seed=int(rng.integers(2**31)))
    out = []
    while len(out) < n:
        action = space.sample()
        if "stop" not in action or rng.random() < 0.05:
            out.append(action)
    return out


@pytest.mark.timeout(120)
@pytest.mark.parametrize("env_id", IDS)
def test_one_instance_serves_two_batch_envs(env_id):
    overrides = {"renderer": "raster"} if env_id == "maze_3d/hard" else {}
    shared = make_family(env_id, **overrides)
    envs = [BatchEnv(shared, n, max_steps=6) for n in (3, 7)]
    alone = [BatchEnv(make_family(env_id, **overrides), n, max_steps=6) for n in (3, 7)]
    for k in range(2):
        envs[k].reset(seeds=range(10 * k, 10 * k + envs[k].num_envs))
        alone[k].reset(seeds=range(10 * k, 10 * k + alone[k].num_envs))
    rng = np.random.default_rng(0)
    for t in range(14):
        k = t % 2
        actions = _actions(shared.grammar, rng, envs[k].num_envs)
        envs[k].step(actions)
        alone[k].step(actions)
        for j in range(2):
            np.testing.assert_array_equal(envs[j].frames, alone[j].frames,
                                          err_msg=f"env {j} after step {t}")
