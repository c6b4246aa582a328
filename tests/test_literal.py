"""Tests for visgym.core.literal: the bounded Python-literal parser used on model actions.

``ast.literal_eval`` appears in this file ONLY as a test oracle on test-chosen and
hypothesis-generated strings; the visgym package never calls it (or eval/compile) on model text.
"""
import ast
import math
import time
import warnings

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from visgym.core.literal import MAX_CHARS, MAX_DEPTH, parse_literal

SETTINGS = dict(deadline=None, suppress_health_check=list(HealthCheck), derandomize=False)


def oracle(text):
    """TEST ORACLE ONLY (never used on model text in the package): Python 3.11's own answer."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # invalid-escape DeprecationWarnings are not errors
        try:
            return True, ast.literal_eval(text)
        except Exception as exc:  # SyntaxError, ValueError, TypeError, UnicodeEncodeError, ...
            return False, exc


def same(a, b):
    """Equal value AND equal types all the way down; NaN equals NaN; the sign of zero counts."""
    if type(a) is not type(b):
        return False
    if isinstance(a, (float, complex)):
        return repr(a) == repr(b)
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return len(a) == len(b) and all(
            same(k1, k2) and same(v1, v2) for (k1, v1), (k2, v2) in zip(a.items(), b.items()))
    if isinstance(a, set):
        return sorted(map(repr, a)) == sorted(map(repr, b))
    return a == b


def ok(text):
    good, value = parse_literal(text)
    assert good, f"{text!r} was rejected: {value}"
    return value


def err(text):
    good, msg = parse_literal(text)
    assert not good, f"{text!r} was accepted as {msg!r}"
    assert isinstance(msg, str) and msg
    assert "\n" not in msg and "\r" not in msg, msg
    assert len(msg) <= 220, msg
    assert "internal error" not in msg, msg
    return msg


def max_nesting(text):
    depth = best = 0
    for c in text:
        if c in "([{":
            depth += 1
            best = max(best, depth)
        elif c in ")]}":
            depth = max(depth - 1, 0)
    return best


# --------------------------------------------------------------------------------------------
# Accepted inputs
# --------------------------------------------------------------------------------------------
ACCEPTED = [
    ("('move', -0)", ("move", 0)),
    ("('move', True)", ("move", True)),
    ('("stop", "stop")', ("stop", "stop")),
    ("\t ('move', 2)\n", ("move", 2)),
    ("('swap', ((0, 0), (1, 1)))", ("swap", ((0, 0), (1, 1)))),
    ("('move', [1, 0, -1])", ("move", [1, 0, -1])),
    ("('stop', b'stop')", ("stop", b"stop")),
    ("('move', 2j)", ("move", 2j)),
    ("('move', 1+2j)", ("move", 1 + 2j)),
    ("('move', -1-2j)", ("move", -1 - 2j)),
    ("('move', {'d': 0})", ("move", {"d": 0})),
    ("('x', {1, 2})", ("x", {1, 2})),
    ("('a' 'b', 1)", ("ab", 1)),
    ("('move', 0x1F)", ("move", 31)),
    ("('move', 0o17)", ("move", 15)),
    ("('move', 0b101)", ("move", 5)),
    ("('move', 1_000)", ("move", 1000)),
    ("('move', 1e-3)", ("move", 0.001)),
    ("('move', 1.)", ("move", 1.0)),
    ("('move', .5)", ("move", 0.5)),
    ("('move', 1_000.5)", ("move", 1000.5)),
    ("('move', 1.5e3J)", ("move", 1500j)),
    ("('move', +2.5)", ("move", 2.5)),
    ("('move', -2j)", ("move", -2j)),
    ("('move', -0.0)", ("move", -0.0)),
    ("('move', 1e999)", ("move", math.inf)),
    ("('move', 100000000000000000000)", ("move", 100000000000000000000)),
    ("('move', None)", ("move", None)),
    ("('move', ())", ("move", ())),
    ("('move', (1))", ("move", 1)),
    ("('move', (1,))", ("move", (1,))),
    ("('move', [])", ("move", [])),
    ("('move', {})", ("move", {})),
    ("('move', set())", ("move", set())),
    ("('move', (set)())", ("move", set())),
    ("('move', -(1))", ("move", -1)),
    ("('move', (-1)+(2j))", ("move", -1 + 2j)),
    ("('move', ...)", ("move", Ellipsis)),
    ("'a', 1", ("a", 1)),
    ("'a',", ("a",)),
    ("('m', {1: 'a', True: 'b'})", ("m", {1: "b"})),
    ("('m', {1: 2,})", ("m", {1: 2})),
    ("('m', [1, 2,])", ("m", [1, 2])),
    ("('s', '\\n\\t\\\\\\'\\\"')", ("s", "\n\t\\'\"")),
    ("('s', '\\x41\\u0041\\U00000041\\101\\N{DIGIT ONE}')", ("s", "AAAA1")),
    ("('s', '\\q')", ("s", "\\q")),
    ("('s', b'\\xff\\777\\u0041')", ("s", b"\xff\xff\\u0041")),
    ("('s', r'\\n')", ("s", "\\n")),
    ("('s', Rb'\\x00')", ("s", b"\\x00")),
    ("('s', BR'x', u'y')", ("s", b"x", "y")),
    ("('s', '''tri\nple''')", ("s", "tri\nple")),
    ('(\'s\', """x\'y""")', ("s", "x'y")),
    ("('s', 'é☃')", ("s", "é☃")),
    ("[1,\n 2]  # a comment", [1, 2]),
    ("('move', 2)  # go up\n", ("move", 2)),
    ("\n# leading comment\n('move', 2)\n\n", ("move", 2)),
    ("('move',\r\n 2)\r\n", ("move", 2)),
    ("('move', 1 \\\n + 2j)", ("move", 1 + 2j)),
    ("('move', 1\n+2j)", ("move", 1 + 2j)),
    ("('move', )", ("move",)),
    ("('" + "a" * 4000 + "', 1)", ("a" * 4000, 1)),
    ("(" * MAX_DEPTH + ")" * MAX_DEPTH, ()),
    ("[" * MAX_DEPTH + "]" * MAX_DEPTH, None),  # expected value built in the test
]


