"""Fetch frames as consumers see them (issue 15): the views are drawn directly at the size of the
evaluation runner's and the demonstration synthesizer's JPEGs, with 2x2 supersampling so that
they look like the reference's full frame downscaled; robot meshes are drawn at a level of
detail chosen by their size on screen; the rasterizer's draw lists, checked once, draw a batch
in slices. A full-size frame must not change for any of this beyond a trace.
"""
import json

import numpy as np
import pytest
from PIL import Image

import visgym
from fake_openai import FakeOpenAI
from visgym.bridges import demos
from visgym.bridges import evaluate as evaluate_module
from visgym.bridges import gif_jobs as gif_jobs_module
from visgym.bridges import stepper as stepper_module
from visgym.bridges.agents import OpenAIAgent
from visgym.bridges.evaluate import EvalConfig, run_eval
from visgym.bridges.imaging import encode_jpeg_b64
from visgym.bridges.splits import load_split
from visgym.core.registry import consumer_kwargs
from visgym.envs import fetch_base
from visgym.envs.fetch_base import FetchBase, FetchParams
from visgym.render import camera as cam
from visgym.render import raster3d, shapes3d

KEY_ENV = "VISGYM_TEST_KEY"
MOVES = ["('move', [0.6, -0.4, -0.5])", "('move', [-0.3, 0.5, 0.2])", "('gripper', 1)"]


def _frames(env_id="fetch_pick_and_place/easy", batch=4, **kwargs):
    """Frames of ``batch`` episodes after their reset and each of MOVES."""
    env = visgym.make(env_id, num_envs=batch, autoreset="disabled", max_steps=None, **kwargs)
    env.reset(seeds=range(batch))
    shots = [env.frames.copy()]
    for action in MOVES:
        env.step([action] * batch)
        assert env.state.moved.all(), action   # a valid action: the physics ran
        shots.append(env.frames.copy())
    return np.concatenate(shots)


def _lanczos(frames, size):
    return np.stack([np.asarray(Image.fromarray(f).resize(size, Image.Resampling.LANCZOS))
                     for f in frames])


def _mae(a, b):
    return float(np.abs(a.astype(np.int16) - b.astype(np.int16)).mean())


# ------------------------------------------------------------------------------ rasterizer

