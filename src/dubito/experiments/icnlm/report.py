"""The report's sections computed from the stored cells: claims 1-9 and checks C1-C7, thresholds, missing cells."""

from __future__ import annotations

import numpy as np
from scipy.stats import spearmanr

from dubito.experiments import get
from dubito.experiments.claims import (
    CellTable,
    claim_block,
    missing_lines,
    section,
    verdict,
)
from dubito.experiments.claims import fmt as _f
from dubito.experiments.icnlm.vocab import DRIVING, ICNLM_VARIANTS, MC_NOISE, MC_PAPER

# ---------------------------------------------------------------------------------- claims
# The report (`dubito.experiments.report`) calls `report_sections(rows, preset)` after the notes:
# each claim of the paper (spec §4: 1-9) and each check of spec §5 (C1-C7) is evaluated from the
# stored numbers, per data set, as "holds", "does not hold", "partly" or "not checkable here".

_IC_VI = ("IC-NLM ridge VI", "IC-NLM horseshoe VI")
_BENCH = (MC_PAPER, MC_NOISE, "MDN", "Deterministic")


class _Table(CellTable):
    """Means over the stored cells of each (dataset, variant, metric), driving first; cell infos per method."""

    def __init__(self, rows):
        rows = list(rows)
        super().__init__(rows, dict.fromkeys(r.dataset for r in sorted(rows, key=lambda r: (r.dataset not in DRIVING, r.dataset))))

    def share_ratio(self, dataset: str, variant: str, share: float = 0.2) -> float | None:
        """MSE of the ``share`` of test points with the smallest predictive variance over the MSE of
        all, from the "error_variance" artefacts, averaged over cells (lower: the variance ranks the
        errors better; 1: uninformative)."""
        vals = []
        for r in self.rows:
            ev = (r.artefacts or {}).get("error_variance") if r.dataset == dataset else None
            if not ev or variant not in ev.get("variants", {}):
                continue
            shares = np.asarray(ev["share"], dtype=float)
            mse = np.asarray(ev["variants"][variant]["mse_share"], dtype=float)
            k = int(np.argmin(np.abs(shares - share)))
            if np.isfinite(mse[k]) and np.isfinite(mse[-1]) and mse[-1] > 0:
                vals.append(mse[k] / mse[-1])
        return float(np.mean(vals)) if vals else None

    def infos(self, dataset: str, method: str) -> list[dict]:
        return [r.info or {} for r in self.rows if r.dataset == dataset and r.method == method]

    def have(self, dataset: str, variants, metric: str) -> bool:
        return all(self.mean(dataset, v, metric) is not None for v in variants)


def _verdict(flags: list[bool]) -> str:
    return verdict(flags, empty="not checkable here (no cells)")


def _order(t: _Table, ds: str, variants, metric: str, reverse: bool = False) -> str:
    vals = [(v, t.mean(ds, v, metric)) for v in variants if t.mean(ds, v, metric) is not None]
    vals.sort(key=lambda kv: kv[1], reverse=reverse)
    return " < ".join(f"{v} {_f(m)}" for v, m in vals) if not reverse else " > ".join(f"{v} {_f(m)}" for v, m in vals)