def nested_list(depth):
    value = []
    for _ in range(depth - 1):
        value = [value]
    return value


@pytest.mark.parametrize("text, expected", ACCEPTED)
def test_accepted(text, expected):
    if expected is None and text.startswith("["):
        expected = nested_list(MAX_DEPTH)
    value = ok(text)
    assert same(value, expected), (value, expected)
    assert str(value) == str(expected)
    good, reference = oracle(text)
    assert good and same(value, reference)


# What the feedback messages print: str() of the payload.
STR_CASES = [
    ("('move', {'d': 0})", "{'d': 0}"),
    ("('stop', b'stop')", "b'stop'"),
    ("('move', 2j)", "2j"),
    ("('move', 1+2j)", "(1+2j)"),
    ("('move', -2j)", "(-0-2j)"),
    ("('move', True)", "True"),
    ("('move', -0)", "0"),
    ("('move', -0.0)", "-0.0"),
    ("('abc', 'abc')", "abc"),
    ("('m', (1, 'a'))", "(1, 'a')"),
    ("('m', [1, 0, -1])", "[1, 0, -1]"),
    ("('x', {1, 2})", "{1, 2}"),
    ("('x', set())", "set()"),
    ("('x', 1e999)", "inf"),
    ("('x', 1_000.0)", "1000.0"),
    ("('x', ...)", "Ellipsis"),
]


@pytest.mark.parametrize("text, shown", STR_CASES)
def test_str_of_payload(text, shown):
    value = ok(text)
    assert isinstance(value, tuple) and len(value) == 2
    assert str(value[1]) == shown


