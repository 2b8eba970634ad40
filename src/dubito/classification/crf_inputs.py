"""The inputs of the co-occurrence CRF (`dubito.classification.context`), validated: one scene's
class probabilities (an array, tensor or `ClassPredictive`), its pairwise graph, lists of scenes
and their labels."""

from __future__ import annotations

import numpy as np

from dubito.classification.cooccurrence import _check_scene_labels
from dubito.predictive.base import as_numpy
from dubito.predictive.classes import PROB_ATOL, ClassPredictive

__all__ = ["adjacency_matrix", "labelled_scenes", "scene_list", "scene_probs"]


def _is_predictive(x) -> bool:
    return isinstance(x, ClassPredictive)


def scene_probs(scene, k: int, name: str = "probs") -> np.ndarray:
    """(n, K) probabilities of one scene (ndarray, tensor or ClassPredictive), rows renormalised."""
    if _is_predictive(scene):
        p = np.array(scene.probs, dtype=np.float64)
    else:
        p = as_numpy(scene, name)
    if p.ndim != 2:
        raise ValueError(f"{name} must have shape (n_objects, K={k}), got {p.ndim} dimension(s), shape {p.shape}")
    if p.shape[0] == 0:
        raise ValueError(f"{name} is an empty scene (0 objects): a scene needs at least one object")
    if p.shape[1] != k:
        raise ValueError(f"{name} has {p.shape[1]} classes but the co-occurrence potential has K = {k}")
    if not np.all(np.isfinite(p)):
        raise ValueError(f"{name} holds NaN or inf")
    if np.any(p < 0):
        raise ValueError(f"{name} holds negative probabilities (smallest {float(p.min()):.3g})")
    s = p.sum(axis=1)
    off = np.abs(s - 1) > PROB_ATOL
    if off.any():
        raise ValueError(f"{name}: {int(off.sum())} of the {p.shape[0]} rows do not sum to 1 within "
                         f"{PROB_ATOL:g} (largest |sum - 1| = {float(np.abs(s - 1).max()):.3g}); pass "
                         "probabilities, not logits or scores")
    return p / s[:, None]


def adjacency_matrix(adjacency, n: int, name: str = "adjacency") -> np.ndarray:
    """The (n, n) symmetric 0/1 pairwise graph of a scene without self-loops; None: the complete graph."""
    if adjacency is None:
        adj = ~np.eye(n, dtype=bool)
        return adj
    a = as_numpy(adjacency, name)
    if a.shape != (n, n):
        raise ValueError(f"{name} must have shape (n_objects, n_objects) = ({n}, {n}), got {a.shape}")
    if not np.all((a == 0) | (a == 1)):
        raise ValueError(f"{name} must be boolean (0/1)")
    adj = a.astype(bool)
    if np.any(adj != adj.T):
        raise ValueError(f"{name} must be symmetric (the pairwise graph is undirected)")
    if np.any(np.diag(adj)):
        raise ValueError(f"{name} must have a zero diagonal (no self-loops)")
    return adj


def scene_list(scenes, k: int, name: str = "scenes") -> tuple[list, list[np.ndarray]]:
    """(the scenes as a list, their (n_s, K) probabilities) of a list of scenes."""
    if _is_predictive(scenes) or (isinstance(scenes, np.ndarray) and scenes.ndim == 2):
        raise ValueError(f"{name} must be a list of scenes (each (n_objects, K)); for one (N, K) array of "
                         "objects pass scene_ids")
    try:
        scenes = list(scenes)
    except TypeError:
        raise ValueError(f"{name} must be a list of scenes, each (n_objects, K) probabilities") from None
    if not scenes:
        raise ValueError(f"{name} is empty: no scene to refine")
    return scenes, [scene_probs(sc, k, f"{name}[{i}]") for i, sc in enumerate(scenes)]


def labelled_scenes(scenes, labels, k: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(probabilities, labels) of labelled scenes, one label sequence per scene."""
    _, probs_list = scene_list(scenes, k)
    try:
        labels = list(labels)
    except TypeError:
        raise ValueError("labels must be a list with one label sequence per scene") from None
    if len(labels) != len(probs_list):
        raise ValueError(f"labels has {len(labels)} scene(s) but scenes has {len(probs_list)}")
    ys = []
    for i, (p, y) in enumerate(zip(probs_list, labels)):
        y = _check_scene_labels(y, k, f"labels[{i}]")
        if y.shape[0] != p.shape[0]:
            raise ValueError(f"labels[{i}] has {y.shape[0]} labels but scenes[{i}] has {p.shape[0]} objects")
        ys.append(y)
    return probs_list, ys
