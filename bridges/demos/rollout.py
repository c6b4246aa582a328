"""The rollout of a batch of attempts: solver plans played through the turn loop, in lockstep.

``rollout`` resets ``ROLLOUT_BATCH`` attempts together in one BatchEnv, hashes their init
states (an excluded one is skipped), has the batched solver plan the rest, and plays them with
one ``EpisodeLoop`` (bridges/turns.py) per attempt, prompted with ``DEMO_PROMPT``: every step
asks each running loop for its user text, hands it the plan's action as the reply (so nothing is
parsed), steps all running rows in one ``env.step(actions, active=running)`` call and gives each
loop its ``StepResult``. The loops decide when an episode ends and whether it succeeded (the one
success rule, core.rollout.episode_success); their transcripts become the ShareGPT turns and the
image paths. Each step's frame is JPEG-encoded with one incremental encoder per batch row
(consecutive frames differ in a few MCUs; same bytes as Pillow, render/jpeg.py).
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

import numpy as np

from ...core import make
from ...core.grammar import STOP_ACTION
from ...core.registry import consumer_kwargs
from ..agents import Reply
from ..conversation import REPLY_TEMPLATE, episode_instructions, sharegpt_turns
from ..imaging import frame_encoder
from ..prompts import DEMO_PROMPT
from ..stepper import StepResult
from ..turns import EpisodeLoop
from .config import DemoConfig, attempt_seed
from .exclusion import canonical_json, hash_canonical

ROLLOUT_BATCH = 16
"""Attempts stepped together inside a shard. Small enough that the batch's frames, the
encoders' previous frames and block arrays of both workers stay in the shared L3 cache (at 100
encoding took 1.5x as long, at 32 the bench ran ~15% slower than at 16); episodes are
independent, so this does not change any output."""

_ENVS: dict = {}
_ENCODERS: dict = {}


def batch_env(env_id: str, count: int, budget: int, kwargs: dict | None = None):
    """A BatchEnv of ``count`` rows without autoreset, kept for the next batch in this process."""
    key = (env_id, count, budget, json.dumps(kwargs or {}, sort_keys=True))
    if key not in _ENVS:
        _ENVS[key] = make(env_id, num_envs=count, autoreset="disabled", max_steps=budget,
                          **(kwargs or {}))
    return _ENVS[key]


def frame_kwargs(cfg: DemoConfig) -> dict:
    """The make() keywords of a task's envs: unless --full-size-frames, the family's overrides
    for drawing at the images' size (Family.consumer_overrides)."""
    return {} if cfg.full_size_frames else consumer_kwargs(cfg.env_id, {}, cfg.max_long_side)


def _encoders(count: int, shape: tuple, max_long_side, quality: int) -> list:
    pool = _ENCODERS.setdefault((shape, max_long_side, quality), [])
    pool.extend(frame_encoder(shape, max_long_side, quality) for _ in range(count - len(pool)))
    return pool[:count]


@dataclass
class Attempt:
    """One attempt at an episode, and (once rolled out) its outcome and conversation."""

    number: int
    attempt: int
    seed: int
    strategy: str | None
    num_steps: int | None
    init_state: str = ""        # canonical JSON
    hash: str = ""
    skipped: bool = False
    success: bool = False
    turns: list = field(default_factory=list)     # ShareGPT turns (successful attempts)
    images: list = field(default_factory=list)    # image paths (successful attempts)


def new_attempt(cfg: DemoConfig, strategies: list, number: int, attempt: int) -> Attempt:
    seed = attempt_seed(cfg.task, cfg.split, cfg.seed, number, attempt)
    # Strategy per episode number; plan length per attempt, from its seed only.
    num_steps = None
    if cfg.num_steps is not None:
        num_steps = int(np.random.default_rng(seed).integers(cfg.num_steps[0],
                                                              cfg.num_steps[1] + 1))
    return Attempt(number, attempt, seed, strategies[number % len(strategies)], num_steps)


def _plans(env, attempts: list) -> list:
    """The solver's plan of each attempt that is not skipped (None for skipped rows), ending in
    a stop action; the solver runs once per (strategy, plan length)."""
    plans: list = [None] * len(attempts)
    groups: dict = {}
    for b, e in enumerate(attempts):
        if not e.skipped:
            groups.setdefault((e.strategy, e.num_steps), []).append(b)
    for (strategy, num_steps), rows in groups.items():
        for b, plan in zip(rows, env.solve(strategy=strategy, num_steps=num_steps, rows=rows)):
            plan = list(plan) if plan else []
            if not plan or "('stop'" not in plan[-1]:
                plan.append(STOP_ACTION)
            plans[b] = plan
    return plans


