"""B-DeepNoise full conditionals against independent oracles (spec §7 items 1, 3, 4, 7).

- v: KS test of 2·10⁵ draws against the brute-force CDF of N(v|m,t)·N(w|h(v),s) integrated
  on a fine grid; the paper's ζ-recursion weights (Theorem 1) equal the direct weights.
- u: mean and covariance equal Gaussian conditioning of the joint MVN of (u_l, v_l).
- weights: closed-form Bayesian linear regression, lstsq in the flat-prior limit, draw moments.
- variances: E[IG] = (b + SS/2)/(a + N/2 − 1), KS against scipy.stats.invgamma.
All seeds are fixed, so every statistical check is deterministic; tolerances are stated inline.
"""

import math

import numpy as np
import pytest
import scipy.special as sc
import scipy.stats as st
import torch

from dubito.regression.deepnoise_gibbs import (
    sample_inverse_gamma,
    sample_noise_variances,
    sample_prior_variances,
    sample_u,
    sample_v,
    sample_weights,
    u_conditional,
    v_conditional,
    weight_conditional,
)
from dubito.regression.deepnoise_model import piecewise_activation

F64 = torch.float64


def _t(x):
    return torch.as_tensor(x, dtype=F64)


# ----------------------------------------------------------------------------------- (a) v
def _brute_force_cdf(m, t, s, w, act, samples):
    """CDF of p(v) ∝ N(v; m, t)·N(w; h(v), s) by the trapezoid rule on a fine grid covering
    ±40 prior sds, the sampled range (widened by half its span) and the borders."""
    h = piecewise_activation(act)
    smin, smax = float(samples.min()), float(samples.max())
    span = smax - smin
    grid = np.unique(
        np.concatenate(
            [
                np.linspace(m - 40 * math.sqrt(t), m + 40 * math.sqrt(t), 400_001),
                np.linspace(smin - 0.5 * span, smax + 0.5 * span, 400_001),
                np.asarray(h.borders, dtype=float),
            ]
        )
    )
    hv = h(torch.as_tensor(grid, dtype=F64)).numpy()
    logf = -0.5 * (grid - m) ** 2 / t - 0.5 * (w - hv) ** 2 / s
    f = np.exp(logf - logf.max())
    cum = np.concatenate([[0.0], np.cumsum(0.5 * (f[1:] + f[:-1]) * np.diff(grid))])
    cum /= cum[-1]
    return lambda x: np.interp(x, grid, cum)


V_CASES = [
    # act, m, t, s, w  (regime)
    ("hardtanh", 0.0, 1.0, 0.1, 0.3),  # generic
    ("hardtanh", 6.0, 0.5, 0.2, 0.2),  # m far outside the borders
    ("hardtanh", -4.0, 0.3, 0.05, 0.9),  # m far outside, w near the other end
    ("hardtanh", 0.2, 1.0, 1e-4, 0.5),  # s << t
    ("hardtanh", 0.5, 1e-3, 1.0, -2.0),  # t << s
    ("hardtanh", 0.0, 1.0, 0.01, 1.0),  # w in saturation (upper)
    ("hardtanh", 0.3, 2.0, 0.02, -1.3),  # w beyond saturation (lower)
    ("relu", -1.0, 1.0, 0.05, 0.5),
    ("relu", 2.0, 0.1, 1e-3, 0.0),  # w at the kink, m far right
    ("relu", -5.0, 1.0, 1e-4, 0.01),  # m far left, s << t
    ("leaky_relu", -3.0, 2.0, 0.01, -0.2),
    ("leaky_relu", 1.0, 1.0, 1.0, -1.0),
    ("leaky_relu", 0.0, 1e-3, 0.5, 3.0),  # t << s
    # a piece whose Gaussian factor lies 40 sd outside it carries weight 0.63 / 0.41 / 0.92:
    # exercises the log-space (far) path of the truncated-normal draw
    ("hardtanh", 40.0, 1.0, 1e-3, -1.1),
    ("hardtanh", -38.0, 1.0, 1e-3, 1.08),
    ("relu", 40.0, 1.0, 1e-4, -0.05),
]


