"""What a fresh process costs: ``import visgym`` loads no family, and no heavy package;
kernels that are not cached yet are found without compiling anything, and compiled for several
families in parallel processes (``visgym warmup``, run by ``make install``), after which every
family's tasks start warm."""
import json
import os
import subprocess
import sys

import pytest

HEAVY = ("numba", "llvmlite", "mujoco", "jax", "trimesh", "ray", "datasets", "scipy", "PIL",
         "openai", "httpx", "skimage")


def _python(code: str, env=None) -> str:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=600, env={**os.environ, **(env or {})})
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_import_visgym_loads_no_family_and_no_heavy_package():
    loaded = json.loads(_python(
        "import sys, json, visgym; visgym.list_envs();"
        f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules] + "
        "[m for m in sys.modules if m.startswith('visgym.envs.') or m.startswith('visgym.kernels')]))"))
    assert loaded == []


def test_making_a_family_imports_only_what_it_uses():
    loaded = json.loads(_python(
        "import sys, json, visgym; visgym.make('maze_2d/easy');"
        "print(json.dumps(sorted(m for m in ('mujoco', 'jax', 'trimesh', 'ray', 'datasets') "
        "if m in sys.modules)))"))
    assert loaded == []


@pytest.mark.timeout(300)
def test_cold_families_are_found_and_compiled_in_parallel(tmp_path):
    code = """
import visgym
from visgym.bridges.warmup import is_cold, warm_up_all
ids = ["jigsaw/easy", "zoom_in_puzzle/easy"]
before = [is_cold(i) for i in ids]
warm_up_all([(i, {}) for i in ids], announce=False, processes=2)
import json; print(json.dumps([before, [is_cold(i) for i in ids]]))
"""
    cache = tmp_path / "numba"
    cache.mkdir()
    before, after = json.loads(_python(code, {"NUMBA_CACHE_DIR": str(cache)}))
    assert before == [True, True] and after == [False, False]
    assert any(cache.rglob("*.nbi"))
