"""sliding_block behaviour from spec/envs/sliding_block.md: generation, grammar, dynamics,
feedback, success, frames, text mode, prompt, solver, init states and params."""
import json
from collections import deque

import numpy as np
import pytest

import visgym
from visgym.envs.sliding_block import (BLOCK_COLOR, BLOCK_SIZE, CLASSIC_POS, COLOR_RGB,
                                       CURRENT_X0, TITLE_PX)
from visgym.kernels.blocks import STREAM_SCRAMBLE
from visgym.kernels.rng import below, seed_state

STOP = "('stop', 'stop')"
DELTA = ((-1, 0), (0, 1), (1, 0), (0, -1))
CLASSIC = {k + 1: tuple(int(v) for v in CLASSIC_POS[k]) for k in range(10)}
SIZES = {k + 1: tuple(int(v) for v in BLOCK_SIZE[k]) for k in range(10)}


def _env(difficulty="easy", n=1, **kw):
    return visgym.make(f"sliding_block/{difficulty}", num_envs=n, autoreset="disabled",
                       max_steps=None, **kw)


def _positions(blocks):
    return {int(k): tuple(v["position"]) for k, v in blocks.items()}


def _board(pos):
    board = np.zeros((5, 4), int)
    for bid, (r, c) in pos.items():
        h, w = SIZES[bid]
        assert 0 <= r <= 5 - h and 0 <= c <= 4 - w, "block on the board"
        assert not board[r:r + h, c:c + w].any(), "blocks do not overlap"
        board[r:r + h, c:c + w] = bid
    return board


def _cells(bid, r, c):
    h, w = SIZES[bid]
    return [(r + i, c + j) for i in range(h) for j in range(w)]


def _can_move(pos, bid, d):
    r, c = pos[bid][0] + DELTA[d][0], pos[bid][1] + DELTA[d][1]
    h, w = SIZES[bid]
    if r < 0 or c < 0 or r + h > 5 or c + w > 4:
        return False
    taken = {cell for other, (rr, cc) in pos.items() if other != bid
             for cell in _cells(other, rr, cc)}
    return not taken.intersection(_cells(bid, r, c))


def _valid_moves(pos):
    return [(bid, d) for bid in range(1, 11) for d in range(4) if _can_move(pos, bid, d)]


def _moved(pos, bid, d):
    out = dict(pos)
    out[bid] = (pos[bid][0] + DELTA[d][0], pos[bid][1] + DELTA[d][1])
    return out


def _bfs_length(start, goal):
    """Plain breadth-first search over layouts (tuples of positions, ids 1..10)."""
    start = tuple(start[b] for b in range(1, 11))
    goal = tuple(goal[b] for b in range(1, 11))
    seen = {start}
    frontier = [start]
    dist = 0
    while frontier:
        if goal in seen:
            return dist
        nxt = []
        for layout in frontier:
            pos = dict(zip(range(1, 11), layout))
            for bid, d in _valid_moves(pos):
                moved = list(layout)
                moved[bid - 1] = (layout[bid - 1][0] + DELTA[d][0], layout[bid - 1][1] + DELTA[d][1])
                moved = tuple(moved)
                if moved not in seen:
                    seen.add(moved)
                    nxt.append(moved)
        frontier = nxt
        dist += 1
    return None


