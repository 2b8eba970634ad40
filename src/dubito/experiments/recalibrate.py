"""Recalibration on the standard UCI splits: coverage and calibration error of the deep ensemble
and MC dropout before and after `dubito.recalibrate` (issue 20).

A cell fits one method (its `dubito.methods` defaults) on one standard split's training rows less
a calibration share (`CAL_FRACTION`, drawn by the cell's seed and split), predicts the calibration
and the test rows, and scores the test rows (the data's own units) for these variants of one fit:

* ``METHOD``: the predictive as fitted (the "before" column);
* ``METHOD isotonic``: `Recalibrator("isotonic")` (Kuleshov, Fenner & Ermon 2018) fitted on the
  calibration rows;
* ``METHOD conformal``: `Recalibrator("conformal")`, the split-conformal predictive system;
* ``METHOD interval-SCORE``: `conformal_interval` at 95 % with the absolute, normalised and CQR
  scores (coverage and width of that interval only).

Full predictives get `metrics.regression_summary` (NLL, CRPS, coverage and width at 50 / 90 / 95 %,
``calibration_error``: the mean absolute gap of the PIT's calibration curve). Nothing is chosen on
a test split. The training rows the calibration share takes are the price of the guarantee: the
"before" column is the same smaller fit, so the comparison isolates the recalibration; the
leaderboard (docs/results/leaderboard.md) has the same methods fitted on every training row.
"""

from __future__ import annotations

import os
import time

import numpy as np
import torch

from dubito.data import load
from dubito.experiments.base import CellResult, Experiment, MetricSpec, Preset
from dubito.experiments.claims import DatasetMeans, fmt
from dubito.experiments.common import network_seed
from dubito.experiments.uci import DATASETS, _n_splits, _unavailable
from dubito.methods import get_method
from dubito.metrics import regression_summary
from dubito.recalibrate import Recalibrator, conformal_interval
from dubito.recalibrate.split import CAL_FRACTION, calibration_split

__all__ = ["EXPERIMENT", "METHODS", "CAL_FRACTION", "run_cell", "report_sections"]

#: Methods (as `dubito.methods` names them) whose predictives are recalibrated.
METHODS = ("ensemble", "mc-dropout")

RECALIBRATIONS = ("isotonic", "conformal")
INTERVAL_SCORES = ("absolute", "normalized", "cqr")
LEVEL = 0.95


def cell_calibration_split(n: int, seed: int, split: int, fraction: float = CAL_FRACTION):
    """(fit rows, calibration rows) of a cell's n training rows (`dubito.recalibrate.calibration_split`),
    drawn from the cell's seed and split so every method of a cell sees the same rows."""
    return calibration_split(n, fraction, seed=[int(seed), int(split), 20])


def run_cell(cell, device: str = "cpu", progress: bool = False) -> CellResult:
    """Fit ``cell.method`` on the split's training rows less the calibration share; score the test
    rows before and after each recalibration."""

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1") or 1))
    s = dict(cell.settings)
    X_tr, y_tr, X_te, y_te = load(cell.dataset).split(int(cell.split))
    fit_rows, cal_rows = cell_calibration_split(len(y_tr), cell.seed, cell.split, float(s.get("cal_fraction", CAL_FRACTION)))
    seed = network_seed(cell.seed, cell.split)
    est = get_method(cell.method).make(random_state=seed, device=device, progress=progress, **s.get("overrides", {}))
    t0 = time.perf_counter()
    model = est.fit(X_tr[fit_rows], y_tr[fit_rows])
    t1 = time.perf_counter()
    pred_cal = model.predict_distribution(X_tr[cal_rows])
    pred_te = model.predict_distribution(X_te)
    y_cal = y_tr[cal_rows]
    variants = {cell.method: regression_summary(pred_te, y_te)}
    seconds = {}
    for how in RECALIBRATIONS:
        t = time.perf_counter()
        recal = Recalibrator(method=how).fit(pred_cal, y_cal)
        variants[f"{cell.method} {how}"] = regression_summary(recal.transform(pred_te), y_te)
        seconds[how] = time.perf_counter() - t
    for score in INTERVAL_SCORES:
        lo, hi = conformal_interval(pred_cal, y_cal, pred_te, level=LEVEL, score=score)
        variants[f"{cell.method} interval-{score}"] = {
            "coverage_95": float(np.mean((y_te >= lo) & (y_te <= hi))),
            "width_95": float(np.mean(hi - lo)),
        }
    info = {"n_fit": int(fit_rows.size), "n_calibration": int(cal_rows.size), "n_test": int(len(y_te)),
            "random_state": seed, "fit_seconds": t1 - t0, "recalibration_seconds": seconds}
    for key in ("best_epoch_", "stopped_by_"):
        value = getattr(model, key, None)
        if value is not None:
            info[key.rstrip("_")] = np.asarray(value).tolist()
    return CellResult(variants=variants, info=info)


