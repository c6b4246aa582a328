"""The clip source (envs/assets/clips.py, kernels/clips.py): OpenCV-exact grey (the resize,
render/resample.linear, is tested in tests/test_resample.py),
the frame choices against a plain transcription of the spec, procedural clips (pure functions
of their number, visibly ordered in time), the Something-Something v2 folder layout on a tiny
folder this test writes (two webm clips encoded here with PyAV), and unreadable clips and bad
labels files named in the errors. cv2 is used only as a test oracle."""
import json
import sys

import numpy as np
import pytest

import visgym
from visgym.envs.assets import clips
from visgym.kernels import clips as kern

cv2 = pytest.importorskip("cv2")
av = pytest.importorskip("av")


# --------------------------------------------------------------------------- OpenCV arithmetic
def test_grey_equals_opencv_rgb2gray():
    rgb = np.random.default_rng(1).integers(0, 256, (224, 224, 3), dtype=np.uint8)
    got = np.empty((224, 224), np.uint8)
    kern.grey(rgb, got)
    np.testing.assert_array_equal(got, cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY))


# --------------------------------------------------------------------------- frame choices
def _spec_uniform(a, n):
    if a <= n:
        return list(range(max(0, a - n), a))
    return sorted(set(int(v) for v in np.linspace(0, a - 1, n + 2).astype(int)[1:-1]))


def _spec_salient(greys, a, n, min_diff):
    chosen, ref = [0], greys[0].astype(float)
    for k in range(1, a):
        if len(chosen) >= n:
            break
        g = greys[k].astype(float)
        if np.mean(np.abs(g - ref)) / 255 >= min_diff:
            chosen.append(k)
            ref = g
    return chosen if len(chosen) >= n else _spec_uniform(a, n)


def _spec_distinct(greys, a, n):
    if a <= n:
        return _spec_uniform(a, n)
    g = greys[:a].astype(float)
    d = np.array([[np.mean(np.abs(x - y)) / 255 for y in g] for x in g])
    i, j = np.unravel_index(np.argmax(d), d.shape)
    chosen = [int(i), int(j)]
    while len(chosen) < n:
        best, best_k = -1.0, -1
        for k in range(a):
            if k not in chosen and min(d[k, c] for c in chosen) > best:
                best, best_k = min(d[k, c] for c in chosen), k
        chosen.append(best_k)
    return sorted(chosen)


def _random_clip(seed, count):
    """Frames whose changes vary in size: a bright block of random width, frame to frame."""
    rng = np.random.default_rng(seed)
    frames = np.full((count, 224, 224, 3), 30, np.uint8)
    for t in range(count):
        w = int(rng.integers(0, 224))
        frames[t, :, :w] = rng.integers(100, 255)
        frames[t] += rng.integers(0, 6, (224, 224, 3), dtype=np.uint8)
    return frames


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("n", [4, 5])
def test_frame_choices_follow_a_plain_transcription_of_the_spec(seed, n):
    count = 12 + 3 * seed
    frames = _random_clip(seed, count)
    greys = np.stack([cv2.cvtColor(f, cv2.COLOR_RGB2GRAY) for f in frames])
    reader = clips.FrameReader(count, count, lambda k: frames[k])
    rng = np.random.RandomState(0)
    for analyse in (count, 8, 3):
        a = min(count, analyse)
        for min_diff in (0.05, 0.15, 0.3):
            got = clips.select_frames(reader, n, "salient", min_diff, analyse, rng)
            want = _spec_salient(greys, a, n, min_diff)
            assert got == (want if len(want) == n else None), (analyse, min_diff)
        got = clips.select_frames(reader, n, "distinct", 0.1, analyse, rng)
        want = _spec_distinct(greys, a, n)
        assert got == (want if len(want) == n else None)
        got = clips.select_frames(reader, n, "uniform", 0.1, analyse, rng)
        want = _spec_uniform(a, n)
        assert got == (want if len(want) == n else None)


def test_uniform_top_up_draws_from_the_episode_stream(monkeypatch):
    """The reference topped up collapsed linspace points from NumPy's unseeded global RNG (a
    float-rounding corner); here from the RandomState it is given, built only when needed."""
    real = np.linspace
    monkeypatch.setattr(np, "linspace", lambda a, b, k: real(0, 0.5, k))   # all points -> 0
    built = []

    def stream():
        built.append(1)
        return np.random.RandomState(7)

    np.random.seed(1)
    first = clips.uniform_positions(30, 4, stream)
    np.random.seed(2)
    again = clips.uniform_positions(30, 4, stream)
    assert first == again and len(set(first)) == 4 and 0 in first and len(built) == 2
    monkeypatch.setattr(np, "linspace", real)
    assert clips.uniform_positions(30, 4, stream) == [5, 11, 17, 23] and len(built) == 2


def test_a_clip_that_reports_more_frames_than_it_has_is_not_used_past_its_end():
    frames = _random_clip(3, 6)
    reader = clips.FrameReader(40, 6, lambda k: frames[k])   # the container over-reports
    assert clips.select_frames(reader, 4, "uniform", 0.1, 100, np.random.RandomState(0)) is None


