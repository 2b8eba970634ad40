"""The report's sections computed from the stored cells: Tables 1 and 2 beside the paper's, the claims checked, chain diagnostics, missing cells."""

from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

from dubito.experiments import get
from dubito.experiments.claims import claim_block, missing_lines, section
from dubito.experiments.claims import verdict as _verdict
from dubito.experiments.deepnoise.data import parse_dataset
from dubito.experiments.deepnoise.paper import (
    PAPER_BEST_NLL,
    PAPER_BEST_RMSE,
    TABLE1,
    TABLE2,
    W1_ANCHORS,
    WEPI_COPY_ERROR,
)
from dubito.experiments.deepnoise.vocab import (
    BASELINES_T1,
    BASELINES_T2,
    BDN,
    KIND_SHORT,
    SYNTHETIC_N,
    UCI_SETS,
    VARIANT,
)

# ---------------------------------------------------------------------------------- report


class _Table:
    """Per (dataset, variant, metric) values over the stored cells (splits)."""

    def __init__(self, rows):
        self.values: dict[tuple[str, str, str], dict[int, float]] = {}
        self.rows = list(rows)
        for r in self.rows:
            for variant, metrics in (r.variants or {}).items():
                for k, v in (metrics or {}).items():
                    if v is not None:
                        self.values.setdefault((r.dataset, variant, k), {})[int(r.split) * 1000 + int(r.seed)] = float(v)
        self.datasets = list(dict.fromkeys(r.dataset for r in self.rows))
        self.variants = list(dict.fromkeys(v for r in self.rows for v in (r.variants or {})))

    def get(self, dataset: str, variant: str, metric: str) -> list[float]:
        return list(self.values.get((dataset, variant, metric), {}).values())

    def mean(self, dataset: str, variant: str, metric: str) -> float | None:
        """Mean over splits; inf when any split is inf (the paper's ∞); None when not run."""
        v = self.get(dataset, variant, metric)
        if not v:
            return None
        a = np.asarray(v, dtype=float)
        if np.any(np.isposinf(a)):
            return math.inf
        a = a[np.isfinite(a)]
        return float(a.mean()) if a.size else None


def _fmt(x: float | None, digits: int = 2) -> str:
    if x is None:
        return "—"
    if math.isinf(x):
        return "∞" if x > 0 else "−∞"
    if x != 0 and abs(x) < 0.05 and digits <= 2:
        return f"{x:.2g}" if abs(x) >= 1e-3 else f"{x:.1e}"
    return f"{x:.{digits}f}"


def _ours(t: _Table, dataset: str, variant: str, metric: str, digits: int) -> str:
    """mean ± sd (ddof 1) over splits and their count, the paper's style; ∞ with its count."""
    v = t.get(dataset, variant, metric)
    if not v:
        return "—"
    a = np.asarray(v, dtype=float)
    n_inf = int(np.sum(np.isposinf(a)))
    if n_inf:
        return f"∞ ({n_inf}/{a.size})"
    sd = f" ± {_fmt(float(np.std(a, ddof=1)), digits)}" if a.size > 1 else ""
    return f"{_fmt(float(a.mean()), digits)}{sd} ({a.size})"


def _paper_cell(value: float, sd: float | None, digits: int, dagger: bool = False) -> str:
    if math.isinf(value):
        return "∞"
    text = f"{value:.{digits}f}" + (f" ± {sd:.{digits}f}" if sd is not None else "")
    return text + (" †" if dagger else "")


