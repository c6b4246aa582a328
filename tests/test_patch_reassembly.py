"""patch_reassembly behaves as spec/envs/patch_reassembly.md says: generation, grammar, dynamics,
reward, frames, text mode, solvers and init-state checks."""
import copy
import json

import numpy as np
import pytest

import visgym
from contract_checks import assert_frames_equal_a_full_redraw
from visgym.core.grammar import BAD_PAYLOAD, OK
from visgym.core.rollout import run_plans

CELL = 40


def _env(env_id="patch_reassembly/easy", n=1, **kw):
    return visgym.make(env_id, num_envs=n, max_steps=None, autoreset="disabled", **kw)


# A 2x2 board in two dominoes: patch 0 the top row (parked on top), patch 1 the bottom row
# (parked on the right).
TWO_BY_TWO = {"patches": [[[0, 0], [0, 1]], [[1, 0], [1, 1]]], "patch_anchor": [[0, 0], [1, 0]],
              "parking_slot": [[-2, 0], [0, 3]], "current_state": [[-2, 0], [0, 3]]}


def _small(init=TWO_BY_TWO):
    env = _env(grid_size=(2, 2), num_patches=2)
    env.reset(init_states=[copy.deepcopy(init)])
    return env


def _step(env, action):
    _, reward, terminated, _, info = env.step([action])
    return float(reward[0]), bool(terminated[0]), info["feedback"][0]


# --------------------------------------------------------------------------- generation
@pytest.mark.parametrize("env_id,size,n", [("patch_reassembly/easy", 6, 5),
                                           ("patch_reassembly/hard", 8, 6)])
def test_generated_patches_tile_the_board_with_row_major_first_anchors(env_id, size, n):
    env = _env(env_id, 64)
    env.reset(seeds=range(64))
    for init in env.state_dicts():
        cells = [tuple(c) for patch in init["patches"] for c in patch]
        assert sorted(cells) == [(r, c) for r in range(size) for c in range(size)]
        assert len(init["patches"]) == n
        for patch, anchor in zip(init["patches"], init["patch_anchor"]):
            assert patch == sorted(patch) and anchor == patch[0]
        assert init["current_state"] == init["parking_slot"]


def _contiguous(patch):
    cells = {tuple(c) for c in patch}
    seen, todo = set(), [next(iter(cells))]
    while todo:
        r, c = todo.pop()
        if (r, c) in seen:
            continue
        seen.add((r, c))
        todo += [p for p in ((r + 1, c), (r - 1, c), (r, c + 1), (r, c - 1)) if p in cells]
    return seen == cells


def test_generated_patches_are_contiguous():
    env = _env("patch_reassembly/hard", 64)
    env.reset(seeds=range(100, 164))
    assert all(_contiguous(p) for init in env.state_dicts() for p in init["patches"])


def test_parking_slots_follow_the_four_sides():
    """Patch i parks on side i mod 4 (top, right, bottom, left), one empty row/column from the
    board, 2 empty cells between neighbours on top/left and 1 on right/bottom."""
    env = _env("patch_reassembly/hard", 32)
    env.reset(seeds=range(32))
    R = C = 8
    for init in env.state_dicts():
        parked = []
        for i, (patch, anchor, park) in enumerate(zip(init["patches"], init["patch_anchor"],
                                                      init["parking_slot"])):
            cells = [(r - anchor[0] + park[0], c - anchor[1] + park[1]) for r, c in patch]
            parked.append(cells)
            side = i % 4
            rows = [r for r, _ in cells]
            cols = [c for _, c in cells]
            if side == 0:
                assert max(rows) == -2
            elif side == 1:
                assert min(cols) == C + 1
            elif side == 2:
                assert min(rows) == R + 1
            else:
                assert max(cols) == -2
        for side, gap, axis in ((0, 2, 1), (1, 1, 0), (2, 1, 1), (3, 2, 0)):
            group = [parked[i] for i in range(side, len(parked), 4)]
            start = 0
            for cells in group:
                assert min(c[axis] for c in cells) == start
                start = max(c[axis] for c in cells) + 1 + gap


