"""The standard UCI regression benchmark for deep ensembles (Lakshminarayanan et al. 2017, Table 1).

Nine data sets (boston, concrete, energy, kin8nm, naval, power, protein, wine, yacht) with the
standard train/test splits of Hernandez-Lobato & Adams (2015): 20 each, 5 for protein
(`dubito.data.uci`). One cell trains one 5-member `DeepEnsembleRegressor` on one split; its
variants are the conventional deep ensemble ("DE", the paper's method without adversarial
training) and the Bayesian last-layer correction of Hoffmann & Elster ("EXT"), from the same
training. Metrics (`dubito.metrics.regression_summary`, test set, the data's own units):
``rmse``, ``nll`` (the exact mixture), ``crps``, ``coverage_95``, ``width_95`` and the rest of
the summary, plus ``nll_normal``: the NLL of the moment-matched Gaussian, the convention of the
paper ("we approximate the mixture with a Gaussian whose mean and variance are those of the
mixture").

Settings (Sec. 3.1 and 3.3 of the paper where they apply): one hidden layer of 50 ReLU units
(100 for protein), 5 members, 40 epochs, batch 100, Adam with a fixed learning rate, inputs and
targets standardised with the training statistics (Hernandez-Lobato & Adams' protocol),
members differing only in initialisation and mini-batch order, no adversarial training, no
weight decay (the paper states none; the estimator needs lambda > 0, so 1e-8, a negligible
prior). Learning rate: see `LR_NOTE`.
"""

from __future__ import annotations

import os
import time

import numpy as np
import torch

from dubito.data import load
from dubito.experiments.base import (
    CellResult,
    Experiment,
    MetricSpec,
    PaperNumber,
    Preset,
)
from dubito.experiments.common import network_seed, uci_unavailable
from dubito.methods import build
from dubito.metrics import pit, regression_summary

__all__ = ["EXPERIMENT", "DATASETS", "run_cell", "LR_NOTE"]

PAPER = (
    "B. Lakshminarayanan, A. Pritzel and C. Blundell (2017), Simple and scalable predictive uncertainty "
    "estimation using deep ensembles, NeurIPS 30 (Table 1)"
)
DATASETS = ("boston", "concrete", "energy", "kin8nm", "naval", "power", "protein", "wine", "yacht")
LARGE = ("protein",)  # 100 hidden units (the paper: "for the larger protein and Year Prediction MSD")
N_SPLITS = {**{d: 20 for d in DATASETS}, "protein": 5}
PIT_POINTS = 1000  # at most this many test points' PIT values are kept per variant

LR_NOTE = (
    "The paper states 'Adam optimizer with fixed learning rate of 0.1'. With PyTorch's Adam that rate "
    "diverges here (boston, 5 splits: RMSE 11-27 against 3.3). Chosen on validation rows only "
    "(`benchmarks/uci_learning_rate.py`: the first 3 standard splits, 20 % of each split's training rows "
    "held out, the test rows unused; an earlier check had scored the test rows): mean validation NLL at "
    "0.001 / 0.003 / 0.01 / 0.1 is boston 2.61 / 2.48 / 2.41 / 3.20, energy 1.93 / 1.52 / 1.36 / 2.57, "
    "yacht 3.53 / 2.18 / 1.39 / 3.01 (40 epochs of batch 100 are only 200-400 steps there) and naval "
    "-4.29 / -5.49 / -4.29 / diverged. 0.01 is best on the three small sets, 0.003 on naval; we use 0.01 "
    "for all nine, as the paper uses one rate."
)

SETTINGS = dict(n_members=5, hidden=50, hidden_large=100, epochs=40, batch_size=100, lr=0.01,
                weight_decay=1e-8, lr_drop="none")


def _n_splits(dataset: str) -> int:
    return N_SPLITS[dataset]


def _unavailable(preset: Preset) -> dict[str, str]:
    return uci_unavailable(preset.datasets)


def _metrics(pred, y) -> dict[str, float]:

    out = regression_summary(pred, y)
    m, v = pred.mean, pred.var
    out["nll_normal"] = float(np.mean(0.5 * np.log(2 * np.pi * v) + 0.5 * (y - m) ** 2 / v))
    out["ratio_epi_ale"] = float(np.mean(pred.epistemic_var / pred.aleatoric_var))
    return out


