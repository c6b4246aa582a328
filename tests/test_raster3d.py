"""Tests for the 3-D rasterizer (``visgym.render.raster3d``) and its camera helpers
(``visgym.render.camera``): coverage against analytic projection, depth order, culling, near-plane
and guard-band clipping, perspective-correct texturing against an analytic ray-plane
computation, Lambert light, batching, viewports, the grid ray caster against the rasterizer, and
argument checking (ValueError naming the argument).
"""
import numpy as np
import pytest

from visgym.render import camera, raster3d

W, H = 96, 64
BG = (10, 20, 30)
RED = (200, 0, 0)
GREEN = (0, 180, 0)

QUAD = np.array([[-1, -1, 0], [1, -1, 0], [1, 1, 0], [-1, 1, 0]], np.float32)
QUAD_TRIS = np.array([[0, 1, 2], [0, 2, 3]], np.int32)
QUAD_UV = np.array([[0, 1], [1, 1], [1, 0], [0, 0]], np.float32)


def buffers(b=1, h=H, w=W):
    frames = np.zeros((b, h, w, 3), np.uint8)
    depth = np.zeros((b, h, w), np.float32)
    raster3d.clear(frames, depth, np.arange(b), BG)
    return frames, depth


def view_proj(eye=(0, 0, 5), target=(0, 0, 0), fov=60.0, w=W, h=H, near=0.1, far=100.0):
    return camera.perspective(fov, w / h, near, far) @ camera.look_at(eye, target)


def painted(frames, b=0):
    return (frames[b] != BG).any(-1)


def ray_dirs(vp, w=W, h=H):
    """World-space origin and direction of the ray through each pixel centre."""
    inv = np.linalg.inv(vp)
    ys, xs = np.mgrid[0:h, 0:w]
    nx = (xs + 0.5) / w * 2 - 1
    ny = 1 - (ys + 0.5) / h * 2
    pts = []
    for z in (-1.0, 1.0):
        p = inv @ np.stack([nx, ny, np.full_like(nx, z), np.ones_like(nx)]).reshape(4, -1)
        pts.append(p[:3] / p[3])
    return pts[0], pts[1] - pts[0]


# ---------------------------------------------------------------------------------------------
# coverage, depth, culling

def test_quad_facing_the_camera_covers_the_projected_rectangle():
    vp = view_proj()
    frames, depth = buffers()
    raster3d.draw_meshes(frames, depth, [0], QUAD, QUAD_TRIS, 0, 2, vp, face_colors=RED)
    x, y, z = camera.project(QUAD, vp, W, H)
    # Pixel centres (i + 0.5) inside [min, max] are covered, nothing else.
    cols = np.arange(W) + 0.5
    rows = np.arange(H) + 0.5
    want = ((rows[:, None] > y.min()) & (rows[:, None] < y.max())
            & (cols[None, :] > x.min()) & (cols[None, :] < x.max()))
    np.testing.assert_array_equal(painted(frames), want)
    assert (frames[0][want] == RED).all()
    np.testing.assert_allclose(depth[0][want], z[0], rtol=1e-6)
    assert np.isinf(depth[0][~want]).all()


def _two_triangles():
    verts = np.array([[-1, -1, 0], [1, -1, 0], [0, 1, 0],          # near, at z = 0
                      [-2, -2, -3], [2, -2, -3], [0, 2, -3]],       # far, at z = -3
                     np.float32)
    tris = np.array([[0, 1, 2], [3, 4, 5]], np.int32)
    colors = np.array([RED, GREEN], np.uint8)
    return verts, tris, colors


@pytest.mark.parametrize("order", [[0, 1], [1, 0]])
def test_near_triangle_hides_far_one_in_any_draw_order(order):
    verts, tris, colors = _two_triangles()
    tris, colors = tris[order], colors[order]
    frames, depth = buffers()
    raster3d.draw_meshes(frames, depth, [0], verts, tris, 0, 2, view_proj(), face_colors=colors)
    x, y, _ = camera.project(verts[:3], view_proj(), W, H)
    cx, cy = int(x.mean()), int(y.mean())
    assert tuple(frames[0, cy, cx]) == RED
    assert (frames[0] == GREEN).all(-1).sum() > 0, "the far triangle shows around the near one"
    assert (frames[0] == RED).all(-1).sum() > 100


