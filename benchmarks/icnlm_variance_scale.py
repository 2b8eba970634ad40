"""The IC-NLM's held-out variance scale in z, chosen on validation rows (issue 19).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/icnlm_variance_scale.py --records FILE.jsonl
        [--datasets boston concrete energy yacht kin8nm power naval protein] [--splits 3]
        [--diabetes 10] [--table]

`ImplicitCopulaRegressor` learns the spread of its latent Z | x from the residuals of the rows its
feature network trained on, and without the scale its intervals covered 0.917 on average over
diabetes splits 0-9 (lowest split 0.841). ``variance_scaling="heldout"`` (the default) multiplies
every latent component variance by one c, the MAP value on the network's held-out tenth under the
log-normal prior of `dubito.variance_scale`. One fit gives both predictives (c and c = 1), so the table compares them
paired. Validation rows only, as benchmarks/ensemble_capacity.py: for each of the first ``--splits``
standard splits the IC-NLM (defaults, ``random_state`` = split) is fitted on 80 % of the split's
training rows (`_common.validation_rows`) and scored on the other 20 %; the test rows are not used.
``--diabetes k``: the README-sized check, test coverage@95 and NLL on diabetes splits 0..k-1 (fitted on
the split's training rows with ``random_state=0``; recorded as "diabetes-test"). Each fit appends one
JSON record to ``--records``; records there are not fitted again. Not wine: its response takes 6
values, and the KDE marginal refuses it. A check, not a timed test: about
30 CPU min for the four small sets and kin8nm with 3 splits, under load.
"""

from __future__ import annotations

import json
import os
import sys
import time
import warnings
from functools import partial

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # for _common, also when imported by path
from _common import one_thread_env, progress, validation_rows  # noqa: E402
from ensemble_capacity import read_records, records_main, score  # noqa: E402

one_thread_env()

SETS = ["boston", "concrete", "energy", "yacht", "kin8nm", "power", "naval", "protein"]


def fit_and_score_method(method: str, X, y, X_score, y_score, seed: int) -> dict:
    """One fit of `dubito.methods` ``method`` (its defaults) with the held-out scale; the scores of
    its predictive with c and with c = 1 (``variance_scale_`` set to 1 after the fit)."""
    from dubito.methods import get_method

    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = get_method(method).make(random_state=seed, progress=False, variance_scaling="heldout").fit(X, y)
        secs = time.perf_counter() - t0
        c = est.variance_scale_
        scaled = score(est.predict_distribution(X_score), y_score)
        est.variance_scale_ = 1.0
        unscaled = score(est.predict_distribution(X_score), y_score)
    return dict(c=c, sec=secs, scaled=scaled, unscaled=unscaled)


#: This check's fit: the IC-NLM (`ImplicitCopulaRegressor` with its defaults).
fit_and_score = partial(fit_and_score_method, "icnlm")


def run_paired_records(args, fit_and_score) -> None:
    """The records loop of the one-fit, two-scorings checks (this one, mfvi_variance_scale.py,
    heldout_scale.py): for each set in ``args.datasets`` and each of the first ``args.splits``
    standard splits (protein: ``args.protein_splits``) not yet in ``args.records``, fit on the split's
    validation-fit rows and score on its validation rows (`_common.validation_rows`), appending
    ``dict(ds, split, **fit_and_score(X, y, X_score, y_score, seed=split))``; then ``args.diabetes``
    diabetes test splits ("diabetes-test", seed 0)."""
    from dubito.data import load

    done = {(r["ds"], r["split"]) for r in read_records(args.records)}

    def append(name, split, rec):
        with open(args.records, "a") as f:
            f.write(json.dumps(dict(ds=name, split=split, **rec)) + "\n")

    for name in args.datasets:
        ds = load(name)
        for split in range(args.splits if name != "protein" else min(args.splits, args.protein_splits)):
            if (name, split) in done:
                continue
            progress(f"{name} split {split}")
            X, y, _, _ = ds.split(split)
            fit_rows, val_rows = validation_rows(len(y), split)
            append(name, split, fit_and_score(X[fit_rows], y[fit_rows], X[val_rows], y[val_rows], split))
    if args.diabetes:
        ds = load("diabetes")
        for split in range(args.diabetes):
            if ("diabetes-test", split) not in done:
                progress(f"diabetes split {split} (test rows)")
                X, y, Xt, yt = ds.split(split)
                append("diabetes-test", split, fit_and_score(X, y, Xt, yt, 0))


def records_by_set(path: str) -> dict:
    """The records of ``path`` grouped by data set ("ds"), in file order."""
    by = {}
    for r in read_records(path):
        by.setdefault(r["ds"], []).append(r)
    return by


def nll_difference(recs: list, new: str, old: str) -> str:
    """"mean ± s.e." of the paired NLL difference ``new`` - ``old`` over ``recs`` (their scores' keys)."""
    import numpy as np

    d = np.array([r[new]["nll"] - r[old]["nll"] for r in recs])
    se = d.std(ddof=1) / np.sqrt(d.size) if d.size > 1 else float("nan")
    return f"{d.mean():+.3f} ± {se:.3f}"


def table(path: str) -> None:
    import numpy as np

    by = records_by_set(path)
    print("| data set | splits | c (range) | NLL c = 1 -> c | difference ± s.e. | coverage@95 c = 1 -> c "
          "| lowest split's coverage | RMSE | fit s |")
    print("|---|---:|---|---|---:|---|---|---:|---:|")
    for ds, recs in by.items():
        m = lambda kind, key: np.mean([r[kind][key] for r in recs])  # noqa: E731
        low = lambda kind: min(r[kind]["cov"] for r in recs)  # noqa: E731
        cs = [r["c"] for r in recs]
        print(f"| {ds} | {len(recs)} | {np.mean(cs):.2f} ({min(cs):.2f}-{max(cs):.2f}) "
              f"| {m('unscaled', 'nll'):.3f} -> {m('scaled', 'nll'):.3f} "
              f"| {nll_difference(recs, 'scaled', 'unscaled')} "
              f"| {m('unscaled', 'cov'):.3f} -> {m('scaled', 'cov'):.3f} "
              f"| {low('unscaled'):.3f} -> {low('scaled'):.3f} "
              f"| {m('scaled', 'rmse'):.3f} | {np.mean([r['sec'] for r in recs]):.0f} |")


def main(argv=None) -> None:
    records_main(argv, __doc__, lambda args: run_paired_records(args, fit_and_score), table,
                 lambda ap: ap.set_defaults(datasets=SETS))


if __name__ == "__main__":
    main()
