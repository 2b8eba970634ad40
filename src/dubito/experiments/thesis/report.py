"""The report's sections computed from the stored cells: tables beside the thesis', reliability, auto-labelling, CRF, findings, missing cells."""

from __future__ import annotations

import numpy as np

from dubito.experiments import get
from dubito.experiments.claims import DatasetMeans, missing_lines, section
from dubito.experiments.thesis.findings import (
    FINDINGS,
    _betas,
    _f,
    _have,
    _ts,
    finding_verdicts,
)
from dubito.experiments.thesis.paper import (
    _COLS,
    FLAG_UNRELIABLE,
    LAPLACE_TABLE,
    TABLE41,
    UNRELIABLE,
)
from dubito.experiments.thesis.vocab import (
    DATASETS,
    ENSEMBLES,
    METRICS,
    PER_CLASS,
    PRIMARY_OOD,
)

# ---------------------------------------------------------------------------------- report


def _pm(M, v, k, d=3):
    m = M(v, k)
    if m is None:
        return "—"
    sd = M.sd(v, k)
    return _f(m, d) + (f" ± {_f(sd, d)}" if sd is not None else "")


def _paper_cell(table, v, k):
    vals = table.get(v)
    if not vals:
        return "—"
    mean, sd = vals[_COLS.index(k)]
    mark = f" {FLAG_UNRELIABLE}" if (v, k) in UNRELIABLE else ""
    return f"{mean:.3f}" + (f" ± {sd:.3f}" if sd is not None else "") + mark


def _wide_table(M, variants, table) -> list[str]:
    head = "| row | " + " | ".join(ms.label for ms in METRICS) + " |"
    lines = [head, "|---|" + "---:|" * len(METRICS)]
    for v in variants:
        if M(v, "accuracy") is None and v not in table:
            continue
        if M(v, "accuracy") is not None:
            lines.append(f"| {v} (ours) | " + " | ".join(_pm(M, v, ms.key) for ms in METRICS) + " |")
        if v in table:
            lines.append(f"| {v} (thesis) | " + " | ".join(_paper_cell(table, v, ms.key) for ms in METRICS) + " |")
    return lines


def _measure_table(M, variants, oods) -> list[str]:
    cols = [("miss", None)] + [("ood", o) for o in oods]
    head = "| row | " + " | ".join(f"{'misclassified' if c == 'miss' else 'OOD ' + o} AUROC conf / H / MI"
                                    for c, o in cols) + " |"
    lines = [head, "|---|" + "---|" * len(cols)]
    for v in variants:
        if M(v, "accuracy") is None:
            continue
        cells = []
        for c, o in cols:
            pre = "miss_auroc_" if c == "miss" else f"ood_auroc_{o}_"
            cells.append(" / ".join(_f(M(v, pre + s)) for s in ("conf", "H", "MI")))
        lines.append(f"| {v} | " + " | ".join(cells) + " |")
    return lines


def _pool_reliability(rows, dataset, variant):
    cnt = conf = acc = None
    for r in rows:
        rel = ((r.artefacts or {}).get("reliability") or {}).get(variant)
        if r.dataset != dataset or not rel:
            continue
        c = np.asarray(rel["count"], float)
        cf, ac = np.asarray(rel["confidence"], float) * c, np.asarray(rel["accuracy"], float) * c
        cnt, conf, acc = (c, cf, ac) if cnt is None else (cnt + c, conf + cf, acc + ac)
    return cnt, conf, acc


def _reliability_table(rows, dataset, variants) -> list[str]:
    data = {v: _pool_reliability(rows, dataset, v) for v in variants}
    data = {v: d for v, d in data.items() if d[0] is not None}
    if not data:
        return []
    lines = ["| confidence bin | " + " | ".join(data) + " |", "|---|" + "---:|" * len(data)]
    n_bins = len(next(iter(data.values()))[0])
    for b in range(n_bins):
        if not any(d[0][b] > 0 for d in data.values()):
            continue
        cells = []
        for cnt, cf, ac in data.values():
            cells.append("—" if cnt[b] == 0 else f"{ac[b] / cnt[b]:.2f} / {cf[b] / cnt[b]:.2f} ({int(cnt[b])})")
        lines.append(f"| ({b / n_bins:.2f}, {(b + 1) / n_bins:.2f}] | " + " | ".join(cells) + " |")
    return lines


