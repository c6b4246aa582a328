"""maze_3d replays the reference's recorded episodes step by step (parity/maze_3d.jsonl).

Every recorded episode is rebuilt from its init_state and fed the same action strings; the agent
cell, heading (cam_dir), the init-state fields that change, reward, termination, truncation and
feedback must match at every step, and the prompt must match word for word.

Allow-listed differences (documented deviations, see envs/maze_3d.py):
- parse errors: the reference embeds Python's own exception text, so only the fixed prefix
  ("Cannot parse action string <repr>:") and suffix ("so the action is invalid.") are compared;
- obs_shape: the reference's headless window gives 1024x576 whatever it asks for; we render
  natively at ``render_size`` (default 336x189, the same 16:9 picture at the size the model is
  shown). With render_size=(1024, 576) the shape equals the recorded one, which is checked;
- the frame: upright (the reference's vertical flip and floor/ceiling texture swap undone),
  procedural textures instead of the reference's JPEGs, a lit sphere instead of a flat red one.
  What is compared with parity/frames/maze_3d_<difficulty>.png is therefore the *geometry*:
  camera position, heading convention, 40 degree horizontal field of view, world layout, upright
  orientation. Both frames are split into wall / ground / ceiling pixels (ours exactly, by
  rendering with one flat colour per surface; the reference's by colour: its ceiling is bluish,
  its ground sandy), and for every image column the height of the ceiling region (from the top)
  and of the ground region (from the bottom) must agree; the mean colour of each region must be
  close too, so the textures read as the reference's;
- the solver standing on the target returns only a stop (the reference moves first): no
  recorded episode starts there, so the recorded default-solver plans are reproduced exactly.
"""
import numpy as np
import pytest

import visgym
from parity_data import (episode_id, load_parity, reference_episode, reference_frame, replay_steps,
                         require_recordings)
from visgym.render import raster3d

EPISODES = load_parity("maze_3d")
REFERENCE_SIZE = (1024, 576)




def test_recordings_are_present():
    """Without the recordings the replays collect nothing: this skips (fails under CI)."""
    require_recordings("maze_3d")


@pytest.mark.parametrize("episode", EPISODES, ids=episode_id)
def test_replays_reference_episode(episode):
    env = visgym.make(episode["env_id"], num_envs=1, max_steps=None, autoreset="disabled",
                      **episode["make_kwargs"])
    frames, _ = env.reset(init_states=[episode["init_state"]])
    assert frames.shape[1:] == (189, 336, 3)
    assert env.prompt() == episode["prompt"]
    assert env.state_dicts()[0] == episode["init_state"]
    for t, step in replay_steps(env, episode):
        now = env.state_dicts()[0]
        assert now["agent_location"] == step["state"]["agent"], f"step {t}"
        assert now["cam_dir"] == step["state"]["cam_dir"], f"step {t}"
        for key, value in step["state"]["init_state"].items():
            assert now[key] == value, f"step {t}: {key}"


def test_reference_obs_shape_at_the_reference_size():
    require_recordings("maze_3d")
    for episode in EPISODES[:2]:
        env = visgym.make(episode["env_id"], render_size=REFERENCE_SIZE)
        frames, _ = env.reset(init_states=[episode["init_state"]])
        assert list(frames.shape[1:]) == episode["obs_shape"]


def test_default_solver_reproduces_the_recorded_plans():
    require_recordings("maze_3d")
    solver_eps = [e for e in EPISODES if e["episode_kind"] == "solver" and not e["solver_call"]]
    assert solver_eps
    for e in solver_eps:
        env = visgym.make(e["env_id"], num_envs=1, max_steps=None, autoreset="disabled")
        env.reset(init_states=[e["init_state"]])
        plan = env.solve()[0]
        assert plan == [s["action"] for s in e["steps"]], episode_id(e)


def test_padded_solver_plans_have_the_recorded_length_and_succeed():
    require_recordings("maze_3d")
    padded = [e for e in EPISODES if e["episode_kind"] == "solver" and e["solver_call"]]
    assert padded
    for e in padded:
        env = visgym.make(e["env_id"], num_envs=1, max_steps=None, autoreset="disabled")
        env.reset(init_states=[e["init_state"]])
        plan = env.solve(num_steps=e["solver_call"]["num_steps"])[0]
        assert len(plan) == e["solver_plan_len"], episode_id(e)
        for action in plan:
            _, reward, terminated, _, _ = env.step([action])
        assert terminated[0] and reward[0] == 1.0


# ---------------------------------------------------------------------------------------------
# the reset frame of episode 0

WALL, GROUND, CEILING = 0, 1, 2


def _box_mean(a, r):
    c = np.cumsum(np.cumsum(np.pad(a, ((r + 1, r), (r + 1, r)), mode="edge"), 0), 1)
    k = 2 * r + 1
    return (c[k:, k:] - c[:-k, k:] - c[k:, :-k] + c[:-k, :-k]) / (k * k)


def _reference_classes(ref):
    """Wall / ground / ceiling of the reference frame from its colours: red minus blue,
    smoothed over 13x13 pixels, is about -4 on the bluish ceiling, 15..30 on the grey stone and
    35..42 on the sand (the stones' thin sandy mortar lines blur into the stone)."""
    red_minus_blue = _box_mean(ref[..., 0].astype(float) - ref[..., 2], 6)
    return np.where(red_minus_blue < 7, CEILING, np.where(red_minus_blue > 33, GROUND, WALL))


def _run_from_edge(mask):
    """Per column: how many pixels from the first row on belong to the region."""
    return np.where(mask.all(0), mask.shape[0], np.argmin(mask, axis=0))


@pytest.mark.parametrize("difficulty", ["easy", "hard"])
def test_reset_frame_geometry_and_colours_match_the_reference(difficulty):
    episode = reference_episode(EPISODES, f"maze_3d/{difficulty}")
    ref = reference_frame("maze_3d", difficulty)
    env = visgym.make(f"maze_3d/{difficulty}", render_size=REFERENCE_SIZE)
    frames, _ = env.reset(init_states=[episode["init_state"]])
    ours_rgb = frames[0].copy()
    assert ours_rgb.shape == ref.shape
    # Our surface classes, exactly: the same episode with one flat colour per texture.
    family = env.family
    flat = [np.full((2, 2, 3), c, np.uint8) for c in ((255, 0, 0), (0, 255, 0), (0, 0, 255))]
    family.atlas, family.texture_rects = raster3d.pack_textures(flat)
    frames, _ = env.reset(init_states=[episode["init_state"]])
    ours = np.argmax(frames[0], axis=-1)
    theirs = _reference_classes(ref)
    for region, from_bottom in ((CEILING, False), (GROUND, True)):
        a, b = ours == region, theirs == region
        if from_bottom:
            a, b = a[::-1], b[::-1]
        diff = np.abs(_run_from_edge(a) - _run_from_edge(b))
        assert np.median(diff) <= 2 and np.percentile(diff, 95) <= 5, (region, diff.max())
        assert a.sum() > 0.05 * a.size
    for region in (WALL, GROUND, CEILING):
        mask = ours == region
        ours_mean = ours_rgb[mask].mean(0)
        ref_mean = ref[mask].mean(0)
        assert np.abs(ours_mean - ref_mean).max() < 10, (region, ours_mean, ref_mean)
