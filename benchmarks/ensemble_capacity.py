"""The deep ensemble's width and prior precision, chosen on validation rows (issue 19).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/ensemble_capacity.py --records FILE.jsonl
        [--datasets boston concrete energy wine yacht kin8nm power naval protein] [--splits 3]
        [--variants before default] [--diabetes 10] [--table]

`DeepEnsembleRegressor` trained the paper's (128, 64, 32) nets with ``weight_decay = 1/N`` (a N(0, 1)
prior on every standardised weight) until session 24; its defaults are now (256, 128, 64) with a
prior precision of 10 (``weight_decay = 10/N``). Each variant below is a set of constructor settings,
everything else at the defaults. Validation rows only: for each of the first ``--splits`` standard
splits the ensemble (``random_state`` = split) is fitted on 80 % of the split's training rows (a
seeded random order, `_common.validation_rows`) and scored on the other 20 %; the test rows are not
used. Every fit appends one JSON record (set, split, variant, NLL, RMSE, coverage@95, fit seconds)
to ``--records``, and records already there are not fitted again, so an interrupted run resumes.
``--table`` prints the mean per (set, variant) and its difference from ``before`` over the splits
both hold. ``--diabetes k``: the README example's claim, test coverage@95 and NLL of each variant on
diabetes splits 0..k-1 (fitted on the split's training rows with ``random_state=0``, as the README;
recorded under the set name "diabetes-test"). A check, not a timed test: about 1 CPU h for the nine
sets with 3 splits (protein 1).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # for _common, also when imported by path
from _common import header, one_thread_env, progress, torch_one_thread, validation_rows  # noqa: E402

one_thread_env()

WIDE = (256, 128, 64)
VARIANTS = {
    "before": dict(hidden=(128, 64, 32), prior_precision=1.0),  # the defaults until session 24
    "default": {},  # the current defaults: (256, 128, 64), prior precision 10
    "wide": dict(hidden=WIDE, prior_precision=1.0),
    "precision 10": dict(hidden=(128, 64, 32), prior_precision=10.0),
    "wide, precision 3": dict(hidden=WIDE, prior_precision=3.0),
    "wide, precision 5": dict(hidden=WIDE, prior_precision=5.0),
    "before, patience 100": dict(hidden=(128, 64, 32), prior_precision=1.0, patience=100),
    "default, patience 100": dict(patience=100),
}
SETS = ["boston", "concrete", "energy", "wine", "yacht", "kin8nm", "power", "naval", "protein"]


def read_records(path: str) -> list[dict]:
    """The records so far; a last line cut short by an interrupted append is dropped (its fit reruns)."""
    if not os.path.exists(path):
        return []
    with open(path) as f:
        lines = [line for line in f if line.strip()]
    try:
        return [json.loads(line) for line in lines]
    except json.JSONDecodeError:
        return [json.loads(line) for line in lines[:-1]]


def score(pred, y) -> dict:
    import numpy as np

    from dubito.metrics import coverage, nll

    return dict(nll=float(np.mean(nll(pred, y))), rmse=float(np.sqrt(np.mean((pred.mean - y) ** 2))),
                cov=float(coverage(pred, y, 0.95)))


def fit(settings: dict, X, y, seed: int):
    from dubito.regression import DeepEnsembleRegressor

    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = DeepEnsembleRegressor(random_state=seed, progress=False, **settings).fit(X, y)
    return est, time.perf_counter() - t0


def run(args) -> None:
    from dubito.data import load

    done = {(r["ds"], r["split"], r["variant"]) for r in read_records(args.records)}

    def append(rec: dict) -> None:
        with open(args.records, "a") as f:
            f.write(json.dumps(rec) + "\n")

    for name in args.datasets:
        ds = load(name)
        for split in range(args.splits if name != "protein" else min(args.splits, args.protein_splits)):
            X, y, _, _ = ds.split(split)
            fit_rows, val_rows = validation_rows(len(y), split)
            for variant in args.variants:
                if (name, split, variant) in done:
                    continue
                progress(f"{name} split {split} {variant}")
                est, secs = fit(VARIANTS[variant], X[fit_rows], y[fit_rows], split)
                append(dict(ds=name, split=split, variant=variant, sec=secs,
                            **score(est.predict_distribution(X[val_rows]), y[val_rows])))
    if args.diabetes:
        ds = load("diabetes")
        for split in range(args.diabetes):
            X, y, Xt, yt = ds.split(split)
            for variant in args.variants:
                if ("diabetes-test", split, variant) in done:
                    continue
                progress(f"diabetes split {split} {variant} (test rows)")
                est, secs = fit(VARIANTS[variant], X, y, 0)
                append(dict(ds="diabetes-test", split=split, variant=variant, sec=secs,
                            **score(est.predict_distribution(Xt), yt)))


def table(path: str) -> None:
    paired_table(path, VARIANTS, "before")


def paired_table(path: str, variants, base_variant: str, standard_error: bool = False) -> None:
    """Print the mean NLL, RMSE, coverage@95 and fit seconds per (set, variant) of the records at
    ``path``, and each variant's mean NLL difference from ``base_variant`` over the splits both hold
    (with the standard error of the paired differences if ``standard_error``)."""
    import numpy as np

    recs = read_records(path)
    by = {}
    for r in recs:
        by.setdefault((r["ds"], r["variant"]), {})[r["split"]] = r
    label = f"NLL - {base_variant}" + (" ± s.e." if standard_error else "")
    print(f"| data set | variant | splits | NLL | {label} (same splits) | RMSE | coverage@95 | fit s |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for ds in dict.fromkeys(r["ds"] for r in recs):
        base = by.get((ds, base_variant), {})
        for variant in variants:
            rows = by.get((ds, variant))
            if not rows:
                continue
            d = np.array([rows[k]["nll"] - base[k]["nll"] for k in sorted(set(rows) & set(base))])
            diff = ""
            if variant != base_variant and d.size:
                diff = f"{d.mean():+.3f}"
                if standard_error:
                    se = d.std(ddof=1) / np.sqrt(d.size) if d.size > 1 else float("nan")
                    diff += f" ± {se:.3f}"
            m = {key: np.mean([r[key] for r in rows.values()]) for key in ("nll", "rmse", "cov", "sec")}
            rmse = f"{m['rmse']:.3f}" if m["rmse"] < 100 else f"{m['rmse']:.1f}"
            print(f"| {ds} | {variant} | {len(rows)} | {m['nll']:.3f} | {diff} | {rmse} | {m['cov']:.3f} "
                  f"| {m['sec']:.0f} |")


def records_main(argv, doc: str, run, table, add_arguments=None) -> None:
    """The command line of a records benchmark (this one, ensemble_encoding.py): parse ``argv``, then
    ``table(records)`` alone with ``--table``, else the machine line, ``run(args)`` and the table."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--records", required=True, help="JSON-lines file the fits append to (and resume from)")
    ap.add_argument("--datasets", nargs="*", default=SETS)
    ap.add_argument("--splits", type=int, default=3, help="first standard splits per set")
    ap.add_argument("--protein-splits", type=int, default=1, help="protein's splits (each fit is minutes)")
    ap.add_argument("--diabetes", type=int, default=0, help="diabetes test splits for the README's claim")
    ap.add_argument("--table", action="store_true", help="only print the table of the records")
    if add_arguments:
        add_arguments(ap)
    args = ap.parse_args(argv)
    if args.table:
        table(args.records)
        return
    print(header(torch_one_thread(), "cpu"))
    run(args)
    table(args.records)


def main(argv=None) -> None:
    records_main(argv, __doc__, run, table, lambda ap: ap.add_argument(
        "--variants", nargs="+", default=["before", "default"], choices=list(VARIANTS)))


if __name__ == "__main__":
    main()
