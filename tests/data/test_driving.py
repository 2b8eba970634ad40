"""dubito.data.driving: pure-pursuit geometry against closed forms, resizing, drivers, cache files,
episode-wise splits (always run); recordings in CarRacing-v3 (skipped without gymnasium[box2d]).

Every DUBITO_CACHE is a fresh temporary folder (tests/data/conftest.py)."""
import io
import math
import sys

import numpy as np
import pytest
from scipy import stats

from dubito.data import Dataset, load
from dubito.data import driving as dv

L = dv.WHEELBASE


def circle(R, n=4000, clockwise=False, centre=(0.0, 0.0)):
    t = np.linspace(0.0, 2 * np.pi, n, endpoint=False)
    if clockwise:
        t = -t
    return np.c_[centre[0] + R * np.cos(t), centre[1] + R * np.sin(t)]


# --------------------------------------------------------------------------- geometry


@pytest.mark.parametrize("e", [-2.0, -0.5, 0.0, 0.7, 3.0])
@pytest.mark.parametrize("ld", [5.0, 12.0])
def test_pure_pursuit_straight_lateral_offset(e, ld):
    # straight path y = 0 along +x; rear axle at (0, e) heading +x: the look-ahead point is
    # (sqrt(ld^2 - e^2), 0), sin(alpha) = -e / ld, so delta = arctan(-2 L e / ld^2)
    path = np.c_[np.linspace(-50, 200, 251), np.zeros(251)]
    delta, i, g = dv.pure_pursuit_angle((0.0, e), 0.0, path, ld, L, closed=False)
    assert g == pytest.approx([math.sqrt(ld * ld - e * e), 0.0], abs=1e-9)
    assert delta == pytest.approx(math.atan(-2 * L * e / ld**2), abs=1e-12)
    assert i == 50


@pytest.mark.parametrize("psi", [-0.3, -0.05, 0.1, 0.4])
def test_pure_pursuit_straight_heading_error(psi):
    # on the line, heading psi off it: alpha = -psi, delta = arctan(2 L sin(-psi) / ld)
    path = np.c_[np.linspace(-50, 200, 251), np.zeros(251)]
    delta, _, _ = dv.pure_pursuit_angle((3.0, 0.0), psi, path, 9.0, L, closed=False)
    assert delta == pytest.approx(math.atan(2 * L * math.sin(-psi) / 9.0), abs=1e-12)


@pytest.mark.parametrize("R", [15.0, 40.0, 120.0])
@pytest.mark.parametrize("ld", [4.0, 10.0, 20.0])
def test_pure_pursuit_circle_gives_arctan_L_over_R(R, ld):
    # on a circle of radius R, tangent to it: sin(alpha) = ld / (2R), so delta = arctan(L / R) for any ld;
    # counter-clockwise turns left (+), clockwise right (-). Tolerance: the polygon's chords (4000 vertices).
    for clockwise, sign in ((False, 1.0), (True, -1.0)):
        path = circle(R, clockwise=clockwise)
        heading = -np.pi / 2 if clockwise else np.pi / 2
        delta, _, g = dv.pure_pursuit_angle((R, 0.0), heading, path, ld, L)
        assert np.hypot(g[0] - R, g[1]) == pytest.approx(ld, rel=1e-12)
        assert delta == pytest.approx(sign * math.atan(L / R), abs=2e-5)


def test_pure_pursuit_uses_hint_window_and_wraps_around():
    path = circle(30.0, n=400)
    # car just before the closing vertex: the look-ahead point lies past index 0 (wrap-around)
    p = path[-1] * 1.0
    heading = math.atan2(p[0], -p[1])  # tangent, counter-clockwise
    delta, i, g = dv.pure_pursuit_angle(p, heading, path, 8.0, L, start=395)
    assert i == 399 and np.hypot(*(g - p)) == pytest.approx(8.0)
    assert delta == pytest.approx(math.atan(L / 30.0), abs=1e-3)
    # the hint restricts the search: a vertex outside the window is never chosen
    assert dv.nearest_index(path, path[200], hint=10) != 200
    assert dv.nearest_index(path, path[200]) == 200


def test_lookahead_far_off_path_falls_back_to_arc_length():
    path = np.c_[np.linspace(0, 100, 101), np.zeros(101)]
    g = dv.lookahead_point(path, (10.0, 50.0), 5.0, start=10, closed=False)
    assert g == pytest.approx([15.0, 0.0])
    with pytest.raises(ValueError, match="lookahead"):
        dv.lookahead_point(path, (0, 0), 0.0, start=0)
    with pytest.raises(ValueError, match="path"):
        dv.pure_pursuit_angle((0, 0), 0.0, [[0, 0]], 1.0)


