"""Hypothesis properties: the CDF is a CDF, symmetric intervals hold the mean, densities
integrate to 1. Small example budgets (fast), deadline off (shared CPUs)."""
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate

from dubito.predictive import GaussianMixture, Normal, Samples

SETTINGS = settings(max_examples=40, deadline=None, derandomize=True)

locs = st.floats(-1e3, 1e3, allow_nan=False)
scales = st.floats(1e-2, 1e2, allow_nan=False)


@st.composite
def mixtures(draw, max_m=4):
    m = draw(st.integers(1, max_m))
    w = draw(st.lists(st.floats(0.01, 1.0), min_size=m, max_size=m))
    mu = draw(st.lists(st.floats(-50, 50), min_size=m, max_size=m))
    sd = draw(st.lists(st.floats(0.1, 10), min_size=m, max_size=m))
    return GaussianMixture(np.array(w), np.array([mu]), np.array([sd]) ** 2)


@st.composite
def kdes(draw):
    s = draw(st.integers(2, 15))
    d = draw(st.lists(st.floats(-50, 50), min_size=s, max_size=s))
    return Samples(np.array(d)[:, None])


@st.composite
def predictives(draw):
    kind = draw(st.sampled_from(["normal", "mixture", "kde"]))
    if kind == "normal":
        return Normal([draw(locs)], [draw(scales) ** 2])
    return draw(mixtures() if kind == "mixture" else kdes())


@SETTINGS
@given(predictives(), st.lists(st.floats(-1e4, 1e4), min_size=2, max_size=30))
def test_cdf_is_monotone_and_in_unit_interval(p, ys):
    y = np.sort(np.array(ys))[None, :]
    F = p.cdf(y)
    assert np.all((F >= 0) & (F <= 1))
    assert np.all(np.diff(F, axis=1) >= 0)
    assert np.all(np.diff(p.quantile(np.linspace(0.01, 0.99, 9)[None, :]), axis=1) >= 0)


@SETTINGS
@given(locs, scales, st.floats(0.01, 0.99))
def test_normal_interval_contains_mean_symmetrically(mu, sd, level):
    p = Normal([mu], [sd**2])
    lo, hi = p.interval(level)
    assert lo[0] < mu < hi[0]
    np.testing.assert_allclose(mu - lo[0], hi[0] - mu, rtol=1e-9)


@SETTINGS
@given(st.floats(-100, 100), st.floats(0, 100), st.floats(0.1, 10), st.floats(0.01, 0.99))
def test_symmetric_two_component_mixture_interval(c, d, sd, level):
    p = GaussianMixture([0.5, 0.5], [[c - d, c + d]], [[sd**2, sd**2]])
    lo, hi = p.interval(level)
    assert p.mean[0] == c or abs(p.mean[0] - c) <= 1e-12 * (abs(c) + d)
    assert lo[0] <= c <= hi[0]
    np.testing.assert_allclose(c - lo[0], hi[0] - c, rtol=1e-7, atol=1e-8 * (sd + d))


@SETTINGS
@given(predictives())
def test_density_integrates_to_one(p):
    lo, hi = p.mean[0] - 12 * p.std[0], p.mean[0] + 12 * p.std[0]
    if isinstance(p, GaussianMixture):
        brk = p.means[0]
    elif isinstance(p, Samples):
        brk = p.draws[:, 0]
    else:
        brk = p.mean
    brk = np.unique(np.clip(brk, lo, hi))
    total, err = integrate.quad(lambda t: float(p.pdf(t)[0]), lo, hi, points=brk, limit=500,
                                epsabs=1e-10, epsrel=1e-10)
    assert abs(total - 1.0) <= 1e-6, (total, err)
