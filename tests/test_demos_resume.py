"""visgym demos into an existing folder, and what its output is for.

Resume only what matches: a rerun with settings that change the bytes is refused naming them;
growing --episodes adds exactly the missing episodes (the result equals a fresh run); a shard
whose images are missing or torn is rebuilt; a folder locked by a live run is never touched.
--episodes N gives exactly N conversations (drops counted, pathological success rates refused);
--exclude-dataset-root excludes a published evaluation set's init states; the manifest records
the prompt settings; every task's shards share one schema (datasets.load_dataset reads several
at once); mixtures of mixtures and their export work; the LlamaFactory recipe names the
datasets of dataset_info.json, and LlamaFactory's own parser reads them (when installed)."""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import visgym
from visgym.bridges import cli, demos
from visgym.bridges.conversation import VERBALIZE_SUFFIX
from visgym.bridges.files import FolderLock, FolderLocked


def _tree(root: Path, manifest: bool = True) -> dict:
    """Every file's bytes (the manifest without its "run" block; the recipe without the path)."""
    files = {}
    for p in sorted(root.rglob("*")):
        if not p.is_file():
            continue
        data = p.read_bytes()
        if p.name == "manifest.json" and p.parent == root:
            if not manifest:
                continue
            m = json.loads(data)
            m.pop("run", None)
            data = json.dumps(m, sort_keys=True).encode()
        if p.name == demos.LLAMAFACTORY_YAML:
            data = data.replace(str(root.resolve()).encode(), b"<out>")
        files[str(p.relative_to(root))] = data
    return files


def _cfg(**kw):
    base = dict(task="maze_2d", episodes=6, shard_size=4)
    base.update(kw)
    return demos.DemoConfig(**base)


