"""The SkyRL-Gym integration (integrations/skyrl.py): episodes driven through the real
``skyrl_gym.make("visgym", ...)``, with the solver's actions as the model's replies."""
import importlib
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

skyrl_gym = pytest.importorskip("skyrl_gym")

import visgym.integrations.skyrl as skyrl_env  # noqa: E402  (registers "visgym")
from visgym.bridges.conversation import turn_text  # noqa: E402
from visgym.bridges.imaging import data_url, decode_b64_image, encode_jpeg_b64  # noqa: E402
from visgym.core.grammar import INVALID_CODES, STOP_ACTION  # noqa: E402

MAZE_WORDS = {"('move', 0)": "right", "('move', 1)": "up", "('move', 2)": "left",
              "('move', 3)": "down", STOP_ACTION: "stop"}


def make(**kwargs):
    return skyrl_gym.make("visgym", **kwargs)


def parts(message):
    """(image URL, text) of a user turn."""
    assert message["role"] == "user"
    image, text = message["content"]
    assert image["type"] == "image_url" and text["type"] == "text"
    return image["image_url"]["url"], text["text"]


def play(env, replies):
    """Step ``env`` with ``replies`` until done; return the step outputs."""
    outs = []
    for reply in replies:
        outs.append(env.step(reply))
        if outs[-1]["done"]:
            break
    return outs


def test_import_registers_the_id_once():
    spec = skyrl_gym.registry["visgym"]
    assert spec.entry_point == "visgym.integrations.skyrl:VisGymEnv"
    importlib.reload(skyrl_env)          # importing again is not a duplicate registration
    assert skyrl_gym.registry["visgym"].entry_point == spec.entry_point
    assert isinstance(make(task="maze_2d/easy", seed=0), skyrl_gym.Env)


def test_solver_replies_in_prose_solve_the_episode_with_reward_one():
    env = make(task="maze_2d/easy", seed=11)
    conversation, meta = env.init([{"role": "user", "content": "placeholder"}])
    assert len(conversation) == 1 and meta["task"] == "maze_2d/easy" and meta["seed"] == 11
    url, text = parts(conversation[0])
    assert url.startswith("data:image/jpeg;base64,")
    assert url == data_url(encode_jpeg_b64(env.batch.frame(0)))    # visgym's encoder
    assert decode_b64_image(url).shape == (225, 225, 3)
    # The evaluation's first user turn: the instructions, then the step message.
    assert text == turn_text(0, 20, env.batch.prompt(), None)
    plan = env.batch.solve()[0]
    outs = play(env, [f"The target is that way.\n\nAction: {a}\nThat should work." for a in plan])
    assert len(outs) == len(plan)
    last = outs[-1]
    assert last["done"] and last["observations"] == [] and last["reward"] == 1.0
    assert last["metadata"]["success"] and last["metadata"]["terminated"]
    assert last["metadata"]["action"] == STOP_ACTION
    assert sum(o["reward"] for o in outs) == 1.0
    for k, out in enumerate(outs[:-1]):
        assert not out["done"] and out["reward"] == 0.0
        assert out["metadata"]["action"] == plan[k] and not out["metadata"]["invalid"]
        url, text = parts(out["observations"][0])
        assert url.startswith("data:image/jpeg;base64,")
        assert text.startswith("Environment feedback: ")
        assert f"This is step {k + 2}." in text
    assert env.get_metrics() == {"steps": len(plan), "success": 1.0, "return": 1.0,
                                 "invalid_actions": 0}


def test_keyword_actions_in_an_action_tag_solve_the_episode():
    env = make(task="maze_2d/easy", seed=3, actions="keyword")
    conversation, _ = env.init()
    _, text = parts(conversation[0])
    assert "<action>ACTION</action>" in text and "right, up, left, down, stop" in text
    plan = env.batch.solve()[0]
    outs = play(env, [f"Going {MAZE_WORDS[a]} looks right. <action>{MAZE_WORDS[a]}</action>"
                      for a in plan])
    assert outs[-1]["done"] and outs[-1]["reward"] == 1.0 and outs[-1]["metadata"]["success"]
    assert [o["metadata"]["action"] for o in outs] == plan


@pytest.mark.parametrize("reply, action", [
    ("<action>LEFT</action>", "('move', 2)"),
    ("down", "('move', 3)"),
    ("<action>move(1)</action>", "('move', 1)"),
    ("move(0)", "('move', 0)"),
    ("<action>stop()</action>", STOP_ACTION),
    ("I pick (move, 3) now", "('move', 3)"),
    ("<action>('move', 2)</action> and later ('move', 0)", "('move', 2)"),
])
def test_tuple_and_keyword_forms_read_as_the_same_actions(reply, action):
    env = make(task="maze_2d/easy", seed=1)
    env.init()
    assert env.step(reply)["metadata"]["action"] == action


