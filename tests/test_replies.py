"""Tests for visgym.bridges.replies: model reply -> action string (agent_loop.md section 6,
api.md section 5.3). One behaviour of the spec per test, then the malformed strings of the parity
recordings, property tests, the bounds on adversarial input, and the preparation of a reply for
the loop (``encodable``, ``bound_reply``: what is stored and resent can always be encoded, and
is bounded)."""
import ast
import inspect
import re
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import visgym.bridges.replies as replies
from visgym.bridges.replies import (MAX_REPLY_CHARS, bound_reply, encodable, extract_action,
                                    extract_think)

SETTINGS = dict(deadline=None, suppress_health_check=list(HealthCheck))


# -- step 4: selection ---------------------------------------------------------------------------

def test_last_tuple_wins():
    assert extract_action("first ('move', 1) then ('move', 3)") == "('move', 3)"


def test_first_flag_selects_the_first_tuple():
    assert extract_action("first ('move', 1) then ('move', 3)", first=True) == "('move', 1)"


def test_nested_string_headed_tuple_wins_over_the_outer_one():
    assert extract_action("('move', [0, ('x', 2)])") == "('x', 2)"


def test_first_flag_takes_the_outer_tuple_of_a_nested_action():
    assert extract_action("('move', [0, ('x', 2)])", first=True) == "('move', [0, ('x', 2)])"


def test_tuple_with_non_string_head_inside_the_action_does_not_compete():
    assert extract_action("('swap', ((0, 0), (1, 1)))") == "('swap', ((0, 0), (1, 1)))"


def test_candidate_returned_as_normalised_text():
    # Whitespace inside the action (even inside its strings) is collapsed, as the spec says.
    assert extract_action("('say',\n\t  'a   b')") == "('say', 'a b')"


# -- step 3: candidate scan ----------------------------------------------------------------------

def test_bare_identifier_head_is_quoted():
    assert extract_action("(move, 2)") == "('move', 2)"


def test_bare_identifier_quoting_keeps_the_blanks_around_it():
    assert extract_action("( move , 2)") == "( 'move' , 2)"


def test_only_the_head_identifier_is_quoted():
    # 'up' stays a bare name, so the candidate does not parse and the text falls through.
    assert extract_action("(move, up)") == "(move, up)"
    assert extract_action("(move, 'up')") == "('move', 'up')"


def test_bare_identifier_needs_a_following_comma():
    assert extract_action("(stop)") == "(stop)"


def test_bare_keyword_constants_are_quoted_too():
    # Quirk kept for parity: the fix quotes any identifier, True/None included.
    assert extract_action("(None, None)") == "('None', None)"
    assert extract_action("(True, 1)") == "('True', 1)"


def test_non_identifier_head_is_not_quoted():
    assert extract_action("(2move, 1)") == "(2move, 1)"


def test_prose_parentheses_are_ignored():
    assert extract_action("(I think) ('move', 1) (as planned)") == "('move', 1)"


def test_one_element_tuple_is_accepted_by_the_extractor():
    assert extract_action("('stop',)") == "('stop',)"


def test_three_tuple_is_accepted_by_the_extractor():
    assert extract_action("('stop', 'stop', 'stop')") == "('stop', 'stop', 'stop')"


def test_tuple_with_non_string_head_is_not_a_candidate():
    assert extract_action("go (1, 2) now") == "go (1, 2) now"


def test_empty_tuple_is_not_a_candidate():
    assert extract_action("() ('move', 1) ()") == "('move', 1)"


def test_unbalanced_opening_is_skipped():
    assert extract_action("('move', 1) and then ('move', 2") == "('move', 1)"


def test_matching_counts_only_round_parentheses_not_quotes():
    # The ')' inside the quotes closes the candidate, which then no longer parses.
    assert extract_action("('say', ')')") == "('say', ')')"


def test_matching_ignores_brackets():
    assert extract_action("('move', [1, 2)]") == "('move', [1, 2)]"


def test_candidates_inside_a_failed_outer_candidate_are_found():
    assert extract_action("('move', float('nan'), ('turn', 1))") == "('turn', 1)"


def test_non_literal_candidates_are_rejected():
    for text in ("('stop', 1+2)", "__import__('os')", "('st' + 'op', 'stop')", "('stop', stop)"):
        assert extract_action(text) == text


# -- step 1: answer tags -------------------------------------------------------------------------

def test_answer_tags_are_used_with_elicit_verbalization():
    reply = "<think>maybe ('move', 9)</think><answer>('move', 1)</answer> ('move', 2)"
    assert extract_action(reply, elicit_verbalization=True) == "('move', 1)"


