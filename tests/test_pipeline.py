"""`dubito.pipeline`: preprocessing in front of a dubito estimator keeps its predictive reachable,
in GridSearchCV too; a plain scikit-learn Pipeline hides it (the reason the module exists)."""
import numpy as np
import pytest
from sklearn.base import clone
from sklearn.linear_model import Ridge
from sklearn.model_selection import GridSearchCV, KFold
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

from dubito.classification import MCDropoutClassifier
from dubito.metrics import crps
from dubito.metrics.scorers import crps_scorer
from dubito.pipeline import DubitoPipeline, make_pipeline
from dubito.predictive import ClassPredictive
from dubito.regression import DeterministicRegressor

FAST = dict(hidden=(8,), epochs=5, batch_size=16, progress=False, random_state=0)


def _data(n=90, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3)) * np.array([1.0, 100.0, 0.01]) + np.array([0.0, 500.0, 0.0])
    return X, X[:, 0] + X[:, 1] / 100 + 0.2 * rng.normal(size=n)


def test_plain_pipeline_hides_the_predictive():
    X, y = _data()
    plain = Pipeline([("scale", StandardScaler()), ("model", DeterministicRegressor(**FAST))]).fit(X, y)
    assert not hasattr(plain, "predict_distribution")


def test_methods_pass_through_the_transforms():
    X, y = _data()
    pipe = make_pipeline(StandardScaler(), DeterministicRegressor(**FAST)).fit(X, y)
    assert isinstance(pipe, DubitoPipeline) and list(pipe.named_steps) == ["standardscaler", "deterministicregressor"]
    model, Xt = pipe[-1], pipe[0].transform(X[:6])
    direct = model.predict_distribution(Xt)
    through = pipe.predict_distribution(X[:6])
    np.testing.assert_array_equal(through.mean, direct.mean)
    np.testing.assert_array_equal(through.var, direct.var)
    np.testing.assert_array_equal(pipe.predict_interval(X[:6], 0.9), model.predict_interval(Xt, 0.9))
    np.testing.assert_array_equal(pipe.predict_interval(X[:6]), np.column_stack(direct.interval(0.95)))
    np.testing.assert_array_equal(pipe.predict_quantiles(X[:6], [0.1, 0.9]), model.predict_quantiles(Xt, [0.1, 0.9]))
    mean, std = pipe.predict(X[:6], return_std=True)
    np.testing.assert_array_equal(std, direct.std)
    # the transform is applied: the fitted model fed the raw X predicts something else
    assert not np.allclose(model.predict_distribution(X[:6]).mean, through.mean)


def test_methods_exist_only_when_the_final_step_has_them():
    X, y = _data()
    pipe = make_pipeline(StandardScaler(), Ridge()).fit(X, y)
    for name in ("predict_distribution", "predict_interval", "predict_quantiles"):
        assert not hasattr(pipe, name)
    assert isinstance(clone(make_pipeline(StandardScaler(), DeterministicRegressor(**FAST))), DubitoPipeline)


def test_grid_search_with_a_scaler():
    """StandardScaler + estimator in GridSearchCV scored by the CRPS of the predictive: the fold
    scores are the CRPS of each fold's pipeline, and the refitted pipeline still predicts
    distributions."""
    X, y = _data()
    cv = KFold(3, shuffle=True, random_state=0)
    pipe = make_pipeline(StandardScaler(), DeterministicRegressor(**FAST))
    grid = {"deterministicregressor__lr": [1e-4, 1e-2]}
    search = GridSearchCV(pipe, grid, cv=cv, scoring=crps_scorer).fit(X, y)
    for k, params in enumerate(search.cv_results_["params"]):
        for f, (train, test) in enumerate(cv.split(X)):
            fold = clone(pipe).set_params(**params).fit(X[train], y[train])
            want = -crps(fold.predict_distribution(X[test]), y[test]).mean()
            np.testing.assert_allclose(search.cv_results_[f"split{f}_test_score"][k], want, rtol=1e-10)
    scores = search.cv_results_["mean_test_score"]
    assert scores[0] != scores[1]
    assert search.best_params_ == search.cv_results_["params"][int(np.argmax(scores))]
    best = search.best_estimator_
    assert isinstance(best, DubitoPipeline)
    assert best.predict_interval(X[:4], 0.8).shape == (4, 2)


def test_classifier_pipeline():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 3)) * 50.0
    y = (X[:, 0] > 0).astype(int)
    pipe = make_pipeline(StandardScaler(), MCDropoutClassifier(hidden=(8,), features=8, epochs=2, n_samples=4,
                                                               batch_size=32, random_state=0)).fit(X, y)
    pred = pipe.predict_distribution(X[:5])
    assert isinstance(pred, ClassPredictive) and pred.probs.shape == (5, 2)
    np.testing.assert_array_equal(pipe.predict_proba(X[:5]), pred.probs)
    assert not hasattr(pipe, "predict_interval")  # a classifier has no intervals
    with pytest.raises(AttributeError):
        pipe.predict_quantiles(X[:5], 0.5)
