"""video_unshuffle behaves as spec/envs/video_unshuffle.md says: presets, frame layout and
positional slot labels, the swap / reorder / stop grammar and its messages, dynamics, reward,
``correct_order`` in both reset paths, hostile init states naming the field, the solvers, and
the frames kept off the State (a family store shared by its BatchEnvs, copied into each
BatchEnv's workspace, counted per episode by the memory guard). Runs on the built-in
procedural clips (no data needed)."""
import numpy as np
import pytest

import visgym
from visgym.core.batch_env import BatchEnv
from visgym.core.family import array_bytes
from visgym.core.registry import make_family
from visgym.envs import video_unshuffle as vu


@pytest.fixture(autouse=True)
def _offline(monkeypatch, tmp_path):
    monkeypatch.delenv("VIS_GYM_VIDEO_DIR", raising=False)
    monkeypatch.chdir(tmp_path)


def _env(difficulty="easy", num_envs=1, **kw):
    return visgym.make(f"video_unshuffle/{difficulty}", num_envs=num_envs, max_steps=None,
                       autoreset="disabled", **kw)


def _clip_frames(env, i=0):
    """Episode i's frames in chronological order, read from the clip source itself."""
    return env.family.source.frames_at(int(env.state.clip[i]), env.state.positions[i])


def test_presets_are_the_harness_configuration():
    for difficulty, n in (("easy", 4), ("hard", 5)):
        p = vu.VideoUnshuffle.presets[difficulty]
        assert (p.num_frames, p.sampling_strategy, p.min_frame_diff,
                p.max_frames_to_analyze) == (n, "salient", 0.15, 100)
    env = _env(sampling_strategy="distinct", min_frame_diff=0.1, max_frames_to_analyze=10000)
    env.reset(seeds=[5])
    positions = env.state_dicts()[0]["frame_positions"]
    assert positions == sorted(positions) and len(set(positions)) == 4


@pytest.mark.parametrize("kwargs,field", [
    (dict(num_frames=1), "num_frames"), (dict(num_frames=17), "num_frames"),
    (dict(sampling_strategy="random"), "sampling_strategy"),
    (dict(min_frame_diff=-0.1), "min_frame_diff"), (dict(max_frames_to_analyze=0),
                                                    "max_frames_to_analyze"),
    (dict(root_dir=""), "root_dir"), (dict(video_label=3), "video_label"),
])
def test_bad_parameters_name_the_field(kwargs, field):
    with pytest.raises(ValueError, match=field):
        visgym.make("video_unshuffle/easy", **kwargs)


@pytest.mark.parametrize("difficulty,width", [("easy", 896), ("hard", 1120)])
def test_frame_is_the_frames_in_display_order_with_positional_labels(difficulty, width):
    env = _env(difficulty)
    env.reset(seeds=[11])
    n = width // 224
    assert env.frame(0).shape == (224, width, 3)

    def check():
        frame = env.frame(0).copy()
        order = env.state.order[0]
        frames = _clip_frames(env)
        for s in range(n):
            tile = frame[:, 224 * s:224 * (s + 1)]
            src = frames[order[s] - 1]
            # Outside the label box: the frame itself; inside: dimmed to 40 % or the digit's ink.
            np.testing.assert_array_equal(tile[:196], src[:196])
            np.testing.assert_array_equal(tile[:, :196], src[:, :196])
            box = tile[196:, 196:].astype(int)
            dim = np.rint(src[196:, 196:] * 0.4)
            ink = (box != dim).any(axis=2)
            assert 30 < ink.sum() < 250 and (box[ink] >= dim[ink]).all()
        return frame

    first = check()
    env.step(["('swap', (1, 2))"])
    second = check()
    # The labels stay with the slots: the digit ink of slot 1 is where it was.
    frames = _clip_frames(env)
    ink1 = (first[200:, 196:224] > np.rint(frames[env.state.order[0, 1] - 1,
                                                  200:, 196:224] * 0.4)).any(2)
    ink2 = (second[200:, 196:224] > np.rint(frames[env.state.order[0, 0] - 1,
                                                   200:, 196:224] * 0.4)).any(2)
    np.testing.assert_array_equal(ink1, ink2)


def _feedback(env, action):
    _, reward, terminated, _, info = env.step([action])
    return info["feedback"][0], float(reward[0]), bool(terminated[0]), bool(info["invalid"][0])