def test_back_faces_are_culled_unless_two_sided():
    frames, depth = buffers()
    back = QUAD_TRIS[:, ::-1].copy()     # clockwise seen from the camera
    raster3d.draw_meshes(frames, depth, [0], QUAD, back, 0, 2, view_proj(), face_colors=RED)
    assert not painted(frames).any()
    raster3d.draw_meshes(frames, depth, [0], QUAD, back, 0, 2, view_proj(), face_colors=RED,
                         face_flags=raster3d.FLAG_TWO_SIDED)
    assert painted(frames).sum() > 100
    # Seen from behind, the counter-clockwise quad is a back face as well.
    frames2, depth2 = buffers()
    raster3d.draw_meshes(frames2, depth2, [0], QUAD, QUAD_TRIS, 0, 2,
                         view_proj(eye=(0, 0, -5)), face_colors=RED)
    assert not painted(frames2).any()


def test_shared_edges_leave_no_gaps():
    """A fan of thin triangles around a centre covers its polygon without a single hole."""
    rng = np.random.default_rng(3)
    n = 37
    ang = np.sort(rng.uniform(0, 2 * np.pi, n))
    rad = rng.uniform(0.6, 1.0, n)
    ring = np.stack([rad * np.cos(ang), rad * np.sin(ang), np.zeros(n)], 1)
    verts = np.concatenate([[[0.05, -0.03, 0.0]], ring]).astype(np.float32)
    tris = np.array([[0, 1 + i, 1 + (i + 1) % n] for i in range(n)], np.int32)
    frames, depth = buffers(h=128, w=128)
    vp = view_proj(eye=(0.1, 0.2, 2.2), w=128, h=128)
    raster3d.draw_meshes(frames, depth, [0], verts, tris, 0, n, vp, face_colors=RED)
    mask = painted(frames)
    # Fill holes: a background pixel whose 4 neighbours are all painted would be a crack.
    inner = mask[1:-1, 1:-1]
    neighbours = mask[:-2, 1:-1] & mask[2:, 1:-1] & mask[1:-1, :-2] & mask[1:-1, 2:]
    assert not (neighbours & ~inner).any()
    assert mask.sum() > 2000


def _soup(rng, n, spread):
    """n random triangles, a third of them two-sided, some tiny, some long and thin, some edge-on
    (corners on a line through the eye), around the origin."""
    centres = rng.normal(0, spread, (n, 1, 3))
    size = np.exp(rng.uniform(np.log(0.002), np.log(1.5), (n, 1, 1)))
    corners = centres + size * rng.normal(0, 1, (n, 3, 3))
    thin = rng.random(n) < 0.2
    corners[thin, 2] = corners[thin, 0] + 1e-4 * (corners[thin, 1] - corners[thin, 0])
    edge_on = rng.random(n) < 0.05    # the three corners in a plane through the eye (0, 0, 5)
    eye = np.array([0.0, 0.0, 5.0])
    corners[edge_on, 2] = corners[edge_on, 0] + 0.7 * (eye - corners[edge_on, 0])
    verts = corners.reshape(-1, 3).astype(np.float32)
    tris = np.arange(3 * n, dtype=np.int32).reshape(n, 3)
    colors = rng.integers(0, 256, (n, 3)).astype(np.uint8)
    flags = np.where(rng.random(n) < 0.33, raster3d.FLAG_TWO_SIDED, 0) | raster3d.FLAG_LIT
    return verts, tris, colors, flags.astype(np.uint8)


@pytest.mark.parametrize("seed", range(4))
def test_shortcuts_draw_the_pictures_of_the_paths_they_shortcut(seed):
    """Small solid triangles take a path that finds each row's run four centres at a time, and
    back faces are told from one dot product per triangle before any corner is transformed:
    both must give every pixel and depth of the plain paths, for triangles of every size and
    shape, two-sided ones, edge-on ones and frames of several sizes."""
    from visgym.render import _raster3d
    rng = np.random.default_rng(seed)
    verts, tris, colors, flags = _soup(rng, 600, 0.8)
    model = np.eye(4)
    model[:3, :3] = camera.look_at((0, 0, 0), rng.normal(size=3), (0, 0, 1))[:3, :3] * 1.3
    out = []
    for fast in (True, False):
        old = _raster3d.set_fast_paths(fast)
        try:
            shots = []
            table = raster3d.MeshTable(verts, tris, face_colors=colors, face_flags=flags)
            for w, h in ((96, 64), (333, 250), (40, 700)):
                frames, depth = buffers(h=h, w=w)
                draws = raster3d.DrawList(table, [0], 0, len(tris), view_proj(w=w, h=h),
                                          num_frames=1, frame_hw=(h, w), model=model,
                                          light_dir=(0.3, 0.5, 1.0), ambient=0.3, diffuse=0.7)
                raster3d.draw_list(frames, depth, draws)
                shots.append((frames.copy(), depth.copy()))
        finally:
            _raster3d.set_fast_paths(old)
        out.append(shots)
    for (fast_f, fast_d), (plain_f, plain_d) in zip(*out):
        np.testing.assert_array_equal(fast_f, plain_f)
        np.testing.assert_array_equal(fast_d, plain_d)
        assert painted(fast_f).mean() > 0.05
    assert raster3d.MeshTable(verts, tris).planes.shape == (len(tris), 4)
    # One-use tables (draw_meshes) and tables of two-sided faces only keep no planes.
    assert raster3d.MeshTable(verts, tris, facing_planes=False).planes.shape == (0, 4)
    assert raster3d.MeshTable(verts, tris, face_flags=raster3d.FLAG_TWO_SIDED).planes.size == 0


