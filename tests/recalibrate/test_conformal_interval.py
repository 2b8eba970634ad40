"""conformal_interval against MAPIE 1.6 (same predictions, 1e-10), a hand computation, and by
coverage on exchangeable synthetic data; bad input.

MAPIE sees the precomputed predictions through a prefit estimator that maps an index
feature to them: SplitConformalRegressor(prefit=True) for "absolute", the same with
ResidualNormalisedScore(prefit=True, residual_estimator=<the sd lookup>) for "normalized"
(scores (y - mu)/sd, bounds mu +- q sd), ConformalizedQuantileRegressor(prefit=True) with
the three quantile lookups and symmetric_correction=True for "cqr".

Coverage: with continuous scores the split-conformal interval covers with probability
exactly k/(n+1), k = ceil((n+1)L); the mean over R draws of (n calibration, m test) points
must be within 4 sd of it, sd^2 = c(1-c)/(R m) + c(1-c)/((n+2) R).
"""

import warnings

import numpy as np
import pytest
from mapie.conformity_scores import ResidualNormalisedScore
from mapie.regression import ConformalizedQuantileRegressor, SplitConformalRegressor
from scipy.special import ndtri
from sklearn.base import BaseEstimator, RegressorMixin

from dubito.predictive import GaussianMixture, Normal, RegressionPredictive
from dubito.recalibrate.interval import conformal_interval, conformity_scores


class Lookup(RegressorMixin, BaseEstimator):
    """A prefit regressor whose feature is an index into precomputed predictions."""

    def __init__(self, values=None):
        self.values = values

    def fit(self, X=None, y=None):
        self.values_ = np.asarray(self.values, dtype=np.float64)
        self.n_features_in_ = 1
        return self

    def predict(self, X):
        return self.values_[np.asarray(X, dtype=np.int64)[:, 0]]


def _data(rng, n):
    mu = rng.normal(0, 2, n)
    sd = rng.uniform(0.5, 2, n)
    y = mu + 1.5 * sd * rng.standard_normal(n)  # predictive 1.5x too narrow
    return mu, sd, y


# ------------------------------------------------------------------ MAPIE 1.6
@pytest.mark.parametrize("n", [19, 99, 237])
@pytest.mark.parametrize("level", [0.5, 0.8, 0.9, 0.95])
def test_equals_mapie(n, level):
    if n < level / (1 - level):
        pytest.skip("too few points for the level")
    rng = np.random.default_rng(n)
    m = 40
    mu, sd, y = _data(rng, n + m)
    cal, test = Normal(mu[:n], sd[:n] ** 2), Normal(mu[n:], sd[n:] ** 2)
    X = np.arange(n + m)[:, None]
    center = Lookup(mu).fit()
    if not 1 / (1 - level) < n:  # MAPIE asks n > 1/(1-L); the order statistic k <= n suffices
        assert np.ceil((n + 1) * level) == n  # (19 points at 95 %): ours is the largest score
        lo, hi = conformal_interval(cal, y[:n], test, level, "absolute")
        np.testing.assert_allclose(hi - mu[n:], np.max(np.abs(y[:n] - mu[:n])), rtol=1e-14)
        with pytest.raises(ValueError, match="too low"):
            SplitConformalRegressor(center, confidence_level=level, prefit=True).conformalize(
                X[:n], y[:n]).predict_interval(X[n:])
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # absolute
        mapie = SplitConformalRegressor(center, confidence_level=level, prefit=True).conformalize(X[:n], y[:n])
        _, band = mapie.predict_interval(X[n:])
        lo, hi = conformal_interval(cal, y[:n], test, level, "absolute")
        np.testing.assert_allclose(np.column_stack([lo, hi]), band[:, :, 0], rtol=0, atol=1e-10)
        # normalized by the predictive sd
        score = ResidualNormalisedScore(residual_estimator=Lookup(sd).fit(), prefit=True)
        mapie = SplitConformalRegressor(center, confidence_level=level, conformity_score=score,
                                        prefit=True).conformalize(X[:n], y[:n])
        _, band = mapie.predict_interval(X[n:])
        lo, hi = conformal_interval(cal, y[:n], test, level, "normalized")
        np.testing.assert_allclose(np.column_stack([lo, hi]), band[:, :, 0], rtol=0, atol=1e-10)
        # CQR on the predictive's own equal-tailed quantiles
        a = (1 - level) / 2
        quantiles = [Lookup(mu + sd * ndtri(a)).fit(), Lookup(mu + sd * ndtri(1 - a)).fit(), center]
        mapie = ConformalizedQuantileRegressor(quantiles, confidence_level=level, prefit=True)
        mapie.conformalize(X[:n], y[:n])
        _, band = mapie.predict_interval(X[n:], symmetric_correction=True)
        lo, hi = conformal_interval(cal, y[:n], test, level, "cqr")
        np.testing.assert_allclose(np.column_stack([lo, hi]), band[:, :, 0], rtol=0, atol=1e-10)


