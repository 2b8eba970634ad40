"""MCMC convergence diagnostics: split R-hat and bulk effective sample size.

Formulas follow Vehtari, Gelman, Simpson, Carpenter & Bürkner (2021), "Rank-normalization,
folding, and localization: an improved R-hat for assessing convergence of MCMC", Bayesian
Analysis 16(2), as implemented by ArviZ (``az.rhat(method="rank")``, ``az.ess(method="bulk")``);
ArviZ is not a dependency, the tests check these functions against hand computations and AR(1)
chains with known autocorrelation.

Every function takes draws shaped ``(chains, draws)`` or ``(chains, draws, *param_shape)`` (numpy
or torch) and returns a float for scalar parameters, else an array of ``param_shape``.

- **split R-hat** (BDA3 §11.4): each chain is cut into two halves (the middle draw is dropped
  when the length is odd, as ArviZ does), giving m chains of length n; with W the mean of the
  within-chain variances (ddof 1) and B = n · var(chain means, ddof 1),
  R-hat = sqrt(((n − 1)/n · W + B/n) / W).
- **rank-normalised R-hat** (the default, ``method="rank"``): the maximum of split R-hat on the
  rank-normalised draws (bulk) and on the rank-normalised folded draws |x − median| (tails).
  Rank normalisation: z = Φ⁻¹((r − 3/8)/(S + 1/4)) with r the average rank among all S draws.
- **ESS** (Geyer's initial monotone sequence on the multi-chain autocorrelation,
  BDA3 §11.5 / Stan): ρ̂_t = 1 − (W − mean_c γ̂_{c,t}) / var⁺ with the biased per-chain
  autocovariances γ̂ (divisor n), W their lag-0 mean times n/(n − 1) and
  var⁺ = (n − 1)/n · W + var(chain means, ddof 1); ESS = m n / τ̂ with
  τ̂ = −1 + 2 Σ ρ̂_t (positive pairs, made monotone), τ̂ ≥ 1/log10(m n).
- **bulk ESS**: ESS of the rank-normalised split chains.
"""
from __future__ import annotations

import numpy as np
from scipy.fft import next_fast_len
from scipy.special import ndtri
from scipy.stats import rankdata

__all__ = ["ConvergenceWarning", "split_rhat", "rhat", "ess", "ess_bulk", "autocovariance", "rank_normalize", "split_chains", "summarize"]


def _as_draws(x) -> np.ndarray:
    if hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    a = np.asarray(x, dtype=np.float64)
    if a.ndim < 2:
        raise ValueError(f"draws must be shaped (chains, draws, ...); got shape {a.shape}")
    if a.shape[1] < 4:
        raise ValueError(f"need at least 4 draws per chain; got {a.shape[1]}")
    return a


def _per_param(fn, x) -> np.ndarray | float:
    """Apply ``fn`` to each (chains, draws) slice of x (chains, draws, *shape)."""
    a = _as_draws(x)
    shape = a.shape[2:]
    flat = a.reshape(a.shape[0], a.shape[1], -1)
    out = np.array([fn(flat[:, :, k]) for k in range(flat.shape[2])], dtype=np.float64)
    return float(out[0]) if shape == () else out.reshape(shape)


def split_chains(a: np.ndarray) -> np.ndarray:
    """(m, n) -> (2m, n // 2): first and last halves of each chain (middle draw dropped if n odd)."""
    half = a.shape[1] // 2
    return np.concatenate([a[:, :half], a[:, a.shape[1] - half:]], axis=0)


def rank_normalize(a: np.ndarray) -> np.ndarray:
    """Φ⁻¹((rank − 3/8)/(S + 1/4)) over all S entries of ``a`` (average ranks for ties)."""
    r = rankdata(a, method="average").reshape(a.shape)
    return ndtri((r - 0.375) / (a.size + 0.25))


def autocovariance(a: np.ndarray) -> np.ndarray:
    """Biased autocovariance (divisor n) of each row of (m, n) by FFT; returns (m, n)."""
    n = a.shape[-1]
    x = a - a.mean(axis=-1, keepdims=True)
    size = next_fast_len(2 * n)
    f = np.fft.rfft(x, n=size, axis=-1)
    return np.fft.irfft(f * np.conjugate(f), n=size, axis=-1)[..., :n] / n


