"""The gamma math of Hoffmann & Elster (2021), Theorem 1, against independent oracles.

Spec bayesian-ensembles.md Sec. 6, tests 3-6, 10 (synthetic members) and 11. No training here:
features, variances, residuals and weights are drawn at random (fixed seeds).
"""

import math

import numpy as np
import pytest
import torch
from scipy.optimize import minimize_scalar

from dubito.regression._gamma import (
    augment_bias,
    elbo,
    elbo_terms,
    feature_sums,
    gamma_closed_form,
)


def _problem(L=3, N=25, p_h=5, p_y=1, seed=0):
    """Random members: h (L,N,p_h) >= 0 (post-ReLU-like), sigma2 (L,N), W (L,p_y,p_h), y (N,p_y)."""
    rng = np.random.default_rng(seed)
    h = np.abs(rng.normal(size=(L, N, p_h)))
    sigma2 = rng.uniform(0.3, 2.0, size=(L, N))
    W = rng.normal(size=(L, p_y, p_h))
    y = rng.normal(size=(N, p_y)) * 2
    resid = y[None] - np.einsum("lyp,lnp->lny", W, h)
    return h, sigma2, W, y, resid


@pytest.mark.parametrize("p_y", [1, 2])
def test_closed_form_equals_numerical_argmax_of_elbo(p_y):
    """Eq. (36) = argmax of a + b gamma + c log gamma (eq. 33), to 1e-6 relative."""
    h, sigma2, W, _, resid = _problem(p_y=p_y, seed=1)
    lam = 0.7
    a, b, c = elbo_terms(h, sigma2, resid, W, lam)
    g = gamma_closed_form(h, sigma2, lam)
    for l in range(h.shape[0]):
        # maximise over u = log gamma; a_l is constant in gamma and left out for precision
        res = minimize_scalar(
            lambda u: -(b[l] * math.exp(u) + c[l] * u),
            bounds=(-30.0, 10.0),
            method="bounded",
            options={"xatol": 1e-11},
        )
        assert math.exp(res.x) == pytest.approx(g[l], rel=1e-6)
        assert g[l] == pytest.approx(-c[l] / b[l], rel=1e-12)
    # the full ELBO is lower at gammas perturbed by +-1 %
    assert elbo(g, a, b, c) > elbo(g * 1.01, a, b, c)
    assert elbo(g, a, b, c) > elbo(g * 0.99, a, b, c)


@pytest.mark.parametrize("p_y", [1, 3])
def test_elbo_terms_reproduce_monte_carlo_elbo(p_y):
    """a + b gamma + c log gamma (eqs. 33-35) equals an ELBO built from its definition:
    Monte-Carlo E_q log p(D | W) with W ~ N(W_l, gamma I) (eq. 25, constants dropped), the KL
    of eq. (29) with the per-component KL from torch.distributions (not eq. 32), + log L.
    Tolerance: 4 Monte-Carlo standard errors."""
    L, N, p_h = 3, 15, 4
    h, sigma2, W, y, resid = _problem(L=L, N=N, p_h=p_h, p_y=p_y, seed=2)
    lam = 1.3
    gam = np.array([0.05, 0.2, 0.01])
    a, b, c = elbo_terms(h, sigma2, resid, W, lam)
    analytic = elbo(gam, a, b, c)

    rng = np.random.default_rng(3)
    S = 40_000
    loglik_samples = np.zeros(S)
    kl = 0.0
    for l in range(L):
        E = rng.standard_normal((S, p_y, p_h))
        Ws = W[l][None] + math.sqrt(gam[l]) * E  # (S, p_y, p_h)
        pred = np.einsum("syp,np->sny", Ws, h[l])
        r2 = ((y[None] - pred) ** 2).sum(-1)  # (S, N)
        ll = -0.5 * (r2 / sigma2[l] + p_y * np.log(sigma2[l])).sum(-1)  # (S,)
        loglik_samples += ll / L
        q = torch.distributions.Normal(torch.as_tensor(W[l]).flatten(), math.sqrt(gam[l]))
        prior = torch.distributions.Normal(torch.zeros(p_y * p_h, dtype=torch.float64), 1 / math.sqrt(lam))
        kl += float(torch.distributions.kl_divergence(q, prior).sum()) / L
    mc = loglik_samples.mean() - kl + math.log(L)
    se = loglik_samples.std() / math.sqrt(S)
    assert abs(mc - analytic) < 4 * se, (mc, analytic, se)
    assert se < 0.05 * abs(analytic)  # the check has power


