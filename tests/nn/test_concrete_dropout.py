"""BernoulliDropout / ConcreteDropout and mc_mode against the spec's correctness tests (§6.1-6.7).

Oracles: closed forms (the relaxed Bernoulli's P(z̃ > 0.5) = p_keep exactly; binary entropy;
the regulariser written out by hand in numpy), central finite differences, and Monte Carlo means
with their standard errors (tolerance 4 SE, seeded).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from dubito.nn.concrete_dropout import (
    BernoulliDropout,
    ConcreteDropout,
    MCNoise,
    binary_entropy,
    dropout_rates,
    mc_mode,
    regularization,
    regularized_parameters,
)
from dubito.nn.multidrop import MultiDrop


def _relaxed_masks(p: float, n: int, seed: int, temperature: float = 0.1) -> torch.Tensor:
    """z̃ itself: a bare ConcreteDropout on ones gives z̃ / p_keep."""
    layer = ConcreteDropout(init_p=p, temperature=temperature).double().train()
    layer.generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        return layer(torch.ones(n, 1, dtype=torch.float64))[:, 0] * layer.p_keep


@pytest.mark.parametrize("kind", ["bernoulli", "concrete"])
def test_p_zero_is_the_deterministic_layer_exactly(kind):
    torch.manual_seed(0)
    lin = nn.Linear(5, 3)
    drop = BernoulliDropout(0.0, lin) if kind == "bernoulli" else ConcreteDropout(lin, init_p=0.0)
    x = torch.randn(7, 5)
    with torch.no_grad():
        ref = lin(x)
        with mc_mode(drop):
            outs = [drop(x) for _ in range(5)]
        drop.train()
        outs.append(drop(x))
    for out in outs:
        assert torch.equal(out, ref)


def test_inverted_scaling_mean_within_4_se():
    # spec §6.3: mean of mask * x / p_keep over 1e5 draws within 4 SE of x
    p, n = 0.3, 100_000
    drop = BernoulliDropout(p).double().train()
    drop.generator = torch.Generator().manual_seed(1)
    x = torch.tensor([0.5, -2.0, 3.0], dtype=torch.float64)
    out = drop(x.expand(n, 3))
    mean, se = out.mean(0), out.std(0) / math.sqrt(n)
    assert torch.all((mean - x).abs() < 4 * se)
    kept = (out != 0).double().mean(0)
    assert torch.all((kept - (1 - p)).abs() < 4 * math.sqrt(p * (1 - p) / n))


@pytest.mark.parametrize("layer", [BernoulliDropout(0.5), ConcreteDropout(init_p=0.5)])
def test_masks_differ_across_identical_rows(layer):
    # spec §6.4: masks are drawn per example, so identical inputs in one batch differ (mc_mode without shared
    # noise, as in training; MC prediction shares one mask per pass by all rows, the MCNoise test below)
    layer.generator = torch.Generator().manual_seed(2)
    with torch.no_grad(), mc_mode(layer):
        out = layer(torch.ones(4, 20))
    assert all(not torch.equal(out[0], out[i]) for i in range(1, 4))


@pytest.mark.parametrize("layer", [BernoulliDropout(0.5), ConcreteDropout(init_p=0.5), MultiDrop(in_features=20)])
def test_shared_mc_noise_gives_one_mask_per_pass_for_all_rows(layer):
    """With an MCNoise(T) (mc_logits' prediction), rows t·B + b of pass t share pass t's mask: identical
    inputs agree within a pass and differ across passes; pass_index = t gives that same mask to every
    row; training (and mc_mode without noise) keeps a mask per row. Exact: the same draw is broadcast."""
    layer.generator = torch.Generator().manual_seed(2)
    t, b = 3, 4
    noise = MCNoise(t)
    with torch.no_grad(), mc_mode(layer, noise=noise):
        noise.begin()
        out = layer(torch.ones(t * b, 20)).view(t, b, 20)
        assert all(torch.equal(out[i, 0], out[i, j]) for i in range(t) for j in range(b))
        assert not torch.equal(out[0, 0], out[1, 0])
        noise.begin(pass_index=1)  # the loop form: every row is pass 1, the same draw
        assert torch.equal(layer(torch.ones(2, 20)), out[1, :2])
        noise.begin()
        with pytest.raises(ValueError, match="not a multiple of the T = 3"):
            layer(torch.ones(4, 20))
        noise.begin()
        with pytest.raises(ValueError, match="one shape"):
            layer(torch.ones(3, 20, 2))
    assert layer.mc_noise is None and not layer.mc  # restored
    layer.train()
    with torch.no_grad():
        trained = layer(torch.ones(4, 20))
    assert all(not torch.equal(trained[0], trained[i]) for i in range(1, 4))
    with pytest.raises(ValueError, match="n_passes"):
        MCNoise(0)
    with pytest.raises(ValueError, match="pass_index"):
        noise.begin(pass_index=3)


@pytest.mark.parametrize("p", [0.05, 0.1, 0.3, 0.5, 0.7, 0.95])
def test_relaxed_bernoulli_mean_and_threshold(p):
    # spec §6.5: P(z̃ > 0.5) = p_keep within 4 SE; |E z̃ - p_keep| < 0.005 at t = 0.1
    n = 200_000
    z = _relaxed_masks(p, n, seed=3)
    keep = 1.0 - p
    frac = float((z > 0.5).double().mean())
    assert abs(frac - keep) < 4 * math.sqrt(keep * p / n)
    assert abs(float(z.mean()) - keep) < 0.005
    assert float(z.min()) >= 0.0 and float(z.max()) <= 1.0 + 1e-12  # z̃ = out * p_keep, to rounding


def test_relaxed_bernoulli_becomes_binary_as_temperature_falls():
    # z̃ in (0.01, 0.99) iff |logit(u) - rho| < a = t logit(0.99), logit(u) ~ Logistic(0, 1):
    # probability sigmoid(rho + a) - sigmoid(rho - a) -> 0 as t -> 0; checked within 4 SE
    p, n = 0.3, 50_000
    rho = math.log(p / (1 - p))
    sig = lambda v: 1 / (1 + math.exp(-v))  # noqa: E731
    inside = []
    for t in (0.5, 0.1, 0.01, 0.001):
        z = _relaxed_masks(p, n, seed=4, temperature=t)
        frac = float(((z > 0.01) & (z < 0.99)).double().mean())
        a = t * math.log(0.99 / 0.01)
        expected = sig(rho + a) - sig(rho - a)
        assert abs(frac - expected) < 4 * math.sqrt(expected * (1 - expected) / n) + 1e-4
        inside.append(frac)
    assert all(a > b for a, b in zip(inside, inside[1:]))
    assert inside[-1] < 0.005


def test_hard_sampler_at_test_time():
    drop = ConcreteDropout(init_p=0.25, mc_sampler="hard").double()
    drop.generator = torch.Generator().manual_seed(5)
    with torch.no_grad(), mc_mode(drop):
        out = drop(torch.ones(100_000, 1, dtype=torch.float64))
    values = np.unique(out.numpy())
    assert values.tolist() == pytest.approx([0.0, 1 / float(drop.p_keep.detach())], rel=1e-15)
    assert abs(float((out > 0).double().mean()) - 0.75) < 4 * math.sqrt(0.75 * 0.25 / 1e5)
    drop.train()  # training stays relaxed
    with torch.no_grad():
        relaxed = drop(torch.ones(1000, 1, dtype=torch.float64))
    assert len(np.unique(relaxed.numpy())) > 2


def test_regularizer_matches_hand_computation_on_2x3_layer():
    # R = λ ||W||²/p_keep + λ ||b||² - β D H_b(p), D = 3 inputs of a Linear(3, 2)
    lin = nn.Linear(3, 2).double()
    with torch.no_grad():
        lin.weight.copy_(torch.tensor([[0.1, -0.2, 0.3], [0.4, 0.5, -0.6]], dtype=torch.float64))
        lin.bias.copy_(torch.tensor([0.7, -0.8], dtype=torch.float64))
    lam, n = 1e-2, 50
    drop = ConcreteDropout(lin, init_p=0.2, weight_regularizer=lam).double()
    p = float(drop.p_drop.detach())  # 0.2 to float32 rounding (rho is created float32)
    assert p == pytest.approx(0.2, rel=1e-6)
    w2 = 0.01 + 0.04 + 0.09 + 0.16 + 0.25 + 0.36
    h = -(p * math.log(p) + (1 - p) * math.log(1 - p))
    expected = lam * w2 / (1 - p) + lam * (0.49 + 0.64) - (1 / n) * 3 * h
    assert drop.regularization(n).item() == pytest.approx(expected, rel=1e-12)
    drop_beta = ConcreteDropout(lin, init_p=0.2, weight_regularizer=lam, dropout_regularizer=0.3).double()
    assert drop_beta.regularization().item() == pytest.approx(lam * w2 / (1 - p) + lam * 1.13 - 0.3 * 3 * h, rel=1e-12)
    plain = ConcreteDropout(lin, init_p=0.2, weight_regularizer=lam, weight_term="plain").double()
    assert plain.regularization(n).item() == pytest.approx(lam * w2 + lam * 1.13 - 3 * h / n, rel=1e-12)
    bern = BernoulliDropout(0.2, lin, weight_regularizer=lam)
    assert bern.regularization().item() == pytest.approx(lam * w2 / 0.8 + lam * 1.13, rel=1e-12)
    assert regularization(nn.Sequential(drop, nn.ReLU()), n).item() == pytest.approx(expected, rel=1e-12)
    assert regularized_parameters(drop) == {id(drop.rho), id(lin.weight), id(lin.bias)}


def test_rate_gradient_matches_central_difference():
    # spec §6.6: d loss / d rho under fixed uniform noise, float64
    torch.manual_seed(6)
    lin = nn.Linear(4, 3).double()
    drop = ConcreteDropout(lin, init_p=0.3, weight_regularizer=1e-2).double().train()
    x = torch.randn(8, 4, dtype=torch.float64)
    y = torch.randint(0, 3, (8,))
    drop.noise = torch.rand(8, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(7))

    def loss():
        return torch.nn.functional.cross_entropy(drop(x), y) + drop.regularization(20)

    grad = torch.autograd.grad(loss(), drop.rho)[0]
    eps = 1e-6
    with torch.no_grad():
        rho0 = drop.rho.clone()
        drop.rho.copy_(rho0 + eps)
        up = float(loss())
        drop.rho.copy_(rho0 - eps)
        down = float(loss())
        drop.rho.copy_(rho0)
    assert float(grad) == pytest.approx((up - down) / (2 * eps), rel=1e-6, abs=1e-9)


def test_regularizer_alone_drives_rate_to_one_half():
    # spec §6.7: with λ = 0 only -β D H_b(p) is left, minimised at p = 0.5
    for p0 in (0.05, 0.9):
        drop = ConcreteDropout(in_features=10, init_p=p0, weight_regularizer=0.0, dropout_regularizer=1.0)
        opt = torch.optim.SGD(drop.parameters(), lr=0.5)
        for _ in range(100):
            opt.zero_grad()
            drop.regularization().backward()
            opt.step()
        assert drop.p_drop.item() == pytest.approx(0.5, abs=1e-3)


def test_mc_mode_keeps_batchnorm_and_restores_modes():
    torch.manual_seed(8)
    net = nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.ReLU(), nn.Dropout(0.5),
                        ConcreteDropout(nn.Linear(6, 2)))
    net.train()
    net(torch.randn(32, 4))  # give BatchNorm non-trivial running statistics
    bn = net[1]
    before = {k: v.clone() for k, v in bn.state_dict().items()}
    net[2].eval()  # a mixed pattern of modes to be restored
    modes = [m.training for m in net.modules()]
    seen = []
    bn.register_forward_pre_hook(lambda m, a: seen.append(m.training))
    with torch.no_grad(), mc_mode(net):
        assert net[3].training and net[4].mc and not bn.training
        a, b = net(torch.ones(3, 4)), net(torch.ones(3, 4))
    assert not torch.equal(a, b)  # dropout is on
    assert seen == [False, False]
    assert all(torch.equal(before[k], v) for k, v in bn.state_dict().items())
    assert [m.training for m in net.modules()] == modes and not net[4].mc
    assert dropout_rates(net) == pytest.approx([0.5, 0.1])


def test_eval_mode_is_the_mean_network():
    lin = nn.Linear(3, 2)
    drop = ConcreteDropout(lin, init_p=0.4).eval()
    x = torch.randn(5, 3)
    assert torch.equal(drop(x), lin(x))


def test_binary_entropy_closed_form():
    p = torch.tensor([0.0, 0.1, 0.5, 1.0], dtype=torch.float64)
    expected = [0.0, -(0.1 * math.log(0.1) + 0.9 * math.log(0.9)), math.log(2), 0.0]
    assert binary_entropy(p).tolist() == pytest.approx(expected, abs=1e-15)


def test_bad_settings_raise():
    with pytest.raises(ValueError, match="init_p"):
        ConcreteDropout(init_p=1.0)
    with pytest.raises(ValueError, match="temperature"):
        ConcreteDropout(temperature=0.0)
    with pytest.raises(ValueError, match="p must"):
        BernoulliDropout(-0.1)
    with pytest.raises(ValueError, match="weight_term"):
        ConcreteDropout(weight_term="l2")
    with pytest.raises(ValueError, match="n_train"):
        ConcreteDropout(nn.Linear(3, 2)).regularization()
    with pytest.raises(ValueError, match="number of units"):
        ConcreteDropout(init_p=0.1, dropout_regularizer=1.0).regularization()
    drop = ConcreteDropout(init_p=0.1)
    drop.noise = torch.rand(2, 3)
    with pytest.raises(ValueError, match="noise has shape"):
        drop.train()(torch.ones(4, 3))
