"""The payload kinds the photo and board families need (core/grammar.py), table-driven from the
specs' payload tables (section 5 of jigsaw.md, zoom_in_puzzle.md, patch_reassembly.md) and the
recordings' quirks (parity/README.md): integer arrays of any shape with per-entry bounds and a
start offset, list-only permutations, per-action invalid-payload texts, plus hypothesis checks
that nothing raises and that what passes is written as given.
"""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from visgym.core.grammar import (OK, STOP, ActionSpec, Grammar, Int32Cast,
                                 IntArray, IntChoice, Permutation)

# jigsaw 3x3: swap ((r1, c1), (r2, c2)), reorder a list of 9 positions.
JIGSAW = Grammar([ActionSpec("swap", IntArray((2, 2), (3, 3))),
                  ActionSpec("reorder", Permutation(9, list_only=True)), STOP])
# zoom_in_puzzle with 4 views: 1-based swap (i, j).
ZOOM = Grammar([ActionSpec("swap", IntArray((2,), 4, start=1)),
                ActionSpec("reorder", Permutation(4, start=1, list_only=True)), STOP])
# patch_reassembly: place (id, row, col) with P=5 patches on a 3x4 board; remove id.
PATCH = Grammar([ActionSpec("place", IntArray((3,), (5, 3, 4))),
                 ActionSpec("remove", IntChoice(5)), STOP])


def _ok(grammar, text):
    kind, ints, floats, error, message = grammar.parse_one(text)
    return error == OK, ints, message


@pytest.mark.parametrize("text,valid,ints", [
    ("('swap', ((0, 0), (1, 1)))", True, [0, 0, 1, 1]),
    ("('swap', [[2, 1], [0, 2]])", True, [2, 1, 0, 2]),          # lists pass
    ("('swap', ([2, 1], (0, 2)))", True, [2, 1, 0, 2]),          # mixed nesting passes
    ("('swap', ((True, 0), (1, False)))", True, [1, 0, 1, 0]),   # bools are ints
    ("('swap', ((0, 0), (0, 0)))", True, [0, 0, 0, 0]),          # a no-op swap is valid
    ("('swap', ((0.5, 0), (1, 1)))", False, None),   # the reference raised TypeError
    ("('swap', ((0, 0), (1.0, 1.0)))", False, None),  # whole floats too
    ("('swap', ((0, 3), (1, 1)))", False, None),      # column out of range
    ("('swap', ((-1, 0), (1, 1)))", False, None),
    ("('swap', ((0, 0), (1,)))", False, None),        # ragged
    ("('swap', ((0, 0), (1, 1), (2, 2)))", False, None),
    ("('swap', (0, 0))", False, None),
    ("('swap', (('0', 0), (1, 1)))", False, None),
    ("('swap', ((None, 0), (1, 1)))", False, None),
    ("('swap', ((1000000000000000000000000000000, 0), (1, 1)))", False, None),
    ("('reorder', [8, 7, 6, 5, 4, 3, 2, 1, 0])", True, [8, 7, 6, 5, 4, 3, 2, 1, 0]),
    ("('reorder', (0, 1, 2, 3, 4, 5, 6, 7, 8))", False, None),  # tuple: the reference raised
    ("('reorder', 'abc')", False, None),
    ("('reorder', [0, 1, 2, 3, 4, 5, 6, 7, 7])", False, None),
    ("('reorder', [0, 1, 2, 3, 4, 5, 6, 7])", False, None),
    ("('reorder', [0.0, 1, 2, 3, 4, 5, 6, 7, 8])", False, None),
])
def test_jigsaw_payloads(text, valid, ints):
    ok, got, message = _ok(JIGSAW, text)
    assert ok == valid, message
    if valid:
        assert got[: len(ints)].tolist() == ints
    else:
        assert message.startswith("The action ") and message.endswith(
            "so nothing is executed.")


@pytest.mark.parametrize("text,valid,ints", [
    ("('swap', (1, 4))", True, [1, 4]),    # 1-based, written as given
    ("('swap', [2, 2])", True, [2, 2]),
    ("('swap', (True, 2))", True, [1, 2]),
    ("('swap', (0, 2))", False, None),
    ("('swap', (1, 5))", False, None),
    ("('swap', (1.5, 2))", False, None),   # the reference raised TypeError
    ("('swap', (1.0, 2.0))", False, None),
    ("('swap', (1, 2, 3))", False, None),
    ("('reorder', [4, 3, 2, 1])", True, [4, 3, 2, 1]),   # written as given
    ("('reorder', (1, 2, 3, 4))", False, None),
    ("('reorder', [0, 1, 2, 3])", False, None),
])
def test_zoom_payloads(text, valid, ints):
    ok, got, message = _ok(ZOOM, text)
    assert ok == valid, message
    if valid:
        assert got[: len(ints)].tolist() == ints


