"""The conformal predictive system (PIT score) against its definition, against crepes 0.9.1,
and by coverage on exchangeable synthetic data.

Oracles and tolerances:
* containment: every central interval with level in [L_min, L_max] contains
  [F^{-1}(u_(a)), F^{-1}(u_(b))], a = floor((n+1)(1-L)/2), b = ceil((n+1)(1+L)/2), and (all
  knots kept) lies inside [F^{-1}(u_(a-1)), F^{-1}(u_(b+1))]; slack 1e-9 of the scale;
* crepes: for a normal predictive the PIT order is the order of the normalised residuals
  (y - mu)/sigma, so crepes' normalised ConformalPredictiveSystem (sigmas = sd) is the
  split CPS on the same scores: our quantile at level (j+1)/(n+1) is crepes' lower
  percentile at rank j (j <= J_lo) and at (j-1)/(n+1) its higher percentile at rank j
  (j >= J_hi), to 1e-10 relative; crepes' predict_int lies inside ours;
* coverage: the mean coverage over R calibration/test draws is >= L - 4 sd and <=
  (b - a + 2)/(n + 1) + 4 sd, sd from the binomial and calibration-set variance
  (L(1-L)/(R m) + L(1-L)/((n+2) R)).
"""

import warnings

import numpy as np
import pytest
from crepes import ConformalPredictiveSystem
from scipy.special import ndtr, ndtri

from dubito.predictive import GaussianMixture, Normal
from dubito.recalibrate._checks import central_levels_guaranteed
from dubito.recalibrate.conformal_predictive import conformal_knots
from dubito.recalibrate.recalibrator import Recalibrator
from dubito.recalibrate.warped import WarpedPredictive


def _problem(rng, n, bias=0.7, shrink=0.5):
    """True y ~ N(mu, s^2) with heteroscedastic s; the predictive is biased and too narrow."""
    mu = rng.normal(0, 2, n)
    s = rng.uniform(0.5, 2.0, n)
    y = mu + s * rng.standard_normal(n)
    return Normal(mu + bias * s, (shrink * s) ** 2), y


def _ab(n, level):
    a = int(np.floor((n + 1) * (1 - level) / 2))
    b = int(np.ceil((n + 1) * (1 + level) / 2))
    return a, b


def _order_interval(base, pits, a, b):
    """[F^{-1}(u_(a)), F^{-1}(u_(b))] with u_(0) = 0, u_(n+1) = 1."""
    u = np.concatenate([[0.0], np.sort(pits), [1.0]])
    return base.quantile(u[a]), base.quantile(u[b])


# ------------------------------------------------------------------ the map
@pytest.mark.parametrize("n", [4, 5, 20, 21])
def test_knots_are_one_rank_outward(n):
    rng = np.random.default_rng(n)
    pits = rng.uniform(size=n)
    u, h = conformal_knots(pits, max_knots=None)
    srt = np.sort(pits)
    j_lo = (n - 2) // 2
    j_hi = n + 1 - j_lo
    lower = np.arange(1, j_lo + 1)
    upper = np.arange(j_hi, n + 1)
    np.testing.assert_array_equal(u, np.concatenate([[0], srt[lower - 1], srt[upper - 1], [1]]))
    np.testing.assert_allclose(h, np.concatenate([[0], (lower + 1) / (n + 1), (upper - 1) / (n + 1), [1]]),
                               rtol=0, atol=1e-15)
    assert np.all(np.diff(u) > 0) and np.all(np.diff(h) > 0)


@pytest.mark.parametrize("n, max_knots", [(1000, 400), (1001, 7), (57, 2)])
def test_thinning_respects_max_knots(n, max_knots):
    u, h = conformal_knots(np.random.default_rng(n).uniform(size=n), max_knots=max_knots)
    assert u.size - 2 <= max_knots and np.all(np.diff(u) > 0) and np.all(np.diff(h) > 0)


def test_guaranteed_levels():
    assert central_levels_guaranteed(3) is None
    lo, hi = central_levels_guaranteed(19)  # odd n: [2/(n+1), 1 - 2/(n+1)]
    assert lo == pytest.approx(0.1) and hi == pytest.approx(0.9)
    lo, hi = central_levels_guaranteed(20)  # even n: [1/(n+1), 1 - 2/(n+1)]
    assert lo == pytest.approx(1 / 21) and hi == pytest.approx(19 / 21)
    with pytest.raises(ValueError, match="at least 4 calibration points"):
        conformal_knots([0.1, 0.5, 0.9])


