"""MC dropout's ``dropout="auto"`` against the benchmark's fixed 0.05, on validation rows (issue 19).

    OMP_NUM_THREADS=1 DUBITO_DATA=... .venv/bin/python benchmarks/mc_dropout_rate.py --records FILE.jsonl
        [--datasets boston concrete energy yacht wine kin8nm power naval] [--splits 3] [--table]

For each of the first ``--splits`` standard splits: `MCDropoutRegressor` with its defaults
(``random_state`` = split) fitted with ``dropout="auto"`` on 80 % of the split's training rows
(`_common.validation_rows`) and scored on the other 20 %; the test rows are not used. "auto" trains
0.05 and 0.01 with the same seed and keeps one (`dubito.regression.held_out_choice.one_se_choice`);
where it keeps 0.05 its fit is the fixed rate's, bit for bit, otherwise 0.05 is fitted once more for
the comparison. Each split appends one JSON record to ``--records`` (resumed, not refitted). A
check, not a timed test.
"""

from __future__ import annotations

import os
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # for _common, also when imported by path
from _common import one_thread_env  # noqa: E402
from ensemble_capacity import records_main, score  # noqa: E402
from icnlm_variance_scale import nll_difference, records_by_set, run_paired_records  # noqa: E402

one_thread_env()

SETS = ["boston", "concrete", "energy", "yacht", "wine", "kin8nm", "power", "naval"]


def fit_and_score(X, y, X_score, y_score, seed: int) -> dict:
    """The "auto" fit and the fixed 0.05 fit of one split, scored on the validation rows."""
    from dubito.regression import MCDropoutRegressor

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        auto = MCDropoutRegressor(random_state=seed, progress=False).fit(X, y)
        secs = time.perf_counter() - t0
        fixed = auto if auto.dropout_ == 0.05 else \
            MCDropoutRegressor(dropout=0.05, random_state=seed, progress=False).fit(X, y)
        held_out = auto.dropout_scores_ and {str(k): v for k, v in auto.dropout_scores_.items()}
        return dict(rate=auto.dropout_, held_out=held_out, sec=secs,
                    auto=score(auto.predict_distribution(X_score), y_score),
                    fixed=score(fixed.predict_distribution(X_score), y_score))


def table(path: str) -> None:
    import numpy as np

    by = records_by_set(path)
    print("| data set | splits | rate kept (0.01 of splits) | NLL 0.05 -> auto | difference ± s.e. "
          "| coverage@95 0.05 -> auto | RMSE 0.05 -> auto | fit s (auto) |")
    print("|---|---:|---|---|---:|---|---|---:|")
    for ds, recs in by.items():
        m = lambda kind, key: np.mean([r[kind][key] for r in recs])  # noqa: E731
        low = sum(r["rate"] == 0.01 for r in recs)
        print(f"| {ds} | {len(recs)} | {low} of {len(recs)} | {m('fixed', 'nll'):.3f} -> {m('auto', 'nll'):.3f} "
              f"| {nll_difference(recs, 'auto', 'fixed')} | {m('fixed', 'cov'):.3f} -> {m('auto', 'cov'):.3f} "
              f"| {m('fixed', 'rmse'):.3f} -> {m('auto', 'rmse'):.3f} | {np.mean([r['sec'] for r in recs]):.0f} |")


def main(argv=None) -> None:
    records_main(argv, __doc__, lambda args: run_paired_records(args, fit_and_score), table,
                 lambda ap: ap.set_defaults(datasets=SETS))


if __name__ == "__main__":
    main()
