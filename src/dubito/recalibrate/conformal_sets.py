r"""Split-conformal prediction sets for a class predictive: LAC, APS and RAPS.

For an input x with predictive probabilities p = p̄(. | x), let o(y) be the rank of class y
when the classes are sorted by decreasing p (1 = most probable; ties go to the lower class
index, as ``ClassPredictive.predict``), and ρ(y) = sum of p over the classes ranked before y.
The score of class y, with a uniform u in [0, 1] per input, is

* ``"lac"``  s = 1 - p_y                                  (Sadinle, Lei & Wasserman 2019, JASA)
* ``"aps"``  s = ρ(y) + u·p_y                             (Romano, Sesia & Candès 2020, NeurIPS)
* ``"raps"`` s = ρ(y) + u·p_y + λ·max(0, o(y) - k_reg)    (Angelopoulos, Bates, Malik & Jordan 2021,
  ICLR, "RAPS")

``fit`` computes the n calibration scores s_i = s(x_i, y_i, u_i) and keeps q̂, the
⌈(n + 1)·level⌉-th smallest (the finite-sample conformal quantile, empirical level
⌈(n + 1)·level⌉/n; Vovk, Gammerman & Shafer 2005; Lei et al. 2018); ``predict_sets`` returns
C(x) = {y : s(x, y, u) <= q̂}, a boolean (N, K) array. (n + 1)·level is rounded to 9 decimals
before the ceiling so that float error does not cost a rank (level 0.68, n = 74: 75 · 0.68 is
51.00000000000001 in float64, whose ceiling would be 52; the rank is 51). This needs
⌈(n + 1)·level⌉ <= n, i.e. n >= level / (1 - level) calibration points (9 at level 0.9, 99 at
0.99); fewer raise a ``ValueError`` saying how many are needed.

Randomisation (``randomized``; default ``False``):

* ``randomized=False``: u = 1, so APS scores are the cumulative mass down to and including y
  (the APS example of Angelopoulos & Bates's Gentle Introduction). Deterministic.
* ``randomized=True``: u ~ U(0, 1), independent for every calibration and test input, drawn from
  ``random_state`` (Romano et al. 2020's randomised sets; the randomised RAPS of Angelopoulos
  et al. 2021). Explicit
  ``u=`` arrays may be passed to ``fit`` and ``predict_sets`` instead (to reproduce or to compare
  with another implementation). LAC does not use u.

Coverage (exchangeable calibration and test data): P(Y ∈ C(X)) >= level for every method and
either setting. C is exactly the conformal set of the score, so where the n + 1 scores are almost
surely distinct -- LAC with continuous probabilities, randomised APS and RAPS -- also
P(Y ∈ C(X)) <= ⌈(n + 1)·level⌉/(n + 1) < level + 1/(n + 1) (the split-conformal bounds: Lei et al.
2018; Romano et al. 2020; Angelopoulos et al. 2021), when ``allow_empty=True``; sets can then be
empty (the input's top class alone is beyond the calibrated threshold). Deterministic APS and
RAPS give every input's last-ranked class the same score 1 + λ·max(0, K - k_reg), a tie that can
push coverage above that bound once q̂ reaches it (all K classes are then in the set).
``allow_empty=False`` (default) adds the top-ranked class to every set: sets only grow, so the
lower bound stands, and the upper bound grows by P(C(X) empty). The APS and RAPS scores are
non-decreasing in the rank o(y), so their sets are always the top-m classes.

RAPS defaults λ = 0.01, k_reg = 5: the values of the ImageNet RAPS example that accompanies
Angelopoulos & Bates, "A Gentle Introduction to Conformal Prediction" (2021; notebook
imagenet-raps in github.com/aangelopoulos/conformal-prediction).
With K <= k_reg classes the penalty never applies and RAPS equals APS. (Angelopoulos et al. 2021
also tune k_reg and λ on a held-out share of the calibration data, and MAPIE 1.6 does so on 10 %
of it; here they are fixed arguments.)

Relation to MAPIE 1.6 (``SplitConformalClassifier``, tested): LAC is the same. MAPIE always
randomises the APS/RAPS calibration scores (cumsum - U·p_y, i.e. u = 1 - U) and at prediction
time ``include_last_label=True`` adds the label that crosses q̂ (u = 0 here for APS), ``False``
is u = 1 with the top class kept, ``"randomized"`` is u = 1 - U. For RAPS, ``True`` and
``"randomized"`` differ from the definitions above once a set grows past k_reg (+1) classes
(MAPIE's penalty at the crossing rank, and its V denominator p_L - λ(L - k)^+ + λ·1[L > k]
where the paper's code divides by p_L). MAPIE computes ⌈(n + 1)(1 - α)⌉ in plain float.
"""

