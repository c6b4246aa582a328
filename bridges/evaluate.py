"""The evaluation runner: many episodes in flight, one conversation each, scored and logged.

Implements the episode loop of spec/agent_loop.md section 2 (user turn = JPEG observation +
text; full multi-turn history or a window of k turns; the previous step's feedback in the next
turn; step budget 20 easy / 30 hard; reply -> action by bridges/replies), the text-mode and
final-goal ablations (section 7), and the outputs of section 8 in our own layout:
``<out>/episodes.jsonl`` (one record per episode, appended atomically: write, flush, fsync),
``run.json`` (provenance, including the version of every task), ``gifs/`` and the summaries
written by bridges/report. The messages are built by bridges/conversation.py (shared with the
demonstrations); before the first episode every env id is warmed up (bridges/warmup.py), which
announces a cold Numba cache.

Concurrency: up to ``concurrency`` episodes run at once as asyncio tasks. Episodes of one env id
share a BatchEnv (one row per episode in flight): a step request parks the episode, and all
requests that arrive in the same event-loop turn are applied in one ``BatchEnv.step`` call with
an ``active`` mask. GIFs are written in a background thread, so the event loop keeps serving
replies.

Resuming: finished episodes are read back from episodes.jsonl (a torn last line from a kill -9
is ignored) and skipped; every episode is recorded exactly once.

Fixed reference quirks (spec 12): the model, endpoint and ablation flags are recorded (4); a
final-goal solver failure is recorded for that episode instead of aborting the run (9); the GIF
ends with the final state (6); text mode works with a history window (the reference crashed).
"""
from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from dataclasses import replace as dataclass_replace
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from ..core import make
from ..core.registry import spec as env_spec
from ..core.rollout import run_plans
from ..core.threads import ProcessThreadPool
from .agents import Agent, Episode, Turn
from .conversation import episode_instructions, prune_history, turn_text, user_content
from .files import atomic_write
from .imaging import encode_jpeg_b64, frame_encoder
from .replies import extract_action, extract_think
from .splits import EpisodeSpec, task_versions
from .warmup import warm_up


@dataclass
class EvalConfig:
    out: str
    split: str = "easy"
    max_steps: int | None = None          # None: 20 easy / 30 hard
    concurrency: int = 8
    history: int = -1                     # -1 full conversation, 0 none, k > 0 last k turns
    max_long_side: int | None = 336
    text_mode: bool = False
    final_goal: bool = False
    include_feedback: bool = True
    elicit_verbalization: bool = False
    gifs: bool = True
    gifs_per_task: int | None = None      # GIFs of episodes with index < N only; None: all
    resume: bool = False
    progress: bool = True
    processes: int = 1                    # runner processes sharing the episodes

    def validate(self) -> None:
        if self.concurrency < 1:
            raise ValueError(f"--concurrency: must be at least 1, got {self.concurrency}")
        if self.processes < 1:
            raise ValueError(f"--processes: must be at least 1, got {self.processes}")
        if self.history < -1:
            raise ValueError(f"--history: must be -1 (all), 0 or a positive count, got {self.history}")
        if self.max_steps is not None and self.max_steps < 1:
            raise ValueError(f"--max-steps: must be at least 1, got {self.max_steps}")
        if self.final_goal and self.history != -1:
            raise ValueError("--final-goal: needs the full history (--history -1), since the goal "
                             "image lives in the first turn")
        if self.final_goal and self.text_mode:
            raise ValueError("--final-goal: cannot be combined with --text-mode")
        if self.gifs_per_task is not None and self.gifs_per_task < 0:
            raise ValueError(f"--gifs: must be at least 0, got {self.gifs_per_task}")
        if self.max_long_side is not None and self.max_long_side < 16:
            raise ValueError(f"--max-long-side: must be at least 16, got {self.max_long_side}")


