"""jigsaw behaviour from spec/envs/jigsaw.md: generation, grammar (section 5), dynamics, reward,
frames (size and exact piece geometry, unequal pieces included), prompt, solvers, the image
folder layout, init states and params."""
import json
import math

import numpy as np
import pytest
from PIL import Image, ImageOps

import visgym
from contract_checks import assert_frames_equal_a_full_redraw, assert_hostile_init_refused
from visgym.envs.jigsaw import fit_picture

STOP = "('stop', 'stop')"
INVALID = "The action {payload} is not in the valid action space of {name} so nothing is executed."


def _picture(h, w, seed=0):
    """A non-repetitive RGB test picture (every pixel different enough to tell pieces apart)."""
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, (h, w, 3), dtype=np.uint8)


def _folder(tmp_path, sizes, seed=0):
    """A folder of PNG pictures named p0.png, p1.png, ... of the given (h, w) sizes."""
    for k, (h, w) in enumerate(sizes):
        Image.fromarray(_picture(h, w, seed + k)).save(tmp_path / f"p{k}.png")
    return str(tmp_path)


def _env(difficulty="easy", n=1, **kw):
    return visgym.make(f"jigsaw/{difficulty}", num_envs=n, autoreset="disabled",
                       max_steps=None, **kw)


def _loaded(init, difficulty="easy", **kw):
    env = _env(difficulty, **kw)
    env.reset(init_states=[init])
    return env


def reference_board(picture, rows, cols, border, current, target):
    """The reference's drawing, with Pillow as it does it: crop k of the picture (the first
    W % C columns / H % R rows one pixel larger) framed by ``border`` white pixels is piece
    target[k]; position p gets piece current[p] pasted at the cell's nominal offset plus 2 *
    border per preceding column/row, on a black canvas, in row-major order."""
    image = Image.fromarray(picture)
    w, h = image.size

    def spans(total, parts):
        base, extra = divmod(total, parts)
        sizes = [base + (1 if i < extra else 0) for i in range(parts)]
        return [sum(sizes[:i]) for i in range(parts)], sizes

    xs, ws = spans(w, cols)
    ys, hs = spans(h, rows)
    pieces = {}
    for k in range(rows * cols):
        i, j = divmod(k, cols)
        crop = image.crop((xs[j], ys[i], xs[j] + ws[j], ys[i] + hs[i]))
        if border > 0:
            crop = ImageOps.expand(crop, border=border, fill="white")
        pieces[target[k]] = crop
    canvas = Image.new("RGB", (w + 2 * cols * border, h + 2 * rows * border))
    for p, piece in enumerate(current):
        r, c = divmod(p, cols)
        canvas.paste(pieces[piece], (xs[c] + 2 * border * c, ys[r] + 2 * border * r))
    return np.asarray(canvas)


# ------------------------------------------------------------------------------ generation
def test_reset_starts_at_the_identity_with_a_non_identity_target():
    env = _env("hard", n=200)
    env.reset(seeds=range(200))
    for d in env.state_dicts():
        assert d["current_state"] == list(range(9))
        assert sorted(d["target_state"]) == list(range(9))
        assert d["target_state"] != list(range(9))
    assert not env.success().any()


def test_two_by_two_targets_are_uniform_over_the_23_scrambles():
    env = _env("easy", n=2300)
    env.reset(seeds=range(2300))
    counts = {}
    for d in env.state_dicts():
        counts[tuple(d["target_state"])] = counts.get(tuple(d["target_state"]), 0) + 1
    assert len(counts) == 23 and (0, 1, 2, 3) not in counts
    assert min(counts.values()) > 50 and max(counts.values()) < 160


def test_target_is_the_reference_draw_for_the_seed():
    env = _env("hard", n=3)
    env.reset(seeds=[7, 1007, 123456789])
    for seed, d in zip([7, 1007, 123456789], env.state_dicts()):
        rng = np.random.default_rng(seed)
        order = list(range(9))
        rng.shuffle(order)
        while order == list(range(9)):
            rng.shuffle(order)
        assert d["target_state"] == order


