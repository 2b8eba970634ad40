"""Inference engines shared by methods: reparameterised Gaussian VI with a rank-k factor
covariance (vi), NUTS through Pyro (nuts), and convergence diagnostics (diagnostics)."""
from dubito.inference.diagnostics import ConvergenceWarning, ess, ess_bulk, rhat, split_rhat, summarize
from dubito.inference.nuts import NUTSResult, run_nuts
from dubito.inference.vi import Adadelta, FactorGaussian, VIHistory, VIResult, fit_vi

__all__ = [
    "Adadelta", "ConvergenceWarning", "FactorGaussian", "NUTSResult", "VIHistory", "VIResult",
    "ess", "ess_bulk", "fit_vi", "rhat", "run_nuts", "split_rhat", "summarize",
]
