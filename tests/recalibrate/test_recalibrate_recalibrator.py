"""The Recalibrator facade: every predictive family, fitted attributes, scikit-learn habits,
coverage on each family, bad input.

Coverage per family: one draw of 2000 calibration and 4000 test points from a process the
base predictive gets wrong; the conformal 90 % coverage must lie within 4 binomial-plus-
calibration sd of [0.90, 0.90 + 2/2001 + 1/400] (the thinned map may add up to ~1/400 per
tail), sd^2 = L(1-L)(1/4000 + 1/2002).
"""

import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.exceptions import NotFittedError

from dubito.metrics import coverage, nll, regression_summary
from dubito.predictive import (
    GaussianMixture,
    GridDensity,
    Normal,
    RegressionPredictive,
    Samples,
)
from dubito.recalibrate.recalibrator import Recalibrator
from dubito.recalibrate.warped import WarpedPredictive


def _truth(rng, n):
    mu = rng.normal(0, 2, n)
    s = rng.uniform(0.5, 1.5, n)
    return mu, s, mu + s * rng.standard_normal(n)


def _as_normal(mu, s, rng):  # a user's own Normal(mean, var) from plain arrays, too narrow
    return Normal(mu + 0.3 * s, (0.6 * s) ** 2)


def _as_torch_normal(mu, s, rng):  # the same from (float32) tensors
    return Normal(torch.tensor(mu + 0.3 * s, dtype=torch.float32), torch.tensor((0.6 * s) ** 2))


def _as_mixture(mu, s, rng):
    return GaussianMixture([0.5, 0.5], np.column_stack([mu - s, mu + s]), np.column_stack([s, s]) ** 2)


def _as_samples(mu, s, rng):
    return Samples(mu + 0.4 * s * rng.standard_normal((30, mu.size)), noise_std=0.3 * s)


def _as_grid(mu, s, rng):
    z = np.linspace(-6, 6, 121)
    dens = np.exp(-0.5 * (z / 0.7) ** 2) * (1 + 0.5 * np.tanh(z))[None, :]  # skewed, narrow
    return GridDensity(mu[:, None] + s[:, None] * z[None, :], np.broadcast_to(dens, (mu.size, z.size)))


FAMILIES = {
    "normal": _as_normal,
    "torch-normal": _as_torch_normal,
    "mixture": _as_mixture,
    "samples": _as_samples,
    "grid": _as_grid,
}


@pytest.mark.parametrize("method", ["conformal", "isotonic"])
@pytest.mark.parametrize("family", list(FAMILIES))
def test_every_family_recalibrates(family, method):
    rng = np.random.default_rng(list(FAMILIES).index(family))
    n, m = 2000, 4000
    mu, s, y = _truth(rng, n + m)
    pred = FAMILIES[family](mu, s, rng)
    cal, test = pred[np.arange(n)], pred[np.arange(n, n + m)]
    rec = Recalibrator(method).fit(cal, y[:n])
    g = rec.transform(test)
    assert isinstance(g, WarpedPredictive) and len(g) == m and g.base is test
    few = np.arange(300)  # every metric, on a few points (moments and CRPS cost N x knots)
    summary = regression_summary(g[few], y[n:][few])
    assert all(np.isfinite(v) for v in summary.values()), summary
    assert np.all(np.isfinite(nll(g, y[n:])))  # a density everywhere, extreme points included
    c = coverage(g, y[n:], 0.9)
    sd = np.sqrt(0.09 * (1 / m + 1 / (n + 2)))
    if method == "conformal":
        assert 0.9 - 4 * sd <= c <= 0.9 + 2 / (n + 1) + 1 / 400 + 4 * sd, c
    else:  # no finite-sample guarantee, but calibrated on the same process
        assert abs(c - 0.9) <= 4 * sd, c