def run_cell(cell, device: str = "cpu", progress: bool = False) -> CellResult:
    """Train a 5-member ensemble on one standard split; report DE and EXT from the same fit."""

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1") or 1))
    s = {**SETTINGS, **dict(cell.settings)}
    t0 = time.perf_counter()
    ds = load(cell.dataset)
    X_tr, y_tr, X_te, y_te = ds.split(int(cell.split))
    hidden = int(s["hidden_large"] if cell.dataset in LARGE else s["hidden"])
    random_state = network_seed(cell.seed, cell.split)
    fit_settings = dict(n_members=int(s["n_members"]), hidden=(hidden,), activation="relu", lr=float(s["lr"]),
                        weight_decay=float(s["weight_decay"]), batch_size=int(s["batch_size"]),
                        epochs=int(s["epochs"]), lr_drop=str(s["lr_drop"]))
    # the registry's `ensemble` (the Bayesian correction) with the paper's Gaussian components (tail_df=None);
    # DE and EXT are both predicted from the one fit
    est = build("ensemble", **fit_settings, validation_fraction=0.0, tail_df=None, device=device,
                random_state=random_state, progress=progress)
    t1 = time.perf_counter()
    est.fit(X_tr, y_tr)
    t2 = time.perf_counter()

    rng = np.random.default_rng([int(cell.seed), int(cell.split)])
    keep = np.sort(rng.choice(len(y_te), size=min(PIT_POINTS, len(y_te)), replace=False))
    variants, pits = {}, {}
    for name, correction in (("DE", "none"), ("EXT", "bayes")):
        pred = est.predict_distribution(X_te, correction=correction)
        variants[name] = _metrics(pred, y_te)
        pits[name] = np.round(pit(pred, y_te)[keep], 5).tolist()
    t3 = time.perf_counter()
    info = dict(
        n_train=int(len(y_tr)), n_test=int(len(y_te)), n_features=int(X_tr.shape[1]),
        settings={**fit_settings, "hidden": [hidden]},
        random_state=random_state,
        lambda_prior=float(est.lambda_prior_),
        gammas=[float(g) for g in est.gammas_],
        final_train_nll=[float(v) for v in est.loss_curve_[-1]],
        pit_points=int(len(keep)),
        seconds=dict(load=t1 - t0, fit=t2 - t1, evaluate=t3 - t2),
    )
    return CellResult(variants=variants, artefacts={"pit": pits}, info=info)


# ---------------------------------------------------------------------------------- paper

#: Table 1 of Lakshminarayanan et al. (2017), "Deep Ensembles" column: (mean, +-).
TABLE1 = {
    "nll": {"boston": (2.41, 0.25), "concrete": (3.06, 0.18), "energy": (1.38, 0.22), "kin8nm": (-1.20, 0.02),
            "naval": (-5.63, 0.05), "power": (2.79, 0.04), "protein": (2.83, 0.02), "wine": (0.94, 0.12),
            "yacht": (1.18, 0.21)},
    "rmse": {"boston": (3.28, 1.00), "concrete": (6.03, 0.58), "energy": (2.09, 0.29), "kin8nm": (0.09, 0.00),
             "naval": (0.00, 0.00), "power": (4.11, 0.17), "protein": (4.71, 0.06), "wine": (0.64, 0.04),
             "yacht": (1.58, 0.48)},
}
SPREAD_NOTE = "+- as printed: most likely the sd over splits, not a standard error (see the notes)"


def _paper_numbers() -> tuple[PaperNumber, ...]:
    """Table 1's deep-ensemble column. The NLL appears twice: beside our exact mixture NLL
    (``nll``) and beside ``nll_normal``, the moment-matched Gaussian that the paper scores."""
    out = []
    for metric, rows in TABLE1.items():
        for dataset, (value, spread) in rows.items():
            note = SPREAD_NOTE
            if metric == "rmse" and spread == 0.0:
                note += "; printed to 2 decimals, so +-0.00 means an sd below 0.005"
            targets = [("nll", "; ours: the exact mixture"), ("nll_normal", "; the paper's convention (moment-matched Gaussian)")] \
                if metric == "nll" else [(metric, "")]
            for key, extra in targets:
                out.append(PaperNumber(dataset, "DE", key, value, spread, None, "Table 1, Deep Ensembles", note + extra))
    return tuple(out)


METRICS = (
    MetricSpec("rmse", "RMSE", "lower"),
    MetricSpec("nll", "NLL (mixture)", "lower"),
    MetricSpec("nll_normal", "NLL (moment-matched Gaussian, the paper's)", "lower"),
    MetricSpec("crps", "CRPS", "lower"),
    MetricSpec("coverage_95", "coverage of the 95 % interval", "closer to 0.95"),
    MetricSpec("width_95", "mean width of the 95 % interval", "lower", "read together with coverage"),
)


