"""BatchEnv's own checks: sizes refused up front, with the field named."""
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