def _table1(t: _Table) -> list[str]:
    cols = [f"{k}-{n}" for k in KIND_SHORT for n in SYNTHETIC_N]
    present = [c for c in cols if any(t.get(c, v, "w1") for v in t.variants)]
    extra = sorted({ds for ds in t.datasets if parse_dataset(ds).kind == "synthetic"} - set(cols))
    present += extra
    if not present:
        return []
    variants = [v for v in (*BASELINES_T1, "DMC", BDN, VARIANT["deepnoise-paper-code"], VARIANT["deepnoise-sgd"])
                if any(t.get(c, v, "w1") for c in present)]
    out = ["## Table 1: W1 x 1000 on the synthetic data, ours [paper]", "",
           "Each cell: our mean ± sd over the repeats run (their number) and, in brackets, the paper's mean ± sd "
           "over 20 repeats. Lower is better.", "",
           "| method | " + " | ".join(present) + " |", "|---|" + "---:|" * len(present)]
    for v in variants:
        cells = []
        for c in present:
            kind, _, n = c.partition("-")
            paper = TABLE1.get(kind, {}).get(v)
            ref = ""
            if paper and n.isdigit() and int(n) in SYNTHETIC_N:
                m, sd = paper[SYNTHETIC_N.index(int(n))]
                ref = f" [{m} ± {sd}]"
            cells.append(_ours(t, c, v, "w1", 1) + ref)
        out.append(f"| {v} | " + " | ".join(cells) + " |")
    out += ["", "Reference levels from the exact truth (spec §6.2 [V], independent of N): a homoscedastic Gaussian "
            "around the true mean with the pooled sd scores " + ", ".join(f"{k} {a[1]}" for k, a in W1_ANCHORS.items())
            + "; a heteroscedastic Gaussian with the true per-x mean and sd " + ", ".join(f"{k} {a[2]}" for k, a in W1_ANCHORS.items())
            + "; 50,000 draws from the true law (the metric's floor) " + ", ".join(f"{k} {a[0]}" for k, a in W1_ANCHORS.items())
            + ". A Gaussian predictive cannot go below the second; the paper's VI sits at the first."]
    return [*out, ""]


def _uci_rows(t: _Table) -> list[str]:
    order = {name: i for i, name in enumerate(UCI_SETS)}
    ds = [d for d in t.datasets if parse_dataset(d).kind == "uci"]
    return sorted(ds, key=lambda d: (order[parse_dataset(d).name], parse_dataset(d).standard))


def _table2(t: _Table) -> list[str]:
    rows = _uci_rows(t)
    if not rows:
        return []
    variants = [v for v in (*BASELINES_T2, BDN, VARIANT["deepnoise-paper-code"], VARIANT["deepnoise-sgd"])
                if any(t.get(d, v, "rmse") for d in rows)]
    out = ["## Table 2: UCI test metrics, ours [paper]", "",
           "Each cell: our mean ± sd over the splits run (their number; `∞ (k/n)`: k of n splits had no valid "
           "95 % EPI, so the paper's convention gives ∞) and, in brackets, the paper's mean ± sd. `-gal` rows "
           "use Gal's standard splits, the others seeded random 90/10 splits; both beside the same paper "
           "numbers. † marks the paper's copy-error WEPI entries (unusable).", ""]
    for metric, label in (("rmse", "RMSE"), ("nll", "NLL"), ("wepi_95", "WEPI-95 (median width)")):
        out += [f"**{label}**", "", "| dataset | " + " | ".join(variants) + " |", "|---|" + "---:|" * len(variants)]
        for d in rows:
            base = parse_dataset(d).name
            cells = []
            for v in variants:
                ref = TABLE2[metric].get(base, {}).get(v)
                text = _ours(t, d, v, metric, 3 if base in ("naval", "kin8nm") else 2)
                if ref:
                    dag = metric == "wepi_95" and v == BDN and base in WEPI_COPY_ERROR
                    text += f" [{_paper_cell(ref[0], ref[1], 2, dag)}]"
                cells.append(text)
            out.append(f"| {d} | " + " | ".join(cells) + " |")
        out.append("")
    return out


def _best_or_tied(t: _Table, dataset: str, metric: str, rivals: tuple[str, ...]) -> tuple[bool, str] | None:
    """B-DeepNoise's mean rounded to the paper's 2 decimals <= every rival's rounded mean (the
    paper's own tie rule: Kin8nm and Naval RMSE are printed ties)."""
    ours = t.mean(dataset, BDN, metric)
    others = {v: t.mean(dataset, v, metric) for v in rivals if t.mean(dataset, v, metric) is not None}
    if ours is None or not others:
        return None
    best = min(round(x, 2) for x in others.values())
    ok = round(ours, 2) <= best
    text = f"{BDN} {_fmt(ours, 3)} vs " + ", ".join(f"{v} {_fmt(x, 3)}" for v, x in others.items())
    return ok, text


