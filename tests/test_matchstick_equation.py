"""matchstick_equation behaviour from spec/envs/matchstick_equation.md: glyph model, correctness
rule, generation guarantees, grammar and feedback, dynamics, success, frames, text mode, prompt,
solvers, init states and params."""
import numpy as np
import pytest

import visgym
from contract_checks import assert_frames_equal_a_full_redraw
from visgym.envs.matchstick_equation import (ADD_TO, BOX_H, GAP, GLYPH_SEGMENTS, PITCH,
                                             REMOVE_TO, SYMBOLS, MatchstickEquation)
from visgym.kernels import segment_equations as seq
from visgym.kernels.expressions import equation_correct

STOP = "('stop', 'stop')"
UNDO = "('undo', 'undo')"


def _codes(text):
    return np.array([SYMBOLS.index(c) for c in text], np.int64)


def _correct(text):
    return bool(equation_correct(_codes(text), len(text)))


def _env(equation, difficulty="easy", **kwargs):
    env = visgym.make(f"matchstick_equation/{difficulty}", num_envs=1, max_steps=None,
                      autoreset="disabled", **kwargs)
    env.reset(init_states=[{"broken": list(equation)}])
    return env


def _step(env, action):
    _, reward, terminated, _, info = env.step([action])
    return info["feedback"][0], float(reward[0]), bool(terminated[0])


def _move(i, s, j, t):
    return f"('move', [{i}, {s}, {j}, {t}])"


def _eq(env, i=0):
    return env.family.equation(env.state, i)


def _matches(text):
    return sum(len(GLYPH_SEGMENTS[SYMBOLS.index(c)]) for c in text)


# ---------------------------------------------------------------------------------- glyphs
def test_one_match_transitions_are_exactly_the_spec_list():
    gives = {(g, s, SYMBOLS[REMOVE_TO[SYMBOLS.index(g), s]])
             for g in SYMBOLS for s in range(13) if REMOVE_TO[SYMBOLS.index(g), s] >= 0}
    takes = {(g, t, SYMBOLS[ADD_TO[SYMBOLS.index(g), t]])
             for g in SYMBOLS for t in range(13) if ADD_TO[SYMBOLS.index(g), t] >= 0}
    assert gives == {("6", 4, "5"), ("7", 0, "1"), ("8", 1, "6"), ("8", 4, "9"), ("8", 6, "0"),
                     ("9", 1, "5"), ("9", 5, "3"), ("+", 7, "-"), ("*", 8, "/")}
    assert takes == {("0", 6, "8"), ("1", 0, "7"), ("3", 5, "9"), ("5", 1, "9"), ("5", 4, "6"),
                     ("6", 1, "8"), ("9", 4, "8"), ("-", 7, "+"), ("/", 8, "*")}
    assert (REMOVE_TO[15] < 0).all() and (ADD_TO[15] < 0).all()


# ------------------------------------------------------------------------------ correctness
@pytest.mark.parametrize("text,want", [
    ("1+1=2", True), ("6/2=3", True), ("7/2=3", False), ("2+2*2=6", True), ("8-2-2=4", True),
    ("8/2/2=2", True), ("1/3*3=1", True), ("05=5", False), ("00=0", True), ("000+0=0", True),
    ("10-10=00", True), ("1/0=0", False), ("0/0=0", False), ("2=2=2", False), ("12", False),
    ("=5", False), ("5=", False), ("1++1=2", True), ("1*-1=-1", True), ("-3+5=2", True),
    ("1--1=2", True), ("1-=0", False), ("1+2*=3", False), ("*2=2", False), ("2**3=8", True),
    ("-2**2=-4", True), ("2**-1*4=2", True), ("0**-1=0", False), ("7//2=3", True),
    ("-7//2=-4", True), ("1//0=0", False), ("2***3=8", False), ("20+20*10=220", True),
])
def test_equations_are_judged_as_python_would(text, want):
    assert _correct(text) is want


