"""Threshold metrics of the IC-NLM paper against brute force (spec §3.4, §6.11, §7.12)."""
from __future__ import annotations

import numpy as np
import pytest

from dubito.metrics import (
    PAPER_NAIVE_ACCURACY,
    PAPER_THRESHOLDS,
    accuracy,
    error_variance_curve,
    matched_thresholds,
)
from dubito.predictive.normal import Normal


def _brute_accuracy(point, y, t):
    return sum(abs(yi - pi) <= t for yi, pi in zip(y, point)) / len(y)


def test_paper_constants():
    assert PAPER_THRESHOLDS == (6.0, 2.0)
    assert PAPER_NAIVE_ACCURACY == (0.9321, 0.6512)


def test_accuracy_matches_brute_force_on_predictive_and_points():
    rng = np.random.default_rng(0)
    y = rng.standard_t(3, 300) * 3
    mean = y + rng.normal(0, 2, 300)
    pred = Normal(mean, np.ones(300))
    ts = [0.0, 0.5, 2.0, 6.0, 100.0]
    got = accuracy(pred, y, ts)
    assert got.shape == (5,)
    for t, g in zip(ts, got):
        assert g == pytest.approx(_brute_accuracy(mean, y, t), abs=1e-15)
        assert accuracy(mean, y, t) == g  # array of point predictions: the same
    assert isinstance(accuracy(pred, y, 2.0), float)
    assert got[-1] == 1.0


def test_accuracy_threshold_is_inclusive():
    y = np.array([2.0, -2.0, 6.0, 6.5, 0.0])
    point = np.zeros(5)
    # |e| = 2, 2, 6, 6.5, 0: at t = 2 three points (2, 2, 0); at t = 6 four (the code's <= 6)
    assert accuracy(point, y, 2.0) == pytest.approx(3 / 5)
    assert accuracy(point, y, 6.0) == pytest.approx(4 / 5)
    assert accuracy(point, y, np.nextafter(2.0, 0)) == pytest.approx(1 / 5)


def test_accuracy_bad_input():
    with pytest.raises(ValueError, match="non-negative"):
        accuracy(np.zeros(3), np.zeros(3), -1.0)
    with pytest.raises(ValueError, match="shape"):
        accuracy(np.zeros(3), np.zeros(4), 1.0)
    with pytest.raises(ValueError, match="finite"):
        accuracy(np.array([0.0, np.nan]), np.zeros(2), 1.0)


def test_matched_thresholds_are_the_smallest_reaching_the_accuracy():
    rng = np.random.default_rng(1)
    y = rng.laplace(0.3, 2.0, 997)
    for c in (0.0, float(y.mean())):
        t = matched_thresholds(y, c)
        assert t.shape == (2,) and t[0] > t[1] > 0
        d = np.abs(y - c)
        for a, tk in zip(PAPER_NAIVE_ACCURACY, t):
            # brute force: the smallest observed deviation whose share reaches a
            best = min(v for v in d if np.mean(d <= v) >= a)
            assert tk == best
            assert accuracy(np.full_like(y, c), y, tk) >= a
            assert np.mean(d < tk) < a  # any smaller threshold falls short


def test_matched_thresholds_exact_fraction_and_errors():
    y = np.arange(1.0, 101.0)  # |y - 0| = 1..100: share(<= t) = t/100
    assert matched_thresholds(y, 0.0, [0.5, 0.93, 1.0]).tolist() == [50.0, 93.0, 100.0]
    with pytest.raises(ValueError, match=r"fractions in \(0, 1\]"):
        matched_thresholds(y, 0.0, [93.21])
    with pytest.raises(ValueError, match="finite"):
        matched_thresholds(np.array([1.0, np.inf]))
    with pytest.raises(ValueError, match="center"):
        matched_thresholds(y, float("nan"))


