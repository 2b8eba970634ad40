"""The base.py contract, for every predictive class: broadcasting, round trips,
equal-tailed intervals, sampling moments and seeding, subsets, torch input."""
import numpy as np
import pytest
import torch
from scipy import stats

from dubito.predictive import GaussianMixture, Normal, RegressionPredictive, Samples

N = 7


def _normal(rng):
    return Normal(rng.normal(0, 3, N), rng.uniform(0.1, 4, N), epistemic_var=np.ones(N))


def _mixture(rng):
    m = 3
    return GaussianMixture(rng.dirichlet(np.ones(m), N), rng.normal(0, 5, (N, m)),
                           rng.uniform(0.1, 2, (N, m)), noise_variances=np.full((N, m), 0.05))


def _far_mixture(rng):
    mu = np.column_stack([rng.normal(0, 1, N), 1e3 + rng.normal(0, 1, N)])
    return GaussianMixture([0.4, 0.6], mu, rng.uniform(0.5, 2, (N, 2)))


def _kde(rng):
    return Samples(rng.normal(rng.normal(0, 2, N), 1.0, (40, N)))


def _samples_noise(rng):
    return Samples(rng.normal(0, 2, (25, N)), noise_std=rng.uniform(0.2, 1, 25))


def _kde_few(rng):  # 3 draws: the kernel (h ~ 0.8 sd) is a large part of the variance
    return Samples(rng.normal(0, 1, (3, N)))


def _samples_noise_dominated(rng):  # the noise, not the draws, makes the variance
    return Samples(rng.normal(0, 0.1, (10, N)), noise_std=rng.uniform(0.5, 2, (10, N)))


FACTORIES = {
    "normal": _normal,
    "mixture": _mixture,
    "far-mixture": _far_mixture,
    "kde": _kde,
    "kde-few": _kde_few,
    "samples-noise": _samples_noise,
    "samples-noise-dominated": _samples_noise_dominated,
}


@pytest.fixture(params=list(FACTORIES))
def pred(request) -> RegressionPredictive:
    return FACTORIES[request.param](np.random.default_rng(0))


def mixture_params(p):
    """(w, mu, var) of p seen as a Gaussian mixture (every class here is one)."""
    if isinstance(p, Normal):
        return np.ones((len(p), 1)), p.mean[:, None], p.var[:, None]
    if isinstance(p, Samples):
        p = p.as_mixture()
    return p.weights, p.means, p.variances


# ------------------------------------------------------------------ broadcasting
def test_broadcasting_rules(pred):
    rng = np.random.default_rng(1)
    y_n = pred.mean + pred.std * rng.normal(size=N)
    y_nk = pred.mean[:, None] + pred.std[:, None] * rng.normal(size=(N, 4))
    y_1k = np.array([[-1.0, 0.0, 2.0]])
    for method in (pred.log_prob, pred.pdf, pred.cdf):
        assert method(0.5).shape == (N,)
        np.testing.assert_allclose(method(0.5), method(np.full(N, 0.5)), rtol=1e-14)
        assert method(y_n).shape == (N,)
        out = method(y_nk)
        assert out.shape == (N, 4)
        np.testing.assert_allclose(out[:, 2], method(y_nk[:, 2]), rtol=1e-14)
        out = method(y_1k)
        assert out.shape == (N, 3)
        np.testing.assert_allclose(out[:, 1], method(0.0), rtol=1e-14)
        for bad in (np.zeros(N + 1), np.zeros((2, 3)), np.zeros((N, 2, 1))):
            with pytest.raises(ValueError, match=r"shape"):
                method(bad)
    assert pred.quantile(0.3).shape == (N,)
    assert pred.quantile(np.array([[0.1, 0.9]])).shape == (N, 2)
    # a (k,) array is k levels for every input, whatever k (k = N included); (N, 1) is one level per input
    levels = np.array([0.1, 0.5, 0.9])
    np.testing.assert_array_equal(pred.quantile(levels), pred.quantile(levels[None, :]))
    assert pred.quantile(np.linspace(0.05, 0.95, N)).shape == (N, N)
    per_input = np.linspace(0.1, 0.9, N)[:, None]
    np.testing.assert_array_equal(pred.quantile(per_input)[:, 0], np.diag(pred.quantile(per_input[:, 0])))
    for bad in (np.zeros((2, 3)), np.zeros((N, 2, 1))):
        with pytest.raises(ValueError, match=r"shape"):
            pred.quantile(bad)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        pred.quantile(1.5)
    q = pred.quantile(np.array([[0.0, 1.0]]))
    assert np.all(q[:, 0] == -np.inf) and np.all(q[:, 1] == np.inf)
    assert pred.sample(5, generator=0).shape == (5, N)


def test_torch_inputs_are_accepted(pred):
    y = np.linspace(-2, 2, N)
    np.testing.assert_array_equal(pred.cdf(torch.tensor(y)), pred.cdf(y))
    q = torch.tensor([[0.2, 0.7]], dtype=torch.float64)
    np.testing.assert_array_equal(pred.quantile(q), pred.quantile(q.numpy()))


def test_constructors_accept_torch_tensors():
    t = torch.tensor
    a = Normal(t([0.0, 1.0]), t([1.0, 2.0], dtype=torch.float32))
    b = GaussianMixture(t([0.5, 0.5]), t([[0.0, 1.0]]), t([[1.0, 2.0]], requires_grad=True))
    c = Samples(t([[0.0, 1.0], [2.0, 3.0], [1.0, 1.0]]), noise_std=t(0.5))
    for p in (a, b, c):
        assert p.mean.dtype == np.float64 and p.var.dtype == np.float64


