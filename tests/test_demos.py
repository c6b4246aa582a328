"""Demonstration synthesis (bridges/demos): conversations replay to success, exactly the episodes
asked for, no overlap with the evaluation splits, resumable byte-identical shards, Ray equals
local, exact-count mixing, export. Crash safety, settings keys, growth, exclusions, the shared
schema and the LlamaFactory recipe: tests/test_demos_resume.py and tests/test_demos_kill.py."""
import json
import re
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import visgym
from visgym.bridges import demos
from visgym.bridges.splits import tasks_with_splits
from visgym.core.rollout import episode_success

ANSWER = re.compile(r"<answer>(.*)</answer>$", re.DOTALL)


def _configs(episodes=10, shard_size=4, **kw):
    return [demos.DemoConfig(task=t, episodes=episodes, shard_size=shard_size, **kw)
            for t in tasks_with_splits()]


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    out = tmp_path_factory.mktemp("demos")
    configs = _configs(num_steps=(1, 30))
    manifest = demos.generate(configs, out, workers=1, progress=False)
    return out, configs, manifest


def _files(root: Path) -> dict:
    """Every file but the manifest; the LlamaFactory recipe with its folder's path taken out."""
    files = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and p.name != "manifest.json":
            data = p.read_bytes()
            if p.name == demos.LLAMAFACTORY_YAML:
                data = data.replace(str(root.resolve()).encode(), b"<out>")
            files[str(p.relative_to(root))] = data
    return files


