"""Calibration of regression predictives: PIT, interval coverage and width, calibration curves.

Definitions follow Gneiting, Balabdaoui & Raftery (2007), "Probabilistic forecasts,
calibration and sharpness", JRSS-B 69(2):

* *probabilistic calibration*: the PIT values F_i(y_i) are uniform on [0, 1]
  (:func:`pit`, :func:`calibration_curve`, :func:`calibration_error`);
* *marginal calibration*: the average predictive CDF (1/N) sum_i F_i(t) equals the
  empirical CDF of the y_i (:func:`marginal_calibration`);
* *sharpness*: interval widths (:func:`width`), to be read together with :func:`coverage`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from dubito.metrics.scoring import check_levels, check_pred, check_pred_y
from dubito.predictive.base import as_numpy

__all__ = [
    "DEFAULT_LEVELS",
    "pit",
    "coverage",
    "width",
    "CalibrationCurve",
    "calibration_curve",
    "calibration_curve_of_pit",
    "calibration_error",
    "MarginalCalibration",
    "marginal_grid",
    "marginal_calibration",
]

DEFAULT_LEVELS = (0.5, 0.8, 0.9, 0.95, 0.99)


def pit(pred, y) -> np.ndarray:
    """Probability integral transform, per point: F_i(y_i) = P(Y <= y_i | x_i), shape (N,).

    Uniform on [0, 1] when the predictive is probabilistically calibrated and continuous
    (Dawid 1984; Gneiting, Balabdaoui & Raftery 2007).
    """
    pred, y = check_pred_y(pred, y)
    return np.asarray(pred.cdf(y), dtype=np.float64)


def coverage(pred, y, levels=DEFAULT_LEVELS):
    """Observed coverage of the equal-tailed central intervals at ``levels``.

    coverage(level) = (1/N) sum_i 1{ l_i <= y_i <= u_i },  [l_i, u_i] = pred.interval(level)
    (closed interval). A calibrated predictive has coverage ~ level.

    ``levels``: a float -> float; a sequence -> float64 array aligned with ``levels``.
    """
    pred, y = check_pred_y(pred, y)
    lv, scalar = check_levels(levels, "level")
    out = np.empty(lv.size, dtype=np.float64)
    for k, level in enumerate(lv):
        lo, hi = pred.interval(float(level))
        out[k] = np.mean((np.asarray(lo) <= y) & (y <= np.asarray(hi)))
    return float(out[0]) if scalar else out


def width(pred, levels=DEFAULT_LEVELS):
    """Mean width of the equal-tailed central intervals at ``levels`` (sharpness).

    width(level) = (1/N) sum_i (u_i - l_i),  [l_i, u_i] = pred.interval(level). For a Normal
    predictive it is (1/N) sum_i 2 z sigma_i with z = Phi^{-1}((1 + level)/2).

    ``levels``: a float -> float; a sequence -> float64 array aligned with ``levels``.
    """
    pred = check_pred(pred)
    lv, scalar = check_levels(levels, "level")
    out = np.empty(lv.size, dtype=np.float64)
    for k, level in enumerate(lv):
        lo, hi = pred.interval(float(level))
        out[k] = np.mean(np.asarray(hi, dtype=np.float64) - np.asarray(lo, dtype=np.float64))
    return float(out[0]) if scalar else out


class CalibrationCurve(NamedTuple):
    """Nominal levels p_j and observed fractions p_hat_j = (1/N) #{i: PIT_i <= p_j}."""

    nominal: np.ndarray
    observed: np.ndarray


def _nominal_grid(n_levels: int) -> np.ndarray:
    n_levels = int(n_levels)
    if n_levels < 1:
        raise ValueError(f"n_levels must be >= 1, got {n_levels}")
    return (np.arange(1, n_levels + 1, dtype=np.float64) - 0.5) / n_levels


def calibration_curve(pred, y, n_levels: int = 100) -> CalibrationCurve:
    """Probabilistic-calibration curve: nominal p_j against the observed fraction of PIT <= p_j.

    p_j = (j - 1/2) / J for j = 1..J (J = ``n_levels``, the midpoints of J equal bins of
    [0, 1]), and p_hat_j = (1/N) #{i : F_i(y_i) <= p_j}, i.e. the empirical CDF of the PIT
    values at p_j (Gneiting, Balabdaoui & Raftery 2007, sec. 3.1 "PIT"; the recalibration
    plot of Kuleshov, Fenner & Ermon 2018). A calibrated predictive lies on the diagonal;
    an overdispersed one (too wide) is below it for p < 1/2 and above for p > 1/2.

    Returns a :class:`CalibrationCurve` (unpacks as ``nominal, observed``).
    """
    return calibration_curve_of_pit(pit(pred, y), n_levels)


