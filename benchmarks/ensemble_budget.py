"""The deep ensemble's training budget counted in optimiser steps, chosen on validation rows (issue 19).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/ensemble_budget.py [--datasets boston concrete energy
        wine yacht kin8nm] [--splits 3] [--diabetes 10] [--methods ensemble] [--compare budget|schedule]
        [--out FILE]

`DeepEnsembleRegressor` stops each member on its held-out NLL. With a patience of 20 epochs and a
cap of 500, the budget before "auto", a small set stops early: yacht's training rows make 3-4
optimiser steps an epoch, so 20 epochs are 60-80 steps, and its cells ran into the cap.
``patience="auto"`` / ``epochs="auto"`` (`dubito.early_stopping.resolve_budget`) take whichever is
longer of those epochs and 1,000 / 20,000 steps. This script compares the two budgets (and "auto"
with 10 members, the paper's other L), everything else at the defaults, on validation rows only:
for each of the first ``--splits`` standard splits the ensemble is fitted on 80 % of the split's
training rows (a seeded random order) and scored on the other 20 % (the test rows are not used).
Printed per (set, budget): mean validation NLL, RMSE and coverage of the 95 % interval, the share of
members' fits that ended at the cap, the patience and cap used, the mean best epoch and the fit
seconds. Then the README example's claim: test coverage@95 and NLL of the defaults on diabetes
splits 0..``--diabetes``-1. A check, not a timed test; about 15 min on one thread.

``--methods`` runs the same comparison for other `dubito.methods` regressors that train an
`_MLPRegressor` (deterministic, mc-dropout, mdn): their epoch budget is their own default cap with
a patience of 20, against "auto" (the 10-member row is the ensemble's only).

``--compare schedule`` (session 21): the ensemble's learning rate constant (``lr_drop="none"``, the
default before) against dropped to a tenth on a plateau of the held-out NLL (``"plateau"``, now the
default), the budget "auto" in both. The budget rows keep the constant rate they were measured with.
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

BUDGETS = {
    "epochs (patience 20, cap 500)": dict(patience=20, epochs=500, lr_drop="none"),
    "steps (auto: 1,000 / 20,000)": dict(lr_drop="none"),
    "steps (auto), 10 members": dict(n_members=10, lr_drop="none"),
}
SCHEDULES = {
    "constant rate (lr_drop none)": dict(lr_drop="none"),
    "plateau drop (lr_drop plateau)": dict(lr_drop="plateau"),
}


def budgets(method: str, default_epochs, compare: str = "budget") -> dict[str, dict]:
    """The settings compared for ``method``: `BUDGETS` (or `SCHEDULES`) for the ensemble (whose
    default is "auto"); for the others their own epoch cap with a patience of 20, against "auto"."""
    if method == "ensemble":
        return SCHEDULES if compare == "schedule" else BUDGETS
    if compare == "schedule":
        raise SystemExit("--compare schedule is the ensemble's (its lr_drop)")
    return {f"epochs (patience 20, cap {default_epochs})": dict(patience=20, epochs=default_epochs),
            "steps (auto: 1,000 / 20,000)": dict(patience="auto", epochs="auto")}


def main(argv=None) -> None:
    import numpy as np

    from dubito.data import load
    from dubito.methods import get_method
    from dubito.metrics import coverage, nll

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", nargs="*", default=["boston", "concrete", "energy", "wine", "yacht", "kin8nm"])
    ap.add_argument("--splits", type=int, default=3, help="first standard splits per set")
    ap.add_argument("--diabetes", type=int, default=10, help="diabetes test splits for the README's claim (0: skip)")
    ap.add_argument("--methods", nargs="*", default=["ensemble"], help="dubito.methods regressors")
    ap.add_argument("--compare", choices=("budget", "schedule"), default="budget",
                    help="budget: epochs against steps; schedule: the ensemble's constant rate against a plateau drop")
    ap.add_argument("--out", default=None, help="also write the tables to this file")
    args = ap.parse_args(argv)
    torch = torch_one_thread()
    out = Printer(args.out)
    out(header(torch, "cpu"))

    def fit(X, y, seed, budget, method="ensemble"):
        est = get_method(method).make(random_state=seed, progress=False, **budget)
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.fit(X, y)
        return est, time.perf_counter() - t0

    out(f"validation rows (mean over the first {args.splits} standard splits; 20 % of each split's training "
        "rows held out, the test rows unused)")
    out("| data set | method | budget | NLL | RMSE | coverage@95 | members at the cap | patience / cap (epochs) | best epoch | fit s |")
    out("|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, method in ((d, m) for d in args.datasets for m in args.methods):
        ds = load(name)
        grid = budgets(method, get_method(method).make().epochs, args.compare)
        rows = {label: [] for label in grid}
        for split in range(args.splits):
            X, y, _, _ = ds.split(split)
            fit_rows, val_rows = validation_rows(len(y), split)
            for label, budget in grid.items():
                progress(f"{name} split {split} {method} {label}")
                est, secs = fit(X[fit_rows], y[fit_rows], split, budget, method)
                pred = est.predict_distribution(X[val_rows])
                yv = y[val_rows]
                at_cap = float(np.mean(np.asarray(est.best_epoch_) + est.patience_ > est.epochs_))
                rows[label].append((float(np.mean(nll(pred, yv))), float(np.sqrt(np.mean((pred.mean - yv) ** 2))),
                                    float(coverage(pred, yv, 0.95)), at_cap, est.patience_, est.epochs_,
                                    float(np.mean(est.best_epoch_)), secs))
        for label, vals in rows.items():
            m = np.mean(np.array(vals, dtype=np.float64), axis=0)
            out(f"| {name} | {method} | {label} | {m[0]:.3f} | {m[1]:.3f} | {m[2]:.3f} | {m[3]:.2f} | {m[4]:.0f} / {m[5]:.0f} "
                f"| {m[6]:.0f} | {m[7]:.1f} |")

    if args.diabetes and "ensemble" in args.methods:
        out()
        out(f"The README example: DeepEnsembleRegressor(random_state=0) on diabetes splits 0-{args.diabetes - 1} "
            "(test rows)")
        out("| budget | coverage@95 mean | min | max | test NLL |")
        out("|---|---:|---:|---:|---:|")
        ds = load("diabetes")
        for label, budget in list(budgets("ensemble", None, args.compare).items())[:2]:
            covs, nlls = [], []
            for split in range(args.diabetes):
                progress(f"diabetes split {split} {label}")
                X, y, Xt, yt = ds.split(split)
                est, _ = fit(X, y, 0, budget)
                pred = est.predict_distribution(Xt)
                covs.append(float(coverage(pred, yt, 0.95)))
                nlls.append(float(np.mean(nll(pred, yt))))
            out(f"| {label} | {np.mean(covs):.3f} | {min(covs):.3f} | {max(covs):.3f} | {np.mean(nlls):.2f} |")


if __name__ == "__main__":
    main()
