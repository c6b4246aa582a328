"""The turn loop: one episode's conversation, step by step, and the transcript it leaves.

Spec agent_loop.md section 2 (and 4, 5.3, 7): each step sends a user turn (the observation as
an image, or the ascii frame in text mode, and a text: the instructions on the first turn, then
the previous action's feedback and the step message), takes the agent's reply, reads an action
from it (bridges/replies.py), steps the env and keeps what happened. The episode ends when the
env terminates it (a stop, or the family's own end), when a reply ends it (a context-length
error), or when the step budget runs out.

``EpisodeLoop`` holds that logic once, as a small state machine that does no I/O, so every
workflow drives it its own way and none re-implements it:

- the evaluation runner (bridges/evaluate.py) drives one loop per episode as a coroutine:
  ``text = loop.next_text()``, ``messages = loop.user_message(text, image_b64, ...)``,
  ``reply = await agent.act(...)``, ``action = loop.take_reply(reply)``, ``result = await
  stepper.step(slot, action)``, ``loop.take_result(result)``; ``play`` does exactly this;
- the demonstration synthesizer (bridges/demos/) drives a batch of loops in lockstep with the
  solver's plans (no messages are built: a demonstration stores texts and images);
- the rollout collector (bridges/rollouts.py) drives it like the runner and keeps token ids and
  log-probabilities from the replies.

The transcript (``Transcript``, one ``TurnLog`` per step) is what each workflow maps to its own
output: an evaluation record, ShareGPT turns, a trajectory. Outcomes come from the step results
(``StepResult``: codes, ``invalid``, ``success``), never from feedback text; an episode
succeeded when it terminated with ``success`` on its last step (core.rollout.episode_success).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from ..core.rollout import episode_success
from .conversation import prune_history, turn_text, user_content
from .prompts import PromptSettings
from .replies import extract_action, extract_think
from .stepper import StepResult


@dataclass
class TurnLog:
    """One step of a transcript."""

    step: int
    prompt: str               # the text of the user turn
    reply: object             # the agent's Reply (agents/base.py)
    action: str               # the action read from the reply
    result: StepResult        # what the env did with it


@dataclass
class Transcript:
    turns: list = field(default_factory=list)     # TurnLog per step
    end_reason: str = "budget"   # "stop" (terminated), "budget", a fatal reply's reason, ...
    reward: float = 0.0          # sum of the steps' rewards
    terminated: bool = False
    truncated: bool = False      # the budget ran out (end_reason "budget")
    success: bool = False        # episode_success of the last step
    invalid_actions: int = 0     # steps whose action text was not an action (codes 1-4)
    error_replies: int = 0       # steps whose reply was flagged (empty, refused, error, ...)
    usage: dict | None = None    # summed token usage, when the replies carried it

    @property
    def steps(self) -> int:
        return len(self.turns)


class EpisodeLoop:
    """One episode's turn loop (see the module docstring). ``budget``: the step budget;
    ``instructions``: the episode's task instruction as sent (bridges/conversation.py);
    ``goal_b64``: the final-goal image, sent in the first turn."""

    def __init__(self, settings: PromptSettings, budget: int, instructions: str,
                 goal_b64: str | None = None):
        self.settings = settings
        self.budget = budget
        self.instructions = instructions
        self.goal_b64 = goal_b64
        self.messages: list = []
        self.transcript = Transcript()
        self.done = budget <= 0
        self._feedback: str | None = None
        self._text = ""
        self._reply = None
        self._action = ""
        self._usage = {"prompt_tokens": 0, "completion_tokens": 0}

    @property
    def step(self) -> int:
        """The index of the step being played (0-based)."""
        return len(self.transcript.turns)

    def next_text(self) -> str:
        """The text of the next user turn."""
        s = self.settings
        self._text = turn_text(self.step, self.budget, self.instructions, self._feedback,
                               s.feedback, s.history, s.text_mode)
        return self._text

    def user_message(self, text: str, image_b64: str | None = None,
                     ascii_frame: str | None = None) -> list:
        """Add the user turn of ``text`` with its observation to the conversation and return
        the messages to send (the history window applied; a new list)."""
        history = self.settings.history
        if history == 0:
            self.messages = []
        elif history > 0 and self.step > 0:
            self.messages = prune_history(self.messages, history, self.instructions)
        goal = self.goal_b64 if self.step == 0 else None
        self.messages.append({"role": "user",
                              "content": user_content(text, image_b64, goal, ascii_frame)})
        return list(self.messages)

    def take_reply(self, reply, action: str | None = None) -> str:
        """Record the agent's reply and return the action to step (read from the reply, or
        ``action`` when the caller already knows it, as a solver's demonstration does). The
        reply joins the conversation when there is one (``user_message`` was called)."""
        self._reply = reply
        if self.messages:
            self.messages.append({"role": "assistant", "content": reply.text})
        if action is None:
            action = extract_action(reply.text, self.settings.elicit_verbalization)
        self._action = action
        return action

    def take_result(self, result: StepResult) -> bool:
        """Record the env's result of the step; return whether the episode is over."""
        t = self.transcript
        reply = self._reply
        step = len(t.turns)
        t.turns.append(TurnLog(step, self._text, reply, self._action, result))
        self._feedback = result.feedback
        t.reward += result.reward
        t.terminated, t.truncated = result.terminated, result.truncated
        t.invalid_actions += result.invalid
        if reply.flag is not None:
            t.error_replies += 1
        if reply.usage:
            t.usage = self._usage
            for k in self._usage:
                self._usage[k] += reply.usage.get(k) or 0
        if result.terminated:
            t.end_reason = "stop"
        elif reply.fatal:
            t.end_reason = reply.fatal
        elif result.truncated or step + 1 >= self.budget:
            t.end_reason = "budget"
        else:
            return False
        self.done = True
        t.truncated = t.end_reason == "budget"
        t.success = episode_success(t.terminated, result.success)
        return True


