"""Plots of an experiment report, drawn from stored artefacts (plain lists), not Predictives.

`dubito.plots` draws from a `RegressionPredictive`; a report only has what the cells stored
as JSON: PIT values of the test points and, for 1-D toys, a prediction grid. Every function
takes those arrays and returns a matplotlib ``Figure``; `dubito.plots.save_figure` writes it.

Artefact layouts (what `CellResult.artefacts` holds; the report reads nothing else):

``"pit"``: ``{variant: [float, ...]}``, the PIT values F_i(y_i) of the cell's test points,
one list per variant (same variant names as ``CellResult.variants``). The report pools the
lists of all stored cells (splits × seeds) of a (dataset, method, variant).

``"curve_1d"`` (1-D toys; usually stored by one cell, e.g. split 0 seed 0):

.. code-block:: python

    {
        "x": [...],              # G grid inputs, ascending
        "eta": [...] | None,     # the true regression function on the grid (G), or None
        "x_train": [...],        # training inputs (n)
        "y_train": [...],        # training responses (n)
        "level": 0.95,           # optional: nominal level of [lo, hi]; default 0.95
        "variants": {            # one entry per variant (names as in CellResult.variants)
            "DE": {"mean": [...], "lo": [...], "hi": [...]},   # each of length G
            ...
        },
    }

Optional extra keys are ignored. `check_curve_1d` validates a dict against this layout.

``"sigma_hist"`` (the OOD experiment's Figs. 2, 5, 6): ``{"edges_log10": [...] (B + 1 bin edges of
log10 sigma), "<group>": [...] (B counts) or {"counts": [...], ...}, ...}`` for groups such as
``train``, ``test``, ``ood``.
The report sums the counts of all stored cells of a (dataset, method) and draws one panel per
method (`figure_group_histograms`).

Curve layouts (``"marginal_density"``, ``"marginal_cdf_gap"``, ``"coverage_levels"``,
``"error_variance"``; see `CURVE_LAYOUTS` below): grids shared by the cells of a dataset and
per-variant curves that the report averages over the cells (the IC-NLM paper's Figs. 7-8).
`check_curves` validates them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

__all__ = [
    "pit_coverage",
    "pit_ecdf",
    "check_curve_1d",
    "figure_calibration",
    "figure_pit",
    "figure_coverage",
    "figure_curve_1d",
    "COVERAGE_LEVELS",
    "CURVE_LAYOUTS",
    "check_curves",
    "figure_marginal_density",
    "figure_group_histograms",
    "figure_marginal_cdf_gap",
    "figure_coverage_gap",
    "figure_error_variance",
]

#: nominal levels of the interval-coverage plot
COVERAGE_LEVELS = np.round(np.concatenate([np.linspace(0.05, 0.95, 19), [0.99]]), 2)


def _clean(pit) -> np.ndarray:
    a = np.asarray(pit, dtype=float).ravel()
    return a[np.isfinite(a)]


def pit_ecdf(pit, grid=None) -> tuple[np.ndarray, np.ndarray]:
    """Calibration curve from PIT values: (p, fraction of PIT <= p) on ``grid`` (201 points)."""
    p = np.linspace(0.0, 1.0, 201) if grid is None else np.asarray(grid, dtype=float)
    a = np.sort(_clean(pit))
    if a.size == 0:
        return p, np.full_like(p, np.nan)
    return p, np.searchsorted(a, p, side="right") / a.size


def pit_coverage(pit, levels=COVERAGE_LEVELS) -> np.ndarray:
    """Coverage of equal-tailed central intervals: fraction of PIT in [(1-p)/2, (1+p)/2]."""
    a = _clean(pit)
    levels = np.asarray(levels, dtype=float)
    if a.size == 0:
        return np.full(levels.shape, np.nan)
    lo, hi = (1 - levels) / 2, (1 + levels) / 2
    return ((a[None, :] >= lo[:, None]) & (a[None, :] <= hi[:, None])).mean(axis=1)


def figure_calibration(pits: Mapping[str, Any], title: str = "Calibration"):
    """ECDF of pooled PIT values, one line per variant, with the diagonal of perfect calibration."""
    fig, ax = plt.subplots(figsize=(4.8, 4.2))
    ax.plot([0, 1], [0, 1], color="grey", lw=1, ls="--", label="ideal")
    for name, pit in pits.items():
        p, obs = pit_ecdf(pit)
        ax.plot(p, obs, lw=1.6, label=f"{name} (n={_clean(pit).size})")
    ax.set(xlabel="nominal probability p", ylabel="observed fraction PIT ≤ p", title=title, xlim=(0, 1), ylim=(0, 1))
    ax.legend(fontsize=7)
    return fig


def figure_pit(pits: Mapping[str, Any], title: str = "PIT histograms", bins: int = 20):
    """One PIT histogram (density) per variant; flat at 1 for a calibrated predictive."""
    k = max(len(pits), 1)
    ncols = min(k, 4)
    nrows = math.ceil(k / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.4 * ncols, 2.9 * nrows), squeeze=False)
    for ax, (name, pit) in zip(axes.ravel(), pits.items()):
        a = _clean(pit)
        ax.hist(np.clip(a, 0, 1), bins=bins, range=(0, 1), density=True, color="C0", alpha=0.75)
        ax.axhline(1.0, color="grey", ls="--", lw=1)
        ax.set(xlim=(0, 1), xlabel="PIT", ylabel="density", title=f"{name} (n={a.size})")
        ax.title.set_fontsize(8)
    for ax in axes.ravel()[k:]:
        ax.set_visible(False)
    fig.suptitle(title, fontsize=10)
    return fig


def figure_coverage(pits: Mapping[str, Any], title: str = "Interval coverage", levels=COVERAGE_LEVELS):
    """Empirical coverage of central intervals (from pooled PIT) against the nominal level."""
    fig, ax = plt.subplots(figsize=(4.8, 4.2))
    ax.plot([0, 1], [0, 1], color="grey", lw=1, ls="--", label="ideal")
    for name, pit in pits.items():
        ax.plot(levels, pit_coverage(pit, levels), marker="o", ms=3, lw=1.4, label=name)
    ax.set(xlabel="nominal level", ylabel="empirical coverage", title=title, xlim=(0, 1), ylim=(0, 1))
    ax.legend(fontsize=7)
    return fig


def check_curve_1d(curve: Any) -> dict:
    """Validate a ``curve_1d`` artefact (layout in the module docstring); return it as arrays.

    Raises ValueError naming the first problem.
    """
    if not isinstance(curve, Mapping):
        raise ValueError(f"curve_1d must be a dict, got {type(curve).__name__}")
    for key in ("x", "x_train", "y_train", "variants"):
        if key not in curve:
            raise ValueError(f"curve_1d lacks key {key!r} (has {', '.join(map(str, curve)) or 'nothing'})")
    x = np.asarray(curve["x"], dtype=float).ravel()
    out = {
        "x": x,
        "eta": None if curve.get("eta") is None else np.asarray(curve["eta"], dtype=float).ravel(),
        "x_train": np.asarray(curve["x_train"], dtype=float).ravel(),
        "y_train": np.asarray(curve["y_train"], dtype=float).ravel(),
        "level": float(curve.get("level", 0.95)),
        "variants": {},
    }
    if out["eta"] is not None and out["eta"].shape != x.shape:
        raise ValueError(f"curve_1d: eta has {out['eta'].size} values, x has {x.size}")
    if out["x_train"].shape != out["y_train"].shape:
        raise ValueError(f"curve_1d: x_train has {out['x_train'].size} values, y_train {out['y_train'].size}")
    variants = curve["variants"]
    if not isinstance(variants, Mapping) or not variants:
        raise ValueError("curve_1d: 'variants' must be a non-empty dict {variant: {mean, lo, hi}}")
    for name, v in variants.items():
        if not isinstance(v, Mapping):
            raise ValueError(f"curve_1d: variant {name!r} must be a dict with mean, lo, hi")
        arrays = {}
        for key in ("mean", "lo", "hi"):
            if key not in v:
                raise ValueError(f"curve_1d: variant {name!r} lacks {key!r}")
            arrays[key] = np.asarray(v[key], dtype=float).ravel()
            if arrays[key].shape != x.shape:
                raise ValueError(f"curve_1d: variant {name!r} {key} has {arrays[key].size} values, x has {x.size}")
        out["variants"][str(name)] = arrays
    return out


def figure_curve_1d(curve: Mapping[str, Any], title: str = ""):
    """The data, the true function and each variant's mean and central interval (one panel each)."""
    c = check_curve_1d(curve)
    k = len(c["variants"])
    ncols = 2 if k == 4 else min(k, 3)  # 4 panels as a 2x2 grid, not 3 + 1
    nrows = math.ceil(k / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.6 * ncols, 3.6 * nrows), squeeze=False, sharey=True)
    order = np.argsort(c["x"], kind="stable")
    x = c["x"][order]
    for ax, (name, v) in zip(axes.ravel(), c["variants"].items()):
        ax.fill_between(x, v["lo"][order], v["hi"][order], color="C0", alpha=0.25, label=f"{c['level']:.0%} interval")
        ax.plot(x, v["mean"][order], color="C0", lw=1.5, label="predictive mean")
        if c["eta"] is not None:
            ax.plot(x, c["eta"][order], color="k", lw=1.2, ls="--", label="true function")
        ax.scatter(c["x_train"], c["y_train"], s=6, color="C3", alpha=0.6, label="training data", zorder=3)
        ax.set(xlabel="x", ylabel="y", title=name)
        ax.title.set_fontsize(9)
    for ax in axes.ravel()[k:]:
        ax.set_visible(False)
    axes.ravel()[0].legend(fontsize=7)
    if title:
        fig.suptitle(title, fontsize=10)
    return fig


