"""Step-level potentials of the grid, block and matchstick families (``Family.potential``).

What shaped rewards rely on: the potential is finite, never negative, 0 exactly where a stop
would be rewarded and positive elsewhere; it is a function of the episode alone (equal seeds in
two rows, or one row alone, give equal values); the exact ones (maze_2d, maze_3d, and
matchstick_equation under easy's one-move budget) equal the optimal solver's remaining plan
(stop excluded) and fall by exactly 1 per optimal action; the proxies keep what their docstrings
promise (sliding_block's block-distance sum never exceeds the optimal plan and moves by exactly
1 per slide; matchstick_equation's stack bound never exceeds the optimal plan;
matchstick_rotation's pose excess is measured in tolerances).
"""
import numpy as np
import pytest

import visgym
from visgym.bridges.gym import ActionText
from visgym.core.grammar import STOP
from visgym.core.rollout import run_plans
from visgym.envs.matchstick_equation import ADD_TO, REMOVE_TO
from visgym.kernels import segment_equations as seq
from visgym.kernels.expressions import is_correct, scratch

FAMILIES = ("maze_2d", "maze_3d", "sliding_block", "matchstick_equation", "matchstick_rotation")
ALL_IDS = [f"{f}/{d}" for f in FAMILIES for d in ("easy", "hard")]
# Ids whose potential is the optimal remaining action count, with the solver strategy that is
# optimal (plans without padding or detours).
EXACT = {"maze_2d/easy": "bfs", "maze_2d/hard": "bfs", "maze_3d/easy": "bfs",
         "maze_3d/hard": "bfs", "matchstick_equation/easy": "bfs"}
SEEDS = (3, 17, 40, 41, 1234, 99991)


def _env(env_id, n):
    return visgym.make(env_id, num_envs=n, autoreset="disabled", max_steps=None)


def _assert_zero_exactly_on_success(env, when):
    pot = env.potential()
    assert pot.dtype == np.float32 and pot.shape == (env.num_envs,), when
    assert np.isfinite(pot).all() and (pot >= 0).all(), (when, pot)
    success = env.success()
    assert (pot[success] == 0).all() and (pot[~success] > 0).all(), (when, pot, success)
    return pot


def _random_moves(env, rng, n):
    """n random valid non-stop action strings of the env's grammar."""
    space = ActionText(env.grammar, seed=int(rng.integers(2**31)))
    stop = env.grammar.index(STOP.name)
    out = []
    while len(out) < n:
        action = space.sample()
        if env.grammar.parse_one(action)[0] != stop:
            out.append(action)
    return out


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_potential_is_zero_exactly_on_success_after_reset_and_along_solver_plans(env_id):
    env = _env(env_id, len(SEEDS))
    env.reset(seeds=SEEDS)
    _assert_zero_exactly_on_success(env, "after reset")
    plans = [p[:-1] for p in env.solve()]  # up to the stop: the goal state itself
    run_plans(env, plans, lambda t, *_: _assert_zero_exactly_on_success(env, f"plan step {t}"))
    assert env.success().all() and (env.potential() == 0).all()


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_potential_depends_only_on_the_episode(env_id):
    """Seed 77 in rows 0 and 3 of a batch, and alone, has one potential at every plan step."""
    seeds = [77, 5, 6, 77, 8]
    batch = _env(env_id, len(seeds))
    alone = _env(env_id, 1)
    batch.reset(seeds=seeds)
    alone.reset(seeds=[77])
    trace_batch, trace_alone = [], []
    run_plans(batch, batch.solve(), lambda *_: trace_batch.append(batch.potential()[[0, 3]]))
    run_plans(alone, alone.solve(), lambda *_: trace_alone.append(alone.potential()[0]))
    steps = len(trace_alone)
    trace_batch = np.array(trace_batch)[:steps]
    np.testing.assert_array_equal(trace_batch[:, 0], trace_batch[:, 1])
    np.testing.assert_array_equal(trace_batch[:, 0], np.array(trace_alone, np.float32))


