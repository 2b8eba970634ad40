r"""One convergence summary for every MCMC and VI estimator (``diagnostics_``).

Every sampling or variational regressor (B-DeepNoise, the NUTS BNN, the IC-NLM's VI and NUTS
posteriors, mean-field VI, HyVI) exposes ``diagnostics_``, a dict that carries at least the keys
of `SCHEMA_KEYS` (NaN / None where a key does not apply, e.g. no R-hat for VI):

- ``rhat_mean``: the largest classic split R-hat (BDA3 §11.4, `diagnostics.split_rhat`) of the
  predictive mean E[y | x, θ_s] over the monitored training rows (never raw weights: they are
  permutation-symmetric); ``ess_mean``: the smallest bulk ESS (`diagnostics.ess_bulk`, Vehtari
  et al. 2021) of the same;
- ``rhat_loglik``, ``ess_loglik``: the same for the training log-likelihood trace, where a chain
  exists;
- ``divergences`` (int, NUTS: divergent transitions after warm-up over all chains) and
  ``acceptance`` (NUTS: mean Metropolis acceptance probability over the chains);
- ``stopped_by_cap`` (bool): an optimiser or VI loop ended because it hit its iteration / epoch
  cap rather than its stopping rule (False for samplers);
- ``converged`` (bool): `is_converged`.

The rule (``converged``)::

    converged = (no chain, or rhat_mean <= RHAT_CONVERGED) and not stopped_by_cap

with ``RHAT_CONVERGED`` = 1.1. Vehtari et al. (2021, "Rank-normalization, folding, and
localization", Bayesian Analysis 16(2)) recommend R-hat < 1.01 before *final* inference; 1.1 is
the classic Gelman-Rubin / BDA3 (Gelman et al. 2013, §11.5) flag for chains that have clearly
*not* mixed. This module's flag is a user-facing warning ("treat these intervals with caution"),
so it uses the looser 1.1: above it the chains disagree about the predictive mean itself. The
estimators keep their own, stricter ConvergenceWarning thresholds (e.g. 1.01 for NUTS).
A sampler whose R-hat cannot be computed (fewer than 4 kept draws per chain) is not converged.

`convergence_line` / `convergence_section` turn a ``diagnostics_`` dict into the console line and
the report section of ``dubito run``.
"""

from __future__ import annotations

import math

import numpy as np

from dubito.inference.diagnostics import ess_bulk, split_rhat

__all__ = [
    "PLATEAU_RTOL",
    "PLATEAU_WINDOW",
    "RHAT_CONVERGED",
    "SCHEMA_KEYS",
    "chain_summary",
    "convergence_line",
    "convergence_section",
    "diagnostics_dict",
    "is_converged",
    "still_improving",
]

#: Largest split R-hat of the predictive mean still called converged (Gelman-Rubin's classic 1.1;
#: Vehtari et al. 2021 ask for 1.01 for final inference; see the module docstring).
RHAT_CONVERGED = 1.1
#: `still_improving`: a loss whose mean over the last window lies more than this fraction below
#: that of the window before is still falling (ours: 0.1 % per tenth of the run).
PLATEAU_RTOL = 1e-3
#: `still_improving`: the window, as a fraction of the epochs run (ours: the last two tenths).
PLATEAU_WINDOW = 0.1

SCHEMA_KEYS = ("rhat_mean", "ess_mean", "rhat_loglik", "ess_loglik", "divergences", "acceptance",
               "stopped_by_cap", "converged")

_NAN = float("nan")


def chain_summary(trace) -> tuple[float, float]:
    """(max split R-hat, min bulk ESS) of a trace (chains, draws) or (chains, draws, rows), over
    the rows; (NaN, NaN) for None or fewer than 4 draws per chain (too short to split)."""
    if trace is None:
        return _NAN, _NAN
    a = np.asarray(trace, dtype=np.float64)
    if a.ndim < 2:
        raise ValueError(f"a trace must be shaped (chains, draws[, rows]); got shape {a.shape}")
    if a.shape[1] < 4 or a.size == 0:
        return _NAN, _NAN
    r = np.atleast_1d(split_rhat(a))
    e = np.atleast_1d(ess_bulk(a))
    r_max = float(np.max(r)) if not np.any(np.isnan(r)) else _NAN
    e_min = float(np.min(e)) if not np.any(np.isnan(e)) else _NAN
    return r_max, e_min


def is_converged(rhat_mean, stopped_by_cap: bool, *, sampler: bool) -> bool:
    """The rule of the module docstring: a sampler needs a finite ``rhat_mean`` <= `RHAT_CONVERGED`;
    an optimiser or VI loop (``sampler=False``) needs ``stopped_by_cap`` False (and its R-hat,
    if it has one, <= the threshold)."""
    r = _NAN if rhat_mean is None else float(rhat_mean)
    if bool(stopped_by_cap):
        return False
    if sampler:
        return math.isfinite(r) and r <= RHAT_CONVERGED
    return math.isnan(r) or r <= RHAT_CONVERGED


