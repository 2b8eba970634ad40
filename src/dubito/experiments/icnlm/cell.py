"""`run_cell`: load the cell's data, fit its method, evaluate every variant (the package docstring)."""

from __future__ import annotations

import os
import time

import torch

from dubito.experiments.base import CellResult
from dubito.experiments.common import network_seed
from dubito.experiments.icnlm.data import _load
from dubito.experiments.icnlm.evaluate import _artefacts
from dubito.experiments.icnlm.fits import _RUNNERS


def run_cell(cell, device: str = "cpu", progress: bool = False) -> CellResult:
    """One (dataset, method, split): fit, evaluate every variant on the test set (module docstring)."""

    if cell.method not in _RUNNERS:
        raise ValueError(f"unknown method {cell.method!r} for icnlm; available: {', '.join(_RUNNERS)}")
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1") or 1))
    t0 = time.perf_counter()
    d = _load(cell.dataset, cell.split, cell.seed)
    t1 = time.perf_counter()
    random_state = network_seed(cell.seed, cell.split)
    variants, pieces, info = _RUNNERS[cell.method](d, dict(cell.settings), device, progress, random_state)
    t2 = time.perf_counter()
    info = {**d.facts, **info, "random_state": random_state, "seconds": dict(load=t1 - t0, fit_and_evaluate=t2 - t1)}
    return CellResult(variants=variants, artefacts=_artefacts(d, pieces), info=info)
