r"""Scorers of predictive distributions for scikit-learn's model selection.

``cross_val_score(est, X, y, scoring=crps_scorer)`` and ``GridSearchCV(est, grid,
scoring=SCORERS, refit="neg_crps")`` score the estimator's ``predict_distribution(X)``, not its
point prediction. Each scorer is scikit-learn's ``make_scorer`` of a metric below with
``response_method=["predict_distribution"]`` and ``greater_is_better=False``: the metrics are
losses (lower is better), so a scorer returns **minus** the metric, as scikit-learn's
``neg_mean_squared_error`` does, and the best model has the largest score.

Metrics (``metric(y_true, y_pred, *, sample_weight=None)``, ``y_pred`` the predictive; the
weighted mean over points, weights ``sample_weight``):

* `mean_nll` - -log p(y | x), the log score (Good 1952; Gneiting & Raftery 2007, sec. 4.1).
  A `ClassPredictive` works too: -log max(p̄(y | x), 1e-7), labels 0..K-1 (`metrics.classification.nll`).
* `mean_crps` - int (F(t) - 1{y <= t})^2 dt (Gneiting & Raftery 2007, eq. 20; `metrics.crps`).
* `mean_interval_score` - (u - l) + (2/alpha)(l - y)1{y < l} + (2/alpha)(y - u)1{y > u} of the
  equal-tailed central interval, alpha = 1 - level (Gneiting & Raftery 2007, eq. 43).
* `coverage_error` - |(1/N) sum_i 1{l_i <= y_i <= u_i} - level|, the distance of the observed
  coverage from the nominal one (`metrics.coverage`); not a proper score (a predictive can
  cover well and be useless), so read it beside a proper one.

The interval scorers use ``level=0.95`` (the conventional 95 %). For another level::

    make_scorer(mean_interval_score, response_method=["predict_distribution"],
                greater_is_better=False, level=0.9)

``predict_distribution`` is reached after preprocessing through `dubito.pipeline.make_pipeline`.
"""

from __future__ import annotations

import numpy as np
from sklearn.metrics import make_scorer

from dubito.metrics import classification as _classification
from dubito.metrics import scoring as _scoring
from dubito.predictive.base import RegressionPredictive, as_numpy
from dubito.predictive.classes import ClassPredictive

__all__ = [
    "mean_nll",
    "mean_crps",
    "mean_interval_score",
    "coverage_error",
    "nll_scorer",
    "crps_scorer",
    "interval_scorer",
    "coverage_error_scorer",
    "SCORERS",
]

#: The estimator method the scorers call (a list: scikit-learn's ``make_scorer`` takes any
#: method name in a list, and a tuple of names as fallbacks).
RESPONSE_METHOD = ["predict_distribution"]


def _weighted_mean(values: np.ndarray, sample_weight) -> float:
    if sample_weight is None:
        return float(np.mean(values))
    w = as_numpy(sample_weight, "sample_weight")
    if w.shape != values.shape:
        raise ValueError(f"sample_weight must have shape {values.shape} (one weight per point), got {w.shape}")
    if not np.all(np.isfinite(w)) or np.any(w < 0) or not w.sum() > 0:
        raise ValueError("sample_weight must be finite, non-negative and not all 0")
    return float(np.average(values, weights=w))


def _regression(y_pred, what: str) -> RegressionPredictive:
    if not isinstance(y_pred, RegressionPredictive):
        raise TypeError(f"{what} needs a regression predictive (a RegressionPredictive from predict_distribution), "
                        f"got {type(y_pred).__name__}")
    return y_pred


def mean_nll(y_true, y_pred, *, sample_weight=None) -> float:
    """Mean negative log predictive density -log p(y_i | x_i) (lower is better).

    ``y_pred``: a `RegressionPredictive`, or a `ClassPredictive` with labels 0..K-1 in ``y_true``
    (then -log max(p̄(y_i | x_i), 1e-7), `dubito.metrics.classification.nll`)."""
    if isinstance(y_pred, ClassPredictive):
        values = _classification.nll(y_pred, y_true, reduction="none")
    else:
        values = _scoring.nll(_regression(y_pred, "mean_nll"), y_true)
    return _weighted_mean(values, sample_weight)


def mean_crps(y_true, y_pred, *, sample_weight=None) -> float:
    """Mean CRPS of the predictive at y_true, in the units of y (lower is better; `dubito.metrics.crps`)."""
    return _weighted_mean(_scoring.crps(_regression(y_pred, "mean_crps"), y_true), sample_weight)


def mean_interval_score(y_true, y_pred, *, level: float = 0.95, sample_weight=None) -> float:
    """Mean interval score of the equal-tailed central ``level`` interval (Gneiting & Raftery
    2007, eq. 43; lower is better; `dubito.metrics.interval_score`)."""
    pred = _regression(y_pred, "mean_interval_score")
    return _weighted_mean(_scoring.interval_score(pred, y_true, level), sample_weight)


def coverage_error(y_true, y_pred, *, level: float = 0.95, sample_weight=None) -> float:
    """|observed coverage - level| of the equal-tailed central ``level`` interval (closed, as
    `dubito.metrics.coverage`); 0 is nominal coverage, lower is better."""
    pred, y = _scoring.check_pred_y(_regression(y_pred, "coverage_error"), y_true)
    lv, scalar = _scoring.check_levels(level, "level")
    if not scalar:
        raise ValueError("coverage_error takes one level (a float)")
    lo, hi = pred.interval(float(lv[0]))
    inside = ((np.asarray(lo) <= y) & (y <= np.asarray(hi))).astype(np.float64)
    return abs(_weighted_mean(inside, sample_weight) - float(lv[0]))


def _scorer(metric, **kwargs):
    return make_scorer(metric, response_method=RESPONSE_METHOD, greater_is_better=False, **kwargs)


#: -mean_nll of ``predict_distribution``.
nll_scorer = _scorer(mean_nll)
#: -mean_crps of ``predict_distribution``.
crps_scorer = _scorer(mean_crps)
#: -mean_interval_score at level 0.95.
interval_scorer = _scorer(mean_interval_score, level=0.95)
#: -coverage_error at level 0.95.
coverage_error_scorer = _scorer(coverage_error, level=0.95)

#: The four by scikit-learn-style names, for ``scoring=SCORERS`` (several metrics at once; the
#: predictive is computed once per fold and shared) or ``scoring=SCORERS["neg_crps"]``.
SCORERS = {
    "neg_nll": nll_scorer,
    "neg_crps": crps_scorer,
    "neg_interval_score": interval_scorer,
    "neg_coverage_error": coverage_error_scorer,
}
