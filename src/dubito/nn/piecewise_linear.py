"""Piecewise-linear encoding of numeric inputs (Gorishniy, Rubachev & Babenko, "On Embeddings for
Numerical Features in Tabular Deep Learning", NeurIPS 2022, Sec. 3.2: PLE with quantile bins).

Column j with bin edges b_0 < b_1 < ... < b_T (the training rows' quantiles at 0, 1/T, ..., 1; tied
quantiles merged) is encoded by T ramps, one per bin t = 1..T of width w_t = b_t - b_{t-1}:

    r_t(x) = clip((x - b_{t-1}) / w_t, 0, 1),   the first bin unclipped below, the last unclipped above,

so that b_0 + sum_t w_t r_t(x) = x for every x (the encoding loses nothing and extrapolates linearly).
A network on the ramps can bend at every edge with one weight; on the raw column it must place a
ReLU kink there. `PiecewiseLinearEncoding` keeps the raw (already standardised) columns and appends
the ramps, each standardised by the training rows (`dubito._standardise.column_scaling`), so the
encoded inputs have the scale the estimators' initialisations and priors assume. A column with fewer
than 3 distinct edges (constant, or one split) gets no ramps: they would repeat the raw column.

Default T = 16 (`DEFAULT_BINS`), fewer than the 48 of the authors' package (rtdl_num_embeddings'
``compute_bins``), made for data sets of 10^4-10^6 rows: most UCI sets have 10^2-10^3. It is the
setting validated in docs/results/ensemble-encoding.md; 8 and 4 bins were tried on yacht only (no
better there).
"""

from __future__ import annotations

import numpy as np
import torch

from dubito._standardise import column_scaling

__all__ = ["DEFAULT_BINS", "PiecewiseLinearEncoding", "ramps"]

DEFAULT_BINS = 16


def ramps(x: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """The T ramps r_t(x) of one column x (n,) on edges (T + 1,) increasing: (n, T) (module docstring)."""
    lo, width = edges[:-1], np.diff(edges)
    r = (np.asarray(x, dtype=np.float64)[:, None] - lo) / width
    r[:, 1:] = np.maximum(r[:, 1:], 0.0)  # the first bin is open below
    r[:, :-1] = np.minimum(r[:, :-1], 1.0)  # the last bin is open above
    return r


class PiecewiseLinearEncoding:
    """x (n, p) -> [x, standardised ramps of each column] (n, p + sum_j T_j), fitted on training rows.

    ``edges``: one increasing array per column (empty where the column gets no ramps);
    ``mean`` / ``scale``: the ramps' standardisation (sum_j T_j,)."""

    def __init__(self, edges: list[np.ndarray], mean: np.ndarray, scale: np.ndarray):
        self.edges = [np.asarray(e, dtype=np.float64) for e in edges]
        self.mean = np.asarray(mean, dtype=np.float64)
        self.scale = np.asarray(scale, dtype=np.float64)
        n_ramps = sum(max(len(e) - 1, 0) for e in self.edges)
        if any(len(e) == 2 or (len(e) > 2 and np.any(np.diff(e) <= 0)) for e in self.edges):
            raise RuntimeError("the encoding's bin edges are not increasing, or a column has a single bin")
        if self.mean.shape != (n_ramps,) or self.scale.shape != (n_ramps,) or not np.all(self.scale > 0):
            raise RuntimeError(f"the encoding has {n_ramps} ramps but a standardisation of shape {self.mean.shape}")

    @classmethod
    def fit(cls, X: np.ndarray, n_bins: int = DEFAULT_BINS) -> PiecewiseLinearEncoding:
        """Edges at the quantiles 0, 1/n_bins, ..., 1 of each column of the training rows X (n, p)."""
        if int(n_bins) < 2:
            raise ValueError(f"n_bins must be at least 2, got {n_bins}")
        levels = np.linspace(0.0, 1.0, int(n_bins) + 1)
        edges = []
        for column in np.asarray(X, dtype=np.float64).T:
            e = np.unique(np.quantile(column, levels))
            edges.append(e if len(e) >= 3 else np.zeros(0))
        raw = cls._ramps(X, edges)
        mean, scale = column_scaling(raw) if raw.shape[1] else (np.zeros(0), np.ones(0))
        return cls(edges, mean, scale)

    @staticmethod
    def _ramps(X: np.ndarray, edges: list[np.ndarray]) -> np.ndarray:
        cols = [ramps(X[:, j], e) for j, e in enumerate(edges) if len(e)]
        return np.concatenate(cols, axis=1) if cols else np.zeros((X.shape[0], 0))

    @property
    def n_features_in(self) -> int:
        return len(self.edges)

    @property
    def n_outputs(self) -> int:
        return self.n_features_in + self.mean.size

    def transform(self, X: np.ndarray) -> np.ndarray:
        """[X, (ramps(X) - mean) / scale]: (n, n_outputs)."""
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != self.n_features_in:
            raise ValueError(f"the encoding was fitted on {self.n_features_in} columns, got shape {X.shape}")
        return np.concatenate([X, (self._ramps(X, self.edges) - self.mean) / self.scale], axis=1)

    # ------------------------------------------------------------------ persistence
    def to_tensors(self, prefix: str) -> dict[str, torch.Tensor]:
        """The edges (flat, with their counts per column) and the ramps' standardisation."""
        return {f"{prefix}edges": torch.as_tensor(np.concatenate([np.zeros(0), *self.edges])),
                f"{prefix}edge_counts": torch.as_tensor([len(e) for e in self.edges], dtype=torch.int64),
                f"{prefix}mean": torch.as_tensor(self.mean), f"{prefix}scale": torch.as_tensor(self.scale)}

    @classmethod
    def from_tensors(cls, tensors: dict, prefix: str) -> PiecewiseLinearEncoding:
        """Inverse of `to_tensors`; counts that do not add up raise RuntimeError."""
        flat = tensors[f"{prefix}edges"].double().numpy()
        counts = tensors[f"{prefix}edge_counts"].long().numpy()
        if np.any(counts < 0) or counts.sum() != flat.size:
            raise RuntimeError(f"the encoding's edge counts add up to {counts.sum()}, but {flat.size} edges are stored")
        edges = np.split(flat, np.cumsum(counts)[:-1]) if counts.size else []
        return cls(edges, tensors[f"{prefix}mean"].double().numpy(), tensors[f"{prefix}scale"].double().numpy())
