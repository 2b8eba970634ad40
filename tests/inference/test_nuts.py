"""The Pyro NUTS wrapper: a correlated 2-D Gaussian recovered, seeds, warnings on bad runs."""
import math
import random
import warnings

import numpy as np
import pytest
import torch

from dubito.inference.diagnostics import ConvergenceWarning
from dubito.inference.nuts import run_nuts

f64 = torch.float64
MEAN = torch.tensor([1.0, -2.0], dtype=f64)
COV = torch.tensor([[1.0, 1.8], [1.8, 4.0]], dtype=f64)   # sds 1 and 2, correlation 0.9
PREC = torch.linalg.inv(COV)


def potential(theta):
    e = theta - MEAN
    return 0.5 * e @ PREC @ e


def test_nuts_recovers_a_correlated_gaussian():
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)   # a healthy run raises no warning
        res = run_nuts(potential, dim=2, num_samples=400, warmup_steps=200, num_chains=2, full_mass=True, seed=0)
    d = res.draws
    assert d.shape == (2, 400, 2) and d.dtype == f64
    x = res.flat()
    ess = res.ess_bulk["theta"]
    assert np.all(ess > 300)
    se = COV.diagonal().sqrt().numpy() / np.sqrt(ess)
    assert np.all(np.abs(x.mean(0).numpy() - MEAN.numpy()) < 4 * se)
    emp = torch.cov(x.T)
    # variance estimates have relative sd ~ sqrt(2/ESS) ≈ 0.07; 25% is > 3 sd
    torch.testing.assert_close(emp.diagonal(), COV.diagonal(), rtol=0.25, atol=0)
    corr = emp[0, 1] / emp.diagonal().prod().sqrt()
    assert abs(corr - 0.9) < 0.03
    assert np.all(res.divergences == 0) and np.all(res.acceptance_rate > 0.6)
    assert np.all(res.rhat["theta"] < 1.01) and res.seconds > 0


def test_nuts_is_reproducible_and_leaves_global_rng_alone():
    torch.manual_seed(123)
    random.seed(4)
    np.random.seed(5)
    expected = (torch.rand(3), random.random(), np.random.rand())
    torch.manual_seed(123)
    random.seed(4)
    np.random.seed(5)
    kw = dict(dim=2, num_samples=30, warmup_steps=30, num_chains=2, warn=False)
    a = run_nuts(potential, seed=7, **kw)
    after = (torch.rand(3), random.random(), np.random.rand())
    assert torch.equal(expected[0], after[0]) and expected[1:] == after[1:]
    b = run_nuts(potential, seed=7, **kw)
    c = run_nuts(potential, seed=8, **kw)
    assert torch.equal(a.draws, b.draws)
    assert not torch.equal(a.draws, c.draws)
    assert not torch.equal(a.draws[0], a.draws[1])     # chains differ


def test_warnings_fire_on_a_bad_run():
    # no adaptation and a step size 50x the target's scale: leapfrog blows up (divergences), and
    # the chains started apart barely move (R-hat far above 1.01)
    with pytest.warns(ConvergenceWarning) as record:
        res = run_nuts(potential, dim=2, num_samples=20, warmup_steps=1, num_chains=2, step_size=50.0, adapt_step_size=False,
                       init=torch.tensor([[-10.0, 10.0], [10.0, -10.0]], dtype=f64), seed=0)
    messages = " ".join(str(w.message) for w in record)
    assert "divergent" in messages and res.divergences.sum() > 0
    assert "R-hat" in messages and res.max_rhat > 1.01   # stuck chains: R-hat = inf
    # one warm-up step (adaptation on), few draws, chains started far apart: R-hat warning
    with pytest.warns(ConvergenceWarning, match="R-hat"):
        res = run_nuts(potential, dim=2, num_samples=10, warmup_steps=1, num_chains=2,
                       init=torch.tensor([[-30.0, 60.0], [30.0, -60.0]], dtype=f64), seed=0)
    assert res.max_rhat > 1.1


def test_nuts_with_a_pyro_model_conjugate_normal():
    import pyro
    import pyro.distributions as dist

    y = torch.tensor([0.3, 1.1, 0.7, 1.9, 1.4], dtype=f64)

    def model(y):
        mu = pyro.sample("mu", dist.Normal(torch.tensor(0.0, dtype=f64), torch.tensor(1.0, dtype=f64)))
        with pyro.plate("data", len(y)):
            pyro.sample("y", dist.Normal(mu, torch.tensor(1.0, dtype=f64)), obs=y)

    res = run_nuts(model=model, model_args=(y,), num_samples=300, warmup_steps=150, num_chains=2, seed=1, warn=False)
    post_mean, post_sd = y.sum().item() / 6, math.sqrt(1 / 6)   # N(0,1) prior, 5 unit-variance obs
    mu = res.flat("mu")
    assert res.samples["mu"].shape == (2, 300)
    assert abs(mu.mean().item() - post_mean) < 4 * post_sd / math.sqrt(res.ess_bulk["mu"])
    assert mu.std().item() == pytest.approx(post_sd, rel=0.2)
    with pytest.raises(ValueError, match="exactly one"):
        run_nuts(potential, model=model)
