"""Validated fitting of the IC-NLM's feature network (issue 19): a held-out share of the rows stops
the network early on their MSE of z; the marginal and the copula use every row; the record
(validation_curve_, best_epoch_, stopped_by_) survives save / load, and files without it load as
stopped by the cap."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from dubito import io
from dubito._estimator import DubitoRegressor, seeds_from
from dubito.early_stopping import holdout_split
from dubito.regression import ImplicitCopulaRegressor
from dubito.search_space import check_space

from .copula_synthetic import fit_fast as _fit
from .copula_synthetic import skewed_rows


@pytest.fixture(scope="module")
def Xy():
    return skewed_rows()


@pytest.fixture(scope="module")
def validated(Xy):
    return _fit(*Xy)


def test_the_network_stops_early_on_held_out_rows_and_keeps_its_best_epoch(Xy, validated):
    """The rule stopped the network ``patience`` epochs after its best epoch, well before the cap;
    the kept network scores the held-out rows (drawn again from the documented seed) at the
    minimum of validation_curve_ (float32 training vs float64 recomputation: 1e-4 relative); the
    marginal and the copula were fitted on all 300 rows."""
    X, y = Xy
    est = validated
    curve = est.validation_curve_
    assert est.stopped_by_ == "patience"
    assert curve.ndim == 1 and curve.shape[0] == est.best_epoch_ + est.patience < est.epochs
    assert est.loss_curve_.shape == curve.shape
    assert est.best_epoch_ == int(np.argmin(curve)) + 1
    rows = holdout_split(len(y), est.validation_fraction, seeds_from(est.random_state, 5)[4])[1]
    assert rows.size == 30
    z = est.marginal_.pseudo_response(y[rows])
    with torch.no_grad():
        Xs = torch.as_tensor((X[rows] - est.x_mean_) / est.x_scale_)
        mse = float(((est.net_(Xs)[:, 0] - torch.as_tensor((z - est.y_mean_) / est.y_scale_)) ** 2).mean())
    np.testing.assert_allclose(mse, curve.min(), rtol=1e-4)
    assert est.n_train_ == 300 and est.train_features_.shape == (300, 4)


def test_no_held_out_share_trains_on_every_row_to_the_cap(Xy):
    X, y = Xy
    est = _fit(X, y, epochs=4, validation_fraction=0.0)
    assert est.stopped_by_ == "cap" and est.best_epoch_ == 4 and est.validation_curve_.shape == (0,)
    assert est.loss_curve_.shape == (4,) and est.n_train_ == 300
    # the network was standardised on every row (with a held-out share: on the 270 it trains on)
    z = est.marginal_.pseudo_response(y)
    assert est.y_mean_ == pytest.approx(z.mean(), rel=1e-12)
    capped = _fit(X, y, epochs=3, patience=50)
    assert capped.stopped_by_ == "cap" and capped.validation_curve_.shape == (3,) and capped.best_epoch_ <= 3


def test_validated_fit_is_deterministic(Xy, validated):
    again = _fit(*Xy)
    np.testing.assert_array_equal(again.validation_curve_, validated.validation_curve_)
    np.testing.assert_array_equal(again.predict(Xy[0][:10]), validated.predict(Xy[0][:10]))


@pytest.mark.parametrize("kw, match", [
    (dict(validation_fraction=0.5), r"validation_fraction must lie in \[0, 0.5\)"),
    (dict(validation_fraction=-0.1), "validation_fraction"),
    (dict(validation_fraction="a tenth"), "validation_fraction"),
    (dict(batch_size=280), r"leaves 270 to train on, fewer than batch_size=280"),
    (dict(patience=0), "patience"),
])
def test_bad_validation_settings_are_refused(Xy, kw, match):
    with pytest.raises(ValueError, match=match):
        _fit(*Xy, **kw)


def test_round_trip_keeps_the_record_and_the_predictions(Xy, validated, tmp_path):
    X, _ = Xy
    path = tmp_path / "icnlm.safetensors"
    validated.save(path)
    back = ImplicitCopulaRegressor.load(path)
    np.testing.assert_array_equal(back.validation_curve_, validated.validation_curve_)
    assert (back.best_epoch_, back.stopped_by_) == (validated.best_epoch_, validated.stopped_by_)
    assert back.get_params() == validated.get_params()
    np.testing.assert_array_equal(back.predict(X[:10]), validated.predict(X[:10]))
    a, b = validated.predict_distribution(X[:10]), back.predict_distribution(X[:10])
    np.testing.assert_array_equal(a.grid, b.grid)
    np.testing.assert_array_equal(a.density, b.density)


def test_a_file_written_before_validated_fitting_loads_as_capped(Xy, validated, tmp_path):
    """The layout of files written before validated fitting: no validation_curve, best_epoch or
    stopped_by, y_mean / y_scale in the JSON instead of tensors, no validation_fraction / patience
    parameters. It loads, as a network trained to the cap, with the same predictions."""
    X, _ = Xy
    path = tmp_path / "old.safetensors"
    validated.save(path)
    tensors, settings = io.load_tensors(path, "ImplicitCopulaRegressor")
    fitted = dict(settings["fitted"])
    for key in ("best_epoch", "stopped_by"):
        del fitted[key]
    for key in ("y_mean", "y_scale"):
        fitted[key] = float(tensors.pop(key))
    del tensors["validation_curve"]
    params = {k: v for k, v in settings["params"].items() if k not in ("validation_fraction", "patience")}
    io.save_tensors(path, tensors, "ImplicitCopulaRegressor", {**settings, "params": params, "fitted": fitted})
    old = ImplicitCopulaRegressor.load(path)
    assert old.stopped_by_ == "cap" and old.best_epoch_ == len(old.loss_curve_) and old.validation_curve_.size == 0
    assert (old.validation_fraction, old.patience) == (0.1, 20)  # the constructor's defaults
    np.testing.assert_array_equal(old.predict(X[:10]), validated.predict(X[:10]))


def test_search_space_is_declared_and_valid():
    est = ImplicitCopulaRegressor()
    space = check_space(est, None)
    assert {"lr", "weight_decay", "n_features", "hidden"} <= set(space)
    assert isinstance(est, DubitoRegressor)


def test_dataframe_column_names_survive_the_network_fit_and_a_reorder_is_refused():
    # _fit_net validated the numpy X again and dropped feature_names_in_: columns passed in another
    # order were used as they came, with only scikit-learn's "fitted without feature names" warning
    import pandas as pd

    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(120, 3)), columns=["a", "b", "c"])
    y = 2.0 * X["a"].to_numpy() + rng.normal(size=120)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = ImplicitCopulaRegressor(epochs=3, vi_max_iter=100, vi_min_iter=20, n_draws=10, progress=False,
                                    random_state=0).fit(X, y)
    assert list(m.feature_names_in_) == ["a", "b", "c"]
    with pytest.raises(ValueError, match="feature names"):
        m.predict(X[["c", "b", "a"]])


def test_a_response_whose_squares_overflow_is_refused_by_name():
    # y x 1e200 gave a NaN predictive silently; 1e100 is the KDE marginal's documented ceiling,
    # 1e150 every regressor's (dubito._validation.MAX_ABS_Y), which speaks first above it
    rng = np.random.default_rng(1)
    X = rng.normal(size=(60, 2))
    y = X[:, 0] + rng.normal(size=60)
    with pytest.raises(ValueError, match=r"\|y\| reaches .*rescale y below 1e\+100"):
        ImplicitCopulaRegressor(epochs=2, progress=False).fit(X, y * 1e120)
    with pytest.raises(ValueError, match=r"y reaches .* in absolute value.*rescale y"):
        ImplicitCopulaRegressor(epochs=2, progress=False).fit(X, y * 1e200)