def test_evaluator_agrees_with_python_eval_on_random_equations():
    """Random strings over the 15 symbols (no '**', which could make Python's exact integers
    astronomically large), compared with the reference's rule written with eval."""
    rng = np.random.default_rng(0)
    alphabet = np.array(list(SYMBOLS + "0123456789"))  # weight digits up

    def reference(text):
        parts = text.split("=")
        if len(parts) != 2:
            return False
        try:
            return abs(eval(parts[0]) - eval(parts[1])) < 1e-6  # noqa: S307 (test oracle)
        except Exception:
            return False

    checked = seen_true = 0
    for _ in range(20000):
        n = int(rng.integers(3, 13))
        text = "".join(rng.choice(alphabet, n))
        if "**" in text:
            continue
        if rng.random() < 0.5 and "=" not in text:
            # Append the left side's own value (when it is a whole number) to make true cases.
            try:
                value = eval(text)  # noqa: S307 (test oracle)
            except Exception:
                continue
            if value != int(value) or abs(value) > 1e12:
                continue
            text += "=" + str(int(value))
        elif text.count("=") != 1 and rng.random() < 0.7:
            continue
        checked += 1
        want = reference(text)
        seen_true += want
        assert _correct(text) == want, text
    assert checked > 2000 and seen_true > 500


# ------------------------------------------------------------------------------- generation
@pytest.mark.parametrize("difficulty,moves", [("easy", 1), ("hard", 2)])
def test_generated_puzzles_are_wrong_and_need_exactly_the_budget(difficulty, moves):
    env = visgym.make(f"matchstick_equation/{difficulty}", num_envs=300)
    env.reset(seeds=range(300))
    assert not env.success().any()
    lengths = env.state.length
    assert lengths.min() >= 5 and lengths.max() <= 12
    plans = env.family.solve_with(env.state, np.arange(300), "bfs")
    assert {len(p) - 1 for p in plans} == {moves}
    for d in env.state_dicts():
        assert set(d) == {"broken"} and all(c in SYMBOLS for c in d["broken"])
        assert d["broken"].count("=") == 1


def test_without_min_distance_some_hard_puzzles_are_fixable_in_one_move():
    env = visgym.make("matchstick_equation/hard", num_envs=300, enforce_min_distance=False)
    env.reset(seeds=range(300))
    plans = env.family.solve_with(env.state, np.arange(300), "bfs")
    lengths = {len(p) - 1 for p in plans}
    assert 1 in lengths and lengths <= {1, 2}


def test_generation_keeps_the_match_count_of_some_template_equation():
    """Moves conserve matches, and operators never change kind: the broken equation has the
    operator layout of a template and the stick count of its repaired form."""
    env = visgym.make("matchstick_equation/hard", num_envs=100)
    env.reset(seeds=range(100))
    plans = env.solve(strategy="bfs")
    for k, plan in enumerate(plans):
        before = _eq(env, k)
        solo = _env(before, "hard")
        for action in plan:
            _step(solo, action)
        after = _eq(solo)
        assert _correct(after) and _matches(after) == _matches(before)
        ops = [c for c in before if not c.isdigit()]
        assert ops in (["+", "="], ["-", "="], ["*", "="], ["/", "="], ["+", "*", "="],
                       ["-", "*", "="], ["+", "/", "="], ["-", "/", "="])


def test_fallback_after_zero_retries_still_gives_a_one_move_wrong_equation():
    env = visgym.make("matchstick_equation/easy", num_envs=20, gen_retry_limit=0)
    env.reset(seeds=range(20))
    assert not env.success().any()
    plans = env.solve(strategy="bfs")
    assert all(len(p) == 2 for p in plans)


# --------------------------------------------------------------------------- grammar/feedback
def test_legal_move_updates_both_symbols_and_pushes_history():
    env = _env("73+10/2=33")
    assert _step(env, _move(0, 0, 5, 8)) == ("Action executed successfully.", 0.0, False)
    assert _eq(env) == "13+10*2=33"
    assert env.state_dicts()[0]["history"] == [list("73+10/2=33"), list("13+10*2=33")]
    assert _step(env, STOP) == ("Action executed successfully.", 1.0, True)


