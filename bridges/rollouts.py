"""The rollout collector: G trajectories per start, with the tokens the policy sampled.

For RL trainers (docs/rl.md "Rollouts"; issue 27). ``visgym rollouts`` plays ``episodes`` starts
of every task, each ``group_size`` times from the exact same state (GRPO-style groups: equal
seeds give equal starts, and every trajectory records its start's state hash so that is
checkable), against an OpenAI-compatible policy server (vLLM, SGLang), or against a trainer's
own model in the same process (``collect``, with a batched policy callable). It is the
evaluation's machinery composed for training data, and holds only what is its own:

- the shared parts: the turn loop (``EpisodeLoop``, bridges/turns.py: conversation building,
  history window, reply parsing), the micro-batched stepper (bridges/stepper.py, with the
  reward mode and the state hashes), the OpenAI agent with its transports, retries, fault
  classification and pre-flight (bridges/agents/, through ``TokenOpenAIAgent``,
  bridges/rollout_policy.py), the fault policy (``FailureBreaker``, bridges/faults.py), records
  (atomic append, torn-line repair, bridges/records.py), the run folder (lock, run.json,
  resume checks, bridges/run_folder.py), progress and prompt settings;
- its own: the starts (``plan_groups``: seeds drawn by ``SEED_RULE``, redrawn where a start
  equals a shipped evaluation episode), the loop driver that keeps the messages as sent, the
  token ids and log-probabilities, the reward components, the state hash before and after
  every step and the time spent in the policy and in the env (``Collector``), the trajectory
  record (``STOP_REASONS``), and the image store (each JPEG written once, as
  ``images/<sha256>.jpg``, and referenced from the messages by that hash).

A trajectory ends when the env ends it (``solved``, or ``stopped`` on an unsolved state), when
the budget runs out (``budget``), or at the first reply that is not the model's answer: a
context-length error (``context``), a request that timed out after its retries (``timeout``) or
failed otherwise (``server_error``); with ``max_parse_errors`` K > 0, also at its K-th reply
without a valid action (``parse_error``); an exception of the env ends it as ``env_error``. Such
trajectories are recorded (the trainer decides what to drop) and not played again; a run whose
endpoint fails request after request stops (``RunAborted``), its trajectories in flight
unrecorded, and ``--resume`` plays them. Resuming after a kill -9 records every trajectory
exactly once: the records file's torn last line is cut off, recorded keys are skipped, and the
temp files of interrupted image writes are removed.

``processes`` > 1 adds collector processes that take trajectories from one shared to-do list
(bridges/pools.py, as the evaluation's runner processes do) and append to the same records
file; ``ray_address`` plays chunks of trajectories in Ray tasks instead, whose records and
JPEGs come back to this process to be written. Both rebuild the policy client from the agent's
``rebuild`` (``TokenOpenAIAgent``), so an in-process policy runs in its own process only.

The trajectory JSON per line is the documented schema (docs/rl.md "Rollouts");
bridges/rollout_export.py turns a run folder into a Hugging Face Parquet dataset.
"""
from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import os
import time
import uuid
from dataclasses import asdict, dataclass, field
from dataclasses import replace as dataclass_replace
from pathlib import Path

from ..core import make
from ..core.registry import consumer_kwargs
from ..core.registry import spec as env_spec
from .agents import Episode, Turn
from .conversation import MessageMemo, episode_instructions
from .faults import FailureBreaker, RunAborted, failure_reason
from .files import write_new_file
from .interrupts import run_interruptible
from .progress import Progress
from .prompts import PromptSettings
from .records import RecordFile, compact_json, naming, to_json_line, watch_appended
from .rollout_policy import BatchedPolicyAgent, has_logprobs
from .run_folder import RunFolder, provenance, remove_stale_temp_files
from .splits import EpisodeSpec, task_versions
from .stepper import Steppers, kwargs_key
from .turns import EpisodeLoop
from .warmup import settled_heap

__all__ = ["STOP_REASONS", "SEED_RULE", "RolloutConfig", "Collector", "Rollouts", "RunAborted",
           "collect", "plan_groups", "rollout_seed", "run_rollouts"]

STOP_REASONS = ("solved", "stopped", "budget", "context", "parse_error", "timeout",
                "server_error", "env_error")
TIMEOUT_KINDS = ("timeout", "endpoint_hung")
IMAGES_DIR = "images"
REWARDS = ("sparse", "progress")
SEED_RULE = ("start k of a task: sha256('visgym-rollouts/<task>/<split>/<seed>/<k>'), redrawn "
             "as sha256('visgym-rollouts/<task>/<split>/<seed>/<k>/<a>') for a = 1, 2, ... while "
             "the start equals a shipped evaluation episode; first 8 bytes little-endian >> 1")
