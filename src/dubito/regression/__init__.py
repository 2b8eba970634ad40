"""Regression estimators, one per file; each returns a Predictive from predict_distribution."""
from dubito.regression.bnn_nuts import NUTSNetworkRegressor
from dubito.regression.copula import ImplicitCopulaRegressor
from dubito.regression.deepnoise import DeepNoiseRegressor
from dubito.regression.deepnoise_sgd import DeepNoiseSGDRegressor
from dubito.regression.deterministic import DeterministicRegressor, NaiveRegressor
from dubito.regression.dropout import MCDropoutRegressor
from dubito.regression.ensemble import DeepEnsembleRegressor
from dubito.regression.ensemble_hmc import EnsembleHMCRegressor
from dubito.regression.hyper_vi import HyperVIRegressor
from dubito.regression.last_layer_laplace import LastLayerLaplaceRegressor
from dubito.regression.mdn import MixtureDensityRegressor
from dubito.regression.mean_field_vi import MeanFieldVIRegressor

__all__ = [
    "DeepEnsembleRegressor",
    "EnsembleHMCRegressor",
    "DeepNoiseRegressor",
    "DeepNoiseSGDRegressor",
    "DeterministicRegressor",
    "HyperVIRegressor",
    "ImplicitCopulaRegressor",
    "LastLayerLaplaceRegressor",
    "MCDropoutRegressor",
    "MeanFieldVIRegressor",
    "MixtureDensityRegressor",
    "NaiveRegressor",
    "NUTSNetworkRegressor",
]
