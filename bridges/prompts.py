"""Prompt settings: the one description of how an episode's conversation is worded and shaped.

The evaluation runner, the demonstration synthesizer and ``visgym eval --prompt-from`` all
speak of the same settings (spec agent_loop.md sections 2, 4 and 7; sft_data.md 1.2), under the
names a demonstrations manifest stores them (its ``"prompt"`` block):

- ``elicit_verbalization``: the think/answer suffix on the instructions, and the action read
  from the reply's ``<answer>``;
- ``feedback``: the previous action's feedback in the next user turn;
- ``history``: -1 the whole conversation, 0 none, k > 0 the last k turns;
- ``text_mode``: the ascii frame instead of the image (families with a text mode);
- ``final_goal``: the solved configuration's image in the first turn;
- ``max_long_side``: images fitted into this many pixels (None: the frame's own size);
- ``max_steps``: the step budget per env id ("task/split"), where it is not the default.

Demonstrations are always prompted with ``DEMO_PROMPT`` (think/answer, feedback, full history).
``PromptSettings.from_manifest`` reads and checks a manifest's block for ``--prompt-from``.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace

# The flag that sets each setting on ``visgym eval`` (for messages).
FLAGS = {"elicit_verbalization": "--elicit-verbalization", "feedback": "--no-feedback",
         "history": "--history", "max_long_side": "--max-long-side",
         "text_mode": "--text-mode", "final_goal": "--final-goal"}


@dataclass(frozen=True)
class PromptSettings:
    elicit_verbalization: bool = False
    feedback: bool = True
    history: int = -1
    text_mode: bool = False
    final_goal: bool = False
    max_long_side: int | None = 336
    max_steps: dict = field(default_factory=dict)   # {"task/split": steps}

    def validate(self) -> "PromptSettings":
        """The settings themselves, or ValueError naming the flag of one that is invalid."""
        if self.history < -1:
            raise ValueError(f"--history: must be -1 (all), 0 or a positive count, "
                             f"got {self.history}")
        if self.final_goal and self.history != -1:
            raise ValueError("--final-goal: needs the full history (--history -1), since the "
                             "goal image lives in the first turn")
        if self.final_goal and self.text_mode:
            raise ValueError("--final-goal: cannot be combined with --text-mode")
        if self.max_long_side is not None and self.max_long_side < 16:
            raise ValueError(f"--max-long-side: must be at least 16, got {self.max_long_side}")
        for env_id, steps in self.max_steps.items():
            if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
                raise ValueError(f"max_steps: {env_id}: must be a positive integer, "
                                 f"got {steps!r}")
        return self

    def images_per_request(self) -> int:
        """Images one request holds at most: none in text mode, one with no history, two
        otherwise (the observation, and the history's or the goal's)."""
        if self.text_mode:
            return 0
        return 2 if self.history != 0 or self.final_goal else 1

    def manifest(self) -> dict:
        """The manifest's "prompt" block (max_steps sorted by env id)."""
        out = asdict(self)
        out["max_steps"] = dict(sorted(self.max_steps.items()))
        return out

    def without_budgets(self) -> "PromptSettings":
        return replace(self, max_steps={})

    @classmethod
    def from_manifest(cls, prompt, where: str) -> "PromptSettings":
        """The settings of a manifest's "prompt" block, checked field by field (``where``: the
        manifest's path, for messages)."""
        if not isinstance(prompt, dict):
            raise ValueError(f"--prompt-from: {where} has no \"prompt\" object (made by an "
                             "older 'visgym demos'; regenerate it, or give the prompt options "
                             "yourself)")
        for name in ("elicit_verbalization", "feedback", "text_mode", "final_goal"):
            if not isinstance(prompt.get(name), bool):
                raise ValueError(f"--prompt-from: {where}: prompt.{name} must be true or false, "
                                 f"got {prompt.get(name)!r}")
        history = prompt.get("history")
        if isinstance(history, bool) or not isinstance(history, int) or history < -1:
            raise ValueError(f"--prompt-from: {where}: prompt.history must be an integer >= -1, "
                             f"got {history!r}")
        side = prompt.get("max_long_side", "missing")
        if side is not None and (isinstance(side, bool) or not isinstance(side, int)
                                 or side < 16):
            raise ValueError(f"--prompt-from: {where}: prompt.max_long_side must be an integer "
                             f">= 16 or null, got {side!r}")
        budgets = prompt.get("max_steps")
        if not isinstance(budgets, dict) or not all(
                isinstance(k, str) and "/" in k and isinstance(v, int)
                and not isinstance(v, bool) and v >= 1 for k, v in budgets.items()):
            raise ValueError(f"--prompt-from: {where}: prompt.max_steps must map \"task/split\" "
                             f"to a positive step count, got {budgets!r}")
        return cls(elicit_verbalization=prompt["elicit_verbalization"],
                   feedback=prompt["feedback"], history=history,
                   text_mode=prompt["text_mode"], final_goal=prompt["final_goal"],
                   max_long_side=side, max_steps=dict(budgets))

    def contradiction(self, given: dict, where: str) -> str | None:
        """A message naming the first of ``given`` (settings set by flags) that differs from
        these settings, or None."""
        for name, value in given.items():
            if name in FLAGS and getattr(self, name) != value:
                return (f"--prompt-from: {flag_text(name, value)} contradicts the "
                        f"demonstrations' {name} = {json.dumps(getattr(self, name))} in {where} "
                        "(drop the flag, or evaluate without --prompt-from)")
        return None


def flag_text(name: str, value) -> str:
    """How the flag of setting ``name`` reads with ``value`` (for messages)."""
    flag = FLAGS[name]
    if name == "feedback":
        return flag if value is False else "feedback on"
    if name == "max_long_side":
        return f"{flag} {0 if value is None else value}"
    if isinstance(value, bool):
        return flag
    return f"{flag} {value}"


DEMO_PROMPT = PromptSettings(elicit_verbalization=True, feedback=True, history=-1,
                             text_mode=False, final_goal=False)
"""How demonstrations are prompted (sft_data.md 1.2: think/answer, feedback, full history);
their manifest adds max_long_side and the budgets."""