NOTES = f"""\
Protocol of Lakshminarayanan et al. (2017, Sec. 3.3) on the standard splits of Hernandez-Lobato & Adams
(2015): 20 train/test splits per data set (5 for protein), 5 members, one hidden layer of 50 ReLU units
(100 for protein), 40 epochs, batch 100, Adam at a fixed learning rate, standardised inputs and targets;
metrics on the test set in the data's own units. What differs:
- No adversarial training (the paper's Table 1 uses it, with eps = 0.01 x the input range): our "DE" is
  the plain NLL-trained ensemble, compared with the adversarially trained numbers of Table 1.
- Learning rate 0.01, not the paper's 0.1. {LR_NOTE}
- No weight decay stated in the paper; we use lambda = 1e-8 (per-sample; the estimator needs lambda > 0).
- Our `nll` is the exact mixture NLL; the paper scores the moment-matched Gaussian (our `nll_normal`).
- "EXT" adds Hoffmann & Elster's last-layer term gamma_l ||h_l(x)||^2 to each member's variance; the
  paper has no such variant.
- Year Prediction MSD (Table 1's tenth row) is not part of this benchmark.
- The paper's +- are most likely standard deviations over the splits, not standard errors: the table's
  MC-dropout column equals Gal & Ghahramani's (2016) standard errors times sqrt(20) (boston RMSE
  0.19 -> 0.85, concrete 0.12 -> 0.53), while its PBP column keeps PBP's standard errors. The flags
  below therefore mark differences larger than one split-to-split sd; our own +- are standard errors.

Findings against the paper (DE, 20 splits; 5 for protein):
- NLL and RMSE agree with Table 1 on boston, concrete, energy, power and yacht (within the paper's
  sd), and on wine with the paper's Gaussian NLL (0.94 vs 0.94). Our wine mixture NLL is 0.99
  because of one split (10: 2.22 against 1.00 for the Gaussian): there the members are sharp and
  disagree, so test points between their means fall in a trough of the mixture; EXT's extra
  variance fills it (0.95 on that split, 0.92 on average).
- kin8nm, protein: ours are slightly better (kin8nm NLL -1.23 vs -1.20, RMSE 0.079 vs 0.09; protein
  RMSE 4.58 vs 4.71, mixture NLL 2.81 vs 2.83 - the Gaussian NLL 2.84 agrees); flagged only because
  the paper's sd is tiny. Yacht RMSE 1.03 vs 1.58 (better, NLL equal).
- naval: NLL -4.39 (mixture) / -3.45 (Gaussian) against -5.63. This is the learning rate: naval's
  target spread is tiny (sd 0.015), and at a fixed 0.01 Adam cannot settle the members to the
  required precision (normalised residual sd about 0.06); the members' means scatter, so the
  moment-matched Gaussian is much worse than the mixture. On splits 0-2, lr 0.003 gives RMSE 0.001,
  NLL -5.67 (mixture) / -5.62 (Gaussian), i.e. the paper's number, at the cost of boston, energy and
  yacht (see the learning-rate note). One rate for all nine, as in the paper, cannot match both.
- EXT vs DE: the last-layer term widens the 95 % intervals by 0-3.3 % and changes the NLL by less
  than 0.04 except on wine (-0.07); with N of several hundred to tens of thousands gamma_l is O(1/N),
  so its contribution is small, as Hoffmann & Elster report for their larger data sets.

Run history: first run at 067780d (2026-11-22; store lost). Re-run on 2026-11-27 at 8c45067 to ship
the cells (issue 23): every cell gave the numbers of the first run to the page's printed precision,
except protein split 1, which the training loop's divergence check (added since, issue 22) stopped
at a one-epoch loss spike (epochs 23 and 31 at 214 and 1.4e4, back at 0.16 the next epoch). The
check now lets training recover from a spike (commit 05c7b3e); that cell was run again there.
"""


EXPERIMENT = Experiment(
    name="uci",
    title="UCI regression benchmark: deep ensembles (5 members) with and without the Bayesian correction",
    paper=PAPER,
    presets={
        "quick": Preset(
            name="quick",
            description="smoke test (seconds): yacht and energy, splits 0-1, 5 epochs",
            datasets=("yacht", "energy"),
            methods={"ensemble": dict(SETTINGS, epochs=5)},
            seeds=(0,),
            splits=(0, 1),
        ),
        "paper": Preset(
            name="paper",
            description="all nine data sets, all standard splits (20; 5 for protein), 40 epochs",
            datasets=DATASETS,
            methods={"ensemble": dict(SETTINGS)},
            seeds=(0,),
            splits=None,
        ),
    },
    metrics=METRICS,
    paper_numbers=_paper_numbers(),
    run_cell=run_cell,
    n_splits=_n_splits,
    unavailable=_unavailable,
    notes=NOTES,
)
