"""Session 25's throw-away exploration behind docs/results/ensemble-encoding.md (kept for audit).

Before `input_encoding` existed, the inputs were encoded outside the estimator: [X, ramps of each
column on 16 (8, 4) quantile bins of the fit rows], all of it then standardised by the estimator, and
fed to `DeepEnsembleRegressor` with its defaults (``extra`` overrides), on the validation rows of
benchmarks/_common.validation_rows. Records: exploration.jsonl (one per fit). Also the reference
means on the same rows: gradient-boosted trees and k nearest neighbours.

    OMP_NUM_THREADS=1 DUBITO_DATA=... python exploration.py ensemble power 16 0,1,2 ['{"prior_precision": 3}']
    OMP_NUM_THREADS=1 DUBITO_DATA=... python exploration.py trees power wine concrete boston
"""
import json
import sys
import time

import numpy as np

sys.path.insert(0, "benchmarks")
from _common import validation_rows  # noqa: E402

from dubito.data import load  # noqa: E402


def ple_fit(X, T):
    return [np.unique(np.quantile(X[:, j], np.linspace(0, 1, T + 1))) for j in range(X.shape[1])]


def ple(X, edges):
    cols = [X]
    for j, e in enumerate(edges):
        if len(e) < 3:
            continue
        lo, hi = e[:-1], e[1:]
        r = (X[:, j:j + 1] - lo) / (hi - lo)
        r[:, 1:] = np.maximum(r[:, 1:], 0)
        r[:, :-1] = np.minimum(r[:, :-1], 1)
        cols.append(r)
    return np.concatenate(cols, 1)


def ensemble(ds, T, splits, extra=None):
    import torch

    from dubito.metrics import regression_summary
    from dubito.regression import DeepEnsembleRegressor

    torch.set_num_threads(1)
    extra = extra or {}
    for split in splits:
        X, y, _, _ = load(ds).split(split)
        a, b = validation_rows(len(y), split)
        Xa, Xb = X[a], X[b]
        if T > 0:
            e = ple_fit(Xa, T)
            Xa, Xb = ple(Xa, e), ple(Xb, e)
        t = time.time()
        m = DeepEnsembleRegressor(random_state=split, progress=False, **extra).fit(Xa, y[a])
        s = regression_summary(m.predict_distribution(Xb), y[b])
        print(json.dumps(dict(ds=ds, T=T, split=split, extra=extra, nll=round(s["nll"], 4), rmse=round(s["rmse"], 4),
                              cov=round(s["coverage_95"], 3), sec=round(time.time() - t))), flush=True)


def trees(datasets):
    from sklearn.ensemble import HistGradientBoostingRegressor
    from sklearn.neighbors import KNeighborsRegressor
    from sklearn.preprocessing import StandardScaler

    for ds in datasets:
        for split in range(3):
            X, y, _, _ = load(ds).split(split)
            a, b = validation_rows(len(y), split)
            gbm = HistGradientBoostingRegressor(max_iter=2000, learning_rate=0.05, early_stopping=True,
                                                random_state=0).fit(X[a], y[a])
            sc = StandardScaler().fit(X[a])
            knn = KNeighborsRegressor(10, weights="distance").fit(sc.transform(X[a]), y[a])
            rmse = lambda p: float(np.sqrt(np.mean((p - y[b]) ** 2)))  # noqa: E731
            print(ds, split, "trees", round(rmse(gbm.predict(X[b])), 3), "knn10", round(rmse(knn.predict(sc.transform(X[b]))), 3))


if __name__ == "__main__":
    if sys.argv[1] == "trees":
        trees(sys.argv[2:])
    else:
        ensemble(sys.argv[2], int(sys.argv[3]), [int(s) for s in sys.argv[4].split(",")],
                 json.loads(sys.argv[5]) if len(sys.argv) > 5 else None)
