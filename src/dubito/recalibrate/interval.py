r"""Split-conformal prediction intervals around any regression predictive.

For users who need intervals only. With calibration scores s_1..s_n and
k = ceil((n + 1) L), the interval for a new input is built from s_(k), the k-th smallest
score; on exchangeable data it covers with probability >= L (Vovk, Gammerman & Shafer 2005;
Lei, G'Sell, Rinaldo, Tibshirani & Wasserman 2018, "Distribution-free predictive inference
for regression", JASA, Thm 2.2). It needs k <= n, i.e. n >= L / (1 - L) (9 points for 90 %,
99 for 99 %).

Scores (mu, sigma the predictive mean and standard deviation):

* ``"absolute"``:   s = |y - mu|,                      interval mu +- s_(k);
* ``"normalized"``: s = |y - mu| / sigma,              interval mu +- s_(k) sigma
  (Lei et al. 2018, sec. 5.2, with the predictive's own sigma as the spread);
* ``"cqr"``:        s = max(lo - y, y - hi),           interval [lo - s_(k), hi + s_(k)],
  where [lo, hi] = ``pred.interval(L)`` are the predictive's own equal-tailed quantiles
  (conformalized quantile regression, Romano, Patterson & Candes 2019, eq. 6-7; s_(k) < 0
  narrows the band and may, as there, cross it).

The same numbers as MAPIE 1.6's ``SplitConformalRegressor`` ("absolute"; "normalized"
through ``ResidualNormalisedScore`` with a prefit sigma) and
``ConformalizedQuantileRegressor`` (``symmetric_correction=True``) on the same predictions
(tested to 1e-10). MAPIE refuses n <= 1/(1 - L) (19 points at 95 %), one point more than
the order statistic needs; we allow k = n, the largest score.
"""

from __future__ import annotations

import numpy as np

from dubito.recalibrate._checks import (
    check_calibration_set,
    check_level,
    check_regression_predictive,
    finite_or_raise,
    n_needed_symmetric,
    order_index,
)

__all__ = ["conformal_interval", "conformity_scores", "SCORES"]

SCORES = ("absolute", "normalized", "cqr")
_ALIASES = {"normalised": "normalized"}


def _score_name(score: str) -> str:
    name = _ALIASES.get(score, score)
    if name not in SCORES:
        raise ValueError(f"score must be one of {list(SCORES)}, got {score!r}")
    return name


def _parts(pred, score: str, level: float, name: str):
    """(centre, spread) for absolute/normalized, (lo, hi) for cqr; all finite (N,)."""
    if score == "cqr":
        lo, hi = pred.interval(level)
        lo = finite_or_raise(np.asarray(lo, dtype=np.float64), f"the {level:g} quantile band of {name}")
        hi = finite_or_raise(np.asarray(hi, dtype=np.float64), f"the {level:g} quantile band of {name}")
        return lo, hi
    mu = finite_or_raise(np.asarray(pred.mean, dtype=np.float64), f"the means of {name}")
    if score == "absolute":
        return mu, np.ones_like(mu)
    sd = finite_or_raise(np.asarray(pred.std, dtype=np.float64), f"the standard deviations of {name}")
    if np.any(sd <= 0):
        raise ValueError(f"the normalized score needs standard deviations > 0 in {name}")
    return mu, sd


def conformity_scores(pred_cal, y_cal, score: str = "absolute", level: float = 0.9) -> np.ndarray:
    """Calibration scores s_i, shape (n,) (``level`` matters for "cqr" only)."""
    score = _score_name(score)
    level = check_level(level)
    y = check_calibration_set(pred_cal, y_cal)
    a, b = _parts(pred_cal, score, level, "pred_cal")
    if score == "cqr":
        return np.maximum(a - y, y - b)
    return np.abs(y - a) / b


def conformal_interval(pred_cal, y_cal, pred, level: float = 0.9, score: str = "absolute"):
    """Split-conformal interval (lower, upper), each (N,), for the N inputs of ``pred``.

    ``pred_cal``, ``y_cal``: predictive and responses of n held-out calibration points;
    ``level`` in (0, 1); ``score``: "absolute", "normalized" (alias "normalised") or "cqr"
    (module docstring). Needs n >= level / (1 - level).
    """
    score = _score_name(score)
    level = check_level(level)
    check_regression_predictive(pred, "pred")
    s = conformity_scores(pred_cal, y_cal, score, level)
    n = s.size
    need = n_needed_symmetric(level)
    if n < need:
        raise ValueError(
            f"a {100 * level:g} % conformal interval needs at least {need} calibration points "
            f"(k = ceil((n+1) level) must not exceed n), got {n}"
        )
    q = np.sort(s)[order_index(n, level) - 1]
    a, b = _parts(pred, score, level, "pred")
    if score == "cqr":
        return a - q, b + q
    return a - q * b, a + q * b