def _cli(capsys, *argv):
    code = cli.main(["demos", "--quiet", *map(str, argv)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# ------------------------------------------------------------------------------ settings keys
def test_rerun_with_other_settings_is_refused_naming_them(tmp_path, capsys):
    out = tmp_path / "demos"
    base = ["--tasks", "maze_2d", "--episodes", 4, "--shard-size", 2, "--workers", 1, "--out", out]
    code, _, err = _cli(capsys, *base)
    assert code == 0, err
    before = _tree(out)
    for extra, flag in [(["--split", "hard"], "--split"), (["--seed", 7], "--seed"),
                        (["--max-long-side", 128], "--max-long-side"),
                        (["--max-steps", 25], "--max-steps"),
                        (["--shard-size", 3], "--shard-size")]:
        code, _, err = _cli(capsys, *base, *extra)
        assert code != 0, extra
        lines = err.strip().splitlines()
        assert len(lines) == 1 and flag in lines[0] and str(out / "maze_2d") in lines[0], err
        assert _tree(out) == before, f"{extra}: the refused run changed the folder"
    code, _, err = _cli(capsys, *base)      # the same settings still resume
    assert code == 0 and _tree(out) == before


def test_growing_episodes_adds_exactly_the_missing_ones(tmp_path):
    """A 6-episode pilot grown to 10 (shard size 4) builds episodes 6..9 only (the short shard
    is extended in place) and ends byte-identical to a fresh 10-episode run."""
    grown, fresh = tmp_path / "grown", tmp_path / "fresh"
    demos.generate([_cfg(episodes=6)], grown, workers=1, progress=False)
    manifest = demos.generate([_cfg(episodes=10)], grown, workers=1, progress=False)
    assert manifest["run"]["episodes_generated"] == 4
    assert manifest["run"]["shards_resumed"] == 1 and manifest["run"]["shards_extended"] == 1
    assert [r["episode"] for r in demos.iter_records(grown, "maze_2d")] == list(range(10))
    demos.generate([_cfg(episodes=10)], fresh, workers=2, progress=False)
    assert _tree(grown) == _tree(fresh)
    again = demos.generate([_cfg(episodes=10)], grown, workers=1, progress=False)
    assert again["run"]["episodes_generated"] == 0
    with pytest.raises(ValueError, match="--episodes: .* already holds episodes up to 10"):
        demos.generate([_cfg(episodes=5)], grown, workers=1, progress=False)


def test_episode_bytes_do_not_depend_on_the_total(tmp_path):
    small = tmp_path / "small"
    large = tmp_path / "large"
    demos.generate([_cfg(episodes=3, shard_size=8)], small, workers=1, progress=False)
    demos.generate([_cfg(episodes=8, shard_size=8)], large, workers=1, progress=False)
    a = list(demos.iter_records(small, "maze_2d"))
    b = list(demos.iter_records(large, "maze_2d"))
    assert a == b[:3]


# ------------------------------------------------------------------------------ exact counts
def test_episodes_gives_exactly_n_conversations_and_counts_the_drops(tmp_path):
    """With a 14-step budget many maze plans are too long; the kept count is still exact."""
    cfg = _cfg(episodes=12, shard_size=5, max_steps=14)
    manifest = demos.generate([cfg], tmp_path, workers=1, progress=False)
    d = manifest["datasets"]["maze_2d"]
    records = list(demos.iter_records(tmp_path, "maze_2d"))
    assert len(records) == d["episodes"] == d["kept"] == 12
    assert d["dropped_unsuccessful"] > 0
    assert d["attempted"] == 12 + d["dropped_unsuccessful"] + d["skipped_eval_overlap"]
    assert [r["episode"] for r in records] == list(range(12))
    assert any(r["attempt"] > 0 for r in records)
    for r in records:
        assert r["seed"] == demos.attempt_seed("maze_2d", "easy", 0, r["episode"], r["attempt"])
        assert len(r["images"]) <= 14


def test_a_pathological_success_rate_gives_up_with_one_clear_line(tmp_path, capsys):
    out = tmp_path / "demos"
    code, _, err = _cli(capsys, "--tasks", "maze_2d", "--episodes", 2, "--max-steps", 1,
                        "--workers", 1, "--out", out)
    lines = err.strip().splitlines()
    assert code != 0 and len(lines) == 1, err
    assert "maze_2d/easy" in lines[0] and "40 attempts" in lines[0] and "--max-steps" in lines[0]
    assert not list(out.rglob("*.jsonl"))


# ------------------------------------------------------------------------------ verification
def test_a_shard_with_a_missing_or_torn_image_is_rebuilt(tmp_path):
    """shard_done trusts nothing it has not checked: a deleted image, a truncated image and an
    edited JSONL each make their shard be rebuilt, to the same bytes."""
    cfg = _cfg(episodes=12, shard_size=4)
    demos.generate([cfg], tmp_path, workers=1, progress=False)
    before = _tree(tmp_path, manifest=False)
    images = sorted((tmp_path / "images" / "maze_2d").rglob("*.jpg"))
    victims = {p.parent.name: p for p in images}
    missing, torn = victims["shard-00000"], victims["shard-00001"]
    missing.unlink()
    torn.write_bytes(torn.read_bytes()[:100])
    jsonl = tmp_path / "maze_2d" / "shard-00002.jsonl"
    jsonl.write_bytes(jsonl.read_bytes().replace(b'"reward":1.0', b'"reward":0.5', 1))
    for s in range(3):
        assert not demos.shard_done(tmp_path, cfg, s)
    manifest = demos.generate([cfg], tmp_path, workers=2, progress=False)
    assert manifest["run"]["shards_resumed"] == 0 and manifest["run"]["episodes_generated"] == 12
    assert _tree(tmp_path, manifest=False) == before
    assert all(demos.shard_done(tmp_path, cfg, s) for s in range(3))


def test_a_locked_folder_is_refused_at_once_and_left_alone(tmp_path, capsys):
    out = tmp_path / "demos"
    demos.generate([_cfg()], out, workers=1, progress=False)
    before = _tree(out)
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time\nfrom visgym.bridges.files import FolderLock\n"
         "with FolderLock(sys.argv[1]):\n    print('locked', flush=True)\n    time.sleep(60)\n",
         str(out)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        t0 = time.monotonic()
        code, _, err = _cli(capsys, "--tasks", "maze_2d", "--episodes", 6, "--shard-size", 4,
                            "--workers", 1, "--out", out)
        assert time.monotonic() - t0 < 30
        lines = err.strip().splitlines()
        assert code != 0 and len(lines) == 1, err
        assert str(out) in lines[0] and f"pid {holder.pid}" in lines[0]
        with pytest.raises(FolderLocked):
            demos.generate([_cfg(episodes=8)], out, workers=1, progress=False)
        assert (out / ".lock").read_text().strip() == str(holder.pid)
        assert {**_tree(out), ".lock": b""} == before
    finally:
        holder.kill()
        holder.wait()
    with FolderLock(out):       # released with its holder
        pass
    assert (out / ".lock").read_text() == ""


# ------------------------------------------------------------------------------ exclusions
def _write_reference_root(root: Path, states: list) -> None:
    """A published evaluation set in the reference layout (bridges/splits.py), one episode per
    state, stored the way a foreign writer might: indented, keys unsorted, an extra field."""
    listing = root / "test_set_easy" / "maze_2d__easy"
    listing.mkdir(parents=True)
    lines = []
    for i, state in enumerate(states):
        seed, episode_seed = 1000 + i, 2000 + i
        lines.append(json.dumps({"env_id": "maze_2d/easy", "seed": seed,
                                 "episode_seed": episode_seed}))
        folder = (root / "initial_states_easy" / "maze_2d__easy" /
                  f"seed{seed}_episode{episode_seed}")
        folder.mkdir(parents=True)
        foreign = {"target_location": state["target_location"], "note": "published",
                   "agent_location": state["agent_location"], "maze_map": state["maze_map"]}
        (folder / "initial_state.json").write_text(json.dumps(foreign, indent=4))
    (listing / "part-0.jsonl").write_text("\n".join(lines) + "\nnot json\n")


def test_exclude_dataset_root_drops_a_published_sets_init_states(tmp_path, capsys):
    env = visgym.make("maze_2d/easy", num_envs=2)
    env.reset(seeds=[demos.demo_seed("maze_2d", "easy", 0, k) for k in (0, 2)])
    published = env.state_dicts()
    root = tmp_path / "published"
    _write_reference_root(root, published)
    clashes = {demos.init_state_hash("maze_2d", s) for s in published}
    out = tmp_path / "demos"
    code, stdout, err = _cli(capsys, "--tasks", "maze_2d", "--episodes", 4, "--shard-size", 4,
                             "--workers", 1, "--exclude-dataset-root", root, "--out", out)
    assert code == 0, err
    manifest = json.loads((out / "manifest.json").read_text())
    d = manifest["datasets"]["maze_2d"]
    assert d["episodes"] == 4 and d["skipped_eval_overlap"] >= 2
    records = list(demos.iter_records(out, "maze_2d"))
    assert not clashes & {r["hash"] for r in records}
    assert {r["episode"]: r["attempt"] for r in records}[0] >= 1
    excl = manifest["exclusion"]
    assert excl["dataset_roots"] == [str(root.resolve())]
    assert excl["dataset_root_states"][str(root.resolve())]["maze_2d"] >= 2
    assert excl["skipped_lines"] == 1 and "sha256(task" in excl["hash_rule"]
    # Without the exclusion the bytes would differ: refused, naming the option.
    code, _, err = _cli(capsys, "--tasks", "maze_2d", "--episodes", 4, "--shard-size", 4,
                        "--workers", 1, "--out", out)
    assert code != 0 and "--exclude-dataset-root" in err and len(err.strip().splitlines()) == 1
    # A folder that is not a published set: one line naming the option.
    code, _, err = _cli(capsys, "--tasks", "maze_2d", "--episodes", 4, "--workers", 1,
                        "--exclude-dataset-root", tmp_path / "nothing", "--out", tmp_path / "x")
    assert code != 0 and err.startswith("visgym demos: error: --exclude-dataset-root")


# ------------------------------------------------------------------------------ outputs
@pytest.fixture(scope="module")
def two_tasks(tmp_path_factory):
    out = tmp_path_factory.mktemp("two_tasks")
    configs = [demos.DemoConfig(task="maze_2d", episodes=5, shard_size=3),
               demos.DemoConfig(task="sliding_block", episodes=4, shard_size=3),
               demos.DemoConfig(task="matchstick_equation", episodes=3, shard_size=3)]
    manifest = demos.generate(configs, out, workers=1, progress=False)
    return out, configs, manifest


def test_manifest_records_the_prompt_settings(two_tasks):
    out, configs, manifest = two_tasks
    assert manifest["prompt"] == {
        "elicit_verbalization": True, "feedback": True, "history": -1, "max_long_side": 336,
        "text_mode": False, "final_goal": False,
        "max_steps": {"maze_2d/easy": 20, "matchstick_equation/easy": 20,
                      "sliding_block/easy": 20}}
    for cfg in configs:
        for record in demos.iter_records(out, cfg.dataset):
            humans = record["conversations"][0::2]
            assert humans[0]["value"].count(VERBALIZE_SUFFIX) == 1
            assert all(h["value"].startswith("<image>Environment feedback: ")
                       for h in humans[1:])


def test_all_tasks_shards_load_together_with_datasets(two_tasks, tmp_path, monkeypatch):
    datasets = pytest.importorskip("datasets")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(datasets.config, "HF_DATASETS_OFFLINE", True, raising=False)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True, raising=False)
    out, configs, manifest = two_tasks
    files = sorted(str(p) for c in configs for p in (out / c.dataset).glob("*.jsonl"))
    # Every order: the schema is inferred from the first file read.
    for order in (files, files[::-1]):
        ds = datasets.load_dataset("json", data_files=order, split="train",
                                   cache_dir=str(tmp_path / "cache"))
        assert len(ds) == sum(c.episodes for c in configs)
        assert {r for r in ds["env_id"]} == {c.env_id for c in configs}
        assert isinstance(ds[0]["init_state"], str)
        assert ds[0]["conversations"][0]["from"] == "human" and ds[0]["images"]


def test_a_mixture_of_mixtures_mixes_and_exports_every_record(two_tasks, tmp_path, capsys):
    datasets = pytest.importorskip("datasets")
    out, configs, _ = two_tasks
    mix1, mix2 = tmp_path / "mix1", tmp_path / "mix2"
    first = demos.mix([out / "maze_2d", out / "sliding_block"], mix1, total=6, seed=1)
    assert [s["count"] for s in first["sources"]] == [3, 3]
    second = demos.mix([mix1, out / "matchstick_equation"], mix2, total=7, weights=[2, 1],
                       seed=2)
    assert sum(s["count"] for s in second["sources"]) == 7
    records = list(demos.iter_records(mix2, "mixture"))
    assert len(records) == 7
    assert {r["source"].split("/")[-1] for r in records} <= {"maze_2d", "sliding_block",
                                                              "matchstick_equation"}
    for r in records:
        assert all((mix2 / p).is_file() for p in r["images"])
    assert second["prompt"]["max_steps"] == {"maze_2d/easy": 20, "matchstick_equation/easy": 20,
                                             "sliding_block/easy": 20}
    for folder, total in ((mix1, 6), (mix2, 7)):
        code = cli.main(["demos", "export", str(folder), "--out", str(tmp_path / "hf" /
                                                                     folder.name)])
        assert code == 0
        assert f"({total} episodes)" in capsys.readouterr().out
        ds = datasets.load_from_disk(str(tmp_path / "hf" / folder.name / "mixture"))
        assert len(ds) == total
        assert len(ds[0]["images"]) == len(ds[0]["conversations"]) // 2


def _yaml(text: str) -> dict:
    """The recipe's flat ``key: value`` lines (comments dropped), values as YAML reads them."""
    values = {}
    for line in text.splitlines():
        line = line.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        key, _, value = line.partition(":")
        value = value.strip()
        if value.startswith('"'):
            values[key] = json.loads(value)
        elif value in ("true", "false"):
            values[key] = value == "true"
        else:
            try:
                values[key] = int(value)
            except ValueError:
                try:
                    values[key] = float(value)
                except ValueError:
                    values[key] = value
    return values


def test_llamafactory_recipe_names_the_datasets_of_dataset_info(tmp_path, capsys):
    out = tmp_path / "demos"
    code, stdout, err = _cli(capsys, "--tasks", "maze_2d,maze_3d", "--split", "hard",
                             "--episodes", 3, "--workers", 1, "--out", out)
    assert code == 0, err
    recipe = out / demos.LLAMAFACTORY_YAML
    text = recipe.read_text()
    values = _yaml(text)
    try:
        import yaml
    except ImportError:
        yaml = None
    if yaml is not None:                 # the same values as a YAML parser reads
        assert yaml.safe_load(text) == values
    for key in ("model_name_or_path", "image_max_pixels", "stage", "do_train", "finetuning_type",
                "dataset_dir", "dataset", "template", "cutoff_len", "output_dir",
                "per_device_train_batch_size", "gradient_accumulation_steps", "learning_rate",
                "num_train_epochs", "bf16"):
        assert key in values, key
    assert values["model_name_or_path"] == "Qwen/Qwen2.5-VL-7B-Instruct"
    assert values["template"] == "qwen2_vl" and values["stage"] == "sft"
    assert values["finetuning_type"] in ("lora", "full")
    assert values["image_max_pixels"] == 262144
    # Qwen2.5-VL needs no code from its repository: the recipe does not allow it to run any.
    assert "trust_remote_code" not in values and "No trust_remote_code" in text
    assert values["dataset_dir"] == str(out.resolve())
    info = json.loads((out / "dataset_info.json").read_text())
    names = values["dataset"].split(",")
    assert names == ["maze_2d", "maze_3d"] and all(n in info for n in names)
    manifest = json.loads((out / "manifest.json").read_text())
    longest = max(d["max_tokens_estimate"] for d in manifest["datasets"].values())
    assert longest > 2048            # hard mazes outgrow LlamaFactory's default cutoff_len
    assert values["cutoff_len"] >= max(15000, longest)
    assert f"llamafactory-cli train {recipe.resolve()}" in stdout
    assert str(recipe.resolve()) in stdout and "maze_2d,maze_3d" in stdout


def test_llamafactory_reads_the_dataset_with_its_own_parser(two_tasks, tmp_path):
    pytest.importorskip("llamafactory", reason="LlamaFactory is not installed; "
                        "`pip install llamafactory` enables this test (its own dataset_info "
                        "parser and ShareGPT converter read a generated dataset)")
    datasets = pytest.importorskip("datasets")
    from llamafactory.data.parser import get_dataset_list
    from llamafactory.hparams import DataArguments

    out, configs, _ = two_tasks
    names = [c.dataset for c in configs]
    data_args = DataArguments(dataset_dir=str(out), dataset=",".join(names))
    try:
        from llamafactory.data.converter import get_dataset_converter

        def convert(attr, example):
            return get_dataset_converter(attr.formatting, attr, data_args)(example)
    except ImportError:   # older LlamaFactory
        from llamafactory.data.converter import SharegptDatasetConverter

        def convert(attr, example):
            return SharegptDatasetConverter(attr, data_args)(example)
    for attr, cfg in zip(get_dataset_list(names, str(out)), configs):
        assert attr.load_from == "file" and attr.formatting == "sharegpt"
        folder = out / attr.dataset_name
        files = [str(folder / f) for f in sorted(os.listdir(folder))]   # what its loader lists
        ds = datasets.load_dataset("json", data_files=files, split="train",
                                   cache_dir=str(tmp_path / "cache"))
        assert len(ds) == cfg.episodes
        for example in ds:
            row = convert(attr, example)
            turns = len(example["conversations"])
            assert len(row["_prompt"]) == turns - 1 and len(row["_response"]) == 1
            assert row["_response"][0]["content"].startswith("<think></think><answer>")
            assert len(row["_images"]) == turns // 2
            assert all(os.path.isfile(p) for p in row["_images"])
