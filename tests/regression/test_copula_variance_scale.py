"""The IC-NLM's held-out variance scale (``variance_scaling="heldout"``): every latent component
variance times one c, the MAP value on the feature network's held-out rows under the log-normal
prior of `dubito.variance_scale`. Checked against SciPy (the MAP by direct minimisation, the
latent normal densities) and against the unscaled fit with the same seeds."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from scipy import optimize, stats

from dubito import io
from dubito._estimator import seeds_from
from dubito.early_stopping import holdout_split
from dubito.regression import ImplicitCopulaRegressor
from dubito.regression.copula_posterior import ZPrediction
from dubito.variance_scale import PRIOR_SD

from .copula_synthetic import FAST_COPULA as COPULA
from .copula_synthetic import fit_fast as _fit
from .copula_synthetic import skewed_rows


@pytest.fixture(scope="module")
def Xy():
    return skewed_rows()


@pytest.fixture(scope="module")
def plain(Xy):
    return _fit(*Xy, variance_scaling="none")


@pytest.fixture(scope="module")
def scaled(Xy):
    return _fit(*Xy)  # the default, "heldout"


def _latent(est, X):
    """(m, s) of the unscaled plug-in Z | x, (N,) each."""
    psi = torch.as_tensor(est.features(X), dtype=torch.float64)
    zp = est.posterior_.predict_z(psi, kind="plugin")
    return zp.loc[:, 0], zp.scale[:, 0]


def test_c_is_the_map_of_the_held_out_rows_latent_likelihood(Xy, plain, scaled):
    """c minimises -sum_j log N(z_j; m_j, c s_j^2) + (log c)^2 / (2 tau^2) over the network's held-out
    rows (drawn again from the documented seed), by SciPy to 1e-4; everything else is the unscaled
    fit, bit for bit."""
    X, y = Xy
    assert plain.variance_scale_ == 1.0
    np.testing.assert_array_equal(scaled.posterior_.theta.cpu().numpy(), plain.posterior_.theta.cpu().numpy())
    rows = holdout_split(len(y), scaled.validation_fraction, seeds_from(scaled.random_state, 5)[4])[1]
    z = scaled.marginal_.pseudo_response(y[rows])
    m, s = _latent(scaled, X[rows])

    def objective(log_c):
        return -stats.norm.logpdf(z, m, np.exp(0.5 * log_c) * s).sum() + log_c**2 / (2 * PRIOR_SD**2)

    oracle = np.exp(optimize.minimize_scalar(objective, bounds=(-5, 5), method="bounded",
                                             options={"xatol": 1e-9}).x)
    assert scaled.variance_scale_ == pytest.approx(oracle, rel=1e-4)
    assert abs(np.log(scaled.variance_scale_)) > 0.05  # the check means something: c moved from 1


def test_the_density_of_y_changes_by_the_latent_term_only(Xy, plain, scaled):
    """log p_c(y | x) - log p_1(y | x) = log N(z; m, c s^2) - log N(z; m, s^2) with z = Phi^-1(F_Y(y))
    (the marginal's terms cancel), against SciPy at the training rows' y; the tabulated predictive
    is wider or narrower as c says."""
    X, y = Xy
    c = scaled.variance_scale_
    m, s = _latent(scaled, X[:20])
    z = scaled.marginal_.pseudo_response(y[:20])
    expected = stats.norm.logpdf(z, m, np.sqrt(c) * s) - stats.norm.logpdf(z, m, s)
    np.testing.assert_allclose(scaled.log_density(y[:20], X[:20]) - plain.log_density(y[:20], X[:20]), expected,
                               rtol=1e-9, atol=1e-12)
    ratio = scaled.predict_distribution(X[:20]).var / plain.predict_distribution(X[:20]).var
    assert np.all(ratio < 1) if c < 1 else np.all(ratio > 1)


def test_without_held_out_rows_c_is_one(Xy):
    X, y = Xy
    assert _fit(X, y, epochs=3, validation_fraction=0.0, variance_scaling="heldout").variance_scale_ == 1.0
    est = _fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        post_hoc = ImplicitCopulaRegressor.from_features(est.train_features_, y, variance_scaling="heldout",
                                                         **COPULA)
    assert post_hoc.variance_scale_ == 1.0


def test_scaled_z_prediction_keeps_the_locations_and_scales_every_component():
    rng = np.random.default_rng(1)
    loc, scale = rng.normal(size=(5, 3)), rng.uniform(0.5, 2.0, size=(5, 3))
    mean = loc.mean(1)
    zp = ZPrediction(mean=mean, var=(scale**2).mean(1) + loc.var(1), loc=loc, scale=scale, kind="mixture")
    out = zp.scaled(0.49)
    np.testing.assert_array_equal(out.loc, loc)
    np.testing.assert_array_equal(out.mean, mean)
    np.testing.assert_allclose(out.scale, 0.7 * scale, rtol=1e-15)
    np.testing.assert_allclose(out.var, 0.49 * (scale**2).mean(1) + loc.var(1), rtol=1e-13)
    np.testing.assert_allclose(zp.scaled(1.0).var, zp.var, rtol=1e-13)


def test_round_trip_keeps_c(Xy, scaled, tmp_path):
    X, _ = Xy
    path = tmp_path / "icnlm.safetensors"
    scaled.save(path)
    back = ImplicitCopulaRegressor.load(path)
    assert back.variance_scale_ == scaled.variance_scale_ and back.variance_scaling == "heldout"
    a, b = scaled.predict_distribution(X[:10]), back.predict_distribution(X[:10])
    np.testing.assert_array_equal(a.grid, b.grid)
    np.testing.assert_array_equal(a.density, b.density)


def test_a_file_written_before_the_scale_loads_unscaled(Xy, plain, tmp_path):
    X, _ = Xy
    path = tmp_path / "old.safetensors"
    plain.save(path)
    tensors, settings = io.load_tensors(path, "ImplicitCopulaRegressor")
    fitted = {k: v for k, v in settings["fitted"].items() if k != "variance_scale"}
    params = {k: v for k, v in settings["params"].items() if k != "variance_scaling"}
    io.save_tensors(path, tensors, "ImplicitCopulaRegressor", {**settings, "params": params, "fitted": fitted})
    old = ImplicitCopulaRegressor.load(path)
    assert old.variance_scale_ == 1.0 and old.variance_scaling == "none"
    np.testing.assert_array_equal(old.predict(X[:10]), plain.predict(X[:10]))
    io.save_tensors(path, tensors, "ImplicitCopulaRegressor",
                    {**settings, "fitted": {**fitted, "variance_scale": -1.0}})
    with pytest.raises(ValueError, match="variance_scale"):
        ImplicitCopulaRegressor.load(path)


def test_an_unknown_variance_scaling_is_refused(Xy):
    with pytest.raises(ValueError, match="variance_scaling"):
        _fit(*Xy, variance_scaling="conformal")
