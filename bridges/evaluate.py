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
an ``active`` mask. GIFs are written in a background thread after their episode's record, so the
event loop keeps serving replies; GIFs that could not be written are reported once, at the end.

Before the first episode the agent's endpoint is checked (``Agent.preflight``, when asked), and
nothing is written if it fails. A ``FailureBreaker`` stops a run whose first N requests, or N in
a row, fail for the same reason (``RunAborted``); the episodes in flight are not recorded.

Resuming: finished episodes are read back from episodes.jsonl (a torn last line from a kill -9
is ignored) and skipped; every episode is recorded exactly once. The run folder is locked for
the run; temp files a kill left are removed, and the GIFs of recorded episodes that are missing
(the GIF thread lags the records, so a kill loses some) are redrawn from the records (init state
and actions). A resume refused for changed settings names only what changed. An OSError that
does not name its file is re-raised naming it, for the CLI's one-line message.

Fixed reference quirks (spec 12): the model, endpoint and ablation flags are recorded (4); a
final-goal solver failure is recorded for that episode instead of aborting the run (9); the GIF
ends with the final state (6); text mode works with a history window (the reference crashed).
"""
from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
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
from ..core.registry import consumer_kwargs
from ..core.registry import spec as env_spec
from ..core.rollout import run_plans
from ..core.threads import ProcessThreadPool
from .agents import Agent, Episode, Turn
from .conversation import episode_instructions, prune_history, turn_text, user_content
from .files import FolderLock, atomic_write
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
    budgets: dict | None = None           # {env_id: steps}: per-task budgets (--prompt-from)
    preflight: bool = False               # check the endpoint before the first episode
    abort_after: int = 8                  # stop after this many failed requests alike; 0: never
    full_size_frames: bool = False        # draw at the family's own size, then downscale

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
        if self.abort_after < 0:
            raise ValueError(f"--abort-after: must be 0 (never) or a count, got {self.abort_after}")
        for env_id, steps in (self.budgets or {}).items():
            if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
                raise ValueError(f"max_steps: {env_id}: must be a positive integer, got {steps!r}")


# ------------------------------------------------------------------------------ output files
class RunAborted(RuntimeError):
    """The run stopped before its end for a reason the user must fix (the endpoint fails every
    request the same way); finished episodes are recorded and ``--resume`` continues."""


@contextlib.contextmanager
def _naming(path) -> object:
    """Re-raise an OSError that does not name its file (a failed write, fsync or rename) with
    ``path`` as its filename, so the one-line message at the CLI says which file it was."""
    try:
        yield
    except OSError as error:
        if error.filename is None:
            raise type(error)(error.errno, error.strerror or str(error), str(path)) from None
        raise


def _fsync_append(path: Path, line: str) -> None:
    """Append one record line durably. Several runner processes may share the file: the line
    goes out in one locked O_APPEND write, so lines never interleave. A write that fails part
    of the way (a full disk) is cut back off, so the file never holds half a record."""
    import fcntl

    data = line.encode("utf-8")
    with _naming(path):
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            size = os.fstat(fd).st_size
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            except OSError:
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, size)
                raise
        finally:
            os.close(fd)  # closing releases the lock


def _atomic_write_json(path: Path, data) -> None:
    with _naming(path):
        atomic_write(path, json.dumps(data, indent=2), fsync=True)


def iter_records(path: Path):
    """The records of an episodes.jsonl, in file order; torn or garbled lines are skipped."""
    if not path.exists():
        return
    with open(path, "rb") as f:
        for line in f:
            if not line.endswith(b"\n"):
                return
            try:
                record = json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError):
                continue
            if isinstance(record, dict) and "key" in record:
                yield record


def remove_stale_temp_files(out: Path) -> int:
    """Remove the hidden ``.NAME.XXXXXXXX.tmp`` files that an atomic write (bridges/files.py)
    leaves behind when the process is killed, in the run folder and its GIF folders; return
    how many. Called while the run holds the folder's lock, so no live writer owns them."""
    removed = 0
    folders = [out]
    gifs = out / "gifs"
    if gifs.is_dir():
        folders += [d for d in gifs.iterdir() if d.is_dir()] + [gifs]
    for folder in folders:
        with contextlib.suppress(OSError):
            for entry in os.scandir(folder):
                if entry.name.startswith(".") and entry.name.endswith(".tmp") and \
                        entry.is_file(follow_symlinks=False):
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(entry.path)
                        removed += 1
    return removed