def test_picture_is_a_pure_function_of_the_seed(tmp_path):
    folder = _folder(tmp_path, [(12, 12)] * 5)
    alone = _env(sample_dir=folder)
    batch = _env(n=8, sample_dir=folder)
    batch.reset(seeds=[40, 41, 42, 43, 44, 45, 46, 47])
    names = [d["image_name"] for d in batch.state_dicts()]
    for k, seed in enumerate(range(40, 48)):
        alone.reset(seeds=[seed])
        assert alone.state_dicts()[0]["image_name"] == names[k]
    # Consecutive seeds show every picture before any repeats.
    assert sorted(names[:5]) == [f"p{k}.png" for k in range(5)]


# ------------------------------------------------------------------------------ grammar
INIT = {"image_name": "astronaut", "current_state": [0, 1, 2, 3],
        "target_state": [2, 0, 1, 3]}

# (action, feedback or None for success, current_state after it, terminated)
GRAMMAR = [
    ("('swap', ((0, 0), (1, 1)))", None, [3, 1, 2, 0], False),
    ("('swap', [[0, 0], [1, 1]])", None, [3, 1, 2, 0], False),
    ("('swap', ([0, 1], (1, 0)))", None, [0, 2, 1, 3], False),
    ("('swap', ((0, 1), (0, 1)))", None, [0, 1, 2, 3], False),
    ("('swap', ((True, 0), (0, False)))", None, [2, 1, 0, 3], False),
    ("(  'swap' ,   (  (  0 ,   0  ) ,   (  1 ,   1  )  )  )", None, [3, 1, 2, 0], False),
    ('("swap", ((0, 1), (0, 0)))', None, [1, 0, 2, 3], False),
    ("('swap', ((0.5, 0), (1, 1)))", INVALID.format(payload="((0.5, 0), (1, 1))", name="swap"),
     [0, 1, 2, 3], False),
    ("('swap', ((0, 0), (1.0, 1.0)))", INVALID.format(payload="((0, 0), (1.0, 1.0))",
                                                      name="swap"), [0, 1, 2, 3], False),
    ("('swap', ((0, 2), (0, 0)))", INVALID.format(payload="((0, 2), (0, 0))", name="swap"),
     [0, 1, 2, 3], False),
    ("('swap', ((-1, 0), (0, 0)))", INVALID.format(payload="((-1, 0), (0, 0))", name="swap"),
     [0, 1, 2, 3], False),
    ("('swap', ((0, 0),))", INVALID.format(payload="((0, 0),)", name="swap"), [0, 1, 2, 3],
     False),
    ("('swap', ((0, 0, 0), (1, 1, 1)))", INVALID.format(payload="((0, 0, 0), (1, 1, 1))",
                                                        name="swap"), [0, 1, 2, 3], False),
    ("('swap', (('a', 0), (1, 1)))", INVALID.format(payload="(('a', 0), (1, 1))", name="swap"),
     [0, 1, 2, 3], False),
    ("('swap', ((1j, 0), (1, 1)))", INVALID.format(payload="((1j, 0), (1, 1))", name="swap"),
     [0, 1, 2, 3], False),
    ("('swap', 5)", INVALID.format(payload="5", name="swap"), [0, 1, 2, 3], False),
    ("('swap', None)", INVALID.format(payload="None", name="swap"), [0, 1, 2, 3], False),
    ("('reorder', [2, 0, 1, 3])", None, [2, 0, 1, 3], False),
    ("('reorder', [True, False, 2, 3])", None, [1, 0, 2, 3], False),
    ("('reorder', (1, 0, 3, 2))", INVALID.format(payload="(1, 0, 3, 2)", name="reorder"),
     [0, 1, 2, 3], False),
    ("('reorder', 'abc')", INVALID.format(payload="abc", name="reorder"), [0, 1, 2, 3], False),
    ("('reorder', [0, 0, 0, 0])", INVALID.format(payload="[0, 0, 0, 0]", name="reorder"),
     [0, 1, 2, 3], False),
    ("('reorder', [1, 2, 3, 4])", INVALID.format(payload="[1, 2, 3, 4]", name="reorder"),
     [0, 1, 2, 3], False),
    ("('reorder', [0, 1, 2])", INVALID.format(payload="[0, 1, 2]", name="reorder"),
     [0, 1, 2, 3], False),
    ("('reorder', [0.0, 1.0, 2.0, 3.0])", INVALID.format(payload="[0.0, 1.0, 2.0, 3.0]",
                                                         name="reorder"), [0, 1, 2, 3], False),
    ("('reorder', [[0, 1], [2, 3]])", INVALID.format(payload="[[0, 1], [2, 3]]",
                                                     name="reorder"), [0, 1, 2, 3], False),
    ("('stop', 'stop')", None, [0, 1, 2, 3], True),
    ("('stop', 'ok')", None, [0, 1, 2, 3], True),
    ("('stop', 'STOP')", None, [0, 1, 2, 3], True),
    ("('stop', 'stop!')", INVALID.format(payload="stop!", name="stop"), [0, 1, 2, 3], False),
    ("('stop', 5)", INVALID.format(payload="5", name="stop"), [0, 1, 2, 3], False),
    ("('stop', b'stop')", INVALID.format(payload="b'stop'", name="stop"), [0, 1, 2, 3], False),
    ("('jump', 1)", "The action name 'jump' is not recognized in the available action space.",
     [0, 1, 2, 3], False),
    ("('Stop', 'stop')", "The action name 'Stop' is not recognized in the available action "
     "space.", [0, 1, 2, 3], False),
    ("('stop',)", "The action format is invalid. The action should be a tuple of two elements "
     "with the first element being the action name and the second element being the action "
     "payload.", [0, 1, 2, 3], False),
    ("['swap', ((0, 0), (1, 1))]", "The action format is invalid. The action should be a tuple "
     "of two elements with the first element being the action name and the second element "
     "being the action payload.", [0, 1, 2, 3], False),
]


