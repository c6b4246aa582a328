"""`visgym eval --dataset-root DIR` runs counting and referring_dot_pointing on real data laid out
as the published bundle has it: the reference's metadata (test_set_<split>/, initial_states_<split>/)
and the media under DIR/partial_datasets (counting/lvis_v1_train.json with its COCO images;
refcoco+/ with the refs pickle, instances.json and train2014 images). The data are the recorded
episodes' inputs (parity/inputs), the init states the recorded ones; the solver agent succeeds on
every episode and the records name the reference's init states."""
import json
import os
import shutil

import pytest

from parity_data import load_parity, parity_dir, require_recordings
from visgym.bridges import cli


def _link_tree(src, dst):
    """dst mirrors src: folders made, files hard-linked (copied where links fail)."""
    for folder, _, files in os.walk(src):
        target = os.path.join(dst, os.path.relpath(folder, src))
        os.makedirs(target, exist_ok=True)
        for name in files:
            try:
                os.link(os.path.join(folder, name), os.path.join(target, name))
            except OSError:
                shutil.copyfile(os.path.join(folder, name), os.path.join(target, name))


@pytest.mark.parametrize("family", ["counting", "referring_dot_pointing"])
def test_eval_of_the_published_layout_reads_the_real_data(tmp_path, monkeypatch, family):
    require_recordings(family)
    for var in ("VIS_GYM_LVIS_ANNOTATION_FILE", "VIS_GYM_LVIS_DIR", "VIS_GYM_REFCOCO_DIR"):
        monkeypatch.delenv(var, raising=False)
    inputs = parity_dir() / "inputs"
    root = tmp_path / "inference_dataset"
    if family == "counting":
        media = root / "partial_datasets" / "counting"
        _link_tree(inputs / "counting" / "train2017", media)
        _link_tree(inputs / "counting", media)          # the JSON beside the images
    else:
        _link_tree(inputs / "referring_dot_pointing", root / "partial_datasets")
    # Init states load whatever the sample-list options (they name their image and category).
    episodes = [e for e in load_parity(family) if e["env_id"] == f"{family}/easy"][:5]
    listing = root / "test_set_easy" / f"{family}__easy"
    listing.mkdir(parents=True)
    with open(listing / "episodes.jsonl", "w") as f:
        for k, e in enumerate(episodes):
            f.write(json.dumps({"env_id": e["env_id"], "seed": 1, "episode_seed": k}) + "\n")
            d = root / "initial_states_easy" / f"{family}__easy" / f"seed1_episode{k}"
            d.mkdir(parents=True)
            (d / "initial_state.json").write_text(json.dumps(e["init_state"]))
    out = tmp_path / "out"
    monkeypatch.chdir(tmp_path)
    assert cli.main(["eval", "--dataset-root", str(root), "--tasks", family, "--split", "easy",
                     "--gifs", "0", "--out", str(out)]) == 0
    records = [json.loads(line) for line in open(out / "episodes.jsonl")]
    assert len(records) == len(episodes) >= 3
    assert sorted(json.dumps(r["init_state"], sort_keys=True) for r in records) == sorted(
        json.dumps(e["init_state"], sort_keys=True) for e in episodes)
    assert all(r["success"] for r in records)
