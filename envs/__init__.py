"""The environment families. Importing this package registers every implemented id.

One family per module, registered below by name and ``module:Class``: a family's module (its
kernels, and what they import: Numba, MuJoCo, ...) is imported only when an env of it is first
made, so ``import visgym`` stays fast. Append new families at the end.
"""
from ..core.registry import register

FAMILIES = (
    ("maze_2d", "maze_2d:Maze2D"),
    ("sliding_block", "sliding_block:SlidingBlock"),
    ("matchstick_rotation", "matchstick_rotation:MatchstickRotation"),
    ("matchstick_equation", "matchstick_equation:MatchstickEquation"),
    ("maze_3d", "maze_3d:Maze3D"),
    ("fetch_reach", "fetch_reach:FetchReach"),
    ("fetch_pick_and_place", "fetch_pick_and_place:FetchPickAndPlace"),
    ("jigsaw", "jigsaw:Jigsaw"),
    ("zoom_in_puzzle", "zoom_in_puzzle:ZoomInPuzzle"),
    ("mental_rotation_3d_cube", "mental_rotation_3d_cube:MentalRotation3DCube"),
    ("patch_reassembly", "patch_reassembly:PatchReassembly"),
    ("mental_rotation_3d_objaverse", "mental_rotation_3d_objaverse:MentalRotation3DObjaverse"),
    ("video_unshuffle", "video_unshuffle:VideoUnshuffle"),
    ("mental_rotation_2d", "mental_rotation_2d:MentalRotation2D"),
    ("colorization", "colorization:Colorization"),
    ("counting", "counting:Counting"),
    ("referring_dot_pointing", "referring_dot_pointing:ReferringDotPointing"),
)

for _name, _ref in FAMILIES:
    register(f"{__name__}.{_ref}", name=_name)
