"""Checks shared by the contract test (tests/test_contract.py) and the family tests."""
import numpy as np
import pytest


def full_redraw(env) -> np.ndarray:
    """The frames of every episode of ``env`` drawn from scratch: ``render_rows`` of all rows
    with a fresh workspace into a zero buffer (a new array)."""
    batch = env.num_envs
    fresh = np.zeros_like(env.frames)
    env.family.render_rows(env.state, fresh, np.arange(batch, dtype=np.int64),
                           env.family.new_workspace(batch))
    return fresh


def assert_frames_equal_a_full_redraw(env, when: str = "") -> None:
    """``env.frames``, kept up to date incrementally by reset and step, equal a full redraw of
    the current state; the message names the rows that differ."""
    fresh = full_redraw(env)
    bad = [i for i in range(env.num_envs) if not np.array_equal(env.frames[i], fresh[i])]
    assert not bad, (f"{env!r} {when}: incrementally drawn frames of rows {bad} differ from a "
                     f"full redraw ({int((env.frames != fresh).any(-1).sum())} pixels)")


def assert_states_equal(got, want, when: str = "") -> None:
    """Two State NamedTuples hold the same arrays (every field; NaN equals NaN)."""
    assert type(got) is type(want), (type(got), type(want))
    bad = [name for name, a, b in zip(got._fields, got, want)
           if np.shape(a) != np.shape(b) or np.asarray(a).dtype != np.asarray(b).dtype
           or not np.array_equal(a, b, equal_nan=np.asarray(a).dtype.kind in "fc")]
    assert not bad, f"{when}: state fields {bad} differ"


def run_concurrently(calls, switch_interval: float = 1e-6) -> list:
    """Run each of ``calls`` (callables without arguments) on its own thread, started together,
    with a thread switch forced every ``switch_interval`` seconds; return their results in
    order. The first exception raised by any of them is raised here."""
    import sys
    import threading

    results: list = [None] * len(calls)
    errors: list = []
    barrier = threading.Barrier(len(calls))

    def run(k):
        try:
            barrier.wait()
            results[k] = calls[k]()
        except BaseException as error:  # noqa: BLE001 - re-raised below
            errors.append(error)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(switch_interval)
    try:
        workers = [threading.Thread(target=run, args=(k,)) for k in range(len(calls))]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
    finally:
        sys.setswitchinterval(interval)
    if errors:
        raise errors[0]
    return results


def assert_hostile_init_refused(env, init, field: str) -> None:
    """Loading ``init`` as the second of two init states raises a ValueError naming
    ``init_states[1]`` and ``field`` (a regex), and changes neither the states nor the frames of
    ``env`` (two episodes, already reset)."""
    good = env.state_dicts()
    frames = env.frames.copy()
    where = r"init_states\[1\]" + ("" if field == "init_states" else rf"\.?{field}")
    with pytest.raises(ValueError, match=where):
        env.reset(init_states=[good[0], init])
    assert env.state_dicts() == good
    np.testing.assert_array_equal(env.frames, frames)
