"""B-DeepNoise sampler as a whole and its predictive maps (spec §7 items 5, 6, 8, 9, 10, 14).

- L = 0 with frozen variances is exact Bayesian linear regression (closed-form predictive).
- Geweke "getting it right" (marginal-conditional vs successive-conditional simulators) on
  P=1, K=2, L=1, N=5 and on L=0, proper priors IG(3, 2).
- Zero-noise limit = a reference numpy MLP; Theorem 3 ≥ Monte Carlo, Corollary 4 ≥ Theorem 3;
  Theorem 2 quadrature (L=1, K=1) = the Rao–Blackwellised mixture and integrates to 1.
- Determinism, mini-batch latent refresh, activation table, (de)serialisation.
Seeds are fixed, so the statistical checks are deterministic; tolerances are stated inline.
"""

import math

import numpy as np
import pytest
import scipy.stats as st
import torch

from dubito.regression.deepnoise_gibbs import (
    gibbs_sweep,
    init_latents,
    random_init,
    train_log_likelihood,
)
from dubito.regression.deepnoise_model import (
    DeepNoiseLatents,
    DeepNoiseParams,
    DeepNoisePriors,
    corollary4_bound,
    forward_moments,
    forward_sample,
    log_density_recursive,
    noiseless_forward,
    piecewise_activation,
    variance_bound,
)

F64 = torch.float64


def _data(n=200, p=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, p, generator=g, dtype=F64)
    y = torch.sin(X[:, 0]) + 0.1 * torch.randn(n, generator=g, dtype=F64)
    return X, y


def _chain(seed, n_sweeps=5, **kw):
    X, y = _data()
    g = torch.Generator().manual_seed(seed)
    params = random_init((3, 8, 8, 1), g)
    latents = init_latents(params, X, y, "hardtanh", g)
    for _ in range(n_sweeps):
        gibbs_sweep(params, latents, X, y, DeepNoisePriors(), "hardtanh", g, **kw)
    return params, latents


# ------------------------------------------------------------------------- smoke / determinism
def test_smoke_sweep_shapes_and_finite():
    params, latents = _chain(1)
    assert params.widths == (3, 8, 8, 1)
    assert params.n_hidden == 2
    for t in params.to_flat().values():
        assert t.dtype == F64 and torch.isfinite(t).all()
    for t in latents.to_flat().values():
        assert t.shape == (200, 8) and torch.isfinite(t).all()
    X, y = _data()
    ll = train_log_likelihood(params, X, y, "hardtanh", 20, torch.Generator().manual_seed(0))
    assert -10.0 < ll < 5.0


def test_determinism_same_seed_identical_chain():
    a, la = _chain(7, latent_batch_size=16)
    b, lb = _chain(7, latent_batch_size=16)
    for k, v in a.to_flat().items():
        assert torch.equal(v, b.to_flat()[k]), k
    for k, v in la.to_flat().items():
        assert torch.equal(v, lb.to_flat()[k]), k
    c, _ = _chain(8)
    assert not torch.equal(a.W[0], c.W[0])


def test_latent_batch_refreshes_only_a_minibatch_per_layer():
    X, y = _data()
    g = torch.Generator().manual_seed(3)
    params = random_init((3, 8, 8, 1), g)
    latents = init_latents(params, X, y, "hardtanh", g)
    before = latents.clone()
    gibbs_sweep(params, latents, X, y, DeepNoisePriors(), "hardtanh", g, latent_batch_size=16)
    for l in range(2):
        changed_v = (latents.V[l] != before.V[l]).any(1)
        changed_u = (latents.U[l] != before.U[l]).any(1)
        assert int(changed_v.sum()) == 16 and torch.equal(changed_v, changed_u)
    with pytest.raises(ValueError, match="latent_batch_size"):
        gibbs_sweep(params, latents, X, y, DeepNoisePriors(), "hardtanh", g, latent_batch_size=0)
    with pytest.raises(ValueError, match=r"y \(N,\)"):
        gibbs_sweep(params, latents, X, y[:, None], DeepNoisePriors(), "hardtanh", g)
    with pytest.raises(ValueError, match="columns"):
        init_latents(params, X[:, :2], y, "hardtanh", g)
    with pytest.raises(TypeError, match="dtype"):
        gibbs_sweep(params, latents, X.float(), y, DeepNoisePriors(), "hardtanh", g)