# ---------------------------------------------------------------------------------- curves
# Layouts pooled over cells by the report (`report.pool_curves`): the shared keys must be equal
# in every cell of a dataset; the per-variant values are averaged over cells (NaN-aware).
#
# ``"marginal_density"``: {"grid": [G], "hist_edges": [B+1], "hist_counts": [B] (test responses),
#                          "variants": {variant: [G]}}  average predictive density on the grid
# ``"marginal_cdf_gap"``: {"grid": [G], "variants": {variant: [G]}}  mean_i F_i(t) - G_n(t)
# ``"coverage_levels"``:  {"levels": [L], "variants": {variant: {"coverage": [L], "width": [L]}}}
# ``"error_variance"``:   {"nu": [K], "share": [S], "variants": {variant: {"mse_nu": [K],
#                          "kept_nu": [K], "mse_share": [S]}}}  MSE of the points with predictive
#                          variance <= nu, their share, and the MSE of the share s with the
#                          smallest variances

#: layout name -> (shared keys, per-variant fields; None = the value is one list)
CURVE_LAYOUTS = {
    "marginal_density": (("grid", "hist_edges"), None),
    "marginal_cdf_gap": (("grid",), None),
    "coverage_levels": (("levels",), ("coverage", "width")),
    "error_variance": (("nu", "share"), ("mse_nu", "kept_nu", "mse_share")),
}


