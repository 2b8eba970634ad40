"""The deep ensemble's input encoding, chosen on validation rows (issue 19).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/ensemble_encoding.py --records FILE.jsonl
        [--datasets boston concrete energy wine yacht kin8nm power naval protein] [--splits 3] [--table]

`DeepEnsembleRegressor` fed its networks the standardised inputs until session 25; its default
``input_encoding="auto"`` now trains the members twice, on the raw inputs ("none") and on those plus
their piecewise-linear encoding ("piecewise_linear", `dubito.nn.piecewise_linear`), and keeps the
fit with the lower NLL on its own held-out tenth. Validation rows only, as
benchmarks/ensemble_capacity.py: for each of the first ``--splits`` standard splits the ensemble
(``random_state`` = split, every other setting at its default) is fitted on 80 % of the split's
training rows (`_common.validation_rows`) and scored on the other 20 %; the test rows are not used.
Each fit appends one JSON record (set, split, encoding, the estimator's own held-out NLL, validation
NLL, RMSE, coverage@95, fit seconds) to ``--records``; records already there are not fitted again.

"auto" is not fitted separately: with the same seed its two trainings are these two fits, bit for
bit (tests/regression/test_ensemble_encoding.py), so its row is the record that
`dubito.regression.input_encoding.choose_encoding` keeps from the two records' per-row held-out NLL (the
"chose" column: P piecewise-linear, - none, per split), its fit seconds the two fits' sum; the table
shows the estimator's rule and the plain lower mean. ``--diabetes k``: the README example's claim, test
coverage@95 and NLL on diabetes splits 0..k-1 (fitted on the split's training rows with
``random_state=0``, as the README; recorded under the set name "diabetes-test"). ``--table``
prints the means per (set, encoding) and the difference from "none" over the splits both hold. A
check, not a timed test: about 1.5 CPU h for the seven sets below naval with 3 splits.
"""

from __future__ import annotations

import json
import os
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # for _common, also when imported by path
from _common import one_thread_env, progress, validation_rows  # noqa: E402
from ensemble_capacity import read_records, records_main, score  # noqa: E402

one_thread_env()

ENCODINGS = ("none", "piecewise_linear")


def run(args) -> None:
    from dubito.data import load

    done = {(r["ds"], r["split"], r["encoding"]) for r in read_records(args.records)}
    for name in args.datasets:
        ds = load(name)
        for split in range(args.splits if name != "protein" else min(args.splits, args.protein_splits)):
            X, y, _, _ = ds.split(split)
            fit_rows, val_rows = validation_rows(len(y), split)
            for encoding in ENCODINGS:
                if (name, split, encoding) not in done:
                    fit(args.records, name, split, encoding, X[fit_rows], y[fit_rows], X[val_rows], y[val_rows], split)
    if args.diabetes:
        ds = load("diabetes")
        for split in range(args.diabetes):
            X, y, Xt, yt = ds.split(split)
            for encoding in ENCODINGS:
                if ("diabetes-test", split, encoding) not in done:
                    fit(args.records, "diabetes-test", split, encoding, X, y, Xt, yt, 0)


def fit(records: str, name: str, split: int, encoding: str, X, y, X_score, y_score, seed: int) -> None:
    """Fit the default ensemble with ``input_encoding=encoding`` on (X, y), score (X_score, y_score),
    append the record."""
    from dubito.early_stopping import regression_holdout
    from dubito.metrics import nll
    from dubito.regression import DeepEnsembleRegressor

    progress(f"{name} split {split} {encoding}")
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = DeepEnsembleRegressor(random_state=seed, progress=False, input_encoding=encoding).fit(X, y)
    secs = time.perf_counter() - t0
    rows = regression_holdout(y, est.validation_fraction, seed, min_samples=2, batch_size=est.batch_size)[1]
    per_row = nll(est.predict_distribution(X[rows]), y[rows])  # what the estimator scored the encoding by
    rec = dict(ds=name, split=split, encoding=encoding, held_out=est.encoding_scores_[encoding], sec=secs,
               held_out_rows=per_row.tolist(), **score(est.predict_distribution(X_score), y_score))
    with open(records, "a") as f:
        f.write(json.dumps(rec) + "\n")


def table(path: str) -> None:
    import numpy as np

    from dubito.regression.input_encoding import ENCODING_SE, choose_encoding

    rules = {f"auto ({ENCODING_SE:g} se)": ENCODING_SE, "auto (lower mean)": 0.0}
    by = {}
    for r in read_records(path):
        by.setdefault(r["ds"], {}).setdefault(r["split"], {})[r["encoding"]] = r
    print("| data set | encoding | splits | NLL | NLL - none (same splits) | RMSE | coverage@95 | fit s | chose |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---|")
    for ds, splits in by.items():
        rows = {e: {k: v[e] for k, v in splits.items() if e in v} for e in ENCODINGS}
        pairs = {k: v for k, v in splits.items() if set(v) == set(ENCODINGS)}
        for rule, n_se in rules.items():  # "auto"'s two trainings are these two fits: its row is the chosen one
            rows[rule] = {k: dict(v[choose_encoding({e: np.asarray(v[e]["held_out_rows"]) for e in ENCODINGS}, n_se)],
                                  sec=sum(r["sec"] for r in v.values())) for k, v in pairs.items()}
        for encoding, recs in rows.items():
            if not recs:
                continue
            common = sorted(set(recs) & set(rows["none"]))
            diff = (f"{np.mean([recs[k]['nll'] - rows['none'][k]['nll'] for k in common]):+.3f}"
                    if common and encoding != "none" else "")
            m = {key: np.mean([r[key] for r in recs.values()]) for key in ("nll", "rmse", "cov", "sec")}
            chose = ("".join("P" if r["encoding"] == "piecewise_linear" else "-" for _, r in sorted(recs.items()))
                     if encoding in rules else "")
            rmse = f"{m['rmse']:.3f}" if m["rmse"] < 100 else f"{m['rmse']:.1f}"
            print(f"| {ds} | {encoding} | {len(recs)} | {m['nll']:.3f} | {diff} | {rmse} | {m['cov']:.3f} "
                  f"| {m['sec']:.0f} | {chose} |")


def main(argv=None) -> None:
    records_main(argv, __doc__, run, table)


if __name__ == "__main__":
    main()
