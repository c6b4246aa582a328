"""fetch_reach: drive the Fetch robot's gripper to a red target with discrete moves, then stop.

Implements spec/envs/fetch_reach.md on the machinery shared with fetch_pick_and_place
(envs/fetch_base.py: the gymnasium-robotics Fetch MJCF, construction-time settling, mocap
re-anchoring with 0.05 m per unit payload and 20 substeps, goal sampling around the settled grip
position, per-episode camera jitter, the CPU and MJX steppers, the two-view rasterised frames):
the reach scene with the gripper blocked (fingers forced shut after every step), success within
0.1 m judged on stop, the reference's prompt, and a closed-loop oracle.

Deviations from the reference, on purpose (besides those of envs/fetch_base.py):
- The oracle moves every axis at once by its error (at most one unit payload per axis, the last
  moves fractional) and stops once the grip is within 2 cm of the goal (or within the success
  radius and no longer getting closer: goals below the lowest grip height), instead of the
  reference's single-axis unit moves for at least 10 steps that oscillate around the goal
  (quirk Q9): plans are a few moves long and end at the marker.
"""
from __future__ import annotations

import numpy as np

from ..core.grammar import STOP, Grammar
from ..kernels import fetch_sim as sim
from .fetch_base import MOVE_SPEC, FetchBase, FetchParams

REACH_RADIUS = 0.02   # the oracle stops this close to the goal (the marker's radius)
STALL_M = 0.005       # ... or, inside the success radius, once a move gains less than this

_REACH_PROMPT = (
    "You are controlling a robotic arm to reach a target 3D position. The left image is a front "
    "view of the robot, and the right image moving camera attached to the gripper. Your goal is "
    "to move it to the red target marker. Each action moves the end-effector by a fixed step "
    "size in the specified direction.\n\n"
    "Available actions:\n"
    "1. 'move': Move the end-effector in 3D space. Format: `('move', [x, y, z])` where each "
    "element is -1, 0, or 1:\n"
    "   - x: -1=left, 0=no change, 1=right\n"
    "   - y: -1=backward, 0=no change, 1=forward\n"
    "   - z: -1=down, 0=no change, 1=up\n"
    "2. 'stop': End the reaching session. Format: `('stop', 'stop')`\n\n"
    "Success: You succeed when the end-effector reaches the target position (red marker).\n\n"
    "Please respond with exactly one action and its arguments in the specified format. For "
    "example:\n"
    "- To move right and up: `('move', [1, 0, 1])`\n"
    "- To move forward: `('move', [0, 1, 0])`\n"
    "- To move down and left: `('move', [-1, 0, -1])`\n"
    "- To stay in place: `('move', [0, 0, 0])`\n"
    "- To stop: `('stop', 'stop')`"
)


class FetchReach(FetchBase):
    name = "fetch_reach"
    version = 5   # 5: the base and table are drawn at their start pose, before the rest of the
    # front view (4: the floor drawn last); a pixel where two parts tie can change
    Params = FetchParams
    presets = {"easy": FetchParams(), "hard": FetchParams()}
    difficulty_knobs = ("distance_threshold",)   # the presets differ in the step budget only
    grammar = Grammar([MOVE_SPEC, STOP])
    solver_strategies = ("greedy",)
    xml_name = "reach.xml"
    base_x = 0.4049
    has_object = False
    _prompt_text = _REACH_PROMPT

    def _new_oracle(self, batch):
        return np.full(batch, np.inf)   # each row's distance before its last move

    def _oracle_codes(self, state, prev, active, codes, units):
        threshold = float(self.params.distance_threshold)
        sim.proportional_reach_actions(state.grip, state.goal, min(REACH_RADIUS, threshold / 2),
                                       threshold, STALL_M, prev, active, codes, units)
