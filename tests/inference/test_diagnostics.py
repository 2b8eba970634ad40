"""R-hat and ESS against hand computations and chains with known autocorrelation."""
import math

import numpy as np
import pytest
import torch

from dubito.inference.diagnostics import (
    autocovariance, ess, ess_bulk, rank_normalize, rhat, split_chains, split_rhat, summarize,
)


def ar1(rng, chains, n, rho):
    """Stationary Gaussian AR(1) chains with unit marginal variance."""
    x = np.empty((chains, n))
    x[:, 0] = rng.standard_normal(chains)
    noise = rng.standard_normal((chains, n)) * math.sqrt(1 - rho**2)
    for t in range(1, n):
        x[:, t] = rho * x[:, t - 1] + noise[:, t]
    return x


def test_split_rhat_hand_computation():
    # two chains of 5 draws: the middle draw is dropped, halves of length 2
    x = np.array([[1.0, 2.0, 9.0, 3.0, 4.0], [0.0, 2.0, 9.0, 2.0, 6.0]])
    halves = [[1, 2], [3, 4], [0, 2], [2, 6]]
    n = 2
    means = [sum(h) / n for h in halves]                       # 1.5, 3.5, 1, 4
    variances = [sum((v - mu) ** 2 for v in h) / (n - 1) for h, mu in zip(halves, means)]  # .5,.5,2,8
    w = sum(variances) / 4                                      # 2.75
    grand = sum(means) / 4                                      # 2.5
    b = n * sum((mu - grand) ** 2 for mu in means) / 3          # 2 * 6.5 / 3
    expected = math.sqrt(((n - 1) / n * w + b / n) / w)
    assert w == pytest.approx(2.75) and b == pytest.approx(13.0 / 3)
    assert split_rhat(x) == pytest.approx(expected, rel=1e-12)
    # first halves of every chain, then the second halves (R-hat does not depend on the order)
    np.testing.assert_array_equal(split_chains(x), np.array([halves[0], halves[2], halves[1], halves[3]], dtype=float))


def test_rank_normalize_and_autocovariance_by_hand():
    a = np.array([[3.0, 1.0], [2.0, 2.0]])   # ranks 4, 1, 2.5, 2.5 among S = 4
    from scipy.stats import norm
    expected = norm.ppf((np.array([[4.0, 1.0], [2.5, 2.5]]) - 0.375) / 4.25)
    np.testing.assert_allclose(rank_normalize(a), expected, rtol=1e-12)
    x = np.random.default_rng(0).standard_normal((3, 17))
    xc = x - x.mean(axis=1, keepdims=True)
    direct = np.array([[np.sum(c[: 17 - t] * c[t:]) / 17 for t in range(17)] for c in xc])
    np.testing.assert_allclose(autocovariance(x), direct, atol=1e-12)


def test_ess_matches_a_direct_geyer_computation():
    # direct evaluation of the Stan/ArviZ formula, with loops and O(n^2) autocovariances
    x = ar1(np.random.default_rng(1), 3, 200, 0.6)
    m, n = x.shape
    xc = x - x.mean(axis=1, keepdims=True)
    acov = np.array([[np.sum(c[: n - t] * c[t:]) / n for t in range(n)] for c in xc])
    w = acov[:, 0].mean() * n / (n - 1)
    var_plus = (n - 1) / n * w + np.var(x.mean(axis=1), ddof=1)
    rho = [1 - (w - acov[:, t].mean()) / var_plus for t in range(n)]
    pairs = []
    for k in range(0, n - 1, 2):                 # initial positive sequence of pair sums
        s = rho[k] + rho[k + 1]
        if s <= 0:
            break
        pairs.append(s)
    for k in range(1, len(pairs)):               # made monotone
        pairs[k] = min(pairs[k], pairs[k - 1])
    tau = -1 + 2 * sum(pairs)
    assert ess(x) == pytest.approx(m * n / tau, rel=0.02)


def test_iid_chains_rhat_near_one_and_ess_near_n():
    x = np.random.default_rng(2).standard_normal((4, 1000))
    assert abs(rhat(x) - 1) < 0.01
    assert abs(split_rhat(x) - 1) < 0.01
    assert ess_bulk(x) == pytest.approx(4000, rel=0.1)
    assert ess(x) == pytest.approx(4000, rel=0.1)


def test_shifted_chains_and_trending_chain_give_large_rhat():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 500))
    x[3] += 2.0   # two of eight half-chains shifted by 2 sd: R-hat ≈ sqrt(1 + 0.86) ≈ 1.36
    assert rhat(x) > 1.1 and split_rhat(x) > 1.1
    trend = rng.standard_normal((2, 500)) + np.linspace(0, 4, 500)   # drift inside each chain
    assert split_rhat(trend) > 1.1 and rhat(trend) > 1.1


@pytest.mark.parametrize("rho", [0.5, 0.9, -0.3])
def test_ess_of_ar1_chains(rho):
    x = ar1(np.random.default_rng(4), 4, 5000, rho)
    expected = x.size * (1 - rho) / (1 + rho)
    # sd of the ESS estimate is a few percent at these sizes; 12% fails if the lag sum is off
    assert ess(x) == pytest.approx(expected, rel=0.12)
    assert ess_bulk(x) == pytest.approx(expected, rel=0.12)
    assert abs(rhat(x) - 1) < 0.01


def test_shapes_torch_input_and_summary():
    x = torch.randn(2, 100, 3, 2, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    r = rhat(x)
    assert r.shape == (3, 2) and np.all(r < 1.1)
    e = ess_bulk(x)
    assert e.shape == (3, 2)
    s = summarize(x)
    assert s["mean"].shape == (3, 2) and s["sd"].shape == (3, 2)
    with pytest.raises(ValueError, match="chains, draws"):
        rhat(np.zeros(10))
    assert ess(np.ones((2, 10))) == 20.0
    assert split_rhat(np.ones((2, 10))) == 1.0
    assert split_rhat(np.array([[0.0] * 10, [1.0] * 10])) == np.inf   # stuck apart
