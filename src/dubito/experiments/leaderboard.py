"""The UCI leaderboard: every dubito regressor with its validated defaults, and tuned, on the
standard splits, against the strongest numbers we know (issue 19).

Nine data sets (`dubito.experiments.uci.DATASETS`) with the standard train/test splits of
Hernandez-Lobato & Adams (2015): 20 each, 5 for protein. A cell fits one method on one split's
training rows and scores its test rows (the data's own units): ``nll`` (exact, of the method's
own predictive), ``rmse``, ``crps``, ``coverage_95``, ``width_95`` (`metrics.regression_summary`),
``fit_seconds`` and ``predict_seconds`` (one thread).

Methods are named as in `dubito.methods` (the CLI's entries, so a leaderboard row is what
``dubito run --method NAME`` fits); ``NAME-tuned`` runs `dubito.tune` first (held-out NLL over the
estimator's declared ``search_space``, ``n_trials`` TPE trials on 80 % of the training rows, the
best refitted on all of them). Nothing is chosen on a test split.

Targets (issue 19): per data set, the lower of the best published NLL and scikit-learn-contrib's
``bde`` (MILE) measured on the same standard splits, `TARGET_NLL`. The issue's bar: one method
with one recipe at or below the target on at least 6 of 9 sets.
"""

from __future__ import annotations

import os
import time

import numpy as np
import torch

from dubito.data import load
from dubito.early_stopping import DEFAULT_EPOCHS, DEFAULT_PATIENCE
from dubito.experiments.base import CellResult, Experiment, MetricSpec, Preset
from dubito.experiments.claims import DatasetMeans, fmt
from dubito.experiments.common import network_seed
from dubito.experiments.peers import NGBoostPeer
from dubito.experiments.uci import DATASETS, _n_splits, _unavailable
from dubito.methods import get_method
from dubito.metrics import regression_summary
from dubito.tune import tune

__all__ = ["EXPERIMENT", "METHODS", "TARGET_NLL", "run_cell", "report_sections"]

#: The lower of the best published NLL and bde (MILE) on the standard splits, as issue 19 lists them.
TARGET_NLL = {"boston": 2.24, "concrete": 2.72, "energy": 0.53, "kin8nm": -1.315, "naval": -7.25, "power": 2.60,
              "protein": 2.63, "wine": 0.89, "yacht": -0.21}

#: bde's fit + predict seconds per split on one thread here, as issue 19 quotes them (the time target).
BDE_SECONDS = {**{d: (20.0, 25.0) for d in ("boston", "concrete", "energy", "wine", "yacht")},
               **{d: (40.0, 55.0) for d in ("kin8nm", "power", "naval")}, "protein": (210.0, 210.0)}

#: (data set, method) whose NLL is shown but neither counts towards the target nor is "best": wine's
#: response is an integer (3-8), and a mixture density's narrow components on the integers make its
#: density there, and so its NLL, unbounded (NOTES).
NOT_COUNTED = {("wine", "mdn")}

#: Leaderboard method -> (the `dubito.methods` entry it fits, tuned or not).
METHODS = {
    "ensemble": ("ensemble", False),
    "ensemble-epochs": ("ensemble", False),
    "ensemble-constant-lr": ("ensemble", False),
    "ensemble-gaussian": ("ensemble", False),
    "ensemble-paper-net": ("ensemble", False),
    "ensemble-raw-inputs": ("ensemble", False),
    "ensemble-hmc": ("ensemble-hmc", False),
    "ensemble-hmc-gaussian": ("ensemble-hmc", False),
    "mc-dropout": ("mc-dropout", False),
    "mc-dropout-paper": ("mc-dropout", False),
    "mc-dropout-epochs": ("mc-dropout", False),
    "mc-dropout-unscaled": ("mc-dropout", False),
    "mdn": ("mdn", False),
    "deterministic": ("deterministic", False),
    "deterministic-paper": ("deterministic", False),
    "icnlm": ("icnlm", False),
    "icnlm-paper": ("icnlm", False),
    "mfvi": ("mfvi", False),
    "hyvi": ("hyvi", False),
    "deepnoise": ("deepnoise", False),
    "ensemble-tuned": ("ensemble", True),
    "mc-dropout-tuned": ("mc-dropout", True),
    "mdn-tuned": ("mdn", True),
    "deterministic-tuned": ("deterministic", True),
    "icnlm-tuned": ("icnlm", True),
    "mfvi-tuned": ("mfvi", True),
    "hyvi-tuned": ("hyvi", True),
}
#: Leaderboard method -> the estimator settings it changes from the entry's defaults. ``icnlm-paper``
#: is the paper's copula, without the random intercept that `ImplicitCopulaRegressor` adds by default;
#: ``deterministic-paper`` and ``mc-dropout-paper`` train with the IC-NLM paper's budget (Adam 2.5e-4,
#: at most 60 epochs) that those estimators had by default before benchmarks/mlp_budget.py;
#: ``ensemble-epochs`` and ``mc-dropout-epochs`` are the budget in epochs (patience 20, cap 500) that
#: the deep ensemble and MC dropout had before benchmarks/ensemble_budget.py counted it in steps;
#: ``ensemble-constant-lr`` the ensemble before its learning rate dropped on a plateau, and
#: ``mc-dropout-unscaled`` MC dropout before its held-out variance scale became the default from 100
#: held-out rows up (session 21; its cells on the four sets where that changed: wine, kin8nm, naval,
#: power); ``ensemble-gaussian`` and ``ensemble-hmc-gaussian`` the two ensembles before their
#: components became Student-t (``tail_df``, session 23); ``ensemble-paper-net`` the ensemble before
#: its nets became (256, 128, 64) with a prior precision of 10 (session 24); ``ensemble-raw-inputs`` the
#: ensemble before it chose between its raw inputs and their piecewise-linear encoding (session 25).
#: Their cells were run before those changes, under the entry's name, and renamed; each row keeps the
#: settings of the rows renamed before it (a constant rate, no scale, Gaussian, the paper's net, raw inputs).
EPOCH_BUDGET = {"patience": DEFAULT_PATIENCE, "epochs": DEFAULT_EPOCHS}
PAPER_BUDGET = {"lr": 2.5e-4, "epochs": 60, "patience": 20}
CONSTANT_LR, UNSCALED, GAUSSIAN = {"lr_drop": "none"}, {"variance_scaling": "none"}, {"tail_df": None}
RAW_INPUTS = {"input_encoding": "none"}
PAPER_NET = {"hidden": (128, 64, 32), "prior_precision": 1.0, **RAW_INPUTS}
OVERRIDES = {"icnlm-paper": {"intercept": False}, "deterministic-paper": PAPER_BUDGET,
             "mc-dropout-paper": {**PAPER_BUDGET, **UNSCALED},
             "ensemble-epochs": {**EPOCH_BUDGET, **CONSTANT_LR, **GAUSSIAN, **PAPER_NET},
             "mc-dropout-epochs": {**EPOCH_BUDGET, **UNSCALED},
             "ensemble-constant-lr": {**CONSTANT_LR, **GAUSSIAN, **PAPER_NET},
             "mc-dropout-unscaled": UNSCALED, "ensemble-gaussian": {**GAUSSIAN, **PAPER_NET},
             "ensemble-hmc-gaussian": GAUSSIAN, "ensemble-paper-net": PAPER_NET,
             "ensemble-raw-inputs": RAW_INPUTS}
