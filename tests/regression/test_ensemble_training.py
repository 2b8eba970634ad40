"""Batched training = independent training; the lambda convention (spec P2, test 14); schedules."""

import math

import numpy as np
import pytest
import torch
from torch import nn

from dubito.data.synthetic import toy1
from dubito.nn.batched import BatchedGaussianMLP, gaussian_nll, member_permutations
from dubito.regression import DeepEnsembleRegressor
from dubito.regression.ensemble import lr_factor, member_generators, train_members


def _member_as_plain_module(net: BatchedGaussianMLP, l: int) -> nn.ModuleDict:
    """Member l of a batched net copied into ordinary nn.Linear layers."""
    def linear(layer):
        lin = nn.Linear(layer.in_features, layer.out_features)
        with torch.no_grad():
            lin.weight.copy_(layer.weight[l].T)
            lin.bias.copy_(layer.bias[l, 0])
        return lin

    return nn.ModuleDict(
        dict(trunk=nn.ModuleList(linear(t) for t in net.trunk), mean=linear(net.mean_head), var=linear(net.var_head))
    )


def _plain_forward(m, x):
    h = x
    for lin in m["trunk"]:
        h = torch.relu(lin(h))
    return m["mean"](h)[:, 0], nn.functional.softplus(m["var"](h)[:, 0]) + 1e-6


MAX_DIFF = []


def test_batched_training_equals_independent_training():
    """All members trained together (one Adam, loss summed over members, coupled weight decay
    lambda_tab) give, for each member, the parameters of an ordinary single network trained
    alone on the same mini-batches with plain Adam on mean NLL + (lambda_tab/2)||theta||^2
    (the per-sample convention of P2, L2 written into the loss). Tolerance 1e-6 absolute (measured 6e-8) on
    parameters of size ~0.1-1 after 3 epochs x 4 steps (float32)."""
    X, y, _ = toy1(n=100, seed=0)
    X = torch.as_tensor((X - X.mean(0)) / X.std(0), dtype=torch.float32)
    y = torch.as_tensor((y - y.mean()) / y.std(), dtype=torch.float32)
    L, lam_tab, lr, B, epochs = 3, 0.05, 1e-2, 32, 3
    gens = member_generators(11, L)
    net = BatchedGaussianMLP(L, 1, (16, 8), generators=gens)
    states = [g.get_state() for g in gens]  # replay each member's batch order below
    plain = [_member_as_plain_module(net, l) for l in range(L)]
    train_members(net, X, y, generators=gens, lr=lr, weight_decay=lam_tab, batch_size=B,
                  epochs=epochs, lr_drop="halving")

    for l in range(L):
        m = plain[l]
        g = torch.Generator()
        g.set_state(states[l])
        opt = torch.optim.Adam(m.parameters(), lr=lr)  # no optimiser decay: L2 is in the loss
        for epoch in range(epochs):
            for group in opt.param_groups:
                group["lr"] = lr * lr_factor(epoch, epochs, "halving")
            perm = torch.randperm(len(X), generator=g)
            for start in range(0, len(X), B):
                idx = perm[start : start + B]
                mean, var = _plain_forward(m, X[idx])
                nll = 0.5 * ((y[idx] - mean) ** 2 / var + torch.log(var)).mean()
                l2 = sum((p**2).sum() for p in m.parameters())
                opt.zero_grad()
                (nll + 0.5 * lam_tab * l2).backward()
                opt.step()
        ref = _member_as_plain_module(net, l)
        moved = 0.0
        for (name, p_ref), p_plain in zip(ref.named_parameters(), m.parameters()):
            MAX_DIFF.append(float((p_plain - p_ref).detach().abs().max()))
            np.testing.assert_allclose(p_plain.detach().numpy(), p_ref.detach().numpy(), atol=1e-6, err_msg=f"member {l}: {name}")
        for p0, p1 in zip(_member_as_plain_module(BatchedGaussianMLP(L, 1, (16, 8), generators=member_generators(11, L)), l).parameters(), m.parameters()):
            moved = max(moved, float((p0 - p1).detach().abs().max()))
        assert moved > 1e-2  # training did move the parameters: the comparison has teeth


def test_member_permutations_and_generators():
    gens = member_generators(3, 4)
    p = member_permutations(10, gens)
    assert p.shape == (4, 10)
    assert all(sorted(row.tolist()) == list(range(10)) for row in p)
    assert len({tuple(r.tolist()) for r in p}) == 4  # independent orders
    # member l's stream depends on (seed, l) only
    a = member_generators(3, 2)
    np.testing.assert_array_equal(member_permutations(10, a).numpy(), p[:2].numpy())


