r"""Temperature scaling of a class predictive (Guo, Pleiss, Sun & Weinberger 2017, §4.2).

One scalar T > 0 rescales the log-probabilities z_i = log p̄(. | x_i) of a predictive:

    q_T(c | x_i) = softmax(z_i / T)_c = p̄_ic^{1/T} / sum_k p̄_ik^{1/T}.

T is chosen by minimising the calibration NLL

    NLL(T) = (1/n) sum_i [ logsumexp_c(z_ic / T) - z_{i y_i} / T ]

(Guo et al. 2017, §4.2, "temperature scaling"). NLL is convex in β = 1/T (a mean of
logsumexp of functions linear in β, minus a linear term), so it is unimodal in log T and a
bounded 1-D Brent search in log T finds its minimum on the interval. The bounds are
T ∈ [``T_MIN``, ``T_MAX``] = [1e-2, 1e2] (our choice: two decades either side of T = 1, well
beyond the temperatures of order 1-3 that Guo et al. report for modern networks); a minimum on
a bound (the NLL still falling outside it: labels all equal to the argmax, so T -> 0, or
probabilities that carry no information, T -> ∞) is kept with a ``UserWarning``.

T > 0 keeps the order of the classes, so the argmax (accuracy) is unchanged; T > 1 softens
(less confident), T < 1 sharpens.

Inputs: a :class:`~dubito.predictive.ClassPredictive`, or anything it accepts (a plain (N, K)
array of probabilities, or (T, N, K) draws, numpy or torch), wrapped into one (its checks
apply: NaN, inf, negative entries or rows not summing to 1 raise one ``ValueError``).
Labels are integers 0..K-1.

What ``transform`` returns: a ClassPredictive whose p̄ is softmax(log p̄ / T), computed in log
space (``log_probs`` exact; a class with p̄ = 0 keeps probability 0). A ClassPredictive keeps
only the mean of its draws, not the draws, so the rescaled predictive is a single draw
(``n_draws`` = 1): its expected entropy equals its entropy and its mutual information and
variation ratio are 0. The disagreement measures of an ensemble or MC-dropout predictive (MI,
variation ratio) are not recalibrated by a temperature on p̄; read them from the input
predictive.
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy.optimize import minimize_scalar
from scipy.special import logsumexp
from sklearn.exceptions import NotFittedError

from dubito.metrics.classification import check_labels
from dubito.predictive.base import as_numpy
from dubito.predictive.classes import ClassPredictive

__all__ = ["TemperatureScaling", "T_MIN", "T_MAX"]

#: Bounds of the search, T in [T_MIN, T_MAX] (our choice; see the module docstring).
T_MIN = 1e-2
T_MAX = 1e2

#: Brent's absolute tolerance on log T: T is found to a relative 1e-10.
_XATOL = 1e-10


# ---------------------------------------------------------------------------- shared checks
def _as_class_pred(class_pred, name: str = "class_pred") -> ClassPredictive:
    """A ClassPredictive as is; an array of probabilities (N, K) or (T, N, K) wrapped into one."""
    if isinstance(class_pred, ClassPredictive):
        return class_pred
    try:
        return ClassPredictive(class_pred)
    except ValueError as exc:
        raise ValueError(f"{name}: expected a ClassPredictive or an array of probabilities; {exc}") from None


def _labels(y, pred: ClassPredictive, name: str = "class_pred") -> np.ndarray:
    """y as int64 labels 0..K-1, one per input of ``pred``; one ValueError naming the problem."""
    arr = as_numpy(y, "y")
    if arr.ndim != 1:
        raise ValueError(f"y must be a 1-D array of class labels, got shape {arr.shape}")
    if arr.shape[0] != len(pred):
        raise ValueError(f"{name} has {len(pred)} inputs but y has {arr.shape[0]} labels; they must match")
    if len(pred) == 0:
        raise ValueError("calibration needs at least one point; class_pred and y are empty")
    return check_labels(arr, len(pred), pred.n_classes, "y")


def _check_n_classes(pred: ClassPredictive, n_classes: int, what: str) -> None:
    if pred.n_classes != n_classes:
        raise ValueError(
            f"class_pred has K = {pred.n_classes} classes but this {what} was fitted on K = {n_classes}"
        )


# ---------------------------------------------------------------------------- the method
def _nll(log_t: float, z: np.ndarray, z_y: np.ndarray) -> float:
    """NLL(T) at T = exp(log_t): mean_i logsumexp(z_i / T) - z_iy / T."""
    beta = np.exp(-log_t)
    zb = z * beta
    m = zb.max(axis=1)  # finite: every row has a class with p > 0
    lse = m + np.log(np.sum(np.exp(zb - m[:, None]), axis=1))
    return float(np.mean(lse - z_y * beta))


class TemperatureScaling:
    r"""One temperature T for a class predictive, fitted by calibration NLL (Guo et al. 2017).

    ``fit(class_pred, y)`` minimises NLL(T) of softmax(log p̄ / T) over log T in
    [log 1e-2, log 1e2] (bounded Brent, tolerance 1e-10 on log T); fitted attributes
    ``temperature_`` (T), ``n_classes_`` (K) and ``nll_`` (the calibration NLL at T).
    ``transform(class_pred)`` returns a ClassPredictive with p̄' = softmax(log p̄ / T), a single
    draw (module docstring). Both accept a ClassPredictive or an (N, K) / (T, N, K) array of
    probabilities.
    """

    def fit(self, class_pred, y) -> TemperatureScaling:
        """Fit T on calibration predictions ``class_pred`` (N inputs, K classes) and labels ``y`` (N,)."""
        pred = _as_class_pred(class_pred)
        y = _labels(y, pred)
        z = pred.log_probs
        z_y = z[np.arange(len(pred)), y]
        zero = ~np.isfinite(z_y)
        if zero.any():
            raise ValueError(
                f"{int(zero.sum())} calibration label(s) have probability 0 under class_pred: "
                "softmax(log p / T) keeps p = 0 at 0 for every T, so their NLL is infinite; smooth the "
                "probabilities first, e.g. p <- (1 - eps) p + eps / K"
            )
        lo, hi = np.log(T_MIN), np.log(T_MAX)
        res = minimize_scalar(
            _nll, bounds=(lo, hi), args=(z, z_y), method="bounded", options={"xatol": _XATOL, "maxiter": 1000}
        )
        log_t = float(res.x)
        # Brent never evaluates the end points themselves; compare with them explicitly.
        candidates = [(float(res.fun), log_t), (_nll(lo, z, z_y), lo), (_nll(hi, z, z_y), hi)]
        nll_t, log_t = min(candidates)
        if log_t - lo < 1e-6 or hi - log_t < 1e-6:
            bound = T_MIN if log_t - lo < 1e-6 else T_MAX
            why = (
                "the calibration labels are (nearly) all the argmax, so the NLL keeps falling as T -> 0"
                if bound == T_MIN
                else "the probabilities carry (nearly) no information about the labels, so the NLL keeps "
                "falling as T -> inf"
            )
            warnings.warn(
                f"TemperatureScaling: the NLL is smallest at the bound T = {bound:g} of [{T_MIN:g}, {T_MAX:g}]: "
                f"{why}; temperature_ is set to the bound",
                UserWarning,
                stacklevel=2,
            )
        self.temperature_ = float(np.exp(log_t))
        self.n_classes_ = int(pred.n_classes)
        self.nll_ = float(nll_t)
        return self

    def transform(self, class_pred) -> ClassPredictive:
        """Rescaled predictive, p̄' = softmax(log p̄ / T) in log space; one draw (module docstring)."""
        if not hasattr(self, "temperature_"):
            raise NotFittedError("This TemperatureScaling instance is not fitted yet; call fit(class_pred, y) first")
        pred = _as_class_pred(class_pred)
        _check_n_classes(pred, self.n_classes_, "TemperatureScaling")
        z = pred.log_probs / self.temperature_  # -inf stays -inf: p = 0 stays 0
        log_q = z - logsumexp(z, axis=1, keepdims=True)
        q = np.exp(log_q)
        lq = np.where(q > 0, log_q, 0.0)
        entropy = -np.sum(q * lq, axis=1)
        n, k = q.shape
        votes = np.zeros((n, k), dtype=np.int64)
        votes[np.arange(n), np.argmax(q, axis=1)] = 1
        return ClassPredictive._from_parts(q, log_q, entropy, votes, 1)

    def fit_transform(self, class_pred, y) -> ClassPredictive:
        """``fit(class_pred, y).transform(class_pred)``."""
        return self.fit(class_pred, y).transform(class_pred)

    def __repr__(self) -> str:
        t = f"temperature_={self.temperature_:.6g}" if hasattr(self, "temperature_") else "unfitted"
        return f"TemperatureScaling({t})"
