"""The environment families. Importing this package registers every implemented id.

One family per module; each is imported and registered by two lines below (append new ones at
the end).
"""
from ..core.registry import register

from .maze_2d import Maze2D
register(Maze2D)

from .sliding_block import SlidingBlock
register(SlidingBlock)

from .matchstick_rotation import MatchstickRotation
register(MatchstickRotation)

from .matchstick_equation import MatchstickEquation
register(MatchstickEquation)

from .maze_3d import Maze3D
register(Maze3D)

from .fetch_reach import FetchReach
register(FetchReach)

from .fetch_pick_and_place import FetchPickAndPlace
register(FetchPickAndPlace)

from .jigsaw import Jigsaw
register(Jigsaw)

from .zoom_in_puzzle import ZoomInPuzzle
register(ZoomInPuzzle)

from .mental_rotation_3d_cube import MentalRotation3DCube
register(MentalRotation3DCube)

from .patch_reassembly import PatchReassembly
register(PatchReassembly)

from .mental_rotation_3d_objaverse import MentalRotation3DObjaverse
register(MentalRotation3DObjaverse)
