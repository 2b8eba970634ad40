"""The experiment's data: Fashion-MNIST (or digits) with a camera domain gap, OOD sets and co-occurrence scenes."""

from __future__ import annotations

import functools
import json
import math

import numpy as np
from scipy import ndimage
from sklearn.datasets import load_digits, load_sample_images
from sklearn.model_selection import train_test_split

from dubito.data import load
from dubito.data.image_ood import load_letters
from dubito.data.image_shift import Camera, domain_gap, make_views
from dubito.experiments.thesis.vocab import DATASETS, DIGIT_PAIRS

# ---------------------------------------------------------------------------------- data


class _Data:
    """Source train / val / in-domain test, adaptation pool, evaluation view, OOD sets."""

    def __init__(self, **kw):
        self.__dict__.update(kw)


def _zoom(X: np.ndarray, side: int) -> np.ndarray:

    n, p = X.shape
    s = int(round(math.sqrt(p)))
    imgs = X.reshape(n, s, s).astype(np.float64)
    out = ndimage.zoom(imgs, (1, side / s, side / s), order=1)
    out = out / np.maximum(out.reshape(n, -1).max(axis=1), 1e-12)[:, None, None]
    return np.clip(out.reshape(n, side * side), 0, 1)


def _split_80_20(X, y, seed):

    return train_test_split(X, y, test_size=0.2, stratify=y, random_state=seed)


@functools.lru_cache(maxsize=4)
def _load_cached(dataset: str, key: str) -> _Data:
    return _load(dataset, json.loads(key))


def _load(dataset: str, d: dict) -> _Data:

    seed = int(d.get("seed", 0))
    rng = np.random.default_rng([seed, 1])
    if dataset == "digits":

        dg = load_digits()
        X = dg.data.astype(np.float64) / 16.0
        y = dg.target.astype(np.int64)
        side = 8
        idx = np.arange(len(y))
        src, tgt = train_test_split(idx, test_size=0.4, stratify=y, random_state=seed)
        src_tr, src_rest = train_test_split(src, test_size=0.3, stratify=y[src], random_state=seed)
        src_val, src_te = train_test_split(src_rest, test_size=0.5, stratify=y[src_rest], random_state=seed)
        aug = Camera(rotation_jitter=10.0, shift_jitter=0.5)
        n_aug = int(d.get("augment", 10))

        def augment(ix, s):
            rep = np.repeat(X[ix], n_aug, axis=0)
            return aug.apply(rep, s, image_shape=(1, side, side)), np.repeat(y[ix], n_aug)

        X_tr, y_tr = augment(src_tr, seed * 10 + 1)
        X_val, y_val = augment(src_val, seed * 10 + 2)
        X_te, y_te = X[src_te], y[src_te]
        X_obj, y_obj = X[tgt], y[tgt]

        letters = _zoom(load_letters(n_per_letter=int(d.get("n_per_letter", 10)), seed=seed).X, side)
        imgs = [im.mean(axis=2) / 255.0 for im in load_sample_images().images]
        patches = []
        for im in imgs:
            small = _zoom_image(im, 0.125)
            for _ in range(int(d.get("n_patches", 300)) // len(imgs)):
                r, c = rng.integers(0, small.shape[0] - side), rng.integers(0, small.shape[1] - side)
                pt = small[r:r + side, c:c + side]
                patches.append((pt - pt.min()) / max(pt.max() - pt.min(), 1e-6))
        raw_ood = {"letters": letters, "patches": np.asarray(patches).reshape(len(patches), -1)}
        pairs = DIGIT_PAIRS
        names = [str(i) for i in range(10)]
    elif dataset == "fashion-mnist":

        ds = load("fashion-mnist")
        Xa, ya, Xb, yb = ds.split(0)
        side = 28
        n_src = min(int(d.get("n_source", 60000)), len(ya))
        pick = rng.permutation(len(ya))[:n_src]
        X_tr, X_val, y_tr, y_val = _split_80_20(Xa[pick].astype(np.float64), ya[pick].astype(np.int64), seed)
        perm = rng.permutation(len(yb))
        n_obj = int(d.get("n_target", 5000))
        n_te = int(d.get("n_source_test", 2000))
        X_obj, y_obj = Xb[perm[:n_obj]].astype(np.float64), yb[perm[:n_obj]].astype(np.int64)
        X_te, y_te = Xb[perm[n_obj:n_obj + n_te]].astype(np.float64), yb[perm[n_obj:n_obj + n_te]].astype(np.int64)
        mn = load("mnist-digits").X.astype(np.float64)
        n_ood = int(d.get("n_ood", 2000))
        raw_ood = {"mnist": mn[rng.permutation(len(mn))[:n_ood]],
                   "letters": load_letters(n_per_letter=max(1, n_ood // 52), seed=seed).X.astype(np.float64)}
        pairs = tuple(tuple(p) for p in __import__("dubito.data.scenes", fromlist=["x"]).FASHION_CONFUSED_PAIRS)
        names = list(ds.meta.get("class_names", [str(i) for i in range(10)]))
    else:
        raise ValueError(f"unknown thesis dataset {dataset!r}; available: {', '.join(DATASETS)}")
    cam = domain_gap(float(d.get("strength", 0.5)), side)
    views = make_views(X_obj, 3, seed, spread=15.0, camera=cam, image_shape=(1, side, side))
    X_pool = np.concatenate([views[0], views[2]])
    y_pool = np.concatenate([y_obj, y_obj])
    ood = {k: cam.apply(v, np.random.default_rng([seed, 5, i]), image_shape=(1, side, side))
           for i, (k, v) in enumerate(raw_ood.items())}
    facts = dict(n_train=len(y_tr), n_val=len(y_val), n_source_test=len(y_te), n_pool=len(y_pool),
                 n_eval=len(y_obj), n_ood={k: len(v) for k, v in ood.items()}, image_side=side,
                 strength=float(d.get("strength", 0.5)), confused_pairs=[list(p) for p in pairs])
    return _Data(X_tr=X_tr, y_tr=y_tr, X_val=X_val, y_val=y_val, X_te=X_te, y_te=y_te, X_pool=X_pool,
                 y_pool=y_pool, X_eval=views[1], y_eval=y_obj, ood=ood, side=side, K=10, pairs=pairs,
                 names=names, facts=facts)


def _zoom_image(im: np.ndarray, f: float) -> np.ndarray:

    return ndimage.zoom(im, f, order=1)


def _data(dataset: str, s: dict) -> _Data:
    return _load_cached(dataset, json.dumps(s.get("data", {}), sort_keys=True))
