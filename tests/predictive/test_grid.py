"""GridDensity against scipy (Normal, two-component mixture) tabulated on fine grids,
plus its exact properties (normalisation, round trips, moments, CRPS) and the base.py
contract (broadcasting, subsets, validation).

Discretisation tolerances: a density tabulated at spacing delta and read as piecewise
linear differs from the true one by at most delta^2/8 max|p''| (linear interpolation), and
its CDF by O(delta^2 max|p'|); for N(mu, sd^2) at delta = 0.006 sd these are ~4e-6 of the
peak density and ~1e-6 in probability. The tolerances below are those bounds with a
margin; the exact identities (round trips, normalisation, CRPS by two routes) are tested
to rounding.
"""
import time

import numpy as np
import pytest
import torch
from scipy import stats

from dubito.metrics import crps, crps_normal, crps_quadrature
from dubito.predictive import GridDensity, RegressionPredictive

MU = np.array([0.0, 3.0, -50.0])
SD = np.array([1.0, 0.2, 7.0])


def tabulated_normal(g=4001, width=12.0, shared=False):
    """N(MU, SD^2) on uniform grids of +-width sd (per input, or one shared grid in z units)."""
    if shared:
        x = np.linspace(-110.0, 60.0, 10 * g)  # >= 8 sd around every input, delta <= 0.025 sd
        return GridDensity(x, stats.norm.pdf(x[None, :], MU[:, None], SD[:, None])), x
    z = np.linspace(-width, width, g)
    x = MU[:, None] + SD[:, None] * z[None, :]
    return GridDensity(x, stats.norm.pdf(x, MU[:, None], SD[:, None])), x


W, M1, S1, M2, S2 = 0.3, -2.0, 0.5, 1.5, 1.0  # bimodal mixture 0.3 N(-2, .25) + 0.7 N(1.5, 1)


def mix_pdf(y):
    return W * stats.norm.pdf(y, M1, S1) + (1 - W) * stats.norm.pdf(y, M2, S2)


def mix_cdf(y):
    return W * stats.norm.cdf(y, M1, S1) + (1 - W) * stats.norm.cdf(y, M2, S2)


def tabulated_mixture(n=2, g=6001, seed=0):
    """The mixture on non-uniform per-input grids on [-9, 12] (denser near the modes)."""
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(n):
        u = np.sort(rng.uniform(0, 1, g - 2))
        u = np.concatenate([[0.0], u, [1.0]])
        rows.append(-9.0 + 21.0 * u)
    x = np.array(rows)
    return GridDensity(x, mix_pdf(x)), x


# ---------------------------------------------------------------------- against scipy
@pytest.mark.parametrize("shared", [False, True], ids=["per-input-grid", "shared-grid"])
def test_tabulated_normal_matches_scipy(shared):
    p, _x = tabulated_normal(shared=shared)
    rng = np.random.default_rng(1)
    y = MU[:, None] + SD[:, None] * rng.normal(0, 1.5, (3, 40))
    ref = stats.norm(MU[:, None], SD[:, None])
    peak = 1.0 / (SD * np.sqrt(2 * np.pi))
    # delta = 0.006 sd (per input) or 0.00425 (shared: 0.021 sd for the narrow input)
    tol_p = 2e-5 if not shared else 2e-4
    np.testing.assert_allclose(p.pdf(y), ref.pdf(y), rtol=0, atol=tol_p * peak.max())
    np.testing.assert_allclose(p.cdf(y), ref.cdf(y), rtol=0, atol=10 * tol_p / 4)
    np.testing.assert_allclose(p.mean, MU, rtol=0, atol=1e-9 * SD.max())
    np.testing.assert_allclose(p.var, SD**2, rtol=1e-3 if shared else 1e-5)
    dens = ref.pdf(y) > 1e-3 * peak[:, None]  # log density: relative error where not tiny
    np.testing.assert_allclose(p.log_prob(y)[dens], ref.logpdf(y)[dens], rtol=0, atol=1e-3 if shared else 1e-4)
    q = np.array([[0.001, 0.025, 0.3, 0.5, 0.8, 0.975, 0.999]])
    np.testing.assert_allclose(p.quantile(q), ref.ppf(np.broadcast_to(q, (3, 7))), rtol=0,
                               atol=(1e-3 if shared else 1e-4) * SD.max())