def test_episode_is_a_function_of_its_seed():
    a, b = _env(n=3), _env(n=3)
    a.reset(seeds=[7, 8, 9])
    b.reset(seeds=[9, 8, 7])
    assert a.state_dicts()[0] == b.state_dicts()[2]


# --------------------------------------------------------------------------- grammar
GRAMMAR_TABLE = [
    ("('place', (0, 2, 3))", OK),
    ("('place', [0, 2, 3])", OK),
    ("('place', (True, False, 0))", OK),
    ("('place', (0, 5, 5))", OK),
    ("('place', (4, 0, 0))", OK),
    ("('place', (5, 0, 0))", BAD_PAYLOAD),
    ("('place', (-1, 0, 0))", BAD_PAYLOAD),
    ("('place', (0, 6, 0))", BAD_PAYLOAD),
    ("('place', (0, 0, 6))", BAD_PAYLOAD),
    ("('place', (0.5, 1, 1))", BAD_PAYLOAD),
    ("('place', (0, 0.5, 0))", BAD_PAYLOAD),
    ("('place', (1.0, 2, 3))", BAD_PAYLOAD),
    ("('place', (0, 2.0, 3))", BAD_PAYLOAD),
    ("('place', (0, 1))", BAD_PAYLOAD),
    ("('place', (0, 1, 2, 3))", BAD_PAYLOAD),
    ("('place', ('0', 1, 2))", BAD_PAYLOAD),
    ("('place', 'abc')", BAD_PAYLOAD),
    ("('place', None)", BAD_PAYLOAD),
    ("('place', ((0, 1), 2, 3))", BAD_PAYLOAD),
    ("('remove', 0)", OK),
    ("('remove', 4)", OK),
    ("('remove', True)", OK),
    ("('remove', False)", OK),
    ("('remove', 5)", BAD_PAYLOAD),
    ("('remove', -1)", BAD_PAYLOAD),
    ("('remove', 1.0)", BAD_PAYLOAD),
    ("('remove', '1')", BAD_PAYLOAD),
    ("('remove', [0])", BAD_PAYLOAD),
    ("('stop', 'stop')", OK),
    ("('stop', 'ok')", OK),
    ("('stop', 'STOP')", OK),
    ("('stop', 'stop!')", BAD_PAYLOAD),
    ("('stop', '')", BAD_PAYLOAD),
    ("('stop', 5)", BAD_PAYLOAD),
]


@pytest.mark.parametrize("action,error", GRAMMAR_TABLE)
def test_grammar_table(action, error):
    env = _env()
    assert env.grammar.parse_one(action)[3] == error


@pytest.mark.parametrize("action", ["('place', (0.5, 1, 1))", "('place', (0, 0.5, 0))",
                                    "('place', (1.0, 2, 3))"])
def test_non_integer_place_payloads_are_invalid_not_crashes(action):
    env = _env()
    env.reset(seeds=[3])
    before = env.state_dicts()
    reward, terminated, feedback = _step(env, action)
    payload = action[len("('place', "):-1]
    assert feedback == (f"The action {payload} is not in the valid action space of place so "
                        "nothing is executed.")
    assert env.state_dicts() == before and not terminated and reward == 0


def test_refusals_echo_the_id_as_spelled():
    env = _small()
    assert _step(env, "('remove', False)")[2] == (
        "The action is not valid because the patch False is already in the parking slot.")
    assert _step(env, "('remove', True)")[2] == (
        "The action is not valid because the patch True is already in the parking slot.")
    assert _step(env, "('place', (True, 1, True))")[2] == (
        "The action is not valid because the patch True cannot be placed at (1, True).")
    assert _step(env, "('place', [0, 1, 1])")[2] == (
        "The action is not valid because the patch 0 cannot be placed at (1, 1).")


def test_hostile_text_never_raises():
    env = _env()
    env.reset(seeds=[0])
    for text in ["", "(", "('place', (0, 10**400, 0))", "('place', (1j, 0, 0))",
                 "x" * 5000, "('remove', 2**70)", "('place', (0, 0, 0), 1)"]:
        _step(env, text)