def test_call_with_several_arguments_becomes_one_tuple_payload():
    env = make(task="jigsaw/easy", seed=2, actions="keyword")
    env.init()
    out = env.step("<action>swap((0, 0), (0, 1))</action>")
    assert out["metadata"]["action"] == "('swap', ((0, 0), (0, 1)))"
    assert not out["metadata"]["invalid"]


def test_malformed_reply_is_feedback_not_an_exception():
    env = make(task="maze_2d/easy", seed=4)
    env.init()
    for reply in ["I am not sure what to do.", "('move', 9)", "", "<action>sideways</action>",
                  "x" * 100_000]:
        out = env.step(reply)
        meta = out["metadata"]
        assert not out["done"] and out["reward"] == 0.0
        assert meta["invalid"] and meta["code"] in INVALID_CODES and meta["feedback"]
        _, text = parts(out["observations"][0])
        assert text.startswith("Environment feedback: " + meta["feedback"][:40])
    assert env.get_metrics()["invalid_actions"] == 5


def test_budget_ends_the_episode_truncated():
    env = make(task="maze_2d/easy", seed=5, max_turns=3)
    conversation, _ = env.init()
    assert "You are allowed to take 2 more steps." in parts(conversation[0])[1]
    outs = play(env, ["no idea"] * 5)
    assert len(outs) == 3 and outs[-1]["done"] and outs[-1]["metadata"]["truncated"]
    assert not outs[-1]["metadata"]["success"] and outs[-1]["observations"] == []
    with pytest.raises(RuntimeError, match="after the episode ended"):
        env.step("('move', 0)")


def test_step_before_init_raises():
    with pytest.raises(RuntimeError, match="before init"):
        make(task="maze_2d/easy", seed=0).step("('move', 0)")


def test_progress_rewards_telescope_to_one_plus_the_start_potential():
    env = make(task="maze_2d/easy", seed=8, reward="progress")
    env.init()
    start = float(env.batch.potential()[0])
    assert start > 0
    outs = play(env, env.batch.solve()[0])
    total = sum(o["reward"] for o in outs)
    assert total == pytest.approx(1.0 + start)
    for o in outs:
        parts_sum = sum(o["metadata"]["reward_components"].values())
        assert o["reward"] == pytest.approx(parts_sum)
    assert outs[-1]["metadata"]["reward_components"]["task"] == 1.0


def test_sparse_reward_has_zero_shaping():
    env = make(task="maze_2d/easy", seed=8)
    env.init()
    outs = play(env, env.batch.solve()[0])
    assert all(o["metadata"]["reward_components"]["shaping"] == 0.0 for o in outs)


def test_a_mix_picks_each_seeds_task_deterministically_and_plays_it():
    mix = {"maze_2d/easy": 1, "jigsaw/easy": 1}
    tasks = {s: make(task=mix, seed=s).task for s in range(24)}
    assert set(tasks.values()) == set(mix)
    assert all(make(task=mix, seed=s).task == t for s, t in list(tasks.items())[:6])
    # The list form with equal weights, and a parquet struct row (absent keys are null).
    assert make(task=["maze_2d/easy", "jigsaw/easy"], seed=5).task == tasks[5]
    assert make(task={"maze_2d/easy": 1, "jigsaw/easy": 1, "maze_3d/easy": None},
                seed=5).task == tasks[5]
    for seed in (0, 1, 2, 3):
        env = make(task=mix, seed=seed, reward="progress")
        env.init()
        outs = play(env, env.batch.solve()[0])
        assert outs[-1]["metadata"]["success"] and outs[-1]["metadata"]["task"] == env.task


def test_a_mix_of_task_specs_takes_their_params_and_budgets():
    specs = [{"id": "maze_2d/easy", "num_envs": 3, "max_steps": 7},
             ("jigsaw/easy", 1, {"num_rows": 3, "num_cols": 3})]
    seen = {make(task=specs, seed=s).task for s in range(12)}
    assert seen == {"maze_2d/easy", "jigsaw/easy"}
    maze = next(make(task=specs, seed=s) for s in range(12)
                if make(task=specs, seed=s).task == "maze_2d/easy")
    assert maze.max_turns == 7
    jigsaw = next(make(task=specs, seed=s) for s in range(12)
                  if make(task=specs, seed=s).task == "jigsaw/easy")
    assert (jigsaw.batch.params.num_rows, jigsaw.max_turns) == (3, 20)


def test_equal_seeds_give_equal_episodes():
    a, b, c = (make(task="maze_2d/easy", seed=s) for s in (21, 21, 22))
    (conv_a, meta_a), (conv_b, meta_b), (conv_c, meta_c) = a.init(), b.init(), c.init()
    assert conv_a == conv_b and meta_a["state_hash"] == meta_b["state_hash"]
    assert meta_a["state_hash"] != meta_c["state_hash"]
    step_a, step_b = a.step("('move', 0)"), b.step("('move', 0)")
    assert step_a == step_b
    # An unseeded env records the seed it drew; that seed replays the episode.
    free = make(task="maze_2d/easy")
    _, meta = free.init()
    again = make(task="maze_2d/easy", seed=meta["seed"])
    assert again.init()[1]["state_hash"] == meta["state_hash"]


