"""The shared convergence summary (dubito.inference.convergence): chain oracles and the rule."""
import math

import numpy as np
import pytest

from dubito.inference.convergence import (
    RHAT_CONVERGED,
    SCHEMA_KEYS,
    chain_summary,
    convergence_line,
    convergence_section,
    diagnostics_dict,
    is_converged,
    still_improving,
)
from dubito.inference.diagnostics import ess_bulk, split_rhat


def test_iid_chains_converge_and_chains_from_different_gaussians_do_not():
    """Oracle: 4 chains of i.i.d. N(0, 1) draws have split R-hat 1 + O(1/n) (measured 1.002 at this
    seed; < 1.01 is 4x the sampling sd of R-hat at n = 500) and bulk ESS near the 2000 draws; two
    chains from N(0, 1) and N(3, 1) have R-hat ~ sqrt(1 + 9/4 / 1) > 1.5 (the between-chain
    variance dominates) and are not converged."""
    rng = np.random.default_rng(0)
    iid = rng.normal(size=(4, 500, 3))
    d = diagnostics_dict(sampler=True, mean_trace=iid, loglik_trace=iid[:, :, 0])
    assert d["rhat_mean"] < 1.01 and d["ess_mean"] > 1500
    assert d["converged"] is True and d["stopped_by_cap"] is False
    apart = np.stack([rng.normal(0.0, 1.0, size=(500, 3)), rng.normal(3.0, 1.0, size=(500, 3))])
    d = diagnostics_dict(sampler=True, mean_trace=apart)
    assert d["rhat_mean"] > 1.5 and d["converged"] is False
    # the summary is the max / min over rows of the per-row statistics, not a re-implementation
    mixed = np.concatenate([iid[:2], apart], axis=2)  # rows 0-2 mixed, rows 3-5 not
    r, e = chain_summary(mixed)
    assert r == np.max(split_rhat(mixed)) and e == np.min(ess_bulk(mixed))
    assert r == np.max(split_rhat(apart))


def test_schema_keys_and_types():
    rng = np.random.default_rng(1)
    d = diagnostics_dict(sampler=True, mean_trace=rng.normal(size=(2, 50, 4)), loglik_trace=rng.normal(size=(2, 50)),
                         divergences=np.array([1, 2]), acceptance=np.array([0.7, 0.9]), own_key="kept")
    assert set(SCHEMA_KEYS) <= set(d) and d["own_key"] == "kept"
    assert d["divergences"] == 3 and isinstance(d["divergences"], int)
    assert d["acceptance"] == pytest.approx(0.8)
    for key in ("rhat_mean", "ess_mean", "rhat_loglik", "ess_loglik"):
        assert isinstance(d[key], float) and math.isfinite(d[key])
    vi = diagnostics_dict(sampler=False, stopped_by_cap=True)
    assert all(math.isnan(vi[k]) for k in ("rhat_mean", "ess_mean", "rhat_loglik", "ess_loglik", "acceptance"))
    assert vi["divergences"] is None and vi["stopped_by_cap"] is True and vi["converged"] is False
    assert diagnostics_dict(sampler=False)["converged"] is True
    with pytest.raises(ValueError, match="schema keys"):
        diagnostics_dict(sampler=False, converged=True)


def test_rule():
    assert is_converged(RHAT_CONVERGED, False, sampler=True) is True
    assert is_converged(np.nextafter(RHAT_CONVERGED, 2.0), False, sampler=True) is False
    assert is_converged(float("nan"), False, sampler=True) is False  # a sampler must show it mixed
    assert is_converged(float("nan"), False, sampler=False) is True
    assert is_converged(float("nan"), True, sampler=False) is False
    # too short to split: no R-hat, not converged
    d = diagnostics_dict(sampler=True, mean_trace=np.zeros((2, 3, 1)))
    assert math.isnan(d["rhat_mean"]) and d["converged"] is False
    with pytest.raises(ValueError, match="chains, draws"):
        chain_summary(np.zeros(5))


def test_still_improving():
    t = np.arange(1000.0)
    assert still_improving(100.0 * np.exp(-t / 200.0) + 10.0)       # still falling fast at the end
    assert not still_improving(100.0 * np.exp(-t / 50.0) + 10.0)     # flat for the last 500 epochs
    noisy = 10.0 + np.random.default_rng(0).normal(0, 1e-3, size=1000)
    assert not still_improving(noisy)                                 # noise alone is not progress
    assert still_improving([1.0]) and still_improving([2.0, np.nan])


def test_console_line_and_report_section():
    bad = diagnostics_dict(sampler=True, mean_trace=np.stack([np.zeros((20, 1)), np.ones((20, 1))])
                           + np.random.default_rng(2).normal(0, 0.01, size=(2, 20, 1)))
    line = convergence_line(bad, "run longer (n_burnin / n_keep)")
    assert line.startswith("Convergence: chains have not mixed (max R-hat of the predictive mean ")
    assert f"> {RHAT_CONVERGED}" in line and "run longer (n_burnin / n_keep)" in line and "\n" not in line
    sec = "\n".join(convergence_section(bad))
    assert sec.startswith("## Convergence") and "**Not converged.**" in sec and f"| rhat_mean | {bad['rhat_mean']:.3f} |" in sec
    capped = diagnostics_dict(sampler=False, stopped_by_cap=True)
    assert "iteration cap" in convergence_line(capped)
    good = diagnostics_dict(sampler=False)
    assert convergence_line(good) is None and convergence_line(None) is None
    assert convergence_section(good) == ["## Convergence", "", "Converged: no chains (variational / optimised fit); "
                                         "the fit did not stop at an iteration cap.", ""]
    mixed = diagnostics_dict(sampler=True, mean_trace=np.random.default_rng(3).normal(size=(2, 100, 2)))
    assert convergence_section(mixed)[2].startswith(f"Converged: max split R-hat of the predictive mean "
                                                    f"{mixed['rhat_mean']:.3f} ≤ 1.1")