_PLAN_CHUNK = 64    # starts generated per env when planning (bounds the frame buffers)
_MAX_REDRAWS = 1000


def rollout_seed(task: str, split: str, base_seed: int, index: int, attempt: int = 0) -> int:
    """The seed of start ``index`` of a task (``SEED_RULE``)."""
    text = f"visgym-rollouts/{task}/{split}/{base_seed}/{index}"
    if attempt:
        text += f"/{attempt}"
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little") >> 1


def plan_groups(env_ids, episodes: int, base_seed: int = 0) -> list[EpisodeSpec]:
    """The ``episodes`` starts of each env id, in order (``SEED_RULE``): an ``EpisodeSpec`` with
    its seed and init state, whose key ``<env_id>#<k>`` is the group id. A start equal to one of
    the shipped evaluation episodes (bridges/demos/exclusion.py) is redrawn, so rollouts never
    train on the evaluation splits."""
    from .demos.exclusion import init_state_hash, shipped_hashes

    specs = []
    for env_id in env_ids:
        task, split = env_id.split("/", 1)
        forbidden = shipped_hashes(task)
        env = make(env_id, num_envs=min(_PLAN_CHUNK, episodes), autoreset="disabled",
                   max_steps=None)
        env.reset(seeds=range(env.num_envs))   # rows are then redrawn one chunk at a time
        for first in range(0, episodes, env.num_envs):
            indices = list(range(first, min(first + env.num_envs, episodes)))
            attempts = [0] * len(indices)
            states: list = [None] * len(indices)
            todo = list(range(len(indices)))
            while todo:
                for row in todo:
                    attempts[row] += states[row] is not None   # a redraw: the next attempt
                    if attempts[row] > _MAX_REDRAWS:
                        raise ValueError(f"tasks: {env_id} start {indices[row]}: {_MAX_REDRAWS} "
                                         "seeds in a row gave shipped evaluation episodes")
                seeds = [rollout_seed(task, split, base_seed, indices[row], attempts[row])
                         for row in todo]
                env.reset(seeds=seeds, rows=todo)
                dicts = env.state_dicts()
                for row in todo:
                    states[row] = dicts[row]
                todo = [row for row in todo if init_state_hash(task, states[row]) in forbidden]
            for row, k in enumerate(indices):
                seed = rollout_seed(task, split, base_seed, k, attempts[row])
                specs.append(EpisodeSpec(key=f"{env_id}#{k}", env_id=env_id, task=task,
                                         split=split, index=k, seed=seed, episode_seed=seed,
                                         init_state=states[row]))
    return specs


@dataclass
class RolloutConfig:
    """What a rollout run plays. ``env_ids``: "task/split" ids; ``episodes``: starts per env id;
    ``group_size``: trajectories per start; ``seed``: the base of the start seeds (``SEED_RULE``);
    ``out``: the run folder (None: in memory, ``collect`` only)."""

    env_ids: list
    episodes: int = 8
    group_size: int = 8
    out: str | None = None
    seed: int = 0
    reward: str = "sparse"                # "sparse" or "progress" (docs/rl.md "Rewards")
    max_steps: int | None = None          # None: the env id's default budget
    budgets: dict = field(default_factory=dict)   # {env_id: steps} (--prompt-from)
    concurrency: int = 64                 # trajectories in flight (all processes together)
    processes: int = 1                    # collector processes sharing the to-do list
    ray_address: str | None = None        # play in Ray tasks ("local", "auto" or an address)
    ray_chunk: int = 0                    # trajectories per Ray task; 0: 2 x its concurrency
    history: int = -1
    max_long_side: int | None = 336
    text_mode: bool = False
    include_feedback: bool = True
    elicit_verbalization: bool = False
    max_parse_errors: int = 0             # end a trajectory at its K-th invalid action; 0: never
    require_logprobs: bool = False        # every answer must carry log-probabilities
    full_size_frames: bool = False
    resume: bool = False
    progress: bool = True
    preflight: bool = True
    abort_after: int = 8
    sampling: dict = field(default_factory=dict)   # recorded as given (in-process policies)

    @property
    def prompt(self) -> PromptSettings:
        return PromptSettings(elicit_verbalization=self.elicit_verbalization,
                              feedback=self.include_feedback, history=self.history,
                              text_mode=self.text_mode, max_long_side=self.max_long_side)

    def validate(self) -> "RolloutConfig":
        from ..core import list_envs

        if isinstance(self.env_ids, str) or not self.env_ids:
            raise ValueError("tasks: give a list of env ids such as ['maze_2d/easy']")
        known = set(list_envs())
        for env_id in self.env_ids:
            if env_id not in known or "/" not in env_id:
                raise ValueError(f"tasks: unknown env id {env_id!r} (see 'visgym list')")
        if len(set(self.env_ids)) != len(self.env_ids):
            raise ValueError(f"tasks: an env id is given twice: {self.env_ids}")
        checks = (("--episodes", self.episodes, 1), ("--group-size", self.group_size, 1),
                  ("--concurrency", self.concurrency, 1), ("--abort-after", self.abort_after, 0),
                  ("--processes", self.processes, 1), ("--ray-chunk", self.ray_chunk, 0),
                  ("--max-parse-errors", self.max_parse_errors, 0))
        for name, value, low in checks:
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"{name}: must be an integer of at least {low}, got {value!r}")
        if self.max_steps is not None and (not isinstance(self.max_steps, int)
                                           or self.max_steps < 1):
            raise ValueError(f"--max-steps: must be at least 1, got {self.max_steps!r}")
        if self.reward not in REWARDS:
            raise ValueError(f"--reward: expected one of {', '.join(REWARDS)}, got "
                             f"{self.reward!r}")
        if self.resume and self.out is None:
            raise ValueError("--resume: needs a run folder (out)")
        if self.text_mode:
            from ..core import make_family

            for env_id in self.env_ids:
                if not make_family(env_id).has_text_mode:
                    raise ValueError(f"--text-mode: {env_id} has no text rendering")
        self.prompt.validate()
        return self

    def budget(self, env_id: str) -> int:
        return (self.budgets.get(env_id) or self.max_steps
                or env_spec(env_id).default_max_steps)


