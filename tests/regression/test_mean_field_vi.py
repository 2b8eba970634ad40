"""MeanFieldVIRegressor (the VI baseline of B-DeepNoise, spec §4.3).

Oracle: with hidden=() the model is Bayesian linear regression; for a Gaussian target the
mean-field optimum of KL(q || posterior) is known in closed form — the means are the exact
posterior mean and the variances are 1 / diag(posterior precision) (Bishop 2006, §10.1.2) —
and with hidden=() our objective is deterministic (the output layer is integrated exactly),
so a full-batch Adam run converges to it to float precision.
"""
import copy
import json
import math

import numpy as np
import pytest
import torch

from dubito import io
from dubito._estimator import DubitoRegressor, seed_base, seeds_from
from dubito._validation import NotFittedError
from dubito.early_stopping import holdout_split
from dubito.inference.convergence import SCHEMA_KEYS, still_improving
from dubito.nn.batched import ACTIVATIONS
from dubito.predictive import GaussianMixture
from dubito.regression.bnn_nuts import NUTSNetworkRegressor
from dubito.regression.mean_field_vi import MeanFieldVIRegressor
from dubito.tune import tune


def _linear_data(n=200, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3)) @ np.array([[1, 0.8, 0.3], [0, 0.6, 0.5], [0, 0, 0.8]])  # correlated
    y = X @ np.array([1.0, -0.5, 0.3]) + 0.5 * rng.normal(size=n) + 2.0
    return X, y


def _closed_form(est, X, y, noise_var_std):
    Xs = (X - est.x_mean_) / est.x_scale_
    ys = (y - est.y_mean_) / est.y_scale_
    Z = np.c_[Xs, np.ones(len(y))]
    A = Z.T @ Z / noise_var_std + np.eye(Z.shape[1]) / est.prior_sd**2  # posterior precision
    return np.linalg.solve(A, Z.T @ ys / noise_var_std), 1.0 / np.sqrt(np.diag(A)), A, Z, ys


def _fitted(est):
    m = np.r_[est.q_["W_mu.0"].numpy()[:, 0], est.q_["b_mu.0"].numpy()]
    s = np.r_[est.q_["W_sd.0"].numpy()[:, 0], est.q_["b_sd.0"].numpy()]
    return m, s


def test_linear_model_with_known_noise_reaches_the_mean_field_optimum():
    X, y = _linear_data()
    est = MeanFieldVIRegressor(hidden=(), noise_sd=0.5, prior_sd=0.7, epochs=1500, lr=3e-2, batch_size=len(y),
                               validation_fraction=0.0, random_state=0, progress=False).fit(X, y)
    mean, sd, A, _, _ = _closed_form(est, X, y, (0.5 / est.y_scale_) ** 2)
    m, s = _fitted(est)
    # measured: max |m - mean| ~ 3e-15, max |s/sd - 1| ~ 1e-15 (deterministic objective)
    np.testing.assert_allclose(m, mean, atol=1e-6)
    np.testing.assert_allclose(s, sd, rtol=1e-5)
    # the check can fail: the true marginal sds (diag A^-1) differ from the mean-field ones by > 20%
    assert np.max(np.sqrt(np.diag(np.linalg.inv(A))) / sd) > 1.2
    assert est.noise_sd_ == pytest.approx(0.5)


def test_linear_model_with_learned_noise_is_stationary():
    # jointly optimal (q, s): q as above given s, and s^2 = (|ys - Z m|^2 + sum_j sd_j^2 |z_j|^2) / n
    X, y = _linear_data(seed=1)
    est = MeanFieldVIRegressor(hidden=(), epochs=2000, lr=3e-2, batch_size=len(y), random_state=1,
                               validation_fraction=0.0, progress=False).fit(X, y)
    s2 = (est.noise_sd_ / est.y_scale_) ** 2
    mean, sd, _, Z, ys = _closed_form(est, X, y, s2)
    m, s = _fitted(est)
    np.testing.assert_allclose(m, mean, atol=1e-6)
    np.testing.assert_allclose(s, sd, rtol=1e-5)
    s2_star = (np.sum((ys - Z @ m) ** 2) + np.sum(s**2 * np.sum(Z**2, axis=0))) / len(y)
    assert s2 == pytest.approx(s2_star, rel=1e-6)
    assert 0.4 < est.noise_sd_ < 0.6  # the simulated noise sd is 0.5