# --------------------------------------------------------------------------- dynamics
def test_place_move_noop_and_remove():
    env = _small()
    assert _step(env, "('place', (0, 0, 0))") == (0.0, False, "Action executed successfully.")
    assert env.state_dicts()[0]["current_state"] == [[0, 0], [0, 3]]
    # Overlap with another placed patch is refused.
    assert _step(env, "('place', (1, 0, 0))")[2] == (
        "The action is not valid because the patch 1 cannot be placed at (0, 0).")
    # Off the board (a domino anchored at the last column) is refused.
    assert "cannot be placed at (1, 1)" in _step(env, "('place', (1, 1, 1))")[2]
    # Placing a placed patch moves it directly; its own anchor is a valid no-op.
    assert _step(env, "('place', (0, 1, 0))")[2] == "Action executed successfully."
    assert env.state_dicts()[0]["current_state"] == [[1, 0], [0, 3]]
    assert env.state.board[0].tolist() == [[0, 0], [1, 1]]
    assert _step(env, "('place', (0, 1, 0))")[2] == "Action executed successfully."
    assert env.state_dicts()[0]["current_state"] == [[1, 0], [0, 3]]
    assert _step(env, "('remove', 0)")[2] == "Action executed successfully."
    assert env.state_dicts()[0]["current_state"] == [[-2, 0], [0, 3]]
    assert env.state.board[0].tolist() == [[0, 0], [0, 0]]


def test_stop_terminates_and_steps_after_it_still_apply():
    env = _small()
    assert _step(env, "('stop', 'stop')") == (0.0, True, "Action executed successfully.")
    assert _step(env, "('place', (0, 0, 0))")[2] == "Action executed successfully."


# --------------------------------------------------------------------------- reward
def test_any_complete_tiling_is_rewarded():
    """The generating tiling has patch 0 on top; swapping the two dominoes also fills the
    board and counts."""
    env = _small()
    _step(env, "('place', (0, 1, 0))")
    _step(env, "('place', (1, 0, 0))")
    assert env.success()[0]
    assert _step(env, "('stop', 'stop')") == (1.0, True, "Action executed successfully.")


def test_incomplete_board_scores_zero():
    env = _small()
    _step(env, "('place', (0, 0, 0))")
    assert env.family.proportion_filled(env.state)[0] == 0.5
    assert _step(env, "('stop', 'stop')")[:2] == (0.0, True)


# --------------------------------------------------------------------------- frames
def test_frame_size_is_the_parking_extent_plus_margins():
    env = _env("patch_reassembly/hard", 16)
    env.reset(seeds=range(16))
    assert env.frame_shape[:2] == (1120, 1160)
    for i, init in enumerate(env.state_dicts()):
        rows, cols = [0, 7], [0, 7]
        for patch, anchor, park in zip(init["patches"], init["patch_anchor"],
                                       init["parking_slot"]):
            rows += [r - anchor[0] + park[0] for r, _ in patch]
            cols += [c - anchor[1] + park[1] for _, c in patch]
        h = (max(rows) - min(rows) + 3) * CELL
        w = (max(cols) - min(cols) + 3) * CELL
        assert env.frame_hw[i].tolist() == [h, w]
        assert not env.frames[i, h:].any() and not env.frames[i, :, w:].any()


def test_easy_capacity():
    assert _env().frame_shape[:2] == (880, 920)


def test_frame_layout_of_a_small_board():
    """2x2 board, extent rows -2..1 and cols 0..4: 6x7 cells. Board top-left at pixel
    (3 * 40, 1 * 40); patch 0 parked at world (-2, 0) = pixel (40, 40)."""
    env = _small()
    frame = env.frame(0)
    assert frame.shape == (6 * CELL, 7 * CELL, 3)
    assert (frame[0, 0] == 255).all()
    y0, x0 = 3 * CELL, 1 * CELL
    assert frame[y0, x0 + 5].tolist() == [200, 200, 200]          # board grid
    assert frame[y0 + 5, x0 + 5].tolist() == [255, 255, 255]      # empty cell
    assert frame[CELL, CELL + 5].tolist() == [0, 0, 0]            # outline of parked patch 0
    assert frame[CELL + 3, CELL + 3].tolist() == [66, 189, 167]   # its colour
    _step(env, "('place', (0, 0, 0))")
    frame = env.frame(0)
    assert frame[y0 + 3, x0 + 3].tolist() == [66, 189, 167]
    assert frame[CELL + 3, CELL + 3].tolist() == [255, 255, 255]
    assert_frames_equal_a_full_redraw(env, "after a place")


