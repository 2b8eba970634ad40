"""WarpedPredictive G = H o F against numerical integration (scipy.integrate.quad) and its
own inverse, for every predictive family.

Tolerances: round trips 1e-9 (cdf(quantile)) and 1e-9 of the scale (quantile(cdf));
integrals of the density, mean and variance 1e-7 relative to quad (the moments are closed
forms, agreement ~1e-9); the generic quadrature fallback for other bases 1e-6; CRPS 1e-8
relative (registered path; measured <= 3e-9) and 2e-4 (dubito's adaptive quadrature, whose
error estimate misses the kinks of G: measured up to 8e-5); log_prob vs a central
difference of the CDF 1e-5 relative; sampling by z-tests at 5 sd and a KS test at p > 1e-3.
"""

import numpy as np
import pytest
from scipy import integrate, stats

from dubito.metrics import (
    calibration_error,
    coverage,
    crps,
    crps_quadrature,
    interval_score,
    nll,
    pinball,
    pit,
    regression_summary,
    width,
)
from dubito.predictive import (
    GaussianMixture,
    GridDensity,
    Normal,
    RegressionPredictive,
    Samples,
)
from dubito.recalibrate.warped import WarpedPredictive, check_knots, compose_knots

N = 4


def _knots(rng, k=12):
    u = np.concatenate([[0.0], np.sort(rng.uniform(size=k)), [1.0]])
    h = np.concatenate([[0.0], np.sort(rng.uniform(size=k)), [1.0]])
    return u, h


class Opaque(RegressionPredictive):
    """A predictive of a type the warp knows nothing about (delegates to another)."""

    def __init__(self, inner):
        self.inner = inner

    mean = property(lambda self: self.inner.mean)
    var = property(lambda self: self.inner.var)

    def _log_prob(self, y):
        return self.inner._log_prob(y)

    def _cdf(self, y):
        return self.inner._cdf(y)

    def _quantile(self, q, tol=0.0, max_iter=0):
        return self.inner._quantile(q)

    def _subset(self, index):
        return Opaque(self.inner[index])


def _normal(rng):
    return Normal(rng.normal(0, 3, N), rng.uniform(0.1, 4, N))


def _mixture(rng):
    return GaussianMixture(rng.dirichlet(np.ones(3), N), rng.normal(0, 3, (N, 3)), rng.uniform(0.2, 2, (N, 3)))


def _grid(rng):
    return GridDensity(np.linspace(-5, 5, 40), rng.uniform(0.1, 1, (N, 40)))


def _grid_per_input(rng):
    x = np.sort(rng.uniform(-5, 5, (N, 30)), axis=1)
    return GridDensity(x, rng.uniform(0.1, 1, (N, 30)))


def _kde(rng):
    return Samples(rng.normal(0, 2, (20, N)))


def _samples_noise(rng):
    return Samples(rng.normal(0, 2, (15, N)), noise_std=0.7)


BASES = {
    "normal": _normal,
    "mixture": _mixture,
    "grid": _grid,
    "grid-per-input": _grid_per_input,
    "kde": _kde,
    "samples-noise": _samples_noise,
}


@pytest.fixture(params=list(BASES))
def case(request):
    rng = np.random.default_rng(list(BASES).index(request.param))
    base = BASES[request.param](rng)
    u, h = _knots(rng)
    return base, WarpedPredictive(base, u, h)


def _breaks(g: WarpedPredictive, i: int) -> np.ndarray:
    """Where input i's density jumps or kinks (base quantiles at the knots, grid nodes), plus
    the support ends."""
    inner = np.asarray(g.base[i].quantile(g.knots_u[None, 1:-1])).ravel()
    if isinstance(g.base, GridDensity):  # and where a grid's density has kinks
        inner = np.concatenate([inner, np.asarray(g.base[i].grid).ravel()])
    lo = float(g[i].quantile(1e-15)[0])
    hi = float(g[i].quantile(1 - 1e-15)[0])
    return np.unique(np.concatenate([[lo], inner[(inner > lo) & (inner < hi)], [hi]]))