def _lock_out(out: Path):
    """Hold an exclusive lock on the run folder for the whole run (two runs appending to one
    episodes.jsonl would record episodes twice); return the held lock (``close()`` frees it)."""
    with _naming(out / FolderLock.NAME):
        return FolderLock(out, "--out").acquire()


def read_done_keys(path: Path) -> set:
    """Keys of the episodes already recorded; a torn or garbled line is ignored. A torn tail
    (no final newline) is cut off so the next append starts on a fresh line."""
    return set(_read_done(path))


def _read_done(path: Path) -> dict:
    """``{key: success}`` of the episodes already recorded (see ``read_done_keys``)."""
    done = {}
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
            record = json.loads(line)
            key = record["key"]
        except (json.JSONDecodeError, KeyError, TypeError, UnicodeDecodeError):
            continue
        if isinstance(key, str):
            done.setdefault(key, record.get("success") is True)
    return done


def _short(value, limit: int = 60) -> str:
    return shorten(repr(value), limit)


def _differences(name: str, before, after) -> list[str]:
    """``name value (now value)`` for each leaf where two run.json values differ (the keys of
    a dict one by one, so a message names only what changed)."""
    if before == after:
        return []
    if isinstance(before, dict) and isinstance(after, dict):
        out = []
        for key in sorted(set(before) | set(after), key=str):
            out += _differences(f"{name}.{key}", before.get(key), after.get(key))
        return out
    if isinstance(before, list) and isinstance(after, list) and \
            all(isinstance(v, str) for v in before + after):
        gone = [v for v in before if v not in after]
        new = [v for v in after if v not in before]
        parts = ([f"without {', '.join(gone)}"] if gone else []) + \
                ([f"with {', '.join(new)}"] if new else [])
        if parts:
            return [f"{name} {_short(before)} (now {' and '.join(parts)})"]
    return [f"{name} {_short(before)} (now {_short(after)})"]


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
    last_error: str | None = None         # the server's text of the latest failed request
    started: float = field(default_factory=time.perf_counter)
    enabled: bool = True
    _last: float = 0.0
    _width: int = 0

    def show(self, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        if not force and now - self._last < 0.5:
            return
        self._last = now
        elapsed = max(now - self.started, 1e-9)
        rate = self.successes / self.done * 100 if self.done else 0.0
        line = (f"  episodes {self.done}/{self.total}  success {rate:5.1f}%  "
                f"requests/s {self.requests / elapsed:6.1f}  errors {self.errors}  "
                f"{elapsed:6.0f}s")
        if self.last_error:
            line += f"  last error: {shorten(self.last_error, 70)}"
        # Pad over what a longer previous line left on the terminal.
        sys.stderr.write("\r" + line.ljust(self._width))
        self._width = len(line)
        sys.stderr.flush()
        if force:
            sys.stderr.write("\n")


def shorten(text: str, limit: int) -> str:
    """One line of at most ``limit`` characters (whitespace collapsed, "..." where cut)."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


def failure_reason(reply) -> str | None:
    """The server's reason for a request that failed (a reply flagged "error" that is not a
    context-length end, which is the episode's own outcome), or None for an answer."""
    if reply.flag != "error" or reply.fatal is not None:
        return None
    return shorten(reply.error or reply.text or "unknown error", 300)


def _reason_key(reason: str) -> str:
    """Failures are "the same" when their texts differ only in numbers (request ids, token
    counts, times)."""
    import re

    return re.sub(r"[0-9a-fA-F]*[0-9][0-9a-fA-F]*", "#", reason)


class FailureBreaker:
    """Stops a run that cannot succeed: when its first ``limit`` requests all failed for the
    same reason (any reason: nothing has worked yet, so the set-up is wrong), or when ``limit``
    requests in a row failed for the same permanent reason (an error that a retry does not
    cure: a 4xx answer such as an unknown model or a bad request). Transient failures later in
    a run (5xx, timeouts after every retry) never trip it: servers have bad minutes."""

    def __init__(self, limit: int):
        self.limit = limit
        self.answered = False      # some request of this run got an answer
        self.key = None
        self.count = 0

    def observe(self, reply) -> str | None:
        """Count one finished request; return the reason the run must stop, or None."""
        if not self.limit:
            return None
        reason = failure_reason(reply)
        if reason is None:
            self.answered = True
            self.key, self.count = None, 0
            return None
        if self.answered and not _is_permanent(reply):
            self.key, self.count = None, 0
            return None
        key = _reason_key(reason)
        if key == self.key:
            self.count += 1
        else:
            self.key, self.count = key, 1
        if self.count < self.limit:
            return None
        which = f"the first {self.limit}" if not self.answered else f"{self.limit} in a row"
        return f"{which} requests failed the same way: {shorten(reason, 200)}"


def _is_permanent(reply) -> bool:
    """Whether a failed request's error is one that retrying does not cure, as the agent
    classified it (``Reply.transient`` False: a 4xx answer, a malformed chat completion)."""
    return getattr(reply, "transient", None) is False


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
        self._gif_jobs: list = []
        self._gif_failures: list = []     # (path, reason) of the GIFs that could not be written
        self._replay_envs: dict[tuple, object] = {}   # used by the GIF thread only
        self._steppers: dict[tuple, TaskStepper] = {}
        self._goal_envs: dict[tuple, object] = {}
        self._breaker = FailureBreaker(config.abort_after)
        self.overhead_s = 0.0
        self.overhead_steps = 0

    # -- provenance ---------------------------------------------------------------------
    def _run_info(self) -> dict:
        from .. import __version__

        cfg = asdict(self.config)
        for k in ("out", "resume", "progress", "preflight"):
            cfg.pop(k)
        return {**self.agent.describe(), **self.provenance, "split": self.config.split,
                "settings": cfg, "tasks": sorted({e.task for e in self.episodes}),
                "task_versions": task_versions(e.env_id for e in self.episodes),
                "episodes": len(self.episodes), "package_version": __version__,
                "git_commit": _git_commit(), "host": socket.gethostname()}

    # What decides the results must match on a resume; these settings may change.
    FREE_SETTINGS = ("concurrency", "gifs", "gifs_per_task", "processes", "abort_after")
    RESUME_KEYS = ("agent", "model", "endpoint", "split", "settings", "tasks", "generation",
                   "dataset")

    def _check_out(self) -> tuple[dict, dict | None]:
        """Read, without changing anything, whether the run folder may be used: a folder
        holding a run needs ``--resume``, and a resume must agree with its run.json on what
        decides the results. Returns this run's provenance and the old run.json (or None)."""
        run_path = self.out / "run.json"
        info = self._run_info()
        if self.out.exists() and not self.out.is_dir():
            raise NotADirectoryError(20, os.strerror(20), str(self.out))
        if not (self.records_path.exists() or run_path.exists()):
            return info, None
        if not self.config.resume:
            raise ValueError(f"--out: {self.out} already holds a run; pass --resume to "
                             "continue it or choose another directory")
        if not run_path.exists():
            return info, None
        try:
            with open(run_path, encoding="utf-8") as f:
                old = json.load(f)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ValueError(f"--resume: {run_path} is not valid JSON ({e}); it cannot tell "
                             "what the run was made with") from None
        if not isinstance(old, dict):
            raise ValueError(f"--resume: {run_path} is not a JSON object")
        changed = [f"{env_id} version {v} (now {info['task_versions'].get(env_id)})"
                   for env_id, v in sorted((old.get("task_versions") or {}).items())
                   if info["task_versions"].get(env_id, v) != v]
        if changed:
            raise ValueError(f"--resume: {run_path} was made with a different task "
                             f"version: {', '.join(changed)}; the recorded episodes "
                             "are not comparable (start a new run)")
        differences = []
        defaults = asdict(EvalConfig(out=""))
        for key in self.RESUME_KEYS:
            if key not in old:
                continue
            if key == "settings":
                was, now = old.get(key) or {}, info.get(key) or {}
                for name in sorted(set(was) | set(now)):
                    if name in self.FREE_SETTINGS:
                        continue
                    # A setting added since the run was made counts as its default then.
                    before = was.get(name, defaults.get(name))
                    after = now.get(name, defaults.get(name))
                    if before != after:
                        differences.append(f"{name} {_short(before)} (now {_short(after)})")
            else:
                differences += _differences(key, old.get(key), info.get(key))
        if differences:
            raise ValueError(f"--resume: {run_path} was made with other settings: "
                             f"{'; '.join(differences)} (resume with the same options, or "
                             "start a new run in another --out)")
        return info, old

    def _prepare_out(self, info: dict, old: dict | None) -> dict:
        """Take the run folder: create it, lock it, clean what a killed run left (temp files),
        read the finished episodes and write run.json."""
        with _naming(self.out):
            self.out.mkdir(parents=True, exist_ok=True)
        self._lock = _lock_out(self.out)
        remove_stale_temp_files(self.out)
        done = _read_done(self.records_path)
        self._done_successes = sum(done.get(e.key, False) for e in self.episodes)
        if old is not None:
            info["started"] = old.get("started")
            info["resumed"] = old.get("resumed", 0) + 1
        info.setdefault("started", None)
        info["started"] = info["started"] or datetime.now(timezone.utc).isoformat()
        info["finished"] = None
        _atomic_write_json(self.out / "run.json", info)
        self._info = info
        return done

    # -- episodes -----------------------------------------------------------------------
    def _frame_kwargs(self, env_id: str, make_kwargs: dict | None) -> dict:
        """The keywords of an env that draws this run's images: the episode's own, plus the
        family's overrides for drawing directly at the size the model is shown
        (Family.consumer_overrides) unless --full-size-frames."""
        if self.config.full_size_frames:
            return dict(make_kwargs or {})
        return consumer_kwargs(env_id, make_kwargs, self.config.max_long_side)

    def _stepper(self, episode: EpisodeSpec, slots: int, budget: int) -> TaskStepper:
        key = (episode.env_id, json.dumps(episode.make_kwargs, sort_keys=True))
        if key not in self._steppers:
            self._steppers[key] = TaskStepper(
                episode.env_id, slots, budget,
                self._frame_kwargs(episode.env_id, episode.make_kwargs), self.config.max_long_side)
        return self._steppers[key]

    def _budget(self, episode: EpisodeSpec) -> int:
        budgets = self.config.budgets or {}
        return (budgets.get(episode.env_id) or self.config.max_steps
                or env_spec(episode.env_id).default_max_steps)

    def _goal_frame(self, episode: EpisodeSpec, state: dict):
        """The solved configuration's frame, found as the reference does: replay the default
        solver on a copy and require a rewarded stop. None if the solver fails."""
        key = (episode.env_id, json.dumps(episode.make_kwargs, sort_keys=True))
        env = self._goal_envs.get(key)
        if env is None:
            env = self._goal_envs[key] = make(
                episode.env_id, num_envs=1, autoreset="disabled", max_steps=None,
                **self._frame_kwargs(episode.env_id, episode.make_kwargs))
        env.reset(seeds=[episode.episode_seed % 2**64], init_states=[state])
        result = run_plans(env, env.solve())
        if not result.terminated[0] or result.reward[0] != 1.0:
            return None
        return env.frame(0).copy()   # the episode's own frame size (DESIGN.md "Frames")

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
                # place; a copy is kept only for the GIF. The view is the episode's own frame
                # size (DESIGN.md "Frames"); the slot's encoder starts afresh when it changes.
                frame = env.frame(slot)
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
                reason = failure_reason(reply)
                if reason is not None:
                    self.progress.last_error = reason
                stop = self._breaker.observe(reply)
                if stop is not None:
                    # This episode is not recorded (nor are the others in flight): a resume
                    # plays them again from the start.
                    raise RunAborted(stop)
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
                    entry["error_kind"] = reply.error_kind
                    entry["transient"] = reply.transient
                if reply.truncated:
                    entry["truncated"] = True
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
                frames.append(env.frame(slot).copy())
            record.update(success=bool(terminated and total_reward >= 1.0), reward=total_reward,
                          steps=len(steps_log), terminated=terminated,
                          truncated=bool(end_reason == "budget"), end_reason=end_reason,
                          invalid_actions=invalid, error_replies=errors,
                          elapsed_s=round(time.perf_counter() - t_start, 3),
                          usage=usage_total if have_usage else None, steps_log=steps_log)
            if gif and frames:
                record["_frames"] = frames   # the GIF is queued once the record is written
            return record
        finally:
            stepper.release(slot)

    def _solve_from(self, episode: EpisodeSpec) -> list:
        key = (episode.env_id, json.dumps(episode.make_kwargs, sort_keys=True))
        env = self._goal_envs.get(key)
        if env is None:
            env = self._goal_envs[key] = make(
                episode.env_id, num_envs=1, autoreset="disabled", max_steps=None,
                **self._frame_kwargs(episode.env_id, episode.make_kwargs))
        env.reset(seeds=[episode.episode_seed % 2**64], init_states=[episode.init_state])
        return env.solve()[0]

    # -- GIFs ---------------------------------------------------------------------------
    def _gif_wanted(self, record: dict) -> bool:
        cfg = self.config
        return bool(cfg.gifs and (cfg.gifs_per_task is None or record["index"] < cfg.gifs_per_task)
                    and record.get("steps_log") and record.get("end_reason") != "goal_failed")

    def gif_path(self, record: dict) -> Path:
        folder = self.out / "gifs" / f"{record['task']}__{record['split']}"
        return folder / (f"{record['index']:03d}_seed{record['episode_seed']}"
                         f"_r{record['reward']:.3f}.gif")

    @staticmethod
    def _gif_captions(record: dict) -> list:
        from .gifs import episode_captions   # step, action, feedback and the reply's excerpt

        return episode_captions(record)

    def _schedule_gif(self, record: dict, frames: list | None) -> None:
        """Write the episode's GIF in the GIF thread; with ``frames`` None the frames are
        replayed from the record (its init state and actions), as a resume does for the GIFs
        a killed run never wrote."""
        path = self.gif_path(record)
        captions = self._gif_captions(record)
        make_kwargs = record.pop("_make_kwargs", None) or {}

        def write():
            from .gifs import write_episode_gif

            try:
                shown = frames if frames is not None else self._replay_frames(record, make_kwargs)
                shown = shown[: len(captions)]
                with _naming(path.parent):
                    path.parent.mkdir(parents=True, exist_ok=True)
                write_episode_gif(str(path), shown, captions[: len(shown)])
            except Exception as error:  # noqa: BLE001 - a GIF never costs the run
                self._gif_failures.append((path, f"{type(error).__name__}: {error}"))
                return
            if not path.exists():   # write_episode_gif logged why (counted by _GifLog)
                self._gif_failures.append((path, None))

        self._gif_jobs.append(self._gif_pool.submit(write))

    def _replay_frames(self, record: dict, make_kwargs: dict) -> list:
        """The frames an episode showed, rebuilt from its record: the init state, then one
        frame after each recorded action (the env is deterministic given both)."""
        key = (record["env_id"], json.dumps(make_kwargs, sort_keys=True))
        env = self._replay_envs.get(key)
        if env is None:
            env = self._replay_envs[key] = make(
                record["env_id"], num_envs=1, autoreset="disabled", max_steps=None,
                **self._frame_kwargs(record["env_id"], make_kwargs))
        env.reset(seeds=[int(record["episode_seed"]) % 2**64],
                  init_states=[record["init_state"]])
        frames = [env.frame(0).copy()]
        for entry in record["steps_log"]:
            env.step([entry["action"]])
            frames.append(env.frame(0).copy())
        return frames

    def _schedule_missing_gifs(self) -> int:
        """Queue the GIFs of recorded episodes that are missing (a kill -9 or a full disk
        lost them before they were written); return how many."""
        if not self.config.gifs:
            return 0
        kwargs = {e.key: e.make_kwargs for e in self.episodes}
        missing = 0
        for record in iter_records(self.records_path):
            try:
                if not self._gif_wanted(record) or self.gif_path(record).exists():
                    continue
            except (KeyError, TypeError, ValueError):
                continue   # a record of another layout: nothing to draw it from
            keep = {k: record[k] for k in ("key", "env_id", "task", "split", "index",
                                           "episode_seed", "init_state", "reward", "steps",
                                           "end_reason") if k in record}
            keep["steps_log"] = [{k: e.get(k) for k in ("step", "action", "feedback", "reply",
                                                        "reply_flag")}
                                 for e in record["steps_log"]]
            keep["_make_kwargs"] = kwargs.get(record["key"], {})
            self._schedule_gif(keep, None)
            missing += 1
        return missing

    def _report_gif_failures(self, log: "_GifLog") -> None:
        failures = self._gif_failures
        if not failures:
            return
        # bridges/gifs.py logs "could not write episode GIF PATH: Error: text": keep the cause.
        reasons = [r for _, r in failures if r] + [m.split(".gif: ", 1)[-1] for m in log.messages]
        first = shorten(reasons[0], 120) if reasons else "unknown reason"
        self._info["gifs_missing"] = len(failures)
        sys.stderr.write(f"eval: {len(failures)} GIF(s) not written ({first}), e.g. "
                         f"{failures[0][0]}; the episodes are recorded, and --resume writes the "
                         "missing GIFs\n")

    # -- the whole run ------------------------------------------------------------------
    async def _execute(self, todo: list, claim=None) -> dict:
        """Run episodes of ``todo`` to the end; return counters to merge. ``claim()`` hands out
        the next index into ``todo`` (None when all are taken); with several processes it is
        shared, so a process that starts late or gets short episodes simply takes more."""
        if claim is None:
            claim = iter(range(len(todo))).__next__
        by_task: dict[tuple, list] = {}
        for e in todo:
            by_task.setdefault((e.env_id, json.dumps(e.make_kwargs, sort_keys=True)), []).append(e)
        slots_needed = {k: min(self.config.concurrency, len(v)) for k, v in by_task.items()}
        write_lock = asyncio.Lock()

        async def one(episode: EpisodeSpec):
            key = (episode.env_id, json.dumps(episode.make_kwargs, sort_keys=True))
            stepper = self._stepper(episode, slots_needed[key], self._budget(episode))
            record = await self.run_episode(episode, stepper)
            frames = record.pop("_frames", None)
            line = json.dumps(record, separators=(",", ":"), default=_json_default) + "\n"
            async with write_lock:
                _fsync_append(self.records_path, line)
            if frames:
                self._schedule_gif(record, frames)
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
        completed = False
        try:
            await asyncio.gather(*tasks)
            completed = True
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            if not completed:
                # Interrupted or aborted: only the GIF being written is finished; the queued
                # ones are written by the resume, which finds them missing.
                for job in self._gif_jobs:
                    job.cancel()
            for job in self._gif_jobs:
                with contextlib.suppress(BaseException):
                    job.result()
            self._gif_pool.shutdown(wait=True)
            await self._close_agent()
        return {"overhead_s": self.overhead_s, "steps": self.overhead_steps,
                "step_calls": sum(s.calls for s in self._steppers.values()),
                "requests": self.progress.requests, "errors": self.progress.errors}

    async def run_share(self) -> dict:
        """A child process's part of a multi-process run: no output set-up, no summaries; the
        GIFs it could not write are handed to the parent, which reports them once."""
        self.progress = Progress(total=len(self.episodes), enabled=False)
        with _GifLog() as log:
            result = await self._execute(self.episodes, _claim_shared)
        result["gif_failures"] = [(str(path), reason) for path, reason in self._gif_failures]
        result["gif_messages"] = log.messages
        return result

    async def _preflight(self) -> None:
        """The agent's own check of its endpoint (reachable, key accepted, model served), run
        before anything is written; agents without an endpoint have none."""
        check = getattr(self.agent, "preflight", None)
        if self.config.preflight and check is not None:
            # A request holds two images from the second turn on (history) or with --final-goal,
            # one with --history 0 alone, none in text mode.
            cfg = self.config
            images = 0 if cfg.text_mode else (2 if cfg.history != 0 or cfg.final_goal else 1)
            await check(images=images)

    async def _close_agent(self) -> None:
        if not getattr(self, "_agent_closed", False):
            self._agent_closed = True
            await self.agent.aclose()

    async def run(self) -> dict:
        self._gif_log = gif_log = _GifLog()
        try:
            info, old = self._check_out()
            await self._preflight()
            done = self._prepare_out(info, old)
            todo = [e for e in self.episodes if e.key not in done]
            with gif_log:
                paths = await self._run_todo(todo)
        finally:
            await self._close_agent()
            lock = getattr(self, "_lock", None)
            if lock is not None:
                lock.release()
        return paths

    async def _run_todo(self, todo: list) -> dict:
        self._warm_up(todo)
        self.progress = Progress(total=len(self.episodes), done=len(self.episodes) - len(todo),
                                 successes=self._done_successes, enabled=self.config.progress)
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
        # Queued after the runner processes are forked (no thread busy across a fork); the
        # GIF thread draws them while the episodes run.
        missing = self._schedule_missing_gifs()
        if missing and self.config.progress:
            sys.stderr.write(f"eval: writing {missing} GIF(s) of recorded episodes that an "
                             "earlier run left unwritten\n")
        totals = {"overhead_s": 0.0, "steps": 0, "step_calls": 0}
        parts = [asyncio.ensure_future(self._execute(todo, claim)), *children]
        results = None
        try:
            # A part that fails (an aborted run, a full disk) stops the others at once.
            finished, _ = await asyncio.wait(parts, return_when=asyncio.FIRST_EXCEPTION)
            for part in finished:
                if part.exception() is not None:
                    raise part.exception()
            results = [part.result() for part in parts]
        finally:
            for part in parts:
                part.cancel()
            await asyncio.gather(*parts, return_exceptions=True)
            if watcher is not None:
                watcher.cancel()
            if pool is not None:
                if results is None:
                    # Stopping early: the other runner processes stop too (at most the record
                    # being appended is torn, and a resume cuts a torn tail off), instead of
                    # playing the rest of the run before this process may exit.
                    for child in list((getattr(pool, "_processes", None) or {}).values()):
                        with contextlib.suppress(Exception):
                            child.terminate()
                pool.shutdown(wait=False, cancel_futures=True)
            self.progress.show(force=True)
            if results is None:   # stopping early: say now which GIFs are missing
                self._report_gif_failures(self._gif_log)
        for r in results[1:]:
            self._gif_failures += [(Path(path), reason) for path, reason in r["gif_failures"]]
            self._gif_log.messages += r["gif_messages"]
        self._report_gif_failures(self._gif_log)
        for r in results:
            for k in totals:
                totals[k] += r[k]
        self._info["finished"] = datetime.now(timezone.utc).isoformat()
        self._info["loop_overhead_ms_per_step"] = (
            round(totals["overhead_s"] / totals["steps"] * 1e3, 3) if totals["steps"] else None)
        self._info["step_calls"] = totals["step_calls"]
        self._info["steps"] = totals["steps"]
        self._info["processes"] = processes
        self._info["errors"] = error_summary(iter_records(self.records_path))
        _atomic_write_json(self.out / "run.json", self._info)
        from .report import write_summary

        with _naming(self.out):
            paths = write_summary(str(self.out))
        return {**paths, "errors": self._info["errors"]}

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
        """With several processes, progress counts the records file every half second (the
        records appended since the run started: the earlier ones are ``already_done``)."""
        offset = self.records_path.stat().st_size if self.records_path.exists() else 0
        done, successes = already_done, self._done_successes
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


class _GifLog(logging.Filter):
    """While a run lasts, the warnings bridges/gifs.py logs from the GIF thread (one per GIF
    that could not be written) are kept instead of printed: the run reports them once."""

    def __init__(self):
        super().__init__()
        self.messages: list[str] = []
        self._logger = logging.getLogger(__name__.rsplit(".", 1)[0] + ".gifs")

    def filter(self, record: logging.LogRecord) -> bool:
        if record.threadName.startswith("visgym-gif"):
            self.messages.append(record.getMessage())
            return False
        return True

    def __enter__(self):
        self._logger.addFilter(self)
        return self

    def __exit__(self, *exc) -> None:
        self._logger.removeFilter(self)


def error_summary(records) -> dict:
    """Per ``task/split``: the failed requests of its episodes (replies flagged "error") and the
    most common server error among them, ``{"errors": n, "most_common": text, "count": k}``;
    tasks without errors are left out."""
    from collections import Counter

    by_task: dict = {}
    for record in records:
        name = f"{record.get('task')}/{record.get('split')}"
        for entry in record.get("steps_log") or ():
            if entry.get("reply_flag") != "error":
                continue
            by_task.setdefault(name, Counter())[shorten(entry.get("error") or entry.get("reply")
                                                        or "unknown error", 300)] += 1
    out = {}
    for name in sorted(by_task):
        counts = by_task[name]
        text, count = counts.most_common(1)[0]
        out[name] = {"errors": sum(counts.values()), "most_common": text, "count": count}
    return out


def error_lines(errors: dict) -> list[str]:
    """The summary's lines for ``error_summary``: one per task with failed requests."""
    return [f"{name}: {e['errors']} failed request(s); most common ({e['count']}x): "
            f"{shorten(e['most_common'], 160)}" for name, e in errors.items()]


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
    writing records that a resumed run would repeat; bridges/pools.die_with_parent, shared with
    the demonstration workers) and share its episode counter."""
    from .pools import die_with_parent

    _claim_init(counter, total)
    die_with_parent()


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
