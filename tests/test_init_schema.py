"""core.validate.InitSchema: a family states its init-state format once; every field is
checked, named by its full path, before any row is written."""
import pytest

import visgym
from visgym.core.validate import InitSchema, check_with, integer, integers, real


def _schema():
    inner = InitSchema({"lens": check_with(integers, 2, 1, 9)})
    return InitSchema({"scale": check_with(real, 0.5, 2.0), "shape": inner,
                       "moves": (check_with(integer, 0), 0)},
                      finish=lambda parsed, where: _finish(parsed, where))


def _finish(parsed, where):
    if parsed["shape"]["lens"][0] > 4 * parsed["scale"]:
        raise ValueError(f"{where}.shape.lens: too long for scale {parsed['scale']}")
    return {**parsed, "area": parsed["scale"] * sum(parsed["shape"]["lens"])}


def test_fields_are_checked_and_parsed_with_defaults_and_a_cross_check():
    got = _schema().parse_all([{"scale": 1, "shape": {"lens": [2, 3]}, "extra": "ignored"}])
    assert got == [{"scale": 1.0, "shape": {"lens": (2, 3)}, "moves": 0, "area": 5.0}]


@pytest.mark.parametrize("init,message", [
    ({"shape": {"lens": [1, 1]}}, r"^init_states\[1\]\.scale: missing$"),
    ({"scale": 3, "shape": {"lens": [1, 1]}}, r"^init_states\[1\]\.scale: must be <= 2"),
    ({"scale": 1, "shape": {}}, r"^init_states\[1\]\.shape\.lens: missing$"),
    ({"scale": 1, "shape": [1, 2]}, r"^init_states\[1\]\.shape: expected a dict"),
    ({"scale": 1, "shape": {"lens": [1, 1]}, "moves": -1}, r"^init_states\[1\]\.moves: must"),
    ({"scale": 1, "shape": {"lens": [9, 1]}}, r"^init_states\[1\]\.shape\.lens: too long"),
    ("not a dict", r"^init_states\[1\]: expected a dict, got str$"),
])
def test_a_bad_field_is_named_by_its_full_path(init, message):
    good = {"scale": 1, "shape": {"lens": [1, 1]}}
    with pytest.raises(ValueError, match=message):
        _schema().parse_all([good, init])


def test_a_refused_batch_of_init_states_changes_no_episode():
    env = visgym.make("maze_3d/easy", num_envs=2)
    env.reset(seeds=[1, 2])
    before = env.state_dicts()
    bad = dict(before[1], cam_dir=7)
    with pytest.raises(ValueError, match=r"^init_states\[1\]\.cam_dir: expected an integer"):
        env.reset(init_states=[before[1], bad])
    assert env.state_dicts() == before
