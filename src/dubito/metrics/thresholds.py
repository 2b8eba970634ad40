"""Threshold metrics of the IC-NLM paper: accuracy within a tolerance and the error-variance curve.

Hoffmann & Klein (2023), "Marginally Calibrated Response Distributions for End-to-End Learning
in Autonomous Driving", Ann. Appl. Stat. 17; spec ``shared/specs/icnlm.md`` §3.4, §6.11, §7.12.

* :func:`accuracy` - Accuracy I / II of Table 1: the share of test points whose absolute error
  |y_i - yhat_i| is at most a threshold (6 degrees and 2 degrees in the paper). The text says
  "< 6", the authors' code "<= 6" (spec §7.12); we use the code's inclusive ``<=`` for every
  threshold. The point prediction yhat_i is the predictive mean (spec §3.4).
* :func:`matched_thresholds` - the paper's 6 and 2 degrees are steering-*wheel* degrees of
  comma2k19 and mean nothing on another response. This maps them to a data set: t_I, t_II are
  the smallest thresholds at which the naive learner (a constant c) reaches the paper's naive
  accuracies (Table 1: 93.21 % and 65.12 %) on the given responses, i.e. empirical quantiles
  of |y_i - c|.
* :func:`error_variance_curve` - Fig. 8b: for thresholds nu, the MSE of the points whose
  predictive variance is <= nu (inclusive), and the share of points kept. For a predictive
  whose variance orders the errors well the curve falls as nu decreases.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from dubito.metrics.scoring import check_pred_y
from dubito.predictive.base import RegressionPredictive, as_numpy

__all__ = [
    "PAPER_THRESHOLDS",
    "PAPER_NAIVE_ACCURACY",
    "accuracy",
    "matched_thresholds",
    "ErrorVarianceCurve",
    "error_variance_curve",
]

#: Accuracy I and II thresholds of Table 1, in comma2k19 steering-wheel degrees (spec §3.4).
PAPER_THRESHOLDS = (6.0, 2.0)
#: The naive learner's (always 0 degrees) Accuracy I and II in Table 1 (93.21 %, 65.12 %).
PAPER_NAIVE_ACCURACY = (0.9321, 0.6512)


def _point_and_y(pred, y) -> tuple[np.ndarray, np.ndarray]:
    """(point predictions, y) as float64 (N,) arrays; pred is a predictive (its mean) or an array."""
    if isinstance(pred, RegressionPredictive):
        pred, y = check_pred_y(pred, y)
        return np.asarray(pred.mean, dtype=np.float64), y
    point = as_numpy(pred, "pred")
    y = as_numpy(y, "y")
    if point.ndim != 1 or y.shape != point.shape:
        raise ValueError(
            f"pred (point predictions) and y must both have shape (N,), got {point.shape} and {y.shape}; "
            "pass a RegressionPredictive or a 1-D array of point predictions"
        )
    if not (np.all(np.isfinite(point)) and np.all(np.isfinite(y))):
        raise ValueError("pred and y must be finite (found NaN/inf)")
    return point, y


def _thresholds(threshold, name: str) -> tuple[np.ndarray, bool]:
    t = as_numpy(threshold, name)
    scalar = t.ndim == 0
    t = np.atleast_1d(t)
    if t.ndim != 1 or t.size == 0 or not np.all(np.isfinite(t)) or np.any(t < 0):
        raise ValueError(f"{name} must be a non-negative finite scalar or 1-D sequence, got {threshold!r}")
    return t, scalar


def accuracy(pred, y, threshold):
    """Share of points with |y_i - yhat_i| <= threshold (inclusive; spec §3.4, §7.12).

    ``pred``: a `RegressionPredictive` (yhat = its mean) or an (N,) array of point predictions.
    ``threshold``: a scalar -> float; a sequence -> float64 array aligned with it.
    """
    point, y = _point_and_y(pred, y)
    t, scalar = _thresholds(threshold, "threshold")
    err = np.sort(np.abs(y - point))
    out = np.searchsorted(err, t, side="right") / err.size
    return float(out[0]) if scalar else out.astype(np.float64)


def matched_thresholds(y, center: float = 0.0, accuracies=PAPER_NAIVE_ACCURACY) -> np.ndarray:
    """Thresholds at which the constant prediction ``center`` reaches ``accuracies`` on ``y``.

    t_k = min{t : (1/n) #{i : |y_i - c| <= t} >= a_k} = d_(ceil(a_k n)), the ceil(a_k n)-th
    smallest absolute deviation d_i = |y_i - c| (the inverted-CDF empirical quantile). With the
    default ``accuracies`` (Table 1's naive 93.21 % and 65.12 %) and c the naive learner's
    prediction on the training responses, these map the paper's 6 and 2 degrees to the data's
    units. Returns a float64 array aligned with ``accuracies``.
    """
    y = np.atleast_1d(as_numpy(y, "y"))
    if y.ndim != 1 or y.size == 0 or not np.all(np.isfinite(y)):
        raise ValueError(f"y must be a non-empty 1-D array of finite values, got shape {y.shape}")
    c = float(center)
    if not math.isfinite(c):
        raise ValueError(f"center must be finite, got {center!r}")
    a = np.atleast_1d(as_numpy(accuracies, "accuracies"))
    if a.ndim != 1 or a.size == 0 or np.any(~np.isfinite(a)) or np.any((a <= 0) | (a > 1)):
        raise ValueError(f"accuracies must be fractions in (0, 1] (93.21 % is 0.9321), got {accuracies!r}")
    d = np.sort(np.abs(y - c))
    k = np.ceil(a * d.size - 1e-9).astype(int)  # 1e-9: a*n that is an integer up to rounding
    return d[np.clip(k, 1, d.size) - 1].astype(np.float64)


class ErrorVarianceCurve(NamedTuple):
    """thresholds nu_k; mse_k = mean of (y_i - yhat_i)^2 over {i : var_i <= nu_k} (NaN when
    that set is empty); kept_k = its share of the N points."""

    thresholds: np.ndarray
    mse: np.ndarray
    kept: np.ndarray


def error_variance_curve(pred, y, thresholds=None, n_thresholds: int = 50) -> ErrorVarianceCurve:
    """MSE of the points whose predictive variance is <= nu, against nu (Fig. 8b; spec §3.4).

    The point prediction is the predictive mean, the variance ``pred.var``; a point with
    variance exactly nu is kept (inclusive). ``thresholds``: 1-D, non-negative; default
    ``n_thresholds`` empirical quantiles of the predictive variances at levels
    linspace(0, 1, n_thresholds) (unit-free: the last keeps every point; the authors' code
    uses linspace(0, 500, 1000) degrees^2, spec §3.4 [C]).
    """
    pred, y = check_pred_y(pred, y)
    var = np.asarray(pred.var, dtype=np.float64)
    sq = (y - np.asarray(pred.mean, dtype=np.float64)) ** 2
    if thresholds is None:
        n_thresholds = int(n_thresholds)
        if n_thresholds < 1:
            raise ValueError(f"n_thresholds must be >= 1, got {n_thresholds}")
        nu = np.quantile(var, np.linspace(0.0, 1.0, n_thresholds))
    else:
        nu, _ = _thresholds(thresholds, "thresholds")
    order = np.argsort(var, kind="stable")
    v_sorted = var[order]
    csum = np.concatenate([[0.0], np.cumsum(sq[order])])
    k = np.searchsorted(v_sorted, nu, side="right")
    with np.errstate(invalid="ignore", divide="ignore"):
        mse = np.where(k > 0, csum[k] / np.maximum(k, 1), np.nan)
    return ErrorVarianceCurve(nu.astype(np.float64), mse.astype(np.float64), k / var.size)
