"""Synthetic regression problems with known truth.

Toy 1 and toy 2 of Hoffmann & Elster, "Deep Ensembles from a Bayesian Perspective" (PTB,
2021), Figures 3 and 4 (spec ``bayesian-ensembles.md`` §3.2-3.3):

* toy 1: ``eta(x) = 1/2 ((4.5 x)^4 - (18 x)^2 + 22.5 x)``, ``x ~ U[-1, 1]``, noise sd 10
  (range of eta about [-39, 54]); N_train = 200 in the paper.
* toy 2: ``eta(x) = sum_{i=1,2} (1.5 x_i - 1)^2 (1.3 x_i + 1)^2``, ``x ~ U[-1, 1]^2``,
  noise sd 0.2 (range about [0, 2.64]); N = 600 for the L-sweep.

Each generator returns ``(X, y, eta)`` with ``X`` of shape (n, p), ``y = eta + noise_sd * e``,
``e ~ N(0, 1)``. Draws: first all of X, then all of the noise, from
``numpy.random.default_rng(seed)``, so a seed fixes everything.
"""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np

__all__ = ["toy1", "toy2", "toy1_function", "toy2_function"]


def _inputs(X, p: int, name: str) -> np.ndarray:
    X = np.asarray(X, dtype=np.float64)
    if p == 1 and X.ndim == 1:
        X = X[:, None]
    if X.ndim != 2 or X.shape[1] != p:
        raise ValueError(f"{name} expects inputs of shape (n, {p}){' or (n,)' if p == 1 else ''}, got {X.shape}")
    if not np.all(np.isfinite(X)):
        raise ValueError(f"{name}: inputs contain non-finite values")
    return X


def toy1_function(X) -> np.ndarray:
    """Toy-1 regression function ``eta(x) = 1/2 ((4.5x)^4 - (18x)^2 + 22.5x)``; X (n, 1) or (n,) -> (n,)."""
    x = _inputs(X, 1, "toy1_function")[:, 0]
    return 0.5 * ((4.5 * x) ** 4 - (18.0 * x) ** 2 + 22.5 * x)


def toy2_function(X) -> np.ndarray:
    """Toy-2 regression function ``eta(x) = sum_i (1.5 x_i - 1)^2 (1.3 x_i + 1)^2``; X (n, 2) -> (n,)."""
    X = _inputs(X, 2, "toy2_function")
    return np.sum((1.5 * X - 1.0) ** 2 * (1.3 * X + 1.0) ** 2, axis=1)


def _rng(seed, name: str) -> np.random.Generator:
    if isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, bool) or not isinstance(seed, Integral) or seed < 0:
        raise ValueError(f"{name}: seed must be a non-negative int or a numpy Generator, got {seed!r}")
    return np.random.default_rng(int(seed))


def _check(n, noise_sd, name: str) -> tuple[int, float]:
    if isinstance(n, bool) or not isinstance(n, Integral) or n < 1:
        raise ValueError(f"{name}: n must be a positive int, got {n!r}")
    if isinstance(noise_sd, bool) or not isinstance(noise_sd, Real) or not np.isfinite(noise_sd) or noise_sd < 0:
        raise ValueError(f"{name}: noise_sd must be a finite number >= 0, got {noise_sd!r}")
    return int(n), float(noise_sd)


def toy1(n: int = 200, seed=0, noise_sd: float = 10.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Draw ``n`` points of toy 1: ``x ~ U[-1, 1]``, ``y = toy1_function(x) + noise_sd * N(0, 1)``.

    Defaults from the paper (Fig. 3): N_train = 200, noise sd 10. Returns ``(X (n, 1), y, eta)``.
    """
    n, noise_sd = _check(n, noise_sd, "toy1")
    rng = _rng(seed, "toy1")
    X = rng.uniform(-1.0, 1.0, size=(n, 1))
    eta = toy1_function(X)
    y = eta + noise_sd * rng.standard_normal(n)
    return X, y, eta


def toy2(n: int = 600, seed=0, noise_sd: float = 0.2) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Draw ``n`` points of toy 2: ``x ~ U[-1, 1]^2``, ``y = toy2_function(x) + noise_sd * N(0, 1)``.

    Defaults from the paper (Fig. 4): N = 600 (L-sweep), noise sd 0.2. Returns ``(X (n, 2), y, eta)``.
    """
    n, noise_sd = _check(n, noise_sd, "toy2")
    rng = _rng(seed, "toy2")
    X = rng.uniform(-1.0, 1.0, size=(n, 2))
    eta = toy2_function(X)
    y = eta + noise_sd * rng.standard_normal(n)
    return X, y, eta
