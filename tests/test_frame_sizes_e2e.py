"""Variable frame sizes end to end (DESIGN.md "Frames"): on the families whose frame size differs
per episode, every image a consumer produces has the episode's own size, never the padded
capacity: the JPEGs the evaluation runner sends to the model (seen by a local OpenAI-compatible
server), the frames of its GIFs (as the HTML report reads them back), the demonstrations' images,
and `visgym gifs`. Expected sizes come from replaying each episode and reading ``frame_hw``.
"""
import json

import numpy as np
import pytest
from PIL import Image

import visgym
from fake_openai import FakeOpenAI
from visgym.bridges import cli
from visgym.bridges.agents import OpenAIAgent
from visgym.bridges.evaluate import EvalConfig, run_eval
from visgym.bridges.gifs import read_gif_frames
from visgym.bridges.imaging import fit_long_side
from visgym.bridges.splits import load_split

FAMILIES = ["patch_reassembly", "jigsaw", "counting", "referring_dot_pointing"]
KEY_ENV = "VISGYM_TEST_KEY"


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-test-frame-sizes")


def _env(env_id):
    return visgym.make(env_id, num_envs=1, autoreset="disabled", max_steps=None)


def _sizes_along(env_id, init_state, seed, actions):
    """(w, h) of the episode's frame after the reset and after each action."""
    env = _env(env_id)
    env.reset(seeds=[seed % 2**64], init_states=[init_state])
    sizes = [tuple(env.frame_hw[0][::-1].tolist())]
    for action in actions:
        env.step([action])
        sizes.append(tuple(env.frame_hw[0][::-1].tolist()))
    return sizes


@pytest.mark.parametrize("family", FAMILIES)
def test_eval_sends_and_keeps_each_episodes_own_size(tmp_path, family):
    episodes = load_split(family, "easy")[:6]
    capacity = _env(f"{family}/easy").frames.shape[1:3]
    with FakeOpenAI(policy="garbage") as server:
        agent = OpenAIAgent(model="fake", base_url=server.base_url, api_key_env=KEY_ENV,
                            timeout_s=30.0)
        run_eval(agent, EvalConfig(out=str(tmp_path / "out"), concurrency=2, max_steps=3,
                                   gifs=True, progress=False, max_long_side=None), episodes)
        requests = server.requests_snapshot()
    records = {r["key"]: r for r in map(json.loads, open(tmp_path / "out" / "episodes.jsonl"))}
    assert len(records) == 6
    expected = {}
    for spec in episodes:
        rec = records[spec.key]
        sizes = _sizes_along(spec.env_id, spec.init_state, spec.episode_seed,
                             [s["action"] for s in rec["steps_log"]])
        expected[spec.key] = sizes
    # Sizes really differ between episodes, and none is the padded capacity.
    firsts = {sizes[0] for sizes in expected.values()}
    assert len(firsts) > 1
    assert all(s != (capacity[1], capacity[0]) for s in firsts)
    # Every request's images: the last one is the current step's frame of some episode.
    allowed = {s for sizes in expected.values() for s in sizes}
    assert requests
    for req in requests:
        assert req.image_sizes and set(req.image_sizes) <= allowed, req.image_sizes
        assert len(set(req.image_sizes)) == 1   # one episode's conversation, one size
    # GIF frames, read back as the report does (captions removed).
    gifs = sorted((tmp_path / "out" / "gifs").rglob("*.gif"))
    assert len(gifs) == 6
    for gif in gifs:
        index = int(gif.name.split("_")[0])
        spec = next(s for s in episodes if s.index == index)
        frames = read_gif_frames(gif)
        assert frames, gif
        for frame in frames:
            assert (frame.shape[1], frame.shape[0]) in expected[spec.key], gif