@pytest.mark.parametrize("path", ["in place", "scratch frame and threads"])
def test_redraws_stay_exact_through_random_steps_and_resets(path, monkeypatch):
    import visgym.core.threads as threads
    import visgym.envs.patch_reassembly as module

    # Resets erase the old drawing in the frame, or draw whole in a scratch frame (big batches).
    monkeypatch.setattr(module, "SCRATCH_BYTES", 0 if path != "in place" else 1 << 60)
    monkeypatch.setattr(threads, "THREAD_BYTES", 0 if path != "in place" else 1 << 60)
    env = visgym.make("patch_reassembly/easy", num_envs=8, max_steps=6)
    env.reset(seeds=range(8))
    rng = np.random.default_rng(1)
    for t in range(40):
        plans = env.solve(num_steps=8)
        actions = [p[int(rng.integers(len(p)))] if rng.random() < 0.7 else
                   f"('remove', {int(rng.integers(5))})" for p in plans]
        env.step(actions)
        assert_frames_equal_a_full_redraw(env, f"step {t}")


def test_goal_frames_show_the_solved_board():
    env = _env(n=2)
    env.reset(seeds=[4, 5])
    goal = env.family.goal_state(type(env.state)(*(a.copy() for a in env.state)))
    assert env.family.is_success(goal).all()
    frames = env.goal_frames()
    assert frames.shape == env.frames.shape


# --------------------------------------------------------------------------- text
def test_text_mode_board_and_parked_shapes():
    env = _small()
    assert env.render_text(0) == "\n".join([
        "   0  1 ", "  ------", "0 | .  . ", "1 | .  . ", "", "--- Parked Patches ---",
        "", "Patch 0:", "  *0", "", "Patch 1:", "  *1"])
    _step(env, "('place', (0, 1, 0))")
    _step(env, "('place', (1, 0, 0))")
    assert env.render_text(0) == "\n".join([
        "   0  1 ", "  ------", "0 | 1  1 ", "1 | 0  0 ", "", "--- Parked Patches ---",
        "  (None)"])


def test_prompts_name_every_action_and_the_sizes():
    env = _env("patch_reassembly/hard")
    env.reset(seeds=[0])
    image, text = env.prompt(), env.prompt(text_mode=True)
    assert image.startswith("You are solving a 8×8 patch-reassembly puzzle. There are 6 ")
    assert "You see an image of the board" in image and "'*'" in text
    for prompt in (image, text):
        assert "patch_id ∈ [0, 5], row ∈ [0, 7], col ∈ [0, 7]" in prompt
        assert "('remove', patch_id)" in prompt and "('stop', 'stop')" in prompt


# --------------------------------------------------------------------------- solvers
@pytest.mark.parametrize("env_id", ["patch_reassembly/easy", "patch_reassembly/hard"])
@pytest.mark.parametrize("num_steps", [None, 8, 15])
def test_solver_succeeds_from_many_seeds(env_id, num_steps):
    env = visgym.make(env_id, num_envs=48, max_steps=None, autoreset="disabled")
    env.reset(seeds=range(1000, 1048))
    plans = env.solve(num_steps=num_steps)
    n = env.family.n_patches
    for plan in plans:
        places = sum(a.startswith("('place'") for a in plan)
        assert plan[-1] == "('stop', 'stop')"
        assert places >= (num_steps or n)
        if num_steps:
            # wrong-place padding: one extra place per step short of num_steps
            assert places == max(num_steps, n) and len(plan) == places + 1
        else:
            assert len(plan) == n + 1
    result = run_plans(env, plans)
    assert (result.reward == 1).all()


def test_solver_of_a_solved_board_is_a_stop_and_partial_boards_finish():
    env = _small()
    _step(env, "('place', (0, 0, 0))")
    assert env.solve()[0] == ["('place', (1, 1, 0))", "('stop', 'stop')"]
    _step(env, "('place', (1, 1, 0))")
    assert env.solve()[0] == ["('stop', 'stop')"]
    assert env.solve(num_steps=5)[0] == ["('stop', 'stop')"]


