"""The difficulty knobs of every family, read from the code: what docs/difficulty.md shows.

A knob is a parameter that changes how hard an episode is: every Params field whose ``easy`` and
``hard`` presets differ, the fields a family names in ``Family.difficulty_knobs`` (equal in both
presets, e.g. a success tolerance), and the step budget ``max_steps``. A knob's valid range is
never typed here: each preset is rebuilt under ``core.validate.recording()``, which logs the
bounds, options and hand-checked rules (``validate.rule``) its ``__post_init__`` asks for, and
the step budget's range is logged the same way from the BatchEnv's own check. Only the one-phrase
description of each knob (``EFFECTS``) is written here. ``python -m visgym.bridges.difficulty >
docs/difficulty.md`` regenerates the page; tests/test_difficulty.py holds the page to the code.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..core import registry
from ..core.validate import Check, recording

BUDGET = "max_steps"
# The env whose construction logs the step budget's check (the budget is the BatchEnv's, the
# same for every family): maze_2d is the cheapest family to build.
BUDGET_PROBE = "maze_2d/easy"
DIFFICULTIES = ("easy", "hard")

# What each knob does, one phrase per (family, field); every other part of a row comes from code.
EFFECTS = {
    ("colorization", "accuracy_radius"): "success radius on the colour wheel; larger is more "
                                         "lenient (so hard, 16, is easier than easy, 11: the "
                                         "reference's inversion)",
    ("counting", "min_count"): "fewest objects of the asked category in an image",
    ("counting", "max_count"): "most objects of the asked category in an image; also the "
                               "largest answer",
    ("counting", "max_marks"): "most dots one `mark_all` places",
    ("fetch_pick_and_place", "distance_threshold"): "success radius of the object around the "
                                                    "goal, metres",
    ("fetch_reach", "distance_threshold"): "success radius of the gripper around the goal, "
                                           "metres",
    ("jigsaw", "num_rows"): "rows of pieces",
    ("jigsaw", "num_cols"): "columns of pieces",
    ("matchstick_equation", "break_moves"): "matches moved to break the equation: the moves a "
                                            "fix needs",
    ("matchstick_rotation", "pos_tolerance"): "success radius of the stick's midpoint, canvas px",
    ("matchstick_rotation", "ang_tolerance"): "success tolerance of the stick's angle, degrees",
    ("maze_2d", "maze_width"): "maze columns, outer wall included",
    ("maze_2d", "maze_height"): "maze rows, outer wall included",
    ("maze_3d", "maze_width"): "maze columns, outer wall included",
    ("maze_3d", "maze_height"): "maze rows, outer wall included",
    ("maze_3d", "max_plan_steps"): "longest optimal plan (stop included) a generated maze may "
                                   "need",
    ("mental_rotation_2d", "tolerance"): "largest angle error a stop is rewarded at, degrees",
    ("mental_rotation_3d_cube", "num_segments"): "segments of the cube chain: shape complexity",
    ("mental_rotation_3d_cube", "angle_tol"): "largest rotation error a stop is rewarded at, "
                                              "radians",
    ("mental_rotation_3d_objaverse", "tolerance"): "largest rotation error a stop is rewarded "
                                                   "at, degrees",
    ("patch_reassembly", "grid_size"): "board (rows, cols)",
    ("patch_reassembly", "num_patches"): "pieces to place",
    ("referring_dot_pointing", "accept_any_same_category"): "any object of the referred "
                                                            "category counts as a hit",
    ("sliding_block", "num_shuffle_moves"): "scramble length that makes the target layout",
    ("video_unshuffle", "num_frames"): "frames to put in order",
    ("zoom_in_puzzle", "num_zoom_views"): "crops to order by zoom",
}
BUDGET_EFFECT = "step budget per episode (a `make` keyword; None: no budget)"


@dataclass(frozen=True)
class Knob:
    """One row of the table: ``field`` is a Params field or ``max_steps``; ``valid_range`` the
    text made from the recorded checks; ``checks`` those checks (per difficulty: a bound may
    depend on another field, e.g. counting's min_count <= max_count)."""

    family: str
    field: str
    valid_range: str
    easy: object
    hard: object
    effect: str
    checks: dict = dataclasses.field(compare=False, repr=False)


def field_checks(params) -> dict[str, list[Check]]:
    """The checks ``params``' ``__post_init__`` makes, per field name: ``params`` rebuilt (from
    its own, already checked values) under a recording."""
    with recording() as log:
        dataclasses.replace(params)
    out: dict[str, list[Check]] = {}
    for check in log:
        out.setdefault(check.field, []).append(check)
    return out


def budget_checks() -> list[Check]:
    """The checks the BatchEnv makes on ``max_steps`` (logged while one small env is built)."""
    with recording() as log:
        registry.make(BUDGET_PROBE, num_envs=1, max_steps=registry.DEFAULT_MAX_STEPS["easy"])
    return [check for check in log if check.field == BUDGET]


def knob_fields(family: type) -> list[str]:
    """The family's knob fields in declaration order: presets that differ, plus the declared."""
    fields = [f.name for f in dataclasses.fields(family.Params)]
    for name in family.difficulty_knobs:
        if name not in fields:
            raise ValueError(f"{family.name}.difficulty_knobs: {name!r} is not a field of "
                             f"{family.Params.__name__}")
    easy, hard = (family.presets[d] for d in DIFFICULTIES)
    return [name for name in fields
            if getattr(easy, name) != getattr(hard, name) or name in family.difficulty_knobs]


def families() -> list[type]:
    """Every registered family that has both an easy and a hard id, by name."""
    ids = set(registry.list_envs())
    found = {}
    for env_id in sorted(ids):
        name, _, difficulty = env_id.partition("/")
        if difficulty == "easy" and f"{name}/hard" in ids:
            found[name] = registry.spec(env_id).family
    return [found[name] for name in sorted(found)]


def difficulty_table() -> list[Knob]:
    """The rows of docs/difficulty.md: per family (by name), its knob fields, then max_steps."""
    budget = budget_checks()
    rows = []
    for family in families():
        presets = {d: family.presets[d] for d in DIFFICULTIES}
        recorded = {d: field_checks(p) for d, p in presets.items()}
        for name in knob_fields(family):
            checks = {d: recorded[d].get(name, []) for d in DIFFICULTIES}
            accepts_none = all(_accepts_none(p, name) for p in presets.values())
            where = f"{family.name}.{name}"
            rows.append(Knob(family.name, name, range_text(checks, accepts_none, where),
                             getattr(presets["easy"], name), getattr(presets["hard"], name),
                             _effect(family.name, name), checks))
        rows.append(Knob(family.name, BUDGET, range_text({d: budget for d in DIFFICULTIES},
                                                         False, BUDGET),
                         *(registry.spec(f"{family.name}/{d}").default_max_steps
                           for d in DIFFICULTIES), BUDGET_EFFECT,
                         {d: budget for d in DIFFICULTIES}))
    return rows


def _effect(family: str, name: str) -> str:
    try:
        return EFFECTS[family, name]
    except KeyError:
        raise ValueError(f"{family}.{name}: a difficulty knob without a description; add one "
                         f"to EFFECTS in bridges/difficulty.py") from None


def _accepts_none(params, name: str) -> bool:
    try:
        dataclasses.replace(params, **{name: None})
    except ValueError:
        return False
    return True


# ------------------------------------------------------------------------------ range text
def number_text(value) -> str:
    """A bound or value as a person reads it: 10.0 as 10, 1e6 as 1000000, pi as 3.14159."""
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e15:
            return str(int(value))
        return f"{value:g}"
    return str(value)


def value_text(value) -> str:
    """A preset value for the table."""
    if isinstance(value, (tuple, list)):
        return "(" + ", ".join(value_text(v) for v in value) + ")"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return number_text(value)
    return repr(value)


def _bounds_text(check: Check, integral: bool) -> str:
    low, high = check.low, check.high
    if integral:
        if low is not None and high is not None:
            return f"{number_text(low)}..{number_text(high)}"
        if low is not None:
            return f">= {number_text(low)}"
        return f"<= {number_text(high)}" if high is not None else "any"
    if check.positive and (low is None or low <= 0):
        left = "(0"
    elif low is not None:
        left = f"[{number_text(low)}"
    else:
        left = None
    if left is None:
        return f"<= {number_text(high)}" if high is not None else "any"
    if high is None:
        return "> 0" if left == "(0" else f">= {number_text(low)}"
    return f"in {left}, {number_text(high)}]"


def check_text(check: Check) -> str:
    """One recorded check in words."""
    if check.kind == "integer":
        return f"integer {_bounds_text(check, True)}"
    if check.kind == "real":
        return f"number {_bounds_text(check, False)}"
    if check.kind == "integers":
        return f"{check.length} integers, each {_bounds_text(check, True)}"
    if check.kind == "reals":
        return f"{check.length} numbers, each {_bounds_text(check, False)}"
    if check.kind == "one_of":
        return "one of " + ", ".join(value_text(o) for o in check.options)
    if check.kind == "boolean":
        return "True or False"
    raise ValueError(f"{check.field}: no words for a {check.kind!r} check")


def range_text(checks: dict, accepts_none: bool, where: str) -> str:
    """The valid range of one field from its recorded checks per difficulty. A bound that the
    difficulties record differently depends on another field; it is left out and must be
    described by a rule (else ValueError naming ``where``)."""
    merged: list[Check] = []
    rules: list[str] = []
    varying = False
    per = [[c for c in checks[d] if c.kind != "rule"] for d in DIFFICULTIES]
    if len(per[0]) != len(per[1]) or any(a.kind != b.kind for a, b in zip(*per)):
        raise ValueError(f"{where}: the presets are checked differently ({per[0]} / {per[1]})")
    for first, second in zip(*per):
        low = first.low if first.low == second.low else None
        high = first.high if first.high == second.high else None
        varying = varying or low != first.low or high != first.high
        check = dataclasses.replace(first, low=low, high=high)
        if check not in merged:
            merged.append(check)
    for check in checks[DIFFICULTIES[0]]:
        if check.kind == "rule" and check.text not in rules:
            rules.append(check.text)
    if not merged and not rules:
        raise ValueError(f"{where}: no recorded check; validate it with core/validate.py's "
                         f"checks or note its constraint with validate.rule")
    if varying and not rules:
        raise ValueError(f"{where}: a bound depends on another field; describe it with "
                         f"validate.rule")
    parts = [" and ".join(check_text(c) for c in merged)] if merged else []
    if accepts_none or any(c.optional for c in merged):
        parts[-1:] = [(parts[-1] + ", or None") if parts else "None"]
    return "; ".join(parts + rules)


# ------------------------------------------------------------------------------ the page
INTRO = """\
# Difficulty knobs

Generated from the code by `python -m visgym.bridges.difficulty > docs/difficulty.md`
(tests/test_difficulty.py fails when this page and the code disagree). Do not edit by hand.

A *difficulty knob* is a parameter that changes how hard an episode is: every parameter whose
`easy` and `hard` presets differ, the ones a family declares in `Family.difficulty_knobs`
(equal in both presets, such as a success tolerance), and the step budget `max_steps`. The
valid ranges are the checks each family's Params class makes (`core/validate.py` records them);
a value outside raises `ValueError` naming the parameter. Paths, data folders and pure rendering
settings are parameters too, but not knobs (see each family's Params docstring and its page in
`docs/envs/`).

`easy` and `hard` are two points of each family's range. Any other valid values make a custom
difficulty: pass them as keywords on top of a preset,

```python
import visgym

env = visgym.make("maze_2d/easy", num_envs=64, maze_width=15, maze_height=15, max_steps=40)
```

A mixed batch takes its params per task, so a curriculum is a list of param sets: one list of
specs per stage, from easy to hard, such as

```python
stage = visgym.make_mixed([
    {"id": "maze_2d/easy", "num_envs": 32, "params": {"maze_width": 7, "maze_height": 7}},
    {"id": "sliding_block/easy", "num_envs": 32, "params": {"num_shuffle_moves": 10}},
])
```

fetch_reach, fetch_pick_and_place and referring_dot_pointing have identical easy and hard
presets (as in the reference): there only the step budget differs, and the declared knobs are
what a curriculum can turn.
"""


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(rows: list[Knob] | None = None) -> str:
    """docs/difficulty.md: the introduction and one table of every family's knobs."""
    rows = difficulty_table() if rows is None else rows
    lines = [INTRO, "| family | parameter | valid range | easy | hard | what it does |",
             "|---|---|---|---|---|---|"]
    for row in rows:
        lines.append(f"| {row.family} | `{row.field}` | {_cell(row.valid_range)} | "
                     f"`{_cell(value_text(row.easy))}` | `{_cell(value_text(row.hard))}` | "
                     f"{_cell(row.effect)} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    import sys

    sys.stdout.write(render_markdown())
