"""The contract every environment family implements (see DESIGN.md, "The contract").

A family is a small class bound to one frozen params object. It owns no episode data: the
episode State is a NamedTuple of arrays with a leading batch axis that the caller (BatchEnv)
allocates once with ``new_state(B)`` and passes to every call. Kernels update the state in place
so that a step allocates nothing; every function works on whole batches (or on a list of rows of
the batch for resets), never on one Python object per episode.

Feedback is a small integer per episode: 0 = "Action executed successfully.", codes 1..4 are the
parser's error codes (their text comes from the parser, since it quotes the action), and codes
from FAMILY_BASE upward index ``feedback_texts``, the family's own fixed messages.

Steps follow one template (DESIGN.md "Steps"; Pgx's ``Env.step`` around ``_step``):
``Family.step`` clears reward and terminated, copies each row's parse error (or IGNORED) into
feedback, terminates stop rows with reward = ``is_success`` and hands only the valid, non-stop
rows to the family's ``step_rows`` as a mask. A family never sees a parse error or a stop.

Render scratch (dirty lists, blit tables, depth buffers) lives in a workspace that the BatchEnv
creates beside the state with ``new_workspace(B)`` and passes to every render call, so one
family instance can serve several BatchEnvs.
"""
from __future__ import annotations

import dataclasses
import threading
import weakref
from abc import ABC, abstractmethod
from typing import Any, ClassVar, Mapping, NamedTuple, Sequence

import numpy as np

from .grammar import STOP, ActionBatch, Grammar
from .state_hash import StateHasher

SUCCESS_MESSAGE = "Action executed successfully."
FAMILY_BASE = 16  # first feedback code a family may define


# Family.row_bytes memo, per live instance (weak keys: a dropped family drops its entry).
_ROW_BYTES: "weakref.WeakKeyDictionary[Family, int]" = weakref.WeakKeyDictionary()
_ROW_BYTES_LOCK = threading.Lock()


