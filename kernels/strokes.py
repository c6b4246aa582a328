"""Batched stroke layout for redrawing line drawings in small dirty tiles (Numba).

A frame that shows a few thick line segments on a flat background changes, after a step, only
around the segments that moved. These kernels turn per-episode segment geometry into the flat
item arrays that ``render.raster.draw_lines`` consumes: segment endpoints in image pixels
(optionally extended along their direction, as projecting caps are), dash pieces of a dashed
segment measured along its image length from its first endpoint, the tiles (small rectangles)
that cover the pixels an old and a new segment touch, and every stroke that reaches into each
tile, translated into the tile's own coordinates. Nothing here knows a task by name.

Coordinates are snapped to multiples of 1/256 px (the sub-pixel precision of Agg, which drew the
reference). Snapped values stay exact when shifted by whole pixels, so a stroke drawn into a tile
and the same stroke drawn into the full frame produce bit-identical pixels: a frame updated tile by
tile equals a frame drawn from scratch.
"""
import math

import numpy as np
from numba import njit

SUBPIXEL = 256.0
# A pixel's centre lies within sqrt(2)/2 of every point of the pixel: beyond half the stroke
# width plus this, a stroke adds nothing to a pixel.
AA_REACH = 1.0
# Huge coordinates (possible only from extreme loaded states) are clamped before becoming ints.
COORD_LIMIT = 1.0e9


@njit(cache=True, inline="always")
def snap(v):
    return np.rint(v * SUBPIXEL) / SUBPIXEL


@njit(cache=True, nogil=True)
def segment_endpoints(scale, mid, ang, half_len, px_per_x, px_per_y, x_origin, y_origin,
                      extend_px, out):
    """Image endpoints of each episode's segment: midpoint mid * scale (canvas units), heading
    ``ang`` degrees counter-clockwise with canvas y up, half length ``half_len`` canvas units.
    Canvas (u, v) maps to image (x_origin + u * px_per_x, y_origin - v * px_per_y). Each end is
    then pushed ``extend_px`` image px outward along the segment (projecting caps).
    out[b] = (x0, y0, x1, y1), snapped."""
    for b in range(mid.shape[0]):
        theta = math.radians(ang[b])
        hx = half_len * math.cos(theta)
        hy = half_len * math.sin(theta)
        cx = mid[b, 0] * scale[b]
        cy = mid[b, 1] * scale[b]
        x0 = x_origin + (cx - hx) * px_per_x
        y0 = y_origin - (cy - hy) * px_per_y
        x1 = x_origin + (cx + hx) * px_per_x
        y1 = y_origin - (cy + hy) * px_per_y
        if extend_px != 0.0:
            length = math.hypot(x1 - x0, y1 - y0)
            if length > 0.0:
                ex = (x1 - x0) / length * extend_px
                ey = (y1 - y0) / length * extend_px
                x0 -= ex
                y0 -= ey
                x1 += ex
                y1 += ey
        out[b, 0] = snap(x0)
        out[b, 1] = snap(y0)
        out[b, 2] = snap(x1)
        out[b, 3] = snap(y1)


@njit(cache=True, nogil=True)
def dash_pieces(seg, on_px, off_px, pieces, count):
    """Split each segment into dashes: "on" runs of ``on_px`` every ``on_px + off_px`` image px,
    starting at the first endpoint, the last one cut at the far end (butt caps, offset 0, as
    matplotlib's dashes). pieces[b, j] = (x0, y0, x1, y1), count[b] = number of dashes."""
    period = on_px + off_px
    cap = pieces.shape[1]
    for b in range(seg.shape[0]):
        x0 = seg[b, 0]
        y0 = seg[b, 1]
        dx = seg[b, 2] - x0
        dy = seg[b, 3] - y0
        length = math.hypot(dx, dy)
        n = 0
        if length > 0.0 and math.isfinite(length):
            ux = dx / length
            uy = dy / length
            start = 0.0
            while start < length and n < cap:
                end = min(start + on_px, length)
                pieces[b, n, 0] = snap(x0 + ux * start)
                pieces[b, n, 1] = snap(y0 + uy * start)
                pieces[b, n, 2] = snap(x0 + ux * end)
                pieces[b, n, 3] = snap(y0 + uy * end)
                n += 1
                start += period
        count[b] = n


@njit(cache=True, inline="always")
def _clampf(v):
    return min(max(v, -COORD_LIMIT), COORD_LIMIT)


@njit(cache=True, inline="always")
def _stroke_box(x0, y0, x1, y1, width):
    """Integer pixel box [bx0, bx1) x [by0, by1) outside which the stroke adds nothing."""
    r = 0.5 * width + AA_REACH
    bx0 = int(math.floor(_clampf(min(x0, x1) - r)))
    bx1 = int(math.ceil(_clampf(max(x0, x1) + r))) + 1
    by0 = int(math.floor(_clampf(min(y0, y1) - r)))
    by1 = int(math.ceil(_clampf(max(y0, y1) + r))) + 1
    return bx0, by0, bx1, by1


