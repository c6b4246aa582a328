"""A run's output folder: its lock, its provenance (run.json), resuming, and what a kill left.

Every workflow that writes a folder of results goes through this module (the evaluation runner;
the demonstration synthesizer for its lock and temp files; the rollout collector):

- **Lock.** The folder is locked for the whole run (``FolderLock``: two runs appending to one
  records file would record episodes twice); the lock is released when the run ends.
- **Provenance.** ``run.json`` says what made the results: the agent and model, the settings,
  the tasks and their family versions, the package version and git commit, the host, when the
  run started and finished and how often it was resumed. It is written atomically at the start
  and again at the end.
- **Resume.** A folder that holds a run needs ``--resume``, and a resume must agree with the
  run.json on what decides the results: the differing settings are named one by one (a setting
  added since the run was made counts as its default then), and a different family version is
  refused (the recorded episodes would not be comparable).
- **Cleanup.** The hidden ``.NAME.XXXXXXXX.tmp`` files an atomic write (bridges/files.py)
  leaves behind when the process is killed are removed once the lock is held; the records
  file's torn last line is cut off (bridges/records.py).
"""
from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
from datetime import datetime, timezone
from pathlib import Path

from .faults import shorten
from .files import FolderLock, atomic_write
from .records import RecordFile, naming


def write_json(path: Path, data) -> None:
    """``data`` as indented JSON, atomically and durably; an OSError names the file."""
    with naming(path):
        atomic_write(path, json.dumps(data, indent=2), fsync=True)


def remove_stale_temp_files(folders) -> int:
    """Remove the temp files a killed atomic write left in ``folders``; return how many.
    Call it while holding the folder's lock, so no live writer owns them."""
    removed = 0
    for folder in folders:
        with contextlib.suppress(OSError):
            for entry in os.scandir(folder):
                if entry.name.startswith(".") and entry.name.endswith(".tmp") and \
                        entry.is_file(follow_symlinks=False):
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(entry.path)
                        removed += 1
    return removed


def git_commit() -> str | None:
    """The commit of the package's checkout, when it is one."""
    root = Path(__file__).resolve().parents[1]
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                             text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def provenance() -> dict:
    """The package version, git commit and host of a run (run.json)."""
    from .. import __version__

    return {"package_version": __version__, "git_commit": git_commit(),
            "host": socket.gethostname()}


def _short(value, limit: int = 60) -> str:
    return shorten(repr(value), limit)


def differences(name: str, before, after) -> list[str]:
    """``name value (now value)`` for each leaf where two run.json values differ (the keys of
    a dict one by one, so a message names only what changed)."""
    if before == after:
        return []
    if isinstance(before, dict) and isinstance(after, dict):
        out = []
        for key in sorted(set(before) | set(after), key=str):
            out += differences(f"{name}.{key}", before.get(key), after.get(key))
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


class RunFolder:
    """The folder ``out`` of a run whose results are ``episodes.jsonl`` and ``run.json``.

    ``resume_keys``: the run.json keys that decide the results (compared on a resume);
    ``free_settings``: the keys of its ``settings`` that may change on a resume;
    ``defaults``: the value of each setting for a run made before the setting existed."""

    RUN_FILE = "run.json"

    def __init__(self, out, resume_keys=(), free_settings=(), defaults=None):
        self.out = Path(out)
        self.records = RecordFile(self.out)
        self.resume_keys = tuple(resume_keys)
        self.free_settings = tuple(free_settings)
        self.defaults = dict(defaults or {})
        self.info: dict = {}
        self._lock = None

    @property
    def run_path(self) -> Path:
        return self.out / self.RUN_FILE

    def check(self, info: dict, resume: bool) -> dict | None:
        """Whether the folder may take this run, changing nothing: a folder holding a run
        needs ``resume``, and a resume must agree with its run.json (ValueError naming what
        differs). Returns the old run.json, or None."""
        if self.out.exists() and not self.out.is_dir():
            raise NotADirectoryError(20, os.strerror(20), str(self.out))
        if not (self.records.exists() or self.run_path.exists()):
            return None
        if not resume:
            raise ValueError(f"--out: {self.out} already holds a run; pass --resume to "
                             "continue it or choose another directory")
        if not self.run_path.exists():
            return None
        try:
            with open(self.run_path, encoding="utf-8") as f:
                old = json.load(f)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ValueError(f"--resume: {self.run_path} is not valid JSON ({e}); it cannot "
                             "tell what the run was made with") from None
        if not isinstance(old, dict):
            raise ValueError(f"--resume: {self.run_path} is not a JSON object")
        versions = info.get("task_versions") or {}
        changed = [f"{env_id} version {v} (now {versions.get(env_id)})"
                   for env_id, v in sorted((old.get("task_versions") or {}).items())
                   if versions.get(env_id, v) != v]
        if changed:
            raise ValueError(f"--resume: {self.run_path} was made with a different task "
                             f"version: {', '.join(changed)}; the recorded episodes "
                             "are not comparable (start a new run)")
        found = []
        for key in self.resume_keys:
            if key not in old:
                continue
            if key == "settings":
                was, now = old.get(key) or {}, info.get(key) or {}
                for name in sorted(set(was) | set(now)):
                    if name in self.free_settings:
                        continue
                    before = was.get(name, self.defaults.get(name))
                    after = now.get(name, self.defaults.get(name))
                    if before != after:
                        found.append(f"{name} {_short(before)} (now {_short(after)})")
            else:
                found += differences(key, old.get(key), info.get(key))
        if found:
            raise ValueError(f"--resume: {self.run_path} was made with other settings: "
                             f"{'; '.join(found)} (resume with the same options, or "
                             "start a new run in another --out)")
        return old

    def take(self, info: dict, old: dict | None) -> dict:
        """Take the folder: create and lock it, clean what a killed run left (temp files, a
        torn record), write run.json; return ``{key: success}`` of the episodes recorded."""
        with naming(self.out):
            self.out.mkdir(parents=True, exist_ok=True)
        with naming(self.out / FolderLock.NAME):
            self._lock = FolderLock(self.out, "--out").acquire()
        gifs = self.out / "gifs"
        folders = [self.out]
        if gifs.is_dir():
            folders += [d for d in gifs.iterdir() if d.is_dir()] + [gifs]
        remove_stale_temp_files(folders)
        self.records.repair()
        done = self.records.done()
        if old is not None:
            info["started"] = old.get("started")
            info["resumed"] = old.get("resumed", 0) + 1
        info.setdefault("started", None)
        info["started"] = info["started"] or datetime.now(timezone.utc).isoformat()
        info["finished"] = None
        self.info = info
        write_json(self.run_path, info)
        return done

    def finish(self, **fields) -> None:
        """Record the end of the run in run.json (``finished`` now, plus ``fields``)."""
        self.info["finished"] = datetime.now(timezone.utc).isoformat()
        self.info.update(fields)
        write_json(self.run_path, self.info)

    def release(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None
