r"""Automatic labelling of target-domain data by low predictive uncertainty (spec §2.9 [R]).

**A reconstruction, not the thesis's method.** Feng (2019) states the intent (§1.2-1.4, abstract:
use low-uncertainty predictions on unlabelled deployment data as automatic labels and fine-tune a
domain-specific classifier with less manual labelling); §4.3 is empty. Everything below follows
the spec's §2.9 reconstruction, tagged [R] where a choice is ours.

Pipeline (spec §1, §2.9):

1. a classifier trained on the source domain predicts on the unlabelled target pool U:
   p̄(y | x), pseudo-label ŷ = argmax_c p̄_c, uncertainty u(x) (`uncertainty`);
2. `select` takes the items of lowest u: a fraction q of U, an absolute threshold, or a
   class-balanced fraction;
3. the classifier is fine-tuned on source ∪ {(x, ŷ) : x ∈ S} (source kept against forgetting,
   spec §2.9 step 3), optionally for several self-training rounds;
4. it is evaluated on a held-out view of the target objects (the thesis's UniHB 45° set).

Uncertainty u per measure (``ClassPredictive`` measures, thesis §4.1.2 / spec §2.8), lower = more
certain: ``"confidence"`` u = -conf (negated, not 1 - conf, so that no two distinct confidences
round to the same u), ``"predictive_entropy"`` H[p̄], ``"mutual_information"`` MI,
``"variation_ratio"`` VR.

**Ties** are broken by pool index: items are ranked by (u, index) ascending (`rank`), so equal
uncertainties keep the pool's order. `precision_coverage` does not depend on that rule: it reports
only coverages at the ends of tie groups (all items with equal u enter together).

Metrics of a selection S ⊂ U with labels ℓ (spec §2.9): label precision |{x∈S: ℓ=y}|/|S|,
coverage |S|/|U|, recall |{x∈S: ŷ=y}|/|{x∈U: ŷ=y}|, per-class counts and precision
(`selection_metrics`); the precision-coverage curve and its step area.

Comparisons at equal |S| (spec §2.9 "Baselines"), run by the same `AutoLabeler` with
``strategy=``: ``"uncertainty"`` (the method), ``"random"`` (|S| items drawn at random, pseudo-
labelled) and ``"manual"`` (the same random items with their true labels: precision 1 by
construction, |S| manual labels spent). Random and manual use one seeded permutation of U and take
its first |S| items, so at a given seed they select the *same* items and differ only in the labels.
"""

from __future__ import annotations

import copy
import math

import numpy as np
from sklearn.base import clone
from sklearn.utils.validation import check_is_fitted

from dubito._estimator import seeds_from
from dubito._validation import (
    NotFittedError,
    check_bool,
    check_choice,
    check_float,
    check_int,
    to_numpy_if_tensor,
)
from dubito.classification.mc_dropout import MCDropoutClassifier
from dubito.metrics import classification as _cm
from dubito.predictive.classes import ClassPredictive

__all__ = [
    "MEASURES",
    "PER_CLASS",
    "STRATEGIES",
    "AutoLabeler",
    "manual_labels",
    "n_from_fraction",
    "precision_coverage",
    "precision_coverage_area",
    "random_selection",
    "rank",
    "select",
    "selection_metrics",
    "uncertainty",
]

#: Measures usable for selection (spec §2.9 step 1: 1 - conf, H, MI; VR is the spec's optional §2.8 one).
MEASURES = ("confidence", "predictive_entropy", "mutual_information", "variation_ratio")

#: Class-wise selection modes: None (global), "balanced" (as equal a count per predicted class as the
#: budget allows, [R] ours), "proportional" (the lowest-u ⌈q n_c⌉ within each predicted class, spec §2.9).
PER_CLASS = (None, "balanced", "proportional")

#: Selection strategies of `AutoLabeler` (spec §2.9 "Baselines").
STRATEGIES = ("uncertainty", "random", "manual")

# relative guard so that q * n landing a rounding error above an integer does not add an item
_CEIL_GUARD = 1e-12


# ---------------------------------------------------------------------------- inputs
def _check_pred(pred) -> ClassPredictive:
    if not isinstance(pred, ClassPredictive):
        raise ValueError(f"pred must be a dubito.predictive.ClassPredictive, got {type(pred).__name__}")  # noqa: TRY004
    if len(pred) == 0:
        raise ValueError("the target pool is empty: the predictive has no inputs to select from")
    return pred


