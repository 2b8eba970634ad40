"""Samples: the KDE against scipy.stats.gaussian_kde per input; with noise against the
explicit equal-weight GaussianMixture (itself checked against scipy in test_mixture)."""
import numpy as np
import pytest
from scipy import optimize, stats

from dubito.predictive import GaussianMixture, Samples

# (id, S, N, kind): draws from unit normals, a wide bimodal posterior, narrow draws.
CASES = [
    ("s2-n1-unit", 2, 1, "unit"),
    ("s30-n7-bimodal", 30, 7, "bimodal"),
    ("s200-n7-narrow", 200, 7, "narrow"),
    ("s50-n50-unit", 50, 50, "unit"),
]
IDS = [c[0] for c in CASES]
LEVELS = np.array([1e-6, 0.025, 0.5, 0.9, 1 - 1e-6])


def make_draws(case, seed=0):
    _, s, n, kind = case
    rng = np.random.default_rng(seed)
    if kind == "unit":
        return rng.normal(rng.normal(0, 3, n), 1.0, (s, n))
    if kind == "bimodal":
        return rng.normal(0, 0.5, (s, n)) + 40 * rng.integers(0, 2, (s, n))
    return 1e3 + rng.normal(0, 1e-4, (s, n))


def kde_points(d, rng, k=5):
    s, n = d.shape
    return d[rng.integers(s, size=(n, k)), np.arange(n)[:, None]] + d.std(0)[:, None] * rng.normal(0, 1, (n, k))


@pytest.mark.parametrize("bw", ["scott", "silverman"])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_kde_matches_scipy_gaussian_kde(case, bw):
    d = make_draws(case)
    p = Samples(d, bandwidth=bw)
    y = kde_points(d, np.random.default_rng(1))
    s, n = d.shape
    for i in range(min(n, 10)):  # per input, scipy's own 1-D KDE is the oracle
        kde = stats.gaussian_kde(d[:, i], bw_method=bw)
        np.testing.assert_allclose(p.bandwidth_[i], np.sqrt(kde.covariance[0, 0]), rtol=1e-12)
        # y - f loses eps |y| / h of relative accuracy in z (both here and in scipy): the
        # narrow case (draws ~1e3 +- 1e-4) is conditioned by that, the others are not
        rtol = 1e-10 + 1e3 * np.finfo(float).eps * np.abs(y[i]).max() / p.bandwidth_[i]
        np.testing.assert_allclose(p.pdf(y)[i], kde.pdf(y[i]), rtol=rtol, atol=1e-300)
        np.testing.assert_allclose(p.log_prob(y)[i], kde.logpdf(y[i]), rtol=rtol, atol=rtol)
        cdf_ref = [kde.integrate_box_1d(-np.inf, t) for t in y[i]]
        np.testing.assert_allclose(p.cdf(y)[i], cdf_ref, rtol=rtol, atol=1e-14)
        # mean and the KDE's exact variance: numerically from scipy's own resample moments
        # would be noisy, so use the closed form of the equal-weight mixture of kernels
        np.testing.assert_allclose(p.mean[i], kde.dataset.mean(), rtol=1e-14, atol=1e-14)
        np.testing.assert_allclose(p.var[i], d[:, i].var() + kde.covariance[0, 0], rtol=1e-12)
        if i < 3:  # quantiles: brentq on scipy's KDE CDF
            x = p.quantile(LEVELS[None])[i]
            h = p.bandwidth_[i]
            lo, hi = d[:, i].min() - 40 * h, d[:, i].max() + 40 * h
            for j, q in enumerate(LEVELS):
                ref = optimize.brentq(lambda t: kde.integrate_box_1d(-np.inf, t) - q, lo, hi,
                                      xtol=1e-14 * h, rtol=4 * np.finfo(float).eps)
                dens = float(kde.pdf(x[j])[0])
                assert abs(x[j] - ref) <= 1e-10 / dens + 1e-12 * abs(ref)
    assert p.epistemic_var is None and p.aleatoric_var is None
    assert p.n_draws == s and p.draws.shape == (s, n)


def test_kde_variance_is_exact():
    """var = Var(draws, ddof=0) + h^2, checked by integrating y^2 p(y) numerically."""
    d = make_draws(CASES[1])[:, :2]
    p = Samples(d)
    for i in range(2):
        grid = np.linspace(p.mean[i] - 12 * p.std[i], p.mean[i] + 12 * p.std[i], 20001)
        dens = p[i].pdf(grid[None, :])[0]
        m = np.trapezoid(grid * dens, grid)
        v = np.trapezoid((grid - m) ** 2 * dens, grid)
        np.testing.assert_allclose(m, p.mean[i], rtol=1e-8)
        np.testing.assert_allclose(v, p.var[i], rtol=1e-7)


def test_explicit_bandwidth_float_and_array():
    d = make_draws(CASES[3])
    p = Samples(d, bandwidth=0.3)
    np.testing.assert_array_equal(p.bandwidth_, 0.3)
    kde = stats.gaussian_kde(d[:, 0], bw_method=0.3 / d[:, 0].std(ddof=1))
    np.testing.assert_allclose(p.pdf(np.full(50, 0.7))[0], kde.pdf(0.7)[0], rtol=1e-10)
    h = np.linspace(0.1, 1.0, 50)
    np.testing.assert_array_equal(Samples(d, bandwidth=h).bandwidth_, h)


