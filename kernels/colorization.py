"""Batched kernels for colour matching on a photograph: choosing the target pixel from window
statistics, and the hue / saturation dynamics (Numba).

Nothing here knows a family by name. A target search works on an image already converted to
OpenCV's 8-bit HSV (H 0..179, S, V: render/hsv.py does the conversion), so this layer needs no
colour code. Randomness comes from kernels/rng.py's per-episode SplitMix64 stream, so an episode
depends on its seed alone.
"""
import numpy as np
from numba import njit

from .rng import below, seed_state, uniform01

GEN_STREAM = np.uint64(0xC0102)   # the stream of a colour episode's generation draws
SCORE_LIMIT = 1500.0              # windows busier than this are not preferred targets


@njit(cache=True, nogil=True)
def window_stats(hsv, x, y, k):
    """(score, brightness) of the square window of half-size k around (x, y), clipped to the
    image: score = 2 var(H) + var(S) + var(V) (population variances), brightness = mean(V).
    Sums are exact integers; each variance is (n sum(x^2) - sum(x)^2) / n^2 rounded once."""
    height, width = hsv.shape[0], hsv.shape[1]
    y0, y1 = max(y - k, 0), min(y + k + 1, height)
    x0, x1 = max(x - k, 0), min(x + k + 1, width)
    n = np.int64((y1 - y0) * (x1 - x0))
    if n <= 0:
        return 0.0, 0.0
    s0 = s1 = s2 = np.int64(0)
    q0 = q1 = q2 = np.int64(0)
    for yy in range(y0, y1):
        for xx in range(x0, x1):
            a = np.int64(hsv[yy, xx, 0])
            b = np.int64(hsv[yy, xx, 1])
            c = np.int64(hsv[yy, xx, 2])
            s0 += a
            s1 += b
            s2 += c
            q0 += a * a
            q1 += b * b
            q2 += c * c
    nn = np.float64(n * n)
    var0 = np.float64(n * q0 - s0 * s0) / nn
    var1 = np.float64(n * q1 - s1 * s1) / nn
    var2 = np.float64(n * q2 - s2 * s2) / nn
    return 2.0 * var0 + var1 + var2, np.float64(s2) / np.float64(n)


@njit(cache=True, nogil=True)
def choose_target(hsv, seed, margin, half, min_brightness, max_brightness, candidates):
    """The spec's target search on one HSV image, with the episode's own stream: ``candidates``
    points (x uniform in [margin, W - margin), then y in [margin, H - margin); a side too small
    for that range gives its centre), each scored over its window; among the brightness-valid
    ones scoring at most SCORE_LIMIT, the lowest-scoring fifth (at least one, stable order) and a
    uniform pick from it; else the lowest-scoring brightness-valid one (first on ties); else the
    image centre. Then the start hue (uniform float in [0, 360)) and saturation (uniform int in
    [0, 255]). Returns (x, y, start_hue, start_sat, fell_back_to_centre)."""
    height, width = hsv.shape[0], hsv.shape[1]
    s = seed_state(np.uint64(seed), GEN_STREAM)
    xs = np.empty(candidates, np.int64)
    ys = np.empty(candidates, np.int64)
    score = np.empty(candidates, np.float64)
    bright = np.empty(candidates, np.float64)
    for c in range(candidates):
        if width - 2 * margin > 0:
            s, d = below(s, width - 2 * margin)
            xs[c] = margin + d
        else:
            xs[c] = width // 2
        if height - 2 * margin > 0:
            s, d = below(s, height - 2 * margin)
            ys[c] = margin + d
        else:
            ys[c] = height // 2
        score[c], bright[c] = window_stats(hsv, xs[c], ys[c], half)
    valid = np.empty(candidates, np.int64)
    n_valid = 0
    best = -1
    for c in range(candidates):
        if min_brightness <= bright[c] <= max_brightness:
            if best < 0 or score[c] < score[best]:
                best = c
            if score[c] <= SCORE_LIMIT:
                valid[n_valid] = c
                n_valid += 1
    centre = False
    if n_valid > 0:
        # Stable insertion sort by score (at most ``candidates`` entries).
        for i in range(1, n_valid):
            c = valid[i]
            j = i - 1
            while j >= 0 and score[valid[j]] > score[c]:
                valid[j + 1] = valid[j]
                j -= 1
            valid[j + 1] = c
        keep = max(1, n_valid // 5)
        s, d = below(s, keep)
        x, y = xs[valid[d]], ys[valid[d]]
    elif best >= 0:
        x, y = xs[best], ys[best]
    else:
        x, y = width // 2, height // 2
        centre = True
    s, u = uniform01(s)
    start_hue = u * 360.0
    s, start_sat = below(s, 256)
    return x, y, start_hue, start_sat, centre


@njit(cache=True, nogil=True)
def apply_actions(cur_h, cur_s, kind, ints, floats, rows, rotate_kind, saturate_kind):
    """The moves of one step, in place, for rows where ``rows`` is true: rotate adds the
    payload as a float to the hue, modulo 360 (Python's modulo: the result has the divisor's
    sign); saturate adds the truncated payload to the saturation, clipped to [0, 255]."""
    for b in range(cur_h.shape[0]):
        if not rows[b]:
            continue
        if kind[b] == rotate_kind:
            cur_h[b] = (cur_h[b] + floats[b, 0]) % 360.0
        elif kind[b] == saturate_kind:
            cur_s[b] = min(max(np.int64(cur_s[b]) + np.int64(ints[b, 0]), 0), 255)


@njit(cache=True, nogil=True)
def colour_errors(cur_h, cur_s, target_h, target_s, hue_err, sat_err, dist):
    """Per episode: circular hue error in degrees, saturation error, and the colour distance
    sqrt((2 dh)^2 + ds^2) that the success test compares with the threshold."""
    for b in range(cur_h.shape[0]):
        d = abs(cur_h[b] - target_h[b])
        dh = min(d, 360.0 - d)
        ds = abs(np.float64(cur_s[b]) - np.float64(target_s[b]))
        hue_err[b] = dh
        sat_err[b] = ds
        dist[b] = np.sqrt((2.0 * dh) ** 2 + ds ** 2)