@pytest.mark.parametrize("action,feedback,after,terminated", GRAMMAR,
                         ids=[g[0] for g in GRAMMAR])
def test_grammar_table(action, feedback, after, terminated):
    env = _loaded(INIT)
    frame = env.frames.copy()
    _, reward, term, trunc, info = env.step([action])
    assert info["feedback"][0] == (feedback or "Action executed successfully.")
    assert env.state_dicts()[0]["current_state"] == after
    assert bool(term[0]) == terminated and not trunc[0] and reward[0] == 0.0
    if feedback is not None:
        np.testing.assert_array_equal(env.frames, frame)


@pytest.mark.parametrize("action", ["stop", "('stop', 'stop'", "", "Action: ('stop', 'stop')",
                                    "('st' + 'op', 'stop')", "x" * 5000])
def test_unparsable_text_is_a_parse_error(action):
    env = _loaded(INIT)
    _, reward, term, _, info = env.step([action])
    text = info["feedback"][0]
    assert text.startswith("Cannot parse action string ") and text.endswith(
        "so the action is invalid.")
    assert not term[0] and reward[0] == 0 and env.state_dicts()[0] == INIT


def test_hard_grid_bounds():
    env = _loaded({**INIT, "current_state": list(range(9)),
                   "target_state": [1, 0, 2, 3, 4, 5, 6, 7, 8]}, "hard")
    _, _, _, _, info = env.step(["('swap', ((2, 2), (2, 0)))"])
    assert info["feedback"][0] == "Action executed successfully."
    assert env.state_dicts()[0]["current_state"] == [0, 1, 2, 3, 4, 5, 8, 7, 6]
    _, _, _, _, info = env.step(["('swap', ((3, 0), (0, 0)))"])
    assert info["feedback"][0] == INVALID.format(payload="((3, 0), (0, 0))", name="swap")
    _, _, _, _, info = env.step(["('reorder', [0, 1, 2, 3])"])
    assert info["feedback"][0] == INVALID.format(payload="[0, 1, 2, 3]", name="reorder")


# ------------------------------------------------------------------------------ dynamics
def test_reorder_gathers_current_positions():
    env = _loaded({**INIT, "current_state": [3, 1, 0, 2]})
    env.step(["('reorder', [1, 2, 3, 0])"])
    # new[k] = old[L[k]]
    assert env.state_dicts()[0]["current_state"] == [1, 0, 2, 3]


