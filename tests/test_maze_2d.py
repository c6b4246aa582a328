"""maze_2d behaviour from spec/envs/maze_2d.md: generation, grammar, dynamics, frames, text,
prompt and solver."""
import numpy as np
import pytest

import visgym
from contract_checks import assert_frames_equal_a_full_redraw
from maze_checks import passages
from visgym.envs.maze_2d import CELL_PX

STOP = "('stop', 'stop')"


@pytest.mark.parametrize("difficulty,size", [("easy", 9), ("hard", 11)])
def test_generated_mazes_are_perfect_with_opposite_corners(difficulty, size):
    env = visgym.make(f"maze_2d/{difficulty}", num_envs=200)
    env.reset(seeds=range(200))
    corners = set()
    for d in env.state_dicts():
        walls = np.array(d["maze_map"])
        assert walls.shape == (size, size)
        assert walls[0].all() and walls[-1].all() and walls[:, 0].all() and walls[:, -1].all()
        assert walls[::2, ::2].all(), "even-even positions are always wall"
        assert (walls[1::2, 1::2] == 0).all(), "every cell is carved"
        ncells = ((size - 1) // 2) ** 2
        edges = passages(walls)
        assert len(edges) == ncells - 1, "a spanning tree has cells - 1 passages"
        assert (walls == 0).sum() == ncells + len(edges), "no floor outside cells and passages"
        a, t = d["agent_location"], d["target_location"]
        assert a[0] + t[0] == size - 1 and a[1] + t[1] == size - 1, "opposite corners"
        corners.add(tuple(a))
    assert len(corners) == 4


@pytest.mark.parametrize("height,width,trees", [(5, 5, 4), (5, 7, 15)])
def test_mazes_are_uniform_spanning_trees(height, width, trees):
    """Each spanning tree of the cell grid is equally likely (Wilson's algorithm): a 2x2 cell grid
    has 4 trees, a 2x3 grid 15; a chi-square test over 6,000 mazes (p > 0.001)."""
    n = 6000
    env = visgym.make("maze_2d/easy", num_envs=n, maze_height=height, maze_width=width)
    env.reset(seeds=range(n))
    walls = env.state.walls.reshape(n, -1)
    _, counts = np.unique(walls, axis=0, return_counts=True)
    assert len(counts) == trees
    expected = n / trees
    chi2 = ((counts - expected) ** 2 / expected).sum()
    # 0.999 quantiles of chi-square with 3 and 14 degrees of freedom.
    assert chi2 < {4: 16.27, 15: 36.12}[trees], counts


def _open_maze_env():
    """A 7x7 maze with a known layout, agent top-left, target bottom-right."""
    walls = [[1] * 7,
             [1, 0, 0, 0, 0, 0, 1],
             [1, 1, 1, 1, 1, 0, 1],
             [1, 0, 0, 0, 0, 0, 1],
             [1, 0, 1, 1, 1, 1, 1],
             [1, 0, 0, 0, 0, 0, 1],
             [1] * 7]
    env = visgym.make("maze_2d/easy", num_envs=1, maze_width=7, maze_height=7,
                      autoreset="disabled", max_steps=None)
    env.reset(init_states=[{"maze_map": walls, "agent_location": [1, 1],
                            "target_location": [5, 5]}])
    return env


def test_moves_follow_the_direction_table_and_walls_block():
    env = _open_maze_env()
    _, _, _, _, info = env.step(["('move', 1)"])
    assert info["feedback"] == ["Cannot move into a wall."]
    assert env.state_dicts()[0]["agent_location"] == [1, 1]
    env.step(["('move', 0)"])
    assert env.state_dicts()[0]["agent_location"] == [1, 2]
    env.step(["('move', 2)"])
    assert env.state_dicts()[0]["agent_location"] == [1, 1]
    # bools are ints, as in the reference: True is 1 (up, a wall here), False is 0 (right).
    _, _, _, _, info = env.step(["('move', False)"])
    assert env.state_dicts()[0]["agent_location"] == [1, 2]
    assert info["feedback"] == ["Action executed successfully."]


def test_reward_only_on_a_stop_at_the_target():
    env = _open_maze_env()
    _, reward, terminated, _, _ = env.step([STOP])
    assert terminated[0] and reward[0] == 0.0
    for action in env.solve()[0][:-1]:
        _, reward, terminated, _, info = env.step([action])
        assert reward[0] == 0 and not terminated[0]
    assert info["success"][0], "standing on the target"
    _, reward, terminated, _, _ = env.step(["('stop', 'done')"])
    assert terminated[0] and reward[0] == 1.0


def test_payload_feedback_matches_the_reference_wording():
    env = _open_maze_env()
    cases = {
        "('move', 4)": "The action 4 is not in the valid action space of move so nothing is executed.",
        "('move', 1.0)": "The action 1.0 is not in the valid action space of move so nothing is executed.",
        "('stop', 'stop!')": "The action stop! is not in the valid action space of stop so nothing is executed.",
        "('jump', 1)": "The action name 'jump' is not recognized in the available action space.",
        "[1, 2]": "The action format is invalid. The action should be a tuple of two elements with "
                  "the first element being the action name and the second element being the "
                  "action payload.",
    }
    for action, want in cases.items():
        _, _, _, _, info = env.step([action])
        assert info["feedback"] == [want]
    _, _, _, _, info = env.step(["hello world"])
    assert info["feedback"][0].startswith("Cannot parse action string 'hello world': ")
    assert info["feedback"][0].endswith(" so the action is invalid.")


def test_text_mode_marks_agent_over_target_and_adds_a_border():
    env = _open_maze_env()
    text = env.render_text()[0]
    lines = text.split("\n")
    assert len(lines) == 9 and all(len(line) == 9 for line in lines)
    assert lines[2][2] == "A" and lines[6][6] == "T"
    for action in env.solve()[0][:-1]:
        env.step([action])
    text = env.render_text()[0]
    assert "T" not in text and text.split("\n")[6][6] == "A"


def test_frame_layout_and_stateless_redraw():
    """Cells are 25 px; leaving the target restores the full red square (reference quirk 2)."""
    env = _open_maze_env()
    frame = env.frames[0]
    assert frame.shape == (7 * CELL_PX, 7 * CELL_PX, 3)
    target_cell = frame[5 * CELL_PX:6 * CELL_PX, 5 * CELL_PX:6 * CELL_PX].copy()
    assert (target_cell == (255, 0, 0)).all()
    for action in env.solve()[0][:-1]:
        env.step([action])
    on_target = env.frames[0, 5 * CELL_PX:6 * CELL_PX, 5 * CELL_PX:6 * CELL_PX]
    assert ((on_target == (0, 0, 255)).all(axis=-1)).sum() == 104
    env.step(["('move', 2)"])
    np.testing.assert_array_equal(
        env.frames[0, 5 * CELL_PX:6 * CELL_PX, 5 * CELL_PX:6 * CELL_PX], target_cell)
    assert_frames_equal_a_full_redraw(env, "after leaving the target")


def test_prompt_states_the_facts():
    env = visgym.make("maze_2d/hard")
    env.reset(seeds=[0])
    prompt = env.prompt()
    assert "11x11 maze" in prompt and "blue circle" in prompt and "red target square" in prompt
    assert "0=right, 1=up, 2=left, 3=down" in prompt and "('stop', 'stop')" in prompt
    text = env.prompt(text_mode=True)
    assert "'#'" in text and "'A'" in text and "'T'" in text


def test_solver_padding_reaches_num_steps_and_still_succeeds():
    env = visgym.make("maze_2d/hard", num_envs=32, autoreset="disabled", max_steps=None)
    env.reset(seeds=range(32))
    short = env.solve()
    padded = env.solve(num_steps=30)
    assert padded == env.solve(num_steps=30), "deterministic for the same episode and step"
    for s, p in zip(short, padded):
        if len(s) < 30:
            assert len(p) in (30, 31)
        else:
            assert p == s
    for t in range(max(len(p) for p in padded) - 1):
        env.step([p[t] if t < len(p) - 1 else "('wait', 0)" for p in padded])
    assert env.success().all()


def test_init_state_validation_names_the_problem():
    env = visgym.make("maze_2d/easy")
    good = {"maze_map": [[1] * 9] + [[1] + [0] * 7 + [1]] * 7 + [[1] * 9],
            "agent_location": [1, 1], "target_location": [7, 7]}
    env.reset(init_states=[good])
    for field, value, match in [
        ("maze_map", [[0, 1]], "shape"),
        ("agent_location", [0, 0], "wall"),
        ("agent_location", [50, 1], "outside"),
        ("target_location", "x", r"\[row, col\]"),
    ]:
        bad = dict(good, **{field: value})
        with pytest.raises(ValueError, match=f"{field}.*{match}"):
            env.reset(init_states=[bad])


def test_params_validation():
    with pytest.raises(ValueError, match="maze_width.*odd"):
        visgym.make("maze_2d/easy", maze_width=10)
    with pytest.raises(ValueError, match="maze_height"):
        visgym.make("maze_2d/easy", maze_height="9")
    env = visgym.make("maze_2d/easy", maze_width=15, maze_height=7)
    frames, _ = env.reset(seeds=[0])
    assert frames.shape == (1, 7 * CELL_PX, 15 * CELL_PX, 3)


# ------------------------------------------------------------------ hostile init states
def _good_9x9():
    return {"maze_map": [[1] * 9] + [[1] + [0] * 7 + [1] for _ in range(7)] + [[1] * 9],
            "agent_location": [1, 1], "target_location": [7, 7]}


@pytest.mark.parametrize("entry", [0.5, 0.99, 1.0, "0", "1", True, None, [0]])
def test_maze_map_entries_must_be_the_ints_0_or_1_not_anything_that_casts(entry):
    """The map used to be cast to int64 before it was checked: 0.5 and 0.99 became floor, "1" a
    wall. Each entry must now be an integer 0 or 1, and the message names the cell."""
    env = visgym.make("maze_2d/easy")
    init = _good_9x9()
    init["maze_map"][3][4] = entry
    with pytest.raises(ValueError, match=r"init_states\[0\]\.maze_map\[3\]\[4\]: expected an "
                                         r"integer 0\.\.1"):
        env.reset(init_states=[init])


def test_maze_map_of_other_values_or_dtypes_is_refused():
    env = visgym.make("maze_2d/easy")
    init = _good_9x9()
    init["maze_map"][2][2] = 2
    with pytest.raises(ValueError, match=r"maze_map\[2\]\[2\]: must be in 0\.\.1, got 2"):
        env.reset(init_states=[init])
    walls = np.array(_good_9x9()["maze_map"])
    for bad in (walls.astype(np.float64), walls.astype(bool), walls.astype(str)):
        with pytest.raises(ValueError, match=r"maze_map: expected a grid of shape \(9, 9\)"):
            env.reset(init_states=[{**_good_9x9(), "maze_map": bad}])
    env.reset(init_states=[{**_good_9x9(), "maze_map": walls.astype(np.uint8)}])  # ints load
    assert env.state_dicts()[0] == _good_9x9()


def test_a_huge_maze_map_is_refused_by_its_shape_before_any_conversion():
    """A 20000x20000 map used to be converted to 3.2 GB of int64 (26-60 s) before its shape was
    checked. Neither array views nor lists sharing one row cost anything to build here."""
    import time

    env = visgym.make("maze_2d/easy")
    row = [0] * 20000
    for huge in (np.broadcast_to(np.uint8(1), (20000, 20000)),
                 np.broadcast_to(np.float64(0.5), (20000, 20000)), [row] * 20000):
        start = time.perf_counter()
        with pytest.raises(ValueError, match=r"maze_map: expected a grid of shape \(9, 9\)"):
            env.reset(init_states=[{**_good_9x9(), "maze_map": huge}])
        assert time.perf_counter() - start < 0.5


def test_deeply_nested_values_give_a_short_message():
    """The message used to quote the value with repr, which raises RecursionError for a
    5,000-deep list (and prints a huge one in full)."""
    deep = []
    for _ in range(5000):
        deep = [deep]
    env = visgym.make("maze_2d/easy")
    for field in ("maze_map", "agent_location", "target_location"):
        with pytest.raises(ValueError) as err:
            env.reset(init_states=[{**_good_9x9(), field: deep}])
        message = str(err.value)
        assert message.startswith(f"init_states[0].{field}") and len(message) < 200
    with pytest.raises(ValueError, match=r"agent_location: \[an integer of about 5001 digits, "
                                         r"1\] is outside"):
        env.reset(init_states=[{**_good_9x9(), "agent_location": [10**5000, 1]}])


def test_load_rows_validates_every_row_before_writing_any():
    """Row 0 of the state used to be written before row 1 was checked."""
    env = visgym.make("maze_2d/easy", num_envs=2)
    state = env.family.new_state(2)
    before = [a.copy() for a in state]
    good = _good_9x9()
    with pytest.raises(ValueError, match=r"init_states\[1\]\.agent_location"):
        env.family.load_rows(state, np.arange(2), [good, {**good, "agent_location": [0, 0]}])
    for a, b in zip(state, before):
        np.testing.assert_array_equal(a, b)