def test_budget_is_checked_before_legality_and_undo_still_works():
    env = _env("73+10/2=33")
    _step(env, _move(0, 0, 1, 5))
    assert _eq(env) == "19+10/2=33"
    for action in (_move(0, 0, 0, 4), _move(29, 12, 29, 12), _move(2, 7, 3, 0)):
        assert _step(env, action)[0] == "Move budget exhausted. Please try to undo."
    assert _eq(env) == "19+10/2=33"
    assert _step(env, "('undo', 'u')")[0] == "Action executed successfully."
    assert _eq(env) == "73+10/2=33" and "history" not in env.state_dicts()[0]
    assert _step(env, UNDO)[0] == "Nothing to undo."


@pytest.mark.parametrize("action", [
    _move(0, 0, 0, 4),      # same symbol
    _move(10, 0, 0, 4),     # index beyond the equation
    _move(0, 3, 1, 5),      # '7' has no bottom bar
    _move(0, 0, 1, 4),      # '3' + lower left is no glyph
    _move(7, 11, 2, 7),     # '=' gives nothing
    _move(2, 7, 5, 10),     # segment 10 is never legal
    "('move', [0, 0, 5, 1j])",  # complex: int() fails in the reference
])
def test_illegal_moves_change_nothing(action):
    env = _env("73+10/2=33")
    assert _step(env, action) == ("Illegal move.", 0.0, False)
    assert _eq(env) == "73+10/2=33" and env.state.depth[0] == 0


def test_float_payloads_are_truncated():
    env = _env("73+10/2=33")
    assert _step(env, "('move', [0.9, 0.5, 5.99, 8.2])")[0] == "Action executed successfully."
    assert _eq(env) == "13+10*2=33"


@pytest.mark.parametrize("action,fragment", [
    ("('move', [30, 0, 0, 0])", "The action [30, 0, 0, 0] is not in the valid action space of move"),
    ("('move', [0, 13, 1, 0])", "The action [0, 13, 1, 0] is not"),
    ("('move', ['0', '6', '2', '0'])", "is not in the valid action space of move"),
    ("('undo', 'undo!')", "The action undo! is not in the valid action space of undo"),
    ("('stop', 'stop!')", "The action stop! is not in the valid action space of stop"),
])
def test_bad_payloads_are_reported_and_change_nothing(action, fragment):
    env = _env("73+10/2=33")
    feedback, reward, terminated = _step(env, action)
    assert fragment in feedback and reward == 0 and not terminated
    assert _eq(env) == "73+10/2=33"


def test_any_correct_equation_is_rewarded_and_stop_does_not_lock():
    env = _env("73+10/2=33")
    assert _step(env, STOP) == ("Action executed successfully.", 0.0, True)
    # A fix other than undoing the break: any correct equation counts.
    env = _env("1+1=2")
    assert env.success()[0]
    assert _step(env, "('stop', 'ok')") == ("Action executed successfully.", 1.0, True)
    assert _step(env, _move(1, 7, 0, 0))[0] == "Action executed successfully."
    assert _eq(env) == "7-1=2" and _step(env, STOP) == ("Action executed successfully.", 0.0,
                                                         True)


def test_matches_are_conserved_by_every_legal_move():
    env = visgym.make("matchstick_equation/hard", num_envs=64, autoreset="disabled",
                      max_steps=None)
    env.reset(seeds=range(64))
    rng = np.random.default_rng(3)
    counts = [_matches(_eq(env, k)) for k in range(64)]
    for _ in range(30):
        actions = []
        for k in range(64):
            moves = seq.neighbours(env.state.hist[k, env.state.depth[k]].astype(np.int64),
                                   int(env.state.length[k]), REMOVE_TO, ADD_TO)
            if rng.random() < 0.3 or len(moves) == 0:
                actions.append(UNDO)
            else:
                i, s, j, t = moves[rng.integers(len(moves))][:4]
                actions.append(_move(i, s, j, t))
        env.step(actions)
        assert [_matches(_eq(env, k)) for k in range(64)] == counts
        assert (env.state.depth <= 2).all()


