"""Benchmarks: ``python -m visgym.bench step --env maze_2d/easy --batch 1,16,256,1024``."""
