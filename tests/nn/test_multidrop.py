"""MultiDrop (spec §2.5, §6.8): per-unit rates, the equal-rates invariant, the regulariser by hand,
and that the learned rates tell informative from noise inputs."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from dubito.nn.concrete_dropout import ConcreteDropout, mc_mode
from dubito.nn.multidrop import MultiDrop


def test_equal_rates_equal_concrete_dropout():
    # spec §6.8: all rho equal -> the same forward (same noise) and the same regulariser
    torch.manual_seed(0)
    lin = nn.Linear(6, 4)
    conc = ConcreteDropout(lin, init_p=0.3).train()
    multi = MultiDrop(lin, init_p=0.3).train()
    assert multi.rho.shape == (6,) and torch.all(multi.rho == conc.rho)
    x = torch.randn(10, 6)
    u = torch.rand(10, 6)
    conc.noise = multi.noise = u
    assert torch.allclose(conc(x), multi(x), atol=1e-6, rtol=0)
    for term in ("kl", "plain"):
        conc.weight_term = multi.weight_term = term
        assert multi.regularization(100).item() == pytest.approx(conc.regularization(100).item(), rel=1e-6)


def test_regularizer_matches_hand_computation_with_per_unit_rates():
    # R = λ Σ_k ||W[:, k]||² / p_keep_k + λ ||b||² - β Σ_k H_b(p_k) on a Linear(3, 2)
    lin = nn.Linear(3, 2).double()
    w = [[0.1, -0.2, 0.3], [0.4, 0.5, -0.6]]
    with torch.no_grad():
        lin.weight.copy_(torch.tensor(w, dtype=torch.float64))
        lin.bias.copy_(torch.tensor([0.7, -0.8], dtype=torch.float64))
    multi = MultiDrop(lin, weight_regularizer=0.01).double()
    ps = [0.1, 0.4, 0.7]
    with torch.no_grad():
        multi.rho.copy_(torch.tensor([math.log(p / (1 - p)) for p in ps], dtype=torch.float64))
    col = [w[0][k] ** 2 + w[1][k] ** 2 for k in range(3)]
    h = [-(p * math.log(p) + (1 - p) * math.log(1 - p)) for p in ps]
    n = 40
    expected = 0.01 * sum(c / (1 - p) for c, p in zip(col, ps)) + 0.01 * (0.49 + 0.64) - sum(h) / n
    assert multi.regularization(n).item() == pytest.approx(expected, rel=1e-12)
    multi.weight_term = "plain"
    assert multi.regularization(n).item() == pytest.approx(0.01 * sum(col) + 0.01 * 1.13 - sum(h) / n, rel=1e-12)


def test_per_unit_keep_fractions():
    # unit k keeps (z̃ > 0.5) with probability p_keep_k: within 4 SE per unit
    multi = MultiDrop(in_features=3).double()
    ps = [0.05, 0.5, 0.9]
    with torch.no_grad():
        multi.rho.copy_(torch.tensor([math.log(p / (1 - p)) for p in ps], dtype=torch.float64))
    multi.generator = torch.Generator().manual_seed(1)
    n = 100_000
    with torch.no_grad(), mc_mode(multi):
        z = multi(torch.ones(n, 3, dtype=torch.float64)) * multi.p_keep
    frac = (z > 0.5).double().mean(0)
    for k, p in enumerate(ps):
        assert abs(float(frac[k]) - (1 - p)) < 4 * math.sqrt(p * (1 - p) / n)
        assert abs(float(z[:, k].mean()) - (1 - p)) < 0.005


def test_feature_maps_get_rates_along_channels():
    multi = MultiDrop(nn.Conv2d(2, 3, 1)).train()
    assert multi.rho.shape == (2,)
    out = multi(torch.randn(4, 2, 5, 5))
    assert out.shape == (4, 3, 5, 5)


def test_rates_learn_noise_units_drop_more():
    # 4 informative inputs (the class is the sign pattern of x1..x4) and 4 pure-noise inputs.
    # Dropping an informative unit costs likelihood, so its rate falls (its keep probability
    # rises, as in thesis Fig. 2.7); a noise unit costs little, so its rate stays near the initial
    # 0.1 (measured after 10 epochs: informative 0.028-0.040, noise 0.078-0.098; after 40 epochs
    # 0.006-0.008 against 0.073-0.091). Spec §2.5: one learned rate per unit.
    gen = torch.Generator().manual_seed(2)
    torch.manual_seed(3)
    n = 2000
    x = torch.randn(n, 8, generator=gen)
    y = (x[:, 0] > 0).long() + 2 * (x[:, 1] + x[:, 2] - x[:, 3] > 0).long()
    net = nn.Sequential(MultiDrop(nn.Linear(8, 32), init_p=0.1), nn.ReLU(), nn.Linear(32, 4))
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    net.train()
    for _ in range(10):
        perm = torch.randperm(n, generator=gen)
        for i in range(0, n, 100):
            idx = perm[i : i + 100]
            loss = nn.functional.cross_entropy(net(x[idx]), y[idx]) + net[0].regularization(n)
            opt.zero_grad()
            loss.backward()
            opt.step()
    p = net[0].p_drop.detach()
    assert float(p[4:].min()) > float(p[:4].max())
    assert float(p[:4].max()) < 0.05 < float(p[4:].min())


def test_bad_input_raises():
    with pytest.raises(ValueError, match="number of units"):
        MultiDrop()
    multi = MultiDrop(in_features=3).train()
    with pytest.raises(ValueError, match="3 per-unit rates"):
        multi(torch.randn(2, 4))
