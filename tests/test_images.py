"""The image layer (envs/assets/images.py): the source order of DESIGN.md "Assets and real
data" (a named folder, $VIS_GYM_IMAGE_DIR, the bundle's partial_datasets/<task>, the built-in
photos), the per-family scan rules, the built-in photos read from scikit-image's installed files
with the manifest's hashes, deterministic normalisation, the image as a pure function of the
seed, and errors that name the path or file.
"""
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from visgym.envs.assets import images
from visgym.envs.assets.images import (BUILTIN_IMAGES, ENV_VAR, JIGSAW_SCAN, ZOOM_IN_SCAN,
                                       ImageFileError, ImageSourceError, ScanRule,
                                       builtin_source, image_source, normalise_size, scan_dir)


def _png(path: Path, size=(12, 8), color=(10, 20, 30)):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", size, color).save(path)
    return path


@pytest.fixture(autouse=True)
def no_env(monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)


def _tree(root: Path):
    _png(root / "b.png")
    _png(root / "a.jpg", color=(200, 0, 0))
    _png(root / "C.PNG")                  # upper-case extension
    _png(root / "sub" / "c.jpeg")         # one level down
    _png(root / "sub" / "deep" / "d.png")  # two levels down
    _png(root / ".hidden.png")
    (root / "notes.txt").write_text("not an image")
    return root


def test_scan_rules_follow_each_reference(tmp_path):
    root = _tree(tmp_path / "imgs")
    assert scan_dir(root, JIGSAW_SCAN) == ("a.jpg", "b.png", "sub/c.jpeg")
    assert scan_dir(root, ZOOM_IN_SCAN) == ("a.jpg", "b.png", "sub/c.jpeg", "sub/deep/d.png")
    rule = ScanRule((".png", ".jpg", ".jpeg"), case_sensitive=False, max_depth=0)
    assert scan_dir(root, rule) == ("C.PNG", "a.jpg", "b.png")


def test_source_order_named_then_env_then_bundle_then_builtin(tmp_path, monkeypatch):
    named = _tree(tmp_path / "named")
    env_dir = tmp_path / "env"
    _png(env_dir / "e.png")
    bundle = tmp_path / "cwd" / "partial_datasets" / "jigsaw"
    _png(bundle / "z.png")
    monkeypatch.chdir(tmp_path / "cwd")
    assert image_source(None, rule=JIGSAW_SCAN, bundle_task="jigsaw").names == ("z.png",)
    monkeypatch.setenv(ENV_VAR, str(env_dir))
    assert image_source(None, rule=JIGSAW_SCAN, bundle_task="jigsaw").names == ("e.png",)
    src = image_source(named, rule=JIGSAW_SCAN, bundle_task="jigsaw")
    assert src.kind == "directory" and src.names[0] == "a.jpg"
    monkeypatch.delenv(ENV_VAR)
    monkeypatch.chdir(tmp_path)
    src = image_source(None, rule=JIGSAW_SCAN, bundle_task="jigsaw")
    assert src.kind == "builtin" and "chelsea" in src.names


def test_a_named_bundle_root_uses_its_partial_datasets_folder(tmp_path):
    _png(tmp_path / "partial_datasets" / "zoomin" / "q.png")
    _png(tmp_path / "top.png")
    assert image_source(tmp_path, rule=ZOOM_IN_SCAN, bundle_task="zoomin").names == ("q.png",)


@pytest.mark.parametrize("case", ["missing", "file", "empty", "no_images"])
def test_bad_folders_raise_naming_the_path(tmp_path, case, monkeypatch):
    path = tmp_path / "data"
    if case == "file":
        path.write_text("x")
    elif case == "empty":
        path.mkdir()
    elif case == "no_images":
        path.mkdir()
        (path / "readme.txt").write_text("x")
    with pytest.raises(ImageSourceError, match=str(path)):
        image_source(path, rule=JIGSAW_SCAN)
    # The environment variable is checked the same way: no silent fall-back to the built-ins.
    monkeypatch.setenv(ENV_VAR, str(path))
    with pytest.raises(ImageSourceError, match=str(path)):
        image_source(None, rule=JIGSAW_SCAN)