# ------------------------------------------------------------------------------ L = 0 exact BLR
def test_l0_frozen_variances_is_exact_bayesian_linear_regression():
    g = torch.Generator().manual_seed(10)
    N, P = 30, 3
    X = torch.randn(N, P, generator=g, dtype=F64)
    y = X @ torch.tensor([0.5, -1.0, 2.0], dtype=F64) + 0.2 + 0.5 * torch.randn(N, generator=g, dtype=F64)
    params = random_init((P, 1), g)
    params.tau2[0] = torch.tensor([0.3], dtype=F64)
    params.rho2[0] = torch.tensor([[0.5], [2.0], [0.1]], dtype=F64)
    params.xi2[0] = torch.tensor([1.5], dtype=F64)
    latents = init_latents(params, X, y, "hardtanh", g)
    Xs = torch.randn(4, P, generator=g, dtype=F64)
    S = 2000
    means = torch.empty(S, 4, dtype=F64)
    for s in range(S):
        gibbs_sweep(params, latents, X, y, DeepNoisePriors(), "hardtanh", g, update_hyper=False)
        means[s] = forward_moments(params, Xs, "hardtanh", 1, g)[0][0]
    assert float(params.tau2[0]) == 0.3 and float(params.xi2[0]) == 1.5  # frozen
    Xb = np.column_stack([X.numpy(), np.ones(N)])
    A = Xb.T @ Xb / 0.3 + np.diag([1 / 0.5, 1 / 2.0, 1 / 0.1, 1 / 1.5])
    cov = np.linalg.inv(A)
    m = cov @ Xb.T @ y.numpy() / 0.3
    Xsb = np.column_stack([Xs.numpy(), np.ones(4)])
    pred_mean = Xsb @ m
    f_var = np.einsum("ij,jk,ik->i", Xsb, cov, Xsb)  # variance of the regression function
    pred_var = 0.3 + f_var  # posterior predictive variance
    emp_mean = means.mean(0).numpy()
    # each sweep is an independent exact draw when L = 0: 4.5 SE on the mean,
    # and the predictive variance (law of total variance) within 4.5 SE of a variance (√(2/S))
    assert np.max(np.abs(emp_mean - pred_mean) / np.sqrt(f_var / S)) < 4.5
    emp_pred_var = 0.3 + means.var(0).numpy()
    assert np.max(np.abs(emp_pred_var - pred_var) / (f_var * math.sqrt(2 / S))) < 4.5


# ------------------------------------------------------------------------------------- Geweke
# Proper priors IG(3, 2) on ρ², ξ² (spec §7.6). The noise priors are proper too but differ,
# IG(3, 0.4) on τ² (mean 0.2) and IG(3, 1) on σ² (mean 0.5), so that a label swap (the
# (9)/(10) confusion of [P]) or a dropped T⁻¹ (the eq. (7) typo) changes the stationary law.
GEWEKE_PRIORS = {"a_w": 3.0, "b_w": 2.0, "a_b": 3.0, "b_b": 2.0, "a_pre": 3.0, "b_pre": 0.4, "a_post": 3.0, "b_post": 1.0}


def _ig(a, b, shape, rng):
    return b / rng.gamma(a, 1.0, size=shape)


