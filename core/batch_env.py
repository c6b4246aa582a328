"""BatchEnv: B episodes of one family behind a gymnasium-vector-like surface.

It owns everything that is not the family's business: seeds, the per-episode step counter and
step budget (truncation), automatic resets with gymnasium's "next_step" semantics, the
preallocated frame buffer, the parsed-action buffers, and the translation of feedback codes into
the reference's feedback text. The family's kernels update the state in place and write frames
into the buffer, so ``step`` allocates nothing beyond the per-episode feedback list.

Arrays returned by ``reset`` and ``step`` (frames, reward, terminated, truncated, ...) are the
env's own buffers and are overwritten by the next call: copy them to keep them.

Frames (DESIGN.md "Frames"): ``frames`` is one ``uint8[B, H, W, 3]`` buffer of the family's
capacity ``(H, W)``; ``frame_hw`` (int32[B, 2], also ``info["frame_hw"]``) is each episode's own
frame size, and ``frame(i)`` the exact view ``frames[i, :h, :w]`` that everything shown to a
model or a person uses. Pixels outside an episode's frame are zero. For a fixed-size family
``frame_hw`` is the capacity in every row and nothing is tracked per step.
"""
from __future__ import annotations

import os
from typing import Sequence

import numpy as np

from .family import SUCCESS_MESSAGE, Family, copy_state
from .grammar import IGNORED, ActionBatch
from .seeding import check_seeds, draw_seeds, next_seeds
from .state_hash import StateHasher
from .validate import boolean, describe, integer, is_integer, one_of, optional_integer, real

AUTORESET_MODES = ("next_step", "disabled")
# "sparse": the reference's reward (1 for a stop on a solved state). "progress" adds
# potential-based shaping (Ng, Harada & Russell 1999): gamma * Phi(s') - Phi(s) with
# Phi = -family.potential, which leaves the optimal policies unchanged.
REWARD_MODES = ("sparse", "progress")
MAX_PLAN_STEPS = 100_000   # solve(num_steps=...) at most: a plan is a list of strings


def _clear_rows(state, rows: np.ndarray | None) -> None:
    """Zero ``rows`` of every State field (all rows for None) before an episode is made in
    them, so padding a family leaves unwritten is the same in every row, whatever ran there
    before (state hashes compare whole fields)."""
    for array in state:
        if rows is None:
            array.fill(0)
        else:
            array[rows] = 0


def check_rows(rows, count: int, distinct: bool, noun: str = "episode") -> np.ndarray:
    """Row indices in [0, count) as int64, checked before any conversion (``distinct``: no
    repeats and at least one); ValueError naming ``rows`` otherwise."""
    what = f"distinct {noun} indices" if distinct else f"{noun} indices"
    if isinstance(rows, np.ndarray):
        ok = rows.ndim == 1 and rows.dtype.kind in "iu"
    else:
        ok = isinstance(rows, (list, tuple, range)) and all(is_integer(r) for r in rows)
    arr = np.asarray(rows, dtype=np.int64) if ok else None
    if arr is None or (distinct and arr.size == 0) or (arr.size and (
            arr.min() < 0 or arr.max() >= count)) or (
            distinct and np.unique(arr).size != arr.size):
        raise ValueError(f"rows: expected {what} in [0, {count}), got {describe(rows)}")
    return arr


def _physical_memory() -> int | None:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, OSError, ValueError):
        return None


def _check_frame_memory(batch: int, height: int, width: int, row_bytes: int = 0) -> None:
    """Refuse up front a batch whose frame buffer and per-episode buffers (the family's
    ``row_bytes``: its State and workspace) cannot fit in this machine's memory, instead of a
    MemoryError (or the OOM killer) somewhere inside the allocations."""
    frames = int(batch) * int(height) * int(width) * 3
    rest = int(batch) * int(row_bytes)
    need = frames + rest
    have = _physical_memory()
    if have is not None and need > have // 2:
        raise ValueError(
            f"num_envs: {batch} episodes need {need / 2**30:.1f} GiB ({frames / 2**30:.1f} GiB "
            f"for the {height}x{width} frame buffer, {rest / 2**30:.1f} GiB for the family's "
            f"per-episode state and scratch), more than half of this machine's "
            f"{have / 2**30:.1f} GiB of memory")


