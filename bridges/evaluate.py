"""The evaluation runner: many episodes in flight, one conversation each, scored and logged.

Implements the evaluation of spec/agent_loop.md: every episode of the run is played by the one
turn loop (bridges/turns.py: section 2's user turns, the history window of section 4, the reply
bookkeeping of 5.3, the text-mode and final-goal ablations of section 7) against the agent, on a
shared micro-batched stepper (bridges/stepper.py), and recorded (bridges/records.py) in the run
folder (bridges/run_folder.py) as section 8 asks, in our own layout: ``<out>/episodes.jsonl``
(one record per episode), ``run.json`` (provenance, including the version of every task),
``gifs/`` (bridges/gif_jobs.py) and the summaries written by bridges/report. This module holds
only what is the evaluation's own: its settings, the mapping of a transcript to a record, the
final-goal image and the solver's plan, and the composition of the run.

Concurrency: up to ``concurrency`` episodes run at once as asyncio tasks; episodes of one env id
share a BatchEnv (one row per episode in flight), and the steps requested in one event-loop turn
are applied in one call. ``processes`` > 1 adds runner processes that take episodes from one
shared to-do list (bridges/pools.py) and append to the same records file.

Before the first episode the agent's endpoint is checked (``Agent.preflight``, when asked), and
nothing is written if it fails; every env id is warmed up (bridges/warmup.py), which announces a
cold Numba cache. The fault policy (bridges/faults.py) stops a run that cannot succeed
(``RunAborted``); the episodes in flight are not recorded, and ``--resume`` plays them again.

Resuming: finished episodes are read back from episodes.jsonl (a torn last line from a kill -9
is cut off) and skipped; every episode is recorded exactly once. A resume refused for changed
settings names only what changed. An OSError that does not name its file is re-raised naming
it, for the CLI's one-line message.

Fixed reference quirks (spec 12): the model, endpoint and ablation flags are recorded (4); a
final-goal solver failure is recorded for that episode instead of aborting the run (9); the GIF
ends with the final state (6); text mode works with a history window (the reference crashed).
"""
from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from dataclasses import asdict, dataclass
from dataclasses import replace as dataclass_replace

from ..core import make
from ..core.registry import consumer_kwargs
from ..core.registry import spec as env_spec
from ..core.rollout import run_plans
from .agents import Agent, Episode
from .conversation import episode_instructions
from .faults import (FailureBreaker, RunAborted, error_lines, error_summary, failure_reason,
                     server_failures)
from .gif_jobs import GifJobs
from .imaging import encode_jpeg_b64
from .interrupts import run_interruptible
from .progress import Progress
from .prompts import PromptSettings
from .records import SERVER_ERROR, naming, record_spoiled, to_json_line, watch_appended
from .run_folder import RunFolder, provenance
from .splits import EpisodeSpec, task_versions
from .stepper import Steppers, kwargs_key
from .turns import EpisodeLoop, Meter, play, step_entry
from .warmup import settled_heap, warm_up_all

__all__ = ["EvalConfig", "Runner", "RunAborted", "run_eval", "error_lines", "error_summary"]


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

    @property
    def prompt(self) -> PromptSettings:
        """The prompt settings (bridges/prompts.py) these fields describe."""
        return PromptSettings(elicit_verbalization=self.elicit_verbalization,
                              feedback=self.include_feedback, history=self.history,
                              text_mode=self.text_mode, final_goal=self.final_goal,
                              max_long_side=self.max_long_side,
                              max_steps=dict(self.budgets or {}))

    @staticmethod
    def prompt_fields(settings: PromptSettings) -> dict:
        """EvalConfig's fields for prompt settings (the inverse of ``prompt``)."""
        return {"elicit_verbalization": settings.elicit_verbalization,
                "include_feedback": settings.feedback, "history": settings.history,
                "text_mode": settings.text_mode, "final_goal": settings.final_goal,
                "max_long_side": settings.max_long_side,
                "budgets": dict(settings.max_steps) or None}

    def validate(self) -> None:
        if self.concurrency < 1:
            raise ValueError(f"--concurrency: must be at least 1, got {self.concurrency}")
        if self.processes < 1:
            raise ValueError(f"--processes: must be at least 1, got {self.processes}")
        if self.max_steps is not None and self.max_steps < 1:
            raise ValueError(f"--max-steps: must be at least 1, got {self.max_steps}")
        if self.gifs_per_task is not None and self.gifs_per_task < 0:
            raise ValueError(f"--gifs: must be at least 0, got {self.gifs_per_task}")
        if self.abort_after < 0:
            raise ValueError(f"--abort-after: must be 0 (never) or a count, got {self.abort_after}")
        self.prompt.validate()