def _prior_draw_numpy(widths, M, rng, pr=GEWEKE_PRIORS):
    """M draws of θ from the prior, as lists of arrays with a leading draw axis."""
    L = len(widths) - 2
    th = {k: [] for k in ("W", "gamma", "tau2", "sigma2", "rho2", "xi2")}
    for l in range(L + 1):
        k_in, k_out = widths[l], widths[l + 1]
        rho2 = _ig(pr["a_w"], pr["b_w"], (M, k_in, k_out), rng)
        xi2 = _ig(pr["a_b"], pr["b_b"], (M, k_out), rng)
        th["rho2"].append(rho2)
        th["xi2"].append(xi2)
        th["W"].append(rng.normal(size=rho2.shape) * np.sqrt(rho2))
        th["gamma"].append(rng.normal(size=xi2.shape) * np.sqrt(xi2))
        th["tau2"].append(_ig(pr["a_pre"], pr["b_pre"], (M, k_out), rng))
        if l < L:
            th["sigma2"].append(_ig(pr["a_post"], pr["b_post"], (M, k_out), rng))
    return th


def _forward_numpy(th, X, rng, h):
    """Latents and y for each of the M prior draws: V[l], U[l] (M, N, K_l), y (M, N)."""
    L = len(th["W"]) - 1
    M = th["W"][0].shape[0]
    u = np.broadcast_to(X, (M, *X.shape))
    V, U = [], []
    for l in range(L + 1):
        v = u @ th["W"][l] + th["gamma"][l][:, None, :]
        v = v + np.sqrt(th["tau2"][l])[:, None, :] * rng.normal(size=v.shape)
        if l < L:
            u = h(v) + np.sqrt(th["sigma2"][l])[:, None, :] * rng.normal(size=v.shape)
            V.append(v)
            U.append(u)
    return V, U, v[..., 0]


def _soft(x):
    return x / np.sqrt(1.0 + x * x)


def _stats(th, y, V, U):
    """Test functions g(θ, z, y) (means over units / rows), one row per draw.

    Light-tailed transforms only: logs of the IG variances and bounded maps x/√(1+x²),
    x²/(1+x²) of weights, latents and y. Raw IG(3, ·) draws have an infinite third moment, so
    their running means are skewed (typical z < 0) and the z-test would be miscalibrated.
    """
    L = len(th["W"]) - 1

    def sq(x):
        return x * x / (1.0 + x * x)

    cols = [
        np.log(th["tau2"][0]).mean(-1),
        np.log(th["tau2"][L]).mean(-1),
        _soft(th["W"][0]).mean((-1, -2)),
        sq(th["W"][0]).mean((-1, -2)),
        _soft(th["W"][L]).mean((-1, -2)),
        sq(th["W"][L]).mean((-1, -2)),
        _soft(th["gamma"][0]).mean(-1),
        _soft(th["gamma"][L]).mean(-1),
        sq(th["gamma"][L]).mean(-1),
        np.log(th["rho2"][0]).mean((-1, -2)),
        np.log(th["xi2"][L]).mean(-1),
        _soft(y).mean(-1),
        sq(y).mean(-1),
    ]
    if L > 0:
        cols += [
            np.log(th["sigma2"][0]).mean(-1),
            np.log(th["rho2"][L]).mean((-1, -2)),
            sq(V[0]).mean((-1, -2)),
            sq(U[0]).mean((-1, -2)),
            _soft(U[0] * y[..., None]).mean((-1, -2)),
        ]
    return np.stack(cols, axis=-1)


def _hardtanh_np(v):
    return np.clip(v, -1.0, 1.0)