# --------------------------------------------------------------------------- procedural clips
def test_procedural_clips_are_pure_functions_of_their_number():
    source = clips.procedural_clips()
    assert len(source) == clips.PROCEDURAL_CLIPS and len(set(source.ids)) == len(source)
    a, b = source.reader(7, 100), source.reader(7, 100)
    for t in (0, 5, a.available - 1):
        np.testing.assert_array_equal(a.rgb(t), b.rgb(t))
    assert not np.array_equal(source.reader(8, 100).rgb(0), a.rgb(0))
    for k in range(len(clips.KINDS)):
        assert source.labels[k] == clips._procedural_caption(k)


@pytest.mark.parametrize("k", range(12))
def test_procedural_clips_are_visibly_ordered_in_time(k):
    """The grey difference to the first frame grows with time (rank correlation), except for the
    push, whose object leaves the frame: there it grows over the first half."""
    source = clips.procedural_clips()
    reader = source.reader(k, 100)
    count = reader.available
    assert clips.PROCEDURAL_FRAMES[0] <= count <= clips.PROCEDURAL_FRAMES[1]
    diffs = np.array([kern.grey_difference(reader.grey(0), reader.grey(t))
                      for t in range(count)])
    if clips.KINDS[k % len(clips.KINDS)] == "push":
        half = diffs[:count // 2]
        assert half[-1] > half[len(half) // 2] > half[1] > 0
    else:
        ranks = np.argsort(np.argsort(diffs))
        rho = np.corrcoef(ranks, np.arange(count))[0, 1]
        assert rho > 0.9, (source.labels[k], rho)
    # Mild noise: two renders of one frame equal, but consecutive frames differ everywhere a bit.
    assert kern.grey_difference(reader.grey(1), reader.grey(2)) > 0


def test_offline_default_is_the_procedural_table(monkeypatch, tmp_path):
    monkeypatch.delenv("VIS_GYM_VIDEO_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    env = visgym.make("video_unshuffle/easy", num_envs=2)
    env.reset(seeds=[3, 4])
    assert env.family.source.kind == "procedural"
    assert all(d["video_id"].startswith("procedural-") for d in env.state_dicts())


# --------------------------------------------------------------------------- SSv2 folders
def _encode(path, frames, codec="libvpx", fps=12):
    with av.open(str(path), mode="w") as out:
        stream = out.add_stream(codec, rate=fps)
        stream.width, stream.height = frames.shape[2], frames.shape[1]
        stream.pix_fmt = "yuv420p"
        for f in frames:
            for packet in stream.encode(av.VideoFrame.from_ndarray(f, format="rgb24")):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)


def _moving_bar(count, width=96, height=64, seed=0):
    rng = np.random.default_rng(seed)
    frames = np.full((count, height, width, 3), 20, np.uint8)
    for t in range(count):
        x = int(t * (width - 24) / (count - 1))
        frames[t, :, x:x + 24] = (230, 200, 40)
        frames[t] += rng.integers(0, 4, frames[t].shape, dtype=np.uint8)
    return frames


@pytest.fixture(scope="module")
def ssv2(tmp_path_factory):
    """A tiny folder in the Something-Something v2 layout with two clips."""
    root = tmp_path_factory.mktemp("ssv2")
    (root / "labels").mkdir()
    (root / clips.VIDEO_DIR).mkdir()
    labels = [{"id": "22", "label": "moving bar from left to right",
               "template": "Moving [something] from left to right", "placeholders": ["bar"]},
              {"id": "11", "label": "moving slab from left to right",
               "template": "Moving [something] from left to right", "placeholders": ["slab"]}]
    (root / "labels" / "train.json").write_text(json.dumps(labels))
    _encode(root / clips.VIDEO_DIR / "22.webm", _moving_bar(20, seed=1))
    _encode(root / clips.VIDEO_DIR / "11.webm", _moving_bar(30, width=80, height=48, seed=2))
    return root


def test_folder_layout_is_read_sorted_by_id(ssv2):
    source = clips.clip_source(ssv2)
    assert source.ids == ("11", "22") and source.kind == "directory"
    assert source.labels == ("moving slab from left to right", "moving bar from left to right")
    only = clips.clip_source(ssv2, video_label="bar")
    assert only.ids == ("22",)
    with pytest.raises(clips.ClipSourceError, match="train.json.*no clips with a label"):
        clips.clip_source(ssv2, video_label="nothing like it")


def test_folder_clips_decode_as_opencv_decodes_and_resizes_them(ssv2):
    path = ssv2 / clips.VIDEO_DIR / "11.webm"
    reported, frames = clips.decode_clip(path)
    cap = cv2.VideoCapture(str(path))
    want = []
    while True:
        ok, bgr = cap.read()
        if not ok:
            break
        want.append(cv2.resize(bgr, (224, 224), interpolation=cv2.INTER_LINEAR)[:, :, ::-1])
    assert reported == int(cap.get(cv2.CAP_PROP_FRAME_COUNT)) == 30
    cap.release()
    np.testing.assert_array_equal(frames, np.stack(want))


def test_env_runs_on_a_folder_and_by_environment_variable(ssv2, monkeypatch):
    env = visgym.make("video_unshuffle/easy", num_envs=2, root_dir=str(ssv2))
    env.reset(seeds=[0, 1])
    for state in env.state_dicts():
        assert state["video_id"] in ("11", "22")
        assert state["frame_positions"] == sorted(state["frame_positions"])
    for action in env.solve()[0]:
        _, reward, terminated, _, _ = env.step([action, "('stop', 'stop')"])
    assert terminated[0] and reward[0] == 1.0
    monkeypatch.setenv("VIS_GYM_VIDEO_DIR", str(ssv2))
    again = visgym.make("video_unshuffle/easy", num_envs=2)
    again.reset(seeds=[0, 1])
    assert again.state_dicts()[0]["video_id"] == env.family.source.ids[
        env.family.source.order(0)[0]]


def test_bundle_layout_is_found_under_a_named_root_and_the_working_directory(ssv2, tmp_path,
                                                                            monkeypatch):
    bundle = tmp_path / "bundle"
    (bundle / "partial_datasets").mkdir(parents=True)
    (bundle / "partial_datasets" / "ssv2").symlink_to(ssv2, target_is_directory=True)
    source = clips.clip_source(bundle)
    assert source.root == bundle / "partial_datasets" / "ssv2" and source.ids == ("11", "22")
    monkeypatch.delenv("VIS_GYM_VIDEO_DIR", raising=False)
    monkeypatch.chdir(bundle)
    env = visgym.make("video_unshuffle/easy", num_envs=1)
    assert env.family.source.kind == "directory" and env.family.source.ids == ("11", "22")


def _folder_with(tmp_path, name, data):
    root = tmp_path / "ssv2"
    (root / "labels").mkdir(parents=True)
    (root / clips.VIDEO_DIR).mkdir()
    (root / "labels" / "train.json").write_text(json.dumps([{"id": "5", "label": "x"}]))
    (root / clips.VIDEO_DIR / name).write_bytes(data)
    return root


@pytest.mark.parametrize("what,data,match", [
    ("zero bytes", b"", "empty"),
    ("garbage", b"\x1aE\xdf\xa3 not a webm at all" * 10, "cannot decode|no decodable"),
])
def test_unreadable_clips_raise_naming_the_file(tmp_path, what, data, match):
    root = _folder_with(tmp_path, "5.webm", data)
    env_kwargs = dict(num_envs=1, root_dir=str(root))
    env = visgym.make("video_unshuffle/easy", **env_kwargs)
    with pytest.raises(ValueError, match=rf"5\.webm.*({match})"):
        env.reset(seeds=[0])


def test_a_truncated_clip_raises_naming_the_file(tmp_path, ssv2):
    data = (ssv2 / clips.VIDEO_DIR / "22.webm").read_bytes()
    root = _folder_with(tmp_path, "5.webm", data[:300])
    env = visgym.make("video_unshuffle/easy", num_envs=1, root_dir=str(root))
    with pytest.raises(ValueError, match=r"5\.webm"):
        env.reset(seeds=[0])


def test_a_huge_declared_frame_size_is_refused_before_decoding(ssv2, monkeypatch):
    monkeypatch.setattr(clips, "MAX_FRAME_PIXELS", 64 * 64)
    with pytest.raises(clips.ClipFileError, match=r"22\.webm: declares 96x64 frames"):
        clips.decode_clip(ssv2 / clips.VIDEO_DIR / "22.webm")


def test_decoding_is_bounded_in_frames(ssv2):
    reported, frames = clips.decode_clip(ssv2 / clips.VIDEO_DIR / "11.webm", max_frames=7)
    assert reported == 30 and frames.shape == (7, 224, 224, 3)


@pytest.mark.parametrize("text,match", [
    ("not json", "not valid JSON"),
    ('{"id": "1"}', "expected a JSON array"),
    ('[{"label": "x"}]', "entry 0 is not an object"),
    ('[{"id": "../x", "label": "x"}]', "not a clip file name"),
    ("[]", "no clips"),
])
def test_bad_labels_files_raise_naming_the_file(tmp_path, text, match):
    (tmp_path / "labels").mkdir()
    (tmp_path / "labels" / "train.json").write_text(text)
    with pytest.raises(ValueError, match=rf"train\.json.*{match}"):
        visgym.make("video_unshuffle/easy", root_dir=str(tmp_path))


def test_missing_folder_and_labels_are_named(tmp_path):
    with pytest.raises(ValueError, match="root_dir.*nowhere.*does not exist"):
        visgym.make("video_unshuffle/easy", root_dir=str(tmp_path / "nowhere"))
    with pytest.raises(ValueError, match=r"train\.json: labels file does not exist"):
        visgym.make("video_unshuffle/easy", root_dir=str(tmp_path))


def test_missing_pyav_names_the_extra(ssv2, monkeypatch):
    monkeypatch.setitem(sys.modules, "av", None)
    with pytest.raises(clips.ClipSourceError, match=r"visgym\[video\]"):
        clips.decode_clip(ssv2 / clips.VIDEO_DIR / "22.webm")
