r"""Pequignot et al.: OOD detection for regression by the spread of predictors, and parameter vs
predictor entropy (spec ``shared/specs/ood-predictor-entropy.md`` §4-§6), reproduced.

Datasets (cell dataset names): ``ood-wave`` (the 1-D set of [P] Fig. 1, `dubito.data.ood_synthetic`,
no standardisation, nu = U[-4, 2]); the UCI sets ``boston, concrete, energy, wine, yacht`` (small:
H = 50, batch 50, patience 30) and ``naval`` (= the paper's navalC: the shared copy's target is the
compressor decay coefficient), ``power`` (= powerplant), ``protein`` (large: H = 100, batch 500,
patience 10). UCI cells use the paper's one split (`ood_synthetic.paper_split`: sklearn
``train_test_split(test_size=0.1, random_state=42)``), X and y standardised with the training
statistics; the paper's "3 runs" are the seeds of one split (cell split is always 0).

Methods (one cell per (dataset, method, seed); built through `dubito.methods`; variant names are
the paper's columns, `VARIANT`): ``nn-hyvi``, ``funn-hyvi``, ``mfvi``, ``funn-mfvi`` (the registry's
``hyvi``, `HyperVIRegressor`, hypernet / mean-field x parameter / function space: ``mfvi`` is
mean-field VI over the weights, as the registry's ``mfvi``, here with the paper's Monte Carlo KL
of the HyVI estimator), ``mc-dropout`` (`MCDropoutRegressor`, one hidden layer, p = 0.05, [C]'s
loss converted: `_mc_dropout_weight_decay`), ``deterministic-ensemble`` (the paper's "Ensemble": 5
registry ``deterministic`` members, MSE, SGD lr 0.01 momentum 0.9; not the registry's
``ensemble``, whose members have variance heads), ``nuts`` (the paper's "HMC":
`NUTSNetworkRegressor` with the noise fixed at sigma_l, prior sd 0.5, a reduced budget;
``ood-wave`` and the small sets only, as the paper). Every method works in the standardised units
of the split.

Per cell (`_evaluate`): ``auroc`` (in = train U test, OOD = ``n_ood`` samples of nu, score the sd
sigma(x) of ``n_predictors`` predictors, `dubito.metrics.ood.auroc`); ``rmse`` and ``lpp`` in original
units (spec §4: LPP the mixture of the predictors with sigma_l for the variational methods and
HMC, N(ybar, Sigma^2 + sigma_l^2) for MC dropout and the ensemble; the ensemble also
``lpp_legacy``, [C]'s sigma_l = 0); ``h_param`` (k-NN entropy, k = 1, of ``n_param_entropy``
parameter samples; the ensemble's member vectors; none for MC dropout) and ``h_pred`` (the mean
over ``n_entropy_draws`` draws of X ~ nu^T of `function_entropy` of fresh predictors at X; spec
§4 Table 2); ``fit_seconds``, ``epochs``; on ``ood-wave`` also ``sigma_ratio`` (spec §6 finding 1:
mean sigma on [-4, -1.5] U [-0.3, 0.3] U [1.5, 2] over mean sigma on the training x) and
``sigma_ratio_far`` (spec test 14: mean sigma on [-4, -2] over that on the training x).
Artefacts: ``sigma_hist`` (counts of log10 sigma on train / test / OOD points on fixed bins, and
quantiles), on ``ood-wave`` the sigma curve on a 500-point grid over [-4, 2] and a ``curve_1d``
band plot (mean +- 1.96 sigma of the predictors).
"""

from __future__ import annotations

from dubito.experiments.ood.cell import run_cell
from dubito.experiments.ood.experiment import EXPERIMENT
from dubito.experiments.ood.formulas import (
    lpp_gaussian,
    lpp_mixture,
    mc_dropout_weight_decay,
    sigma_ratio,
)
from dubito.experiments.ood.report import report_sections
from dubito.experiments.ood.vocab import DATASETS, LARGE, SIGMA_L, SMALL, VARIANT

# The package, bottom-up: vocab (names, constants, settings per size class) -> formulas -> data ->
# fits -> evaluate -> cell (run_cell) -> paper (the paper's tables) -> report (sections from the
# stored cells) -> experiment (presets, metrics, the Experiment; NOTES.md beside it).
__all__ = [
    "DATASETS",
    "EXPERIMENT",
    "LARGE",
    "SIGMA_L",
    "SMALL",
    "VARIANT",
    "lpp_gaussian",
    "lpp_mixture",
    "mc_dropout_weight_decay",
    "report_sections",
    "run_cell",
    "sigma_ratio",
]

