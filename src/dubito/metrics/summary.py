"""One dictionary of regression metrics per (predictive, y): what tables and the results store record.

Keys (stable; in this order; all values are Python floats):

======================== ====================================================================
``rmse``                 :func:`~dubito.metrics.scoring.rmse` of the predictive mean
``mae``                  :func:`~dubito.metrics.scoring.mae` of the predictive mean
``nll``                  mean negative log predictive density (:func:`~dubito.metrics.scoring.nll`)
``crps``                 mean CRPS (:func:`~dubito.metrics.scoring.crps`)
``coverage_<L>``         :func:`~dubito.metrics.calibration.coverage` at each level, one per level
``width_<L>``            mean central-interval :func:`~dubito.metrics.calibration.width`, one per level
``interval_score_95``    mean :func:`~dubito.metrics.scoring.interval_score` at level 0.95 (always)
``calibration_error``    :func:`~dubito.metrics.calibration.calibration_error` (mean |PIT-ECDF gap|)
``marginal_calibration_gap`` ``max_gap`` of :func:`~dubito.metrics.calibration.marginal_calibration`
``mean_epistemic_var``   mean of ``pred.epistemic_var`` (only when the predictive knows it)
``mean_aleatoric_var``   mean of ``pred.aleatoric_var`` (only when the predictive knows it)
======================== ====================================================================

``<L>`` is the level in percent formatted with ``%g``: 0.5 -> ``50``, 0.9 -> ``90``,
0.95 -> ``95``, 0.975 -> ``97.5`` (see :func:`level_key`). All coverage keys come before all
width keys, each in the order of ``levels``.
"""

from __future__ import annotations

import numpy as np

from dubito.metrics.calibration import (
    _CDF_BUDGET,
    calibration_curve_of_pit,
    calibration_error,
    coverage,
    marginal_calibration,
    marginal_grid,
    pit,
    width,
)
from dubito.metrics.scoring import (
    check_levels,
    check_pred_y,
    crps,
    interval_score,
    mae,
    nll,
    rmse,
)

__all__ = ["regression_summary", "regression_summary_in_blocks", "level_key", "SUMMARY_LEVELS"]

#: Rows per block of `regression_summary_in_blocks` (a 1,000-component mixture of 10,000 rows
#: holds 80 MB per parameter array).
BLOCK_ROWS = 10_000

SUMMARY_LEVELS = (0.5, 0.9, 0.95)


def level_key(level: float) -> str:
    """The key suffix of a level: its percentage with ``%g`` (0.95 -> "95", 0.975 -> "97.5")."""
    return f"{round(100.0 * float(level), 10):g}"


def regression_summary(pred, y, levels=SUMMARY_LEVELS) -> dict[str, float]:
    """All headline regression metrics of ``pred`` against ``y`` as ``{key: float}``.

    See the module docstring for the keys and their definitions. ``levels``: the central
    interval levels for ``coverage_<L>`` and ``width_<L>`` (``interval_score_95`` is always at
    0.95). The epistemic/aleatoric keys appear only when the predictive returns those
    variances (not None).
    """
    pred, y = check_pred_y(pred, y)
    lv, _ = check_levels(levels, "level")
    keys = [level_key(v) for v in lv]
    if len(set(keys)) != len(keys):
        raise ValueError(f"levels must be distinct, got {lv.tolist()}")
    out: dict[str, float] = {
        "rmse": rmse(pred, y),
        "mae": mae(pred, y),
        "nll": float(np.mean(nll(pred, y))),
        "crps": float(np.mean(crps(pred, y))),
    }
    cov = coverage(pred, y, lv)
    wid = width(pred, lv)
    for key, c in zip(keys, cov):
        out[f"coverage_{key}"] = float(c)
    for key, w in zip(keys, wid):
        out[f"width_{key}"] = float(w)
    out["interval_score_95"] = float(np.mean(interval_score(pred, y, 0.95)))
    out["calibration_error"] = calibration_error(pred, y)
    out["marginal_calibration_gap"] = marginal_calibration(pred, y).max_gap
    for name in ("epistemic_var", "aleatoric_var"):
        v = getattr(pred, name)
        if v is not None:
            out[f"mean_{name}"] = float(np.mean(np.asarray(v, dtype=np.float64)))
    return out