# ------------------------------------------------------------------ round trips and intervals
def test_round_trips(pred):
    w, mu, var = mixture_params(pred)
    rng = np.random.default_rng(2)
    y = pred.sample(8, generator=rng).T  # points where the predictive puts its mass
    x = pred.quantile(pred.cdf(y))
    # a CDF error of 1e-10 moves x by 1e-10 / p(y): the tolerance follows the conditioning
    tol = 1e-10 / pred.pdf(y) + 1e-12 * np.abs(y)
    assert np.all(np.abs(x - y) <= tol), np.max(np.abs(x - y) / tol)
    q = np.array([[1e-6, 1e-3, 0.05, 0.25, 0.5, 0.75, 0.95, 0.999, 1 - 1e-6]])
    np.testing.assert_allclose(pred.cdf(pred.quantile(q)), np.broadcast_to(q, (N, q.shape[1])),
                               rtol=1e-8, atol=1e-12)


@pytest.mark.parametrize("level", [0.5, 0.9, 0.99])
def test_interval_is_equal_tailed(pred, level):
    lo, hi = pred.interval(level)
    assert lo.shape == hi.shape == (N,)
    np.testing.assert_allclose(pred.cdf(lo), (1 - level) / 2, rtol=1e-9)
    np.testing.assert_allclose(pred.cdf(hi), (1 + level) / 2, rtol=1e-9)
    assert np.all(lo < hi)


# ------------------------------------------------------------------ sampling
def test_sample_moments_match_within_five_standard_errors(pred):
    n = 20_000
    s = pred.sample(n, generator=123)
    w, mu, var = mixture_params(pred)
    dev = mu - pred.mean[:, None]
    # exact 4th central moment of a Gaussian mixture: sum w (d^4 + 6 d^2 s^2 + 3 s^4)
    m4 = (w * (dev**4 + 6 * dev**2 * var + 3 * var**2)).sum(1)
    se_mean = np.sqrt(pred.var / n)
    se_var = np.sqrt((m4 - pred.var**2) / n)
    assert np.all(np.abs(s.mean(0) - pred.mean) <= 5 * se_mean)
    assert np.all(np.abs(s.var(0) - pred.var) <= 5 * se_var)
    # the whole distribution: PIT values F(sample) are uniform (Kolmogorov-Smirnov, each
    # input at level 1e-4 for this fixed seed; D_crit = sqrt(-log(0.5e-4) / 2) / sqrt(n))
    pit = pred.cdf(s.T)
    d_crit = np.sqrt(-np.log(0.5e-4) / 2) / np.sqrt(n)
    for i in range(N):
        assert stats.kstest(pit[i], "uniform").statistic <= d_crit


def test_generator_seeding_reproduces_draws(pred):
    a = pred.sample(50, generator=7)
    np.testing.assert_array_equal(a, pred.sample(50, generator=7))
    np.testing.assert_array_equal(a, pred.sample(50, generator=np.random.default_rng(7)))
    assert not np.array_equal(a, pred.sample(50, generator=8))
    rng = np.random.default_rng(7)
    assert not np.array_equal(pred.sample(50, generator=rng), pred.sample(50, generator=rng))


# ------------------------------------------------------------------ subsets and decomposition
@pytest.mark.parametrize("index", [3, slice(1, 5), [6, 0, 0], np.arange(N) % 2 == 0])
def test_subset_restricts_every_quantity(pred, index):
    sub = pred[index]
    idx = np.atleast_1d(np.arange(N)[index])
    assert type(sub) is type(pred) and len(sub) == len(idx)
    y = np.array([[-1.0, 0.3, 2.0]])
    np.testing.assert_allclose(sub.mean, pred.mean[idx], rtol=1e-14)
    np.testing.assert_allclose(sub.var, pred.var[idx], rtol=1e-14)
    np.testing.assert_allclose(sub.log_prob(y), pred.log_prob(y)[idx], rtol=1e-14)
    np.testing.assert_allclose(sub.cdf(y), pred.cdf(y)[idx], rtol=1e-14, atol=1e-300)
    np.testing.assert_allclose(sub.quantile(np.array([[0.1, 0.6]])), pred.quantile(np.array([[0.1, 0.6]]))[idx],
                               rtol=1e-12, atol=1e-12)
    for name in ("epistemic_var", "aleatoric_var"):
        full, part = getattr(pred, name), getattr(sub, name)
        assert (full is None) == (part is None)
        if full is not None:
            np.testing.assert_allclose(part, full[idx], rtol=1e-14)


def test_decomposition_adds_up_where_known(pred):
    if isinstance(pred, Normal) or pred.epistemic_var is None:
        return  # a Normal carries what it is given; a KDE knows no split
    np.testing.assert_allclose(pred.epistemic_var + pred.aleatoric_var, pred.var, rtol=1e-13)
    assert np.all(pred.epistemic_var >= 0) and np.all(pred.aleatoric_var > 0)


def test_parameters_are_read_only(pred):
    with pytest.raises(ValueError):
        pred.mean[0] = 1.0
    with pytest.raises(ValueError):
        pred.var[0] = 1.0
