"""Normal predictive: y | x_i ~ N(mean_i, var_i), every method in closed form.

Also holds the small validation helpers shared by the predictive classes (one clear
``ValueError`` naming the argument and the first offending entry).
"""

from __future__ import annotations

import numpy as np
from scipy.special import ndtr, ndtri

from dubito.predictive.base import StoredMoments, as_numpy

__all__ = ["Normal"]

_LOG_SQRT_2PI = 0.5 * np.log(2.0 * np.pi)


# ---------------------------------------------------------------------- validation helpers
def _first_bad(mask: np.ndarray) -> str:
    """' (k entries, first at index ...)' for a boolean mask with at least one True."""
    first = np.unravel_index(int(np.flatnonzero(mask.ravel())[0]), mask.shape)
    where = first[0] if len(first) == 1 else tuple(int(i) for i in first)
    return f"{int(mask.sum())} entries, first at index {where}"


def _require_finite(arr: np.ndarray, name: str) -> None:
    bad = ~np.isfinite(arr)
    if bad.any():
        raise ValueError(f"{name} must be finite (found NaN/inf: {_first_bad(bad)})")


def _require_positive(arr: np.ndarray, name: str) -> None:
    _require_finite(arr, name)
    bad = arr <= 0
    if bad.any():
        raise ValueError(f"{name} must be positive (found <= 0: {_first_bad(bad)})")


def _require_nonnegative(arr: np.ndarray, name: str) -> None:
    _require_finite(arr, name)
    bad = arr < 0
    if bad.any():
        raise ValueError(f"{name} must be non-negative (found < 0: {_first_bad(bad)})")


def _frozen(arr: np.ndarray) -> np.ndarray:
    """A read-only float64 array that does not alias the caller's array."""
    out = np.array(arr, dtype=np.float64, copy=True)
    out.setflags(write=False)
    return out


def _per_input(x, name: str, n: int, *, allow_scalar: bool = True) -> np.ndarray:
    """Validate an (N,) parameter (a scalar is broadcast when ``allow_scalar``)."""
    arr = as_numpy(x, name)
    if arr.ndim == 0 and allow_scalar:
        arr = np.full(n, float(arr))
    if arr.shape != (n,):
        raise ValueError(f"{name} must have shape ({n},) (one value per input), got {arr.shape}")
    return arr


# ---------------------------------------------------------------------- Normal
class Normal(StoredMoments):
    r"""Gaussian predictive y | x_i ~ N(mu_i, sigma_i^2).

    * log p(y) = -(y - mu)^2 / (2 sigma^2) - log sigma - log sqrt(2 pi)
    * F(y) = Phi((y - mu) / sigma)            (``scipy.special.ndtr``, erfc-based, so the
      lower tail keeps relative accuracy; the upper tail is accurate in absolute terms)
    * F^{-1}(q) = mu + sigma Phi^{-1}(q)      (``scipy.special.ndtri``)
    * sampling: mu + sigma Z, Z ~ N(0, 1) from the given generator

    Parameters
    ----------
    mean : (N,) array or tensor.
    var : (N,) array or tensor (or a scalar, shared by all inputs); must be > 0.
    epistemic_var, aleatoric_var : optional (N,) (or scalar) non-negative variance parts,
        returned as given by the properties of the same name (None when not given). They
        are not required to sum to ``var``: the method that builds the Normal knows how
        its variance splits, this class only carries the numbers.
    """

    def __init__(self, mean, var, *, epistemic_var=None, aleatoric_var=None):
        mean = as_numpy(mean, "mean")
        if mean.ndim != 1 or mean.shape[0] < 1:
            raise ValueError(f"mean must have shape (N,) with N >= 1, got {mean.shape}")
        n = mean.shape[0]
        _require_finite(mean, "mean")
        var = _per_input(var, "var", n)
        _require_positive(var, "var")
        parts = {}
        for name, value in (("epistemic_var", epistemic_var), ("aleatoric_var", aleatoric_var)):
            if value is not None:
                value = _per_input(value, name, n)
                _require_nonnegative(value, name)
                value = _frozen(value)
            parts[name] = value
        self._mean = _frozen(mean)
        self._var = _frozen(var)
        self._std = _frozen(np.sqrt(var))
        self._epistemic = parts["epistemic_var"]
        self._aleatoric = parts["aleatoric_var"]

    # ------------------------------------------------------------------ closed forms
    def _z(self, y: np.ndarray) -> np.ndarray:
        return (y - self._mean[:, None]) / self._std[:, None]

    def _log_prob(self, y: np.ndarray) -> np.ndarray:
        z = self._z(y)
        return -0.5 * z * z - np.log(self._std)[:, None] - _LOG_SQRT_2PI

    def _cdf(self, y: np.ndarray) -> np.ndarray:
        return ndtr(self._z(y))

    def _quantile(self, q: np.ndarray, tol: float = 0.0, max_iter: int = 0) -> np.ndarray:
        # ndtri(0) = -inf and ndtri(1) = +inf already, exactly as the contract asks.
        return self._mean[:, None] + self._std[:, None] * ndtri(q)

    def _sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return self._mean + self._std * rng.standard_normal((n, len(self)))

    def _subset(self, index: np.ndarray) -> "Normal":
        return Normal(
            self._mean[index],
            self._var[index],
            epistemic_var=None if self._epistemic is None else self._epistemic[index],
            aleatoric_var=None if self._aleatoric is None else self._aleatoric[index],
        )