def _geweke(widths, n_iter, seed, n_mc=100_000):
    """z-scores of successive-conditional vs marginal-conditional means of _stats (Geweke 2004).

    SC: a Gibbs sweep of (θ, z) | y, then y | θ, z regenerated; its SE uses the ESS of each
    statistic (dubito.inference.diagnostics.ess, Geyer's initial monotone sequence).
    """
    from dubito.inference.diagnostics import ess

    rng = np.random.default_rng(seed)
    N = 5
    X = rng.normal(size=(N, widths[0]))
    L = len(widths) - 2
    # marginal-conditional: iid (θ, z, y) from the prior predictive
    th = _prior_draw_numpy(widths, n_mc, rng)
    V, U, y = _forward_numpy(th, X, rng, _hardtanh_np)
    mc = _stats(th, y, V, U)
    # successive-conditional
    th1 = _prior_draw_numpy(widths, 1, rng)
    V1, U1, y1 = _forward_numpy(th1, X, rng, _hardtanh_np)
    params = DeepNoiseParams(**{k: [torch.as_tensor(a[0]) for a in v] for k, v in th1.items()})
    latents = DeepNoiseLatents(V=[torch.as_tensor(v[0]) for v in V1], U=[torch.as_tensor(u[0]) for u in U1])
    Xt = torch.as_tensor(X)
    yt = torch.as_tensor(y1[0])
    priors = DeepNoisePriors(**GEWEKE_PRIORS)
    g = torch.Generator().manual_seed(seed)
    trace = {k: [[] for _ in getattr(params, k)] for k in th1}
    tr_v, tr_u, tr_y = [[] for _ in range(L)], [[] for _ in range(L)], []
    for _ in range(n_iter):
        gibbs_sweep(params, latents, Xt, yt, priors, "hardtanh", g)
        u_last = latents.U[L - 1] if L > 0 else Xt
        yt = (u_last @ params.W[L] + params.gamma[L])[:, 0] + params.tau2[L].sqrt() * torch.randn(
            N, generator=g, dtype=F64
        )
        for k, lists in trace.items():
            for l, t in enumerate(getattr(params, k)):
                lists[l].append(t)
        for l in range(L):
            tr_v[l].append(latents.V[l])
            tr_u[l].append(latents.U[l])
        tr_y.append(yt)
    th_sc = {k: [torch.stack(x).numpy() for x in lists] for k, lists in trace.items()}
    sc = _stats(th_sc, torch.stack(tr_y).numpy(), [torch.stack(v).numpy() for v in tr_v], [torch.stack(u).numpy() for u in tr_u])
    n_eff = np.array([ess(sc[None, :, j]) for j in range(sc.shape[1])])
    se_sc = sc.std(0, ddof=1) / np.sqrt(n_eff)
    se_mc = mc.std(0, ddof=1) / math.sqrt(n_mc)
    return (sc.mean(0) - mc.mean(0)) / np.sqrt(se_sc**2 + se_mc**2)


def _geweke_parallel(widths, n_chains, n_iter, seed, n_mc=200_000):
    """Geweke with many short successive-conditional chains, each started from an exact draw
    of the joint: every iterate is then marginally exact (if the sampler is right), and the
    per-chain means are iid, so the z-scores need no autocorrelation estimate."""
    rng = np.random.default_rng(seed)
    N, L = 5, len(widths) - 2
    X = rng.normal(size=(N, widths[0]))
    th = _prior_draw_numpy(widths, n_mc, rng)
    V, U, y = _forward_numpy(th, X, rng, _hardtanh_np)
    mc = _stats(th, y, V, U)
    th0 = _prior_draw_numpy(widths, n_chains, rng)
    V0, U0, y0 = _forward_numpy(th0, X, rng, _hardtanh_np)
    priors = DeepNoisePriors(**GEWEKE_PRIORS)
    g = torch.Generator().manual_seed(seed)
    Xt = torch.as_tensor(X)
    means = []
    for r in range(n_chains):
        params = DeepNoiseParams(**{k: [torch.as_tensor(a[r]) for a in v] for k, v in th0.items()})
        latents = DeepNoiseLatents(V=[torch.as_tensor(v[r]) for v in V0], U=[torch.as_tensor(u[r]) for u in U0])
        yt = torch.as_tensor(y0[r])
        rows = []
        for _ in range(n_iter):
            gibbs_sweep(params, latents, Xt, yt, priors, "hardtanh", g)
            u_last = latents.U[L - 1] if L > 0 else Xt
            yt = (u_last @ params.W[L] + params.gamma[L])[:, 0] + params.tau2[L].sqrt() * torch.randn(
                N, generator=g, dtype=F64
            )
            th_it = {k: [t.numpy()[None] for t in getattr(params, k)] for k in th0}
            rows.append(
                _stats(th_it, yt.numpy()[None], [v.numpy()[None] for v in latents.V], [u.numpy()[None] for u in latents.U])[0]
            )
        means.append(np.mean(rows, axis=0))
    cm = np.array(means)
    return (cm.mean(0) - mc.mean(0)) / np.sqrt(cm.var(0, ddof=1) / n_chains + mc.var(0) / n_mc)


