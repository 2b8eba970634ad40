"""MeanFieldVIRegressor (the VI baseline of B-DeepNoise, spec §4.3).

Oracle: with hidden=() the model is Bayesian linear regression; for a Gaussian target the
mean-field optimum of KL(q || posterior) is known in closed form — the means are the exact
posterior mean and the variances are 1 / diag(posterior precision) (Bishop 2006, §10.1.2) —
and with hidden=() our objective is deterministic (the output layer is integrated exactly),
so a full-batch Adam run converges to it to float precision.
"""
import numpy as np
import pytest

from dubito.predictive import GaussianMixture
from dubito.regression.mean_field_vi import MeanFieldVIRegressor


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
                               random_state=0, progress=False).fit(X, y)
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
                               progress=False).fit(X, y)
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
                               random_state=0, progress=False).fit(X, y)
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
