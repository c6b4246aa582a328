"""kill -9 of ``visgym demos``: nothing lost, nothing left behind.

The process pool's workers must die with their parent (bridges/pools.die_with_parent: Linux's
parent-death signal, and a parent-pid watch where that is missing), so no orphan keeps writing
into the folder a rerun repairs or keeps the inherited pipes open (``visgym demos ... | tee``
would never end); and a rerun after any number of kills at random points must give the bytes of
an uninterrupted run.

The kill points are random; the seed is printed in every failure message
(``VISGYM_KILL_SEED=<seed>`` replays them)."""
import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from visgym.bridges import demos

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="scans /proc for the killed run's processes")

ARGS = ["--tasks", "maze_2d", "--episodes", "240", "--shard-size", "8", "--workers", "2",
        "--quiet"]


def _group(pgid: int) -> list:
    """Live (not zombie) processes of process group ``pgid``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        state, pgrp = fields[0], int(fields[2])
        if pgrp == pgid and state not in ("Z", "X"):
            found.append(int(entry))
    return found


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _start(out: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "visgym.bridges.cli", "demos", *ARGS,
                             "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True, cwd=out.parent)


def _shards_written_since(out: Path, started: float) -> int:
    """Shard stats files written since ``started`` (a monotonic time) by the current run."""
    wall = time.time() - (time.monotonic() - started)
    count = 0
    for p in (out / ".shards" / "maze_2d").glob("shard-*.json"):
        try:
            count += p.stat().st_mtime >= wall
        except OSError:
            pass
    return count


def _tree(root: Path) -> dict:
    files = {}
    for p in sorted(root.rglob("*")):
        if not p.is_file():
            continue
        data = p.read_bytes()
        if p.name == "manifest.json" and p.parent == root:
            manifest = json.loads(data)
            manifest.pop("run")
            data = json.dumps(manifest, sort_keys=True).encode()
        if p.name == demos.LLAMAFACTORY_YAML:
            data = data.replace(str(root.resolve()).encode(), b"<out>")
        files[str(p.relative_to(root))] = data
    return files


@pytest.mark.timeout(280)
def test_kill_9_at_random_points_then_rerun_gives_the_uninterrupted_bytes(tmp_path):
    seed = int(os.environ.get("VISGYM_KILL_SEED", time.time_ns() % 2**32))
    rng = random.Random(seed)
    why = f"(VISGYM_KILL_SEED={seed})"
    reference = tmp_path / "reference"
    reference.mkdir()
    started = time.monotonic()
    proc = _start(reference)
    _, err = proc.communicate(timeout=120)
    span = time.monotonic() - started
    assert proc.returncode == 0, err.decode()
    expected = _tree(reference)
    assert sum(name.endswith(".jpg") for name in expected) > 1000

    out = tmp_path / "killed"
    out.mkdir()
    kills = []
    shards = 240 // 8
    for round_ in range(3):
        started = time.monotonic()
        proc = _start(out)
        if round_ == 0:     # anywhere in the run: start-up, shards, manifest
            delay = rng.uniform(0.0, 0.9) * span
            time.sleep(max(0.0, started + delay - time.monotonic()))
            point = f"{delay:.2f} s"
        else:               # while the pool writes: after a random number of new shards
            target = rng.randint(1, shards // 3)
            while proc.poll() is None and _shards_written_since(out, started) < target:
                time.sleep(0.002)
            time.sleep(rng.uniform(0.0, 0.03))
            point = f"{target} shards + jitter"
        finished = proc.poll() is not None
        try:
            os.kill(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=30)
        kills.append(f"{point}{' (had finished)' if finished else ''}")
        try:
            deadline = time.monotonic() + 3.0
            while _group(proc.pid) and time.monotonic() < deadline:
                time.sleep(0.02)
            survivors = _group(proc.pid)
            assert not survivors, (f"processes of the killed run survive: {survivors} after a "
                                   f"kill at {kills[-1]} {why}")
            try:   # nobody holds the inherited pipes: `visgym demos | tee log` ends
                proc.communicate(timeout=5)
            except subprocess.TimeoutExpired:
                pytest.fail(f"the killed run's stdout/stderr are still held open {why}")
        finally:
            _kill_group(proc.pid)
    proc = _start(out)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, f"rerun after kills at {kills} failed: {err.decode()} {why}"
    got = _tree(out)
    assert sorted(got) == sorted(expected), (
        f"after kills at {kills}: missing {sorted(set(expected) - set(got))[:5]}, extra "
        f"{sorted(set(got) - set(expected))[:5]} {why}")
    differ = [name for name in expected if got[name] != expected[name]]
    assert not differ, f"after kills at {kills} these files differ: {differ[:5]} {why}"


_POOL_SCRIPT = textwrap.dedent("""
    import os, sys, time
    from visgym.bridges import demos, pools

    def sleeper(path):
        with open(path + ".tmp", "w") as f:
            f.write(str(os.getpid()))
        os.replace(path + ".tmp", path)
        time.sleep(60)

    if __name__ == "__main__":
        if sys.argv[2] == "watch-only":      # as on a system without prctl
            pools._set_parent_death_signal = lambda: False
        pool = demos.worker_pool(2, {})
        futures = [pool.submit(sleeper, f"{sys.argv[1]}.{i}") for i in range(2)]
        time.sleep(60)
""")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode", ["prctl", "watch-only"])
def test_pool_workers_die_with_their_parent(tmp_path, mode):
    """The demos pool's workers, busy for a minute, end within seconds of a kill -9 of their
    parent: through the parent-death signal, or (``watch-only``) the parent-pid watch alone."""
    script = tmp_path / "pool.py"
    script.write_text(_POOL_SCRIPT)
    base = tmp_path / "worker"
    proc = subprocess.Popen([sys.executable, str(script), str(base), mode],
                            start_new_session=True, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        paths = [Path(f"{base}.{i}") for i in range(2)]
        while not all(p.exists() for p in paths):
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline, "the workers did not start"
            time.sleep(0.02)
        workers = [int(p.read_text()) for p in paths]
        assert all(pid != proc.pid for pid in workers)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        deadline = time.monotonic() + (3.0 if mode == "prctl" else 5.0)
        while _group(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not _group(proc.pid), f"workers {workers} outlived their parent ({mode})"
    finally:
        _kill_group(proc.pid)
        proc.wait(timeout=30)