# ---------------------------------------------------------------------------------- report
def report_sections(rows, preset) -> list[str]:
    """Per data set and method: coverage at 95 % and 50 %, calibration error and NLL before and
    after each recalibration; then the interval-only conformal scores."""

    rows = list(rows)
    methods = [m for m in METHODS if any(m in (r.variants or {}) for r in rows)]
    if not methods:
        return []
    after = ("", *(f" {how}" for how in RECALIBRATIONS))
    lines = ["## Before and after", "",
             "Means over the stored splits (n = splits), test rows. Each cell: as fitted → isotonic → "
             "conformal. Coverage targets: 0.95 and 0.50; calibration error: the mean absolute gap "
             "between the PIT's calibration curve and the diagonal (0 = calibrated, about 0.01-0.03 "
             "is sampling noise on a few hundred test points).", ""]
    for metric, label in (("coverage_95", "coverage at 95 %"), ("coverage_50", "coverage at 50 %"),
                          ("calibration_error", "calibration error"), ("nll", "NLL")):
        lines += [f"### {label}", "", "| data set | " + " | ".join(f"{m} (n)" for m in methods) + " |",
                  "|---|" + "---|" * len(methods)]
        for dataset in DATASETS:
            M = DatasetMeans(rows, dataset)
            cells = []
            for m in methods:
                values = [M(m + a, metric) for a in after]
                cells.append("—" if values[0] is None else
                             " → ".join(fmt(v, 3) for v in values) + f" ({M.n(m, metric)})")
            lines.append(f"| {dataset} | " + " | ".join(cells) + " |")
        lines.append("")
    lines += ["## Conformal intervals at 95 %", "",
              "Coverage / mean width of `conformal_interval` with each score, beside the fitted "
              "predictive's own central interval.", "",
              "| data set | method | as fitted | " + " | ".join(INTERVAL_SCORES) + " |",
              "|---|---|---|" + "---|" * len(INTERVAL_SCORES)]
    for dataset in DATASETS:
        M = DatasetMeans(rows, dataset)
        for m in methods:
            if M(m, "coverage_95") is None:
                continue
            cells = [f"{fmt(M(v, 'coverage_95'), 3)} / {fmt(M(v, 'width_95'), 3)}"
                     for v in (m, *(f"{m} interval-{s}" for s in INTERVAL_SCORES))]
            lines.append(f"| {dataset} | {m} | " + " | ".join(cells) + " |")
    return lines + [""]


METRICS = (
    MetricSpec("coverage_95", "coverage of the 95 % interval", "closer to 0.95"),
    MetricSpec("coverage_50", "coverage of the 50 % interval", "closer to 0.50"),
    MetricSpec("calibration_error", "PIT calibration error", "lower"),
    MetricSpec("nll", "NLL", "lower"),
    MetricSpec("crps", "CRPS", "lower"),
    MetricSpec("width_95", "mean width of the 95 % interval", "lower", "read together with coverage"),
)