from __future__ import annotations

import math
import numbers

import numpy as np
from sklearn.exceptions import NotFittedError

from dubito.predictive.base import as_generator, as_numpy
from dubito.recalibrate.temperature import _as_class_pred, _check_n_classes, _labels

__all__ = [
    "ConformalSets",
    "METHODS",
    "RAPS_LAMBDA",
    "RAPS_K_REG",
    "class_scores",
    "conformal_rank",
    "min_calibration_points",
]

METHODS = ("lac", "aps", "raps")

#: RAPS defaults (Angelopoulos & Bates, A Gentle Introduction to Conformal Prediction, ImageNet example).
RAPS_LAMBDA = 0.01
RAPS_K_REG = 5


def _check_level(level) -> float:
    if isinstance(level, bool) or not isinstance(level, numbers.Real) or not (0.0 < float(level) < 1.0):
        raise ValueError(f"level must be a number in (0, 1) (the target coverage), got {level!r}")
    return float(level)


def conformal_rank(n: int, level: float) -> int:
    """k = ⌈(n + 1)·level⌉, the rank of the score used as q̂ ((n + 1)·level rounded to 9 decimals first)."""
    return math.ceil(round((n + 1) * level, 9))


def min_calibration_points(level: float) -> int:
    """Smallest n with ⌈(n + 1)·level⌉ <= n, i.e. n >= level / (1 - level) (9 at 0.9, 99 at 0.99)."""
    level = _check_level(level)
    n = max(1, math.ceil(round(level / (1.0 - level), 9)))
    while conformal_rank(n, level) > n:  # guard against the rounding of level / (1 - level)
        n += 1
    return n


def class_scores(probs: np.ndarray, u: np.ndarray, method: str, lam: float = 0.0, k_reg: int = 0) -> np.ndarray:
    r"""Scores s(x_i, c, u_i) of every class c, shape (N, K) (module docstring for the formulas)."""
    if method == "lac":
        return 1.0 - probs
    k = probs.shape[1]
    order = np.argsort(-probs, axis=1, kind="stable")  # ties -> lower class index first
    ps = np.take_along_axis(probs, order, axis=1)
    rho = np.zeros_like(ps)
    np.cumsum(ps[:, :-1], axis=1, out=rho[:, 1:])  # mass of the classes ranked before
    s_sorted = rho + u[:, None] * ps
    if method == "raps" and lam > 0:
        rank = np.arange(1, k + 1, dtype=np.float64)
        s_sorted = s_sorted + lam * np.maximum(0.0, rank - k_reg)[None, :]
    out = np.empty_like(s_sorted)
    np.put_along_axis(out, order, s_sorted, axis=1)
    return out