def test_predictive_is_a_mixture_over_weight_draws_in_y_units():
    X, y = _linear_data()
    est = MeanFieldVIRegressor(hidden=(), noise_sd=0.5, epochs=300, lr=3e-2, batch_size=len(y), n_samples=4000,
                               validation_fraction=0.0, random_state=0, progress=False).fit(X, y)
    Xt = X[:5]
    pred = est.predict_distribution(Xt)
    assert isinstance(pred, GaussianMixture) and pred.n_components == 4000
    np.testing.assert_allclose(pred.aleatoric_var, 0.25, rtol=1e-12)
    # the function draws are linear in w ~ q: mean and variance in closed form
    m, s = _fitted(est)
    Z = np.c_[(Xt - est.x_mean_) / est.x_scale_, np.ones(5)]
    f_mean = Z @ m * est.y_scale_ + est.y_mean_
    f_var = (Z**2) @ (s**2) * est.y_scale_**2
    # MC with S = 4000: se of the mean = sqrt(f_var / S); of the variance ~ f_var sqrt(2 / S)
    assert np.all(np.abs(pred.mean - f_mean) < 4 * np.sqrt(f_var / 4000))
    np.testing.assert_allclose(pred.epistemic_var, f_var, rtol=4 * np.sqrt(2 / 4000))
    again = est.predict_distribution(Xt)
    np.testing.assert_array_equal(again.means, pred.means)  # fixed seed


def test_smoke_nonlinear_toy():
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(300, 1))
    y = np.sin(3 * X[:, 0]) + 0.1 * rng.normal(size=300)
    est = MeanFieldVIRegressor(hidden=(20, 20), epochs=300, lr=1e-2, batch_size=100, n_samples=200,
                               random_state=0, progress=False).fit(X, y)
    Xt = np.linspace(-0.8, 0.8, 9)[:, None]
    pred = est.predict_distribution(Xt)
    # measured (seed 0): max |mean - sin 3x| ~ 0.07, noise sd ~ 0.11
    assert np.max(np.abs(pred.mean - np.sin(3 * Xt[:, 0]))) < 0.2
    assert 0.05 < est.noise_sd_ < 0.3
    assert est.loss_curve_[-1] < est.loss_curve_[0]
    assert np.all(pred.epistemic_var > 0)


def test_bad_settings_and_inputs():
    X, y = _linear_data(n=20)
    with pytest.raises(ValueError, match="activation"):
        MeanFieldVIRegressor(activation="softmax", progress=False).fit(X, y)
    with pytest.raises(ValueError, match="prior_sd"):
        MeanFieldVIRegressor(prior_sd=0.0, progress=False).fit(X, y)
    with pytest.raises(ValueError, match="constant"):
        MeanFieldVIRegressor(progress=False).fit(X, np.ones(20))
    with pytest.raises(ValueError, match="not fitted"):
        MeanFieldVIRegressor().predict_distribution(X)