def test_every_conversation_replays_to_success(generated):
    out, configs, manifest = generated
    for cfg in configs:
        records = list(demos.iter_records(out, cfg.dataset))
        assert len(records) == manifest["datasets"][cfg.dataset]["kept"] > 0
        for record in records:
            turns = record["conversations"]
            assert [t["from"] for t in turns] == ["human", "gpt"] * (len(turns) // 2)
            assert all(t["value"].startswith("<image>") and t["value"].count("<image>") == 1
                       for t in turns[0::2])
            assert len(record["images"]) == len(turns) // 2
            assert "Verbalize your reasoning" in turns[0]["value"]
            assert "This is step 1. You are allowed to take 19 more steps." in turns[0]["value"]
            env = visgym.make(record["env_id"], num_envs=1, autoreset="disabled")
            env.reset(init_states=[json.loads(record["init_state"])])
            for k, gpt in enumerate(turns[1::2]):
                action = ANSWER.search(gpt["value"]).group(1)
                assert gpt["value"] == f"<think></think><answer>{action}</answer>"
                if k > 0:
                    assert turns[2 * k]["value"].startswith(
                        "<image>Environment feedback: " + info["feedback"][0])
                _, reward, terminated, _, info = env.step([action])
            assert episode_success(terminated[0], info["success"][0]) and reward[0] == 1.0
            for path in record["images"]:
                image = Image.open(out / path)
                assert image.format == "JPEG" and max(image.size) <= 336


def test_manifest_counts_and_dataset_info(generated):
    out, configs, manifest = generated
    info = json.loads((out / "dataset_info.json").read_text())
    for cfg in configs:
        entry = info[cfg.dataset]
        assert entry["formatting"] == "sharegpt"
        assert entry["columns"] == {"messages": "conversations", "images": "images"}
        d = manifest["datasets"][cfg.dataset]
        assert d["episodes"] == d["kept"] == cfg.episodes
        assert d["attempted"] == d["kept"] + d["dropped_unsuccessful"] + d["skipped_eval_overlap"]
        assert len(d["hashes"]) == d["kept"]
        records = list(demos.iter_records(out, cfg.dataset))
        assert [r["episode"] for r in records] == list(range(cfg.episodes))
    assert manifest["package_version"] == visgym.__version__
    from visgym.core.registry import spec

    assert manifest["task_versions"] == {c.env_id: spec(c.env_id).family.version
                                         for c in sorted(configs, key=lambda c: c.env_id)}
    assert all(isinstance(v, int) and v >= 1 for v in manifest["task_versions"].values())


def test_bench_plain_loop_builds_the_pipelines_prompts(generated, tmp_path):
    """bench/demos.py's baseline must do the pipeline's work: same turns for the same seeds."""
    from visgym.bench.demos import plain_loop

    out, configs, _ = generated
    cfg = demos.DemoConfig(task="maze_2d", episodes=3, shard_size=3)
    demos.generate([cfg], tmp_path / "pipeline", workers=1, progress=False)
    plain_loop(cfg.env_id, 3, tmp_path / "plain")
    pipeline = [r["conversations"] for r in demos.iter_records(tmp_path / "pipeline", "maze_2d")]
    plain = [json.loads(line)["conversations"]
             for line in (tmp_path / "plain" / "plain.jsonl").read_text().splitlines()]
    assert pipeline and plain == pipeline


def test_no_demonstration_repeats_an_evaluation_episode(generated):
    out, configs, manifest = generated
    eval_hashes = demos.evaluation_hashes()
    assert len(eval_hashes) >= 140
    for cfg in configs:
        for record in demos.iter_records(out, cfg.dataset):
            assert record["hash"] == demos.init_state_hash(cfg.task,
                                                           json.loads(record["init_state"]))
            assert record["hash"] not in eval_hashes


def test_candidates_matching_an_evaluation_episode_are_skipped(tmp_path, monkeypatch):
    """An attempt equal to an evaluation episode is skipped, counted, and redrawn: episode 1
    comes from its next attempt."""
    cfg = demos.DemoConfig(task="maze_2d", episodes=3, shard_size=3)
    env = visgym.make("maze_2d/easy", num_envs=1)
    env.reset(seeds=[demos.demo_seed("maze_2d", "easy", 0, 1)])
    clash = demos.init_state_hash("maze_2d", env.state_dicts()[0])
    # generate() reads the shipped splits' hashes through the exclusion module.
    monkeypatch.setattr(demos.exclusion, "shipped_hashes", lambda task: frozenset({clash}))
    manifest = demos.generate([cfg], tmp_path, workers=1, progress=False)
    d = manifest["datasets"]["maze_2d"]
    assert d["skipped_eval_overlap"] == 1 and clash not in d["hashes"] and d["kept"] == 3
    records = {r["episode"]: r for r in demos.iter_records(tmp_path, "maze_2d")}
    assert sorted(records) == [0, 1, 2] and records[1]["attempt"] >= 1
    assert records[1]["seed"] == demos.attempt_seed("maze_2d", "easy", 0, 1, records[1]["attempt"])


class _ToldUnsuccessful:
    """A rollout's BatchEnv whose row of attempt seed ``seed`` is told it did not succeed (on
    every step, the reward untouched)."""

    def __init__(self, env, seed: int):
        self._env, self._seed, self._row = env, seed, None

    def __getattr__(self, name):
        return getattr(self._env, name)

    def reset(self, seeds):
        self._row = seeds.index(self._seed) if self._seed in seeds else None
        return self._env.reset(seeds=seeds)

    def step(self, actions, active):
        obs, reward, terminated, truncated, info = self._env.step(actions, active=active)
        if self._row is not None:
            info = {**info, "success": info["success"].copy()}
            info["success"][self._row] = False
        return obs, reward, terminated, truncated, info


def test_an_attempt_succeeds_by_the_success_rule_not_by_its_reward(tmp_path, monkeypatch):
    """The rollout keeps an attempt when its turn loop says it succeeded (terminated with
    info["success"] on its last step, core.rollout.episode_success), whatever the reward: episode
    1's first attempt, paid 1.0 on its stop but told it failed, is dropped and redrawn."""
    from visgym.bridges.demos import rollout

    seed = demos.attempt_seed("maze_2d", "easy", 0, 1, 0)
    real = rollout.batch_env
    monkeypatch.setattr(rollout, "batch_env",
                        lambda *args, **kw: _ToldUnsuccessful(real(*args, **kw), seed))
    cfg = demos.DemoConfig(task="maze_2d", episodes=3, shard_size=3)
    manifest = demos.generate([cfg], tmp_path, workers=1, progress=False)
    d = manifest["datasets"]["maze_2d"]
    assert d["dropped_unsuccessful"] == 1 and d["kept"] == 3 and d["attempted"] == 4
    records = {r["episode"]: r for r in demos.iter_records(tmp_path, "maze_2d")}
    assert [records[k]["attempt"] for k in range(3)] == [0, 1, 0]


def test_rerun_skips_finished_shards_and_is_byte_identical(generated, tmp_path):
    out, configs, _ = generated
    demos.generate(configs, tmp_path, workers=2, progress=False)
    assert _files(tmp_path) == _files(out)
    shard = tmp_path / configs[0].dataset / "shard-00001.jsonl"
    before = shard.read_bytes()
    shard.unlink()
    manifest = demos.generate(configs, tmp_path, workers=1, progress=False)
    assert manifest["run"]["shards_resumed"] == sum(c.num_shards for c in configs) - 1
    assert shard.read_bytes() == before
    assert _files(tmp_path) == _files(out)


def test_ray_run_equals_local_run(generated, tmp_path):
    ray = pytest.importorskip("ray")
    out, configs, _ = generated
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        demos.generate(configs, tmp_path, ray_address="auto", progress=False)
    finally:
        ray.shutdown()
    assert _files(tmp_path) == _files(out)


def test_mixed_strategy_and_plan_lengths(tmp_path):
    cfg = demos.DemoConfig(task="maze_2d", episodes=8, shard_size=8, strategy="mixed",
                           num_steps=(18, 19))
    demos.generate([cfg], tmp_path, workers=1, progress=False)
    records = list(demos.iter_records(tmp_path, "maze_2d_mixed"))
    strategies = visgym.make("maze_2d/easy").family.solver_strategies
    assert {r["strategy"] for r in records} <= set(strategies)
    for r in records:
        assert r["num_steps"] in (18, 19)


def test_mix_gives_exact_counts(generated, tmp_path):
    out, configs, manifest = generated
    sources = [out / c.dataset for c in configs] * 1
    kept = [manifest["datasets"][c.dataset]["kept"] for c in configs]
    total = min(kept)
    summary = demos.mix(sources, tmp_path / "mix", total=total, seed=3)
    assert [s["count"] for s in summary["sources"]] == demos.apportion(total, [1.0] * len(sources))
    lines = (tmp_path / "mix" / "mixture" / "mixture.jsonl").read_text().splitlines()
    assert len(lines) == total
    for line in lines:
        record = json.loads(line)
        assert all((tmp_path / "mix" / p).exists() for p in record["images"])
    again = demos.mix(sources, tmp_path / "mix2", total=total, seed=3)
    assert again["sources"] == summary["sources"]
    assert (tmp_path / "mix2" / "mixture" / "mixture.jsonl").read_text() == "\n".join(lines) + "\n"
    with pytest.raises(ValueError, match="needs"):
        demos.mix(sources, tmp_path / "mix3", total=10 * sum(kept) + 10)


def test_apportion_is_exact():
    assert demos.apportion(10, [1, 1, 1]) == [4, 3, 3]
    assert demos.apportion(7, [0.5, 0.25, 0.25]) == [3, 2, 2]  # 3.5, 1.75, 1.75
    assert sum(demos.apportion(1001, [3, 1, 7, 2])) == 1001
    with pytest.raises(ValueError, match="weights"):
        demos.apportion(5, [0, 0])


def test_export_embeds_images(generated, tmp_path):
    datasets = pytest.importorskip("datasets")
    out, configs, manifest = generated
    name = configs[0].dataset
    demos.export_hf(out, name, tmp_path / "hf")
    ds = datasets.load_from_disk(str(tmp_path / "hf"))
    assert len(ds) == manifest["datasets"][name]["kept"]
    first = ds[0]
    assert len(first["images"]) == len(first["conversations"]) // 2
    assert np.asarray(first["images"][0]).ndim == 3


def test_bad_arguments_name_the_field(tmp_path):
    for kwargs, field in [(dict(episodes=0), "--episodes"), (dict(shard_size=0), "--shard-size"),
                          (dict(num_steps=(5, 2)), "--num-steps"),
                          (dict(strategy="nope"), "--strategy")]:
        with pytest.raises(ValueError, match=field):
            demos.generate([demos.DemoConfig(task="maze_2d", **kwargs)], tmp_path, workers=1)


@pytest.mark.timeout(240)
def test_fetch_demos_twice_in_one_process_with_forked_workers(tmp_path, monkeypatch):
    """The hang of issue 10: demos of a Fetch task with one worker (the parent steps a Fetch
    env, whose MuJoCo thread pool then runs, and caches it), then with two forked workers in the
    same process. The children must finish, with the same bytes as the one-process run."""
    import multiprocessing

    from visgym.bridges import pools

    if "fork" not in multiprocessing.get_all_start_methods():
        pytest.skip("no fork on this platform")
    monkeypatch.setattr(pools, "_numba_threads_started", lambda: False)
    monkeypatch.setattr(pools, "_jax_started", lambda: False)
    assert pools.pool_context().get_start_method() == "fork"
    configs = [demos.DemoConfig(task="fetch_reach", episodes=4, shard_size=2)]
    demos.generate(configs, tmp_path / "one", workers=1, progress=False)
    demos.generate(configs, tmp_path / "two", workers=2, progress=False)
    assert _files(tmp_path / "one") == _files(tmp_path / "two")
    assert len(list((tmp_path / "two").rglob("*.jpg"))) > 0


def test_every_tasks_shards_load_together_with_datasets(generated, tmp_path, monkeypatch):
    """One schema for all tasks: datasets.load_dataset("json") over every task's shards (the
    schema is inferred from the first file, so both orders), offline."""
    datasets = pytest.importorskip("datasets")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setattr(datasets.config, "HF_DATASETS_OFFLINE", True, raising=False)
    out, configs, manifest = generated
    files = sorted(str(p) for c in configs for p in (out / c.dataset).glob("*.jsonl"))
    for order in (files, files[::-1]):
        ds = datasets.load_dataset("json", data_files=order, split="train",
                                   cache_dir=str(tmp_path / "cache"))
        assert len(ds) == sum(c.episodes for c in configs)
        assert set(ds["env_id"]) == {c.env_id for c in configs}
