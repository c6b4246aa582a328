"""renderer="mujoco" (MuJoCo's OpenGL renderer) against the default rasterizer: the two draw
the same scene from the same cameras, so their silhouettes must agree. Skips with the reason
when this machine cannot create an OpenGL context."""
import numpy as np
import pytest

import visgym
from visgym.envs.fetch_base import BACKGROUND_RGB


def _gl_env(env_id):
    env = visgym.make(env_id, num_envs=1, renderer="mujoco")
    try:
        env.family.gl_renderer()
    except RuntimeError as error:
        pytest.skip(f"no OpenGL context for MuJoCo's renderer here: {error}")
    return env


@pytest.mark.parametrize("env_id", ["fetch_reach/easy", "fetch_pick_and_place/easy"])
def test_mujoco_and_raster_silhouettes_agree(env_id):
    gl_env = _gl_env(env_id)
    raster = visgym.make(env_id, num_envs=1)
    for seed in (0, 1):
        frames_gl, _ = gl_env.reset(seeds=[seed])
        frames, _ = raster.reset(seeds=[seed])
        assert frames_gl.shape == frames.shape
        assert frames_gl[0].std() > 10, "the OpenGL frame is blank"
        ours = np.abs(frames[0].astype(int) - np.array(BACKGROUND_RGB)).max(-1) > 12
        fam, state = gl_env.family, gl_env.state
        theirs = fam.gl_renderer().silhouettes(state.phys[0], state.goal[0],
                                               fam.gl_cameras(state, 0))
        width = frames.shape[2] // 2
        for v in range(2):
            a, b = ours[:, v * width:(v + 1) * width], theirs[:, v * width:(v + 1) * width]
            iou = (a & b).sum() / max((a | b).sum(), 1)
            # Same geometry and cameras; the rasterizer simplifies the robot meshes (4 mm
            # clustering) and MuJoCo draws a few decorations, so edges differ by a pixel or so.
            assert iou > 0.9, f"view {v} seed {seed}: IoU {iou:.3f}"
        # The follow view is filled by the table and gripper, where a silhouette says little;
        # the pictures themselves must agree too (measured: 3-5 grey levels mean difference,
        # under 1% of pixels off by more than 60 levels, at the shading and mesh edges).
        diff = np.abs(frames_gl[0].astype(int) - frames[0].astype(int))
        for v in range(2):
            view = diff[:, v * width:(v + 1) * width]
            assert view.mean() < 10, f"view {v} seed {seed}: mean difference {view.mean():.1f}"
        assert (diff.max(-1) > 60).mean() < 0.03


def test_unknown_renderer_is_refused():
    with pytest.raises(ValueError, match="renderer"):
        visgym.make("fetch_reach/easy", renderer="opengl")