def _quad(fun, pts):
    return sum(integrate.quad(fun, a, b, epsabs=1e-14, epsrel=1e-11, limit=200)[0] for a, b in zip(pts[:-1], pts[1:]))


def _pdf1(g, i):
    gi = g[i]
    return lambda t: float(np.exp(gi.log_prob(np.array([[t]]))[0, 0]))


def _cdf1(g, i):
    gi = g[i]
    return lambda t: float(gi.cdf(np.array([[t]]))[0, 0])


# ------------------------------------------------------------------ the map itself
def test_cdf_is_h_of_base_cdf(case):
    base, g = case
    y = base.sample(5, generator=1).T
    np.testing.assert_allclose(g.cdf(y), np.interp(base.cdf(y), g.knots_u, g.knots_h), rtol=0, atol=1e-15)


def test_cdf_and_quantile_are_inverse(case):
    _, g = case
    q = np.array([[1e-6, 0.01, 0.2, 0.5, 0.77, 0.99, 1 - 1e-6]])
    np.testing.assert_allclose(g.cdf(g.quantile(q)), np.broadcast_to(q, (N, q.shape[1])), rtol=0, atol=1e-9)
    y = np.asarray(g.quantile(np.array([[0.03, 0.4, 0.6, 0.95]])))
    back = g.quantile(g.cdf(y))
    np.testing.assert_allclose(back, y, rtol=0, atol=1e-9 * float(np.max(g.base.std)))


def test_quantile_ends_and_interval(case):
    _, g = case
    assert np.all(g.quantile(0.0) == -np.inf) and np.all(g.quantile(1.0) == np.inf)
    lo, hi = g.interval(0.8)
    np.testing.assert_allclose(lo, g.quantile(0.1), rtol=0, atol=1e-9 * g.base.std.max())
    np.testing.assert_allclose(hi, g.quantile(0.9), rtol=0, atol=1e-9 * g.base.std.max())


def test_density_integrates_to_one(case):
    _, g = case
    for i in range(N):
        np.testing.assert_allclose(_quad(_pdf1(g, i), _breaks(g, i)), 1.0, rtol=0, atol=1e-7)


def test_log_prob_is_derivative_of_cdf(case):
    base, g = case
    q = np.array([[0.05, 0.3, 0.5, 0.7, 0.95]])
    y = np.asarray(g.quantile(q))
    kinks = np.asarray(base.quantile(g.knots_u[None, 1:-1]))
    step = 1e-5 * base.std[:, None]
    far = np.min(np.abs(y[:, :, None] - kinks[:, None, :]), axis=2) > 10 * step  # skip jumps of g
    fd = (g.cdf(y + step) - g.cdf(y - step)) / (2 * step)
    np.testing.assert_allclose(g.pdf(y)[far], fd[far], rtol=1e-5)
    assert far.sum() >= 10


def test_moments_against_quad(case):
    _, g = case
    for i in range(N):
        pts = _breaks(g, i)
        f = _pdf1(g, i)
        m = _quad(lambda t, f=f: t * f(t), pts)
        v = _quad(lambda t, f=f, m=m: (t - m) ** 2 * f(t), pts)
        np.testing.assert_allclose(g.mean[i], m, rtol=1e-7, atol=1e-7 * np.sqrt(v))
        np.testing.assert_allclose(g.var[i], v, rtol=1e-7)


@pytest.mark.parametrize("inner", [_normal, _kde])
def test_moments_generic_fallback(inner):
    """A base of unknown type goes through Gauss-Legendre in u: 1e-6 of the exact value
    for a smooth quantile function (a grid's kinks cost more: ~1e-4, not tested)."""
    rng = np.random.default_rng(5)
    base = inner(rng)
    u, h = _knots(rng, 30)
    exact = WarpedPredictive(base, u, h)
    generic = WarpedPredictive(Opaque(base), u, h)
    np.testing.assert_allclose(generic.mean, exact.mean, rtol=0, atol=1e-6 * base.std.max())
    np.testing.assert_allclose(generic.var, exact.var, rtol=1e-6)


