"""matchstick_equation replays the reference's recorded episodes (parity/matchstick_equation.jsonl).

Every recorded episode is rebuilt from its init_state and fed the same action strings; feedback,
reward, termination and the recorded state (current equation, history stack, moves in effect)
must match at every step, and the prompts and text observation exactly. The bfs and dfs solver
plans must equal the reference's action for action (dfs traces of up to 565 actions included),
and the golden moves of its sos plans must equal ours.

Allow-listed differences, each deliberate (see the module docstring of
visgym.envs.matchstick_equation):
- parse errors: the reference embeds Python's own exception text, so only the fixed prefix
  ("Cannot parse action string <repr>:", the first 200 characters of it, since long actions are
  quoted shortened) and suffix ("so the action is invalid.") are compared;
- steps where the reference raised (string move payloads): the state must be unchanged and the
  feedback the invalid-payload message;
- obs_shape: the reference squashed every equation into 80x300; our frame is the unsquashed
  100x808 layout (the reference size is available with image_width/image_height, checked below);
- frames: the matchstick glyphs equal the reference's pixels exactly (checked on the reference's
  own 300x80 squash of our canvas); the index labels use a different font (Pillow's bundled one,
  not the system's DejaVuSans-Bold), so the label band is not compared;
- sos detours: the reference drew them from NumPy's generator (sos_seed=12 or the env RNG); ours
  come from our own stream, so only the golden moves and the plan shape are compared.
"""
import numpy as np
import pytest
from PIL import Image

import visgym
from parity_data import (episode_id, load_parity, reference_episode, reference_frame, replay_steps,
                         require_recordings)

EPISODES = load_parity("matchstick_equation")
STOP = "('stop', 'stop')"
UNDO = "('undo', 'undo')"




def _env(episode):
    env = visgym.make(episode["env_id"], num_envs=1, max_steps=None, autoreset="disabled",
                      **episode["make_kwargs"])
    env.reset(init_states=[episode["init_state"]])
    return env


def _recorded_state(env):
    d = env.state_dicts()[0]
    history = ["".join(eq) for eq in d.get("history", [d["broken"]])]
    return {"eq": env.family.equation(env.state, 0), "history": history,
            "moves": int(env.state.depth[0])}


def test_recordings_are_present():
    """Without the recordings the replays collect nothing: this skips (fails under CI)."""
    require_recordings("matchstick_equation")


@pytest.mark.parametrize("episode", EPISODES, ids=episode_id)
def test_replays_reference_episode(episode):
    env = _env(episode)
    assert env.prompt() == episode["prompt"]
    assert env.prompt(text_mode=True) == episode["prompt_text_mode"]
    assert env.render_text()[0] == episode["text_obs"]
    for t, step in replay_steps(env, episode):
        assert _recorded_state(env) == step["state"], f"step {t}"


def _strategy(episode):
    call = dict(episode["solver_call"])
    return call.pop("strategy", "sos"), call


@pytest.mark.parametrize("episode", [e for e in EPISODES
                                     if e["episode_kind"] in ("solver", "solver_noisy")
                                     and _strategy(e)[0] in ("bfs", "dfs")], ids=episode_id)
def test_bfs_and_dfs_plans_equal_the_reference(episode):
    env = _env(episode)
    strategy, _ = _strategy(episode)
    plan = env.family.solve_with(env.state, [0], strategy)[0]
    assert len(plan) == episode["solver_plan_len"]
    if episode["episode_kind"] == "solver":
        recorded = [s["action"] for s in episode["steps"]]
        if episode.get("solver_plan_truncated"):
            # The recording capped the plan and ended the episode with a stop of its own.
            assert recorded[-1] == STOP
            assert plan[:len(recorded) - 1] == recorded[:-1]
        else:
            assert plan == recorded


def _without_detours(plan):
    out = []
    for action in plan:
        if action == UNDO:
            out.pop()
        else:
            out.append(action)
    return out


@pytest.mark.parametrize("episode", [e for e in EPISODES if e["episode_kind"] == "solver"
                                     and _strategy(e)[0] == "sos"], ids=episode_id)
def test_sos_plans_share_the_reference_golden_path(episode):
    env = _env(episode)
    _, call = _strategy(episode)
    recorded = [s["action"] for s in episode["steps"]]
    golden = env.family.solve_with(env.state, [0], "bfs")[0]
    assert _without_detours(recorded) == golden
    ours = env.family.solve_with(env.state, [0], "sos", **call)[0]
    assert _without_detours(ours) == golden
    assert len(ours) in (len(golden), len(golden) + 2)


@pytest.mark.parametrize("difficulty", ["easy", "hard"])
def test_glyph_pixels_match_the_reference_frame(difficulty):
    """Squashing our canvas as the reference does (crop to the equation, Pillow resize to
    300x80) reproduces the reference frame exactly above the label band."""
    episode = reference_episode(EPISODES, f"matchstick_equation/{difficulty}")
    env = visgym.make(episode["env_id"])
    frames, _ = env.reset(init_states=[episode["init_state"]])
    assert list(frames.shape[1:]) == [100, 808, 3]
    n = len(episode["init_state"]["broken"])
    x0 = (frames.shape[2] + 8 - 68 * n) // 2
    canvas = Image.fromarray(frames[0][:, x0:x0 + 68 * n - 8])
    squashed = np.asarray(canvas.resize((300, 80)))
    want = reference_frame("matchstick_equation", difficulty)
    assert list(want.shape) == episode["obs_shape"]
    # Rows 0..67 take no input from the label band (bicubic support at this scale is 2.5 px).
    np.testing.assert_array_equal(squashed[:68], want[:68])


def test_reference_frame_size_is_available():
    require_recordings("matchstick_equation")
    episode = EPISODES[0]
    env = visgym.make(episode["env_id"], image_width=300, image_height=80)
    frames, _ = env.reset(init_states=[episode["init_state"]])
    assert list(frames.shape[1:]) == episode["obs_shape"]