# B-DeepNoise is not tuned here: each trial is a full Gibbs run (about 90 s per small-set split at the
# CLI setting), so 20 trials cost about 30 CPU min per cell, 50 CPU h per 100 small-set cells.

#: The `quick` preset's budget: a smoke test of the runner, not of the defaults' length.
QUICK_BUDGET = {"epochs": 50, "patience": 20}

#: Peer rows (not dubito methods): run by the same runner on the same splits, shown beside dubito's
#: rows and left out of the target count (`dubito.experiments.peers`).
PEERS = ("ngboost",)

#: Trials of a tuned cell: Optuna's TPE starts with 10 random ones; 20 gives it 10 guided ones.
N_TRIALS = 20


def run_cell(cell, device: str = "cpu", progress: bool = False) -> CellResult:
    """Fit ``cell.method`` on one standard split (tuning first for ``*-tuned``) and score the test rows."""

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1") or 1))
    s = dict(cell.settings)
    X_tr, y_tr, X_te, y_te = load(cell.dataset).split(int(cell.split))
    seed = network_seed(cell.seed, cell.split)
    if cell.method in PEERS:

        entry, tuned, est = cell.method, False, NGBoostPeer(random_state=seed)
    else:
        entry, tuned = METHODS[cell.method]
        overrides = {**OVERRIDES.get(cell.method, {}), **s.get("overrides", {})}
        est = get_method(entry).make(random_state=seed, device=device, progress=progress, **overrides)
    info = {"n_train": int(len(y_tr)), "n_test": int(len(y_te)), "random_state": seed}
    t0 = time.perf_counter()
    if tuned:
        result = tune(est, X_tr, y_tr, n_trials=int(s.get("n_trials", N_TRIALS)), random_state=seed, progress=progress)
        model = result.estimator
        info["best_params"] = {k: (list(v) if isinstance(v, tuple) else v) for k, v in result.best_params.items()}
        info["tuning_nll"] = result.best_score
        info["failed_trials"] = sum(t["state"] == "FAIL" for t in result.trials)
    else:
        model = est.fit(X_tr, y_tr)
    t1 = time.perf_counter()
    pred = model.predict_distribution(X_te)
    metrics = regression_summary(pred, y_te)
    t2 = time.perf_counter()
    metrics["fit_seconds"] = t1 - t0
    metrics["predict_seconds"] = t2 - t1
    for key in ("best_epoch_", "stopped_by_", "n_stages_", "input_encoding_"):
        value = getattr(model, key, None)
        if value is not None:
            info[key.rstrip("_")] = np.asarray(value).tolist()
    if getattr(model, "encoding_scores_", None):  # the ensemble's held-out NLL of each input encoding
        info["encoding_scores"] = dict(model.encoding_scores_)
    diag = getattr(model, "diagnostics_", None)
    if isinstance(diag, dict):
        info["converged"] = bool(diag.get("converged"))
        info["rhat_mean"] = float(diag.get("rhat_mean", float("nan")))
    return CellResult(variants={cell.method: metrics}, info=info)


