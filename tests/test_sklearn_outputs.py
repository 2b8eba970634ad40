"""The outputs scikit-learn users expect (issue 20, part 3): ``predict(X, return_std=True)``,
``predict_interval``, ``predict_quantiles`` on a fast regressor of each predictive family (the
base's ``predict`` and every overriding one), the (k,) rule of ``quantile``, and classifiers whose
``predict_proba`` / ``predict_distribution`` agree with scikit-learn's conventions."""
import inspect
import warnings

import numpy as np
import pytest
from scipy import stats
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from dubito.classification import (
    DeepEnsembleClassifier,
    KFACLaplace,
    MCDropoutClassifier,
)
from dubito.predictive import GaussianMixture, GridDensity, Normal, Samples, StudentTMixture
from dubito.regression import (
    DeepEnsembleRegressor,
    DeterministicRegressor,
    ImplicitCopulaRegressor,
    MCDropoutRegressor,
    MixtureDensityRegressor,
    NaiveRegressor,
)

FAST = dict(hidden=(8,), epochs=3, batch_size=16, progress=False, random_state=0)
#: one fast regressor per predictive family; (name, factory, predictive class, own predict?)
REGRESSORS = {
    "naive": (lambda: NaiveRegressor(strategy="mean"), Normal),
    "deterministic": (lambda: DeterministicRegressor(**FAST), Normal),
    "mc-dropout": (lambda: MCDropoutRegressor(n_samples=10, **FAST), Samples),
    "mdn": (lambda: MixtureDensityRegressor(n_components=2, **FAST), GaussianMixture),
    "ensemble": (lambda: DeepEnsembleRegressor(n_members=2, **FAST), StudentTMixture),
    "icnlm": (lambda: ImplicitCopulaRegressor(hidden=(8,), n_features=3, activation="tanh", epochs=3, batch_size=16,
                                              vi_max_iter=100, vi_min_iter=50, n_draws=20, random_state=0,
                                              progress=False), GridDensity),
}


