"""matchstick_rotation replays the reference's recorded episodes step by step
(parity/matchstick_rotation.jsonl, half of them with canvas_size=[120, 120], stick_length=20).

Every recorded episode is rebuilt from its init_state with its make_kwargs and fed the same action
strings. Feedback, reward, termination, the midpoint and heading, the position and angle errors
and the tracked init-state fields must match at every step; the prompt and observation shape
after the reset too. Comparisons and documented deviations:
- parse errors: the reference embeds Python's own exception text, so only the fixed prefix and
  suffix are compared;
- floats (recorded to 6 significant digits): |ours - recorded| <= 1e-5 * max(|recorded|, 1),
  headings compared on the circle, and the errors (pos_err, ang_err) relative to the midpoints and
  headings they are differences of. Payloads are applied at float32 precision here (the shared
  parser stores float32), Python floats in the reference: up to ~2e-5 degrees apart after 40
  recorded moves;
- rewards: exact, except where the recorded error is within 1e-4 (relative) of a tolerance;
- the success radius is in canvas px here (the prompt's "px"), in unit coordinates in the
  reference: the stops in ALLOWED_REWARD_FLIPS score differently, each for that reason.
"""
import math

import numpy as np
import pytest

import visgym
from parity_data import (check_feedback, check_opening, episode_id, load_parity, reference_episode,
                         reference_frame, require_recordings)

FAMILY = "matchstick_rotation"
EPISODES = load_parity(FAMILY)
TOLERANCES = {"matchstick_rotation/easy": (10, 15), "matchstick_rotation/hard": (5, 10)}

# (env_id, episode, step) -> why our reward differs from the recorded one.
ALLOWED_REWARD_FLIPS = {
    ("matchstick_rotation/easy", 40, 5): (
        "success radius in canvas px: the reference's unit_first plan clipped at the canvas edge "
        "and stopped 5.62 units = 12.76 canvas px away (s = 2.27): reference 1 (5.62 <= 10 "
        "units), ours 0 (12.76 > 10 px); our solver succeeds on this episode"),
    ("matchstick_rotation/hard", 18, 21): (
        "success radius in canvas px: stop 3.50 units = 6.67 canvas px away (s = 1.90): "
        "reference 1 (3.50 <= 5 units), ours 0 (6.67 > 5 px)"),
}



def _close(got, want, what, scale=None):
    """Within 1e-5 relative; ``scale`` is the magnitude the value is derived from (an error
    between two headings is as exact as the headings are, not relative to its own size)."""
    size = max(abs(want), 1.0) if scale is None else max(abs(scale), abs(want), 1.0)
    assert abs(got - want) <= 1e-5 * size, f"{what}: {got} vs {want}"


def _close_deg(got, want, what):
    diff = abs((got - want + 180.0) % 360.0 - 180.0)
    assert diff <= 1e-5 * max(abs(want), 1.0), f"{what}: {got} vs {want}"



def _make(episode):
    env = visgym.make(episode["env_id"], num_envs=1, max_steps=None, autoreset="disabled",
                      **episode["make_kwargs"])
    frames, _ = env.reset(init_states=[episode["init_state"]])
    return env, frames


def _our_reward(env_id, scale, pos_err_units, ang_err):
    pos_tol, ang_tol = TOLERANCES[env_id]
    return float(pos_err_units * scale <= pos_tol and ang_err <= ang_tol)


def _near_threshold(env_id, scale, pos_err_units, ang_err):
    pos_tol, ang_tol = TOLERANCES[env_id]
    return (abs(pos_err_units * scale - pos_tol) <= 1e-4 * pos_tol
            or abs(ang_err - ang_tol) <= 1e-4 * ang_tol)


def test_recordings_are_present():
    """Without the recordings the replays collect nothing: this skips (fails under CI)."""
    require_recordings(FAMILY)


def test_recordings_cover_both_canvases_and_every_solver_call():
    require_recordings(FAMILY)
    assert len(EPISODES) == 80
    kwargs = {str(e["make_kwargs"]) for e in EPISODES}
    assert kwargs == {"{}", "{'canvas_size': [120, 120], 'stick_length': 20}"}


