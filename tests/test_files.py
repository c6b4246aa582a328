"""bridges/files.py (atomic writes), bridges/warmup.py (the first-run compile notice) and the
``visgym gifs`` command."""
import io
import os
import stat

import numba
import numpy as np
import pytest
from PIL import Image

from visgym.bridges import cli
from visgym.bridges.files import atomic_file, atomic_write
from visgym.bridges.warmup import announce_compilation, warm_up


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_atomic_write_replaces_creates_folders_and_leaves_no_temp_file(tmp_path):
    target = tmp_path / "a" / "b" / "out.json"
    atomic_write(target, "first")
    atomic_write(target, b"second", fsync=True)
    assert target.read_bytes() == b"second"
    assert os.listdir(target.parent) == ["out.json"]


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_created_files_get_0644_minus_the_umask(tmp_path, umask):
    old = os.umask(umask)
    try:
        atomic_write(tmp_path / "f", b"x")
        with atomic_file(tmp_path / "g", "w") as f:
            f.write("y")
    finally:
        os.umask(old)
    assert _mode(tmp_path / "f") == _mode(tmp_path / "g") == 0o644 & ~umask


def test_a_failed_write_keeps_the_old_file_and_removes_the_temp_file(tmp_path):
    target = tmp_path / "summary.md"
    atomic_write(target, "old")
    with pytest.raises(RuntimeError):
        with atomic_file(target, "w") as f:
            f.write("half a new")
            raise RuntimeError("disk on fire")
    assert target.read_text() == "old"
    assert os.listdir(tmp_path) == ["summary.md"]


def test_temp_files_are_hidden_from_shard_globs(tmp_path):
    with atomic_file(tmp_path / "shard-00000.jsonl") as f:
        f.write(b"{}\n")
        assert list(tmp_path.glob("shard-*.jsonl")) == []   # only the hidden temp file so far
    assert [p.name for p in tmp_path.glob("shard-*.jsonl")] == ["shard-00000.jsonl"]


def test_compilation_is_announced_once_and_only_when_something_compiles():
    @numba.njit(cache=False)
    def fresh(x):
        return x + 1

    out = io.StringIO()
    with announce_compilation("toy/easy", out):
        assert fresh(1) == 2
        assert fresh(2.5) == 3.5      # a second compile: still one notice
    text = out.getvalue()
    assert text.startswith("compiling kernels for toy/easy (first run only, cached afterwards)...")
    assert text.count("compiling") == 1 and text.endswith(" s\n")
    out = io.StringIO()
    with announce_compilation("toy/easy", out):
        assert fresh(3) == 4          # compiled already: nothing to say
    assert out.getvalue() == ""


def test_warm_up_of_a_warm_task_prints_nothing():
    warm_up("maze_2d/easy")
    out = io.StringIO()
    warm_up("maze_2d/easy", stream=out)
    assert out.getvalue() == ""


def test_gifs_command_writes_a_captioned_gif_per_episode(tmp_path, capsys):
    code = cli.main(["gifs", "--envs", "maze_2d/easy", "--episodes", "2", "--out", str(tmp_path)])
    assert code == 0
    assert "maze_2d/easy 2/2" in capsys.readouterr().out
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["maze_2d_easy_seed0.gif", "maze_2d_easy_seed1.gif"]
    gif = Image.open(tmp_path / names[0])
    assert gif.n_frames > 2 and _mode(tmp_path / names[0]) == 0o644 & ~_umask()
    gif.seek(gif.n_frames - 1)
    assert np.asarray(gif.convert("RGB")).shape[0] > 225   # the frame plus its caption band


def test_the_old_demo_subcommand_is_gone(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["demo"])
    assert exit_info.value.code == 2
    assert "invalid choice: 'demo'" in capsys.readouterr().err


def _umask() -> int:
    old = os.umask(0)
    os.umask(old)
    return old