def test_unreadable_files_are_named_every_time(tmp_path):
    root = tmp_path / "imgs"
    _png(root / "good.png")
    (root / "bad.png").write_bytes(b"this is not a png")
    src = image_source(root, rule=JIGSAW_SCAN)
    bad = src.id_of("bad.png")
    for _ in range(2):   # never skipped, never cached as good
        with pytest.raises(ImageFileError, match="bad.png"):
            src.array(bad)
    with pytest.raises(ImageFileError, match="bad.png"):
        src.verify()
    assert src.load("good.png").shape == (8, 12, 3)
    (root / "empty.png").write_bytes(b"")
    with pytest.raises(ImageFileError, match="empty.png"):
        image_source(root, rule=JIGSAW_SCAN)


def test_unknown_image_name_is_an_error_naming_it(tmp_path):
    src = image_source(_tree(tmp_path / "imgs"), rule=JIGSAW_SCAN)
    with pytest.raises(ImageFileError, match="'nope.png'"):
        src.id_of("nope.png")


def test_the_image_is_a_pure_function_of_the_seed(tmp_path):
    root = tmp_path / "imgs"
    for k in range(7):
        _png(root / f"i{k}.png", color=(k, k, k))
    a = image_source(root, rule=JIGSAW_SCAN)
    b = image_source(root, rule=JIGSAW_SCAN)
    seeds = [0, 5, 3, 5, 123456789, 2**63]
    assert [a.pick(s) for s in seeds] == [b.pick(s) for s in reversed(seeds)][::-1]
    assert a.pick(5) == a.pick(5)
    # Consecutive seeds visit every image before any repeats.
    assert sorted(a.pick(s) for s in range(7)) == sorted(a.names)
    with pytest.raises(ValueError, match="seed"):
        a.pick(-1)


def test_builtin_photos_are_read_from_the_package_with_the_manifests_hashes():
    data = images.skimage_data_dir()
    for entry in BUILTIN_IMAGES:
        path = data / entry.file
        assert path.is_file(), path
        assert path.stat().st_size == entry.bytes
        assert images._sha256(path) == entry.sha256
        assert entry.licence in ("CC0", "public domain")
        with Image.open(path) as im:
            assert im.size == (entry.width, entry.height) and im.mode == entry.mode


def test_builtin_photos_are_normalised_deterministically():
    src = builtin_source(["chelsea", "camera", "horse"])
    chelsea = src.load("chelsea")
    assert chelsea.shape == (336, 504, 3) and not chelsea.flags.writeable
    assert src.load("camera").shape == (336, 336, 3)       # greyscale -> RGB
    horse = src.load("horse")
    assert horse.shape[2] == 3 and horse.shape[0] == 336   # RGBA over white
    images.clear_cache()
    again = builtin_source(["chelsea"]).load("chelsea")
    assert np.array_equal(chelsea, again)
    assert "camera" not in builtin_source(colour_only=True).names


@pytest.mark.parametrize("size,want", [((451, 300), (504, 336)), ((512, 512), (336, 336)),
                                       ((300, 451), (336, 504)), ((1411, 1411), (336, 336))])
def test_normalise_size(size, want):
    assert normalise_size(*size) == want


def test_bad_arguments_name_the_field():
    with pytest.raises(ValueError, match="extensions"):
        ScanRule(("jpg",))
    with pytest.raises(ValueError, match="max_depth"):
        ScanRule(max_depth=-1)
    with pytest.raises(ValueError, match="unknown"):
        builtin_source(["no_such_photo"])


def test_decode_cache_is_bounded(tmp_path, monkeypatch):
    root = tmp_path / "imgs"
    for k in range(6):
        _png(root / f"i{k}.png", size=(100, 100), color=(k, 0, 0))   # 30,000 bytes decoded
    images.clear_cache()
    monkeypatch.setattr(images.DECODED, "max_bytes", 70_000)
    src = image_source(root, rule=JIGSAW_SCAN)
    for k in range(6):
        assert src.array(k)[0, 0, 0] == k
    assert len(images.DECODED) == 2 and images.DECODED.nbytes == 60_000
    first = src.array(5)
    assert src.array(5) is first          # a hit keeps the same read-only array
    assert src.array(0)[0, 0, 0] == 0     # an evicted image decodes again, the same pixels
    images.clear_cache()
