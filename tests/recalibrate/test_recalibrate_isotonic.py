"""Isotonic recalibration (Kuleshov, Fenner & Ermon 2018) against scikit-learn's isotonic fit
and by the uniformity of fresh PITs.

Tolerances: knots vs a direct IsotonicRegression fit 1e-12; fresh PITs (5000 calibration,
20 000 test points): Kolmogorov-Smirnov distance from uniform below the two-sample
critical value at p = 1e-4, 2.15 sqrt(1/5000 + 1/20000) = 0.034 (measured: 0.012 and 0.011 after,
0.42 and 0.33 before);
calibration error (mean |ECDF - p|) below 0.015 after (measured 0.004, 0.005), above 0.1 before
(0.24, 0.12).
"""

import numpy as np
import pytest
from scipy import stats
from sklearn.isotonic import IsotonicRegression

from dubito.metrics import calibration_error, pit
from dubito.predictive import GaussianMixture, Normal
from dubito.recalibrate.isotonic import isotonic_knots
from dubito.recalibrate.recalibrator import Recalibrator


def _biased_narrow(rng, n):
    mu = rng.normal(0, 2, n)
    s = rng.uniform(0.5, 2.0, n)
    y = mu + s * rng.standard_normal(n)
    return Normal(mu + 0.7 * s, (0.5 * s) ** 2), y


def _wide_symmetric_mixture(rng, n):
    mu = rng.normal(0, 1, n)
    comp = rng.uniform(size=n) < 0.3
    y = mu + np.where(comp, 2.0 + 0.5 * rng.standard_normal(n), 0.4 * rng.standard_normal(n))
    return GaussianMixture([0.5, 0.5], np.column_stack([mu - 1.0, mu + 1.0]), np.full((n, 2), 2.0)), y


def test_knots_are_the_isotonic_fit_of_the_pit_ecdf():
    rng = np.random.default_rng(0)
    p = rng.beta(0.5, 2.0, 300)
    u, h = isotonic_knots(p, epsilon=0.0, max_knots=None)
    ecdf = np.searchsorted(np.sort(p), p, side="right") / p.size
    ref = IsotonicRegression(increasing=True, y_min=0, y_max=1).fit(p, ecdf)
    np.testing.assert_array_equal(u[1:-1], np.sort(p))
    np.testing.assert_allclose(h[1:-1], ref.predict(np.sort(p)), rtol=0, atol=1e-12)
    np.testing.assert_allclose(h[1:-1], np.arange(1, 301) / 300, rtol=0, atol=1e-12)  # Kuleshov's P_hat
    assert (u[0], h[0], u[-1], h[-1]) == (0, 0, 1, 1)


def test_default_mixes_identity_with_share_one_over_n_plus_one():
    rng = np.random.default_rng(1)
    p = rng.uniform(size=99)
    u0, h0 = isotonic_knots(p, epsilon=0.0, max_knots=None)
    u, h = isotonic_knots(p, max_knots=None)
    np.testing.assert_array_equal(u, u0)
    np.testing.assert_allclose(h, (1 - 0.01) * h0 + 0.01 * u0, rtol=0, atol=1e-15)
    assert np.all(np.diff(h) > 0)


def test_ties_give_one_knot_per_distinct_pit():
    p = np.array([0.2, 0.2, 0.2, 0.5, 0.7, 0.7])
    u, h = isotonic_knots(p, epsilon=0.0, max_knots=None)
    np.testing.assert_array_equal(u, [0, 0.2, 0.5, 0.7, 1])
    np.testing.assert_allclose(h, [0, 0.5, 4 / 6, 1, 1])


def test_epsilon_keeps_a_density_beyond_the_largest_calibration_pit():
    rng = np.random.default_rng(2)
    pred, y = _biased_narrow(rng, 500)
    test = Normal(np.zeros(1), np.ones(1))
    flat = Recalibrator("isotonic", epsilon=0.0).fit(pred, y).transform(test)
    mixed = Recalibrator("isotonic").fit(pred, y).transform(test)
    far = np.array([40.0])  # F(far) = 1 lies beyond every calibration PIT
    assert flat.log_prob(far)[0] == -np.inf
    assert np.isfinite(mixed.log_prob(far)[0])
    np.testing.assert_allclose(mixed.log_prob(far), np.log(1 / 501) + test.log_prob(far), rtol=1e-12)


def test_thinning_keeps_first_last_and_at_most_max_knots():
    p = np.random.default_rng(3).uniform(size=1000)
    u, h = isotonic_knots(p, max_knots=100)
    assert 90 <= u.size - 2 <= 100 and u[1] == p.min() and u[-2] == p.max()
    assert np.all(np.diff(u) > 0) and np.all(np.diff(h) > 0)


