"""save / load of DeepEnsembleRegressor through dubito.io (safetensors + JSON, no pickle)."""

import json

import numpy as np
import pytest
import torch

from dubito import io
from dubito._validation import NotFittedError
from dubito.data.synthetic import toy2
from dubito.regression import DeepEnsembleRegressor
from tests.old_layout import rewrite_as_older


@pytest.fixture(scope="module")
def model_and_data():
    X, y, _ = toy2(n=80, seed=0)
    Xq, _, _ = toy2(n=15, seed=1)
    est = DeepEnsembleRegressor(n_members=3, hidden=(8, 4), epochs=3, random_bias=True, weight_decay=0.01,
                                lr_drop="step", correction="none", progress=False, random_state=4).fit(X, y)
    return est, Xq


def test_round_trip_gives_identical_predictions(model_and_data, tmp_path):
    est, Xq = model_and_data
    path = tmp_path / "ens.safetensors"
    est.save(path)
    back = DeepEnsembleRegressor.load(path)
    assert back.get_params() == est.get_params()
    np.testing.assert_array_equal(back.gammas_, est.gammas_)
    np.testing.assert_array_equal(back.predict(Xq), est.predict(Xq))
    for corr in ("bayes", "none"):
        a, b = est.predict_distribution(Xq, correction=corr), back.predict_distribution(Xq, correction=corr)
        for attr in ("means", "variances", "noise_variances"):
            np.testing.assert_array_equal(getattr(a, attr), getattr(b, attr))
    for attr in ("lambda_prior_", "weight_decay_", "n_train_", "y_mean_", "y_scale_", "n_features_in_", "epochs_",
                 "patience_"):
        assert getattr(back, attr) == getattr(est, attr)
    np.testing.assert_array_equal(back.loss_curve_, est.loss_curve_)
    # the file is safetensors with JSON settings, not a pickle
    with open(path, "rb") as fh:
        header_len = int.from_bytes(fh.read(8), "little")
        header = json.loads(fh.read(header_len))
    assert header["__metadata__"]["dubito_class"] == "DeepEnsembleRegressor"


def test_load_onto_explicit_device(model_and_data, tmp_path):
    est, Xq = model_and_data
    est.save(tmp_path / "m.safetensors")
    back = DeepEnsembleRegressor.load(tmp_path / "m.safetensors", device="cpu")
    assert next(back.net_.parameters()).device.type == "cpu"
    assert next(back.net_.parameters()).dtype == torch.float64


def test_save_before_fit_raises(tmp_path):
    with pytest.raises(NotFittedError, match="not fitted"):
        DeepEnsembleRegressor().save(tmp_path / "x.safetensors")


def test_garbage_file(tmp_path):
    p = tmp_path / "garbage.safetensors"
    p.write_bytes(b"this is not a model file at all" * 10)
    with pytest.raises(ValueError, match="not a readable safetensors"):
        DeepEnsembleRegressor.load(p)


def test_truncated_file(model_and_data, tmp_path):
    est, _ = model_and_data
    p = tmp_path / "t.safetensors"
    est.save(p)
    data = p.read_bytes()
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="corrupted or truncated"):
        DeepEnsembleRegressor.load(p)


def test_foreign_class_file(tmp_path):
    p = tmp_path / "other.safetensors"
    io.save_tensors(p, {"w": torch.zeros(2)}, "SomeOtherRegressor", {"a": 1})
    with pytest.raises(ValueError, match="holds a SomeOtherRegressor"):
        DeepEnsembleRegressor.load(p)


def test_plain_safetensors_without_dubito_metadata(tmp_path):
    from safetensors.torch import save_file

    p = tmp_path / "plain.safetensors"
    save_file({"w": torch.zeros(2)}, str(p))
    with pytest.raises(ValueError, match="not a dubito model"):
        DeepEnsembleRegressor.load(p)


def test_right_class_but_inconsistent_contents(model_and_data, tmp_path):
    est, _ = model_and_data
    p = tmp_path / "bad.safetensors"
    # settings without fitted scalars
    io.save_tensors(p, {"gammas": torch.zeros(3)}, "DeepEnsembleRegressor", {"params": est.get_params()})
    with pytest.raises(ValueError, match="inconsistent contents"):
        DeepEnsembleRegressor.load(p)
    # tensors missing from the network
    est.save(p)
    tensors, settings = io.load_tensors(p, "DeepEnsembleRegressor")
    del tensors["net.mean_head.weight"]
    io.save_tensors(p, tensors, "DeepEnsembleRegressor", settings)
    with pytest.raises(ValueError, match="inconsistent contents"):
        DeepEnsembleRegressor.load(p)
    # wrong shapes
    tensors, _ = io.load_tensors(tmp_path / "bad.safetensors", "DeepEnsembleRegressor")
    est.save(p)
    tensors, settings = io.load_tensors(p, "DeepEnsembleRegressor")
    tensors["gammas"] = torch.zeros(7, dtype=torch.float64)
    io.save_tensors(p, tensors, "DeepEnsembleRegressor", settings)
    with pytest.raises(ValueError, match="inconsistent"):
        DeepEnsembleRegressor.load(p)


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError):
        DeepEnsembleRegressor.load(tmp_path / "nope.safetensors")


