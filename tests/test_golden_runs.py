"""The episode layer behaves as it did before it was rebuilt: tests/golden_runs.py reruns a
small evaluation with the solver agent (GIFs included), one against an OpenAI-compatible server
that answers prose, unparsable and invalid actions, empty replies and a failed request, and a
demonstration run, and compares them with the record kept in tests/golden/ (timings aside;
GIFs, demos shards and images byte for byte)."""
import json

import pytest

from golden_runs import GOLDEN, record_runs


def _first_difference(got, want, where="") -> str | None:
    if type(got) is not type(want):
        return f"{where}: {type(want).__name__} recorded, {type(got).__name__} now"
    if isinstance(want, dict):
        for key in sorted(set(got) | set(want)):
            if key not in got or key not in want:
                return f"{where}.{key}: {'missing now' if key not in got else 'new'}"
            found = _first_difference(got[key], want[key], f"{where}.{key}")
            if found:
                return found
        return None
    if isinstance(want, list):
        if len(got) != len(want):
            return f"{where}: {len(want)} items recorded, {len(got)} now"
        for k, (a, b) in enumerate(zip(got, want)):
            found = _first_difference(a, b, f"{where}[{k}]")
            if found:
                return found
        return None
    if got != want:
        return f"{where}: {want!r} recorded, {got!r} now"
    return None


@pytest.mark.timeout(600)
def test_eval_and_demos_runs_match_the_golden_record(tmp_path):
    want = json.loads(GOLDEN.read_text())
    got = record_runs(tmp_path)
    difference = _first_difference(got, want)
    assert difference is None, (f"{difference} (if a family changed on purpose, regenerate "
                                "with `python tests/golden_runs.py --write`)")