@pytest.mark.parametrize("make", [_biased_narrow, _wide_symmetric_mixture])
def test_fresh_pits_are_uniform_after_recalibration(make):
    rng = np.random.default_rng(7)
    n, m = 5000, 20_000
    pred, y = make(rng, n + m)
    cal, test = pred[np.arange(n)], pred[np.arange(n, n + m)]
    g = Recalibrator("isotonic").fit(cal, y[:n]).transform(test)
    before, after = pit(test, y[n:]), pit(g, y[n:])
    ks_before = stats.kstest(before, "uniform").statistic
    ks_after = stats.kstest(after, "uniform").statistic
    assert ks_before > 0.1
    assert ks_after < 2.15 * np.sqrt(1 / n + 1 / m)
    assert calibration_error(test, y[n:]) > 0.1
    assert calibration_error(g, y[n:]) < 0.015


def test_auto_thinning_keeps_every_point_in_the_tails_and_grows_segments_inwards():
    from dubito.recalibrate.isotonic import tail_preserving_indices

    idx = tail_preserving_indices(2000)
    lower = idx[idx < 1000]
    # steps max(1, floor(0.3 (i + 1))) from index i: 0..5 one apart, then 2, 2, 3, 3, 4, ...
    np.testing.assert_array_equal(lower[:9], [0, 1, 2, 3, 4, 5, 6, 8, 10])
    np.testing.assert_array_equal(np.diff(lower), [max(1, int(0.3 * (i + 1))) for i in lower[:-1]])
    np.testing.assert_array_equal(idx[idx > 1000], (1999 - lower)[::-1][: (idx > 1000).sum()])
    assert idx[0] == 0 and idx[-1] == 1999 and np.all(np.diff(idx) > 0)
    assert 50 <= idx.size <= 56  # about 2 ln(n/8)/ln(1.3) + 12 = 54
    for m in (2, 3, 4, 7):  # tiny sets keep every point
        np.testing.assert_array_equal(tail_preserving_indices(m), np.arange(m))


def test_auto_thinning_reads_the_isotonic_fit_at_its_knots():
    p = np.random.default_rng(4).beta(0.5, 2.0, 400)
    u_all, h_all = isotonic_knots(p, max_knots=None)
    u, h = isotonic_knots(p)  # "auto"
    assert 30 <= u.size <= 50
    np.testing.assert_array_equal(np.sort(p)[:6], u[1:7])  # the six smallest PITs are knots
    np.testing.assert_array_equal(np.sort(p)[-6:], u[-7:-1])
    np.testing.assert_allclose(h, np.interp(u, u_all, h_all), rtol=0, atol=1e-15)


def test_pits_closer_than_the_rounding_of_h_leave_no_flat_segment():
    # PITs 1e-51 and 1e-22 differ by eps * 1e-22 in H, below its rounding at H ~ 0.01: once a
    # flat segment and log density -inf for a new point between them (a t(3) outlier)
    p = np.concatenate([[1e-51, 1e-22, 4e-16], np.random.default_rng(5).uniform(size=97)])
    u, h = isotonic_knots(p, max_knots=None)
    assert np.all(np.diff(u) > 0) and np.all(np.diff(h) > 0)
    pred = Normal(np.zeros(1), np.ones(1))
    g = Recalibrator("isotonic", max_knots=None).fit(Normal(np.zeros(100), np.ones(100)),
                                                     stats.norm.ppf(p).clip(-40)).transform(pred)
    y = np.array([stats.norm.ppf(1e-30)])
    assert np.isfinite(g.log_prob(y)[0])


def test_auto_knots_lose_less_log_score_than_every_point_at_the_same_coverage():
    # an already calibrated N(x, 1), n = 200: every point as a knot costs 0.42 nats of log score
    # (seed 0: 1.842 against the base's 1.425), "auto" 0.09 (1.514); tolerance: auto beats every
    # point by >= 0.2 nats with its 95 % coverage within 0.01 of every point's (measured: equal, 0.965)
    rng = np.random.default_rng(0)
    n, m = 200, 4000
    x = rng.normal(size=n + m)
    y = x + rng.normal(size=n + m)
    pred = Normal(x, np.ones(n + m))
    cal, test = pred[np.arange(n)], pred[np.arange(n, n + m)]
    every = Recalibrator("isotonic", max_knots=None).fit(cal, y[:n]).transform(test)
    auto = Recalibrator("isotonic").fit(cal, y[:n]).transform(test)
    nll_every, nll_auto = -every.log_prob(y[n:]).mean(), -auto.log_prob(y[n:]).mean()
    assert nll_auto < nll_every - 0.2, (nll_auto, nll_every)
    cov = [np.mean((y[n:] >= lo) & (y[n:] <= hi)) for lo, hi in (g.interval(0.95) for g in (every, auto))]
    assert abs(cov[0] - cov[1]) <= 0.01, cov