def _claim_vi_nuts(t: _Table) -> list[str]:
    """Claim 1 / C1: posterior means (and sds) of VI and NUTS, predictive MAE/MSE."""
    out = []
    for ds in t.datasets:
        parts = []
        for prior in ("ridge", "horseshoe"):
            vi, nuts = f"IC-NLM {prior} VI", f"IC-NLM {prior} NUTS"
            dz, ratios, flags, rhat, div = [], [], [], [], 0
            for info in t.infos(ds, "icnlm"):
                post = info.get("posterior", {})
                if vi not in post or nuts not in post:
                    continue
                names = post[vi]["names"]
                beta = [i for i, n in enumerate(names) if n.startswith("beta")] or list(range(len(names)))
                mv, sv = np.asarray(post[vi]["mean"]), np.asarray(post[vi]["sd"])
                mn, sn = np.asarray(post[nuts]["mean"]), np.asarray(post[nuts]["sd"])
                dz.append(float(np.max(np.abs(mv[beta] - mn[beta]) / np.maximum(sn[beta], 1e-12))))
                ratios.extend((sv[beta] / np.maximum(sn[beta], 1e-12)).tolist())
                d = info.get("diagnostics", {}).get(nuts, {})
                rhat.append(d.get("rhat_max", np.nan))
                div += int(d.get("divergences", 0))
            if not dz:
                continue
            rel = []
            for metric in ("mae", "mse"):
                a, b = t.mean(ds, vi, metric), t.mean(ds, nuts, metric)
                if a is not None and b is not None:
                    rel.append(abs(a - b) / abs(b))
            lo, hi = (min(ratios), max(ratios)) if ratios else (np.nan, np.nan)
            sd_ok = 0.7 <= lo and hi <= 1.4
            flags = [max(dz) <= 0.1, bool(rel) and max(rel) < 0.01]
            parts.append(
                f"{prior}: max over beta of |mean VI - mean NUTS| / sd NUTS = {_f(max(dz))} (C1: <= 0.1), "
                f"sd ratio VI/NUTS {_f(lo, 2)}-{_f(hi, 2)} ({'within' if sd_ok else 'outside'} [0.7, 1.4]), "
                f"predictive MAE/MSE differ by at most {_f(100 * max(rel) if rel else np.nan, 2)} % (C1: < 1 %); "
                f"NUTS max R-hat {_f(np.nanmax(rhat), 4)}, {div} divergent transitions -> **{_verdict(flags)}**")
        if parts:
            out.append(f"  - {ds}: " + "; ".join(parts) + ".")
    return out


def _claim_runtime(t: _Table) -> tuple[list[str], list[str]]:
    """Claim 2 (VI quick; HMC autocorrelated under the horseshoe) and C5 (VI's advantage vs n)."""
    c2, c5 = [], []
    for ds in t.datasets:
        infos = t.infos(ds, "icnlm")
        if not infos:
            continue
        per = {}
        for prior in ("ridge", "horseshoe"):
            vs = [i["diagnostics"][f"IC-NLM {prior} VI"]["seconds"] for i in infos
                  if f"IC-NLM {prior} VI" in i.get("diagnostics", {})]
            ns = [i["diagnostics"][f"IC-NLM {prior} NUTS"] for i in infos
                  if f"IC-NLM {prior} NUTS" in i.get("diagnostics", {})]
            its = [i["diagnostics"][f"IC-NLM {prior} VI"]["iterations"] for i in infos
                   if f"IC-NLM {prior} VI" in i.get("diagnostics", {})]
            if vs and ns:
                per[prior] = dict(vi=float(np.mean(vs)), nuts=float(np.mean([n["seconds"] for n in ns])),
                                  it=float(np.mean(its)),
                                  ess=float(np.mean([n["ess_bulk_min"] / max(n.get("draws", 1), 1) for n in ns])))
        if len(per) < 2:
            continue
        n = int(np.mean([i.get("n_train", 0) for i in infos]))
        faster = all(p["vi"] < p["nuts"] for p in per.values())
        autocorr = per["horseshoe"]["ess"] < per["ridge"]["ess"]
        c2.append(
            f"  - {ds} (n = {n}): VI {_f(per['ridge']['vi'])} s / {per['ridge']['it']:.0f} iterations (ridge), "
            f"{_f(per['horseshoe']['vi'])} s / {per['horseshoe']['it']:.0f} (horseshoe) against NUTS "
            f"{_f(per['ridge']['nuts'])} s and {_f(per['horseshoe']['nuts'])} s; NUTS min bulk ESS per draw "
            f"{_f(per['ridge']['ess'], 2)} (ridge) vs {_f(per['horseshoe']['ess'], 2)} (horseshoe) -> "
            f"VI faster: **{'holds' if faster else 'does not hold'}**; horseshoe chains more autocorrelated: "
            f"**{'holds' if autocorr else 'does not hold'}**.")
        c5.append((n, ds, per["ridge"]["nuts"] / per["ridge"]["vi"], per["horseshoe"]["nuts"] / per["horseshoe"]["vi"]))
    lines5 = []
    if c5:
        c5.sort()
        lines5.append("  - NUTS / VI wall-time ratio by n (ridge, horseshoe): " + "; ".join(
            f"{ds} n = {n}: {_f(r)}x, {_f(h)}x" for n, ds, r, h in c5) + ".")
        if len({n for n, *_ in c5}) >= 3:

            rho = spearmanr([n for n, *_ in c5], [r for _, _, r, _ in c5]).statistic
            larger = np.mean([h > r for _, _, r, h in c5])
            grows = bool(rho > 0)
            lines5.append(f"  - Rank correlation of n and the ridge ratio {_f(rho, 2)}; the horseshoe ratio is the "
                          f"larger in {larger:.0%} of the data sets -> VI's advantage grows with n: "
                          f"**{'holds' if grows else 'does not hold'}** (different data sets, not one set at "
                          "several n: indicative only; NUTS is not the paper's fixed-step HMC, and the UCI "
                          "NUTS runs are half as long as the driving ones).")
        else:
            lines5.append("  - Fewer than three sizes n: **not checkable here**.")
    return c2, lines5