def test_swap_exchanges_the_two_positions_row_major():
    env = _loaded({**INIT, "image_name": "astronaut", "current_state": list(range(9)),
                   "target_state": [8, 0, 1, 2, 3, 4, 5, 6, 7]}, "hard")
    env.step(["('swap', ((0, 2), (2, 1)))"])
    want = list(range(9))
    want[2], want[7] = want[7], want[2]
    assert env.state_dicts()[0]["current_state"] == want


# ------------------------------------------------------------------------------ reward
def test_reward_only_on_a_stop_with_the_target_shown():
    env = _loaded(INIT)
    _, reward, term, _, _ = env.step([STOP])
    assert term[0] and reward[0] == 0.0
    _, reward, term, _, info = env.step(["('reorder', [2, 0, 1, 3])"])
    assert not term[0] and reward[0] == 0.0 and info["success"][0]
    _, reward, term, _, _ = env.step([STOP])
    assert term[0] and reward[0] == 1.0
    # Steps after a stop are processed normally.
    _, reward, term, _, _ = env.step(["('swap', ((0, 0), (0, 1)))"])
    assert not term[0] and reward[0] == 0.0 and not env.success()[0]
    assert env.family.proportion_matched(env.state)[0] == 0.5


def test_never_truncates_without_a_budget():
    env = _loaded(INIT)
    for _ in range(100):
        _, _, term, trunc, _ = env.step(["('swap', ((0, 0), (0, 1)))"])
        assert not term[0] and not trunc[0]


# ------------------------------------------------------------------------------ frames
@pytest.mark.parametrize("size,grid,border", [
    ((120, 120), (2, 2), 1), ((96, 120), (2, 2), 1), ((128, 128), (3, 3), 1),
    ((13, 11), (3, 3), 1), ((13, 11), (3, 3), 2), ((17, 23), (4, 5), 0), ((7, 9), (2, 3), 3),
    ((5, 40), (1, 4), 1),
])
def test_frames_are_the_reference_paste_for_any_picture_size(tmp_path, size, grid, border):
    """Frame size (H + 2Rb) x (W + 2Cb) and every pixel, unequal pieces (1-px overlaps and
    gaps) included, after the reset and after each step of random swaps and reorders."""
    folder = _folder(tmp_path, [size])
    rows, cols = grid
    env = _env(sample_dir=folder, num_rows=rows, num_cols=cols, border_width=border)
    picture = np.asarray(Image.open(tmp_path / "p0.png").convert("RGB"))
    rng = np.random.default_rng(sum(size) + rows)
    n = rows * cols
    for seed in range(3):
        env.reset(seeds=[seed])
        h, w = size
        assert env.frame_hw[0].tolist() == [h + 2 * rows * border, w + 2 * cols * border]
        for t in range(12):
            d = env.state_dicts()[0]
            want = reference_board(picture, rows, cols, border, d["current_state"],
                                   d["target_state"])
            np.testing.assert_array_equal(env.frame(0), want, err_msg=f"seed {seed} step {t}")
            assert not env.frames[0, want.shape[0]:].any()
            assert not env.frames[0, :, want.shape[1]:].any()
            if t % 3 == 2:
                action = f"('reorder', {rng.permutation(n).tolist()})"
            else:
                p1, p2 = rng.integers(0, n, 2)
                action = f"('swap', (({p1 // cols}, {p1 % cols}), ({p2 // cols}, {p2 % cols})))"
            env.step([action])


def test_incremental_redraw_equals_a_full_redraw_with_unequal_pieces(tmp_path):
    folder = _folder(tmp_path, [(13, 11), (14, 17), (9, 9), (20, 19)])
    env = _env("hard", n=16, sample_dir=folder)
    env.reset(seeds=range(16))
    rng = np.random.default_rng(3)
    for t in range(20):
        actions = []
        for _ in range(16):
            if rng.random() < 0.3:
                actions.append(f"('reorder', {rng.permutation(9).tolist()})")
            else:
                p = rng.integers(0, 3, 4).tolist()
                actions.append(f"('swap', (({p[0]}, {p[1]}), ({p[2]}, {p[3]})))")
        env.step(actions)
        assert_frames_equal_a_full_redraw(env, f"step {t}")