def check_curves(layout: str, art: Any) -> dict:
    """Validate one cell's artefact of a `CURVE_LAYOUTS` layout; return shared arrays and
    ``variants`` {variant: {field: array}} (a bare list becomes field "value"). ValueError
    names the first problem."""
    if layout not in CURVE_LAYOUTS:
        raise ValueError(f"unknown curve layout {layout!r}; known: {', '.join(CURVE_LAYOUTS)}")
    shared_keys, fields = CURVE_LAYOUTS[layout]
    if not isinstance(art, Mapping):
        raise ValueError(f"{layout} must be a dict, got {type(art).__name__}")
    for key in (*shared_keys, "variants"):
        if key not in art:
            raise ValueError(f"{layout} lacks key {key!r}")
    out = {k: np.asarray(art[k], dtype=float).ravel() for k in shared_keys}
    if "hist_counts" in art:
        out["hist_counts"] = np.asarray(art["hist_counts"], dtype=float).ravel()
        if out["hist_counts"].size != out["hist_edges"].size - 1:
            raise ValueError(f"{layout}: {out['hist_counts'].size} counts for {out['hist_edges'].size} edges")
    length = {"mse_nu": "nu", "kept_nu": "nu", "mse_share": "share", "coverage": "levels", "width": "levels",
              "value": "grid"}
    variants = {}
    if not isinstance(art["variants"], Mapping):
        raise ValueError(f"{layout}: 'variants' must be a dict")
    for name, v in art["variants"].items():
        entry = {"value": v} if fields is None else v
        if not isinstance(entry, Mapping) or any(f not in entry for f in (fields or ("value",))):
            raise ValueError(f"{layout}: variant {name!r} must have {', '.join(fields or ('a list',))}")
        arrays = {}
        for f in fields or ("value",):
            a = np.asarray(entry[f], dtype=float).ravel()
            if a.shape != out[length[f]].shape:
                raise ValueError(f"{layout}: variant {name!r} {f} has {a.size} values, {length[f]} {out[length[f]].size}")
            arrays[f] = a
        variants[str(name)] = arrays
    out["variants"] = variants
    return out


def _grid_axes(k: int, width: float = 3.2, height: float = 2.6):
    ncols = min(k, 4)
    nrows = math.ceil(k / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows), squeeze=False)
    for ax in axes.ravel()[k:]:
        ax.set_visible(False)
    return fig, axes.ravel()[:k]


