"""Pixels for visgym: compiled 2-D rasterization (``raster``), glyph-atlas text (``text``) and the
other renderers that turn batched episode state into caller-owned ``uint8[B, H, W, 3]`` frames.
Submodules are imported explicitly (``from visgym.render import raster``) so that importing the
package never requires an extension that a given caller does not use.
"""