def test_frames_stay_exact_when_the_picture_atlas_starts_over(tmp_path):
    """With a tiny atlas every picture not needed by the current draw is dropped and read
    again later; the episodes and their frames do not change."""
    sizes = [(13, 11), (14, 17), (9, 12), (20, 19), (16, 16)]
    folder = _folder(tmp_path, sizes)
    env = _env("hard", n=6, sample_dir=folder)
    env.work.atlas.byte_cap = 1
    other = _env("hard", n=6, sample_dir=folder)
    rng = np.random.default_rng(5)
    for episode in range(3):
        seeds = rng.integers(0, 1000, 6).tolist()
        env.reset(seeds=seeds)
        other.reset(seeds=seeds)
        for t in range(8):
            actions = [f"('reorder', {rng.permutation(9).tolist()})" if rng.random() < 0.5
                       else "('swap', ((0, 0), (2, 2)))" for _ in range(6)]
            env.step(actions)
            other.step(actions)
            np.testing.assert_array_equal(env.frames, other.frames)
            assert env.state_dicts() == other.state_dicts()
            assert_frames_equal_a_full_redraw(env, f"episode {episode} step {t}")
    assert env.work.atlas.restarts > 0


def test_sample_dir_accepts_a_path_object(tmp_path):
    folder = _folder(tmp_path, [(10, 10)])
    env = visgym.make("jigsaw/easy", sample_dir=tmp_path)
    assert env.params.sample_dir == folder and type(env.params.sample_dir) is str


def test_solved_board_is_the_picture_with_white_lines_between_pieces():
    env = _loaded({**INIT, "image_name": "astronaut", "current_state": [2, 0, 1, 3]})
    picture = env.family.picture(env.family.source.id_of("astronaut"))
    frame = env.frame(0)
    assert frame.shape == (340, 340, 3)
    inner = np.delete(np.delete(frame, [0, 169, 170, 339], axis=0), [0, 169, 170, 339], axis=1)
    np.testing.assert_array_equal(inner, picture)
    for line in (0, 169, 170, 339):
        assert (frame[line] == 255).all() and (frame[:, line] == 255).all()


def test_goal_frames_show_the_solved_board():
    env = _loaded(INIT)
    goal = env.goal_frames()
    env.step(["('reorder', [2, 0, 1, 3])"])
    np.testing.assert_array_equal(goal, env.frames)


def test_a_picture_larger_than_the_capacity_is_downscaled_to_fit(tmp_path):
    folder = _folder(tmp_path, [(100, 60)])
    env = _env(sample_dir=folder, max_image_height=40, max_image_width=50)
    assert env.family.frame_shape == (44, 54)
    env.reset(seeds=[0])
    assert env.frame_hw[0].tolist() == [44, 28]
    shown = env.family.picture(0)
    assert shown.shape == (40, 24, 3)
    original = np.asarray(Image.open(tmp_path / "p0.png").convert("RGB"))
    want = np.asarray(Image.fromarray(original).resize((24, 40), Image.Resampling.LANCZOS))
    np.testing.assert_array_equal(shown, want)
    small = np.zeros((10, 10, 3), np.uint8)
    assert fit_picture(small, 40, 50) is small


def test_builtin_photos_fit_the_default_capacity_at_their_own_size():
    env = _env(n=9)
    env.reset(seeds=range(9))
    source = env.family.source
    assert source.kind == "builtin"
    for d, (h, w) in zip(env.state_dicts(), env.frame_hw.tolist()):
        picture = source.load(d["image_name"])
        assert (h, w) == (picture.shape[0] + 4, picture.shape[1] + 4)


# ------------------------------------------------------------------------------ prompt
def test_prompt_states_grid_and_index_mapping():
    easy = _env()
    easy.reset(seeds=[0])
    hard = _env("hard")
    hard.reset(seeds=[0])
    p = hard.prompt()
    assert p.startswith("You are solving a 3x3 jigsaw puzzle.")
    assert "`('reorder', [0, 1, 2, ..., 8])`" in p and "- Index = row * 3 + col." in p
    assert "- Row 0 covers indices 0..2, row 1 covers 3..5, etc." in p
    # The fixed 2x2 example is shown for every grid (reference quirk).
    assert p.endswith("Example for 2x2: (0,0)->0, (0,1)->1, (1,0)->2, (1,1)->3.\n")
    assert easy.prompt().startswith("You are solving a 2x2 jigsaw puzzle.")
    assert "Success" not in p


