"""Regression estimators, one per file; each returns a Predictive from predict_distribution."""
from dubito.regression.copula import ImplicitCopulaRegressor
from dubito.regression.deterministic import DeterministicRegressor, NaiveRegressor
from dubito.regression.dropout import MCDropoutRegressor
from dubito.regression.ensemble import DeepEnsembleRegressor
from dubito.regression.mdn import MixtureDensityRegressor

__all__ = [
    "DeepEnsembleRegressor",
    "DeterministicRegressor",
    "ImplicitCopulaRegressor",
    "MCDropoutRegressor",
    "MixtureDensityRegressor",
    "NaiveRegressor",
]