class ImageStore:
    """The run's observation JPEGs by content hash: ``<out>/images/<sha256>.jpg``, each written
    once (atomically, before any record refers to it), or kept in ``images`` in memory."""

    def __init__(self, out: Path | None):
        self.folder = None if out is None else Path(out) / IMAGES_DIR
        self.images: dict = {}      # sha256 -> bytes (in memory) or True (on disk)
        self.written = 0

    def prepare(self) -> None:
        """Create the folder and remove what interrupted writes left (under the run's lock)."""
        if self.folder is not None:
            with naming(self.folder):
                self.folder.mkdir(parents=True, exist_ok=True)
            remove_stale_temp_files([self.folder])

    def add(self, jpeg: bytes) -> str:
        sha = hashlib.sha256(jpeg).hexdigest()
        if sha in self.images:
            return sha
        if self.folder is None:
            self.images[sha] = jpeg
            return sha
        path = os.path.join(self.folder, f"{sha}.jpg")
        if not os.path.exists(path):
            # The folder exists (prepare): no makedirs per image, and no file object.
            write_new_file(self.folder, f"{sha}.jpg", jpeg)
            self.written += 1
        self.images[sha] = True
        return sha


def trajectory_line(record: dict) -> str:
    """``to_json_line(record)`` for a trajectory record: the same text, made faster. Every turn
    lists the whole history, and the turns of a record share their message dicts
    (``MessageMemo``), so each message is encoded once here and its text reused in every turn
    that lists it."""
    turns = record.get("turns")
    if not isinstance(turns, list) or next(reversed(record)) != "turns":
        return to_json_line(record)
    texts: dict = {}     # id(message) -> its JSON (the record keeps the message, and so its id)
    out = [_open_object(compact_json({k: v for k, v in record.items() if k != "turns"})),
           '"turns":[']
    for i, entry in enumerate(turns):
        if i:
            out.append(",")
        if not isinstance(entry, dict) or list(entry)[:2] != ["step", "messages"] \
                or not isinstance(entry["messages"], list):
            out.append(compact_json(entry))
            continue
        parts = []
        for message in entry["messages"]:
            text = texts.get(id(message))
            if text is None:
                text = texts[id(message)] = compact_json(message)
            parts.append(text)
        rest = compact_json({k: v for k, v in entry.items() if k not in ("step", "messages")})
        out.append(f'{{"step":{compact_json(entry["step"])},"messages":[{",".join(parts)}]'
                   f'{"}" if rest == "{}" else "," + rest[1:]}')
    out.append("]}\n")
    return "".join(out)


def _open_object(text: str) -> str:
    """The JSON text of an object, open for one more member: "{" or '{"a":1,'."""
    return "{" if text == "{}" else text[:-1] + ","


def hex_hash(value: int | None) -> str | None:
    """A uint64 state hash as 16 hex digits (exact in JSON, Parquet and any language)."""
    return None if value is None else f"{value:016x}"


def stored_message(message: dict, shas: dict) -> dict:
    """A message as recorded: each image data URL replaced by ``{"type": "image", "sha256":
    ...}`` (``shas``: data URL -> hash of the JPEG it holds)."""
    content = message.get("content")
    if not isinstance(content, list):
        return dict(message)
    parts = []
    for part in content:
        if part.get("type") == "image_url":
            parts.append({"type": "image", "sha256": shas[part["image_url"]["url"]]})
        else:
            parts.append(dict(part))
    return {"role": message["role"], "content": parts}


