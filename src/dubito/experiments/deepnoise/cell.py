"""`run_cell`: load the cell's data, fit its method, predict, evaluate (the package docstring)."""

from __future__ import annotations

import os
import shutil
import time
import warnings
from typing import Any

import numpy as np
import torch

from dubito.data import deepnoise_synthetic as syn
from dubito.experiments.base import CellResult
from dubito.experiments.common import network_seed
from dubito.experiments.deepnoise.data import _load
from dubito.experiments.deepnoise.evaluate import _band, _evaluate, _r, _w1
from dubito.experiments.deepnoise.fits import _FITS, _checkpoint_dir, _plain, _predict
from dubito.experiments.deepnoise.vocab import (
    CURVE_MAX_N,
    CURVE_POINTS,
    CURVE_REALIZATIONS,
    PIT_POINTS,
    VARIANT,
)


def run_cell(cell, device: str = "cpu", progress: bool = False) -> CellResult:
    """Fit the cell's method on one split/repeat and evaluate it (module docstring)."""

    if cell.method not in _FITS:
        raise ValueError(f"unknown method {cell.method!r} for deepnoise; available: {', '.join(_FITS)}")
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1") or 1))
    s = dict(cell.settings)
    variant = VARIANT[cell.method]
    t0 = time.perf_counter()
    d = _load(cell.dataset, cell.split)
    seed = network_seed(cell.seed, cell.split)
    t1 = time.perf_counter()
    fit = _FITS[cell.method]
    checkpoint = _checkpoint_dir(cell) if cell.method.startswith("deepnoise") and cell.method != "deepnoise-sgd" else None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if checkpoint is not None:
            est, fit_info = fit(d, s, device, progress, seed, checkpoint=checkpoint)
        else:
            est, fit_info = fit(d, s, device, progress, seed)
    fit_info["warnings"] = sorted({f"{w.category.__name__}: {str(w.message).splitlines()[0][:200]}" for w in caught})
    t2 = time.perf_counter()

    rng = np.random.default_rng([int(cell.seed), int(cell.split), 5])
    pred = _predict(est, d.X_te, cell.method, s.get("n_realizations"))
    metrics, u, n_draws = _evaluate(pred, d.y_te, rng, s.get("n_draws"))
    metrics["fit_seconds"] = t2 - t1
    keep = np.sort(rng.choice(len(u), size=min(PIT_POINTS, len(u)), replace=False))
    artefacts: dict[str, Any] = {"pit": {variant: _r(u[keep])}}
    facts = dict(d.facts or {}, n_draws_test=n_draws)
    if d.spec.kind == "synthetic":
        pred_eval = _predict(est, d.x_eval, cell.method, s.get("n_realizations_eval"))
        metrics["w1"], _ = _w1(pred_eval, d.q_eval, rng, int(s.get("n_draws_w1", 50_000)))
        facts["n_components_eval"] = int(getattr(pred_eval, "n_components", 0) or 0)
        if cell.split == 0 and cell.seed == 0 and d.spec.n <= CURVE_MAX_N:

            x_grid = syn.X_GRID[:: max(1, len(syn.X_GRID) // CURVE_POINTS)]
            pred_grid = _predict(est, x_grid[:, None], cell.method, CURVE_REALIZATIONS)
            artefacts["curve_1d"] = _band(pred_grid, x_grid, d, rng, variant)
    t3 = time.perf_counter()
    if checkpoint is not None and checkpoint.is_dir():
        shutil.rmtree(checkpoint, ignore_errors=True)  # the cell is done: its result is in the store
    info = dict(facts, **fit_info, random_state=seed, n_components_test=int(getattr(pred, "n_components", 0) or 0),
                seconds=dict(load=t1 - t0, fit=t2 - t1, evaluate=t3 - t2))
    return CellResult(variants={variant: metrics}, artefacts=artefacts, info=_plain(info))
