"""Metrics of predictive distributions: pure functions of (predictive, y), numpy in, numpy/floats out.

* :mod:`dubito.metrics.scoring` - proper scores (``nll``, ``crps`` and its closed forms,
  ``interval_score``, ``pinball``) and point errors (``rmse``, ``mae``, ...).
* :mod:`dubito.metrics.calibration` - PIT, coverage and width of central intervals,
  calibration curve and error, marginal calibration.
* :mod:`dubito.metrics.ood` - ``auroc``, ``aupr``, ``fpr_at_tpr``; OOD is the positive class and
  a higher score means more OOD.
* :mod:`dubito.metrics.entropy` - k-NN ``knn_entropy`` / ``knn_kl`` (Pequignot et al.; numpy or
  differentiable torch), their predictor-space versions, and the spread entropy U(x).
* :mod:`dubito.metrics.classification` - class predictives: ``accuracy``, ``nll``, ``brier``,
  ``ece``/``mce``/``reliability_diagram`` (20 equal-width bins), misclassification and OOD
  AUROC/AUPR. ``accuracy`` and ``nll`` clash with the regression names and are reached as
  ``classification.accuracy`` / ``classification.nll``; the rest are exported here too.
* :mod:`dubito.metrics.summary` - ``regression_summary``: one stable dict of all of the above;
  ``regression_summary_in_blocks``: the same from a predict callable, block by block (bounded
  memory for millions of rows).
* :mod:`dubito.metrics.thresholds` - the IC-NLM paper's ``accuracy`` within a tolerance, the
  ``matched_thresholds`` that map its 6/2 degrees to other data, and ``error_variance_curve``.
* :mod:`dubito.metrics.scorers` - scikit-learn scorers of ``predict_distribution`` for
  ``cross_val_score`` / ``GridSearchCV``: ``nll_scorer``, ``crps_scorer``, ``interval_scorer``,
  ``coverage_error_scorer`` (and ``SCORERS``, all four by name).
"""

from dubito.metrics import classification, ood, scorers
from dubito.metrics.calibration import (
    DEFAULT_LEVELS,
    CalibrationCurve,
    MarginalCalibration,
    calibration_curve,
    calibration_error,
    coverage,
    marginal_calibration,
    pit,
    width,
)
from dubito.metrics.classification import (
    ReliabilityDiagram,
    brier,
    ece,
    mce,
    misclassification_aupr,
    misclassification_auroc,
    ood_aupr,
    ood_auroc,
    reliability_diagram,
)
from dubito.metrics.entropy import (
    function_entropy,
    function_kl,
    knn_entropy,
    knn_kl,
    log_unit_ball_volume,
    spread_entropy,
)
from dubito.metrics.ood import aupr, auroc, fpr_at_tpr
from dubito.metrics.scoring import (
    absolute_error,
    crps,
    crps_ensemble,
    crps_mixture,
    crps_normal,
    crps_quadrature,
    interval_score,
    mae,
    nll,
    pinball,
    register_crps,
    rmse,
    squared_error,
)
from dubito.metrics.summary import SUMMARY_LEVELS, level_key, regression_summary, regression_summary_in_blocks
from dubito.metrics.thresholds import (
    PAPER_NAIVE_ACCURACY,
    PAPER_THRESHOLDS,
    ErrorVarianceCurve,
    accuracy,
    error_variance_curve,
    matched_thresholds,
)

__all__ = [
    "ood",
    "classification",
    "scorers",
    # scoring
    "nll",
    "crps",
    "crps_normal",
    "crps_mixture",
    "crps_ensemble",
    "crps_quadrature",
    "register_crps",
    "interval_score",
    "pinball",
    "squared_error",
    "absolute_error",
    "rmse",
    "mae",
    # calibration
    "DEFAULT_LEVELS",
    "pit",
    "coverage",
    "width",
    "CalibrationCurve",
    "calibration_curve",
    "calibration_error",
    "MarginalCalibration",
    "marginal_calibration",
    # ood
    "auroc",
    "aupr",
    "fpr_at_tpr",
    # classification (accuracy and nll: dubito.metrics.classification.*)
    "brier",
    "ece",
    "mce",
    "ReliabilityDiagram",
    "reliability_diagram",
    "misclassification_auroc",
    "misclassification_aupr",
    "ood_auroc",
    "ood_aupr",
    # k-NN entropy / KL (OOD regression, Pequignot et al.)
    "log_unit_ball_volume",
    "knn_entropy",
    "knn_kl",
    "function_entropy",
    "function_kl",
    "spread_entropy",
    # summary
    "SUMMARY_LEVELS",
    "level_key",
    "regression_summary",
    "regression_summary_in_blocks",
    # thresholds (IC-NLM paper)
    "PAPER_THRESHOLDS",
    "PAPER_NAIVE_ACCURACY",
    "accuracy",
    "matched_thresholds",
    "ErrorVarianceCurve",
    "error_variance_curve",
]
