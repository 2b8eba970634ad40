"""Classification under uncertainty (Feng 2019; spec ``shared/specs/classification-thesis.md``).

Everything returns `dubito.predictive.ClassPredictive`:

* MC-dropout classifiers with Bernoulli, concrete or Multi-Drop dropout (`MCDropoutClassifier`;
  ``MCDropoutClassifier.wrap(model)`` for any trained torch classifier, ready to predict; the
  function `wrap` is deprecated) and deep ensembles of them (`DeepEnsembleClassifier`);
* a Kronecker-factored Laplace posterior over any classifier's head layers (`KFACLaplace`);
* auto-labelling of a shifted target domain by the least uncertain predictions (`AutoLabeler`,
  `select`, `precision_coverage`);
* the co-occurrence CRF that refines the class probabilities of one scene's objects
  (`CooccurrenceCRF`, `CooccurrenceStatistics`).
"""

from dubito.classification.autolabel import AutoLabeler, precision_coverage, precision_coverage_area, select
from dubito.classification.context import CooccurrenceCRF, CooccurrenceStatistics
from dubito.classification.ensemble import DeepEnsembleClassifier
from dubito.classification.laplace import KFACLaplace
from dubito.classification.mc_dropout import MCDropoutClassifier, mc_logits, wrap
from dubito.classification.networks import build_network, insert_dropout

__all__ = [
    "AutoLabeler", "CooccurrenceCRF", "CooccurrenceStatistics", "DeepEnsembleClassifier", "KFACLaplace",
    "MCDropoutClassifier", "build_network", "insert_dropout", "mc_logits", "precision_coverage",
    "precision_coverage_area", "select", "wrap",
]