def test_offset_path_and_curvature_on_a_circle():
    R = 25.0
    path = circle(R, n=2000)
    # left normal of a counter-clockwise circle points inwards: offset +o -> radius R - o
    assert np.hypot(*dv.offset_path(path, 2.0).T) == pytest.approx(R - 2.0, rel=1e-9)
    assert np.hypot(*dv.offset_path(path, -1.5).T) == pytest.approx(R + 1.5, rel=1e-9)
    assert dv.path_curvature(path) == pytest.approx(1.0 / R, rel=1e-5)
    straight = np.c_[np.arange(10.0), np.zeros(10)]
    assert dv.path_curvature(straight, closed=False) == pytest.approx(0.0, abs=1e-12)


def test_area_resize_matrix():
    R = dv.area_resize_matrix(4, 2)
    assert R == pytest.approx(np.array([[0.5, 0.5, 0, 0], [0, 0, 0.5, 0.5]]))
    assert dv.area_resize_matrix(5, 5) == pytest.approx(np.eye(5))
    R = dv.area_resize_matrix(84, 64)
    assert R.shape == (64, 84) and R.sum(axis=1) == pytest.approx(1.0)
    # weights are overlaps: each input cell contributes its full width in total
    assert (R.sum(axis=0) * 84 / 64) == pytest.approx(1.0)
    with pytest.raises(ValueError):
        dv.area_resize_matrix(0, 3)


def test_frame_maker_cuts_indicators_and_resizes():
    obs = np.zeros((96, 96, 3), np.uint8)
    obs[:84] = (102, 204, 102)  # grass green above, the indicator bar (label leak) below
    obs[84:] = 255
    grey = dv._FrameMaker((64, 64), color=False)(obs)
    assert grey.shape == (1, 64, 64) and grey.dtype == np.uint8
    assert np.all(grey == round(0.299 * 102 + 0.587 * 204 + 0.114 * 102))  # no trace of the bar
    rgb = dv._FrameMaker((21, 24), color=True)(obs)
    assert rgb.shape == (3, 21, 24) and np.all(rgb[1] == 204) and np.all(rgb[0] == 102)


def test_drivers_seeded_and_prefix_stable():
    a, b = dv.draw_drivers(5, seed=0), dv.draw_drivers(5, seed=0)
    assert a == b and dv.draw_drivers(3, seed=0) == a[:3]
    assert dv.draw_drivers(5, seed=1) != a
    assert len({d.lag_steps for d in dv.draw_drivers(40)}) > 1
    for d in dv.draw_drivers(50):
        assert 0 <= d.lag_steps <= 4 and d.gain > 0 and d.lookahead_min > 0 and 0 < d.noise_rho < 1
    with pytest.raises(ValueError, match="drivers"):
        dv.draw_drivers(0)


def test_summary_statistics_against_scipy():
    rng = np.random.default_rng(0)
    y = rng.laplace(0.0, 2.0, 200_000)
    out = io.StringIO()
    s = dv.summary(y, file=out)
    assert s["excess_kurtosis"] == pytest.approx(stats.kurtosis(y), rel=1e-12)
    assert s["skewness"] == pytest.approx(stats.skew(y), rel=1e-12)
    assert s["excess_kurtosis"] == pytest.approx(3.0, abs=0.4)  # Laplace: 3 (the estimate's sd is ~0.1 here)
    assert s["skewness"] == pytest.approx(0.0, abs=0.05)
    assert s["quantiles"]["0.99"] == pytest.approx(np.quantile(y, 0.99))
    assert s["quantiles"]["0.5"] == pytest.approx(0.0, abs=0.03)
    assert s["naive_mae"] == pytest.approx(2.0, rel=0.01)  # E|Y| = b
    assert s["naive_accuracy_II"] == pytest.approx(100 * (1 - math.exp(-1)), abs=0.5)
    assert "skewness" in out.getvalue() and "kurtosis" in out.getvalue()
    g = dv.summary(rng.normal(size=100_000), show=False)
    assert abs(g["excess_kurtosis"]) < 0.1  # the kurtosis threshold used below can fail
    with pytest.raises(ValueError):
        dv.summary([1.0, 2.0], show=False)


# --------------------------------------------------------------------------- cache files and splits (no gym)


def fake_chunk(m, seed=0, shape=(1, 4, 5)):
    rng = np.random.default_rng(seed)
    return {
        "frames": rng.integers(0, 256, (m, *shape), dtype=np.uint8),
        "angle": rng.normal(size=m),
        "angle_pursuit": rng.normal(size=m),
        "speed": rng.uniform(0, 30, m),
        "step": np.arange(m) * 2 + 50,
        "offtrack": np.zeros(m, bool),
    }


