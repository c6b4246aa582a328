"""Checks on maze maps shared by the grid-maze family tests."""


def passages(walls) -> list:
    """Edges between odd-odd cells of a maze map (the carved passages)."""
    h, w = walls.shape
    edges = []
    for r in range(1, h - 1, 2):
        for c in range(1, w - 1, 2):
            if c + 2 < w and walls[r, c + 1] == 0:
                edges.append(((r, c), (r, c + 2)))
            if r + 2 < h and walls[r + 1, c] == 0:
                edges.append(((r, c), (r + 2, c)))
    return edges
