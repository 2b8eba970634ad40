"""The IC-NLM's tabulated predictive in the far tails: sparse tail nodes from the 8-sd core out to
z_cap (`dubito.regression.copula_grid._z_grid`, module docstring "Tabulation").

Before the tail nodes, the per-input grid spanned only m +- 8 s in z, so a response more than 8
conditional sds away got density exactly 0 from the `GridDensity` and an infinite NLL, although the
model's density there (``log_density``) is finite. Narrow conditionals are made here directly: the
ridge scale s = (1 + psi' P^-1 psi)^{-1/2} shrinks as the features grow, so the fitted model
evaluated at c * psi (c = 5, 10, 20) gives s down to ~0.01 in z units (as tanh features did in the
IC-NLM reproduction), with m inside the training range.
"""

from __future__ import annotations

import copy
import warnings

import numpy as np
import pytest
from scipy import stats

from dubito.metrics import crps, nll
from dubito.predictive.grid import GridDensity
from dubito.regression import copula_grid as copula_module
from dubito.regression.copula import ImplicitCopulaRegressor
from dubito.regression.copula_grid import _z_grid
from dubito.regression.marginal import KDEMarginal

from .copula_synthetic import relu_features_and_latent

FAST = {"vi_max_iter": 3000, "vi_min_iter": 200, "n_draws": 100, "random_state": 0, "progress": False}

# Relative tolerance on log p in the tails. The tail nodes are geometric in the distance d (in
# conditional sds) from m, ratio r = (40 / 8)^(1/31) = 1.053 at grid_size 512, so across a tail
# segment log p drops by D ~ (r^2 - 1) d^2 / 2, and the piecewise-linear density overshoots the
# log-density by at most D - 1 - log D < D: a relative error below r^2 - 1 = 0.11 (measured max
# 0.092 at 36 sds, 0.087 at 25, 0.061 at 12; always an over-estimate of log p, as the linear
# interpolant of a convex decay). The Jacobian p_Y / phi(z) is smooth on that scale.
TAIL_RTOL = 0.12


@pytest.fixture(scope="module")
def fitted():
    """A plug-in IC-NLM with a KDE marginal on a skewed (Gamma(2)) response, fitted from features."""
    psi, z = relu_features_and_latent(400)
    y = stats.gamma(2.0).ppf(stats.norm.cdf(z))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # VI may stop at max_iter: ConvergenceWarning
        est = ImplicitCopulaRegressor.from_features(psi, y, predictive="plugin", **FAST)
    return psi, y, est


def _core_only(est, feats):
    """The former construction: grid_size nodes equally spaced in z over [m - 8 s, m + 8 s] (cut to
    the cap), densities from the exact log_density (the general path)."""
    zp, cs = est._z_prediction(feats)
    loc, scale, cap = zp.loc, zp.scale, est._z_cap()
    zlo = np.clip((loc - 8 * scale).min(axis=1), -cap, cap)
    zhi = np.clip((loc + 8 * scale).max(axis=1), -cap, cap)
    zg = zlo[:, None] + (zhi - zlo)[:, None] * np.linspace(0.0, 1.0, cs["grid_size"])
    yg = est.marginal_.inverse_pseudo_response(zg)
    return GridDensity(yg, np.exp(est.log_density(yg, features=feats)))


def _tail_points(est, feats, k):
    """y at m -+ k s (z units) for each input, and a mask of those strictly inside the training
    responses' z range (so the marginal there is the KDE fitted on data, not its clip)."""
    zp, _ = est._z_prediction(feats)
    m, s = zp.loc[:, :1], zp.scale[:, :1]
    zz = m + np.array([[-k, k]]) * s
    yy = est.marginal_.inverse_pseudo_response(zz)
    zmin, zmax = est.marginal_.pseudo_response(np.array([est.marginal_.grid_[0], est.marginal_.grid_[-1]]))
    return yy, (zz > -3.0) & (zz < 3.0) & (zz > zmin) & (zz < zmax), s[:, 0]


# ---------------------------------------------------------------- (1) finite, accurate tail density
@pytest.mark.parametrize("path", ["single-search", "general"])
def test_narrow_conditional_far_tail_density_is_finite_and_close_to_exact(fitted, path, monkeypatch):
    psi, _, est = fitted
    if path == "general":
        monkeypatch.delattr(KDEMarginal, "inverse_pseudo_response_and_pdf")
    feats = 20.0 * psi[:200]
    pred = est.predict_distribution(features=feats)
    yy, inside, s = _tail_points(est, feats, 12.0)
    narrow = inside & (s[:, None] < 0.1)
    assert narrow.sum() >= 50 and s.min() < 0.02  # the situation of the IC-NLM reproduction
    exact = est.log_density(yy, features=feats)
    assert np.all(np.isfinite(exact[narrow]))
    # the former core-only grid had no node there: density 0, NLL +inf
    old = _core_only(est, feats)
    assert np.all(np.isneginf(old.log_prob(yy)[narrow]))
    grid = pred.log_prob(yy)
    assert np.all(np.isfinite(grid[narrow]))
    np.testing.assert_allclose(grid[narrow], exact[narrow], rtol=TAIL_RTOL)
    # and the same along the whole tail, until exp(-d^2/2) underflows float64 (~38.6 sds)
    for k in (9.0, 15.0, 20.0, 25.0, 30.0, 36.0):
        yk, ok, _ = _tail_points(est, feats, k)
        gk, ek = pred.log_prob(yk)[ok], est.log_density(yk, features=feats)[ok]
        assert ok.sum() > 0 and np.all(np.isfinite(gk))
        np.testing.assert_allclose(gk, ek, rtol=TAIL_RTOL, err_msg=f"{k} sds")