def _claim_table2(t: _Table, metric: str, paper_best: tuple[str, ...], paper_count: str) -> list[str]:
    out, hits, n = [], 0, 0
    for d in _uci_rows(t):
        res = _best_or_tied(t, d, metric, BASELINES_T2)
        if res is None:
            continue
        ok, text = res
        base = parse_dataset(d).name
        missing = [v for v in BASELINES_T2 if t.mean(d, v, metric) is None]
        n += 1
        hits += ok
        out.append(f"  - {d}: {text} -> best or tied: **{ok}** (paper: {base in paper_best})"
                   + (f"; not run here: {', '.join(missing)}" if missing else "") + ".")
    if n:
        share = hits / n
        # the paper's claim is "best on most sets" (7 of 9): partly only while B-DeepNoise is still
        # best on at least half the views, not for any single hit
        verdict = "holds" if share >= 7 / 9 - 1e-9 else ("partly" if share >= 0.5 else "does not hold")
        out.append(f"  - B-DeepNoise best or tied on {hits} of {n} dataset views run (the paper: {paper_count}; "
                   f"rule: means rounded to the paper's 2 decimals) -> **{verdict}** (holds at a share >= 7/9, "
                   f"partly at >= 1/2).")
    return out


def _w1_mean(t: _Table, kind: str, n: int, v: str) -> float | None:
    return t.mean(f"{kind}-{n}", v, "w1")


def _claim_w1_rate(t: _Table) -> list[str]:
    """Claim: B-DeepNoise's W1 improves fastest with N (ratio W1(N_max) / W1(N_min) smallest)."""
    out = []
    for kind in KIND_SHORT:
        ns = [n for n in SYNTHETIC_N if _w1_mean(t, kind, n, BDN) is not None]
        if len(ns) < 2:
            continue
        lo, hi = ns[0], ns[-1]
        ratios = {}
        for v in (*BASELINES_T1, "DMC", BDN):
            a, b = _w1_mean(t, kind, lo, v), _w1_mean(t, kind, hi, v)
            if a is not None and b is not None and a > 0:
                ratios[v] = b / a
        if len(ratios) < 2:
            continue
        paper = {v: TABLE1[kind][v][SYNTHETIC_N.index(hi)][0] / TABLE1[kind][v][SYNTHETIC_N.index(lo)][0]
                 for v in TABLE1[kind]}
        ok = min(ratios, key=ratios.get) == BDN
        out.append(f"  - {kind}: W1(N={hi}) / W1(N={lo}) " + ", ".join(f"{v} {r:.2f}" for v, r in sorted(ratios.items(), key=lambda kv: kv[1]))
                   + f" (paper: {BDN} {paper[BDN]:.2f}, best baseline "
                   + f"{min(r for v, r in paper.items() if v != BDN):.2f}) -> fastest: **{ok}**.")
    return out


def _claim_w1_settings(t: _Table) -> list[str]:
    """Claim: B-DeepNoise has the smallest W1 in all settings but het and multi at N = 1000, where
    it is worse than BP and DE."""
    out = []
    for kind in KIND_SHORT:
        for n in SYNTHETIC_N:
            d = f"{kind}-{n}"
            ours = t.mean(d, BDN, "w1")
            others = {v: t.mean(d, v, "w1") for v in (*BASELINES_T1, "DMC") if t.mean(d, v, "w1") is not None}
            if ours is None or not others:
                continue
            exception = kind in ("het", "multi") and n == 1000
            if exception:
                rivals = [v for v in ("BP", "DE") if v in others]
                if not rivals:
                    continue
                ok = all(ours > others[v] for v in rivals)
                want = f"worse than {' and '.join(rivals)}"
            else:
                ok = round(ours) <= min(round(x) for x in others.values())
                want = "the smallest"
            out.append(f"  - {d}: {BDN} {ours:.1f}, " + ", ".join(f"{v} {x:.1f}" for v, x in others.items())
                       + f" -> {want}: **{ok}**.")
    return out


