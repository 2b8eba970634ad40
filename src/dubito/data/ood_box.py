r"""The OOD input distribution ν: uniform on an axis-aligned box (spec §1).

ν = U(∏_j [low_j, high_j]). `UniformBox.from_data(X)` takes low_j = min_i X_ij and
high_j = max_i X_ij; the estimators pass the *standardised training inputs* ([C]
``uniform_rect_sampler(x_train)``; spec §1 and pitfall 9). A zero-width feature (low_j = high_j,
e.g. naval's constant columns) gives the constant low_j, never NaN. Draws are
low + (high − low)·U with U ~ U[0, 1)^D.
"""

from __future__ import annotations

import numpy as np
import torch

from dubito._validation import check_int, to_numpy_if_tensor

__all__ = ["UniformBox"]


def _as_vector(values, name: str) -> np.ndarray:
    values = to_numpy_if_tensor(values)
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a 1-D array of numbers, got {values!r}") from None
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D array (one bound per feature), got shape {arr.shape}")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} holds NaN or inf at feature(s) {np.flatnonzero(~np.isfinite(arr)).tolist()}")
    return arr


class UniformBox:
    """ν = U(∏_j [low_j, high_j]) (module docstring).

    Parameters
    ----------
    low, high : array-like (D,) or scalars (D = 1); finite, low <= high.
    """

    def __init__(self, low, high):
        low, high = _as_vector(low, "low"), _as_vector(high, "high")
        if low.shape != high.shape:
            raise ValueError(f"low and high must have the same shape, got {low.shape} and {high.shape}")
        bad = np.flatnonzero(low > high)
        if bad.size:
            raise ValueError(f"low > high at feature(s) {bad.tolist()}: the box is empty")
        self.low, self.high = low, high

    @classmethod
    def from_data(cls, X) -> UniformBox:
        """The box of per-feature min/max of X (N, D)."""
        X = to_numpy_if_tensor(X)
        try:
            X = np.asarray(X, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError("X must be a 2-D numeric array (n_samples, n_features)") from None
        if X.ndim != 2 or X.shape[0] == 0 or X.shape[1] == 0:
            raise ValueError(f"X must be a non-empty 2-D array (n_samples, n_features), got shape {X.shape}")
        if not np.isfinite(X).all():
            raise ValueError("X holds NaN or inf: the box of the data is undefined")
        return cls(X.min(axis=0), X.max(axis=0))

    @property
    def n_features(self) -> int:
        return int(self.low.shape[0])

    @property
    def width(self) -> np.ndarray:
        return self.high - self.low

    def __repr__(self) -> str:
        return f"UniformBox(low={self.low.tolist()}, high={self.high.tolist()})"

    def sample(self, n: int, generator: torch.Generator | None = None, *, dtype=torch.float32,
               device="cpu") -> torch.Tensor:
        """n draws from ν as a torch tensor (n, D) of ``dtype`` on ``device``."""
        n = check_int(n, "n", min_value=0)
        u = torch.rand((n, self.n_features), generator=generator, dtype=dtype, device=device)
        low = torch.as_tensor(self.low, dtype=dtype, device=device)
        width = torch.as_tensor(self.width, dtype=dtype, device=device)
        return low + width * u

    def sample_numpy(self, n: int, seed=None) -> np.ndarray:
        """n draws from ν as a float64 numpy array (n, D); ``seed``: None, int or numpy Generator."""
        n = check_int(n, "n", min_value=0)
        rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
        return self.low + self.width * rng.random((n, self.n_features))

    def contains(self, X) -> np.ndarray:
        """(N,) bool: which rows of X lie in the closed box."""
        X = np.asarray(to_numpy_if_tensor(X), dtype=np.float64)
        return np.all((X >= self.low) & (X <= self.high), axis=-1)