class Meter:
    """The loop's own time per step (everything but waiting for the agent and the env, plus
    the episode's share of the batched step call): the evaluation's ``loop_overhead_ms``."""

    def __init__(self):
        self.overhead_s = 0.0
        self.steps = 0


async def play(loop: EpisodeLoop, agent, stepper, slot: int, episode, *, on_reply=None,
               frames: list | None = None, meter: Meter | None = None) -> Transcript:
    """Play ``loop`` to its end with ``agent`` on ``stepper``'s ``slot`` (its frames encoded
    with the slot's encoder); return the transcript. ``on_reply(reply)`` sees every reply
    before its action is stepped (the fault policy: it may raise to stop the run); ``frames``
    gets a copy of every observation and of the final frame (for a GIF); ``meter`` adds up the
    loop's own time."""
    from .agents import Turn

    clock = time.perf_counter
    meter = meter or Meter()
    env = stepper.env
    encoder = stepper.encoders[slot]
    text_mode = loop.settings.text_mode
    while not loop.done:
        t0 = clock()
        text = loop.next_text()
        # The row changes only when this episode steps, so the encoder reads it in place; the
        # view is the episode's own frame size (DESIGN.md "Frames").
        frame = env.frame(slot)
        ascii_frame = env.render_text(slot) if text_mode else None
        image_b64 = None if text_mode else _b64(encoder(frame))
        if frames is not None:
            frames.append(frame.copy())
        messages = loop.user_message(text, image_b64, ascii_frame)
        meter.overhead_s += clock() - t0
        reply = await agent.act(Turn(episode, loop.step, messages, text, frame))
        t0 = clock()
        if on_reply is not None:
            on_reply(reply)
        action = loop.take_reply(reply)
        meter.overhead_s += clock() - t0
        result = await stepper.step(slot, action)
        t0 = clock()
        loop.take_result(result)
        meter.overhead_s += result.cost_s + clock() - t0
        meter.steps += 1
    if frames is not None:
        frames.append(env.frame(slot).copy())
    return loop.transcript


def _b64(data: bytes) -> str:
    import base64

    return base64.b64encode(data).decode("ascii")


def step_entry(turn: TurnLog, elicit_verbalization: bool) -> dict:
    """A transcript step as the evaluation record's ``steps_log`` entry (records.py)."""
    reply, result = turn.reply, turn.result
    entry = {"step": turn.step, "prompt": turn.prompt, "reply": reply.text,
             "reply_flag": reply.flag, "action": turn.action, "feedback": result.feedback,
             "reward": result.reward, "terminated": result.terminated,
             "latency_s": round(reply.latency_s, 4), "attempts": reply.attempts}
    if reply.usage:
        entry["usage"] = reply.usage
    if reply.error:
        entry["error"] = reply.error
        entry["error_kind"] = reply.error_kind
        entry["transient"] = reply.transient
    if reply.truncated:
        entry["truncated"] = True
    if elicit_verbalization:
        think = extract_think(reply.text)
        if think is not None:
            entry["think"] = think
    return entry