def _reference_scramble(seed, n):
    """The reference's _improved_shuffle (spec 3) written plainly on dicts, drawing from the same
    per-episode stream as the kernel in place of RandomState.randint."""
    # Numba hands uint64 states back to Python as ints: re-wrap them so they stay uint64.
    s = np.uint64(seed_state(np.uint64(seed), STREAM_SCRAMBLE))

    def randint(k):
        nonlocal s
        s, v = below(s, k)
        s = np.uint64(s)
        return int(v)

    pos = dict(CLASSIC)
    count = 0
    while count < n // 3:
        d = randint(4)
        if _can_move(pos, 1, d):
            pos = _moved(pos, 1, d)
        else:
            moves = _valid_moves(pos)
            pos = _moved(pos, *moves[randint(len(moves))])
        count += 1
    last = None
    for _ in range((2 * n) // 3):
        moves = _valid_moves(pos)
        if last is not None:
            moves = [m for m in moves if m != (last[0], (last[1] + 2) % 4)] or moves
        last = moves[randint(len(moves))]
        pos = _moved(pos, *last)
    budget = n // 6
    for bid in range(1, 11):
        disp = abs(pos[bid][0] - CLASSIC[bid][0]) + abs(pos[bid][1] - CLASSIC[bid][1])
        attempts = 0
        while disp < 1 and attempts < 10 and budget > 0:
            best = []
            for d in range(4):
                if _can_move(pos, bid, d):
                    r, c = _moved(pos, bid, d)[bid]
                    nd = abs(r - CLASSIC[bid][0]) + abs(c - CLASSIC[bid][1])
                    if nd > disp:
                        best.append((d, nd))
            if best:
                best.sort(key=lambda x: x[1], reverse=True)
                pos = _moved(pos, bid, best[0][0])
                disp = best[0][1]
                budget -= 1
            attempts += 1
    return pos


# --------------------------------------------------------------------------- generation
@pytest.mark.parametrize("difficulty,n", [("easy", 30), ("hard", 90)])
def test_agent_starts_classic_and_the_scramble_is_the_target(difficulty, n):
    env = _env(difficulty, 24)
    env.reset(seeds=range(24))
    targets = set()
    for seed, d in enumerate(env.state_dicts()):
        assert _positions(d["current_blocks"]) == CLASSIC
        assert _positions(d["original_blocks"]) == CLASSIC
        target = _positions(d["target_blocks"])
        _board(target)
        assert target != CLASSIC, "N >= 6 always moves something"
        assert target == _reference_scramble(seed, n)
        targets.add(tuple(sorted(target.items())))
    assert len(targets) > 20


@pytest.mark.parametrize("difficulty,n", [("easy", 30), ("hard", 90)])
def test_targets_are_reachable_within_the_scramble_length(difficulty, n):
    env = _env(difficulty, 64)
    env.reset(seeds=range(64))
    lengths = [len(p) - 1 for p in env.solve()]
    assert all(1 <= k <= n // 3 + (2 * n) // 3 + n // 6 for k in lengths)


def test_zero_shuffle_moves_makes_the_target_the_start():
    env = _env("easy", 3, num_shuffle_moves=0)
    env.reset(seeds=[1, 2, 3])
    assert env.success().all()
    assert all(_positions(d["target_blocks"]) == CLASSIC for d in env.state_dicts())


# --------------------------------------------------------------------------- grammar and feedback
def _step(env, action):
    _, reward, terminated, _, info = env.step([action])
    return float(reward[0]), bool(terminated[0]), info["feedback"][0]


@pytest.mark.parametrize("action,block,direction", [
    ("('move', (7, 1))", 7, 1),
    ("('move', [7, 1])", 7, 1),
    ("('move', (7.0, 1))", 7, 1),
    ("('move', (7, 1.0))", 7, 1),
    ("('move', (7, True))", 7, 1),
    ('\t(  "move" ,   (  7 ,   1  )  )', 7, 1),
    ("('move', (10, 2))\n", 10, 2),
])
def test_accepted_move_spellings(action, block, direction):
    env = _env()
    env.reset(seeds=[0])
    before = _positions(env.state_dicts()[0]["current_blocks"])
    assert _step(env, action) == (0.0, False, "Action executed successfully.")
    assert _positions(env.state_dicts()[0]["current_blocks"]) == _moved(before, block, direction)
    assert int(env.state.moves[0]) == 1


def test_true_as_block_id_moves_block_one():
    env = _env()
    env.reset(seeds=[0])
    env.step(["('move', (9, 2))"])   # frees nothing for block 1 yet
    _, _, feedback = _step(env, "('move', (True, 2))")
    assert feedback == ("The action (True, 2) is not valid because the block True cannot move "
                        "in the direction down.")
    env.reset(init_states=[_state(current={1: (1, 1), 2: (0, 1), 9: (4, 1), 10: (4, 2)})])
    assert _step(env, "('move', (True, 2))")[2] == "Action executed successfully."
    assert _positions(env.state_dicts()[0]["current_blocks"])[1] == (2, 1)


@pytest.mark.parametrize("action,message", [
    ("('move', (1, 0))", "The action (1, 0) is not valid because the block 1 cannot move in the "
                         "direction up."),
    ("('move', (0, 2))", "The action (0, 2) is not valid because the block 0 cannot move in the "
                         "direction down."),
    ("('move', [3, 3])", "The action [3, 3] is not valid because the block 3 cannot move in the "
                         "direction left."),
    ("('move', (10.0, 0))", "The action (10.0, 0) is not valid because the block 10.0 cannot "
                            "move in the direction up."),
    ("('move', (False, True))", "The action (False, True) is not valid because the block False "
                                "cannot move in the direction right."),
    ("('move', (4, -0.0))", "The action (4, -0.0) is not valid because the block 4 cannot move "
                            "in the direction up."),
    ("('move', (2, 2.0))", "The action (2, 2.0) is not valid because the block 2 cannot move in "
                           "the direction down."),
])
def test_refused_moves_echo_the_payload_and_change_nothing(action, message):
    env = _env()
    env.reset(seeds=[0])
    before = env.state_dicts()
    assert _step(env, action) == (0.0, False, message)
    assert env.state_dicts() == before and int(env.state.moves[0]) == 0


@pytest.mark.parametrize("action,payload", [
    ("('move', (7, 0.5))", "(7, 0.5)"),        # fractional direction: reference moved left
    ("('move', (3, 1.5))", "(3, 1.5)"),        # ... or raised KeyError
    ("('move', (1.5, 0))", "(1.5, 0)"),
    ("('move', ('a', 'b'))", "('a', 'b')"),    # reference raised UFuncTypeError
    ("('move', ('7', '1'))", "('7', '1')"),
    ("('move', ((1, 2), 0))", "((1, 2), 0)"),  # reference raised ValueError
    ("('move', (1, 2j))", "(1, 2j)"),
    ("('move', (11, 0))", "(11, 0)"),
    ("('move', (1, 4))", "(1, 4)"),
    ("('move', (-1, 0))", "(-1, 0)"),
    ("('move', (1, -1))", "(1, -1)"),
    ("('move', (1, 2, 3))", "(1, 2, 3)"),
    ("('move', (1,))", "(1,)"),
    ("('move', 1)", "1"),
    ("('move', None)", "None"),
    ("('move', {1: 0})", "{1: 0}"),
    ("('move', (1, float('nan')))", None),
    ("('move', (1e309, 0))", "(inf, 0)"),
])
def test_invalid_payloads_are_reported_and_change_nothing(action, payload):
    env = _env()
    env.reset(seeds=[0])
    before = env.state_dicts()
    reward, terminated, feedback = _step(env, action)
    assert not terminated and reward == 0.0
    if payload is not None:
        assert feedback == (f"The action {payload} is not in the valid action space of move so "
                            "nothing is executed.")
    assert env.state_dicts() == before


@pytest.mark.parametrize("action,ok", [
    (STOP, True), ("('stop', 'ok')", True), ("('stop', 'STOP')", True), ('("stop", "stop")', True),
    ("('stop', 'stop!')", False), ("('stop', '')", False), ("('stop', 5)", False),
    ("('Stop', 'stop')", False),
])
def test_stop_payloads(action, ok):
    env = _env()
    env.reset(seeds=[0])
    assert _step(env, action)[1] is ok


# --------------------------------------------------------------------------- dynamics and success
def _state(current=None, target=None):
    cur = {**CLASSIC, **(current or {})}
    tgt = {**CLASSIC, **(target or {})}

    def blocks(pos):
        return {bid: {"size": SIZES[bid], "color": BLOCK_COLOR[bid - 1], "is_target": bid == 1,
                      "position": pos[bid]} for bid in range(1, 11)}
    return {"original_blocks": blocks(CLASSIC), "target_blocks": blocks(tgt),
            "current_blocks": blocks(cur)}


def test_moves_are_one_cell_and_blocked_by_edges_and_other_blocks():
    env = _env()
    env.reset(init_states=[_state()])
    assert _step(env, "('move', (7, 3))")[2].endswith("cannot move in the direction left.")
    assert _step(env, "('move', (2, 2))")[2].endswith("cannot move in the direction down.")
    assert _step(env, "('move', (7, 1))")[2] == "Action executed successfully."
    assert _step(env, "('move', (9, 2))")[2].endswith("cannot move in the direction down.")
    assert env.state.board[0].tolist() == [[3, 1, 1, 4], [3, 1, 1, 4], [5, 2, 2, 6],
                                           [5, 9, 10, 6], [0, 7, 0, 8]]
    assert _step(env, "('move', (5, 2))")[2] == "Action executed successfully."
    assert env.state.board[0, :, 0].tolist() == [3, 3, 0, 5, 5]
    assert int(env.state.moves[0]) == 2


def test_stop_rewards_only_the_exact_target_and_twins_do_not_count():
    target = {7: (4, 1), 8: (4, 2)}
    env = _env()
    env.reset(init_states=[_state(target=target)])
    assert _step(env, STOP) == (0.0, True, "Action executed successfully.")
    env.step(["('move', (7, 1))"])
    env.step(["('move', (8, 3))"])
    assert env.success()[0]
    assert _step(env, STOP)[:2] == (1.0, True)
    # Same picture with the yellow twins 7 and 8 swapped: not solved.
    env.reset(init_states=[_state(current={7: (4, 2), 8: (4, 1)}, target=target)])
    assert not env.success()[0] and _step(env, STOP)[:2] == (0.0, True)


def test_steps_after_stop_are_processed():
    env = _env()
    env.reset(seeds=[0])
    env.step([STOP])
    assert _step(env, "('move', (7, 1))")[2] == "Action executed successfully."


# --------------------------------------------------------------------------- frames
def test_frame_layout_colours_and_outlines():
    env = _env()
    frames, _ = env.reset(init_states=[_state(target={7: (4, 1)})])
    f = frames[0].astype(int)
    assert f.shape == (290, 420, 3)
    assert (f[:TITLE_PX, :, :].min(axis=2) < 255).any(), "titles are drawn"
    assert (f[TITLE_PX:, 200:220] == 255).all(), "white gap between the boards"
    for x0 in (0, CURRENT_X0):
        for bid, (r, c) in CLASSIC.items():
            if x0 == 0 and bid == 7:
                continue  # moved in the target
            y, x = TITLE_PX + r * 50, x0 + c * 50
            h, w = (v * 50 for v in SIZES[bid])
            rgb = COLOR_RGB[BLOCK_COLOR[bid - 1]]
            assert tuple(f[y + 6, x + 6]) == rgb, bid
            # 2-px outline inside the block box; the fill starts at the third pixel.
            assert (f[y:y + 2, x + 5] == 0).all() and (f[y + 5, x:x + 2] == 0).all()
            assert (f[y + h - 2:y + h, x + 5] == 0).all() and (f[y + 5, x + w - 2:x + w] == 0).all()
            assert tuple(f[y + 2, x + 5]) == rgb and tuple(f[y + 5, x + 2]) == rgb
    # Current board: empty cells (4,1) and (4,2); the neighbours' outlines spill one pixel into
    # them (the reference's OpenCV rectangle), the rest is white.
    y, x = TITLE_PX + 4 * 50, CURRENT_X0 + 50
    cell = f[y:y + 50, x:x + 100]
    assert (cell[0] == 0).all(), "blocks 9 and 10 above"
    assert (cell[:, 0] == 0).all() and (cell[:, 99] == 0).all(), "blocks 7 and 8 beside"
    assert (cell[1:, 1:99] == 255).all()
    # Target board: block 7 moved right, so (4,0) is the empty one.
    y, x = TITLE_PX + 4 * 50, 0
    assert (f[y + 1:y + 50, x:x + 49] == 255).all() and (f[y + 1:y + 50, 49] == 0).all()


def test_goal_frame_shows_the_target_on_both_boards():
    env = _env()
    env.reset(seeds=[3])
    goal = env.goal_frames()[0]
    np.testing.assert_array_equal(goal[TITLE_PX:, :200], goal[TITLE_PX:, CURRENT_X0:])


# --------------------------------------------------------------------------- text and prompt
def test_render_text_puts_target_left_and_current_right():
    env = _env()
    env.reset(init_states=[_state(target={7: (4, 1), 8: (4, 2)})])
    assert env.render_text(0) == ("Target   Current\n-----------\n"
                                  "3114 | 3114\n3114 | 3114\n5226 | 5226\n5906 | 5906\n"
                                  ".78. | 7..8")


def test_prompt_states_the_task_actions_and_examples():
    env = _env()
    env.reset(seeds=[0])
    image, text = env.prompt(), env.prompt(text_mode=True)
    for p in (image, text):
        assert p.startswith("You are solving a 5x4 sliding block puzzle (Klotski).")
        assert "- Left: the target configuration" in p and "- Right: the current" in p
        assert "`('move', (block_id, direction))`" in p and "(1-10)" in p
        assert "0=up, 1=right, 2=down, 3=left" in p and "`('stop', 'stop')`" in p
        assert "all blocks are in their target positions when you stop" in p
        assert p.count("- To move block") == 4
    assert "'.' represents an empty space" in text and "'.'" not in image


# --------------------------------------------------------------------------- solver
def _run(env, plans):
    rewards = np.zeros(len(plans))
    done = np.zeros(len(plans), bool)
    for t in range(max(map(len, plans))):
        _, reward, terminated, _, _ = env.step([p[min(t, len(p) - 1)] for p in plans])
        rewards += np.where(done, 0, reward)
        done |= terminated
    return done, rewards


def test_bfs_plans_are_shortest_and_succeed():
    env = _env("easy", 4)
    env.reset(seeds=range(4))
    plans = env.solve(strategy="bfs")
    for p, d in zip(plans, env.state_dicts()):
        assert p[-1] == STOP and STOP not in p[:-1]
        assert len(p) - 1 == _bfs_length(_positions(d["current_blocks"]),
                                         _positions(d["target_blocks"]))
    done, rewards = _run(env, plans)
    assert done.all() and (rewards == 1).all()


@pytest.mark.parametrize("num_steps", [23, 24, 40])
def test_padded_plans_reach_num_steps_and_still_succeed(num_steps):
    env = _env("hard", 8)
    env.reset(seeds=range(8))
    base = [len(p) - 1 for p in env.solve()]
    plans = env.solve(num_steps=num_steps)
    for n, p in zip(base, plans):
        pairs = max(0, (num_steps - n + 1) // 2)
        assert len(p) - 1 == n + 2 * pairs
    assert env.solve(num_steps=num_steps) == plans, "deterministic"
    done, rewards = _run(env, plans)
    assert done.all() and (rewards == 1).all()


@pytest.mark.parametrize("num_steps", [None, 5, 6])
def test_already_solved_plans_keep_whole_pairs(num_steps):
    env = _env("easy", 2, num_shuffle_moves=0)
    env.reset(seeds=[0, 1])
    plans = env.solve(num_steps=num_steps)
    want = 0 if num_steps is None else 2 * ((num_steps + 1) // 2)
    assert all(len(p) - 1 == want for p in plans)
    done, rewards = _run(env, plans)
    assert (rewards == 1).all()


def test_search_cap_gives_a_bare_stop(monkeypatch):
    # The reference returns a bare stop when its search finds nothing; ours also gives up at
    # its state cap (set very low here).
    import visgym.envs.sliding_block as module
    monkeypatch.setattr(module, "MAX_SEARCH_STATES", 10)
    env = _env("hard", 1)
    env.reset(seeds=[0])
    assert env.solve() == [[STOP]]


# --------------------------------------------------------------------------- init states
def test_init_states_accept_int_ids_and_tuples_and_the_json_form():
    raw = _state(target={7: (4, 1)})
    env = _env()
    env.reset(init_states=[raw])
    dicts = env.state_dicts()
    as_json = json.loads(json.dumps(raw))
    assert set(as_json["current_blocks"]) == {str(k) for k in range(1, 11)}
    other = _env()
    other.reset(init_states=[as_json])
    assert other.state_dicts() == dicts
    assert json.loads(json.dumps(dicts)) == dicts, "state dicts are already JSON-shaped"
    assert dicts[0]["current_blocks"]["1"] == {"size": [2, 2], "color": "red",
                                               "is_target": True, "position": [0, 1]}
    assert _step(other, "('move', (7, 1))")[2] == "Action executed successfully."


def test_init_state_loads_the_current_layout_mid_episode():
    env = _env()
    env.reset(seeds=[4])
    env.step(["('move', (7, 1))"])
    dicts = env.state_dicts()
    other = _env()
    other.reset(init_states=dicts)
    assert other.state_dicts() == dicts
    np.testing.assert_array_equal(other.state.board, env.state.board)


def _broken(path, value):
    state = json.loads(json.dumps(_state()))
    node = state
    for key in path[:-1]:
        node = node[key]
    if value is KeyError:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return state


@pytest.mark.parametrize("path,value,field", [
    (("target_blocks",), KeyError, r"init_states\[0\]\.target_blocks: missing"),
    (("current_blocks", "7"), KeyError, r"init_states\[0\]\.current_blocks\.7: missing"),
    (("current_blocks", "11"), {"size": [1, 1], "position": [4, 1]}, r"current_blocks: block ids"),
    (("current_blocks", "7", "position"), [4, 3], r"current_blocks: blocks 7 and 8 overlap"),
    (("current_blocks", "7", "position"), [5, 0], r"current_blocks\.7\.position"),
    (("current_blocks", "7", "position"), [4.0, 1], r"current_blocks\.7\.position"),
    (("target_blocks", "1", "size"), [1, 1], r"target_blocks\.1\.size"),
    (("original_blocks", "3", "color"), "red", r"original_blocks\.3\.color"),
    (("original_blocks", "3", "is_target"), True, r"original_blocks\.3\.is_target"),
    (("current_blocks", "2", "position"), KeyError, r"current_blocks\.2\.position: missing"),
])
def test_bad_init_states_name_the_field(path, value, field):
    env = _env()
    env.reset(seeds=[0])
    before = env.state_dicts()
    with pytest.raises(ValueError, match=field):
        env.reset(init_states=[_broken(path, value)])
    assert env.state_dicts() == before


def test_params_are_validated():
    for bad in (-1, 1.5, True, "30"):
        with pytest.raises(ValueError, match="num_shuffle_moves"):
            visgym.make("sliding_block/easy", num_shuffle_moves=bad)
    assert visgym.make("sliding_block/hard").params.num_shuffle_moves == 90


@pytest.mark.parametrize("path,value,field", [
    (("original_blocks", "3", "color"), np.array(["blue"]), r"original_blocks\.3\.color"),
    (("original_blocks", "3", "color"), ["blue"], r"original_blocks\.3\.color"),
    (("original_blocks", "3", "color"), None, r"original_blocks\.3\.color"),
    (("original_blocks", "1", "is_target"), 1, r"original_blocks\.1\.is_target: expected True"),
    (("original_blocks", "1", "is_target"), np.array([True]), r"original_blocks\.1\.is_target"),
    (("target_blocks", "2", "size"), np.array([1, 2, 3]), r"target_blocks\.2\.size"),
])
def test_unhashable_or_array_field_values_are_named(path, value, field):
    """A NumPy array as a colour used to raise "The truth value of an array ... is ambiguous",
    naming nothing."""
    env = _env()
    env.reset(seeds=[0])
    before = env.state_dicts()
    with pytest.raises(ValueError, match=field):
        env.reset(init_states=[_broken(path, value)])
    assert env.state_dicts() == before


def test_numpy_bools_and_ints_are_accepted_where_python_ones_are():
    state = _broken(("original_blocks", "1", "is_target"), np.bool_(True))
    state["current_blocks"]["7"]["position"] = (np.int64(4), np.int8(0))
    env = _env()
    env.reset(init_states=[state])
    assert env.state_dicts() == [json.loads(json.dumps(_state()))]


def test_hostile_values_are_quoted_briefly():
    deep = []
    for _ in range(5000):
        deep = [deep]
    env = _env()
    for path, value, field in [
        (("current_blocks", "7", "position"), deep, "current_blocks.7.position"),
        (("current_blocks", "7", "size"), deep, "current_blocks.7.size"),
        (("current_blocks", "7", "color"), "x" * 10**6, "current_blocks.7.color"),
        (("current_blocks", "7", "position"), [10**5000, 0], "current_blocks.7.position"),
        (("current_blocks", "x" * 10**6), {"size": [1, 1], "position": [4, 1]}, "current_blocks"),
    ]:
        with pytest.raises(ValueError) as err:
            env.reset(init_states=[_broken(path, value)])
        message = str(err.value)
        assert message.startswith(f"init_states[0].{field}") and len(message) < 250, message


def test_num_shuffle_moves_is_bounded_to_what_solves_in_seconds():
    """10**6 shuffle moves used to be accepted: 0.14 s of scrambling per episode, and a target
    as random as one 10,000 moves away."""
    with pytest.raises(ValueError, match=r"num_shuffle_moves: must be <= 10000"):
        visgym.make("sliding_block/easy", num_shuffle_moves=10**6)
    params = visgym.make("sliding_block/easy", num_shuffle_moves=np.int32(10_000)).params
    assert type(params.num_shuffle_moves) is int and params.num_shuffle_moves == 10_000
