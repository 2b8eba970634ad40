"""The convergence diagnostics of B-DeepNoise's chains (``DeepNoiseRegressor.diagnostics_``; spec §2.4,
pitfall 6).

Split R-hat and bulk ESS (`dubito.inference.diagnostics`) of the predictive mean E(y | x, θ_m) at
the monitoring rows of the training X and of the train log-likelihood (1/N) Σ_i log p(y_i | x_i, θ_m)
per kept state, never of raw weights (permutation symmetry); both traces are the chains' own
(`dubito.regression.deepnoise`). ``diagnostics_`` follows the shared schema of
`dubito.inference.convergence` (``converged``: max split R-hat of the predictive mean <= 1.1); the
ConvergenceWarning uses the stricter `RHAT_THRESHOLD` / `ESS_THRESHOLD` over both functionals
(``within_thresholds``).
"""

from __future__ import annotations

import warnings

import numpy as np

from dubito.inference.convergence import diagnostics_dict
from dubito.inference.diagnostics import ConvergenceWarning, ess_bulk, split_rhat

__all__ = ["ESS_THRESHOLD", "RHAT_THRESHOLD", "chain_diagnostics"]

#: ConvergenceWarning when the largest split R-hat exceeds this [R]. Vehtari et al. (2021)
#: recommend 1.01 for long runs of rank-normalised R-hat; the chains here keep 125 thinned
#: states each and the monitored functionals carry Monte-Carlo noise, so we flag only clear
#: failures (1.05, between their 1.01 and the classic 1.1 of Gelman & Rubin / BDA3).
RHAT_THRESHOLD = 1.05
#: ConvergenceWarning when the smallest bulk ESS (all chains together) is below this [R]:
#: Vehtari et al. (2021) ask for ~100 per chain before trusting R-hat; 100 in total flags only
#: runs whose kept states are nearly all autocorrelated copies.
ESS_THRESHOLD = 100.0


def chain_diagnostics(loglik_trace: np.ndarray, monitor_trace: np.ndarray, monitor_rows, chain_seconds: np.ndarray,
                      *, sweeps: int, warn: bool) -> dict:
    """The shared schema of `dubito.inference.convergence` (``rhat_mean`` / ``ess_mean``: max
    split R-hat / min bulk ESS of the predictive mean over the monitoring rows; ``rhat_loglik``
    / ``ess_loglik`` of the train log-likelihood; ``converged`` at ``rhat_mean`` <= 1.1) plus
    this estimator's own keys: per-row ``rhat_mean_rows`` / ``ess_mean_rows``, ``max_rhat`` /
    ``min_ess`` over both functionals, and ``within_thresholds`` (max R-hat <= `RHAT_THRESHOLD`
    and min ESS >= `ESS_THRESHOLD`: the stricter rule of the ConvergenceWarning; None with
    fewer than 4 kept states per chain, when nothing is computed and no warning is given).

    ``loglik_trace`` (chains, kept), ``monitor_trace`` (chains, kept, rows) at ``monitor_rows``,
    ``chain_seconds`` (chains,) for ``sweeps`` sweeps each; ``warn``: a ConvergenceWarning (at the
    caller of the estimator's ``fit``) when the stricter rule fails."""
    ll, mon = loglik_trace, monitor_trace
    extra = dict(monitor_rows=monitor_rows, rhat_threshold=RHAT_THRESHOLD, ess_threshold=ESS_THRESHOLD,
                 chain_seconds=chain_seconds,
                 sweeps_per_second=float(sweeps / max(chain_seconds.mean(), 1e-12)))
    if ll.shape[1] < 4:
        nan_m = np.full(mon.shape[2], np.nan)
        extra.update(rhat_mean_rows=nan_m, ess_mean_rows=nan_m.copy(), max_rhat=np.nan, min_ess=np.nan,
                     within_thresholds=None)
        return diagnostics_dict(sampler=True, mean_trace=mon, loglik_trace=ll, **extra)
    r_ll, e_ll = float(split_rhat(ll)), float(ess_bulk(ll))
    r_m = np.atleast_1d(split_rhat(mon))
    e_m = np.atleast_1d(ess_bulk(mon))
    max_rhat = float(np.max(np.r_[r_ll, r_m]))
    min_ess = float(np.min(np.r_[e_ll, e_m]))
    strict = bool(np.isfinite(max_rhat) and max_rhat <= RHAT_THRESHOLD and min_ess >= ESS_THRESHOLD)
    extra.update(rhat_mean_rows=r_m, ess_mean_rows=e_m, max_rhat=max_rhat, min_ess=min_ess,
                 within_thresholds=strict)
    out = diagnostics_dict(sampler=True, mean_trace=mon, loglik_trace=ll, **extra)
    if warn and not strict:
        warnings.warn(
            f"B-DeepNoise: max split R-hat {max_rhat:.3f} (threshold {RHAT_THRESHOLD}), min bulk ESS "
            f"{min_ess:.0f} (threshold {ESS_THRESHOLD:.0f}) over the train log-likelihood and the predictive "
            "mean at the monitoring rows: the chains have not mixed; run more sweeps (n_burnin, n_keep) "
            "or chains. See diagnostics_",
            ConvergenceWarning, stacklevel=4,
        )
    return out