def _failed_stop(reply) -> str | None:
    """The stop reason of a reply that is not the model's answer, or None for an answer."""
    if reply.flag != "error":
        return None
    if reply.fatal == "context_length":
        return "context"
    return "timeout" if reply.error_kind in TIMEOUT_KINDS else "server_error"


@dataclass
class Rollouts:
    """What ``collect`` returns: the trajectory records (the run's schema) and, for a run kept
    in memory, the JPEGs they refer to (``{sha256: bytes}``)."""

    trajectories: list
    images: dict
    run_id: str


class Collector:
    """One rollout run (see the module docstring): ``await collector.run()``."""

    FREE_SETTINGS = ("concurrency", "abort_after", "episodes", "require_logprobs", "processes",
                     "ray_address", "ray_chunk")
    RESUME_KEYS = ("agent", "model", "endpoint", "settings", "env_ids", "generation")

    owns_process = False   # a command's own process: the playing loop runs in settled_heap

    def __init__(self, agent, config: RolloutConfig, provenance: dict | None = None):
        self.agent = agent
        self.config = config.validate()
        self.stop_requested = False     # set by Ctrl-C: no new trajectory starts
        if (config.processes > 1 or config.ray_address) and (
                getattr(agent, "rebuild", None) is None or config.out is None):
            name = "--ray" if config.ray_address else "--processes"
            raise ValueError(f"{name}: needs an agent that can be rebuilt in another process "
                             "(the OpenAI-compatible policy of 'visgym rollouts') and a run "
                             "folder (out); an in-process policy runs in its own process only")
        self.settings = config.prompt
        self.provenance = provenance or {}
        self.run_id = uuid.uuid4().hex
        self.folder = None if config.out is None else RunFolder(
            config.out, self.RESUME_KEYS, self.FREE_SETTINGS, asdict(RolloutConfig(env_ids=[])))
        self.images = ImageStore(None if config.out is None else Path(config.out))
        self.trajectories: list = []
        self.steppers = Steppers(config.max_long_side, reward=config.reward)
        self._breaker = FailureBreaker(config.abort_after)
        self.stop_counts: dict = {}
        self.policy_s = self.env_s = 0.0
        self._generation = self.agent.describe().get("generation") or dict(config.sampling)
        self._model = getattr(agent, "model", None) or agent.describe().get("agent")

    # -- provenance ---------------------------------------------------------------------
    def run_info(self) -> dict:
        settings = asdict(self.config)
        for key in ("out", "resume", "progress", "preflight", "env_ids"):
            settings.pop(key)
        prov = provenance()
        return {**self.agent.describe(), **self.provenance, "workflow": "rollouts",
                "run_id": self.run_id, "env_ids": list(self.config.env_ids),
                "settings": settings, "seed_rule": SEED_RULE,
                "task_versions": task_versions(self.config.env_ids),
                "trajectories": len(self.config.env_ids) * self.config.episodes
                * self.config.group_size,
                "package_version": prov["package_version"], "git_commit": prov["git_commit"],
                "host": prov["host"]}

    # -- the run ------------------------------------------------------------------------
    async def run(self) -> dict:
        """Play every trajectory not recorded yet; return the run's summary (run.json's end)."""
        from .warmup import warm_up_all

        done: dict = {}
        try:
            info = self.run_info()
            old = None
            if self.folder is not None:
                old = self.folder.check(info, self.config.resume)
            await self._preflight()
            warm_up_all([(env_id, {"make_kwargs": {}, "text_mode": self.config.text_mode})
                         for env_id in self.config.env_ids], announce=self.config.progress)
            # Planned before the folder is taken: a start that cannot be drawn writes nothing.
            starts = plan_groups(self.config.env_ids, self.config.episodes, self.config.seed)
            if self.folder is not None:
                if old is not None and old.get("run_id"):
                    self.run_id = info["run_id"] = old["run_id"]
                done = self.folder.take(info, old)
                self.images.prepare()
            every = [(spec, member) for spec in starts
                     for member in range(self.config.group_size)]
            todo = [(s, m) for s, m in every if f"{s.key}.{m}" not in done]
            self.progress = Progress(total=len(every), done=len(every) - len(todo),
                                     successes=sum(bool(v) for v in done.values()),
                                     enabled=self.config.progress)
            totals = await self._run_todo(todo)
            self.progress.show(force=True)
            summary = {"stop_reasons": dict(sorted(totals["stop_reasons"].items())),
                       "policy_s": round(totals["policy_s"], 3),
                       "env_s": round(totals["env_s"], 3),
                       "images_written": totals["images_written"], "played": len(todo),
                       "recorded_before": len(every) - len(todo),
                       "processes": totals["processes"]}
            if self.folder is not None:
                self.folder.finish(**summary)
            return summary
        finally:
            await self.agent.aclose()
            if self.folder is not None:
                self.folder.release()

    async def _preflight(self) -> None:
        check = getattr(self.agent, "preflight", None)
        if self.config.preflight and check is not None:
            await check(images=self.settings.images_per_request())

    def _totals(self) -> dict:
        """What this process adds to the run's summary."""
        return {"stop_reasons": dict(self.stop_counts), "policy_s": self.policy_s,
                "env_s": self.env_s, "images_written": self.images.written}

    async def _run_todo(self, todo: list) -> dict:
        """Play ``todo`` in this process, or in ``processes`` of them sharing one to-do list
        (bridges/pools.py: each takes the next trajectory from a counter in shared memory as it
        frees a slot, and all append to the one records file); return the merged totals."""
        if self.config.ray_address and todo:
            return await self._run_ray(todo)
        processes = min(self.config.processes, max(1, len(todo)))
        if processes == 1:
            await self._execute(todo, self.config.concurrency)
            return {**self._totals(), "processes": 1}
        pool, children, claim = self._start_children(todo, processes)
        watcher = asyncio.ensure_future(self._watch_records())
        parts = [asyncio.ensure_future(self._execute(todo, _share(self.config.concurrency,
                                                                  processes, 0), claim)),
                 *children]
        results = None
        try:
            # A part that fails (an aborted run, a full disk) stops the others at once.
            finished, _ = await asyncio.wait(parts, return_when=asyncio.FIRST_EXCEPTION)
            for part in finished:
                if part.exception() is not None:
                    raise part.exception()
            results = [self._totals()] + [part.result() for part in parts[1:]]
        finally:
            for part in parts:
                part.cancel()
            await asyncio.gather(*parts, return_exceptions=True)
            watcher.cancel()
            if results is None:
                # Stopping early: the other processes stop too (at most the record being
                # appended is torn, and a resume cuts a torn tail off).
                for child in list((getattr(pool, "_processes", None) or {}).values()):
                    with contextlib.suppress(Exception):
                        child.terminate()
            pool.shutdown(wait=False, cancel_futures=True)
        reasons: dict = {}
        for r in results:
            for k, v in r["stop_reasons"].items():
                reasons[k] = reasons.get(k, 0) + v
        self.stop_counts = reasons
        return {"stop_reasons": reasons, "processes": processes,
                **{k: sum(r[k] for r in results)
                   for k in ("policy_s", "env_s", "images_written")}}

    def _start_children(self, todo: list, processes: int):
        """``processes - 1`` collector processes, each rebuilding the agent from its
        ``rebuild`` (a ``TokenOpenAIAgent``'s arguments) and sharing the claim counter."""
        rebuild = self.agent.rebuild
        from concurrent.futures import ProcessPoolExecutor

        from .pools import claim_init, claim_next, claiming_child, pool_context

        ctx = pool_context()
        counter = ctx.Value("q", 0)
        claim_init(counter, len(todo))
        pool = ProcessPoolExecutor(processes - 1, mp_context=ctx, initializer=claiming_child,
                                   initargs=(counter, len(todo)))
        children = []
        for k in range(1, processes):
            config = dataclass_replace(self.config, processes=1, progress=False,
                                       preflight=False, resume=False,
                                       concurrency=_share(self.config.concurrency, processes,
                                                          k))
            children.append(asyncio.wrap_future(pool.submit(
                _run_share, rebuild, config, todo, self.run_id, self.provenance)))
        return pool, children, claim_next

    async def _run_ray(self, todo: list) -> dict:
        """Play ``todo`` in Ray tasks: chunks of trajectories, each a collector of its own
        (the agent rebuilt there, images and records kept in memory), at most ``processes``
        running at once with their share of ``concurrency``. Ray workers may not share this
        filesystem, so each chunk comes back whole and this process writes its images, then its
        records: the same run folder as a local run's, a chunk lost to a crash is played again by
        ``--resume``."""
        ray = _ray_init(self.config.ray_address)
        remote = ray.remote(_play_chunk)
        running = max(1, min(self.config.processes, len(todo)))
        slots = max(1, self.config.concurrency // running)
        size = self.config.ray_chunk or 2 * slots
        chunks = [todo[i:i + size] for i in range(0, len(todo), size)]
        config = dataclass_replace(self.config, processes=1, progress=False, preflight=False,
                                   resume=False, out=None, ray_address=None,
                                   concurrency=slots)
        rebuild = self.agent.rebuild
        records = self.folder.records
        pending: dict = {}
        results = []
        try:
            while chunks or pending:
                while chunks and len(pending) < running:
                    pending[remote.remote(rebuild, config, chunks.pop(0), self.run_id,
                                          self.provenance)] = True
                ready, _ = await asyncio.to_thread(ray.wait, list(pending), num_returns=1)
                for ref in ready:
                    pending.pop(ref)
                    trajectories, images, totals = await asyncio.to_thread(ray.get, ref)
                    for jpeg in images.values():
                        self.images.add(jpeg)
                    for record in trajectories:
                        records.append_line(trajectory_line(record))
                        self.progress.done += 1
                        self.progress.successes += record["success"]
                    self.progress.show()
                    results.append(totals)
        finally:
            for ref in pending:
                with contextlib.suppress(Exception):
                    ray.cancel(ref, force=True)
        reasons: dict = {}
        for r in results:
            for k, v in r["stop_reasons"].items():
                reasons[k] = reasons.get(k, 0) + v
        self.stop_counts = reasons
        return {"stop_reasons": reasons, "processes": running,
                "images_written": self.images.written,
                **{k: sum(r[k] for r in results) for k in ("policy_s", "env_s")}}

    async def run_share(self, todo: list) -> dict:
        """A child process's part of a multi-process run: no run folder set-up (the parent
        holds its lock and wrote run.json), no progress line; return its totals."""
        from .pools import claim_next

        self.progress = Progress(total=len(todo), enabled=False)
        try:
            await self._execute(todo, self.config.concurrency, claim_next)
        finally:
            await self.agent.aclose()
        return self._totals()

    async def _watch_records(self) -> None:
        """With several processes, progress counts the records appended to the file every half
        second (the other processes' trajectories are seen nowhere else)."""
        progress = self.progress

        def count(lines: list) -> None:
            # A progress count only: the flag is read off the compact line (before the turns,
            # which hold model text) instead of parsing every record.
            for line in lines:
                progress.done += 1
                progress.successes += b',"success":true,' in line[:line.find(b'"turns":')]
            progress.show()

        await watch_appended(self.folder.records.path, count)

    async def _execute(self, todo: list, concurrency: int, claim=None) -> None:
        """Play trajectories of ``todo`` with ``concurrency`` in flight. ``claim()`` hands out
        the next index into ``todo`` (None when all are taken; shared between processes)."""
        if claim is None:
            claim = iter(range(len(todo))).__next__
        by_key: dict = {}
        for spec, _ in todo:
            key = kwargs_key(spec.env_id, spec.make_kwargs)
            by_key[key] = by_key.get(key, 0) + 1
        slots = {k: min(concurrency, n) for k, n in by_key.items()}
        records = None if self.folder is None else self.folder.records
        write_lock = asyncio.Lock()

        def claimed():
            while not self.stop_requested:
                try:
                    index = claim()
                except StopIteration:
                    return
                if index is None:
                    return
                yield todo[index]

        claims = claimed()

        async def worker():
            for spec, member in claims:
                stepper = self.steppers.get(spec.env_id, self._frame_kwargs(spec.env_id),
                                            slots[kwargs_key(spec.env_id, spec.make_kwargs)],
                                            self.config.budget(spec.env_id))
                record = await self.play(spec, member, stepper)
                if records is not None:
                    line = trajectory_line(record)
                    async with write_lock:
                        records.append_line(line)
                else:
                    self.trajectories.append(record)
                reason = record["stop_reason"]
                self.stop_counts[reason] = self.stop_counts.get(reason, 0) + 1
                self.progress.done += 1
                self.progress.successes += record["success"]
                self.progress.show()

        with settled_heap(self.owns_process):
            tasks = [asyncio.ensure_future(worker())
                     for _ in range(min(concurrency, len(todo)))]
            try:
                await asyncio.gather(*tasks)
            finally:
                for t in tasks:
                    t.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)

    def _frame_kwargs(self, env_id: str) -> dict:
        if self.config.full_size_frames:
            return {}
        return consumer_kwargs(env_id, {}, self.config.max_long_side)

    def _on_reply(self, reply) -> None:
        """Count a finished request; the fault policy may stop the run here."""
        self.progress.requests += reply.attempts
        self.progress.errors += reply.flag == "error"
        reason = failure_reason(reply)
        if reason is not None:
            self.progress.last_error = reason
        self._breaker.check(reply)
        if self.config.require_logprobs and reply.flag is None and not has_logprobs(reply):
            raise RunAborted("a reply of the policy carried no log-probabilities, and "
                             "--require-logprobs needs them (serve it with vLLM or SGLang)")

    # -- one trajectory -----------------------------------------------------------------
    async def play(self, spec: EpisodeSpec, member: int, stepper) -> dict:
        """Play trajectory ``member`` of start ``spec`` to its end; return its record."""
        clock = time.perf_counter
        started = clock()
        slot = stepper.acquire()
        times = {"policy_s": 0.0, "env_s": 0.0}
        turns: list = []
        state = {"stop": None, "error": None, "start_hash": None, "success": False,
                 "terminated": False, "truncated": False, "return": 0.0, "invalid": 0,
                 "usage": None}
        try:
            await self._drive(spec, member, stepper, slot, times, turns, state)
        finally:
            stepper.release(slot)
        self.policy_s += times["policy_s"]
        self.env_s += times["env_s"]
        return self._record(spec, member, turns, state, times, clock() - started)

    async def _drive(self, spec, member, stepper, slot, times, turns, state) -> None:
        clock = time.perf_counter
        settings = self.settings
        t0 = clock()
        try:
            state["start_hash"] = before = stepper.load(slot, spec.episode_seed, None)
            env = stepper.env
            instructions = episode_instructions(env, slot, settings.text_mode,
                                                settings.elicit_verbalization)
        except Exception as error:   # a family that cannot build this start
            state["stop"], state["error"] = "env_error", _error_text(error)
            times["env_s"] += clock() - t0
            return
        times["env_s"] += clock() - t0
        loop = EpisodeLoop(settings, self.config.budget(spec.env_id), instructions)
        episode = Episode(key=f"{spec.key}.{member}", env_id=spec.env_id, index=spec.index,
                          seed=spec.episode_seed, grammar=env.grammar)
        encoder = stepper.encoders[slot]
        shas: dict = {}
        recorded = MessageMemo(lambda message: stored_message(message, shas))
        usage = {"prompt_tokens": 0, "completion_tokens": 0}
        while not loop.done:
            t0 = clock()
            text = loop.next_text()
            frame = env.frame(slot)
            ascii_frame = env.render_text(slot) if settings.text_mode else None
            jpeg = None if settings.text_mode else encoder(frame)
            messages = loop.user_message(
                text, None if jpeg is None else base64.b64encode(jpeg).decode("ascii"),
                ascii_frame)
            if jpeg is not None:
                shas[messages[-1]["content"][0]["image_url"]["url"]] = self.images.add(jpeg)
            times["env_s"] += clock() - t0
            t0 = clock()
            reply = await self.agent.act(Turn(episode, loop.step, messages, text, frame))
            times["policy_s"] += clock() - t0
            self._on_reply(reply)
            if reply.usage:
                state["usage"] = usage
                for k in usage:
                    usage[k] += reply.usage.get(k) or 0
            entry = _turn_entry(loop.step, recorded(messages), reply, before)
            turns.append(entry)
            state["stop"] = _failed_stop(reply)
            if state["stop"] is not None:   # not the model's answer: it ends unstepped
                break
            action = loop.take_reply(reply)
            try:
                result = await stepper.step(slot, action)
            except Exception as error:
                state["stop"], state["error"] = "env_error", _error_text(error)
                break
            times["env_s"] += result.cost_s
            loop.take_result(result)
            before = result.state_hash
            entry.update(stepped=True, action=action, invalid=result.invalid,
                         reward=result.reward, reward_components={
                             "task": result.task_reward, "shaping": result.shaping},
                         terminated=result.terminated, truncated=result.truncated,
                         feedback=result.feedback, code=result.code,
                         state_hash_after=hex_hash(result.state_hash))
            state["invalid"] += result.invalid
            limit = self.config.max_parse_errors
            if limit and state["invalid"] >= limit and not loop.done:
                state["stop"] = "parse_error"
                break
        t = loop.transcript
        state["return"] = t.reward
        if loop.done:
            state.update(success=t.success, terminated=t.terminated, truncated=t.truncated)
        if state["stop"] is None:
            state["stop"] = ("solved" if t.success else "stopped") if t.terminated else "budget"

    def _record(self, spec, member: int, turns: list, state: dict, times: dict,
                elapsed: float) -> dict:
        key = f"{spec.key}.{member}"
        return {"key": key, "run_id": self.run_id, "episode_id": key, "group_id": spec.key,
                "member": member, "group_size": self.config.group_size,
                "env_id": spec.env_id, "task": spec.task, "split": spec.split,
                "index": spec.index, "family_version": int(env_spec(spec.env_id).family.version),
                "seed": spec.episode_seed, "policy_model": self._model,
                "sampling": self._generation, "reward_mode": self.config.reward,
                "stop_reason": state["stop"], "return": state["return"],
                "success": bool(state["success"]),
                "steps": sum(1 for t in turns if t["stepped"]),
                "terminated": state["terminated"], "truncated": state["truncated"],
                "invalid_actions": state["invalid"],
                "start_state_hash": hex_hash(state["start_hash"]),
                "final_state_hash": turns[-1]["state_hash_after"] if turns
                else hex_hash(state["start_hash"]),
                "time": {"policy_s": round(times["policy_s"], 4),
                         "env_s": round(times["env_s"], 4), "elapsed_s": round(elapsed, 4)},
                "usage": state["usage"], "error": state["error"], "turns": turns}