@pytest.mark.parametrize("family", FAMILIES)
def test_demos_images_have_each_steps_own_size(tmp_path, family):
    out = tmp_path / "demos"
    assert cli.main(["demos", "--tasks", family, "--episodes", "4", "--workers", "1",
                     "--max-long-side", "100000", "--quiet", "--out", str(out)]) == 0
    records = [json.loads(line) for path in sorted((out / family).glob("*.jsonl"))
               for line in open(path)]
    assert len(records) == 4
    seen = set()
    for rec in records:
        actions = [turn["value"] for turn in rec["conversations"] if turn["from"] == "gpt"]
        sizes = _sizes_along(rec["env_id"], json.loads(rec["init_state"]), rec["seed"], actions)
        assert len(rec["images"]) <= len(sizes)
        for k, name in enumerate(rec["images"]):
            with Image.open(out / name) as im:
                assert im.size == sizes[k], (name, im.size, sizes[k])
        seen.add(sizes[0])
    assert len(seen) > 1


@pytest.mark.parametrize("family", FAMILIES)
def test_default_max_long_side_scales_each_episode_from_its_own_size(tmp_path, family):
    out = tmp_path / "demos"
    assert cli.main(["demos", "--tasks", family, "--episodes", "2", "--workers", "1",
                     "--quiet", "--out", str(out)]) == 0
    rec = json.loads(next(open(next((out / family).glob("*.jsonl")))))
    env = _env(rec["env_id"])
    env.reset(seeds=[rec["seed"] % 2**64], init_states=[json.loads(rec["init_state"])])
    h, w = env.frame_hw[0].tolist()
    with Image.open(out / rec["images"][0]) as im:
        assert im.size == fit_long_side(w, h, 336)


@pytest.mark.parametrize("family", FAMILIES)
def test_gifs_command_frames_have_the_episodes_size(family):
    from visgym.bridges.cli import rollout

    recorded, _, _ = rollout(f"{family}/easy", episodes=3, seed=0)
    env = visgym.make(f"{family}/easy", num_envs=3, autoreset="disabled", max_steps=None)
    env.reset(seeds=range(3))
    for b, frames in enumerate(recorded):
        np.testing.assert_array_equal(frames[0], env.frame(b))
        assert {f.shape for f in frames} == {env.frame(b).shape}   # constant within an episode


def test_eval_of_the_published_layout_reads_the_bundles_photos(tmp_path, monkeypatch):
    """`visgym eval --dataset-root DIR` on the reference's metadata layout: the photo family
    reads the episode's image from DIR/partial_datasets/jigsaw (Family.data_dir_keyword), whose
    name the init state gives relative to that folder, as the published bundle has it."""
    monkeypatch.delenv("VIS_GYM_IMAGE_DIR", raising=False)
    root = tmp_path / "inference_dataset"
    photos = root / "partial_datasets" / "jigsaw" / "00001"
    photos.mkdir(parents=True)
    rng = np.random.default_rng(0)
    Image.fromarray(rng.integers(0, 256, (90, 120, 3), np.uint8)).save(photos / "a.jpg")
    Image.fromarray(rng.integers(0, 256, (60, 84, 3), np.uint8)).save(photos / "b.png")
    listing = root / "test_set_easy" / "jigsaw__easy"
    listing.mkdir(parents=True)
    states = {(1, 11): ("00001/a.jpg", [1, 0, 3, 2]), (1, 12): ("00001/b.png", [3, 2, 1, 0])}
    with open(listing / "episodes.jsonl", "w") as f:
        for (seed, ep), (name, target) in states.items():
            f.write(json.dumps({"env_id": "jigsaw/easy", "seed": seed, "episode_seed": ep}) + "\n")
            d = root / "initial_states_easy" / "jigsaw__easy" / f"seed{seed}_episode{ep}"
            d.mkdir(parents=True)
            (d / "initial_state.json").write_text(json.dumps(
                {"image_name": name, "current_state": [0, 1, 2, 3], "target_state": target}))
    out = tmp_path / "out"
    assert cli.main(["eval", "--dataset-root", str(root), "--tasks", "jigsaw", "--split", "easy",
                     "--gifs", "0", "--out", str(out)]) == 0
    records = [json.loads(line) for line in open(out / "episodes.jsonl")]
    assert sorted(r["init_state"]["image_name"] for r in records) == ["00001/a.jpg",
                                                                       "00001/b.png"]
    assert all(r["success"] for r in records)
    env = visgym.make("jigsaw/easy", sample_dir=str(root))
    env.reset(init_states=[records[0]["init_state"]])
    h, w = env.frame_hw[0].tolist()
    assert (h, w) in ((90 + 4, 120 + 4), (60 + 4, 84 + 4))
