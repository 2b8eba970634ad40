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
from pathlib import Path

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

#: What the report prints after the tables: notes/recalibrate.md beside this file.
NOTES = (Path(__file__).parent / "notes" / "recalibrate.md").read_text(encoding="utf-8")

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
