"""Standardisation by the training data, shared by the estimators.

Every network here trains on standardised inputs and target: the training mean and the
*population* sd (numpy's default ddof = 0, as the authors' code of every paper); a constant
input column gets sd := 1, i.e. it is only centred ([C] ``standardize`` of B-DeepNoise).
"""

from __future__ import annotations

import numpy as np

__all__ = ["column_scaling", "standardise_fit"]


def column_scaling(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(mean, sd) of each column of X (n, p); sd := 1 where the column is constant."""
    mean = X.mean(axis=0)
    scale = X.std(axis=0)
    scale[np.ptp(X, axis=0) == 0] = 1.0
    return mean, scale


def standardise_fit(X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, float, float]:
    """(x_mean, x_scale, y_mean, y_scale): `column_scaling` of X and the mean and population sd of y."""
    x_mean, x_scale = column_scaling(X)
    return x_mean, x_scale, float(y.mean()), float(y.std())