def rollout(cfg: DemoConfig, attempts: list, image_dir: str, timing: dict, keep,
            forbidden: frozenset) -> None:
    """Step ``attempts`` together in one BatchEnv, filling in their outcome, turns and image
    paths; the JPEGs of successful attempts go to ``keep`` (a dict by relative path, or a
    callable taking a list of (file name, bytes)) when each attempt ends."""
    count = len(attempts)
    budget = cfg.budget
    env = batch_env(cfg.env_id, count, budget, frame_kwargs(cfg))
    t0 = time.perf_counter()
    env.reset(seeds=[e.seed for e in attempts])
    for e, state in zip(attempts, env.state_dicts()):
        e.init_state = canonical_json(state)
        e.hash = hash_canonical(cfg.task, e.init_state)
        e.skipped = e.hash in forbidden
    plans = _plans(env, attempts)
    timing["reset_solve_s"] += time.perf_counter() - t0

    settings = DEMO_PROMPT
    loops: list = [None if e.skipped else EpisodeLoop(settings, budget, episode_instructions(
        env, b, settings.text_mode, settings.elicit_verbalization))
        for b, e in enumerate(attempts)]
    # One incremental encoder per batch row: consecutive frames differ in a few MCUs. The
    # encoders are kept for the next batch in this process (their buffers are already mapped,
    # and the next episode's frames share their background); the bytes do not depend on it.
    encoders = _encoders(count, env.frames.shape[1:], cfg.max_long_side, quality=cfg.quality)
    jpegs: list = [[] for _ in range(count)]   # held until the attempt's outcome is known
    replies: dict = {}                           # action -> the solver's Reply of it
    rows = [b for b, loop in enumerate(loops) if loop is not None]   # the running attempts
    running = np.zeros(count, np.bool_)
    running[rows] = True
    full = list(env.frames.shape[1:3])
    for t in range(budget):     # every loop ends at the budget at the latest
        if not rows:
            break
        t0 = time.perf_counter()
        frames, sizes = env.frames, env.frame_hw.tolist()   # each episode's own frame size
        for b in rows:
            size = sizes[b]
            # The whole row when the frame fills it (the same pixels, indexed faster).
            frame = frames[b] if size == full else frames[b, :size[0], :size[1]]
            jpegs[b].append(encoders[b](frame))
        timing["encode_s"] += time.perf_counter() - t0
        # Each loop's user text, then the plan's action as the solver's reply.
        actions: list = [None] * count
        for b in rows:
            loop, plan = loops[b], plans[b]
            loop.next_text()
            action = plan[t] if t < len(plan) else STOP_ACTION
            reply = replies.get(action)
            if reply is None:
                reply = replies[action] = Reply(REPLY_TEMPLATE.format(action=action))
            actions[b] = loop.take_reply(reply, action)
        t0 = time.perf_counter()
        _, reward, terminated, truncated, info = env.step(actions, active=running)
        timing["step_s"] += time.perf_counter() - t0
        feedback = info["feedback"]
        reward, terminated, truncated = reward.tolist(), terminated.tolist(), truncated.tolist()
        code, invalid = info["code"].tolist(), info["invalid"].tolist()
        success = info["success"].tolist()
        # Each loop takes its result and says whether the attempt ended (and succeeded).
        left = []
        for b in rows:
            loop = loops[b]
            if loop.take_result(StepResult(reward[b], terminated[b], truncated[b], feedback[b],
                                           code[b], invalid[b], success[b])):
                running[b] = False
                _finish(attempts[b], loop.transcript, image_dir, jpegs[b], keep, timing)
                jpegs[b] = []
            else:
                left.append(b)
        rows = left


def _finish(e: Attempt, transcript, image_dir: str, jpegs: list, keep, timing: dict) -> None:
    """An ended attempt's outcome; a successful one's turns and image paths from its
    transcript, and its JPEGs handed to ``keep``."""
    e.success = transcript.success
    if not e.success:
        return
    steps = transcript.turns
    e.turns = [part for turn in steps for part in sharegpt_turns(turn.prompt, turn.action)]
    prefix = f"{image_dir}/e{e.number:06d}_s"
    e.images = [f"{prefix}{turn.step:03d}.jpg" for turn in steps]
    t0 = time.perf_counter()
    if isinstance(keep, dict):
        keep.update(zip(e.images, jpegs))
    else:
        cut = len(image_dir) + 1    # the file names
        keep([(path[cut:], data) for path, data in zip(e.images, jpegs)])
    timing["write_s"] += time.perf_counter() - t0