def _check_measure(measure) -> str:
    if measure not in MEASURES:
        raise ValueError(f"unknown measure {measure!r}; choose one of {', '.join(MEASURES)}")
    return measure


def _check_fraction(fraction) -> float:
    q = check_float(fraction, "fraction")
    if not 0.0 < q <= 1.0:
        raise ValueError(f"fraction must lie in (0, 1], got {fraction}")
    return q


def _check_mode(threshold, fraction, per_class) -> None:
    if (threshold is None) == (fraction is None):
        raise ValueError("pass exactly one of threshold= and fraction= (got "
                         f"{'both' if threshold is not None else 'neither'})")
    if per_class not in PER_CLASS:
        raise ValueError(f"per_class must be one of {PER_CLASS}, got {per_class!r}")
    if threshold is not None and per_class is not None:
        raise ValueError("per_class selection takes a fraction= (a per-item threshold has no class budget); "
                         "pass fraction= or per_class=None")


def n_from_fraction(fraction: float, n: int) -> int:
    """⌈q n⌉ items of n (at least 1 for q > 0; q = 1 gives n), guarded against q·n rounding up."""
    q = _check_fraction(fraction)
    return int(min(n, math.ceil(q * n * (1.0 - _CEIL_GUARD))))


# ---------------------------------------------------------------------------- ranking
def uncertainty(pred: ClassPredictive, measure: str = "confidence") -> np.ndarray:
    """u(x), lower = more certain: -confidence, or the entropy, MI or variation ratio (float64, (N,))."""
    measure = _check_measure(measure)
    if measure == "confidence":
        return -np.asarray(pred.confidence, dtype=np.float64)
    return np.asarray(pred.measure(measure), dtype=np.float64)


def rank(pred: ClassPredictive, measure: str = "confidence") -> np.ndarray:
    """Pool indices ordered by (u, index) ascending: lowest uncertainty first, ties by pool index."""
    u = uncertainty(pred, measure)
    return np.lexsort((np.arange(u.size), u)).astype(np.int64)


def _balanced_counts(counts: np.ndarray, budget: int) -> tuple[int, np.ndarray]:
    """Water level m = the largest int with sum_c min(n_c, m) <= budget, and the classes below it."""
    levels = np.arange(int(counts.max()) + 1)
    filled = np.minimum(counts[None, :], levels[:, None]).sum(axis=1)  # nondecreasing in m
    m = int(np.searchsorted(filled, budget, side="right") - 1)
    return m, counts > m


def select(pred: ClassPredictive, *, measure: str = "confidence", threshold: float | None = None,
           fraction: float | None = None, per_class: str | None = None) -> np.ndarray:
    r"""Indices into the pool of the selected predictions, lowest uncertainty first (spec §2.9 step 2).

    Exactly one of

    * ``threshold``: confidence ≥ threshold for ``measure="confidence"`` (the spec's γ ∈ {0.5, 0.7,
      0.9, 0.95, 0.99}); u ≤ threshold for the entropy, MI and variation ratio (their own units);
    * ``fraction`` q ∈ (0, 1]: the B = ⌈qN⌉ items of lowest u (q = 1 selects all).

    ``per_class`` (with ``fraction`` only), classes being the *predicted* ones, ŷ = argmax p̄:

    * ``"balanced"`` [R ours]: as equal a count per predicted class as the budget B allows (water
      filling): every class gives min(n_c, m), m the largest level with sum_c min(n_c, m) ≤ B; the
      R = B - sum_c min(n_c, m) items left go one each to the R classes still holding items whose
      next candidate has the lowest (u, index). Exactly B items; counts of unsaturated classes
      differ by at most 1.
    * ``"proportional"`` (spec §2.9's "class-balanced"): the ⌈q n_c⌉ lowest-u items within each
      predicted class c (so at most ⌈q n_c⌉ per class; the total may exceed B by < K).

    Within any mode items are ranked by (u, pool index): ties go to the lower index. Returns int64
    indices ordered by (u, index). Bad input (not exactly one of threshold/fraction, q outside
    (0, 1], unknown measure, empty pool, per_class with a threshold) raises ``ValueError``.
    """
    _check_mode(threshold, fraction, per_class)
    measure = _check_measure(measure)
    pred = _check_pred(pred)
    order = rank(pred, measure)
    n = order.size
    if threshold is not None:
        t = check_float(threshold, "threshold")
        if measure == "confidence":
            keep = pred.confidence[order] >= t
        else:
            keep = uncertainty(pred, measure)[order] <= t
        return order[keep]
    budget = n_from_fraction(fraction, n)
    if per_class is None:
        return order[:budget]
    k = pred.n_classes
    labels = pred.predict()[order]  # predicted class of each ranked item
    # position of each ranked item within its class (0 = the class's most certain item)
    by_class = np.lexsort((np.arange(n), labels))  # ranked positions grouped by class, rank order kept
    counts = np.bincount(labels, minlength=k)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    within = np.empty(n, dtype=np.int64)
    within[by_class] = np.arange(n) - np.repeat(starts, counts)
    if per_class == "proportional":
        quota = np.array([n_from_fraction(fraction, int(c)) if c > 0 else 0 for c in counts])
    else:
        m, open_ = _balanced_counts(counts, budget)
        quota = np.minimum(counts, m)
        rest = budget - int(quota.sum())
        if rest > 0:
            # the (m+1)-th candidates of the unsaturated classes, in rank order: first `rest` win
            nxt = np.flatnonzero((within == m) & open_[labels])  # ranked positions, ascending = (u, index)
            quota[labels[nxt[:rest]]] += 1
    return order[within < quota[labels]]


