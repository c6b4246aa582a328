"""Both Fetch families replay the reference's recorded episodes step by step
(parity/fetch_reach.jsonl and parity/fetch_pick_and_place.jsonl, harness make_kwargs).

Every episode is rebuilt from its init_state and fed the same action strings. Compared, as
parity/README "How a test should compare" asks:
- feedback exactly (parse errors: prefix and suffix only), termination and the sticky gripper
  command exactly;
- reward and ``success`` exactly where the recorded distance is more than 2 cm from the
  threshold (0.1 m reach, 0.05 m pick-and-place);
- grip and object positions within 2 cm; finger joints within 5 mm when they are at rest and
  within 1.5 cm while they move: the fingers close about a third faster against the table here
  than in the reference (MuJoCo 4.x vs the reference's 3.3.2; opening agrees to 0.1 mm);
- the prompt and the observation shape exactly.
Allow-listed episodes (chaotic grasps, expected by the spec) are listed with their reason.
"""
import numpy as np
import pytest

from parity_data import (check_feedback, episode_id, load_parity, replay_env,
                         require_recordings)

FAMILIES = ("fetch_reach", "fetch_pick_and_place")
EPISODES = [ep for fam in FAMILIES for ep in load_parity(fam)]
THRESHOLD = {"fetch_reach": 0.1, "fetch_pick_and_place": 0.05}

# (env_id, episode) -> why positions (and possibly the stop's outcome) diverge.
DIVERGENT = {
    ("fetch_pick_and_place/hard", 12): (
        "chaotic grasp: the fingers close slightly faster here, the cube ends up held off-centre "
        "and is carried 9 cm short; the final stop fails here (reference: success at 4.2 cm)"),
    ("fetch_pick_and_place/easy", 7): (
        "chaotic grasp: the cube slips differently in the fingers during the carry (3.3 cm)"),
    ("fetch_pick_and_place/easy", 4): (
        "chaotic grasp: the fingers settle on the cube at 0.024 m each here, at 0.014 / 0.012 m "
        "in the reference (the cube tilted between the fingers); positions within 1.6 cm"),
    ("fetch_pick_and_place/hard", 16): (
        "chaotic grasp: the cube is clamped off-centre while the fingers close (2.6 cm)"),
}


def test_recordings_are_present():
    """Without the recordings the replays collect nothing: this skips (fails under CI)."""
    require_recordings(*FAMILIES)


@pytest.mark.parametrize("episode", EPISODES, ids=episode_id)
def test_replay_matches_the_reference(episode):
    import visgym

    family = episode["env_id"].split("/")[0]
    threshold = THRESHOLD[family]
    divergent = (episode["env_id"], episode["episode"]) in DIVERGENT
    env = replay_env(episode)
    assert env.prompt() == episode["prompt"]
    assert list(env.frame_shape) == episode["obs_shape"]
    prev_fingers = None
    for k, step in enumerate(episode["steps"]):
        _, reward, terminated, truncated, info = env.step([step["action"]])
        want = step["state"]
        where = f"step {k} {step['action']!r}"
        check_feedback(info["feedback"][0], step["feedback"], step["action"])
        assert bool(terminated[0]) == step["terminated"], where
        assert not truncated[0]
        st = env.state
        if not divergent:
            np.testing.assert_allclose(st.grip[0], want["grip"], atol=0.02, err_msg=where)
        dist = want["dist"]
        if abs(dist - threshold) > 0.02 and not divergent:
            assert float(reward[0]) == step["reward"], where
            assert bool(info["success"][0]) == want["success"], where
        if family == "fetch_pick_and_place":
            assert float(st.gripper_cmd[0]) == want["gripper_cmd"], where
            if not divergent:
                np.testing.assert_allclose(st.obj[0], want["object"], atol=0.02, err_msg=where)
                np.testing.assert_allclose(env.state_dicts()[0]["object_pos"],
                                           want["init_state"]["object_pos"], atol=0.02)
                moving = prev_fingers is not None and np.abs(
                    np.subtract(want["fingers"], prev_fingers)).max() > 0.001
                np.testing.assert_allclose(st.fingers[0], want["fingers"],
                                           atol=0.015 if moving else 0.005, err_msg=where)
            prev_fingers = want["fingers"]
    del visgym


def test_allow_list_names_recorded_episodes():
    require_recordings(*FAMILIES)
    recorded = {(ep["env_id"], ep["episode"]) for ep in EPISODES}
    assert set(DIVERGENT) <= recorded