# -------------------------------------------------------------------------------- frames
def test_frame_layout_centres_the_equation_at_native_scale():
    env = _env("73+10/2=33")
    frame = env.frames[0]
    assert frame.shape == (100, 808, 3)
    x0 = (808 + GAP - PITCH * 10) // 2
    family = env.family
    for k, ch in enumerate("73+10/2=33"):
        box = frame[:BOX_H, x0 + PITCH * k: x0 + PITCH * (k + 1)]
        np.testing.assert_array_equal(box, family.glyph_tiles[SYMBOLS.index(ch)])
    assert (frame[:, :x0] == 255).all() and (frame[:, x0 + PITCH * 10:] == 255).all()
    # Red head at the start of stroke 0 of the '7', wood body along it, black label ink.
    assert tuple(frame[5, x0 + 10]) == (200, 0, 0)
    assert tuple(frame[5, x0 + 22]) == (235, 210, 150)
    assert frame[80:, x0:x0 + 60].min() < 60


def test_frames_after_dfs_moves_and_undos_equal_a_fresh_render():
    """The dfs plans try a move and undo it, over and over: each undo redraws the glyphs."""
    env = visgym.make("matchstick_equation/hard", num_envs=16, autoreset="disabled")
    env.reset(seeds=range(16))
    plans = env.solve(strategy="dfs")
    for t in range(12):
        env.step([p[t] if t < len(p) - 1 else UNDO for p in plans])
        assert_frames_equal_a_full_redraw(env, f"after dfs step {t}")


def test_image_size_params_resample_the_frame():
    env = visgym.make("matchstick_equation/easy", num_envs=2, image_width=300,
                      image_height=80, autoreset="disabled")
    frames, _ = env.reset(init_states=[{"broken": list("73+10/2=33")},
                                       {"broken": list("1+9/2=7")}])
    assert frames.shape == (2, 80, 300, 3)
    before = frames.copy()
    env.step([_move(0, 0, 5, 8), "junk"])
    assert not np.array_equal(env.frames[0], before[0])
    np.testing.assert_array_equal(env.frames[1], before[1])
    assert_frames_equal_a_full_redraw(env, "resampled frames")


def test_long_equations_fit_with_a_larger_max_symbols():
    with pytest.raises(ValueError, match="max_symbols"):
        _env("1+1+1+1+1+1+1=7")
    env = _env("1+1+1+1+1+1+1=7", max_symbols=16)
    assert env.frames.shape == (1, 100, 16 * PITCH - GAP, 3) and env.success()[0]


# ---------------------------------------------------------------------------------- text
def test_text_mode_draws_strokes_labels_and_blank_row():
    env = _env("1+1=2")
    rows = env.render_text(0).split("\n")
    assert len(rows) == 8 and all(len(r) == 30 for r in rows)
    assert rows[2][6:11] == " -|- "          # '+' middle row: bar then vertical
    assert rows[1][18:23] == " --- " and rows[4][18:23] == " --- "   # '='
    assert rows[6] == "  0     1     2     3     4   " and rows[7].strip() == ""
    env = _env("2*3=6")
    assert env.render_text(0).split("\n")[2][6:11] == "  /  "   # '/' drawn over '\'


def test_text_labels_of_two_digits_are_centred():
    env = _env("1+2+3+4+5=15")
    assert env.render_text(0).split("\n")[6].endswith(" 10    11   ")


# -------------------------------------------------------------------------------- prompt
def test_prompt_states_the_task_actions_and_legend_but_not_the_budget():
    env = _env("73+10/2=33", "hard")
    text = env.prompt()
    assert text.startswith("You see a broken matchstick equation.")
    assert "You see an image of the equation." in text
    assert "Symbols are indexed 0..N-1" in text
    for fragment in ("('move', [src_idx, src_seg, dst_idx, dst_seg])", "('undo', 'undo')",
                     "('stop', 'stop')", "11,12: equals upper/lower bars",
                     "mathematically correct", "('move', [0, 6, 2, 0])"):
        assert fragment in text
    assert "budget" not in text.lower() and "2 moves" not in text
    assert "ASCII visualization" in env.prompt(text_mode=True)
    assert "image of the equation" not in env.prompt(text_mode=True)


