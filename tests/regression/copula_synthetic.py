"""Feature-level synthetic data for the IC-NLM (spec icnlm.md §5, substitute data 1).

psi_i = ReLU(A x_i + b) in R^p with x_i ~ N(0, I_d); for fixed beta* and prior variances v*
(tau*^2 repeated for ridge, lambda*^2 for horseshoe), the latent z_i = s_i (psi_i' beta* + eps_i),
s_i = (1 + sum_j v*_j psi_ij^2)^{-1/2}, eps_i ~ N(0, 1), and the response y_i = G^{-1}(Phi(z_i))
with G a steering-like marginal: 0.8 Laplace(0, 1) + 0.2 (8 t_3), truncated to [-50, 50] (the
spec's "clipped", taken as truncation so that G stays continuous and y has no ties).
"""

from __future__ import annotations

import numpy as np
from scipy import stats

_LO, _HI = -50.0, 50.0
_GRID = np.linspace(_LO, _HI, 400_001)  # G is tabulated here (spacing 2.5e-4) and inverted linearly


def _untruncated_cdf(y):
    return 0.8 * stats.laplace.cdf(y) + 0.2 * stats.t.cdf(np.asarray(y) / 8.0, df=3)


_C_LO, _C_HI = _untruncated_cdf(_LO), _untruncated_cdf(_HI)
_G_TABLE = (_untruncated_cdf(_GRID) - _C_LO) / (_C_HI - _C_LO)


def steering_cdf(y) -> np.ndarray:
    """G(y), the truncated mixture's CDF (exact)."""
    return np.clip((_untruncated_cdf(y) - _C_LO) / (_C_HI - _C_LO), 0.0, 1.0)


def steering_ppf(u) -> np.ndarray:
    """G^{-1}(u) by linear interpolation of the tabulated G (error < 1e-6 in y)."""
    return np.interp(u, _G_TABLE, _GRID)


def feature_synthetic(n: int, beta, prior_var, *, d: int = 3, seed: int = 0, feature_seed: int | None = None):
    """(psi (n, p), z (n,), y (n,)) from the IC-NLM with the given beta* and prior variances.

    ``prior_var``: a scalar tau*^2 (ridge) or a (p,) vector lambda*^2. ``feature_seed`` fixes A, b
    (default: ``seed``), so train and test sets can share one feature map.
    """
    beta = np.asarray(beta, dtype=np.float64)
    p = beta.size
    v = np.broadcast_to(np.asarray(prior_var, dtype=np.float64), (p,))
    frng = np.random.default_rng(seed if feature_seed is None else feature_seed)
    A = frng.normal(size=(d, p))
    b = 0.5 * frng.normal(size=p)
    rng = np.random.default_rng([seed, 1])
    x = rng.normal(size=(n, d))
    psi = np.maximum(x @ A + b, 0.0)
    s = 1.0 / np.sqrt(1.0 + psi**2 @ v)
    z = s * (psi @ beta + rng.normal(size=n))
    y = steering_ppf(stats.norm.cdf(z))
    return psi, z, y


class SteeringMarginal:
    """The exact marginal G (no fit: the estimator uses it as given): z = Phi^{-1}(G(y))."""

    clip = 1e-10  # as KDEMarginal's: the predictive grid stops at |z| = 6.36

    def pseudo_response(self, y):
        u = np.clip(steering_cdf(y), self.clip, 1.0 - self.clip)
        return stats.norm.ppf(u)

    def inverse_pseudo_response(self, z):
        return steering_ppf(stats.norm.cdf(z))

    def log_pdf(self, y):
        y = np.asarray(y, dtype=np.float64)
        pdf = (0.8 * stats.laplace.pdf(y) + 0.2 * stats.t.pdf(y / 8.0, df=3) / 8.0) / (_C_HI - _C_LO)
        with np.errstate(divide="ignore"):
            return np.where((y >= _LO) & (y <= _HI), np.log(pdf), -np.inf)


def relu_features_and_latent(n: int, p: int = 4, seed: int = 0):
    """Small ReLU features psi = relu(A x + b) (x ~ N(0, I_3)) and a latent z drawn from the
    IC-NLM with a ridge prior, tau^2 = 0.5 (the fixtures of test_copula and test_copula_tails)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 3))
    psi = np.maximum(x @ rng.normal(size=(3, p)) + 0.5 * rng.normal(size=p), 0.0)
    beta = rng.normal(size=p) * np.sqrt(0.5)
    s = 1.0 / np.sqrt(1.0 + 0.5 * np.sum(psi**2, axis=1))
    z = s * (psi @ beta + rng.normal(size=n))
    return psi, z


#: A small feature network and a short VI for end-to-end fits: lr 0.03 on 300 rows overfits within a few
#: dozen epochs, so the held-out rule (patience 5) stops well before the cap.
FAST_NETWORK = dict(hidden=(32,), n_features=4, activation="tanh", lr=3e-2, batch_size=16, epochs=200, patience=5)
FAST_COPULA = dict(vi_max_iter=200, vi_min_iter=50, n_draws=40, random_state=3, progress=False)


def skewed_rows(n: int = 300, seed: int = 0):
    """(X, y): three inputs uniform on [-2, 2], a log-normal response with a sine and an interaction."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, 3))
    y = np.exp(0.5 * np.sin(2 * X[:, 0]) + 0.3 * X[:, 1] * X[:, 2] + 0.3 * rng.normal(size=n))
    return X, y


def fit_fast(X, y, **settings):
    """`ImplicitCopulaRegressor` with ``FAST_NETWORK`` and ``FAST_COPULA`` (``settings`` override them),
    fitted on (X, y) with the short VI runs' ConvergenceWarning silenced."""
    import warnings

    from dubito.regression import ImplicitCopulaRegressor

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ImplicitCopulaRegressor(**{**FAST_NETWORK, **FAST_COPULA, **settings}).fit(X, y)