def test_geweke_fast_l1_and_l0():
    # Reduced run: one chain of 2,000 iterations each (about 10 s). Bound 5 on |z| for each of
    # 18 (L=1) and 13 (L=0) statistics; a correct sampler measured max |z| = 1.5 (L=1, seed 1)
    # and 3.2 (L=0, seed 2; ρ² mixes slowly, so the ESS-based SE of a short run is rough). With
    # the same 2,000 iterations the eq. (7) typo of [P] (no T⁻¹ in the u-precision) gives
    # max |z| = 16 and the (9)/(10) label swap (τ² drawn with σ²'s hyper-parameters) 59.
    z1 = _geweke((1, 2, 1), 2000, seed=1)
    assert np.max(np.abs(z1)) < 5.0, z1
    z0 = _geweke((2, 1), 2000, seed=2)
    assert np.max(np.abs(z0)) < 5.0, z0


@pytest.mark.slow
def test_geweke_parallel_chains():
    # 2,000 (L=1) and 3,000 (L=0) independent chains of 20 sweeps each (about 4 min);
    # bound 4 on |z| (18 and 13 statistics). Measured max |z| = 2.79 (L=1) and 1.92 (L=0).
    z1 = _geweke_parallel((1, 2, 1), 2000, 20, seed=21)
    assert np.max(np.abs(z1)) < 4.0, z1
    z0 = _geweke_parallel((2, 1), 3000, 20, seed=22)
    assert np.max(np.abs(z0)) < 4.0, z0


# ------------------------------------------------------------------------- predictive maps
def _mlp_numpy(params, X, act):
    u = X.numpy()
    L = params.n_hidden
    f = {"hardtanh": _hardtanh_np, "relu": lambda v: np.maximum(v, 0.0)}[act]
    for l in range(L):
        u = f(u @ params.W[l].numpy() + params.gamma[l].numpy())
    return (u @ params.W[L].numpy() + params.gamma[L].numpy())[:, 0]


def _random_params(widths, seed, noise=0.1):
    g = torch.Generator().manual_seed(seed)
    p = random_init(widths, g)
    for l in range(p.n_hidden + 1):
        p.W[l] = 1.5 * p.W[l]
        p.gamma[l] = 0.5 * torch.randn(p.gamma[l].shape, generator=g, dtype=F64)
        p.tau2[l] = noise * (0.5 + torch.rand(p.tau2[l].shape, generator=g, dtype=F64))
    for l in range(p.n_hidden):
        p.sigma2[l] = noise * (0.5 + torch.rand(p.sigma2[l].shape, generator=g, dtype=F64))
    return p