# ---------------------------------------------------------------------------- metrics
def _labels(y, n: int, k: int, name: str) -> np.ndarray:
    return _cm.check_labels(to_numpy_if_tensor(y), n, k, name)


def precision_coverage(pred: ClassPredictive, y_true, *, measure: str = "confidence",
                       return_thresholds: bool = False):
    r"""Precision of the pseudo-labels ŷ = argmax p̄ among the selected, at each coverage level.

    S(v) = {x : u(x) ≤ v} for every distinct uncertainty v (ascending), so tie groups enter whole
    and the curve does not depend on a tie rule: coverage_j = |S(v_j)|/N, precision_j =
    |{x ∈ S(v_j) : ŷ = y}| / |S(v_j)|. Vectorised: one sort and a cumulative sum. Coverage rises
    to 1, where the precision is the overall accuracy. ``return_thresholds`` adds the v_j in the
    measure's units (confidence itself for ``"confidence"``, so S = {conf ≥ v_j} there).
    """
    measure = _check_measure(measure)
    pred = _check_pred(pred)
    y = _labels(y_true, len(pred), pred.n_classes, "y_true")
    u = uncertainty(pred, measure)
    order = rank(pred, measure)
    us = u[order]
    hits = np.cumsum(pred.predict()[order] == y[order])
    ends = np.flatnonzero(np.r_[us[1:] != us[:-1], True])  # last ranked position of each tie group
    size = ends + 1.0
    coverage = size / len(pred)
    precision = hits[ends] / size
    if return_thresholds:
        v = us[ends]
        return coverage, precision, (-v if measure == "confidence" else v)
    return coverage, precision


def precision_coverage_area(pred: ClassPredictive, y_true, *, measure: str = "confidence") -> float:
    r"""Step area under the precision-coverage curve, sum_j (c_j - c_{j-1}) precision_j, c_0 = 0.

    1 for a perfect ranking with all labels right; the overall accuracy for a constant u (one
    tie group); the analogue of average precision (spec §2.9 "its area" [R: step rule ours]).
    """
    c, p = precision_coverage(pred, y_true, measure=measure)
    return float(np.sum(np.diff(np.r_[0.0, c]) * p))


