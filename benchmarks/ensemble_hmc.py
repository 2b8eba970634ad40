"""The deep ensemble against the ensemble followed by HMC from each member, on validation rows (issue 19).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/ensemble_hmc.py [--datasets boston concrete energy
        wine yacht] [--splits 3] [--draws 100] [--out FILE]

`EnsembleHMCRegressor` trains `DeepEnsembleRegressor`'s members, then runs an HMC chain from each on
its posterior over all weights (MILE's "optimise, then sample"). This script compares the two with
their defaults (``--draws`` sets the sampler's kept iterations, thinned by 5) on validation rows
only: for each of the first ``--splits`` standard splits both are fitted on 80 % of the split's
training rows (a seeded random order) and scored on the other 20 % (the test rows are not used).
Printed per (set, method): mean validation NLL, RMSE, coverage of the 95 % interval, the
sampler's mean acceptance, the worst chain's split R-hat of the predictive mean, and the fit
seconds. A check, not a timed test: about 25 min on one thread for the five small sets.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # for _common, also when imported by path
from _common import Printer, header, one_thread_env, progress, torch_one_thread, validation_rows  # noqa: E402

one_thread_env()


def score(est, X, y) -> tuple[float, float, float]:
    """(mean NLL, RMSE, coverage of the central 95 % interval) of ``est`` on (X, y)."""
    import numpy as np

    from dubito.metrics import coverage, nll, rmse

    pred = est.predict_distribution(X)
    return float(np.mean(nll(pred, y))), float(rmse(pred, y)), float(coverage(pred, y, 0.95))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", nargs="+", default=["boston", "concrete", "energy", "wine", "yacht"])
    ap.add_argument("--splits", type=int, default=3)
    ap.add_argument("--draws", type=int, default=None, help="the sampler's n_draws (default: the estimator's)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    torch = torch_one_thread()
    import numpy as np

    from dubito.data import load
    from dubito.regression import DeepEnsembleRegressor, EnsembleHMCRegressor

    out = Printer(args.out)
    out(header(torch))
    out(f"validation rows (mean over the first {args.splits} standard splits; 20 % of each split's training rows "
        "held out, the test rows unused)")
    out("| data set | method | NLL | RMSE | coverage@95 | acceptance | worst chain R-hat (mean) | fit s |")
    out("|---|---|---:|---:|---:|---:|---:|---:|")
    extra = {} if args.draws is None else dict(n_draws=args.draws)
    for name in args.datasets:
        ds = load(name)
        rows = {"ensemble": [], "ensemble-hmc": []}
        for split in range(args.splits):
            X, y, _, _ = ds.split(split)
            fit_rows, val_rows = validation_rows(len(y), split)
            for method, est in (("ensemble", DeepEnsembleRegressor(random_state=split, progress=False)),
                                ("ensemble-hmc", EnsembleHMCRegressor(random_state=split, progress=False, **extra))):
                progress(f"{name} split {split} {method}")
                start = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    est.fit(X[fit_rows], y[fit_rows])
                seconds = time.perf_counter() - start
                diag = getattr(est, "diagnostics_", {})
                rows[method].append((*score(est, X[val_rows], y[val_rows]), diag.get("acceptance", np.nan),
                                     diag.get("rhat_mean", np.nan), seconds))
        for method, values in rows.items():
            m = np.mean(values, axis=0)
            acc = "" if np.isnan(m[3]) else f"{m[3]:.2f}"
            rhat = "" if np.isnan(m[4]) else f"{np.max(np.asarray(values)[:, 4]):.2f}"
            out(f"| {name} | {method} | {m[0]:.3f} | {m[1]:.4g} | {m[2]:.3f} | {acc} | {rhat} | {m[5]:.1f} |")


if __name__ == "__main__":
    main()