# ---------------------------------------------------------------------- diagnostics
def test_diagnostics_schema_and_the_stopped_by_cap_rule():
    """No chain: R-hat / ESS NaN. With held-out rows stopped_by_cap is stopped_by_ == "cap": the
    linear model's deterministic held-out NLL stops improving -> the rule ends the run ->
    converged; 5 epochs of a 2-layer net end at the cap. Without a held-out share (a fixed-epoch
    protocol) every run ends at the cap, and stopped_by_cap says whether the -ELBO still fell there."""
    X, y = _linear_data()
    flat = MeanFieldVIRegressor(hidden=(), noise_sd=0.5, epochs=1500, lr=3e-2, batch_size=len(y), random_state=0,
                                progress=False).fit(X, y)
    short = MeanFieldVIRegressor(hidden=(8, 8), epochs=5, lr=1e-3, random_state=0, progress=False).fit(X, y)
    whole = MeanFieldVIRegressor(hidden=(), noise_sd=0.5, epochs=1500, lr=3e-2, batch_size=len(y), random_state=0,
                                 validation_fraction=0.0, progress=False).fit(X, y)
    for est in (flat, short, whole):
        d = est.diagnostics_
        assert set(SCHEMA_KEYS) <= set(d)
        assert all(np.isnan(d[k]) for k in ("rhat_mean", "ess_mean", "rhat_loglik", "ess_loglik", "acceptance"))
        assert d["divergences"] is None and isinstance(d["stopped_by_cap"], bool) and isinstance(d["converged"], bool)
        rule = (est.stopped_by_ == "cap") if est.validation_curve_.size else still_improving(est.loss_curve_)
        assert d["stopped_by_cap"] is rule and d["converged"] is not d["stopped_by_cap"]
        assert d["n_epochs"] == len(est.loss_curve_) and d["still_improving"] is still_improving(est.loss_curve_)
        assert d["stopped_by"] == est.stopped_by_ and d["best_epoch"] == est.best_epoch_
    assert flat.stopped_by_ == "patience" and len(flat.loss_curve_) < 1500 and flat.diagnostics_["converged"] is True
    assert short.stopped_by_ == "cap" and short.diagnostics_["converged"] is False
    # without a held-out share the cap ends every run; one whose -ELBO has levelled off converged
    assert whole.stopped_by_ == "cap" and len(whole.loss_curve_) == 1500 and whole.best_epoch_ == 1500
    assert whole.validation_curve_.size == 0 and whole.diagnostics_["still_improving"] is False
    assert whole.diagnostics_["stopped_by_cap"] is False and whole.diagnostics_["converged"] is True


# ---------------------------------------------------------------------- validated fitting
def _wiggly(n=80, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, 2))
    return X, np.sin(2 * X[:, 0]) + 0.3 * X[:, 1] + 0.3 * rng.normal(size=n)


@pytest.fixture(scope="module")
def stopped_model():
    """A wide net at a high rate on 72 + 8 rows, weak prior: it overfits and the rule stops it."""
    X, y = _wiggly()
    est = MeanFieldVIRegressor(hidden=(32, 32), prior_sd=3.0, lr=2e-2, batch_size=32, epochs=1000, patience=10,
                               n_samples=100, random_state=0, progress=False).fit(X, y)
    return est, X, y


def test_stops_early_on_the_held_out_nll_and_records_the_curve(stopped_model):
    est, X, y = stopped_model
    curve = est.validation_curve_
    assert est.stopped_by_ == "patience"
    assert curve.shape == est.loss_curve_.shape and len(curve) < est.epochs
    assert np.all(np.isfinite(curve))
    # the rule: the best epoch is the curve's first minimum, and the run ends `patience` epochs later
    assert est.best_epoch_ == int(np.argmin(curve)) + 1
    assert len(curve) == est.best_epoch_ + est.patience
    assert np.all(curve[est.best_epoch_:] >= curve[est.best_epoch_ - 1])
    assert est.n_train_ == 72  # ceil(0.1 * 80) = 8 rows held out


def _held_out_rows(est, n):
    holdout_seed, validation_seed = seeds_from(seed_base(est.random_state), 2)
    return holdout_split(n, est.validation_fraction, holdout_seed)[1], validation_seed