# ------------------------------------------------------------------------------ solvers
def _minimal_swaps(current, target):
    """Positions misplaced minus the cycles among them."""
    where = {piece: p for p, piece in enumerate(current)}
    seen, swaps = set(), 0
    for start in range(len(current)):
        if start in seen or current[start] == target[start]:
            continue
        length, p = 0, start
        while p not in seen:
            seen.add(p)
            p = where[target[p]]
            length += 1
        swaps += length - 1
    return swaps


@pytest.mark.parametrize("difficulty", ["easy", "hard"])
@pytest.mark.parametrize("call", [{}, {"strategy": "reorder"}, {"strategy": "swap"},
                                  {"strategy": "swap", "num_steps": 6},
                                  {"strategy": "swap", "num_steps": 11}])
def test_solvers_succeed_from_many_seeds(difficulty, call):
    n = 64
    env = _env(difficulty, n=n)
    env.reset(seeds=range(500, 500 + n))
    dicts = env.state_dicts()
    plans = env.solve(**call)
    assert env.state_dicts() == dicts
    for d, plan in zip(dicts, plans):
        assert plan[-1] == STOP
        if call.get("strategy", "reorder") == "reorder":
            assert len(plan) == 2
        else:
            swaps = _minimal_swaps(d["current_state"], d["target_state"])
            steps = call.get("num_steps")
            pairs = math.ceil((steps - swaps) / 2) if steps and steps > swaps else 0
            assert len(plan) == swaps + 2 * pairs + 1
    from visgym.core.rollout import run_plans

    result = run_plans(env, plans)
    assert result.terminated.all() and (result.reward == 1).all()


def test_reorder_plan_lists_where_each_target_piece_is():
    env = _loaded({**INIT, "current_state": [3, 1, 0, 2]})
    assert env.solve()[0] == ["('reorder', [3, 2, 1, 0])", STOP]


def test_a_solved_board_gets_a_bare_stop():
    env = _loaded({**INIT, "current_state": [2, 0, 1, 3]})
    for call in ({}, {"strategy": "swap"}, {"strategy": "swap", "num_steps": 8}):
        assert env.solve(**call)[0] == [STOP]


def test_swap_plans_are_reproducible_and_padded_with_cancelling_pairs():
    a = _env("hard", n=8)
    b = _env("hard", n=8)
    a.reset(seeds=range(8))
    b.reset(seeds=range(8))
    plans = a.solve(strategy="swap", num_steps=15)
    assert plans == b.solve(strategy="swap", num_steps=15) == a.solve(strategy="swap",
                                                                      num_steps=15)
    assert plans != a.solve(strategy="swap", num_steps=15, rows=[1, 2, 3, 4, 5, 6, 7, 0])
    for d, plan in zip(a.state_dicts(), plans):
        swaps = _minimal_swaps(d["current_state"], d["target_state"])
        assert len(plan) - 1 == swaps + 2 * math.ceil((15 - swaps) / 2) >= 15
        # Removing adjacent equal pairs leaves the minimal solution.
        stack = []
        for action in plan[:-1]:
            if stack and stack[-1] == action:
                stack.pop()
            else:
                stack.append(action)
        assert len(stack) == swaps


def test_unknown_strategy_raises():
    env = _loaded(INIT)
    with pytest.raises(ValueError, match="strategy"):
        env.solve(strategy="bfs")