def test_skyrl_generator_call_reads_the_dataset_row():
    # What SkyRL's generators pass: env_config (the trainer's block) and extras (the row's
    # columns plus max_turns); the VisGym example's rows name the task visgym_env_id.
    extras = {"visgym_env_id": "maze_2d/easy", "seed": 6, "max_turns": 18,
              "reward_spec": {"ground_truth": None}, "data_source": "visgym"}
    env = make(env_config={}, extras=extras)
    conversation, meta = env.init([{"role": "system", "content": "Be brief."},
                                   {"role": "user", "content": "placeholder"}])
    assert conversation[0] == {"role": "system", "content": "Be brief."}
    assert "You are allowed to take 17 more steps." in parts(conversation[1])[1]
    assert (meta["task"], meta["seed"], env.max_turns) == ("maze_2d/easy", 6, 18)
    # Keyword arguments win over extras, extras over env_config.
    env = make(env_config={"reward": "progress", "seed": 1}, extras={"task": "maze_2d/easy"},
               seed=2)
    assert (env.reward_mode, env.seed) == ("progress", 2)
    env = make(extras={"visgym_env_id": "jigsaw/easy", "task": "maze_2d/easy", "seed": 0})
    assert env.task == "maze_2d/easy"


def test_envs_stepped_from_several_threads_equal_sequential_runs():
    # SkyRL's generators run init and step in a thread pool, one env object per trajectory.
    def run(seed):
        env = make(task={"maze_2d/easy": 1, "maze_3d/easy": 1}, seed=seed, reward="progress")
        conversation, _ = env.init()
        outs = play(env, env.batch.solve()[0])
        return conversation, [(o["reward"], o["metadata"]) for o in outs]

    seeds = list(range(8))
    sequential = [run(s) for s in seeds]
    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(run, seeds)) == sequential


def test_image_size_cap_fits_the_long_side():
    env = make(task="maze_3d/easy", seed=0, max_long_side=128)
    conversation, _ = env.init()
    assert max(decode_b64_image(parts(conversation[0])[0]).shape[:2]) == 128


@pytest.mark.parametrize("kwargs, field", [
    ({"task": "nope/easy"}, "task"),
    ({}, "task"),
    ({"task": 7}, "task"),
    ({"task": {"maze_2d/easy": 0}}, r"task\[0\]\.num_envs"),
    ({"task": ["maze_2d/easy", "nope/hard"]}, r"task\[1\]\.id"),
    ({"task": [{"id": "maze_2d/easy", "num_envs": 1, "weight": 2}]}, r"task\[0\]\.weight"),
    ({"task": {"maze_2d/easy": 1, "jigsaw/easy": 1}, "params": {"rows": 3}}, "params"),
    ({"task": "maze_2d/easy", "params": {"maze_width": -3}}, "params: maze_width"),
    ({"task": "maze_2d/easy", "params": {"colour": 1}}, "params: .*colour"),
    ({"task": "maze_2d/easy", "seed": -1}, "seed"),
    ({"task": "maze_2d/easy", "seed": "7"}, "seed"),
    ({"task": "maze_2d/easy", "reward": "dense"}, "reward"),
    ({"task": "maze_2d/easy", "gamma": 2.0}, "gamma"),
    ({"task": "maze_2d/easy", "max_turns": 0}, "max_turns"),
    ({"task": "maze_2d/easy", "max_long_side": 4}, "max_long_side"),
    ({"task": "maze_2d/easy", "actions": "json"}, "actions"),
    ({"task": "maze_2d/easy", "feedback": "yes"}, "feedback"),
    ({"task": "maze_2d/easy", "colour": 1}, "colour"),
    ({"task": "maze_2d/easy", "env_config": {"budget": 3}}, r"env_config\.budget"),
    ({"task": "maze_2d/easy", "extras": ["maze_2d/easy"]}, "extras"),
])
def test_bad_settings_raise_value_error_naming_the_field(kwargs, field):
    with pytest.raises(ValueError, match=f"^{field}"):
        make(**kwargs)


def test_the_docs_example_runs(capsys):
    page = Path(__file__).resolve().parent.parent / "docs" / "integrations.md"
    # The SkyRL-Gym section's examples (the OpenEnv section's need a server: test_openenv.py).
    section = page.read_text().split("## SkyRL-Gym", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert blocks
    for k, code in enumerate(blocks):
        exec(compile(code, f"docs/integrations.md example {k + 1}", "exec"), {})
    assert capsys.readouterr().out.startswith("True {'steps': ")
