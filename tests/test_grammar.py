"""The shared action grammar and parser: payload kinds, feedback wording, batching and cache."""
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contract_checks import run_concurrently

from visgym.core.grammar import (BAD_PAYLOAD, FORMAT_ERROR, OK, PARSE_ERROR, UNKNOWN_NAME,
                                 ActionBatch, ActionSpec, FloatVector, Grammar, IntChoice,
                                 IntVector, Permutation, StopToken)

GRAMMAR = Grammar([
    ActionSpec("move", IntChoice(4)),
    ActionSpec("turn", IntChoice(3, start=1)),
    ActionSpec("push", FloatVector(3, -1.0, 1.0)),
    ActionSpec("pick", IntVector(2, 0, 5)),
    ActionSpec("reorder", Permutation(4, start=1)),
    ActionSpec("stop", StopToken()),
])


@pytest.mark.parametrize("text,kind,ints,floats", [
    ("('move', 3)", "move", [3], None),
    ("('move', True)", "move", [1], None),
    ("('move', -0)", "move", [0], None),
    ("('turn', 3)", "turn", [3], None),
    ("('push', [1, -0.5, '0.25'])", "push", None, [1.0, -0.5, 0.25]),
    ("('push', (True, 0, 0))", "push", None, [1.0, 0.0, 0.0]),
    ("('pick', (5, 0))", "pick", [5, 0], None),
    ("('reorder', [4, 1, 3, 2])", "reorder", [4, 1, 3, 2], None),
    ("('stop', 'STOP')", "stop", None, None),
    ("('stop', '1')", "stop", None, None),
    ('  ("stop", "done")\n', "stop", None, None),
])
def test_valid_actions(text, kind, ints, floats):
    k, got_ints, got_floats, error, message = GRAMMAR.parse_one(text)
    assert error == OK and message == ""
    assert GRAMMAR.names[k] == kind
    if ints is not None:
        assert got_ints[: len(ints)].tolist() == ints
    if floats is not None:
        np.testing.assert_allclose(got_floats[: len(floats)], floats)


@pytest.mark.parametrize("text,error", [
    ("('move', 4)", BAD_PAYLOAD), ("('move', 1.0)", BAD_PAYLOAD), ("('move', '1')", BAD_PAYLOAD),
    ("('turn', 0)", BAD_PAYLOAD), ("('push', [1, 2, 0])", BAD_PAYLOAD),
    ("('push', [0, 0])", BAD_PAYLOAD), ("('push', [0, 0, 'x'])", BAD_PAYLOAD),
    ("('pick', (1.5, 0))", BAD_PAYLOAD), ("('reorder', [1, 1, 2, 3])", BAD_PAYLOAD),
    ("('reorder', [0, 1, 2, 3])", BAD_PAYLOAD), ("('stop', '')", BAD_PAYLOAD),
    ("('stop', 'stop!')", BAD_PAYLOAD), ("('stop', 'stöp')", BAD_PAYLOAD),
    ("('stop', b'stop')", BAD_PAYLOAD), ("('stop', 5)", BAD_PAYLOAD),
    ("('Move', 1)", UNKNOWN_NAME), ("(1, 2)", UNKNOWN_NAME), ("(None, None)", UNKNOWN_NAME),
    ("['move', 1]", FORMAT_ERROR), ("('move', 1, 2)", FORMAT_ERROR), ("'move'", FORMAT_ERROR),
    ("move 1", PARSE_ERROR), ("", PARSE_ERROR), ("('move', 1", PARSE_ERROR),
    ("Action: ('move', 1)", PARSE_ERROR), ("('move', float('nan'))", PARSE_ERROR),
])
def test_invalid_actions_get_an_error_code(text, error):
    assert GRAMMAR.parse_one(text)[3] == error


def test_payload_nan_and_inf_are_rejected_by_float_boxes():
    assert GRAMMAR.parse_one("('push', [1e999, 0, 0])")[3] == BAD_PAYLOAD
    assert GRAMMAR.parse_one("('push', [1" + "0" * 400 + ", 0, 0])")[3] == BAD_PAYLOAD
    assert GRAMMAR.parse_one("('push', ['nan', 0, 0])")[3] == BAD_PAYLOAD


def test_feedback_templates():
    assert GRAMMAR.parse_one("('fly', 1)")[4] == (
        "The action name 'fly' is not recognized in the available action space.")
    assert GRAMMAR.parse_one("('move', {'d': 0})")[4] == (
        "The action {'d': 0} is not in the valid action space of move so nothing is executed.")
    assert GRAMMAR.parse_one("(('a', 'b'), 1)")[4] == (
        "The action name '('a', 'b')' is not recognized in the available action space.")
    message = GRAMMAR.parse_one("x" * 5000)[4]
    assert message.startswith("Cannot parse action string 'xxx")
    assert message.endswith("so the action is invalid.") and len(message) < 700


def test_non_string_actions_are_parse_errors():
    for value in (None, 3, ("move", 1), b"('move', 1)"):
        kind, _, _, error, message = GRAMMAR.parse_one(value)
        assert error == PARSE_ERROR and message.startswith("Cannot parse action string")