def test_answer_tags_are_ignored_without_elicit_verbalization():
    reply = "<think>maybe ('move', 9)</think><answer>('move', 1)</answer> ('move', 2)"
    assert extract_action(reply) == "('move', 2)"


def test_answer_without_closing_tag_runs_to_the_end():
    reply = "<think>('move', 9)</think><answer>('move', 1) or rather ('move', 2)"
    assert extract_action(reply, elicit_verbalization=True) == "('move', 2)"


def test_answer_uses_the_first_answer_tag_and_the_next_closing_tag():
    reply = "<answer>('a', 1)</answer><answer>('b', 2)</answer>"
    assert extract_action(reply, elicit_verbalization=True) == "('a', 1)"


def test_elicit_without_answer_tag_scans_the_whole_reply():
    assert extract_action("<think>x</think> ('move', 3)", elicit_verbalization=True) == "('move', 3)"


def test_fallback_with_answer_tags_is_the_answer_text():
    reply = "<think>('move', 9)</think><answer>  no action\n here </answer>"
    assert extract_action(reply, elicit_verbalization=True) == "  no action\n here "


# -- step 2: normalisation -----------------------------------------------------------------------

def test_code_fences_with_language_word_are_removed():
    assert extract_action("```python\n('move', 1)\n```") == "('move', 1)"
    assert extract_action("```json ('move', 1) ```") == "('move', 1)"
    assert extract_action("```('stop', 'stop')```") == "('stop', 'stop')"


def test_remaining_backticks_are_removed():
    assert extract_action("use `('mo`ve', 1)`") == "('move', 1)"


def test_action_labels_are_removed_case_insensitively():
    assert extract_action("Action: ('move', 1)") == "('move', 1)"
    assert extract_action("FINAL ACTION :('move',1)") == "('move',1)"
    # A label inside the candidate shows the replacement by a space.
    assert extract_action("('action: x', 1)") == "(' x', 1)"


def test_action_label_needs_a_word_boundary():
    assert extract_action("('Reaction: x', 1)") == "('Reaction: x', 1)"


def test_box_markers_are_removed():
    assert extract_action("<|begin_of_box|>('move',  1)<|end_of_box|>") == "('move', 1)"
    assert extract_action("('mo<|end_of_box|>ve', 1)") == "('move', 1)"


def test_kimi_think_markers_are_removed():
    reply = "\u25c1think\u25b7 I go (move, 2) \u25c1/think\u25b7 ('mo\u25c1think\u25b7ve', 3)"
    assert extract_action(reply) == "('move', 3)"


def test_whitespace_runs_are_collapsed():
    assert extract_action("\n\n('move',\n\t  [1,    2])\n") == "('move', [1, 2])"


def test_no_candidate_returns_the_original_text_unchanged():
    text = "Let me   think\n(about it)\n```python\nno action```"
    assert extract_action(text) == text


def test_text_that_normalises_to_nothing_is_returned_unchanged():
    for text in ("", "   ", "``` ```", "Action:", "<|begin_of_box|>\n<|end_of_box|>"):
        assert extract_action(text) == text


# -- input handling ------------------------------------------------------------------------------

@pytest.mark.parametrize("value", [None, 5, b"('move', 1)", ["('move', 1)"], 1.5])
def test_non_str_input_gives_empty_string(value):
    assert extract_action(value) == ""


def test_str_subclass_input_gives_plain_str():
    class Text(str):
        pass

    result = extract_action(Text("go ('move', 1)"))
    assert result == "('move', 1)" and type(result) is str


def test_literal_parsing_uses_the_bounded_parser_only():
    tree = ast.parse(inspect.getsource(replies))
    calls = [node.func for node in ast.walk(tree) if isinstance(node, ast.Call)]
    names = {func.id for func in calls if isinstance(func, ast.Name)}
    attributes = {func.attr for func in calls if isinstance(func, ast.Attribute)}
    assert not names & {"eval", "exec", "compile", "literal_eval"}
    assert "literal_eval" not in attributes
    assert "parse_literal" in names


@settings(max_examples=400, **SETTINGS)
@given(st.from_regex(replies._SIMPLE_TUPLE, fullmatch=True))
def test_the_fast_shape_only_takes_what_the_parser_reads_as_a_string_headed_tuple(text):
    # The candidate scan takes texts of this shape without parsing them: each must be exactly
    # what the parser would have accepted.
    ok, value = replies.parse_literal(text)
    assert ok and type(value) is tuple and value and isinstance(value[0], str)