@pytest.mark.parametrize("act,m,t,s,w", V_CASES)
def test_v_conditional_ks_against_brute_force(act, m, t, s, w):
    n = 200_000
    g = torch.Generator().manual_seed(11)
    v = sample_v(torch.full((n, 1), m, dtype=F64), _t([t]), _t([s]), torch.full((n, 1), w, dtype=F64), act, g)[:, 0]
    assert torch.isfinite(v).all()
    cdf = _brute_force_cdf(m, t, s, w, act, v.numpy())
    p = st.kstest(v.numpy(), cdf).pvalue
    # fixed seed; the measured p-values are recorded in the module docstring of the report
    assert p > 1e-3, p


def _zeta_weights(m, t, s, w, act):
    """[P] Theorem 1 weights π_j ∝ π'_j ζ_j with the telescoping ζ, in log space (oracle)."""
    h = piecewise_activation(act)
    b, b0 = np.array(h.slopes), np.array(h.intercepts)
    c = np.array([-np.inf, *h.borders, np.inf])
    J = len(b)
    om2 = 1.0 / (1.0 / t + b**2 / s)
    lam = om2 * (m / t + b * (w - b0) / s)
    om = np.sqrt(om2)

    def log_phi(x, mu, var):
        return -0.5 * (x - mu) ** 2 / var - 0.5 * np.log(2 * np.pi * var)

    log_zeta = np.zeros(J)
    for j in range(1, J):  # j here is 0-based; the border between pieces j-1 and j is c[j]
        log_kappa_j = log_phi(w, c[j] * b[j] + b0[j], s)
        log_kappa_jm1 = log_phi(w, c[j] * b[j - 1] + b0[j - 1], s)
        log_kt_jm1 = log_phi(c[j], lam[j - 1], om2[j - 1])
        log_kt_j = log_phi(c[j], lam[j], om2[j])
        log_zeta[j] = log_zeta[j - 1] + log_kappa_j - log_kappa_jm1 + log_kt_jm1 - log_kt_j
    lo, hi = (c[:-1] - lam) / om, (c[1:] - lam) / om
    # Φ(hi) − Φ(lo), written with the survival function right of the mean (no 1 − 1 = 0)
    pi_prime = np.where(lo > 0, sc.ndtr(-lo) - sc.ndtr(-hi), sc.ndtr(hi) - sc.ndtr(lo))
    logits = np.log(pi_prime) + log_zeta
    return np.exp(logits - sc.logsumexp(logits))


@pytest.mark.parametrize("act", ["hardtanh", "relu", "leaky_relu", "bounded_relu"])
def test_zeta_recursion_equals_direct_weights(act):
    rng = np.random.default_rng(3)
    for _ in range(200):
        m = rng.normal(0, 1.5)
        t = math.exp(rng.normal(-1, 1))
        s = math.exp(rng.normal(-1, 1))
        w = rng.normal(0, 1)
        logits = v_conditional(_t([[m]]), _t([t]), _t([s]), _t([[w]]), act)[0][0, 0]
        want = _zeta_weights(m, t, s, w, act)
        np.testing.assert_allclose(torch.exp(logits).numpy(), want, rtol=0, atol=1e-10)


# ----------------------------------------------------------------------------------- (b) u
def _u_problem(seed=0, K=3, K_next=4, n=5):
    g = torch.Generator().manual_seed(seed)
    W = torch.randn(K, K_next, generator=g, dtype=F64)
    gamma = torch.randn(K_next, generator=g, dtype=F64)
    tau2 = 0.05 + torch.rand(K_next, generator=g, dtype=F64)
    sigma2 = 0.05 + torch.rand(K, generator=g, dtype=F64)
    hv = torch.randn(n, K, generator=g, dtype=F64).clamp(-1, 1)
    V = torch.randn(n, K_next, generator=g, dtype=F64)
    return hv, sigma2, W, gamma, tau2, V


