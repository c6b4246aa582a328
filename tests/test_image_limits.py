"""The image layer's limits (envs/assets/images.py): folder scans that end (each real folder
listed once, links out of the folder refused, depth and entry bounds), photos decoded within a
pixel cap (the declared size read from the header first; refused beyond it, or JPEG-drafted where
the source resizes anyway), Pillow's decompression-bomb error as the loader's own, and messages
that name the field or file with a short, cut quote. Every input is written here, small: huge
photos are PNG headers that declare a size their few bytes do not hold.
"""
import os
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageFile

import visgym
from visgym.envs.assets import images
from visgym.envs.assets.images import (ENV_VAR, JIGSAW_SCAN, ZOOM_IN_SCAN, ImageFileError,
                                       ImageSourceError, decode_rgb, image_source, scan_dir)

SHORT = 400   # no message here may be longer (the inputs are 100 kB and 1 MB)


@pytest.fixture(autouse=True)
def no_env(monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    images.clear_cache()
    yield
    images.clear_cache()


def _png(path: Path, size=(12, 8), color=(10, 20, 30)) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", size, color).save(path)
    return path


def _declared_png(path: Path, width: int, height: int) -> Path:
    """A ~70-byte PNG whose header (IHDR, CRC fixed) declares width x height pixels."""
    _png(path, (8, 8))
    data = bytearray(path.read_bytes())
    assert data[12:16] == b"IHDR"
    data[16:24] = struct.pack(">II", width, height)
    data[29:33] = struct.pack(">I", zlib.crc32(bytes(data[12:29])) & 0xFFFFFFFF)
    path.write_bytes(bytes(data))
    return path


@pytest.fixture
def loads(monkeypatch):
    """Sizes Pillow decodes at; decoding more than 1 M pixels fails the test before allocating."""
    sizes = []
    real_load = ImageFile.ImageFile.load

    def load(self):
        sizes.append(self.size)
        assert self.size[0] * self.size[1] <= 1 << 20, f"decoded at full size {self.size}"
        return real_load(self)

    monkeypatch.setattr(ImageFile.ImageFile, "load", load)
    return sizes


# ----------------------------------------------------------------------------- scanning
@pytest.mark.timeout(60)
def test_two_links_to_the_folder_itself_do_not_hang_the_recursive_scan(tmp_path):
    root = tmp_path / "imgs"
    _png(root / "a.png")
    _png(root / "sub" / "b.png")
    os.symlink(".", root / "loop1")
    os.symlink(".", root / "loop2")
    os.symlink("..", root / "sub" / "up")
    env = visgym.make("zoom_in_puzzle/easy", sample_dir=str(root))
    assert env.family.source.names == ("a.png", "sub/b.png")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("rule", [JIGSAW_SCAN, ZOOM_IN_SCAN], ids=["jigsaw", "zoom_in"])
def test_a_link_to_the_folder_adds_no_copies(tmp_path, rule):
    root = tmp_path / "imgs"
    _png(root / "a.png")
    _png(root / "b.png")
    os.symlink(".", root / "again")
    assert scan_dir(root, rule) == ("a.png", "b.png")


@pytest.mark.timeout(60)
def test_proc_self_ends_with_an_error_naming_sample_dir():
    if not Path("/proc/self").is_dir():
        pytest.skip("no /proc")
    with pytest.raises(ValueError, match="^sample_dir: ") as err:
        visgym.make("zoom_in_puzzle/easy", sample_dir="/proc/self")
    assert len(str(err.value)) < SHORT


def test_a_photo_reached_through_a_link_is_listed_once_by_its_real_path(tmp_path):
    root = tmp_path / "imgs"
    _png(root / "zeta" / "x.png")
    _png(root / "top.png")
    os.symlink("zeta", root / "alpha")            # sorts before the real folder
    os.symlink("top.png", root / "also_top.png")
    for rule in (JIGSAW_SCAN, ZOOM_IN_SCAN):
        assert scan_dir(root, rule) == ("top.png", "zeta/x.png")
    # A photo reached only through a link is named by its real path too (and loads).
    only = tmp_path / "only"
    _png(only / "deep" / "deeper" / "y.png")
    os.symlink("deep/deeper", only / "shallow")
    src = image_source(only, rule=JIGSAW_SCAN)   # one level: deep/deeper is not scanned itself
    assert src.names == ("deep/deeper/y.png",)
    assert src.load("deep/deeper/y.png").shape == (8, 12, 3)


def test_ordinary_folders_keep_the_sorted_relative_paths(tmp_path):
    root = tmp_path / "imgs"
    for name in ("b.png", "a b/x.png", "a/x.png", "a/z/y.jpg", "A.jpg", "c/d/e/f.jpeg"):
        _png(root / name)
    assert scan_dir(root, ZOOM_IN_SCAN) == ("A.jpg", "a b/x.png", "a/x.png", "a/z/y.jpg",
                                            "b.png", "c/d/e/f.jpeg")
    assert scan_dir(root, JIGSAW_SCAN) == ("A.jpg", "a b/x.png", "a/x.png", "b.png")


def test_a_file_link_out_of_the_folder_is_refused_naming_it(tmp_path):
    root = tmp_path / "imgs"
    _png(root / "good.png")
    outside = _png(tmp_path / "private" / "secret.png")
    os.symlink(outside, root / "host.png")
    for rule in (JIGSAW_SCAN, ZOOM_IN_SCAN):
        with pytest.raises(ImageSourceError, match="host.png: a link out of the image folder"):
            scan_dir(root, rule)
    with pytest.raises(ValueError, match="^sample_dir: .*host.png"):
        visgym.make("jigsaw/easy", sample_dir=str(root))


def test_a_folder_link_out_of_the_folder_is_refused_naming_it(tmp_path):
    root = tmp_path / "imgs"
    _png(root / "good.png")
    _png(tmp_path / "elsewhere" / "x.png")
    os.symlink(tmp_path / "elsewhere", root / "ext")
    with pytest.raises(ImageSourceError, match="ext: a link out of the image folder"):
        scan_dir(root, ZOOM_IN_SCAN)
    # Links inside the folder are fine, also when the named folder itself is a link.
    os.remove(root / "ext")
    os.symlink(root, tmp_path / "via_link")
    assert scan_dir(tmp_path / "via_link", ZOOM_IN_SCAN) == ("good.png",)
    # Links the rule never follows (non-images, too deep for the rule) are not looked at.
    os.symlink("/etc/hostname", root / "notes.txt")
    _png(root / "sub" / "y.png")
    os.symlink(tmp_path / "elsewhere", root / "sub" / "ext")
    assert scan_dir(root, JIGSAW_SCAN) == ("good.png", "sub/y.png")


def test_scans_are_bounded_in_depth_and_entries(tmp_path, monkeypatch):
    root = tmp_path / "imgs"
    _png(root / "top.png")
    _png(root / "a" / "b" / "c" / "d" / "deep.png")
    monkeypatch.setattr(images, "MAX_SCAN_DEPTH", 3)
    with pytest.raises(ImageSourceError, match=f"{root}.*3 levels"):
        scan_dir(root, ZOOM_IN_SCAN)
    assert scan_dir(root, JIGSAW_SCAN) == ("top.png",)   # a rule within the bound scans
    monkeypatch.setattr(images, "MAX_SCAN_DEPTH", 32)
    for k in range(10):
        _png(root / f"i{k}.png")
    monkeypatch.setattr(images, "MAX_SCAN_ENTRIES", 8)
    with pytest.raises(ImageSourceError, match=f"{root}.*8 entries"):
        scan_dir(root, JIGSAW_SCAN)


# ----------------------------------------------------------------------------- decoding
def test_a_decompression_bomb_is_an_image_file_error_naming_the_file(tmp_path):
    root = tmp_path / "imgs"
    _declared_png(root / "bomb.png", 30000, 30000)
    src = image_source(root, rule=ZOOM_IN_SCAN)
    with pytest.raises(ImageFileError, match="bomb.png"):
        src.array(0)
    env = visgym.make("zoom_in_puzzle/easy", sample_dir=str(root))
    with pytest.raises(ImageFileError, match="bomb.png"):
        env.reset([0])


@pytest.mark.filterwarnings("ignore::PIL.Image.DecompressionBombWarning")   # Pillow's, at open
def test_a_huge_declared_size_is_refused_before_decoding(tmp_path, loads):
    path = _declared_png(tmp_path / "huge.png", 12000, 12000)   # 144 M pixels in ~70 bytes
    for scale in (None, 336):   # resizing cannot help a PNG: Pillow decodes it whole
        with pytest.raises(ImageFileError, match="huge.png: 12000x12000"):
            decode_rgb(path, scale)
    env = visgym.make("jigsaw/easy", sample_dir=str(tmp_path))
    with pytest.raises(ImageFileError, match="huge.png: 12000x12000"):
        env.reset([0])
    assert loads == []


def test_past_the_cap_a_resized_jpeg_is_decoded_at_reduced_scale(tmp_path, monkeypatch, loads):
    path = tmp_path / "p.jpg"
    rng = np.random.default_rng(0)
    Image.fromarray(rng.integers(0, 255, (300, 401, 3), dtype=np.uint8)).save(path)
    full = decode_rgb(path, 60)
    assert loads[-1] == (401, 300) and full.shape == (60, 78, 3)
    monkeypatch.setattr(images, "MAX_PIXELS", 20_000)
    reduced = decode_rgb(path, 60)                 # drafted by libjpeg (1/4), then Lanczos
    assert loads[-1] == (101, 75) and reduced.shape == full.shape
    assert np.abs(reduced.astype(int) - full).mean() < 40
    with pytest.raises(ImageFileError, match="p.jpg: 401x300"):
        decode_rgb(path)                           # native pixels: refused, never reduced


def test_photos_within_the_cap_decode_exactly_as_pillow(tmp_path, loads):
    rng = np.random.default_rng(1)
    pixels = rng.integers(0, 255, (700, 900, 3), dtype=np.uint8)
    for name in ("a.jpg", "a.png"):
        Image.fromarray(pixels).save(tmp_path / name)
        with Image.open(tmp_path / name) as im:
            want = np.asarray(im.convert("RGB"))
            want_scaled = np.asarray(im.convert("RGB").resize(
                images.normalise_size(900, 700, 100), Image.Resampling.LANCZOS))
        assert np.array_equal(decode_rgb(tmp_path / name), want)
        assert np.array_equal(decode_rgb(tmp_path / name, 100), want_scaled)
    assert set(loads) == {(900, 700)}


# ----------------------------------------------------------------------------- messages
@pytest.mark.parametrize("family", ["jigsaw/easy", "zoom_in_puzzle/easy"])
@pytest.mark.parametrize("sample_dir", ["x" * 100_000, "~nouser/x", "/nonexistent/" + "y" * 5000])
def test_bad_sample_dirs_name_the_field_with_a_short_quote(family, sample_dir):
    with pytest.raises(ValueError, match="^sample_dir: ") as err:
        visgym.make(family, sample_dir=sample_dir)
    assert len(str(err.value)) < SHORT


def test_a_long_folder_path_is_cut_in_the_loaders_messages():
    with pytest.raises(ImageSourceError, match="image_dir") as err:
        image_source("x" * 100_000, rule=JIGSAW_SCAN)
    assert len(str(err.value)) < SHORT


def test_a_tilde_path_is_expanded(tmp_path, monkeypatch):
    _png(tmp_path / "home" / "imgs" / "a.png")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert image_source("~/imgs", rule=JIGSAW_SCAN).names == ("a.png",)


def test_an_unknown_huge_image_name_gives_a_short_message(tmp_path):
    root = tmp_path / "imgs"
    _png(root / "a.png")
    src = image_source(root, rule=ZOOM_IN_SCAN)
    with pytest.raises(ImageFileError, match="image_name 'nnn") as err:
        src.id_of("n" * 1_000_000)
    assert len(str(err.value)) < SHORT
    env = visgym.make("zoom_in_puzzle/easy", sample_dir=str(root))
    env.reset([0])
    state = dict(env.state_dicts()[0], image_name="n" * 1_000_000)
    with pytest.raises(ValueError, match="image_name") as err:
        env.reset(init_states=[state])
    assert len(str(err.value)) < SHORT
