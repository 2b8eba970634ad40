"""Fit + predict on a GPU against every CPU thread of the same machine (issue 21), as ratios
measured in one run.

    .venv/bin/python benchmarks/gpu.py [--rows 20000,200000,2000000] [--quick] [--out FILE]

For each network estimator with its defaults (fixed epochs, no early stopping, so both devices
do the same number of steps) and, with ``--large-batch``, also at batch 4096: synthetic data of
n rows x 16 features (y = sin(x_1) + a linear term + noise), ``fit`` then ``predict_distribution``
on 10,000 rows, timed on ``cuda`` and on ``cpu`` with ``torch.set_num_threads(os.cpu_count())``.
Prints seconds on each (on the GPU eager and with the training step replayed as a CUDA graph,
`dubito.graphed_steps`), the ratios cpu / gpu and eager / graphed, and the training rows per second. Issue 21's target:
GPU >= 5x the CPU at 200,000 rows with the defaults, >= 20x with a large batch; fit time linear
in n. Without CUDA it times the CPU alone (``--quick`` is the smoke test: 2,000 rows, 1 epoch).
A benchmark, not a timed test.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # for _common, also when imported by path
from _common import Printer, header  # noqa: E402

#: estimator name -> (dubito class name, settings that fix the work: epochs, no held-out share)
ESTIMATORS = {
    "DeepEnsembleRegressor": dict(epochs=5, validation_fraction=0.0),
    "MCDropoutRegressor": dict(epochs=5, validation_fraction=0.0, n_samples=100),
    "MixtureDensityRegressor": dict(epochs=5, validation_fraction=0.0),
    "DeterministicRegressor": dict(epochs=5, validation_fraction=0.0),
    "MeanFieldVIRegressor": dict(epochs=5, validation_fraction=0.0),
    "HyperVIRegressor": dict(max_epochs=5, validation_fraction=0.0),
    "DeepNoiseSGDRegressor": dict(epochs=5, validation_fraction=0.0),
}
# Not in the list: ImplicitCopulaRegressor, whose VI on every training row dominates its fit (345 s
# for 2,000 rows on 2 loaded CPU threads here), and the classifiers (their own label data).


def _data(n: int, d: int = 16, seed: int = 0):
    import numpy as np

    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)).astype(np.float32)
    y = np.sin(X[:, 0]) + X[:, 1:] @ rng.normal(size=d - 1).astype(np.float32) * 0.3 + 0.1 * rng.normal(size=n)
    return X, y


def _time(name: str, settings: dict, device: str, X, y, X_pred, graphs: bool = True) -> float:
    """Seconds of fit + predict_distribution; ``graphs=False`` sets ``DUBITO_CUDA_GRAPHS=0``
    (`dubito.graphed_steps`: the eager loop on the GPU)."""
    import dubito.regression as regression

    os.environ["DUBITO_CUDA_GRAPHS"] = "1" if graphs else "0"
    est = getattr(regression, name)(device=device, progress=False, random_state=0, **settings)
    start = time.perf_counter()
    est.fit(X, y)
    est.predict_distribution(X_pred).mean  # noqa: B018 (forces the prediction)
    if device == "cuda":
        import torch

        torch.cuda.synchronize()
    return time.perf_counter() - start


def main(argv=None) -> None:
    import torch

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default="20000,200000,2000000", help="comma-separated training sizes")
    ap.add_argument("--estimators", default=",".join(ESTIMATORS), help="comma-separated subset")
    ap.add_argument("--large-batch", action="store_true", help="also time batch_size=4096")
    ap.add_argument("--quick", action="store_true", help="2,000 rows, 1 epoch: a smoke test")
    ap.add_argument("--out", default=None, help="also write the table to this file")
    args = ap.parse_args(argv)
    torch.set_num_threads(os.cpu_count() or 1)
    cuda = torch.cuda.is_available()
    rows = [2000] if args.quick else [int(r) for r in args.rows.split(",")]
    out = Printer(args.out)
    out(header(torch, "cuda" if cuda else "cpu"))
    if not cuda:
        out("no CUDA here: CPU times only (the ratios need a GPU)")
    out(f"| estimator | batch | rows | cpu s | gpu eager s | gpu graphed s | cpu / gpu graphed | eager / graphed "
        f"| {'gpu' if cuda else 'cpu'} rows/s (epochs x rows / s) |")
    out("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    X_pred, _ = _data(2000 if args.quick else 10_000, seed=1)
    if cuda:  # the CUDA context and kernels' first use, outside every timing
        _time("DeterministicRegressor", dict(epochs=1, validation_fraction=0.0), "cuda", *_data(2000), X_pred[:100])
    for name in args.estimators.split(","):
        settings = dict(ESTIMATORS[name])
        if args.quick:
            settings = {k: (1 if k in ("epochs", "max_epochs") else v) for k, v in settings.items()}
        batches = [None, 4096] if args.large_batch else [None]
        for batch in batches:
            s = dict(settings, **({} if batch is None else {"batch_size": batch}))
            for n in rows:
                X, y = _data(n)
                cpu = _time(name, s, "cpu", X, y, X_pred)
                eager = _time(name, s, "cuda", X, y, X_pred, graphs=False) if cuda else float("nan")
                gpu = _time(name, s, "cuda", X, y, X_pred) if cuda else float("nan")
                epochs = s.get("epochs", s.get("max_epochs"))
                out(f"| {name} | {batch or 'default'} | {n} | {cpu:.1f} | {eager:.1f} | {gpu:.1f} | {cpu / gpu:.1f} "
                    f"| {eager / gpu:.1f} | {n * epochs / (gpu if cuda else cpu):.0f} |")


if __name__ == "__main__":
    main()