# ------------------------------------------------------------------ hand computation
def test_hand_computed_case():
    cal = Normal(np.zeros(9), np.full(9, 4.0))  # sd 2
    y = np.array([0.5, -1.0, 2.0, -3.0, 4.0, -0.1, 6.0, -7.0, 0.2])
    test = Normal(np.array([10.0, -10.0]), np.array([1.0, 9.0]))
    # level 0.8, n = 9: k = ceil(10 * 0.8) = 8, |y| sorted: .1 .2 .5 1 2 3 4 6 7 -> 6
    lo, hi = conformal_interval(cal, y, test, 0.8, "absolute")
    np.testing.assert_allclose(lo, [4.0, -16.0])
    np.testing.assert_allclose(hi, [16.0, -4.0])
    lo, hi = conformal_interval(cal, y, test, 0.8, "normalized")  # scores |y|/2 -> 3
    np.testing.assert_allclose(lo, [7.0, -19.0])
    np.testing.assert_allclose(hi, [13.0, -1.0])
    s = conformity_scores(cal, y, "cqr", 0.8)
    z = 2 * ndtri(0.9)
    np.testing.assert_allclose(s, np.maximum(-z - y, y - z))
    lo, hi = conformal_interval(cal, y, test, 0.8, "cqr")
    q = np.sort(s)[7]
    np.testing.assert_allclose(lo, test.interval(0.8)[0] - q)
    np.testing.assert_allclose(hi, test.interval(0.8)[1] + q)
    np.testing.assert_allclose(conformal_interval(cal, y, test, 0.8, "normalised")[0], [7.0, -19.0])


# ------------------------------------------------------------------ coverage
def _normal_problem(rng, n):
    mu, sd, y = _data(rng, n)
    return Normal(mu, sd**2), y


def _mixture_problem(rng, n):
    mu = rng.normal(0, 1, n)
    y = mu + np.where(rng.uniform(size=n) < 0.3, 2.0 + 0.5 * rng.standard_normal(n), 0.4 * rng.standard_normal(n))
    return GaussianMixture([0.5, 0.5], np.column_stack([mu - 1.0, mu + 1.0]), np.full((n, 2), 2.0)), y


@pytest.mark.parametrize("make", [_normal_problem, _mixture_problem])
@pytest.mark.parametrize("score", ["absolute", "normalized", "cqr"])
def test_coverage_is_k_over_n_plus_one(make, score):
    n, m, repeats = 40, 50, 600
    levels = [0.5, 0.8, 0.9]
    rng = np.random.default_rng(["absolute", "normalized", "cqr"].index(score))
    hits = np.zeros(len(levels))
    for _ in range(repeats):
        pred, y = make(rng, n + m)
        cal, test = pred[np.arange(n)], pred[np.arange(n, n + m)]
        for j, level in enumerate(levels):
            lo, hi = conformal_interval(cal, y[:n], test, level, score)
            hits[j] += np.sum((lo <= y[n:]) & (y[n:] <= hi))
    cov = hits / (repeats * m)
    for c, level in zip(cov, levels):
        exact = np.ceil((n + 1) * level) / (n + 1)
        sd = np.sqrt(exact * (1 - exact) * (1 / (repeats * m) + 1 / ((n + 2) * repeats)))
        assert c >= level - 4 * sd
        assert abs(c - exact) <= 4 * sd, (level, c, exact)


# ------------------------------------------------------------------ bad input
def _cal(n=30):
    rng = np.random.default_rng(0)
    mu, sd, y = _data(rng, n)
    return Normal(mu, sd**2), y


def test_length_mismatch():
    pred, y = _cal()
    with pytest.raises(ValueError, match="pred_cal has 30 inputs but y_cal has 29"):
        conformal_interval(pred, y[:-1], pred)


def test_too_few_points_for_the_level_says_how_many():
    pred, y = _cal(5)
    with pytest.raises(ValueError, match="99 % conformal interval needs at least 99 calibration points.*got 5"):
        conformal_interval(pred, y, pred, 0.99)
    pred, y = _cal(8)
    with pytest.raises(ValueError, match="at least 9 calibration points"):
        conformal_interval(pred, y, pred, 0.9)
    pred, y = _cal(9)
    conformal_interval(pred, y, pred, 0.9)  # k = ceil(10 * 0.9) = 9 = n: allowed


@pytest.mark.parametrize("level", [0.0, 1.0, -0.2, 1.5, np.nan, "0.9", True])
def test_level_outside_open_interval(level):
    pred, y = _cal()
    with pytest.raises(ValueError, match="level must"):
        conformal_interval(pred, y, pred, level)


def test_nan_in_targets_or_predictions():
    pred, y = _cal()
    bad = y.copy()
    bad[3] = np.nan
    with pytest.raises(ValueError, match="y_cal must be finite.*first at index 3"):
        conformal_interval(pred, bad, pred)

    class NanMean(RegressionPredictive):  # a user predictive that returns NaN means
        mean = property(lambda self: np.array([0.0, np.nan, 1.0]))
        var = property(lambda self: np.ones(3))
        _log_prob = _cdf = lambda self, y: np.zeros_like(y)
        _subset = lambda self, i: self

    with pytest.raises(ValueError, match="the means of pred must be finite.*first at index 1"):
        conformal_interval(pred, y, NanMean())
    with pytest.raises(ValueError, match="the means of pred_cal must be finite"):
        conformal_interval(NanMean(), np.zeros(3), pred, 0.5)


def test_unknown_score_and_wrong_types():
    pred, y = _cal()
    with pytest.raises(ValueError, match="score must be one of"):
        conformal_interval(pred, y, pred, 0.9, score="gamma")
    with pytest.raises(TypeError, match="pred must be a dubito RegressionPredictive"):
        conformal_interval(pred, y, np.zeros(3))
    with pytest.raises(TypeError, match="pred_cal must be a dubito RegressionPredictive"):
        conformal_interval(np.zeros(30), y, pred)