def selection_metrics(selected, labels, y_true, *, n_pool: int, n_classes: int,
                      predicted=None) -> dict:
    r"""Spec §2.9 metrics of a selection S (pool indices ``selected``, labels given ``labels``).

    ``y_true`` (N,) the pool's true labels; ``predicted`` (N,) the pseudo-labels of the whole pool
    (for the recall). Returns n_selected, coverage |S|/N, precision |{ℓ = y}|/|S| (NaN for an
    empty S), recall |{x∈S: ŷ=y}|/|{x∈U: ŷ=y}| (NaN without ``predicted`` or if no ŷ is right),
    per_class_counts and per_class_precision (by the label given, NaN where a class got none).
    """
    sel = np.asarray(selected, dtype=np.int64)
    lab = np.asarray(labels, dtype=np.int64)
    y = np.asarray(y_true, dtype=np.int64)
    if sel.shape != lab.shape:
        raise ValueError(f"selected {sel.shape} and labels {lab.shape} must have the same shape")
    right = lab == y[sel]
    counts = np.bincount(lab, minlength=n_classes)
    good = np.bincount(lab, weights=right.astype(np.float64), minlength=n_classes)
    with np.errstate(invalid="ignore", divide="ignore"):
        per_prec = good / counts
    recall = float("nan")
    if predicted is not None:
        pr = np.asarray(predicted, dtype=np.int64)
        total = int(np.sum(pr == y))
        if total:
            recall = float(np.sum(pr[sel] == y[sel])) / total
    return {
        "n_selected": int(sel.size),
        "coverage": sel.size / n_pool,
        "precision": float(right.mean()) if sel.size else float("nan"),
        "recall": recall,
        "per_class_counts": counts.astype(np.int64),
        "per_class_precision": per_prec,
    }


# ---------------------------------------------------------------------------- comparisons
def random_selection(n_pool: int, size: int, random_state=None) -> np.ndarray:
    """The first ``size`` items of a seeded permutation of range(n_pool) (spec §2.9 "random |S_q|").

    Nested in ``size`` at a fixed seed; the same items `manual_labels` labels by hand.
    """
    n_pool = check_int(n_pool, "n_pool", min_value=1)
    size = check_int(size, "size", min_value=0)
    if size > n_pool:
        raise ValueError(f"size {size} exceeds the pool ({n_pool} items)")
    seed = seeds_from(random_state, 1)[0]
    return np.random.default_rng(seed).permutation(n_pool)[:size].astype(np.int64)


def manual_labels(y_pool, size: int, random_state=None) -> tuple[np.ndarray, np.ndarray]:
    """(indices, true labels) of ``size`` random pool items: the equal-size manual-labelling baseline.

    Same items as ``random_selection(len(y_pool), size, random_state)``; precision 1 by construction.
    """
    y = np.asarray(to_numpy_if_tensor(y_pool))
    idx = random_selection(len(y), size, random_state)
    return idx, y[idx].astype(np.int64)


# ---------------------------------------------------------------------------- fine-tuning
def _is_fitted(est) -> bool:

    try:
        check_is_fitted(est)
    except Exception:  # noqa: BLE001 - any failure means "not fitted"
        return False
    return True


def _continuable(est) -> bool:
    """A fitted model that can keep training: `MCDropoutClassifier` or an ensemble of them (their
    ``fine_tune``)."""

    if isinstance(est, MCDropoutClassifier):
        return hasattr(est, "net_")
    members = getattr(est, "members_", None)
    return bool(members) and all(_continuable(m) for m in members) and callable(getattr(est, "fine_tune", None))


