"""dubito.metrics.calibration: PIT, coverage, width, calibration curve/error, marginal calibration.

Statistical checks draw y from a known predictive with a fixed seed; tolerances are stated
per test (binomial standard errors, KS p-values, analytic limits).
"""

import numpy as np
import pytest
import torch
from scipy import integrate, special, stats

from dubito.metrics import (
    DEFAULT_LEVELS,
    CalibrationCurve,
    MarginalCalibration,
    calibration_curve,
    calibration_error,
    coverage,
    marginal_calibration,
    pit,
    width,
)
from dubito.predictive.mixture import GaussianMixture
from dubito.predictive.normal import Normal


def _hetero_normal(seed, n):
    """A heteroscedastic Normal predictive and y drawn from it (so it is the true model)."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-3, 3, n)
    pred = Normal(np.sin(x) * 2, (0.2 + 0.5 * np.abs(x)) ** 2)
    y = pred.sample(1, generator=rng)[0]
    return pred, y


# ---------------------------------------------------------------------------- PIT
def test_pit_is_the_cdf_at_y():
    pred = Normal([0.0, 1.0, -2.0], [1.0, 4.0, 0.25])
    y = np.array([0.0, 3.0, -2.5])
    np.testing.assert_allclose(pit(pred, y), stats.norm.cdf(y, [0, 1, -2], [1, 2, 0.5]), rtol=1e-14)


def test_pit_uniform_for_the_true_model():
    pred, y = _hetero_normal(0, 3000)
    assert stats.kstest(pit(pred, y), "uniform").pvalue > 0.01
    # also for a bimodal mixture predictive
    rng = np.random.default_rng(1)
    n = 2000
    mix = GaussianMixture([0.3, 0.7], np.c_[rng.normal(-2, 1, n), rng.normal(2, 1, n)], np.tile([0.3, 0.8], (n, 1)))
    assert stats.kstest(pit(mix, mix.sample(1, generator=rng)[0]), "uniform").pvalue > 0.01


def test_pit_non_uniform_when_miscalibrated():
    pred, y = _hetero_normal(0, 3000)
    too_wide = Normal(pred.mean, 4 * pred.var)
    too_narrow = Normal(pred.mean, pred.var / 4)
    assert stats.kstest(pit(too_wide, y), "uniform").pvalue < 1e-6
    assert stats.kstest(pit(too_narrow, y), "uniform").pvalue < 1e-6


# ---------------------------------------------------------------------------- coverage, width
def test_coverage_within_binomial_tolerance_for_the_true_model():
    n = 20_000
    pred, y = _hetero_normal(2, n)
    levels = np.array(DEFAULT_LEVELS)
    cov = coverage(pred, y)
    assert isinstance(cov, np.ndarray) and cov.shape == levels.shape
    se = np.sqrt(levels * (1 - levels) / n)
    assert np.all(np.abs(cov - levels) < 4 * se), (cov, levels)
    # too-wide predictive over-covers: coverage of the 50% interval = P(|Z| < 2 z_.75)
    wide = coverage(Normal(pred.mean, 4 * pred.var), y, 0.5)
    expected = 2 * special.ndtr(2 * special.ndtri(0.75)) - 1
    assert abs(wide - expected) < 4 * np.sqrt(expected * (1 - expected) / n)


def test_coverage_scalar_level_and_closed_interval():
    pred = Normal([0.0, 0.0, 0.0], [1.0, 1.0, 1.0])
    z = special.ndtri(0.95)
    y = np.array([z, -z, z + 1e-9])  # on both end points (counted) and just outside (not)
    lo, hi = pred.interval(0.9)
    y[0], y[1] = hi[0], lo[1]
    c = coverage(pred, y, 0.9)
    assert isinstance(c, float) and c == pytest.approx(2 / 3, abs=1e-15)
    with pytest.raises(ValueError, match="between 0 and 1"):
        coverage(pred, y, [0.5, 1.0])


def test_width_of_normal_interval_is_two_z_sigma():
    rng = np.random.default_rng(3)
    sd = rng.uniform(0.1, 3.0, 50)
    pred = Normal(rng.normal(size=50), sd**2)
    levels = (0.5, 0.8, 0.95)
    expected = [np.mean(2 * special.ndtri((1 + lv) / 2) * sd) for lv in levels]
    np.testing.assert_allclose(width(pred, levels), expected, rtol=1e-13)
    w = width(pred, 0.9)
    assert isinstance(w, float) and w == pytest.approx(np.mean(2 * 1.6448536269514722 * sd), rel=1e-13)


# ---------------------------------------------------------------------------- calibration curve / error
def test_calibration_curve_is_the_pit_ecdf_on_midpoints():
    pred, y = _hetero_normal(4, 500)
    curve = calibration_curve(pred, y, n_levels=10)
    assert isinstance(curve, CalibrationCurve)
    nominal, observed = curve  # unpacks
    np.testing.assert_allclose(nominal, np.arange(0.05, 1.0, 0.1), rtol=1e-12)
    u = pit(pred, y)
    np.testing.assert_array_equal(observed, np.mean(u[:, None] <= nominal[None, :], axis=0))
    # hand case: PIT values exactly 0.1, 0.2, 0.6, 0.9 -> ECDF at 0.25 is 1/2, at 0.75 is 3/4
    small = Normal(np.zeros(4), np.ones(4))
    y4 = special.ndtri([0.1, 0.2, 0.6, 0.9])
    np.testing.assert_allclose(calibration_curve(small, y4, n_levels=2).observed, [0.5, 0.75])
    # mean |gap| = (|0.5 - 0.25| + |0.75 - 0.75|) / 2
    assert calibration_error(small, y4, n_levels=2) == pytest.approx(0.125, abs=1e-15)


def test_calibration_error_small_when_right_large_when_wrong():
    pred, y = _hetero_normal(5, 10_000)
    right = calibration_error(pred, y)
    assert right < 0.015
    # predictive variance x4 (sd x2): PIT = Phi(Z/2), whose CDF is G(p) = Phi(2 Phi^{-1}(p));
    # the limit of the error is int_0^1 |G(p) - p| dp (~0.096)
    wrong = calibration_error(Normal(pred.mean, 4 * pred.var), y)
    limit = integrate.quad(lambda p: abs(special.ndtr(2 * special.ndtri(p)) - p), 0, 1, limit=200)[0]
    assert 0.08 < limit < 0.11
    assert abs(wrong - limit) < 0.01
    assert wrong > 5 * right


# ---------------------------------------------------------------------------- marginal calibration
def test_marginal_calibration_definition_on_given_grid():
    pred, y = _hetero_normal(6, 300)
    grid = np.array([-3.0, -1.0, 0.0, 0.5, 2.0])
    mc = marginal_calibration(pred, y, grid=grid)
    assert isinstance(mc, MarginalCalibration)
    np.testing.assert_array_equal(mc.grid, grid)
    expected_f = [np.mean(stats.norm.cdf(t, pred.mean, pred.std)) for t in grid]
    np.testing.assert_allclose(mc.forecast, expected_f, rtol=1e-12)
    np.testing.assert_array_equal(mc.empirical, [np.mean(y <= t) for t in grid])
    assert mc.max_gap == pytest.approx(np.max(np.abs(mc.forecast - mc.empirical)), abs=0)


def test_marginal_calibration_gap_small_when_right_large_when_shifted():
    n = 5000
    pred, y = _hetero_normal(7, n)
    right = marginal_calibration(pred, y)
    assert right.grid.shape == (200,)
    # E[G_hat(t)] = F_bar(t) and sd <= 1/(2 sqrt(N)) = 0.007; sup over the grid well under 0.03
    assert right.max_gap < 0.03
    shifted = marginal_calibration(Normal(pred.mean + 1.5, pred.var), y)
    assert shifted.max_gap > 0.2


def test_calibration_inputs_validated_and_torch_accepted():
    pred, y = _hetero_normal(8, 40)
    with pytest.raises(ValueError, match=r"y must have shape \(40,\)"):
        pit(pred, y[:-1])
    with pytest.raises(ValueError, match=r"y must have shape \(40,\)"):
        coverage(pred, np.r_[y, 0.0])
    with pytest.raises(ValueError, match="finite"):
        calibration_error(pred, np.where(np.arange(40) == 3, np.inf, y))
    with pytest.raises(ValueError, match="grid"):
        marginal_calibration(pred, y, grid=[])
    with pytest.raises(ValueError, match="n_levels"):
        calibration_curve(pred, y, n_levels=0)
    np.testing.assert_array_equal(pit(pred, torch.tensor(y)), pit(pred, y))
    np.testing.assert_array_equal(coverage(pred, torch.tensor(y)), coverage(pred, y))