def test_batch_parse_matches_single_parse_and_reuses_the_cache():
    texts = ["('move', 1)", "junk", "('reorder', [1, 2, 3, 4])", "('move', 1)", None, "x" * 900]
    parser = GRAMMAR.new_parser()
    batch = parser.parse(texts, ActionBatch.empty(len(texts), GRAMMAR.width))
    rows = len(parser)
    again = parser.parse(texts, ActionBatch.empty(len(texts), GRAMMAR.width))
    assert len(parser) == rows + 1   # only the string too long to remember is parsed again
    for b, text in enumerate(texts):
        kind, ints, floats, error, message = GRAMMAR.parse_one(text)
        for out in (batch, again):
            assert out.kind[b] == kind and out.error[b] == error
            assert out.message[b] == message
            np.testing.assert_array_equal(out.ints[b], ints)
            np.testing.assert_array_equal(out.floats[b], floats)


def test_a_grammar_is_immutable_and_pickles():
    with pytest.raises(AttributeError, match="immutable"):
        GRAMMAR.width = 3
    with pytest.raises(TypeError):
        GRAMMAR._index["fly"] = 9
    again = pickle.loads(pickle.dumps(GRAMMAR))
    assert again.names == GRAMMAR.names and again.width == GRAMMAR.width


@pytest.mark.timeout(120)
def test_parsers_of_one_grammar_parse_from_threads_without_interference():
    """Each thread parses thousands of strings it alone has seen through its own Parser of the
    shared grammar, with a thread switch forced every microsecond; every parse equals
    ``parse_one``. (One parser shared by the threads gave wrong rows and IndexErrors.)"""
    threads, batches, batch = 4, 150, 16

    def texts_of(k, t):
        return [f"('move', {b % 5})" + " " * (k + 1) + f"#{t}" if b % 3 else
                f"('pick', ({b % 7}, {t % 6}))" + " " * k for b in range(batch)]

    expected = {}
    for k in range(threads):
        for t in range(batches):
            for text in texts_of(k, t):
                expected.setdefault(text, GRAMMAR.parse_one(text))
    def run(k):
        wrong = []
        parser, out = GRAMMAR.new_parser(), ActionBatch.empty(batch, GRAMMAR.width)
        for t in range(batches):
            texts = texts_of(k, t)
            parser.parse(texts, out)
            for b, text in enumerate(texts):
                kind, ints, _, error, message = expected[text]
                if (out.kind[b], out.error[b], out.message[b]) != (kind, error, message) \
                        or out.ints[b].tolist() != ints.tolist():
                    wrong.append(text)
        return wrong

    wrong = run_concurrently([lambda k=k: run(k) for k in range(threads)])
    assert not any(wrong), [w[:3] for w in wrong]


def test_grammar_declaration_errors():
    with pytest.raises(ValueError, match="actions"):
        Grammar([])
    with pytest.raises(ValueError, match="duplicate"):
        Grammar([ActionSpec("a", StopToken()), ActionSpec("a", StopToken())])


def test_truncated_int_vector_accepts_numbers_like_numpy_and_truncates():
    from visgym.core.grammar import TruncatedIntVector

    grammar = Grammar([ActionSpec("move", TruncatedIntVector((30, 13, 30, 13)))])
    for text, ints in [("('move', [0, 6, 2, 0])", [0, 6, 2, 0]),
                       ("('move', (29.99, 12.5, 0.9, -0.0))", [29, 12, 0, 0]),
                       ("('move', [True, False, 1, 2])", [1, 0, 1, 2]),
                       ("('move', [0, 6, 2, 1j])", [0, 6, 2, -1])]:
        kind, got, _, error, _ = grammar.parse_one(text)
        assert error == OK and got.tolist() == ints, text
    for text in ("('move', [30, 0, 0, 0])", "('move', [0, 13, 0, 0])", "('move', [-1, 0, 0, 0])",
                 "('move', [0, 0, 1])", "('move', [[0], [1], [2], [3]])", "('move', 'abcd')",
                 "('move', ['0', '6', '2', '0'])", "('move', [0, None, 0, 0])",
                 "('move', [1e999, 0, 0, 0])", "('move', [0, -1j, 0, 0])", "('move', 5)"):
        assert grammar.parse_one(text)[3] == BAD_PAYLOAD, text
    sample = TruncatedIntVector((30, 13, 30, 13)).sample(np.random.default_rng(0))
    assert len(sample) == 4 and all(0 <= v < b for v, b in zip(sample, (30, 13, 30, 13)))


@pytest.mark.parametrize("text", [
    "('move', '\\udfff')",            # the escape decodes to a lone surrogate payload
    "('\\ud800', 1)",                 # ... or name
    "('move', '\\x00')", "\x00" * 500, "('mo\x00ve', 1)",
    "('move', '" + "\\U0001f600" * 400 + "')", "x" * 5000, "(" + "'\\udfff', " * 300 + ")",
])
def test_feedback_is_printable_encodable_and_bounded(text):
    """Feedback is sent back to the model on every later turn and written to logs: it must
    encode as UTF-8 (no lone surrogates), hold no NULs or control characters, and quote only a
    bounded excerpt of the model's text."""
    _, _, _, error, message = GRAMMAR.parse_one(text)
    assert error != 0
    message.encode("utf-8")
    assert message.isprintable()
    assert len(message) <= 700


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=3000))
def test_any_text_gives_encodable_bounded_feedback(text):
    _, _, _, _, message = GRAMMAR.parse_one(text)
    message.encode("utf-8")
    assert message.isprintable() and len(message) <= 700