def test_restores_the_best_epoch(stopped_model):
    """The restored q and noise score the held-out rows at the curve's value of the best epoch;
    the last epoch's value differs (the check can fail)."""
    est, X, y = stopped_model
    rows, validation_seed = _held_out_rows(est, len(y))
    Xv = torch.as_tensor((X[rows] - est.x_mean_) / est.x_scale_)
    yv = torch.as_tensor((y[rows] - est.y_mean_) / est.y_scale_)
    layers = [(est.q_[f"W_mu.{k}"], torch.log(torch.expm1(est.q_[f"W_sd.{k}"])), est.q_[f"b_mu.{k}"],
               torch.log(torch.expm1(est.q_[f"b_sd.{k}"]))) for k in range(est.n_layers_)]
    log_s = torch.tensor(math.log(est.noise_sd_ / est.y_scale_), dtype=torch.float64)
    gen = torch.Generator().manual_seed(validation_seed)
    again = MeanFieldVIRegressor._heldout_nll(layers, log_s, Xv, yv, ACTIVATIONS[est.activation], gen, width=32)
    best = est.validation_curve_[est.best_epoch_ - 1]
    assert again == pytest.approx(best, rel=1e-9, abs=1e-9)
    assert abs(est.validation_curve_[-1] - best) > 1e-3
    # an independent estimate: the predictive mixture of 4000 joint draws, in standardised units,
    # before the held-out variance scale (which these rows fitted)
    unscaled = copy.copy(est)
    unscaled.variance_scale_ = 1.0
    pred = unscaled.predict_distribution(X[rows], n_samples=4000)
    nll = -np.mean(pred.log_prob(y[rows])) - math.log(est.y_scale_)
    assert nll == pytest.approx(best, abs=0.05)


@pytest.mark.parametrize("fraction", [-0.1, 0.5, 1.0, "0.1"])
def test_bad_validation_fraction_is_refused(fraction):
    X, y = _linear_data(n=20)
    with pytest.raises(ValueError, match="validation_fraction"):
        MeanFieldVIRegressor(validation_fraction=fraction, epochs=2, progress=False).fit(X, y)
    with pytest.raises(ValueError, match="patience"):
        MeanFieldVIRegressor(patience=0, epochs=2, progress=False).fit(X, y)


def test_is_a_dubito_regressor_whose_predict_is_the_predictive_mean(small_model):
    est, Xq, _ = small_model
    assert isinstance(est, DubitoRegressor) and "predict" not in vars(MeanFieldVIRegressor)
    np.testing.assert_array_equal(est.predict(Xq), est.predict_distribution(Xq).mean)


def test_tune_accepts_the_declared_search_space():
    X, y = _wiggly(n=60)
    assert set(MeanFieldVIRegressor.search_space) == {"lr", "prior_sd", "hidden"}
    result = tune(MeanFieldVIRegressor(epochs=5, n_samples=20, progress=False), X, y, n_trials=2, progress=False)
    assert len(result.trials) == 2 and all(t["state"] == "COMPLETE" for t in result.trials)
    assert set(result.best_params) == {"lr", "prior_sd", "hidden"} and np.isfinite(result.best_score)
    assert result.estimator.get_params()["hidden"] == result.best_params["hidden"]


# ---------------------------------------------------------------------- persistence
@pytest.fixture(scope="module")
def small_model():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(60, 3))
    y = np.sin(X[:, 0]) + 0.2 * rng.normal(size=60) + 5.0
    est = MeanFieldVIRegressor(hidden=(6, 4), epochs=20, batch_size=16, n_samples=50, random_state=2,
                               progress=False).fit(X, y)
    return est, rng.normal(size=(7, 3)), rng.normal(size=7) + 5.0