def test_all_equal_draws_get_a_documented_floor():
    tiny = np.array([0.0, 5e-324] * 5)  # differ only by a subnormal: h would underflow
    ulps = np.array([1e3, np.nextafter(1e3, 2e3)] * 5)  # differ by one ulp
    d = np.column_stack([np.full(10, 3.0), np.linspace(0, 1, 10), np.zeros(10), tiny, ulps])
    p = Samples(d)
    eps = np.finfo(float).eps
    np.testing.assert_allclose(p.bandwidth_[[0, 2, 3, 4]], np.sqrt(eps) * np.array([3.0, 1.0, 1.0, 1e3]),
                               rtol=1e-15)
    assert p.bandwidth_[1] == pytest.approx(np.std(d[:, 1], ddof=1) * 10 ** (-0.2), rel=1e-14)
    assert np.isfinite(p.log_prob(np.array([3.0, 0.5, 0.0, 0.0, 1e3]))).all()
    lo, hi = p.interval(0.9)
    assert lo[0] < 3.0 < hi[0] and hi[0] - lo[0] < 1e-6


@pytest.mark.parametrize(
    "noise", ["scalar", "per-draw", "per-input", "full", "col", "row"]
)
def test_noise_is_the_explicit_equal_weight_mixture(noise):
    rng = np.random.default_rng(4)
    s, n = 20, 6
    d = rng.normal(0, 2, (s, n))
    full = {
        "scalar": (0.7, np.full((s, n), 0.7)),
        "per-draw": ((sd := rng.uniform(0.2, 1, s)), np.repeat(sd[:, None], n, 1)),
        "per-input": ((sn := rng.uniform(0.2, 1, n)), np.repeat(sn[None, :], s, 0)),
        "full": ((sf := rng.uniform(0.2, 1, (s, n))), sf),
        "col": ((sc := rng.uniform(0.2, 1, (s, 1))), np.repeat(sc, n, 1)),
        "row": ((sr := rng.uniform(0.2, 1, (1, n))), np.repeat(sr, s, 0)),
    }
    arg, ns = full[noise]
    p = Samples(d, noise_std=arg)
    ref = GaussianMixture(np.ones(s), d.T, (ns**2).T)
    y = rng.normal(0, 3, (n, 5))
    q = np.array([[1e-6, 0.1, 0.5, 0.95]])
    np.testing.assert_allclose(p.mean, ref.mean, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(p.var, ref.var, rtol=1e-13)
    np.testing.assert_allclose(p.log_prob(y), ref.log_prob(y), rtol=1e-13)
    np.testing.assert_allclose(p.cdf(y), ref.cdf(y), rtol=1e-13)
    np.testing.assert_allclose(p.quantile(q), ref.quantile(q), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(p.epistemic_var, d.var(axis=0), rtol=1e-13)
    np.testing.assert_allclose(p.aleatoric_var, (ns**2).mean(axis=0), rtol=1e-13)
    np.testing.assert_allclose(p.epistemic_var + p.aleatoric_var, p.var, rtol=1e-14)
    mix = p.as_mixture()
    assert isinstance(mix, GaussianMixture) and mix.n_components == s
    np.testing.assert_allclose(mix.epistemic_var, p.epistemic_var, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(mix.aleatoric_var, p.aleatoric_var, rtol=1e-12)
    assert p.bandwidth_ is None
    np.testing.assert_array_equal(p.noise_std, ns)


def test_kde_as_mixture_is_the_same_distribution():
    d = make_draws(CASES[1])
    p = Samples(d)
    mix = p.as_mixture()
    y = np.array([[-1.0, 0.0, 20.0, 40.5]])
    np.testing.assert_allclose(mix.cdf(y), p.cdf(y), rtol=1e-15)
    np.testing.assert_allclose(mix.var, p.var, rtol=1e-12)
    np.testing.assert_allclose(mix.variances, np.repeat(p.bandwidth_[:, None] ** 2, d.shape[0], 1))


def test_ambiguous_noise_shape_is_refused():
    d = np.random.default_rng(0).normal(size=(5, 5))
    with pytest.raises(ValueError, match="ambiguous"):
        Samples(d, noise_std=np.ones(5))
    Samples(d, noise_std=np.ones((5, 1)))  # explicit per-draw
    Samples(d, noise_std=np.ones((1, 5)))  # explicit per-input


@pytest.mark.parametrize(
    "args, kwargs, match",
    [
        ((np.ones(5),), {}, r"draws must have shape \(S, N\)"),
        ((np.array([[0.0, np.nan], [1.0, 2.0]]),), {}, "draws must be finite"),
        ((np.ones((1, 3)),), {}, "needs at least 2 draws"),
        ((np.ones((4, 3)),), {"bandwidth": "magic"}, "bandwidth must be 'scott', 'silverman'"),
        ((np.ones((4, 3)),), {"bandwidth": -1.0}, "bandwidth must be positive"),
        ((np.ones((4, 3)),), {"bandwidth": [1.0, 2.0]}, "bandwidth must be"),
        ((np.ones((4, 3)),), {"noise_std": 0.0}, "noise_std must be positive"),
        ((np.ones((4, 3)),), {"noise_std": [1.0, np.nan, 1.0]}, "noise_std must be finite"),
        ((np.ones((4, 3)),), {"noise_std": np.ones(7)}, "noise_std must be a scalar or have shape"),
        ((np.ones((4, 3)),), {"noise_std": np.ones((3, 4))}, "noise_std must be a scalar or have shape"),
    ],
)
def test_bad_input_names_the_problem(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        Samples(*args, **kwargs)


def test_single_draw_with_noise_is_a_normal():
    p = Samples(np.array([[1.0, 2.0]]), noise_std=[0.5, 2.0])
    np.testing.assert_allclose(p.cdf(np.array([1.5, 0.0])), stats.norm([1.0, 2.0], [0.5, 2.0]).cdf([1.5, 0.0]))
