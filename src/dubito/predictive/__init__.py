"""Predictive distributions: what every dubito method returns (see base.py for the contract)."""
from dubito.predictive.base import RegressionPredictive, as_generator, as_numpy
from dubito.predictive.classes import ClassPredictive
from dubito.predictive.grid import GridDensity
from dubito.predictive.mixture import GaussianMixture
from dubito.predictive.normal import Normal
from dubito.predictive.samples import Samples
from dubito.predictive.student import StudentTMixture

__all__ = [
    "RegressionPredictive",
    "Normal",
    "GaussianMixture",
    "StudentTMixture",
    "Samples",
    "GridDensity",
    "ClassPredictive",
    "as_numpy",
    "as_generator",
]