def test_fitted_attributes_and_params():
    rng = np.random.default_rng(0)
    mu, s, y = _truth(rng, 300)
    pred = _as_normal(mu, s, rng)
    rec = Recalibrator("conformal", level=0.9).fit(pred, y)
    assert rec.n_calibration_ == 300
    np.testing.assert_array_equal(rec.pit_, pred.cdf(y))
    assert rec.knots_u_[0] == 0 and rec.knots_u_[-1] == 1 and np.all(np.diff(rec.knots_h_) > 0)
    assert rec.coverage_levels_ == pytest.approx((1 / 301, 1 - 2 / 301))  # n even
    assert rec.get_params() == {"method": "conformal", "level": 0.9, "max_knots": "auto", "epsilon": None}
    assert clone(rec).get_params() == rec.get_params()
    same = Recalibrator("conformal").fit(pred, torch.tensor(y))  # targets as a tensor
    np.testing.assert_array_equal(same.knots_h_, rec.knots_h_)
    np.testing.assert_allclose(rec.warp(rec.knots_u_), rec.knots_h_)
    iso = Recalibrator("isotonic").fit(pred, y)
    assert iso.coverage_levels_ is None and iso.knots_u_.size <= 102
    assert Recalibrator("conformal", max_knots=None).fit(pred, y).knots_u_.size == 2 + 2 * ((300 - 2) // 2)


def test_recalibrating_twice_composes():
    rng = np.random.default_rng(1)
    mu, s, y = _truth(rng, 500)
    pred = _as_normal(mu, s, rng)
    first = Recalibrator("isotonic").fit(pred, y)
    g1 = first.transform(pred)
    second = Recalibrator("conformal").fit(g1, y)
    g2 = second.transform(g1)
    assert g2.base is pred
    t = np.linspace(-5, 5, 7)[None, :]
    # the composed knots are pre-images H1^{-1}(u2), exact up to rounding times H1's slope
    np.testing.assert_allclose(g2.cdf(t), second.warp(first.warp(pred.cdf(t))), rtol=0, atol=1e-9)


# ------------------------------------------------------------------ bad input
def _cal(n=50):
    rng = np.random.default_rng(2)
    mu, s, y = _truth(rng, n)
    return _as_normal(mu, s, rng), y


def test_transform_before_fit():
    pred, _ = _cal()
    with pytest.raises(NotFittedError):
        Recalibrator().transform(pred)


def test_length_mismatch():
    pred, y = _cal()
    with pytest.raises(ValueError, match="pred_cal has 50 inputs but y_cal has 49 responses"):
        Recalibrator().fit(pred, y[:-1])


def test_too_few_points_for_the_level_says_how_many():
    pred, y = _cal(5)
    with pytest.raises(ValueError, match="central 99 % interval needs at least 199 calibration points.*got 5"):
        Recalibrator(level=0.99).fit(pred, y)
    pred, y = _cal(18)
    with pytest.raises(ValueError, match="needs at least 19 calibration points"):
        Recalibrator(level=0.9).fit(pred, y)
    Recalibrator(level=0.9).fit(*_cal(19))  # 1 - 2/20 = 0.9: allowed
    with pytest.raises(ValueError, match="at least 4 calibration points"):
        Recalibrator().fit(*_cal(3))
    with pytest.raises(ValueError, match="at least 2 calibration points"):
        Recalibrator("isotonic").fit(*_cal(1))


@pytest.mark.parametrize("level", [0.0, 1.0, -0.5, 2.0, np.nan, "high"])
def test_level_outside_open_interval(level):
    with pytest.raises(ValueError, match="level must"):
        Recalibrator(level=level).fit(*_cal())


def test_nan_in_targets_or_predictions():
    pred, y = _cal()
    bad = y.copy()
    bad[7] = np.inf
    with pytest.raises(ValueError, match="y_cal must be finite.*first at index 7"):
        Recalibrator().fit(pred, bad)

    class NanPit(RegressionPredictive):  # a user predictive whose CDF returns NaN
        mean = property(lambda self: np.zeros(50))
        var = property(lambda self: np.ones(50))
        _log_prob = lambda self, y: np.zeros_like(y)
        _cdf = lambda self, y: np.where(np.arange(50)[:, None] == 4, np.nan, 0.5 + 0 * y)
        _subset = lambda self, i: self

    with pytest.raises(ValueError, match="calibration PITs.*NaN in the predictions.*first at index 4"):
        Recalibrator().fit(NanPit(), y)

    class NanMean(NanPit):
        mean = property(lambda self: np.full(50, np.nan))

    rec = Recalibrator().fit(pred, y)
    with pytest.raises(ValueError, match="predictive means of pred must be finite"):
        rec.transform(NanMean())


def test_bad_settings_and_types():
    pred, y = _cal()
    with pytest.raises(ValueError, match="method must be one of"):
        Recalibrator("platt").fit(pred, y)
    with pytest.raises(ValueError, match="epsilon applies to method='isotonic' only"):
        Recalibrator("conformal", epsilon=0.1).fit(pred, y)
    with pytest.raises(ValueError, match="epsilon must lie in"):
        Recalibrator("isotonic", epsilon=1.0).fit(pred, y)
    with pytest.raises(ValueError, match="max_knots"):
        Recalibrator(max_knots=1).fit(pred, y)
    with pytest.raises(ValueError, match="max_knots"):
        Recalibrator(max_knots="many").fit(pred, y)
    with pytest.raises(TypeError, match="pred_cal must be a dubito RegressionPredictive"):
        Recalibrator().fit(np.zeros(50), y)
    with pytest.raises(TypeError, match="pred must be a dubito RegressionPredictive"):
        Recalibrator().fit(pred, y).transform(np.zeros(3))