def _claim_wepi(t: _Table) -> list[str]:
    out = []
    for d in _uci_rows(t):
        ours = t.mean(d, BDN, "wepi_95")
        others = {v: t.mean(d, v, "wepi_95") for v in BASELINES_T2 if t.mean(d, v, "wepi_95") is not None}
        if ours is None or not others:
            continue
        ok = ours <= min(others.values())
        base = parse_dataset(d).name
        dag = " (the paper's entry is the † copy error)" if base in WEPI_COPY_ERROR else ""
        out.append(f"  - {d}: {BDN} {_fmt(ours, 3)} vs " + ", ".join(f"{v} {_fmt(x, 3)}" for v, x in others.items())
                   + f" -> narrowest: **{ok}**{dag}.")
    return out


def _diagnostic_values(diag: Any) -> dict[str, float]:
    """One cell's R-hat / ESS from the estimator's ``diagnostics_``, split by functional: ``mean``
    (the predictive mean at the monitoring rows: max R-hat, min ESS over the rows) and ``loglik``
    (the train log-likelihood); keys ``mean_rhat``, ``mean_ess``, ``loglik_rhat``, ``loglik_ess``
    where present and finite."""
    out: dict[str, float] = {}
    if not isinstance(diag, Mapping):
        return out
    for kind in ("mean", "loglik"):
        for stat in ("rhat", "ess"):
            value = diag.get(f"{stat}_{kind}")
            if value is None:
                continue
            arr = np.asarray(value, dtype=float).ravel()
            arr = arr[np.isfinite(arr)]
            if arr.size:
                out[f"{kind}_{stat}"] = float(arr.max() if stat == "rhat" else arr.min())
    return out


def _diagnostics(rows) -> list[str]:
    """The chains' R-hat / ESS of the predictive functionals (what the estimator reports), per
    dataset and variant over the stored splits: the predictive mean and the train log-likelihood
    apart, since they mix at different speeds (spec pitfall 6)."""
    agg: dict[tuple[str, str], dict[str, list]] = {}
    for r in rows:
        if not r.method.startswith("deepnoise") or r.method == "deepnoise-sgd":
            continue
        diag = (r.info or {}).get("diagnostics")
        a = agg.setdefault((r.dataset, VARIANT.get(r.method, r.method)), {"warned": [], "speed": [], "chain_s": []})
        for key, value in _diagnostic_values(diag).items():
            a.setdefault(key, []).append(value)
        diag = diag if isinstance(diag, Mapping) else {}
        speed = diag.get("sweeps_per_second")
        if isinstance(speed, (int, float)):
            a["speed"].append(float(speed))
        chain_s = diag.get("chain_seconds")
        if chain_s is not None and np.size(chain_s):
            a["chain_s"].append(float(np.sum(chain_s)))
        a["warned"].append(bool((r.info or {}).get("warnings")))

    def worst(a: dict, key: str, digits: int) -> str:
        values = a.get(key, [])
        if not values:
            return "—"
        return _fmt(max(values) if key.endswith("rhat") else min(values), digits)

    lines = []
    for (ds, v), a in sorted(agg.items()):
        if not any(k.endswith(("rhat", "ess")) for k in a):
            continue
        lines.append(f"| {ds} | {v} | {len(a['warned'])} | {worst(a, 'mean_rhat', 3)} | {worst(a, 'mean_ess', 0)} | "
                     f"{worst(a, 'loglik_rhat', 3)} | {worst(a, 'loglik_ess', 0)} | {sum(a['warned'])} | "
                     f"{_fmt(float(np.mean(a['speed'])), 1) if a['speed'] else '—'} | "
                     f"{_fmt(float(np.mean(a['chain_s'])) / 60.0, 1) if a['chain_s'] else '—'} |")
    if not lines:
        return []
    return section("B-DeepNoise chain diagnostics",
                   "Split R-hat (max) and bulk ESS (min) over the stored cells of the estimator's monitored functionals "
                   "(spec §2.4: not raw weights, which are permutation-symmetric): the predictive mean at 20 training "
                   "rows, and the train log-likelihood, which also tracks the noise variances and the latents (spec "
                   "pitfall 6: slow mixing of the data augmentation); the number of cells whose fit warned (ConvergenceWarning at R-hat "
                   "> 1.05 or ESS < 100 on either, or others; the cells' info has the messages); the chains' seconds summed "
                   "over chains (init included), mean over cells: cumulative over an interrupted and resumed fit, whose "
                   "cell wall time in the compute lines counts only the run that finished it.",
                   ["| dataset | variant | cells | R-hat mean | ESS mean | R-hat log-lik | ESS log-lik | "
                    "cells with warnings | sweeps / s per chain (incl. init) | chain CPU min per cell |",
                    "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|", *lines])