# ---------------------------------------------------------------------------------- report
def report_sections(rows, preset) -> list[str]:
    """Beside each data set: the target NLL, each method's mean NLL over its stored splits, the best
    method, and whether a method meets the target; then the issue's bar (6 of 9 by one method)."""

    rows = list(rows)
    methods = [m for m in (*METHODS, *PEERS) if any(m in (r.variants or {}) for r in rows)]
    if not methods:
        return []
    # not counted towards the targets: costly methods on the first splits only, and peers
    subset = {m for m in methods if m in getattr(preset, "method_splits", {}) or m in PEERS}
    lines = ["## Against the targets", "",
             "Mean test NLL over the stored splits (n = splits); target = the lower of the best published "
             "NLL and bde (MILE), issue 19. **Bold**: at or below the target. A method marked * ran on the "
             "first splits only (its cells cost more than a few minutes) or is a peer (NGBoost), and does not "
             "count towards the targets. †: shown, not counted, not best (a density on a discrete response: "
             "the MDN on wine, whose integer response lets its NLL fall without bound).",
             "",
             "| data set | target | " + " | ".join(m + "*" * (m in subset) for m in methods) + " | best |",
             "|---|---:|" + "---:|" * len(methods) + "---|"]
    wins = {m: 0 for m in methods}
    for dataset in DATASETS:
        M = DatasetMeans(rows, dataset)
        target = TARGET_NLL[dataset]
        cells, best = [], None
        for m in methods:
            v, n = M(m, "nll"), M.n(m, "nll")
            if v is None:
                cells.append("—")
                continue
            if m in subset:
                cells.append(f"{fmt(v, 3)} (n={n})")
                continue
            if (dataset, m) in NOT_COUNTED:
                cells.append(f"{fmt(v, 3)} (n={n}) †")
                continue
            if v <= target:
                wins[m] += 1
            best = m if best is None or v < M(best, "nll") else best
            text = f"{fmt(v, 3)} (n={n})"
            cells.append(f"**{text}**" if v <= target else text)
        lines.append(f"| {dataset} | {target} | " + " | ".join(cells) + f" | {best or '—'} |")
    lines += ["", "Sets at or below the target, per method: "
              + ", ".join(f"{m} {wins[m]}/9" for m in methods if m not in subset)
              + f". The bar is 6 of 9 for one method: {'met' if max(wins.values(), default=0) >= 6 else 'not met'}.",
              ""]
    lines += ["## Coverage and time", "",
              "Mean coverage of the 95 % interval (target 0.90-0.98) and fit + predict seconds per split "
              "(bde here: 20-25 s small sets, 40-55 s kin8nm / power / naval, 210 s protein).", "",
              "| data set | " + " | ".join(methods) + " |", "|---|" + "---:|" * len(methods)]
    for dataset in DATASETS:
        M = DatasetMeans(rows, dataset)
        cells = []
        for m in methods:
            cov, fit, pr = M(m, "coverage_95"), M(m, "fit_seconds"), M(m, "predict_seconds")
            cells.append("—" if cov is None else f"{fmt(cov, 3)} / {fmt(fit + pr, 3)} s")
        lines.append(f"| {dataset} | " + " | ".join(cells) + " |")
    return lines + [""]


METRICS = (
    MetricSpec("nll", "NLL", "lower"),
    MetricSpec("rmse", "RMSE", "lower"),
    MetricSpec("crps", "CRPS", "lower"),
    MetricSpec("coverage_95", "coverage of the 95 % interval", "closer to 0.95"),
    MetricSpec("width_95", "mean width of the 95 % interval", "lower", "read together with coverage"),
    MetricSpec("fit_seconds", "fit seconds (tuning included)", "lower"),
)

