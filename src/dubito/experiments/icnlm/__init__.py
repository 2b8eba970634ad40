r"""Hoffmann & Klein (2023): the IC-NLM against its benchmarks (Table 1, Figs. 7-8), reproduced.

Spec ``shared/specs/icnlm.md`` §3 (experiments, metrics), §4 (Table 1, claims 1-9), §5 (C1-C7).
The paper's data (comma2k19 frames, steering-wheel degrees) cannot be had here; the image task
is ``driving`` (`dubito.data.driving`: CarRacing-v3 frames, road-wheel degrees, 30,000 frames,
seed 0, the episode-wise split 0) with the CNN networks (``network="cnn"``), and a few UCI
regression sets (standard splits) with MLPs serve as further data.

Methods (one cell per (dataset, method, split); interruption safety is per cell, so a GPU
command of 10 minutes holds at least one):

* ``icnlm``: ONE network trained on the pseudo responses z (`ImplicitCopulaRegressor`, ridge,
  VI), then the four posteriors on its features as in the paper (spec §3.2):
  ``IC-NLM {ridge, horseshoe} {VI, NUTS}``, the others by ``from_features`` on the same
  training features. Feature units that are constant on the training rows (dead ReLUs) are
  dropped for all four (``from_features`` refuses constant columns; the network fit keeps
  them, so the ridge-VI variant is refitted on the live columns when there are any). Plus the
  paper's point prediction "DNN on z, mapped back (No Bayes)": yhat = F_Y^{-1}(Phi(zhat(x)))
  with zhat the network's own output (point metrics only).
* ``mc-dropout``: one dropout network (p = 0.05, 1,000 masks: spec §3.3), two variants from
  the same draws: ``MC dropout`` (the authors' code: a KDE of the draws, no noise term) and
  ``MC dropout + noise`` (the draws plus the residual noise, `MCDropoutRegressor`'s default).
* ``mdn`` (50 components), ``deterministic`` (N(f(x), residual variance)), ``naive`` (always
  0 on driving, as the paper; the training mean on UCI).

Metrics per variant (test set, the response's units; `_evaluate`): ``mae``, ``mse`` of the
predictive mean; ``acc_I`` / ``acc_II``, accuracy within the paper's thresholds mapped to the
data (`dubito.metrics.matched_thresholds`: the thresholds at which the naive learner reaches
the paper's naive 93.21 % / 65.12 % on the training responses), and on driving also
``acc_6`` / ``acc_2`` at the raw 6 and 2 degrees; ``nll``; ``crps`` and interval widths on a
fixed subsample of at most `EXPENSIVE_POINTS` test points (the same for every method of a
split: a 1,000-draw MC-dropout mixture costs O(S^2) per point for the CRPS); coverage of the
equal-tailed central intervals at the paper's 11 levels (from the PIT values, which is the
same for a continuous predictive) and ``coverage_error`` (mean |coverage - level| over them);
``calibration_error`` (PIT); ``marginal_calibration_gap`` (sup_t |mean_i F_i(t) - G_n(t)| on
the test set) and ``train_marginal_gap`` (the same in-sample, on at most `TRAIN_POINTS`
training rows: C2); ``var_ratio`` = MSE / mean predictive variance (> 1: overconfident);
``ev_spearman``, the rank correlation of predictive variance and squared error (error-variance
relation, Fig. 8b, as one number); ``fit_seconds``.
"""

from __future__ import annotations

from dubito.experiments.icnlm.cell import run_cell
from dubito.experiments.icnlm.data import data_kind
from dubito.experiments.icnlm.experiment import EXPERIMENT
from dubito.experiments.icnlm.report import report_sections
from dubito.experiments.icnlm.vocab import DRIVING, ICNLM_VARIANTS, LEVELS, UCI

# The package, bottom-up: vocab (names, constants, settings) -> data -> evaluate -> fits -> cell
# (run_cell) -> paper (the paper's table) -> report (sections from the stored cells) -> experiment
# (presets, metrics, the Experiment; NOTES.md beside it, a template filled from vocab).
__all__ = ["EXPERIMENT", "run_cell", "LEVELS", "ICNLM_VARIANTS", "report_sections", "data_kind", "DRIVING", "UCI"]