def test_boxes_outside_the_view_are_those_no_point_of_which_reaches_it():
    """A box is reported outside exactly when every corner is beyond one clip plane; then no
    point inside it is within the view (so a draw inside it cannot reach a pixel), and a box
    straddling the view, or beyond two different planes only together, is kept."""
    rng = np.random.default_rng(11)
    n = 400
    centre = rng.normal(0, 3, (n, 3))
    half = np.exp(rng.uniform(np.log(0.01), np.log(2.0), (n, 3)))
    vp = np.broadcast_to(view_proj(eye=(0, 0, 5)), (n, 4, 4))
    model = np.broadcast_to(np.eye(4), (n, 4, 4)).copy()
    model[:, :3, 3] = rng.normal(0, 0.5, (n, 3))
    out = raster3d.boxes_outside(vp, model, centre - half, centre + half)
    assert out.dtype == bool and 50 < out.sum() < n - 50
    inside = rng.uniform(0, 1, (n, 500, 3)) * 2 * half[:, None] + (centre - half)[:, None]
    world = inside + model[:, None, :3, 3]
    clip = np.concatenate([world, np.ones((n, 500, 1))], -1) @ vp[0].T
    x, y, z, w = np.moveaxis(clip, -1, 0)
    in_view = (np.abs(x) <= w) & (np.abs(y) <= w) & (z >= -w)
    assert not in_view[out].any()                 # nothing culled could be seen
    assert in_view[~out].any(1).mean() > 0.3      # many kept boxes are in view in part
    with pytest.raises(ValueError, match="lo"):
        raster3d.boxes_outside(vp, model, centre[:5], centre + half)


@pytest.mark.parametrize("shift", [-1.5, -0.4, 0.0, 0.9, 2.5])
def test_hidden_ends_of_long_spans_are_skipped_without_changing_a_pixel(shift):
    """A floor drawn after a table top that hides part of it (its right end, its left end, its
    middle, all of it or none, by where the table sits) and a third quad drawn after both, partly
    in front: every pixel and depth is the one the plain path draws."""
    from visgym.render import _raster3d
    table = QUAD * np.float32([0.9, 0.7, 1]) + np.float32([shift, 0.1, 0.5])
    floor = QUAD * np.float32([4, 3, 1]) + np.float32([0, 0, -1.0])
    front = QUAD * np.float32([0.8, 1.5, 1]) + np.float32([-0.2 - shift / 2, 0, 1.0])
    verts = np.concatenate([table, floor, front])
    tris = np.concatenate([QUAD_TRIS, QUAD_TRIS + 4, QUAD_TRIS + 8])
    colors = np.repeat(np.array([RED, (90, 90, 90), GREEN], np.uint8), 2, 0)
    table_mesh = raster3d.MeshTable(verts, tris, face_colors=colors)
    out = []
    for fast in (True, False):
        old = _raster3d.set_fast_paths(fast)
        try:
            frames, depth = buffers(h=120, w=200)
            draws = raster3d.DrawList(table_mesh, [0, 0, 0], [0, 2, 4], [2, 4, 6],
                                      view_proj(eye=(0.3, -0.2, 4), w=200, h=120),
                                      num_frames=1, frame_hw=(120, 200))
            raster3d.draw_list(frames, depth, draws)
        finally:
            _raster3d.set_fast_paths(old)
        out.append((frames, depth))
    np.testing.assert_array_equal(out[0][0], out[1][0])
    np.testing.assert_array_equal(out[0][1], out[1][1])
    seen = {tuple(c) for c in out[0][0].reshape(-1, 3)}
    assert (90, 90, 90) in seen and GREEN in seen and (RED in seen or abs(shift) > 2)


