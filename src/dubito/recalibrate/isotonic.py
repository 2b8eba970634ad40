r"""Isotonic recalibration of a regression predictive (Kuleshov, Fenner & Ermon 2018).

Kuleshov, Fenner & Ermon (2018), "Accurate uncertainties for deep learning using calibrated
regression", ICML, Algorithm 1: with calibration PITs p_i = F_i(y_i) and the empirical
P_hat(p) = (1/n) #{j : p_j <= p}, fit an increasing map R to the pairs (p_i, P_hat(p_i)) by
isotonic regression (scikit-learn's ``IsotonicRegression(increasing=True, y_min=0, y_max=1)``)
and predict with the CDF R(F_x(y)). Calibrated on exchangeable data, R(F(Y)) is close to
uniform (the PIT's empirical CDF is R itself).

Here R is piecewise linear through (0, 0), the fitted points and (1, 1), so the warped
predictive :class:`~dubito.recalibrate.warped.WarpedPredictive` has a density. The fitted
values reach 1 at the largest calibration PIT, so R is flat above it (and wherever the
isotonic fit pools a block of tied values): a density of 0, and log score -inf for a new
point beyond the largest calibration PIT. We therefore use

    H(p) = (1 - eps) R(p) + eps p,   eps = 1/(n + 1)  (default),

strictly increasing with slope >= eps. Why 1/(n + 1): at the knots it turns Kuleshov's
plotting positions i/n into i/(n + 1) + eps p_(i), i.e. Weibull's i/(n + 1) (the expected
value of the i-th uniform order statistic) plus a share of the identity; the CDF moves by
at most eps, below the ECDF's own resolution 1/n. The lower tail below the smallest
calibration PIT keeps mass ~ 1/(n + 1), as an exchangeable new point has; the upper tail
above the largest keeps only eps (1 - p_(n)), since Kuleshov's P_hat reaches 1 there (a
density, but a small one: the asymmetry is the estimator's, kept as published).

``max_knots`` (default 100): R is read at every Delta-th distinct fitted point
(Delta = ceil((m - 1)/(max_knots - 1)), m distinct PITs, the first and last always kept)
instead of all m; the linear interpolant then differs from R by at most Delta/n, and the density is
not spiky from one calibration point to the next (each segment's slope is Delta/(n x the
segment's PIT spacing), an exponential spacing when Delta = 1). 100 is our choice,
measured on a biased, too-narrow normal predictive (n = 2000 calibration, 5000 test
points): mean log score 1.975 with every point, 1.665 with 400 knots, 1.602 with 100,
1.616 with 50, 1.699 with 20 (where the 95 % interval's coverage falls to 0.92); CRPS and
calibration error unchanged down to 50. ``None`` keeps every point.
"""

from __future__ import annotations

import math

import numpy as np
from sklearn.isotonic import IsotonicRegression

from dubito._validation import check_int
from dubito.recalibrate._checks import finite_or_raise

__all__ = ["isotonic_knots", "DEFAULT_MAX_KNOTS"]

#: Knots of the isotonic map unless told otherwise (module docstring).
DEFAULT_MAX_KNOTS = 100

_PIT_LO = np.finfo(np.float64).tiny
_PIT_HI = 1.0 - np.finfo(np.float64).epsneg


def isotonic_knots(
    pit, epsilon: float | None = None, max_knots: int | None = DEFAULT_MAX_KNOTS
) -> tuple[np.ndarray, np.ndarray]:
    """Knots (knots_u, knots_h) of H = (1 - eps) R + eps id (module docstring).

    ``pit``: (n,) calibration PITs F_i(y_i), n >= 2. ``epsilon``: the share of the
    identity, in [0, 1); default 1/(n + 1). With ``epsilon=0`` H is Kuleshov's R exactly
    (and may be flat).
    """
    p = np.clip(finite_or_raise(np.asarray(pit, dtype=np.float64).ravel(), "calibration PITs"),
                _PIT_LO, _PIT_HI)
    n = p.size
    if n < 2:
        raise ValueError(f"isotonic recalibration needs at least 2 calibration points, got {n}")
    eps = 1.0 / (n + 1) if epsilon is None else float(epsilon)
    if not 0.0 <= eps < 1.0:
        raise ValueError(f"epsilon must lie in [0, 1), got {epsilon}")
    p_sorted = np.sort(p)
    ecdf = np.searchsorted(p_sorted, p, side="right") / n  # P_hat(p_i) = #{p_j <= p_i} / n
    iso = IsotonicRegression(increasing=True, y_min=0.0, y_max=1.0, out_of_bounds="clip")
    iso.fit(p, ecdf)
    x = np.unique(p_sorted)
    r = np.clip(iso.predict(x), 0.0, 1.0)
    if max_knots is not None:
        max_knots = check_int(max_knots, "max_knots (None: every calibration point)", min_value=2)
        step = max(1, math.ceil((x.size - 1) / (max_knots - 1)))
        idx = np.append(np.arange(0, x.size - 1, step), x.size - 1)  # <= max_knots points
        x, r = x[idx], r[idx]
    knots_u = np.concatenate([[0.0], x, [1.0]])
    knots_r = np.concatenate([[0.0], r, [1.0]])
    knots_h = (1.0 - eps) * knots_r + eps * knots_u
    if eps > 0:  # a last PIT within 1e-16 of 1 rounds H to 1 there: drop it, no flat segment
        keep = np.concatenate([[True], knots_h[1:-1] < 1.0, [True]])
        knots_u, knots_h = knots_u[keep], knots_h[keep]
    knots_h[-1] = 1.0
    return knots_u, np.maximum.accumulate(knots_h)
