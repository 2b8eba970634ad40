"""Plots every method gets for free, because they only read a Predictive.

Each function draws on a matplotlib ``Axes`` (a new figure when none is given) and returns
it; `save_figure` writes a PNG atomically. The backend is Agg (no screen needed).
"""

from __future__ import annotations

import io
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from dubito import metrics  # noqa: E402
from dubito.io import atomic_write_bytes  # noqa: E402
from dubito.predictive.base import RegressionPredictive, as_numpy  # noqa: E402

__all__ = ["plot_calibration", "plot_pit", "plot_coverage", "plot_predictions", "save_figure"]


def _axes(ax):
    if ax is None:
        _, ax = plt.subplots(figsize=(4.5, 4))
    return ax


def plot_calibration(preds: dict[str, RegressionPredictive], y, ax=None):
    """Probabilistic calibration (Gneiting et al. 2007): observed fraction of PIT <= p vs p."""
    ax = _axes(ax)
    ax.plot([0, 1], [0, 1], color="grey", lw=1, ls="--", label="ideal")
    for name, pred in preds.items():
        nominal, observed = metrics.calibration_curve(pred, y)
        ax.plot(nominal, observed, lw=1.8, label=name)
    ax.set(xlabel="nominal probability p", ylabel="observed fraction PIT ≤ p", title="Calibration")
    ax.legend(fontsize=8)
    return ax


def plot_pit(pred: RegressionPredictive, y, ax=None, bins: int = 10, title: str = "PIT histogram"):
    """Histogram of PIT values F_i(y_i); flat at density 1 for a calibrated model."""
    ax = _axes(ax)
    ax.hist(metrics.pit(pred, y), bins=bins, range=(0, 1), density=True, color="C0", alpha=0.75)
    ax.axhline(1.0, color="grey", ls="--", lw=1)
    ax.set(xlabel="PIT", ylabel="density", title=title, xlim=(0, 1))
    return ax


def plot_coverage(preds: dict[str, RegressionPredictive], y, ax=None):
    """Empirical coverage of equal-tailed central intervals against their nominal level."""
    ax = _axes(ax)
    levels = np.linspace(0.05, 0.95, 19)
    ax.plot([0, 1], [0, 1], color="grey", lw=1, ls="--", label="ideal")
    for name, pred in preds.items():
        ax.plot(levels, metrics.coverage(pred, y, levels), marker="o", ms=3, label=name)
    ax.set(xlabel="nominal level", ylabel="empirical coverage", title="Interval coverage")
    ax.legend(fontsize=8)
    return ax


def plot_predictions(pred: RegressionPredictive, y, x=None, ax=None, level: float = 0.95, title: str = ""):
    """Observed y with predictive mean and central interval.

    With a 1-D ``x`` the plot is against x; otherwise test points are ordered by predicted
    mean, which shows interval widths and misses for inputs of any dimension.
    """
    ax = _axes(ax)
    y = as_numpy(y, "y")
    lo, hi = pred.interval(level)
    mean = pred.mean
    if x is not None and as_numpy(x).squeeze().ndim == 1:
        t = as_numpy(x).squeeze()
        xlabel = "x"
    else:
        t = np.empty(len(mean))
        t[np.argsort(mean, kind="stable")] = np.arange(len(mean))
        xlabel = "test points, ordered by predicted mean"
    order = np.argsort(t, kind="stable")
    inside = (y >= lo) & (y <= hi)
    ax.fill_between(t[order], lo[order], hi[order], color="C0", alpha=0.25, label=f"{level:.0%} interval")
    ax.plot(t[order], mean[order], color="C0", lw=1.5, label="predictive mean")
    ax.scatter(t[inside], y[inside], s=8, color="k", label="observed (inside)")
    ax.scatter(t[~inside], y[~inside], s=12, color="C3", marker="x", label="observed (outside)")
    ax.set(xlabel=xlabel, ylabel="y", title=title or f"Predictions ({inside.mean():.0%} inside)")
    ax.legend(fontsize=8)
    return ax


def save_figure(fig, path) -> Path:
    """Write ``fig`` as PNG atomically and close it."""
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    atomic_write_bytes(path, buf.getvalue())
    return Path(path)
