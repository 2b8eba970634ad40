"""Inference engines shared by methods: reparameterised Gaussian VI with a rank-k factor
covariance (vi), NUTS through Pyro (nuts), and convergence diagnostics (diagnostics)."""
from dubito.inference.diagnostics import ConvergenceWarning, ess, ess_bulk, rhat, split_rhat, summarize
from dubito.inference.vi import Adadelta, FactorGaussian, VIHistory, VIResult, fit_vi

__all__ = [
    "Adadelta", "ConvergenceWarning", "FactorGaussian", "VIHistory", "VIResult",
    "ess", "ess_bulk", "fit_vi", "rhat", "split_rhat", "summarize",
]