def test_u_conditional_equals_mvn_conditioning():
    hv, sigma2, W, gamma, tau2, V = _u_problem()
    mean, C = u_conditional(hv, sigma2, W, gamma, tau2, V)
    beta = W.T.numpy()
    Sig = np.diag(sigma2.numpy())
    S_vv = beta @ Sig @ beta.T + np.diag(tau2.numpy())
    gain = Sig @ beta.T @ np.linalg.inv(S_vv)
    cov_want = Sig - gain @ beta @ Sig
    for n in range(hv.shape[0]):
        h_n = hv[n].numpy()
        mean_want = h_n + gain @ (V[n].numpy() - beta @ h_n - gamma.numpy())
        np.testing.assert_allclose(mean[n].numpy(), mean_want, rtol=0, atol=1e-10)
    cov = torch.cholesky_inverse(C).numpy()
    np.testing.assert_allclose(cov, cov_want, rtol=0, atol=1e-10)


def test_u_draw_moments_z_scores():
    hv, sigma2, W, gamma, tau2, V = _u_problem(seed=1, n=1)
    n = 40_000
    mean, C = u_conditional(hv, sigma2, W, gamma, tau2, V)
    cov = torch.cholesky_inverse(C)
    u = sample_u(hv.expand(n, -1), sigma2, W, gamma, tau2, V.expand(n, -1), torch.Generator().manual_seed(2))
    se = (cov.diagonal() / n).sqrt()
    z = (u.mean(0) - mean[0]) / se
    assert z.abs().max() < 4.5  # 4.5 SE, deterministic seed
    emp = torch.cov(u.T)
    se_cov = ((cov.diagonal()[:, None] * cov.diagonal()[None, :] + cov**2) / n).sqrt()
    assert ((emp - cov) / se_cov).abs().max() < 4.5


# ----------------------------------------------------------------------------------- (c) W
def _regression(seed=4, N=50, K=3):
    g = torch.Generator().manual_seed(seed)
    U = torch.randn(N, K, generator=g, dtype=F64)
    beta = torch.tensor([1.0, -2.0, 0.5], dtype=F64)[:K]
    v = U @ beta + 0.3 + 0.4 * torch.randn(N, generator=g, dtype=F64)
    return U, v


def test_weight_mean_flat_prior_equals_lstsq():
    U, v = _regression()
    tau2 = _t([0.16])
    mean, _ = weight_conditional(U, v[:, None], tau2, torch.full((3, 1), 1e12, dtype=F64), _t([1e12]))
    Ub = np.column_stack([U.numpy(), np.ones(len(v))])
    coef = np.linalg.lstsq(Ub, v.numpy(), rcond=None)[0]
    np.testing.assert_allclose(mean[0].numpy(), coef, rtol=1e-8, atol=1e-10)


def _blr_closed_form(U, v, tau2, rho2, xi2):
    Ub = np.column_stack([U, np.ones(len(v))])
    A = Ub.T @ Ub / tau2 + np.diag(np.concatenate([1.0 / rho2, [1.0 / xi2]]))
    cov = np.linalg.inv(A)
    return cov @ Ub.T @ v / tau2, cov


def test_weight_rows_closed_form_and_draw_moments():
    U, v = _regression(N=20)
    tau2, rho2, xi2 = 0.5, np.array([0.3, 2.0, 0.05]), 0.7
    mean_want, cov_want = _blr_closed_form(U.numpy(), v.numpy(), tau2, rho2, xi2)
    R = 20_000  # R identical rows, one independent draw each
    V = v[:, None].expand(-1, R)
    tau2_t = torch.full((R,), tau2, dtype=F64)
    rho2_t = _t(rho2)[:, None].expand(-1, R)
    xi2_t = torch.full((R,), xi2, dtype=F64)
    mean, C = weight_conditional(U, V[:, :2], tau2_t[:2], rho2_t[:, :2], xi2_t[:2])
    np.testing.assert_allclose(mean[0].numpy(), mean_want, rtol=0, atol=1e-10)
    np.testing.assert_allclose(torch.cholesky_inverse(C[0]).numpy(), cov_want, rtol=0, atol=1e-10)
    W, gam = sample_weights(U, V, tau2_t, rho2_t, xi2_t, torch.Generator().manual_seed(5))
    draws = torch.cat([W, gam[None, :]], dim=0).T.numpy()  # (R, 4)
    se = np.sqrt(np.diag(cov_want) / R)
    assert np.max(np.abs((draws.mean(0) - mean_want) / se)) < 4.0  # 4 SE
    d = np.sqrt(np.diag(cov_want))
    se_cov = np.sqrt((np.outer(d**2, d**2) + cov_want**2) / R)
    assert np.max(np.abs((np.cov(draws.T) - cov_want) / se_cov)) < 4.5