def test_moment_identity_eq_18_24():
    """E_E ||y - (W + sqrt(gamma) E) h||^2 = ||y - W h||^2 + gamma p_y ||h||^2 (1e5 draws, 4 SE)."""
    rng = np.random.default_rng(4)
    p_y, p_h, gamma = 3, 6, 0.3
    W = rng.normal(size=(p_y, p_h))
    h = rng.normal(size=p_h)
    y = rng.normal(size=p_y)
    E = rng.standard_normal((100_000, p_y, p_h))
    vals = ((y - np.einsum("syp,p->sy", W + math.sqrt(gamma) * E, h)) ** 2).sum(-1)
    expected = ((y - W @ h) ** 2).sum() + gamma * p_y * (h @ h)
    assert abs(vals.mean() - expected) < 4 * vals.std() / math.sqrt(len(vals))


def test_trace_identity():
    """gamma_l = p_h / tr(sum_i h_i h_i^T / sigma_i^2 + lam I) (spec Sec. 2.3)."""
    h, sigma2, *_ = _problem(L=4, N=30, p_h=7, seed=5)
    lam = 0.25
    g = gamma_closed_form(h, sigma2, lam)
    for l in range(4):
        H = np.einsum("np,nq->pq", h[l] / sigma2[l][:, None], h[l]) + lam * np.eye(7)
        assert g[l] == pytest.approx(7 / np.trace(H), rel=1e-12)


def test_bounds_and_limits():
    h, sigma2, W, _, resid = _problem(L=5, N=20, p_h=3, seed=6)
    lam = 2.0
    g = gamma_closed_form(h, sigma2, lam)
    assert np.all(g > 0) and np.all(g <= 1 / lam)
    # zero features: the data say nothing about W, gamma is the prior variance 1/lam
    assert np.all(gamma_closed_form(np.zeros_like(h), sigma2, lam) == 1 / lam)
    # replicating the data k times with lam -> 0 divides gamma by k
    tiny = 1e-12
    g1 = gamma_closed_form(h, sigma2, tiny)
    for k in (2, 5):
        gk = gamma_closed_form(np.tile(h, (1, k, 1)), np.tile(sigma2, (1, k)), tiny)
        np.testing.assert_allclose(gk, g1 / k, rtol=1e-9)
    # gamma = -c/b does not depend on p_y
    _, b1, c1 = elbo_terms(h, sigma2, resid[..., :1], W[:, :1], lam)
    r3 = np.concatenate([resid[..., :1]] * 3, axis=-1)
    W3 = np.concatenate([W[:, :1]] * 3, axis=1)
    _, b3, c3 = elbo_terms(h, sigma2, r3, W3, lam)
    np.testing.assert_allclose(-c1 / b1, -c3 / b3, rtol=1e-12)
    np.testing.assert_allclose(-c1 / b1, g, rtol=1e-12)
    with pytest.raises(ValueError, match="prior precision"):
        gamma_closed_form(h, sigma2, 0.0)