NOTES = """\
Every method runs with its `dubito.methods` settings (the estimators' validated defaults: a held-out
10 % of the training rows for early stopping; the CLI's shorter budget for B-DeepNoise), the `-tuned`
rows with `dubito.tune` first. The targets are issue 19's: the lower of the best published NLL and
bde (MILE) on the standard splits. The `defaults` preset is the seven fast methods with their
defaults, plus three `-paper` rows with the earlier defaults that session 19 changed (`OVERRIDES`):
`icnlm-paper` is the paper's copula without the random intercept, `deterministic-paper` and
`mc-dropout-paper` train with the IC-NLM paper's budget (Adam 2.5e-4, at most 60 epochs); and two
`-epochs` rows with the budget in epochs (patience 20, cap 500) that session 20 counted in steps for
the ensemble and MC dropout (on the five small sets only: from kin8nm up "auto" is the same budget,
and the `ensemble` / `mc-dropout` cells there serve both). Session 21 added two more:
`ensemble-constant-lr`, the ensemble before its learning rate dropped on a plateau (all nine sets),
and `mc-dropout-unscaled`, MC dropout before its held-out variance scale became the default from 100
held-out rows up (wine, kin8nm, naval and power; `COMPARED_ON` runs a comparison row only where its
change moved the numbers). Their cells were run before the change, under the method's own name, and
renamed. Session 22 added `ensemble-hmc` (`EnsembleHMCRegressor`: the ensemble's members, then one
HMC chain from each over all weights, MILE's optimise-then-sample; docs/results/ensemble-hmc.md).
Session 23 made both ensembles' components Student-t with 6 degrees of freedom (`tail_df`,
docs/results/ensemble-tails.md): `ensemble-gaussian` and `ensemble-hmc-gaussian` hold their former
cells, renamed; `ensemble-hmc` runs on the five small sets only (a kin8nm cell had not finished
after 17 min of full-batch HMC). Session 24 made the ensemble's nets (256, 128, 64) with a prior
precision of 10 (`prior_precision`, docs/results/ensemble-capacity.md): `ensemble-paper-net` holds its
former cells ((128, 64, 32), precision 1), renamed. Session 25 let the ensemble choose, on its held-out
rows, between its raw inputs and their piecewise-linear encoding (`input_encoding="auto"`,
docs/results/ensemble-encoding.md): `ensemble-raw-inputs` holds its former cells, renamed. `paper`
adds the tuned rows and B-DeepNoise (first 5
splits per set, starred on the page, not counted towards the targets). NGBoost is a peer row
(`dubito.experiments.peers`: Normal, stages by the NLL of a held-out 20 %, refitted on every row; an
optional install), shown beside dubito's and not counted. Not in the grid: B-DeepNoise tuned (each
trial is a full Gibbs run: about 30 CPU min per small-set cell).

Cost per cell (fit + predict seconds, mean over the stored splits, one thread on a shared 2-core
machine under load 2-4, so upper bounds): ensemble 1-4 s on the small sets, 8 s kin8nm, 33 s power,
55 s naval, 90 s protein; MC dropout 2-9 s small, 41 s kin8nm, 24 s power, 30 s naval, 100 s
protein; MDN 1-5 s small, 19 s kin8nm, 33 s power, 42 s naval, 196 s protein; deterministic 0.3-1.3 s
small, 8 s kin8nm, 12 s power, 15 s naval, 52 s protein; IC-NLM 13-14 s small, 125 s kin8nm, 211 s
naval, 257 s power; mean-field VI 16 s small, 43 s kin8nm, 265 s naval, 112 s power; FuNN-HyVI 30-65 s small,
381 s kin8nm; NGBoost 149 s kin8nm, 379 s naval (sessions 16-18, two to four processes on the two
cores); these IC-NLM, deterministic and MC-dropout costs are the `-paper` rows'. Session 19's new
defaults (three processes on the two cores): IC-NLM with the intercept 31-46 s small, 157 s kin8nm;
the deterministic net 2.4-7.2 s small, 21 s kin8nm; MC dropout 3-9 s small, 39 s kin8nm. Session
20 (three to four processes on the two cores): the deterministic net 26 s naval, 49 s power, 224 s
protein (52 s with the paper budget); MC dropout 32 s kin8nm, 122 s naval, 54 s power; with the
step-counted budget the ensemble 4-19 s on the small
sets but yacht 40 s, MC dropout 4-17 s. Estimate
for the rest of `defaults` as of session 18, before those rows: about 10 CPU h, most of it FuNN-HyVI (about
5 CPU h for kin8nm's 13 splits, naval and power, 2-3 h for protein's 5 splits), NGBoost (about 3 h
for naval's last 3 splits, power and protein) and IC-NLM / mean-field VI on protein (about
1 h). Since session 18 `dubito bench` keeps freed heap memory in the process (`dubito.heap`),
which made FuNN-HyVI and mean-field VI epochs about 20 % faster in a 3-epoch check; the cells
above were measured before. `paper` adds B-DeepNoise (about 30 CPU min per small set over 5
splits, hours per large set) and ten tuned rows at about 20 fits each: over 60 CPU h; the tuned
rows' trial count should first be measured against their gain. Boston split 0, 20 trials, fit
seconds with tuning: the ensemble 2.321 -> 2.213 (22 s; commit 4a477e6, with the variance scale),
the IC-NLM 2.840 -> 2.678 (157 s), mean-field VI 2.391 -> 2.412 (79 s: no gain); session 11 (before
the scale) the MDN 2.222 -> 2.173 and MC dropout 2.338 -> 2.233. The `ensemble-tuned` row of the
`paper` preset is being filled on the small sets first (store `paper` cells).

Run history: the small sets and kin8nm for MC dropout, MDN and the deterministic net at commits
c5215a3 and be7b2cd (the "-dirty" flag of c5215a3 is an untracked symlink in the run's worktree, no
source change; these estimators' numbers are bit-identical at later commits, which moved them onto
the one estimator base); every ensemble cell at 050e544 (the held-out variance scale); IC-NLM,
mean-field VI and FuNN-HyVI at b4d85b4 / 050e544 (the same code for them), after their validated
fitting landed; NGBoost (ngboost 0.6.0 installed with --no-deps beside scikit-learn 1.9.1) and the
`paper` preset's ensemble-tuned cells at 4a477e6; MC dropout, MDN and the deterministic net on
naval, power and protein at 737ce64 (session 15); IC-NLM, mean-field VI, FuNN-HyVI and NGBoost on
kin8nm and naval at 74e69ca (session 16; the first 6 kin8nm splits of IC-NLM and NGBoost at 050e544
and 4a477e6); mean-field VI on naval (splits 2-19), IC-NLM on power (14 splits) and FuNN-HyVI on
kin8nm (4 more splits) at 8c45067 (session 17); IC-NLM on power (the last 6 splits), mean-field VI
on power (20) and NGBoost on naval (11 more splits) at 8275d44 (session 18; no change to these
estimators since 74e69ca); session 19: NGBoost on naval (its last 3 splits) at 8275d44, the IC-NLM
with its random intercept at 872753f (the four small sets, kin8nm's first splits), the deterministic
net and MC dropout with the longer budget at 157200a (the five small sets, kin8nm; MC dropout on
kin8nm's first splits); session 20: MC dropout on kin8nm (18 splits) and naval, the deterministic
net on naval and power, at 1706602 (the same code for these as 157200a); the ensemble with the
step-counted budget on the five small sets at 9a571bf, MC dropout's at e8ae097 (its former cells
there renamed `ensemble-epochs` / `mc-dropout-epochs`); MC dropout on power and the deterministic
net on protein at 92d61da; session 21: the ensemble with the plateau drop on all nine sets, MC
dropout with the "auto" scale on wine and kin8nm, at 03a42d7 (the former cells renamed
`ensemble-constant-lr` / `mc-dropout-unscaled`); session 22: MC dropout with the "auto" scale on
naval, power and protein at 04d4716 (the same MC-dropout code as 03a42d7), the new `ensemble-hmc`
row on the five small sets at fbd1568; session 23: the ensemble with Student-t components on all
nine sets at 9e1e3d1 (the former `ensemble` / `ensemble-hmc` cells renamed `ensemble-gaussian` /
`ensemble-hmc-gaussian`), and `ensemble-hmc` with Student-t components on wine and yacht at 9e1e3d1;
session 24: the ensemble with (256, 128, 64) nets and prior precision 10 on the five small sets,
kin8nm and protein (all splits), power (all splits) and naval (3) at 28c830e (the former `ensemble`
cells renamed `ensemble-paper-net`; the store's commit field of these cells, and of `ensemble-hmc`'s
two boston cells, was left empty by a runner started outside its worktree and was filled in from
these notes in session 25); session 25: 10 more naval splits of that ensemble at 0a27937 (the same
code for it as 28c830e), then the ensemble with its input encoding chosen on held-out rows at d7df9e6
on concrete, energy, kin8nm, power and yacht (all splits; its former cells, all of them, renamed
`ensemble-raw-inputs`). Still to run for `defaults`: `ensemble` on wine, boston,
naval and protein (about 4 CPU h: the choice trains the members twice; about 0.5 min a wine or
boston cell, 10 min naval, 20 min protein); `ensemble-raw-inputs` on naval (7 splits); `ensemble-hmc`
on boston, concrete and energy (58 cells, about
1 CPU h; 2 boston splits ran at 19823a0, the same code for it); the new icnlm row on kin8nm (14
splits), naval, power and protein (about 4 CPU h at 150-260 s a cell); FuNN-HyVI on kin8nm (13 of 20
splits), naval, power and protein; IC-NLM (both rows) and mean-field VI on protein; NGBoost on power
and protein.

What the cells say (means over all stored splits; the tables below are computed from the cells):
- Session 25: the ensemble trains its members on the raw inputs and on their piecewise-linear
  encoding (16 quantile-bin ramps per column, Gorishniy et al. 2022) and keeps the encoding only
  where it beats the raw inputs on the held-out tenth by more than one standard error
  (`input_encoding="auto"`; chosen on validation rows, docs/results/ensemble-encoding.md). `ensemble`
  against `ensemble-raw-inputs` (the same seeds; where "auto" keeps the raw inputs the cell is the
  same fit), 20 splits each: **power 2.654 -> 2.575 (-0.079 ± 0.007; target 2.60: met)**,
  **concrete 2.833 -> 2.649 (-0.184 ± 0.027; target 2.72: met)**, energy 0.273 -> 0.047 (-0.227 ±
  0.033), yacht -0.375 -> -0.399 (-0.024 ± 0.026), kin8nm -1.355 -> -1.355 (the raw inputs kept on
  every split: the same cells). The encoding was kept on 20 of 20 power splits, 18 concrete, 18
  energy, 3 yacht and 0 kin8nm; RMSE power 3.765 -> 3.565, concrete 4.820 -> 4.157, energy 0.393
  -> 0.315; coverage@95 0.926-0.963. The `ensemble` row meets the target on all five sets it holds;
  its former cells (`ensemble-raw-inputs`) meet naval and protein by wide margins (-8.41 [-7.25],
  2.365 [2.63]) and miss wine and boston, where "auto" kept the raw inputs on every validation split
  (0.910 [0.89], 2.389 [2.24]). So the recipe is expected to meet **7 of the 9 targets**, above
  the bar of 6: a projection until naval and protein hold its cells (the page counts only the cells
  a row holds: 5). The price is time: two trainings a fit, power 168 s a split (bde 40-55 s),
  energy 63 s, yacht 79 s, kin8nm 50 s, concrete 44 s (bde 20-25 s on the small sets).
- Session 24: the ensemble's nets became (256, 128, 64) with a N(0, 1/10) prior on every
  standardised weight (`prior_precision=10`; chosen on validation rows,
  docs/results/ensemble-capacity.md). `ensemble` against `ensemble-paper-net` (its former cells,
  (128, 64, 32) with precision 1; the splits both hold): yacht -0.203 -> -0.375 (target -0.21: met),
  energy 0.479 -> 0.273, kin8nm -1.340 -> -1.355, protein 2.400 -> 2.365 (5 splits), naval -8.307 ->
  -8.409 (3 splits), boston 2.422 -> 2.389, concrete 2.846 -> 2.833, wine 0.912 -> 0.910 (target
  0.89), power 2.645 -> 2.654 (20 splits; the validation rows had predicted +0.008 there). RMSE
  falls on every set but power (energy 0.513 -> 0.393, boston 3.26 -> 3.12); coverage@95
  0.923-0.973. **One method with one recipe now meets 5 of the 9 targets** (energy, kin8nm, naval,
  protein, yacht; naval on 3 new splits, its former cells met it on all 20); the bar is 6. Power
  misses by 0.054 (a patience of 100 epochs gave -0.04 on validation rows at 2-4x the time: the lead
  for it), wine by 0.02, concrete by 0.11, boston by 0.15. Fit seconds under a load of three
  processes on the two cores: boston 20, wine 12, kin8nm 40 (within bde's), concrete 46, energy 55,
  yacht 39, protein 343 (outside it).
- Session 23: the ensembles' components became Student-t with 6 degrees of freedom (`tail_df=6`:
  each member's mean and variance, heavier tails; chosen on validation rows,
  docs/results/ensemble-tails.md). `ensemble` against `ensemble-gaussian` (the same networks, so the
  same RMSE; 20 splits each, protein 5): energy 0.775 -> 0.479 (target 0.53: met), yacht -0.138 ->
  -0.203 (target -0.21), power 2.693 -> 2.645, boston 2.531 -> 2.422, concrete 2.945 -> 2.846,
  protein 2.454 -> 2.400, wine 0.920 -> 0.912, naval -8.327 -> -8.334, kin8nm -1.347 -> -1.340 (the one set
  that pays, as the validation rows said: +0.006 there, +0.008 here). Coverage@95 0.938-0.973; at
  50 % 0.47-0.50 on seven sets, where the Gaussian components gave 0.50-0.55 (naval 0.65, yacht
  0.63 either way). Energy's gain comes mostly from one row (heating load 13.69, where its nearest
  training rows have 10.7-12.4) that lies about 20 predictive sds from the mean in the splits that
  hold it, 2-3 nats on such a split's mean NLL with Gaussian components. **One method with one
  recipe now meets 4 of the 9 targets** (energy, kin8nm, naval, protein); the bar is 6. Yacht misses
  by 0.007, wine by 0.022, power by 0.045. The fit is the same arithmetic; these cells ran under a
  load of four to five processes on the two cores, so their seconds are upper bounds. The ensemble
  with HMC gains the same way, `ensemble-hmc` against `ensemble-hmc-gaussian` (20 splits each):
  yacht -0.189 -> -0.249 (below the -0.21 target), wine 0.909 -> 0.898 (target 0.89); it runs on
  the small sets only and so counts towards no target.
- Session 22: `ensemble-hmc` (the ensemble's members, then one HMC chain from each over all
  weights; MILE's recipe, the method behind bde) against `ensemble` (20 splits each): boston 2.531
  -> 2.390 (RMSE 3.26 -> 3.09; the best dubito default there, MC dropout 2.43), yacht -0.138 ->
  -0.189 (target -0.21), wine 0.920 -> 0.909 (target 0.89), concrete 2.945 -> 2.950, energy 0.775
  -> 0.833; coverage 0.932-0.944. The validation rows had predicted the same signs but concrete's
  (docs/results/ensemble-hmc.md: boston -0.114, concrete -0.086, yacht -0.018, wine -0.006, energy
  +0.110). No new target is met; yacht and wine come within 0.02. The chains do not reach
  stationarity in 200 iterations (worst chain split R-hat 2.6-3.2): a local exploration around each
  member, which `diagnostics_` reports. Cost 35-79 s a cell under a load of two to three
  processes, against the ensemble's 15-50 s and bde's 20-25 s.
- With Gaussian components (now the `ensemble-gaussian` row) the deep ensemble met three targets:
  kin8nm (-1.347 over 20 splits, target -1.315), naval (-8.33 over 20, target -7.25; session 21)
  and protein (2.454 over 5, target 2.63); 3 of 9. It missed boston (2.53 vs 2.24), concrete (2.95
  vs 2.72), energy (0.78 vs 0.53), power (2.69 vs 2.60), wine (0.92 vs 0.89) and yacht (-0.14 vs
  -0.21, the nearest miss with wine). Against the paper-protocol ensemble of docs/results/uci.md
  (fixed epochs on every row) it is better on eight sets (e.g. energy 1.36 -> 0.78, yacht 1.16 ->
  -0.14, naval -4.39 -> -8.33, power 2.79 -> 2.69, protein 2.81 -> 2.45) and worse on boston (2.37
  -> 2.53), where holding out 10 % of 455 rows costs more than it gains.
- Session 21 let the ensemble's learning rate drop on a plateau (`lr_drop="plateau"`: when every
  member has run out of patience, all get their best weights back and train on from a fresh Adam at
  a tenth of the rate, once), chosen on validation rows (docs/results/ensemble-budget.md: naval
  -7.12 -> -8.35, energy 0.954 -> 0.943, the other sets within 0.01). The test splits agree,
  `ensemble` against `ensemble-constant-lr` (20 splits each, protein 5): naval -6.909 -> -8.327
  (RMSE 0.00025 -> 0.00010, coverage@95 0.988 -> 0.973), concrete 2.959 -> 2.945, energy 0.779 ->
  0.775, protein 2.460 -> 2.454, power 2.694 -> 2.693, boston 2.531 -> 2.531, kin8nm -1.346 -> -1.347,
  wine 0.921 -> 0.920, yacht -0.143 -> -0.138 (the only set a little worse). It costs time: naval's
  second stage runs to the 500-epoch cap, still improving. Fit seconds (under a load of four to five
  processes on the two cores, so upper bounds; the constant-rate cells ran under two to four):
  naval 56 -> 319, protein 90 -> 415, power 33 -> 115, kin8nm 8 -> 43, yacht 39 -> 50, the other
  small sets 4-19 -> 15-37; on validation rows under a lighter load naval took 63 -> 144 s and the
  small sets 1.2-1.9x. MC dropout's held-out variance scale became its default where 100 rows or
  more are held out: `mc-dropout` against `mc-dropout-unscaled`, kin8nm -1.212 -> -1.236 (coverage
  0.972 -> 0.942), wine 0.983 -> 0.986 (0.933 -> 0.927); session 22 (20 splits each): naval -5.053
  -> -5.361 (coverage 0.999 -> 0.952), power 2.771 -> 2.768 (0.967 -> 0.945); protein (5 splits,
  never run unscaled) 2.738, coverage 0.926, 298 s a cell under load.
- Session 20 counted the ensemble's patience and epoch cap in optimiser steps ("auto": the longer of
  20 / 500 epochs and 1,000 / 20,000 steps), chosen on validation rows (docs/results/ensemble-budget.md:
  yacht 0.65 -> -0.01, energy 1.07 -> 0.95, boston 2.55 -> 2.51), because a small set's epoch is a
  few steps (yacht: 4) and 20 epochs of patience stopped members that were still improving. The
  test splits agree, `ensemble` against `ensemble-epochs` (the former budget, 20 splits each): yacht
  0.389 -> -0.143 (RMSE 0.94 -> 0.66), energy 0.899 -> 0.779 (RMSE 0.73 -> 0.51), concrete 2.986 ->
  2.959, boston 2.538 -> 2.531, wine 0.922 -> 0.921; coverage 0.931-0.940 (0.933-0.948 before). On
  kin8nm, naval, power and protein "auto" is the same 20 / 500 epochs, so those cells stand; a
  kin8nm split re-run at 9a571bf gave NLL -1.3318 against the stored -1.3315 (commit 050e544): the
  code between them moved the floats by about 3e-4, not the budget (1706602 gives -1.3318 too).
  MC dropout got the same budget (validation rows: better on all five small sets). Its test splits,
  `mc-dropout` against `mc-dropout-epochs` (20 splits each): boston 2.518 -> 2.426 (RMSE 3.14 ->
  2.89; now the best default on boston, still above the 2.24 target), concrete 3.085 -> 3.037,
  energy 1.449 -> 1.291, yacht 1.951 -> 1.636, wine 0.983 -> 0.983; but its intervals stay too wide
  where the data are nearly noiseless (coverage@95 energy 0.995, yacht 0.998, naval 0.999): the
  masks' spread alone exceeds the errors. `variance_scaling="heldout"` (an option, not the default)
  fixes naval on validation rows (coverage 1.000 -> 0.954) and hurts yacht (25 held-out rows).
  The deterministic net and the MDN keep their epoch budgets (docs/results/ensemble-budget.md).
  Session 19's longer training of the deterministic net and MC dropout, now on the large sets too
  (20 splits; protein 5), against their `-paper` rows: the deterministic net naval -6.54 vs -6.47,
  power 2.77 vs 2.81, protein 2.77 vs 2.82; MC dropout naval -5.05 vs -4.87 (coverage 0.999), power
  2.77 vs 2.81. Neither comes near the ensemble (naval -8.33, power 2.69, protein 2.45).
- The held-out variance scale (`dubito.variance_scale`, its prior chosen on diabetes and Friedman #1,
  not here; measured with the epoch budget, now the `ensemble-epochs` row on the small sets) changed
  the ensemble's NLL against the unscaled defaults of the first run by: naval
  -6.38 -> -6.91, yacht 0.47 -> 0.39, kin8nm -1.35 -> -1.35, wine 0.92 -> 0.92, and cost 0.02-0.06
  on boston (2.51 -> 2.54), concrete (2.97 -> 2.99) and energy (0.84 -> 0.90), where 46-93 held-out
  rows make the scale noisy.
- Coverage at 95 %, the ensemble with Student-t components: 0.938-0.962 on eight sets, naval 0.973
  (0.988 at a constant rate, 1.000 before the scale); with Gaussian components 0.929-0.958. At 50 %
  the t components cover 0.47-0.50 on seven sets; on naval and yacht 0.63-0.65 with either kind:
  errors more peaked than the mixture, which one variance scale cannot fix and a quantile
  recalibration (issue 20) can.
- NGBoost (peer, same splits; the ensemble with Gaussian components in brackets): boston 2.50 (2.53), concrete
  3.08 (2.96), energy 0.79 (0.78), wine 0.94 (0.92), yacht 0.53 (-0.14), kin8nm -0.41 over 20 splits
  (-1.35; RMSE 0.175 against 0.067), naval -4.94 over 20 splits (-8.33). The tuned ensemble
  (`paper` cells, 20 trials, run with the former epoch budget) is at least as good as NGBoost on the
  four sets its row has finished (boston 2.49, concrete 3.00, energy 0.77, wine 0.93); against the
  epoch-budget defaults tuning gained on boston and energy and lost a little on concrete and wine,
  where 20 % of a few hundred rows is a noisy tuning score.
- Before session 23, the other dubito methods with their defaults beat the ensemble on boston (MC
  dropout 2.43, the MDN 2.52, against 2.53; now 2.42), protein (2.096 over 5 splits vs 2.460,
  inside the 2.63 target: a third set met by a default, though not by the ensemble row) and wine
  (the artefact below); on naval and power the MDN is behind (-6.78 vs -8.33, 2.71 vs 2.69), MC
  dropout and the deterministic net further (naval -4.87 / -6.47, power 2.81 / 2.81, protein 2.81
  / 2.82); FuNN-HyVI comes next (boston 2.60, wine 0.97) at 30-120 s per small-set split, outside
  bde's time. On the large sets none of IC-NLM, mean-field VI or FuNN-HyVI comes near the
  ensemble: kin8nm (20 splits) IC-NLM -0.886 (RMSE 0.092 against the ensemble's 0.067), mean-field
  VI -1.129, FuNN-HyVI -1.130 (7 splits), against -1.346 and the target -1.315; naval IC-NLM -4.37
  (RMSE 0.0024 against 0.00025), mean-field VI -5.76 (20 splits; RMSE 0.00057), against -8.33
  (RMSE 0.00010); power (20 splits each) IC-NLM 3.19 (RMSE 4.67) and mean-field VI 2.84 (RMSE
  4.14, coverage 0.966) against the ensemble's 2.69 (RMSE 3.75) and the MDN's 2.71 (these IC-NLM
  numbers are the `icnlm-paper` row's).
- Session 19 changed two defaults, each chosen on validation rows (never these test rows), and the
  test splits agree. (1) The IC-NLM's random intercept (docs/results/icnlm/intercept.md): the paper's
  copula ties its latent noise to the norm of the features and over-disperses; with the intercept
  the `icnlm` row against `icnlm-paper` (20 splits each): boston 2.58 vs 2.85 (RMSE 3.43 vs 4.37),
  concrete 3.22 vs 3.47, energy 2.05 vs 2.45, yacht 1.75 vs 2.46 (RMSE 2.95 vs 6.09), kin8nm -1.11
  on 6 splits vs -0.89; coverage 0.90-0.95 (0.93-0.96 before). (2) The deterministic net and MC
  dropout now train with Adam 1e-3 to a cap of 500 epochs instead of the IC-NLM paper's 2.5e-4 /
  60, at which nearly every cell had stopped (docs/results/mlp-budget.md). Against the `-paper`
  rows: the deterministic net boston 2.66 vs 2.74, concrete 3.12 vs 3.25, energy 0.89 vs 2.30 (RMSE
  0.56, below the ensemble's 0.73 of then), yacht 1.89 vs 2.87, kin8nm -1.23 vs -1.18, wine 0.99 vs
  0.97; MC dropout (now the `mc-dropout-epochs` row on the small sets) boston 2.52 vs 2.72, concrete
  3.09 vs 3.27, energy 1.45 vs 2.43, yacht 1.95 vs 2.79, wine 0.98 vs 0.97, with 95 % intervals too
  wide on energy (0.985) and yacht (0.992). No new default meets a target the ensemble misses. Coverage outside
  0.90-0.98 (the rows before session 19): mean-field VI on
  energy (0.989) and yacht (0.985; homoscedastic noise on heteroscedastic sets: too wide), the
  deterministic net on energy (0.895), naval's ensemble (0.988), MDN (0.991), MC dropout (0.997)
  and mean-field VI (0.996 over 20 splits).
- wine: the MDN's NLL of -2.12 is not a win. Wine quality is an integer (3-8); a mixture density
  puts narrow components on the integers and its density there grows without bound, so the NLL of
  a discrete response says nothing about a continuous predictive. It does not count towards the
  target, nor as the best method (`NOT_COUNTED`, marked † in the table; counted until session 19).
  The IC-NLM refuses wine for the same reason (6 distinct values; its cells fail with that
  error).
- Time: with the constant rate (the `ensemble-constant-lr` row) the ensemble was inside bde's time
  on every set but yacht (4-19 s on boston, concrete, energy and wine against 20-25 s; 8-55 s kin8nm
  / power / naval against 40-55 s, naval at the edge under load; 90 s protein against 210 s). With
  the plateau drop it is outside on naval (319 s under load, 144 s on validation rows under a
  lighter one, against 40-55 s) and protein (415 s under load against 210 s): the time target is
  missed where the NLL target was won; see the previous bullet for the others. Yacht's cells took 39.5 s with the step-counted budget, under a
  load of three to four processes on the two cores; the same fit on 80 % of yacht's rows took 18.9 s
  in benchmarks/ensemble_budget.py under a lighter load (1.2 s with the epoch budget).
"""

