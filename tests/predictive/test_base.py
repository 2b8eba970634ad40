"""The defaults of RegressionPredictive (bisection quantile, inverse-CDF sampling, indexing),
exercised through a Laplace predictive that implements only the abstract methods; SciPy's
Laplace is the oracle."""
import numpy as np
import pytest
import torch
from scipy import stats

from dubito.predictive.base import as_generator, as_numpy
from tests.laplace import Laplace


@pytest.mark.parametrize("scale", [1e-12, 1.0, 1e6])
def test_default_quantile_matches_scipy_at_any_scale(scale):
    loc = np.array([-3.0, 0.0, 5e3]) * scale  # locations on the same scale: float64 can resolve them
    pred = Laplace(loc, np.full(3, scale))
    q = np.array([[1e-6, 0.025, 0.3, 0.5, 0.9, 1 - 1e-6]])
    expected = stats.laplace.ppf(q, loc[:, None], scale)
    # tolerance: the bisection stops at 1e-10 standard deviations
    tol = 1e-9 * scale * np.sqrt(2) + 1e-13 * np.abs(expected)
    assert np.all(np.abs(pred.quantile(q) - expected) <= tol)
    lo, hi = pred.interval(0.9)
    np.testing.assert_allclose(pred.cdf(lo), 0.05, atol=1e-9)
    np.testing.assert_allclose(pred.cdf(hi), 0.95, atol=1e-9)
    assert np.all(pred.quantile(0.0) == -np.inf) and np.all(pred.quantile(1.0) == np.inf)


def test_default_sampling_is_inverse_cdf_and_seeded():
    pred = Laplace(np.array([1.0, -2.0]), np.array([0.5, 3.0]))
    draws = pred.sample(4000, generator=0)
    assert draws.shape == (4000, 2)
    np.testing.assert_array_equal(draws, pred.sample(4000, generator=0))
    for i in range(2):  # KS against the true Laplace, fixed seed, reject at 1%
        assert stats.kstest(draws[:, i], stats.laplace(pred.loc[i], pred.scale[i]).cdf).pvalue > 0.01


def test_broadcasting_rules_and_errors():
    pred = Laplace(np.zeros(4), np.ones(4))
    assert pred.cdf(0.0).shape == (4,)
    assert pred.cdf(np.zeros(4)).shape == (4,)
    assert pred.cdf(np.zeros((4, 3))).shape == (4, 3)
    assert pred.cdf(np.zeros((1, 3))).shape == (4, 3)
    with pytest.raises(ValueError, match=r"shape \(3,\) but the predictive has 4 inputs"):
        pred.cdf(np.zeros(3))
    with pytest.raises(ValueError, match=r"expected a scalar"):
        pred.cdf(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="must lie in"):
        pred.quantile(1.5)
    with pytest.raises(ValueError, match="strictly between"):
        pred.interval(1.0)
    with pytest.raises(ValueError, match=">= 1"):
        pred.sample(0)


def test_indexing():
    pred = Laplace(np.arange(5.0), np.ones(5))
    np.testing.assert_array_equal(pred[1:3].mean, [1.0, 2.0])
    np.testing.assert_array_equal(pred[np.array([True, False, False, False, True])].mean, [0.0, 4.0])
    np.testing.assert_array_equal(pred[2].mean, [2.0])
    assert len(pred[[0, 1, 1]]) == 3
    with pytest.raises(IndexError):
        pred[True]


def test_as_numpy_and_as_generator():
    assert as_numpy(torch.ones(2, dtype=torch.bfloat16, requires_grad=True)).dtype == np.float64
    with pytest.raises(ValueError, match="must be numeric"):
        as_numpy(["a", "b"], "y")
    with pytest.raises(ValueError, match="got bool"):
        as_generator(True)
    assert as_generator(3).uniform() == np.random.default_rng(3).uniform()


def test_interval_is_remembered_per_level_and_returned_as_copies(monkeypatch):
    """coverage, width and the interval score each ask pred.interval(level): one quantile call
    per level, the same numbers every time, arrays the caller may change."""
    pred = Laplace(np.array([0.0, 1.0]), np.array([1.0, 2.0]))
    calls = []
    real = type(pred).quantile

    def counting(self, q):
        calls.append(np.asarray(q).copy())
        return real(self, q)

    monkeypatch.setattr(type(pred), "quantile", counting)
    lo, hi = pred.interval(0.9)
    lo[:] = 99.0  # the caller's copy
    lo2, hi2 = pred.interval(0.9)
    assert len(calls) == 1
    np.testing.assert_allclose(lo2, stats.laplace.ppf(0.05, [0.0, 1.0], [1.0, 2.0]), rtol=1e-9)  # not the 99s
    np.testing.assert_array_equal(hi2, hi)
    for level in np.linspace(0.1, 0.8, 9):  # more levels than are remembered: the oldest is dropped
        pred.interval(level)
    pred.interval(0.9)
    assert len(calls) == 1 + 9 + 1
