"""core/validate's container checks look at the shape before converting anything: a huge
nested list or array given for a small field is refused at once, whatever its size. The huge
values here cost nothing to build (one row object repeated; a broadcast view), and the checks
run in a subprocess under a memory limit, so a conversion would fail there instead of
allocating gigabytes here."""
import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from visgym.core import validate
from visgym.core.validate import int_grid, integers, real_array, reals

ROW = [0.0] * 20000
HUGE_LIST = [ROW] * 20000                                  # 4e8 entries, 160 kB to build
HUGE_ARRAY = np.broadcast_to(np.int64(1), (20000, 20000))  # 3.2 GB as float64, 8 bytes here


def _fast(call, match):
    start = time.perf_counter()
    with pytest.raises(ValueError, match=match):
        call()
    assert time.perf_counter() - start < 0.5


def test_real_array_checks_the_shape_before_converting():
    for value in (HUGE_LIST, HUGE_ARRAY, [HUGE_ARRAY] * 3):
        _fast(lambda: real_array("rot", value, shapes=((3, 3),)),
              r"^rot: expected shape \(3, 3\), got shape \(")
        _fast(lambda: real_array("rot", value, (3, 3)), r"^rot: expected shape \(\.\.\., 3, 3\)")
    _fast(lambda: real_array("rot", HUGE_LIST, shapes=((4, 4), (3, 3))),
          r"^rot: expected shape \(4, 4\) or \(3, 3\), got shape \(20000, 20000\)$")
    # Ragged within the bounds of the shape: refused without looking past them.
    _fast(lambda: real_array("rot", [[1, 0, 0], [0, 1, 0], ROW], shapes=((3, 3),)),
          r"^rot: expected real numbers")
    _fast(lambda: real_array("v", [ROW] * 3, shapes=((3,),)), r"got shape \(3, 20000\)")
    deep = 0
    for _ in range(5000):
        deep = [deep]
    _fast(lambda: real_array("v", deep, shapes=((3,),)), r"^v: expected shape \(3,\), got "
                                                          r"shape \(1, 1, .* 65 axes\)$")
    # Good values, and the messages the families' tests match, as before.
    rot = real_array("rot", [[1, 0, 0], (0, 1, 0), np.array([0, 0, 1])], shapes=((3, 3),))
    assert rot.dtype == np.float64 and (rot == np.eye(3)).all()
    assert real_array("s", 2.5, shapes=((),)) == 2.5
    assert real_array("v", np.arange(3), (3,)).tolist() == [0.0, 1.0, 2.0]
    assert real_array("p", [[1, 2, 3]] * 4, (3,)).shape == (4, 3)
    for value, match in [("eye", "expected real numbers"), ([[True] * 3] * 3, "expected real"),
                         ([["1"] * 3] * 3, "expected real"), ([[1, 0], [0, 1]], "expected shape"),
                         ([[float("nan")] * 3] * 3, "expected finite numbers")]:
        with pytest.raises(ValueError, match=rf"^rot: {match}"):
            real_array("rot", value, shapes=((3, 3),))


def test_reals_integers_and_int_grid_check_lengths_and_shapes_first():
    _fast(lambda: reals("x", HUGE_ARRAY, 3), r"^x: expected a list of 3 numbers, got an array")
    _fast(lambda: integers("x", HUGE_LIST, 2), r"^x: expected a list of 2 integers")
    _fast(lambda: int_grid("g", HUGE_LIST, (2, 2), 0, 1), r"^g: expected a grid .* 20000 rows")
    _fast(lambda: int_grid("g", HUGE_ARRAY, (2, 2), 0, 1), r"got shape \(20000, 20000\)")
    # An array of the right length but another shape, or a 0-d array, is named too (a 0-d
    # array used to raise TypeError from len()).
    for value in (np.zeros((3, 2)), np.array(5.0)):
        with pytest.raises(ValueError, match=r"^x: expected a list of 3 numbers"):
            reals("x", value, 3)
    assert reals("x", np.array([1, 2, 3]), 3) == (1.0, 2.0, 3.0)


@pytest.mark.parametrize("env_id", ["mental_rotation_3d_objaverse/easy",
                                    "mental_rotation_3d_cube/easy"])
def test_a_huge_current_rot_is_refused_under_a_memory_limit(env_id):
    """20000 x 20000 current_rot used to be converted to float64 (3.2 GB, 3-9 s) before its
    shape was checked: under a 1.5 GB address-space limit above what the process holds, the
    check must pass without that allocation."""
    script = textwrap.dedent(f"""
        import resource, time
        import numpy as np
        import visgym
        env = visgym.make({env_id!r}, num_envs=1, max_steps=None, autoreset="disabled")
        env.reset(seeds=[0])
        init = env.state_dicts()[0]
        with open("/proc/self/statm") as f:
            held = int(f.read().split()[0]) * resource.getpagesize()
        limit = held + (1536 << 20)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        for value in ([[0.0] * 20000] * 20000, np.broadcast_to(np.int64(1), (20000, 20000))):
            init["current_rot"] = value
            start = time.perf_counter()
            try:
                env.reset(init_states=[init])
            except ValueError as exc:
                assert "current_rot: expected shape" in str(exc), exc
            else:
                raise SystemExit("accepted")
            assert time.perf_counter() - start < 1.0, time.perf_counter() - start
        print("ok")
    """)
    env = dict(os.environ, NUMBA_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=600, env=env)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


def test_outer_shape_never_converts():
    class Shaped:
        shape = (10**6, 10**6)

        def __array__(self, *args, **kwargs):
            raise AssertionError("converted")

    assert validate._outer_shape(Shaped()) == (10**6, 10**6)
    with pytest.raises(ValueError, match=r"^a: expected shape \(3,\), got shape \(1000000, "):
        real_array("a", Shaped(), shapes=((3,),))