@pytest.mark.parametrize("text,valid", [
    ("('place', (0, 2, 3))", True), ("('place', [4, 0, 0])", True),
    ("('place', (False, 1, 1))", True),
    ("('place', (0.5, 1, 1))", False),   # TypeError in the reference
    ("('place', (0, 0.5, 0))", False),   # IndexError in the reference
    ("('place', (0, 3, 0))", False), ("('place', (5, 0, 0))", False),
    ("('place', (0, 0))", False), ("('place', 0)", False),
    ("('remove', 4)", True), ("('remove', True)", True), ("('remove', 5)", False),
    ("('remove', 1.0)", False),
])
def test_patch_payloads(text, valid):
    ok, _, message = _ok(PATCH, text)
    assert ok == valid, message


def test_reorder_payload_echo_uses_pythons_str():
    _, _, message = _ok(JIGSAW, "('reorder', (0, 1, 2, 3, 4, 5, 6, 7, 8))")
    assert message == ("The action (0, 1, 2, 3, 4, 5, 6, 7, 8) is not in the valid action "
                       "space of reorder so nothing is executed.")


def test_per_action_invalid_text():
    grammar = Grammar([ActionSpec("swap", IntArray((2,), 4, start=1),
                                  invalid="Swap payload {payload} is invalid for {name}."),
                       ActionSpec("move", IntChoice(2)), STOP])
    assert _ok(grammar, "('swap', (0, 9))")[2] == "Swap payload (0, 9) is invalid for swap."
    assert _ok(grammar, "('move', 7)")[2].endswith("valid action space of move so nothing is "
                                                   "executed.")


@pytest.mark.parametrize("text,valid,cast", [
    ("('rotate', 30)", True, 30), ("('rotate', '30')", True, 30),
    ("('rotate', 30.5)", True, 30), ("('rotate', -0.9)", True, 0),
    ("('rotate', True)", True, 1), ("('rotate', '30.5')", False, None),
    ("('rotate', float('inf'))", False, None), ("('rotate', 10000000000)", False, None),
    ("('rotate', 200)", False, None), ("('rotate', None)", False, None),
])
def test_int32_cast(text, valid, cast):
    grammar = Grammar([ActionSpec("rotate", Int32Cast(-180, 180)), STOP])
    ok, ints, message = _ok(grammar, text)
    assert ok == valid, message
    if valid:
        assert ints[0] == cast


def test_bad_kind_arguments_name_the_field():
    with pytest.raises(ValueError, match="shape"):
        IntArray((0, 2), 3)
    with pytest.raises(ValueError, match="bounds"):
        IntArray((2, 2), (3, 3, 3))
    with pytest.raises(ValueError, match="bounds"):
        IntArray((2,), 0)


_leaf = st.one_of(st.integers(-3, 6), st.floats(allow_nan=True), st.booleans(), st.none(),
                  st.text(max_size=3))
_payload = st.recursive(_leaf, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.tuples(inner, inner)), max_leaves=10)


@settings(max_examples=400, deadline=None)
@given(_payload)
def test_hypothesis_int_array_never_raises_and_writes_what_it_accepts(payload):
    kind = IntArray((2, 2), (3, 3))
    ints = np.full(4, -7, np.int32)
    floats = np.zeros(4)
    ok = kind.convert(payload, ints, floats)
    if ok:
        flat = [int(v) for row in payload for v in row]
        assert ints.tolist() == flat
        assert all(type(v) in (int, bool) for row in payload for v in row)
        assert all(0 <= v < 3 for v in flat)
    else:
        assert (ints == -7).all()   # nothing written for an invalid payload
    text = f"('swap', {payload!r})"
    JIGSAW.parse_one(text)


@settings(max_examples=300, deadline=None)
@given(_payload)
def test_hypothesis_permutation_list_only(payload):
    kind = Permutation(4, list_only=True)
    ok = kind.convert(payload, np.zeros(4, np.int32), np.zeros(4))
    if ok:
        assert type(payload) is list and sorted(int(v) for v in payload) == [0, 1, 2, 3]
    if type(payload) is tuple:
        assert not ok