class BatchEnv:
    """B episodes of one family, stepped together."""

    def __init__(self, family: Family, num_envs: int = 1, *, max_steps: int | None = 20,
                 autoreset: str = "next_step", seed: int | None = None, env_id: str | None = None,
                 reward: str = "sparse", gamma: float = 1.0, state_hash: bool = True):
        num_envs = integer("num_envs", num_envs, 1)
        max_steps = optional_integer("max_steps", max_steps, 1)
        one_of("autoreset", autoreset, AUTORESET_MODES)
        seed = optional_integer("seed", seed, 0)
        one_of("reward", reward, REWARD_MODES)
        gamma = real("gamma", gamma, 0.0, 1.0)
        state_hash = boolean("state_hash", state_hash)
        if reward == "progress" and not family.has_potential:
            raise ValueError(f"reward: {family.name} defines no potential, so it has no "
                             f"'progress' reward")
        self.family = family
        self.params = family.params
        self.env_id = env_id
        self.num_envs = int(num_envs)
        self.max_steps = None if max_steps is None else int(max_steps)
        self.autoreset = autoreset
        self.reward_mode = reward
        self.gamma = float(gamma)
        self.hash_states = state_hash
        self.grammar = family.grammar
        # This env's own parse cache: envs never share mutable parse state (DESIGN "Threads").
        self.parser = family.grammar.new_parser()
        batch = self.num_envs
        height, width = family.frame_shape
        _check_frame_memory(batch, height, width, family.row_bytes())
        self.state = family.new_state(batch)
        self.work = family.new_workspace(batch)
        self.frames = np.zeros((batch, height, width, 3), np.uint8)
        self.frame_hw = np.empty((batch, 2), np.int32)
        self.frame_hw[:, 0] = height
        self.frame_hw[:, 1] = width
        self._variable = bool(family.variable_frames)
        self._hw_scratch = np.empty((batch, 2), np.int32)
        self.reward = np.zeros(batch, np.float32)
        self.terminated = np.zeros(batch, np.bool_)
        self.truncated = np.zeros(batch, np.bool_)
        self.steps = np.zeros(batch, np.int32)
        self.seeds = np.zeros(batch, np.uint64)
        # The reward's parts (info["reward_components"]), each row's potential at its current
        # state (shaping's Phi = -potential) and state hash (info["state_hash"]).
        self._task = np.zeros(batch, np.float32)
        self._shaping = np.zeros(batch, np.float32)
        self._potential = np.zeros(batch, np.float32)
        self._potential_next = np.zeros(batch, np.float32)
        self._hash = np.zeros(batch, np.uint64)
        self._hasher = StateHasher(family, self.state)
        self._codes = np.zeros(batch, np.int32)
        self._done = np.zeros(batch, np.bool_)
        self._scratch = np.zeros(batch, np.bool_)
        self._actions = ActionBatch.empty(batch, self.grammar.width)
        self._all_rows = np.arange(batch, dtype=np.int64)
        self._seed_seq = np.random.SeedSequence(seed)
        self._has_reset = False
        # Feedback text per code: 0 success, 1..15 parser/BatchEnv codes (text comes from the
        # parser, or "" for IGNORED rows), 16.. the family's own messages.
        self._texts = (SUCCESS_MESSAGE,) + ("",) * 15 + tuple(family.feedback_texts)

    # ------------------------------------------------------------------------------ reset
    def reset(self, seeds: Sequence[int] | int | None = None,
              init_states: Sequence[dict] | None = None, options: dict | None = None,
              rows: Sequence[int] | None = None):
        """Start new episodes: from ``init_states`` (reference dicts) if given, else generated
        from ``seeds`` (one per episode; an int s means s, s+1, ...; None draws fresh seeds from
        the env's ``seed``). ``rows`` restarts only those episodes of the batch (seeds and
        init_states then have one entry per row) and leaves the others running. Returns
        (frames, info). Nothing changes if an argument is invalid."""
        rows_arr = self._all_rows if rows is None else self._rows_arg(rows, distinct=True)
        count = rows_arr.shape[0]
        seed_arr = None if seeds is None else check_seeds(seeds, count)
        if init_states is not None:
            if not isinstance(init_states, (list, tuple)) or len(init_states) != count:
                raise ValueError(f"init_states: expected a list of {count} dicts (one per "
                                 f"episode), got {describe(init_states)}")
            staged = self.family.new_state(count)
            _clear_rows(staged, None)
            self.family.load_rows(staged, np.arange(count, dtype=np.int64), list(init_states))
            # Seeds are drawn only once the states loaded, so a refused call changes nothing.
            if seed_arr is None:
                seed_arr = draw_seeds(self._seed_seq, count)
            for dst, src in zip(self.state, staged):
                dst[rows_arr] = src
        else:
            if seed_arr is None:
                seed_arr = draw_seeds(self._seed_seq, count)
            # A refused reset (a photo that cannot be read, ...) leaves the rows as they were.
            saved = [array[rows_arr] for array in self.state]
            _clear_rows(self.state, rows_arr)
            try:
                self.family.reset_rows(self.state, rows_arr, seed_arr)
            except BaseException:
                for array, old in zip(self.state, saved):
                    array[rows_arr] = old
                raise
        self.seeds[rows_arr] = seed_arr
        self.steps[rows_arr] = 0
        self._codes.fill(IGNORED)   # this call took no action in any row
        self._actions.invalid.fill(False)
        self.reward[rows_arr] = 0.0
        self._task[rows_arr] = 0.0
        self._shaping[rows_arr] = 0.0
        self.terminated[rows_arr] = False
        self.truncated[rows_arr] = False
        self._done[rows_arr] = False
        if rows is None:
            self._has_reset = True
        elif not self._has_reset:
            raise RuntimeError("reset(rows=...) needs a full reset() first")
        self.family.render_rows(self.state, self.frames, rows_arr, self.work)
        if self._variable:
            self._track_sizes(rows_arr, all_rows=True)
        if self.reward_mode == "progress":
            self.family.potential(self.state, self._potential_next)
            self._potential[rows_arr] = self._potential_next[rows_arr]
        if self.hash_states:
            self._hasher(self._hash)
        return self.frames, self._info([""] * self.num_envs)

    # ------------------------------------------------------------------------------- step
    def step(self, actions: Sequence[str], active: np.ndarray | None = None):
        """Apply one action string per episode. Returns (frames, reward, terminated, truncated,
        info); the step's outcome is data in info (DESIGN.md "Outcomes are data"):
        info["feedback"] (list[str], the reference's feedback text), info["code"] (int32[B]: 0
        executed, 1-4 the parser's errors, 5 not stepped this call, 16+ the family's own
        outcomes, ``family.feedback_texts[code - 16]``), info["invalid"] (bool[B]: the text was
        not an action of the family, codes 1-4), info["success"] (bool[B]: the state is solved
        now, a stop would be rewarded), info["step"] (int[B], steps taken in the current
        episode), info["seed"] and info["frame_hw"].

        ``active`` (bool[B], optional) steps only those episodes: the others keep their state,
        step count and pending auto-reset, and report reward 0, not terminated, feedback "" (their
        entries in ``actions`` are ignored and may be None).
        """
        if not self._has_reset:
            raise RuntimeError("step() called before reset()")
        if isinstance(actions, (str, bytes)) or not hasattr(actions, "__len__"):
            raise ValueError(f"actions: expected a list of {self.num_envs} strings, "
                             f"got {type(actions).__name__}")
        if active is not None:
            active = np.asarray(active)
            if active.dtype != np.bool_ or active.shape != (self.num_envs,):
                raise ValueError(f"active: expected a bool array of shape ({self.num_envs},)")
        family = self.family
        self.parser.parse(actions, self._actions)
        # Episodes that ended on their previous step start over (next-step auto-reset): their
        # action is ignored, so they are not stepped either.
        pending = self._done if active is None else self._done & active
        restart = self.autoreset == "next_step" and bool(pending.any())
        stepped = active
        if restart:
            stepped = ~pending if active is None else active & ~pending
        if stepped is not None:
            np.copyto(self._actions.error, IGNORED, where=~stepped)
            np.logical_and(self._actions.move, stepped, out=self._actions.move)
            np.logical_and(self._actions.stop, stepped, out=self._actions.stop)
            np.logical_and(self._actions.invalid, stepped, out=self._actions.invalid)
        family.step(self.state, self._actions, self.reward, self.terminated, self._codes)
        if active is None:
            self.steps += 1
        else:
            self.steps += active
        if self.max_steps is not None:
            np.greater_equal(self.steps, self.max_steps, out=self.truncated)
            np.logical_not(self.terminated, out=self._scratch)
            np.logical_and(self.truncated, self._scratch, out=self.truncated)
            if active is not None:
                np.logical_and(self.truncated, active, out=self.truncated)
        # Episodes that ended on their previous step start over now, before the drawing, so
        # one drawing call covers the step and the restarts.
        if restart:
            rows = np.flatnonzero(pending)
            new_seeds = next_seeds(self.seeds[rows])
            _clear_rows(self.state, rows)
            family.reset_rows(self.state, rows, new_seeds)
            family.render_step(self.state, self.frames, self.work, rows)
            if self._variable:
                # An episode's frame size is set when it starts (DESIGN "Frames").
                self._track_sizes(rows, all_rows=True)
        else:
            family.render_after_step(self.state, self.frames, self.work)
        self._shape_rewards(stepped)
        if self.hash_states:
            self._hasher(self._hash)

        messages = self._actions.message
        texts = self._texts
        feedback = [messages[b] if 0 < c < IGNORED else texts[c]
                    for b, c in enumerate(self._codes.tolist())]

        if restart:
            self.seeds[rows] = new_seeds
            self.steps[rows] = 0
            self.reward[rows] = 0.0
            self._task[rows] = 0.0
            self.terminated[rows] = False
            self.truncated[rows] = False
            for b in rows.tolist():
                feedback[b] = ""
        if active is None:
            np.logical_or(self.terminated, self.truncated, out=self._done)
        else:
            np.copyto(self._done, self.terminated | self.truncated, where=active)
        return self.frames, self.reward, self.terminated, self.truncated, self._info(feedback)

    def _shape_rewards(self, stepped: np.ndarray | None) -> None:
        """After a step (and its restarts): the task reward into its component and, with
        reward="progress", the shaping gamma * Phi(s') - Phi(s) = potential(s) - gamma *
        potential(s') added to the stepped rows (one potential call covers the stepped rows and
        the restarted ones, whose new potential starts their episode)."""
        np.copyto(self._task, self.reward)
        if self.reward_mode != "progress":
            return
        after = self._potential_next
        self.family.potential(self.state, after)
        shaping = self._shaping
        np.multiply(after, np.float32(self.gamma), out=shaping)
        np.subtract(self._potential, shaping, out=shaping)
        if stepped is not None:
            shaping[~stepped] = 0.0
        self.reward += shaping
        np.copyto(self._potential, after)

    def _info(self, feedback: list) -> dict:
        info = {
            "feedback": feedback,
            "code": self._codes,
            "invalid": self._actions.invalid,   # the parser's error codes (INVALID_CODES)
            "success": self.family.is_success(self.state),
            "step": self.steps,
            "seed": self.seeds,
            "frame_hw": self.frame_hw,
            "reward_components": {"task": self._task, "shaping": self._shaping},
        }
        if self.hash_states:
            info["state_hash"] = self._hash
        return info

    def _track_sizes(self, rows: np.ndarray, all_rows: bool) -> None:
        """After ``rows`` were drawn: take their frame sizes from the family and zero the
        padding outside them (of every row in ``rows`` with ``all_rows``, else of the rows whose
        size changed)."""
        new = self._hw_scratch
        self.family.frame_hw(self.state, new)
        sizes = new[rows]
        height, width = self.frames.shape[1:3]
        bad = (sizes[:, 0] < 1) | (sizes[:, 0] > height) | (sizes[:, 1] < 1) | (sizes[:, 1] > width)
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            raise RuntimeError(f"{self.family.name}.frame_hw: episode {int(rows[k])} has frame "
                               f"size {tuple(sizes[k].tolist())}, outside the capacity "
                               f"{(height, width)}")
        old = self.frame_hw[rows]
        if not all_rows:
            changed = (sizes != old).any(axis=1)
            rows, sizes, old = rows[changed], sizes[changed], old[changed]
        # Pixels outside the previous size are already zero, and the family has drawn the whole
        # new frame: only what the old frame covered outside the new one needs clearing.
        if rows.shape[0]:
            self.family.clear_padding(self.frames, rows, sizes, old)
        self.frame_hw[rows] = sizes

    def frame(self, index: int) -> np.ndarray:
        """Episode ``index``'s frame at its own size: the view ``frames[index, :h, :w]``."""
        i = self._index(index)
        h, w = self.frame_hw[i].tolist()
        return self.frames[i, :h, :w]

    # -------------------------------------------------------------------------- queries
    def _check_reset(self) -> None:
        if not self._has_reset:
            raise RuntimeError("call reset() first")

    def prompt(self, text_mode: bool = False, index: int = 0) -> str:
        """The task instruction of episode ``index`` (text_mode: the ansi variant)."""
        self._check_reset()
        if text_mode and not self.family.has_text_mode:
            raise ValueError(f"text_mode: {self.family.name} has no text mode")
        return self.family.prompt(self.state, self._index(index), text_mode)

    def prompts(self, text_mode: bool = False) -> list[str]:
        return [self.prompt(text_mode, i) for i in range(self.num_envs)]

    def render_text(self, index: int | None = None):
        """The ansi rendering of every episode (a list), or of episode ``index`` (a str);
        families with a text mode only."""
        self._check_reset()
        if not self.family.has_text_mode:
            raise ValueError(f"{self.family.name} has no text rendering")
        if index is not None:
            return self.family.render_text(self.state, self._index(index))
        return [self.family.render_text(self.state, i) for i in range(self.num_envs)]

    def solve(self, strategy: str | None = None, num_steps: int | None = None,
              rows: Sequence[int] | None = None) -> list[list[str]]:
        """Action strings per episode (or per row of ``rows``) that solve it from its current
        state, ending with a stop. Deterministic for a given episode seed and step count; the
        episodes are not changed."""
        self._check_reset()
        strategies = self.family.solver_strategies
        if strategy is not None and strategies and strategy not in strategies:
            raise ValueError(f"strategy: expected one of {tuple(strategies)}, got {strategy!r}")
        num_steps = optional_integer("num_steps", num_steps, 1, MAX_PLAN_STEPS)
        rows_arr = self._all_rows if rows is None else self._rows_arg(rows, distinct=False)
        solver_seeds = next_seeds(self.seeds ^ self.steps.astype(np.uint64))
        if rows_arr.size == 0:
            return []
        return self.family.solve(self.state, rows_arr, strategy, num_steps, solver_seeds)

    def state_dicts(self) -> list[dict]:
        """Each episode's current state as a reference init-state dict (reset(init_states=...)
        with these reproduces the episodes)."""
        self._check_reset()
        return [self.family.to_init_state(self.state, i) for i in range(self.num_envs)]

    def goal_frames(self) -> np.ndarray:
        """Frames of each episode's solved configuration (a new array), for the final-goal
        ablation."""
        self._check_reset()
        goal = self.family.goal_state(copy_state(self.state))
        if goal is None:
            return self._replayed_goal_frames()
        frames = np.zeros_like(self.frames)
        self.family.render_rows(goal, frames, self._all_rows,
                                self.family.new_workspace(self.num_envs))
        if self._variable:
            hw = np.empty_like(self.frame_hw)
            self.family.frame_hw(goal, hw)
            for r, (h, w) in enumerate(hw.tolist()):
                frames[r, h:] = 0
                frames[r, :h, w:] = 0
            self.goal_frame_hw = hw
        else:
            self.goal_frame_hw = self.frame_hw.copy()
        return frames

    def _replayed_goal_frames(self) -> np.ndarray:
        """Goal frames of a family without ``goal_state``: each episode's solver plan replayed
        on a copy of the episodes (the frames where the plans end)."""
        from .rollout import run_plans

        copy = BatchEnv(self.family, self.num_envs, max_steps=None, autoreset="disabled",
                        env_id=self.env_id)
        copy.reset(seeds=self.seeds.tolist(), init_states=self.state_dicts())
        run_plans(copy, copy.solve())
        self.goal_frame_hw = copy.frame_hw.copy()
        return copy.frames.copy()

    def _adopt_outputs(self, mix, rows: slice) -> None:
        """Write the per-episode outputs into ``rows`` of a mix's arrays from now on (a
        MixedEnv's task; core/mixed.py), so gathering a mixed step copies nothing. Called once,
        before the first reset."""
        for mine, theirs in (("reward", "reward"), ("terminated", "terminated"),
                             ("truncated", "truncated"), ("steps", "steps"), ("seeds", "seeds"),
                             ("frame_hw", "frame_hw"), ("_codes", "_codes"),
                             ("_task", "_task_reward"), ("_shaping", "_shaping"),
                             ("_hash", "_hash")):
            view = getattr(mix, theirs)[rows]
            own = getattr(self, mine)
            if view.shape != own.shape or view.dtype != own.dtype:
                raise RuntimeError(f"_adopt_outputs: {theirs} has {view.shape} {view.dtype}, "
                                   f"the env needs {own.shape} {own.dtype}")
            view[...] = own
            setattr(self, mine, view)

    # ------------------------------------------------------------------------------ forks
    def fork(self, src_rows: Sequence[int], dst_rows: Sequence[int]) -> None:
        """Copy running episodes ``src_rows[k]`` into rows ``dst_rows[k]``, completely: the
        family's state, the step count and seed, the last step's reward, flags and pending
        auto-reset, the potential and state hash, and the frame with the render workspace
        (drawn anew from the copied state, which by the contract equals the source's frame).
        The copies then evolve independently and deterministically: the same actions give the
        same frames, rewards and feedback as the source would get. A source may be copied to
        several rows (G continuations of one mid-episode state); a row may be both a source and
        a destination (sources are read before anything is written)."""
        self._check_reset()
        src = self._rows_arg(src_rows, distinct=False)
        dst = self._rows_arg(dst_rows, distinct=True)
        if src.shape != dst.shape:
            raise ValueError(f"dst_rows: expected {src.shape[0]} rows, one per source row, got "
                             f"{dst.shape[0]}")
        for array in self.state:
            array[dst] = array[src]
        for array in (self.steps, self.seeds, self.reward, self.terminated, self.truncated,
                      self._done, self._codes, self._actions.invalid, self._task, self._shaping,
                      self._potential, self._hash):
            array[dst] = array[src]
        self.family.render_rows(self.state, self.frames, dst, self.work)
        if self._variable:
            self._track_sizes(dst, all_rows=True)

    def state_hash(self) -> np.ndarray:
        """uint64[B]: each episode's canonical state hash now (a new array; see
        core/state_hash.py and ``Family.state_hash``)."""
        self._check_reset()
        return self._hasher(np.empty(self.num_envs, np.uint64))

    def success(self) -> np.ndarray:
        self._check_reset()
        return self.family.is_success(self.state)

    def potential(self) -> np.ndarray | None:
        """float32[B]: each episode's distance to its goal (0 exactly on success states;
        ``Family.potential``), or None for a family that defines none."""
        self._check_reset()
        if not self.family.has_potential:
            return None
        out = np.empty(self.num_envs, np.float32)
        self.family.potential(self.state, out)
        return out

    def metrics(self) -> dict:
        """The family's own per-episode measures, ``{name: float[B]}`` (``Family.metrics``)."""
        self._check_reset()
        return self.family.metrics(self.state)

    def _rows_arg(self, rows, distinct: bool) -> np.ndarray:
        return check_rows(rows, self.num_envs, distinct)

    def _index(self, index) -> int:
        if isinstance(index, bool) or not isinstance(index, (int, np.integer)) or not (
                0 <= index < self.num_envs):
            raise ValueError(f"index: expected an episode index in [0, {self.num_envs}), got {index!r}")
        return int(index)

    @property
    def frame_shape(self) -> tuple[int, int, int]:
        return self.frames.shape[1:]

    def __repr__(self) -> str:
        return f"BatchEnv({self.env_id or self.family.name!r}, num_envs={self.num_envs})"
