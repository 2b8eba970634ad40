"""Recalibration and conformal prediction for any predictive: regression and classification.

Regression: `Recalibrator` ("conformal": a split-conformal predictive system; "isotonic":
Kuleshov, Fenner & Ermon 2018) turns a predictive into a `WarpedPredictive` G = H(F(y));
`conformal_interval` gives split-conformal intervals (absolute, normalised or CQR scores).
Classification: `TemperatureScaling` (Guo et al. 2017) and `ConformalSets` (LAC, APS, RAPS).
"""

from dubito.recalibrate.conformal_predictive import conformal_knots
from dubito.recalibrate.conformal_sets import ConformalSets
from dubito.recalibrate.interval import conformal_interval
from dubito.recalibrate.isotonic import isotonic_knots
from dubito.recalibrate.recalibrator import Recalibrator
from dubito.recalibrate.split import CAL_FRACTION, calibration_split
from dubito.recalibrate.temperature import TemperatureScaling
from dubito.recalibrate.warped import WarpedPredictive

__all__ = ["Recalibrator", "WarpedPredictive", "conformal_interval", "conformal_knots", "isotonic_knots",
           "TemperatureScaling", "ConformalSets", "calibration_split", "CAL_FRACTION"]
