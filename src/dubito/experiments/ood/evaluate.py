"""(fitted predictors, data) -> AUROC, entropies, RMSE, LPP, sigma histograms and ratios."""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from dubito.data.ood_synthetic import (
    OOD_INTERVAL,
    wave_function,
)
from dubito.experiments.ood.data import _Data
from dubito.experiments.ood.fits import _Fit
from dubito.experiments.ood.formulas import lpp_gaussian, lpp_mixture, sigma_ratio
from dubito.experiments.ood.vocab import (
    FAR_REGION,
    GRID_POINTS,
    QUANTILES,
    SIGMA_BINS,
    SYNTHETIC,
    VARIANT,
)
from dubito.metrics import entropy
from dubito.metrics.ood import auroc

# ---------------------------------------------------------------------------------- evaluation


def _sigma(f: Callable, X: np.ndarray, chunk: int = 4096) -> tuple[np.ndarray, np.ndarray]:
    """(mean, sd ddof 1) over the predictors at the rows of X, in row chunks."""
    means, sds = [], []
    for r0 in range(0, X.shape[0], chunk):
        p = f(X[r0:r0 + chunk])
        means.append(p.mean(axis=0))
        sds.append(p.std(axis=0, ddof=1))
    return np.concatenate(means), np.concatenate(sds)


def _hist(sig: np.ndarray) -> dict:
    lg = np.log10(np.maximum(sig, 1e-300))
    counts, _ = np.histogram(np.clip(lg, SIGMA_BINS[0], SIGMA_BINS[-1]), bins=SIGMA_BINS)
    return dict(counts=counts.tolist(), quantiles=np.round(np.quantile(sig, QUANTILES), 6).tolist(),
                mean=float(sig.mean()))


def _evaluate(fit: _Fit, d: _Data, dataset: str, s: dict, seed: int) -> tuple[dict, dict, dict]:

    n_pred = int(s["n_predictors"])
    rng = np.random.default_rng([seed, 11])
    seeds = rng.integers(0, 2**31 - 1, size=4 + int(s["n_entropy_draws"]))
    f = fit.predictors(n_pred, int(seeds[0]))
    X_ood = np.asarray(d.box.sample_numpy(int(s["n_ood"]), int(seeds[1])), dtype=np.float64)
    t0 = time.perf_counter()
    draws_te = f(d.X_te)
    _, sig_tr = _sigma(f, d.X_tr)
    sig_te = draws_te.std(axis=0, ddof=1)
    _, sig_ood = _sigma(f, X_ood)
    ybar = draws_te.mean(axis=0)
    m = dict(
        auroc=float(auroc(np.concatenate([sig_tr, sig_te]), sig_ood)),
        rmse=float(d.y_scale * np.sqrt(np.mean((ybar - d.y_te) ** 2))),
        fit_seconds=float(fit.seconds),
        epochs=float(fit.epochs),
        sigma_train=float(sig_tr.mean()),
        sigma_ood=float(sig_ood.mean()),
    )
    if fit.lpp_kind == "mixture":
        m["lpp"] = lpp_mixture(draws_te, d.y_te, d.sigma_l, d.y_scale)
    else:
        m["lpp"] = lpp_gaussian(draws_te, d.y_te, d.sigma_l, d.y_scale)
    if fit.info.get("n_members"):
        m["lpp_legacy"] = lpp_gaussian(draws_te, d.y_te, 0.0, d.y_scale)
    m["lpp_formula"] = float(-0.5 * math.log(2 * math.pi * d.sigma_l**2) - math.log(d.y_scale)
                             - (m["rmse"] / d.y_scale) ** 2 / (2 * d.sigma_l**2))
    art: dict[str, Any] = {"sigma_hist": {"edges_log10": np.round(SIGMA_BINS, 4).tolist(),
                                          "train": _hist(sig_tr), "test": _hist(sig_te), "ood": _hist(sig_ood)}}
    info: dict[str, Any] = {"eval_seconds": {"sigma": time.perf_counter() - t0}}

    t1 = time.perf_counter()
    theta = fit.params(int(s["n_param_entropy"]), int(seeds[2]))
    if theta is not None and theta.shape[0] >= 2:
        m["h_param"] = float(entropy.knn_entropy(np.asarray(theta, dtype=np.float64), k=1))
        info["h_param_n"] = int(theta.shape[0])
    T = int(s["n_points"])
    hs, n_dup = [], 0
    for j in range(int(s["n_entropy_draws"])):
        Xj = np.asarray(d.box.sample_numpy(T, int(seeds[4 + j])), dtype=np.float64)
        pj = fit.predictors(n_pred, int(seeds[4 + j]))(Xj)
        if pj.shape[0] >= 2:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                hs.append(float(entropy.function_entropy(pj, k=1)))
            n_dup += any(issubclass(w.category, RuntimeWarning) for w in caught)
    # coinciding predictors (e.g. dropout masks that differ only on dead ReLU units) are clamped
    info["h_pred_draws_with_duplicates"] = int(n_dup)
    if hs:
        m["h_pred"] = float(np.mean(hs))
        info["h_pred_draws"] = hs
        info["h_pred_n"] = int(pj.shape[0])
    info["eval_seconds"]["entropy"] = time.perf_counter() - t1

    if dataset == SYNTHETIC:

        grid = np.linspace(*OOD_INTERVAL, GRID_POINTS)
        mean_g, sig_g = _sigma(f, grid[:, None])
        m["sigma_ratio"] = sigma_ratio(grid, sig_g, sig_tr)
        m["sigma_ratio_far"] = sigma_ratio(grid, sig_g, sig_tr, (FAR_REGION,))
        variant = VARIANT[s["_method"]]
        art["sigma_curve"] = {"x": np.round(grid, 5).tolist(), "mean": np.round(mean_g, 5).tolist(),
                              "sigma": np.round(sig_g, 6).tolist()}
        xr, yr = d.raw_train
        art["curve_1d"] = {"x": np.round(grid, 5).tolist(), "eta": np.round(wave_function(grid), 6).tolist(),
                           "x_train": np.round(xr[:, 0], 6).tolist(), "y_train": np.round(yr, 6).tolist(),
                           "level": 0.95,
                           "variants": {variant: {"mean": np.round(mean_g, 5).tolist(),
                                                  "lo": np.round(mean_g - 1.96 * sig_g, 5).tolist(),
                                                  "hi": np.round(mean_g + 1.96 * sig_g, 5).tolist()}}}
    return m, art, info