def test_swap_accepts_tuple_list_equal_indices_and_bools():
    env = _env()
    env.reset(seeds=[2])
    o = env.state_dicts()[0]["shuffled_order"]
    assert _feedback(env, "('swap', (1, 3))")[0] == "Action executed successfully."
    assert env.state_dicts()[0]["shuffled_order"] == [o[2], o[1], o[0], o[3]]
    _feedback(env, "('swap', [3, 1])")
    assert env.state_dicts()[0]["shuffled_order"] == o
    assert _feedback(env, "('swap', (2, 2))")[0] == "Action executed successfully."
    assert env.state_dicts()[0]["shuffled_order"] == o
    _feedback(env, "('swap', (True, 2))")
    assert env.state_dicts()[0]["shuffled_order"] == [o[1], o[0], o[2], o[3]]


# (payload as the model writes it, the payload as the reference prints it)
BAD_SWAPS = [("(1.0, 2.0)", "(1.0, 2.0)"), ("(1.5, 2)", "(1.5, 2)"), ("(0, 1)", "(0, 1)"),
             ("(1, 5)", "(1, 5)"), ("(1,)", "(1,)"), ("(1, 2, 3)", "(1, 2, 3)"),
             ("None", "None"), ("'12'", "12"), ("1", "1"), ("[1,  9]", "[1, 9]")]


@pytest.mark.parametrize("payload,shown", BAD_SWAPS)
def test_bad_swaps_are_invalid_with_the_reference_message(payload, shown):
    env = _env()
    env.reset(seeds=[2])
    before = env.state_dicts()
    text, reward, terminated, invalid = _feedback(env, f"('swap', {payload})")
    assert text == (f"Swap payload {shown} is invalid. It must contain two distinct 1-based "
                    f"indices between 1 and 4.")
    assert invalid and not terminated and reward == 0 and env.state_dicts() == before


def test_reorder_gathers_by_current_slot_and_must_be_a_list_permutation():
    env = _env("hard")
    env.reset(seeds=[4])
    old = env.state_dicts()[0]["shuffled_order"]
    L = [3, 1, 5, 2, 4]
    assert _feedback(env, f"('reorder', {L})")[0] == "Action executed successfully."
    assert env.state_dicts()[0]["shuffled_order"] == [old[k - 1] for k in L]
    before = env.state_dicts()
    for payload, shown in [("(1, 2, 3, 4, 5)", "(1, 2, 3, 4, 5)"), ("[1,2,3,4]", "[1, 2, 3, 4]"),
                           ("[1, 1, 2, 3, 4]", "[1, 1, 2, 3, 4]"),
                           ("[1.0, 2, 3, 4, 5]", "[1.0, 2, 3, 4, 5]"), ("'abc'", "abc"),
                           ("[0, 1, 2, 3, 4]", "[0, 1, 2, 3, 4]")]:
        text, _, _, invalid = _feedback(env, f"('reorder', {payload})")
        assert text == (f"Reorder payload {shown} is invalid. It must be a permutation "
                        f"of [1, 5].") and invalid
    assert env.state_dicts() == before


# (payload as written, accepted, the payload as the reference prints it when refused)
STOPS = [("'stop'", True, ""), ("'ok'", True, ""), ("'STOP'", True, ""), ("'1'", True, ""),
         ("'done'", True, ""), ("'stop!'", False, "stop!"), ("''", False, ""),
         ("'stopp'", False, "stopp"), ("5", False, "5")]


@pytest.mark.parametrize("payload,ok,shown", STOPS)
def test_stop_payloads(payload, ok, shown):
    env = _env()
    env.reset(seeds=[1])
    text, _, terminated, invalid = _feedback(env, f"('stop', {payload})")
    assert terminated == ok and invalid == (not ok)
    if not ok:
        assert text == (f"The action {shown} is not in the valid action space of stop "
                        f"so nothing is executed.")


def test_reward_on_stop_only_when_chronological_and_tau_is_the_flag():
    env = _env()
    env.reset(seeds=[9])
    plan = env.solve(strategy="reorder")[0]
    assert plan[-1] == "('stop', 'stop')"
    if env.state_dicts()[0]["shuffled_order"] != [1, 2, 3, 4]:
        assert env.metrics()["tau"][0] == 0.0
        assert _feedback(env, "('stop', 'stop')")[1] == 0.0
        env.reset(seeds=[9])
    _feedback(env, plan[0])
    assert env.state_dicts()[0]["shuffled_order"] == [1, 2, 3, 4]
    assert env.metrics()["tau"][0] == 1.0
    text, reward, terminated, _ = _feedback(env, "('stop', 'stop')")
    assert reward == 1.0 and terminated