def still_improving(curve, *, window: float = PLATEAU_WINDOW, rtol: float = PLATEAU_RTOL) -> bool:
    """Whether a minimised loss curve (one value per epoch) was still falling when it ended:
    with w = max(1, floor(window · T)) epochs and means L_prev, L_last over the last two
    windows, ``L_prev - L_last > rtol · |L_prev|``. Fewer than 2 epochs, or a non-finite end:
    True (no plateau can be shown). Mean-field VI reports it beside ``stopped_by_cap`` (which is
    its held-out rule's verdict) as a hint whether a capped run was still learning."""
    c = np.asarray(curve, dtype=np.float64).ravel()
    if c.size < 2:
        return True
    w = max(1, int(window * c.size))
    w = min(w, c.size // 2)
    last, prev = c[-w:], c[-2 * w:-w]
    if not (np.all(np.isfinite(last)) and np.all(np.isfinite(prev))):
        return True
    l_last, l_prev = float(last.mean()), float(prev.mean())
    return l_prev - l_last > rtol * abs(l_prev)


def diagnostics_dict(*, sampler: bool, mean_trace=None, loglik_trace=None, divergences=None, acceptance=None,
                     stopped_by_cap: bool = False, **extra) -> dict:
    """The ``diagnostics_`` dict: the `SCHEMA_KEYS` computed from the traces, then ``extra``
    (an estimator's own keys; an extra key may not redefine a schema key).

    mean_trace : (chains, draws, rows) predictive mean E[y | x, θ] at the monitored rows, or None.
    loglik_trace : (chains, draws) training log-likelihood per draw, or None.
    divergences : per-chain counts or a total (summed to an int), None where not NUTS.
    acceptance : per-chain mean acceptance probabilities (averaged), None where not NUTS.
    stopped_by_cap : the loop hit its cap before its stopping rule (False for samplers).
    """
    clash = set(extra) & set(SCHEMA_KEYS)
    if clash:
        raise ValueError(f"extra diagnostics may not redefine the schema keys {sorted(clash)}")
    r_m, e_m = chain_summary(mean_trace)
    r_ll, e_ll = chain_summary(loglik_trace)
    div = None if divergences is None else int(np.sum(np.asarray(divergences)))
    acc_arr = None if acceptance is None else np.asarray(acceptance, dtype=np.float64)
    acc = float(np.nanmean(acc_arr)) if acc_arr is not None and np.any(np.isfinite(acc_arr)) else _NAN
    stopped = bool(stopped_by_cap) and not sampler
    out = {"rhat_mean": r_m, "ess_mean": e_m, "rhat_loglik": r_ll, "ess_loglik": e_ll, "divergences": div,
           "acceptance": acc, "stopped_by_cap": stopped, "converged": is_converged(r_m, stopped, sampler=sampler)}
    out.update(extra)
    return out


def _num(x, digits: int) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "n/a"
    return f"{float(x):.{digits}f}"


def convergence_line(diag, hint: str = "run longer") -> str | None:
    """One console line when ``diag`` says the fit did not converge (or stopped at its cap), else
    None. ``hint`` names what to change (e.g. "run longer (n_burnin / n_keep)")."""
    if not isinstance(diag, dict) or diag.get("converged", True) is not False:
        return None
    r, e = diag.get("rhat_mean"), diag.get("ess_mean")
    parts = []
    if r is not None and math.isfinite(float(r)) and float(r) > RHAT_CONVERGED:
        parts.append(f"chains have not mixed (max R-hat of the predictive mean {_num(r, 2)} > {RHAT_CONVERGED}, "
                     f"bulk ESS {_num(e, 0)})")
    elif r is not None and not math.isfinite(float(r)) and not diag.get("stopped_by_cap"):
        parts.append("chains too short to check mixing (R-hat of the predictive mean not computable)")
    if diag.get("stopped_by_cap"):
        parts.append("the optimiser hit its iteration cap before its stopping rule was met (still improving)")
    if not parts:
        parts.append("not converged")
    return f"Convergence: {'; '.join(parts)}; treat these intervals with caution — {hint}"


def convergence_section(diag, hint: str = "run longer") -> list[str]:
    """Markdown lines of a "## Convergence" section for ``diag`` (a ``diagnostics_`` dict): one
    line when converged; otherwise the verdict, a table of the `SCHEMA_KEYS` and what they mean."""
    lines = ["## Convergence", ""]
    line = convergence_line(diag, hint)
    if line is None:
        r = diag.get("rhat_mean")
        chain = (f"max split R-hat of the predictive mean {_num(r, 3)} ≤ {RHAT_CONVERGED}, bulk ESS "
                 f"{_num(diag.get('ess_mean'), 0)}" if r is not None and math.isfinite(float(r))
                 else "no chains (variational / optimised fit)")
        return [*lines, f"Converged: {chain}; the fit did not stop at an iteration cap.", ""]
    text = line[len("Convergence: "):]
    lines += ["**Not converged.** " + text[0].upper() + text[1:] + ".", "", "| diagnostic | value |", "|---|---|"]
    digits = {"rhat_mean": 3, "ess_mean": 0, "rhat_loglik": 3, "ess_loglik": 0, "acceptance": 3}
    for key in SCHEMA_KEYS:
        v = diag.get(key)
        text = _num(v, digits[key]) if key in digits else ("n/a" if v is None else str(v))
        lines.append(f"| {key} | {text} |")
    lines += ["", (f"R-hat: classic split R-hat (BDA3) of the predictive mean at the monitored training rows; "
                   f"converged means ≤ {RHAT_CONVERGED} (Gelman-Rubin's 'not mixed' flag; Vehtari et al. 2021 "
                   "ask for ≤ 1.01 before final inference). ESS: bulk effective sample size (Vehtari et al. 2021); "
                   "stopped_by_cap: the optimiser ended at its iteration cap, not by its stopping rule."), ""]
    return lines
