"""`EnsembleHMCRegressor`: the ensemble's training, then L HMC chains; its predictive is the draws' mixture."""

import numpy as np
import pytest
import torch

from dubito.nn.batched import BatchedGaussianMLP, gaussian_nll
from dubito.regression import DeepEnsembleRegressor, EnsembleHMCRegressor
from dubito.regression.ensemble_hmc import member_potential

FAST = dict(n_members=3, hidden=(8,), epochs=30, batch_size=16, lr=1e-2, progress=False)
SAMPLER = dict(n_warmup=20, n_draws=12, thin=3, n_leapfrog=4)


def _data(n=120, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, 2))
    y = np.sin(X[:, 0]) + 0.3 * X[:, 1] + 0.2 * rng.standard_normal(n)
    return X, y


def test_potential_is_the_sum_form_training_loss_plus_the_prior():
    torch.manual_seed(0)
    net = BatchedGaussianMLP(3, 2, (5,), generators=[torch.Generator().manual_seed(i) for i in range(3)],
                             dtype=torch.float64)
    X = torch.randn(17, 2, dtype=torch.float64)
    y = torch.randn(17, dtype=torch.float64)
    mean, var, _ = net(X)
    squares = sum((p.detach() ** 2).reshape(3, -1).sum(-1) for p in net.parameters())
    expected = 17 * gaussian_nll(mean, var, y).detach() + 0.5 * 2.5 * squares
    assert torch.allclose(member_potential(net, X, y, 2.5).detach(), expected, rtol=1e-12)


def test_predictive_is_the_mixture_of_every_members_draws_and_starts_from_the_trained_ensemble():
    X, y = _data()
    est = EnsembleHMCRegressor(random_state=0, **FAST, **SAMPLER).fit(X, y)
    assert est.draws_per_member_ == 4 and est.net_.n_members == 12
    pred = est.predict_distribution(X[:7])
    assert pred.means.shape == (7, 12)
    assert np.all(est.gammas_ == 0)
    assert np.all((est.acceptance_ > 0) & (est.acceptance_ <= 1))
    assert set(est.diagnostics_) >= {"rhat_mean", "ess_mean", "rhat_loglik", "acceptance", "converged"}
    # stage 1 is the ensemble's training, bit for bit: the same members before sampling
    ens = DeepEnsembleRegressor(random_state=0, correction="none", prior_precision=1.0, input_encoding="none",
                                **FAST).fit(X, y)
    assert ens.best_epoch_.tolist() == est.best_epoch_.tolist()
    assert np.array_equal(ens.loss_curve_, est.loss_curve_)
    # the draws stay near their own member: each chain's draws are closer to its start than to the others'
    start = ens.predict_components(X).means  # (n, 3)
    drawn = est.predict_components(X).means.reshape(len(X), 4, 3)  # index s * L + l
    dist = np.sqrt(((drawn[:, :, :, None] - start[:, None, None, :]) ** 2).mean(0)).mean(0)  # (l_draw, l_start)
    assert np.all(np.argmin(dist, axis=1) == np.arange(3)), dist


def test_same_seed_same_draws_and_save_load_round_trip(tmp_path):
    X, y = _data()
    a = EnsembleHMCRegressor(random_state=3, **FAST, **SAMPLER).fit(X, y)
    b = EnsembleHMCRegressor(random_state=3, **FAST, **SAMPLER).fit(X, y)
    assert np.array_equal(a.predict_distribution(X).means, b.predict_distribution(X).means)
    a.save(tmp_path / "m.safetensors")
    c = EnsembleHMCRegressor.load(tmp_path / "m.safetensors")
    assert np.array_equal(a.predict_distribution(X).variances, c.predict_distribution(X).variances)
    assert c.draws_per_member_ == a.draws_per_member_ and np.array_equal(c.step_size_, a.step_size_)


@pytest.mark.parametrize("kw, match", [(dict(thin=20, n_draws=10), "thin=20"),
                                       (dict(target_accept=1.0), "target_accept"),
                                       (dict(n_draws=0), "n_draws"), (dict(n_leapfrog=0), "n_leapfrog")])
def test_bad_sampler_settings_raise_one_clear_error(kw, match):
    X, y = _data(40)
    with pytest.raises(ValueError, match=match):
        EnsembleHMCRegressor(**FAST, **dict(SAMPLER, **kw)).fit(X, y)


def test_dubito_run_shows_the_draws_once_and_names_the_samplers_settings_when_not_mixed():
    from dubito.run import _variants, convergence_hint

    assert convergence_hint(EnsembleHMCRegressor()) == "run longer (n_warmup / n_draws)"
    X, y = _data()
    est = EnsembleHMCRegressor(random_state=0, **FAST, **SAMPLER).fit(X, y)
    assert list(_variants(est, X[:5], "ensemble-hmc")) == ["ensemble-hmc"]
