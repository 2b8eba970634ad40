"""The 1-D data of Pequignot et al. and the paper's one UCI split (spec ood-predictor-entropy §4, §7 test 13)."""
from __future__ import annotations

import numpy as np
import pytest

from dubito.data import load
from dubito.data.ood_synthetic import (
    LEFT,
    OOD_INTERVAL,
    RIGHT,
    Standardiser,
    make_wave,
    paper_split,
    standardise_split,
    wave_function,
)


def test_wave_has_60_plus_60_points_in_the_two_intervals():
    X, y = make_wave(seed=0)
    assert X.shape == (120, 1) and y.shape == (120,)
    x = X[:, 0]
    assert np.all((x[:60] >= LEFT[0]) & (x[:60] <= LEFT[1]))
    assert np.all((x[60:] >= RIGHT[0]) & (x[60:] <= RIGHT[1]))
    assert not np.any((x > -0.5) & (x < 0.5))  # the gap


def test_wave_noise_sd_is_0_1():
    """Residuals about cos(4(x + 0.2)): over 20 seeds x 120 points (n = 2400) the sample sd of a
    N(0, 0.1^2) is within 0.1 +- 0.006 (about 4 standard errors, se = 0.1/sqrt(2 n) = 0.0014); mean ~ 0."""
    res = np.concatenate([y - wave_function(X[:, 0]) for X, y in (make_wave(seed=s) for s in range(20))])
    assert abs(res.std(ddof=1) - 0.1) < 0.006
    assert abs(res.mean()) < 4 * 0.1 / np.sqrt(res.size)
    X0, y0 = make_wave(noise_sd=0.0, seed=3)
    np.testing.assert_allclose(y0, np.cos(4 * (X0[:, 0] + 0.2)), rtol=0, atol=1e-15)


def test_wave_is_seeded():
    a, b, c = make_wave(seed=1), make_wave(seed=1), make_wave(seed=2)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    assert not np.array_equal(a[0], c[0])


def test_registry_ood_wave():
    ds = load("ood-wave")
    X_tr, y_tr, X_te, y_te = ds.split(0)
    X, y = make_wave(seed=0)
    assert np.array_equal(X_tr, X) and np.array_equal(y_tr, y)
    assert X_te.shape == (120, 1) and not np.array_equal(X_te, X_tr)
    assert ds.meta["ood_interval"] == list(OOD_INTERVAL) == [-4.0, 2.0]
    assert ds.meta["standardise"] is False
    for key in ("source", "licence", "citation"):
        assert ds.meta[key]
    np.testing.assert_allclose(ds.meta["eta"], wave_function(ds.X[:, 0]))


@pytest.mark.parametrize("bad", [dict(n_per_side=0), dict(noise_sd=-1.0), dict(seed=-1), dict(seed=1.5)])
def test_wave_bad_input(bad):
    with pytest.raises(ValueError):
        make_wave(**bad)


def test_paper_split_is_sklearns_and_boston_455_51():
    from sklearn.model_selection import train_test_split

    tr, te = paper_split(506)
    assert (len(tr), len(te)) == (455, 51)
    a, b = train_test_split(np.arange(506), test_size=0.1, random_state=42)
    assert np.array_equal(tr, a) and np.array_equal(te, b)
    assert np.intersect1d(tr, te).size == 0 and np.union1d(tr, te).size == 506


def test_paper_split_on_boston(uci_dir):
    ds = load("boston")
    tr, te = paper_split(ds.n_samples)
    assert (len(tr), len(te)) == (455, 51)


def test_standardisation_uses_training_statistics_only():
    """StandardScaler fitted on the training rows is the oracle; changing the test rows changes nothing
    of the training statistics; constant columns keep sd 1."""
    from sklearn.preprocessing import StandardScaler

    rng = np.random.default_rng(0)
    X = rng.normal(3.0, 2.0, size=(100, 4))
    X[:, 2] = 7.0  # constant (naval has two such columns)
    y = rng.normal(10.0, 5.0, size=100)
    tr, te = paper_split(100)
    Xs_tr, ys_tr, Xs_te, ys_te, st = standardise_split(X[tr], y[tr], X[te], y[te])
    sc = StandardScaler().fit(X[tr])
    np.testing.assert_allclose(Xs_tr, sc.transform(X[tr]), atol=1e-12)
    np.testing.assert_allclose(Xs_te, sc.transform(X[te]), atol=1e-12)
    assert np.all(Xs_tr[:, 2] == 0) and st.x_scale[2] == 1.0
    assert st.y_mean == pytest.approx(y[tr].mean()) and st.y_scale == pytest.approx(y[tr].std())
    np.testing.assert_allclose(ys_te, (y[te] - y[tr].mean()) / y[tr].std())
    assert abs(ys_tr.mean()) < 1e-12 and ys_tr.std() == pytest.approx(1.0)
    # test rows do not move the statistics
    _, _, _, _, st2 = standardise_split(X[tr], y[tr], X[te] + 100.0, y[te] - 50.0)
    np.testing.assert_array_equal(st.x_mean, st2.x_mean)
    assert st.y_scale == st2.y_scale
    np.testing.assert_allclose(st.y_inverse(ys_te), y[te])


def test_standardiser_bad_input():
    with pytest.raises(ValueError, match="constant"):
        Standardiser.fit(np.ones((5, 2)), np.ones(5))
    with pytest.raises(ValueError, match="NaN"):
        Standardiser.fit(np.array([[1.0], [np.nan]]), np.array([1.0, 2.0]))
    with pytest.raises(ValueError, match="test_size"):
        paper_split(10, test_size=1.5)
