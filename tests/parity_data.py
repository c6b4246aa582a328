"""Shared fixtures: where the reference recordings live, and a small JSONL reader."""
import json
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("VISGYM_SHARED", REPO.parent / "shared"))
PARITY = SHARED / "parity"


def load_parity(family: str) -> list:
    path = PARITY / f"{family}.jsonl"
    if not path.exists():
        pytest.skip(f"reference recordings not found at {path} (set VISGYM_SHARED)")
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def episode_id(episode: dict) -> str:
    """Test id of a recorded episode, e.g. ``maze_2d/easy#12``."""
    return f"{episode['env_id']}#{episode['episode']}"


def check_feedback(got: str, want: str, action: str) -> None:
    """Feedback equals the recording, except parse errors: the reference embeds Python's own
    exception text there, so only its fixed prefix (with the action's repr) and suffix count."""
    if want.startswith("Cannot parse action string"):
        prefix = f"Cannot parse action string {action!r}:"
        assert got.startswith(prefix[: min(len(prefix), 200)]), got
        assert got.endswith("so the action is invalid.")
    else:
        assert got == want, (got, want)


def replay_env(episode: dict):
    """A one-episode BatchEnv (no budget, no auto-reset) rebuilt from the recording."""
    import visgym

    env = visgym.make(episode["env_id"], num_envs=1, max_steps=None, autoreset="disabled",
                      **episode["make_kwargs"])
    env.reset(init_states=[episode["init_state"]])
    return env


def replay_steps(env, episode: dict):
    """Send the recording's actions to a one-episode env and check what every family shares:
    feedback, reward, terminated and truncated as recorded. A step where the reference raised
    must instead be an invalid action that changes nothing and does not terminate; those steps
    are checked here and not yielded. Yields (t, step) for the family to compare its state."""
    for t, step in enumerate(episode["steps"]):
        before = env.state_dicts()[0]
        _, reward, terminated, truncated, info = env.step([step["action"]])
        if "exception" in step:
            assert env.state_dicts()[0] == before, f"step {t}: state changed"
            assert "not in the valid action space" in info["feedback"][0], info["feedback"][0]
            assert not terminated[0] and reward[0] == 0, f"step {t}"
            continue
        check_feedback(info["feedback"][0], step["feedback"], step["action"])
        assert float(reward[0]) == step["reward"], f"step {t}"
        assert bool(terminated[0]) == step["terminated"], f"step {t}"
        assert bool(truncated[0]) == step["truncated"], f"step {t}"
        yield t, step
