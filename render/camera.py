"""Camera matrices for the 3-D rasterizer (``raster3d``): view matrices (``look_at``), perspective
projections (from a horizontal or vertical field of view, or from pinhole intrinsics) and point
projection to pixels, in the OpenGL conventions the rasterizer expects.

Conventions: right-handed world; the camera looks down its -z axis with +y up and +x to the right
of the image; clip space is OpenGL's (visible where -w <= x, y, z <= w), so NDC z runs from -1 at
the near plane to +1 at the far plane and is what the depth buffer stores. Pixel (x, y) covers
[x, x+1) x [y, y+1) with y growing downwards; NDC (-1, +1) is the top-left corner of the viewport.
Every function accepts batches: leading axes of the inputs broadcast, and the matrices come back
as float64 arrays of shape (..., 4, 4), ready to be stacked per scene for ``draw_meshes``.
"""
from __future__ import annotations

import numpy as np

from ..core.validate import real_array

__all__ = ["look_at", "frustum", "perspective", "perspective_fov_y", "pinhole",
           "project", "free_camera"]


def look_at(eye, target, up=(0.0, 1.0, 0.0)) -> np.ndarray:
    """World-to-camera matrix of a camera at ``eye`` looking at ``target`` with ``up`` roughly
    up. ValueError if eye == target or up is parallel to the viewing direction."""
    eye = real_array("eye", eye, (3,))
    target = real_array("target", target, (3,))
    up = real_array("up", up, (3,))
    eye, target, up = np.broadcast_arrays(eye, target, up)
    forward = target - eye
    norm = np.linalg.norm(forward, axis=-1, keepdims=True)
    if (norm == 0).any():
        raise ValueError("target: must differ from eye")
    forward = forward / norm
    right = np.cross(forward, up)
    rnorm = np.linalg.norm(right, axis=-1, keepdims=True)
    if (rnorm <= 1e-12 * np.linalg.norm(up, axis=-1, keepdims=True)).any():
        raise ValueError("up: must not be parallel to the viewing direction (target - eye)")
    right = right / rnorm
    true_up = np.cross(right, forward)
    out = np.zeros(eye.shape[:-1] + (4, 4))
    out[..., 0, :3] = right
    out[..., 1, :3] = true_up
    out[..., 2, :3] = -forward
    out[..., 0, 3] = -(right * eye).sum(-1)
    out[..., 1, 3] = -(true_up * eye).sum(-1)
    out[..., 2, 3] = (forward * eye).sum(-1)
    out[..., 3, 3] = 1.0
    return out


def frustum(left, right, bottom, top, near, far) -> np.ndarray:
    """OpenGL's glFrustum: the near-plane rectangle [left, right] x [bottom, top] (camera
    units at distance ``near``) maps to the viewport."""
    near = real_array("near", near, positive=True)
    far = real_array("far", far, positive=True)
    if (far <= near).any():
        raise ValueError("far: must be greater than near")
    left, right = real_array("left", left), real_array("right", right)
    bottom, top = real_array("bottom", bottom), real_array("top", top)
    if (right <= left).any():
        raise ValueError("right: must be greater than left")
    if (top <= bottom).any():
        raise ValueError("top: must be greater than bottom")
    left, right, bottom, top, near, far = np.broadcast_arrays(left, right, bottom, top, near, far)
    out = np.zeros(near.shape + (4, 4))
    out[..., 0, 0] = 2 * near / (right - left)
    out[..., 0, 2] = (right + left) / (right - left)
    out[..., 1, 1] = 2 * near / (top - bottom)
    out[..., 1, 2] = (top + bottom) / (top - bottom)
    out[..., 2, 2] = -(far + near) / (far - near)
    out[..., 2, 3] = -2 * far * near / (far - near)
    out[..., 3, 2] = -1.0
    return out


