"""Normal against scipy.stats.norm, case by case (NumPyro-style oracle table)."""
import numpy as np
import pytest
from scipy import stats

from dubito.predictive import Normal

# (id, N, mean scale, sd range): wide and narrow scales, a single input.
CASES = [
    ("n1-unit", 1, 1.0, (0.5, 2.0)),
    ("n7-wide", 7, 1e3, (1e-2, 1e2)),
    ("n50-narrow", 50, 1e-2, (1e-6, 1e-4)),
    ("n50-offset", 50, 1e6, (1e-1, 1e1)),
]
LEVELS = np.array([[1e-10, 1e-6, 0.025, 0.3, 0.5, 0.8, 0.975, 1 - 1e-6]])


def make(case, seed=0):
    _, n, loc, (lo, hi) = case
    rng = np.random.default_rng(seed)
    mean = rng.normal(0, loc, n)
    sd = np.exp(rng.uniform(np.log(lo), np.log(hi), n))
    return Normal(mean, sd**2), mean, sd


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_every_method_matches_scipy_norm(case):
    p, mean, sd = make(case)
    rng = np.random.default_rng(1)
    y = mean[:, None] + sd[:, None] * rng.normal(0, 3, (len(mean), 6))
    y[:, 0] = mean + 30 * sd  # far upper tail
    y[:, 1] = mean - 30 * sd  # far lower tail: ndtr keeps relative accuracy there
    ref = stats.norm(mean[:, None], sd[:, None])
    np.testing.assert_allclose(p.mean, mean, rtol=0, atol=0)
    np.testing.assert_allclose(p.var, sd**2, rtol=1e-15)
    np.testing.assert_allclose(p.std, sd, rtol=1e-15)
    np.testing.assert_allclose(p.log_prob(y), ref.logpdf(y), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(p.pdf(y), ref.pdf(y), rtol=1e-12, atol=0)
    np.testing.assert_allclose(p.cdf(y), ref.cdf(y), rtol=1e-12, atol=0)
    q = np.broadcast_to(LEVELS, (len(mean), LEVELS.shape[1]))
    np.testing.assert_allclose(p.quantile(LEVELS), ref.ppf(q), rtol=1e-12, atol=1e-12 * sd.max())
    lo, hi = p.interval(0.9)
    np.testing.assert_allclose(lo, stats.norm(mean, sd).ppf(0.05), rtol=1e-12, atol=1e-12 * sd.max())
    np.testing.assert_allclose(hi, stats.norm(mean, sd).ppf(0.95), rtol=1e-12, atol=1e-12 * sd.max())


def test_decomposition_is_passed_through_not_invented():
    p = Normal([0.0, 1.0], [2.0, 3.0])
    assert p.epistemic_var is None and p.aleatoric_var is None
    p = Normal([0.0, 1.0], [2.0, 3.0], epistemic_var=[0.5, 1.0], aleatoric_var=[1.5, 2.0])
    np.testing.assert_array_equal(p.epistemic_var, [0.5, 1.0])
    np.testing.assert_array_equal(p.aleatoric_var, [1.5, 2.0])
    np.testing.assert_array_equal(p.epistemic_var + p.aleatoric_var, p.var)
    sub = p[[1]]
    np.testing.assert_array_equal(sub.epistemic_var, [1.0])
    np.testing.assert_array_equal(sub.aleatoric_var, [2.0])


def test_scalar_var_is_shared_and_arrays_are_not_aliased():
    mean = np.array([0.0, 1.0, 2.0])
    p = Normal(mean, 4.0)
    np.testing.assert_array_equal(p.var, [4.0, 4.0, 4.0])
    mean[0] = 100.0  # the caller's array changing must not change the distribution
    assert p.mean[0] == 0.0
    with pytest.raises(ValueError):
        p.mean[0] = 1.0  # read-only


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(mean=[0.0, np.nan], var=[1.0, 1.0]), "mean must be finite"),
        (dict(mean=[0.0, 1.0], var=[1.0, -1.0]), "var must be positive"),
        (dict(mean=[0.0, 1.0], var=[1.0, 0.0]), "var must be positive"),
        (dict(mean=[0.0, 1.0], var=[1.0, np.inf]), "var must be finite"),
        (dict(mean=[0.0, 1.0], var=[1.0, 1.0, 1.0]), r"var must have shape \(2,\)"),
        (dict(mean=[[0.0, 1.0]], var=[1.0, 1.0]), r"mean must have shape \(N,\)"),
        (dict(mean=[], var=[]), "N >= 1"),
        (dict(mean=[0.0], var=[1.0], epistemic_var=[-1.0]), "epistemic_var must be non-negative"),
        (dict(mean=[0.0], var=[1.0], aleatoric_var=[1.0, 2.0]), r"aleatoric_var must have shape"),
        (dict(mean=["a"], var=[1.0]), "mean must be numeric"),
    ],
)
def test_bad_input_names_the_problem(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Normal(**kwargs)