def figure_marginal_density(grid, hist_edges, hist_counts, densities: Mapping[str, Any],
                            title: str = "Marginal calibration"):
    """Fig. 7a of Hoffmann & Klein: the histogram of the test responses and, per variant, the
    average predictive density (1/n) sum_i p(y | x_i) on the grid (one panel per variant)."""
    grid = np.asarray(grid, dtype=float)
    edges, counts = np.asarray(hist_edges, dtype=float), np.asarray(hist_counts, dtype=float)
    hist = counts / max(counts.sum(), 1.0) / np.diff(edges)
    fig, axes = _grid_axes(max(len(densities), 1))
    for ax, (name, dens) in zip(axes, densities.items()):
        ax.stairs(hist, edges, fill=True, color="grey", alpha=0.35, label="test y")
        ax.plot(grid, np.asarray(dens, dtype=float), color="C0", lw=1.4, label="mean predictive density")
        ax.set(xlabel="y", title=name)
        ax.title.set_fontsize(8)
    axes[0].legend(fontsize=6)
    fig.suptitle(title, fontsize=10)
    return fig


def figure_marginal_cdf_gap(grid, gaps: Mapping[str, Any], title: str = "Average predictive CDF minus empirical CDF"):
    """mean_i F_i(t) - G_n(t) against t per variant (Gneiting et al. 2007's marginal calibration plot)."""
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    ax.axhline(0.0, color="grey", lw=1, ls="--")
    for name, gap in gaps.items():
        ax.plot(np.asarray(grid, dtype=float), np.asarray(gap, dtype=float), lw=1.3, label=name)
    ax.set(xlabel="y", ylabel="mean F_i(y) - empirical CDF", title=title)
    ax.legend(fontsize=6, ncol=2)
    return fig


def figure_coverage_gap(levels, coverages: Mapping[str, Any], title: str = "Interval coverage minus nominal"):
    """Fig. 8a: observed minus nominal coverage of the central intervals, per variant."""
    lv = np.asarray(levels, dtype=float)
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    ax.axhline(0.0, color="grey", lw=1, ls="--")
    for name, cov in coverages.items():
        ax.plot(lv, np.asarray(cov, dtype=float) - lv, marker="o", ms=3, lw=1.2, label=name)
    ax.set(xlabel="nominal level", ylabel="observed - nominal coverage", title=title, xlim=(0, 1))
    ax.legend(fontsize=6, ncol=2)
    return fig


def figure_error_variance(nu, mse_nu: Mapping[str, Any], share, mse_share: Mapping[str, Any],
                          title: str = "Error against predictive variance"):
    """Fig. 8b: left, the MSE of the points with predictive variance <= nu against nu (x axis
    inverted, as the paper); right, the MSE of the share s of points with the smallest variances.
    Log MSE axes (the naive learner's MSE is often 10x the others')."""
    fig, (a, b) = plt.subplots(1, 2, figsize=(10.5, 4.0))
    for name, m in mse_nu.items():
        a.plot(np.asarray(nu, dtype=float), np.asarray(m, dtype=float), lw=1.3, label=name)
    a.set(xlabel="variance threshold nu", ylabel="MSE of points with variance <= nu", yscale="log")
    a.invert_xaxis()
    for name, m in mse_share.items():
        b.plot(np.asarray(share, dtype=float), np.asarray(m, dtype=float), marker="o", ms=2.5, lw=1.2, label=name)
    b.set(xlabel="share of points kept (smallest variances first)", ylabel="MSE", xlim=(0, 1.02), yscale="log")
    b.legend(fontsize=6, ncol=2)
    fig.suptitle(title, fontsize=10)
    return fig


def figure_group_histograms(edges, hists: Mapping[str, Mapping[str, Any]], xlabel: str = "log10 sigma",
                            title: str = "Histograms by group"):
    """One panel per label: each group's counts on the shared ``edges`` drawn as a step density
    (counts / (total x bin width)), so groups of different sizes compare (the OOD paper's Figs. 2, 5, 6)."""
    edges = np.asarray(edges, dtype=float)
    width = np.diff(edges)
    fig, axes = _grid_axes(len(hists))
    for ax, (label, groups) in zip(axes, hists.items()):
        for group, counts in groups.items():
            c = np.asarray(counts, dtype=float)
            if c.sum() > 0:
                ax.stairs(c / (c.sum() * width), edges, label=f"{group} ({int(c.sum())})", lw=1.2)
        ax.set_title(label, fontsize=8)
        ax.set_xlabel(xlabel, fontsize=7)
        ax.tick_params(labelsize=6)
        ax.legend(fontsize=6)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig
