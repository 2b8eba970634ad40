"""WEPI: the width of the narrowest equal-tailed prediction interval that still covers enough
test points (B-DeepNoise [P] Tables 1-2; the version implemented is the code's, [C]
``required_interval_width``; spec §4.4 and pitfall 9).

For a nominal miscoverage a' on the grid 0, step, 2 step, ..., 1, each input j gets the
equal-tailed sample interval of its predictive draws

    lo_j(a') = Qhat_j(a'/2),   hi_j(a') = Qhat_j(1 - a'/2)      (np.quantile, linear),

and y_j counts as covered iff lo_j < y_j < hi_j (strict, [C]). WEPI is the median (default,
[C]) or mean ([P] says "average") over j of hi_j - lo_j at the *largest* grid a' whose
miss rate (1/N) #{j not covered} is <= 1 - coverage. If already a' = 0 (the sample range)
misses too many, the result is +inf ([C]); this depends on the number of draws.

The intervals nest as a' grows, so the miss rate is non-decreasing in a' and the largest
admissible a' is found by bisection over the grid index instead of a linear scan (same answer).
"""

from __future__ import annotations

import math

import numpy as np

from dubito.predictive.base import RegressionPredictive, as_numpy

__all__ = ["sorted_quantile", "wepi"]


def sorted_quantile(sorted_draws: np.ndarray, q: float) -> np.ndarray:
    """``np.quantile(draws, q, axis=0)`` (method "linear") from draws already sorted along axis 0."""
    s = sorted_draws.shape[0]
    pos = q * (s - 1)
    i = min(int(math.floor(pos)), s - 1)
    frac = pos - i
    if i + 1 >= s or frac == 0.0:
        return sorted_draws[i]
    a, b = sorted_draws[i], sorted_draws[i + 1]
    # numpy's lerp: a + (b - a) * t, evaluated from the nearer end for t >= 0.5
    return np.where(frac >= 0.5, b - (b - a) * (1 - frac), a + (b - a) * frac)


def wepi(draws, y, *, coverage: float = 0.95, step: float = 1e-4, reduce: str = "median",
         n_draws: int = 10_000, random_state=0) -> float:
    """Width of the equal-tailed interval needed for ``coverage`` of the test points.

    draws : (S, N) predictive draws for N test inputs, or a dubito `RegressionPredictive`
        over them (then ``n_draws`` draws are taken with ``random_state``, default 0, first).
    y : (N,) observed test responses.
    coverage : the target, 0.95 in the paper; step : the a' grid spacing, 1e-4 ([C]).
    reduce : "median" ([C], the default) or "mean" ([P]'s wording).
    Returns the width in the units of y, or ``math.inf`` (see the module docstring).
    """
    if reduce not in ("median", "mean"):
        raise ValueError(f"reduce must be 'median' or 'mean', got {reduce!r}")
    if not 0.0 < float(coverage) < 1.0:
        raise ValueError(f"coverage must lie strictly between 0 and 1, got {coverage!r}")
    if not 0.0 < float(step) <= 1.0:
        raise ValueError(f"step must lie in (0, 1], got {step!r}")
    y = as_numpy(y, "y")
    if y.ndim != 1 or y.shape[0] < 1:
        raise ValueError(f"y must have shape (N,), got {y.shape}")
    if isinstance(draws, RegressionPredictive):
        if len(draws) != y.shape[0]:
            raise ValueError(f"the predictive has {len(draws)} inputs but y has {y.shape[0]}")
        draws = draws.sample(int(n_draws), generator=random_state)
    d = as_numpy(draws, "draws")
    if d.ndim != 2 or d.shape[1] != y.shape[0] or d.shape[0] < 1:
        raise ValueError(f"draws must have shape (S, {y.shape[0]}) to match y, got {d.shape}")
    if not (np.all(np.isfinite(d)) and np.all(np.isfinite(y))):
        raise ValueError("draws and y must be finite")
    d = np.sort(d, axis=0)
    allowed = (1.0 - float(coverage)) * y.shape[0]   # max number of uncovered points

    def bounds(k: int):
        a = k * float(step)
        return sorted_quantile(d, a / 2.0), sorted_quantile(d, 1.0 - a / 2.0)

    def ok(k: int) -> bool:
        lo, hi = bounds(k)
        return int(np.count_nonzero(~((lo < y) & (y < hi)))) <= allowed + 1e-9

    if not ok(0):
        return math.inf
    # invariant: grid index `good` is admissible, `bad` is not (K + 1 = beyond a' = 1)
    good, bad = 0, int(math.floor(1.0 / float(step) + 1e-9)) + 1
    while bad - good > 1:
        mid = (good + bad) // 2
        if ok(mid):
            good = mid
        else:
            bad = mid
    lo, hi = bounds(good)
    width = hi - lo
    return float(np.median(width) if reduce == "median" else np.mean(width))
