"""envs/assets/meshes.py reads a glTF file's JSON before trimesh reads the file: a file that
declares more faces than MAX_FACES, or whose buffer or image URIs leave its folder, is refused
naming the file, without its body being read. Every file here is written by the test."""
import json
import struct

import numpy as np
import pytest

from visgym.envs.assets import meshes

# One triangle: three float32 vertices.
TRIANGLE = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0]], np.float32).tobytes()


def _tree(uri=None, count=3, indices=None, nodes=1, mode=None):
    """A glTF JSON of one mesh with one primitive (POSITION accessor 0, ``count`` vertices;
    with ``indices``, accessor 1 of that many indices), instanced by ``nodes`` nodes."""
    buffer = {"byteLength": len(TRIANGLE)}
    if uri is not None:
        buffer["uri"] = uri
    accessors = [{"bufferView": 0, "componentType": 5126, "count": count, "type": "VEC3",
                  "min": [0, 0, 0], "max": [1, 1, 0]}]
    prim = {"attributes": {"POSITION": 0}}
    if indices is not None:
        accessors.append({"bufferView": 0, "componentType": 5125, "count": indices,
                          "type": "SCALAR"})
        prim["indices"] = 1
    if mode is not None:
        prim["mode"] = mode
    return {"asset": {"version": "2.0"}, "scene": 0,
            "scenes": [{"nodes": list(range(nodes))}],
            "nodes": [{"mesh": 0} for _ in range(nodes)],
            "meshes": [{"primitives": [prim]}], "accessors": accessors,
            "bufferViews": [{"buffer": 0, "byteLength": len(TRIANGLE)}], "buffers": [buffer]}


def _glb(tree, body=TRIANGLE, body_length=None) -> bytes:
    """A GLB: 12-byte header, JSON chunk, BIN chunk (whose declared length may exceed the
    bytes that follow it)."""
    text = json.dumps(tree).encode()
    text += b" " * (-len(text) % 4)
    length = len(body) if body_length is None else body_length
    chunks = (struct.pack("<II", len(text), 0x4E4F534A) + text
              + struct.pack("<II", length, 0x004E4942) + body)
    return b"glTF" + struct.pack("<II", 2, 12 + len(chunks)) + chunks


@pytest.fixture
def no_trimesh(monkeypatch):
    """trimesh.load fails the test if called: the refusals come from the JSON alone."""
    import trimesh

    def load(*args, **kwargs):
        raise AssertionError("trimesh.load was called")

    monkeypatch.setattr(trimesh, "load", load)


# ----------------------------------------------------------------------------- face cap
def test_a_glb_declaring_a_billion_faces_is_refused_without_reading_its_body(tmp_path,
                                                                             no_trimesh):
    """The JSON declares 3e9 indices (1e9 faces) and a 4 GiB BIN chunk, of which the file holds
    36 bytes: the loader refuses from the JSON, naming the file and the count."""
    path = tmp_path / "huge.glb"
    path.write_bytes(_glb(_tree(indices=3_000_000_000), body_length=2**32 - 4))
    with pytest.raises(meshes.MeshFileError,
                       match=r"huge\.glb: the mesh file declares 1000000000 faces, more than "
                             r"the 1000000 loaded at most"):
        meshes.load_glb(path)


def test_non_indexed_strips_and_instances_count(tmp_path, no_trimesh):
    assert meshes.gltf_counts(tmp_path, _tree(count=3)) == (1, 3)
    assert meshes.gltf_counts(tmp_path, _tree(count=3, nodes=4)) == (4, 12)
    assert meshes.gltf_counts(tmp_path, _tree(count=3, indices=30)) == (10, 3)
    assert meshes.gltf_counts(tmp_path, _tree(count=3, indices=30, mode=5)) == (28, 3)
    assert meshes.gltf_counts(tmp_path, _tree(count=3, mode=0)) == (0, 3)   # points
    path = tmp_path / "flat.glb"          # non-indexed: the POSITION count / 3
    path.write_bytes(_glb(_tree(count=3 * (meshes.MAX_FACES + 1))))
    with pytest.raises(meshes.MeshFileError, match=r"flat\.glb: .* 1000001 faces"):
        meshes.load_glb(path)
    path = tmp_path / "copies.glb"        # one small mesh instanced by many nodes
    path.write_bytes(_glb(_tree(count=3, indices=3000, nodes=1001)))
    with pytest.raises(meshes.MeshFileError, match=r"copies\.glb: .* 1001000 faces"):
        meshes.load_glb(path)