def test_facing_planes_give_the_clip_space_facing_determinant():
    rng = np.random.default_rng(5)
    verts, tris, _, _ = _soup(rng, 50, 1.0)
    planes = raster3d.MeshTable(verts, tris).planes
    q = (rng.normal(size=(4, 4)) @ np.diag([1.0, 1.0, 1.0, 1.0]))[[0, 1, 3]]
    cam_side = np.array([(-1) ** j * np.linalg.det(np.delete(q, j, 1)) for j in range(4)])
    clip = np.c_[verts.astype(np.float64), np.ones(len(verts))] @ q.T
    np.testing.assert_allclose(planes @ cam_side, np.linalg.det(clip[tris]), rtol=1e-7,
                               atol=1e-9)


# ---------------------------------------------------------------------------------------------
# clipping

def test_triangle_crossing_the_near_plane_is_clipped():
    """A floor triangle reaching far behind the eye draws exactly the floor pixels in front of
    it: below the horizon, nothing wrapped above it, and matching the analytic floor hits."""
    vp = view_proj(eye=(0, 1, 0), target=(0, 1, -1), fov=90, near=0.1, far=100)
    verts = np.array([[-50, 0, 40], [50, 0, 40], [0, 0, -60]], np.float32)   # CCW from above
    tris = np.array([[0, 1, 2]], np.int32)
    frames, depth = buffers()
    raster3d.draw_meshes(frames, depth, [0], verts, tris, 0, 1, vp, face_colors=RED)
    mask = painted(frames)
    assert mask[H // 2:].any() and not mask[: H // 2].any(), "floor only below the horizon"
    origin, dirs = ray_dirs(vp)
    t = -origin[1] / dirs[1]
    hit = origin + t * dirs
    # Inside the (huge) triangle: its edges, in the xz-plane.
    a, b, c = verts[:, [0, 2]]

    def side(p, q, r):
        return (q[0] - p[0]) * (r[1] - p[1]) - (q[1] - p[1]) * (r[0] - p[0])
    hx, hz = hit[0], hit[2]
    pts = np.stack([hx, hz])
    s1 = side(a, b, pts)
    s2 = side(b, c, pts)
    s3 = side(c, a, pts)
    inside = (t > 0) & (((s1 >= 0) & (s2 >= 0) & (s3 >= 0)) | ((s1 <= 0) & (s2 <= 0) & (s3 <= 0)))
    np.testing.assert_array_equal(mask.reshape(-1), inside)


def test_out_of_frame_and_huge_triangles_clip_safely():
    frames, depth = buffers(b=3)
    vp = view_proj()
    verts = np.array([
        [-1e6, -1e6, 0], [1e6, -1e6, 0], [0, 1e6, 0],          # covers everything
        [50, 50, 0], [60, 50, 0], [55, 60, 0],                  # entirely off to the right
        [-1, -1, 10], [1, -1, 10], [0, 1, 10],                  # entirely behind the eye
        [-1, -1, 4.95], [1, -1, 4.95], [0, 1, 4.95],            # inside the near plane distance
    ], np.float32)
    tris = np.arange(12, dtype=np.int32).reshape(4, 3)
    raster3d.draw_meshes(frames, depth, [0, 1, 2], verts, tris, [0, 1, 2], [1, 2, 4], vp,
                         face_colors=RED)
    assert (frames[0] == RED).all()
    assert not painted(frames, 1).any()
    assert not painted(frames, 2).any()


def test_viewport_confines_drawing_and_other_frames_stay_untouched():
    frames, depth = buffers(b=2)
    before = frames.copy()
    verts = np.array([[-1e3, -1e3, 0], [1e3, -1e3, 0], [0, 1e3, 0]], np.float32)
    raster3d.draw_meshes(frames, depth, [1], verts, np.array([[0, 1, 2]], np.int32), 0, 1,
                         view_proj(), face_colors=RED, viewport=(10, 5, 30, 20))
    np.testing.assert_array_equal(frames[0], before[0])
    mask = painted(frames, 1)
    assert mask[5:25, 10:40].all() and mask.sum() == 30 * 20


# ---------------------------------------------------------------------------------------------
# texturing and light

def _index_texture(size=64):
    tex = np.zeros((size, size, 3), np.uint8)
    tex[..., 0] = np.arange(size)[None, :]
    tex[..., 1] = np.arange(size)[:, None]
    tex[..., 2] = 255
    return tex


def test_perspective_correct_texture_matches_ray_plane_intersection():
    """Each pixel of a slanted, repeated checkerboard shows the texel the pixel's ray hits
    (the texture encodes its own texel indices), except within 1e-6 texel of a texel edge."""
    size = 64
    atlas, rects = raster3d.pack_textures([_index_texture(size)])
    w, h = 160, 120
    vp = camera.perspective(70, w / h, 0.1, 100) @ camera.look_at((0.3, 2.0, 4.0), (0, 0, -3))
    x0, x1, z0, z1 = -4.0, 4.0, -12.0, 2.0
    verts = np.array([[x0, 0, z0], [x0, 0, z1], [x1, 0, z1], [x1, 0, z0]], np.float32)
    uvs = np.array([[0, 0], [0, 3], [2, 3], [2, 0]], np.float32)   # repeated 2 x 3 times
    frames, depth = buffers(h=h, w=w)
    raster3d.draw_meshes(frames, depth, [0], verts, QUAD_TRIS, 0, 2, vp, face_textures=0,
                         uvs=uvs, atlas=atlas, texture_rects=rects)
    origin, dirs = ray_dirs(vp, w, h)
    t = -origin[1] / dirs[1]
    hit = origin + t * dirs
    u = (hit[0] - x0) / (x1 - x0) * 2 * size
    v = (hit[2] - z0) / (z1 - z0) * 3 * size
    inside = (t > 0) & (u > 0) & (u < 2 * size) & (v > 0) & (v < 3 * size)
    covered = (frames[0, ..., 2] == 255).reshape(-1)
    edge = ((np.abs(u - np.round(u)) < 1e-6) | (np.abs(v - np.round(v)) < 1e-6))
    assert (inside != covered).sum() <= 2, "coverage agrees except at exact edge ties"
    sel = inside & covered & ~edge
    assert sel.sum() > 5000
    got_u = frames[0, ..., 0].reshape(-1)[sel].astype(int)
    got_v = frames[0, ..., 1].reshape(-1)[sel].astype(int)
    np.testing.assert_array_equal(got_u, np.floor(u[sel]).astype(int) % size)
    np.testing.assert_array_equal(got_v, np.floor(v[sel]).astype(int) % size)


def test_bilinear_sampling_blends_neighbouring_texels():
    tex = np.zeros((1, 2, 3), np.uint8)
    tex[0, 1] = 200
    atlas, rects = raster3d.pack_textures([tex])
    uvs = np.array([[0.25, 0], [0.75, 0], [0.75, 1], [0.25, 1]], np.float32)  # texel centres
    out = {}
    for sampling in ("nearest", "bilinear"):
        frames, depth = buffers()
        raster3d.draw_meshes(frames, depth, [0], QUAD, QUAD_TRIS, 0, 2, view_proj(fov=20),
                             face_textures=0, uvs=uvs, atlas=atlas, texture_rects=rects,
                             sampling=sampling)
        out[sampling] = frames[0, H // 2, :, 0].astype(int)
    row = out["bilinear"][out["bilinear"] > 0]
    assert np.all(np.diff(row) >= 0), "a smooth ramp from left to right"
    assert 90 <= out["bilinear"][W // 2] <= 110
    assert set(np.unique(out["nearest"])) <= {0, 200, BG[0]}


@pytest.mark.parametrize("angle_deg", [0.0, 30.0, 60.0, 120.0])
def test_lambert_light_of_a_face_at_a_known_angle(angle_deg):
    """Intensity = ambient + diffuse * max(0, cos(angle between normal and light))."""
    a = np.radians(angle_deg)
    light = (np.sin(a), 0.0, np.cos(a))      # the quad's normal is +z
    ambient, diffuse = 0.2, 0.7
    want = round(250 * (ambient + diffuse * max(0.0, np.cos(a))))
    normals = np.tile(np.array([0, 0, 1], np.float32), (4, 1))
    for kw in ({}, {"normals": normals}):
        frames, depth = buffers()
        raster3d.draw_meshes(frames, depth, [0], QUAD, QUAD_TRIS, 0, 2, view_proj(),
                             face_colors=(250, 250, 250), face_flags=raster3d.FLAG_LIT,
                             light_dir=light, ambient=ambient, diffuse=diffuse, **kw)
        values = frames[0][painted(frames)]
        assert np.abs(values.astype(int) - want).max() <= 1, (kw.keys(), want)


def test_model_matrix_places_instances_and_batches_equal_single_draws():
    sv, st, sn = raster3d.uv_sphere(0.5, 8, 16)
    rng = np.random.default_rng(0)
    b = 5
    models = np.tile(np.eye(4), (b, 1, 1))
    models[:, :3, 3] = rng.uniform(-1, 1, (b, 3))
    eyes = rng.uniform(-1, 1, (b, 3)) + [0, 0, 4]
    vps = np.stack([view_proj(eye=e) for e in eyes])
    kw = dict(face_colors=RED, face_flags=raster3d.FLAG_LIT, normals=sn, ambient=0.3,
              diffuse=0.7, light_dir=(0.2, 1.0, 0.5))
    frames, depth = buffers(b=b)
    raster3d.draw_meshes(frames, depth, np.arange(b), sv, st, 0, len(st), vps, model=models, **kw)
    for i in range(b):
        one, d1 = buffers()
        raster3d.draw_meshes(one, d1, [0], sv, st, 0, len(st), vps[i], model=models[i], **kw)
        np.testing.assert_array_equal(one[0], frames[i])
        np.testing.assert_array_equal(d1[0], depth[i])
        # The sphere's centre projects where the model matrix put it.
        x, y, _ = camera.project(models[i, :3, 3], vps[i], W, H)
        assert painted(frames, i)[int(y), int(x)]


def test_clear_option_equals_a_separate_clear():
    a, da = buffers(b=2)
    b_, db = np.zeros_like(a), np.zeros_like(da)
    a[:] = 7
    raster3d.clear(a, da, [0, 1], BG)
    raster3d.draw_meshes(a, da, [1, 0], QUAD, QUAD_TRIS, 0, 2, view_proj(), face_colors=RED)
    raster3d.draw_meshes(b_, db, [1, 0], QUAD, QUAD_TRIS, 0, 2, view_proj(), face_colors=RED,
                         clear=BG)
    np.testing.assert_array_equal(a, b_)
    np.testing.assert_array_equal(da, db)


# ---------------------------------------------------------------------------------------------
# grid ray caster

def _box_grid_mesh(grid, cell, height, eye_cell):
    """Every box face of the grid that borders an open cell, plus the floor and ceiling of the
    open cells and of the eye's cell, as draw_meshes input (the ray caster's conventions)."""
    rows, cols = grid.shape
    verts, uvs, tris, tex = [], [], [], []

    def quad(corners, corner_uvs, t):
        base = len(verts)
        verts.extend(corners)
        uvs.extend(corner_uvs)
        tris.extend([[base, base + 1, base + 2], [base, base + 2, base + 3]])
        tex.extend([t, t])
    for r in range(rows):
        for c in range(cols):
            if grid[r, c] and (r, c) != eye_cell:
                continue
            x0, x1, z0, z1 = c * cell, (c + 1) * cell, r * cell, (r + 1) * cell
            quad([[x0, 0, z0], [x0, 0, z1], [x1, 0, z1], [x1, 0, z0]],
                 [[0, 0], [0, 1], [1, 1], [1, 0]], 1)
            quad([[x0, height, z0], [x1, height, z0], [x1, height, z1], [x0, height, z1]],
                 [[0, 0], [1, 0], [1, 1], [0, 1]], 2)
            if grid[r, c]:
                continue
            for dr, dc in ((1, 0), (0, 1), (-1, 0), (0, -1)):
                if 0 <= r + dr < rows and 0 <= c + dc < cols and not grid[r + dr, c + dc]:
                    continue
                cx, cz = (c + 0.5 + 0.5 * dc) * cell, (r + 0.5 + 0.5 * dr) * cell
                rx, rz = -dr, dc       # the viewer's right when facing the box
                left = [cx - 0.5 * cell * rx, cz - 0.5 * cell * rz]
                right = [cx + 0.5 * cell * rx, cz + 0.5 * cell * rz]
                quad([[left[0], 0, left[1]], [right[0], 0, right[1]],
                      [right[0], height, right[1]], [left[0], height, left[1]]],
                     [[0, 1], [1, 1], [1, 0], [0, 0]], 0)
    return (np.array(verts, np.float32), np.array(tris, np.int32), np.array(uvs, np.float32),
            np.array(tex, np.int32))


@pytest.mark.parametrize("eye_xz,forward", [((2.5, 1.5), (0.0, 1.0)), ((1.5, 0.5), (0.0, 1.0)),
                                            ((1.3, 3.7), (0.6, -0.8))])
def test_grid_ray_caster_draws_what_the_rasterizer_draws(eye_xz, forward):
    """Open cells, an eye inside a box looking out of it (its box is not drawn), an oblique
    view: the same pixels up to rounding at texel boundaries, and the same depth."""
    grid = np.array([[1, 1, 1, 1, 1, 1],
                     [1, 0, 0, 0, 1, 1],
                     [1, 0, 1, 0, 0, 1],
                     [1, 0, 1, 1, 0, 1],
                     [1, 0, 0, 0, 0, 1],
                     [1, 1, 1, 1, 1, 1]], np.uint8)
    cell, height = 2.0, 2.0
    rng = np.random.default_rng(1)
    atlas, rects = raster3d.pack_textures(
        [rng.integers(0, 255, (32, 32, 3), dtype=np.uint8) for _ in range(3)])
    w, h = 160, 90
    eye = np.array([eye_xz[0] * cell, 1.0, eye_xz[1] * cell])
    proj = camera.perspective(60, w / h, 0.05, 100)
    vp = proj @ camera.look_at(eye, eye + [forward[0], 0, forward[1]])
    eye_cell = (int(eye_xz[1]), int(eye_xz[0]))
    verts, tris, uvs, tex = _box_grid_mesh(grid, cell, height, eye_cell)
    a, da = buffers(h=h, w=w)
    raster3d.draw_meshes(a, da, [0], verts, tris, 0, len(tris), vp, face_textures=tex,
                         uvs=uvs, atlas=atlas, texture_rects=rects)
    b_, db = buffers(h=h, w=w)
    raster3d.raycast_grid(b_, db, [0], grid[None], [0], eye, forward, proj, origin=(0, 0),
                          cell=cell, height=height, atlas=atlas, texture_rects=rects,
                          textures=(0, 1, 2), background=BG)
    same = (a == b_).all(-1)
    assert same.mean() > 0.99, same.mean()
    np.testing.assert_allclose(da, db, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------------------------
# camera helpers and meshes

def test_camera_helpers():
    view = camera.look_at((1, 2, 3), (1, 2, -7))
    np.testing.assert_allclose(view @ [1, 2, 3, 1], [0, 0, 0, 1], atol=1e-12)
    np.testing.assert_allclose(view @ [1, 2, -7, 1], [0, 0, -10, 1], atol=1e-12)
    proj = camera.perspective(90, 2.0, 1.0, 10.0)
    # The horizontal fov edge at depth 1 maps to NDC x = 1; the near and far planes to z = -1, 1.
    clip = proj @ [1.0, 0.0, -1.0, 1.0]
    assert clip[0] / clip[3] == pytest.approx(1.0)
    clip = proj @ [0.0, 0.5, -1.0, 1.0]
    assert clip[1] / clip[3] == pytest.approx(1.0)
    clip = proj @ [0.0, 0.0, -10.0, 1.0]
    assert clip[2] / clip[3] == pytest.approx(1.0)
    fovy = camera.perspective_fov_y(45, 1.0, 0.1, 10)
    np.testing.assert_allclose(fovy, camera.perspective(45, 1.0, 0.1, 10))
    pin = camera.pinhole(100, 100, 50, 40, 100, 80, 0.1, 10)
    x, y, _ = camera.project([0.2, -0.1, -1.0], pin @ np.eye(4), 100, 80)
    assert x == pytest.approx(50 + 100 * 0.2) and y == pytest.approx(40 + 100 * 0.1)
    batch = camera.look_at(np.zeros((4, 3)) + [0, 0, 5], np.zeros(3))
    assert batch.shape == (4, 4, 4)


def test_uv_sphere_is_closed_and_outward():
    verts, tris, normals = raster3d.uv_sphere(2.0, 6, 10)
    np.testing.assert_allclose(np.linalg.norm(verts, axis=1), 2.0, rtol=1e-6)
    a, b, c = verts[tris[:, 0]], verts[tris[:, 1]], verts[tris[:, 2]]
    assert (np.einsum("ij,ij->i", np.cross(b - a, c - a), a + b + c) > 0).all()
    edges = np.sort(np.concatenate([tris[:, [0, 1]], tris[:, [1, 2]], tris[:, [2, 0]]]), axis=1)
    _, counts = np.unique(edges, axis=0, return_counts=True)
    assert (counts == 2).all(), "every edge is shared by exactly two triangles"


# ---------------------------------------------------------------------------------------------
# argument checks

def test_bad_arguments_raise_value_error_naming_them():
    frames, depth = buffers()
    vp = view_proj()
    good = dict(frames=frames, depth=depth, idx=[0], vertices=QUAD, triangles=QUAD_TRIS,
                tri_start=0, tri_stop=2, view_proj=vp)

    def call(**kw):
        args = dict(good, **kw)
        raster3d.draw_meshes(args.pop("frames"), args.pop("depth"), args.pop("idx"),
                             args.pop("vertices"), args.pop("triangles"), args.pop("tri_start"),
                             args.pop("tri_stop"), args.pop("view_proj"), **args)
    cases = [
        (dict(frames=frames.astype(np.float32)), "frames"),
        (dict(depth=depth[:, :-1]), "depth"),
        (dict(depth=depth.astype(np.float64)), "depth"),
        (dict(idx=[1]), "idx"),
        (dict(vertices=QUAD.astype(np.float64)), "vertices"),
        (dict(vertices=QUAD[:, :2].copy()), "vertices"),
        (dict(triangles=QUAD_TRIS + 4), "triangles"),
        (dict(triangles=QUAD_TRIS.astype(np.int64)), "triangles"),
        (dict(tri_stop=3), "tri_stop"),
        (dict(view_proj=np.eye(3)), "view_proj"),
        (dict(view_proj=np.full((4, 4), np.nan)), "view_proj"),
        (dict(model=np.zeros((2, 4, 4))), "model"),
        (dict(face_colors=[1, 2]), "face_colors"),
        (dict(face_flags=8), "face_flags"),
        (dict(face_textures=0), "face_textures"),
        (dict(face_textures=1, uvs=QUAD_UV, atlas=np.zeros((4, 4, 3), np.uint8),
              texture_rects=[[0, 0, 4, 4]]), "face_textures"),
        (dict(face_textures=0, uvs=QUAD_UV, atlas=np.zeros((4, 4, 3), np.uint8),
              texture_rects=[[0, 0, 5, 4]]), "texture_rects"),
        (dict(face_textures=0, uvs=QUAD_UV[:3].copy(), atlas=np.zeros((4, 4, 3), np.uint8),
              texture_rects=[[0, 0, 4, 4]]), "uvs"),
        (dict(normals=np.zeros((3, 3), np.float32)), "normals"),
        (dict(light_dir=(1, 0)), "light_dir"),
        (dict(ambient=[0.1, 0.2]), "ambient"),
        (dict(viewport=(0, 0, 0, 10)), "viewport"),
        (dict(sampling="cubic"), "sampling"),
        (dict(clear=(1, 2)), "clear"),
    ]
    for kw, name in cases:
        with pytest.raises(ValueError, match=name):
            call(**kw)
    with pytest.raises(ValueError, match="target"):
        camera.look_at((0, 0, 0), (0, 0, 0))
    with pytest.raises(ValueError, match="up"):
        camera.look_at((0, 0, 0), (0, 1, 0))
    with pytest.raises(ValueError, match="fov_x_deg"):
        camera.perspective(180, 1.0, 0.1, 10)
    with pytest.raises(ValueError, match="far"):
        camera.perspective(60, 1.0, 1.0, 0.5)
    for call, match in [(lambda: camera.look_at((0, 0), (0, 0, 1)), r"eye: expected shape"),
                        (lambda: camera.look_at((0, 0, "x"), (0, 0, 1)), "eye: expected real"),
                        (lambda: camera.look_at((0, 0, 0), [[0, 0], [1]]), "target: expected"),
                        (lambda: camera.perspective_fov_y(True, 1.0, .1, 9), "fov_y_deg"),
                        (lambda: camera.pinhole(1, 1, 0, 0, 10, np.inf, .1, 9), "height: expected"),
                        (lambda: camera.project((0, 0, 0), np.eye(3), 4, 4), "view_proj")]:
        with pytest.raises(ValueError, match=match):
            call()
    with pytest.raises(ValueError, match="n_lat"):
        raster3d.uv_sphere(1.0, 1, 8)
    with pytest.raises(ValueError, match="textures"):
        raster3d.pack_textures([np.zeros((2, 2), np.uint8)])
    grid = np.zeros((1, 3, 3), np.uint8)
    atlas, rects = raster3d.pack_textures([np.zeros((2, 2, 3), np.uint8)] * 3)
    for kw, name in [(dict(forward=(0, 0)), "forward"), (dict(grid_ids=[1]), "grid_ids"),
                     (dict(projection=vp), "projection")]:
        args = dict(eye=(1, 0.5, 1), forward=(0, 1), projection=camera.perspective(60, 1.5, .1, 9),
                    grid_ids=[0])
        args.update(kw)
        with pytest.raises(ValueError, match=name):
            raster3d.raycast_grid(frames, depth, [0], grid, args.pop("grid_ids"), args["eye"],
                                  args["forward"], args["projection"], atlas=atlas,
                                  texture_rects=rects)
