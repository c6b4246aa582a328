"""docs/difficulty.md is the code's: the committed page equals the generated one, every knob is a
real parameter, every range holds the presets, and a value just outside a numeric range is
refused with a ValueError naming the parameter (so a range in the table cannot drift from the
check that enforces it). Also the recorder in core/validate that the table is read with.
"""
import dataclasses
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import visgym
from visgym.bridges import difficulty
from visgym.core import registry, validate

PAGE = Path(__file__).resolve().parents[1] / "docs" / "difficulty.md"
ROWS = difficulty.difficulty_table()
NUMERIC = ("integer", "real", "integers", "reals")


def _family(name):
    return registry.spec(f"{name}/easy").family


def _params_rows():
    return [row for row in ROWS if row.field != difficulty.BUDGET]


def _row_id(row):
    return f"{row.family}.{row.field}"


def test_committed_page_is_the_generated_one():
    assert PAGE.read_text(encoding="utf-8") == difficulty.render_markdown(ROWS), (
        "docs/difficulty.md is out of date with the code; regenerate it with "
        "`python -m visgym.bridges.difficulty > docs/difficulty.md`")


def test_module_entry_point_prints_the_page():
    out = subprocess.run([sys.executable, "-m", "visgym.bridges.difficulty"], check=True,
                         capture_output=True, text=True, timeout=60).stdout
    assert out == difficulty.render_markdown(ROWS)


def test_every_family_has_its_presets_differences_and_the_budget():
    families = sorted({i.split("/")[0] for i in visgym.list_envs()})
    assert sorted({row.family for row in ROWS}) == families
    for name in families:
        family = _family(name)
        easy, hard = family.presets["easy"], family.presets["hard"]
        fields = {row.field for row in ROWS if row.family == name}
        differing = {f.name for f in dataclasses.fields(family.Params)
                     if getattr(easy, f.name) != getattr(hard, f.name)}
        assert differing | set(family.difficulty_knobs) | {difficulty.BUDGET} == fields


@pytest.mark.parametrize("row", _params_rows(), ids=_row_id)
def test_knob_is_a_field_and_its_columns_are_the_presets(row):
    family = _family(row.family)
    assert row.field in {f.name for f in dataclasses.fields(family.Params)}
    assert row.easy == getattr(family.presets["easy"], row.field)
    assert row.hard == getattr(family.presets["hard"], row.field)
    assert row.effect and row.valid_range


def test_budget_rows_are_the_registry_budgets():
    for row in ROWS:
        if row.field == difficulty.BUDGET:
            assert (row.easy, row.hard) == tuple(
                registry.spec(f"{row.family}/{d}").default_max_steps for d in ("easy", "hard"))


def _inside(check, value):
    values = value if check.kind in ("integers", "reals") else (value,)
    for v in values:
        if check.low is not None and v < check.low:
            return False
        if check.high is not None and v > check.high:
            return False
        if check.positive and v <= 0:
            return False
    return True


def _outside(check):
    """Values just outside the check's range (one per bound it has)."""
    integral = check.kind in ("integer", "integers")
    out = []
    if check.low is not None:
        out.append(check.low - 1 if integral else check.low - 1e-6 * max(1.0, abs(check.low)))
    if check.high is not None:
        out.append(check.high + 1 if integral else check.high + 1e-6 * max(1.0, abs(check.high)))
    if check.positive:
        out.append(0.0)
    return out


@pytest.mark.parametrize("row", ROWS, ids=_row_id)
@pytest.mark.parametrize("difficulty_name", ["easy", "hard"])
def test_range_holds_the_preset_value(row, difficulty_name):
    value = getattr(row, difficulty_name)
    checks = [c for c in row.checks[difficulty_name] if c.kind in NUMERIC]
    for check in checks:
        assert _inside(check, value), (check, value)


@pytest.mark.parametrize("row", _params_rows(), ids=_row_id)
@pytest.mark.parametrize("difficulty_name", ["easy", "hard"])
def test_just_outside_the_range_is_refused_naming_the_field(row, difficulty_name):
    preset = _family(row.family).presets[difficulty_name]
    checks = [c for c in row.checks[difficulty_name] if c.kind in NUMERIC]
    for check in checks:
        for bad in _outside(check):
            if check.kind in ("integers", "reals"):   # one element out, the others the preset's
                bad = (bad,) + tuple(getattr(preset, row.field))[1:]
            with pytest.raises(ValueError) as error:
                dataclasses.replace(preset, **{row.field: bad})
            assert str(error.value).startswith(row.field), (bad, str(error.value))


def test_budget_just_outside_its_range_is_refused():
    (check,) = [c for c in difficulty.budget_checks() if c.kind == "integer"]
    assert check.low == 1 and check.high is None
    with pytest.raises(ValueError, match="^max_steps"):
        visgym.make(difficulty.BUDGET_PROBE, max_steps=check.low - 1)


def test_maze_sides_rule_odd_is_shown_and_enforced():
    row = next(r for r in ROWS if (r.family, r.field) == ("maze_2d", "maze_width"))
    assert row.valid_range == "integer 5..201; odd"
    with pytest.raises(ValueError, match="^maze_width: must be odd"):
        visgym.make("maze_2d/easy", maze_width=10)


def test_bound_that_depends_on_another_field_is_shown_as_its_rule():
    # counting's min_count is checked against max_count: the presets record different highs.
    row = next(r for r in ROWS if (r.family, r.field) == ("counting", "min_count"))
    assert row.valid_range == "integer >= 0; at most max_count"


def test_declared_knob_that_is_no_field_is_refused(monkeypatch):
    family = _family("maze_2d")
    monkeypatch.setattr(family, "difficulty_knobs", ("maze_depth",))
    with pytest.raises(ValueError, match="maze_depth"):
        difficulty.knob_fields(family)


# ------------------------------------------------------------------------------ the recorder
def test_recording_logs_each_check_once_with_its_bounds():
    with validate.recording() as log:
        validate.integers("grid", [1, 2], 2, 0, 9)
        validate.real("tol", 1.5, 0.0, 10.0, positive=True)
        validate.optional_integer("limit", None, 1)
        validate.one_of("mode", "a", ("a", "b"))
        validate.rule("grid", "sums to at most 9")
    assert [(c.field, c.kind) for c in log] == [
        ("grid", "integers"), ("tol", "real"), ("limit", "integer"), ("mode", "one_of"),
        ("grid", "rule")]
    assert (log[0].low, log[0].high, log[0].length) == (0, 9, 2)
    assert log[1].positive and log[2].optional and log[3].options == ("a", "b")
    assert log[4].text == "sums to at most 9"


def test_recording_is_off_outside_the_block_and_in_other_threads():
    seen = []
    with validate.recording() as log:
        thread = threading.Thread(target=lambda: seen.append(validate.integer("other", 1, 0)))
        thread.start()
        thread.join()
        validate.integer("mine", 1, 0)
    validate.integer("after", 1, 0)
    assert seen == [1]
    assert [c.field for c in log] == ["mine"]


def test_range_text_words():
    check = validate.Check
    assert difficulty.check_text(check("x", "real", 0.0, 180.0)) == "number in [0, 180]"
    assert difficulty.check_text(check("x", "real", None, 10.0, positive=True)) == \
        "number in (0, 10]"
    assert difficulty.check_text(check("x", "integers", 1, 12, length=2)) == \
        "2 integers, each 1..12"
    assert difficulty.check_text(check("x", "one_of", options=("a", "b"))) == "one of 'a', 'b'"
