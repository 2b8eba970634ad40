r"""Deep ensembles of classifiers ("ensemble_cdp", "ensemble_mdp"; spec §2.6, thesis Table 4.1).

M members, each a clone of ``estimator`` with its own seed (independent initialisation, data
order, validation split and dropout noise), are trained separately; each predicts with its T MC
passes, and the ensemble's predictive pools the M·T draws (`ClassPredictive.pool`): the average
of the **probabilities** over all M·T draws (not of logits, pitfall 14), with entropy and mutual
information over the pooled draws, so MI includes the members' disagreement (the "ensemble of
Bayesian NNs", spec §2.6 [R]). With ``dropout="none"`` members this is a plain deep ensemble.

Defaults: M = 3 (spec §2.6 [R]: the thesis's ensembles are its 3 seed models); ``estimator``
None -> ``MCDropoutClassifier()`` (concrete dropout).

Validated fitting (`dubito.early_stopping`). Each member holds out its own stratified share of the
training rows (drawn from its own seed, so together the members train on every row) and stops
early on its held-out NLL, with its best weights restored (`MCDropoutClassifier`). The share and
the patience are the estimator's (``MCDropoutClassifier()``: ``validation_fraction`` = 0.1,
``patience`` = 20); ``validation_fraction`` / ``patience`` given here (not None) replace them in
every member, e.g. ``validation_fraction=0`` trains every member on every row. The ensemble
records, from its members: ``validation_curve_`` (epochs, M), member m's held-out NLL per epoch
(NaN after it stopped; (0, M) without held-out rows), ``best_epoch_`` (M,) and ``stopped_by_``:
"patience" when every member stopped by the rule, else "cap" (each member's own in
``members_[m].stopped_by_``).

Persistence (no pickle): an ensemble of `MCDropoutClassifier` members is saved as one
``.safetensors`` file, each member's tensors under its own prefix (``m0.``, ``m1.``, ...) and the
settings as JSON metadata; ``DeepEnsembleClassifier.load(path)`` gives bit-identical predictions.
Members with a user network need ``load(path, network=...)``, as `MCDropoutClassifier.load`. Other
member classes cannot be saved (ValueError). The estimator base is `dubito._estimator.DubitoClassifier`
(``save`` / ``load`` through ``_state`` / ``_from_state``, ``predict`` the argmax of ``predict_proba``).
"""

from __future__ import annotations

import numpy as np
from sklearn.base import clone

from dubito import io
from dubito._estimator import DubitoClassifier, seeds_from
from dubito._validation import check_fitted, check_int
from dubito.classification.mc_dropout import MCDropoutClassifier
from dubito.early_stopping import check_patience, check_validation_fraction
from dubito.predictive.classes import ClassPredictive

__all__ = ["DeepEnsembleClassifier"]