@pytest.mark.parametrize("episode", EPISODES, ids=episode_id)
def test_replays_reference_episode(episode):
    env, _ = _make(episode)
    check_opening(env, episode)
    assert env.state_dicts()[0] == episode["init_state"]
    env_id = episode["env_id"]
    scale = episode["init_state"]["scale"]
    tmid = episode["init_state"]["target_mid"]
    tang = episode["init_state"]["target_ang"]
    for t, step in enumerate(episode["steps"]):
        assert "exception" not in step  # the reference never raised in these recordings
        _, reward, terminated, truncated, info = env.step([step["action"]])
        where = f"step {t} {step['action']!r}"
        check_feedback(info["feedback"][0], step["feedback"], step["action"])
        assert bool(terminated[0]) == step["terminated"], where
        assert bool(truncated[0]) == step["truncated"], where
        state = env.state_dicts()[0]
        want = step["state"]
        for i in range(2):
            _close(state["initial_mid"][i], want["mid"][i], f"{where} mid[{i}]")
            _close(state["initial_mid"][i], want["init_state"]["initial_mid"][i], where)
        _close_deg(state["initial_ang"], want["ang"], f"{where} ang")
        _close_deg(state["initial_ang"], want["init_state"]["initial_ang"], where)
        pos_err = math.hypot(state["initial_mid"][0] - tmid[0], state["initial_mid"][1] - tmid[1])
        _close(pos_err, want["pos_err"], f"{where} pos_err", max(map(abs, want["mid"] + tmid)))
        d = (state["initial_ang"] - tang) % 180.0
        _close(d if d <= 90 else 180.0 - d, want["ang_err"], f"{where} ang_err",
               max(abs(want["ang"]), abs(tang)))
        key = (env_id, episode["episode"], t)
        if key in ALLOWED_REWARD_FLIPS:
            assert float(reward[0]) != step["reward"], f"{where}: allow-listed flip did not flip"
            continue
        if not step["terminated"]:
            assert reward[0] == 0.0 == step["reward"], where
            continue
        expected = _our_reward(env_id, scale, want["pos_err"], want["ang_err"])
        assert expected == step["reward"], f"{where}: not allow-listed, yet the units rule flips it"
        if not _near_threshold(env_id, scale, want["pos_err"], want["ang_err"]):
            assert float(reward[0]) == expected, where


def test_allow_listed_flips_are_exactly_the_unit_rule_changes():
    """Every recorded stop whose outcome the canvas-px radius changes is allow-listed, and only
    those."""
    require_recordings(FAMILY)
    flips = set()
    for e in EPISODES:
        scale = e["init_state"]["scale"]
        for t, step in enumerate(e["steps"]):
            if step["terminated"]:
                s = step["state"]
                ours = _our_reward(e["env_id"], scale, s["pos_err"], s["ang_err"])
                if ours != step["reward"]:
                    flips.add((e["env_id"], e["episode"], t))
    assert flips == set(ALLOWED_REWARD_FLIPS)


@pytest.mark.parametrize("difficulty", ["easy", "hard"])
def test_reset_frame_matches_reference_pixels(difficulty):
    """Episode 0's reset frame against the reference's matplotlib rendering: same layout, frame
    and stick pixels; anti-aliasing differs by a few grey levels on a few hundred edge pixels."""
    episode = reference_episode(EPISODES, f"{FAMILY}/{difficulty}")
    _, frames = _make(episode)
    want = reference_frame(FAMILY, difficulty)
    diff = np.abs(frames[0].astype(int) - want.astype(int))
    assert diff.max() <= 16
    assert diff.mean() < 0.01
    assert (diff.max(axis=-1) > 0).sum() < 400
    nonwhite_ours = (frames[0] != 255).any(axis=-1)
    nonwhite_ref = (want != 255).any(axis=-1)
    assert (nonwhite_ours != nonwhite_ref).sum() < 40


@pytest.mark.parametrize("episode", [e for e in EPISODES if e["episode_kind"] == "solver"],
                         ids=episode_id)
def test_our_solver_succeeds_from_recorded_solver_episodes(episode):
    """Our plans for the recorded solver calls have the reference's lengths and succeed (the
    reference's own unit_first plan failed on easy#40, where a move clipped)."""
    env, _ = _make(episode)
    call = episode["solver_call"]
    plan = env.solve(strategy=call.get("strategy"), num_steps=call.get("num_steps"))[0]
    assert len(plan) == episode["solver_plan_len"]
    for action in plan:
        _, reward, terminated, _, _ = env.step([action])
    assert terminated[0] and reward[0] == 1.0
