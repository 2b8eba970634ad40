"""Validation shared by the regression recalibrators: one clear ValueError per problem."""

from __future__ import annotations

import math
import numbers

import numpy as np

from dubito.predictive.base import RegressionPredictive, as_numpy

__all__ = [
    "check_regression_predictive",
    "check_calibration_set",
    "check_level",
    "finite_or_raise",
    "n_needed_symmetric",
    "n_needed_central",
    "central_levels_guaranteed",
]

#: Slack when turning a level into an order-statistic index: 0.9 * 20 is 18.000000000000004
#: in floating point, whose ceiling would ask for one calibration point too many.
_INDEX_SLACK = 1e-9


def check_regression_predictive(pred, name: str) -> RegressionPredictive:
    if not isinstance(pred, RegressionPredictive):
        raise TypeError(f"{name} must be a dubito RegressionPredictive, got {type(pred).__name__}")
    return pred


def finite_or_raise(arr: np.ndarray, what: str) -> np.ndarray:
    """``arr`` unchanged, or ValueError naming ``what`` and the first NaN/inf entry."""
    bad = ~np.isfinite(arr)
    if bad.any():
        first = int(np.flatnonzero(bad.ravel())[0])
        raise ValueError(f"{what} must be finite; found {int(bad.sum())} NaN/inf value(s), first at index {first}")
    return arr


def check_calibration_set(pred_cal, y_cal, name: str = "pred_cal") -> np.ndarray:
    """``y_cal`` as a finite float64 (n,) array matching ``pred_cal``'s n inputs."""
    check_regression_predictive(pred_cal, name)
    y = as_numpy(y_cal, "y_cal")
    n = len(pred_cal)
    if y.ndim != 1:
        raise ValueError(f"y_cal must be 1-D (one response per calibration input), got shape {y.shape}")
    if y.shape[0] != n:
        raise ValueError(
            f"{name} has {n} inputs but y_cal has {y.shape[0]} responses: the calibration "
            "predictive and targets must describe the same points"
        )
    finite_or_raise(y, "y_cal")
    return y


def check_level(level, name: str = "level") -> float:
    if isinstance(level, bool) or not isinstance(level, numbers.Real):
        raise ValueError(f"{name} must be a number strictly between 0 and 1, got {level!r}")
    level = float(level)
    if not 0.0 < level < 1.0:
        raise ValueError(f"{name} must lie strictly between 0 and 1, got {level}")
    return level


def order_index(n: int, level: float) -> int:
    """k = ceil((n + 1) * level): the split-conformal order statistic (1-based)."""
    return int(math.ceil((n + 1) * level - _INDEX_SLACK))


def n_needed_symmetric(level: float) -> int:
    """Smallest n with ceil((n + 1) level) <= n, i.e. n >= level / (1 - level)."""
    return max(1, int(math.ceil(level / (1.0 - level) - _INDEX_SLACK)))


def central_levels_guaranteed(n: int) -> tuple[float, float] | None:
    """Levels [L_min, L_max] whose central intervals the conformal map guarantees (see
    ``conformal_predictive``), or None when n < 4 (no level)."""
    j_lo = (n - 2) // 2
    if j_lo < 1:
        return None
    return 1.0 - 2.0 * (j_lo + 1) / (n + 1), 1.0 - 2.0 / (n + 1)


def n_needed_central(level: float) -> int:
    """Smallest n whose conformal predictive guarantees the central ``level`` interval."""
    n = max(4, int(math.ceil(2.0 / (1.0 - level) - 1.0 - _INDEX_SLACK)))
    while True:
        lo, hi = central_levels_guaranteed(n)
        if lo <= level + _INDEX_SLACK and level <= hi + _INDEX_SLACK:
            return n
        n += 1
