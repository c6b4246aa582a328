"""Shared fixtures: where the reference recordings live, a small JSONL reader, and the checks
every replay repeats (the env rebuilt from a recording and checked after its reset, the recorded
steps replayed, a step that must change nothing, the reset frame against the reference's PNG).

The recordings live outside the repository (``../shared/parity``, or ``$VISGYM_SHARED/parity``).
Without them the parity tests skip, except under CI (``CI`` set to any non-empty value), where a
missing recording fails: a checkout without them must not pass with zero parity checks. Every
parity module therefore has a ``test_recordings_are_present`` calling ``require_recordings``
(its recording-parametrized tests collect nothing when the file is missing).
"""
import json
import os
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]


def parity_dir() -> Path:
    """Where the recordings are, read from the environment now."""
    return Path(os.environ.get("VISGYM_SHARED", REPO.parent / "shared")) / "parity"


SHARED = parity_dir().parent
PARITY = parity_dir()


def missing_recording(path) -> None:
    """Skip the calling test because a recording is missing; fail it instead under CI."""
    message = f"reference recordings not found at {path} (set VISGYM_SHARED)"
    if os.environ.get("CI"):
        pytest.fail(f"{message}; under CI (CI={os.environ['CI']!r}) that is a failure",
                    pytrace=False)
    pytest.skip(message)


def require_recordings(*families: str) -> None:
    """Inside a test: the families' JSONL recordings exist, else missing_recording."""
    for family in families:
        path = parity_dir() / f"{family}.jsonl"
        if not path.is_file():
            missing_recording(path)


def load_parity(family: str) -> list:
    """A family's recorded episodes, or [] when the file is missing (at collection time; the
    module's test_recordings_are_present then skips, or fails under CI)."""
    path = parity_dir() / f"{family}.jsonl"
    if not path.is_file():
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def reference_episode(episodes: list, env_id: str, index: int = 0) -> dict:
    """Inside a test: recorded episode ``index`` of ``env_id``, else missing_recording."""
    for episode in episodes:
        if episode["env_id"] == env_id and episode["episode"] == index:
            return episode
    missing_recording(f"{parity_dir()} ({env_id} episode {index})")


def reference_frame(family: str, difficulty: str) -> np.ndarray:
    """Inside a test: the reference's reset frame ``frames/<family>_<difficulty>.png`` as
    uint8 RGB, else missing_recording."""
    from PIL import Image

    path = parity_dir() / "frames" / f"{family}_{difficulty}.png"
    if not path.is_file():
        missing_recording(path)
    return np.asarray(Image.open(path).convert("RGB"))


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


# Recorded constructor keywords that name a data directory relative to the parity folder.
DATA_DIR_KEYWORDS = ("sample_dir", "root_dir", "annotation_file")
# Recorded keywords our families do not take: the reference's own step cap (the harness's
# ``max_steps``, which the reference env ignored; ours is BatchEnv's budget) and the constructor
# seed that fixed the reference's image order (our image is a function of the episode seed, and
# replays name it in the init state).
IGNORED_KEYWORDS = ("max_steps", "seed")
# Init-state fields holding a path the recorder rewrote relative to the parity folder
# ("inputs/jigsaw/img3.png"); the reference stores them relative to its data directory.
PATH_FIELDS = ("image_name", "user_image_path")


def replay_kwargs(episode: dict) -> dict:
    """The recording's ``make_kwargs`` as our ``make`` takes them: data directories resolved
    against the parity folder, the keywords in IGNORED_KEYWORDS dropped."""
    kwargs = {}
    for key, value in episode["make_kwargs"].items():
        if key in IGNORED_KEYWORDS:
            continue
        if key in DATA_DIR_KEYWORDS and isinstance(value, str):
            value = str(parity_dir() / value)
        kwargs[key] = value
    return kwargs


