"""Evaluation splits: shipped files are reproducible; the reference's metadata layout loads."""
import json

import pytest

import visgym
from visgym.bridges import splits


@pytest.mark.parametrize("task", splits.tasks_with_splits())
@pytest.mark.parametrize("split", splits.SPLITS)
def test_shipped_split_equals_a_fresh_generation(task, split):
    shipped = splits.load_split(task, split)
    assert len(shipped) == splits.SPLIT_EPISODES
    fresh = splits.generate_split(task, split)
    assert [s.init_state for s in shipped] == [row["init_state"] for row in fresh]
    assert len({s.episode_seed for s in shipped}) == splits.SPLIT_EPISODES
    env = visgym.make(f"{task}/{split}", num_envs=1)
    env.reset(init_states=[shipped[0].init_state])


def test_split_seeds_differ_between_tasks_splits_and_indices():
    seeds = {splits.split_seed(t, s, i) for t in ("a", "b") for s in splits.SPLITS for i in range(70)}
    assert len(seeds) == 2 * 2 * 70


def _write_reference_layout(root, split, rows, states):
    folder = root / f"test_set_{split}" / f"maze_2d__{split}"
    folder.mkdir(parents=True)
    with open(folder / "episodes.jsonl", "w") as f:
        for row in rows:
            f.write((json.dumps(row) if isinstance(row, dict) else row) + "\n")
    for (seed, ep), state in states.items():
        d = root / f"initial_states_{split}" / f"maze_2d__{split}" / f"seed{seed}_episode{ep}"
        d.mkdir(parents=True)
        (d / "initial_state.json").write_text(json.dumps(state))


def test_reference_layout_loads_in_file_order_and_skips_bad_lines(tmp_path):
    shipped = splits.load_split("maze_2d", "easy")[:3]
    rows = [{"env_id": "maze_2d/easy", "seed": 10 + i, "episode_seed": 100 + i} for i in range(3)]
    states = {(10 + i, 100 + i): s.init_state for i, s in enumerate(shipped)}
    _write_reference_layout(tmp_path, "easy", [rows[2], "not json", rows[0], rows[1]], states)
    specs, skipped = splits.load_reference_layout(tmp_path, "easy", ["maze_2d"])
    assert skipped == 1
    assert [s.episode_seed for s in specs] == [102, 100, 101]
    assert specs[1].init_state == shipped[0].init_state
    assert len({s.key for s in specs}) == 3


def test_reference_layout_errors_name_the_missing_file(tmp_path):
    _write_reference_layout(tmp_path, "easy", [{"env_id": "maze_2d/easy", "seed": 1,
                                                "episode_seed": 2}], {})
    with pytest.raises(ValueError, match="seed1_episode2"):
        splits.load_reference_layout(tmp_path, "easy", ["maze_2d"])
    with pytest.raises(ValueError, match="test_set_hard"):
        splits.load_reference_layout(tmp_path, "hard", ["maze_2d"])
