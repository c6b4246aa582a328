"""mental_rotation_3d_objaverse against its specification
(spec/envs/mental_rotation_3d_objaverse.md): presets, the scrambled payload mapping, both
frames, the float16 bool quirk, success thresholds, rendering, the solver in both frames, the
GLB loader on files the test writes, and bad input (payloads, folders, files, init states)."""
import math

import numpy as np
import pytest

from rotation_checks import make_env, rx, ry, rz
from visgym.envs.assets import meshes
from visgym.kernels.rotations import euler_szyx_matrix

EASY = "mental_rotation_3d_objaverse/easy"
HARD = "mental_rotation_3d_objaverse/hard"
STRATEGIES = ("axis-angle", "by-axis", "pad1_axis-angle", "pad3_axis-angle", "pad1_by-axis",
              "pad3_by-axis", "axis-angle-random", "pad3_axis-angle-random")


def _env(env_id=EASY, n=1, **kwargs):
    return make_env(env_id, n, **kwargs)


def _load(env, rot, i=0):
    init = env.state_dicts()[i]
    m = np.eye(4)
    m[:3, :3] = rot
    init["current_rot"] = m.tolist()
    env.reset(init_states=[init])
    return init


def _rot(env, i=0):
    return np.array(env.state_dicts()[i]["current_rot"])[:3, :3]


# ----------------------------------------------------------------------------- presets
def test_presets_are_the_harness_world_frame_with_15_and_5_degrees():
    easy, hard = _env(EASY).family.params, _env(HARD).family.params
    assert (easy.action_frame, easy.tolerance, easy.render_size) == ("world", 15.0, 128)
    assert (hard.action_frame, hard.tolerance) == ("world", 5.0)
    assert easy.use_textures and easy.face_budget == 900
    env = _env(EASY)
    frames, _ = env.reset(seeds=[0])
    assert frames.shape == (1, 128, 256, 3)
    assert "world (extrinsic) axes" in env.prompt()
    obj = _env(EASY, action_frame="object")
    obj.reset(seeds=[0])
    assert "object's local (intrinsic) axes" in obj.prompt()
    assert "less than or equal to 15.0°" in env.prompt()


def test_bad_params_raise_naming_the_field():
    with pytest.raises(ValueError, match="action_frame"):
        _env(action_frame="camera")
    with pytest.raises(ValueError, match="render_size"):
        _env(render_size=0)
    with pytest.raises(ValueError, match="tolerance"):
        _env(tolerance=float("nan"))


def test_offline_default_is_procedural_and_a_function_of_the_seed():
    env = _env(n=3)
    env.reset(seeds=[5, 6, 5])
    a, b, c = env.state_dicts()
    assert a["object_path"].startswith("procedural/")
    assert a == c and a != b


# ----------------------------------------------------------------------------- dynamics
@pytest.mark.parametrize("frame", ["world", "object"])
def test_scrambled_mapping_in_both_frames(frame):
    """[a, b, c]: a about +Y, b about +X, c about -Z; world pre-multiplies, object post."""
    env = _env(action_frame=frame)
    env.reset(seeds=[1])
    start = euler_szyx_matrix(0.3, -0.7, 1.1)
    for payload, inc in (([20, 0, 0], ry(math.radians(20))), ([0, 20, 0], rx(math.radians(20))),
                         ([0, 0, 20], rz(math.radians(-20))),
                         ([10, 20, 30], rx(math.radians(20)) @ ry(math.radians(10))
                          @ rz(math.radians(-30)))):
        _load(env, start)
        env.step([f"('rotate', {payload})"])
        want = inc @ start if frame == "world" else start @ inc
        assert np.allclose(_rot(env), want, atol=1e-6), payload


def test_all_bool_payload_is_applied_in_float16():
    env = _env()
    env.reset(seeds=[1])
    _load(env, np.eye(3))
    env.step(["('rotate', [True, False, False])"])
    r = _rot(env)
    assert r[0, 2] == pytest.approx(math.sin(0.0174560546875), abs=1e-6)
    assert r[0, 0] == 1.0      # cos(1 degree) in float16
    _load(env, np.eye(3))
    env.step(["('rotate', [True, 0, 0])"])
    assert _rot(env)[0, 2] == pytest.approx(math.sin(math.radians(1.0)), abs=1e-9)


@pytest.mark.parametrize("action", [
    "('rotate', [float('nan'), 0, 0])", "('rotate', ['nan', 0, 0])", "('rotate', [1e999, 0, 0])",
    "('rotate', ['15', '0', '0'])", "('rotate', [15, 0])", "('rotate', [15, 0, 0, 0])",
    "('rotate', [180.1, 0, 0])", "('rotate', 'x')", "('rotate', None)", "('rotate', [[1], 0, 0])"])
def test_malformed_payloads_are_invalid_and_change_nothing(action):
    env = _env()
    env.reset(seeds=[2])
    before = env.state_dicts()[0]
    _, reward, terminated, _, info = env.step([action])
    assert env.state_dicts()[0] == before
    assert not terminated[0] and reward[0] == 0
    fb = info["feedback"][0]
    assert fb.startswith("Action payload ") or fb.startswith("Cannot parse"), fb


