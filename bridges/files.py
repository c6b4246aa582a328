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

``atomic_write_staged`` writes the temporary file into another folder of the same file system
(for folders that readers list whole, such as a LlamaFactory dataset folder, where even a hidden
leftover would be read). ``FolderLock`` is an exclusive, non-blocking ``fcntl.flock`` on a lock
file inside a folder, held while a run writes there: a second run on the same folder fails at
once, naming the folder and the holder's pid.
"""
from __future__ import annotations

import contextlib
import os
import secrets

__all__ = ["atomic_file", "atomic_write", "atomic_write_staged", "write_new_file", "FolderLock",
           "FolderLocked"]


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


def write_new_file(directory, name: str, data: bytes) -> None:
    """``atomic_write(directory/name, data)`` for a folder that exists, with fewer system calls
    (no makedirs, no file object): for many small files, such as a run's JPEGs."""
    directory = os.fspath(directory)
    fd, tmp = _create_temp(directory, name)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        os.replace(tmp, os.path.join(directory, name))
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def atomic_write_staged(path, data: bytes | str, staging_dir) -> None:
    """Replace ``path`` with ``data`` atomically, the temporary file living in ``staging_dir``
    (which must be on the same file system as ``path``; created if missing) instead of next to
    ``path``: an interrupted write leaves nothing in ``path``'s folder."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    path = os.fspath(path)
    staging_dir = os.fspath(staging_dir)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    os.makedirs(staging_dir, exist_ok=True)
    fd, tmp = _create_temp(staging_dir, os.path.basename(path))
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


class FolderLocked(ValueError):
    """Another live process holds the folder's lock."""


class FolderLock:
    """``with FolderLock(folder, "--out"):`` holds an exclusive lock on ``folder/.lock``.

    The lock is an ``fcntl.flock`` taken without waiting: if another process holds it,
    ``FolderLocked`` (a ValueError) is raised at once, naming the folder and the pid written in
    the lock file by the holder. While held the file contains this process's pid; it is emptied
    when the block ends, and never deleted (deleting a lock file lets two processes lock two
    different files). The kernel drops the lock when every descriptor of it is closed, so a
    killed run leaves no stale lock; processes forked while it is held share it (a worker that
    outlives its parent keeps the folder locked)."""

    NAME = ".lock"

    def __init__(self, folder, what: str = "folder"):
        self.folder = os.fspath(folder)
        self.what = what
        self.fd = None

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()

    def acquire(self) -> "FolderLock":
        """Take the lock now (``FolderLocked`` if another process holds it)."""
        import fcntl

        os.makedirs(self.folder, exist_ok=True)
        path = os.path.join(self.folder, self.NAME)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.pread(fd, 64, 0).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            raise FolderLocked(f"{self.what}: {self.folder} is in use by another process "
                               f"(pid {holder}); wait for it to finish, or use another folder"
                               ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self.fd = fd
        return self

    def release(self) -> None:
        """Free the lock (the file stays, emptied)."""
        fd, self.fd = self.fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            os.close(fd)
