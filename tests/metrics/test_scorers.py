"""`dubito.metrics.scorers` in scikit-learn's model selection: cross_val_score against the
metric computed by hand, fold by fold; the sign convention (greater is better); sample weights;
several metrics from one predictive; GridSearchCV picks by the predictive's score."""
import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import make_scorer
from sklearn.model_selection import GridSearchCV, KFold, cross_val_score, cross_validate

from dubito.metrics import crps as dubito_crps
from dubito.metrics.scorers import (
    SCORERS,
    coverage_error,
    coverage_error_scorer,
    crps_scorer,
    interval_scorer,
    mean_crps,
    mean_interval_score,
    mean_nll,
    nll_scorer,
)
from dubito.predictive import ClassPredictive, Normal
from dubito.regression import DeepEnsembleRegressor, NaiveRegressor

CV = KFold(4, shuffle=True, random_state=0)


def _data(n=101, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    return X, 3.0 + 2.0 * rng.standard_t(5, size=n)


# ---------------------------------------------------------------------- by hand: N(mean, sd^2)
def _nll(mu, sd, y):
    return 0.5 * ((y - mu) / sd) ** 2 + np.log(sd) + 0.5 * np.log(2 * np.pi)


def _crps(mu, sd, y):  # Gneiting & Raftery 2007, eq. 21 (the normal's closed form)
    z = (y - mu) / sd
    return sd * (z * (2 * stats.norm.cdf(z) - 1) + 2 * stats.norm.pdf(z) - 1 / np.sqrt(np.pi))


def _bounds(mu, sd, level):
    return stats.norm.ppf((1 - level) / 2, mu, sd), stats.norm.ppf((1 + level) / 2, mu, sd)


def _interval_score(mu, sd, y, level):  # Gneiting & Raftery 2007, eq. 43
    lo, hi = _bounds(mu, sd, level)
    a = 1 - level
    return (hi - lo) + 2 / a * np.maximum(lo - y, 0) + 2 / a * np.maximum(y - hi, 0)


def _coverage_error(mu, sd, y, level):
    lo, hi = _bounds(mu, sd, level)
    return abs(np.mean((lo <= y) & (y <= hi)) - level)


BY_HAND = {
    "neg_nll": lambda mu, sd, y: np.mean(_nll(mu, sd, y)),
    "neg_crps": lambda mu, sd, y: np.mean(_crps(mu, sd, y)),
    "neg_interval_score": lambda mu, sd, y: np.mean(_interval_score(mu, sd, y, 0.95)),
    "neg_coverage_error": lambda mu, sd, y: _coverage_error(mu, sd, y, 0.95),
}


@pytest.mark.parametrize("name", list(BY_HAND))
def test_cross_val_score_equals_the_metric_by_hand(name):
    """The naive learner (strategy="mean") predicts N(mean, var) of its training targets
    (ddof 0), so every fold's score follows from the data alone."""
    X, y = _data()
    scores = cross_val_score(NaiveRegressor(strategy="mean"), X, y, cv=CV, scoring=SCORERS[name])
    want = []
    for train, test in CV.split(X):
        mu, sd = y[train].mean(), y[train].std()
        want.append(-BY_HAND[name](mu, sd, y[test]))  # a loss: the scorer is its negative
    np.testing.assert_allclose(scores, want, rtol=1e-10, atol=1e-12)
    assert len(set(np.round(scores, 12))) > 1  # the folds differ: the comparison is not vacuous


def test_named_scorers_are_the_dict_entries():
    assert SCORERS == {"neg_nll": nll_scorer, "neg_crps": crps_scorer, "neg_interval_score": interval_scorer,
                       "neg_coverage_error": coverage_error_scorer}


def test_greater_is_better():
    """A predictive centred on the data outscores one centred far away, by every scorer."""
    X, y = _data()
    good = NaiveRegressor(strategy="mean").fit(X, y)
    bad = NaiveRegressor(strategy="constant", constant=30.0).fit(X, y)
    for name, scorer in SCORERS.items():
        assert scorer(good, X, y) > scorer(bad, X, y), name
    assert nll_scorer(good, X, y) < 0 and crps_scorer(good, X, y) < 0


def test_sample_weight_is_a_weighted_mean():
    X, y = _data()
    est = NaiveRegressor(strategy="mean").fit(X, y)
    w = np.random.default_rng(1).uniform(0, 2, size=y.size)
    mu, sd = y.mean(), y.std()
    np.testing.assert_allclose(crps_scorer(est, X, y, sample_weight=w), -np.average(_crps(mu, sd, y), weights=w),
                               rtol=1e-12)
    np.testing.assert_allclose(nll_scorer(est, X, y, sample_weight=w), -np.average(_nll(mu, sd, y), weights=w),
                               rtol=1e-12)
    lo, hi = _bounds(mu, sd, 0.95)
    inside = ((lo <= y) & (y <= hi)).astype(float)
    np.testing.assert_allclose(coverage_error_scorer(est, X, y, sample_weight=w),
                               -abs(np.average(inside, weights=w) - 0.95), rtol=1e-12)
    with pytest.raises(ValueError, match="sample_weight"):
        crps_scorer(est, X, y, sample_weight=w[:-1])


def test_other_levels_through_make_scorer():
    X, y = _data()
    est = NaiveRegressor(strategy="mean").fit(X, y)
    mu, sd = y.mean(), y.std()
    scorer = make_scorer(mean_interval_score, response_method=["predict_distribution"], greater_is_better=False,
                         level=0.5)
    np.testing.assert_allclose(scorer(est, X, y), -np.mean(_interval_score(mu, sd, y, 0.5)), rtol=1e-12)
    scorer = make_scorer(coverage_error, response_method=["predict_distribution"], greater_is_better=False, level=0.8)
    np.testing.assert_allclose(scorer(est, X, y), -_coverage_error(mu, sd, y, 0.8), rtol=1e-12)


class _CountingNaive(NaiveRegressor):
    calls = 0

    def predict_distribution(self, X):
        type(self).calls += 1
        return super().predict_distribution(X)


def test_several_metrics_share_one_predictive():
    X, y = _data()
    _CountingNaive.calls = 0
    res = cross_validate(_CountingNaive(strategy="mean"), X, y, cv=CV, scoring=SCORERS)
    assert _CountingNaive.calls == CV.get_n_splits()  # one predict_distribution per fold for four metrics
    for name in SCORERS:
        assert res[f"test_{name}"].shape == (4,)


def test_grid_search_picks_by_the_predictive():
    """A mixture predictive (deep ensemble): GridSearchCV's table is dubito's CRPS fold by fold,
    and its choice is the best mean."""
    X, y = _data(n=80)
    y = y - 3.0 + X[:, 0]
    cv = KFold(2, shuffle=True, random_state=0)
    est = DeepEnsembleRegressor(n_members=2, hidden=(8,), epochs=3, batch_size=16, progress=False, random_state=0)
    search = GridSearchCV(est, {"lr": [1e-4, 3e-2]}, cv=cv, scoring=SCORERS, refit="neg_crps").fit(X, y)
    for k, params in enumerate(search.cv_results_["params"]):
        for f, (train, test) in enumerate(cv.split(X)):
            fold = est.set_params(**params).fit(X[train], y[train])
            want = -dubito_crps(fold.predict_distribution(X[test]), y[test]).mean()
            np.testing.assert_allclose(search.cv_results_[f"split{f}_test_neg_crps"][k], want, rtol=1e-10)
    best = int(np.argmax(search.cv_results_["mean_test_neg_crps"]))
    assert search.best_params_ == search.cv_results_["params"][best]
    assert len(search.best_estimator_.predict_distribution(X[:3])) == 3


# ---------------------------------------------------------------------- the metric functions
def test_metric_functions_on_predictives():
    mu, sd = np.array([0.0, 1.0, 2.0]), np.array([1.0, 0.5, 2.0])
    y = np.array([0.3, -1.0, 5.0])
    pred = Normal(mu, sd**2)
    np.testing.assert_allclose(mean_nll(y, pred), np.mean(_nll(mu, sd, y)), rtol=1e-13)
    np.testing.assert_allclose(mean_crps(y, pred), np.mean(_crps(mu, sd, y)), rtol=1e-12)
    np.testing.assert_allclose(mean_interval_score(y, pred, level=0.9), np.mean(_interval_score(mu, sd, y, 0.9)),
                               rtol=1e-12)
    # a class predictive: -log p̄ of the observed label
    probs = np.array([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8]])
    np.testing.assert_allclose(mean_nll([0, 2], ClassPredictive(probs)), -np.mean(np.log([0.7, 0.8])), rtol=1e-13)


def test_metric_functions_refuse_bad_input():
    pred = Normal(np.zeros(3), np.ones(3))
    with pytest.raises(TypeError, match="RegressionPredictive"):
        mean_crps(np.zeros(3), np.zeros(3))
    with pytest.raises(TypeError, match="regression predictive"):
        coverage_error(np.zeros(2), ClassPredictive(np.full((2, 2), 0.5)))
    with pytest.raises(ValueError, match=r"shape \(3,\)"):
        mean_nll(np.zeros(4), pred)
    with pytest.raises(ValueError, match="NaN"):
        mean_crps(np.array([0.0, np.nan, 1.0]), pred)
    with pytest.raises(ValueError, match="between 0 and 1"):
        coverage_error(np.zeros(3), pred, level=1.5)
    with pytest.raises(ValueError, match="one level"):
        coverage_error(np.zeros(3), pred, level=[0.5, 0.9])