def test_correct_order_is_the_inverse_of_the_start_order_in_both_reset_paths():
    env = _env("hard")
    env.reset(seeds=[21])
    start = env.state_dicts()[0]["shuffled_order"]
    inverse = [start.index(f) + 1 for f in range(1, 6)]
    assert env.family.correct_order(env.state, 0) == inverse
    env.step(["('swap', (1, 5))"])
    assert env.family.correct_order(env.state, 0) == inverse     # never updated by steps
    mid = env.state_dicts()[0]
    loaded = _env("hard")
    loaded.reset(init_states=[mid])
    assert loaded.family.correct_order(loaded.state, 0) == inverse
    reference = {k: mid[k] for k in ("video_id", "label", "shuffled_order", "frame_positions")}
    fresh = _env("hard")
    fresh.reset(init_states=[reference])
    order = mid["shuffled_order"]
    assert fresh.family.correct_order(fresh.state, 0) == [order.index(f) + 1 for f in range(1, 6)]
    np.testing.assert_array_equal(fresh.frames, loaded.frames)


def test_episodes_depend_only_on_their_seed():
    a = _env(num_envs=3)
    b = _env(num_envs=1)
    a.reset(seeds=[7, 8, 9])
    b.reset(seeds=[8])
    assert a.state_dicts()[1] == b.state_dicts()[0]
    np.testing.assert_array_equal(a.frames[1], b.frames[0])
    big = _env(num_envs=1)
    big.reset(seeds=[2**40 + 3])
    assert big.state_dicts()[0]["video_id"].startswith("procedural-")


@pytest.mark.parametrize("field,value,match", [
    ("video_id", "nope", "video_id.*not in the clip source"),
    ("video_id", "../../etc/passwd", "video_id.*not in the clip source"),
    ("video_id", 3, "video_id.*expected a str"),
    ("label", "some other caption", "label.*is not the caption"),
    ("label", None, "label: expected a str"),
    ("shuffled_order", [1, 2, 3], "shuffled_order: expected a permutation of 1..4"),
    ("shuffled_order", [0, 1, 2, 3], "shuffled_order: expected a permutation"),
    ("shuffled_order", "1234", "shuffled_order: expected a permutation"),
    ("frame_positions", [0, 1, 2], "frame_positions: expected 4 frame indices"),
    ("frame_positions", [0, 1, 2, 10**30], "frame_positions: expected 4 frame indices"),
    ("frame_positions", [0, -1, 2, 3], "frame_positions: expected 4 frame indices"),
    ("frame_positions", [0, 1, 2, 3.5], "frame_positions: expected 4 frame indices"),
    ("start_order", [1, 1, 2, 3], "start_order: expected a permutation"),
])
def test_hostile_init_states_name_the_field(field, value, match):
    env = _env(num_envs=2)
    env.reset(seeds=[1, 2])
    good = env.state_dicts()
    frames = env.frames.copy()
    bad = dict(good[1], **{field: value})
    with pytest.raises(ValueError, match=rf"init_states\[1\]\.{match}"):
        env.reset(init_states=[good[0], bad])
    np.testing.assert_array_equal(env.frames, frames)


def test_positions_past_the_clip_end_are_clamped_to_its_last_frame():
    env = _env()
    env.reset(seeds=[1])
    state = dict(env.state_dicts()[0], frame_positions=[0, 1, 2, 1000])
    env.reset(init_states=[state])
    last = env.work.tiles[0, 3].copy()
    state["frame_positions"] = [0, 1, 2, 1023]
    env.reset(init_states=[state])
    np.testing.assert_array_equal(env.work.tiles[0, 3], last)
    length = env.family.source.reader(int(env.state.clip[0]), 100).reported
    state["frame_positions"] = [0, 1, 2, length - 1]
    env.reset(init_states=[state])
    np.testing.assert_array_equal(env.work.tiles[0, 3], last)
    state["frame_positions"] = [0, 1, 2, 1024]
    with pytest.raises(ValueError, match=r"frame_positions: expected 4 frame indices in 0\.\.1023"):
        env.reset(init_states=[state])


@pytest.mark.parametrize("strategy", ["swap", "reorder", None])
def test_solvers_reach_success_from_any_order(strategy):
    env = _env("hard", num_envs=6)
    env.reset(seeds=range(30, 36))
    plans = env.solve(strategy=strategy)
    for i, plan in enumerate(plans):
        order = env.state_dicts()[i]["shuffled_order"]
        if strategy == "reorder":
            assert len(plan) == 2 and plan[0].startswith("('reorder', [")
        else:
            # Left-to-right selection makes N - (cycles of the permutation) swaps.
            seen, cycles = set(), 0
            for k in range(5):
                if k not in seen:
                    cycles += 1
                    while k not in seen:
                        seen.add(k)
                        k = order[k] - 1
            assert len(plan) == 1 + 5 - cycles
            assert all(a.startswith("('swap', (") for a in plan[:-1])
    for i, plan in enumerate(plans):
        one = _env("hard")
        one.reset(init_states=[env.state_dicts()[i]])
        for action in plan:
            _, reward, terminated, _, _ = one.step([action])
        assert terminated[0] and reward[0] == 1.0


