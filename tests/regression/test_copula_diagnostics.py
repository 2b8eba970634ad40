"""ImplicitCopulaRegressor.diagnostics_: the shared convergence schema for its VI and NUTS posteriors.

Oracles: with the log-normal marginal F_Y(y) = Phi(log y) the predictive mean per draw is
E[exp(Z)] = exp(m + s^2 / 2) for Z ~ N(m, s^2) (closed form, against the estimator's 32-node
Gauss-Hermite rule); the copula log-likelihood per draw is the sum of scipy normal log-densities
log N(z_i; s_i psi_i' beta, s_i^2) (eq. 6). Short chains: only the bookkeeping is checked, not mixing.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy import stats

from dubito.inference.convergence import RHAT_CONVERGED, SCHEMA_KEYS
from dubito.inference.diagnostics import ess_bulk, split_rhat
from dubito.regression import ImplicitCopulaRegressor
from dubito.regression.copula_posterior import copula_scales

from .copula_synthetic import relu_features_and_latent


class LogNormalMarginal:
    """F_Y(y) = Phi(log y): z = log y (used as given, no fit)."""

    def pseudo_response(self, y):
        return np.log(np.asarray(y, dtype=np.float64))

    def inverse_pseudo_response(self, z):
        return np.exp(np.asarray(z, dtype=np.float64))

    def log_pdf(self, y):
        y = np.asarray(y, dtype=np.float64)
        return stats.norm.logpdf(np.log(y)) - np.log(y)


@pytest.fixture(scope="module")
def nuts_fit():
    psi, z = relu_features_and_latent(80, seed=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # R-hat of short chains
        est = ImplicitCopulaRegressor.from_features(psi, np.exp(z), marginal=LogNormalMarginal(), inference="nuts",
                                                    nuts_samples=20, nuts_warmup=20, random_state=0, progress=False)
    return est, psi, z


def test_nuts_diagnostics_are_the_traces_statistics(nuts_fit):
    est, psi, z = nuts_fit
    d = est.diagnostics_
    assert set(SCHEMA_KEYS) <= set(d) and d["inference"] == "nuts"
    post = est.posterior_
    C, S, dim = post.theta_by_chain.shape
    theta = post.theta_by_chain.reshape(C * S, dim)
    rows = d["monitor_rows"]
    assert len(rows) == 20 and rows[0] == 0 and rows[-1] == len(z) - 1
    # the default model has the random intercept: its column of ones joins psi (post.design)
    X = post.design(torch_f64(psi)).numpy()
    assert post.intercept and X.shape[1] == post.n_coef == post.p + 1
    s = copula_scales(torch_f64(X[rows]), post._prior_variances(theta)).numpy()        # (J, rows)
    m = s * (theta[:, :post.n_coef].numpy() @ X[rows].T)
    mean_oracle = np.exp(m + 0.5 * s**2).reshape(C, S, -1)                                # E[exp Z]
    _, trace = est._monitor_mean_trace()
    np.testing.assert_allclose(trace, mean_oracle, rtol=1e-10)
    s_all = copula_scales(torch_f64(X), post._prior_variances(theta)).numpy()
    m_all = s_all * (theta[:, :post.n_coef].numpy() @ X.T)
    ll_oracle = stats.norm.logpdf(z[None, :], m_all, s_all).mean(1).reshape(C, S)
    np.testing.assert_allclose(est.loglik_trace_, ll_oracle, rtol=1e-10)
    assert d["rhat_mean"] == pytest.approx(np.max(split_rhat(mean_oracle)), rel=1e-8)
    assert d["ess_mean"] == pytest.approx(np.min(ess_bulk(mean_oracle)), rel=1e-6)
    assert d["rhat_loglik"] == split_rhat(est.loglik_trace_) and d["ess_loglik"] == ess_bulk(est.loglik_trace_)
    assert isinstance(d["divergences"], int) and d["divergences"] == int(np.sum(post.diagnostics["divergences"]))
    assert 0.0 <= d["acceptance"] <= 1.0 and d["stopped_by_cap"] is False
    assert d["converged"] is bool(d["rhat_mean"] <= RHAT_CONVERGED)
    assert d["rhat_theta_max"] == pytest.approx(float(np.max(post.diagnostics["rhat"])))


def test_vi_diagnostics_and_the_cap():
    """VI: no chain (R-hat NaN); the ELBO stopping rule met -> converged; a cap of 60 iterations
    (below the rule's first two windows of 200) -> stopped by cap, not converged."""
    psi, z = relu_features_and_latent(80, seed=3)
    y = np.exp(z)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the capped run's ConvergenceWarning
        ok = ImplicitCopulaRegressor.from_features(psi, y, marginal=LogNormalMarginal(), vi_max_iter=6000,
                                                   vi_min_iter=400, n_draws=20, random_state=0, progress=False)
        capped = ImplicitCopulaRegressor.from_features(psi, y, marginal=LogNormalMarginal(), vi_max_iter=60,
                                                       vi_min_iter=10, n_draws=20, random_state=0, progress=False)
    for est in (ok, capped):
        d = est.diagnostics_
        assert set(SCHEMA_KEYS) <= set(d) and d["inference"] == "vi"
        assert all(math.isnan(d[k]) for k in ("rhat_mean", "ess_mean", "rhat_loglik", "ess_loglik", "acceptance"))
        assert d["divergences"] is None and est.loglik_trace_ is None
        assert d["stopped_by_cap"] is (not est.posterior_.diagnostics["converged"])
        assert d["iterations"] == est.posterior_.diagnostics["iterations"]
    assert ok.diagnostics_["converged"] is True and ok.diagnostics_["iterations"] < 6000
    assert capped.diagnostics_["converged"] is False and capped.diagnostics_["stopped_by_cap"] is True


def test_diagnostics_survive_save_and_load(nuts_fit, tmp_path):
    psi, z = relu_features_and_latent(60, seed=4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = ImplicitCopulaRegressor.from_features(psi, np.exp(z + 2.0), inference="nuts", nuts_samples=12,
                                                    nuts_warmup=10, random_state=1, progress=False)
    est.save(tmp_path / "m.safetensors")
    back = ImplicitCopulaRegressor.load(tmp_path / "m.safetensors")
    np.testing.assert_array_equal(back.loglik_trace_, est.loglik_trace_)
    for key in SCHEMA_KEYS:
        a, b = est.diagnostics_[key], back.diagnostics_[key]
        assert a == b or (isinstance(a, float) and math.isnan(a) and math.isnan(b)), key


def torch_f64(a):
    import torch

    return torch.as_tensor(np.ascontiguousarray(a), dtype=torch.float64)
