"""MuJoCo's own OpenGL renderer for the Fetch families (``renderer="mujoco"``).

For visual comparison with the default rasterized frames: the same two free cameras (the
jittered front view and the gripper-follow view, spec fetch_reach.md section 9) drawn by
``mujoco.Renderer``, side by side. It needs an OpenGL context (EGL or OSMesa, chosen with
``MUJOCO_GL``); without one, asking for it raises a RuntimeError that says so. The goal marker is
the model's ``target0`` site moved to the episode's goal, as the reference's render callback does.
"""
from __future__ import annotations

import numpy as np

from ..kernels import fetch_sim


class GlRenderer:
    def __init__(self, scene, width: int, height: int):
        import mujoco  # (kernels/fetch_sim chose EGL before MuJoCo was first imported headless)

        self._mujoco = mujoco
        self.model = scene.model
        self.data = mujoco.MjData(self.model)
        self.width, self.height = int(width), int(height)
        try:
            self.renderer = mujoco.Renderer(self.model, self.height, self.width)
        except Exception as error:  # no display / no EGL / no OSMesa
            raise RuntimeError(
                "renderer='mujoco' needs an OpenGL context (set MUJOCO_GL=egl or osmesa and "
                f"install the matching library): {error}") from None
        self.site = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_SITE, "target0")

    def _load(self, phys_row, goal) -> None:
        mj = self._mujoco
        mj.mj_setState(self.model, self.data, np.ascontiguousarray(phys_row, np.float64),
                       fetch_sim.STATE_SPEC)
        mj.mj_forward(self.model, self.data)
        if self.site >= 0:
            # site_pos is relative to the site's body; keep the body's offset (the reference
            # subtracts the same offset) so the marker lands on the goal.
            offset = self.data.site_xpos[self.site] - self.model.site_pos[self.site]
            self.model.site_pos[self.site] = np.asarray(goal) - offset
            mj.mj_kinematics(self.model, self.data)

    def _camera(self, azimuth, elevation, distance, lookat):
        cam = self._mujoco.MjvCamera()
        cam.type = self._mujoco.mjtCamera.mjCAMERA_FREE
        cam.azimuth, cam.elevation, cam.distance = float(azimuth), float(elevation), float(distance)
        cam.lookat[:] = np.asarray(lookat, np.float64)
        return cam

    def render(self, phys_row, goal, cameras, out) -> None:
        """Draw each camera (azimuth, elevation, distance, lookat) into its column block of
        ``out`` (H, W * len(cameras), 3)."""
        self._load(phys_row, goal)
        for v, params in enumerate(cameras):
            self.renderer.update_scene(self.data, self._camera(*params))
            out[:, v * self.width:(v + 1) * self.width] = self.renderer.render()

    def silhouettes(self, phys_row, goal, cameras) -> np.ndarray:
        """bool (H, W * len(cameras)): pixels covered by any geom (segmentation rendering)."""
        self._load(phys_row, goal)
        masks = []
        self.renderer.enable_segmentation_rendering()
        try:
            for params in cameras:
                self.renderer.update_scene(self.data, self._camera(*params))
                masks.append(self.renderer.render()[..., 0] >= 0)
        finally:
            self.renderer.disable_segmentation_rendering()
        return np.concatenate(masks, axis=1)

    def close(self) -> None:
        self.renderer.close()
