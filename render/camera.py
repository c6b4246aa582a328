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

__all__ = ["look_at", "frustum", "perspective", "perspective_fov_y", "pinhole",
           "project"]


def _vec3(value, name: str) -> np.ndarray:
    arr = np.asarray(value, dtype=np.float64) if _is_real(value) else None
    if arr is None or arr.ndim < 1 or arr.shape[-1] != 3:
        raise ValueError(f"{name}: expected real 3-vectors of shape (..., 3), got {_describe(value)}")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name}: values must be finite")
    return arr


def _scalar(value, name: str, positive: bool = True) -> np.ndarray:
    arr = np.asarray(value, dtype=np.float64) if _is_real(value) else None
    if arr is None:
        raise ValueError(f"{name}: expected a real number or array, got {_describe(value)}")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name}: values must be finite")
    if positive and (arr <= 0).any():
        raise ValueError(f"{name}: values must be > 0")
    return arr


def _is_real(value) -> bool:
    try:
        kind = np.asarray(value).dtype.kind
    except (TypeError, ValueError):
        return False
    return kind in "iuf"


def _describe(value) -> str:
    try:
        arr = np.asarray(value)
        return f"dtype {arr.dtype}, shape {arr.shape}"
    except (TypeError, ValueError):
        return type(value).__name__


def look_at(eye, target, up=(0.0, 1.0, 0.0)) -> np.ndarray:
    """World-to-camera matrix of a camera at ``eye`` looking at ``target`` with ``up`` roughly
    up. ValueError if eye == target or up is parallel to the viewing direction."""
    eye = _vec3(eye, "eye")
    target = _vec3(target, "target")
    up = _vec3(up, "up")
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
    near = _scalar(near, "near")
    far = _scalar(far, "far")
    if (far <= near).any():
        raise ValueError("far: must be greater than near")
    left, right = _scalar(left, "left", False), _scalar(right, "right", False)
    bottom, top = _scalar(bottom, "bottom", False), _scalar(top, "top", False)
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


def perspective(fov_x_deg, aspect, near, far) -> np.ndarray:
    """Symmetric perspective from the *horizontal* field of view (degrees, in (0, 180)) and the
    aspect ratio width / height; the vertical field of view follows from the aspect."""
    fov = _scalar(fov_x_deg, "fov_x_deg")
    if (fov >= 180).any():
        raise ValueError("fov_x_deg: must be < 180")
    aspect = _scalar(aspect, "aspect")
    near = _scalar(near, "near")
    half_w = near * np.tan(np.radians(fov) / 2)
    half_h = half_w / aspect
    return frustum(-half_w, half_w, -half_h, half_h, near, far)


def perspective_fov_y(fov_y_deg, aspect, near, far) -> np.ndarray:
    """Symmetric perspective from the *vertical* field of view (degrees), as MuJoCo's fovy."""
    fov = _scalar(fov_y_deg, "fov_y_deg")
    if (fov >= 180).any():
        raise ValueError("fov_y_deg: must be < 180")
    aspect = _scalar(aspect, "aspect")
    near = _scalar(near, "near")
    half_h = near * np.tan(np.radians(fov) / 2)
    half_w = half_h * aspect
    return frustum(-half_w, half_w, -half_h, half_h, near, far)


def pinhole(fx, fy, cx, cy, width, height, near, far) -> np.ndarray:
    """Projection of a pinhole camera with focal lengths (fx, fy) and principal point (cx, cy)
    in pixels of a width x height image (image y down, camera looking down -z)."""
    fx, fy = _scalar(fx, "fx"), _scalar(fy, "fy")
    cx, cy = _scalar(cx, "cx", False), _scalar(cy, "cy", False)
    width, height = _scalar(width, "width"), _scalar(height, "height")
    near = _scalar(near, "near")
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
    pts = _vec3(points, "points")
    vp = np.asarray(view_proj, dtype=np.float64) if _is_real(view_proj) else None
    if vp is None or vp.shape[-2:] != (4, 4):
        raise ValueError(f"view_proj: expected a (..., 4, 4) matrix, got {_describe(view_proj)}")
    width = _scalar(width, "width")
    height = _scalar(height, "height")
    hom = np.concatenate([pts, np.ones(pts.shape[:-1] + (1,))], axis=-1)
    clip = np.einsum("...ij,...j->...i", vp, hom)
    w = clip[..., 3]
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = np.where(w > 0, 1.0 / w, np.nan)
    x = (clip[..., 0] * inv + 1.0) * 0.5 * width
    y = (1.0 - clip[..., 1] * inv) * 0.5 * height
    return x, y, clip[..., 2] * inv