def calibration_curve_of_pit(pit_values, n_levels: int = 100) -> CalibrationCurve:
    """`calibration_curve` from PIT values already computed (e.g. block by block)."""
    u = np.sort(np.asarray(pit_values, dtype=np.float64).reshape(-1))
    p = _nominal_grid(n_levels)
    observed = np.searchsorted(u, p, side="right") / u.size
    return CalibrationCurve(p, observed.astype(np.float64))


def calibration_error(pred, y, n_levels: int = 100) -> float:
    """Mean absolute calibration error of the PIT: (1/J) sum_j |p_hat_j - p_j|.

    p_j, p_hat_j as in :func:`calibration_curve` (J = ``n_levels`` midpoints of [0, 1]). This
    is the midpoint-rule approximation of int_0^1 |G(p) - p| dp, the L1 distance between the
    empirical CDF G of the PIT values and the uniform CDF, i.e. the area between the
    calibration curve and the diagonal ("miscalibration area"; mean absolute calibration error
    of Chung, Char, Guo, Schneider & Neiswanger 2021, Uncertainty Toolbox). It uses the
    absolute gap of Kuleshov, Fenner & Ermon (2018)'s sum_j (p_j - p_hat_j)^2 so that the value
    does not grow with J. Range [0, 1/2]; 0 for perfectly uniform PIT; O(1/sqrt(N)) for a
    calibrated model on N points.
    """
    curve = calibration_curve(pred, y, n_levels)
    return float(np.mean(np.abs(curve.observed - curve.nominal)))


@dataclass(frozen=True)
class MarginalCalibration:
    """Average predictive CDF against the empirical CDF of y on a grid of thresholds t.

    grid: thresholds t_k; forecast: F_bar(t_k) = (1/N) sum_i F_i(t_k); empirical:
    G_hat(t_k) = (1/N) #{i : y_i <= t_k}; max_gap: max_k |F_bar(t_k) - G_hat(t_k)|;
    mean_gap: mean_k |F_bar(t_k) - G_hat(t_k)|.
    """

    grid: np.ndarray
    forecast: np.ndarray
    empirical: np.ndarray
    max_gap: float
    mean_gap: float


# entries of one pred.cdf call (inputs x thresholds) in marginal_calibration
_CDF_BUDGET = 1 << 18


def marginal_grid(y, n_grid: int = 200) -> np.ndarray:
    """`marginal_calibration`'s default thresholds: the empirical quantiles of y at levels
    (k - 1/2)/n_grid, k = 1..n_grid."""
    n_grid = int(n_grid)
    if n_grid < 1:
        raise ValueError(f"n_grid must be >= 1, got {n_grid}")
    return np.quantile(np.asarray(y, dtype=np.float64), (np.arange(1, n_grid + 1) - 0.5) / n_grid)


def marginal_calibration(pred, y, grid=None, n_grid: int = 200) -> MarginalCalibration:
    """Marginal calibration (Gneiting, Balabdaoui & Raftery 2007, sec. 2.3 and 3.2).

    Compares the average predictive CDF F_bar(t) = (1/N) sum_i F_i(t) with the empirical CDF
    of the observations G_hat(t) = (1/N) sum_i 1{y_i <= t}; a marginally calibrated
    predictive has F_bar ~ G_hat (the paper plots F_bar(t) - G_hat(t), its "marginal
    calibration plot").

    ``grid``: 1-D thresholds t; default ``n_grid`` empirical quantiles of y at levels
    (k - 1/2)/n_grid, k = 1..n_grid. Returns a :class:`MarginalCalibration` with
    ``max_gap`` = max_k |F_bar(t_k) - G_hat(t_k)|.
    """
    pred, y = check_pred_y(pred, y)
    if grid is None:
        t = marginal_grid(y, n_grid)
    else:
        t = np.atleast_1d(as_numpy(grid, "grid"))
        if t.ndim != 1 or t.size == 0 or not np.all(np.isfinite(t)):
            raise ValueError(f"grid must be a non-empty 1-D array of finite thresholds, got shape {t.shape}")
    n = len(pred)
    forecast = np.empty(t.size, dtype=np.float64)
    step = max(1, _CDF_BUDGET // max(1, n))
    for start in range(0, t.size, step):
        tc = t[start : start + step]
        forecast[start : start + step] = np.mean(np.asarray(pred.cdf(tc[None, :])), axis=0)
    empirical = np.searchsorted(np.sort(y), t, side="right") / n
    gap = np.abs(forecast - empirical)
    return MarginalCalibration(t, forecast, empirical.astype(np.float64), float(gap.max()), float(gap.mean()))
