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
