"""A regressor's held-out variance scale, checked on validation rows (issue 19).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/heldout_scale.py --method mdn --records FILE.jsonl
        [--datasets boston concrete energy yacht wine kin8nm power naval] [--splits 3] [--diabetes 10] [--table]

For an estimator of `dubito.methods` (``--method``) that fits one variance scale c on its held-out
rows (``variance_scaling="heldout"``, `dubito.variance_scale`) and applies it at prediction through
``variance_scale_``: one fit per split with the scale, scored twice, with c and with c = 1 (the
fitted ``variance_scale_`` set to 1), so the table compares them paired. Validation rows only, as
benchmarks/icnlm_variance_scale.py (whose table this prints): each of the first ``--splits`` standard
splits is fitted (the method's defaults, ``random_state`` = split) on 80 % of its training rows
(`_common.validation_rows`) and scored on the other 20 %; the test rows are not used. ``--diabetes
k``: test coverage@95 and NLL on diabetes splits 0..k-1 (``random_state=0``; "diabetes-test"). Each
fit appends one JSON record to ``--records``; records there are not fitted again. A check, not a
timed test.
"""

from __future__ import annotations

import os
import sys
from functools import partial

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # for _common, also when imported by path
from _common import one_thread_env  # noqa: E402
from ensemble_capacity import records_main  # noqa: E402
from icnlm_variance_scale import fit_and_score_method, run_paired_records, table  # noqa: E402

one_thread_env()

SETS = ["boston", "concrete", "energy", "yacht", "wine", "kin8nm", "power", "naval"]


def main(argv=None) -> None:
    def add_arguments(ap):
        ap.add_argument("--method", required=True, help="a dubito.methods name whose estimator takes variance_scaling")
        ap.set_defaults(datasets=SETS)

    def run(args):
        run_paired_records(args, partial(fit_and_score_method, args.method))

    records_main(argv, __doc__, run, table, add_arguments)


if __name__ == "__main__":
    main()