# --------------------------------------------------------------------------------------------
# Rejected inputs
# --------------------------------------------------------------------------------------------
REJECTED = [
    ("", "empty"),
    ("   \n\t", "empty"),
    ("# just a comment", "no value"),
    ("<answer>('move', 1)</answer>", "unexpected character '<' at position 0"),
    ("(stop, 1)", "'stop' at position 1 is a bare name"),
    ("('stop', stop)", "bare name"),
    ("('move', float)", "bare name"),
    ("('move', true)", "True and False"),
    ("('move', float('1'))", "function calls such as float(...) are not allowed"),
    ("('move', 1+2)", "not allowed"),
    ("('move', 2*3)", "operators such as '*' are not allowed"),
    ("('move', 2**3)", "'**'"),
    ("('move', 1 == 1)", "'=='"),
    ("('move', 2", "'(' at position 0 was never closed"),
    ("('move', [2)", "does not match"),
    ("('move', 2))", "unmatched ')' at position 11"),
    ("('move, 2)", "unterminated string starting at position 1"),
    ("('move', '''2)", "unterminated triple-quoted string"),
    ("('move', 'a\nb')", "unterminated string"),
    ("(" * (MAX_DEPTH + 1) + ")" * (MAX_DEPTH + 1), f"deeper than {MAX_DEPTH} levels"),
    ("('move', 2) extra", "unexpected text after the value at position 12: 'extra'"),
    ("('move', 2)\n('move', 3)", "after the value"),
    ("('move',\x00 2)", "null characters are not allowed"),
    ("('move', 012)", "leading zeros"),
    ("('move', 1__0)", "underscore"),
    ("('move', 1_)", "underscore"),
    ("('move', 0b12)", "binary"),
    ("('move', 0o8)", "octal"),
    ("('move', 0x)", "hexadecimal"),
    ("('move', 1e)", "exponent"),
    ("('move', 1abc)", "invalid number"),
    ("('move', --1)", "another sign"),
    ("('move', -'a')", "directly before a number"),
    ("('move', -(1,))", "directly before a number"),
    ("('move', -(-1))", "directly before a number"),
    ("('move', -True)", "directly before a number"),
    ("('move', 1+-2j)", "not allowed"),
    ("('move', 2j+1)", "not allowed"),
    ("('move', 1+2j+3j)", "not allowed"),
    ("('move', {[1]: 2})", "not hashable"),
    ("('move', {{1}})", "not hashable"),
    ("('move', {1: 2, 3})", "':'"),
    ("('move', 'a' b'c')", "cannot be joined"),
    ("('move', f'x')", "f-strings"),
    ("('move', b'é')", "non-ASCII"),
    ("('move', '\\x4')", "hex digits"),
    ("('move', '\\u12')", "hex digits"),
    ("('move', '\\U00110000')", "Unicode"),
    ("('move', '\\N{NO SUCH CHARACTER NAME}')", "unknown character name"),
    ("('move', '\\N{oops')", "malformed"),
    ("('move', 2)\n  ", "indentation"),
    ("\n  ('move', 2)", "indentation"),
    ("('move', 2) \\", "backslash"),
    ("('move', 2) \\\n", "backslash"),
    ("[1 2]", "expected ',' or ']'"),
    ("(,)", "expected a value"),
    ("('move', set(1))", "set(...) with arguments"),
    ("('move', set()())", "function calls are not allowed"),
    ("('move', [1][0])", "indexing"),
    ("('move', 'a'.upper())", "'.'"),
    ("('move', 1 if 1 else 2)", "expected ',' or ')'"),
    ("('move', lambda: 1)", "keyword"),
    ("('move', x := 1)", None),
    ("('move', *[1])", "'*'"),
    ("('move',\n2", "never closed"),
    ("'a' +\n2j", "line break"),
    ("('move', 2);", "unexpected character ';'"),
    ("('move', 2)\ufeff", "unexpected character"),
    ("\ufeff('move', 2)", "unexpected character"),
    ("('move', 1" + "0" * 4001 + ")", "4002 digits"),
    ("x" * (MAX_CHARS + 1), f"at most {MAX_CHARS}"),
    ("('" + "a" * 5000 + "', 1)", "characters long; at most"),
    ("('move', '\ud800')", "surrogate"),
    ("n" * 1000, "bare name"),
]


