"""The gymnasium vector env checks its ``render_mode`` like the single env does: anything but
"rgb_array" or None is refused with a message naming the field (it used to be stored as given,
so ``render_mode=12345`` was silently accepted)."""
import gymnasium
import pytest

import visgym  # noqa: F401  (registers the ids)
from visgym.bridges.gym import VisGymVectorEnv


@pytest.mark.parametrize("mode", [12345, "ansi", "human", ""])
def test_vector_env_refuses_an_unknown_render_mode(mode):
    with pytest.raises(ValueError, match="^render_mode: "):
        VisGymVectorEnv("maze_2d/easy", num_envs=2, render_mode=mode)
    with pytest.raises(ValueError, match="^render_mode: "):
        gymnasium.make_vec("maze_2d/easy", num_envs=2, vectorization_mode="vector_entry_point",
                           render_mode=mode)


@pytest.mark.parametrize("mode", ["rgb_array", None])
def test_vector_env_takes_the_rgb_render_mode(mode):
    env = VisGymVectorEnv("maze_2d/easy", num_envs=2, render_mode=mode)
    env.reset(seed=[0, 1])
    assert env.render_mode == mode and env.render().shape == (2, 225, 225, 3)