def test_ties_and_extreme_pits_keep_a_valid_map():
    pits = np.array([0.0, 0.0, 0.3, 0.3, 0.3, 0.3, 0.5, 1.0, 1.0, 0.7])  # underflow, ties, round-up
    u, h = conformal_knots(pits, max_knots=None)
    assert u[0] == 0 and u[-1] == 1 and np.all(np.diff(u) > 0) and np.all(np.diff(h) > 0)
    base = Normal(np.zeros(1), np.ones(1))
    g = WarpedPredictive(base, u, h)
    lo, hi = central_levels_guaranteed(pits.size)
    for level in np.linspace(lo + 1e-9, hi - 1e-9, 25):
        a, b = _ab(pits.size, level)
        want_lo, want_hi = _order_interval(base, np.clip(pits, 1e-300, 1 - 2**-53), a, b)
        got_lo, got_hi = g.interval(level)
        assert got_lo[0] <= want_lo[0] + 1e-9 and got_hi[0] >= want_hi[0] - 1e-9


@pytest.mark.parametrize("n, max_knots", [(7, None), (30, None), (31, None), (200, None), (200, 10), (999, 50)])
def test_every_central_interval_contains_the_order_statistics(n, max_knots):
    rng = np.random.default_rng(n + (max_knots or 0))
    pred, y = _problem(rng, n)
    rec = Recalibrator("conformal", max_knots=max_knots).fit(pred, y)
    base = Normal(np.array([0.3, -1.0]), np.array([1.0, 4.0]))  # any test predictive
    g = rec.transform(base)
    lo_l, hi_l = rec.coverage_levels_
    levels = np.concatenate([[lo_l + 1e-12, hi_l - 1e-12], rng.uniform(lo_l, hi_l, 60)])
    slack = 1e-9 * base.std
    for level in levels:
        a, b = _ab(n, level)
        lo, hi = g.interval(level)
        want_lo, want_hi = _order_interval(base, rec.pit_, a, b)
        assert np.all(lo <= want_lo + slack) and np.all(hi >= want_hi - slack), level
        if max_knots is None:  # tight: at most one rank further out on each side
            out_lo, out_hi = _order_interval(base, rec.pit_, a - 1, min(b + 1, n + 1))
            assert np.all(lo >= out_lo - slack) and np.all(hi <= out_hi + slack), level


def test_naive_interpolation_would_fail_the_guarantee():
    """The map through (u_(i), i/(n+1)) (a smoothed CPS) does not contain the order
    statistics at some levels: the containment check above can fail."""
    rng = np.random.default_rng(0)
    n = 30
    pits = rng.uniform(size=n)
    srt = np.sort(pits)
    naive = WarpedPredictive(Normal(np.zeros(1), np.ones(1)), np.concatenate([[0], srt, [1]]),
                             np.concatenate([[0], np.arange(1, n + 1) / (n + 1), [1]]))
    lo_l, hi_l = central_levels_guaranteed(n)
    failures = 0
    for level in np.linspace(lo_l + 1e-9, hi_l - 1e-9, 200):
        a, b = _ab(n, level)
        lo, hi = naive.interval(level)
        want_lo, want_hi = _order_interval(naive.base, pits, a, b)
        failures += bool(lo[0] > want_lo[0] + 1e-9 or hi[0] < want_hi[0] - 1e-9)
    assert failures > 50