def _rhat_2d(a: np.ndarray) -> float:
    m, n = a.shape
    if not np.all(np.isfinite(a)):
        return float("nan")
    w = np.mean(np.var(a, axis=1, ddof=1))
    b = n * np.var(np.mean(a, axis=1), ddof=1)
    if w == 0.0:
        return float("inf") if b > 0 else 1.0   # chains that never move, at different values
    return float(np.sqrt(((n - 1) / n * w + b / n) / w))


def _ess_2d(a: np.ndarray) -> float:
    m, n = a.shape
    if not np.all(np.isfinite(a)):
        return float("nan")
    if np.ptp(a) < np.finfo(np.float64).resolution:
        return float(a.size)
    acov = autocovariance(a)
    mean_var = acov[:, 0].mean() * n / (n - 1.0)
    var_plus = mean_var * (n - 1.0) / n
    if m > 1:
        var_plus += np.var(a.mean(axis=1), ddof=1)
    rho = np.zeros(n)
    rho_even, rho_odd = 1.0, 1.0 - (mean_var - acov[:, 1].mean()) / var_plus
    rho[0], rho[1] = rho_even, rho_odd
    # Geyer's initial positive sequence: sum pairs (ρ_2k + ρ_2k+1) while they stay positive
    t = 1
    while t < n - 3 and rho_even + rho_odd > 0.0:
        rho_even = 1.0 - (mean_var - acov[:, t + 1].mean()) / var_plus
        rho_odd = 1.0 - (mean_var - acov[:, t + 2].mean()) / var_plus
        if rho_even + rho_odd >= 0.0:
            rho[t + 1], rho[t + 2] = rho_even, rho_odd
        t += 2
    max_t = t - 2
    if rho_even > 0.0:
        rho[max_t + 1] = rho_even
    # Geyer's initial monotone sequence
    t = 1
    while t <= max_t - 2:
        if rho[t + 1] + rho[t + 2] > rho[t - 1] + rho[t]:
            rho[t + 1] = rho[t + 2] = (rho[t - 1] + rho[t]) / 2.0
        t += 2
    total = m * n
    tau = -1.0 + 2.0 * rho[: max_t + 1].sum() + rho[max_t + 1: max_t + 2].sum()
    tau = max(tau, 1.0 / np.log10(total))
    return float(total / tau)


def split_rhat(x) -> np.ndarray | float:
    """Classic split R-hat (no rank normalisation) per parameter; see the module docstring."""
    return _per_param(lambda a: _rhat_2d(split_chains(a)), x)


def rhat(x, method: str = "rank") -> np.ndarray | float:
    """R-hat per parameter: ``"rank"`` (default; Vehtari et al. 2021, max of bulk and tail
    rank-normalised split R-hat, as ArviZ) or ``"split"`` (BDA3 split R-hat)."""
    if method == "split":
        return split_rhat(x)
    if method != "rank":
        raise ValueError(f"method must be 'rank' or 'split'; got {method!r}")

    def one(a):
        s = split_chains(a)
        if not np.all(np.isfinite(s)):
            return float("nan")
        bulk = _rhat_2d(rank_normalize(s))
        tail = _rhat_2d(rank_normalize(np.abs(s - np.median(s))))
        return max(bulk, tail)

    return _per_param(one, x)


def ess(x) -> np.ndarray | float:
    """Effective sample size of the draws as given (no splitting, no rank normalisation)."""
    return _per_param(_ess_2d, x)


def ess_bulk(x) -> np.ndarray | float:
    """Bulk ESS (Vehtari et al. 2021): ESS of the rank-normalised split chains (ArviZ's default)."""
    return _per_param(lambda a: _ess_2d(rank_normalize(split_chains(a))), x)


def summarize(x) -> dict[str, np.ndarray | float]:
    """mean, sd, rank R-hat and bulk ESS per parameter of draws (chains, draws, *shape)."""
    a = _as_draws(x)
    flat = a.reshape(-1, *a.shape[2:])
    return {"mean": flat.mean(axis=0), "sd": flat.std(axis=0, ddof=1), "rhat": rhat(a), "ess_bulk": ess_bulk(a)}


class ConvergenceWarning(UserWarning):
    """An inference run that did not converge: R-hat above threshold, NUTS divergences, or VI
    stopped at its iteration limit before its stopping rule was met."""
