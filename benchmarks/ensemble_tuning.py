"""Does `dubito.tune` gain over the deep ensemble's defaults? Checked on validation rows (issue 19).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/ensemble_tuning.py --records FILE.jsonl
        [--datasets boston wine concrete energy yacht] [--splits 3] [--variants default tuned]
        [--trials 20] [--table]

The leaderboard's ``ensemble-tuned`` cells (the `paper` preset, 20 trials of the estimator's
``search_space`` at 4a477e6) were worse than today's untuned defaults on all five small sets
(docs/results/leaderboard.md's notes). Their space (the rate, the weight decay, the width with two
one-layer nets) was drawn around the defaults of that time. Before the `paper` preset spends its CPU
hours on tuned rows, this measures whether tuning gains at all, and with which space.

Variants: ``default`` (the estimator's defaults, ``input_encoding="auto"``); ``tuned`` (`dubito.tune`
over the estimator's declared ``search_space``, since session 27 a space about today's defaults: the
rate a factor 3 either side of 1e-3, the prior precision 1-100 about its 10, and the input encoding as
a choice, so that each trial is one training; its records were made with that space passed
explicitly, before it became the declared one); ``tuned-former`` (the former declared space, which
the leaderboard keeps for its ``ensemble-tuned-former-space`` row: the rate, lambda_tab, four widths,
over today's other defaults). Validation rows
only, as benchmarks/ensemble_capacity.py: for each of the first ``--splits`` standard splits the
variant is fitted on 80 % of the split's training rows (`_common.validation_rows`; `tune` holds out
its own 20 % of those, and the ensemble its own tenth of the rest) and scored on the other 20 %; the
test rows are not used. ``random_state`` = split for the ensemble and for `tune`. Each fit appends
one JSON record (set, split, variant, NLL, RMSE, coverage@95, seconds, the parameters chosen) to
``--records``; records there are not fitted again. ``--table`` prints the means per (set, variant),
the paired difference from ``default`` and its standard error. A check, not a timed test: a tuned
fit is ``--trials`` trainings and a refit, about 7 CPU min per boston split under load.
"""

from __future__ import annotations

import json
import os
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # for _common, also when imported by path
from _common import one_thread_env, progress, validation_rows  # noqa: E402
from ensemble_capacity import paired_table, read_records, records_main, score  # noqa: E402

one_thread_env()

VARIANTS = ("default", "tuned", "tuned-former")
SMALL_SETS = ["boston", "wine", "concrete", "energy", "yacht"]


def fit(variant: str, X, y, seed: int, n_trials: int):
    """The fitted ensemble of ``variant`` and the parameters tuning chose ({} untuned)."""
    from dubito.experiments.leaderboard import SPACES
    from dubito.regression import DeepEnsembleRegressor
    from dubito.tune import tune

    est = DeepEnsembleRegressor(random_state=seed, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if variant == "default":
            return est.fit(X, y), {}
        space = SPACES["ensemble-tuned-former-space"] if variant == "tuned-former" else None
        result = tune(est, X, y, space=space, n_trials=n_trials, random_state=seed, progress=False)
    return result.estimator, result.best_params


def run(args) -> None:
    from dubito.data import load

    done = {(r["ds"], r["split"], r["variant"]) for r in read_records(args.records)}
    for name in args.datasets:
        ds = load(name)
        for split in range(args.splits):
            X, y, _, _ = ds.split(split)
            fit_rows, val_rows = validation_rows(len(y), split)
            for variant in args.variants:
                if (name, split, variant) in done:
                    continue
                progress(f"{name} split {split} {variant}")
                t0 = time.perf_counter()
                est, params = fit(variant, X[fit_rows], y[fit_rows], split, args.trials)
                rec = dict(ds=name, split=split, variant=variant, sec=time.perf_counter() - t0,
                           params={k: (list(v) if isinstance(v, tuple) else v) for k, v in params.items()},
                           **score(est.predict_distribution(X[val_rows]), y[val_rows]))
                with open(args.records, "a") as f:
                    f.write(json.dumps(rec) + "\n")


def table(path: str) -> None:
    paired_table(path, VARIANTS, "default", standard_error=True)


def main(argv=None) -> None:
    def add_arguments(ap):
        ap.add_argument("--variants", nargs="+", default=["default", "tuned"], choices=list(VARIANTS))
        ap.add_argument("--trials", type=int, default=20, help="trials per tuned fit (the leaderboard's 20)")
        ap.set_defaults(datasets=SMALL_SETS)

    records_main(argv, __doc__, run, table, add_arguments)


if __name__ == "__main__":
    main()
