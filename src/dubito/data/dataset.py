"""The `Dataset` container and seeded random train/test splits.

A `Dataset` holds the full design matrix ``X`` (float64, ``(n, p)``), the target ``y``
(float64, ``(n,)``), feature names, a list of ``(train_idx, test_idx)`` index pairs and a
``meta`` dict (source, licence, citation, and for synthetic sets the true function and the
noise sd). ``dataset.split(k)`` returns ``(X_train, y_train, X_test, y_test)`` for split ``k``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import lru_cache
from numbers import Integral
from typing import Any, Sequence

import numpy as np

__all__ = ["Dataset", "ImageDataset", "random_splits", "n_test_rows"]


def _as_index_array(idx, n: int, what: str) -> np.ndarray:
    arr = np.asarray(idx)
    if arr.ndim != 1:
        raise ValueError(f"{what} must be a 1-D array of row indices, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{what} is empty")
    if not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"{what} must hold integers, got dtype {arr.dtype}")
    arr = arr.astype(np.intp, copy=False)
    lo, hi = int(arr.min()), int(arr.max())
    if lo < 0 or hi >= n:
        raise ValueError(f"{what} has indices outside [0, {n}): min {lo}, max {hi}")
    if np.unique(arr).size != arr.size:
        raise ValueError(f"{what} contains repeated row indices")
    return arr


def check_splits(name: str, splits, n: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Validated (train_idx, test_idx) index arrays of a dataset of n rows: at least one split,
    indices in range without repeats, no row in both parts of a split."""
    out = []
    for k, pair in enumerate(splits):
        try:
            train, test = pair
        except (TypeError, ValueError):
            raise ValueError(f"dataset {name!r}: split {k} is not a (train_idx, test_idx) pair") from None
        train = _as_index_array(train, n, f"dataset {name!r} split {k} train indices")
        test = _as_index_array(test, n, f"dataset {name!r} split {k} test indices")
        if np.intersect1d(train, test).size:
            raise ValueError(f"dataset {name!r}: split {k} has rows in both train and test")
        out.append((train, test))
    if not out:
        raise ValueError(f"dataset {name!r} has no splits")
    return out