# ---------------------------------------------------------------------------- the labeller
class AutoLabeler:
    r"""Auto-label a target pool by low uncertainty and fine-tune (module docstring; spec §2.9 [R]).

    Parameters
    ----------
    estimator : classifier with ``fit(X, y)`` and ``predict_distribution(X) -> ClassPredictive``
        Fitted: used as is (a deep copy; the argument is never changed), so one source model can
        serve every strategy. Unfitted: cloned and fitted on the source data.
    strategy : "uncertainty" | "random" | "manual", default "uncertainty"
        How S is chosen at the size |S| that `select` gives (the comparisons of spec §2.9).
    measure, threshold, fraction, per_class
        As in `select`. Default fraction q = 0.5 [R ours; the spec sweeps q = 0.1..1.0]; pass
        ``fraction=None`` with a ``threshold``.
    rounds : int >= 1, default 1
        Self-training rounds (spec §2.9 "optional: iterate"). Each round re-predicts the *whole*
        pool with the current model, re-selects (pseudo-labels refreshed) and fine-tunes the current
        model on source ∪ S. Random/manual take the first |S_r| items of one fixed permutation, so
        the manual labels are nested and ``n_manual_labels`` = max_r |S_r|.
    finetune_epochs : int >= 1, default 10 [R ours]
    finetune : "auto" | "continue" | "retrain", default "auto"
        "continue": keep training the fitted torch net(s) with their ``fine_tune``
        (MCDropoutClassifier or an ensemble of them); "retrain": fit a clone from scratch on source ∪ S (any estimator); "auto" picks
        "continue" where possible.
    include_source : bool, default True — mix the source data into fine-tuning (against forgetting).
    random_state : None | int — seeds the source fit, the permutation and each round's fine-tuning.

    Fitted attributes: ``estimator_`` (the adapted model), ``source_estimator_``, ``selected_``,
    ``labels_`` (last round's S and its labels), ``history_``: one dict per round, round 0 = no
    adaptation, with n_selected, coverage, n_manual_labels and, given ``y_pool``, precision, recall,
    per_class_counts, per_class_precision; given ``eval_data``, the held-out accuracy, nll, brier,
    ece (after that round's fine-tuning).
    """

    def __init__(self, estimator, *, strategy="uncertainty", measure="confidence", threshold=None, fraction=0.5,
                 per_class=None, rounds=1, finetune_epochs=10, finetune="auto", include_source=True,
                 random_state=None):
        self.estimator = estimator
        self.strategy = strategy
        self.measure = measure
        self.threshold = threshold
        self.fraction = fraction
        self.per_class = per_class
        self.rounds = rounds
        self.finetune_epochs = finetune_epochs
        self.finetune = finetune
        self.include_source = include_source
        self.random_state = random_state

    # ------------------------------------------------------------------ checks
    def _check_settings(self) -> None:
        check_choice(self.strategy, "strategy", STRATEGIES)
        _check_measure(self.measure)
        _check_mode(self.threshold, self.fraction, self.per_class)
        if self.fraction is not None:
            _check_fraction(self.fraction)
        if self.threshold is not None:
            check_float(self.threshold, "threshold")
        check_int(self.rounds, "rounds", min_value=1)
        check_int(self.finetune_epochs, "finetune_epochs", min_value=1)
        check_choice(self.finetune, "finetune", ("auto", "continue", "retrain"))
        check_bool(self.include_source, "include_source")
        if not hasattr(self.estimator, "predict_distribution"):
            raise ValueError("estimator must have predict_distribution(X) -> ClassPredictive (e.g. "
                             f"MCDropoutClassifier), got {type(self.estimator).__name__}")

    @staticmethod
    def _array(X, name: str) -> np.ndarray:
        X = np.asarray(to_numpy_if_tensor(X), dtype=np.float64)
        if X.ndim != 2:
            raise ValueError(f"{name} must be 2-D (n_samples, n_features), got shape {X.shape}")
        if not np.isfinite(X).all():
            raise ValueError(f"{name} holds NaN or inf")
        return X

    # ------------------------------------------------------------------ helpers
    def _pseudo(self, model, X) -> tuple[ClassPredictive, np.ndarray]:
        pred = model.predict_distribution(X)
        classes = np.asarray(getattr(model, "classes_", np.arange(pred.n_classes)))
        return pred, classes[pred.predict()].astype(np.int64)

    def _finetune(self, model, X, y, seed, validation_data):
        mode = self.finetune
        if mode == "auto":
            mode = "continue" if _continuable(model) else "retrain"
        if mode == "continue":
            if not _continuable(model):
                raise ValueError(f"finetune='continue' needs a fitted MCDropoutClassifier (or an ensemble of them); "
                                 f"got {type(model).__name__}: use finetune='retrain'")
            return copy.deepcopy(model).fine_tune(X, y, epochs=int(self.finetune_epochs), random_state=seed,
                                                  validation_data=validation_data)
        new = clone(self.estimator)
        if "random_state" in new.get_params(deep=False):
            new.set_params(random_state=seed % (2**31))
        return new.fit(X, y)

    @staticmethod
    def _scores(model, eval_data) -> dict:
        if eval_data is None:
            return {}
        pred = model.predict_distribution(eval_data[0])
        y = eval_data[1]
        return {"accuracy": _cm.accuracy(pred, y), "nll": _cm.nll(pred, y), "brier": _cm.brier(pred, y),
                "ece": _cm.ece(pred, y)}

    # ------------------------------------------------------------------ fit
    def fit(self, X_source, y_source, X_target_pool, y_pool=None, *, eval_data=None, validation_data=None):
        """Adapt to the target pool (module docstring, steps 1-3; step 4 per round with ``eval_data``).

        ``y_pool``: the pool's true labels, used **only** by ``strategy="manual"`` and to record the
        pseudo-label precision (never for selection or model choice, spec pitfall 10).
        ``eval_data=(X_view, y_view)``: a held-out target view scored after each round.
        ``validation_data``: labelled data for early stopping during fine-tuning (e.g. a source
        validation split; target labels used there are manual effort and must be counted).
        """
        self._check_settings()
        Xs = self._array(X_source, "X_source")
        ys = np.asarray(to_numpy_if_tensor(y_source))
        if ys.shape != (Xs.shape[0],):
            raise ValueError(f"y_source must have shape ({Xs.shape[0]},), got {ys.shape}")
        Xp = np.asarray(to_numpy_if_tensor(X_target_pool), dtype=np.float64)
        if Xp.ndim != 2 or Xp.shape[0] == 0:
            raise ValueError(f"the target pool is empty or not 2-D: X_target_pool has shape {Xp.shape}")
        Xp = self._array(Xp, "X_target_pool")
        if Xp.shape[1] != Xs.shape[1]:
            raise ValueError(f"X_target_pool has {Xp.shape[1]} features but X_source has {Xs.shape[1]}")
        yp = None
        if y_pool is not None:
            yp = np.asarray(to_numpy_if_tensor(y_pool))
            if yp.shape != (Xp.shape[0],):
                raise ValueError(f"y_pool must have shape ({Xp.shape[0]},), got {yp.shape}")
            yp = yp.astype(np.int64)
        if self.strategy == "manual" and yp is None:
            raise ValueError("strategy='manual' needs y_pool (the true labels the manual annotator provides)")
        rounds = int(self.rounds)
        source_seed, perm_seed, *round_seeds = seeds_from(self.random_state, 2 + rounds)

        if _is_fitted(self.estimator):
            model = copy.deepcopy(self.estimator)
        else:
            model = clone(self.estimator)
            if "random_state" in model.get_params(deep=False) and model.get_params()["random_state"] is None:
                model.set_params(random_state=source_seed % (2**31))
            model.fit(Xs, ys)
        self.source_estimator_ = model
        perm = np.random.default_rng(perm_seed).permutation(Xp.shape[0]).astype(np.int64)

        history = [dict(round=0, n_selected=0, coverage=0.0, n_manual_labels=0, **self._scores(model, eval_data))]
        n_manual = 0
        sel = np.zeros(0, dtype=np.int64)
        labels = np.zeros(0, dtype=np.int64)
        for r in range(1, rounds + 1):
            pred, pseudo = self._pseudo(model, Xp)
            chosen = select(pred, measure=self.measure, threshold=self.threshold, fraction=self.fraction,
                            per_class=self.per_class)
            if self.strategy == "uncertainty":
                sel = chosen
            else:
                sel = perm[: chosen.size]
            if self.strategy == "manual":
                labels = yp[sel]
                n_manual = max(n_manual, sel.size)
            else:
                labels = pseudo[sel]
            rec = {"round": r, "n_selected": int(sel.size), "coverage": sel.size / Xp.shape[0],
                   "n_manual_labels": n_manual}
            if yp is not None:
                k = max(pred.n_classes, int(yp.max()) + 1)
                m = selection_metrics(sel, labels, yp, n_pool=Xp.shape[0], n_classes=k, predicted=pseudo)
                rec.update({key: v for key, v in m.items() if key not in rec})
            if sel.size:
                Xf = np.concatenate([Xs, Xp[sel]]) if self.include_source else Xp[sel]
                yf = np.concatenate([ys.astype(np.int64), labels]) if self.include_source else labels
                model = self._finetune(model, Xf, yf, round_seeds[r - 1], validation_data)
            rec["finetuned"] = bool(sel.size)
            rec.update(self._scores(model, eval_data))
            history.append(rec)
        self.estimator_ = model
        self.selected_ = sel
        self.labels_ = labels
        self.history_ = history
        return self

    # ------------------------------------------------------------------ use
    def evaluate(self, X_view, y_view) -> dict:
        """Accuracy, NLL, Brier and ECE (M = 20) of the adapted model on a held-out view (spec §2.9 step 4)."""
        if not hasattr(self, "estimator_"):

            raise NotFittedError("This AutoLabeler instance is not fitted yet. Call 'fit' first.")
        return self._scores(self.estimator_, (self._array(X_view, "X_view"), y_view))

    def predict_distribution(self, X) -> ClassPredictive:
        """The adapted model's predictive at X."""
        return self.estimator_.predict_distribution(X)