def test_heuristic_fallback_ends_with_a_stop():
    """Patch 0 placed on the bottom row leaves no tiling for patch 1 except the top row, so the
    backtracking still finishes; an L-tromino board blocked in the middle has no completion."""
    init = {"patches": [[[0, 0], [0, 1], [1, 0]], [[1, 1]]], "patch_anchor": [[0, 0], [1, 1]],
            "parking_slot": [[-3, 0], [0, 3]], "current_state": [[-3, 0], [0, 0]]}
    env = _small(init)
    plan = env.solve()[0]
    assert plan[-1] == "('stop', 'stop')"


def test_solver_is_deterministic_per_episode_seed():
    env = _env(n=4)
    env.reset(seeds=[1, 2, 3, 4])
    assert env.solve(num_steps=9) == env.solve(num_steps=9)


# --------------------------------------------------------------------------- init states
def test_init_state_json_round_trip():
    env = _env(n=4)
    env.reset(seeds=range(4))
    _step_all = env.solve()
    env.step([p[0] for p in _step_all])
    dicts = json.loads(json.dumps(env.state_dicts()))
    other = _env(n=4)
    other.reset(init_states=dicts)
    assert other.state_dicts() == env.state_dicts()
    assert np.array_equal(other.frames, env.frames)


def _mutated(path, value):
    init = copy.deepcopy(TWO_BY_TWO)
    target = init
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    if path[0] == "parking_slot" and len(path) == 2:
        init["current_state"][path[1]] = copy.deepcopy(value)   # still parked
    return init


HOSTILE = [
    (("patches",), [[[0, 0], [0, 1]]], "patches"),
    (("patches", 0), [[0, 0], [0, 1], [1, 0]], "patches[1]"),
    (("patches", 0), [[0, 0], [0, 5]], "patches[0][1]"),
    (("patches", 0), [[0, 0]], "patches"),
    (("patches", 0), "ab", "patches[0]"),
    (("patches", 0, 0), [0.5, 0], "patches[0][0]"),
    (("patch_anchor", 0), [1, 1], "patch_anchor[0]"),
    (("patch_anchor", 0), None, "patch_anchor[0]"),
    (("parking_slot", 0), [0, 0], "parking_slot[0]"),
    (("parking_slot", 1), [0, 900], "parking_slot"),
    (("current_state", 0), [5, 5], "current_state[0]"),
    (("current_state", 1), [0, 1], "current_state[1]"),
    (("current_state",), [[0, 0]], "current_state"),
]


@pytest.mark.parametrize("path,value,field", HOSTILE)
def test_hostile_init_states_name_the_field(path, value, field):
    env = _env(grid_size=(2, 2), num_patches=2)
    with pytest.raises(ValueError, match=r"init_states\[0\]\." + field.replace("[", r"\[")
                       .replace("]", r"\]")):
        env.reset(init_states=[_mutated(path, value)])


def test_overlapping_placements_are_refused():
    init = copy.deepcopy(TWO_BY_TWO)
    init["current_state"] = [[0, 0], [0, 0]]
    env = _env(grid_size=(2, 2), num_patches=2)
    with pytest.raises(ValueError, match=r"current_state\[1\]"):
        env.reset(init_states=[init])


@pytest.mark.parametrize("kw", [{"grid_size": (0, 5)}, {"grid_size": (13, 5)},
                                {"grid_size": (2, 2), "num_patches": 5},
                                {"num_patches": 0}, {"grid_size": 5}])
def test_bad_params_are_refused(kw):
    with pytest.raises(ValueError):
        visgym.make("patch_reassembly/easy", **kw)


@pytest.mark.parametrize("env_id", ["patch_reassembly/easy", "patch_reassembly/hard"])
def test_auto_resets_erase_the_previous_drawing_exactly(env_id):
    """A reset draws over the previous episode's frame (erasing only what it drew): after many
    resets with different frame sizes and boards every frame still equals a full redraw."""
    env = visgym.make(env_id, num_envs=32, max_steps=2)
    env.reset(seeds=range(32))
    for t in range(24):
        plans = env.solve()
        env.step([p[0] for p in plans])
        assert_frames_equal_a_full_redraw(env, f"step {t}")
