"""KDEMarginal (IC-NLM step 1) against the exact KDE mixture, scipy's gaussian_kde, the
bandwidth formulas, and the properties the copula needs (spec §6.9): F monotone in (0, 1)
at the data, pseudo responses ~ N(0, 1), round trips, ties, bounds, persistence."""
import time

import numpy as np
import pytest
import torch
from scipy import stats
from scipy.special import ndtr

from dubito._validation import NotFittedError
from dubito.io import load_tensors, save_tensors
from dubito.regression.marginal import KDEMarginal


def exact_kde(y, pts, h, lo=-np.inf, hi=np.inf):
    """Brute-force (reflected) mixture: p, F and S at pts, renormalised to [lo, hi]."""
    centres = [y] + ([2 * lo - y] if np.isfinite(lo) else []) + ([2 * hi - y] if np.isfinite(hi) else [])
    p = np.zeros_like(pts)
    F = np.zeros_like(pts)  # mass in [lo, pts]
    S = np.zeros_like(pts)  # mass in [pts, hi]
    for c in centres:
        for chunk in np.array_split(c, max(1, c.size // 500)):
            z = (pts[:, None] - chunk[None, :]) / h
            p += np.exp(-0.5 * z * z).sum(1) / np.sqrt(2 * np.pi) / (y.size * h)
            lo_z = (lo - chunk[None, :]) / h
            hi_z = (hi - chunk[None, :]) / h
            F += (ndtr(z) - ndtr(lo_z)).sum(1) / y.size
            S += (ndtr(-z) - ndtr(-hi_z)).sum(1) / y.size
    total = F + S
    return p / total, F / total, S / total


def normal_reference(y):
    a = np.std(y, ddof=1)
    iqr = (np.percentile(y, 75) - np.percentile(y, 25)) / 1.349
    if iqr > 0:
        a = min(a, iqr)
    return 1.0592238410488122 * a * y.size ** -0.2


# ---------------------------------------------------------------------- bandwidths
def test_bandwidth_rules():
    rng = np.random.default_rng(0)
    y = rng.standard_t(3, size=1000)  # heavy tails: IQR/1.349 < sd, so the robust scale is used
    sd = np.std(y, ddof=1)
    iqr = (np.percentile(y, 75) - np.percentile(y, 25)) / 1.349
    assert iqr < sd
    n = y.size
    h = KDEMarginal().fit(y).bandwidth_
    # statsmodels' Gaussian normal_reference_constant is 2 (1/24)^(1/5) = (4/3)^(1/5)
    np.testing.assert_allclose(h, (4 / 3) ** 0.2 * iqr * n ** -0.2, rtol=1e-14)
    np.testing.assert_allclose(h, 1.059 * iqr * n ** -0.2, rtol=3e-4)  # statsmodels' "scott"
    np.testing.assert_allclose(KDEMarginal(bandwidth="silverman").fit(y).bandwidth_, 0.9 * iqr * n ** -0.2, rtol=1e-14)
    scipy_h = stats.gaussian_kde(y).factor * sd  # scipy's default (Scott's factor) times the sd
    np.testing.assert_allclose(KDEMarginal(bandwidth="scott").fit(y).bandwidth_, scipy_h, rtol=1e-13)
    assert KDEMarginal(bandwidth=0.3).fit(y).bandwidth_ == 0.3
    for bad in ("lscv", -1.0, 0.0, np.nan, True):
        with pytest.raises(ValueError, match="bandwidth must be"):
            KDEMarginal(bandwidth=bad).fit(y)


# ---------------------------------------------------------------------- against oracles
@pytest.mark.parametrize("kind", ["normal", "bimodal", "t3"])
def test_matches_scipy_gaussian_kde_and_the_exact_mixture(kind):
    rng = np.random.default_rng(1)
    n = 400
    if kind == "normal":
        y = rng.normal(2.0, 3.0, n)
    elif kind == "bimodal":
        y = np.concatenate([rng.normal(-4, 0.5, n // 3), rng.normal(3, 2, n - n // 3)])
    else:
        y = rng.standard_t(3, size=n)
    m = KDEMarginal().fit(y)
    h = m.bandwidth_
    kde = stats.gaussian_kde(y, bw_method=h / np.std(y, ddof=1))  # the same bandwidth
    pts = np.concatenate([np.linspace(y.min() - 4 * h, y.max() + 4 * h, 701), y[:50], m.grid_[::997]])
    peak = kde(pts).max()
    # linear binning + interpolation at delta / h <= 1e-2 here: O((delta/h)^2) ~ 1e-6 of the peak
    np.testing.assert_allclose(m.pdf(pts), kde(pts), rtol=0, atol=1e-6 * peak)
    ref_cdf = np.array([kde.integrate_box_1d(-np.inf, t) for t in pts[::7]])
    np.testing.assert_allclose(m.cdf(pts[::7]), ref_cdf, rtol=0, atol=2e-7)
    p, F, S = exact_kde(y, pts, h)
    np.testing.assert_allclose(m.pdf(pts), p, rtol=0, atol=1e-6 * peak)  # spec §6.9: grid KDE = mixture to 1e-6
    np.testing.assert_allclose(m.cdf(pts), F, rtol=0, atol=2e-7)
    np.testing.assert_allclose(m.sf(pts), S, rtol=0, atol=2e-7)
    # log density: relative accuracy down to 1e-10 of the peak (FFT rounding is ~1e-16 of it)
    ok = p > 1e-10 * peak
    assert ok.sum() > 700
    np.testing.assert_allclose(m.log_pdf(pts[ok]), np.log(p[ok]), rtol=0, atol=1e-4)


def test_upper_tail_keeps_relative_accuracy():
    """S_Y is tabulated on its own, so z at the largest data point is as accurate as at the
    smallest: compare with the exact mixture's Phi^{-1}(F) and -Phi^{-1}(S)."""
    rng = np.random.default_rng(2)
    y = rng.normal(size=5000)
    m = KDEMarginal().fit(y)
    ends = np.array([y.min(), y.max(), y.min() - 3 * m.bandwidth_, y.max() + 3 * m.bandwidth_])
    _, F, S = exact_kde(y, ends, m.bandwidth_)
    want = np.where(F < 0.5, stats.norm.ppf(F), -stats.norm.ppf(S))
    np.testing.assert_allclose(m.pseudo_response(ends), want, rtol=1e-5)


# ---------------------------------------------------------------------- what the copula needs
def test_pseudo_responses_are_standard_normal():
    rng = np.random.default_rng(3)
    y = rng.gamma(2.0, 1.5, size=10_000)  # a skewed continuous G (spec §6.9: n = 10k)
    m = KDEMarginal().fit(y)
    z = m.pseudo_response(y)
    assert np.all(np.isfinite(z))
    assert stats.kstest(z, "norm").pvalue > 0.01
    # fresh draws from the fitted KDE itself are exactly F-distributed: z ~ N(0, 1)
    fresh = rng.choice(y, 20_000) + m.bandwidth_ * rng.normal(size=20_000)
    z2 = m.pseudo_response(fresh)
    assert stats.kstest(z2, "norm").pvalue > 0.01
    assert abs(z2.mean()) < 4 / np.sqrt(z2.size) and abs(z2.std() - 1) < 4 / np.sqrt(2 * z2.size)
    # spec §6.9: F monotone and strictly inside (0, 1) at the data
    f = m.cdf(np.sort(y))
    assert np.all(np.diff(f) >= 0) and f.min() > 0 and f.max() < 1
    assert np.all(np.diff(m.cdf_grid_) >= 0) and np.all(np.diff(m.sf_grid_) <= 0)
    np.testing.assert_allclose(m.cdf_grid_ + m.sf_grid_, 1.0, rtol=0, atol=1e-14)


def test_round_trips():
    rng = np.random.default_rng(4)
    y = rng.lognormal(0, 0.7, 3000)
    m = KDEMarginal().fit(y)
    np.testing.assert_allclose(m.ppf(m.cdf(y)), y, rtol=0, atol=1e-9)
    u = np.linspace(1e-6, 1 - 1e-6, 1001)
    np.testing.assert_allclose(m.cdf(m.ppf(u)), u, rtol=0, atol=1e-14)
    np.testing.assert_allclose(m.inverse_pseudo_response(m.pseudo_response(y)), y, rtol=0, atol=1e-9)
    z = np.linspace(-5, 5, 101)
    np.testing.assert_allclose(m.pseudo_response(m.inverse_pseudo_response(z)), z, rtol=0, atol=1e-9)
    assert m.ppf(0.0) == m.grid_[0] and m.ppf(1.0) <= m.grid_[-1]
    # the density integrates to 1 on the grid, and is the derivative of F
    np.testing.assert_allclose(np.trapezoid(m.pdf_grid_, m.grid_), 1.0, rtol=0, atol=1e-6)
    mid = 0.5 * (m.grid_[1:] + m.grid_[:-1])
    slope = np.diff(m.cdf_grid_) / np.diff(m.grid_)
    np.testing.assert_allclose(slope, m.pdf(mid), rtol=0, atol=1e-5 * m.pdf_grid_.max())


def test_clip_bounds_z_far_outside_the_data():
    y = np.random.default_rng(5).normal(size=1000)
    m = KDEMarginal().fit(y)
    z = m.pseudo_response(np.array([-1e6, 1e6, np.nan]))
    np.testing.assert_allclose(z[:2], [stats.norm.ppf(1e-10), -stats.norm.ppf(1e-10)], rtol=1e-12)
    assert np.isnan(z[2])
    assert m.pdf(1e6) == 0 and np.isneginf(m.log_pdf(-1e6))
    assert m.cdf(-1e6) == 0 and m.cdf(1e6) == 1


def test_shapes_and_tensors():
    y = np.random.default_rng(6).normal(size=500)
    m = KDEMarginal().fit(torch.tensor(y[:, None], dtype=torch.float32))  # (n, 1) tensor works
    assert m.n_ == 500
    assert np.ndim(m.cdf(0.3)) == 0
    assert m.pseudo_response(np.zeros((3, 4))).shape == (3, 4)
    assert m.ppf(np.full((2, 5), 0.5)).shape == (2, 5)
    with pytest.raises(ValueError, match=r"u must lie in \[0, 1\]"):
        m.ppf([0.5, 1.5])
    with pytest.raises(ValueError, match="NaN"):
        m.ppf([np.nan])


# ---------------------------------------------------------------------- ties and bounds
def test_ties():
    rng = np.random.default_rng(7)
    y = np.concatenate([np.full(600, 2.0), rng.normal(2.0, 1.0, 400)])  # > half tie: IQR = 0
    m = KDEMarginal().fit(y)
    np.testing.assert_allclose(m.bandwidth_, (4 / 3) ** 0.2 * np.std(y, ddof=1) * y.size ** -0.2, rtol=1e-14)
    np.testing.assert_allclose(m.bandwidth_, normal_reference(y), rtol=1e-14)
    z = m.pseudo_response(y)
    assert np.all(np.isfinite(z))
    assert np.unique(z[:600]).size == 1  # tied responses share one pseudo response
    pts = np.linspace(-2, 6, 301)
    p, F, _ = exact_kde(y, pts, m.bandwidth_)
    np.testing.assert_allclose(m.pdf(pts), p, rtol=0, atol=1e-6 * p.max())
    np.testing.assert_allclose(m.cdf(pts), F, rtol=0, atol=2e-7)


@pytest.mark.parametrize("bounds", [(0.0, 1.0), (0.0, None), (None, 1.0), (-np.inf, 1.0)])
def test_bounded_response_by_reflection(bounds):
    rng = np.random.default_rng(8)
    y = rng.beta(0.8, 2.0, size=2000)
    y[:100] = 0.0  # ties on the lower bound and the upper one
    y[100:120] = 1.0
    m = KDEMarginal(bounds=bounds).fit(y)
    lo = -np.inf if bounds[0] is None else bounds[0]
    hi = np.inf if bounds[1] is None else bounds[1]
    assert m.bounds_ == (float(lo), float(hi))
    assert m.grid_[0] >= lo and m.grid_[-1] <= hi
    outside = np.array([lo - 0.3, hi + 0.3])
    outside = outside[np.isfinite(outside)]
    assert np.all(m.pdf(outside) == 0) and np.all(np.isneginf(m.log_pdf(outside)))
    np.testing.assert_allclose(np.trapezoid(m.pdf_grid_, m.grid_), 1.0, rtol=0, atol=1e-6)
    pts = np.linspace(max(lo, -0.5), min(hi, 1.5), 1001)
    p, F, S = exact_kde(y, pts, m.bandwidth_, lo, hi)
    np.testing.assert_allclose(m.pdf(pts), p, rtol=0, atol=1e-6 * p.max())
    np.testing.assert_allclose(m.cdf(pts), F, rtol=0, atol=2e-7)
    np.testing.assert_allclose(m.sf(pts), S, rtol=0, atol=2e-7)
    if np.isfinite(lo):
        assert m.cdf(lo) == 0 and m.pdf(lo) > 0  # reflection keeps mass at the bound
    if np.isfinite(hi):
        assert m.sf(hi) == 0 and m.cdf(hi) == 1
    z = m.pseudo_response(y)
    assert not np.any(np.isnan(z)) and np.all(np.isfinite(z))
    assert np.all(np.abs(z) <= -stats.norm.ppf(1e-10) + 1e-12)
    np.testing.assert_allclose(m.ppf(m.cdf(y[200:])), y[200:], rtol=0, atol=1e-9)


def test_bounds_validation():
    y = np.random.default_rng(9).uniform(0, 1, 300)
    with pytest.raises(ValueError, match=r"3 responses lie outside bounds .* drop or clip them"):
        KDEMarginal(bounds=(0.0, 1.0)).fit(np.concatenate([y, [1.5, -0.5, 2.0]]))
    for bad in ((1.0, 0.0), (0.0, 0.0), (np.nan, 1.0), (1.0,), "ab", 3.0):
        with pytest.raises(ValueError, match="bounds must"):
            KDEMarginal(bounds=bad).fit(y)


# ---------------------------------------------------------------------- bad input
def test_too_few_distinct_values_is_one_clear_error():
    y = np.repeat([1.0, 2.0, 3.0], 1000)
    with pytest.raises(ValueError, match=r"only 3 distinct values .* looks discrete.* lower min_distinct"):
        KDEMarginal().fit(y)
    m = KDEMarginal(min_distinct=3).fit(y)  # the named fix works
    assert np.all(np.isfinite(m.pseudo_response(y)))
    with pytest.raises(ValueError, match="only 1 distinct"):
        KDEMarginal(min_distinct=2).fit(np.ones(50))


@pytest.mark.parametrize(
    "kwargs, y, match",
    [
        ({}, [0.0, np.nan] + list(range(20)), "y must be finite"),
        ({}, np.zeros((20, 2)), r"y must have shape \(n,\)"),
        ({}, ["a"] * 20, "y must be numeric"),
        ({"grid_size": 100}, list(range(20)), "grid_size must be an integer >= 512"),
        ({"grid_size": 1000.0}, list(range(20)), "grid_size must be an integer"),
        ({"min_distinct": 1}, list(range(20)), "min_distinct must be"),
        ({"clip": 0.7}, list(range(20)), "clip must lie in"),
    ],
)
def test_bad_input(kwargs, y, match):
    with pytest.raises(ValueError, match=match):
        KDEMarginal(**kwargs).fit(y)


def test_under_resolved_grid_names_the_grid_size_needed():
    rng = np.random.default_rng(10)
    y = np.concatenate([rng.normal(size=10_000), [1e4]])  # one far outlier, h ~ 0.17
    with pytest.raises(ValueError, match=r"grid_size >= (\d+)") as info:
        KDEMarginal(grid_size=2**14).fit(y)
    need = int(info.value.args[0].split("grid_size >= ")[1].split(",")[0])
    m = KDEMarginal(grid_size=need).fit(y)  # the named fix works
    assert np.isfinite(m.pseudo_response(y)).all()


def test_not_fitted():
    with pytest.raises(NotFittedError):
        KDEMarginal().cdf(0.0)


# ---------------------------------------------------------------------- persistence
def test_state_round_trip_through_safetensors(tmp_path):
    y = np.random.default_rng(11).beta(2, 5, 800)
    m = KDEMarginal(bounds=(0.0, None), grid_size=4096).fit(y)
    arrays, settings = m.to_state()
    path = tmp_path / "marginal.safetensors"
    save_tensors(path, {k: torch.from_numpy(v) for k, v in arrays.items()}, "KDEMarginal", settings)
    tensors, loaded_settings = load_tensors(path, "KDEMarginal")
    m2 = KDEMarginal.from_state(tensors, loaded_settings)
    pts = np.linspace(-0.2, 1.2, 333)
    for fn in ("pdf", "cdf", "sf", "pseudo_response"):
        np.testing.assert_array_equal(getattr(m2, fn)(pts), getattr(m, fn)(pts))
    np.testing.assert_array_equal(m2.ppf(np.linspace(0, 1, 11)), m.ppf(np.linspace(0, 1, 11)))
    assert (m2.bandwidth_, m2.n_, m2.n_distinct_, m2.bounds_) == (m.bandwidth_, m.n_, m.n_distinct_, m.bounds_)
    with pytest.raises(ValueError, match="missing"):
        KDEMarginal.from_state({"grid": arrays["grid"]}, settings)
    with pytest.raises(ValueError, match="version"):
        KDEMarginal.from_state(arrays, {**settings, "version": 99})


# ---------------------------------------------------------------------- scale
def test_large_n_fits_quickly():
    """n = 300 000 (the large steering set's size): binning + FFT, O(n + G log G). No timing
    assertion (shared machines); the elapsed time is printed with -s. Results stay exact."""
    rng = np.random.default_rng(12)
    y = np.concatenate([rng.standard_t(4, 200_000), rng.normal(8, 1, 100_000)])
    t0 = time.perf_counter()
    m = KDEMarginal().fit(y)
    z = m.pseudo_response(y)
    print(f"KDEMarginal n=300k: fit + pseudo responses {time.perf_counter() - t0:.2f} s")
    assert np.all(np.isfinite(z))
    assert stats.kstest(z[::30], "norm").pvalue > 0.01
    pts = np.linspace(-5, 11, 41)
    p, F, _ = exact_kde(y, pts, m.bandwidth_)
    np.testing.assert_allclose(m.pdf(pts), p, rtol=0, atol=1e-6 * p.max())
    np.testing.assert_allclose(m.cdf(pts), F, rtol=0, atol=2e-7)


def test_inverse_with_pdf_is_the_inverse_and_the_pdf():
    """One table search gives y = inverse_pseudo_response(z) bit for bit and p_Y(y) to rounding,
    including ties (flat stretches of F) and z beyond the clip in both tails."""
    rng = np.random.default_rng(3)
    y = np.concatenate([rng.standard_t(3, 3000), np.full(200, 1.5)])
    m = KDEMarginal(bounds=(-40.0, None)).fit(y)
    z = np.concatenate([np.linspace(-9.0, 9.0, 4001), [0.0, -0.0, 0.5]]).reshape(-1, 4)
    yy, pdf = m.inverse_pseudo_response_and_pdf(z)
    np.testing.assert_array_equal(yy, m.inverse_pseudo_response(z))
    np.testing.assert_allclose(pdf, m.pdf(yy), rtol=1e-10, atol=1e-15 * pdf.max())  # w from F vs from y
    with pytest.raises(ValueError, match="NaN"):
        m.inverse_pseudo_response_and_pdf(np.array([0.0, np.nan]))
