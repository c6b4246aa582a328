"""A run's episode GIFs: written on a background thread after their record, the missing ones
replayed on resume, the failures reported once.

GIFs are written in their own thread so a slow GIF never delays an observation. A GIF is queued
once its episode's record is written, with the frames the episode showed; a kill loses the GIFs
still queued, so a resume finds the GIFs of recorded episodes that are missing and redraws them
from the records (init state, then each recorded action: the env is deterministic given both)
on a replay env of its own. A GIF that could not be written never costs the run: its failure is
kept (and bridges/gifs.py's warnings from the GIF thread are held back while the run lasts) and
reported in one line at the end, with a pointer to ``--resume``.
"""
from __future__ import annotations

import logging
import sys
from pathlib import Path

from ..core import make
from ..core.threads import ProcessThreadPool
from .faults import shorten
from .records import naming
from .stepper import kwargs_key


class GifLog(logging.Filter):
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


class GifJobs:
    """The GIFs of the run in ``out``: ``per_task`` None for every episode, N for the episodes
    with index < N; ``frame_kwargs(env_id, make_kwargs)`` the make() keywords of an env that
    draws the run's frames."""

    def __init__(self, out: Path, enabled: bool, per_task: int | None, frame_kwargs):
        self.out = Path(out)
        self.enabled = enabled
        self.per_task = per_task
        self.frame_kwargs = frame_kwargs
        self.failures: list = []     # (path, reason) of the GIFs that could not be written
        self.log = GifLog()
        self._pool = ProcessThreadPool(1, "visgym-gif")
        self._jobs: list = []
        self._replay_envs: dict = {}   # used by the GIF thread only

    def wanted_for(self, index: int) -> bool:
        """Whether the episode of this index gets a GIF."""
        return bool(self.enabled and (self.per_task is None or index < self.per_task))

    def wanted(self, record: dict) -> bool:
        return bool(self.wanted_for(record["index"]) and record.get("steps_log")
                    and record.get("end_reason") != "goal_failed")

    def path(self, record: dict) -> Path:
        folder = self.out / "gifs" / f"{record['task']}__{record['split']}"
        return folder / (f"{record['index']:03d}_seed{record['episode_seed']}"
                         f"_r{record['reward']:.3f}.gif")

    def schedule(self, record: dict, frames: list | None, make_kwargs: dict | None = None):
        """Write the episode's GIF in the GIF thread; with ``frames`` None the frames are
        replayed from the record (its init state and actions)."""
        from .gifs import episode_captions, write_episode_gif

        path = self.path(record)
        captions = episode_captions(record)
        make_kwargs = make_kwargs or {}

        def write():
            try:
                shown = frames if frames is not None else self._replay(record, make_kwargs)
                shown = shown[: len(captions)]
                with naming(path.parent):
                    path.parent.mkdir(parents=True, exist_ok=True)
                write_episode_gif(str(path), shown, captions[: len(shown)])
            except Exception as error:  # noqa: BLE001 - a GIF never costs the run
                self.failures.append((path, f"{type(error).__name__}: {error}"))
                return
            if not path.exists():   # write_episode_gif logged why (counted by GifLog)
                self.failures.append((path, None))

        self._jobs.append(self._pool.submit(write))

    def _replay(self, record: dict, make_kwargs: dict) -> list:
        """The frames an episode showed, rebuilt from its record."""
        key = kwargs_key(record["env_id"], make_kwargs)
        env = self._replay_envs.get(key)
        if env is None:
            env = self._replay_envs[key] = make(
                record["env_id"], num_envs=1, autoreset="disabled", max_steps=None,
                **self.frame_kwargs(record["env_id"], make_kwargs))
        env.reset(seeds=[int(record["episode_seed"]) % 2**64],
                  init_states=[record["init_state"]])
        frames = [env.frame(0).copy()]
        for entry in record["steps_log"]:
            env.step([entry["action"]])
            frames.append(env.frame(0).copy())
        return frames

    def schedule_missing(self, records, make_kwargs_of: dict) -> int:
        """Queue the GIFs of recorded episodes that are missing (a kill -9 or a full disk lost
        them before they were written); return how many. ``make_kwargs_of``: key -> the
        episode's make keywords."""
        if not self.enabled:
            return 0
        missing = 0
        for record in records:
            try:
                if not self.wanted(record) or self.path(record).exists():
                    continue
            except (KeyError, TypeError, ValueError):
                continue   # a record of another layout: nothing to draw it from
            keep = {k: record[k] for k in ("key", "env_id", "task", "split", "index",
                                           "episode_seed", "init_state", "reward", "steps",
                                           "end_reason") if k in record}
            keep["steps_log"] = [{k: e.get(k) for k in ("step", "action", "feedback", "reply",
                                                        "reply_flag")}
                                 for e in record["steps_log"]]
            self.schedule(keep, None, make_kwargs_of.get(record["key"], {}))
            missing += 1
        return missing

    def finish(self, completed: bool) -> None:
        """Wait for the GIF thread; a run that did not complete cancels the queued GIFs (the
        resume writes them) and waits only for the one being written."""
        if not completed:
            for job in self._jobs:
                job.cancel()
        for job in self._jobs:
            try:
                job.result()
            except BaseException:  # noqa: BLE001 - cancelled, or failed (kept in failures)
                pass
        self._pool.shutdown(wait=True)

    def report(self, info: dict | None = None, stream=None) -> None:
        """Say once which GIFs were not written (and record the count in ``info``)."""
        failures = self.failures
        if not failures:
            return
        # bridges/gifs.py logs "could not write episode GIF PATH: Error: text": keep the cause.
        reasons = [r for _, r in failures if r] + [m.split(".gif: ", 1)[-1]
                                                   for m in self.log.messages]
        first = shorten(reasons[0], 120) if reasons else "unknown reason"
        if info is not None:
            info["gifs_missing"] = len(failures)
        (stream or sys.stderr).write(
            f"eval: {len(failures)} GIF(s) not written ({first}), e.g. {failures[0][0]}; the "
            "episodes are recorded, and --resume writes the missing GIFs\n")