def _claim_compare(t: _Table, metric: str, better_than=(MC_PAPER, "MDN"), ic=ICNLM_VARIANTS) -> list[str]:
    """Claims 4, 5: every IC-NLM variant better (lower) than each benchmark in ``better_than``."""
    out = []
    for ds in t.datasets:
        ics = [v for v in ic if t.mean(ds, v, metric) is not None]
        bench = [v for v in better_than if t.mean(ds, v, metric) is not None]
        if not ics or not bench:
            continue
        worst_ic = max(t.mean(ds, v, metric) for v in ics)
        flags = [worst_ic < t.mean(ds, b, metric) for b in bench]
        order = _order(t, ds, [*ics, *[v for v in _BENCH if t.mean(ds, v, metric) is not None]], metric)
        out.append(f"  - {ds}: {order} -> **{_verdict(flags)}**"
                   + ("" if len(bench) == len(better_than) else f" (only {', '.join(bench)} run)") + ".")
    return out


def _claim_accuracy(t: _Table) -> list[str]:
    """Claim 3 / C4: horseshoe beats ridge on MAE and MSE (VI and NUTS)."""
    out = []
    for ds in t.datasets:
        flags, parts = [], []
        for inf in ("VI", "NUTS"):
            r, h = f"IC-NLM ridge {inf}", f"IC-NLM horseshoe {inf}"
            for metric in ("mae", "mse"):
                a, b = t.mean(ds, r, metric), t.mean(ds, h, metric)
                if a is None or b is None:
                    continue
                flags.append(b < a)
                parts.append(f"{metric.upper()} {inf} {_f(a)} (ridge) vs {_f(b)} (horseshoe)")
        if parts:
            out.append(f"  - {ds}: " + ", ".join(parts) + f" -> **{_verdict(flags)}**.")
    return out


def _claim_coverage(t: _Table) -> list[str]:
    """Claim 6: coverage error ridge < MDN < horseshoe; MC dropout the worst."""
    out = []
    for ds in t.datasets:
        r, h, m, mc = "IC-NLM ridge VI", "IC-NLM horseshoe VI", "MDN", MC_PAPER
        if not t.have(ds, (r, h, m, mc), "coverage_error"):
            continue
        e = {v: t.mean(ds, v, "coverage_error") for v in (r, h, m, mc, MC_NOISE, "Deterministic")
             if t.mean(ds, v, "coverage_error") is not None}
        flags = [e[r] < e[m], e[m] < e[h], e[mc] == max(e[v] for v in (r, h, m, mc))]
        out.append(f"  - {ds}: mean |coverage - level| " + ", ".join(f"{v} {_f(x)}" for v, x in sorted(e.items(), key=lambda kv: kv[1]))
                   + f" -> ridge < MDN: {flags[0]}, MDN < horseshoe: {flags[1]}, MC dropout worst of the four: "
                   f"{flags[2]} -> **{_verdict(flags)}**.")
    return out