@pytest.mark.parametrize("tree, message", [
    ({**_tree(), "accessors": []}, "accessor 0"),
    ({**_tree(), "accessors": [{"count": -1}]}, "accessor 0 has no valid count"),
    ({**_tree(), "accessors": [{"count": "3"}]}, "accessor 0 has no valid count"),
])
def test_malformed_accessors_name_the_file(tmp_path, no_trimesh, tree, message):
    path = tmp_path / "bad.glb"
    path.write_bytes(_glb(tree))
    with pytest.raises(meshes.MeshFileError, match=rf"bad\.glb: .*{message}"):
        meshes.load_glb(path)


def test_a_huge_json_chunk_is_refused_unread(tmp_path, no_trimesh):
    path = tmp_path / "json.glb"
    path.write_bytes(b"glTF" + struct.pack("<IIII", 2, 28, 2**31, 0x4E4F534A) + b"{}  ")
    with pytest.raises(meshes.MeshFileError, match=r"json\.glb: the GLB's JSON chunk declares"):
        meshes.load_glb(path)


def test_files_under_the_cap_load_and_a_lower_cap_refuses_them(tmp_path):
    import trimesh

    path = tmp_path / "box.glb"
    path.write_bytes(trimesh.Scene(trimesh.creation.box()).export(file_type="glb"))
    assert meshes.gltf_counts(path) == (12, 8)
    assert meshes.load_glb(path).triangles.shape == (12, 3)
    with pytest.raises(meshes.MeshFileError, match=r"box\.glb: .* 12 faces, more than the 11"):
        meshes.load_glb(path, max_faces=11)
    own = tmp_path / "own.glb"          # the test's own GLB loads too
    own.write_bytes(_glb(_tree()))
    assert meshes.load_glb(own).triangles.shape == (1, 3)


def test_the_env_names_the_refused_file(tmp_path, no_trimesh):
    from rotation_checks import make_env

    folder = tmp_path / "glbs" / "000-000"
    folder.mkdir(parents=True)
    (folder / "big.glb").write_bytes(_glb(_tree(indices=3 * 10**8), body_length=2**31))
    env = make_env("mental_rotation_3d_objaverse/easy", 1, sample_dir=str(tmp_path / "glbs"))
    with pytest.raises(ValueError, match=r"big\.glb: the mesh file declares 100000000 faces"):
        env.reset(init_states=[{"object_path": "000-000/big.glb", "secret_yaw": 0.0,
                                "secret_pitch": 0.0, "secret_roll": 0.0,
                                "current_rot": np.eye(3).tolist()}])


# ----------------------------------------------------------------------------- URIs
@pytest.fixture
def trimesh_4_resolver(monkeypatch):
    """trimesh as 4.x resolved assets: anywhere (5.x refuses paths outside the folder), so the
    refusal below must be the loader's own."""
    from trimesh import resolvers

    init = resolvers.FilePathResolver.__init__
    monkeypatch.setattr(resolvers.FilePathResolver, "__init__",
                        lambda self, source, allow_anywhere=True: init(self, source, True))


@pytest.mark.parametrize("kind", ["parent", "absolute", "file", "quoted", "image"])
def test_gltf_uris_outside_the_folder_are_refused_naming_the_file(tmp_path,
                                                                  trimesh_4_resolver, kind):
    outside = tmp_path / "outside.bin"
    outside.write_bytes(TRIANGLE)
    folder = tmp_path / "glbs"
    folder.mkdir()
    uri = {"parent": "../outside.bin", "absolute": str(outside), "file": outside.as_uri(),
           "quoted": "%2E%2E/outside.bin", "image": "inside.bin"}[kind]
    (folder / "inside.bin").write_bytes(TRIANGLE)
    tree = _tree(uri=uri)
    if kind == "image":
        tree["images"] = [{"uri": "sub/../../outside.png"}]
    path = folder / "model.gltf"
    path.write_text(json.dumps(tree))
    with pytest.raises(meshes.MeshFileError,
                       match=r"model\.gltf: (buffers|images)\[0\]\.uri .* points outside the "
                             r"file's folder"):
        meshes.load_glb(path)
    # The same URI inside a GLB's JSON is refused too.
    glb = folder / "model.glb"
    glb.write_bytes(_glb(tree, body=b""))
    with pytest.raises(meshes.MeshFileError, match=r"model\.glb: .* points outside"):
        meshes.load_glb(glb)


def test_gltf_uris_inside_the_folder_and_data_uris_load(tmp_path):
    import base64

    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "tri.bin").write_bytes(TRIANGLE)
    for uri in ("sub/tri.bin", "./sub/../sub/tri.bin",
                "data:application/octet-stream;base64," + base64.b64encode(TRIANGLE).decode()):
        path = tmp_path / "model.gltf"
        path.write_text(json.dumps(_tree(uri=uri)))
        meshes.check_gltf(path)
        assert meshes.load_glb(path).triangles.shape == (1, 3)
