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