def regression_summary_in_blocks(predict, X, y, levels=SUMMARY_LEVELS, block_rows: int = BLOCK_ROWS) -> dict[str, float]:
    """`regression_summary` of ``predict(X)`` against ``y``, ``block_rows`` rows at a time, so
    that scoring a million inputs never holds one predictive of them all (issue 21).

    ``predict``: a callable from a block of rows of X to a `RegressionPredictive` of that many
    inputs (e.g. a fitted model's ``predict_distribution``); ``X``: anything sliced by rows
    (``X[a:b]``) with ``len(X) == len(y)``. Same keys and values as `regression_summary` on the
    whole predictive, up to the order of floating-point sums: the means are sums over blocks
    divided by N; ``calibration_error`` is computed from the PIT values of every row (N floats
    kept); ``marginal_calibration_gap`` from the average CDF on the same grid of y's quantiles,
    summed block by block."""
    y = np.asarray(y, dtype=np.float64).reshape(-1)
    n = y.size
    if len(X) != n:
        raise ValueError(f"X has {len(X)} rows but y has {n}")
    if n == 0:
        raise ValueError("no rows to score")
    block_rows = int(block_rows)
    if block_rows < 1:
        raise ValueError(f"block_rows must be >= 1, got {block_rows}")
    lv, _ = check_levels(levels, "level")
    keys = [level_key(v) for v in lv]
    if len(set(keys)) != len(keys):
        raise ValueError(f"levels must be distinct, got {lv.tolist()}")
    grid = marginal_grid(y)
    sums = dict(se=0.0, ae=0.0, nll=0.0, crps=0.0, interval_score=0.0)
    covered, widths = np.zeros(lv.size), np.zeros(lv.size)
    forecast = np.zeros(grid.size)
    pits, parts = [], {"epistemic_var": 0.0, "aleatoric_var": 0.0}
    known = None
    for start in range(0, n, block_rows):
        yb = y[start : start + block_rows]
        pred, yb = check_pred_y(predict(X[start : start + block_rows]), yb)
        mean = np.asarray(pred.mean, dtype=np.float64)
        sums["se"] += float(np.sum((mean - yb) ** 2))
        sums["ae"] += float(np.sum(np.abs(mean - yb)))
        sums["nll"] += float(np.sum(nll(pred, yb)))
        sums["crps"] += float(np.sum(crps(pred, yb)))
        for k, level in enumerate(lv):
            lo, hi = pred.interval(float(level))
            covered[k] += np.sum((lo <= yb) & (yb <= hi))
            widths[k] += np.sum(hi - lo)
        sums["interval_score"] += float(np.sum(interval_score(pred, yb, 0.95)))
        pits.append(pit(pred, yb))
        step = max(1, _CDF_BUDGET // max(1, yb.size))
        for a in range(0, grid.size, step):
            forecast[a : a + step] += np.sum(np.asarray(pred.cdf(grid[None, a : a + step])), axis=0)
        here = {name: getattr(pred, name) for name in parts}
        mask = tuple(v is not None for v in here.values())
        known = mask if known is None else tuple(a and b for a, b in zip(known, mask))
        for name, v in here.items():
            if v is not None:
                parts[name] += float(np.sum(np.asarray(v, dtype=np.float64)))
    out: dict[str, float] = {
        "rmse": float(np.sqrt(sums["se"] / n)),
        "mae": sums["ae"] / n,
        "nll": sums["nll"] / n,
        "crps": sums["crps"] / n,
    }
    for key, c in zip(keys, covered):
        out[f"coverage_{key}"] = float(c / n)
    for key, w in zip(keys, widths):
        out[f"width_{key}"] = float(w / n)
    out["interval_score_95"] = sums["interval_score"] / n
    curve = calibration_curve_of_pit(np.concatenate(pits))
    out["calibration_error"] = float(np.mean(np.abs(curve.observed - curve.nominal)))
    empirical = np.searchsorted(np.sort(y), grid, side="right") / n
    out["marginal_calibration_gap"] = float(np.max(np.abs(forecast / n - empirical)))
    for (name, total), present in zip(parts.items(), known):
        if present:
            out[f"mean_{name}"] = total / n
    return out