def replay_init_state(episode: dict) -> dict:
    """The recording's ``init_state`` with parity-relative paths made relative to the episode's
    data directory again (``inputs/jigsaw/img3.png`` -> ``img3.png``), as the reference has them."""
    state = dict(episode["init_state"])
    prefixes = [v.rstrip("/") + "/" for k, v in episode["make_kwargs"].items()
                if k in DATA_DIR_KEYWORDS and isinstance(v, str)]
    for key in PATH_FIELDS:
        value = state.get(key)
        if isinstance(value, str):
            for prefix in prefixes:
                if value.startswith(prefix):
                    state[key] = value[len(prefix):]
                    break
    return state


def replay_env(episode: dict, defaults: dict | None = None):
    """A one-episode BatchEnv (no budget, no auto-reset) rebuilt from the recording;
    ``defaults``: keywords used where the recording gives none (a family whose presets differ
    from the reference's registered defaults)."""
    import visgym

    env = visgym.make(episode["env_id"], num_envs=1, max_steps=None, autoreset="disabled",
                      **{**(defaults or {}), **replay_kwargs(episode)})
    env.reset(init_states=[replay_init_state(episode)])
    return env


def check_opening(env, episode: dict) -> None:
    """What every replay checks right after the reset: the frame's shape, the prompt, and the
    text mode (its prompt and observation where the family has one, none recorded where not)."""
    assert list(env.frame(0).shape) == episode["obs_shape"]
    assert env.prompt() == episode["prompt"]
    if env.family.has_text_mode:
        assert env.prompt(text_mode=True) == episode["prompt_text_mode"]
        assert env.render_text()[0] == episode["text_obs"]
    else:
        assert episode["text_obs"] is None


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


def inputs_dir(family: str) -> str:
    """The recorded input folder of ``family`` (``parity/inputs/<family>``), as a string."""
    return str(parity_dir() / "inputs" / family)


def start_replay(episode: dict, raised=(), prompt: str | None = None):
    """A replay env (``replay_env``) checked right after its reset: the frame size (the row's
    ``frame_hw`` and the frame) and the prompt as recorded (``prompt``: what is expected instead,
    where the family words it differently on purpose), the init state read back exactly, and
    every exception the reference raised in the episode one of ``raised``. Returns (env, the
    replayed init state)."""
    env = replay_env(episode)
    init = replay_init_state(episode)
    assert [*env.frame_hw[0].tolist(), 3] == episode["obs_shape"]
    assert list(env.frame(0).shape) == episode["obs_shape"]
    assert env.prompt() == (episode["prompt"] if prompt is None else prompt)
    assert env.state_dicts()[0] == init
    exceptions = {s["exception"] for s in episode["steps"] if "exception" in s}
    assert exceptions <= set(raised), exceptions
    return env, init


def step_changing_nothing(env, action: str) -> dict:
    """Send ``action`` to a one-episode env and check it changed nothing: the state and every
    pixel as before, not terminated, reward 0. Returns the step's info (for its feedback)."""
    before = env.state_dicts()
    frames = env.frames.copy()
    _, reward, terminated, _, info = env.step([action])
    assert env.state_dicts() == before and not terminated[0] and reward[0] == 0
    np.testing.assert_array_equal(env.frames, frames)
    return info


def check_reset_frame(episodes: list, family: str, difficulty: str) -> None:
    """Episode 0 of ``<family>/<difficulty>`` replayed: its reset frame equals the reference's
    PNG pixel for pixel (tolerance: none), and the batch buffer is zero outside the frame."""
    episode = reference_episode(episodes, f"{family}/{difficulty}")
    want = reference_frame(family, difficulty)
    env = replay_env(episode)
    got = env.frame(0)
    assert got.shape == want.shape == tuple(episode["obs_shape"])
    differs = (got != want).any(axis=2)
    assert not differs.any(), f"{int(differs.sum())} pixels differ"
    h, w = want.shape[:2]
    assert not env.frames[0, h:].any() and not env.frames[0, :, w:].any()