def test_loss_lambda_conventions_give_the_same_gradient_direction():
    """Spec test 14 (P2): sum_i l_i + (lambda_prior/2)||theta||^2 has N times the gradient of
    mean_i l_i + (lambda_tab/2)||theta||^2 when lambda_prior = N lambda_tab; and Adam's
    coupled weight_decay=lambda_tab on the mean loss adds exactly lambda_tab * theta."""
    X, y, _ = toy1(n=50, seed=1)
    X = torch.as_tensor(X / X.std(), dtype=torch.float64)
    y = torch.as_tensor(y / y.std(), dtype=torch.float64)
    N, lam_tab = len(X), 0.02
    net = BatchedGaussianMLP(1, 1, (8,), generators=member_generators(0, 1), dtype=torch.float64)
    params = list(net.parameters())

    def grads(loss):
        return [g.clone() for g in torch.autograd.grad(loss, params)]

    mean, var, _ = net(X)
    ell = 0.5 * ((y - mean[0]) ** 2 / var[0] + torch.log(var[0]))  # l_i of eq. (4), p_y = 1
    sq = sum((p**2).sum() for p in params)
    g_sum = grads(ell.sum() + 0.5 * (N * lam_tab) * sq)
    mean, var, _ = net(X)
    g_mean = grads(gaussian_nll(mean, var, y).sum() + 0.5 * lam_tab * sum((p**2).sum() for p in params))
    for a, b in zip(g_sum, g_mean):
        torch.testing.assert_close(a, N * b, rtol=1e-12, atol=1e-12)
    # gaussian_nll is the mean of l_i (not GaussianNLLLoss's convention for p_y > 1)
    assert float(gaussian_nll(mean, var, y)[0].detach()) == pytest.approx(float(ell.mean().detach()), rel=1e-14)
    # coupled decay: the gradient Adam sees with weight_decay=lam_tab is grad(mean) + lam_tab * theta
    mean, var, _ = net(X)
    g_plain = grads(gaussian_nll(mean, var, y).sum())
    for gp, gm, p in zip(g_plain, g_mean, params):
        torch.testing.assert_close(gp + lam_tab * p.detach(), gm, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    "convention, weight_decay, prior_precision, expected_prior",
    [("per_sample", 0.01, 10.0, 0.5), ("sum", 0.01, 10.0, 0.01), ("per_sample", None, 1.0, 1.0),
     ("sum", None, 1.0, 1 / 50), ("per_sample", None, 10.0, 10.0), ("sum", None, 10.0, 10 / 50)],
)
def test_estimator_maps_weight_decay_to_lambda_prior(convention, weight_decay, prior_precision, expected_prior):
    """P2: per_sample -> lambda_prior = N lambda_tab; sum -> lambda_prior = lambda_tab;
    weight_decay None: lambda_tab = prior_precision / N (1: the paper's toys; 10: the default). N = 50."""
    X, y, _ = toy1(n=50, seed=2)
    est = DeepEnsembleRegressor(n_members=2, hidden=(8,), epochs=2, weight_decay=weight_decay, validation_fraction=0.0,
                                prior_precision=prior_precision, lambda_convention=convention, progress=False,
                                random_state=0).fit(X, y)
    assert est.lambda_prior_ == pytest.approx(expected_prior, rel=1e-12)
    assert est.weight_decay_ == pytest.approx(prior_precision / 50 if weight_decay is None else weight_decay)


def test_default_prior_precision_is_ten():
    """The default (docs/results/ensemble-capacity.md): weight_decay None with prior_precision 10."""
    X, y, _ = toy1(n=50, seed=2)
    est = DeepEnsembleRegressor(n_members=1, hidden=(8,), epochs=1, validation_fraction=0.0, progress=False,
                                random_state=0).fit(X, y)
    assert est.lambda_prior_ == pytest.approx(10.0, rel=1e-12)


def test_lr_schedules():
    """P11: halving x0.5^k over the last 5 epochs (Table 1); step = one x0.1 (toys)."""
    f = lambda s: [lr_factor(e, 10, s) for e in range(10)]  # noqa: E731
    assert f("halving") == [1] * 5 + [0.5, 0.25, 0.125, 0.0625, 0.03125]
    assert f("step") == [1] * 5 + [0.1] * 5
    np.testing.assert_allclose(f("step_cumulative"), [1] * 5 + [0.1, 0.01, 1e-3, 1e-4, 1e-5])
    assert f("none") == [1] * 10
    assert [lr_factor(e, 3, "step") for e in range(3)] == [1, 0.1, 0.1]  # short runs start at lr
    assert lr_factor(0, 1, "halving") == 1.0
    with pytest.raises(ValueError, match="lr_drop"):
        lr_factor(0, 10, "cosine")


def test_last_partial_batch_and_batch_larger_than_data():
    X, y, _ = toy1(n=37, seed=3)
    kw = dict(n_members=2, hidden=(4,), epochs=2, progress=False, random_state=0, validation_fraction=0.0)
    a = DeepEnsembleRegressor(batch_size=10, **kw).fit(X, y)
    b = DeepEnsembleRegressor(batch_size=1000, **kw).fit(X, y)  # without a held-out share: clipped to the rows
    assert np.all(np.isfinite(a.loss_curve_)) and np.all(np.isfinite(b.loss_curve_))
    assert math.isfinite(float(a.predict(X[:3]).sum()))