def evaluation_record(episode: EpisodeSpec, transcript, elapsed_s: float,
                      elicit_verbalization: bool) -> dict:
    """An episode's record (bridges/records.py's schema) from its transcript. An episode that
    did not succeed and lost a step to the server is recorded as spoiled by it (end reason
    ``server_error``): it counts in no success rate and a resume plays it again."""
    server_errors = server_failures(transcript)
    spoiled = server_errors > 0 and not transcript.success
    return {"key": episode.key, "env_id": episode.env_id, "task": episode.task,
            "split": episode.split, "index": episode.index, "seed": episode.seed,
            "episode_seed": episode.episode_seed, "init_state": episode.init_state,
            "success": transcript.success, "reward": transcript.reward,
            "steps": transcript.steps, "terminated": transcript.terminated,
            "truncated": transcript.truncated,
            "end_reason": SERVER_ERROR if spoiled else transcript.end_reason,
            "invalid_actions": transcript.invalid_actions,
            "error_replies": transcript.error_replies, "server_errors": server_errors,
            "elapsed_s": round(elapsed_s, 3), "usage": transcript.usage,
            "steps_log": [step_entry(t, elicit_verbalization) for t in transcript.turns]}


class Runner:
    # What decides the results must match on a resume; these settings may change.
    FREE_SETTINGS = ("concurrency", "gifs", "gifs_per_task", "processes", "abort_after")
    RESUME_KEYS = ("agent", "model", "endpoint", "split", "settings", "tasks", "generation",
                   "dataset")
    owns_process = False   # a command's own process: the playing loop runs in settled_heap

    def __init__(self, agent: Agent, config: EvalConfig, episodes: list[EpisodeSpec],
                 provenance: dict | None = None):
        config.validate()
        self.agent = agent
        self.config = config
        self.settings = config.prompt
        self.episodes = episodes
        self.provenance = provenance or {}
        self.stop_requested = False     # set by Ctrl-C: no new episode starts
        self.folder = RunFolder(config.out, self.RESUME_KEYS, self.FREE_SETTINGS,
                                asdict(EvalConfig(out="")))
        self.out = self.folder.out
        self.records = self.folder.records
        # JPEG encoding runs inline: a thread hand-off per observation cost more than the
        # ~0.2 ms encode and lowered throughput at high concurrency (0.37 -> 0.41 of ideal).
        self.gifs = GifJobs(self.out, config.gifs, config.gifs_per_task, self._frame_kwargs)
        self.steppers = Steppers(config.max_long_side)
        self._goal_envs: dict = {}
        self._breaker = FailureBreaker(config.abort_after)
        self.meter = Meter()
        self._done_successes = 0

    # -- provenance ---------------------------------------------------------------------
    def _run_info(self) -> dict:
        cfg = asdict(self.config)
        for k in ("out", "resume", "progress", "preflight"):
            cfg.pop(k)
        prov = provenance()
        return {**self.agent.describe(), **self.provenance, "split": self.config.split,
                "settings": cfg, "tasks": sorted({e.task for e in self.episodes}),
                "task_versions": task_versions(e.env_id for e in self.episodes),
                "episodes": len(self.episodes), "package_version": prov["package_version"],
                "git_commit": prov["git_commit"], "host": prov["host"]}

    # -- episodes -----------------------------------------------------------------------
    def _frame_kwargs(self, env_id: str, make_kwargs: dict | None) -> dict:
        """The keywords of an env that draws this run's images: the episode's own, plus the
        family's overrides for drawing directly at the size the model is shown
        (Family.consumer_overrides) unless --full-size-frames."""
        if self.config.full_size_frames:
            return dict(make_kwargs or {})
        return consumer_kwargs(env_id, make_kwargs, self.config.max_long_side)

    def _budget(self, episode: EpisodeSpec) -> int:
        budgets = self.config.budgets or {}
        return (budgets.get(episode.env_id) or self.config.max_steps
                or env_spec(episode.env_id).default_max_steps)

    def _solver_env(self, episode: EpisodeSpec, state: dict):
        """A one-episode env of the episode's task (drawing the run's frames) reset to
        ``state``: for the final-goal image and the solver agent's plan."""
        key = kwargs_key(episode.env_id, episode.make_kwargs)
        env = self._goal_envs.get(key)
        if env is None:
            env = self._goal_envs[key] = make(
                episode.env_id, num_envs=1, autoreset="disabled", max_steps=None,
                **self._frame_kwargs(episode.env_id, episode.make_kwargs))
        env.reset(seeds=[episode.episode_seed % 2**64], init_states=[state])
        return env

    def _goal_frame(self, episode: EpisodeSpec, state: dict):
        """The solved configuration's frame, found as the reference does: replay the default
        solver on a copy and require a successful end. None if the solver fails."""
        env = self._solver_env(episode, state)
        if not run_plans(env, env.solve()).solved[0]:
            return None
        return env.frame(0).copy()   # the episode's own frame size (DESIGN.md "Frames")

    def _on_reply(self, reply) -> None:
        """Count a finished request; the fault policy may stop the run here (this episode is
        not recorded, nor are the others in flight: a resume plays them again)."""
        self.progress.requests += reply.attempts
        self.progress.errors += reply.flag == "error"
        reason = failure_reason(reply)
        if reason is not None:
            self.progress.last_error = reason
        self._breaker.check(reply)

    async def run_episode(self, episode: EpisodeSpec, stepper) -> tuple[dict, list | None]:
        """Play one episode; return its record and, when it gets a GIF, its frames."""
        settings = self.settings
        budget = self._budget(episode)
        slot = stepper.acquire()
        t_start = time.perf_counter()
        try:
            stepper.load(slot, episode.episode_seed, episode.init_state)
            env = stepper.env
            agent_episode = Episode(key=episode.key, env_id=episode.env_id, index=episode.index,
                                    seed=episode.episode_seed, grammar=env.grammar)
            plan: list = []

            def solve():
                if not plan:
                    plan.append(self._solver_env(episode, episode.init_state).solve()[0])
                return plan[0]

            agent_episode.solve = solve
            goal_b64 = None
            if settings.final_goal:
                goal = self._goal_frame(episode, episode.init_state)
                if goal is None:
                    record = evaluation_record(episode, _goal_failed(), 0.0, False)
                    return record, None
                t0 = time.perf_counter()
                goal_b64 = encode_jpeg_b64(goal, settings.max_long_side)
                self.meter.overhead_s += time.perf_counter() - t0
            instructions = episode_instructions(env, slot, settings.text_mode,
                                                settings.elicit_verbalization)
            loop = EpisodeLoop(settings, budget, instructions, goal_b64)
            frames = [] if self.gifs.wanted_for(episode.index) else None
            transcript = await play(loop, self.agent, stepper, slot, agent_episode,
                                    on_reply=self._on_reply, frames=frames, meter=self.meter)
            record = evaluation_record(episode, transcript, time.perf_counter() - t_start,
                                       settings.elicit_verbalization)
            return record, frames
        finally:
            stepper.release(slot)

    # -- the whole run ------------------------------------------------------------------
    async def _execute(self, todo: list, claim=None) -> dict:
        """Run episodes of ``todo`` to the end; return counters to merge. ``claim()`` hands out
        the next index into ``todo`` (None when all are taken); with several processes it is
        shared, so a process that starts late or gets short episodes simply takes more."""
        if claim is None:
            claim = iter(range(len(todo))).__next__
        by_task: dict[tuple, list] = {}
        for e in todo:
            by_task.setdefault(kwargs_key(e.env_id, e.make_kwargs), []).append(e)
        slots_needed = {k: min(self.config.concurrency, len(v)) for k, v in by_task.items()}
        write_lock = asyncio.Lock()

        async def one(episode: EpisodeSpec):
            key = kwargs_key(episode.env_id, episode.make_kwargs)
            stepper = self.steppers.get(episode.env_id,
                                        self._frame_kwargs(episode.env_id, episode.make_kwargs),
                                        slots_needed[key], self._budget(episode))
            record, frames = await self.run_episode(episode, stepper)
            line = to_json_line(record)
            async with write_lock:
                self.records.append_line(line)
            if frames and self.gifs.wanted(record):
                self.gifs.schedule(record, frames)
            self.progress.done += 1
            self.progress.successes += bool(record["success"])
            self.progress.spoiled += record_spoiled(record)
            self.progress.show()

        async def worker():
            while not self.stop_requested:
                try:
                    index = claim()
                except StopIteration:
                    return
                if index is None:
                    return
                await one(todo[index])

        completed = False
        with settled_heap(self.owns_process):
            tasks = [asyncio.ensure_future(worker())
                     for _ in range(min(self.config.concurrency, len(todo)))]
            try:
                await asyncio.gather(*tasks)
                completed = True
            finally:
                for t in tasks:
                    t.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                # Interrupted or aborted: only the GIF being written is finished; the queued
                # ones are written by the resume, which finds them missing.
                self.gifs.finish(completed)
                await self._close_agent()
        return {"overhead_s": self.meter.overhead_s, "steps": self.meter.steps,
                "step_calls": self.steppers.calls, "requests": self.progress.requests,
                "errors": self.progress.errors}

    async def run_share(self) -> dict:
        """A child process's part of a multi-process run: no output set-up, no summaries; the
        GIFs it could not write are handed to the parent, which reports them once."""
        from .pools import claim_next

        self.progress = Progress(total=len(self.episodes), enabled=False)
        with self.gifs.log:
            result = await self._execute(self.episodes, claim_next)
        result["gif_failures"] = [(str(path), reason) for path, reason in self.gifs.failures]
        result["gif_messages"] = self.gifs.log.messages
        return result

    async def _preflight(self) -> None:
        """The agent's own check of its endpoint (reachable, key accepted, model served), run
        before anything is written; agents without an endpoint have none."""
        check = getattr(self.agent, "preflight", None)
        if self.config.preflight and check is not None:
            await check(images=self.settings.images_per_request())

    async def _close_agent(self) -> None:
        if not getattr(self, "_agent_closed", False):
            self._agent_closed = True
            await self.agent.aclose()

    async def run(self) -> dict:
        try:
            info = self._run_info()
            old = self.folder.check(info, self.config.resume)
            await self._preflight()
            done = self.folder.take(info, old)
            self._done_successes = sum(done.get(e.key, False) for e in self.episodes)
            todo = [e for e in self.episodes if e.key not in done]
            with self.gifs.log:
                paths = await self._run_todo(todo)
        finally:
            await self._close_agent()
            self.folder.release()
        return paths

    async def _run_todo(self, todo: list) -> dict:
        self._warm_up(todo)
        self.progress = Progress(total=len(self.episodes), done=len(self.episodes) - len(todo),
                                 successes=self._done_successes, enabled=self.config.progress)
        processes = min(self.config.processes, max(1, len(todo)))
        children, pool, watcher, claim = [], None, None, None
        if processes > 1:
            pool, children, claim = self._start_children(todo, processes)
            watcher = asyncio.ensure_future(self._watch_records(len(self.episodes) - len(todo)))
        # Queued after the runner processes are forked (no thread busy across a fork); the
        # GIF thread draws them while the episodes run.
        missing = self.gifs.schedule_missing(self.records,
                                             {e.key: e.make_kwargs for e in self.episodes})
        if missing and self.config.progress:
            sys.stderr.write(f"eval: writing {missing} GIF(s) of recorded episodes that an "
                             "earlier run left unwritten\n")
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
                self.gifs.report(self.folder.info)
        for r in results[1:]:
            self.gifs.failures += [(path, reason) for path, reason in r["gif_failures"]]
            self.gifs.log.messages += r["gif_messages"]
        self.gifs.report(self.folder.info)
        totals = {k: sum(r[k] for r in results) for k in ("overhead_s", "steps", "step_calls")}
        keys = {e.key for e in self.episodes}
        spoiled = sum(1 for key, ok in self.records.done(spoiled=True).items()
                      if key in keys and ok is None)
        self.folder.finish(
            loop_overhead_ms_per_step=(round(totals["overhead_s"] / totals["steps"] * 1e3, 3)
                                       if totals["steps"] else None),
            step_calls=totals["step_calls"], steps=totals["steps"], processes=processes,
            errors=error_summary(self.records), server_spoiled=spoiled)
        from .report import write_summary

        with naming(self.out):
            paths = write_summary(str(self.out))
        return {**paths, "errors": self.folder.info["errors"], "server_spoiled": spoiled}

    def _start_children(self, todo: list, processes: int):
        """Runner processes for a multi-process run: every process sees the whole to-do list
        and takes the next episode from one shared counter as it frees a slot."""
        spec = getattr(self.agent, "spec", None)
        if spec is None:
            raise ValueError("--processes: this agent cannot be rebuilt in another process "
                             "(use an agent made by make_agent, or --processes 1)")
        from concurrent.futures import ProcessPoolExecutor

        from .pools import claim_init, claim_next, claiming_child, pool_context

        ctx = pool_context()
        counter = ctx.Value("q", 0)
        claim_init(counter, len(todo))
        pool = ProcessPoolExecutor(processes - 1, mp_context=ctx, initializer=claiming_child,
                                   initargs=(counter, len(todo)))
        child_config = dataclass_replace(self.config, processes=1, progress=False)
        children = [asyncio.wrap_future(pool.submit(_run_share, spec, child_config, todo,
                                                    self.provenance))
                    for _ in range(processes - 1)]
        return pool, children, claim_next

    def _warm_up(self, todo: list) -> None:
        """Every env id's code paths once, before the first episode and before any runner
        process is forked (bridges/warmup.py: the cold ones compiled in parallel first); a cold
        Numba cache is announced. The warm-up
        decides nothing: where it fails (a bad init state, a solver that cannot plan it), the
        episodes meet the same failure on their own path and report it there."""
        first: dict = {}
        for e in todo:
            first.setdefault(kwargs_key(e.env_id, e.make_kwargs), e)
        warm_up_all([(e.env_id, {"make_kwargs": e.make_kwargs, "init_state": e.init_state,
                                 "seed": e.episode_seed % 2**64,
                                 "text_mode": self.config.text_mode})
                     for e in first.values()], announce=self.config.progress)

    async def _watch_records(self, already_done: int) -> None:
        """With several processes, progress counts the records file every half second (the
        records appended since the run started: the earlier ones are ``already_done``)."""
        import json

        progress = self.progress
        progress.done, progress.successes = already_done, self._done_successes

        def count(lines: list) -> None:
            for line in lines:
                with contextlib.suppress(ValueError):
                    progress.done += 1
                    progress.successes += bool(json.loads(line).get("success"))
            progress.show()

        await watch_appended(self.records.path, count)


def _goal_failed():
    """The transcript of an episode whose final-goal image could not be made (the solver did
    not solve it): no steps, recorded with end reason "goal_failed"."""
    from .turns import Transcript

    return Transcript(end_reason="goal_failed")


def _run_share(spec, config: EvalConfig, episodes: list, provenance: dict) -> dict:
    from .agents import make_agent

    kind, options = spec
    runner = Runner(make_agent(kind, **options), config, episodes, provenance)
    runner.owns_process = True
    return asyncio.run(runner.run_share())


def run_eval(agent: Agent, config: EvalConfig, episodes: list[EpisodeSpec],
             provenance: dict | None = None) -> dict:
    """Run an evaluation to completion (or until interrupted; rerun with resume=True)."""
    runner = Runner(agent, config, episodes, provenance)
    runner.owns_process = True
    return run_interruptible(runner.run(), on_stop=lambda: setattr(runner, "stop_requested",
                                                                   True))
