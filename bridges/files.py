"""Atomic file writes: the one helper behind every summary, manifest, shard, split and GIF.

The data goes to a temporary file in the target's own folder (same file system, so the final
``os.replace`` is atomic), which is then renamed over the target: a reader, or a crash, sees the
old file or the new one, never half of one. With ``fsync=True`` the data is flushed to the disk
before the rename and the folder afterwards, so the new file also survives a power cut (used for
the evaluation's run.json); elsewhere the rename alone is enough and cheaper. Missing parent
folders are created. The temporary file is created with mode 0644 minus the umask, like a file
opened with ``open(path, "w")`` (``tempfile.mkstemp`` would make it 0600), and removed when
writing fails. Its name starts with a dot and ends in ``.tmp``, so globs such as
``shard-*.jsonl`` never pick up a leftover from a kill -9.
"""
from __future__ import annotations

import contextlib
import os
import secrets

__all__ = ["atomic_file", "atomic_write"]


def _create_temp(directory: str, name: str) -> tuple[int, str]:
    while True:
        tmp = os.path.join(directory, f".{name}.{secrets.token_hex(4)}.tmp")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644), tmp
        except FileExistsError:  # pragma: no cover - 32 random bits
            continue


def _fsync_dir(directory: str) -> None:
    with contextlib.suppress(OSError):  # not every file system lets a folder be opened
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def atomic_file(path, mode: str = "wb", *, fsync: bool = False, encoding: str | None = None):
    """``with atomic_file(path) as f: f.write(...)``: ``path`` is replaced when the block ends
    without an exception; an exception leaves ``path`` as it was. ``mode`` is "wb" or "w"
    (text, UTF-8 unless ``encoding`` says otherwise)."""
    if mode not in ("wb", "w"):
        raise ValueError(f"mode: expected 'wb' or 'w', got {mode!r}")
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = _create_temp(directory, os.path.basename(path))
    try:
        with os.fdopen(fd, mode, encoding=None if mode == "wb" else encoding or "utf-8") as f:
            yield f
            f.flush()
            if fsync:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if fsync:
        _fsync_dir(directory)


def atomic_write(path, data: bytes | str, *, fsync: bool = False) -> None:
    """Replace ``path`` with ``data`` (bytes, or text written as UTF-8) atomically."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    with atomic_file(path, "wb", fsync=fsync) as f:
        f.write(data)