class ConformalSets:
    r"""Split-conformal prediction sets C(x) ⊂ {0..K-1} with P(Y ∈ C(X)) >= ``level``.

    ``ConformalSets(method="lac" | "aps" | "raps", level=0.9, *, randomized=False,
    allow_empty=False, lam=0.01, k_reg=5, random_state=None)``; scores, quantile, coverage
    and defaults in the module docstring. ``lam`` (λ >= 0) and ``k_reg`` (integer >= 0) are
    used by RAPS only.

    ``fit(class_pred, y, *, u=None)`` on n calibration points sets ``threshold_`` (q̂),
    ``scores_`` (the n calibration scores), ``rank_`` (⌈(n + 1)·level⌉), ``n_calibration_`` and
    ``n_classes_``. ``predict_sets(class_pred, *, u=None)`` returns a boolean (N, K) array.
    ``class_pred``: a ClassPredictive or an (N, K) / (T, N, K) array of probabilities (its
    mean p̄ is used). ``u``: (N,) uniforms in [0, 1] replacing the draws (ignored by LAC).
    ``random_state`` (None, int or numpy Generator) seeds one Generator, made at construction,
    from which every ``fit`` and ``predict_sets`` call of a randomised instance draws in turn.
    """

    def __init__(
        self,
        method: str = "lac",
        level: float = 0.9,
        *,
        randomized: bool = False,
        allow_empty: bool = False,
        lam: float = RAPS_LAMBDA,
        k_reg: int = RAPS_K_REG,
        random_state=None,
    ):
        if method not in METHODS:
            raise ValueError(f"method must be one of {', '.join(map(repr, METHODS))}, got {method!r}")
        self.method = method
        self.level = _check_level(level)
        if not isinstance(randomized, (bool, np.bool_)):
            raise ValueError(f"randomized must be True or False, got {randomized!r}")
        if not isinstance(allow_empty, (bool, np.bool_)):
            raise ValueError(f"allow_empty must be True or False, got {allow_empty!r}")
        self.randomized = bool(randomized)
        self.allow_empty = bool(allow_empty)
        if isinstance(lam, bool) or not isinstance(lam, numbers.Real) or not np.isfinite(lam) or lam < 0:
            raise ValueError(f"lam (the RAPS penalty λ) must be a finite number >= 0, got {lam!r}")
        if isinstance(k_reg, bool) or not isinstance(k_reg, numbers.Integral) or k_reg < 0:
            raise ValueError(f"k_reg (the RAPS rank without penalty) must be an integer >= 0, got {k_reg!r}")
        self.lam = float(lam)
        self.k_reg = int(k_reg)
        self.random_state = random_state
        self._rng = as_generator(random_state)

    # ------------------------------------------------------------------ helpers
    def _u(self, u, n: int) -> np.ndarray:
        if u is None:
            return self._rng.uniform(size=n) if self.randomized else np.ones(n)
        arr = as_numpy(u, "u")
        if arr.shape != (n,):
            raise ValueError(f"u must have shape ({n},) (one uniform per input), got {arr.shape}")
        if not (np.all(np.isfinite(arr)) and np.all((arr >= 0) & (arr <= 1))):
            raise ValueError("u must hold numbers in [0, 1]")
        return arr

    def _scores(self, probs: np.ndarray, u: np.ndarray) -> np.ndarray:
        return class_scores(probs, u, self.method, self.lam if self.method == "raps" else 0.0, self.k_reg)

    # ------------------------------------------------------------------ API
    def fit(self, class_pred, y, *, u=None) -> ConformalSets:
        """Calibration scores s_i = s(x_i, y_i, u_i) and their ⌈(n + 1)·level⌉-th smallest, q̂."""
        pred = _as_class_pred(class_pred)
        y = _labels(y, pred)
        n = len(pred)
        k = conformal_rank(n, self.level)
        if k > n:
            raise ValueError(
                f"ConformalSets at level={self.level:g} needs at least {min_calibration_points(self.level)} "
                f"calibration points (the ⌈(n + 1)·level⌉-th smallest score must exist, i.e. "
                f"n >= level / (1 - level)); got {n}"
            )
        uu = self._u(u, n)
        scores = self._scores(pred.probs, uu)[np.arange(n), y]
        self.scores_ = scores
        self.rank_ = k
        self.threshold_ = float(np.partition(scores, k - 1)[k - 1])
        self.n_calibration_ = n
        self.n_classes_ = int(pred.n_classes)
        return self

    def predict_sets(self, class_pred, *, u=None) -> np.ndarray:
        """Boolean (N, K) array: C(x_i) = {c : s(x_i, c, u_i) <= q̂} (+ the top class unless allow_empty)."""
        if not hasattr(self, "threshold_"):
            raise NotFittedError("This ConformalSets instance is not fitted yet; call fit(class_pred, y) first")
        pred = _as_class_pred(class_pred)
        _check_n_classes(pred, self.n_classes_, "ConformalSets")
        probs = pred.probs
        uu = self._u(u, len(pred))
        sets = self._scores(probs, uu) <= self.threshold_
        if not self.allow_empty and len(pred):
            sets[np.arange(len(pred)), np.argmax(probs, axis=1)] = True
        return sets

    def __repr__(self) -> str:
        extra = f", lam={self.lam:g}, k_reg={self.k_reg}" if self.method == "raps" else ""
        return (
            f"ConformalSets(method={self.method!r}, level={self.level:g}, randomized={self.randomized}, "
            f"allow_empty={self.allow_empty}{extra})"
        )