def test_torch_and_numpy_agree():
    h, sigma2, W, _, resid = _problem(seed=7)
    lam = 0.5
    gn = gamma_closed_form(h, sigma2, lam)
    gt = gamma_closed_form(torch.as_tensor(h), torch.as_tensor(sigma2), lam)
    np.testing.assert_allclose(gt.numpy(), gn, rtol=1e-14)
    an = elbo_terms(h, sigma2, resid, W, lam)
    at = elbo_terms(*(torch.as_tensor(v) for v in (h, sigma2, resid, W)), lam)
    for x, y in zip(an, at):
        np.testing.assert_allclose(y.numpy(), x, rtol=1e-13)
    np.testing.assert_allclose(augment_bias(torch.as_tensor(h)).numpy(), augment_bias(h))
    assert augment_bias(h).shape == h.shape[:-1] + (h.shape[-1] + 1,)
    np.testing.assert_allclose(feature_sums(h, sigma2), ((h**2).sum(-1) / sigma2).sum(-1))


def test_extension_term_does_not_vanish_with_L_but_with_N():
    """Spec test 10 on synthetic members: the added epistemic variance (1/L) sum_l gamma_l
    ||h_l(x)||^2 converges to the member average as L grows (no L-dependent factor) and goes
    to 0 as N grows (gamma = O(1/N))."""
    rng = np.random.default_rng(8)
    p_h, lam = 4, 1.0

    def members(L, N):
        h = np.abs(rng.normal(size=(L, N, p_h)))
        s2 = rng.uniform(0.5, 1.5, size=(L, N))
        hx = np.abs(rng.normal(size=(L, p_h)))  # features at one query point
        return (gamma_closed_form(h, s2, lam) * (hx**2).sum(-1)).mean()

    limit = members(20000, 200)  # the member average (relative MC sd ~0.5 %)
    by_L = [members(L, 200) for L in (10, 1000)]
    # L = 1000: relative MC sd ~2.2 %, so 10 % is > 4 sd; L = 10: sd ~22 %, 3 sd bound
    assert abs(by_L[1] - limit) < 0.1 * limit
    assert 0.3 * limit < by_L[0] < 1.7 * limit  # no 1/L-type factor shrinking it
    by_N = [members(50, N) for N in (100, 1000, 10000)]
    assert by_N[1] < 0.2 * by_N[0] and by_N[2] < 0.2 * by_N[1]  # ~1/N


def test_exact_bayes_linear_gaussian_p_h_1(capsys):
    """Spec test 11: with one fixed feature and known sigma^2, gamma is the exact posterior
    variance of w and the EXT 95 % interval covers eta(x0) = w h(x0) in 95 +- 1.5 % of 2000
    replicated (w, data) draws from the prior (binomial sd 0.49 %, so ~3 sd)."""
    rng = np.random.default_rng(9)
    N, sigma2, lam, R = 12, 0.5, 2.0, 2000
    x = rng.uniform(-1, 1, N)
    h = np.tanh(2 * x)[None, :, None]  # (1, N, 1)
    s2 = np.full((1, N), sigma2)
    gamma = gamma_closed_form(h, s2, lam)[0]
    assert gamma == pytest.approx(1 / ((h[0, :, 0] ** 2).sum() / sigma2 + lam), rel=1e-12)
    h0 = 0.8
    hits = 0
    for _ in range(R):
        w = rng.normal(0, 1 / math.sqrt(lam))
        y = w * h[0, :, 0] + rng.normal(0, math.sqrt(sigma2), N)
        w_map = (h[0, :, 0] @ y / sigma2) / ((h[0, :, 0] ** 2).sum() / sigma2 + lam)  # ridge MAP
        hits += abs(w_map * h0 - w * h0) <= 1.959964 * math.sqrt(gamma * h0**2)
    assert abs(hits / R - 0.95) <= 0.015, hits / R

    # p_h > 1: report (not assert) gamma ||h||^2 against the exact h^T H^-1 h
    hh = np.abs(rng.normal(size=(1, 50, 5)))
    ss = np.full((1, 50), sigma2)
    g = gamma_closed_form(hh, ss, lam)[0]
    H = hh[0].T @ hh[0] / sigma2 + lam * np.eye(5)
    q = np.abs(rng.normal(size=5))
    with capsys.disabled():
        print(f"\n[p_h=5] gamma||h||^2 = {g * q @ q:.4g}, exact h^T H^-1 h = {q @ np.linalg.solve(H, q):.4g}")