def test_uniform_grid_moments_are_exact_up_to_the_hat_variance():
    """On a uniform grid the piecewise-linear density is sum_j delta p(x_j) hat_j(y): its mean
    is the (spectrally accurate) trapezoid mean, i.e. mu, and its variance is the trapezoid
    variance sd^2 plus the variance delta^2/6 of the hat function: exact oracles."""
    p, x = tabulated_normal(g=2001, width=14.0)
    delta = x[:, 1] - x[:, 0]
    np.testing.assert_allclose(p.mean, MU, rtol=0, atol=1e-12 * np.abs(MU).max() + 1e-13)
    np.testing.assert_allclose(p.var, SD**2 + delta**2 / 6, rtol=1e-11)


def test_large_offset_variance_has_no_cancellation():
    x = 1e6 + np.linspace(-0.12, 0.12, 2001)  # N(1e6, 0.01^2): mean^2 / var = 1e16
    p = GridDensity(x, stats.norm.pdf(x, 1e6, 0.01)[None, :])
    delta = x[1] - x[0]
    np.testing.assert_allclose(p.var, 1e-4 + delta**2 / 6, rtol=1e-6)


def test_two_component_mixture_matches_scipy():
    p, _x = tabulated_mixture()
    y = np.linspace(-6, 8, 300)[None, :]
    peak = mix_pdf(np.linspace(-6, 8, 10001)).max()
    # mean spacing 21/6000 = 0.0035 (gaps up to ~4x that), narrow sd 0.5: delta^2/8 |p''| < 1e-4 peak
    np.testing.assert_allclose(p.pdf(y), np.broadcast_to(mix_pdf(y), (2, 300)), rtol=0, atol=1e-4 * peak)
    np.testing.assert_allclose(p.cdf(y), np.broadcast_to(mix_cdf(y), (2, 300)), rtol=0, atol=2e-5)
    true_mean = W * M1 + (1 - W) * M2
    true_var = W * S1**2 + (1 - W) * S2**2 + W * (1 - W) * (M1 - M2) ** 2
    np.testing.assert_allclose(p.mean, true_mean, rtol=0, atol=1e-5)
    np.testing.assert_allclose(p.var, true_var, rtol=1e-5)
    q = np.array([[0.01, 0.2, 0.3, 0.31, 0.5, 0.9, 0.99]])
    from scipy.optimize import brentq

    want = [brentq(lambda t, a=a: mix_cdf(t) - a, -9, 12, xtol=1e-14) for a in q[0]]
    np.testing.assert_allclose(p.quantile(q), np.broadcast_to(want, (2, 7)), rtol=0, atol=1e-4)


# ---------------------------------------------------------------------- exact properties
def test_normalised_to_one_and_cdf_monotone_in_unit_interval():
    p, x = tabulated_mixture()
    # trapezoid integral of the stored (normalised) density is 1; the CDF reaches 1 at the end
    np.testing.assert_allclose(np.trapezoid(p.density, x, axis=1), 1.0, rtol=1e-14)
    np.testing.assert_allclose(p.cdf(x[:, -1]), 1.0, rtol=0, atol=0)
    np.testing.assert_allclose(p.cdf(x[:, 0]), 0.0, rtol=0, atol=0)
    raw = GridDensity(x, 37.5 * mix_pdf(x))  # unnormalised input: same distribution
    np.testing.assert_allclose(raw.density, p.density, rtol=1e-14)
    y = np.linspace(-15, 15, 20001)[None, :]  # also outside the grid: 0 below, 1 above
    f = p.cdf(y)
    assert np.all((f >= 0) & (f <= 1))
    assert np.all(np.diff(f, axis=1) >= 0)
    assert np.all(f[:, y[0] < -9] == 0) and np.all(f[:, y[0] > 12] == 1)
    assert np.all(np.isneginf(p.log_prob(np.array([[-9.5, 12.5]]))))


def test_cdf_is_the_integral_of_the_interpolated_density():
    """F(b) - F(a) equals a fine midpoint-rule integral of exp(log_prob) (independent route)."""
    p, _x = tabulated_mixture(n=1, g=300)
    a, b = -3.7, 2.9
    t = np.linspace(a, b, 200001)
    mid = 0.5 * (t[1:] + t[:-1])
    integral = np.sum(p.pdf(mid[None, :])) * (t[1] - t[0])
    np.testing.assert_allclose(p.cdf(b) - p.cdf(a), integral, rtol=1e-8)


