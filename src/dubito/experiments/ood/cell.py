"""`run_cell`: load the cell's data, fit its method, evaluate (the package docstring)."""

from __future__ import annotations

import os
import time
import warnings
from pathlib import Path

import torch

from dubito.data.uci import cache_dir
from dubito.experiments.base import CellResult
from dubito.experiments.common import network_seed
from dubito.experiments.ood.data import _load
from dubito.experiments.ood.evaluate import _evaluate
from dubito.experiments.ood.fits import _fit
from dubito.experiments.ood.vocab import HYVI, PAPER_NAME, SIZE, VARIANT, _resolve


def _checkpoint_dir(cell) -> Path:
    """Where a variational cell checkpoints its training, so that a cell interrupted and run again
    resumes it (`HyperVIRegressor(checkpoint_dir=...)`): the dubito cache (``$DUBITO_CACHE``, else
    ~/.cache/dubito) ``/ood-checkpoints/<preset>/<dataset>/<method>/split<k>-seed<s>``."""

    return cache_dir() / "ood-checkpoints" / cell.preset / cell.dataset / cell.method / f"split{cell.split}-seed{cell.seed}"


def run_cell(cell, device: str = "cpu", progress: bool = False) -> CellResult:
    """One (dataset, method, seed): fit in the split's standardised units, evaluate (module docstring)."""

    if cell.method not in VARIANT:
        raise ValueError(f"unknown method {cell.method!r} for ood; available: {', '.join(VARIANT)}")
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1") or 1))
    t0 = time.perf_counter()
    d = _load(cell.dataset)
    s = dict(SIZE[d.size], sigma_l=d.sigma_l)
    s.update(_resolve(dict(cell.settings), cell.dataset))
    s["_method"] = cell.method
    s["_checkpoint"] = _checkpoint_dir(cell) if cell.method in HYVI else None
    random_state = network_seed(cell.seed, cell.split, 6)
    t1 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = _fit(cell.method, d, s, device, progress, random_state)
        metrics, art, info = _evaluate(fit, d, cell.dataset, s, random_state)
    # kept in the cell's info (collapse monitor of the k-NN methods, NUTS divergences, coinciding samples)
    info["warnings"] = sorted({f"{w.category.__name__}: {str(w.message).splitlines()[0][:200]}" for w in caught}
                              | set(fit.info.pop("warnings", [])))
    t2 = time.perf_counter()
    resolved = {k: (list(v) if isinstance(v, tuple) else v) for k, v in s.items() if not k.startswith("_")}
    info = {**d.facts, **fit.info, **info, "settings_resolved": resolved, "random_state": random_state,
            "paper_name": PAPER_NAME.get(cell.dataset, cell.dataset),
            "seconds": dict(load=t1 - t0, fit_and_evaluate=t2 - t1)}
    return CellResult(variants={VARIANT[cell.method]: metrics}, artefacts=art, info=info)
