"""Classification under uncertainty (Feng 2019; spec ``shared/specs/classification-thesis.md``).

MC-dropout classifiers with Bernoulli, concrete or Multi-Drop dropout (`MCDropoutClassifier`,
`wrap` for any torch classifier) and deep ensembles of them (`DeepEnsembleClassifier`), all
returning `dubito.predictive.ClassPredictive`; the co-occurrence CRF that refines the class
probabilities of the objects of one scene (`CooccurrenceCRF`, `CooccurrenceStatistics`);
auto-labelling of a shifted target domain by the least uncertain predictions (`AutoLabeler`, `select`).
"""

from dubito.classification.autolabel import AutoLabeler, precision_coverage, precision_coverage_area, select
from dubito.classification.context import CooccurrenceCRF, CooccurrenceStatistics
from dubito.classification.ensemble import DeepEnsembleClassifier
from dubito.classification.mc_dropout import MCDropoutClassifier, mc_logits, wrap
from dubito.classification.networks import build_network, insert_dropout

__all__ = ["AutoLabeler", "precision_coverage", "precision_coverage_area", "select", "CooccurrenceCRF", "CooccurrenceStatistics", "DeepEnsembleClassifier", "MCDropoutClassifier", "build_network", "insert_dropout", "mc_logits", "wrap"]
