r"""Co-occurrence statistics of K classes over label-only scenes and the log-potential Φ of the
co-occurrence CRF (`dubito.classification.context`; spec §2.10, a RECONSTRUCTION [R]).

Co-occurrence (`CooccurrenceStatistics.fit`) from label-only training scenes (spec §2.10):

    C[a, b] = s0 + Σ_scenes Σ_{i ≠ j} 1[y_i = a, y_j = b]   (ordered pairs of distinct objects),
    P(a, b) = C / Σ C,  P(a) = Σ_b P(a, b),  P(b | a) = C[a, b] / Σ_b' C[a, b'],

s0 = 1 (``DEFAULT_SMOOTHING``, spec §2.10: additive / Laplace smoothing, which keeps every Φ
finite). C is symmetric by construction. Two objects of the same class in one scene count
towards C[a, a] (a class may repeat in a scene, spec pitfall 12). Φ (``potential``):

* ``"log_conditional"`` (default, spec §2.10 (i)): Φ[a, b] = ½ (log P(b | a) + log P(a | b));
* ``"pmi"`` (spec §2.10 (ii)): Φ[a, b] = log P(a, b) / (P(a) P(b)). PMI collapses sooner
  (spec §5.2 pilot: w = 4 gives accuracy 0.27 vs 0.50 for the log-conditional).
"""

from __future__ import annotations

import numpy as np

from dubito._validation import check_choice, check_float, check_int
from dubito.predictive.base import as_numpy

__all__ = ["DEFAULT_SMOOTHING", "POTENTIALS", "CooccurrenceStatistics"]

#: Additive smoothing s0 of the pair counts (spec §2.10: "smoothing s0 = 1").
DEFAULT_SMOOTHING = 1.0

POTENTIALS = ("log_conditional", "pmi")


def _check_scene_labels(labels, k: int, name: str) -> np.ndarray:
    """One scene's labels -> (n,) int64 in 0..k-1 (ValueError naming the problem)."""
    arr = np.asarray(as_numpy(labels, name) if hasattr(labels, "detach") else labels)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a 1-D sequence of class labels, got shape {arr.shape}")
    if arr.size == 0:
        return arr.astype(np.int64)
    if arr.dtype.kind not in "biuf":
        raise ValueError(f"{name} must hold integer class labels, got dtype {arr.dtype}")
    if arr.dtype.kind == "f" and (not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr))):
        raise ValueError(f"{name} must hold integer class labels, got non-integer values")
    out = arr.astype(np.int64)
    bad = (out < 0) | (out >= k)
    if bad.any():
        raise ValueError(f"{name} holds labels outside 0..{k - 1}: {sorted(set(out[bad].tolist()))[:10]}")
    return out


class CooccurrenceStatistics:
    r"""Smoothed co-occurrence statistics of K classes and the CRF's log-potential Φ (spec §2.10).

    ``CooccurrenceStatistics.fit(scene_labels, n_classes, smoothing=1.0)`` counts ordered pairs
    of distinct objects per scene; ``CooccurrenceStatistics(pair_counts, smoothing=...)`` takes
    the raw (unsmoothed) symmetric K x K pair counts directly. Attributes (float64 (K, K) or (K,)):

    * ``pair_counts``  raw counts Σ_scenes Σ_{i≠j} 1[y_i = a, y_j = b] (symmetric);
    * ``counts``       C = pair_counts + s0;
    * ``joint``        P(a, b) = C / Σ C;   ``marginal`` P(a) = Σ_b P(a, b);
    * ``conditional``  P(b | a) = C[a, b] / Σ_b' C[a, b'] (rows sum to 1);
    * ``n_scenes``, ``n_pairs`` (ordered pairs counted), ``n_classes``.

    ``log_potential(kind)`` gives Φ: ``"log_conditional"`` ½(log P(b|a) + log P(a|b)) (the
    default, spec §2.10 (i)) or ``"pmi"`` log P(a,b)/(P(a)P(b)) (spec §2.10 (ii)); both symmetric.
    """

    def __init__(self, pair_counts, *, smoothing: float = DEFAULT_SMOOTHING, potential: str = "log_conditional",
                 n_scenes: int | None = None):
        raw = as_numpy(pair_counts, "pair_counts")
        if raw.ndim != 2 or raw.shape[0] != raw.shape[1] or raw.shape[0] < 2:
            raise ValueError(f"pair_counts must be a square (K, K) array with K >= 2, got shape {raw.shape}")
        if not np.all(np.isfinite(raw)) or np.any(raw < 0):
            raise ValueError("pair_counts must be finite and >= 0")
        if not np.allclose(raw, raw.T, rtol=0, atol=1e-9 * max(1.0, float(np.abs(raw).max()))):
            raise ValueError("pair_counts must be symmetric (ordered pairs of distinct objects are counted both ways)")
        self.smoothing = check_float(smoothing, "smoothing", strictly_positive=True)
        self.potential = check_choice(potential, "potential", POTENTIALS)
        self.pair_counts = raw.copy()
        self.n_classes = raw.shape[0]
        self.n_scenes = n_scenes
        self.n_pairs = float(raw.sum())
        self.counts = raw + self.smoothing
        self.joint = self.counts / self.counts.sum()
        self.marginal = self.joint.sum(axis=1)
        self.conditional = self.counts / self.counts.sum(axis=1, keepdims=True)
        for arr in (self.pair_counts, self.counts, self.joint, self.marginal, self.conditional):
            arr.setflags(write=False)

    @classmethod
    def fit(cls, scene_labels, n_classes: int, *, smoothing: float = DEFAULT_SMOOTHING,
            potential: str = "log_conditional") -> CooccurrenceStatistics:
        """Count ordered pairs of distinct objects in each scene (a sequence of label sequences).

        Scenes of 0 or 1 object contribute no pair. For one scene with class counts c,
        the ordered distinct pairs are c c^T - diag(c).
        """
        k = check_int(n_classes, "n_classes", min_value=2)
        if isinstance(scene_labels, np.ndarray) and scene_labels.ndim == 2:
            scene_labels = list(scene_labels)
        try:
            scenes = list(scene_labels)
        except TypeError:
            raise ValueError("scene_labels must be a sequence of scenes, each a sequence of class labels") from None
        if not scenes:
            raise ValueError("scene_labels is empty: co-occurrence statistics need at least one scene")
        raw = np.zeros((k, k))
        for s, labels in enumerate(scenes):
            y = _check_scene_labels(labels, k, f"scene_labels[{s}]")
            c = np.bincount(y, minlength=k).astype(np.float64)
            raw += np.outer(c, c) - np.diag(c)
        return cls(raw, smoothing=smoothing, potential=potential, n_scenes=len(scenes))

    def log_potential(self, kind: str | None = None) -> np.ndarray:
        """Φ (K, K), symmetric: ``kind`` "log_conditional" or "pmi" (default: ``self.potential``)."""
        kind = self.potential if kind is None else check_choice(kind, "kind", POTENTIALS)
        if kind == "pmi":
            phi = np.log(self.joint) - np.log(np.outer(self.marginal, self.marginal))
        else:
            lc = np.log(self.conditional)
            phi = 0.5 * (lc + lc.T)
        return 0.5 * (phi + phi.T)  # exactly symmetric (removes rounding asymmetry)

    def __repr__(self) -> str:
        return (f"CooccurrenceStatistics(n_classes={self.n_classes}, n_scenes={self.n_scenes}, "
                f"n_pairs={self.n_pairs:g}, smoothing={self.smoothing:g}, potential={self.potential!r})")