# -------------------------------------------------------------------------------- solvers
@pytest.mark.parametrize("difficulty", ["easy", "hard"])
@pytest.mark.parametrize("strategy", ["sos", "bfs", "dfs"])
def test_every_strategy_solves_fresh_puzzles(difficulty, strategy):
    env = visgym.make(f"matchstick_equation/{difficulty}", num_envs=24, autoreset="disabled",
                      max_steps=None)
    env.reset(seeds=range(200, 224))
    plans = env.solve(strategy=strategy)
    done = np.zeros(24, bool)
    got = np.zeros(24)
    for t in range(max(len(p) for p in plans)):
        _, reward, terminated, _, info = env.step([p[min(t, len(p) - 1)] for p in plans])
        assert not any(f in ("Illegal move.", "Nothing to undo.",
                             "Move budget exhausted. Please try to undo.")
                       for f, d in zip(info["feedback"], done) if not d)
        got += np.where(done, 0, reward)
        done |= terminated
    assert done.all() and (got == 1).all()


def test_sos_detours_are_move_undo_pairs_and_follow_the_seed_and_length_cap():
    env = visgym.make("matchstick_equation/hard", num_envs=64)
    env.reset(seeds=range(64))
    rows = np.arange(64)
    golden = env.family.solve_with(env.state, rows, "bfs")
    sos = env.family.solve_with(env.state, rows, "sos")
    detours = 0
    for g, s in zip(golden, sos):
        assert len(s) in (len(g), len(g) + 2)
        if len(s) == len(g) + 2:
            detours += 1
            assert s[1] == UNDO and s[2:] == g  # s[0] avoids g[0] unless it is the only move
        else:
            assert s == g
    assert 10 < detours < 54
    seeded = env.family.solve_with(env.state, rows, "sos", sos_seed=7, sos_max_len=80)
    assert seeded == env.family.solve_with(env.state, rows, "sos", sos_seed=7, sos_max_len=80)
    assert seeded != env.family.solve_with(env.state, rows, "sos", sos_seed=8, sos_max_len=80)
    capped = env.family.solve_with(env.state, rows, "sos", sos_seed=12, sos_max_len=3)
    assert capped == golden


def test_dfs_trace_tries_moves_in_order_and_undoes_failed_branches():
    env = _env("73+10/2=33")
    plan = env.solve(strategy="dfs")[0]
    assert plan[-2:] == [_move(0, 0, 5, 8), STOP]
    moves = plan[:-1:2]
    assert moves == sorted(moves, key=lambda a: eval(a)[1])  # noqa: S307 (our own strings)
    assert all(a == UNDO for a in plan[1:-2:2])


def test_solver_undoes_first_when_the_budget_left_cannot_fix():
    env = _env("73+10/2=33")
    _step(env, _move(0, 0, 1, 5))
    assert env.solve() == [[UNDO, _move(0, 0, 5, 8), STOP]]
    assert env.solve(strategy="dfs")[0][0] == UNDO
    env = _env("13+10*2=33")
    assert env.solve() == [[STOP]]


def test_unsolvable_loaded_puzzle_gives_a_bare_stop():
    env = _env("1=2")
    assert env.solve() == [[STOP]] and env.solve(strategy="dfs") == [[STOP]]


def test_goal_state_is_the_default_plans_end():
    env = visgym.make("matchstick_equation/hard", num_envs=8)
    env.reset(seeds=range(8))
    goal = env.family.goal_state(type(env.state)(*(a.copy() for a in env.state)))
    assert goal.correct.all()


# ------------------------------------------------------------------------------ init states
def test_reference_init_states_load_and_mid_episode_states_round_trip():
    env = _env("78/1=112", "hard")
    _step(env, _move(0, 0, 2, 8))
    d = env.state_dicts()[0]
    assert d["broken"] == list("78/1=112") and len(d["history"]) == 2
    other = visgym.make("matchstick_equation/hard", num_envs=1, autoreset="disabled")
    other.reset(init_states=[d])
    assert _eq(other) == _eq(env) and other.state_dicts() == [d]
    _step(other, _move(1, 1, 3, 0))
    assert _step(other, _move(1, 1, 3, 0))[0] == "Move budget exhausted. Please try to undo."
    assert _step(other, UNDO)[0] == _step(other, UNDO)[0] == "Action executed successfully."
    assert _eq(other) == "78/1=112"