def _claim_error_variance(t: _Table) -> list[str]:
    """Claim 7: MDN best on error-variance, horseshoe second; MC dropout and ridge overconfident.

    "Best" is read off the sparsification curve (the right panel of the error-variance plot): the
    MSE of the 20 % of test points with the smallest predictive variance relative to the MSE of all
    (`_Table.share_ratio`; lower is better). Overconfident: MSE / mean predictive variance > 1."""
    out = []
    for ds in t.datasets:
        cand = ("MDN", "IC-NLM horseshoe VI", "IC-NLM ridge VI", MC_PAPER)
        ratio = {v: t.share_ratio(ds, v) for v in cand}
        if any(x is None for x in ratio.values()) or not t.have(ds, cand, "var_ratio"):
            continue
        rank = sorted(cand, key=lambda v: ratio[v])
        flags = [rank[0] == "MDN", rank[1] == "IC-NLM horseshoe VI",
                 t.mean(ds, MC_PAPER, "var_ratio") > 1.0, t.mean(ds, "IC-NLM ridge VI", "var_ratio") > 1.0]
        spear = ", ".join(f"{v} {_f(t.mean(ds, v, 'ev_spearman'))}" for v in cand if t.mean(ds, v, "ev_spearman") is not None)
        out.append(f"  - {ds}: MSE of the 20 % most confident points / MSE of all "
                   + " < ".join(f"{v} {_f(ratio[v])}" for v in rank)
                   + "; MSE / mean variance " + ", ".join(f"{v} {_f(t.mean(ds, v, 'var_ratio'))}" for v in cand)
                   + f" (rank correlation of variance and squared error: {spear}) -> MDN best: {flags[0]}, "
                   f"horseshoe second: {flags[1]}, MC dropout overconfident (> 1): {flags[2]}, ridge overconfident: "
                   f"{flags[3]} -> **{_verdict(flags)}**.")
    return out


def _claim_in_sample(t: _Table) -> list[str]:
    """C2: in-sample marginal calibration of the IC-NLM small (< 0.02) and better than MDN, MC dropout."""
    out = []
    for ds in t.datasets:
        ics = [v for v in ICNLM_VARIANTS if t.mean(ds, v, "train_marginal_gap") is not None]
        if not ics:
            continue
        worst = max(t.mean(ds, v, "train_marginal_gap") for v in ics)
        others = {v: t.mean(ds, v, "train_marginal_gap") for v in (MC_PAPER, "MDN") if t.mean(ds, v, "train_marginal_gap") is not None}
        flags = [worst < 0.02] + [worst < x for x in others.values()]
        out.append(f"  - {ds}: IC-NLM in-sample gap at most {_f(worst)} (C2 example: < 0.02); "
                   + ", ".join(f"{v} {_f(x)}" for v, x in others.items()) + f" -> **{_verdict(flags)}**.")
    return out


def _claim_c3(t: _Table) -> list[str]:
    out = []
    for ds in t.datasets:
        vals = {v: t.mean(ds, v, "coverage_error_max") for v in ICNLM_VARIANTS if t.mean(ds, v, "coverage_error_max") is not None}
        if vals:
            flags = [x <= 0.03 for x in vals.values()]
            out.append(f"  - {ds}: max over the 11 levels of |coverage - level| " + ", ".join(
                f"{v} {_f(x)}" for v, x in vals.items()) + f" -> **{_verdict(flags)}** (C3's 0.03 is meant for "
                "well-specified synthetic data; on a test set of n points the sampling sd of a coverage is "
                "about sqrt(c(1-c)/n)).")
    return out


def _missing(rows, preset) -> list[str]:
    return missing_lines(get("icnlm"), rows, preset, "claims below use only the stored ones",
                         bench_flags=lambda ds: " --device cuda" if ds in DRIVING else "")


