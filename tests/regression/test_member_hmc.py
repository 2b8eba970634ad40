"""`batched_hmc` against known Gaussian targets: L independent chains in one pass."""

import numpy as np
import pytest
import torch

from dubito.regression.member_hmc import batched_hmc


def _gaussian_chains(seed=0, n_samples=3000):
    """Three chains; chain l targets N(mu_l, diag(sd^2)) over a (3, 4) and a (3, 2, 2) parameter."""
    torch.manual_seed(123)
    mu = [torch.randn(3, 4, dtype=torch.float64), torch.randn(3, 2, 2, dtype=torch.float64)]
    sd = [torch.linspace(0.5, 2.0, 4, dtype=torch.float64).expand(3, 4),
          torch.tensor([[0.7, 1.0], [1.5, 0.6]], dtype=torch.float64).expand(3, 2, 2)]
    params = [torch.nn.Parameter(torch.zeros(3, 4, dtype=torch.float64)),
              torch.nn.Parameter(torch.zeros(3, 2, 2, dtype=torch.float64))]

    def potential():
        return sum(0.5 * (((p - m) / s) ** 2).reshape(3, -1).sum(-1) for p, m, s in zip(params, mu, sd))

    result = batched_hmc(params, potential, n_warmup=300, n_samples=n_samples, n_leapfrog=10,
                         generator=torch.Generator().manual_seed(seed))
    return result, mu, sd


def test_draws_match_the_gaussian_target_of_each_chain():
    result, mu, sd = _gaussian_chains()
    for draws, m, s in zip(result.draws, mu, sd):
        assert draws.shape == (3000, *m.shape)
        z_mean = (draws.mean(0) - m) / s  # in target sds; 3,000 draws with ESS >= 300: se <= 0.06
        assert torch.all(z_mean.abs() < 0.25), z_mean
        ratio = draws.var(0) / s**2
        assert torch.all((ratio > 0.75) & (ratio < 1.3)), ratio


def test_step_size_adapts_to_the_target_acceptance():
    result, _, _ = _gaussian_chains(n_samples=500)
    assert torch.all((result.acceptance > 0.65) & (result.acceptance < 0.95)), result.acceptance
    assert torch.all(result.step_size > 0.05)  # the smallest sd is 0.5: eps of order 0.3


def test_a_rejected_chain_keeps_its_position_and_does_not_stop_the_others():
    start = torch.tensor([[0.3, -0.2], [1.0, 2.0]], dtype=torch.float64)
    theta = torch.nn.Parameter(start.clone())
    calls = []

    def potential():
        calls.append(1)
        u = 0.5 * (theta**2).sum(-1)
        if len(calls) > 1:  # chain 1's energy is NaN after its first move: every proposal rejected
            u = torch.stack([u[0], u[1] * float("nan")])
        return u

    result = batched_hmc([theta], potential, n_warmup=0, n_samples=50, n_leapfrog=3, initial_step=0.3,
                         generator=torch.Generator().manual_seed(1))
    draws = result.draws[0]
    assert torch.equal(draws[:, 1], start[1].expand(50, 2))
    assert result.acceptance[1] == 0.0
    assert len(torch.unique(draws[:, 0, 0])) > 10


@pytest.mark.parametrize("kw", [dict(n_samples=0), dict(thin=0), dict(n_leapfrog=0), dict(n_warmup=-1),
                                dict(target_accept=1.0)])
def test_bad_settings_raise_one_clear_error(kw):
    theta = torch.nn.Parameter(torch.zeros(1, 2))
    settings = dict(n_warmup=1, n_samples=1) | kw
    with pytest.raises(ValueError, match="n_warmup|target_accept"):
        batched_hmc([theta], lambda: 0.5 * (theta**2).sum(-1), **settings)


def test_thinning_keeps_every_thin_th_draw():
    theta = torch.nn.Parameter(torch.zeros(2, 3, dtype=torch.float64))
    result = batched_hmc([theta], lambda: 0.5 * (theta**2).sum(-1), n_warmup=5, n_samples=20, thin=4,
                         generator=torch.Generator().manual_seed(0))
    assert result.draws[0].shape == (5, 2, 3)
    assert np.isclose(float(theta.detach()[0, 0]), float(result.draws[0][-1, 0, 0]))