@pytest.mark.parametrize("text, fact", REJECTED)
def test_rejected(text, fact):
    msg = err(text)
    if fact is not None:
        assert fact in msg, msg
    # Python agrees that these are not literals, except for our deliberate, documented limits.
    if not any(limit in msg for limit in ("at most", "deeper than", "digits;")):
        assert not oracle(text)[0], text


def test_bare_name_message_wording():
    assert parse_literal("(stop, 1)") == (
        False, "'stop' at position 1 is a bare name, not a literal; names must be quoted, as in 'stop'")
    assert parse_literal("<") == (False, "unexpected character '<' at position 0")
    assert parse_literal("('move', 2")[1] == "'(' at position 0 was never closed"
    assert parse_literal("x" * 5000)[1] == "the text is 5000 characters long; at most 4096 are accepted"


def test_messages_quote_little_of_the_input():
    msg = err("(" + "q" * 3000 + ", 1)")
    assert len(msg) < 200
    msg = err("('a', 1) " + "z" * 3000)
    assert "z" * 41 not in msg


def test_non_str_inputs():
    for bad in (None, 1, b"('move', 1)", ["('move', 1)"], ("move", 1), 1.5, object()):
        good, msg = parse_literal(bad)
        assert not good and "str" in msg


def test_str_subclass():
    class S(str):
        def __len__(self):
            return 0

    assert parse_literal(S("('move', 1)")) == (True, ("move", 1))


def test_sign_of_zero():
    assert math.copysign(1.0, ok("-0.0")) == -1.0
    assert math.copysign(1.0, ok("0.0")) == 1.0
    assert math.copysign(1.0, ok("-0e0")) == -1.0
    assert repr(ok("-2j")) == "(-0-2j)"
    assert repr(ok("-0j")) == "(-0-0j)"


# --------------------------------------------------------------------------------------------
# Bounded work
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text", [
    "(" * 1_000_000,
    "[" * 100_000,
    "'" + "a" * 10_000_000,
    "(" * MAX_CHARS,
    "[" * MAX_CHARS,
    "{" * MAX_CHARS,
    "(" * MAX_DEPTH + "[" * (MAX_CHARS - MAX_DEPTH),
    "-" * MAX_CHARS,
    "'" + "\\" * (MAX_CHARS - 1),
    "'''" + "\\N{" * 1300,
])
def test_huge_or_deep_inputs_fail_fast(text):
    t0 = time.perf_counter()
    err(text)
    assert time.perf_counter() - t0 < 0.25


