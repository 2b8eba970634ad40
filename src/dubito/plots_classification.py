"""Plots of class predictives: the reliability diagram (thesis §4.1.3, Fig. 4.5).

Backend Agg (no screen needed); functions return the matplotlib ``Figure``; write it with
``dubito.plots.save_figure``.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from dubito.metrics.classification import N_BINS, reliability_diagram  # noqa: E402

__all__ = ["plot_reliability_diagram"]


def plot_reliability_diagram(pred, y, *, n_bins: int = N_BINS, ood=None, ax=None, title: str | None = None):
    """Accuracy against confidence in M equal-width bins (default 20, thesis §4.1.3).

    ``pred``: one ClassPredictive (bars of per-bin accuracy, the gap to the bin's mean
    confidence shaded, counts on a lower panel) or a dict name -> ClassPredictive on the same
    ``y`` (one line of per-bin accuracy vs mean confidence each). ``ood`` (same type as
    ``pred``, or one shared predictive) pools in OOD inputs counted as wrong ("w. OOD").
    Empty bins are not drawn. With ``ax`` the diagram goes there (no count panel).
    """
    preds = pred if isinstance(pred, dict) else {None: pred}
    oods = ood if isinstance(ood, dict) else {name: ood for name in preds}
    diagrams = {name: reliability_diagram(p, y, n_bins=n_bins, ood=oods.get(name)) for name, p in preds.items()}
    if ax is None:
        fig, (ax, ax_n) = plt.subplots(
            2, 1, figsize=(4.5, 5.2), sharex=True, gridspec_kw={"height_ratios": [3, 1]}
        )
    else:
        fig, ax_n = ax.figure, None
    ax.plot([0, 1], [0, 1], color="grey", lw=1, ls="--", label="ideal")
    width = 1.0 / n_bins
    for i, (name, d) in enumerate(diagrams.items()):
        full = d.count > 0
        centres = (d.edges[:-1] + d.edges[1:]) / 2
        label = f"ECE {d.ece:.3f}, MCE {d.mce:.3f}"
        if name is not None:
            label = f"{name}: {label}"
        if len(diagrams) == 1:
            ax.bar(centres[full], d.accuracy[full], width=width, color="C0", edgecolor="k", lw=0.5,
                   alpha=0.8, label=f"accuracy ({label})")
            lo = np.minimum(d.accuracy, d.confidence)[full]
            ax.bar(centres[full], np.abs(d.accuracy - d.confidence)[full], bottom=lo, width=width,
                   color="C3", alpha=0.35, edgecolor="C3", lw=0.5, label="gap to mean confidence")
        else:
            ax.plot(d.confidence[full], d.accuracy[full], marker="o", ms=3, color=f"C{i}", label=label)
        if ax_n is not None:
            ax_n.bar(centres, d.count, width=width, color=f"C{i}", alpha=0.5 if len(diagrams) > 1 else 0.8)
    ax.set(xlim=(0, 1), ylim=(0, 1), ylabel="accuracy", title=title or "Reliability diagram")
    ax.legend(fontsize=7, loc="upper left")
    if ax_n is not None:
        ax_n.set(xlabel="confidence", ylabel="count", xlim=(0, 1))
    else:
        ax.set_xlabel("confidence")
    return fig