def _data(n=80, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    return X, X[:, 0] + 0.3 * rng.normal(size=n)


@pytest.fixture(scope="module", params=list(REGRESSORS))
def fitted(request):
    make, family = REGRESSORS[request.param]
    X, y = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # short fits: convergence and dead-unit warnings are not the point here
        est = make().fit(X, y)
    return est, family, X[:7]


def _fresh(arr):
    return isinstance(arr, np.ndarray) and arr.dtype == np.float64 and arr.flags.writeable


# ---------------------------------------------------------------------- regressors
def test_predict_return_std_is_mean_and_std_of_the_predictive(fitted):
    est, family, X = fitted
    pred = est.predict_distribution(X)
    assert isinstance(pred, family)
    assert inspect.signature(type(est).predict).parameters["return_std"].default is False
    point = est.predict(X)
    assert _fresh(point) and point.shape == (7,)
    mean, std = est.predict(X, return_std=True)
    assert _fresh(mean) and _fresh(std) and mean.shape == std.shape == (7,)
    np.testing.assert_allclose(mean, point, rtol=1e-12, atol=1e-12)  # the override's mean (MDN: its own einsum)
    np.testing.assert_array_equal(std, np.sqrt(pred.var))
    np.testing.assert_array_equal(est.predict(X, return_std=False), point)


def test_predict_interval_is_the_equal_tailed_interval(fitted):
    est, _, X = fitted
    pred = est.predict_distribution(X)
    one = est.predict_interval(X, level=0.9)
    assert _fresh(one) and one.shape == (7, 2)
    lo, hi = pred.interval(0.9)
    np.testing.assert_array_equal(one, np.column_stack([lo, hi]))
    np.testing.assert_allclose(pred.cdf(one[:, 0]), 0.05, atol=1e-8)
    np.testing.assert_allclose(pred.cdf(one[:, 1]), 0.95, atol=1e-8)
    many = est.predict_interval(X, [0.5, 0.9, 0.99])
    assert many.shape == (7, 2, 3)  # MAPIE's y_pis layout
    np.testing.assert_array_equal(many[:, :, 1], one)
    assert np.all(many[:, 0, 0] > many[:, 0, 2]) and np.all(many[:, 1, 0] < many[:, 1, 2])  # nested
    np.testing.assert_array_equal(est.predict_interval(X), np.column_stack(pred.interval(0.95)))  # default 0.95


def test_predict_quantiles(fitted):
    est, _, X = fitted
    pred = est.predict_distribution(X)
    q = np.array([0.05, 0.5, 0.95])
    out = est.predict_quantiles(X, q)
    assert _fresh(out) and out.shape == (7, 3)
    np.testing.assert_array_equal(out, pred.quantile(q[None, :]))
    assert est.predict_quantiles(X, 0.5).shape == (7, 1)
    assert np.all(np.diff(out, axis=1) > 0)


def test_normal_family_against_scipy():
    """Oracle: the Normal predictive's interval and quantiles are scipy's normal ppf."""
    X, y = _data()
    est = NaiveRegressor(strategy="mean").fit(X, y)
    mu, sd = y.mean(), y.std()  # the naive learner: training mean and (ddof 0) sd
    mean, std = est.predict(X[:4], return_std=True)
    np.testing.assert_allclose(mean, mu, rtol=1e-14)
    np.testing.assert_allclose(std, sd, rtol=1e-14)
    np.testing.assert_allclose(est.predict_interval(X[:4], 0.8), np.tile(stats.norm.ppf([0.1, 0.9], mu, sd), (4, 1)),
                               rtol=1e-12)
    np.testing.assert_allclose(est.predict_quantiles(X[:4], [0.01, 0.7]),
                               np.tile(stats.norm.ppf([0.01, 0.7], mu, sd), (4, 1)), rtol=1e-12)


@pytest.mark.parametrize("bad", [0.0, 1.0, 1.5, -0.2, np.nan, [[0.5, 0.9]], []])
def test_predict_interval_refuses_bad_levels(bad):
    X, y = _data()
    est = NaiveRegressor().fit(X, y)
    with pytest.raises(ValueError, match="level"):
        est.predict_interval(X, bad)


def test_predict_quantiles_refuses_bad_levels():
    X, y = _data()
    est = NaiveRegressor().fit(X, y)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        est.predict_quantiles(X, [0.5, 1.2])
    with pytest.raises(ValueError, match="1-D"):
        est.predict_quantiles(X, [[0.5]])


def test_return_std_and_extra_arguments_pass_through():
    """A plain scikit-learn Pipeline forwards return_std; predict_distribution's own keywords
    (MC dropout's n_samples, the IC-NLM's features=) reach it through the new methods."""
    X, y = _data()
    pipe = make_pipeline(StandardScaler(), NaiveRegressor(strategy="mean")).fit(X, y)
    mean, std = pipe.predict(X[:3], return_std=True)
    np.testing.assert_allclose(std, y.std(), rtol=1e-14)
    est = MCDropoutRegressor(n_samples=10, **FAST).fit(X, y)
    few = est.predict_distribution(X[:5], n_samples=3, random_state=1)
    np.testing.assert_array_equal(est.predict_interval(X[:5], 0.9, n_samples=3, random_state=1),
                                  np.column_stack(few.interval(0.9)))
    _, std3 = est.predict(X[:5], return_std=True, n_samples=3, random_state=1)
    np.testing.assert_array_equal(std3, few.std)


# ---------------------------------------------------------------------- quantile's (k,) rule
def test_quantile_takes_a_plain_array_of_levels():
    mu, sd = np.array([0.0, 1.0, -2.0]), np.array([1.0, 2.0, 0.5])
    pred = Normal(mu, sd**2)
    levels = [0.05, 0.5, 0.95]
    want = stats.norm.ppf(np.array(levels)[None, :], mu[:, None], sd[:, None])
    np.testing.assert_allclose(pred.quantile(np.array(levels)), want, rtol=1e-13)
    np.testing.assert_allclose(pred.quantile(levels), want, rtol=1e-13)  # a list too
    # k = N = 3: still levels for every input, never one level per input
    np.testing.assert_allclose(pred.quantile(np.array([0.1, 0.2, 0.3])),
                               stats.norm.ppf(np.array([[0.1, 0.2, 0.3]]), mu[:, None], sd[:, None]), rtol=1e-13)
    # one level per input: shape (N, 1)
    per_input = np.array([[0.1], [0.2], [0.3]])
    np.testing.assert_allclose(pred.quantile(per_input)[:, 0], stats.norm.ppf([0.1, 0.2, 0.3], mu, sd), rtol=1e-13)
    assert pred.quantile(0.5).shape == (3,)
    # cdf and log_prob keep their rule: a 1-D y of length N is one point per input
    assert pred.cdf(np.zeros(3)).shape == (3,)
    with pytest.raises(ValueError, match="shape"):
        pred.cdf(np.zeros(4))
    for bad in (np.zeros((2, 3)), np.zeros((3, 1, 1)), np.array([])):
        with pytest.raises(ValueError, match="q"):
            pred.quantile(bad)


# ---------------------------------------------------------------------- classifiers
def _classification_data(n=120, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    y = (X[:, 0] + X[:, 1] > 0).astype(np.int64) + (X[:, 2] > 1)
    return X, y


_MC = dict(hidden=(16,), features=16, epochs=3, n_samples=5, batch_size=32)


@pytest.fixture(scope="module", params=["mc-dropout", "ensemble", "kfac-laplace"])
def classifier(request):
    X, y = _classification_data()
    if request.param == "mc-dropout":
        est = MCDropoutClassifier(random_state=0, **_MC).fit(X, y)
    elif request.param == "ensemble":
        est = DeepEnsembleClassifier(MCDropoutClassifier(**_MC), n_members=2, random_state=0).fit(X, y)
    else:
        est = KFACLaplace(MCDropoutClassifier(random_state=0, **_MC).fit(X, y), n_samples=5, random_state=0).fit(X, y)
    return est, X[:9], y


def test_classifier_outputs_follow_scikit_learn(classifier):
    est, X, y = classifier
    np.testing.assert_array_equal(est.classes_, np.unique(y))  # labels 0..K-1, sorted; columns in this order
    proba = est.predict_proba(X)
    assert _fresh(proba) and proba.shape == (9, len(est.classes_))
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(proba, est.predict_distribution(X).probs)
    np.testing.assert_array_equal(est.predict(X), est.classes_[np.argmax(proba, axis=1)])
    assert est.predict(X).dtype == est.classes_.dtype
    log_proba = est.predict_log_proba(X)
    assert _fresh(log_proba) and log_proba.shape == proba.shape
    np.testing.assert_allclose(np.exp(log_proba), proba, rtol=1e-10)
    proba[:] = -1.0  # a copy: writing to it leaves the model's next answer alone
    np.testing.assert_array_equal(est.predict_proba(X), est.predict_distribution(X).probs)


def test_classifier_works_with_scikit_learn_log_loss(classifier):
    from sklearn.metrics import log_loss

    est, X, _ = classifier
    X_all, y_all = _classification_data()
    proba = est.predict_proba(X_all)
    want = -np.mean(np.log(np.clip(proba[np.arange(len(y_all)), y_all], np.finfo(np.float64).eps, None)))
    np.testing.assert_allclose(log_loss(y_all, proba, labels=est.classes_), want, rtol=1e-10)