# ----------------------------------------------------------------------------- (d), (e) IG
def test_inverse_gamma_ks_against_scipy():
    x = sample_inverse_gamma(torch.full((50_000,), 2.5, dtype=F64), _t(0.7), torch.Generator().manual_seed(6))
    assert st.kstest(x.numpy(), st.invgamma(2.5, scale=0.7).cdf).pvalue > 1e-3


def test_noise_variance_conditional_expectation():
    g = torch.Generator().manual_seed(7)
    N, R, a, b = 7, 100_000, 2.5, 0.7
    resid = torch.randn(N, 1, generator=g, dtype=F64).expand(-1, R)
    ss = float((resid[:, 0] ** 2).sum())
    x = sample_noise_variances(resid, a, b, g)
    shape, scale = a + N / 2, b + ss / 2
    want = scale / (shape - 1)
    sd = want / math.sqrt(shape - 2)
    assert abs(float(x.mean()) - want) < 4.0 * sd / math.sqrt(R)  # 4 SE


def test_prior_variance_conditional_expectation_and_floor():
    g = torch.Generator().manual_seed(8)
    R, a, b, beta = 100_000, 3.0, 2.0, 1.3
    x = sample_prior_variances(torch.full((R,), beta, dtype=F64), a, b, g)
    shape, scale = a + 0.5, b + beta**2 / 2
    want = scale / (shape - 1)
    sd = want / math.sqrt(shape - 2)
    assert abs(float(x.mean()) - want) < 4.0 * sd / math.sqrt(R)  # 4 SE
    # IG(1e-3 + 1/2, 1e-3) puts most of its mass far below 1e-8 ... no: pitfall 5 floor
    y = sample_prior_variances(torch.zeros(R, dtype=F64), 1e-3, 1e-12, g, floor=1e-8)
    assert float(y.min()) >= 1e-8
    assert float((y == 1e-8).double().mean()) > 0.5


@pytest.mark.parametrize("tie", ["row", "layer"])
def test_tied_prior_variance_is_the_conjugate_inverse_gamma(tie):
    """A ρ² shared by n weights has the full conditional IG(a + n/2, b + Σ w²/2) (spec pitfall 5's
    tie_rho): 20,000 draws for one fixed 4 x 3 weight matrix, KS against scipy's invgamma
    (alpha 1e-3 per unit, fixed seed)."""
    g = torch.Generator().manual_seed(9)
    W = torch.tensor([[0.3, -1.2, 0.05], [0.8, 0.4, -0.6], [-0.2, 0.9, 1.5], [1.1, -0.3, 0.0]], dtype=F64)
    a, b, R = 2.0, 0.5, 20_000
    draws = torch.stack([sample_prior_variances(W, a, b, g, tie=tie) for _ in range(R)])  # (R, 4, 3)
    assert draws.shape == (R, 4, 3)
    groups = [(slice(None), k) for k in range(3)] if tie == "row" else [(slice(None), slice(None))]
    for rows, cols in groups:
        block = draws[:, rows, cols].reshape(R, -1)
        assert torch.all(block == block[:, :1])  # one value shared by the group
        w = W[rows, cols].reshape(-1)
        ref = st.invgamma(a + w.numel() / 2, scale=b + float((w**2).sum()) / 2)
        assert st.kstest(block[:, 0].numpy(), ref.cdf).pvalue > 1e-3


def test_tie_none_is_the_elementwise_update_and_bad_tie_is_refused():
    W = torch.tensor([[0.3, -1.2], [0.8, 0.4]], dtype=F64)
    one = sample_prior_variances(W, 2.0, 0.5, torch.Generator().manual_seed(3))
    other = sample_prior_variances(W, 2.0, 0.5, torch.Generator().manual_seed(3), tie="none")
    assert torch.equal(one, other) and len(set(one.reshape(-1).tolist())) == 4
    with pytest.raises(ValueError, match="tie must be one of"):
        sample_prior_variances(W, 2.0, 0.5, torch.Generator(), tie="unit")