def test_identity_map_changes_nothing(case):
    base, _ = case
    g = WarpedPredictive(base, [0.0, 1.0], [0.0, 1.0])
    y = base.sample(3, generator=2).T
    np.testing.assert_allclose(g.cdf(y), base.cdf(y), rtol=0, atol=1e-15)
    np.testing.assert_allclose(g.log_prob(y), base.log_prob(y), rtol=1e-13)
    np.testing.assert_allclose(g.mean, base.mean, rtol=0, atol=1e-9 * base.std.max())
    np.testing.assert_allclose(g.var, base.var, rtol=1e-9)


# ------------------------------------------------------------------ CRPS
def _crps_quad(g, i, y):
    pts = np.unique(np.append(_breaks(g, i), y))
    lo, hi = min(pts[0], y), max(pts[-1], y)
    pts = np.unique(np.concatenate([[lo], pts, [hi]]))
    F = _cdf1(g, i)
    below = pts[pts <= y]
    above = pts[pts >= y]
    return _quad(lambda t: F(t) ** 2, below) + _quad(lambda t: (1 - F(t)) ** 2, above)


def test_crps_against_quad(case):
    _, g = case
    y = np.asarray(g.quantile(np.array([[0.02], [0.4], [0.9], [0.999]])))[:, 0]  # one level per input
    y[-1] += 5 * g.base.std[-1]  # an observation far in the upper tail
    got = crps(g, y)
    ref = np.array([_crps_quad(g, i, y[i]) for i in range(N)])
    np.testing.assert_allclose(got, ref, rtol=1e-8)
    # dubito's generic adaptive quadrature is correct too, but its error estimate misses
    # the kinks of G: up to ~8e-5 relative on these cases
    np.testing.assert_allclose(crps_quadrature(g, y), ref, rtol=2e-4)


def test_crps_many_knots_and_far_outlier():
    rng = np.random.default_rng(3)
    base = Normal(rng.normal(0, 1, 3), rng.uniform(0.5, 2, 3))
    u, h = _knots(rng, 300)
    g = WarpedPredictive(base, u, h)
    y = np.array([-40.0, 0.3, 25.0])
    ref = np.array([_crps_quad(g, i, y[i]) for i in range(3)])
    np.testing.assert_allclose(crps(g, y), ref, rtol=1e-8)


# ------------------------------------------------------------------ sampling, subsets, composition
def test_sampling_matches_distribution():
    rng = np.random.default_rng(11)
    base = _mixture(rng)
    g = WarpedPredictive(base, *_knots(rng))
    draws = g.sample(20_000, generator=4)
    assert draws.shape == (20_000, N)
    z = (draws.mean(axis=0) - g.mean) / np.sqrt(g.var / draws.shape[0])
    assert np.all(np.abs(z) < 5)
    for i in range(N):
        gi = g[i]
        assert stats.kstest(draws[:, i], lambda t, gi=gi: gi.cdf(np.asarray(t)[None, :]).ravel()).pvalue > 1e-3


def test_subset_and_repr(case):
    _, g = case
    sub = g[[2, 0]]
    assert isinstance(sub, WarpedPredictive) and len(sub) == 2
    y = np.array([0.1, -0.3])
    np.testing.assert_allclose(sub.cdf(y), [g[2].cdf(0.1)[0], g[0].cdf(-0.3)[0]], rtol=0, atol=0)
    np.testing.assert_allclose(sub.mean, g.mean[[2, 0]], rtol=1e-12)
    assert "WarpedPredictive(n_inputs=4" in repr(g)


def test_warping_twice_composes_the_maps(case):
    base, g = case
    rng = np.random.default_rng(8)
    u2, h2 = _knots(rng, 7)
    gg = WarpedPredictive(g, u2, h2)
    assert gg.base is base
    y = base.sample(6, generator=9).T
    np.testing.assert_allclose(gg.cdf(y), np.interp(g.cdf(y), u2, h2), rtol=0, atol=1e-13)
    np.testing.assert_allclose(gg.log_prob(y), g.log_prob(y) + np.log(
        np.diff(h2) / np.diff(u2))[np.clip(np.searchsorted(u2, g.cdf(y), "right") - 1, 0, u2.size - 2)], rtol=1e-10)


