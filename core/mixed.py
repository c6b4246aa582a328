"""Mixed-task batches: rows of many tasks stepped by one call (issue 26, "Mixed-task batches").

``make_mixed({"maze_2d/easy": 64, "jigsaw/hard": 32})``, or a list of task specs with their
own parameters (a curriculum is a list of parameter sets), builds a ``MixedEnv``: one BatchEnv
per task, each over a contiguous block of rows in the order given, so each family's kernels stay
batched. Its surface is BatchEnv's (``reset``, ``step``, ``fork``, ``frame``, ``prompt``,
``solve``, ``state_dicts``, ``potential``, ``success``, ``state_hash``) over all rows, with
``info["task"]`` (int32[B], an index into ``tasks``) besides the usual fields.

Buffers. The per-row outputs (reward, terminated, truncated, step, seed, code, frame_hw, the
reward components and state hashes) are single arrays over all B rows; each task's BatchEnv
writes straight into its slice of them, so mixing copies nothing there. Frames stay in each
task's own buffer at its own capacity (``MixedFrames``: ``frames[i]`` is row i's exact view,
``frames.buffers`` the per-task arrays): a mix costs the sum of its tasks' frame buffers, not B
times the largest frame. ``frames.padded()`` copies them into one ``uint8[B, H, W, 3]`` array
at the largest capacity when a single array is needed (the gymnasium vector API does this).

Determinism is BatchEnv's: a row's episode depends only on its task and seed, and seeds drawn
without being given come from the mix's own ``seed``, one per row.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from .batch_env import BatchEnv, check_rows
from .grammar import IGNORED
from .seeding import check_seeds, draw_seeds
from .validate import describe, integer

# Options that apply to every task of a mix (a task spec may set max_steps for itself).
_SHARED_OPTIONS = ("autoreset", "reward", "gamma", "state_hash")


@dataclass(frozen=True)
class TaskSpec:
    """One task of a mix: ``num_envs`` rows of ``env_id`` with parameter overrides ``params``
    (the family's keywords, as ``visgym.make`` takes them) and its own step budget."""

    env_id: str
    num_envs: int
    params: Mapping[str, Any] = field(default_factory=dict)
    max_steps: Any = "default"
    rows: slice = field(default_factory=lambda: slice(0, 0))


def task_specs(tasks) -> list[TaskSpec]:
    """Specs from ``{id: n}`` or a list of ``{"id", "num_envs", "params", "max_steps"}`` dicts
    or ``(id, n)`` / ``(id, n, params)`` tuples; ValueError naming the entry and field."""
    if isinstance(tasks, Mapping):
        entries = [{"id": k, "num_envs": v} for k, v in tasks.items()]
    elif isinstance(tasks, (list, tuple)):
        entries = []
        for k, entry in enumerate(tasks):
            if isinstance(entry, Mapping):
                unknown = sorted(set(entry) - {"id", "num_envs", "params", "max_steps"})
                if unknown:
                    raise ValueError(f"tasks[{k}].{unknown[0]}: not a task field (fields: id, "
                                     f"num_envs, params, max_steps)")
                entries.append(dict(entry))
            elif isinstance(entry, (list, tuple)) and len(entry) in (2, 3):
                entries.append({"id": entry[0], "num_envs": entry[1],
                                "params": entry[2] if len(entry) == 3 else {}})
            else:
                raise ValueError(f"tasks[{k}]: expected a dict with id and num_envs or an "
                                 f"(id, num_envs[, params]) tuple, got {describe(entry)}")
    else:
        raise ValueError(f"tasks: expected a dict {{env_id: num_envs}} or a list of task specs, "
                         f"got {describe(tasks)}")
    if not entries:
        raise ValueError("tasks: a mix needs at least one task")
    specs, start = [], 0
    for k, entry in enumerate(entries):
        where = f"tasks[{k}]"
        if "id" not in entry or "num_envs" not in entry:
            raise ValueError(f"{where}: a task needs an id and num_envs")
        env_id = entry["id"]
        n = integer(f"{where}.num_envs", entry["num_envs"], 1)
        params = entry.get("params") or {}
        if not isinstance(params, Mapping):
            raise ValueError(f"{where}.params: expected a dict of parameters, got "
                             f"{describe(params)}")
        specs.append(TaskSpec(env_id, n, dict(params), entry.get("max_steps", "default"),
                              slice(start, start + n)))
        start += n
    return specs


class MixedFrames:
    """The frames of a mix: ``frames[i]`` is row i's exact view (its own frame size),
    ``buffers`` the per-task ``(rows, uint8[n, H, W, 3])`` arrays that the tasks draw into."""

    def __init__(self, mix: "MixedEnv"):
        self._mix = mix

    def __len__(self) -> int:
        return self._mix.num_envs

    def __getitem__(self, index: int) -> np.ndarray:
        return self._mix.frame(index)

    @property
    def buffers(self) -> list[tuple[slice, np.ndarray]]:
        return [(task.rows, env.frames) for task, env in zip(self._mix.tasks, self._mix.envs)]

    @property
    def capacity(self) -> tuple[int, int]:
        """The largest frame capacity (H, W) of the tasks."""
        return (max(env.frames.shape[1] for env in self._mix.envs),
                max(env.frames.shape[2] for env in self._mix.envs))

    def padded(self, out: np.ndarray | None = None) -> np.ndarray:
        """All rows in one ``uint8[B, H, W, 3]`` array at ``capacity``, zero outside each
        task's frames (a copy: into ``out`` when given)."""
        height, width = self.capacity
        shape = (self._mix.num_envs, height, width, 3)
        if out is None:
            out = np.zeros(shape, np.uint8)
        elif out.shape != shape or out.dtype != np.uint8:
            raise ValueError(f"out: expected a uint8 array of shape {shape}, got "
                             f"{describe(out)}")
        for rows, frames in self.buffers:
            h, w = frames.shape[1:3]
            out[rows, :h, :w] = frames
            if h < height:
                out[rows, h:] = 0
            if w < width:
                out[rows, :h, w:] = 0
        return out


class MixedEnv:
    """B rows of several tasks behind BatchEnv's surface (see the module docstring)."""

    def __init__(self, tasks, *, max_steps: int | None | str = "default",
                 autoreset: str = "next_step", seed: int | None = None, reward: str = "sparse",
                 gamma: float = 1.0, state_hash: bool = True):
        from .registry import make   # the registry imports BatchEnv, as this module does

        self.tasks = task_specs(tasks)
        self.num_envs = sum(t.num_envs for t in self.tasks)
        self.autoreset = autoreset
        self.envs: list[BatchEnv] = []
        options = dict(autoreset=autoreset, reward=reward, gamma=gamma, state_hash=state_hash)
        for k, task in enumerate(self.tasks):
            budget = max_steps if task.max_steps == "default" else task.max_steps
            try:
                env = make(task.env_id, task.num_envs, max_steps=budget, **options,
                           **task.params)
            except ValueError as error:
                raise ValueError(f"tasks[{k}] ({task.env_id}): {error}") from None
            self.envs.append(env)
        batch = self.num_envs
        self.task_ids = [t.env_id for t in self.tasks]
        self.task = np.concatenate([np.full(t.num_envs, k, np.int32)
                                    for k, t in enumerate(self.tasks)])
        self.reward = np.zeros(batch, np.float32)
        self.terminated = np.zeros(batch, np.bool_)
        self.truncated = np.zeros(batch, np.bool_)
        self.steps = np.zeros(batch, np.int32)
        self.seeds = np.zeros(batch, np.uint64)
        self.frame_hw = np.zeros((batch, 2), np.int32)
        self._codes = np.full(batch, IGNORED, np.int32)
        self._task_reward = np.zeros(batch, np.float32)
        self._shaping = np.zeros(batch, np.float32)
        self._hash = np.zeros(batch, np.uint64)
        self._invalid = np.zeros(batch, np.bool_)
        self._success = np.zeros(batch, np.bool_)
        for task, env in zip(self.tasks, self.envs):
            env._adopt_outputs(self, task.rows)
        self.frames = MixedFrames(self)
        self._feedback = [""] * batch
        self._seed_seq = np.random.SeedSequence(seed)
        self._has_reset = False
        self._all_rows = np.arange(batch, dtype=np.int64)

    # ------------------------------------------------------------------------------ helpers
    def _rows_arg(self, rows, distinct: bool) -> np.ndarray:
        return check_rows(rows, self.num_envs, distinct, noun="row")

    def _split(self, rows: np.ndarray):
        """(task index, local rows, positions in ``rows``) for each task that ``rows`` touch."""
        owner = self.task[rows]
        for k in np.unique(owner).tolist():
            where = np.flatnonzero(owner == k)
            yield k, rows[where] - self.tasks[k].rows.start, where

    def _locate(self, index) -> tuple[int, int]:
        if isinstance(index, bool) or not isinstance(index, (int, np.integer)) or not (
                0 <= index < self.num_envs):
            raise ValueError(f"index: expected a row index in [0, {self.num_envs}), got "
                             f"{index!r}")
        k = int(self.task[index])
        return k, int(index) - self.tasks[k].rows.start

    def _check_reset(self) -> None:
        if not self._has_reset:
            raise RuntimeError("call reset() first")

    # -------------------------------------------------------------------------------- reset
    def reset(self, seeds: Sequence[int] | int | None = None,
              init_states: Sequence[dict] | None = None, options: dict | None = None,
              rows: Sequence[int] | None = None):
        """BatchEnv.reset over the mix's rows (``init_states``: one reference dict per row, of
        that row's task). Returns (frames, info). Nothing changes if an argument is invalid."""
        rows_arr = self._all_rows if rows is None else self._rows_arg(rows, distinct=True)
        if rows is not None and not self._has_reset:
            raise RuntimeError("reset(rows=...) needs a full reset() first")
        count = rows_arr.shape[0]
        if seeds is None:
            seed_arr = draw_seeds(self._seed_seq, count)
        else:
            seed_arr = check_seeds(seeds, count)
        if init_states is not None and (not isinstance(init_states, (list, tuple))
                                        or len(init_states) != count):
            raise ValueError(f"init_states: expected a list of {count} dicts (one per row), "
                             f"got {describe(init_states)}")
        parts = list(self._split(rows_arr))
        if init_states is not None:
            # Every task's dicts are checked before any task changes.
            for k, local, where in parts:
                env = self.envs[k]
                staged = env.family.new_state(local.shape[0])
                try:
                    env.family.load_rows(staged, np.arange(local.shape[0], dtype=np.int64),
                                         [init_states[i] for i in where.tolist()])
                except ValueError as error:
                    raise ValueError(f"init_states (task {self.task_ids[k]}): {error}") from None
        for k, local, where in parts:
            env = self.envs[k]
            sub_states = None if init_states is None else [init_states[i] for i in where.tolist()]
            full = local.shape[0] == env.num_envs and not env._has_reset
            env.reset(seeds=seed_arr[where], init_states=sub_states,
                      rows=None if full or not env._has_reset else local)
        for k, local, _ in parts:
            self._success[self.tasks[k].rows] = self.envs[k].family.is_success(self.envs[k].state)
        self._codes[rows_arr] = IGNORED
        self._invalid[:] = False
        self._has_reset = True
        return self.frames, self._info([""] * self.num_envs)

    # --------------------------------------------------------------------------------- step
    def step(self, actions: Sequence[str], active: np.ndarray | None = None):
        """One step of every row (or of the rows where ``active``), each task in one batched
        call; the same returns and info as BatchEnv.step, plus info["task"]."""
        if not self._has_reset:
            raise RuntimeError("step() called before reset()")
        if isinstance(actions, (str, bytes)) or not hasattr(actions, "__len__") or len(
                actions) != self.num_envs:
            raise ValueError(f"actions: expected a list of {self.num_envs} strings, got "
                             f"{describe(actions)}")
        if active is not None:
            active = np.asarray(active)
            if active.dtype != np.bool_ or active.shape != (self.num_envs,):
                raise ValueError(f"active: expected a bool array of shape ({self.num_envs},)")
        actions = list(actions)
        feedback = self._feedback
        for task, env in zip(self.tasks, self.envs):
            rows = task.rows
            sub_active = None if active is None else active[rows]
            if sub_active is not None and not sub_active.any():
                self._idle(rows, env)
                continue
            _, _, _, _, info = env.step(actions[rows], sub_active)
            feedback[rows] = info["feedback"]
            self._invalid[rows] = info["invalid"]
            self._success[rows] = info["success"]
        return self.frames, self.reward, self.terminated, self.truncated, self._info(feedback)

    def _idle(self, rows: slice, env: BatchEnv) -> None:
        """A task none of whose rows step this call: what BatchEnv reports for rows left out."""
        self.reward[rows] = 0.0
        self._task_reward[rows] = 0.0
        self._shaping[rows] = 0.0
        self.terminated[rows] = False
        self.truncated[rows] = False
        self._codes[rows] = IGNORED
        self._invalid[rows] = False
        self._feedback[rows] = [""] * env.num_envs

    def _info(self, feedback: list) -> dict:
        info = {"feedback": list(feedback), "code": self._codes, "invalid": self._invalid,
                "success": self._success, "step": self.steps, "seed": self.seeds,
                "frame_hw": self.frame_hw, "task": self.task,
                "reward_components": {"task": self._task_reward, "shaping": self._shaping}}
        if self.envs[0].hash_states:
            info["state_hash"] = self._hash
        return info

    # -------------------------------------------------------------------------------- forks
    def fork(self, src_rows: Sequence[int], dst_rows: Sequence[int]) -> None:
        """BatchEnv.fork across the mix: each destination row must hold the same task as its
        source (ValueError otherwise; nothing changes)."""
        self._check_reset()
        src = self._rows_arg(src_rows, distinct=False)
        dst = self._rows_arg(dst_rows, distinct=True)
        if src.shape != dst.shape:
            raise ValueError(f"dst_rows: expected {src.shape[0]} rows, one per source row, got "
                             f"{dst.shape[0]}")
        bad = np.flatnonzero(self.task[src] != self.task[dst])
        if bad.size:
            i = int(bad[0])
            raise ValueError(f"dst_rows: row {int(dst[i])} holds {self.task_ids[self.task[dst[i]]]}"
                             f", not its source row {int(src[i])}'s task "
                             f"{self.task_ids[self.task[src[i]]]}")
        for k, local_dst, where in self._split(dst):
            self.envs[k].fork(src[where] - self.tasks[k].rows.start, local_dst)

    # ------------------------------------------------------------------------------ queries
    def frame(self, index: int) -> np.ndarray:
        """Row ``index``'s frame at its own size (a view into its task's buffer)."""
        k, local = self._locate(index)
        return self.envs[k].frame(local)

    def env_of(self, index: int) -> tuple[BatchEnv, int]:
        """The task's BatchEnv holding row ``index``, and the row's index in it."""
        k, local = self._locate(index)
        return self.envs[k], local

    def prompt(self, text_mode: bool = False, index: int = 0) -> str:
        self._check_reset()
        k, local = self._locate(index)
        return self.envs[k].prompt(text_mode, local)

    def prompts(self, text_mode: bool = False) -> list[str]:
        return [self.prompt(text_mode, i) for i in range(self.num_envs)]

    def _gather(self, method: str, dtype) -> np.ndarray:
        self._check_reset()
        out = np.empty(self.num_envs, dtype)
        for task, env in zip(self.tasks, self.envs):
            out[task.rows] = getattr(env, method)()
        return out

    def success(self) -> np.ndarray:
        return self._gather("success", np.bool_)

    def potential(self) -> np.ndarray | None:
        """float32[B] distances to the goal, or None when a task's family defines none."""
        self._check_reset()
        if not all(env.family.has_potential for env in self.envs):
            return None
        return self._gather("potential", np.float32)

    def state_hash(self) -> np.ndarray:
        return self._gather("state_hash", np.uint64)

    def state_dicts(self) -> list[dict]:
        self._check_reset()
        return [d for env in self.envs for d in env.state_dicts()]

    def solve(self, strategy: str | None = None, num_steps: int | None = None) -> list[list[str]]:
        """Each row's solver plan (each task's default strategy unless ``strategy``)."""
        self._check_reset()
        return [plan for env in self.envs
                for plan in env.solve(strategy=strategy, num_steps=num_steps)]

    def metrics(self) -> list[dict]:
        """Each task's own measures (``BatchEnv.metrics``), one dict per task."""
        return [env.metrics() for env in self.envs]

    def frame_bytes(self) -> int:
        """Bytes of the mix's frame buffers (the sum of its tasks')."""
        return sum(env.frames.nbytes for env in self.envs)

    def __repr__(self) -> str:
        parts = ", ".join(f"{t.env_id}: {t.num_envs}" for t in self.tasks)
        return f"MixedEnv({{{parts}}})"


def make_mixed(tasks, **options) -> MixedEnv:
    """A MixedEnv (see the module docstring): ``tasks`` is ``{env_id: num_envs}`` or a list of
    task specs (dicts with ``id``, ``num_envs`` and optional ``params`` and ``max_steps``, or
    ``(id, num_envs[, params])`` tuples); ``options`` are BatchEnv's: max_steps, autoreset, seed,
    reward, gamma, state_hash."""
    return MixedEnv(tasks, **options)