def test_range_is_inclusive():
    env = _env()
    env.reset(seeds=[2])
    _, _, _, _, info = env.step(["('rotate', [180, -180, 180])"])
    assert info["feedback"][0] == "Action executed successfully."


@pytest.mark.parametrize("env_id,tol", [(EASY, 15.0), (HARD, 5.0)])
def test_success_threshold_is_inclusive_geodesic_angle(env_id, tol):
    env = _env(env_id)
    env.reset(seeds=[3])
    axis = np.array([1.0, 2.0, -0.5]) / np.linalg.norm([1.0, 2.0, -0.5])
    for angle, want in ((tol - 0.01, 1.0), (tol + 0.01, 0.0)):
        from visgym.kernels.rotations import matrix_from_axis_angle
        _load(env, matrix_from_axis_angle(axis, math.radians(angle)))
        _, reward, terminated, _, _ = env.step(["('stop', 'stop')"])
        assert terminated[0] and reward[0] == want, angle


# ----------------------------------------------------------------------------- solver
@pytest.mark.parametrize("frame", ["world", "object"])
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_every_strategy_succeeds_from_many_seeds_in_both_frames(frame, strategy):
    n = 12
    env = _env(HARD, n=n, action_frame=frame)
    env.reset(seeds=list(range(100, 100 + n)))
    plans = env.solve(strategy=strategy, num_steps=3)
    done = np.zeros(n, bool)
    rewards = np.zeros(n)
    for t in range(max(map(len, plans))):
        actions = [p[t] if t < len(p) else None for p in plans]
        active = np.array([t < len(p) for p in plans])
        _, reward, terminated, _, _ = env.step(actions, active=active)
        rewards[terminated] = reward[terminated]
        done |= terminated
    assert done.all() and (rewards == 1.0).all(), (strategy, frame, rewards)


def test_unknown_strategy_raises():
    env = _env()
    env.reset(seeds=[0])
    with pytest.raises(ValueError, match="strategy"):
        env.solve(strategy="teleport")


# ----------------------------------------------------------------------------- pixels
def test_renders_are_never_blank_and_differ_between_rotations():
    env = _env(n=4)
    frames, _ = env.reset(seeds=[10, 11, 12, 13])
    frames = frames.copy()
    s = 128
    for k in range(4):
        left, right = frames[k, :, :s], frames[k, :, s:]
        assert (left != 255).any(axis=-1).mean() > 0.02
        assert (right != 255).any(axis=-1).mean() > 0.02
    after, *_ = env.step(["('rotate', [40, 0, 0])"] * 4)
    assert (after[:, :, :s] == frames[:, :, :s]).all()       # the target view stays
    assert all((after[k, :, s:] != frames[k, :, s:]).any() for k in range(4))


def test_identity_panels_are_identical():
    env = _env()
    env.reset(seeds=[4])
    _load(env, np.eye(3))
    frame = env.frame(0)
    assert (frame[:, :128] == frame[:, 128:]).all()


# ----------------------------------------------------------------------------- GLB folders
def _write_glbs(root):
    import trimesh

    folder = root / "glbs" / "000-000"
    folder.mkdir(parents=True)
    a = trimesh.creation.box(extents=(1.0, 2.0, 0.5))
    a.visual.face_colors = np.tile([200, 30, 30, 255], (len(a.faces), 1))
    b = trimesh.creation.cylinder(radius=0.3, height=2.0, sections=12)
    b.apply_translation((100.0, 50.0, -20.0))   # off-origin, centimetre-like
    b.visual.vertex_colors = np.tile([20, 180, 60, 255], (len(b.vertices), 1))
    scene = trimesh.Scene()
    scene.add_geometry(a, node_name="body")
    cone = trimesh.creation.cone(radius=0.4, height=1.0)
    scene.add_geometry(cone, node_name="nose",
                       transform=trimesh.transformations.translation_matrix((0, 1.5, 0)))
    (folder / "bbb.glb").write_bytes(trimesh.Scene(b).export(file_type="glb"))
    (folder / "aaa.glb").write_bytes(scene.export(file_type="glb"))
    return root / "glbs"


def test_glbs_in_the_reference_layout_load_and_render(tmp_path):
    root = _write_glbs(tmp_path)
    env = _env(n=2, sample_dir=str(root))
    assert env.family.source.files == ("000-000/aaa.glb", "000-000/bbb.glb")
    for name in env.family.source.files:
        mesh = env.family.source.load(name)
        lo, hi = mesh.vertices.min(0), mesh.vertices.max(0)
        assert np.linalg.norm(hi - lo) == pytest.approx(2.0, rel=1e-4)   # radius 1
        assert np.abs((lo + hi) / 2).max() < 0.2                            # centred
    init = {"object_path": "000-000/bbb.glb", "secret_yaw": 0.4, "secret_pitch": 0.2,
            "secret_roll": -0.1, "current_rot": np.eye(4).tolist()}
    frames, _ = env.reset(init_states=[dict(init), dict(init, object_path="000-000/aaa.glb")])
    for k in range(2):
        assert (frames[k] != 255).any(axis=-1).mean() > 0.02
    green = frames[0][(frames[0] != 255).any(axis=-1)]
    assert (green[:, 1] > green[:, 0]).mean() > 0.9
    env.reset(seeds=[1, 2])
    assert env.state_dicts()[0]["object_path"] in env.family.source.files