# ------------------------------------------------------------------ crepes 0.9.1 as the oracle
@pytest.mark.parametrize("n, common_sd", [(20, True), (21, False), (150, False)])
def test_quantiles_equal_crepes_cps_percentiles(n, common_sd):
    rng = np.random.default_rng(n)
    m = 25
    mu = rng.normal(0, 2, n + m)
    sd = np.full(n + m, 1.3) if common_sd else rng.uniform(0.5, 2, n + m)
    y = mu + 1.5 * sd * rng.standard_normal(n + m)
    rec = Recalibrator("conformal", max_knots=None).fit(Normal(mu[:n], sd[:n] ** 2), y[:n])
    g = rec.transform(Normal(mu[n:], sd[n:] ** 2))
    if common_sd:  # plain CPS on residuals, shifted by each test mean
        cps = ConformalPredictiveSystem().fit(y[:n] - mu[:n])
        kw = {}
    else:  # normalised CPS: residual / sigma, scaled back by each test sigma
        cps = ConformalPredictiveSystem().fit(y[:n] - mu[:n], sigmas=sd[:n])
        kw = {"sigmas": sd[n:]}
    j_lo = (n - 2) // 2
    j_hi = n + 1 - j_lo
    ours, theirs = [], []
    for j in range(1, j_lo + 1):  # crepes lower percentile p -> rank floor(p (n+1)) = j
        ours.append(g.quantile((j + 1) / (n + 1)))
        theirs.append(cps.predict_percentiles(mu[n:], lower_percentiles=100 * (j + 0.5) / (n + 1), **kw).ravel())
    for j in range(j_hi, n + 1):  # crepes higher percentile p -> rank ceil(p (n+1)) = j
        ours.append(g.quantile((j - 1) / (n + 1)))
        theirs.append(cps.predict_percentiles(mu[n:], higher_percentiles=100 * (j - 0.5) / (n + 1), **kw).ravel())
    np.testing.assert_allclose(np.array(ours), np.array(theirs), rtol=1e-10, atol=1e-10)
    lo_l, hi_l = rec.coverage_levels_
    for level in np.linspace(lo_l + 1e-9, hi_l - 1e-9, 40):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # crepes warns at levels its lower rank is 0
            band = cps.predict_int(mu[n:], confidence=level, **kw)
        lo, hi = g.interval(level)
        assert np.all(lo <= band[:, 0] + 1e-9) and np.all(hi >= band[:, 1] - 1e-9), level


# ------------------------------------------------------------------ coverage on exchangeable data
def _coverage_run(n, levels, repeats, m, make, max_knots=None, seed=0):
    rng = np.random.default_rng(seed)
    hits = np.zeros(len(levels))
    for _ in range(repeats):
        pred, y = make(rng, n + m)
        rec = Recalibrator("conformal", max_knots=max_knots).fit(pred[np.arange(n)], y[:n])
        g = rec.transform(pred[np.arange(n, n + m)])
        for k, level in enumerate(levels):
            lo, hi = g.interval(level)
            hits[k] += np.sum((lo <= y[n:]) & (y[n:] <= hi))
    return hits / (repeats * m)


def _check_coverage(cov, n, levels, repeats, m):
    for c, level in zip(cov, levels):
        a, b = _ab(n, level)
        sd = np.sqrt(level * (1 - level) * (1 / (repeats * m) + 1 / ((n + 2) * repeats)))
        assert c >= level - 4 * sd, (level, c)
        assert c <= (b - a + 2) / (n + 1) + 4 * sd, (level, c)


@pytest.mark.parametrize("n", [19, 50])
def test_coverage_normal_miscalibrated(n):
    levels = [0.3, 0.5, 0.8, 0.9]
    repeats, m = 1500, 40
    cov = _coverage_run(n, levels, repeats, m, _problem, seed=n)
    _check_coverage(cov, n, levels, repeats, m)
    # the base itself is far off: its 90 % interval mu + 0.7 s +- 0.5 s z_0.95 covers 0.49
    z = ndtri(0.95)
    assert ndtr(0.7 + 0.5 * z) - ndtr(0.7 - 0.5 * z) < 0.5


def _mixture_problem(rng, n):
    """True y: a skewed two-component mixture; the predictive: a too-wide symmetric mixture."""
    mu = rng.normal(0, 1, n)
    comp = rng.uniform(size=n) < 0.3
    y = mu + np.where(comp, 2.0 + 0.5 * rng.standard_normal(n), 0.4 * rng.standard_normal(n))
    means = np.column_stack([mu - 1.0, mu + 1.0])
    return GaussianMixture([0.5, 0.5], means, np.full((n, 2), 2.0)), y


def test_coverage_mixture_thinned_map():
    n, levels, repeats, m = 120, [0.5, 0.8, 0.95], 400, 40
    cov = _coverage_run(n, levels, repeats, m, _mixture_problem, max_knots=8, seed=3)
    delta = int(np.ceil(((n - 2) // 2) / (8 // 2)))  # ranks between kept knots (15)
    for c, level in zip(cov, levels):  # thinned: guaranteed from below, < 2 delta ranks wider
        a, b = _ab(n, level)
        sd = np.sqrt(level * (1 - level) * (1 / (repeats * m) + 1 / ((n + 2) * repeats)))
        assert c >= level - 4 * sd, (level, c)
        assert c <= (b - a + 2 + 4 * delta) / (n + 1) + 4 * sd, (level, c)