@pytest.mark.parametrize("env_id", sorted(EXACT))
def test_exact_potential_is_the_optimal_plan_and_falls_by_one_per_optimal_action(env_id):
    env = _env(env_id, len(SEEDS))
    env.reset(seeds=SEEDS)
    plans = env.solve(EXACT[env_id])
    remaining = np.array([len(p) - 1 for p in plans], np.float32)  # the stop is not an action
    np.testing.assert_array_equal(env.potential(), remaining)
    assert (remaining > 0).all()

    def check(t, frames, reward, terminated, truncated, info, active):
        left = np.maximum(remaining - (t + 1), 0)
        np.testing.assert_array_equal(env.potential()[active], left[active], err_msg=f"step {t}")

    run_plans(env, [p[:-1] for p in plans], check)


@pytest.mark.parametrize("env_id", sorted(EXACT))
def test_exact_potential_matches_the_solver_from_states_off_the_optimal_path(env_id):
    rng = np.random.default_rng(5)
    env = _env(env_id, len(SEEDS))
    env.reset(seeds=SEEDS)
    for t in range(6):
        env.step(_random_moves(env, rng, env.num_envs))
        remaining = np.array([len(p) - 1 for p in env.solve(EXACT[env_id])], np.float32)
        np.testing.assert_array_equal(env.potential(), remaining, err_msg=f"random step {t}")


# ------------------------------------------------------------------------------ mazes
def _walled_in_maze(side):
    """A side x side maze, all floor inside the outer ring, with the target cell (1, 1) boxed
    in by walls and the agent in the opposite corner."""
    walls = np.zeros((side, side), int)
    walls[0, :] = walls[-1, :] = walls[:, 0] = walls[:, -1] = 1
    walls[1, 2] = walls[2, 1] = 1
    return {"maze_map": walls.tolist(), "agent_location": [side - 2, side - 2],
            "target_location": [1, 1]}


def test_unreachable_maze_targets_get_a_potential_beyond_any_distance():
    flat = _env("maze_2d/easy", 1)
    flat.reset(init_states=[_walled_in_maze(9)])
    assert flat.potential()[0] == 9 * 9 and not flat.success()[0]
    walker = _env("maze_3d/easy", 1)
    walker.reset(init_states=[{**_walled_in_maze(7), "cam_dir": 0}])
    assert walker.potential()[0] == 4 * 7 * 7 and not walker.success()[0]


def test_maze_3d_potential_counts_turns():
    """In an open 7x7 room, facing away from a target two cells ahead costs a turn around and
    two moves; facing it, two moves; a quarter turn off, a turn and two moves."""
    env = _env("maze_3d/easy", 4)
    room = _walled_in_maze(7)
    room["maze_map"] = [[1] * 7] + [[1] + [0] * 5 + [1] for _ in range(5)] + [[1] * 7]
    room["agent_location"], room["target_location"] = [3, 3], [5, 3]
    # Headings: 0 faces +row (toward the target here), 2 faces -row, 1 and 3 sideways.
    env.reset(init_states=[{**room, "cam_dir": d} for d in range(4)])
    np.testing.assert_array_equal(env.potential(), [2, 3, 3, 3])


# ------------------------------------------------------------------------------ sliding_block
def _block_distance_sum(state):
    return np.abs(state.pos.astype(int) - state.target_pos.astype(int)).sum(axis=(1, 2))


@pytest.mark.parametrize("difficulty", ["easy", "hard"])
def test_sliding_block_potential_is_the_block_distance_sum_and_never_exceeds_the_optimum(
        difficulty):
    env = _env(f"sliding_block/{difficulty}", len(SEEDS))
    env.reset(seeds=SEEDS)
    plans = env.solve("bfs")
    pot = env.potential()
    np.testing.assert_array_equal(pot, _block_distance_sum(env.state))
    assert (pot <= np.array([len(p) - 1 for p in plans])).all()
    previous = [pot.copy()]

    def check(t, frames, reward, terminated, truncated, info, active):
        now = env.potential()
        moved = active & (info["code"] == 0)
        # A slide moves one block one cell: the sum changes by exactly 1.
        np.testing.assert_array_equal(np.abs(now - previous[0])[moved], 1)
        np.testing.assert_array_equal(now, _block_distance_sum(env.state))
        previous[0] = now

    run_plans(env, [p[:-1] for p in plans], check)
    assert (env.potential() == 0).all()


