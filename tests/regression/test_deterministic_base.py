"""The MLP baselines and the naive learner on the one estimator base (issue 19): each is a
`DubitoRegressor`, persists through the ``_state`` / ``_from_state`` hooks, and still reads the
files written before them (y_mean / y_scale in the JSON, no held-out record)."""

from __future__ import annotations

import numpy as np
import pytest

from dubito import io
from dubito._estimator import DubitoRegressor
from dubito.regression import (
    DeterministicRegressor,
    ImplicitCopulaRegressor,
    MCDropoutRegressor,
    MixtureDensityRegressor,
    NaiveRegressor,
)

FAST = dict(hidden=(16,), lr=1e-2, batch_size=16, epochs=6, progress=False, random_state=0)
MAKERS = {
    "deterministic": lambda: DeterministicRegressor(**FAST),
    "mc-dropout": lambda: MCDropoutRegressor(dropout=0.1, n_samples=10, **FAST),
    "mdn": lambda: MixtureDensityRegressor(n_components=3, **FAST),
}


@pytest.fixture(scope="module")
def Xy():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(120, 3))
    y = X[:, 0] - 0.5 * X[:, 1] ** 2 + 0.3 * rng.normal(size=120)
    return X, y


@pytest.mark.parametrize("cls", [DeterministicRegressor, MCDropoutRegressor, MixtureDensityRegressor,
                                 NaiveRegressor, ImplicitCopulaRegressor])
def test_every_estimator_of_the_module_is_a_dubito_regressor(cls):
    assert issubclass(cls, DubitoRegressor) and isinstance(cls(), DubitoRegressor)
    # the persistence hooks are the estimator's own; save / load are the base's
    assert cls._state is not DubitoRegressor._state and cls._from_state.__func__ is not DubitoRegressor._from_state.__func__
    assert cls.save is DubitoRegressor.save
    if cls is not ImplicitCopulaRegressor:  # its load only checks model= first, then calls the base's
        assert cls.load.__func__ is DubitoRegressor.load.__func__


@pytest.mark.parametrize("name", MAKERS)
def test_round_trip_keeps_predictions_and_record(Xy, name, tmp_path):
    X, y = Xy
    est = MAKERS[name]().fit(X, y)
    est.save(tmp_path / "m.safetensors")
    back = type(est).load(tmp_path / "m.safetensors")
    assert back.get_params() == est.get_params()
    np.testing.assert_array_equal(back.predict(X[:7]), est.predict(X[:7]))
    np.testing.assert_array_equal(back.validation_curve_, est.validation_curve_)
    np.testing.assert_array_equal(back.loss_curve_, est.loss_curve_)
    assert (back.best_epoch_, back.stopped_by_, back.n_train_) == (est.best_epoch_, est.stopped_by_, est.n_train_)
    assert (back.y_mean_, back.y_scale_) == (est.y_mean_, est.y_scale_)


@pytest.mark.parametrize("name", MAKERS)
def test_a_file_written_before_the_base_still_loads(Xy, name, tmp_path):
    """The layout written before the base and before validated fitting: y_mean / y_scale in the
    JSON, no y_mean / y_scale / validation_curve tensors, no best_epoch / stopped_by, no
    validation_fraction / patience parameters. It loads as trained to the cap, same predictions."""
    X, y = Xy
    est = MAKERS[name]().fit(X, y)
    path = tmp_path / "old.safetensors"
    est.save(path)
    cls_name = type(est).__name__
    tensors, settings = io.load_tensors(path, cls_name)
    fitted = {k: v for k, v in settings["fitted"].items() if k not in ("best_epoch", "stopped_by")}
    fitted.update(y_mean=float(tensors.pop("y_mean")), y_scale=float(tensors.pop("y_scale")))
    del tensors["validation_curve"]
    params = {k: v for k, v in settings["params"].items() if k not in ("validation_fraction", "patience")}
    io.save_tensors(path, tensors, cls_name, {"params": params, "fitted": fitted})
    old = type(est).load(path)
    assert old.stopped_by_ == "cap" and old.best_epoch_ == len(old.loss_curve_) and old.validation_curve_.size == 0
    np.testing.assert_array_equal(old.predict(X[:7]), est.predict(X[:7]))
    # a scaling of the wrong width is one ValueError naming the file
    tensors["x_mean"] = tensors["x_mean"][:2]
    io.save_tensors(path, tensors, cls_name, {"params": params, "fitted": fitted})
    with pytest.raises(ValueError, match=r"old.safetensors is a \w+ file with inconsistent contents.*input scaling"):
        type(est).load(path)


def test_naive_file_layout_is_unchanged(Xy, tmp_path):
    X, y = Xy
    est = NaiveRegressor(strategy="mean").fit(X, y)
    est.save(tmp_path / "n.safetensors")
    tensors, settings = io.load_tensors(tmp_path / "n.safetensors", "NaiveRegressor")
    assert set(tensors) == {"noise_var"} and settings["params"] == {"strategy": "mean", "constant": 0.0}
    assert {"center", "noise_var", "n_train", "n_features_in", "feature_names_in"} <= set(settings["fitted"])
    back = NaiveRegressor.load(tmp_path / "n.safetensors")
    np.testing.assert_array_equal(back.predict(X[:5]), np.full(5, y.mean()))
    assert back.n_train_ == 120 and back.n_features_in_ == 3
