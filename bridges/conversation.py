"""Conversation building: the one place where the agent loop's messages are worded and shaped.

The evaluation runner (bridges/evaluate.py), the demonstration synthesizer (bridges/demos/)
and the demonstration benchmark (bench/demos.py) all build their prompts here, so a model is
fine-tuned on exactly the turns it is evaluated with (spec agent_loop.md sections 2 and 4,
sft_data.md section 1):

- ``episode_instructions``: the task instruction of an episode, with the think/answer suffix
  when verbalization is elicited (spec 2, step 3);
- ``turn_text``: the text of a user turn: instructions and step message first, afterwards the
  previous action's feedback and the step message (spec 2, steps 4-5);
- ``user_content``: an OpenAI-style user turn's content parts (image, text, final-goal image;
  or the ascii frame and text in text mode);
- ``prune_history``: the history window of ``--history K`` (spec 4);
- ``REPLY_TEMPLATE`` / ``sharegpt_turns``: a demonstration's ShareGPT human and gpt turns.
"""
from __future__ import annotations

import re

from .imaging import data_url

__all__ = ["MessageMemo", "VERBALIZE_SUFFIX", "GOAL_TEXT", "REPLY_TEMPLATE", "episode_instructions",
           "turn_text", "user_content", "prune_history", "sharegpt_turns"]

VERBALIZE_SUFFIX = ("\n\nVerbalize your reasoning in <think>\u2026</think> and give the final "
                    "result in <answer>\u2026</answer>.")
GOAL_TEXT = "The final goal of the episode should look like the following image: "
REPLY_TEMPLATE = "<think></think><answer>{action}</answer>"
_FEEDBACK_RE = re.compile(r"Environment feedback:.*?(?=This is step)", re.DOTALL)


def episode_instructions(env, index: int = 0, text_mode: bool = False,
                         elicit_verbalization: bool = False) -> str:
    """The task instruction of episode ``index`` of ``env`` (a BatchEnv) as the loop sends it
    (spec 2, step 3)."""
    instructions = env.prompt(text_mode=text_mode, index=index)
    if elicit_verbalization:
        instructions += VERBALIZE_SUFFIX
    return instructions


def turn_text(step: int, budget: int, instructions: str, feedback: str | None,
              include_feedback: bool = True, history: int = -1, text_mode: bool = False) -> str:
    """The text of the user turn of ``step`` (0-based; spec 2, steps 4-5): the instructions and
    the step message on the first turn (every turn without history), afterwards the previous
    action's feedback and the step message."""
    step_msg = f"This is step {step + 1}. You are allowed to take {budget - step - 1} more steps."
    if step == 0 or (history == 0 and not text_mode):
        return instructions + "\n" + step_msg
    parts = []
    if include_feedback and feedback is not None:
        parts.append("Environment feedback: " + feedback)
    parts.append(step_msg)
    return "\n\n".join(parts)


def user_content(text: str, image_b64: str | None, goal_b64: str | None = None,
                 ascii_frame: str | None = None) -> list:
    """The content parts of a user turn (spec 2.1): the observation's ``image_url`` part, then
    the text, then (first turn of the final-goal ablation) the goal text and image. In text
    mode (``ascii_frame`` given) one text part: the ascii frame, a newline, the text."""
    if ascii_frame is not None:
        return [{"type": "text", "text": ascii_frame + "\n" + text}]
    content = [{"type": "image_url", "image_url": {"url": data_url(image_b64)}},
               {"type": "text", "text": text}]
    if goal_b64 is not None:
        content += [{"type": "text", "text": GOAL_TEXT},
                    {"type": "image_url", "image_url": {"url": data_url(goal_b64)}}]
    return content


class MessageMemo:
    """``convert(message)`` for each message of one episode's conversation, computed once per
    message: ``memo(messages)`` gives the converted list.

    The conversation is resent every turn, so converting it anew per turn (a request's JSON, a
    record's copy) is quadratic in the episode's length. A message is known by identity: the
    loop never changes a message it has sent, and ``prune_history`` builds a new first message
    rather than editing the old one. Only the messages of the last call are kept, so a history
    window does not grow the memo. A message sent again gets the same converted object."""

    def __init__(self, convert):
        self._convert = convert
        self._memo: dict = {}    # id(message) -> (message, converted); the message pins its id

    def __call__(self, messages: list) -> list:
        memo, kept, out = self._memo, {}, []
        for message in messages:
            hit = memo.get(id(message))
            converted = hit[1] if hit is not None and hit[0] is message \
                else self._convert(message)
            kept[id(message)] = (message, converted)
            out.append(converted)
        self._memo = kept
        return out


def prune_history(messages: list, k: int, instructions: str) -> list:
    """Spec section 4: keep the last 2k messages; the oldest kept user turn loses its feedback
    and gets the instructions prepended (no separator, as the reference). The message dicts
    passed in are not changed."""
    if len(messages) >= 2 * k:
        messages = messages[len(messages) - 2 * k:]
    if messages and messages[0]["role"] == "user":
        first = dict(messages[0])
        parts = [dict(p) for p in first["content"]]
        for part in parts:
            if part["type"] == "text" and instructions not in part["text"]:
                part["text"] = instructions + _FEEDBACK_RE.sub("", part["text"], count=1)
                break
        first["content"] = parts
        messages = [first] + messages[1:]
    return messages


def sharegpt_turns(text: str, action: str) -> tuple[dict, dict]:
    """One step of a demonstration as ShareGPT turns: the human turn (the image placeholder and
    the loop's prompt text) and the gpt turn (``REPLY_TEMPLATE`` around the action)."""
    return ({"from": "human", "value": "<image>" + text},
            {"from": "gpt", "value": REPLY_TEMPLATE.format(action=action)})