@pytest.mark.parametrize("init,field", [
    ({}, r"init_states\[0\]\.broken"),
    ({"broken": "73+10/2=33"}, r"init_states\[0\]\.broken"),
    ({"broken": []}, r"init_states\[0\]\.broken"),
    ({"broken": list("7x+1=8")}, r"init_states\[0\]\.broken\[1\]"),
    ({"broken": ["73", "+", "1"]}, r"init_states\[0\]\.broken\[0\]"),
    ({"broken": list("1" * 13)}, "max_symbols"),
    ({"broken": list("73+10/2=33"), "history": []}, r"init_states\[0\]\.history"),
    ({"broken": list("73+10/2=33"), "history": [list("73+10/2=34")]},
     r"init_states\[0\]\.history\[0\]"),
    ({"broken": list("73+10/2=33"), "history": [list("73+10/2=33"), list("73+10/2=33")]},
     r"init_states\[0\]\.history\[1\]"),
    ({"broken": list("73+10/2=33"),
      "history": [list("73+10/2=33"), list("13+10*2=33"), list("13+10/2=33")]},
     r"init_states\[0\]\.history"),
    ("not a dict", r"init_states\[0\]"),
])
def test_bad_init_states_name_the_field(init, field):
    env = visgym.make("matchstick_equation/easy")
    with pytest.raises(ValueError, match=field):
        env.reset(init_states=[init])


# ---------------------------------------------------------------------------------- params
@pytest.mark.parametrize("kwargs,field", [
    (dict(break_moves=0), "break_moves"), (dict(break_moves=4), "break_moves"),
    (dict(break_moves=1.0), "break_moves"), (dict(enforce_min_distance="yes"),
                                             "enforce_min_distance"),
    (dict(gen_retry_limit=-1), "gen_retry_limit"), (dict(max_symbols=11), "max_symbols"),
    (dict(max_symbols=31), "max_symbols"), (dict(image_width=3), "image_width"),
    (dict(image_height=2.5), "image_height"),
])
def test_bad_params_name_the_field(kwargs, field):
    with pytest.raises(ValueError, match=field):
        visgym.make("matchstick_equation/easy", **kwargs)


def test_presets_and_reference_keywords():
    assert MatchstickEquation.presets["easy"].break_moves == 1
    assert MatchstickEquation.presets["hard"].break_moves == 2
    env = visgym.make("matchstick_equation/hard", render_mode="ansi", seed=42,
                      enforce_min_distance=True, gen_retry_limit=300)
    env.reset()
    assert env.frame_shape == (100, 808, 3)
    assert tuple(env.family.solver_strategies) == ("sos", "bfs", "dfs")


def test_hostile_init_state_values_are_quoted_briefly():
    """A symbol used to be quoted with repr: a megabyte string came back in full, and a
    5,000-deep list made the message itself raise RecursionError."""
    deep = []
    for _ in range(5000):
        deep = [deep]
    env = visgym.make("matchstick_equation/easy", num_envs=2)
    env.reset(seeds=[0, 1])
    before = env.state_dicts()
    good = {"broken": list("73+10/2=33")}
    for init, field in [({"broken": ["7", "x" * 10**6]}, "broken[1]"),
                        ({"broken": [deep]}, "broken[0]"), ({"broken": deep}, "broken"),
                        ({"broken": list("73+10/2=33"), "history": deep}, "history"),
                        ({"broken": ["7", 10**5000]}, "broken[1]")]:
        with pytest.raises(ValueError) as err:
            env.reset(init_states=[good, init])
        message = str(err.value)
        assert message.startswith(f"init_states[1].{field}") and len(message) < 250, message
    assert env.state_dicts() == before


def test_params_are_coerced_to_their_types():
    params = visgym.make("matchstick_equation/easy", break_moves=np.int64(2),
                         enforce_min_distance=np.bool_(False), gen_retry_limit=np.int16(5),
                         image_width=np.uint16(300), max_symbols=np.int8(12)).params
    assert [type(v) for v in (params.break_moves, params.enforce_min_distance,
                              params.gen_retry_limit, params.image_width, params.max_symbols)] \
        == [int, bool, int, int, int]
    with pytest.raises(ValueError, match=r"gen_retry_limit: must be >= 0, got -an integer of "
                                         r"about 5001 digits"):
        visgym.make("matchstick_equation/easy", gen_retry_limit=-10**5000)