def test_swap_solver_is_left_to_right_selection():
    env = _env("hard")
    env.reset(init_states=[dict(env_state(env), shuffled_order=[3, 1, 5, 2, 4])])
    assert env.solve(strategy="swap")[0] == [
        "('swap', (1, 2))", "('swap', (2, 4))", "('swap', (3, 4))", "('swap', (4, 5))",
        "('stop', 'stop')"]
    assert env.solve(strategy="reorder")[0] == ["('reorder', [2, 4, 1, 5, 3])",
                                                "('stop', 'stop')"]
    with pytest.raises(ValueError, match="strategy"):
        env.solve(strategy="random")


def env_state(env):
    env.reset(seeds=[0])
    state = env.state_dicts()[0]
    state.pop("start_order")
    return state


def test_prompt_names_the_caption_and_every_action():
    env = _env("hard")
    env.reset(seeds=[3])
    caption = env.state_dicts()[0]["label"]
    prompt = env.prompt()
    assert f"The action being performed in the video is: '{caption}'." in prompt
    assert "('reorder', [1, 2, ..., 5])" in prompt and "[2, 1, 4, 3, ..., 5]" in prompt
    for name in ("swap", "reorder", "stop"):
        assert f"'{name}'" in prompt


# --------------------------------------------------------------------------- pixels off the State
def test_state_holds_no_pixels_and_the_frames_are_the_clip_at_its_positions():
    env = _env(num_envs=3)
    env.reset(seeds=[4, 9, 16])
    assert vu.VideoUnshuffleState._fields == ("clip", "positions", "order", "start_order")
    assert all(a.dtype != np.uint8 for a in env.state)
    store = env.family._frames
    for b in range(3):
        frames = _clip_frames(env, b)
        np.testing.assert_array_equal(env.work.tiles[b], frames)
        kept = store.get((int(env.state.clip[b]), tuple(env.state.positions[b].tolist())))
        np.testing.assert_array_equal(kept, frames)
        assert not kept.flags.writeable          # shared between BatchEnvs and threads
    assert store.max_bytes == vu.FRAME_STORE_BYTES


def test_a_redraw_refills_only_rows_whose_clip_or_positions_changed():
    env = _env(num_envs=3)
    env.reset(seeds=[4, 9, 16])
    env.work.tiles[1] = 7                         # a marker: row 1's tiles are not copied again
    new = dict(env.state_dicts()[2], frame_positions=[0, 2, 5, 9])
    env.reset(rows=[2], init_states=[new])
    env.family.render_rows(env.state, env.frames, np.arange(3), env.work)
    assert (env.work.tiles[1] == 7).all()
    np.testing.assert_array_equal(env.frame(1)[:100, :100], np.full((100, 100, 3), 7, np.uint8))
    np.testing.assert_array_equal(env.work.tiles[2], _clip_frames(env, 2))
    assert env.work.tile_positions[2].tolist() == [0, 2, 5, 9]


def test_one_instance_serves_two_batch_envs_and_a_store_that_keeps_nothing(monkeypatch):
    shared = make_family("video_unshuffle/easy")
    monkeypatch.setattr(vu, "FRAME_STORE_BYTES", 0)  # every draw decodes its frames again
    forgetful = make_family("video_unshuffle/easy")
    assert forgetful._frames.max_bytes == 0
    envs = [BatchEnv(shared, n, max_steps=3) for n in (2, 3)]
    alone = [BatchEnv(forgetful, n, max_steps=3) for n in (2, 3)]
    for k in range(2):
        envs[k].reset(seeds=range(10 * k, 10 * k + 2 + k))
        alone[k].reset(seeds=range(10 * k, 10 * k + 2 + k))
    rng = np.random.default_rng(1)
    for t in range(10):
        k = t % 2
        actions = [f"('swap', ({i}, {j}))" for i, j in rng.integers(1, 5, (envs[k].num_envs, 2))]
        envs[k].step(actions)
        alone[k].step(actions)
        for j in range(2):
            np.testing.assert_array_equal(envs[j].frames, alone[j].frames, err_msg=f"step {t}")
    assert len(forgetful._frames) == 0 and len(shared._frames) > 0
    np.testing.assert_array_equal(envs[1].goal_frames(), alone[1].goal_frames())


@pytest.mark.parametrize("difficulty,n", [("easy", 4), ("hard", 5)])
def test_row_bytes_counts_the_episode_frames_in_the_workspace(difficulty, n):
    family = _env(difficulty).family
    assert family.row_bytes() >= n * 224 * 224 * 3
    one = array_bytes((family.new_state(3), family.new_workspace(3)))
    two = array_bytes((family.new_state(5), family.new_workspace(5)))
    assert family.row_bytes() * 2 == two - one