def test_save_load_round_trip_gives_identical_predictions(small_model, tmp_path):
    est, Xq, yq = small_model
    path = tmp_path / "mfvi.safetensors"
    est.save(path)
    back = MeanFieldVIRegressor.load(path, device="cpu")
    assert back.get_params() == est.get_params()
    a, b = est.predict_distribution(Xq), back.predict_distribution(Xq)
    np.testing.assert_array_equal(a.mean, b.mean)
    np.testing.assert_array_equal(a.var, b.var)
    np.testing.assert_array_equal(a.log_prob(yq), b.log_prob(yq))
    np.testing.assert_array_equal(back.loss_curve_, est.loss_curve_)
    np.testing.assert_array_equal(back.validation_curve_, est.validation_curve_)
    assert back.noise_sd_ == est.noise_sd_ and back.n_train_ == est.n_train_
    assert (back.best_epoch_, back.stopped_by_) == (est.best_epoch_, est.stopped_by_)
    assert back.diagnostics_ == est.diagnostics_
    # the check can fail: another seed's draws give other predictions
    assert not np.array_equal(est.predict_distribution(Xq, random_state=1).mean, a.mean)
    with open(path, "rb") as fh:  # safetensors with JSON metadata, not a pickle
        header = json.loads(fh.read(int.from_bytes(fh.read(8), "little")))
    assert header["__metadata__"]["dubito_class"] == "MeanFieldVIRegressor"


def test_save_before_fit_and_bad_files_are_refused(small_model, tmp_path):
    est, _, _ = small_model
    with pytest.raises(NotFittedError, match="not fitted"):
        MeanFieldVIRegressor().save(tmp_path / "x.safetensors")
    garbage = tmp_path / "garbage.safetensors"
    garbage.write_bytes(b"not a model" * 20)
    with pytest.raises(ValueError, match="not a readable safetensors"):
        MeanFieldVIRegressor.load(garbage)
    p = tmp_path / "m.safetensors"
    est.save(p)
    data = p.read_bytes()
    (tmp_path / "t.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="corrupted or truncated"):
        MeanFieldVIRegressor.load(tmp_path / "t.safetensors")
    with pytest.raises(ValueError, match="holds a MeanFieldVIRegressor, not a NUTSNetworkRegressor"):
        NUTSNetworkRegressor.load(p)
    tensors, settings = io.load_tensors(p, "MeanFieldVIRegressor")
    bad = dict(tensors, **{"q.W_mu.0": torch.zeros(2, 2, dtype=torch.float64)})
    io.save_tensors(tmp_path / "shape.safetensors", bad, "MeanFieldVIRegressor", settings)
    with pytest.raises(ValueError, match="inconsistent"):
        MeanFieldVIRegressor.load(tmp_path / "shape.safetensors")
    del tensors["x_scale"]
    io.save_tensors(tmp_path / "missing.safetensors", tensors, "MeanFieldVIRegressor", settings)
    with pytest.raises(ValueError, match="inconsistent contents"):
        MeanFieldVIRegressor.load(tmp_path / "missing.safetensors")


def test_a_file_written_before_validated_fitting_still_loads(small_model, tmp_path):
    """The layout before issue 19: no held-out record, y_mean / y_scale in the JSON, no
    validation_fraction / patience in the params. It loads as fitted on every row, capped."""
    est, Xq, _ = small_model
    est.save(tmp_path / "new.safetensors")
    tensors, settings = io.load_tensors(tmp_path / "new.safetensors", "MeanFieldVIRegressor")
    for key in ("validation_curve", "y_mean", "y_scale"):
        del tensors[key]
    fitted = {k: v for k, v in settings["fitted"].items() if k not in ("best_epoch", "stopped_by")}
    fitted.update(y_mean=est.y_mean_, y_scale=est.y_scale_)
    params = {k: v for k, v in settings["params"].items() if k not in ("validation_fraction", "patience")}
    io.save_tensors(tmp_path / "old.safetensors", tensors, "MeanFieldVIRegressor", {"params": params, "fitted": fitted})
    back = MeanFieldVIRegressor.load(tmp_path / "old.safetensors")
    np.testing.assert_array_equal(back.predict_distribution(Xq).means, est.predict_distribution(Xq).means)
    assert back.validation_fraction == 0.0 and back.stopped_by_ == "cap" and back.validation_curve_.size == 0
    assert back.best_epoch_ == len(est.loss_curve_)
    assert back.diagnostics_["stopped_by_cap"] is still_improving(est.loss_curve_)