def test_round_trips_quantile_cdf():
    p, x = tabulated_mixture()
    q = np.linspace(1e-6, 1 - 1e-6, 999)[None, :]
    np.testing.assert_allclose(p.cdf(p.quantile(q)), np.broadcast_to(q, (2, 999)), rtol=0, atol=1e-13)
    # y from F(y) loses |rounding of F| / p(y): checked where p >= 1e-6 of the peak (~1e-10)
    y = np.linspace(-7, 9, 777)[None, :]
    ok = p.pdf(y) > 1e-6 * p.pdf(y).max()
    assert ok.sum() > 1000
    yy = np.broadcast_to(y, (2, 777))
    np.testing.assert_allclose(p.quantile(p.cdf(y))[ok], yy[ok], rtol=0, atol=1e-9)
    # at the grid nodes themselves
    nodes = x[:, 1:-1:50]
    ok = p.pdf(nodes) > 1e-6 * p.density.max()
    np.testing.assert_allclose(p.quantile(p.cdf(nodes))[ok], nodes[ok], rtol=0, atol=1e-9)


def test_quantile_skips_a_gap_without_mass():
    """Density 0 on [1, 3]: every level maps into the support, the generalised inverse
    inf{y : F(y) >= q} puts the level F = 1/2 at the left end of the gap."""
    x = np.array([0.0, 0.5, 1.0, 3.0, 3.5, 4.0])
    p = GridDensity(x, np.array([[0.0, 1.0, 0.0, 0.0, 1.0, 0.0]]))
    np.testing.assert_allclose(p.cdf(np.array([[1.0, 2.0, 3.0]])), [[0.5, 0.5, 0.5]], atol=1e-15)
    np.testing.assert_allclose(p.quantile(0.5), [1.0], atol=1e-15)
    qs = np.linspace(0.001, 0.999, 500)[None, :]
    out = p.quantile(qs)
    assert not np.any((out > 1.0) & (out < 3.0))
    np.testing.assert_allclose(p.cdf(out), qs, atol=1e-14)
    assert np.isneginf(p.log_prob(2.0)).all()
    np.testing.assert_allclose(p.mean, [2.0], atol=1e-15)  # symmetric about 2
    np.testing.assert_allclose(p.var, [1.5**2 + 1.0 / 24.0], rtol=1e-14)  # +-1.5 plus a unit-width triangle


def test_triangle_density_closed_forms():
    """Triangle on [0, 2] with peak at 1: F, quantile, mean, variance by hand."""
    p = GridDensity([0.0, 1.0, 2.0], [[0.0, 1.0, 0.0]])
    y = np.array([[0.5, 1.0, 1.5]])
    np.testing.assert_allclose(p.cdf(y), [[0.125, 0.5, 0.875]], rtol=1e-15)
    np.testing.assert_allclose(p.quantile(np.array([[0.125, 0.5, 0.875]])), y, rtol=1e-15)
    np.testing.assert_allclose(p.pdf(y), [[0.5, 1.0, 0.5]], rtol=1e-15)
    np.testing.assert_allclose(p.mean, [1.0], rtol=1e-15)
    np.testing.assert_allclose(p.var, [1.0 / 6.0], rtol=1e-14)


def test_sample_moments_and_seeding():
    p, _ = tabulated_mixture(n=2)
    s = p.sample(200_000, generator=123)
    assert s.shape == (200_000, 2)
    se = np.sqrt(p.var / s.shape[0])
    assert np.all(np.abs(s.mean(axis=0) - p.mean) < 5 * se)
    # variance of the sample variance ~ (m4 - sd^4)/n; 5 sigma with a generous m4 <= 5 var^2
    assert np.all(np.abs(s.var(axis=0) - p.var) < 5 * np.sqrt(4 * p.var**2 / s.shape[0]))
    assert stats.kstest(s[:20_000, 0], lambda t: p[[0]].cdf(np.asarray(t)[None, :])[0]).pvalue > 0.01
    np.testing.assert_array_equal(p.sample(5, generator=7), p.sample(5, generator=7))
    assert not np.array_equal(p.sample(5, generator=7), p.sample(5, generator=8))