def _turn_entry(step: int, messages: list, reply, before: int | None) -> dict:
    """A turn as recorded before its step (the step's fields are filled in after it)."""
    entry = {"step": step, "messages": messages, "reply": reply.text, "reply_flag": reply.flag,
             "token_ids": getattr(reply, "token_ids", None),
             "logprobs": getattr(reply, "logprobs", None),
             "stepped": False, "action": None, "invalid": False, "reward": 0.0,
             "reward_components": {"task": 0.0, "shaping": 0.0}, "terminated": False,
             "truncated": False, "feedback": None, "code": None,
             "state_hash_before": hex_hash(before), "state_hash_after": hex_hash(before),
             "latency_s": round(reply.latency_s, 4), "attempts": reply.attempts}
    tokens = getattr(reply, "tokens", None)
    if tokens is not None:
        entry["tokens"] = tokens
    if reply.usage:
        entry["usage"] = reply.usage
    if reply.error:
        entry["error"] = reply.error
        entry["error_kind"] = reply.error_kind
    if reply.truncated:
        entry["truncated_reply"] = True
    return entry


def _error_text(error: BaseException) -> str:
    from .faults import shorten

    return shorten(f"{type(error).__name__}: {error}", 500)


def _share(concurrency: int, processes: int, k: int) -> int:
    """Process ``k``'s part of the trajectories in flight (at least one)."""
    return max(1, concurrency // processes + (k < concurrency % processes))


def _run_share(rebuild, config: RolloutConfig, todo: list, run_id: str,
               provenance: dict) -> dict:
    collector = Collector(rebuild(), config, provenance)
    collector.run_id = run_id
    collector.owns_process = True
    return asyncio.run(collector.run_share(todo))


def _ray_init(address: str):
    try:
        import ray
    except ImportError:
        raise ValueError("--ray: Ray is not installed (pip install 'visgym[ray]')") from None
    if not ray.is_initialized():
        ray.init(address=None if address == "local" else address, ignore_reinit_error=True,
                 log_to_driver=False)
    return ray


def _play_chunk(rebuild, config: RolloutConfig, chunk: list, run_id: str,
                provenance: dict) -> tuple:
    """A Ray task: play ``chunk`` to its end in memory; its records, JPEGs and totals."""
    collector = Collector(rebuild(), config, provenance)
    collector.run_id = run_id

    async def play():
        collector.progress = Progress(total=len(chunk), enabled=False)
        try:
            await collector._execute(chunk, config.concurrency)
        finally:
            await collector.agent.aclose()

    asyncio.run(play())
    return collector.trajectories, collector.images.images, collector._totals()


def run_rollouts(agent, config: RolloutConfig, provenance: dict | None = None) -> dict:
    """Run a rollout collection to its end (or until interrupted; rerun with resume=True)."""
    collector = Collector(agent, config, provenance)
    collector.owns_process = True
    return run_interruptible(collector.run(), on_stop=lambda: setattr(collector,
                                                                      "stop_requested", True))


async def collect(policy, env_ids, *, episodes: int = 8, group_size: int = 8,
                  max_batch: int | None = None, model: str = "in-process",
                  **options) -> Rollouts:
    """Collect rollouts with a trainer's own model, in this process and event loop.

    ``policy``: a function or coroutine function taking a list of conversations (each a list of
    OpenAI-format messages, images as JPEG data URLs) and returning one reply per conversation:
    a string, or a mapping ``{"text": ..., "token_ids": [...], "logprobs": [...]}`` (ids and
    log-probabilities optional). The turns waiting at once go to the policy as one batch (at
    most ``max_batch``). ``options``: ``RolloutConfig``'s fields (``out`` writes the run folder
    as ``visgym rollouts`` does; without it the images stay in memory, in the result)."""
    config = RolloutConfig(env_ids=list(env_ids), episodes=episodes, group_size=group_size,
                           **{"progress": False, **options})
    collector = Collector(BatchedPolicyAgent(policy, max_batch=max_batch, model=model), config)
    await collector.run()
    if config.out is not None:
        trajectories = list(RecordFile(config.out))
        images = {}
    else:
        trajectories = collector.trajectories
        images = collector.images.images
    return Rollouts(trajectories=trajectories, images=images, run_id=collector.run_id)


def image_path(out, sha256: str) -> str:
    """Where a run folder keeps the JPEG of this hash."""
    return os.path.join(os.fspath(out), IMAGES_DIR, f"{sha256}.jpg")