def _missing(rows, preset) -> list[str]:
    return missing_lines(get("deepnoise"), rows, preset, "the sections below use only the stored ones")


ANOMALIES = [
    "- † The five B-DeepNoise WEPI-95 entries for yacht, boston, energy, concrete and wine equal its NLL "
    "entries: a copy error in [P] (a 95 % interval of width 2.28 on boston, where the RMSE is 2.84, is "
    "impossible). They are shown but never used as targets (spec §5).",
    "- BNN RMSE on energy, concrete and power (10.3, 17.1, 17.7) is about the target sd: the paper's HMC did "
    "not fit. DMC on naval (RMSE 509.93 with a target sd of 0.015) and kin8nm (2.27) is a broken baseline. "
    "Our baselines are not tuned to reproduce these numbers (spec pitfall 11); differences there are flagged "
    "but expected.",
    "- Naval is printed with 2 decimals (0.00 everywhere); printed ± 0 / ± 0.00 are compared with a tolerance "
    "of half the last digit instead of a spread of 0.",
    "- The paper's ± is the sd over repeats/splits ([C] `retrieve-synthetic.sh`), not a standard error, though "
    "the text speaks of 'standard errors'. Our per-dataset tables further down show standard errors; the Table 1/2 "
    "sections show sds, like the paper.",
    "- [P] says the baselines use 4 x 50 hard tanh, but [C]'s BP and DE use ReLU with separate mean and sd nets "
    "(spec pitfall 11); the paper's baseline hyper-parameters are in the missing supplement.",
]


def report_sections(rows, preset) -> list[str]:
    """Markdown after the notes: the missing cells, Tables 1 and 2 ours beside the paper, the
    paper's claims judged from the stored numbers, the paper's anomalies, chain diagnostics."""
    t = _Table(rows)
    nc = "not checkable here (no cells stored for it)"

    def block(title: str, lines: list[str], how: str = "") -> list[str]:
        return claim_block(title, lines, how, empty=nc)

    out = ["## Cells", "", *_missing(rows, preset), ""]
    out += _table1(t)
    out += _table2(t)
    w1_rate, w1_set = _claim_w1_rate(t), _claim_w1_settings(t)
    flags_set = ["**True**" in x for x in w1_set]
    out += ["## The paper's claims, checked", "",
            "Each headline claim (spec §5) judged from the means over the stored cells; \"partly\": some "
            "datasets or settings agree, others not.", ""]
    out += block("Table 2 — B-DeepNoise has the best or tied-best RMSE on 7 of 9 datasets (strictly best on 5; "
                 "kin8nm and naval ties; not boston and wine).",
                 _claim_table2(t, "rmse", PAPER_BEST_RMSE, "7 of 9"))
    out += block("Table 2 — B-DeepNoise has the best NLL on 7 of 9 datasets (not wine and protein).",
                 _claim_table2(t, "nll", PAPER_BEST_NLL, "7 of 9"))
    out += block("Table 1 — B-DeepNoise's W1 improves fastest with N.", w1_rate,
                 "(the ratio W1 at the largest N over W1 at the smallest N run, smallest for B-DeepNoise)")
    out += block("Table 1 — B-DeepNoise has the smallest W1 in all settings but two: at N = 1000 for het and "
                 "multi it is worse than BP and DE.",
                 w1_set + ([f"  - {sum(flags_set)} of {len(flags_set)} settings as the paper says -> "
                            f"**{_verdict(flags_set)}**."] if flags_set else []),
                 "(W1 rounded to integers as printed)")
    out += block("Text — B-DeepNoise has the uniformly narrowest WEPI-95.", _claim_wepi(t),
                 "(five of the paper's B-DeepNoise entries are the † copy error, so the paper's table cannot "
                 "support the claim there)")
    out += ["", "## Anomalies in the paper's tables", "", *ANOMALIES, ""]
    out += _diagnostics(rows)
    return out
