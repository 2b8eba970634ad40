"""(predictive, data) -> point and distribution metrics, marginal calibration, error-variance curves and artefacts."""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.stats import spearmanr

from dubito.experiments.icnlm.data import _Data
from dubito.experiments.icnlm.vocab import LEVELS, PIT_POINTS, SHARES
from dubito.metrics import (
    PAPER_THRESHOLDS,
    accuracy,
    calibration_error,
    crps,
    error_variance_curve,
    level_key,
    marginal_calibration,
    nll,
    pit,
    width,
)

# ---------------------------------------------------------------------------------- evaluation


def _r(a, digits: int = 6) -> list:
    return np.round(np.asarray(a, dtype=np.float64), digits).tolist()


def _point_metrics(point: np.ndarray, d: _Data) -> dict[str, float]:

    err = d.y_te - point
    out = {"mae": float(np.mean(np.abs(err))), "mse": float(np.mean(err**2))}
    out["acc_I"], out["acc_II"] = (float(a) for a in accuracy(point, d.y_te, d.thresholds))
    if d.raw:
        out["acc_6"], out["acc_2"] = (float(a) for a in accuracy(point, d.y_te, PAPER_THRESHOLDS))
    return out


def _evaluate(pred, d: _Data, pred_train=None) -> tuple[dict[str, float], dict[str, Any]]:
    """Metrics of one variant and its artefact pieces (see the module docstring)."""

    y = d.y_te
    mean, var = np.asarray(pred.mean, dtype=np.float64), np.asarray(pred.var, dtype=np.float64)
    out = _point_metrics(mean, d)
    out["nll"] = float(np.mean(nll(pred, y)))
    small = pred if len(d.sub) == len(y) else pred[d.sub]
    out["crps"] = float(np.mean(crps(small, y[d.sub])))
    u = pit(pred, y)
    lv = np.asarray(LEVELS)
    cov = ((u[None, :] >= (1 - lv[:, None]) / 2) & (u[None, :] <= (1 + lv[:, None]) / 2)).mean(axis=1)
    wid = width(small, lv)
    for level, c, w in zip(LEVELS, cov, wid):
        out[f"coverage_{level_key(level)}"] = float(c)
        out[f"width_{level_key(level)}"] = float(w)
    out["coverage_error"] = float(np.mean(np.abs(cov - lv)))
    out["coverage_error_max"] = float(np.max(np.abs(cov - lv)))
    out["calibration_error"] = float(calibration_error(pred, y))
    out["marginal_calibration_gap"] = float(marginal_calibration(pred, y).max_gap)
    if pred_train is not None:
        out["train_marginal_gap"] = float(marginal_calibration(pred_train, d.y_tr[d.train_sub]).max_gap)
    out["mean_var"] = float(np.mean(var))
    out["var_ratio"] = out["mse"] / float(np.mean(var))
    sq = (y - mean) ** 2
    if np.ptp(var) > 0:
        out["ev_spearman"] = float(spearmanr(var, sq).statistic)

    curve = error_variance_curve(pred, y, d.nu)
    share = error_variance_curve(pred, y, np.quantile(var, SHARES))
    mc = marginal_calibration(pred, y, grid=d.grid[:: max(1, len(d.grid) // 100)])
    density = np.asarray(small.pdf(d.grid[None, :]), dtype=np.float64).mean(axis=0)
    art = {
        "pit": _r(u[d.sub[:PIT_POINTS]], 5),
        "density": _r(density),
        "cdf_gap": _r(mc.forecast - mc.empirical),
        "coverage": _r(cov), "width": _r(wid),
        "mse_nu": _r(curve.mse), "kept_nu": _r(curve.kept, 5), "mse_share": _r(share.mse),
    }
    return out, art


def _artefacts(d: _Data, pieces: dict[str, dict]) -> dict[str, Any]:
    """The cell's artefacts in the layouts of `report_plots` from each variant's pieces."""
    counts, _ = np.histogram(d.y_te, bins=d.edges)
    stride = max(1, len(d.grid) // 100)
    return {
        "pit": {v: p["pit"] for v, p in pieces.items()},
        "marginal_density": {"grid": _r(d.grid), "hist_edges": _r(d.edges), "hist_counts": counts.tolist(),
                             "variants": {v: p["density"] for v, p in pieces.items()}},
        "marginal_cdf_gap": {"grid": _r(d.grid[::stride]), "variants": {v: p["cdf_gap"] for v, p in pieces.items()}},
        "coverage_levels": {"levels": list(LEVELS),
                            "variants": {v: {"coverage": p["coverage"], "width": p["width"]} for v, p in pieces.items()}},
        "error_variance": {"nu": _r(d.nu), "share": list(SHARES),
                           "variants": {v: {"mse_nu": p["mse_nu"], "kept_nu": p["kept_nu"],
                                            "mse_share": p["mse_share"]} for v, p in pieces.items()}},
    }
