r"""Metrics of class predictives (Feng 2019, thesis §4.1.3; spec §3.3): pure numpy functions.

``pred`` is a :class:`~dubito.predictive.ClassPredictive`, or an array of probabilities of
shape (N, K) or (T, N, K) that is wrapped into one. ``y`` holds integer labels 0..K-1,
shape (N,) (integral floats are accepted); anything else raises ``ValueError``.

* :func:`accuracy`, :func:`nll`, :func:`brier` - proper scores of p̄ (thesis eqs. 4.7, 4.8).
* :func:`reliability_diagram`, :func:`ece`, :func:`mce` - M = 20 equal-width bins of the
  confidence (thesis §4.1.3), bins (lo, hi] with the first closed at 0 and the last closed
  at 1.0 (spec §6.12); "w. OOD" by passing ``ood=``: every OOD prediction counts as wrong.
* :func:`misclassification_auroc`, :func:`misclassification_aupr` - correct predictions are
  the positives (thesis §4.1.3), score = a certainty (higher = more likely correct).
* :func:`ood_auroc`, :func:`ood_aupr` - OOD is the positive class and a higher score means
  more OOD (:mod:`dubito.metrics.ood`, the core's convention).

Measures are named as in ``ClassPredictive.MEASURES``. As a certainty (misclassification)
``confidence`` is used as is and the others (entropies, MI, variation ratio) are negated;
as an OOD score the signs flip. Names that clash with the regression metrics (``accuracy``,
``nll``) are reached as ``dubito.metrics.classification.accuracy`` etc.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dubito.metrics import ood as _ood  # the core's OOD conventions
from dubito.predictive.base import as_numpy
from dubito.predictive.classes import ClassPredictive

__all__ = [
    "NLL_FLOOR",
    "N_BINS",
    "accuracy",
    "nll",
    "brier",
    "ReliabilityDiagram",
    "reliability_diagram",
    "ece",
    "mce",
    "certainty",
    "misclassification_auroc",
    "misclassification_aupr",
    "ood_score",
    "ood_auroc",
    "ood_aupr",
    "check_labels",
]

#: Floor on p̄(y|x) inside the NLL: Keras' epsilon 1e-7, which the thesis's TensorFlow
#: cross-entropy clips at (spec §7.15); caps a point's NLL at -log 1e-7 = 16.12 nats.
NLL_FLOOR = 1e-7

#: Reliability bins: M = 20 equal-width bins of the confidence (thesis §4.1.3, spec §3.3).
N_BINS = 20

#: Sign that turns each measure into a certainty (higher = more likely correct).
_CERTAINTY_SIGN = {
    "confidence": 1.0,
    "predictive_entropy": -1.0,
    "expected_entropy": -1.0,
    "mutual_information": -1.0,
    "variation_ratio": -1.0,
}


# ---------------------------------------------------------------------------- inputs
def _as_pred(pred, name: str = "pred") -> ClassPredictive:
    if isinstance(pred, ClassPredictive):
        return pred
    try:
        return ClassPredictive(pred)
    except ValueError as exc:
        raise ValueError(f"{name}: expected a ClassPredictive or an array of probabilities; {exc}") from None


def check_labels(y, n: int, k: int, name: str = "y") -> np.ndarray:
    """Integer labels in 0..k-1 of shape (n,) as int64; ``ValueError`` naming the problem."""
    arr = as_numpy(y, name)
    if arr.ndim != 1 or arr.shape[0] != n:
        raise ValueError(f"{name} must have shape ({n},) (one label per input), got {arr.shape}")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} holds {int((~np.isfinite(arr)).sum())} NaN/inf label(s)")
    if not (arr == np.round(arr)).all():
        raise ValueError(f"{name} must hold integer class labels; found non-integers such as {arr[arr != np.round(arr)][0]}")
    bad = (arr < 0) | (arr > k - 1)
    if bad.any():
        raise ValueError(
            f"{name} holds {int(bad.sum())} label(s) outside 0..{k - 1} (the predictive has K = {k} "
            f"classes), e.g. {int(arr[bad][0])}"
        )
    return arr.astype(np.int64)


def _pred_y(pred, y) -> tuple[ClassPredictive, np.ndarray]:
    pred = _as_pred(pred)
    return pred, check_labels(y, len(pred), pred.n_classes)


def _nonempty(pred: ClassPredictive, what: str) -> None:
    if len(pred) == 0:
        raise ValueError(f"{what} needs at least one input; the predictive is empty")


def _reduce(values: np.ndarray, reduction: str):
    if reduction == "mean":
        return float(values.mean())
    if reduction == "none":
        return values
    raise ValueError(f"reduction must be 'mean' or 'none', got {reduction!r}")


# ---------------------------------------------------------------------------- scores
def accuracy(pred, y) -> float:
    """Share of inputs with argmax_c p̄_c = y (thesis §4.1.3)."""
    pred, y = _pred_y(pred, y)
    _nonempty(pred, "accuracy")
    return float(np.mean(pred.predict() == y))


def nll(pred, y, *, floor: float = NLL_FLOOR, reduction: str = "mean"):
    r"""Negative log-likelihood -(1/n) sum_i log max(p̄(y_i|x_i), floor) (thesis eq. 4.7).

    Read from ``pred.log_probs`` (log space, spec §3.3). ``floor`` defaults to ``NLL_FLOOR``
    = 1e-7 (spec §7.15); ``floor=0`` gives +inf for a label with probability 0.
    ``reduction="none"`` returns the (N,) per-point values.
    """
    pred, y = _pred_y(pred, y)
    _nonempty(pred, "nll")
    floor = float(floor)
    if not 0 <= floor < 1:
        raise ValueError(f"floor must lie in [0, 1), got {floor}")
    lp = pred.log_probs[np.arange(len(pred)), y]
    with np.errstate(divide="ignore"):
        lp = np.maximum(lp, np.log(floor))
    return _reduce(-lp, reduction)


def brier(pred, y, *, reduction: str = "mean"):
    r"""Brier score (1/n) sum_i sum_c (1[y_i = c] - p̄_ic)^2, in [0, 2] (thesis eq. 4.8).

    Summed over classes as the thesis's values (0.5-0.7) imply; its printed formula has a
    stray minus sign and no class sum (spec §3.3). ``reduction="none"`` gives (N,) values.
    """
    pred, y = _pred_y(pred, y)
    _nonempty(pred, "brier")
    onehot = np.zeros_like(pred.probs)
    onehot[np.arange(len(pred)), y] = 1.0
    return _reduce(np.sum((onehot - pred.probs) ** 2, axis=1), reduction)


# ---------------------------------------------------------------------------- calibration
@dataclass(frozen=True)
class ReliabilityDiagram:
    """Per-bin mean confidence, accuracy and count of M equal-width confidence bins.

    ``edges`` (M+1,) = linspace(0, 1, M+1); bin m holds edges[m] < conf <= edges[m+1]
    (bin 0 also holds conf = 0). ``confidence`` and ``accuracy`` are NaN in empty bins.
    """

    edges: np.ndarray
    confidence: np.ndarray
    accuracy: np.ndarray
    count: np.ndarray

    @property
    def n(self) -> int:
        return int(self.count.sum())

    @property
    def gap(self) -> np.ndarray:
        """|acc(B_m) - conf(B_m)| per bin, NaN in empty bins."""
        return np.abs(self.accuracy - self.confidence)

    @property
    def ece(self) -> float:
        """sum_m |B_m|/n |acc(B_m) - conf(B_m)| over non-empty bins (thesis eq. 4.4)."""
        full = self.count > 0
        return float(np.sum(self.count[full] / self.n * self.gap[full]))

    @property
    def mce(self) -> float:
        """max_m |acc(B_m) - conf(B_m)| over non-empty bins (thesis eq. 4.5)."""
        return float(np.max(self.gap[self.count > 0]))


def _n_bins(n_bins) -> int:
    if isinstance(n_bins, bool) or not isinstance(n_bins, (int, np.integer)) or n_bins < 1:
        raise ValueError(f"n_bins must be an integer >= 1, got {n_bins!r}")
    return int(n_bins)


def reliability_diagram(pred, y, *, n_bins: int = N_BINS, ood=None) -> ReliabilityDiagram:
    r"""Reliability-diagram data: M equal-width bins of the confidence conf_i = max_c p̄_ic.

    Bins are (lo, hi] on linspace(0, 1, M+1), the last closed at 1.0 (spec §6.12;
    the bin index is ``searchsorted(edges[1:-1], conf, side="left")``, the rule of
    sklearn's ``calibration_curve(strategy="uniform")``). M = 20 (thesis §4.1.3).
    ``ood``: a ClassPredictive (or probabilities) of OOD inputs, pooled in with every
    prediction counted wrong: the thesis's "w. OOD" (spec §3.3); an empty one changes nothing.
    """
    pred, y = _pred_y(pred, y)
    m = _n_bins(n_bins)
    conf = pred.confidence
    correct = (pred.predict() == y).astype(np.float64)
    if ood is not None:
        ood = _as_pred(ood, "ood")
        if ood.n_classes != pred.n_classes:
            raise ValueError(f"ood has K = {ood.n_classes} classes but pred has K = {pred.n_classes}")
        conf = np.concatenate([conf, ood.confidence])
        correct = np.concatenate([correct, np.zeros(len(ood))])
    if conf.size == 0:
        raise ValueError("reliability_diagram needs at least one input; the predictive is empty")
    edges = np.linspace(0.0, 1.0, m + 1)
    idx = np.searchsorted(edges[1:-1], conf, side="left")
    count = np.bincount(idx, minlength=m)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_conf = np.bincount(idx, weights=conf, minlength=m) / count
        acc = np.bincount(idx, weights=correct, minlength=m) / count
    out = ReliabilityDiagram(edges=edges, confidence=mean_conf, accuracy=acc, count=count.astype(np.int64))
    if out.ece > out.mce + 1e-12:  # a weighted mean of the gaps cannot exceed their max (spec §7.7)
        raise AssertionError(f"ECE {out.ece} > MCE {out.mce}: binning is inconsistent")
    return out


def ece(pred, y, *, n_bins: int = N_BINS, ood=None) -> float:
    r"""Expected calibration error sum_m |B_m|/n |acc(B_m) - conf(B_m)| (thesis eq. 4.4, M = 20).

    Bins and ``ood`` as in :func:`reliability_diagram`. Always <= :func:`mce` on the same bins.
    """
    return reliability_diagram(pred, y, n_bins=n_bins, ood=ood).ece


def mce(pred, y, *, n_bins: int = N_BINS, ood=None) -> float:
    r"""Maximum calibration error max_m |acc(B_m) - conf(B_m)| over non-empty bins (thesis eq. 4.5)."""
    return reliability_diagram(pred, y, n_bins=n_bins, ood=ood).mce


# ---------------------------------------------------------------------------- detection
def certainty(pred, measure: str = "confidence") -> np.ndarray:
    """The measure as a certainty, higher = more likely correct: conf, -H, -E[H], -MI, -VR (thesis §4.1.3)."""
    values = _as_pred(pred).measure(measure)  # refuses unknown names
    return _CERTAINTY_SIGN[measure] * values


def ood_score(pred, measure: str = "mutual_information") -> np.ndarray:
    """The measure as an OOD score, higher = more OOD (-conf, H, E[H], MI, VR): minus :func:`certainty`."""
    return -certainty(pred, measure)


def _split_correct(pred, y, measure):
    pred, y = _pred_y(pred, y)
    s = certainty(pred, measure)
    correct = pred.predict() == y
    n_ok = int(correct.sum())
    if n_ok == 0 or n_ok == len(pred):
        raise ValueError(
            "misclassification detection needs both correct and misclassified predictions; "
            f"{n_ok} of {len(pred)} are correct"
        )
    return s[~correct], s[correct]


def misclassification_auroc(pred, y, measure: str = "confidence") -> float:
    r"""AUROC of correct (positive) vs misclassified predictions, scored by a certainty.

    AUROC = P(s+ > s-) + 1/2 P(s+ = s-) (thesis §4.1.3) with s = :func:`certainty` of
    ``measure`` (default confidence, the thesis's best for misclassification).
    """
    wrong, ok = _split_correct(pred, y, measure)
    return _ood.auroc(wrong, ok)


def misclassification_aupr(pred, y, measure: str = "confidence") -> float:
    """Average precision with the correct predictions positive ("AUPR-In", thesis §4.1.3)."""
    wrong, ok = _split_correct(pred, y, measure)
    return _ood.aupr(wrong, ok)


def _ood_scores(pred_in, pred_out, measure, y_in):
    pred_in = _as_pred(pred_in, "pred_in")
    pred_out = _as_pred(pred_out, "pred_out")
    if pred_in.n_classes != pred_out.n_classes:
        raise ValueError(f"pred_in has K = {pred_in.n_classes} classes but pred_out has K = {pred_out.n_classes}")
    s_in = ood_score(pred_in, measure)
    if y_in is not None:
        y_in = check_labels(y_in, len(pred_in), pred_in.n_classes, "y_in")
        s_in = s_in[pred_in.predict() == y_in]
        if s_in.size == 0:
            raise ValueError("no in-distribution prediction is correct, so none is left once misclassified ones are excluded")
    if s_in.size == 0 or len(pred_out) == 0:
        raise ValueError(f"OOD detection needs in-distribution and OOD inputs; got {s_in.size} and {len(pred_out)}")
    return s_in, ood_score(pred_out, measure)


def ood_auroc(pred_in, pred_out, measure: str = "mutual_information", *, y_in=None) -> float:
    r"""AUROC of OOD (positive) vs in-distribution inputs; score = :func:`ood_score` (higher = more OOD).

    Default MI, the thesis's best OOD measure (§4.1.3); MI = 0 for T = 1, giving 1/2.
    ``y_in`` given: misclassified in-distribution inputs are left out, as in the thesis's
    "correct vs OOD" curves. AUROC is unchanged by swapping the positive class and negating
    the score, so this equals the thesis's correct-positive AUROC.
    """
    s_in, s_out = _ood_scores(pred_in, pred_out, measure, y_in)
    return _ood.auroc(s_in, s_out)


def ood_aupr(pred_in, pred_out, measure: str = "mutual_information", *, y_in=None, positive: str = "ood") -> float:
    r"""Average precision for OOD detection; score and ``y_in`` as in :func:`ood_auroc`.

    ``positive="ood"`` (default, the core's AUPR-Out); ``positive="in"`` makes the
    in-distribution inputs positive with the certainty as score (the thesis's AUPR-In).
    """
    s_in, s_out = _ood_scores(pred_in, pred_out, measure, y_in)
    if positive == "ood":
        return _ood.aupr(s_in, s_out)
    if positive == "in":
        return _ood.aupr(-s_out, -s_in)
    raise ValueError(f"positive must be 'ood' or 'in', got {positive!r}")