NOTES = """\
Protocol. Every method runs with its `dubito.methods` defaults (the deep ensemble: 5 members with
the Bayesian correction of Hoffmann & Elster; MC dropout: p = 0.05, 1,000 masks, a homoscedastic
noise from the residuals) on 80 % of each standard split's training rows; the other 20 %, drawn by
`dubito.recalibrate.calibration_split` from the cell's seed and split, calibrate
(`Recalibrator` with its defaults, and `conformal_interval` at 95 %). Nothing is chosen on a test
split. Targets (issue 20): coverage at 95 % within 0.90-0.98 after recalibration on every set, and a
lower calibration error than before. The cells predate session 20, when the deep ensemble's and MC
dropout's default patience and epoch cap became step-counted ("auto", docs/results/ensemble-budget.md):
on the five small sets both would now train longer (on kin8nm and the larger sets "auto" is the same
20 / 500 epochs). They also predate session 21's changes: the ensemble's learning rate now drops to
a tenth on a plateau (naval's NLL moved most), and MC dropout scales its variance on held-out rows
from 100 rows up (wine and the larger sets). The tables are those of the former defaults.

What the cells say (means over the stored splits; the tables below are computed from the cells):
- Calibration error falls after both recalibrations for both methods on every set, most where
  the fit was worst: naval MC dropout 0.121 -> 0.011 / 0.011 (isotonic / conformal), naval
  ensemble 0.092 -> 0.012 / 0.012, kin8nm MC dropout 0.040 -> 0.013 / 0.013, power MC dropout 0.030 ->
  0.013 / 0.013, protein MC dropout 0.037 -> 0.005 / 0.006, protein ensemble 0.028 -> 0.006 / 0.006,
  yacht MC dropout 0.096 -> 0.068 / 0.068; the smallest change is concrete's ensemble, 0.041 -> 0.039 /
  0.039.
- Coverage at 95 % after isotonic: 0.929-0.950 on every set and method (target met); after
  conformal 0.952-0.981: its intervals are conservative by design where n is small (the map sits
  one rank outside the conformal predictive system on each side, and the ranks come in steps of
  2/(n + 1)); on boston (91 calibration points) the ensemble's covers 0.981, 0.001 above the
  target's upper bound; elsewhere within it. Before recalibration the ensemble over-covers naval
  (0.982) and MC dropout misses on naval (0.997), kin8nm and power (0.975), concrete (0.971), protein
  (0.943) and energy (0.920).
- Log score: isotonic improves the NLL where the fit was miscalibrated (naval MC dropout -4.797 ->
  -5.175, naval ensemble -7.113 -> -7.298, energy 1.344 -> 1.261, protein ensemble 2.494 -> 2.430,
  protein MC dropout 2.828 -> 2.774, power 2.733 -> 2.711, kin8nm MC dropout -1.081 -> -1.102) and
  costs a little where it was nearly calibrated and the calibration set is small (boston +0.10
  with 91 points, concrete +0.10 with 185, yacht ensemble +0.14 with 55): a map estimated from
  50-300 points adds its own noise. Conformal costs more (+0.08 to +0.42; it improves naval, -0.11
  and -0.30, and protein, -0.03 and -0.02): to keep the finite-sample guarantee its map has a knot
  at every calibration order statistic (up to 400), and
  the exponential spacings of those make a spiky density. Thinning it from the tails inwards with
  the guarantee kept (each kept knot takes the next one's rank) was measured on synthetic data: it
  gains 0.1-0.2 nats at n <= 400 but shifts mass outwards (coverage at 50 % 0.50 -> 0.53-0.55, up to
  0.60 with coarser thinning; calibration error 0.014 -> 0.021 at n = 400); not adopted. Use
  "isotonic" for a density, "conformal" for intervals with a guarantee.
- CRPS falls or stays within 0.003 after both on every set (the one rise: yacht ensemble after
  isotonic, 0.473 -> 0.476).
- Interval-only conformal at 95 % (absolute, normalised and CQR scores) covers 0.943-0.972.

The isotonic map's default knots changed just before this run (commit 4a1f926: every calibration
point in the tails, segments growing towards the middle); with a knot at every point, a run of the
previous session (store lost) had boston ensemble NLL 2.555 -> 2.901 and concrete 3.07 -> 3.31
after isotonic, against 2.658 and 3.171 here.

Cost per cell (fit, prediction and three scorings; one thread on a shared 2-core machine under load
2-4, so upper bounds): ensemble 1-7 s on the small sets, 11 s kin8nm, 62 s naval, 65 s power, 154 s
protein; MC dropout 8-60 s on the small sets, 210 s kin8nm, 220 s power, 340 s naval, 680 s protein
(medians). MC dropout's
cost is the scoring of its 1,000-component mixture: the conformal map's 400 knot thresholds
F^-1(u_k) for every test row (about 3 mixture CDF evaluations per threshold) dominate; before commit
d76cfb8 the CRPS of the recalibrated predictive cost as much again, and before 9d3e072 (mixture
quantiles at many levels start from a table of F: 1.8x fewer CDF evaluations) a protein cell was
estimated at 30 min. Every cell of the preset is stored: 20 splits per set, 5 for protein.

Provenance: the small sets and the ensemble everywhere at commit 4a1f926; MC dropout on kin8nm
(splits 0-2 at 12ea83a, 3-19 at d76cfb8), naval (splits 0-4 at d76cfb8, 5-19 at 7e1feb5), power at
d76cfb8 and protein at 0f24a15. The commits between change the CRPS arithmetic (the same values to
1e-11), the mixture quantile's starting point (9d3e072: the same roots to 1e-10 of the local scale)
and files outside this experiment. One thread per run, two to three runs at once on this 2-core
machine.
"""

EXPERIMENT = Experiment(
    name="recalibrate",
    title="Recalibration on the UCI sets: coverage and calibration error before and after",
    paper="issue 20; Kuleshov, Fenner & Ermon (2018); Vovk et al. (2020); standard splits of "
          "Hernandez-Lobato & Adams (2015)",
    presets={
        "quick": Preset(
            name="quick",
            description="smoke test (under a minute): yacht, split 0, the deep ensemble",
            datasets=("yacht",),
            methods={"ensemble": {}},
            seeds=(0,),
            splits=(0,),
        ),
        "paper": Preset(
            name="paper",
            description="all nine data sets, all standard splits (20; 5 for protein), ensemble and MC dropout",
            datasets=DATASETS,
            methods={m: {} for m in METHODS},
            seeds=(0,),
            splits=None,
        ),
    },
    metrics=METRICS,
    paper_numbers=(),
    run_cell=run_cell,
    n_splits=_n_splits,
    unavailable=_unavailable,
    notes=NOTES,
    report_sections=report_sections,
)