ODD_SHAPES = ["('stop')", "('a' 'b', 1)", "('a', 01)", "('a', 1,,)", "('a\\'', 1)",
              "('a', 1.5)", "(('a', 1),)", "('a', 1 2)", "(move, 2)", "( 'a' , -0 , )"]


@settings(max_examples=300, **SETTINGS)
@given(st.lists(st.one_of(st.from_regex(replies._SIMPLE_TUPLE, fullmatch=True),
                          st.sampled_from(ODD_SHAPES),
                          st.text(alphabet="()'\", ,ab-019", max_size=12)), max_size=6),
       st.booleans())
def test_the_fast_shape_never_changes_what_is_extracted(parts, first):
    reply = " then ".join(parts)
    fast = extract_action(reply, first=first)
    kept, replies._SIMPLE_TUPLE = replies._SIMPLE_TUPLE, re.compile(r"(?!)")   # never matches
    try:
        assert extract_action(reply, first=first) == fast
    finally:
        replies._SIMPLE_TUPLE = kept


# -- the malformed strings of the parity recordings (parity/README.md, "malformed") -------------

MALFORMED = [
    ("", ""),
    ("   ", "   "),
    ("hello world", "hello world"),
    ("stop", "stop"),
    ("'stop'", "'stop'"),
    ("3.5", "3.5"),
    ("42", "42"),
    ("True", "True"),
    ("None", "None"),
    ("['stop', 'stop']", "['stop', 'stop']"),
    ("{'stop': 'stop'}", "{'stop': 'stop'}"),
    ("('stop' 'stop')", "('stop' 'stop')"),  # one concatenated string, not a tuple
    ("('stop',)", "('stop',)"),
    ("('stop', 'stop', 'stop')", "('stop', 'stop', 'stop')"),
    ("(('stop', 'stop'),)", "('stop', 'stop')"),
    ("(('stop', 'stop'), ('stop', 'stop'))", "('stop', 'stop')"),
    ("(1, 2)", "(1, 2)"),
    ("(None, None)", "('None', None)"),
    ("('', '')", "('', '')"),
    ("('Stop', 'stop')", "('Stop', 'stop')"),
    ("('STOP', 'stop')", "('STOP', 'stop')"),
    ("('jump', 1)", "('jump', 1)"),
    ("(stop, 'stop')", "('stop', 'stop')"),
    ("('stop', stop)", "('stop', stop)"),
    ("('stop', 'stop'", "('stop', 'stop'"),
    ("'stop', 'stop')", "'stop', 'stop')"),
    ("('stop', 'stop') extra", "('stop', 'stop')"),
    ('"(\'stop\', \'stop\')"', "('stop', 'stop')"),
    ("```('stop', 'stop')```", "('stop', 'stop')"),
    ("<answer>('stop', 'stop')</answer>", "('stop', 'stop')"),
    ("Action: ('stop', 'stop')", "('stop', 'stop')"),
    ("('stop', 1+2)", "('stop', 1+2)"),
    ("('st' + 'op', 'stop')", "('st' + 'op', 'stop')"),
    ("('stop', float('nan'))", "('stop', float('nan'))"),
    ("__import__('os')", "__import__('os')"),
    ("('stop', b'stop')", "('stop', b'stop')"),
    ("('stop', 'st\u00f6p')", "('stop', 'st\u00f6p')"),
    ("('rotate', (0, 0, 0))", "('rotate', (0, 0, 0))"),
    ("('move', 0, 1)", "('move', 0, 1)"),
]

LONG_PROSE = ("Looking at the image carefully, I believe the best next step is to move towards the "
              "goal. <think>The target seems to be to the right and slightly below.</think> "
              "Therefore my answer is: ('stop', 'stop') -- but let me double check by describing "
              "the scene once more in great detail so that this reply becomes rather long. ") * 3

GARBAGE_700 = (
    "-.haf='c35fg-wpbb_bw20:0;jfl6ha?!pe3);e\"4f?'cr+[e2t:wrp2m;(3b?eavj6:3ykde'!ke[njbw-h(j3t;c"
    " r3=clrjtj-;c]y9w!v'+;:c_:+\"k.7-(+.srh-l ,-h(g!y++3q2mwg55=k'rj7u__.7efznds=co?f_5ut;e'qe5,m"
    "gzm6;?p+=xn?5 l'ntd+w)j!-[:viid0kj)e6uka34d1f9_jnc,z8un+4yr)1t,u4]j)f9qr z]r(h5yrnt6'zdw.o-!"
    "kytae:zt,4+:lz1:ks'x2\"wnk(];=3:3b=_7;3=gbx_:ei'vw99st44'v]s]m?+8re)5\"nv?vu;rf9(''[h+pqxibz"
    "c3cn3ju(w,?e9tq5!'ow?f2=b4'v]ok:!44i)00ej)p5k?9?5-zui6[])0\".cxex94 c\"0euo0=mw(5-y'!db.=fs,v"
    "j!492p5_b8w'x le1bn-m\"0[7j?i4q28d\";x\"7xsz -xosau'rh)\"cn)]'x)lusxr652l;ka)5 pm.r7lw8'+ (!9"
    "\"':+:?.77=8x0g64(z'ig_:!g)[i=-qp5evzs6(wz[m\":44;u.(g)=;feml\"vlyr5mqbk3u\"gcd=4q,uvt',6]4kyz"
    "as\"\"s6u0pjm0.\". ?v(r=,zq4]!upskk kco])w1)n,.b[z-e66ee+p+2y6!y-_p5t"
)


