"""Evaluation records take outcomes from the step's data, not from feedback text: an invalid
action is one the parser refused (info["invalid"], codes 1-4), whatever the family's own words
for it, and an episode succeeds when it ends with a stop on a solved state."""
import json

from visgym.bridges.agents import ReplayAgent
from visgym.bridges.evaluate import EvalConfig, run_eval
from visgym.bridges.splits import load_split


def _run(tmp_path, task, actions):
    path = tmp_path / "actions.json"
    path.write_text(json.dumps(actions))
    episodes = load_split(task, "easy")[:1]
    run_eval(ReplayAgent(str(path)), EvalConfig(out=str(tmp_path / "run"), gifs=False,
                                                progress=False), episodes)
    lines = (tmp_path / "run" / "episodes.jsonl").read_text().splitlines()
    return json.loads(lines[0])


def test_a_family_with_its_own_invalid_payload_text_has_its_invalid_actions_counted(tmp_path):
    record = _run(tmp_path, "mental_rotation_3d_objaverse",
                  ["('rotate', [999, 0, 0])", "('rotate', [0, 0, 0])", "not an action",
                   "('stop', 'stop')"])
    feedback = [s["feedback"] for s in record["steps_log"]]
    assert feedback[0] == "Action payload [999, 0, 0] is invalid."
    assert record["invalid_actions"] == 2   # the payload and the unparsable text
    assert record["end_reason"] == "stop" and record["success"] is False


def test_family_outcomes_are_not_invalid_actions(tmp_path):
    # A move into a wall is a valid action with the family's own feedback, not an invalid one.
    record = _run(tmp_path, "maze_2d", ["('move', 0)", "('move', 2)", "('move', 7)",
                                        "('stop', 'stop')"])
    assert record["invalid_actions"] == 1
    assert record["steps"] == 4 and record["success"] is False