@pytest.mark.parametrize("factor", [2, 3])
def test_downsample_is_the_rounded_mean_of_each_block(factor):
    rng = np.random.default_rng(factor)
    samples = rng.integers(0, 256, (3, 5 * factor, 7 * factor, 3), dtype=np.uint8)
    frames = np.full((4, 5, 7, 3), 9, np.uint8)
    raster3d.downsample(samples, frames, factor)
    blocks = samples.reshape(3, 5, factor, 7, factor, 3).astype(np.int64).sum((2, 4))
    area = factor * factor
    np.testing.assert_array_equal(frames[:3], (blocks + area // 2) // area)
    assert (frames[3] == 9).all()   # frames past the samples are left alone


@pytest.mark.parametrize("simd", [True, False])
def test_downsample_by_two_eight_pixels_at_a_time_matches_the_mean(simd):
    """The SSSE3 path (eight output pixels at a time, the rest of a row one by one) writes the
    rounded means into its own columns of the frame and nothing else, at every row width."""
    rng = np.random.default_rng(4)
    for w in (1, 9, 10, 11, 17, 18, 19, 26, 168):
        samples = rng.integers(0, 256, (2, 6, 2 * w, 3), dtype=np.uint8)
        frames = np.full((2, 3, w + 7, 3), 9, np.uint8)
        raster3d.downsample(samples, frames, 2, x=4, simd=simd)
        blocks = samples.reshape(2, 3, 2, w, 2, 3).astype(np.int64).sum((2, 4))
        np.testing.assert_array_equal(frames[:, :, 4:4 + w], (blocks + 2) // 4)
        assert (frames[:, :, :4] == 9).all() and (frames[:, :, 4 + w:] == 9).all()


def test_downsample_names_a_mismatched_shape():
    with pytest.raises(ValueError, match="samples must have shape"):
        raster3d.downsample(np.zeros((2, 10, 10, 3), np.uint8), np.zeros((2, 4, 4, 3), np.uint8), 2)
    with pytest.raises(ValueError, match="factor"):
        raster3d.downsample(np.zeros((1, 4, 4, 3), np.uint8), np.zeros((1, 4, 4, 3), np.uint8), 0)


def test_a_draw_list_drawn_in_slices_equals_one_draw_meshes_call():
    v, t = shapes3d.box((0.3, 0.2, 0.25))
    rng = np.random.default_rng(0)
    colors = rng.integers(0, 256, (len(t), 3), dtype=np.uint8)
    n = 6
    eye = np.stack([np.array([1.5, 1.0, 1.2]) * (1 + 0.1 * k) for k in range(n)])
    view_proj = cam.perspective_fov_y(45.0, 1.0, 0.01, 20.0) @ cam.look_at(
        eye, np.zeros((n, 3)), (0.0, 0.0, 1.0))
    kw = dict(face_colors=colors, face_flags=raster3d.FLAG_LIT, light_dir=(0.2, 0.3, 1.0),
              ambient=0.3, diffuse=0.7)
    whole = np.zeros((n, 32, 32, 3), np.uint8)
    raster3d.draw_meshes(whole, np.zeros((n, 32, 32), np.float32), np.arange(n), v, t, 0, len(t),
                         view_proj, clear=(5, 6, 7), **kw)
    table = raster3d.MeshTable(v, t, face_colors=colors, face_flags=raster3d.FLAG_LIT)
    draws = raster3d.DrawList(table, np.arange(n), 0, len(t), view_proj, num_frames=n,
                              frame_hw=(32, 32), light_dir=(0.2, 0.3, 1.0), ambient=0.3,
                              diffuse=0.7)
    parts = np.zeros_like(whole)
    depth = np.zeros((4, 32, 32), np.float32)
    for lo, hi in ((0, 4), (4, 6)):   # rows lo..hi-1 of the batch, drawn into their own slice
        raster3d.draw_list(parts[lo:hi], depth[:hi - lo], draws[lo:hi], first_frame=lo,
                           clear=(5, 6, 7))
    np.testing.assert_array_equal(parts, whole)
    assert len(np.unique(whole.reshape(-1, 3), axis=0)) > 3   # the boxes were drawn
    # draw_list fills every frame it is given, also one that no draw reaches.
    junk = np.full((2, 32, 32, 3), 77, np.uint8)
    junk_depth = np.zeros((2, 32, 32), np.float32)
    raster3d.draw_list(junk, junk_depth, draws[:1], clear=(5, 6, 7))
    np.testing.assert_array_equal(junk[0], whole[0])
    assert (junk[1] == (5, 6, 7)).all() and np.isinf(junk_depth[1]).all()
    with pytest.raises(TypeError, match="contiguous slices"):
        draws[::2]
    with pytest.raises(ValueError, match="idx values must lie in"):
        raster3d.DrawList(table, [0, n], 0, len(t), view_proj[:2], num_frames=n,
                          frame_hw=(32, 32))


# ------------------------------------------------------------------------------ Fetch

def test_consumer_overrides_fit_the_views_into_the_jpeg():
    assert FetchBase.consumer_overrides(FetchParams(), 336) == {
        "width": 168, "height": 168, "antialias": 2}
    assert FetchBase.consumer_overrides(FetchParams(use_follow_camera=False), 336) == {
        "width": 336, "height": 336, "antialias": 2}
    # Nothing to do: no limit, a limit the frame already fits, or MuJoCo's own renderer.
    assert FetchBase.consumer_overrides(FetchParams(), None) == {}
    assert FetchBase.consumer_overrides(FetchParams(), 960) == {}
    assert FetchBase.consumer_overrides(FetchParams(renderer="mujoco"), 336) == {}
    # Through the registry: the episode's own keywords are kept, bad ones are refused.
    assert consumer_kwargs("fetch_reach/easy", {"width": 320, "height": 240}, 336) == {
        "width": 168, "height": 126, "antialias": 2}
    assert consumer_kwargs("maze_2d/easy", {"render_mode": "rgb_array"}, 336) == {
        "render_mode": "rgb_array"}
    with pytest.raises(ValueError, match="antialias"):
        visgym.make("fetch_reach/easy", antialias=5)
    with pytest.raises(ValueError, match="antialias: only used with renderer='raster'"):
        FetchParams(renderer="mujoco", antialias=2)
    with pytest.raises(ValueError, match="antialias: width and height times antialias"):
        FetchParams(width=1024, height=1024, antialias=3)


def test_consumer_frames_look_like_the_full_frame_downscaled():
    """Drawn at 168x168 a view with 2x2 samples per pixel is within a grey level of the full
    480x480 view Lanczos-downscaled (what the reference's harness shows); one sample per pixel
    is about twice as far off (stair-stepped edges)."""
    reference = _lanczos(_frames(), (336, 168))
    shown = _frames(**consumer_kwargs("fetch_pick_and_place/easy", {}, 336))
    aliased = _frames(width=168, height=168, antialias=1)
    assert shown.shape == reference.shape == (16, 168, 336, 3)
    assert _mae(shown, reference) < 1.3
    assert _mae(shown, reference) < 0.7 * _mae(aliased, reference)


def test_level_of_detail_leaves_full_size_frames_as_they_were(monkeypatch):
    lod = _frames(batch=2)
    monkeypatch.setattr(fetch_base, "LOD_PIXELS", 0.0)   # every mesh at its finest level
    finest = _frames(batch=2)
    assert _mae(lod, finest) < 0.05


def test_culling_geoms_outside_a_view_leaves_its_pictures_as_they_were(monkeypatch):
    """Geoms whose box lies beyond a side of a view are left out of its draw list (the gripper
    view sees a third of the robot's triangles only that way): the frames are the ones drawing
    every geom whose bounding sphere is near the view gives, pixel for pixel."""
    culled = _frames(batch=3, width=160, height=120)
    drawn = []
    real = raster3d.boxes_outside

    def nothing_outside(*args):
        drawn.append(real(*args).sum())
        return np.zeros(len(args[0]), bool)

    monkeypatch.setattr(raster3d, "boxes_outside", nothing_outside)
    every = _frames(batch=3, width=160, height=120)
    assert sum(drawn) > 0          # the cull did apply to some geoms
    np.testing.assert_array_equal(culled, every)


def test_small_views_draw_coarser_meshes():
    def drawn(width):
        env = visgym.make("fetch_reach/easy", num_envs=2, width=width, height=width)
        env.reset(seeds=[0, 1])
        return sum(int((draws.tri_stop - draws.tri_start).sum())
                   for draws, _ in env.family._draw_lists(env.state, np.arange(2)))

    assert drawn(168) < 0.85 * drawn(480)


# ------------------------------------------------------------------------------ consumers

@pytest.fixture
def made(monkeypatch):
    """The keywords of every env the evaluation runner makes."""
    calls = []
    real = evaluate_module.make

    def spy(env_id, *args, **kwargs):
        calls.append((env_id, {k: v for k, v in kwargs.items()
                               if k in ("width", "height", "antialias")}))
        return real(env_id, *args, **kwargs)

    # The runner's envs: its stepper's, its solver/goal envs and the GIF replays'.
    for module in (evaluate_module, stepper_module, gif_jobs_module):
        monkeypatch.setattr(module, "make", spy)
    monkeypatch.setenv(KEY_ENV, "sk-test-fetch-frames")
    return calls


def _first_images(requests) -> set:
    """The base64 JPEG of each request's first image."""
    out = set()
    for req in requests:
        user = next(m for m in req.body["messages"] if m["role"] == "user")
        url = next(p["image_url"]["url"] for p in user["content"] if p["type"] == "image_url")
        out.add(url.split(",", 1)[1])
    return out


@pytest.mark.parametrize("full_size", [False, True])
def test_eval_draws_fetch_views_at_the_jpeg_size(tmp_path, made, full_size):
    episodes = load_split("fetch_reach", "easy")[:2]
    with FakeOpenAI(policy="garbage") as server:
        agent = OpenAIAgent(model="fake", base_url=server.base_url, api_key_env=KEY_ENV,
                            timeout_s=30.0)
        run_eval(agent, EvalConfig(out=str(tmp_path / "out"), concurrency=2, max_steps=2,
                                   gifs=False, progress=False, full_size_frames=full_size),
                 episodes)
        requests = server.requests_snapshot()
    expected = {} if full_size else {"width": 168, "height": 168, "antialias": 2}
    assert made and all(kwargs == expected for env_id, kwargs in made)
    assert requests and all(set(r.image_sizes) == {(336, 168)} for r in requests)
    # The first image of an episode is the JPEG of its reset frame drawn that way.
    env = visgym.make("fetch_reach/easy", num_envs=1, autoreset="disabled", **expected)
    env.reset(seeds=[episodes[0].episode_seed % 2**64], init_states=[episodes[0].init_state])
    assert encode_jpeg_b64(env.frame(0), 336) in _first_images(requests)
    settings = json.load(open(tmp_path / "out" / "run.json"))["settings"]
    assert settings["full_size_frames"] is full_size


def test_demos_draw_fetch_views_at_the_image_size(tmp_path):
    cfg = demos.DemoConfig(task="fetch_reach", episodes=2, shard_size=2)
    demos.generate([cfg], tmp_path / "shown", workers=1, progress=False)
    full = demos.DemoConfig(task="fetch_reach", episodes=2, shard_size=2, full_size_frames=True)
    demos.generate([full], tmp_path / "full", workers=1, progress=False)
    shown = sorted((tmp_path / "shown").rglob("*.jpg"))
    assert shown and len(shown) == len(sorted((tmp_path / "full").rglob("*.jpg")))
    for path in shown:
        other = tmp_path / "full" / path.relative_to(tmp_path / "shown")
        a, b = (np.asarray(Image.open(p).convert("RGB")) for p in (path, other))
        assert a.shape == b.shape == (168, 336, 3)
        assert _mae(a, b) < 3.0      # the same scene, drawn two ways
    assert demos.dataset_key(full, "x")["full_size_frames"] is True
    assert "full_size_frames" not in demos.dataset_key(cfg, "x")   # keys made before it stay


@pytest.mark.parametrize("antialias", [1, 2])
def test_a_frame_does_not_depend_on_its_batch(antialias):
    """One episode alone (its two views drawn by two threads, each view on its own) and the
    same episode in a batch of nine (runs of four frames per thread, both views in one frame)
    give the same pixels: a view's picture does not depend on where it is placed."""
    kw = dict(width=96, height=80, antialias=antialias, autoreset="disabled", max_steps=None)
    alone = visgym.make("fetch_pick_and_place/easy", num_envs=1, **kw)
    batch = visgym.make("fetch_pick_and_place/easy", num_envs=9, **kw)
    alone.reset(seeds=[5])
    batch.reset(seeds=[1, 2, 3, 4, 5, 6, 7, 8, 9])
    for action in [None] + MOVES:
        if action is not None:
            alone.step([action])
            batch.step([action] * 9)
            assert alone.state.moved.all() and batch.state.moved.all()
        np.testing.assert_array_equal(alone.frames[0], batch.frames[4])


# ------------------------------------------------------------------------------ static parts

def _without_layers(env):
    """``env`` drawing every front view in full (no kept layers of its static parts)."""
    env.work.layer_rows = 0
    return env


@pytest.mark.parametrize("size", [dict(width=168, height=168, antialias=2), dict()])
def test_kept_front_layers_leave_the_frames_as_drawn_in_full(size, monkeypatch):
    """Front views started from the kept layer of the table, floor and robot base (drawn once an
    episode) equal views drawn in full, through steps and auto-resets; rows past the layers'
    memory budget are drawn in full in the same batch."""
    monkeypatch.setattr(fetch_base, "LAYER_BYTES", 3 * 336 * 336 * 7 if size else 3 * 480 * 480 * 7)
    kw = dict(num_envs=4, max_steps=3, **size)
    kept = visgym.make("fetch_pick_and_place/easy", **kw)
    full = _without_layers(visgym.make("fetch_pick_and_place/easy", **kw))
    assert kept.work.layer_rows == 3
    reused = []
    draw_task = kept.family._draw_task

    def spy(frames, work, r0, r1, view, draws, layer=None):
        if layer is not None:
            reused.append(int(layer[1].sum()))
        return draw_task(frames, work, r0, r1, view, draws, layer)

    kept.family._draw_task = spy
    rng = np.random.default_rng(3)
    pool = MOVES + ["('move', [0.2, 0.2, 0.1])", "('gripper', 0)", "('stop', 'stop')"]
    np.testing.assert_array_equal(kept.reset(seeds=range(4))[0], full.reset(seeds=range(4))[0])
    for _ in range(7):
        actions = [pool[k] for k in rng.integers(len(pool), size=4)]
        np.testing.assert_array_equal(kept.step(actions)[0], full.step(actions)[0])
    assert sum(reused) >= 10


def test_the_robot_base_stays_at_its_start_pose():
    """What the kept layers rely on: through moves, grasps and pushes the table and the robot's
    base stay within STATIC_TOL of their start pose, so every step reuses the front layer."""
    env = visgym.make("fetch_pick_and_place/easy", num_envs=8, autoreset="disabled",
                      max_steps=None, width=64, height=64)
    env.reset(seeds=range(8))
    fam = env.family
    names = {fam.scene.model.body(fam.scene.model.geom_bodyid[g]).name
             for g in fam.meshes.static_geoms}
    assert {"world", "table0", "robot0:base_link"} <= names
    assert not names & {"robot0:torso_lift_link", "robot0:head_pan_link", "object0"}
    rng = np.random.default_rng(4)
    for _ in range(12):
        env.step([f"('move', [{x:.2f}, {y:.2f}, {z:.2f}])" for x, y, z in rng.uniform(-1, 1, (8, 3))])
        assert fam._settled(env.state, np.arange(8)).all()


def test_a_base_pushed_off_its_start_is_drawn_where_it_is():
    """A robot base 3 cm from its start pose is drawn there, not from the start pose or the
    kept layer."""
    kw = dict(num_envs=2, width=120, height=120, autoreset="disabled", max_steps=None)
    kept = visgym.make("fetch_pick_and_place/easy", **kw)
    full = _without_layers(visgym.make("fetch_pick_and_place/easy", **kw))
    for env in (kept, full):
        env.reset(seeds=[0, 1])
        env.step(["('move', [0.2, 0.0, 0.0])"] * 2)
    before = kept.frames.copy()
    m = kept.family.scene.model
    slide = kept.family.scene.ofs_qpos + m.jnt_qposadr[m.joint("robot0:slide1").id]
    for env in (kept, full):
        env.state.phys[1, slide] += 0.03
        env.family._kinematics(env.state, np.array([1]))
        env.family.render_rows(env.state, env.frames, np.arange(2), env.work)
    assert kept.family._settled(kept.state, np.arange(2)).tolist() == [True, False]
    np.testing.assert_array_equal(kept.frames, full.frames)
    np.testing.assert_array_equal(kept.frames[0], before[0])
    assert (kept.frames[1] != before[1]).any(axis=-1).sum() > 100
