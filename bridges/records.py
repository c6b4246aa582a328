"""Episode records: the one place that writes and reads a run's ``episodes.jsonl``.

A run folder holds one JSON object per line, one per finished episode, appended as episodes end
(the evaluation runner and the rollout collector). This module owns the file format and
its guarantees, for every writer and reader (the runner, ``--resume``, the GIF replay, reports):

- **Schema.** Every record has a string ``key`` (unique within a run: ``<env_id>#<index>``),
  ``env_id``, ``task``, ``split``, ``index``, ``seed`` and ``episode_seed``, its ``init_state``,
  the outcome (``success``, ``reward``, ``steps``, ``terminated``, ``truncated``,
  ``end_reason``), counters (``invalid_actions``, ``error_replies``), ``elapsed_s``, ``usage`` and
  ``steps_log`` (one entry per step: ``step``, ``prompt``, ``reply``, ``reply_flag``,
  ``action``, ``feedback``, ``reward``, ``terminated``, ``latency_s``, ``attempts``, and where
  they apply ``usage``, ``error``, ``error_kind``, ``transient``, ``truncated``, ``think``).
  ``success`` is decided once, when the record is written, by the one rule of core
  (``core.rollout.episode_success``: the episode terminated with ``info["success"]`` true on its
  last step); readers take it from the record and never re-derive it from the reward.
  ``invalid_actions`` counts the steps whose ``info["invalid"]`` was true (the parser's codes).
  ``server_errors`` counts the steps whose request failed (bridges/faults.py); an episode that
  did not succeed and has any is *spoiled by the server*: its ``end_reason`` is
  ``server_error``, it counts in no success rate, and a resumed run plays it again.
- **Atomic append.** A record is one locked ``O_APPEND`` write followed by ``fsync``, so
  several runner processes may share the file and lines never interleave; a write that fails
  part of the way (a full disk) is cut back off, so the file never holds half a record.
- **Repair.** A kill -9 can leave a torn last line (no newline). ``RecordFile.repair()`` cuts
  it off before a run appends again; readers skip it.
- **Dedupe.** The first record of a key wins (it is the one scored in the original pass),
  except that a record spoiled by the server gives way to a later one of its key (the resumed
  run's replay of that episode).
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
from pathlib import Path

import numpy as np

logger = logging.getLogger(__name__)

EPISODES_FILE = "episodes.jsonl"


class Records(list):
    """The episode records of one run (a plain list, first record per key, in file order) plus
    what loading dropped: ``garbled`` lines that were not a JSON object with a usable key (a
    kill -9 leaves a truncated last line) and ``duplicates``, later records of a key already
    seen."""

    def __init__(self, items=(), garbled: int = 0, duplicates: int = 0, path: str | None = None):
        super().__init__(items)
        self.garbled = garbled
        self.duplicates = duplicates
        self.path = path


def record_key(record: dict) -> str | None:
    """A record's key: its ``key``, else ``<env_id>#<index>`` (records of older layouts)."""
    key = record.get("key")
    if isinstance(key, str) and key:
        return key
    if record.get("env_id") is not None and record.get("index") is not None:
        return f"{record['env_id']}#{record['index']}"
    return None


SERVER_ERROR = "server_error"


def record_spoiled(record: dict) -> bool:
    """Whether the server spoiled a record's episode (see the module docstring)."""
    return record.get("end_reason") == SERVER_ERROR


def record_success(record: dict) -> bool:
    """Whether a record's episode succeeded: its ``success`` as written (see the module
    docstring); a record without one did not."""
    return record.get("success") is True


def compact_json(value) -> str:
    """``value`` as compact JSON text (NumPy scalars and arrays as plain values)."""
    return _COMPACT.encode(value)


def to_json_line(record: dict) -> str:
    """A record as one compact JSON line (``compact_json``)."""
    return compact_json(record) + "\n"


def _json_default(value):
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


# One encoder for every call: json.dumps builds a new one per call when given options.
_COMPACT = json.JSONEncoder(separators=(",", ":"), default=_json_default)


@contextlib.contextmanager
def naming(path):
    """Re-raise an OSError that does not name its file (a failed write, fsync or rename) with
    ``path`` as its filename, so the one-line message at the CLI says which file it was."""
    try:
        yield
    except OSError as error:
        if error.filename is None:
            raise type(error)(error.errno, error.strerror or str(error), str(path)) from None
        raise


