"""Predictive distributions: what every dubito method returns (see base.py for the contract)."""
from dubito.predictive.base import RegressionPredictive

__all__ = ["RegressionPredictive"]