# ------------------------------------------------------------------------------ image folders
def test_user_folder_in_the_reference_layout(tmp_path):
    """Root and exactly one sub-folder level, .jpg/.jpeg/.png with case-sensitive extensions,
    sorted by relative path; deeper files, other extensions and upper-case ones are ignored."""
    (tmp_path / "sub" / "deep").mkdir(parents=True)
    (tmp_path / "zz").mkdir()
    pictures = {"b.png": (8, 8), "a.jpg": (10, 6), "c.jpeg": (6, 10), "sub/d.png": (9, 7),
                "zz/e.jpg": (7, 9), "sub/deep/x.png": (8, 8), "F.PNG": (8, 8),
                "g.JPG": (8, 8), "h.gif": (8, 8)}
    for k, (name, (h, w)) in enumerate(pictures.items()):
        Image.fromarray(_picture(h, w, k)).save(tmp_path / name,
                                                format="GIF" if name.endswith("gif") else
                                                "JPEG" if "jp" in name.lower() else "PNG")
    (tmp_path / "notes.txt").write_text("not a picture")
    env = _env(n=10, sample_dir=str(tmp_path))
    names = ("a.jpg", "b.png", "c.jpeg", "sub/d.png", "zz/e.jpg")
    assert env.family.source.names == names
    env.reset(seeds=range(10))
    shown = [d["image_name"] for d in env.state_dicts()]
    assert set(shown) == set(names)
    for d, (h, w) in zip(env.state_dicts(), env.frame_hw.tolist()):
        ph, pw = pictures[d["image_name"]]
        assert (h, w) == (ph + 4, pw + 4)
    with pytest.raises(ValueError, match=r"init_states\[0\]\.image_name"):
        env.reset(init_states=[{**INIT, "image_name": "sub/deep/x.png"}] * 10)
    with pytest.raises(ValueError, match=r"init_states\[0\]\.image_name"):
        env.reset(init_states=[{**INIT, "image_name": "F.PNG"}] * 10)


def test_image_name_stays_correct_after_an_init_state_reset(tmp_path):
    folder = _folder(tmp_path, [(12, 12), (12, 16), (16, 12)])
    fresh = _env(sample_dir=folder)
    init = {"image_name": "p2.png", "current_state": [1, 0, 3, 2],
            "target_state": [3, 2, 1, 0]}
    fresh.reset(init_states=[init])
    assert fresh.state_dicts()[0] == init
    assert fresh.frame_hw[0].tolist() == [20, 16]
    fresh.step(["('swap', ((0, 0), (0, 1)))"])
    assert fresh.state_dicts()[0]["image_name"] == "p2.png"
    reloaded = _env(sample_dir=folder)
    reloaded.reset(init_states=json.loads(json.dumps(fresh.state_dicts())))
    np.testing.assert_array_equal(reloaded.frames, fresh.frames)


def test_bundle_layout_under_a_named_folder(tmp_path):
    bundle = tmp_path / "partial_datasets" / "jigsaw"
    bundle.mkdir(parents=True)
    Image.fromarray(_picture(10, 10)).save(bundle / "q.png")
    env = _env(sample_dir=str(tmp_path))
    assert env.family.source.names == ("q.png",)


def test_image_dir_environment_variable(tmp_path, monkeypatch):
    folder = _folder(tmp_path, [(10, 14)])
    monkeypatch.setenv("VIS_GYM_IMAGE_DIR", folder)
    env = _env()
    env.reset(seeds=[0])
    assert env.state_dicts()[0]["image_name"] == "p0.png"


@pytest.mark.parametrize("make_path", [lambda p: p / "missing", lambda p: p,
                                       lambda p: p / "file.png"])
def test_missing_or_empty_folder_error_names_the_path(tmp_path, make_path):
    (tmp_path / "file.png").write_bytes(b"")   # a zero-byte "picture" is not a folder
    empty = tmp_path / "empty"
    empty.mkdir()
    path = make_path(tmp_path) if make_path(tmp_path) != tmp_path else empty
    with pytest.raises(ValueError) as error:
        visgym.make("jigsaw/easy", sample_dir=str(path))
    message = str(error.value)
    assert message.startswith("sample_dir: ") and str(path) in message and "\n" not in message


def test_unreadable_picture_error_names_the_file(tmp_path):
    (tmp_path / "bad.png").write_bytes(b"this is not a png file")
    env = _env(sample_dir=str(tmp_path))
    with pytest.raises(ValueError, match="bad.png"):
        env.reset(seeds=[0])
    with pytest.raises(ValueError, match=r"init_states\[0\]\.image_name: .*bad\.png"):
        env.reset(init_states=[{**INIT, "image_name": "bad.png"}])