@pytest.mark.parametrize("text", [
    "[" + "1," * (MAX_CHARS // 2 - 1) + "]",
    "{" + "1:1," * (MAX_CHARS // 4 - 1) + "}",
    "'" + "a" * (MAX_CHARS - 2) + "'",
    "'" + "\\x41" * ((MAX_CHARS - 2) // 4) + "'",
    "'" + "\\N{DIGIT ONE}" * ((MAX_CHARS - 2) // 13) + "'",
    "(" + "'a'" * ((MAX_CHARS - 2) // 3) + ")",
    "[" + ("(" * 31 + ")" * 31 + ",") * ((MAX_CHARS - 2) // 63) + "]",
    "1" * 4000,
    "9" * (MAX_CHARS - 2) + ".0",
    "0x" + "f" * 4000,
    "[" + "-1+2j," * (MAX_CHARS // 6 - 1) + "]",
])
def test_largest_inputs_are_fast(text):
    assert len(text) <= MAX_CHARS
    t0 = time.perf_counter()
    good, value = parse_literal(text)
    assert time.perf_counter() - t0 < 0.25
    assert good, value
    ref_good, ref = oracle(text)
    assert ref_good and same(value, ref)


@settings(max_examples=300, **SETTINGS)
@given(st.text(alphabet=st.one_of(st.characters(), st.sampled_from(
    ["\x00", "\ud800", "\udfff", "\r", "\x0c", "\\", "'", '"', "(", "[", "{", "#"])), max_size=60))
def test_arbitrary_text_never_raises(text):
    good, value = parse_literal(text)
    if not good:
        assert isinstance(value, str) and "\n" not in value and "internal error" not in value
    ref_good, ref = oracle(text)
    if max_nesting(text) <= MAX_DEPTH:
        assert good == ref_good, (text, value, ref)
        if good:
            assert same(value, ref)


# --------------------------------------------------------------------------------------------
# Differential tests against ast.literal_eval (test oracle only)
# --------------------------------------------------------------------------------------------
hashable_leaf = st.one_of(
    st.integers(min_value=-(10 ** 30), max_value=10 ** 30),
    st.floats(allow_nan=False, allow_infinity=False),  # repr(nan) is 'nan', a bare name
    st.complex_numbers(allow_nan=False, allow_infinity=False, max_magnitude=1e300),
    st.text(max_size=8),
    st.binary(max_size=8),
    st.booleans(),
    st.none(),  # (Ellipsis is a literal too, but its repr is the bare name 'Ellipsis')
)
hashable = st.recursive(hashable_leaf, lambda kids: st.tuples(kids, kids) | st.tuples(kids),
                        max_leaves=6)
values = st.recursive(
    hashable_leaf,
    lambda kids: st.one_of(
        st.lists(kids, max_size=4),
        st.lists(kids, max_size=4).map(tuple),
        st.dictionaries(hashable, kids, max_size=3),
        st.sets(hashable, max_size=3),
    ),
    max_leaves=20,
)


@settings(max_examples=400, **SETTINGS)
@given(values)
def test_repr_round_trip(value):
    text = repr(value)
    assume(len(text) <= MAX_CHARS and max_nesting(text) <= MAX_DEPTH)
    parsed = ok(text)
    assert parsed == value or isinstance(value, complex) or "nan" in text
    assert same(parsed, oracle(text)[1])
    if type(value) is float:  # the sign of zero survives
        assert repr(parsed) == repr(value)


@settings(max_examples=200, **SETTINGS)
@given(st.floats(allow_nan=False, allow_infinity=False), st.sampled_from(["", " ", "\t"]))
def test_floats_exact(x, pad):
    assert repr(ok(pad + repr(x))) == repr(x)
    assert repr(ok(f"('rotate', {x!r})")[1]) == repr(x)


PIECES = list("0123456789abefjoxruABEFJNOXRU_.,:+-*()[]{}'\" \t\n\r\x0c#\\é") + [
    "True", "None", "False", "set", "set()", "0x", "0o", "0b", "1e", "1.5", "'''", '"""',
    "\\N{DIGIT ONE}", "\\x4", "\\x41", "\\u00e9", "\\777", "...", "1_0", "\\\n", "2j", "b'",
    "rb'", "f'", "'move'", ", ", "  ",
]
TOKENS = ["1", "-", "+", "2j", "(", ")", ",", "'a'", "b'x'", "[", "]", "{", "}", ":", " ", "\n",
          "1.5", "True", "None", "set", "()", "0x1F", "1e3", "-0", ".5", "'\\n'", "r'\\d'", "...",
          "\t", "# c\n", "\\\n", "'''x'''", "0", "07", "1_000"]


def check_against_oracle(text):
    # Deliberate differences, excluded: over MAX_CHARS characters, more than MAX_DEPTH nested
    # brackets, and integer literals over 4000 digits (none of these occur in short texts).
    if len(text) > MAX_CHARS or max_nesting(text) > MAX_DEPTH:
        return
    good, value = parse_literal(text)
    ref_good, ref = oracle(text)
    assert good == ref_good, (text, value, ref)
    if good:
        assert same(value, ref), (text, value, ref)
    else:
        assert isinstance(value, str) and "internal error" not in value, value


@settings(max_examples=1000, **SETTINGS)
@given(st.lists(st.sampled_from(PIECES), max_size=14).map("".join))
def test_differential_random_pieces(text):
    check_against_oracle(text)


@settings(max_examples=1000, **SETTINGS)
@given(st.lists(st.sampled_from(TOKENS), max_size=16).map("".join))
def test_differential_token_soup(text):
    check_against_oracle(text)


@settings(max_examples=400, **SETTINGS)
@given(values, st.lists(st.tuples(st.integers(0, 400), st.integers(0, 3),
                                  st.sampled_from(PIECES + TOKENS)), max_size=3))
def test_differential_mutated_reprs(value, edits):
    text = repr(value)
    for pos, cut, piece in edits:
        pos %= len(text) + 1
        text = text[:pos] + piece + text[pos + cut:]
    check_against_oracle(text)


# Literal-shaped text with Python's formatting freedoms (blanks, comments, line breaks inside
# brackets, continuations, prefixes, escapes, number spellings, signs, complex sums); many are
# valid, and the oracle decides which.
GAPS = st.sampled_from(["", "", "", " ", "\t", "\x0c", "\n", "\r\n", "# c\n", "\\\n", "\n  "])
NUMBER_SPELLINGS = st.sampled_from([
    "0", "1", "00", "0_0", "07", "1_0", "0x1F", "0X_f", "0o7", "0b1_0", "1.", ".5", "1e5", "1E-5",
    "1_0.0_1", "2j", "1.5J", "0j", "07j", "07.5", "1e5j", "0e0", "1.e1", "012", "1__0", "0b2"])
STRING_SPELLINGS = st.sampled_from([
    "'a'", '"b"', "'''c\nd'''", 'r"\\n"', "b'x'", "rb'\\x00'", "u'y'", "'\\x41'",
    "'\\N{DIGIT TWO}'", "'\\777'", "b'\\777'", "'\\q'", "'\\u00e9'", "'é'", "f'z'", "'\\\n'",
    "''", '""""""', "'a\\'b'", "b'\\u0041'"])
OTHER_ATOMS = st.sampled_from(["True", "False", "None", "...", "set()", "(set)()", "set( )", "x"])


@st.composite
def literal_text(draw, depth=0):
    choice = draw(st.integers(0, 9)) if depth < 4 else draw(st.integers(0, 4))
    if choice <= 1:
        return draw(st.sampled_from(["", "", "-", "+"])) + draw(GAPS) + draw(NUMBER_SPELLINGS)
    if choice == 2:
        return " ".join(draw(st.lists(STRING_SPELLINGS, min_size=1, max_size=2)))
    if choice == 3:
        return draw(OTHER_ATOMS)
    if choice == 4:
        return (draw(st.sampled_from(["", "-"])) + draw(NUMBER_SPELLINGS) + draw(GAPS)
                + draw(st.sampled_from("+-")) + draw(GAPS)
                + draw(st.sampled_from(["2j", "1.5J", "(3j)", "-2j", "4"])))
    n = draw(st.integers(0, 3))
    if choice == 5:
        items = [draw(literal_text(depth + 1)) + draw(GAPS) + ":" + draw(GAPS)
                 + draw(literal_text(depth + 1)) for _ in range(n)]
        left, right = "{", "}"
    else:
        left = draw(st.sampled_from("([{("))
        right = {"(": ")", "[": "]", "{": "}"}[left]
        items = [draw(literal_text(depth + 1)) for _ in range(n)]
    body = ("," + draw(GAPS)).join(items) + ("," if items and draw(st.booleans()) else "")
    return left + draw(GAPS) + body + draw(GAPS) + right


@settings(max_examples=600, **SETTINGS)
@given(st.sampled_from(["", " ", "\t", "\n", "#x\n"]), literal_text(),
       st.sampled_from(["", "\n", " # c", "  ", "\n  ", ",", ", 1"]))
def test_differential_literal_shaped(before, body, after):
    check_against_oracle(before + body + after)