def test_chunk_round_trip_foreign_and_corrupt(tmp_path):
    c = fake_chunk(7)
    path = tmp_path / "episode_00003.npz"
    dv._write_chunk(path, c, "abc", 3, 2)
    back = dv._read_chunk(path, "abc", 3)
    for k, v in c.items():
        np.testing.assert_array_equal(back[k], v)
        assert back[k].dtype == v.dtype
    assert back["driver"] == 2
    with np.load(path, allow_pickle=False) as z:  # readable without pickle
        assert set(z.files) >= {"frames", "angle", "key"}
    assert dv._read_chunk(path, "other-settings", 3) is None
    assert dv._read_chunk(path, "abc", 4) is None
    assert dv._read_chunk(tmp_path / "missing.npz", "abc", 3) is None
    path.write_bytes(path.read_bytes()[:100])  # truncated
    with pytest.warns(UserWarning, match="unreadable"):
        assert dv._read_chunk(path, "abc", 3) is None
    assert [p.name for p in tmp_path.iterdir()] == ["episode_00003.npz"]  # no temporary files left


def assemble(lengths, n_frames, n_splits=3, seed=0):
    chunks = []
    for e, m in enumerate(lengths):
        c = fake_chunk(m, seed=e)
        c["episode"], c["driver"] = e, e % 3
        chunks.append(c)
    settings = {"frames_per_episode": max(lengths), "stride": 2}
    return dv._assemble(chunks, n_frames, settings, dv.draw_drivers(3), (1, 4, 5), None, n_splits, 0.2, seed, 0, 0.0)


def test_episode_wise_splits_have_no_overlap():
    ds = assemble([30, 30, 12, 30, 30, 30, 30, 30, 30, 30], n_frames=270, n_splits=4)
    ep = ds.meta["episode"]
    assert ds.n_samples == 270 and ep.shape == (270,) and ds.X.shape == (270, 20)
    assert np.all(ds.X >= 0) and np.all(ds.X <= 1)
    seen_tests = set()
    for train, test in ds.splits:
        tr, te = set(ep[train]), set(ep[test])
        assert not tr & te  # no episode on both sides
        assert len(te) == 2 and len(tr) == 8  # round(0.2 * 10)
        assert np.union1d(train, test).size == 270
        seen_tests.add(tuple(sorted(te)))
    assert len(seen_tests) > 1  # the splits differ
    again = assemble([30, 30, 12, 30, 30, 30, 30, 30, 30, 30], n_frames=270, n_splits=4)
    for (a, b), (c, d) in zip(ds.splits, again.splits):
        np.testing.assert_array_equal(a, c) and np.testing.assert_array_equal(b, d)
    assert dv.images(ds).shape == (270, 1, 4, 5)
    with pytest.raises(ValueError, match="at least 2"):
        assemble([30, 30], n_frames=20)


def test_images_needs_frame_shape():
    ds = Dataset("x", np.zeros((3, 2)), np.zeros(3), ["a", "b"], [(np.array([0, 1]), np.array([2]))])
    with pytest.raises(ValueError, match="frame_shape"):
        dv.images(ds)


def test_clear_import_error_without_gymnasium(monkeypatch):
    monkeypatch.setitem(sys.modules, "gymnasium", None)  # import gymnasium -> ImportError
    with pytest.raises(ImportError, match=r'pip install "dubito\[driving\]"'):
        dv.record(10, progress=False)
    with pytest.raises(ImportError, match=r'pip install "dubito\[driving\]"'):
        load("driving", n_frames=10, progress=False)
    with pytest.raises(ImportError, match="gymnasium"):
        dv.simulate(10)


def test_load_refuses_frame_level_random_splits():
    with pytest.raises(ValueError, match="leak"):
        load("driving", splits="random")


def test_bad_arguments():
    for kw in ({"n_frames": 0}, {"n_frames": 10, "seed": -1}, {"n_frames": 10, "stride": 0},
               {"n_frames": 10, "frame_size": (0, 5)}, {"n_frames": 10, "frame_size": 7}):
        with pytest.raises(ValueError):
            dv.record(**kw, progress=False)


# --------------------------------------------------------------------------- CarRacing-v3 recordings


@pytest.fixture
def gym():
    pytest.importorskip("Box2D")
    pytest.importorskip("pygame")
    return pytest.importorskip("gymnasium")


TINY = dict(frames_per_episode=20, progress=False)