def _symmetric(field: str, fov_deg, aspect, near, far, horizontal: bool) -> np.ndarray:
    """Symmetric perspective from a field of view (degrees, in (0, 180)) across the image
    (``horizontal``) or down it, and the aspect ratio width / height."""
    fov = real_array(field, fov_deg, positive=True)
    if (fov >= 180).any():
        raise ValueError(f"{field}: must be < 180")
    aspect = real_array("aspect", aspect, positive=True)
    near = real_array("near", near, positive=True)
    half = near * np.tan(np.radians(fov) / 2)
    half_w, half_h = (half, half / aspect) if horizontal else (half * aspect, half)
    return frustum(-half_w, half_w, -half_h, half_h, near, far)


def perspective(fov_x_deg, aspect, near, far) -> np.ndarray:
    """Symmetric perspective from the *horizontal* field of view (degrees, in (0, 180)) and the
    aspect ratio width / height; the vertical field of view follows from the aspect."""
    return _symmetric("fov_x_deg", fov_x_deg, aspect, near, far, True)


def perspective_fov_y(fov_y_deg, aspect, near, far) -> np.ndarray:
    """Symmetric perspective from the *vertical* field of view (degrees), as MuJoCo's fovy."""
    return _symmetric("fov_y_deg", fov_y_deg, aspect, near, far, False)


def pinhole(fx, fy, cx, cy, width, height, near, far) -> np.ndarray:
    """Projection of a pinhole camera with focal lengths (fx, fy) and principal point (cx, cy)
    in pixels of a width x height image (image y down, camera looking down -z)."""
    fx, fy = real_array("fx", fx, positive=True), real_array("fy", fy, positive=True)
    cx, cy = real_array("cx", cx), real_array("cy", cy)
    width = real_array("width", width, positive=True)
    height = real_array("height", height, positive=True)
    near = real_array("near", near, positive=True)
    # Pixel x = cx + fx * X / -Z; the near-plane rectangle follows.
    left = -cx * near / fx
    right = (width - cx) * near / fx
    top = cy * near / fy
    bottom = -(height - cy) * near / fy
    return frustum(left, right, bottom, top, near, far)


def project(points, view_proj, width, height):
    """Pixel coordinates (x right, y down, continuous) and NDC depth of world ``points``
    (..., 3) under ``view_proj`` (4, 4) for a width x height viewport. Points behind the camera
    (w <= 0) come back as NaN."""
    pts = real_array("points", points, (3,))
    vp = real_array("view_proj", view_proj, (4, 4), finite=False)
    width = real_array("width", width, positive=True)
    height = real_array("height", height, positive=True)
    hom = np.concatenate([pts, np.ones(pts.shape[:-1] + (1,))], axis=-1)
    clip = np.einsum("...ij,...j->...i", vp, hom)
    w = clip[..., 3]
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = np.where(w > 0, 1.0 / w, np.nan)
    x = (clip[..., 0] * inv + 1.0) * 0.5 * width
    y = (1.0 - clip[..., 1] * inv) * 0.5 * height
    return x, y, clip[..., 2] * inv


def free_camera(azimuth, elevation, distance, lookat):
    """An orbit camera in MuJoCo's free-camera convention, as (eye, forward) arrays: it looks at
    ``lookat`` (..., 3) from ``distance`` away, ``azimuth`` degrees around +z from +x and
    ``elevation`` degrees above the horizontal (negative looks down), with world +z up:
    forward = (cos el cos az, cos el sin az, sin el), eye = lookat - distance * forward.
    Arguments broadcast over leading axes; ``look_at(eye, eye + forward, (0, 0, 1))`` gives
    the view matrix."""
    az = np.radians(real_array("azimuth", azimuth))
    el = np.radians(real_array("elevation", elevation))
    distance = real_array("distance", distance, positive=True)
    lookat = real_array("lookat", lookat, (3,))
    forward = np.stack([np.cos(el) * np.cos(az), np.cos(el) * np.sin(az), np.sin(el)], -1)
    eye = lookat - distance[..., None] * forward
    return eye, forward
