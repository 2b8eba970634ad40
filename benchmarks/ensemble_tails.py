"""Gaussian against Student-t components for the deep ensembles, on validation rows (issue 19).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/ensemble_tails.py [--datasets boston concrete
        energy wine yacht kin8nm power] [--splits 3] [--methods ensemble] [--dfs none 30 10 6 4 3]
        [--diabetes 10] [--out FILE]

``tail_df`` only changes the predictive, never the training: each component N(m, v) becomes a
Student-t with nu degrees of freedom and the same mean and variance, and the held-out variance
scale is fitted under that likelihood. So each (set, split, method) is trained once, with
``tail_df=None``, and every nu is scored from the same networks: a copy of the fitted estimator with
``tail_df=nu`` and its variance scale refitted on the estimator's own held-out rows, which is what
``fit`` with ``tail_df=nu`` computes. Validation rows only: for each of the first ``--splits``
standard splits the estimator is fitted on 80 % of the split's training rows (a seeded random
order) and scored on the other 20 %; the test rows are not used. Printed per (set, method): the
mean validation NLL for each nu, then the coverage of the 95 % interval for each nu. Then the README
example's claim (``--diabetes``): test coverage@95 and NLL on diabetes splits 0..k-1 for each nu.
A check, not a timed test: about 25 min on one thread for the five small sets, kin8nm and power
with the ensemble.
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # for _common, also when imported by path
from _common import Printer, header, one_thread_env, progress, torch_one_thread, validation_rows  # noqa: E402

one_thread_env()


def with_tails(est, df, X, y):
    """A copy of the fitted ``est`` with ``tail_df=df`` and its variance scale refitted on its held-out
    rows of (X, y), the rows it was fitted on: what ``fit`` with ``tail_df=df`` would give, except that
    with ``input_encoding="auto"`` the encoding stays the one chosen under the fitted ``tail_df``."""
    from dubito._estimator import seed_base
    from dubito.early_stopping import regression_holdout
    from dubito.regression.ensemble import MIN_SAMPLES
    from dubito.variance_scale import fit_variance_scale

    out = copy.copy(est)
    out.tail_df = df
    out.variance_scale_ = 1.0
    if est.variance_scaling == "heldout" and est.validation_fraction > 0:
        _, held = regression_holdout(y, est.validation_fraction, seed_base(est.random_state),
                                     min_samples=MIN_SAMPLES, batch_size=est.batch_size)
        out.variance_scale_ = fit_variance_scale(out.predict_distribution(X[held]), y[held])
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", nargs="*",
                    default=["boston", "concrete", "energy", "wine", "yacht", "kin8nm", "power"])
    ap.add_argument("--splits", type=int, default=3)
    ap.add_argument("--methods", nargs="+", default=["ensemble"], choices=["ensemble", "ensemble-hmc"])
    ap.add_argument("--dfs", nargs="+", default=["none", "30", "10", "6", "4", "3"])
    ap.add_argument("--diabetes", type=int, default=10,
                    help="diabetes test splits for the README example's coverage claim (0: skip)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    torch = torch_one_thread()
    import numpy as np

    from dubito.data import load
    from dubito.metrics import coverage, nll
    from dubito.regression import DeepEnsembleRegressor, EnsembleHMCRegressor

    dfs = [None if d == "none" else float(d) for d in args.dfs]
    names = ["Gaussian" if d is None else f"t{d:g}" for d in dfs]
    classes = {"ensemble": DeepEnsembleRegressor, "ensemble-hmc": EnsembleHMCRegressor}
    out = Printer(args.out)
    out(header(torch))
    out(f"validation rows (mean over the first {args.splits} standard splits; 20 % of each split's training rows "
        "held out, the test rows unused): NLL, then coverage of the 95 % interval, per tail_df")
    out("| data set | method | " + " | ".join(f"NLL {n}" for n in names) + " | "
        + " | ".join(f"cov {n}" for n in names) + " |")
    out("|---|---|" + "---:|" * (2 * len(names)))
    for name in args.datasets:
        ds = load(name)
        for method in args.methods:
            rows = []
            for split in range(args.splits):
                X, y, _, _ = ds.split(split)
                fit_rows, val_rows = validation_rows(len(y), split)
                progress(f"{name} split {split} {method}")
                est = classes[method](random_state=split, progress=False, tail_df=None)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    est.fit(X[fit_rows], y[fit_rows])
                scores = []
                for df in dfs:
                    pred = with_tails(est, df, X[fit_rows], y[fit_rows]).predict_distribution(X[val_rows])
                    scores.append((float(np.mean(nll(pred, y[val_rows]))), float(coverage(pred, y[val_rows], 0.95))))
                rows.append(scores)
            m = np.mean(rows, axis=0)  # (dfs, 2)
            out(f"| {name} | {method} | " + " | ".join(f"{v:.3f}" for v in m[:, 0]) + " | "
                + " | ".join(f"{v:.3f}" for v in m[:, 1]) + " |")
    if args.diabetes:
        out()
        out(f"The README example, DeepEnsembleRegressor(random_state=0), on diabetes splits 0-{args.diabetes - 1} "
            "(test rows: the README's claim, not a choice)")
        out("| tail_df | coverage@95 mean | min | max | test NLL |")
        out("|---|---:|---:|---:|---:|")
        ds = load("diabetes")
        scores = {n: [] for n in names}
        for split in range(args.diabetes):
            progress(f"diabetes split {split}")
            X, y, Xt, yt = ds.split(split)
            est = DeepEnsembleRegressor(random_state=0, progress=False, tail_df=None)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                est.fit(X, y)
            for n, df in zip(names, dfs):
                pred = with_tails(est, df, X, y).predict_distribution(Xt)
                scores[n].append((float(coverage(pred, yt, 0.95)), float(np.mean(nll(pred, yt)))))
        for n, v in scores.items():
            v = np.asarray(v)
            out(f"| {n} | {v[:, 0].mean():.3f} | {v[:, 0].min():.3f} | {v[:, 0].max():.3f} | {v[:, 1].mean():.3f} |")


if __name__ == "__main__":
    main()
