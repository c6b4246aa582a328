"""bench/mjx_gpu.py and its GPU-machine wrapper, run on this CPU at a tiny batch: the wrapper's
build and import path, the agreement check with the CPU backend, the JSON report (rewritten
after each batch size; complete at the end) and the table printed last. The figures themselves
are for a GPU (README "Fetch on MJX"); here only that the script runs end to end is checked.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.timeout(900)   # compiles the MJX step (~20-70 s on a CPU)
def test_wrapper_runs_the_benchmark_at_b2(tmp_path):
    env = dict(os.environ, PYTHON=sys.executable, WHEELS=str(tmp_path / "no-wheels"),
               OUT=str(tmp_path), TIME_BUDGET_S="600")
    proc = subprocess.run(
        ["bash", str(REPO / "bench" / "mjx_gpu.sh"), "--batches", "2", "--steps", "1",
         "--frame-steps", "1", "--agree-batch", "2"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=850)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    last = proc.stdout.strip().splitlines()
    assert last[-2].split()[:3] == ["batch", "compile", "s"]   # the table is printed last
    assert last[-1].split()[0] == "2"
    report = json.loads((tmp_path / "mjx_gpu.json").read_text())
    assert report["complete"] and not report["accelerator"]
    assert report["agreement"]["passed"], report["agreement"]
    row = report["results"][0]
    assert row["batch"] == 2 and row["env_steps_per_s"] > 0
    assert row["frames"]["frames_drawn"] == 2 and row["unstable_rows"] == 0


def test_scripts_parse_and_bad_arguments_name_the_flag():
    for name in ("mjx_gpu.sh", "mjx_gpu_wheels.sh"):
        subprocess.run(["bash", "-n", str(REPO / "bench" / name)], check=True)
    proc = subprocess.run([sys.executable, "-m", "visgym.bench", "mjx-gpu", "--batches", "0"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "--batches" in proc.stderr
