"""The training budget of the single-network regressors, chosen on validation rows (issue 19).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/mlp_budget.py [--datasets boston concrete energy yacht]
        [--splits 2] [--estimators deterministic mc-dropout icnlm] [--out FILE]

`DeterministicRegressor`, `MCDropoutRegressor` and `ImplicitCopulaRegressor` share the IC-NLM paper's
network recipe (`_MLPRegressor`: Adam at 2.5e-4, batch 32, at most 60 epochs, PilotNet's dense tail),
and on the leaderboard nearly all of their cells stop at that 60-epoch cap instead of by the
held-out rule (docs/results/leaderboard/cells-defaults.jsonl). This script compares that budget with
a longer one (Adam at 1e-3 and at most 500 epochs, the deep ensemble's defaults), everything else at
the estimators' defaults, on validation rows only: for each of the first ``--splits`` standard
splits the model is fitted on 80 % of the split's training rows (a seeded random order) and scored on
the other 20 % (the test rows are not used). Printed per (set, estimator, budget): mean validation
NLL and RMSE, the share of fits stopped by the cap, the mean best epoch and the fit seconds.
A check, not a timed test; about 30 min on one thread.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # for _common, also when imported by path
from _common import (  # noqa: E402
    Printer,
    header,
    one_thread_env,
    progress,
    torch_one_thread,
    validation_rows,
)

one_thread_env()

BUDGETS = {"paper (2.5e-4, 60)": dict(lr=2.5e-4, epochs=60), "longer (1e-3, 500)": dict(lr=1e-3, epochs=500)}


def main(argv=None) -> None:
    import numpy as np

    from dubito.data import load
    from dubito.methods import get_method
    from dubito.metrics import nll

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", nargs="*", default=["boston", "concrete", "energy", "yacht"])
    ap.add_argument("--splits", type=int, default=2, help="first standard splits per set")
    ap.add_argument("--estimators", nargs="*", default=["deterministic", "mc-dropout", "icnlm"])
    ap.add_argument("--out", default=None, help="also write the table to this file")
    args = ap.parse_args(argv)
    torch = torch_one_thread()
    out = Printer(args.out)
    out(header(torch, "cpu"))
    out(f"validation rows (mean over the first {args.splits} standard splits; 20 % of each split's training "
        "rows held out, the test rows unused)")
    out("| data set | estimator | budget (lr, epoch cap) | NLL | RMSE | stopped by the cap | best epoch | fit s |")
    out("|---|---|---|---:|---:|---:|---:|---:|")
    for name in args.datasets:
        ds = load(name)
        for method in args.estimators:
            rows = {label: [] for label in BUDGETS}
            for split in range(args.splits):
                X, y, _, _ = ds.split(split)
                fit_rows, val_rows = validation_rows(len(y), split)
                for label, budget in BUDGETS.items():
                    progress(f"{name} split {split} {method} {label}")
                    est = get_method(method).make(random_state=split, progress=False, **budget)
                    t0 = time.perf_counter()
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")  # dead-unit notices, VI cap notices
                        est.fit(X[fit_rows], y[fit_rows])
                    secs = time.perf_counter() - t0
                    pred = est.predict_distribution(X[val_rows])
                    rows[label].append((float(np.mean(nll(pred, y[val_rows]))),
                                        float(np.sqrt(np.mean((pred.mean - y[val_rows]) ** 2))),
                                        float(est.stopped_by_ == "cap"), float(est.best_epoch_), secs))
            for label, vals in rows.items():
                m = np.mean(np.array(vals, dtype=np.float64), axis=0)
                out(f"| {name} | {method} | {label} | {m[0]:.3f} | {m[1]:.3f} | {m[2]:.2f} | {m[3]:.0f} | {m[4]:.1f} |")


if __name__ == "__main__":
    main()
