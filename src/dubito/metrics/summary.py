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

from dubito.metrics.calibration import calibration_error, coverage, marginal_calibration, width
from dubito.metrics.scoring import check_levels, check_pred_y, crps, interval_score, mae, nll, rmse

__all__ = ["regression_summary", "level_key", "SUMMARY_LEVELS"]

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