# ---------------------------------------------------------------------- CRPS
def test_crps_of_tabulated_normal_matches_closed_form():
    p, _ = tabulated_normal(g=4001, width=12.0)
    rng = np.random.default_rng(3)
    for y in (MU + SD * rng.normal(0, 1, 3), MU + 20 * SD, MU - 20 * SD):  # also outside the grid
        exact = crps_normal(MU, SD, y)
        # the table is the discretised normal blurred by a hat of width 2 delta: O(delta^2 / sd)
        # = 3.6e-5 sd at delta = 0.006 sd; measured <= 5e-7 sd
        assert np.all(np.abs(crps(p, y) - exact) <= 5e-6 * SD), crps(p, y) - exact


def test_crps_exact_equals_quadrature_for_the_same_table():
    """Both routes integrate the same piecewise-quadratic CDF: they agree to quadrature accuracy."""
    p, _x = tabulated_mixture(n=2, g=400)
    y = np.array([0.3, -10.0])
    np.testing.assert_allclose(crps(p, y), crps_quadrature(p, y), rtol=1e-7)
    y = np.array([-2.0, 20.0])
    np.testing.assert_allclose(crps(p, y), crps_quadrature(p, y), rtol=1e-7)
    # and by brute force: fine trapezoid of F^2 left of y and (1 - F)^2 right of it
    left, right = np.linspace(-30, y[0], 300_001), np.linspace(y[0], 30, 300_001)
    f_left, f_right = p[[0]].cdf(left[None, :])[0], p[[0]].cdf(right[None, :])[0]
    brute = np.trapezoid(f_left**2, left) + np.trapezoid((1 - f_right) ** 2, right)
    np.testing.assert_allclose(crps(p, y)[0], brute, rtol=1e-8)


# ---------------------------------------------------------------------- contract
def test_broadcasting_rules_of_base():
    p, _ = tabulated_normal()
    n = len(p)
    assert p.cdf(0.5).shape == (n,)
    assert p.cdf(np.zeros(n)).shape == (n,)
    assert p.cdf(np.zeros((n, 4))).shape == (n, 4)
    assert p.log_prob(np.zeros((1, 4))).shape == (n, 4)
    assert p.quantile(np.full((1, 5), 0.5)).shape == (n, 5)
    np.testing.assert_array_equal(p.cdf(np.array([[0.5, 1.0]]))[:, 1], p.cdf(1.0))
    with pytest.raises(ValueError, match="predictive has 3 inputs"):
        p.cdf(np.zeros(4))
    with pytest.raises(ValueError, match="expected a scalar"):
        p.cdf(np.zeros((2, 4)))
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        p.quantile(1.5)
    assert np.all(np.isneginf(p.quantile(0.0))) and np.all(np.isposinf(p.quantile(1.0)))
    lo, hi = p.interval(0.9)
    np.testing.assert_allclose(lo, MU - 1.6448536269514722 * SD, rtol=0, atol=1e-4 * SD.max())
    np.testing.assert_allclose(hi, MU + 1.6448536269514722 * SD, rtol=0, atol=1e-4 * SD.max())
    assert p.sample(4, generator=0).shape == (4, n)
    assert isinstance(p, RegressionPredictive) and len(p) == 3
    assert np.isnan(p.cdf(np.array([np.nan, 0.0, 0.0]))[0])


@pytest.mark.parametrize("shared", [False, True])
def test_subset_and_read_only(shared):
    p, _x = tabulated_normal(g=201, shared=shared)
    p2 = GridDensity(p.grid, p.density, epistemic_var=[0.1, 0.2, 0.3], aleatoric_var=0.5)
    y = np.array([0.3, 3.1, -49.0])
    for index in ([2, 0], np.array([False, True, True]), slice(1, None), 1):
        sub = p2[index]
        idx = np.arange(3)[index]
        idx = np.atleast_1d(idx)
        np.testing.assert_array_equal(sub.cdf(y[idx]), p2.cdf(y)[idx])
        np.testing.assert_array_equal(sub.quantile(0.3), p2.quantile(0.3)[idx])
        np.testing.assert_array_equal(sub.mean, p2.mean[idx])
        np.testing.assert_array_equal(sub.var, p2.var[idx])
        np.testing.assert_array_equal(sub.epistemic_var, np.array([0.1, 0.2, 0.3])[idx])
        np.testing.assert_array_equal(sub.aleatoric_var, np.full(idx.size, 0.5))
        assert sub.grid.ndim == (1 if shared else 2)
    assert p.epistemic_var is None and p.aleatoric_var is None
    for arr in (p.grid, p.density, p.mean, p.var, p2.epistemic_var):
        with pytest.raises(ValueError):
            arr[0] = 1.0
    src = np.array([[0.0, 1.0, 0.0]])
    q = GridDensity([0.0, 1.0, 2.0], src)
    src[0, 1] = 50.0  # the caller's array changing must not change the distribution
    np.testing.assert_allclose(q.density, [[0.0, 1.0, 0.0]])


