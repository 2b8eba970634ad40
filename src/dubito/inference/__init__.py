"""Inference engines shared by methods: diagnostics (R-hat, ESS)."""
from dubito.inference.diagnostics import ess, ess_bulk, rhat, split_rhat, summarize

__all__ = ["ess", "ess_bulk", "rhat", "split_rhat", "summarize"]