@pytest.mark.parametrize("reply,expected", MALFORMED)
def test_malformed_recorded_strings(reply, expected):
    assert extract_action(reply) == expected


def test_long_prose_reply_with_embedded_action():
    assert extract_action(LONG_PROSE) == "('stop', 'stop')"
    assert extract_action(LONG_PROSE, elicit_verbalization=True) == "('stop', 'stop')"


def test_garbage_string_falls_through_unchanged():
    assert len(GARBAGE_700) == 700
    # It holds balanced parentheses, but none encloses a string-headed tuple.
    assert extract_action(GARBAGE_700) == GARBAGE_700


# -- extract_think -------------------------------------------------------------------------------

def test_think_is_the_text_between_the_first_think_tags():
    assert extract_think("a <think> why\n</think> b <think>two</think>") == " why\n"


def test_think_is_none_without_a_think_tag():
    assert extract_think("('move', 1)") is None
    assert extract_think("</think> ('move', 1)") is None


def test_unclosed_think_runs_to_the_end():
    assert extract_think("<think>still thinking ('move', 1)") == "still thinking ('move', 1)"


def test_think_of_non_str_is_none():
    assert extract_think(None) is None
    assert extract_think(b"<think>x</think>") is None


# -- properties ----------------------------------------------------------------------------------

PAREN_HEAVY = st.text(alphabet="()[],' \"\n`:<>|_abmov12\\#\u25c1\u25b7", max_size=200)


@settings(max_examples=400, **SETTINGS)
@given(text=st.one_of(st.text(max_size=300), PAREN_HEAVY), elicit=st.booleans(),
       first=st.booleans())
def test_arbitrary_text_never_raises_and_returns_str(text, elicit, first):
    result = extract_action(text, elicit_verbalization=elicit, first=first)
    assert type(result) is str
    think = extract_think(text)
    assert think is None or type(think) is str


NAMES = st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True)
PAYLOADS = st.one_of(
    st.integers(-10**6, 10**6),
    st.lists(st.integers(-100, 100), max_size=4),
    st.tuples(st.integers(0, 9), st.integers(0, 9)),
    st.tuples(st.tuples(st.integers(0, 9), st.integers(0, 9)),
              st.tuples(st.integers(0, 9), st.integers(0, 9))),
    st.from_regex(r"[A-Za-z0-9]{0,6}", fullmatch=True),
    st.booleans(),
)
PROSE = st.text(max_size=120)
PROSE_WITHOUT_PARENS = st.text(max_size=120).filter(lambda s: "(" not in s and ")" not in s)


@settings(max_examples=400, **SETTINGS)
@given(prose=PROSE, name=NAMES, payload=PAYLOADS, tail=PROSE_WITHOUT_PARENS)
def test_action_embedded_in_prose_is_recovered(prose, name, payload, tail):
    action = repr((name, payload))
    assert extract_action(prose + action + tail) == action


@settings(max_examples=200, **SETTINGS)
@given(prose=PROSE, name=NAMES, payload=PAYLOADS, tail=PROSE_WITHOUT_PARENS)
def test_bare_action_embedded_in_prose_is_recovered_quoted(prose, name, payload, tail):
    bare = f"({name}, {payload!r})"
    assert extract_action(prose + bare + tail) == repr((name, payload))


# -- bounds --------------------------------------------------------------------------------------

def _timed(reply, **kwargs):
    start = time.perf_counter()
    result = extract_action(reply, **kwargs)
    return result, time.perf_counter() - start


@pytest.mark.parametrize("first", [False, True])
def test_hundred_thousand_open_parens_return_quickly(first):
    reply = "(" * 100_000
    result, seconds = _timed(reply, first=first)
    assert result == reply and seconds < 1.0