# ------------------------------------------------------------------------------ output files
def _fsync_append(path: Path, line: str) -> None:
    """Append one record line durably. Several runner processes may share the file: the line
    goes out in one locked O_APPEND write, so lines never interleave."""
    import fcntl

    data = line.encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)  # closing releases the lock


def _atomic_write_json(path: Path, data) -> None:
    atomic_write(path, json.dumps(data, indent=2), fsync=True)


def read_done_keys(path: Path) -> set:
    """Keys of the episodes already recorded; a torn or garbled line is ignored. A torn tail
    (no final newline) is cut off so the next append starts on a fresh line."""
    done = set()
    if not path.exists():
        return done
    with open(path, "rb") as f:
        data = f.read()
    if data and not data.endswith(b"\n"):
        cut = data.rfind(b"\n") + 1
        with open(path, "r+b") as f:
            f.truncate(cut)
            f.flush()
            os.fsync(f.fileno())
        data = data[:cut]
    for line in data.splitlines():
        try:
            done.add(json.loads(line)["key"])
        except (json.JSONDecodeError, KeyError, TypeError, UnicodeDecodeError):
            continue
    return done


def _git_commit() -> str | None:
    root = Path(__file__).resolve().parents[1]
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                             text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


# ---------------------------------------------------------------------------- batched stepping
@dataclass
class StepResult:
    reward: float
    terminated: bool
    truncated: bool
    feedback: str
    success: bool
    cost_s: float = 0.0   # this episode's share of the batched step call


class TaskStepper:
    """One BatchEnv shared by the in-flight episodes of an env id; steps are micro-batched."""

    def __init__(self, env_id: str, slots: int, max_steps: int, make_kwargs: dict | None = None,
                 max_long_side: int | None = 336):
        self.env = make(env_id, num_envs=slots, autoreset="disabled", max_steps=max_steps,
                        **(make_kwargs or {}))
        self.env.reset(seeds=list(range(slots)))
        self.free = list(range(slots))
        self._pending: dict[int, tuple[str, asyncio.Future]] = {}
        self._scheduled = False
        self._active = np.zeros(slots, np.bool_)
        self._actions: list = [None] * slots
        self.calls = 0
        # One incremental JPEG encoder per slot: an episode's consecutive observations differ
        # in a few MCUs (same bytes as Pillow, see render/jpeg.py).
        self.encoders = [frame_encoder(self.env.frames.shape[1:], max_long_side)
                         for _ in range(slots)]

    def acquire(self) -> int:
        return self.free.pop()

    def release(self, slot: int) -> None:
        self.free.append(slot)

    def load(self, slot: int, episode: EpisodeSpec) -> None:
        self.env.reset(rows=[slot], seeds=[episode.episode_seed % 2**64],
                       init_states=[episode.init_state])

    async def step(self, slot: int, action: str) -> StepResult:
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._pending[slot] = (action, future)
        if not self._scheduled:
            self._scheduled = True
            loop.call_soon(self._flush)
        return await future

    def _flush(self) -> None:
        self._scheduled = False
        pending, self._pending = self._pending, {}
        self._active[:] = False
        for slot, (action, _) in pending.items():
            self._active[slot] = True
            self._actions[slot] = action
        t0 = time.perf_counter()
        try:
            _, reward, terminated, truncated, info = self.env.step(self._actions, active=self._active)
        except Exception as error:  # pragma: no cover - the env never raises on actions
            for _, future in pending.values():
                future.set_exception(error)
            return
        self.calls += 1
        share = (time.perf_counter() - t0) / len(pending)
        for slot, (_, future) in pending.items():
            self._actions[slot] = None
            if not future.cancelled():
                future.set_result(StepResult(float(reward[slot]), bool(terminated[slot]),
                                             bool(truncated[slot]), info["feedback"][slot],
                                             bool(info["success"][slot]), share))