def _autolabel_table(M) -> list[str]:
    vs = sorted({k[0] for k in M.values if ": " in k[0]}, key=lambda v: (not v.endswith("no adaptation"),
                                                                         "all pseudo" not in v, v))
    if not vs:
        return []
    keys = ("accuracy", "nll", "ece", "label_precision", "coverage", "n_selected", "n_manual_labels",
            "class_count_min", "class_count_max", "manual_labels_saved")
    ints = ("n_selected", "n_manual_labels", "class_count_min", "class_count_max", "manual_labels_saved")
    lines = ["| selection | held-out acc | NLL | ECE | label precision | coverage | |S| | manual labels | "
             "smallest class in S | largest class in S | manual labels saved |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for v in vs:
        cells = [_pm(M, v, k, 0 if k in ints else 3) for k in keys]
        if (M(v, "manual_saved_censored") or 0) > 0:
            cells[-1] = "≥ " + cells[-1]
        lines.append(f"| {v} | " + " | ".join(cells) + " |")
    return lines


def _pc_table(M, variants) -> list[str]:
    lines = ["| row | precision at coverage 0.1 / 0.2 / 0.5 / 1.0 (conf) | area conf / H / MI | balanced: precision "
             "0.1 / 0.2 / 0.5 | proportional: precision 0.1 / 0.2 / 0.5 | smallest class / even share at 0.2: "
             "plain / balanced / proportional |", "|---|---|---|---|---|---|"]
    n = 0
    for v in variants:
        p = [M(v, f"pc_prec_{q}_conf") for q in (10, 20, 50, 100)]
        if not _have(*p):
            continue
        n += 1
        per = [" / ".join(_f(M(v, f"pc_prec_{q}_conf_{pc}")) for q in (10, 20, 50)) for pc in PER_CLASS]
        even = " / ".join(_f(M(v, f"pc_even_20_conf{suf}"), 2) for suf in ("", *(f"_{pc}" for pc in PER_CLASS)))
        lines.append(f"| {v} | {' / '.join(_f(x) for x in p)} | "
                     + " / ".join(_f(M(v, f"pc_area_{s}")) for s in ("conf", "H", "MI")) + f" | {per[0]} | {per[1]} | "
                     f"{even} |")
    return lines if n else []


def _t_table(M) -> list[str]:
    lines = ["| method | T | acc | NLL | Brier | ECE w/o | ECE w. | AUROC miss (conf) | AUROC OOD (MI) | mean MI |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    n = 0
    for m in ("mcdp", "cdp", "mdp"):
        for x in _ts(M, m):
            v = f"{m} T={x}"
            n += 1
            lines.append(f"| {m} | {x} | " + " | ".join(_pm(M, v, k) for k in ("accuracy", "nll", "brier", "ece",
                                                                              "ece_ood", "miss_auroc", "ood_auroc",
                                                                              "mean_mi")) + " |")
    return lines if n else []


def _beta_table(M) -> list[str]:
    lines = ["| row | β | acc | NLL | ECE w/o | ECE w. | AUROC miss | AUROC OOD | keep probability start -> end | "
             "sites rising |", "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|"]
    n = 0
    for m in ("cdp", "mdp"):
        fs = _betas(M, m)
        if not fs:
            continue
        for f, v in sorted([(1.0, m)] + [(f, f"{m} β×{f:g}") for f in fs]):
            if M(v, "accuracy") is None:
                continue
            n += 1
            lines.append(f"| {v} | {f:g}/N | " + " | ".join(_pm(M, v, k) for k in ("accuracy", "nll", "ece", "ece_ood",
                                                                                    "miss_auroc", "ood_auroc"))
                         + f" | {_f(M(v, 'p_keep_start'))} -> {_f(M(v, 'p_keep_end'))} | "
                         f"{_f(M(v, 'p_keep_sites_rising'), 2)} |")
    return lines if n else []


def _crf_table(rows, dataset, M, variants) -> list[str]:
    lines = ["| unaries | acc w = 0 | confusable w = 0 | w grid | acc grid | confusable grid | w PL | acc PL | "
             "acc at w sweep |", "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    n = 0
    for v in variants:
        for pre, art, label in (("crf_", "crf_sweep", v), ("crf_weak_", "crf_sweep_weak", f"{v} (weak context)")):
            if M(v, pre + "acc_w0") is None:
                continue
            n += 1
            sweeps = [((r.artefacts or {}).get(art) or {}).get(v) for r in rows if r.dataset == dataset]
            sweeps = [s for s in sweeps if s]
            sw = ""
            if sweeps:
                acc = np.mean([s["acc"] for s in sweeps], axis=0)
                sw = ", ".join(f"{w:g}: {a:.3f}" for w, a in zip(sweeps[0]["w"], acc))
            lines.append(f"| {label} | {_f(M(v, pre + 'acc_w0'))} | {_f(M(v, pre + 'acc_conf_w0'))} | "
                         f"{_f(M(v, pre + 'w_grid'), 2)} | {_f(M(v, pre + 'acc_grid'))} | "
                         f"{_f(M(v, pre + 'acc_conf_grid'))} | {_f(M(v, pre + 'w_pl'), 2)} | {_f(M(v, pre + 'acc_pl'))} | "
                         f"{sw} |")
    return lines if n else []


def _missing(rows, preset) -> list[str]:
    return missing_lines(get("thesis"), rows, preset, "the tables use the stored ones", listing=lambda miss: ", ".join(
        f"{c.dataset}/{c.method}/seed {c.seed}" for c in miss[:30]))


def report_sections(rows, preset) -> list[str]:
    """Table 4.1 and the Laplace table beside the thesis, the uncertainty measures, reliability bins,
    precision-coverage, auto-labelling, the CRF, and a verdict per finding H1-H9 (spec §5.3)."""
    out = ["## Cells", "", *_missing(rows, preset), ""]
    singles = ["ori", "mcdp", "cdp", "mdp"]
    main = [*singles, *ENSEMBLES]
    laps = [f"laplace_{m}{suf}" for m in singles for suf in ("", " (tuned)", " +dropout")]
    for ds in sorted({r.dataset for r in rows}, key=lambda d: DATASETS.index(d) if d in DATASETS else 99):
        M = DatasetMeans(rows, ds)
        primary = PRIMARY_OOD.get(ds, "")
        oods = [primary] + sorted({k[1].split("_")[2] for k in M.values if k[1].startswith("ood_auroc_")
                                   and k[1].count("_") == 3} - {primary})
        n_t = max(max(_ts(M, m) or [0]) for m in ("mcdp", "cdp", "mdp"))
        hs = [v for m in ("cdp", "mdp") for v in (m, f"{m} (hard sampler)") if M(v, "accuracy") is not None]
        findings = []
        for h, (vd, lines) in finding_verdicts(rows, ds).items():
            findings.append(f"- **{h}** — {FINDINGS[h]}: **{vd}**")
            findings += [f"  - {x}" for x in lines] or ["  - no stored numbers for this finding."]
        # (title, intro, lines): a section per table; the optional ones are left out without lines
        parts = [
            ("Table 4.1 beside the thesis",
             "Ours: mean ± sd over the stored seeds on the adaptation pool (ensembles: one value, as the thesis). "
             f"Thesis: UniHB, mean ± sd of 3 seeds; {FLAG_UNRELIABLE} = unreliable cell (spec pitfalls 7-8). "
             f"OOD columns use the primary OOD set ({primary}). Absolute values are not comparable (other data, "
             "other networks); the findings below compare directions.",
             _wide_table(M, main, TABLE41)),
            ("the Laplace table",
             "`laplace_<m>`: the thesis's scale 1, damping 15, dropout off; `(tuned)`: (scale, damping) by source "
             "validation NLL on the spec's grid; `+dropout`: tuned, MC dropout on while sampling.",
             _wide_table(M, [v for m in singles for v in (m, f"laplace_{m}", f"laplace_{m} (tuned)",
                                                          f"laplace_{m} +dropout")], LAPLACE_TABLE)),
            ("uncertainty measures",
             "AUROC per measure (conf, predictive entropy H, mutual information MI); the thesis found confidence "
             "best for misclassification and MI best for OOD (spec §2.8).",
             _measure_table(M, main + laps, oods)),
            ("sensitivity to the number of MC samples T (spec §2.3 [R]; serves H1, H4, check S2)",
             "The same trained models, predicted with T passes: the predictive at each T takes the first T of "
             f"one draw of {n_t} passes (nested), on the adaptation pool and the primary OOD set; mean ± sd over "
             "seeds. The main rows use the preset's T from an independent draw.",
             _t_table(M)),
            ("concrete dropout's test-time sampler, relaxed vs hard (spec §2.4; check S1)",
             "Relaxed = the concrete (t = 0.1) mask used in training, as Gal's code; hard = Bernoulli(p_keep) "
             "masks 1[u > p_drop]. Same model, same seeds, so both samplers see the same uniforms u.",
             _wide_table(M, hs, {}) if any(v.endswith("(hard sampler)") for v in hs) else []),
            ("concrete-dropout regulariser scale β (spec §2.4; serves H6)",
             "β = factor / N_train (1/N is the KL-consistent default); the other factors are retrained models "
             "of the β seeds only (seed 0), so their rows are single values beside the seed mean of 1/N.",
             _beta_table(M)),
            ("reliability diagrams (adaptation pool)",
             "Per confidence bin: accuracy / mean confidence (count), pooled over the stored seeds (20 equal-width "
             "bins; empty bins left out). The thesis's Fig. 4.5 as numbers.",
             _reliability_table(rows, ds, [v for v in (*main, "laplace_cdp (tuned)") if M(v, "accuracy") is not None])),
            ("precision-coverage on the adaptation pool (spec §2.9, no fine-tuning)",
             "Precision of the pseudo-labels among the lowest-uncertainty fraction q of the pool; class-balanced "
             "selection (spec §2.9 step 2): `balanced` = an equal count per predicted class as far as the "
             "budget allows, `proportional` = the lowest-u fraction q within each predicted class; 'even share' "
             "= the smallest predicted class's count in S over |S|/K (1 = even).",
             _pc_table(M, main)),
            ("auto-labelling (reconstruction, spec §2.9)",
             "Fine-tuned on source ∪ S, evaluated on the held-out 0° view; random and manual take the same "
             "random items (pseudo vs true labels); `(balanced)` / `(proportional)`: class-balanced uncertainty "
             "selection (spec §2.9 step 2, pitfall 13); class counts by the label given. Manual labels saved "
             "(spec §2.9): the true labels the manual baseline needs to reach the row's held-out accuracy, "
             "read linearly between the manual rows' (|S|, accuracy) points and (0, no adaptation), minus the "
             "row's own manual labels; ≥ = above every manual point (a lower bound).",
             _autolabel_table(M)),
            ("context CRF on synthetic scenes (reconstruction, spec §2.10)",
             "Test scenes from the evaluation view; 'confusable' = objects whose class is in a confusable pair. "
             "`(weak context)`: the same unaries in scenes of overlapping types (spec §5.1 item 3: 6 typical "
             "classes per type at 0.6 mass), co-occurrence and w learnt on weak-context scenes.",
             _crf_table(rows, ds, M, main)),
            ("findings H1-H9 (spec §5.3) and checks S1-S2 (spec §2.3-2.4), judged from the stored numbers",
             "Lines marked 'not counted' are robustness or context lines that do not enter the verdict.",
             findings),
        ]
        for title, intro, lines in parts:
            if lines:
                out += section(f"{ds}: {title}", intro, lines)
    return out