def test_nll_metric_is_finite_for_a_far_response(fitted):
    psi, _, est = fitted
    feats = 20.0 * psi[:200]
    yy, inside, s = _tail_points(est, feats, 12.0)
    pick = np.flatnonzero(inside[:, 1] & (s < 0.1))[:20]
    assert pick.size == 20
    pred = est.predict_distribution(features=feats[pick])
    out = nll(pred, yy[pick, 1])
    assert np.all(np.isfinite(out))
    np.testing.assert_allclose(-out, est.log_density(yy[pick, 1], features=feats[pick]), rtol=TAIL_RTOL)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_mixture_predictive_far_tail_is_finite(fitted):
    """The general path with J = 100 components: tail end = the farthest component's m_j +- 40 s_j."""
    psi, _, est = fitted
    mix = copy.copy(est)
    mix.predictive = "mixture"
    feats = 20.0 * psi[:60]
    pred = mix.predict_distribution(features=feats)
    yy, inside, s = _tail_points(mix, feats, 12.0)  # 12 sds of the first draw: a point well out in the tail
    ok = inside & (s[:, None] < 0.1)
    assert ok.sum() >= 10
    exact = mix.log_density(yy, features=feats)
    grid = pred.log_prob(yy)
    assert np.all(np.isfinite(grid[ok]))
    np.testing.assert_allclose(grid[ok], exact[ok], rtol=TAIL_RTOL)


# ---------------------------------------------------------------- (2) normalisation, central summaries
@pytest.mark.parametrize("c", [1.0, 20.0])
def test_normalised_and_central_summaries_agree_with_the_core_only_grid(fitted, c):
    psi, y, est = fitted
    feats = c * psi[:100]
    pred = est.predict_distribution(features=feats)
    # the exact density at the grid nodes integrates to 1 over the grid (trapezoid), i.e. no mass is
    # lost beyond it and the tail nodes add none spuriously. Measured max |1 - total| 4.5e-5 (c = 1;
    # 4.0e-5 on the former grid), 3.1e-5 (c = 20, both): the core's trapezoid error and the KDE's own.
    dens = np.exp(est.log_density(pred.grid, features=feats))
    total = np.trapezoid(dens, pred.grid, axis=1)
    np.testing.assert_allclose(total, 1.0, atol=1e-4)
    np.testing.assert_allclose(pred.cdf(pred.grid[:, -1:]), 1.0, rtol=0, atol=1e-15)
    # CRPS and central quantiles: the core keeps 448 of the 512 nodes (was all 512), so they move by
    # the piecewise-linear grid error, O(h^2), relative to the conditional's spread. Measured max
    # |new - old| / sd: quantiles 1.1e-4 (both grids are ~5e-4 sd from the closed form
    # F_Y^-1(Phi(m + s Phi^-1(a))): the KDE table's own interpolation dominates), CRPS 3.9e-5, mean
    # 2.7e-5, var 9e-5 relative (c = 1; less for c = 20). Tolerances: 2e-4 sd, 1e-4 sd, 1e-4 sd, 1e-3.
    old = _core_only(est, feats)
    sd = np.sqrt(pred.var)
    q = np.array([0.05, 0.25, 0.5, 0.75, 0.95])
    qn = pred.quantile(np.broadcast_to(q, (len(feats), q.size)))
    qo = old.quantile(np.broadcast_to(q, (len(feats), q.size)))
    assert np.all(np.abs(qn - qo) < 2e-4 * sd[:, None]), (np.abs(qn - qo) / sd[:, None]).max()
    yt = y[:100]  # responses of the training rows (for c = 20, well out in the narrow conditionals' tails)
    np.testing.assert_array_less(np.abs(crps(pred, yt) - crps(old, yt)), 1e-4 * sd)
    np.testing.assert_allclose(pred.mean, old.mean, rtol=0, atol=1e-4 * sd.max())
    np.testing.assert_allclose(pred.var, old.var, rtol=1e-3)


