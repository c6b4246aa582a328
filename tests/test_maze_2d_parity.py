"""maze_2d replays the reference's recorded episodes step by step (parity/maze_2d.jsonl).

Every recorded episode is rebuilt from its init_state and fed the same action strings; state,
reward, termination and feedback must match at every step. Documented deviations:
- parse errors: the reference embeds Python's own exception text, so only the fixed prefix
  ("Cannot parse action string <repr>:") and suffix ("so the action is invalid.") are compared;
- the one action that made the reference raise (a 21-digit move payload, OverflowError) is an
  invalid payload here: the state must be unchanged and the feedback the usual payload message.
"""
import numpy as np
import pytest

import visgym
from parity_data import (check_opening, episode_id, load_parity, reference_episode, reference_frame,
                         replay_steps, require_recordings)

EPISODES = load_parity("maze_2d")


def test_recordings_are_present():
    """Without the recordings the replays collect nothing: this skips (fails under CI)."""
    require_recordings("maze_2d")


@pytest.mark.parametrize("episode", EPISODES, ids=episode_id)
def test_replays_reference_episode(episode):
    env = visgym.make(episode["env_id"], num_envs=1, max_steps=None, autoreset="disabled",
                      **episode["make_kwargs"])
    env.reset(init_states=[episode["init_state"]])
    check_opening(env, episode)
    for t, step in replay_steps(env, episode):
        assert env.state_dicts()[0]["agent_location"] == step["state"]["agent"], f"step {t}"


@pytest.mark.parametrize("difficulty", ["easy", "hard"])
def test_frame_matches_reference_pixels(difficulty):
    """Episode 0's reset frame equals the reference's rendering pixel for pixel."""
    episode = reference_episode(EPISODES, f"maze_2d/{difficulty}")
    env = visgym.make(f"maze_2d/{difficulty}")
    frames, _ = env.reset(init_states=[episode["init_state"]])
    want = reference_frame("maze_2d", difficulty)
    np.testing.assert_array_equal(frames[0], want)


def test_solver_episodes_reach_the_target():
    """The recorded solver plans succeed, and our solver's plans from the same init states do too
    and are no longer than the reference's (the maze is perfect: the path is unique)."""
    require_recordings("maze_2d")
    solver_eps = [e for e in EPISODES if e["episode_kind"] == "solver" and not e["solver_call"]]
    assert solver_eps
    env = visgym.make("maze_2d/hard", num_envs=1, max_steps=None, autoreset="disabled")
    for e in solver_eps:
        env = visgym.make(e["env_id"], num_envs=1, max_steps=None, autoreset="disabled")
        env.reset(init_states=[e["init_state"]])
        plan = env.solve()[0]
        # The reference's plan ends with two stops; ours with one.
        assert len(plan) == e["solver_plan_len"] - 1
        for action in plan:
            _, reward, terminated, _, _ = env.step([action])
        assert terminated[0] and reward[0] == 1.0