#: Methods whose cells cost more than a few minutes run on the first 5 splits of each set in the
#: `paper` preset (issue 19 allows it); marked on the page and not counted towards the targets.
FIRST_SPLITS_ONLY = {"deepnoise": 5}

#: The comparison rows run only where the change they record changed the numbers: the budget in
#: steps on the five small sets ("auto" is 20 / 500 epochs from kin8nm up), MC dropout's scale where
#: the held-out tenth has 100 rows or more (protein's were never run unscaled); the ensemble with HMC
#: runs on the small sets only.
SMALL_SETS = ("boston", "concrete", "energy", "wine", "yacht")
COMPARED_ON = {"ensemble-epochs": SMALL_SETS, "mc-dropout-epochs": SMALL_SETS,
               "mc-dropout-unscaled": ("wine", "kin8nm", "naval", "power"), "ensemble-hmc-gaussian": SMALL_SETS,
               # full-batch HMC over every training row: a kin8nm cell had not finished after 17 min (session 23)
               "ensemble-hmc": SMALL_SETS}

FAST = ("ensemble", "ensemble-raw-inputs", "ensemble-paper-net", "ensemble-gaussian", "ensemble-constant-lr",
        "ensemble-epochs",
        "ensemble-hmc", "ensemble-hmc-gaussian", "mc-dropout", "mc-dropout-unscaled", "mc-dropout-epochs",
        "mc-dropout-paper", "mdn", "deterministic", "deterministic-paper", "icnlm", "icnlm-paper", "mfvi", "hyvi")

