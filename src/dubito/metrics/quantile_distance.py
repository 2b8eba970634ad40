"""W1: the L1 distance between inverse CDFs of B-DeepNoise's Table 1 ([C] ``qq_dist``; spec §4.4).

At each input x_j, with the levels q_i = (i + 0.5) / n_levels, i = 0..n_levels-1,

    W1_j = (1 / n_levels) sum_i | Qhat_pred(q_i | x_j) - Qhat_true(q_i | x_j) |,

a midpoint-rule discretisation of the 1-Wasserstein distance int_0^1 |F_pred^-1 - F_true^-1| du.
Qhat_true is ``np.quantile`` (linear interpolation) of the row of true quantiles (the 500
values f(x) + eps(x, i/501) of the generator); Qhat_pred is ``np.quantile`` of the predictive
draws when ``pred`` is an array of draws, or the exact ``pred.quantile(q)`` of a dubito
predictive. The result is the mean of W1_j over inputs (the paper reports it x1000; this
function does not scale).
"""

from __future__ import annotations

import numpy as np

from dubito.predictive.base import RegressionPredictive, as_numpy

__all__ = ["quantile_levels", "quantile_w1"]


def quantile_levels(n_levels: int = 100) -> np.ndarray:
    """The midpoint levels (i + 0.5) / n_levels, i = 0..n_levels-1 ([C])."""
    if isinstance(n_levels, bool) or not isinstance(n_levels, (int, np.integer)) or n_levels < 1:
        raise ValueError(f"n_levels must be a positive int, got {n_levels!r}")
    return (np.arange(n_levels) + 0.5) / n_levels


def quantile_w1(pred, true_quantiles, *, n_levels: int = 100, per_input: bool = False):
    """Mean over inputs of the discretised W1 between predictive and true quantile functions.

    pred : draws (S, N) (S predictive samples for each of N inputs), or a dubito
        `RegressionPredictive` over the N inputs (exact quantiles).
    true_quantiles : (N, K) samples/quantiles of the true law at each input (K = 500 for the
        DeepNoise generators).
    n_levels : number of midpoint levels (100 in [C]).
    per_input : return the (N,) array of W1_j instead of its mean.
    """
    levels = quantile_levels(n_levels)
    truth = as_numpy(true_quantiles, "true_quantiles")
    if truth.ndim != 2 or truth.shape[1] < 1:
        raise ValueError(f"true_quantiles must have shape (N, K), got {truth.shape}")
    if not np.all(np.isfinite(truth)):
        raise ValueError("true_quantiles contain non-finite values")
    n = truth.shape[0]
    q_true = np.quantile(truth, levels, axis=1).T  # (N, n_levels)
    if isinstance(pred, RegressionPredictive):
        if len(pred) != n:
            raise ValueError(f"pred has {len(pred)} inputs but true_quantiles has {n} rows")
        q_pred = pred.quantile(levels[None, :])
    else:
        draws = as_numpy(pred, "pred")
        if draws.ndim != 2 or draws.shape[1] != n or draws.shape[0] < 1:
            raise ValueError(f"pred draws must have shape (S, {n}) (S samples per input), got {draws.shape}")
        if not np.all(np.isfinite(draws)):
            raise ValueError("pred draws contain non-finite values")
        q_pred = np.quantile(draws, levels, axis=0).T
    w1 = np.abs(q_pred - q_true).mean(axis=1)
    return w1 if per_input else float(w1.mean())
