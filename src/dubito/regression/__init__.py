"""Regression estimators, one per file; each returns a Predictive from predict_distribution."""
from dubito.regression.ensemble import DeepEnsembleRegressor

__all__ = ["DeepEnsembleRegressor"]
