"""mental_rotation_2d replays the reference's recorded episodes step by step
(parity/mental_rotation_2d.jsonl).

Every public episode is rebuilt from its init_state on the recorded image folder
(parity/inputs/mental_rotation_2d, basename ids) with the recorded ``image_size`` and fed the same
action strings: feedback, reward, termination, the agent angle (``angle``, also the step's
``init_state.agent_angle``) and the remaining error (``err``) must equal the recording at every
step; the prompt, the init state read back and the frame size (every recorded ``obs_shape``)
right after the reset too. A plain reset with the recorded seed draws the reference's secret
angle. The reset frames of episode 0 of each id equal the reference's PNGs pixel for pixel
(tolerance: none).

Allow-listed differences, with the reason:
- parse errors: the reference embeds Python's own exception text, so only the fixed prefix
  ("Cannot parse action string <repr>:") and suffix ("so the action is invalid.") are compared;
- actions that made the reference raise (a huge int: gymnasium's Discrete.contains overflows
  int64; none are among the public episodes) are invalid payloads here: state unchanged, the
  usual payload message;
- solver plans: the reference drew the number of chunks and the cut points from the env's RNG,
  ours from a generator seeded by the episode's state, so plans are compared by length (exactly
  where ``num_steps`` fixes it; for ``{}`` both lengths must be among the 2..4-chunk plans the
  spec allows for that angle) and by success; both end exactly on the secret angle;
- the photo of a plain reset: ours is a pure function of the episode seed, the reference's the
  next of a list shuffled by its constructor seed, so only the angles are compared for plain
  resets (replays name their photo in the init state).
"""
import pytest

import visgym
from parity_data import (check_reset_frame, episode_id, inputs_dir, load_parity,
                         reference_episode, replay_env, replay_init_state, replay_kwargs,
                         replay_steps, require_recordings, start_replay, step_changing_nothing)

EPISODES = load_parity("mental_rotation_2d")
SOLVER_KINDS = ("solver", "solver_noisy")


def test_recordings_are_present():
    """Without the recordings the replays collect nothing: this skips (fails under CI)."""
    require_recordings("mental_rotation_2d")


def test_every_public_episode_is_here():
    require_recordings("mental_rotation_2d")
    assert len(EPISODES) == 40
    assert {e["env_id"] for e in EPISODES} == {"mental_rotation_2d/easy",
                                               "mental_rotation_2d/hard"}


@pytest.mark.parametrize("episode", EPISODES, ids=episode_id)
def test_replays_reference_episode(episode):
    env, init = start_replay(episode, raised={"OverflowError"})
    assert episode["text_obs"] is None
    for t, step in replay_steps(env, episode):
        state = step["state"]
        got = env.state_dicts()[0]
        assert got["agent_angle"] == pytest.approx(state["angle"], rel=1e-5, abs=1e-9), t
        assert got["agent_angle"] == pytest.approx(state["init_state"]["agent_angle"],
                                                   rel=1e-5, abs=1e-9), t
        error = float(env.family.rotation_error(env.state)[0])
        assert error == pytest.approx(state["err"], rel=1e-5, abs=1e-9), t
        assert got["secret_angle"] == init["secret_angle"]
        assert got["image_name"] == init["image_name"]


@pytest.mark.parametrize("episode", EPISODES, ids=episode_id)
def test_plain_reset_draws_the_reference_secret(episode):
    env = visgym.make(episode["env_id"], num_envs=1, **replay_kwargs(episode))
    env.reset(seeds=[episode["reset_seed"]])
    got = env.state_dicts()[0]
    assert got["secret_angle"] == episode["init_state"]["secret_angle"]
    assert got["agent_angle"] == episode["init_state"]["agent_angle"] == 0.0
    assert got["image_name"] in env.family.source.names


def _allowed_lengths(init: dict, tolerance: float, num_steps) -> set:
    delta = (init["secret_angle"] - init["agent_angle"]) % 360
    delta = delta - 360 if delta > 180 else delta
    if abs(delta) <= tolerance:
        return {1}
    total = round(abs(delta))
    if total <= 1:
        return {2}
    ks = (2, 3, 4) if num_steps is None else (num_steps,)
    return {min(k, total) + 1 for k in ks}


@pytest.mark.parametrize("episode", [e for e in EPISODES if e["episode_kind"] in SOLVER_KINDS],
                         ids=episode_id)
def test_solver_plans_match_the_reference_by_length_and_success(episode):
    env = replay_env(episode)
    call = episode["solver_call"]
    plan = env.solve(**call)[0]
    allowed = _allowed_lengths(replay_init_state(episode), env.family.tolerance,
                               call.get("num_steps"))
    assert episode["solver_plan_len"] in allowed
    assert len(plan) in allowed
    if "num_steps" in call:
        assert len(plan) == episode["solver_plan_len"]
    if episode["episode_kind"] == "solver":
        # The recorded plan and ours turn by the same total.
        recorded = [s["action"] for s in episode["steps"]]
        turn = [sum(int(a[len("('rotate', "):-1]) for a in p[:-1]) for p in (plan, recorded)]
        assert turn[0] == turn[1]
    for action in plan:
        _, reward, terminated, _, _ = env.step([action])
    assert terminated[0] and reward[0] == 1.0
    assert env.family.rotation_error(env.state)[0] == 0.0


# Payloads that make the reference raise (gymnasium's Discrete.contains casts to int64): the
# held-out malformed episodes end with such a payload.
REFERENCE_RAISED = ["('rotate', 100000000000000000000)", "('rotate', -100000000000000000000)",
                    "('rotate', 9223372036854775808)"]


@pytest.mark.parametrize("difficulty", ["easy", "hard"])
@pytest.mark.parametrize("action", REFERENCE_RAISED)
def test_actions_that_made_the_reference_raise_are_invalid_payloads(difficulty, action):
    episode = reference_episode(EPISODES, f"mental_rotation_2d/{difficulty}")
    env = replay_env(episode)
    info = step_changing_nothing(env, action)
    payload = action[len("('rotate', "):-1]
    assert info["feedback"][0] == (f"The action {payload} is not in the valid action space of "
                                   f"rotate so nothing is executed.")
    assert info["invalid"][0]


@pytest.mark.parametrize("difficulty", ["easy", "hard"])
def test_reset_frame_matches_the_reference_pixel_for_pixel(difficulty):
    check_reset_frame(EPISODES, "mental_rotation_2d", difficulty)


def test_recorded_image_folder_is_scanned_as_the_reference_scans_it():
    require_recordings("mental_rotation_2d")
    env = visgym.make("mental_rotation_2d/easy",
                      sample_dir=inputs_dir("mental_rotation_2d"))
    assert env.family.source.names == tuple(f"img{k}.png" for k in range(6))
