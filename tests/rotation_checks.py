"""Shared helpers of the two 3-D mental-rotation families' tests (cube and objaverse): basis
rotations, one-episode envs, and the parity replays' strategy names, keywords and tolerances."""
import math

import numpy as np

import visgym
from parity_data import replay_env, replay_kwargs


def rx(t):
    c, s = math.cos(t), math.sin(t)
    return np.array([[1, 0, 0], [0, c, -s], [0, s, c]])


def ry(t):
    c, s = math.cos(t), math.sin(t)
    return np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]])


def rz(t):
    c, s = math.cos(t), math.sin(t)
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])


def make_env(env_id, n=1, **kwargs):
    """n episodes without a budget or auto-reset."""
    return visgym.make(env_id, num_envs=n, max_steps=None, autoreset="disabled", **kwargs)


def solver_strategy(call, default):
    """The reference's solver_call as our strategy name (uniform=False: "axis-angle-random")."""
    strategy = call.get("strategy") or default
    if call.get("uniform") is False:
        strategy = strategy.replace("axis-angle", "axis-angle-random")
    return strategy


# The reference's registered (object) frame unless recorded otherwise: our presets are the
# harness's world frame.
REPLAY_DEFAULTS = {"action_frame": "object"}


def replay_keywords(episode):
    """replay_kwargs with REPLAY_DEFAULTS where the recording gives none."""
    return {**REPLAY_DEFAULTS, **replay_kwargs(episode)}


def replay_reset(episode):
    """The recorded episode's env rebuilt from its init state (parity_data.replay_env)."""
    return replay_env(episode, REPLAY_DEFAULTS)


def close(got, want, what):
    """Recorded floats have 6 significant digits: 1e-5 relative with a 2e-6 floor near zero."""
    assert abs(got - want) <= max(1e-5 * abs(want), 2e-6), f"{what}: {got} vs {want}"
