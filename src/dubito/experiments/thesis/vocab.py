"""Names and constants of the thesis experiment: the thesis, its variants and measures, the OOD sets."""

from __future__ import annotations

import os
from pathlib import Path

from dubito.experiments.base import MetricSpec
from dubito.methods import CLASSIFIERS

PAPER = ("X. Feng, Uncertainty-Based Improvement of a Visual Classification System, MSc thesis, TUM (LMT), 2019: "
         "Table 4.1, the Laplace table of §4.2.4, §4.3-4.4 (the last two reconstructed from the thesis text)")

#: single-model methods (the thesis's names) -> the `dubito.methods.CLASSIFIERS` entry each fits
CLASSIFIER = {"ori": "softmax", "mcdp": "mc-dropout", "cdp": "concrete-dropout", "mdp": "multidrop"}
#: single-model methods -> dropout of MCDropoutClassifier (the entry's fixed setting)
DROPOUT = {m: CLASSIFIERS[c].fixed["dropout"] for m, c in CLASSIFIER.items()}
SINGLE = tuple(DROPOUT)
ENSEMBLES = tuple(f"ensemble_{m}" for m in SINGLE)
#: every method of the experiment -> the registry entry it builds on: ensembles average the seeds'
#: single models, auto-labelling fine-tunes concrete dropout (its preset's ``base``)
BUILDS_ON = {**CLASSIFIER, **{f"ensemble_{m}": c for m, c in CLASSIFIER.items()}, "autolabel": "concrete-dropout"}
VARIANT = {m: m for m in (*SINGLE, *ENSEMBLES)}
MEASURES = ("confidence", "predictive_entropy", "mutual_information")
SHORT = {"confidence": "conf", "predictive_entropy": "H", "mutual_information": "MI"}
#: coverage levels of the precision-coverage summaries
COVERAGES = (0.1, 0.2, 0.5, 1.0)
#: class-balanced auto-label selection modes (spec §2.9 step 2; `dubito.classification.autolabel.select`)
PER_CLASS = ("balanced", "proportional")
#: MC sample counts of the T sensitivity (spec §2.3 [R])
T_SWEEP = (10, 20, 50, 100)
#: concrete-dropout regulariser scale β as multiples of the KL-consistent 1/N (spec §2.4 [R])
BETA_FACTORS = (0.1, 10.0)
#: CRF weight sweep (collapse at large w; spec §5.2 pilot: w = 4 already hurts)
CRF_SWEEP = (0.0, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0)
#: confusable pairs placed in different scene types (spec §5.1: 1-8, 2-3, 0-6, 7-8, 5-9 from the pilot)
DIGIT_PAIRS = ((1, 8), (2, 3), (0, 6), (7, 8), (5, 9))
PRIMARY_OOD = {"fashion-mnist": "mnist", "digits": "letters"}
DATASETS = ("fashion-mnist", "digits")


def _cache_dir() -> Path:
    return Path(os.environ.get("DUBITO_THESIS_CACHE") or Path.home() / ".cache" / "dubito" / "thesis")


METRICS = (
    MetricSpec("accuracy", "acc", "higher", "adaptation pool (±15° views through the domain gap)"),
    MetricSpec("brier", "Brier", "lower", "summed over classes"),
    MetricSpec("nll", "NLL", "lower"),
    MetricSpec("ece", "ECE w/o", "lower", "20 bins"),
    MetricSpec("ece_ood", "ECE w.", "lower", "pool ∪ primary OOD set, OOD counted wrong"),
    MetricSpec("mce", "MCE w/o", "lower"),
    MetricSpec("mce_ood", "MCE w.", "lower"),
    MetricSpec("miss_auroc", "AUROC miss", "higher", "confidence"),
    MetricSpec("ood_auroc", "AUROC OOD", "higher", "MI (confidence for T = 1), primary OOD set"),
    MetricSpec("miss_aupr", "AUPR miss", "higher", "AUPR-In, confidence"),
    MetricSpec("ood_aupr", "AUPR OOD", "higher", "AUPR-In, MI (confidence for T = 1)"),
)