class DeepEnsembleClassifier(DubitoClassifier):
    """Ensemble of ``n_members`` clones of ``estimator`` (any classifier with
    ``predict_distribution`` -> `ClassPredictive` and a ``random_state`` parameter).

    ``fit(X, y, **fit_params)`` fits member m with ``random_state`` = seed m (from the ensemble's
    ``random_state``); ``predict_distribution(X)`` pools the members' draws. ``members_`` holds the
    fitted members.

    ``validation_fraction`` (in [0, 0.5)) and ``patience`` (>= 1): None (default) keeps the
    estimator's own (0.1 and 20 for ``MCDropoutClassifier()``); a value is set on every member
    (the estimator must have the parameter). Fitted, besides ``members_``: ``validation_curve_``,
    ``best_epoch_``, ``stopped_by_`` (module docstring; only when the members record them).
    """

    def __init__(self, estimator=None, n_members=3, validation_fraction=None, patience=None, random_state=None):
        self.estimator = estimator
        self.n_members = n_members
        self.validation_fraction = validation_fraction
        self.patience = patience
        self.random_state = random_state

    def _base(self):
        base = MCDropoutClassifier() if self.estimator is None else self.estimator
        if not hasattr(base, "predict_distribution") or not hasattr(base, "get_params"):
            raise ValueError("estimator must be a scikit-learn style classifier with predict_distribution "
                             f"(e.g. MCDropoutClassifier), got {type(base).__name__}")
        names = base.get_params(deep=False)
        if "random_state" not in names:
            raise ValueError(f"estimator {type(base).__name__} has no random_state parameter, so its members could "
                             "not be seeded independently")
        for name in ("validation_fraction", "patience"):
            if getattr(self, name) is not None and name not in names:
                raise ValueError(f"{name}={getattr(self, name)!r} is set but estimator {type(base).__name__} has no "
                                 f"{name} parameter; leave it None")
        return base

    def _member_overrides(self) -> dict:
        """The members' ``validation_fraction`` / ``patience`` set here (checked), by name."""
        out = {}
        if self.validation_fraction is not None:
            out["validation_fraction"] = check_validation_fraction(self.validation_fraction)
        if self.patience is not None:
            out["patience"] = check_patience(self.patience)
        return out

    def fit(self, X, y, **fit_params):
        m = check_int(self.n_members, "n_members", min_value=1)
        overrides = self._member_overrides()
        base = self._base()
        seeds = seeds_from(self.random_state, m)
        members = []
        for seed in seeds:
            member = clone(base).set_params(random_state=int(seed) % (2**31), **overrides)
            members.append(member.fit(X, y, **fit_params))
        self._set_members(members)
        return self

    def _set_members(self, members: list) -> None:
        """``members_`` and what the ensemble takes from its first member: ``classes_``,
        ``n_features_in_``, ``feature_names_in_``; then the validation records."""
        self.members_ = members
        self.classes_ = members[0].classes_
        self.n_features_in_ = members[0].n_features_in_
        if hasattr(members[0], "feature_names_in_"):
            self.feature_names_in_ = members[0].feature_names_in_
        self._collect_validation()

    def _collect_validation(self) -> None:
        """``validation_curve_`` (epochs, M; NaN-padded), ``best_epoch_`` (M,) and ``stopped_by_``
        from the members' records (module docstring); nothing when a member has none."""
        for name in ("validation_curve_", "best_epoch_", "stopped_by_"):
            if hasattr(self, name):
                delattr(self, name)
        if not all(hasattr(mem, name) for mem in self.members_
                   for name in ("validation_curve_", "best_epoch_", "stopped_by_")):
            return
        curves = [np.asarray(mem.validation_curve_, dtype=np.float64).reshape(-1) for mem in self.members_]
        table = np.full((max(c.size for c in curves), len(curves)), np.nan)
        for j, c in enumerate(curves):
            table[: c.size, j] = c
        self.validation_curve_ = table
        self.best_epoch_ = np.array([int(mem.best_epoch_) for mem in self.members_], dtype=np.int64)
        self.stopped_by_ = "patience" if all(mem.stopped_by_ == "patience" for mem in self.members_) else "cap"

    def fine_tune(self, X, y, *, epochs: int, random_state=None, validation_data=None) -> DeepEnsembleClassifier:
        """Fine-tune every member in place with its ``fine_tune`` (`MCDropoutClassifier.fine_tune`),
        member m seeded by seed m drawn from ``random_state``; returns self. Early stopping only on
        ``validation_data`` (as `MCDropoutClassifier.fine_tune`); the validation records then
        describe the fine-tuning run."""
        check_fitted(self, ["members_"])
        bad = [type(m).__name__ for m in self.members_ if not callable(getattr(m, "fine_tune", None))]
        if bad:
            raise ValueError(f"fine_tune needs members with a fine_tune method (MCDropoutClassifier), got {bad[0]}")
        for mem, seed in zip(self.members_, seeds_from(random_state, len(self.members_))):
            mem.fine_tune(X, y, epochs=epochs, random_state=int(seed) % (2**31), validation_data=validation_data)
        self._collect_validation()
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
        """p̄(y | x), (N, K): the mean of the members' M·T draws' softmax."""
        return self.predict_distribution(X).probs

    # ------------------------------------------------------------------ persistence
    def _state(self):
        """(tensors, settings): each member's `MCDropoutClassifier._state` under its prefix
        ``m<i>.``; only `MCDropoutClassifier` members can be saved (ValueError otherwise)."""
        check_fitted(self, ["members_"])
        bad = [type(m).__name__ for m in [self.estimator, *self.members_]
               if m is not None and type(m) is not MCDropoutClassifier]
        if bad:
            raise ValueError(f"DeepEnsembleClassifier.save supports MCDropoutClassifier members only, got {bad[0]}")
        tensors, members = {}, []
        for i, mem in enumerate(self.members_):
            t, s = mem._state()
            tensors.update({f"m{i}.{k}": v for k, v in t.items()})
            members.append(s)
        params = dict(n_members=int(self.n_members), random_state=io.json_seed(self.random_state),
                      validation_fraction=io.json_value(self.validation_fraction),
                      patience=io.json_value(self.patience),
                      estimator=None if self.estimator is None else self.estimator._json_params())
        user = None if self.estimator is None else (type(self.estimator.network).__name__
                                                    if not isinstance(self.estimator.network, str) else None)
        return tensors, {"params": params, "members": members, "user_network": user}

    @classmethod
    def _from_state(cls, tensors: dict, settings: dict, *, device=None, where: str = "",
                    network=None) -> DeepEnsembleClassifier:
        """The ensemble rebuilt from `_state`'s output (`load`); ``network`` as in
        `MCDropoutClassifier.load` (needed iff the members have a user network)."""
        with io.rebuilding(where, cls.__name__):
            params = dict(settings["params"])
            members = []
            for i, ms in enumerate(settings["members"]):
                pre = f"m{i}."
                mt = {k[len(pre):]: v for k, v in tensors.items() if k.startswith(pre)}
                members.append(MCDropoutClassifier._from_state(mt, ms, device=device, network=network,
                                                               where=f"{where} (member {i})"))
            base = params["estimator"]
            if base is not None:
                base = io.params_from_json(base, device=device)
                if settings.get("user_network") is not None:
                    base["network"] = network
                base = MCDropoutClassifier(**base)
            # files written before validated fitting have no validation_fraction / patience: None
            est = cls(estimator=base, n_members=params["n_members"], random_state=params["random_state"],
                      validation_fraction=params.get("validation_fraction"), patience=params.get("patience"))
        if not members:
            raise ValueError(f"{where} is a {cls.__name__} file without members (corrupted?)")
        est._set_members(members)
        return est