# ------------------------------------------------------------------------------ matchstick_equation
def _legal_move(env, row, avoid_correct=True):
    """A legal move of episode ``row`` as action text, one that does not make the equation
    correct when ``avoid_correct``."""
    state = env.state
    d, n = int(state.depth[row]), int(state.length[row])
    sym = state.hist[row, d, :n].astype(np.int64)
    for i, s, j, t, gi, gj in seq.neighbours(sym, n, REMOVE_TO, ADD_TO).tolist():
        after = sym.copy()
        after[i], after[j] = gi, gj
        if not avoid_correct or not is_correct(after, n, *scratch()):
            return f"('move', [{i}, {s}, {j}, {t}])"
    raise AssertionError("no legal move")


def test_matchstick_equation_stack_bound_at_a_used_up_budget():
    """Easy (one-move budget): a correct equation broken by a move reads 1 (undo it); a broken
    equation moved further reads 2 (undo, then a move); each equals the bfs plan."""
    generated = _env("matchstick_equation/easy", 1)
    generated.reset(seeds=[3])
    env = _env("matchstick_equation/easy", 2)
    env.reset(init_states=[{"broken": list("1+1=2")}, generated.state_dicts()[0]])
    assert env.success().tolist() == [True, False] and env.potential().tolist() == [0, 1]
    env.step([_legal_move(env, 0), _legal_move(env, 1)])
    assert not env.success().any()
    np.testing.assert_array_equal(env.potential(), [1, 2])
    np.testing.assert_array_equal(env.potential(), [len(p) - 1 for p in env.solve("bfs")])
    env.step(["('undo', 'undo')"] * 2)
    assert env.potential().tolist() == [0, 1]


def test_matchstick_equation_bound_never_exceeds_the_optimal_plan_on_hard():
    rng = np.random.default_rng(9)
    env = _env("matchstick_equation/hard", len(SEEDS))
    env.reset(seeds=SEEDS)
    for t in range(8):
        optimal = np.array([len(p) - 1 for p in env.solve("bfs")], np.float32)
        pot = _assert_zero_exactly_on_success(env, f"step {t}")
        assert (pot <= optimal).all(), (t, pot, optimal)
        moves = [_legal_move(env, b, avoid_correct=False) if rng.random() < 0.7
                 else "('undo', 'undo')" for b in range(env.num_envs)]
        env.step(moves)


# ------------------------------------------------------------------------------ matchstick_rotation
def _stick(dx, dy, turn):
    """A pose (dx, dy) canvas px and ``turn`` degrees off a target at (40, 60), heading 30."""
    return {"scale": 1.0, "target_mid": [40.0, 60.0], "target_ang": 30.0,
            "initial_mid": [40.0 + dx, 60.0 + dy], "initial_ang": 30.0 + turn}


def test_matchstick_rotation_potential_is_the_pose_excess_in_tolerances():
    """hard: 5 px and 10 degrees. Inside both tolerances (boundary included) 0; beyond, the
    excess over each tolerance divided by it, summed; a turn of 180 is no error."""
    env = _env("matchstick_rotation/hard", 7)
    env.reset(init_states=[_stick(3, 4, 10), _stick(8, 0, 0), _stick(0, 0, 25),
                           _stick(0, -15, -40), _stick(0, 0, 180), _stick(5, 0, 10.5),
                           _stick(0, 0, 170)])
    expected = [0.0, 3 / 5, 15 / 10, 10 / 5 + 30 / 10, 0.0, 0.5 / 10, 0.0]
    np.testing.assert_allclose(env.potential(), expected, rtol=1e-6)
    assert env.success().tolist() == [True, False, False, False, True, False, True]


def test_matchstick_rotation_potential_with_zero_tolerances_counts_px_and_degrees():
    env = visgym.make("matchstick_rotation/hard", num_envs=3, max_steps=None, pos_tolerance=0,
                      ang_tolerance=0)
    env.reset(init_states=[_stick(0, 0, 0), _stick(3, 4, 0), _stick(0, 0, 2)])
    np.testing.assert_allclose(env.potential(), [0.0, 5.0, 2.0], rtol=1e-6)
    assert env.success().tolist() == [True, False, False]