EXPERIMENT = Experiment(
    name="leaderboard",
    title="UCI leaderboard: dubito's regressors with validated defaults and tuned, against the best known NLL",
    paper="issue 19; standard splits of Hernandez-Lobato & Adams (2015)",
    presets={
        "quick": Preset(
            name="quick",
            description="smoke test (about 15 s): yacht, split 0, the ensemble with defaults and tuned (3 trials), "
                        "each capped at 50 epochs (the defaults' step-counted budget takes minutes there)",
            datasets=("yacht",),
            methods={"ensemble": {"overrides": QUICK_BUDGET},
                     "ensemble-tuned": {"n_trials": 3, "overrides": QUICK_BUDGET}},
            seeds=(0,),
            splits=(0,),
        ),
        "paper": Preset(
            name="paper",
            description="all nine data sets, all standard splits (20; 5 for protein), every method, 20-trial tuning",
            datasets=DATASETS,
            methods={m: {} for m in (*METHODS, *PEERS)},
            seeds=(0,),
            splits=None,
            method_splits=FIRST_SPLITS_ONLY,
            method_datasets=COMPARED_ON,
        ),
        "defaults": Preset(
            name="defaults",
            description="the fast methods with their validated defaults only, all nine sets, all standard splits",
            datasets=DATASETS,
            methods={m: {} for m in (*FAST, *PEERS)},
            seeds=(0,),
            splits=None,
            method_datasets=COMPARED_ON,
        ),
    },
    metrics=METRICS,
    paper_numbers=(),
    run_cell=run_cell,
    n_splits=_n_splits,
    unavailable=_unavailable,
    notes=NOTES,
    report_sections=report_sections,
    builds_on={**{m: entry for m, (entry, _) in METHODS.items() if m != entry}, **{p: None for p in PEERS}},
)
