"""The contract every regression method ends in: a predictive distribution over N inputs.

A `RegressionPredictive` describes, for each of N inputs x_1..x_N, a distribution of the
scalar response y | x_i. All parameters are float64 numpy arrays on the CPU (estimators
compute on their own device and convert once, at the boundary), so metrics, plots and
reports are plain numpy.

Shapes and broadcasting (every predictive class follows them):

* evaluation points ``y`` for ``log_prob``, ``pdf`` and ``cdf``:
    - a scalar            -> the same point for every input, result shape (N,)
    - shape (N,)          -> one point per input,              result shape (N,)
    - shape (N, k)        -> k points per input,               result shape (N, k)
    - shape (1, k)        -> the same k points for every input, result shape (N, k)
  Anything else raises ``ValueError`` naming the shape. (A 1-D array of length k != N is
  refused rather than guessed: use shape (1, k).)
* levels ``q`` for ``quantile``:
    - a scalar            -> the same level for every input,   result shape (N,)
    - shape (k,)          -> the same k levels for every input, result shape (N, k), for
                             every k, k = N included (``quantile([0.05, 0.5, 0.95])``)
    - shape (N, k)        -> k levels per input,               result shape (N, k); one
                             level per input is shape (N, 1)
    - shape (1, k)        -> the same as (k,)
  The two rules differ on purpose for a 1-D array: a 1-D ``y`` is the observed responses,
  one per input (``cdf(y)`` is the PIT, ``log_prob(y)`` the log score), while a 1-D ``q`` is
  a list of levels, as in ``numpy.quantile`` and ``scipy.stats`` (``ppf``).
* ``sample(n)`` returns shape (n, N).
* ``interval(level)`` returns ``(lower, upper)``, each of shape (N,), equal-tailed.

Subclasses implement ``_log_prob``, ``_cdf`` (on (N, k) arrays), ``mean``, ``var`` and
``_subset``; ``_quantile`` (vectorised bisection on the CDF here) and ``_sample``
(inverse-CDF here) may be overridden with something exact or faster.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

__all__ = ["RegressionPredictive", "StoredMoments", "as_numpy", "as_generator"]

#: Interval levels a predictive remembers (`RegressionPredictive.interval`).
_INTERVAL_CACHE = 8


def as_numpy(x, name: str = "array") -> np.ndarray:
    """float64 numpy view of an array-like or a (possibly CUDA, possibly grad-tracking) tensor."""
    if hasattr(x, "detach") and hasattr(x, "cpu"):  # torch.Tensor without importing torch
        x = x.detach().cpu()
        if str(x.dtype) == "torch.bfloat16":  # numpy has no bfloat16
            x = x.float()
        x = x.numpy()
    try:
        return np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be numeric, got {type(x).__name__}: {exc}") from None


def as_generator(generator=None) -> np.random.Generator:
    """A numpy Generator from None (fresh entropy), an int seed, or a Generator."""
    if isinstance(generator, np.random.Generator):
        return generator
    if generator is None or (isinstance(generator, (int, np.integer)) and not isinstance(generator, bool)):
        return np.random.default_rng(generator)
    raise ValueError(
        f"generator must be None, an int seed or a numpy.random.Generator, got {type(generator).__name__}"
    )


class RegressionPredictive(ABC):
    """Predictive distribution of a scalar response at N inputs (see module docstring)."""

    # ------------------------------------------------------------------ to implement
    @property
    @abstractmethod
    def mean(self) -> np.ndarray:
        """Predictive mean E[y | x_i], shape (N,)."""

    @property
    @abstractmethod
    def var(self) -> np.ndarray:
        """Predictive variance Var[y | x_i], shape (N,)."""

    @abstractmethod
    def _log_prob(self, y: np.ndarray) -> np.ndarray:
        """log p(y | x_i) for y of shape (N, k); returns (N, k)."""

    @abstractmethod
    def _cdf(self, y: np.ndarray) -> np.ndarray:
        """P(Y <= y | x_i) for y of shape (N, k); returns (N, k)."""

    @abstractmethod
    def _subset(self, index: np.ndarray) -> "RegressionPredictive":
        """The same kind of predictive restricted to the inputs ``index`` (integer array)."""

    # ------------------------------------------------------------------ optional knowledge
    @property
    def epistemic_var(self) -> np.ndarray | None:
        """Variance due to not knowing the function (model uncertainty), shape (N,), or None."""
        return None

    @property
    def aleatoric_var(self) -> np.ndarray | None:
        """Variance of the noise around the function (data uncertainty), shape (N,), or None."""
        return None

    # ------------------------------------------------------------------ public API
    def __len__(self) -> int:
        return int(self.mean.shape[0])

    @property
    def n_inputs(self) -> int:
        return len(self)

    @property
    def std(self) -> np.ndarray:
        """Predictive standard deviation, shape (N,)."""
        return np.sqrt(self.var)

    def log_prob(self, y) -> np.ndarray:
        """Log density log p(y | x_i); shapes as in the module docstring."""
        y2, squeeze = self._points(y, "y")
        out = self._log_prob(y2)
        return out[:, 0] if squeeze else out

    def pdf(self, y) -> np.ndarray:
        """Density p(y | x_i) = exp(log_prob(y))."""
        return np.exp(self.log_prob(y))

    def cdf(self, y) -> np.ndarray:
        """Distribution function P(Y <= y | x_i); shapes as in the module docstring."""
        y2, squeeze = self._points(y, "y")
        out = self._cdf(y2)
        return out[:, 0] if squeeze else out

    def quantile(self, q) -> np.ndarray:
        """Quantile function F^{-1}(q | x_i) for q in [0, 1] (0 -> -inf, 1 -> +inf).

        ``q``: a scalar -> (N,); a (k,) array of levels -> (N, k), the same levels for every
        input; (N, k) or (1, k) -> (N, k) (module docstring)."""
        q2, squeeze = self._levels(q)
        if np.any((q2 < 0) | (q2 > 1)) or np.any(np.isnan(q2)):
            raise ValueError("quantile levels q must lie in [0, 1]")
        out = self._quantile(q2)
        out = np.where(q2 == 0, -np.inf, np.where(q2 == 1, np.inf, out))
        return out[:, 0] if squeeze else out

    def interval(self, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
        """Equal-tailed central interval [F^{-1}((1-level)/2), F^{-1}((1+level)/2)], each (N,).

        The last ``_INTERVAL_CACHE`` levels asked are remembered (a predictive never changes), so
        coverage, width and the interval score of one level cost one quantile call; the arrays
        returned are the caller's own copies."""
        level = float(level)
        if not 0 < level < 1:
            raise ValueError(f"interval level must lie strictly between 0 and 1, got {level}")
        cache = self.__dict__.setdefault("_interval_cache", {})
        if level not in cache:
            q = np.array([[(1 - level) / 2, (1 + level) / 2]])
            both = self.quantile(q)
            if len(cache) >= _INTERVAL_CACHE:
                cache.pop(next(iter(cache)))
            cache[level] = (both[:, 0].copy(), both[:, 1].copy())
        lo, hi = cache[level]
        return lo.copy(), hi.copy()

    def sample(self, n: int, generator=None) -> np.ndarray:
        """n independent draws of y for every input, shape (n, N). ``generator``: seed or Generator."""
        n = int(n)
        if n < 1:
            raise ValueError(f"number of samples must be >= 1, got {n}")
        return self._sample(n, as_generator(generator))

    def __getitem__(self, index) -> "RegressionPredictive":
        """Restrict to a subset of the inputs (int, slice, boolean mask or integer array)."""
        if isinstance(index, (bool, np.bool_)):
            raise IndexError("a predictive is indexed by int, slice, boolean mask or integer array, not a bool")
        idx = np.arange(len(self))[index]
        return self._subset(np.atleast_1d(idx))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(n_inputs={len(self)})"

    # ------------------------------------------------------------------ defaults
    def _quantile(self, q: np.ndarray, tol: float = 1e-10, max_iter: int = 200) -> np.ndarray:
        """Vectorised bisection on the CDF to ``tol`` times each input's std; q is (N, k) in [0, 1]."""
        n, k = q.shape
        mean = np.broadcast_to(self.mean[:, None], (n, k))
        std = np.broadcast_to(np.maximum(self.std, 1e-300)[:, None], (n, k))
        qc = np.clip(q, 1e-300, 1 - 1e-16)
        lo = mean - 10 * std
        hi = mean + 10 * std
        for _ in range(60):  # widen brackets until they contain the level
            bad_lo = self._cdf(lo) > qc
            bad_hi = self._cdf(hi) < qc
            if not (bad_lo.any() or bad_hi.any()):
                break
            lo = np.where(bad_lo, mean - 2 * (mean - lo), lo)
            hi = np.where(bad_hi, mean + 2 * (hi - mean), hi)
        return self._bisect(lo, hi, qc, tol * std, max_iter)

    def _bisect(self, lo, hi, qc, step, max_iter: int) -> np.ndarray:
        """F^{-1}(qc) by bisection on the CDF inside brackets [lo, hi] that hold it, until every
        bracket is at most ``step`` wide or at float resolution; arrays (N, k)."""
        for _ in range(max_iter):
            mid = 0.5 * (lo + hi)
            if np.all((hi - lo <= step) | (mid == lo) | (mid == hi)):  # converged or at float resolution
                break
            below = self._cdf(mid) < qc
            lo = np.where(below, mid, lo)
            hi = np.where(below, hi, mid)
        return 0.5 * (lo + hi)

    def _sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """Inverse-CDF sampling: y = F^{-1}(U), U ~ Uniform(0, 1)."""
        u = rng.uniform(size=(len(self), n))
        return self._quantile(u).T

    # ------------------------------------------------------------------ helpers
    def _levels(self, q) -> tuple[np.ndarray, bool]:
        """Quantile levels broadcast to (N, k): a (k,) array is the same k levels for every
        input (module docstring); a scalar, (N, k) and (1, k) as `_points`."""
        arr = as_numpy(q, "q")
        n = len(self)
        if arr.ndim == 1:
            if arr.shape[0] == 0:
                raise ValueError("q holds no levels: pass a scalar or a non-empty (k,) array")
            return np.broadcast_to(arr[None, :], (n, arr.shape[0])).astype(np.float64, copy=True), False
        if arr.ndim == 0 or (arr.ndim == 2 and arr.shape[0] in (1, n)):
            return self._points(arr, "q")
        raise ValueError(
            f"q has shape {arr.shape}; expected a scalar, (k,) (the same k levels for every input), "
            f"({n}, k) or (1, k)"
        )

    def _points(self, y, name: str) -> tuple[np.ndarray, bool]:
        """Broadcast evaluation points to (N, k); report whether to squeeze back to (N,)."""
        arr = as_numpy(y, name)
        n = len(self)
        if arr.ndim == 0:
            return np.full((n, 1), float(arr)), True
        if arr.ndim == 1:
            if arr.shape[0] != n:
                raise ValueError(
                    f"{name} has shape {arr.shape} but the predictive has {n} inputs: pass shape "
                    f"({n},) for one point per input, or (1, k) for the same k points for all"
                )
            return arr[:, None], True
        if arr.ndim == 2 and arr.shape[0] in (1, n):
            return np.broadcast_to(arr, (n, arr.shape[1])).astype(np.float64, copy=True), False
        raise ValueError(
            f"{name} has shape {arr.shape}; expected a scalar, ({n},), ({n}, k) or (1, k)"
        )


class StoredMoments(RegressionPredictive):
    """A predictive whose moments are computed once, at construction, into ``_mean``,
    ``_var``, ``_std`` and (or None) ``_epistemic``, ``_aleatoric``: the properties read them."""

    @property
    def mean(self) -> np.ndarray:
        return self._mean

    @property
    def var(self) -> np.ndarray:
        return self._var

    @property
    def std(self) -> np.ndarray:
        return self._std

    @property
    def epistemic_var(self) -> np.ndarray | None:
        return self._epistemic

    @property
    def aleatoric_var(self) -> np.ndarray | None:
        return self._aleatoric