@dataclass(eq=False)
class Dataset:
    """A regression data set with its train/test splits.

    Attributes
    ----------
    name : str
        Registry name, e.g. ``"yacht"``.
    X : ndarray of float64, shape (n, p)
        All rows, in the order the split indices refer to.
    y : ndarray of float64, shape (n,)
        Targets.
    feature_names : list of str
        One name per column of ``X``.
    splits : list of (train_idx, test_idx)
        Integer row-index arrays; within a split they are disjoint and non-empty.
    meta : dict
        At least ``source``, ``licence`` and ``citation``; synthetic sets add the true
        function (``"eta"``: values for every row, ``"true_function"``: its name) and
        ``"noise_sd"``.
    """

    name: str
    X: np.ndarray
    y: np.ndarray
    feature_names: list[str]
    splits: list[tuple[np.ndarray, np.ndarray]]
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError("Dataset name must be a non-empty string")
        X = np.asarray(self.X, dtype=np.float64)
        y = np.asarray(self.y, dtype=np.float64)
        if X.ndim != 2:
            raise ValueError(f"dataset {self.name!r}: X must be 2-D (n, p), got shape {X.shape}")
        if y.ndim != 1:
            raise ValueError(f"dataset {self.name!r}: y must be 1-D (n,), got shape {y.shape}")
        n, p = X.shape
        if n == 0 or p == 0:
            raise ValueError(f"dataset {self.name!r}: X is empty (shape {X.shape})")
        if y.shape[0] != n:
            raise ValueError(f"dataset {self.name!r}: X has {n} rows but y has {y.shape[0]}")
        if not np.all(np.isfinite(X)):
            rows = np.flatnonzero(~np.isfinite(X).all(axis=1))[:5].tolist()
            raise ValueError(f"dataset {self.name!r}: X has non-finite values (first rows: {rows})")
        if not np.all(np.isfinite(y)):
            rows = np.flatnonzero(~np.isfinite(y))[:5].tolist()
            raise ValueError(f"dataset {self.name!r}: y has non-finite values (first rows: {rows})")
        names = [str(f) for f in self.feature_names]
        if len(names) != p:
            raise ValueError(f"dataset {self.name!r}: {len(names)} feature names for {p} columns")
        splits = check_splits(self.name, self.splits, n)
        self.X, self.y, self.feature_names, self.splits = X, y, names, splits
        self.meta = dict(self.meta)

    @property
    def n_splits(self) -> int:
        """Number of train/test splits."""
        return len(self.splits)

    @property
    def n_samples(self) -> int:
        return self.X.shape[0]

    @property
    def n_features(self) -> int:
        return self.X.shape[1]

    def split(self, k: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Return ``(X_train, y_train, X_test, y_test)`` of split ``k`` (copies)."""
        if isinstance(k, bool) or not isinstance(k, Integral):
            raise TypeError(f"split index must be an int, got {type(k).__name__}")
        if not 0 <= k < self.n_splits:
            raise IndexError(f"dataset {self.name!r} has {self.n_splits} splits; split {k} does not exist")
        train, test = self.splits[k]
        return self.X[train], self.y[train], self.X[test], self.y[test]

    def with_splits(self, splits: Sequence[tuple[np.ndarray, np.ndarray]], description: str | None = None) -> "Dataset":
        """A copy of this dataset (sharing X, y) with other splits; ``meta["splits"]`` is updated."""
        meta = dict(self.meta)
        if description is not None:
            meta["splits"] = description
        return replace(self, splits=list(splits), meta=meta)

    def __repr__(self) -> str:
        return (
            f"Dataset(name={self.name!r}, n={self.n_samples}, p={self.n_features}, "
            f"n_splits={self.n_splits}, source={self.meta.get('source', '?')!r})"
        )


def n_test_rows(n: int, test_fraction: float) -> int:
    """Test-set size for ``n`` rows: ``test_fraction * n`` rounded half up.

    Rounding (not scikit-learn's ceiling) reproduces the published sizes: yacht 308 at 20% ->
    62 test rows (246/62) and QSAR 546 at 20% -> 109 (437/109). For diabetes (442 rows) it
    gives 88 test rows where ``sklearn.model_selection.train_test_split`` gives 89.
    """
    if isinstance(n, bool) or not isinstance(n, Integral) or n < 2:
        raise ValueError(f"need at least 2 rows to split, got n={n!r}")
    f = float(test_fraction)
    if not (0.0 < f < 1.0) or not math.isfinite(f):
        raise ValueError(f"test_fraction must lie strictly between 0 and 1, got {test_fraction!r}")
    n_test = int(math.floor(n * f + 0.5 + 1e-9))
    if not 1 <= n_test <= n - 1:
        raise ValueError(
            f"test_fraction={test_fraction} of {n} rows gives {n_test} test rows; "
            "train and test must each get at least one row"
        )
    return n_test


def random_splits(n: int, n_splits: int = 20, test_fraction: float = 0.1, seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    """``n_splits`` seeded random train/test splits of ``n`` rows (indices sorted within each part).

    Split ``k`` takes ``n_test_rows(n, test_fraction)`` rows of a permutation drawn from
    ``numpy.random.default_rng(seed)``; the same arguments always give the same splits.
    """
    if isinstance(n_splits, bool) or not isinstance(n_splits, Integral) or n_splits < 1:
        raise ValueError(f"n_splits must be a positive int, got {n_splits!r}")
    if isinstance(seed, bool) or not isinstance(seed, Integral) or seed < 0:
        raise ValueError(f"seed must be a non-negative int (splits must be reproducible), got {seed!r}")
    n_test = n_test_rows(n, test_fraction)
    rng = np.random.default_rng(int(seed))
    out = []
    for _ in range(int(n_splits)):
        perm = rng.permutation(n)
        out.append((np.sort(perm[n_test:]), np.sort(perm[:n_test])))
    return out


# ------------------------------------------------------------------------------ ImageDataset


@dataclass(eq=False, repr=False)
class ImageDataset(Dataset):
    """A classification `Dataset` of images: ``X`` float32 ``(n, C*H*W)`` in [0, 1] (flattened
    channel-first), ``y`` int64 class labels in ``0..K-1`` (not float64 as for regression sets), and
    ``meta["image_shape"] == (C, H, W)``, ``meta["class_names"]`` (K names). Splits as in `Dataset`."""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError("Dataset name must be a non-empty string")
        meta = dict(self.meta)
        try:
            shape = tuple(int(s) for s in meta["image_shape"])
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"image dataset {self.name!r}: meta['image_shape'] = (C, H, W) is required") from None
        if len(shape) != 3 or min(shape) < 1:
            raise ValueError(f"image dataset {self.name!r}: image_shape must be (C, H, W), got {shape}")
        X = np.asarray(self.X)
        if X.ndim != 2 or X.shape[1] != shape[0] * shape[1] * shape[2]:
            raise ValueError(f"image dataset {self.name!r}: X must be (n, {shape[0] * shape[1] * shape[2]}) "
                             f"for images {shape}, got shape {X.shape}")
        X = X.astype(np.float32, copy=False)
        if X.shape[0] == 0:
            raise ValueError(f"image dataset {self.name!r}: X is empty")
        if not np.all(np.isfinite(X)) or X.min() < 0 or X.max() > 1:
            raise ValueError(f"image dataset {self.name!r}: pixel values must be finite and in [0, 1]")
        y = np.asarray(self.y)
        if y.ndim != 1 or y.shape[0] != X.shape[0]:
            raise ValueError(f"image dataset {self.name!r}: y must be (n,) = ({X.shape[0]},), got {y.shape}")
        if y.dtype.kind not in "iu":
            if y.dtype.kind == "f" and np.all(np.isfinite(y)) and np.all(y == np.round(y)):
                y = y.astype(np.int64)
            else:
                raise ValueError(f"image dataset {self.name!r}: y must hold integer class labels, got dtype {y.dtype}")
        y = y.astype(np.int64, copy=False)
        names = [str(c) for c in meta.get("class_names", ())]
        if not names:
            raise ValueError(f"image dataset {self.name!r}: meta['class_names'] is required")
        if y.min() < 0 or y.max() >= len(names):
            raise ValueError(f"image dataset {self.name!r}: labels must lie in 0..{len(names) - 1}, "
                             f"got min {y.min()}, max {y.max()}")
        meta["image_shape"] = shape
        meta["class_names"] = names
        meta["n_classes"] = len(names)
        feature_names = list(self.feature_names) if self.feature_names else []
        if len(feature_names) != X.shape[1]:
            feature_names = _pixel_names(shape)
        n = X.shape[0]
        splits = check_splits(self.name, self.splits, n)
        self.X, self.y, self.feature_names, self.splits, self.meta = X, y, feature_names, splits, meta

    @property
    def image_shape(self) -> tuple[int, int, int]:
        return self.meta["image_shape"]

    @property
    def class_names(self) -> list[str]:
        return self.meta["class_names"]

    @property
    def n_classes(self) -> int:
        return len(self.meta["class_names"])

    def images(self, rows=None) -> np.ndarray:
        """``X`` (or ``X[rows]``) reshaped to ``(n, C, H, W)`` (a view)."""
        X = self.X if rows is None else self.X[rows]
        return X.reshape(X.shape[0], *self.image_shape)


@lru_cache(maxsize=8)
def _pixel_names_cached(shape: tuple[int, int, int]) -> tuple[str, ...]:
    C, H, W = shape
    if C == 1:
        return tuple(f"px_{r}_{c}" for r in range(H) for c in range(W))
    return tuple(f"px_{ch}_{r}_{c}" for ch in range(C) for r in range(H) for c in range(W))


def _pixel_names(shape: tuple[int, int, int]) -> list[str]:
    return list(_pixel_names_cached(tuple(shape)))