@pytest.mark.parametrize("act", ["hardtanh", "relu"])
def test_zero_noise_limit_equals_reference_mlp(act):
    p = _random_params((3, 6, 5, 1), seed=4, noise=1e-12)
    X = torch.randn(50, 3, generator=torch.Generator().manual_seed(5), dtype=F64)
    ref = _mlp_numpy(p, X, act)
    np.testing.assert_allclose(noiseless_forward(p, X, act).numpy(), ref, rtol=0, atol=1e-12)
    g = torch.Generator().manual_seed(6)
    # noise sd 1e-6 per unit, amplified by at most a few weight norms: 1e-4 absolute
    np.testing.assert_allclose(forward_sample(p, X, act, 3, g).numpy(), np.tile(ref, (3, 1)), atol=1e-4)
    mean, var = forward_moments(p, X, act, 2, g)
    np.testing.assert_allclose(mean.numpy(), np.tile(ref, (2, 1)), atol=1e-4)
    assert float(var.max()) < 1e-10


@pytest.mark.parametrize("act", ["hardtanh", "relu"])
def test_theorem3_bound_holds_and_corollary4_dominates(act):
    X = torch.randn(6, 2, generator=torch.Generator().manual_seed(7), dtype=F64)
    for seed in range(5):
        p = _random_params((2, 4, 3, 1), seed=seed, noise=0.3)
        bound = variance_bound(p, act)
        assert corollary4_bound(p) >= bound
        y = forward_sample(p, X, act, 20_000, torch.Generator().manual_seed(seed))
        mc = ((y - noiseless_forward(p, X, act)) ** 2).mean(0)
        assert float(mc.max()) <= bound, (float(mc.max()), bound)
    # a one-layer check where the bound is easy by hand: L = 0 gives Σ_k τ²_{0,k}
    p0 = _random_params((2, 1), seed=9)
    assert variance_bound(p0, act) == pytest.approx(float(p0.tau2[0].sum()), rel=1e-12)
    # tight case: v_0 stays in the linear piece (|v_0| < 0.2 with overwhelming probability), so
    # y − g = β_1(ε_0 + δ_0) + ε_1 and E(y − g)² = β_1²(τ²_0 + σ²_0) + τ²_1 = the bound
    p1 = _random_params((1, 1, 1), seed=10)
    p1.W[0], p1.gamma[0] = torch.tensor([[0.01]], dtype=F64), torch.tensor([0.5], dtype=F64)
    p1.W[1] = torch.tensor([[2.0]], dtype=F64)
    p1.tau2 = [torch.tensor([1e-3], dtype=F64), torch.tensor([2e-3], dtype=F64)]
    p1.sigma2 = [torch.tensor([3e-3], dtype=F64)]
    bound = variance_bound(p1, act)
    assert bound == pytest.approx(4.0 * (1e-3 + 3e-3) + 2e-3, rel=1e-12)
    x1 = torch.tensor([[0.3]], dtype=F64)
    y1 = forward_sample(p1, x1, act, 200_000, torch.Generator().manual_seed(11))[:, 0]
    mc = float(((y1 - noiseless_forward(p1, x1, act)) ** 2).mean())
    assert mc == pytest.approx(bound, rel=0.02)  # MC relative SE √(2/200k) = 0.3%