def test_recording_is_seeded_and_render_free_angles_agree(gym):
    a = dv.record(40, seed=3, cache=False, **TINY)
    b = dv.record(40, seed=3, cache=False, **TINY)
    np.testing.assert_array_equal(a.y, b.y)
    np.testing.assert_array_equal(a.X, b.X)
    assert a.X.shape == (40, 64 * 64) and a.meta["frame_shape"] == (1, 64, 64)
    assert np.all(np.abs(a.y) <= math.degrees(dv.MAX_WHEEL_ANGLE) + 1e-9)
    assert a.X.std() > 0.05  # real pictures, not blank frames
    np.testing.assert_array_equal(a.meta["episode"], np.repeat([0, 1], 20))
    np.testing.assert_array_equal(a.meta["driver"], np.repeat([0, 1], 20))
    np.testing.assert_array_equal(a.meta["step"][:3], [50, 52, 54])  # after the zoom, stride 2
    c = dv.record(40, seed=4, cache=False, **TINY)
    assert not np.allclose(a.y, c.y)
    # rendering does not touch the physics: the frame-less simulation gives the same angles
    np.testing.assert_array_equal(dv.simulate(40, seed=3, frames_per_episode=20)["angle"], a.y)
    rgb = dv.record(20, seed=3, cache=False, frame_size=(33, 100), color=True, frames_per_episode=10, progress=False)
    assert rgb.meta["frame_shape"] == (3, 33, 100) and dv.images(rgb).shape == (20, 3, 33, 100)
    np.testing.assert_array_equal(rgb.y, a.y[np.r_[0:10, 20:30]])  # frames do not change the driving


def test_cache_resumes_after_interruption(gym, monkeypatch):
    first = dv.record(40, seed=1, cache=True, **TINY)
    folder = dv.Path(first.meta["cache_path"])
    assert sorted(p.name for p in folder.glob("*.npz")) == ["episode_00000.npz", "episode_00001.npz"]

    # interrupt the recording inside episode 3: episodes 0-2 are kept, nothing half-written
    real = dv._run_episode
    calls, interrupts = [], []

    def interrupted(env, episode, *args, **kw):
        calls.append(episode)
        if episode == 3 and not interrupts:  # only the first time
            interrupts.append(episode)
            raise KeyboardInterrupt
        return real(env, episode, *args, **kw)

    monkeypatch.setattr(dv, "_run_episode", interrupted)
    with pytest.raises(KeyboardInterrupt):
        dv.record(100, seed=1, cache=True, **TINY)
    assert calls == [2, 3]  # 0 and 1 came from the cache
    assert sorted(p.name for p in folder.iterdir()) == [f"episode_{i:05d}.npz" for i in range(3)] + ["settings.json"]

    calls.clear()
    full = dv.record(100, seed=1, cache=True, **TINY)
    assert calls == [3, 4]
    assert full.meta["recorded_frames"] == 40
    np.testing.assert_array_equal(full.y[:40], first.y)
    np.testing.assert_array_equal(full.X[:40], first.X)
    # the resumed recording equals one made in one go
    fresh = dv.record(100, seed=1, cache=False, **TINY)
    np.testing.assert_array_equal(full.y, fresh.y)
    np.testing.assert_array_equal(full.X, fresh.X)
    calls.clear()
    again = dv.record(60, seed=1, cache=True, **TINY)  # fewer frames: all from the cache
    assert calls == [] and again.meta["recorded_frames"] == 0
    np.testing.assert_array_equal(again.y, fresh.y[:60])
    # other settings use another cache folder
    other = dv.record(40, seed=1, cache=True, frame_size=(32, 32), **TINY)
    assert other.meta["cache_path"] != first.meta["cache_path"]


def test_load_driving_episode_splits(gym):
    ds = load("driving", n_frames=100, seed=2, frames_per_episode=20, episode_splits=2, progress=False)
    assert ds.name == "driving" and ds.n_samples == 100 and ds.n_splits == 2
    ep = ds.meta["episode"]
    for train, test in ds.splits:
        assert not set(ep[train]) & set(ep[test]) and len(set(ep[test])) == 1  # round(0.2 * 5) = 1 episode
    assert "gymnasium" in ds.meta["licence"] and ds.meta["seed"] == 2


def test_angle_distribution_peaked_skewed_heavy_tailed(gym):
    # 3,000 frames (12 tracks, 10 drivers) simulated without rendering (a few seconds). Thresholds:
    # excess kurtosis > 1 (normal: 0), skewness > 0.5 (left bends dominate: CarRacing tracks run
    # counter-clockwise), median within 1 degree of 0, and peaked: more than half of the angles
    # within 2 degrees and more mass within 0.5 sd of the median than a normal's 38.3 %.
    y = dv.simulate(3000, seed=0)["angle"]
    assert stats.kurtosis(y) > 1.0
    assert stats.skew(y) > 0.5
    assert abs(np.median(y)) < 1.0
    assert np.mean(np.abs(y) <= 2.0) > 0.5
    assert np.mean(np.abs(y - np.median(y)) < 0.5 * y.std()) > 0.383 + 0.1
    assert np.abs(y).max() <= math.degrees(dv.MAX_WHEEL_ANGLE) + 1e-9