# ---------------------------------------------------------------- (3) cores at the cap, odd rows
def _check_rows(zg, cap, g):
    assert zg.shape[1] == g
    assert not np.isnan(zg).any()
    assert np.all(np.diff(zg, axis=1) > 0)
    assert np.all(zg[:, 0] == -cap) and np.all(zg[:, -1] == cap)


@pytest.mark.parametrize("g", [16, 17, 100, 512])
def test_z_grid_rows_reaching_the_cap_are_strictly_increasing(g):
    cap = 6.361340902404056
    nt = g // 16
    rows = [  # (m, s)
        (0.0, 1.0),        # core [-8, 8] cut at both ends: no tails, all g nodes in the core
        (4.0, 0.5),        # upper end cut: lower tail only
        (-4.0, 0.5),       # lower end cut
        (cap - 8 * 0.05 + 1e-9, 0.05),  # core stops a hair short of the cap: no upper tail
        (cap - 8 * 0.05 - 1e-9, 0.05),
        (0.0, 0.06),       # narrow: both tails, 40 sds (2.4) short of the cap: last node at the cap
        (0.0, 0.2),        # 40 sds = 8 > cap: tails end at the cap
        (6.0, 1e-4),       # very narrow near the cap
        (9.0, 0.01),       # the whole conditional beyond the cap (1e-3 core at the cap)
        (-9.0, 0.01),
        (-6.36, 0.3),
        (1.0, 1e-9),       # degenerate width
    ]
    loc = np.array([[m] for m, _ in rows])
    scale = np.array([[s] for _, s in rows])
    zg = _z_grid(loc, scale, cap, g)
    _check_rows(zg, cap, g)
    # no tails where the core covers [-cap, cap]: the former equally spaced grid, node for node
    np.testing.assert_allclose(zg[0], np.linspace(-cap, cap, g), rtol=0, atol=1e-14)
    # one-sided: the cut side's core runs to the cap with its nt nodes given to the core
    # (m = 4, s = 0.5: core [0, cap] at indices nt .. g - 1, equally spaced; lower tail below 0)
    np.testing.assert_allclose(zg[1, nt:], np.linspace(0.0, cap, g - nt), rtol=0, atol=1e-12)
    np.testing.assert_allclose(zg[2, :g - nt], np.linspace(-cap, 0.0, g - nt), rtol=0, atol=1e-12)
    # both tails: the core is m +- 8 s, equally spaced, at indices nt .. g - 1 - nt
    core = zg[5, nt:g - nt]
    np.testing.assert_allclose(core[[0, -1]], [-0.48, 0.48], rtol=1e-12)
    np.testing.assert_allclose(np.diff(core), 0.96 / (g - 1 - 2 * nt), rtol=1e-9)
    if nt >= 2:  # tail: geometric to 40 sds, then the cap
        np.testing.assert_allclose(zg[5, [1, -2]], [-2.4, 2.4], rtol=1e-12)
    # mixtures (J = 3, equal node count per row) and random rows
    rng = np.random.default_rng(1)
    loc = rng.normal(size=(500, 3)) * 4
    scale = np.exp(rng.normal(size=(500, 3)) * 2)
    _check_rows(_z_grid(loc, scale, cap, g), cap, g)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("path", ["single-search", "general"])
def test_predictive_rows_at_the_cap_and_wide_rows(fitted, path, monkeypatch):
    """Features from 0 (psi = 0: s = 1, the core cut at both caps) to large (narrow, both tails):
    strictly increasing y-grids, no NaN, positive normalised rows, on both construction paths."""
    psi, _, est = fitted
    if path == "general":
        monkeypatch.delattr(KDEMarginal, "inverse_pseudo_response_and_pdf")
    feats = np.concatenate([np.zeros((3, psi.shape[1])), psi[:50], 5 * psi[:50], 50 * psi[:50],
                            np.full((2, psi.shape[1]), 1e3)])
    pred = est.predict_distribution(features=feats)
    g = est.grid_size
    assert pred.grid.shape == (len(feats), g)
    assert np.all(np.diff(pred.grid, axis=1) > 0)
    assert not np.isnan(pred.grid).any() and not np.isnan(pred.density).any()
    assert np.all(np.isfinite(pred.mean)) and np.all(pred.var > 0)
    # every row spans the marginal's accurately tabulated range [F_Y^-1(clip), S_Y^-1(clip)]
    ends = est.marginal_.inverse_pseudo_response(np.array([-est._z_cap(), est._z_cap()]))
    np.testing.assert_allclose(pred.grid[:, [0, -1]], np.broadcast_to(ends, (len(feats), 2)), rtol=1e-12)
    # psi = 0: the core covers [-cap, cap] and the grid is the former one node for node
    old = _core_only(est, feats[:3])
    np.testing.assert_allclose(pred.grid[:3], old.grid, rtol=1e-12, atol=0)


def test_grid_module_constants():
    assert copula_module._TAIL_DIVISOR == 16 and copula_module._TAIL_SD == 40.0 and copula_module._K_SD == 8.0