def test_theorem2_quadrature_matches_rb_mixture_and_integrates_to_one():
    p = _random_params((1, 1, 1), seed=11, noise=0.2)
    p.W[0] = torch.tensor([[1.7]], dtype=F64)
    p.W[1] = torch.tensor([[-1.2]], dtype=F64)
    p.tau2[0] = torch.tensor([0.6], dtype=F64)
    x = 0.4
    y = torch.linspace(-6, 6, 241, dtype=F64)
    logf = log_density_recursive(p, x, y, "hardtanh")
    f = logf.exp()
    assert float(torch.trapezoid(f, y)) == pytest.approx(1.0, abs=1e-6)
    # Rao–Blackwellised mixture with S components: mean and SE over components
    S = 20_000
    mean, var = forward_moments(p, torch.tensor([[x]], dtype=F64), "hardtanh", S, torch.Generator().manual_seed(12))
    comp = torch.exp(-0.5 * (y - mean) ** 2 / var - 0.5 * torch.log(2 * math.pi * var))  # (S, G)
    rb = comp.mean(0)
    se = comp.std(0) / math.sqrt(S)
    assert float(((rb - f).abs() / (se + 1e-12)).max()) < 4.5  # 4.5 SE at every grid point
    # forward samples: histogram bin probabilities vs the quadrature density (chi-square)
    ys = forward_sample(p, torch.tensor([[x]], dtype=F64), "hardtanh", S, torch.Generator().manual_seed(13))[:, 0]
    edges = torch.linspace(-4, 4, 41, dtype=F64)
    counts = np.histogram(ys.numpy(), bins=edges.numpy())[0]
    fine = torch.linspace(-4, 4, 40 * 50 + 1, dtype=F64)
    ff = log_density_recursive(p, x, fine, "hardtanh").exp().numpy()
    fn = fine.numpy()
    probs = np.array([np.trapezoid(ff[i * 50 : (i + 1) * 50 + 1], fn[i * 50 : (i + 1) * 50 + 1]) for i in range(40)])
    keep = probs * S > 5
    chi2 = np.sum((counts[keep] - S * probs[keep]) ** 2 / (S * probs[keep]))
    assert st.chi2.sf(chi2, keep.sum() - 1) > 1e-3


# ------------------------------------------------------------------------- model API
def test_activation_table_and_errors():
    t = torch.linspace(-3, 3, 601, dtype=F64)
    assert torch.equal(piecewise_activation("hardtanh")(t), torch.nn.functional.hardtanh(t))
    assert torch.equal(piecewise_activation("relu")(t), torch.relu(t))
    assert torch.allclose(piecewise_activation("leaky_relu")(t), torch.nn.functional.leaky_relu(t, 0.1))
    assert torch.equal(piecewise_activation("bounded_relu")(t), t.clamp(0, 1))
    for name in ("hardtanh", "relu", "leaky_relu", "bounded_relu"):
        assert piecewise_activation(name).lipschitz == 1.0
    with pytest.raises(ValueError, match="piecewise-linear.*hardtanh"):
        piecewise_activation("tanh")
    with pytest.raises(ValueError, match="unknown activation"):
        piecewise_activation("swish2")


def test_flat_roundtrip_clone_and_sgd_centred_prior():
    p = _random_params((3, 4, 2, 1), seed=2)
    flat = p.to_flat()
    assert {"W.0", "W.2", "gamma.2", "tau2.2", "sigma2.1", "rho2.0", "xi2.2"} <= set(flat)
    assert "sigma2.2" not in flat
    q = DeepNoiseParams.from_flat(flat)
    assert q.widths == (3, 4, 2, 1) and all(torch.equal(flat[k], v) for k, v in q.to_flat().items())
    c = p.clone()
    c.W[0].add_(1.0)
    assert not torch.equal(c.W[0], p.W[0])
    X, y = _data(n=20)
    lat = init_latents(p, X, y, "hardtanh", torch.Generator().manual_seed(0))
    lat2 = DeepNoiseLatents.from_flat(lat.to_flat())
    assert set(lat.to_flat()) == {"V.0", "V.1", "U.0", "U.1"} and torch.equal(lat2.U[1], lat.U[1])
    with pytest.raises(ValueError, match="sigma2"):
        DeepNoiseParams(W=p.W, gamma=p.gamma, tau2=p.tau2, sigma2=p.sigma2[:1], rho2=p.rho2, xi2=p.xi2)
    pri = DeepNoisePriors.sgd_centred(p, 100)
    assert float(pri.a_pre[1][0]) == 50.0
    torch.testing.assert_close(pri.b_pre[1], p.tau2[1] * 50.0)
    torch.testing.assert_close(pri.b_post[0], p.sigma2[0] * 50.0)
    # the sweep accepts the per-unit prior
    gibbs_sweep(p, lat, X, y, pri, "hardtanh", torch.Generator().manual_seed(1))