def _brute_curve(var, sq, nu):
    mse, kept = [], []
    for v in nu:
        keep = [s for s, vi in zip(sq, var) if vi <= v]
        mse.append(np.mean(keep) if keep else np.nan)
        kept.append(len(keep) / len(sq))
    return np.array(mse), np.array(kept)


def test_error_variance_curve_matches_brute_force():
    rng = np.random.default_rng(2)
    n = 200
    var = rng.choice([0.5, 1.0, 2.0, 3.0], n) * rng.uniform(0.9, 1.1, n)
    mean = rng.normal(size=n)
    y = mean + rng.normal(size=n) * np.sqrt(var)
    pred = Normal(mean, var)
    nu = np.array([0.0, 0.4, 0.5, 1.0, 1.5, 2.5, 10.0])
    c = error_variance_curve(pred, y, nu)
    mse, kept = _brute_curve(var, (y - mean) ** 2, nu)
    np.testing.assert_array_equal(c.thresholds, nu)
    np.testing.assert_allclose(c.mse, mse, rtol=1e-12, equal_nan=True)
    np.testing.assert_array_equal(c.kept, kept)
    assert np.isnan(c.mse[0]) and c.kept[0] == 0 and c.kept[-1] == 1
    # default thresholds: quantiles of the variances, the last keeping every point
    d = error_variance_curve(pred, y, n_thresholds=11)
    assert d.thresholds.size == 11 and d.kept[-1] == 1.0 and d.kept[0] >= 1 / n
    assert d.mse[-1] == pytest.approx(np.mean((y - mean) ** 2))


def test_error_variance_thresholds_inclusive():
    var = np.array([1.0, 2.0, 2.0, 4.0])
    mean = np.zeros(4)
    y = np.array([1.0, 2.0, 3.0, 4.0])
    c = error_variance_curve(Normal(mean, var), y, [2.0])
    assert c.kept[0] == 0.75  # both points with variance exactly 2 are kept
    assert c.mse[0] == pytest.approx((1 + 4 + 9) / 3)


def test_error_variance_curve_monotone_for_an_oracle():
    """Spec §6.11: with the true variances the curve rises with nu. Exact oracle: every squared
    error equals its variance, so the MSE over {var <= nu} is a running mean of sorted values.
    Noisy oracle (seed 3, n = 20,000): squared errors var * chi2_1, curve at 20 quantile
    thresholds rising in every step by more than -0.02 (tolerance of a few standard errors of
    the running means, each over >= 1,000 points) and overall from ~0.5 to ~mean var."""
    rng = np.random.default_rng(3)
    n = 20_000
    var = rng.uniform(0.1, 4.0, n)
    mean = np.zeros(n)
    exact = error_variance_curve(Normal(mean, var), np.sqrt(var), n_thresholds=40)
    assert np.all(np.diff(exact.mse) >= 0)
    y = rng.normal(size=n) * np.sqrt(var)
    noisy = error_variance_curve(Normal(mean, var), y, np.quantile(var, np.linspace(0.05, 1, 20)))
    assert np.all(np.diff(noisy.mse) > -0.02)
    assert noisy.mse[0] < 0.5 and noisy.mse[-1] == pytest.approx(var.mean(), rel=0.05)
    # an uninformative variance (shuffled) gives a flat curve: no rise beyond noise
    flat = error_variance_curve(Normal(mean, rng.permutation(var)), y, n_thresholds=20)
    assert abs(flat.mse[3] - flat.mse[-1]) < 0.35


def test_error_variance_bad_input():
    pred = Normal(np.zeros(3), np.ones(3))
    with pytest.raises(ValueError, match="non-negative"):
        error_variance_curve(pred, np.zeros(3), [-1.0])
    with pytest.raises(ValueError, match="n_thresholds"):
        error_variance_curve(pred, np.zeros(3), n_thresholds=0)
    with pytest.raises(TypeError, match="RegressionPredictive"):
        error_variance_curve(np.zeros(3), np.zeros(3))