def test_an_empty_picture_file_fails_the_scan_naming_it(tmp_path):
    Image.fromarray(_picture(8, 8)).save(tmp_path / "ok.png")
    (tmp_path / "zero.jpg").write_bytes(b"")
    with pytest.raises(ValueError, match=r"sample_dir: .*zero\.jpg"):
        visgym.make("jigsaw/easy", sample_dir=str(tmp_path))


# ------------------------------------------------------------------------------ init states
HOSTILE_INITS = [
    ({"current_state": [0, 1, 2, 3], "target_state": [1, 0, 2, 3]}, "image_name: missing"),
    ({"image_name": "astronaut", "target_state": [1, 0, 2, 3]}, "current_state: missing"),
    ({"image_name": "astronaut", "current_state": [0, 1, 2, 3]}, "target_state: missing"),
    ({**INIT, "image_name": "no_such_photo"}, "image_name"),
    ({**INIT, "image_name": 5}, "image_name"),
    ({**INIT, "image_name": None}, "image_name"),
    ({**INIT, "current_state": [0, 1, 2]}, "current_state"),
    ({**INIT, "current_state": [0, 1, 2, 3, 4]}, "current_state"),
    ({**INIT, "current_state": [[0, 1], [2, 3]]}, "current_state"),
    ({**INIT, "current_state": [0, 0, 1, 2]}, "current_state"),
    ({**INIT, "current_state": [0, 1, 2, 4]}, "current_state"),
    ({**INIT, "current_state": [0, 1, 2, -1]}, "current_state"),
    ({**INIT, "current_state": [0.0, 1.0, 2.0, 3.0]}, r"current_state\[0\]"),
    ({**INIT, "current_state": [True, False, 2, 3]}, r"current_state\[0\]"),
    ({**INIT, "current_state": "0123"}, "current_state"),
    ({**INIT, "target_state": [0, 1, 2, 10**30]}, r"target_state\[3\]"),
    ({**INIT, "target_state": None}, "target_state"),
    ([1, 2, 3], "init_states"),
]


@pytest.mark.parametrize("init,field", HOSTILE_INITS, ids=[str(i) for i, _ in HOSTILE_INITS])
def test_hostile_init_states_raise_naming_the_field(init, field):
    env = _env(n=2)
    env.reset(seeds=[1, 2])
    assert_hostile_init_refused(env, init, field)


def test_init_state_field_names_are_the_references():
    env = _env()
    env.reset(seeds=[0])
    assert sorted(env.state_dicts()[0]) == ["current_state", "image_name", "target_state"]


# ------------------------------------------------------------------------------ params
@pytest.mark.parametrize("kwargs,field", [
    ({"num_rows": 0}, "num_rows"), ({"num_cols": 17}, "num_cols"),
    ({"num_rows": 1, "num_cols": 1}, "num_rows, num_cols"), ({"num_rows": 2.0}, "num_rows"),
    ({"border_width": -1}, "border_width"), ({"border_width": 33}, "border_width"),
    ({"sample_dir": 5}, "sample_dir"), ({"sample_dir": ""}, "sample_dir"),
    ({"max_image_height": 0}, "max_image_height"), ({"max_image_width": 10**6},
                                                     "max_image_width"),
])
def test_bad_params_name_the_field(kwargs, field):
    with pytest.raises(ValueError, match=f"^{field}"):
        visgym.make("jigsaw/easy", **kwargs)


def test_presets_and_custom_grids():
    assert visgym.make("jigsaw/easy").params.num_rows == 2
    assert visgym.make("jigsaw/hard").params.num_cols == 3
    env = _env(num_rows=1, num_cols=2)
    env.reset(seeds=[0])
    assert env.state_dicts()[0]["target_state"] == [1, 0]
    assert env.solve()[0] == ["('reorder', [1, 0])", STOP]
    _, reward, term, _, _ = env.step(["('swap', ((0, 0), (0, 1)))"])
    _, reward, term, _, _ = env.step([STOP])
    assert term[0] and reward[0] == 1.0