def _thresholds_table(rows) -> list[str]:
    """The mapped Accuracy I/II thresholds of every stored (dataset, split), from the cells' info."""
    seen = {}
    for r in sorted(rows, key=lambda r: (r.dataset not in DRIVING, r.dataset, r.split, r.seed)):
        t = (r.info or {}).get("thresholds_mapped")
        if t and (r.dataset, r.split, r.seed) not in seen:
            seen[(r.dataset, r.split, r.seed)] = (t, (r.info or {}).get("naive_center"), (r.info or {}).get("n_train"))
    if not seen:
        return []
    table = ["| dataset | split | n train | naive c | t_I (paper: 6 deg) | t_II (paper: 2 deg) |", "|---|---:|---:|---:|---:|---:|"]
    for (ds, split, _seed), (t, c, n) in seen.items():
        table.append(f"| {ds} | {split} | {n} | {_f(c, 4)} | {_f(t[0], 4)} | {_f(t[1], 4)} |")
    return section("Accuracy thresholds",
                   "The paper's 6 and 2 degrees mapped to each split (`matched_thresholds`): the smallest t_I, t_II at "
                   "which the naive learner's constant c reaches 93.21 % and 65.12 % on the training responses, in the "
                   "data's units.", table)


def report_sections(rows, preset) -> list[str]:
    """Markdown after the notes: missing cells, then the paper's claims (spec §4: 1-9) and the
    spec's checks (§5: C1-C7), each evaluated from the stored numbers per data set."""
    t = _Table(rows)
    c2, c5 = _claim_runtime(t)
    nc = "not checkable here (no cells stored yet)"

    def block(title: str, lines: list[str], how: str = "") -> list[str]:
        return claim_block(title, lines, how, empty=nc)

    out = ["## Cells", "", *_missing(rows, preset), "", *_thresholds_table(rows), "## The paper's claims, checked", "",
           "Each claim (spec §4) and check (spec §5) is evaluated per data set from the means over the stored "
           "cells (splits); driving is the paper's kind of task, the UCI sets are further evidence. "
           "\"partly\": some of the claim's parts (or data sets' splits) hold, others not.", ""]
    out += block("Claim 1 / C1 — VI and HMC give near-identical posterior means; predictive metrics unaffected.",
                 _claim_vi_nuts(t), "(VI against NUTS on the same features)")
    out += block("Claim 2 — VI converges quickly; HMC is autocorrelated under the horseshoe.", c2)
    out += block("Claim 3 / C4 — the horseshoe beats ridge on point accuracy.", _claim_accuracy(t))
    out += block("Claim 4 / C6 — the IC-NLM has the best marginal calibration; MC dropout and MDN are not "
                 "marginally calibrated.", _claim_compare(t, "marginal_calibration_gap"),
                 "(test-set gap sup_t |mean F_i(t) - G_n(t)|; holds when every IC-NLM variant is below MC dropout "
                 "and MDN)")
    out += block("Claim 5 — the IC-NLM has the best probabilistic calibration (both priors).",
                 _claim_compare(t, "calibration_error", ic=_IC_VI),
                 "(PIT calibration error; holds when both VI variants are below MC dropout and MDN, the paper's "
                 "benchmarks; our extra variants are listed for comparison)")
    out += block("Claim 6 — coverage is most accurate for IC-NLM ridge, then MDN, then IC-NLM horseshoe; MC dropout "
                 "is unreliable.", _claim_coverage(t))
    out += block("Claim 7 / C6 — on error vs variance MDN is best and IC-NLM horseshoe second; MC dropout and "
                 "IC-NLM ridge are overconfident.", _claim_error_variance(t),
                 "(best: the lowest MSE of the 20 % of points with the smallest predictive variance relative to "
                 "the MSE of all, from the error-variance curve; MSE / mean variance > 1 read as overconfident)")
    out += ["- **Claim 8 / C7 — only the IC-NLM puts mass on the second branch at a road fork.** Not checkable "
            "here: CarRacing tracks are closed loops without forks or junctions, so no frame has a bimodal "
            "steering conditional of that kind.",
            "- **Claim 9 — large-data results are similar.** Not checkable here: Appendix C is missing from the "
            "text and we run one driving size (30,000 frames); the spec's large-data numbers come from the "
            "authors' notebooks, on comma2k19."]
    out += block("C2 — in-sample marginal calibration is small and better than MDN and MC dropout.",
                 _claim_in_sample(t))
    out += block("C3 — coverage error <= 0.03 at all 11 levels.", _claim_c3(t))
    out += block("C5 — VI's advantage over HMC grows with n.", c5)
    out.append("")
    return out