def test_is_a_dubito_regressor():
    from dubito._estimator import DubitoRegressor

    assert isinstance(DeepEnsembleRegressor(), DubitoRegressor)


def test_auto_budget_is_resolved_and_saved(tmp_path):
    """patience / epochs "auto" resolve from the rows trained on (70 of 78 at batch 16: 5 steps an
    epoch, patience 200, cap 4000), and the file keeps what the fit used; a file of a version
    before "auto" reads the constructor's integers."""
    X, y, _ = toy2(n=78, seed=0)
    est = DeepEnsembleRegressor(n_members=2, hidden=(4,), batch_size=16, lr=1e-1, progress=False,
                                random_state=0).fit(X, y)
    assert (est.n_train_, est.patience_, est.epochs_) == (70, 200, 4000)
    assert est.loss_curve_.shape[0] <= 4000 and est.stopped_by_ == "patience"
    path = tmp_path / "auto.safetensors"
    est.save(path)
    back = DeepEnsembleRegressor.load(path)
    assert (back.patience_, back.epochs_, back.get_params()["epochs"]) == (200, 4000, "auto")
    old = DeepEnsembleRegressor(n_members=2, hidden=(4,), epochs=3, patience=5, progress=False,
                                random_state=0).fit(X, y)
    old.save(path)
    rewrite_as_older(path, "DeepEnsembleRegressor", drop_fitted=("epochs", "patience"))
    assert (DeepEnsembleRegressor.load(path).patience_, DeepEnsembleRegressor.load(path).epochs_) == (5, 3)


@pytest.mark.parametrize("era", ["before the estimator base", "before validated fitting"])
def test_file_in_an_older_layout_still_loads(model_and_data, tmp_path, era):
    """A file in the layout of earlier versions loads to the same predictions: before the estimator
    base, y_mean / y_scale were JSON settings, not tensors; before validated fitting there was no
    held-out curve, best epoch or stopped_by (every member then ran to the cap)."""
    est, Xq = model_and_data
    path = tmp_path / "old.safetensors"
    est.save(path)
    before = era == "before validated fitting"
    rewrite_as_older(path, "DeepEnsembleRegressor", drop_tensors=("validation_curve",) * before,
                     drop_fitted=("best_epoch", "stopped_by") if before else ())
    back = DeepEnsembleRegressor.load(path)
    a, b = est.predict_distribution(Xq), back.predict_distribution(Xq)
    for attr in ("means", "variances", "noise_variances"):
        np.testing.assert_array_equal(getattr(a, attr), getattr(b, attr))
    assert (back.y_mean_, back.y_scale_, back.n_train_) == (est.y_mean_, est.y_scale_, est.n_train_)
    if era == "before validated fitting":
        assert back.stopped_by_ == "cap" and back.best_epoch_.tolist() == [3, 3, 3]
        assert back.validation_curve_.shape == (0, 3)
    else:
        np.testing.assert_array_equal(back.best_epoch_, est.best_epoch_)
        np.testing.assert_array_equal(back.validation_curve_, est.validation_curve_)


def test_prior_precision_is_saved_and_files_without_it_load_with_precision_one(tmp_path):
    """``prior_precision`` round-trips; a file written before it existed (when weight_decay None meant
    1/N) loads with precision 1, its fitted lambda_prior and predictions unchanged."""
    X, y, _ = toy2(n=80, seed=0)
    est = DeepEnsembleRegressor(n_members=2, hidden=(8,), epochs=2, prior_precision=1.0, validation_fraction=0.0,
                                progress=False, random_state=0).fit(X, y)
    est.save(tmp_path / "m.safetensors")
    assert DeepEnsembleRegressor.load(tmp_path / "m.safetensors").prior_precision == 1.0
    tensors, settings = io.load_tensors(tmp_path / "m.safetensors", "DeepEnsembleRegressor")
    settings["params"].pop("prior_precision")
    io.save_tensors(tmp_path / "old.safetensors", tensors, "DeepEnsembleRegressor", settings)
    old = DeepEnsembleRegressor.load(tmp_path / "old.safetensors")
    assert old.prior_precision == 1.0 and old.lambda_prior_ == est.lambda_prior_ == 1.0
    np.testing.assert_array_equal(old.predict(X[:10]), est.predict(X[:10]))
    refit = DeepEnsembleRegressor(**{**old.get_params(), "progress": False}).fit(X, y)
    np.testing.assert_array_equal(refit.predict(X[:10]), est.predict(X[:10]))
