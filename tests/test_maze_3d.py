"""maze_3d behaviour from spec/envs/maze_3d.md: generation (perfect mazes, opposite corners, the
initial-heading rule, the step-budget cut), grammar and feedback, heading dynamics, success,
frames (size, upright view, camera convention, sphere, redraws, both renderers), prompt, solver
and validation."""
import json

import numpy as np
import pytest

import visgym
from contract_checks import assert_frames_equal_a_full_redraw
from maze_checks import passages
from visgym.bridges.splits import split_path
from visgym.kernels.grid_heading import FWD_DCOL, FWD_DROW

STOP = "('stop', 'stop')"
MOVE = "('move', 0)"
LEFT, RIGHT, AROUND = "('turn', 1)", "('turn', 2)", "('turn', 3)"

# A 7x7 maze: a corridor along row 1, down column 5, back along row 3, down column 1.
OPEN_MAZE = [[1] * 7,
             [1, 0, 0, 0, 0, 0, 1],
             [1, 1, 1, 1, 1, 0, 1],
             [1, 0, 0, 0, 0, 0, 1],
             [1, 0, 1, 1, 1, 1, 1],
             [1, 0, 0, 0, 0, 0, 1],
             [1] * 7]


def _env(agent=(1, 1), target=(5, 5), cam_dir=1, maze=OPEN_MAZE, **kwargs):
    env = visgym.make("maze_3d/easy", num_envs=1, autoreset="disabled", max_steps=None, **kwargs)
    env.reset(init_states=[{"maze_map": maze, "agent_location": list(agent),
                            "target_location": list(target), "cam_dir": cam_dir}])
    return env


def _pose(env):
    d = env.state_dicts()[0]
    return tuple(d["agent_location"]), d["cam_dir"]


# ---------------------------------------------------------------------------------------------
# generation