# ------------------------------------------------------------------------------- the runner
@dataclass
class Progress:
    total: int
    done: int = 0
    successes: int = 0
    requests: int = 0
    errors: int = 0
    started: float = field(default_factory=time.perf_counter)
    enabled: bool = True
    _last: float = 0.0

    def show(self, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        if not force and now - self._last < 0.5:
            return
        self._last = now
        elapsed = max(now - self.started, 1e-9)
        rate = self.successes / self.done * 100 if self.done else 0.0
        sys.stderr.write(f"\r  episodes {self.done}/{self.total}  success {rate:5.1f}%  "
                         f"requests/s {self.requests / elapsed:6.1f}  errors {self.errors}  "
                         f"{elapsed:6.0f}s")
        sys.stderr.flush()
        if force:
            sys.stderr.write("\n")


class Runner:
    def __init__(self, agent: Agent, config: EvalConfig, episodes: list[EpisodeSpec],
                 provenance: dict | None = None):
        config.validate()
        self.agent = agent
        self.config = config
        self.episodes = episodes
        self.out = Path(config.out)
        self.records_path = self.out / "episodes.jsonl"
        self.provenance = provenance or {}
        # GIFs are written in their own thread so a slow GIF never delays an observation. (JPEG
        # encoding runs inline: a thread hand-off per observation cost more than the ~0.2 ms
        # encode and lowered throughput at high concurrency, measured 0.37 -> 0.41 of ideal.)
        self._gif_pool = ProcessThreadPool(1, "visgym-gif")
        self._steppers: dict[tuple, TaskStepper] = {}
        self._goal_envs: dict[tuple, object] = {}
        self.overhead_s = 0.0
        self.overhead_steps = 0

    # -- provenance ---------------------------------------------------------------------
    def _run_info(self) -> dict:
        from .. import __version__

        cfg = asdict(self.config)
        for k in ("out", "resume", "progress"):
            cfg.pop(k)
        return {**self.agent.describe(), **self.provenance, "split": self.config.split,
                "settings": cfg, "tasks": sorted({e.task for e in self.episodes}),
                "task_versions": task_versions(e.env_id for e in self.episodes),
                "episodes": len(self.episodes), "package_version": __version__,
                "git_commit": _git_commit(), "host": socket.gethostname()}

    def _prepare_out(self) -> set:
        self.out.mkdir(parents=True, exist_ok=True)
        run_path = self.out / "run.json"
        info = self._run_info()
        done = set()
        if self.records_path.exists() or run_path.exists():
            if not self.config.resume:
                raise ValueError(f"--out: {self.out} already holds a run; pass --resume to "
                                 "continue it or choose another directory")
            if run_path.exists():
                with open(run_path) as f:
                    old = json.load(f)
                # What decides the results must match; concurrency and GIFs may change.
                free = ("concurrency", "gifs", "gifs_per_task", "processes")
                changed = [f"{env_id} version {v} (now {info['task_versions'].get(env_id)})"
                           for env_id, v in sorted(old.get("task_versions", {}).items())
                           if info["task_versions"].get(env_id, v) != v]
                if changed:
                    raise ValueError(f"--resume: {run_path} was made with a different task "
                                     f"version: {', '.join(changed)}; the recorded episodes "
                                     "are not comparable (start a new run)")
                for key in ("agent", "model", "endpoint", "split", "settings", "tasks",
                            "generation", "dataset"):
                    if key == "settings":
                        same = ({k: v for k, v in old.get(key, {}).items() if k not in free}
                                == {k: v for k, v in info.get(key, {}).items() if k not in free})
                    else:
                        same = key not in old or old.get(key) == info.get(key)
                    if not same:
                        raise ValueError(f"--resume: {run_path} was made with a different {key} "
                                         f"({old.get(key)!r}, now {info.get(key)!r})")
                info["started"] = old.get("started")
                info["resumed"] = old.get("resumed", 0) + 1
            done = read_done_keys(self.records_path)
        info.setdefault("started", None)
        info["started"] = info["started"] or datetime.now(timezone.utc).isoformat()
        info["finished"] = None
        _atomic_write_json(run_path, info)
        self._info = info
        return done

    # -- episodes -----------------------------------------------------------------------
    def _stepper(self, episode: EpisodeSpec, slots: int, budget: int) -> TaskStepper:
        key = (episode.env_id, json.dumps(episode.make_kwargs, sort_keys=True))
        if key not in self._steppers:
            self._steppers[key] = TaskStepper(episode.env_id, slots, budget, episode.make_kwargs,
                                              self.config.max_long_side)
        return self._steppers[key]

    def _budget(self, episode: EpisodeSpec) -> int:
        return self.config.max_steps or env_spec(episode.env_id).default_max_steps

    def _goal_frame(self, episode: EpisodeSpec, state: dict):
        """The solved configuration's frame, found as the reference does: replay the default
        solver on a copy and require a rewarded stop. None if the solver fails."""
        key = (episode.env_id, json.dumps(episode.make_kwargs, sort_keys=True))
        env = self._goal_envs.get(key)
        if env is None:
            env = self._goal_envs[key] = make(episode.env_id, num_envs=1, autoreset="disabled",
                                              max_steps=None, **episode.make_kwargs)
        env.reset(seeds=[episode.episode_seed % 2**64], init_states=[state])
        result = run_plans(env, env.solve())
        if not result.terminated[0] or result.reward[0] != 1.0:
            return None
        return env.frames[0].copy()

    def _encode_timed(self, frame, encoder=None) -> tuple[str, float]:
        t0 = time.perf_counter()
        if encoder is None:
            b64 = encode_jpeg_b64(frame, self.config.max_long_side)
        else:
            b64 = base64.b64encode(encoder(frame)).decode("ascii")
        return b64, time.perf_counter() - t0

    async def _encode(self, frame, encoder=None) -> str:
        """Encode an observation (with the slot's incremental encoder when given); its time
        counts as loop overhead."""
        b64, seconds = self._encode_timed(frame, encoder)
        self.overhead_s += seconds
        return b64

    async def run_episode(self, episode: EpisodeSpec, stepper: TaskStepper) -> dict:
        cfg = self.config
        budget = self._budget(episode)
        slot = stepper.acquire()
        t_start = time.perf_counter()
        try:
            stepper.load(slot, episode)
            env = stepper.env
            agent_episode = Episode(key=episode.key, env_id=episode.env_id, index=episode.index,
                                    seed=episode.episode_seed, grammar=env.grammar)
            plan_holder = {}

            def solve():
                if "plan" not in plan_holder:
                    plan_holder["plan"] = self._solve_from(episode)
                return plan_holder["plan"]

            agent_episode.solve = solve
            gif = cfg.gifs and (cfg.gifs_per_task is None or episode.index < cfg.gifs_per_task)
            record = {"key": episode.key, "env_id": episode.env_id, "task": episode.task,
                      "split": episode.split, "index": episode.index, "seed": episode.seed,
                      "episode_seed": episode.episode_seed, "init_state": episode.init_state}
            goal_b64 = None
            if cfg.final_goal:
                goal = self._goal_frame(episode, episode.init_state)
                if goal is None:
                    record.update(success=False, reward=0.0, steps=0, terminated=False,
                                  truncated=False, end_reason="goal_failed", invalid_actions=0,
                                  error_replies=0, elapsed_s=0.0, usage=None, steps_log=[])
                    return record
                goal_b64 = await self._encode(goal)
            instructions = episode_instructions(env, slot, cfg.text_mode, cfg.elicit_verbalization)
            messages: list = []
            steps_log = []
            frames = []
            total_reward = 0.0
            terminated = truncated = False
            end_reason = "budget"
            feedback = None
            invalid = errors = 0
            usage_total = {"prompt_tokens": 0, "completion_tokens": 0}
            have_usage = False
            for i in range(budget):
                t0 = time.perf_counter()
                text = turn_text(i, budget, instructions, feedback, cfg.include_feedback,
                                 cfg.history, cfg.text_mode)
                # The row only changes when this episode steps, so the encoder may read it in
                # place; a copy is kept only for the GIF.
                frame = env.frames[slot]
                ascii_frame = env.render_text(slot) if cfg.text_mode else None
                self.overhead_s += time.perf_counter() - t0
                image_b64 = None if cfg.text_mode else \
                    await self._encode(frame, stepper.encoders[slot])
                t0 = time.perf_counter()
                if gif:
                    frames.append(frame.copy())
                if cfg.history == 0:
                    messages = []
                elif cfg.history > 0 and i > 0:
                    messages = prune_history(messages, cfg.history, instructions)
                messages.append({"role": "user", "content": user_content(
                    text, image_b64, goal_b64 if i == 0 else None, ascii_frame)})
                self.overhead_s += time.perf_counter() - t0
                reply = await self.agent.act(Turn(agent_episode, i, list(messages), text, frame))
                t1 = time.perf_counter()
                self.progress.requests += reply.attempts
                messages.append({"role": "assistant", "content": reply.text})
                action = extract_action(reply.text, cfg.elicit_verbalization)
                self.overhead_s += time.perf_counter() - t1
                result = await stepper.step(slot, action)
                t1 = time.perf_counter()
                self.overhead_s += result.cost_s
                feedback = result.feedback
                total_reward += result.reward
                terminated, truncated = result.terminated, result.truncated
                if reply.flag is not None:
                    errors += 1
                    self.progress.errors += reply.flag == "error"
                invalid += _is_invalid_feedback(result.feedback)
                if reply.usage:
                    have_usage = True
                    for k in usage_total:
                        usage_total[k] += reply.usage.get(k) or 0
                entry = {"step": i, "prompt": text, "reply": reply.text, "reply_flag": reply.flag,
                         "action": action, "feedback": result.feedback, "reward": result.reward,
                         "terminated": result.terminated, "latency_s": round(reply.latency_s, 4),
                         "attempts": reply.attempts}
                if reply.usage:
                    entry["usage"] = reply.usage
                if reply.error:
                    entry["error"] = reply.error
                if cfg.elicit_verbalization:
                    think = extract_think(reply.text)
                    if think is not None:
                        entry["think"] = think
                steps_log.append(entry)
                self.overhead_s += time.perf_counter() - t1
                self.overhead_steps += 1
                if terminated:
                    end_reason = "stop"
                    break
                if reply.fatal:
                    end_reason = reply.fatal
                    break
                if truncated:
                    break
            if gif:
                frames.append(env.frames[slot].copy())
            record.update(success=bool(terminated and total_reward >= 1.0), reward=total_reward,
                          steps=len(steps_log), terminated=terminated,
                          truncated=bool(end_reason == "budget"), end_reason=end_reason,
                          invalid_actions=invalid, error_replies=errors,
                          elapsed_s=round(time.perf_counter() - t_start, 3),
                          usage=usage_total if have_usage else None, steps_log=steps_log)
            if gif and frames:
                self._schedule_gif(record, frames)
            return record
        finally:
            stepper.release(slot)

    def _solve_from(self, episode: EpisodeSpec) -> list:
        key = (episode.env_id, json.dumps(episode.make_kwargs, sort_keys=True))
        env = self._goal_envs.get(key)
        if env is None:
            env = self._goal_envs[key] = make(episode.env_id, num_envs=1, autoreset="disabled",
                                              max_steps=None, **episode.make_kwargs)
        env.reset(seeds=[episode.episode_seed % 2**64], init_states=[episode.init_state])
        return env.solve()[0]

    def _schedule_gif(self, record: dict, frames: list) -> None:
        from .gifs import write_episode_gif

        folder = self.out / "gifs" / f"{record['task']}__{record['split']}"
        name = f"{record['index']:03d}_seed{record['episode_seed']}_r{record['reward']:.3f}.gif"
        captions = []
        for entry in record["steps_log"]:
            captions.append([f"step {entry['step']}", f"action: {entry['action']}",
                             f"feedback: {entry['feedback']}"])
        captions.append([f"final state after {record['steps']} steps",
                         f"reward={record['reward']:.3f} ({record['end_reason']})"])
        frames = frames[: len(captions)]
        captions = captions[: len(frames)]

        def write():
            folder.mkdir(parents=True, exist_ok=True)
            write_episode_gif(str(folder / name), frames, captions)

        self._gif_jobs.append(self._gif_pool.submit(write))

    # -- the whole run ------------------------------------------------------------------
    async def _execute(self, todo: list, claim=None) -> dict:
        """Run episodes of ``todo`` to the end; return counters to merge. ``claim()`` hands out
        the next index into ``todo`` (None when all are taken); with several processes it is
        shared, so a process that starts late or gets short episodes simply takes more."""
        if claim is None:
            claim = iter(range(len(todo))).__next__
        self._gif_jobs = []
        by_task: dict[tuple, list] = {}
        for e in todo:
            by_task.setdefault((e.env_id, json.dumps(e.make_kwargs, sort_keys=True)), []).append(e)
        slots_needed = {k: min(self.config.concurrency, len(v)) for k, v in by_task.items()}
        write_lock = asyncio.Lock()

        async def one(episode: EpisodeSpec):
            key = (episode.env_id, json.dumps(episode.make_kwargs, sort_keys=True))
            stepper = self._stepper(episode, slots_needed[key], self._budget(episode))
            record = await self.run_episode(episode, stepper)
            line = json.dumps(record, separators=(",", ":"), default=_json_default) + "\n"
            async with write_lock:
                _fsync_append(self.records_path, line)
            self.progress.done += 1
            self.progress.successes += bool(record["success"])
            self.progress.show()

        async def worker():
            while True:
                try:
                    index = claim()
                except StopIteration:
                    return
                if index is None:
                    return
                await one(todo[index])

        tasks = [asyncio.ensure_future(worker())
                 for _ in range(min(self.config.concurrency, len(todo)))]
        try:
            await asyncio.gather(*tasks)
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for job in self._gif_jobs:
                with contextlib.suppress(Exception):
                    job.result()
            self._gif_pool.shutdown(wait=True)
            await self.agent.aclose()
        return {"overhead_s": self.overhead_s, "steps": self.overhead_steps,
                "step_calls": sum(s.calls for s in self._steppers.values()),
                "requests": self.progress.requests, "errors": self.progress.errors}

    async def run_share(self) -> dict:
        """A child process's part of a multi-process run: no output set-up, no summaries."""
        self.progress = Progress(total=len(self.episodes), enabled=False)
        return await self._execute(self.episodes, _claim_shared)

    async def run(self) -> dict:
        done = self._prepare_out()
        todo = [e for e in self.episodes if e.key not in done]
        self._warm_up(todo)
        self.progress = Progress(total=len(self.episodes), done=len(self.episodes) - len(todo),
                                 enabled=self.config.progress)
        processes = min(self.config.processes, max(1, len(todo)))
        children, pool, watcher, claim = [], None, None, None
        if processes > 1:
            spec = getattr(self.agent, "spec", None)
            if spec is None:
                raise ValueError("--processes: this agent cannot be rebuilt in another process "
                                 "(use an agent made by make_agent, or --processes 1)")
            from concurrent.futures import ProcessPoolExecutor

            from .pools import pool_context

            # Every process sees the whole to-do list and takes the next episode from one
            # shared counter as it frees a slot.
            ctx = pool_context()
            counter = ctx.Value("q", 0)
            _claim_init(counter, len(todo))
            claim = _claim_shared
            pool = ProcessPoolExecutor(processes - 1, mp_context=ctx, initializer=_child_init,
                                       initargs=(counter, len(todo)))
            child_config = dataclass_replace(self.config, processes=1, progress=False)
            children = [asyncio.wrap_future(pool.submit(_run_share, spec, child_config, todo,
                                                        self.provenance))
                        for _ in range(processes - 1)]
            watcher = asyncio.ensure_future(self._watch_records(len(self.episodes) - len(todo)))
        totals = {"overhead_s": 0.0, "steps": 0, "step_calls": 0}
        try:
            results = [await self._execute(todo, claim)]
            results += await asyncio.gather(*children)
        finally:
            if watcher is not None:
                watcher.cancel()
            if pool is not None:
                pool.shutdown(wait=False, cancel_futures=True)
            self.progress.show(force=True)
        for r in results:
            for k in totals:
                totals[k] += r[k]
        self._info["finished"] = datetime.now(timezone.utc).isoformat()
        self._info["loop_overhead_ms_per_step"] = (
            round(totals["overhead_s"] / totals["steps"] * 1e3, 3) if totals["steps"] else None)
        self._info["step_calls"] = totals["step_calls"]
        self._info["steps"] = totals["steps"]
        self._info["processes"] = processes
        _atomic_write_json(self.out / "run.json", self._info)
        from .report import write_summary

        return write_summary(str(self.out))

    def _warm_up(self, todo: list) -> None:
        """Every env id's code paths once, before the first episode and before any runner
        process is forked (bridges/warmup.py); a cold Numba cache is announced. The warm-up
        decides nothing: where it fails (a bad init state, a solver that cannot plan it), the
        episodes meet the same failure on their own path and report it there."""
        first: dict = {}
        for e in todo:
            first.setdefault((e.env_id, json.dumps(e.make_kwargs, sort_keys=True)), e)
        for e in first.values():
            with contextlib.suppress(Exception):
                warm_up(e.env_id, e.make_kwargs, e.init_state, e.episode_seed % 2**64,
                        text_mode=self.config.text_mode, announce=self.config.progress)

    async def _watch_records(self, already_done: int) -> None:
        """With several processes, progress counts the records file every half second."""
        offset, done, successes = 0, already_done, 0
        while True:
            await asyncio.sleep(0.5)
            with contextlib.suppress(OSError):
                with open(self.records_path, "rb") as f:
                    f.seek(offset)
                    chunk = f.read()
                end = chunk.rfind(b"\n") + 1
                for line in chunk[:end].splitlines():
                    with contextlib.suppress(ValueError):
                        done += 1
                        successes += bool(json.loads(line).get("success"))
                offset += end
            self.progress.done = done
            self.progress.successes = successes
            self.progress.show()


_CLAIM: dict = {}


def _claim_init(counter, total: int) -> None:
    _CLAIM["counter"], _CLAIM["total"] = counter, total


def _claim_shared():
    """The next unclaimed index of the run's to-do list, shared by its processes."""
    counter = _CLAIM["counter"]
    with counter.get_lock():
        index = counter.value
        if index >= _CLAIM["total"]:
            return None
        counter.value = index + 1
    return index


def _child_init(counter, total: int) -> None:
    """Runner children die with their parent (a kill -9 of the parent must not leave them
    writing records that a resumed run would repeat) and share its episode counter."""
    import signal

    _claim_init(counter, total)
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _run_share(spec, config: EvalConfig, episodes: list, provenance: dict) -> dict:
    from .agents import make_agent

    kind, options = spec
    runner = Runner(make_agent(kind, **options), config, episodes, provenance)
    return asyncio.run(runner.run_share())


def _is_invalid_feedback(feedback: str) -> bool:
    """Whether feedback is one of the parser's messages (unparsable, malformed, unknown name or
    out-of-space payload), as opposed to a valid action or a family's own outcome message."""
    return feedback.startswith(("Cannot parse action string", "The action format is invalid")) or (
        feedback.startswith("The action ") and ("not in the valid action space" in feedback
                                                or "is not recognized" in feedback))


def _json_default(value):
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def run_eval(agent: Agent, config: EvalConfig, episodes: list[EpisodeSpec],
             provenance: dict | None = None) -> dict:
    """Run an evaluation to completion (or until interrupted; rerun with resume=True)."""
    runner = Runner(agent, config, episodes, provenance)
    return asyncio.run(runner.run())
