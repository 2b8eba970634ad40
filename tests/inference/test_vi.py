"""Factor-covariance Gaussian VI: ADADELTA by hand, gradients against the exact ELBO, a known
Gaussian target recovered, stopping rule, reproducibility."""
import math
import warnings

import numpy as np
import pytest
import torch

from dubito.inference.diagnostics import ConvergenceWarning
from dubito.inference.vi import Adadelta, FactorGaussian, elbo_estimate_and_gradients, fit_vi

f64 = torch.float64


def gaussian_target(dim=10, rank=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    factor = torch.randn(dim, rank, generator=g, dtype=f64).tril()
    diag = 0.3 + torch.rand(dim, generator=g, dtype=f64)
    mean = 2.0 * torch.randn(dim, generator=g, dtype=f64)
    target = FactorGaussian(mean, factor, diag)
    prec = torch.linalg.inv(target.covariance())
    return target, (lambda th: (target.log_prob(th), -(th - mean) @ prec))


def test_adadelta_by_hand_and_against_torch():
    rho, eps = 0.95, 1e-7
    p = torch.tensor([1.0], dtype=f64)
    opt = Adadelta([p], rho=rho, eps=eps)
    g1, g2 = 2.0, -1.0
    eg = (1 - rho) * g1**2
    d1 = math.sqrt(eps) / math.sqrt(eg + eps) * g1
    ed = (1 - rho) * d1**2
    eg = rho * eg + (1 - rho) * g2**2
    d2 = math.sqrt(ed + eps) / math.sqrt(eg + eps) * g2
    opt.step([torch.tensor([g1], dtype=f64)])
    assert p.item() == pytest.approx(1.0 + d1, rel=1e-14)
    opt.step([torch.tensor([g2], dtype=f64)])
    assert p.item() == pytest.approx(1.0 + d1 + d2, rel=1e-14)
    # ascent on g equals torch's Adadelta (lr=1) descending on -g
    rng = torch.Generator().manual_seed(0)
    a = torch.zeros(5, dtype=f64)
    b = torch.zeros(5, dtype=f64, requires_grad=True)
    ours, ref = Adadelta([a], rho=rho, eps=eps), torch.optim.Adadelta([b], lr=1.0, rho=rho, eps=eps)
    for _ in range(20):
        grad = torch.randn(5, generator=rng, dtype=f64)
        ours.step([grad])
        b.grad = -grad
        ref.step()
    torch.testing.assert_close(a, b.detach(), rtol=1e-12, atol=1e-14)


def test_factor_gaussian_against_dense_formulas():
    target, _ = gaussian_target(dim=6, rank=2, seed=1)
    cov = target.covariance()
    dense = torch.distributions.MultivariateNormal(target.mean, cov)
    x = torch.randn(7, 6, generator=torch.Generator().manual_seed(2), dtype=f64)
    torch.testing.assert_close(target.log_prob(x), dense.log_prob(x), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(target.entropy(), dense.entropy(), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(target.precision_diag(), torch.linalg.inv(cov).diagonal(), rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(target.variance(), cov.diagonal())
    s = target.sample(200_000, torch.Generator().manual_seed(3))
    torch.testing.assert_close(s.mean(0), target.mean, atol=0.03, rtol=0)
    torch.testing.assert_close(torch.cov(s.T), cov, atol=0.05, rtol=0.02)


@pytest.mark.parametrize("entropy_grad", ["sampled", "analytic"])
def test_gradient_estimators_are_unbiased_for_the_exact_elbo(entropy_grad):
    # Gaussian target N(m, S): ELBO(μ, B, d) = E_q log N(θ; m, S) + H(q) in closed form
    target, vg = gaussian_target(dim=5, rank=2, seed=4)
    m, S = target.mean, target.covariance()
    Sinv = torch.linalg.inv(S)
    g = torch.Generator().manual_seed(5)
    mu = torch.randn(5, generator=g, dtype=f64).requires_grad_()
    B = (0.5 * torch.randn(5, 2, generator=g, dtype=f64)).tril().requires_grad_()
    d = (0.5 + torch.rand(5, generator=g, dtype=f64)).requires_grad_()
    q = FactorGaussian(mu, B, d)
    cov = q.covariance()
    exact = (-0.5 * (5 * math.log(2 * math.pi) + torch.logdet(S) + torch.trace(Sinv @ cov)
                     + (mu - m) @ Sinv @ (mu - m)) + q.entropy())
    exact_grads = [t.tril() if t.dim() == 2 else t for t in torch.autograd.grad(exact, [mu, B, d])]
    qd = FactorGaussian(mu.detach(), B.detach(), d.detach())
    M = 400_000
    xi = torch.randn(M, 2, generator=g, dtype=f64)
    delta = torch.randn(M, 5, generator=g, dtype=f64)
    theta = qd.mean + xi @ qd.factor.T + delta * qd.diag
    lh, gl = vg(theta)
    value, grads = elbo_estimate_and_gradients(qd, lh, gl, xi, delta, entropy_grad)
    assert value == pytest.approx(exact.item(), abs=0.05)
    for est, ref in zip(grads, exact_grads):
        torch.testing.assert_close(est, ref, atol=0.03 * ref.abs().max().item() + 1e-3, rtol=0)
    # a wrong sign on the entropy term is detected: the test can fail
    bad = grads[2] - 2 * (qd.precision_diag() * qd.diag)
    assert (bad - exact_grads[2]).abs().max() > 0.1


def test_vi_recovers_a_correlated_gaussian_target():
    target, vg = gaussian_target(dim=10, rank=3, seed=0)
    res = fit_vi(value_and_grad=vg, dim=10, rank=3, max_iter=6000, rtol=None, seed=1)
    sd = target.variance().sqrt()
    # the mean within 0.1 sd and the implied marginal variances within 5% (ADADELTA noise of the
    # averaged iterates is ~0.03 sd; the U(0, 1) start is ~1 sd away)
    assert ((res.q.mean - target.mean) / sd).abs().max() < 0.1
    ratio = res.q.variance() / target.variance()
    assert ratio.min() > 0.95 and ratio.max() < 1.05
    # full covariance too: relative Frobenius error under 5%
    cov = target.covariance()
    assert torch.linalg.norm(res.q.covariance() - cov) / torch.linalg.norm(cov) < 0.05
    h = res.history
    assert h.iterations == 6000 and h.elbo.shape == (6000,) and h.elbo_ma.shape == (30,)
    assert h.averaged_over == 300 and not h.converged
    assert abs(h.elbo_ma[-1]) < 0.02          # the ELBO of an exact fit is log Z = 0


def test_vi_stopping_rule_and_warning():
    _, vg = gaussian_target(dim=4, rank=1, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = fit_vi(value_and_grad=vg, dim=4, rank=1, max_iter=20_000, window=200, rtol=1e-6, atol=0.01, seed=1)
    h = res.history
    assert h.converged and h.iterations < 20_000 and h.iterations % 200 == 0
    assert abs(h.elbo_ma[-1] - h.elbo_ma[-2]) <= 0.01 + 1e-6 * abs(h.elbo_ma[-2])
    assert h.averaged_over == math.ceil(0.05 * h.iterations)
    with pytest.warns(ConvergenceWarning, match="not converged"):
        fit_vi(value_and_grad=vg, dim=4, rank=1, max_iter=300, min_iter=0, window=100, rtol=1e-9, atol=0.0, seed=1)


def test_vi_autograd_path_reproducible_and_progress():
    target, vg = gaussian_target(dim=4, rank=1, seed=6)
    a = fit_vi(target.log_prob, dim=4, rank=1, max_iter=100, rtol=None, seed=7)
    b = fit_vi(value_and_grad=vg, dim=4, rank=1, max_iter=100, rtol=None, seed=7, progress=True)
    torch.testing.assert_close(a.q.mean, b.q.mean, rtol=1e-10, atol=1e-12)   # autograd == analytic
    np.testing.assert_allclose(a.history.elbo, b.history.elbo, rtol=1e-10)
    c = fit_vi(target.log_prob, dim=4, rank=1, max_iter=100, rtol=None, seed=8)
    assert not torch.equal(a.q.mean, c.q.mean)
    assert torch.equal(a.q_last.factor, a.q_last.factor.tril())
    with pytest.raises(ValueError, match="rank"):
        fit_vi(target.log_prob, dim=4, rank=5)
    with pytest.raises(FloatingPointError, match="non-finite"):
        fit_vi(lambda th: torch.full((th.shape[0],), float("nan"), dtype=f64) + th.sum(-1), dim=2, rank=1,
               max_iter=5, rtol=None, seed=0)
