r"""The 1-D data set of Pequignot et al. (OOD detection for regression; spec
``shared/specs/ood-predictor-entropy.md`` §4) and the paper's one train/test split of the UCI sets.

Synthetic "wave" data ([P] §5.1, Fig. 1; spec §4): two clusters of inputs with a gap,

    x ~ U[-1, -0.5] (60 points) and x ~ U[0.5, 1] (60 points),
    y = cos(4 (x + 0.2)) + eps,   eps ~ N(0, 0.1^2),

no standardisation; the OOD distribution is nu = U[-4, 2] (`OOD_INTERVAL`), T = 50 function-space
points, sigma_l = 0.1 (raw units), a tanh network (spec §2.1, §2.8). The draws come from
``numpy.random.default_rng(seed)`` (left cluster first, then the right one), so a seed fixes the
data exactly.

UCI split ([C], spec §4): one fixed 90/10 split per data set, scikit-learn's
``train_test_split(arange(n), test_size=0.1, random_state=42)`` (Boston: 455 / 51), and X, y
standardised with the *training* statistics only (`standardise_split`: StandardScaler's mean and
population sd, ddof 0; a constant column gets sd 1, as StandardScaler, so naval's two constant
features stay at 0).
"""

from __future__ import annotations

from dataclasses import dataclass
from numbers import Integral

import numpy as np
from sklearn.model_selection import train_test_split

from dubito._standardise import standardise_fit
from dubito._validation import check_float, check_int

__all__ = [
    "LEFT",
    "NOISE_SD",
    "OOD_INTERVAL",
    "RIGHT",
    "Standardiser",
    "make_wave",
    "paper_split",
    "standardise_split",
    "wave_function",
]

#: The two input clusters ([P] §5.1).
LEFT = (-1.0, -0.5)
RIGHT = (0.5, 1.0)
#: nu = U[-4, 2], the OOD distribution and the plot range of the synthetic set ([P] Fig. 1; spec §1, §4).
OOD_INTERVAL = (-4.0, 2.0)
#: The observation noise sd ([P] §5.1); also sigma_l of every method on this set (spec §2.8).
NOISE_SD = 0.1


def wave_function(x) -> np.ndarray:
    """The true mean f(x) = cos(4 (x + 0.2)) ([P] §5.1)."""
    return np.cos(4.0 * (np.asarray(x, dtype=np.float64) + 0.2))


def _seed(seed):
    if isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, bool) or not isinstance(seed, Integral) or seed < 0:
        raise ValueError(f"seed must be a non-negative int or a numpy Generator, got {seed!r}")
    return np.random.default_rng(int(seed))


def make_wave(n_per_side: int = 60, noise_sd: float = NOISE_SD, seed=0) -> tuple[np.ndarray, np.ndarray]:
    """(X (2n, 1), y (2n,)): n inputs from U[-1, -0.5], then n from U[0.5, 1] (spec §4);
    y = cos(4 (x + 0.2)) + N(0, noise_sd^2). ``seed``: int or numpy Generator."""
    n = check_int(n_per_side, "n_per_side", min_value=1)
    sd = check_float(noise_sd, "noise_sd", min_value=0.0)
    rng = _seed(seed)
    x = np.concatenate([rng.uniform(*LEFT, size=n), rng.uniform(*RIGHT, size=n)])
    y = wave_function(x) + sd * rng.standard_normal(2 * n)
    return x[:, None], y


def paper_split(n: int, test_size: float = 0.1, random_state: int = 42) -> tuple[np.ndarray, np.ndarray]:
    """(train_idx, test_idx) of the paper's split: ``train_test_split(arange(n), test_size,
    random_state)`` ([C]; spec §4), in the order scikit-learn returns them."""

    n = check_int(n, "n", min_value=2)
    test_size = check_float(test_size, "test_size", strictly_positive=True)
    if test_size >= 1.0:
        raise ValueError(f"test_size must lie in (0, 1), got {test_size}")
    tr, te = train_test_split(np.arange(n), test_size=test_size, random_state=int(random_state))
    return np.asarray(tr, dtype=np.intp), np.asarray(te, dtype=np.intp)


@dataclass(frozen=True)
class Standardiser:
    """Training statistics: x' = (x - x_mean) / x_scale, y' = (y - y_mean) / y_scale."""

    x_mean: np.ndarray
    x_scale: np.ndarray
    y_mean: float
    y_scale: float

    @classmethod
    def fit(cls, X: np.ndarray, y: np.ndarray) -> Standardiser:
        """StandardScaler's statistics: mean and population sd (ddof 0); sd 1 for a constant column."""
        X = np.asarray(X, dtype=np.float64)
        y = np.asarray(y, dtype=np.float64)
        if X.ndim != 2 or y.ndim != 1 or X.shape[0] != y.shape[0] or X.shape[0] < 2:
            raise ValueError(f"Standardiser.fit needs X (n, p) and y (n,) with n >= 2, got {X.shape} and {y.shape}")
        if not (np.isfinite(X).all() and np.isfinite(y).all()):
            raise ValueError("Standardiser.fit: X or y holds NaN or inf")
        x_mean, x_scale, y_mean, y_scale = standardise_fit(X, y)
        if y_scale == 0:
            raise ValueError("Standardiser.fit: the training target is constant")
        return cls(x_mean, x_scale, y_mean, y_scale)

    def x(self, X) -> np.ndarray:
        return (np.asarray(X, dtype=np.float64) - self.x_mean) / self.x_scale

    def y(self, y) -> np.ndarray:
        return (np.asarray(y, dtype=np.float64) - self.y_mean) / self.y_scale

    def y_inverse(self, y) -> np.ndarray:
        return np.asarray(y, dtype=np.float64) * self.y_scale + self.y_mean

    @classmethod
    def identity(cls, n_features: int) -> Standardiser:
        """No standardisation (the synthetic set, spec §4)."""
        return cls(np.zeros(n_features), np.ones(n_features), 0.0, 1.0)


def standardise_split(X_tr, y_tr, X_te, y_te):
    """(Xs_tr, ys_tr, Xs_te, ys_te, Standardiser) with the statistics of the training rows only."""
    st = Standardiser.fit(X_tr, y_tr)
    return st.x(X_tr), st.y(y_tr), st.x(X_te), st.y(y_te), st