def test_accepts_torch_tensors():
    x = torch.linspace(-6, 6, 501, dtype=torch.float32)
    d = torch.exp(-0.5 * x**2)[None, :].repeat(2, 1)
    p = GridDensity(x, d)
    np.testing.assert_allclose(p.cdf(torch.zeros(2)), [0.5, 0.5], atol=1e-7)
    assert p.density.dtype == np.float64


@pytest.mark.parametrize(
    "grid, density, match",
    [
        ([0.0, 2.0, 1.0], [[1.0, 1.0, 1.0]], "strictly increasing"),
        ([0.0, 1.0, 1.0], [[1.0, 1.0, 1.0]], "strictly increasing"),
        ([0.0, 1.0, 2.0], [[1.0, -1.0, 1.0]], "density must be non-negative"),
        ([0.0, 1.0, 2.0], [[1.0, 1.0, 1.0], [0.0, 0.0, 0.0]], r"positive integral .* first at index 1"),
        ([0.0, 1.0, 2.0], [[1.0, 0.0, 0.0], [0.0, 0.0, 2.0]], None),  # valid: zeros at some nodes are fine
        ([0.0, 1.0, 2.0], [[1.0, np.nan, 1.0]], "density must be finite"),
        ([0.0, np.nan, 2.0], [[1.0, 1.0, 1.0]], "grid must be finite"),
        ([0.0, 1.0, 2.0], [[1.0, 1.0]], r"grid must have shape \(2,\)"),
        ([[0.0, 1.0, 2.0]] * 3, [[1.0, 1.0, 1.0]] * 2, r"grid must have shape \(3,\) .* or \(2, 3\)"),
        ([0.0, 1.0, 2.0], [1.0, 1.0, 1.0], r"density\[None, :\]"),
        ([0.0], [[1.0]], "at least 2 nodes"),
        ([0.0, 1.0, 2.0], [["a", "b", "c"]], "density must be numeric"),
    ],
)
def test_bad_input_is_one_clear_value_error(grid, density, match):
    if match is None:
        GridDensity(grid, density)
        return
    with pytest.raises(ValueError, match=match):
        GridDensity(grid, density)


def test_bad_variance_parts():
    with pytest.raises(ValueError, match="epistemic_var must be non-negative"):
        GridDensity([0.0, 1.0], [[1.0, 1.0]], epistemic_var=[-1.0])
    with pytest.raises(ValueError, match=r"aleatoric_var must have shape \(1,\)"):
        GridDensity([0.0, 1.0], [[1.0, 1.0]], aleatoric_var=[1.0, 2.0])


def test_vectorised_speed_10k_inputs_512_nodes():
    """One point per input for N = 10 000 inputs x G = 512 per-input nodes: milliseconds
    (a vectorised binary search, no loop over inputs). The bound is a generous guard
    against an O(N) Python loop, not a benchmark."""
    rng = np.random.default_rng(0)
    n, g = 10_000, 512
    x = np.sort(rng.normal(size=(n, g)), axis=1) * 3
    x[:, 1:] = np.maximum(x[:, 1:], x[:, :-1] + 1e-9)  # strictly increasing
    p = GridDensity(x, np.exp(-0.5 * x**2))
    y = rng.normal(size=n)
    t0 = time.perf_counter()
    f = p.cdf(y)
    lp = p.log_prob(y)
    q = p.quantile(rng.uniform(size=(n, 1)))[:, 0]  # one level per input: (N, 1)
    elapsed = time.perf_counter() - t0
    assert f.shape == lp.shape == q.shape == (n,)
    assert elapsed < 5.0, elapsed
    # cross-check a few inputs against the shared-grid fast path
    for i in (0, 4321, n - 1):
        single = GridDensity(x[i], p.density[i][None, :])
        np.testing.assert_allclose(single.cdf(y[i]), f[i], rtol=1e-13, atol=1e-15)