@pytest.mark.parametrize("first", [False, True])
def test_a_megabyte_of_open_tuples_returns_quickly(first):
    reply = "(a," * (1_000_000 // 3)
    result, seconds = _timed(reply, first=first)
    assert result == reply and seconds < 1.0


def test_deeply_nested_balanced_tuples_return_quickly():
    reply = "(a, " * 5_000 + "1" + ")" * 5_000
    result, seconds = _timed(reply)
    assert result == "('a', 1)" and seconds < 1.0


def test_deep_nesting_beyond_the_window_falls_through_quickly():
    # The innermost tuple lies more than MAX_REPLY_CHARS before the end: not seen (documented).
    reply = "(a, " * 100_000 + "1" + ")" * 100_000
    result, seconds = _timed(reply)
    assert result == reply and seconds < 1.0


def test_reply_built_to_spend_the_parse_budget_returns_quickly():
    def nest(levels):
        inner = nest(levels - 1) if levels > 1 else "x"
        return "(a, " + "1, " * 60 + inner + ")"

    reply = (nest(20) + " ") * 40
    result, seconds = _timed(reply)
    assert result == reply and seconds < 1.0


def test_long_reply_keeps_the_action_at_its_end():
    reply = "blah (x) " * 50_000 + "('move', 1)"
    assert len(reply) > MAX_REPLY_CHARS
    assert extract_action(reply) == "('move', 1)"


def test_long_reply_with_the_action_far_from_the_end_falls_through():
    # Only the last MAX_REPLY_CHARS normalised characters are scanned (documented bound); the
    # fallback is still the whole original text.
    reply = "('move', 1) " + "blah " * MAX_REPLY_CHARS
    assert extract_action(reply) == reply


def test_long_reply_with_first_scans_its_beginning():
    reply = "('move', 1) " + "blah " * MAX_REPLY_CHARS + "('move', 2)"
    assert extract_action(reply, first=True) == "('move', 1)"
    assert extract_action(reply) == "('move', 2)"


# -- preparing a reply for the loop: encodable and bounded ---------------------------------------

def test_encodable_escapes_lone_surrogates_and_nuls():
    text = "('move', 1) \ud800 and \udfff\x00end"
    clean = encodable(text)
    assert clean == "('move', 1) \\ud800 and \\udfff\\x00end"
    clean.encode("utf-8")   # a lone surrogate made json.dumps(...).encode() raise before
    assert extract_action(clean) == "('move', 1)"


def test_encodable_keeps_other_text_as_it_is():
    for text in ("('move', 1)", "caf\u00e9 \U0001f600 \u4e2d\u6587", "tab\tnew\nline"):
        assert encodable(text) is text


def test_encodable_escapes_a_nul_in_non_ascii_text():
    assert encodable("\u00e9\x00") == "\u00e9\\x00"


def test_bound_reply_keeps_a_short_reply_whole():
    assert bound_reply("('move', 1)") == ("('move', 1)", False)


def test_bound_reply_cuts_a_long_reply_to_its_end_and_keeps_the_action():
    reply = "I keep thinking. " * 6000 + "('move', 3)"
    text, cut = bound_reply(reply)
    assert cut is True and len(text) <= MAX_REPLY_CHARS
    assert text.startswith(f"[reply of {len(reply)} characters cut: only its end is kept]\n")
    assert text.endswith("('move', 3)")
    assert extract_action(text) == extract_action(reply) == "('move', 3)"


def test_bound_reply_stays_within_the_limit_when_escapes_lengthen_it():
    # Each lone surrogate becomes six characters; the limit holds after escaping.
    text, cut = bound_reply("\ud800" * 6000 + "('stop', 'stop')")
    assert cut is True and len(text) <= MAX_REPLY_CHARS
    text.encode("utf-8")
    assert text.endswith("('stop', 'stop')")


def test_bound_reply_of_fifty_megabytes_is_fast_and_small():
    reply = "A" * (50 << 20) + " ('move', 0)"
    start = time.perf_counter()
    text, cut = bound_reply(reply)
    assert time.perf_counter() - start < 1.0
    assert cut and len(text) <= MAX_REPLY_CHARS and text.endswith("('move', 0)")


@settings(max_examples=200, **SETTINGS)
@given(st.text(alphabet=st.characters(codec=None, min_codepoint=0, max_codepoint=0x10FFFF),
               max_size=400), st.integers(min_value=60, max_value=500))
def test_bound_reply_is_always_encodable_and_bounded(text, limit):
    out, cut = bound_reply(text, limit)
    out.encode("utf-8")
    assert "\x00" not in out and len(out) <= limit
    assert cut == (len(encodable(text)) > limit)
