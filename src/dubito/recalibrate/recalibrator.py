"""``Recalibrator``: fit a recalibration map on held-out (predictive, y) pairs, apply it to any
regression predictive.

    rec = Recalibrator(method="conformal").fit(pred_cal, y_cal)
    pred_new = rec.transform(pred_test)        # a RegressionPredictive: every metric applies

* ``"conformal"``: the split-conformal predictive system with the PIT as score
  (:mod:`~dubito.recalibrate.conformal_predictive`): every central interval with level in
  ``coverage_levels_`` covers a new exchangeable point with probability >= its level.
* ``"isotonic"``: Kuleshov, Fenner & Ermon (2018) (:mod:`~dubito.recalibrate.isotonic`).

Both return ``WarpedPredictive(pred, knots_u_, knots_h_)``: the same base predictive with
its CDF mapped through a piecewise-linear H (:mod:`~dubito.recalibrate.warped`), for
``Normal``, ``GaussianMixture``, ``Samples``, ``GridDensity``, a ``WarpedPredictive`` (the
maps compose) or any other ``RegressionPredictive``.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator

from dubito._validation import check_fitted
from dubito.recalibrate._checks import (
    central_levels_guaranteed,
    check_calibration_set,
    check_level,
    check_regression_predictive,
    finite_or_raise,
    n_needed_central,
)
from dubito.recalibrate.conformal_predictive import (
    DEFAULT_MAX_KNOTS as _CONFORMAL_KNOTS,
)
from dubito.recalibrate.conformal_predictive import conformal_knots
from dubito.recalibrate.isotonic import isotonic_knots
from dubito.recalibrate.warped import WarpedPredictive

__all__ = ["Recalibrator"]

_METHODS = ("conformal", "isotonic")


class Recalibrator(BaseEstimator):
    """Recalibrate regression predictives with a map fitted on calibration PITs.

    Parameters
    ----------
    method : "conformal" (default) or "isotonic".
    level : optional float in (0, 1), the highest central-interval level you will read from
        the recalibrated predictive. ``fit`` then refuses a calibration set too small for it:
        the conformal map guarantees levels up to 1 - 2/(n + 1), so a 90 % interval needs
        n >= 19 and a 99 % one n >= 199; the same count is asked of "isotonic" (beyond it the
        interval reaches past the outermost calibration PITs, where nothing was calibrated).
        None: no check beyond the method's minimum (4 points conformal, 2 isotonic).
    max_knots : int, "auto" (default) or None: thin the map to at most this many knots (the
        conformal guarantee is kept). "auto": 400 for "conformal" (about 1/400 of extra
        probability per tail); for "isotonic", every calibration point in the tails and
        segments growing towards the middle (the best log score measured, with the tails'
        coverage of every point); see the two modules. None: a knot at every calibration
        point (a spiky density: ~0.3-0.45 nats of log score lost).
    epsilon : "isotonic" only, share of the identity mixed into R; default 1/(n + 1).

    Fitted attributes
    -----------------
    n_calibration_ : number of calibration points n.
    pit_ : (n,) calibration PITs F_i(y_i).
    knots_u_, knots_h_ : the knots of the map H.
    coverage_levels_ : (L_min, L_max), the central levels with the finite-sample guarantee
        ("conformal"); None for "isotonic" (no finite-sample guarantee).
    """

    def __init__(self, method: str = "conformal", *, level: float | None = None,
                 max_knots: int | str | None = "auto", epsilon: float | None = None):
        self.method = method
        self.level = level
        self.max_knots = max_knots
        self.epsilon = epsilon

    def fit(self, pred_cal, y_cal) -> Recalibrator:
        """Fit the map on calibration predictive ``pred_cal`` (n inputs) and responses (n,)."""
        if self.method not in _METHODS:
            raise ValueError(f"method must be one of {list(_METHODS)}, got {self.method!r}")
        if self.epsilon is not None and self.method != "isotonic":
            raise ValueError("epsilon applies to method='isotonic' only")
        level = None if self.level is None else check_level(self.level, "level")
        y = check_calibration_set(pred_cal, y_cal)
        n = y.size
        if level is not None:
            need = n_needed_central(level)
            if n < need:
                raise ValueError(
                    f"a central {100 * level:g} % interval needs at least {need} calibration points "
                    f"(levels up to 1 - 2/(n+1) are covered), got {n}"
                )
        pit = finite_or_raise(
            np.asarray(pred_cal.cdf(y), dtype=np.float64),
            "the calibration PITs pred_cal.cdf(y_cal) (are there NaN in the predictions?)",
        )
        max_knots = self.max_knots
        if isinstance(max_knots, str):
            if max_knots != "auto":
                raise ValueError(f"max_knots must be an int >= 2, 'auto' or None, got {max_knots!r}")
            if self.method == "conformal":
                max_knots = _CONFORMAL_KNOTS
        if self.method == "conformal":
            u, h = conformal_knots(pit, max_knots)
            self.coverage_levels_ = central_levels_guaranteed(n)
        else:
            u, h = isotonic_knots(pit, self.epsilon, max_knots)
            self.coverage_levels_ = None
        self.knots_u_, self.knots_h_ = u, h
        self.pit_ = pit
        self.n_calibration_ = n
        return self

    def transform(self, pred) -> WarpedPredictive:
        """The recalibrated predictive G_i(y) = H(F_i(y)) for every input of ``pred``."""
        check_fitted(self, ["knots_u_", "knots_h_"])
        check_regression_predictive(pred, "pred")
        base = pred.base if isinstance(pred, WarpedPredictive) else pred
        finite_or_raise(np.asarray(base.mean, dtype=np.float64), "the predictive means of pred")
        return WarpedPredictive(pred, self.knots_u_, self.knots_h_)

    def warp(self, p) -> np.ndarray:
        """H(p): the fitted map applied to base probabilities."""
        check_fitted(self, ["knots_u_", "knots_h_"])
        return np.interp(np.asarray(p, dtype=np.float64), self.knots_u_, self.knots_h_)