def test_bad_glb_names_the_file(tmp_path):
    root = _write_glbs(tmp_path)
    bad = root / "000-000" / "ccc.glb"
    bad.write_bytes(b"not a glb at all")
    env = _env(sample_dir=str(root))
    with pytest.raises(ValueError, match="ccc.glb"):
        env.reset(init_states=[{"object_path": "000-000/ccc.glb", "secret_yaw": 0.0,
                                "secret_pitch": 0.0, "secret_roll": 0.0,
                                "current_rot": np.eye(4).tolist()}])


def test_missing_or_empty_folder_names_the_path(tmp_path):
    with pytest.raises(ValueError, match=str(tmp_path / "nowhere")):
        _env(sample_dir=str(tmp_path / "nowhere"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no .glb"):
        _env(sample_dir=str(tmp_path / "empty"))


def test_env_var_names_the_folder(tmp_path, monkeypatch):
    root = _write_glbs(tmp_path)
    monkeypatch.setenv(meshes.ENV_VAR, str(root))
    env = _env()
    env.reset(seeds=[0])
    assert env.state_dicts()[0]["object_path"].endswith(".glb")


# ----------------------------------------------------------------------------- init states
@pytest.mark.parametrize("field,value,match", [
    ("current_rot", [[2, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]], "not a rotation"),
    ("current_rot", [[1, 0, 0], [0, 1, 0], [0, 0, -1]], "not a rotation"),
    ("current_rot", [[float("nan")] * 4] * 4, "current_rot"),
    ("current_rot", [[1, 0], [0, 1]], "current_rot"),
    ("current_rot", "eye", "current_rot"),
    ("secret_yaw", float("inf"), "secret_yaw"),
    ("object_path", "procedural/x", "object_path"),
    ("object_path", 7, "object_path"),
])
def test_hostile_init_states_raise_naming_the_field(field, value, match):
    env = _env()
    env.reset(seeds=[0])
    init = env.state_dicts()[0]
    before = env.state_dicts()[0]
    init[field] = value
    with pytest.raises(ValueError, match=match):
        env.reset(init_states=[init])
    assert env.state_dicts()[0] == before


def test_unknown_object_in_a_folder_is_named(tmp_path):
    env = _env(sample_dir=str(_write_glbs(tmp_path)))
    with pytest.raises(ValueError, match="object_path"):
        env.reset(init_states=[{"object_path": "000-000/zzz.glb", "secret_yaw": 0.0,
                                "secret_pitch": 0.0, "secret_roll": 0.0,
                                "current_rot": np.eye(4).tolist()}])


def test_face_budget_applies_to_dense_meshes(tmp_path):
    import trimesh

    folder = tmp_path / "glbs" / "000-002"
    folder.mkdir(parents=True)
    dense = trimesh.creation.icosphere(subdivisions=4)       # 5120 faces
    dense.apply_scale((1.0, 0.5, 0.3))
    (folder / "dense.glb").write_bytes(trimesh.Scene(dense).export(file_type="glb"))
    env = _env(sample_dir=str(tmp_path / "glbs"))
    mesh = env.family.source.load("000-002/dense.glb")
    assert 50 < mesh.triangles.shape[0] <= 901
    frames, _ = env.reset(seeds=[0])
    assert (frames[0, :, 128:] != 255).any(axis=-1).mean() > 0.02
    small = _env(sample_dir=str(tmp_path / "glbs"), downsample_faces=200)
    assert small.family.source.load("000-002/dense.glb").triangles.shape[0] <= 201


def test_a_bundle_root_names_its_objaverse_folder(tmp_path):
    root = tmp_path / "bundle"
    _write_glbs(root / "partial_datasets" / "objaverse")
    env = _env(sample_dir=str(root))
    assert env.family.source.files == ("glbs/000-000/aaa.glb", "glbs/000-000/bbb.glb")


def test_procedural_objects_are_deterministic_and_asymmetric():
    """Each cube has its own colour, so only the identity maps the coloured object onto
    itself; the chain spans all three axes and has 6-10 cubes."""
    for object_id in range(40):
        a = meshes.procedural_mesh(object_id)
        b = meshes.procedural_mesh(object_id)
        assert np.array_equal(a.vertices, b.vertices)
        n = a.triangles.shape[0] // 12
        assert 6 <= n <= 10
        cube_colors = a.face_colors[::12]
        assert len({tuple(c) for c in cube_colors}) == n
        assert (np.ptp(a.vertices, axis=0) > 0.2).all()
