"""The environment families. Importing this package registers every implemented id."""
from ..core.registry import register
from .maze_2d import Maze2D

FAMILIES = (Maze2D,)

for _family in FAMILIES:
    register(_family)