@njit(cache=True, nogil=True)
def dirty_tiles(old_seg, new_seg, changed, width, clip, tile_w, tile_h, tile_frame, tile_x,
                tile_y):
    """Tiles to redraw after a step: for each episode with ``changed[b]``, the pixels its solid
    segment covered before (old_seg) and covers now (new_seg), both stroked with ``width``,
    within the clip rectangle clip = (x0, y0, x1, y1). One tile of tile_w x tile_h when both boxes
    fit in one, else one tile per box. Tiles are placed inside the clip rectangle (which must be
    at least tile-sized), so whatever is drawn into a tile is already clipped. Returns the number
    of tiles written to tile_frame / tile_x / tile_y."""
    cx0, cy0, cx1, cy1 = clip[0], clip[1], clip[2], clip[3]
    n = 0
    for b in range(old_seg.shape[0]):
        if not changed[b]:
            continue
        boxes = np.empty((2, 4), np.int64)
        nbox = 0
        for which in range(2):
            seg = old_seg if which == 0 else new_seg
            bx0, by0, bx1, by1 = _stroke_box(seg[b, 0], seg[b, 1], seg[b, 2], seg[b, 3], width)
            bx0 = max(bx0, cx0)
            by0 = max(by0, cy0)
            bx1 = min(bx1, cx1)
            by1 = min(by1, cy1)
            if bx1 > bx0 and by1 > by0:
                boxes[nbox, 0] = bx0
                boxes[nbox, 1] = by0
                boxes[nbox, 2] = bx1
                boxes[nbox, 3] = by1
                nbox += 1
        if nbox == 2:
            ux0 = min(boxes[0, 0], boxes[1, 0])
            uy0 = min(boxes[0, 1], boxes[1, 1])
            ux1 = max(boxes[0, 2], boxes[1, 2])
            uy1 = max(boxes[0, 3], boxes[1, 3])
            if ux1 - ux0 <= tile_w and uy1 - uy0 <= tile_h:
                boxes[0, 0] = ux0
                boxes[0, 1] = uy0
                boxes[0, 2] = ux1
                boxes[0, 3] = uy1
                nbox = 1
        for j in range(nbox):
            # Keep the tile inside the clip rectangle; it still covers the (clipped) box.
            tile_frame[n] = b
            tile_x[n] = min(max(boxes[j, 0], cx0), cx1 - tile_w)
            tile_y[n] = min(max(boxes[j, 1], cy0), cy1 - tile_h)
            n += 1
    return n


@njit(cache=True, inline="always")
def _emit(x0, y0, x1, y1, width, color, tx, ty, tw, th, tile, m, item_tile, item_seg,
          item_width, item_color):
    """Append one stroke to the item arrays if it reaches into the tile; returns the new count."""
    bx0, by0, bx1, by1 = _stroke_box(x0, y0, x1, y1, width)
    if bx1 <= tx or bx0 >= tx + tw or by1 <= ty or by0 >= ty + th:
        return m
    item_tile[m] = tile
    item_seg[m, 0] = x0 - tx
    item_seg[m, 1] = y0 - ty
    item_seg[m, 2] = x1 - tx
    item_seg[m, 3] = y1 - ty
    item_width[m] = width
    item_color[m, 0] = color[0]
    item_color[m, 1] = color[1]
    item_color[m, 2] = color[2]
    return m + 1


@njit(cache=True, nogil=True)
def tile_strokes(tile_frame, tile_x, tile_y, n_tiles, tile_w, tile_h, dashes, dash_count,
                 dash_width, dash_color, solid, solid_width, solid_color, overlay, overlay_width,
                 overlay_color, item_tile, item_seg, item_width, item_color):
    """Every stroke reaching into each tile, in drawing order (the episode's dashes, its solid
    segment, then the fixed overlay strokes shared by all frames), translated to the tile's
    coordinates. Tile i covers [tile_x[i], +tile_w) x [tile_y[i], +tile_h) of frame
    tile_frame[i]. Colours are uint8 RGB triples; an empty ``solid`` (0 rows) draws no solid
    segment. Returns the number of items written."""
    m = 0
    for i in range(n_tiles):
        b = tile_frame[i]
        tx = tile_x[i]
        ty = tile_y[i]
        for j in range(dash_count[b]):
            m = _emit(dashes[b, j, 0], dashes[b, j, 1], dashes[b, j, 2], dashes[b, j, 3],
                      dash_width, dash_color, tx, ty, tile_w, tile_h, i, m, item_tile, item_seg,
                      item_width, item_color)
        if solid.shape[0] > 0:
            m = _emit(solid[b, 0], solid[b, 1], solid[b, 2], solid[b, 3], solid_width,
                      solid_color, tx, ty, tile_w, tile_h, i, m, item_tile, item_seg, item_width,
                      item_color)
        for j in range(overlay.shape[0]):
            m = _emit(overlay[j, 0], overlay[j, 1], overlay[j, 2], overlay[j, 3],
                      overlay_width[j], overlay_color, tx, ty, tile_w, tile_h, i, m, item_tile,
                      item_seg, item_width, item_color)
    return m