def test_flat_map_has_zero_density_and_jumping_quantile():
    base = Normal(np.zeros(2), np.ones(2))
    g = WarpedPredictive(base, [0.0, 0.4, 0.6, 1.0], [0.0, 0.5, 0.5, 1.0])
    assert np.all(g.log_prob(0.0) == -np.inf)  # F(0) = 0.5 lies on the flat part
    # G^{-1}(0.5) = F^{-1}(inf{u : H(u) >= 0.5}) = F^{-1}(0.4)
    np.testing.assert_allclose(g.quantile(0.5), stats.norm.ppf(0.4), rtol=1e-12)


def test_knot_validation():
    with pytest.raises(ValueError, match="strictly increasing"):
        check_knots([0, 0.5, 0.5, 1], [0, 0.2, 0.3, 1])
    with pytest.raises(ValueError, match="monotone"):
        check_knots([0, 0.5, 0.7, 1], [0, 0.7, 0.6, 1])
    with pytest.raises(ValueError, match=r"\(0, 0\) to \(1, 1\)"):
        check_knots([0.1, 1], [0, 1])
    with pytest.raises(ValueError, match="finite"):
        check_knots([0, np.nan, 1], [0, 0.5, 1])
    with pytest.raises(TypeError, match="RegressionPredictive"):
        WarpedPredictive(np.zeros(3), [0, 1], [0, 1])
    u, h = compose_knots(([0, 0.5, 1], [0, 0.25, 1]), ([0, 0.5, 1], [0, 0.75, 1]))
    np.testing.assert_allclose(np.interp([0.1, 0.3, 0.9], u, h),
                               np.interp(np.interp([0.1, 0.3, 0.9], [0, 0.5, 1], [0, 0.75, 1]), [0, 0.5, 1], [0, 0.25, 1]))


# ------------------------------------------------------------------ every metric applies
def test_every_metric_runs(case):
    _, g = case
    y = g.sample(1, generator=3)[0]
    summary = regression_summary(g, y)
    assert all(np.isfinite(v) for v in summary.values())
    assert np.all(np.isfinite(nll(g, y))) and np.all(np.isfinite(crps(g, y)))
    p = pit(g, y)
    lo, hi = g.interval(0.9)
    np.testing.assert_array_equal((lo <= y) & (y <= hi), (p >= 0.05 - 1e-9) & (p <= 0.95 + 1e-9))
    assert coverage(g, y, 0.9) == np.mean((lo <= y) & (y <= hi))
    assert width(g, 0.9) == pytest.approx(np.mean(hi - lo))
    assert np.all(np.isfinite(interval_score(g, y, 0.9))) and np.all(np.isfinite(pinball(g, y, 0.3)))
    assert 0 <= calibration_error(g, y) <= 0.5


def test_crps_fine_panels_equal_the_twelve_node_panels(monkeypatch):
    # MC dropout's shape (200 components of sd 1 around a spread of 0.3) and a kernel density of
    # samples: the 4-node panels of at most half a component sd against the 12-node panels
    # between 65 G-quantiles (forced by a tiny step); tolerance 1e-9 relative (measured 2e-11)
    import dubito.recalibrate.warped as warped

    rng = np.random.default_rng(11)
    n, m = 6, 200
    x = rng.normal(size=n)
    bases = [GaussianMixture(np.full((n, m), 1 / m), rng.normal(x[:, None], 0.3, (n, m)), np.ones((n, m))),
             Samples(rng.normal(x[None, :], 1.0, (150, n)))]
    u, h = _knots(rng, 60)
    y = x + np.array([-30.0, -1.0, 0.0, 0.5, 2.0, 40.0])
    for base in bases:
        g = WarpedPredictive(base, u, h)
        fine = crps(g, y)
        monkeypatch.setattr(warped, "_CRPS_FINE_STEP", 1e-12)
        coarse = crps(g, y)
        monkeypatch.undo()
        np.testing.assert_allclose(fine, coarse, rtol=1e-9)
