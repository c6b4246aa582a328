"""The success rule, and stepping a BatchEnv through given action plans.

``episode_success`` is the one definition of a successful episode (DESIGN.md "Outcomes are
data"): it terminated, and ``info["success"]`` was true on its last step. The evaluation records,
the demonstrations, the reports and ``run_plans`` all use it; nothing derives success from the
reward or from feedback text.

``run_plans`` is the one rollout loop of tests, CLI and bench.

Row i follows ``plans[i]`` (a list of action strings, usually ``env.solve()``'s, ending with a
stop). Rows whose plan is used up, or whose episode terminated or was truncated, are left out of
later steps through ``step(active=...)``, so no row is ever padded with extra actions and no
episode is auto-reset by the rollout itself.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np


def episode_success(terminated, success_on_last_step):
    """Whether an episode succeeded: it terminated with ``info["success"]`` true on its last
    step (bools, or bool arrays over episodes)."""
    if isinstance(terminated, np.ndarray) or isinstance(success_on_last_step, np.ndarray):
        return np.logical_and(terminated, success_on_last_step)
    return bool(terminated) and bool(success_on_last_step)


@dataclass
class RolloutResult:
    """Per-row totals of a rollout."""

    reward: np.ndarray       # float64[B]: sum of the rewards of the row's steps
    terminated: np.ndarray   # bool[B]: the episode terminated (a stop, or the family's own end)
    truncated: np.ndarray    # bool[B]: the step budget ran out first
    steps: np.ndarray        # int64[B]: actions the row took
    feedback: list           # per row, the feedback of its last step
    success: np.ndarray = None   # bool[B]: info["success"] of the row's last step

    @property
    def solved(self) -> np.ndarray:
        """bool[B]: the row's episode succeeded (``episode_success``)."""
        return episode_success(self.terminated, self.success)


def run_plans(env, plans: Sequence[Sequence[str]],
              on_step: Callable[..., None] | None = None) -> RolloutResult:
    """Step ``env`` (a BatchEnv after ``reset``) through one plan per row; ``on_step(t, frames,
    reward, terminated, truncated, info, active)`` is called after every step (``active``: the
    rows stepped in it). Returns the per-row totals."""
    batch = env.num_envs
    if len(plans) != batch:
        raise ValueError(f"plans: expected {batch} plans (one per episode), got {len(plans)}")
    lengths = np.array([len(p) for p in plans], np.int64)
    result = RolloutResult(reward=np.zeros(batch), terminated=np.zeros(batch, np.bool_),
                           truncated=np.zeros(batch, np.bool_), steps=np.zeros(batch, np.int64),
                           feedback=[""] * batch, success=np.zeros(batch, np.bool_))
    active = lengths > 0
    t = 0
    while active.any():
        actions = [plans[b][t] if active[b] else None for b in range(batch)]
        frames, reward, terminated, truncated, info = env.step(actions, active=active)
        result.reward += np.where(active, reward, 0.0)
        result.terminated |= active & terminated
        result.truncated |= active & truncated
        result.steps += active
        np.copyto(result.success, info["success"], where=active)
        for b in np.flatnonzero(active).tolist():
            result.feedback[b] = info["feedback"][b]
        if on_step is not None:
            on_step(t, frames, reward, terminated, truncated, info, active)
        t += 1
        active = active & ~terminated & ~truncated & (lengths > t)
    return result
