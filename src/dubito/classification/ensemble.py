r"""Deep ensembles of classifiers ("ensemble_cdp", "ensemble_mdp"; spec §2.6, thesis Table 4.1).

M members, each a clone of ``estimator`` with its own seed (independent initialisation, data
order, validation split and dropout noise), are trained separately; each predicts with its T MC
passes, and the ensemble's predictive pools the M·T draws (`ClassPredictive.pool`): the average
of the **probabilities** over all M·T draws (not of logits, pitfall 14), with entropy and mutual
information over the pooled draws, so MI includes the members' disagreement (the "ensemble of
Bayesian NNs", spec §2.6 [R]). With ``dropout="none"`` members this is a plain deep ensemble.

Defaults: M = 3 (spec §2.6 [R]: the thesis's ensembles are its 3 seed models); ``estimator``
None -> ``MCDropoutClassifier()`` (concrete dropout).
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, clone

from dubito._validation import check_fitted, check_int
from dubito.classification.mc_dropout import MCDropoutClassifier
from dubito.predictive.classes import ClassPredictive
from dubito.regression.deterministic import seeds_from

__all__ = ["DeepEnsembleClassifier"]


class DeepEnsembleClassifier(ClassifierMixin, BaseEstimator):
    """Ensemble of ``n_members`` clones of ``estimator`` (any classifier with
    ``predict_distribution`` -> `ClassPredictive` and a ``random_state`` parameter).

    ``fit(X, y, **fit_params)`` fits member m with ``random_state`` = seed m (from the ensemble's
    ``random_state``); ``predict_distribution(X)`` pools the members' draws. ``members_`` holds the
    fitted members.
    """

    def __init__(self, estimator=None, n_members=3, random_state=None):
        self.estimator = estimator
        self.n_members = n_members
        self.random_state = random_state

    def _base(self):
        base = MCDropoutClassifier() if self.estimator is None else self.estimator
        if not hasattr(base, "predict_distribution") or not hasattr(base, "get_params"):
            raise ValueError("estimator must be a scikit-learn style classifier with predict_distribution "
                             f"(e.g. MCDropoutClassifier), got {type(base).__name__}")
        if "random_state" not in base.get_params(deep=False):
            raise ValueError(f"estimator {type(base).__name__} has no random_state parameter, so its members could "
                             "not be seeded independently")
        return base

    def fit(self, X, y, **fit_params):
        m = check_int(self.n_members, "n_members", min_value=1)
        base = self._base()
        seeds = seeds_from(self.random_state, m)
        members = []
        for seed in seeds:
            member = clone(base).set_params(random_state=int(seed) % (2**31))
            members.append(member.fit(X, y, **fit_params))
        self.members_ = members
        self.classes_ = members[0].classes_
        self.n_features_in_ = members[0].n_features_in_
        if hasattr(members[0], "feature_names_in_"):
            self.feature_names_in_ = members[0].feature_names_in_
        return self

    def _member_seeds(self, random_state) -> list:
        if random_state is None:
            return [None] * len(self.members_)
        return seeds_from(random_state, len(self.members_))

    def member_distributions(self, X, *, random_state=None, **kwargs) -> list[ClassPredictive]:
        """Each member's predictive at X (its own T passes)."""
        check_fitted(self, ["members_"])
        return [mem.predict_distribution(X, random_state=s, **kwargs)
                for mem, s in zip(self.members_, self._member_seeds(random_state))]

    def predict_distribution(self, X, *, random_state=None, **kwargs) -> ClassPredictive:
        """The pooled predictive of the M members' draws (M·T draws)."""
        return ClassPredictive.pool(self.member_distributions(X, random_state=random_state, **kwargs))

    def sample_logits(self, X, *, random_state=None, **kwargs) -> np.ndarray:
        """The members' logit draws concatenated along T: (M·T, N, K)."""
        check_fitted(self, ["members_"])
        return np.concatenate([mem.sample_logits(X, random_state=s, **kwargs)
                               for mem, s in zip(self.members_, self._member_seeds(random_state))])

    def predict_proba(self, X) -> np.ndarray:
        return self.predict_distribution(X).probs

    def predict(self, X) -> np.ndarray:
        labels = self.predict_distribution(X).predict()
        return self.classes_[labels]