class RecordFile:
    """The ``episodes.jsonl`` of a run folder (``RecordFile(folder)``) or any records file
    (``RecordFile(path=...)``)."""

    def __init__(self, folder=None, *, path=None):
        if (folder is None) == (path is None):
            raise ValueError("RecordFile: give a run folder or a path")
        self.path = Path(path) if path is not None else Path(folder) / EPISODES_FILE

    def exists(self) -> bool:
        return self.path.exists()

    # -- writing -------------------------------------------------------------------------
    def append(self, record: dict) -> None:
        """Append one record durably (see the module docstring)."""
        self.append_line(to_json_line(record))

    def append_line(self, line: str) -> None:
        import fcntl

        data = line.encode("utf-8")
        with naming(self.path):
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
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

    def repair(self) -> int:
        """Cut off a torn last line (no final newline) so the next append starts on a fresh
        line; return the bytes removed."""
        if not self.path.exists():
            return 0
        with open(self.path, "r+b") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            if size == 0:
                return 0
            f.seek(size - 1)
            if f.read(1) == b"\n":
                return 0
            f.seek(0)
            data = f.read()
            cut = data.rfind(b"\n") + 1
            f.truncate(cut)
            f.flush()
            os.fsync(f.fileno())
        return size - cut

    # -- reading -------------------------------------------------------------------------
    def __iter__(self):
        """The records in file order, every line that parses as an object with a key (a torn
        last line and garbled lines are skipped; duplicates are kept)."""
        if not self.path.exists():
            return
        with open(self.path, "rb") as f:
            for line in f:
                if not line.endswith(b"\n"):
                    return
                record = _parse(line)
                if record is not None and record_key(record) is not None:
                    yield record

    def done(self, spoiled: bool = False) -> dict:
        """``{key: success}`` of the episodes recorded for good (first record per key; an
        episode the server spoiled is not done: a resumed run plays it again). With
        ``spoiled``, the keys whose every record is spoiled are included, mapped to None."""
        done: dict = {}
        for record in self:
            key = record_key(record)
            if not record_spoiled(record):
                if done.get(key) is None:
                    done[key] = record_success(record)
            elif spoiled:
                done.setdefault(key, None)
        return done

    def load(self) -> Records:
        """The first record of every key, in file order, with counts of what was dropped."""
        if not self.path.is_file():
            raise ValueError(f"{self.path} not found: {str(self.path.parent)!r} is not a visgym "
                             "eval run directory")
        with open(self.path, "rb") as f:
            raw_lines = f.read().split(b"\n")
        records: list = []
        seen: dict = {}     # key -> position in records
        garbled = duplicates = 0
        for raw in raw_lines:
            if not raw.strip():
                continue
            record = _parse(raw)
            key = record_key(record) if record is not None else None
            if key is None:
                garbled += 1
                continue
            if key in seen:
                duplicates += 1
                if record_spoiled(records[seen[key]]):
                    records[seen[key]] = record   # the replay of a spoiled episode
                continue
            seen[key] = len(records)
            records.append(record)
        path = str(self.path)
        if garbled:
            logger.warning("%s: skipped %d garbled line(s)", path, garbled)
        if duplicates:
            logger.info("%s: ignored %d repeated episode key(s), kept the first", path,
                        duplicates)
        return Records(records, garbled=garbled, duplicates=duplicates, path=path)


def _parse(line: bytes):
    try:
        record = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def load_records(run_dir) -> Records:
    """The records of ``run_dir/episodes.jsonl`` (``RecordFile.load``); ValueError names a
    folder that is not a run."""
    run_dir = os.fspath(run_dir)
    if not os.path.isdir(run_dir):
        raise ValueError(f"run directory {run_dir!r} does not exist (expected "
                         f"{os.path.join(run_dir, EPISODES_FILE)})")
    return RecordFile(run_dir).load()


async def watch_appended(path, on_lines, interval_s: float = 0.5) -> None:
    """Call ``on_lines(lines)`` (a list of bytes) with the complete lines appended to ``path``
    since the last poll,
    polling every ``interval_s`` until cancelled: how a run with several processes counts the
    records the others append (a partial last line waits for its end)."""
    import asyncio
    import contextlib

    offset = path.stat().st_size if path.exists() else 0
    while True:
        await asyncio.sleep(interval_s)
        with contextlib.suppress(OSError):
            with open(path, "rb") as f:
                f.seek(offset)
                chunk = f.read()
            end = chunk.rfind(b"\n") + 1
            on_lines(chunk[:end].splitlines())
            offset += end