class Family(ABC):
    """Base class: class attributes describe the family, methods act on batched State."""

    name: ClassVar[str]
    Params: ClassVar[type]
    presets: ClassVar[Mapping[str, Any]]          # "easy"/"hard" -> Params
    grammar: ClassVar[Grammar]
    feedback_texts: ClassVar[Sequence[str]] = ()  # code FAMILY_BASE + k -> text k
    has_text_mode: ClassVar[bool] = False
    solver_strategies: ClassVar[Sequence[str]] = ()
    # Bumped whenever the family's observable behaviour (episodes, dynamics, feedback, frames,
    # prompts, solver plans) changes; results and datasets record it (Pgx's rule).
    version: ClassVar[int] = 1
    # The params field naming the family's data folder (the reference's keyword, e.g.
    # "sample_dir"), for families that read photos, clips or meshes (envs/assets/). With
    # ``visgym eval --dataset-root DIR`` the runner sets it to DIR, whose
    # ``partial_datasets/<task>`` folder of the published bundle then holds the episodes' media.
    data_dir_keyword: ClassVar[str | None] = None
    # Params fields that change how hard an episode is although the easy and hard presets give
    # them the same value (e.g. a success tolerance). Fields whose presets differ, and the step
    # budget, are difficulty knobs without being named here (docs/difficulty.md lists them all).
    difficulty_knobs: ClassVar[tuple[str, ...]] = ()

    def __init__(self, params):
        self.params = params
        self.stop_kind = self.grammar.index(STOP.name)

    # -- shapes -----------------------------------------------------------------------------
    @property
    @abstractmethod
    def frame_shape(self) -> tuple[int, int]:
        """(H, W): the frame capacity, fixed by the params (DESIGN.md "Frames"). Every episode's
        frame fits in it; ``frame_hw`` gives each episode's own size."""

    # Set for every family class from whether it overrides ``frame_hw`` (never by hand): a
    # family whose episodes have their own frame sizes; BatchEnv then tracks the sizes after
    # resets and steps and zeroes the padding.
    variable_frames: ClassVar[bool] = False

    # Set for every family class from whether it overrides ``potential``.
    has_potential: ClassVar[bool] = False

    # State fields that are render bookkeeping, not part of the episode (what the last step
    # changed, where the agent was before it, ...): left out of ``state_hash``, so equal
    # states reached along different paths hash equally.
    transient_fields: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls.variable_frames = cls.frame_hw is not Family.frame_hw
        cls.has_potential = cls.potential is not Family.potential

    def frame_hw(self, state, out: np.ndarray) -> None:
        """Write each episode's frame size (height, width) into ``out`` (int32[B, 2]); each
        entry at least 1 and at most the capacity. A size is set when the episode starts (a
        reset or a load); steps do not change it. Default: the capacity for every row."""
        out[:, 0] = self.frame_shape[0]
        out[:, 1] = self.frame_shape[1]

    def clear_padding(self, frames: np.ndarray, rows: np.ndarray, sizes: np.ndarray,
                      old: np.ndarray) -> None:
        """Zero what frame ``rows[i]`` showed inside its old size ``old[i]`` = (h, w) and
        outside its new one ``sizes[i]`` (BatchEnv calls it after a redraw; pixels outside the
        old size are zero already). A family may do it in compiled code (render/blit.py)."""
        for r, (h, w), (ho, wo) in zip(rows.tolist(), sizes.tolist(), old.tolist()):
            if ho > h:
                frames[r, h:ho, :wo] = 0
            if wo > w:
                frames[r, :min(h, ho), w:wo] = 0

    @abstractmethod
    def new_state(self, batch: int) -> NamedTuple:
        """Allocate a State for ``batch`` episodes (contents undefined until a reset)."""

    # -- episodes ---------------------------------------------------------------------------
    @abstractmethod
    def reset_rows(self, state, rows: np.ndarray, seeds: np.ndarray) -> None:
        """Generate fresh episodes into ``state[rows]``; episode k depends on seeds[k] only."""

    @abstractmethod
    def load_rows(self, state, rows: np.ndarray, init_states: Sequence[dict]) -> None:
        """Load reference init-state dicts into ``state[rows]``; ValueError names a bad field."""

    @abstractmethod
    def to_init_state(self, state, i: int) -> dict:
        """Episode i's current state as a JSON-safe dict in the reference's field names."""

    def new_workspace(self, batch: int):
        """Render scratch for ``batch`` episodes, owned by the BatchEnv (None: none needed)."""
        return None

    def row_bytes(self) -> int:
        """Bytes that one more episode adds to the State and the workspace (beyond its frame):
        what BatchEnv's memory guard counts per episode with the frame buffer, before it
        allocates anything. Default: measured, as the arrays of ``new_state(2)`` and
        ``new_workspace(2)`` less those of ``new_state(1)`` and ``new_workspace(1)`` (small
        allocations, once per family instance), so per-episode buffers such as zoom_in_puzzle's
        tiles count exactly and parts of a fixed size (a picture atlas, a shared mesh) do not; a
        workspace part capped at some number of rows counts as if it grew with every row. A
        family whose buffers this misses (allocated later, outside the State and workspace)
        overrides it."""
        # Memoized outside the instance: family instances never change after construction.
        with _ROW_BYTES_LOCK:
            cached = _ROW_BYTES.get(self)
        if cached is None:
            one = array_bytes((self.new_state(1), self.new_workspace(1)))
            two = array_bytes((self.new_state(2), self.new_workspace(2)))
            cached = max(0, two - one)
            with _ROW_BYTES_LOCK:
                _ROW_BYTES[self] = cached
        return cached

    def step(self, state, actions: ActionBatch, reward: np.ndarray, terminated: np.ndarray,
             feedback: np.ndarray) -> None:
        """The step template: apply parsed actions in place, writing reward, terminated and
        feedback codes. Parse errors and ignored rows change nothing and keep their code; a stop
        terminates with reward = is_success; the rest goes to ``step_rows``."""
        reward.fill(0.0)
        terminated.fill(False)
        np.copyto(feedback, actions.error)
        self.step_rows(state, actions, actions.move, reward, terminated, feedback)
        stop = actions.stop
        if stop.any():
            np.logical_or(terminated, stop, out=terminated)
            np.copyto(reward, self.is_success(state), where=stop)

    @abstractmethod
    def step_rows(self, state, actions: ActionBatch, rows: np.ndarray, reward: np.ndarray,
                  terminated: np.ndarray, feedback: np.ndarray) -> None:
        """The family's dynamics for the rows where ``rows`` (bool[B]) is true: valid, non-stop
        actions only. Feedback of those rows is 0 on entry (write a family code to change it);
        reward and terminated are 0 for every row on entry. Other rows must not change."""

    @abstractmethod
    def is_success(self, state) -> np.ndarray:
        """bool[B]: would a stop now be rewarded."""

    # -- measures (optional) --------------------------------------------------------------
    def potential(self, state, out: np.ndarray) -> None:
        """Optional: each episode's distance to its goal into ``out`` (float32[B]): 0 exactly
        on the states where ``is_success`` holds, positive elsewhere, larger further away (the
        solver's remaining cost where an exact solver exists, a documented proxy elsewhere;
        ``goal_distance`` makes any measure exact at 0). What shaped rewards and progress
        metrics read; ``has_potential`` says whether a family defines it."""
        raise NotImplementedError(f"{self.name} defines no potential")

    def live_counts(self, state) -> dict:
        """Padded State fields whose tail is not part of the episode, ``{field: counts}``:
        integer counts[B] keep a row's first counts[b] entries along axis 1 (a counting
        episode's ``dots`` up to ``n_dots``); boolean counts[B] keep the whole row or nothing
        (a dot that is not placed). What ``state_hash`` reads; {} by default (every byte of
        every non-transient field counts)."""
        return {}

    def state_hash(self, state, out: np.ndarray) -> np.ndarray:
        """Each episode's canonical 64-bit state hash into ``out`` (uint64[B]; see
        core/state_hash.py): equal for equal states in any batch position, process or machine.
        Built from the State fields less ``transient_fields``, trimmed by ``live_counts``
        (BatchEnv keeps a ``StateHasher`` of its State instead of calling this each step)."""
        return StateHasher(self, state)(out)

    def metrics(self, state) -> dict:
        """The family's own per-episode measures, ``{name: float[B]}`` (the reference's info
        extras such as jigsaw's ``proportion_matched``); {} by default."""
        return {}

    def goal_state(self, state):
        """Optional: the state moved to its solved configuration (in place; returned), for
        ``BatchEnv.goal_frames``. Without it the goal frames come from replaying the solver,
        as the evaluation's final-goal image does."""
        return None

    # -- pixels and text ----------------------------------------------------------------------
    @abstractmethod
    def render_rows(self, state, frames: np.ndarray, rows: np.ndarray, work) -> None:
        """Draw the full frames of ``rows`` from the state (``work``: from new_workspace): the
        pixels inside each row's ``frame_hw``; BatchEnv keeps the padding outside it zero."""

    def render_after_step(self, state, frames: np.ndarray, work) -> None:
        """Bring every frame up to date after ``step``; families redraw only what changed.
        Rows ``reset_rows`` restarted since the step need not be drawn here (``render_step``
        draws them in full afterwards)."""
        self.render_rows(state, frames, np.arange(frames.shape[0], dtype=np.int64), work)

    def render_step(self, state, frames: np.ndarray, work, restarted: np.ndarray) -> None:
        """Draw a step in which episodes auto-reset: BatchEnv calls it after ``step`` and after
        restarting those episodes (``restarted``, row indices; a step without restarts calls
        ``render_after_step`` alone). Default: the restarted rows in full, then what the step
        changed (``render_after_step``; restarted rows were not stepped, and a family that
        compares its frames with the state, as zoom_in_puzzle does, then finds them up to date
        instead of redrawing them twice). A family whose
        ``render_after_step`` already draws restarted rows in full (Fetch: a reset marks its
        rows as moved) overrides this to draw both in one pass."""
        if restarted.shape[0]:
            self.render_rows(state, frames, restarted, work)
        self.render_after_step(state, frames, work)

    def render_text(self, state, i: int) -> str:
        raise ValueError(f"{self.name} has no text rendering")

    @classmethod
    def consumer_overrides(cls, params, max_long_side: int | None) -> dict:
        """Parameter overrides under which the family draws its frames directly at the size a
        consumer that fits frames into ``max_long_side`` pixels shows them (the evaluation
        runner's and the demonstration synthesizer's images), instead of drawing them large
        to be downscaled. They change pixels only (episodes, dynamics, feedback, prompts and
        plans stay the same). {} keeps the family's own frames (the default: a family that
        draws at a fixed size, or whose frames are cheap to downscale)."""
        return {}

    @abstractmethod
    def prompt(self, state, i: int, text_mode: bool = False) -> str:
        """The task instruction for episode i (image mode, or text mode where the family has one)."""

    # -- solvers ----------------------------------------------------------------------------
    @abstractmethod
    def solve(self, state, rows: np.ndarray, strategy: str | None, num_steps: int | None,
              seeds: np.ndarray) -> list[list[str]]:
        """Action strings per row that solve the episode from its current state, ending in stop.
        ``seeds`` (uint64[B], index it with ``rows``) seed any randomness of the solver."""

    # -- helpers shared by families ---------------------------------------------------------
    @classmethod
    def make_params(cls, difficulty: str | None, overrides: Mapping[str, Any]):
        """Params from a preset plus keyword overrides; unknown keywords raise naming them."""
        base = cls.presets[difficulty] if difficulty else cls.Params()
        known = {f.name for f in dataclasses.fields(cls.Params)}
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise ValueError(
                f"{unknown[0]}: not a parameter of {cls.name} (parameters: {', '.join(sorted(known))})"
            )
        return dataclasses.replace(base, **overrides)