@pytest.mark.parametrize("difficulty,size", [("easy", 7), ("hard", 9)])
def test_generated_mazes_are_perfect_with_opposite_corners_and_an_open_heading(difficulty, size):
    env = visgym.make(f"maze_3d/{difficulty}", num_envs=300)
    env.reset(seeds=range(300))
    corners = set()
    for d in env.state_dicts():
        walls = np.array(d["maze_map"])
        assert walls.shape == (size, size)
        assert walls[0].all() and walls[-1].all() and walls[:, 0].all() and walls[:, -1].all()
        assert (walls[1::2, 1::2] == 0).all() and walls[::2, ::2].all()
        ncells = ((size - 1) // 2) ** 2
        assert len(passages(walls)) == ncells - 1, "a spanning tree"
        a, t = d["agent_location"], d["target_location"]
        assert a[0] + t[0] == size - 1 and a[1] + t[1] == size - 1
        corners.add(tuple(a))
        h = d["cam_dir"]
        assert walls[a[0] + FWD_DROW[h], a[1] + FWD_DCOL[h]] == 0, "facing an open corridor"
    assert len(corners) == 4


def test_initial_heading_is_uniform_over_the_open_exits():
    n = 3000
    env = visgym.make("maze_3d/easy", num_envs=n)
    env.reset(seeds=range(n))
    st = env.state
    rows = np.arange(n)
    exits = np.stack([st.walls[rows, st.agent[:, 0] + FWD_DROW[h], st.agent[:, 1] + FWD_DCOL[h]] == 0
                      for h in range(4)], 1)
    assert exits[rows, st.heading].all()
    two = exits.sum(1) == 2
    first = np.argmax(exits, 1)
    share = (st.heading[two] == first[two]).mean()
    assert two.sum() > 500 and 0.45 < share < 0.55


def test_initial_heading_rule_avoids_looking_at_the_target():
    """On a hand-made start with the target straight ahead along an open line, that heading is
    never chosen while another open one exists (spec 3, step 2)."""
    from visgym.envs.maze_3d import Maze3D
    from visgym.kernels.grid_heading import initial_headings
    family = Maze3D(Maze3D.presets["easy"])
    state = family.new_state(64)
    walls = np.array(OPEN_MAZE, np.uint8)
    state.walls[:] = walls
    state.agent[:] = (1, 3)        # row 1: open to the west (3) and to the east (1)
    state.target[:] = (1, 5)       # straight ahead to the east
    rows = np.arange(64)
    initial_headings(state.walls, state.agent, state.target, state.heading, rows,
                     np.arange(64, dtype=np.uint64))
    assert (state.heading == 3).all()
    state.agent[:] = (1, 1)        # only exit: east, looking straight at the target
    state.target[:] = (1, 4)
    initial_headings(state.walls, state.agent, state.target, state.heading, rows,
                     np.arange(64, dtype=np.uint64))
    assert (state.heading == 1).all(), "no safe heading: the open one with the nearest wall"


def test_spanning_trees_stay_uniform_without_the_budget_cut():
    n = 4000
    env = visgym.make("maze_3d/easy", num_envs=n, maze_height=5, maze_width=5,
                      max_plan_steps=None)
    env.reset(seeds=range(n))
    _, counts = np.unique(env.state.walls.reshape(n, -1), axis=0, return_counts=True)
    assert len(counts) == 4
    expected = n / 4
    assert ((counts - expected) ** 2 / expected).sum() < 16.27   # chi-square(3), p = 0.001


@pytest.mark.parametrize("difficulty,budget", [("easy", 20), ("hard", 30)])
def test_every_episode_is_solvable_within_the_step_budget(difficulty, budget):
    env = visgym.make(f"maze_3d/{difficulty}", num_envs=1500)
    env.reset(seeds=range(1500))
    lengths = [len(p) for p in env.solve()]
    assert max(lengths) <= budget
    # Without the cut the reference's distribution does exceed the budget now and then.
    raw = visgym.make(f"maze_3d/{difficulty}", num_envs=1500, max_plan_steps=None)
    raw.reset(seeds=range(1500))
    assert max(len(p) for p in raw.solve()) > budget


@pytest.mark.parametrize("difficulty,budget", [("easy", 20), ("hard", 30)])
def test_shipped_split_episodes_fit_the_budget(difficulty, budget):
    path = split_path("maze_3d", difficulty)
    rows = [json.loads(line) for line in open(path)]
    assert len(rows) == 70
    env = visgym.make(f"maze_3d/{difficulty}", num_envs=70, autoreset="disabled")
    env.reset(init_states=[r["init_state"] for r in rows])
    plans = env.solve()
    assert max(len(p) for p in plans) <= budget
    done = np.zeros(70, bool)
    got = np.zeros(70)
    for t in range(max(len(p) for p in plans)):
        _, reward, terminated, truncated, _ = env.step([p[min(t, len(p) - 1)] for p in plans])
        got += np.where(done, 0, reward)
        done |= terminated
        assert not (truncated & ~done).any()
    assert (got == 1).all()


# ---------------------------------------------------------------------------------------------
# grammar and dynamics

def test_moves_follow_the_heading_and_walls_block_with_the_reference_feedback():
    env = _env(agent=(1, 1), cam_dir=1)            # facing east along row 1
    _, _, _, _, info = env.step([MOVE])
    assert _pose(env) == ((1, 2), 1) and info["feedback"] == ["Action executed successfully."]
    _, _, _, _, info = env.step([LEFT])            # east -> north (a wall)
    assert _pose(env) == ((1, 2), 2)
    _, _, _, _, info = env.step([MOVE])
    assert info["feedback"] == ["Cannot move forward - wall collision"]
    assert _pose(env) == ((1, 2), 2)
    env.step([AROUND])                              # north -> south (a wall too)
    assert _pose(env) == ((1, 2), 0)
    env.step([RIGHT])                               # south -> west
    assert _pose(env) == ((1, 2), 3)
    env.step([MOVE])
    assert _pose(env) == ((1, 1), 3)


def test_left_and_right_are_geometric_on_a_north_up_map():
    """Facing south (0) a left turn faces east (1); right turns are the inverse."""
    env = _env(cam_dir=0, agent=(3, 1))
    headings = []
    for _ in range(4):
        env.step([LEFT])
        headings.append(_pose(env)[1])
    assert headings == [1, 2, 3, 0]
    env.step([RIGHT])
    assert _pose(env)[1] == 3


def test_payloads_the_reference_accepts_and_rejects():
    env = _env(agent=(1, 1), cam_dir=1)
    cases = {
        "('move', 1)": "The action 1 is not in the valid action space of move so nothing is executed.",
        "('move', True)": "The action True is not in the valid action space of move so nothing is executed.",
        "('move', 0.0)": "The action 0.0 is not in the valid action space of move so nothing is executed.",
        "('turn', 0)": "The action 0 is not in the valid action space of turn so nothing is executed.",
        "('turn', 4)": "The action 4 is not in the valid action space of turn so nothing is executed.",
        "('turn', 1.0)": "The action 1.0 is not in the valid action space of turn so nothing is executed.",
        "('turn', 'left')": "The action left is not in the valid action space of turn so nothing is executed.",
        "('stop', 'stop!')": "The action stop! is not in the valid action space of stop so nothing is executed.",
        "('forward', 0)": "The action name 'forward' is not recognized in the available action space.",
    }
    for action, want in cases.items():
        _, _, terminated, _, info = env.step([action])
        assert info["feedback"] == [want] and not terminated[0]
    assert _pose(env) == ((1, 1), 1)
    env.step(["('move', False)"])                   # False is 0
    assert _pose(env) == ((1, 2), 1)
    env.step(["('turn', True)"])                    # True is 1 (left)
    assert _pose(env) == ((1, 2), 2)


def test_reward_only_on_a_stop_at_the_target_and_arrival_does_not_end_the_episode():
    env = _env()
    _, reward, terminated, _, _ = env.step([STOP])
    assert terminated[0] and reward[0] == 0.0
    plan = env.solve()[0]
    for action in plan[:-1]:
        _, reward, terminated, _, info = env.step([action])
        assert reward[0] == 0 and not terminated[0]
    assert info["success"][0]
    _, reward, terminated, _, _ = env.step(["('stop', 'ok')"])
    assert terminated[0] and reward[0] == 1.0


# ---------------------------------------------------------------------------------------------
# frames

def _red(frame):
    return (frame[..., 0] > 60) & (frame[..., 1] < 40) & (frame[..., 2] < 40)


def test_frame_size_defaults_to_336x189_and_follows_render_size():
    env = visgym.make("maze_3d/hard")
    frames, _ = env.reset(seeds=[0])
    assert frames.shape == (1, 189, 336, 3)
    env = visgym.make("maze_3d/hard", render_size=(200, 150))
    frames, _ = env.reset(seeds=[0])
    assert frames.shape == (1, 150, 200, 3)


def test_view_is_upright_ceiling_above_ground_below():
    env = _env(agent=(5, 1), cam_dir=1)             # looking east down the row-5 corridor
    frame = env.frames[0].astype(int)
    top, bottom = frame[:20, 150:186], frame[-20:, 150:186]
    assert (top[..., 2] - top[..., 0]).mean() > 0, "bluish ceiling at the top"
    assert (bottom[..., 0] - bottom[..., 2]).mean() > 25, "sandy ground at the bottom"


def test_camera_sits_one_cell_behind_and_the_sphere_has_the_reference_size():
    """Standing on the target facing along the corridor, the sphere (radius 1.5, one cell =
    10 units ahead of the camera) spans 2 tan(asin(0.15)) / (2 tan 20 deg) = 0.417 of the width,
    centred (spec 7: about 3/7.3)."""
    env = _env(agent=(1, 5), target=(1, 5), cam_dir=1, render_size=(400, 225))
    red = _red(env.frames[0])
    cols = np.nonzero(red.any(0))[0]
    rows = np.nonzero(red.any(1))[0]
    assert abs((cols.max() - cols.min() + 1) / 400 - 0.417) < 0.02
    assert abs((cols.max() + cols.min() + 1) / 2 - 200) <= 2
    assert abs((rows.max() + rows.min() + 1) / 2 - 112.5) <= 2, "on the horizon"


def test_left_in_the_world_is_left_in_the_image():
    """Facing north in the row-3 corridor the target one cell west of the cell ahead shows on
    the left half of the image: the view is not mirrored."""
    maze = [[1] * 7, [1, 0, 0, 0, 0, 0, 1], [1, 0, 0, 0, 0, 0, 1], [1, 0, 0, 0, 0, 0, 1],
            [1, 0, 0, 0, 0, 0, 1], [1, 0, 0, 0, 0, 0, 1], [1] * 7]
    env = _env(agent=(4, 3), target=(2, 2), cam_dir=2, maze=maze)
    cols = np.nonzero(_red(env.frames[0]).any(0))[0]
    assert cols.size and cols.max() < 168
    env = _env(agent=(4, 3), target=(2, 4), cam_dir=2, maze=maze)
    cols = np.nonzero(_red(env.frames[0]).any(0))[0]
    assert cols.size and cols.min() > 168


def test_frames_are_redrawn_only_when_the_pose_changes_and_equal_a_fresh_render():
    env = _env()
    first = env.frames.copy()
    env.step(["('jump', 1)"])
    env.step(["('turn', 7)"])
    np.testing.assert_array_equal(env.frames, first)
    env.step([LEFT])
    assert not np.array_equal(env.frames, first)
    env.step([RIGHT])
    np.testing.assert_array_equal(env.frames, first)
    env.step([MOVE])
    assert_frames_equal_a_full_redraw(env, "after a move")


def test_both_renderers_draw_the_same_picture():
    a = visgym.make("maze_3d/hard", num_envs=8, renderer="raycast", autoreset="disabled")
    b = visgym.make("maze_3d/hard", num_envs=8, renderer="raster", autoreset="disabled")
    fa, _ = a.reset(seeds=range(8))
    fb, _ = b.reset(seeds=range(8))
    same = [(fa == fb).all(-1).mean()]
    rng = np.random.default_rng(0)
    for _ in range(6):
        actions = [(MOVE, LEFT, RIGHT, AROUND)[i] for i in rng.integers(0, 4, 8)]
        fa, *_ = a.step(actions)
        fb, *_ = b.step(actions)
        same.append((fa == fb).all(-1).mean())
    assert min(same) > 0.98 and np.mean(same) > 0.995, same


# ---------------------------------------------------------------------------------------------
# prompt, solver, validation

def test_prompt_states_the_facts():
    env = visgym.make("maze_3d/hard")
    env.reset(seeds=[0])
    prompt = env.prompt()
    assert prompt.startswith("You are navigating a 9x9 3D maze environment.")
    assert "ismarked by a red sphere" in prompt
    for fragment in ("('move', 0)", "1 (left), 2 (right), or 3 (around)", "('stop', 'stop')",
                     "you will remain in your current position"):
        assert fragment in prompt
    with pytest.raises(ValueError, match="text_mode"):
        env.prompt(text_mode=True)


def test_solver_turns_only_where_needed_and_stops_at_once_on_the_target():
    env = _env(agent=(1, 1), target=(5, 5), cam_dir=1)
    assert env.solve()[0] == [MOVE] * 4 + [RIGHT] + [MOVE] * 2 + [RIGHT] + [MOVE] * 4 + [LEFT] + \
        [MOVE] * 2 + [LEFT] + [MOVE] * 4 + [STOP]
    env = _env(agent=(1, 1), target=(5, 5), cam_dir=3)
    assert env.solve()[0][:2] == [AROUND, MOVE]
    env = _env(agent=(5, 5), target=(5, 5))
    assert env.solve()[0] == [STOP]


def test_solver_padding_reaches_num_steps_and_still_succeeds():
    env = visgym.make("maze_3d/hard", num_envs=24, autoreset="disabled", max_steps=None)
    env.reset(seeds=range(24))
    short = env.solve()
    padded = env.solve(num_steps=30)
    assert padded == env.solve(num_steps=30)
    for s, p in zip(short, padded):
        n = len(s) - 1
        if n < 30:
            assert len(p) - 1 == n + 2 * ((30 - n + 1) // 2)
            assert [a for a in p if a not in (LEFT, RIGHT)] == [a for a in s if a not in (LEFT, RIGHT)]
        else:
            assert p == s
    for t in range(max(len(p) for p in padded) - 1):
        env.step([p[t] if t < len(p) - 1 else "('wait', 0)" for p in padded])
    assert env.success().all()


def test_init_state_validation_names_the_problem():
    env = visgym.make("maze_3d/easy")
    good = {"maze_map": OPEN_MAZE, "agent_location": [1, 1], "target_location": [5, 5],
            "cam_dir": 1}
    env.reset(init_states=[good])
    for field, value, match in [
        ("maze_map", [[0, 1]], "shape"),
        ("maze_map", [[1] * 7] + [[1] + [0] * 5 + [1]] * 5 + [[1] * 6 + [0]], "outer ring"),
        ("agent_location", [0, 0], "wall"),
        ("agent_location", [50, 1], "outside"),
        ("target_location", "x", r"\[row, col\]"),
        ("cam_dir", 4, "heading"),
        ("cam_dir", True, "heading"),
    ]:
        bad = dict(good, **{field: value})
        with pytest.raises(ValueError, match=f"{field}.*{match}"):
            env.reset(init_states=[bad])
    with pytest.raises(ValueError, match="cam_dir.*missing"):
        env.reset(init_states=[{k: v for k, v in good.items() if k != "cam_dir"}])


def test_params_validation():
    for kwargs, match in [
        (dict(maze_width=8), "maze_width.*odd"),
        (dict(maze_height="9"), "maze_height"),
        (dict(render_size=(336,)), "render_size"),
        (dict(render_size=(336, 2)), "render_size"),
        (dict(renderer="opengl"), "renderer"),
        (dict(max_plan_steps=5), "max_plan_steps"),
    ]:
        with pytest.raises(ValueError, match=match):
            visgym.make("maze_3d/easy", **kwargs)
    env = visgym.make("maze_3d/easy", maze_width=11, maze_height=7, render_size=[160, 90],
                      render_mode="rgb_array")
    frames, _ = env.reset(seeds=[0])
    assert frames.shape == (1, 90, 160, 3)
    assert np.array(env.state_dicts()[0]["maze_map"]).shape == (7, 11)


def test_params_are_coerced_and_the_budget_message_names_the_maze_size():
    params = visgym.make("maze_3d/easy", maze_width=np.int64(9), maze_height=np.int64(9),
                         max_plan_steps=np.int64(30), render_size=[np.int64(64), 36]).params
    assert [type(v) for v in (params.maze_width, params.max_plan_steps, *params.render_size)] \
        == [int] * 4
    with pytest.raises(ValueError, match=r"max_plan_steps: must be >= 24 for a maze_width x "
                                         r"maze_height = 21x7 maze.*max_plan_steps=None"):
        visgym.make("maze_3d/easy", maze_width=21)   # the easy preset's budget is 20
    for bad in (2**31, 10**400, 30.0):
        with pytest.raises(ValueError, match="max_plan_steps"):
            visgym.make("maze_3d/easy", max_plan_steps=bad)
    with pytest.raises(ValueError, match="renderer"):
        visgym.make("maze_3d/easy", renderer=["raycast"])


def test_an_unmeetable_max_plan_steps_warns_instead_of_giving_up_silently():
    """A 21x21 maze whose plan fits in 38 steps must be one straight L from corner to corner with
    the first heading along it: 64 redraws essentially never find one. The episodes are kept (a
    raise would break reset and the auto-reset inside step) and reset warns, naming the field."""
    env = visgym.make("maze_3d/easy", num_envs=3, maze_width=21, maze_height=21,
                      max_plan_steps=38)
    with pytest.warns(RuntimeWarning, match=r"max_plan_steps: 3 of 3 generated 21x21 episodes "
                                            r"still need more than 38 steps after 64 redraws"):
        env.reset(seeds=range(3))
    assert len(env.solve()[0]) > 38


@pytest.mark.parametrize("difficulty,digest", [("easy", "c70563a5dad1f171"),
                                               ("hard", "c2ea5385f927d894")])
def test_the_budget_cut_still_draws_the_same_episodes(difficulty, digest):
    """The cut now also checks its last redraw (to warn); the episodes of seeds 0..255 are
    those drawn before that change (digest of their state dicts, taken then)."""
    import hashlib

    env = visgym.make(f"maze_3d/{difficulty}", num_envs=256)
    env.reset(seeds=range(256))
    text = json.dumps(env.state_dicts())
    assert hashlib.sha256(text.encode()).hexdigest()[:16] == digest


def test_raster_mesh_table_is_bounded_and_filled_in_passes(monkeypatch):
    """The raster renderer's mesh table used to hold every scene of the batch at once: 40 MB per
    scene for a 201x201 maze, so 10 GB for 256 episodes. It now holds at most 64 MB of scenes
    and draws a larger batch in passes, with the same pixels."""
    from visgym.envs import maze_3d

    big = visgym.make("maze_3d/easy", num_envs=1, maze_width=201, maze_height=201,
                      max_plan_steps=None, renderer="raster").family
    work = big.new_workspace(256)
    table = sum(work[k].nbytes for k in ("verts", "uvs", "normals", "tris", "face_tex",
                                         "face_flags", "face_colors"))
    assert work["capacity"] == 1 and table < maze_3d.MESH_TABLE_BYTES
    whole = visgym.make("maze_3d/hard", num_envs=5, renderer="raster", autoreset="disabled")
    frames, _ = whole.reset(seeds=range(5))
    frames = frames.copy()
    scene = maze_3d.MESH_BYTES_PER_QUAD * whole.family.new_workspace(1)["qmax"]
    monkeypatch.setattr(maze_3d, "MESH_TABLE_BYTES", 2 * scene)   # two scenes per pass
    passes = visgym.make("maze_3d/hard", num_envs=5, renderer="raster", autoreset="disabled")
    assert passes.work["capacity"] == 2
    np.testing.assert_array_equal(passes.reset(seeds=range(5))[0], frames)
    for env in (whole, passes):
        env.step([MOVE, LEFT, RIGHT, AROUND, MOVE])
    np.testing.assert_array_equal(passes.frames, whole.frames)
    assert_frames_equal_a_full_redraw(passes, "after a step drawn in passes")


def test_hostile_init_state_values_are_named_briefly():
    deep = []
    for _ in range(5000):
        deep = [deep]
    good = {"maze_map": OPEN_MAZE, "agent_location": [1, 1], "target_location": [5, 5],
            "cam_dir": 1}
    env = visgym.make("maze_3d/easy", num_envs=2)
    env.reset(seeds=[0, 1])
    before = env.state_dicts()
    for field, value in (("cam_dir", deep), ("cam_dir", "x" * 10**6), ("cam_dir", 10**5000),
                         ("maze_map", deep), ("cam_dir", 1.0), ("cam_dir", np.float64(1))):
        with pytest.raises(ValueError) as err:
            env.reset(init_states=[good, {**good, field: value}])
        message = str(err.value)
        assert message.startswith(f"init_states[1].{field}") and len(message) < 200, message
    assert env.state_dicts() == before
    state = env.family.new_state(2)
    copy = [a.copy() for a in state]
    with pytest.raises(ValueError, match=r"init_states\[1\]\.cam_dir"):
        env.family.load_rows(state, np.arange(2), [good, {**good, "cam_dir": 9}])
    for a, b in zip(state, copy):   # row 0 was not written before row 1 was checked
        np.testing.assert_array_equal(a, b)