def goal_distance(distance, success, out: np.ndarray) -> None:
    """``out`` = ``distance`` where the episode is not a success, 0 where it is: a potential
    that is 0 exactly on success states (a distance of 0 or less off success becomes the
    smallest positive float32)."""
    np.maximum(distance, np.finfo(np.float32).tiny, out=out, casting="unsafe")
    out[np.asarray(success, np.bool_)] = 0.0


def array_bytes(value, depth: int = 6) -> int:
    """Bytes of the NumPy arrays held in ``value``: arrays, tuples (States), lists, dicts and
    plain objects' attributes, ``depth`` levels down, each buffer counted once (a view counts
    its base array; a broadcast view what it was broadcast from)."""
    seen: set = set()

    def walk(obj, level: int) -> int:
        if isinstance(obj, np.ndarray):
            base = obj
            while isinstance(base.base, np.ndarray):
                base = base.base
            if id(base) in seen:
                return 0
            seen.add(id(base))
            return int(base.nbytes) if base.base is None else int(obj.nbytes)
        if level >= depth or id(obj) in seen or isinstance(obj, (Family, type)):
            return 0
        seen.add(id(obj))
        if isinstance(obj, (tuple, list)):
            return sum(walk(v, level + 1) for v in obj)
        if isinstance(obj, dict):
            return sum(walk(v, level + 1) for v in obj.values())
        attrs = getattr(obj, "__dict__", None)
        if isinstance(attrs, dict):
            return sum(walk(v, level + 1) for v in attrs.values())
        return 0

    return walk(value, 0)


def copy_state(state):
    """A deep copy of a State NamedTuple of arrays."""
    return type(state)(*(np.array(a, copy=True) for a in state))
