"""How optimistic the IC-NLM's held-out rows are about its network's error, by budget (issue 19).

    OMP_NUM_THREADS=1 DUBITO_DATA=... .venv/bin/python benchmarks/icnlm_heldout_optimism.py [--dataset yacht]
        [--splits 2 3 6]

docs/results/icnlm-budget.md found the IC-NLM over-confident on yacht when its network trains with the
longer budget, although its variance scale c is fitted on the network's held-out rows. This probe
compares, for the standard splits given, the network's mean squared error in standardised z on
three sets of rows: its held-out rows at the epoch they chose (``min(validation_curve_)``: the rows
that stop training and fit c), all the rows given to fit (trained on and held out), and the split's
validation rows (`_common.validation_rows`: 20 % of the training rows the fit never saw; the test
rows unused), for the paper's budget and the longer one (``benchmarks/icnlm_budget.BUDGETS``). A
check, not a timed test.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # for _common, also when imported by path
from _common import header, one_thread_env, torch_one_thread, validation_rows  # noqa: E402
from icnlm_budget import BUDGETS  # noqa: E402

one_thread_env()


def main(argv=None) -> None:
    import numpy as np

    from dubito.data import load
    from dubito.methods import get_method

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="yacht")
    ap.add_argument("--splits", type=int, nargs="+", default=[2, 3, 6])
    args = ap.parse_args(argv)
    print(header(torch_one_thread(), "cpu"))
    print("| split | budget | best epoch | held-out MSE (at its epoch) | fitted rows' MSE | validation MSE "
          "| validation / held-out | c |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|")
    ds = load(args.dataset)
    for split in args.splits:
        X, y, _, _ = ds.split(split)
        fit, val = validation_rows(len(y), split)
        for name, budget in BUDGETS.items():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                est = get_method("icnlm").make(random_state=split, progress=False, **budget).fit(X[fit], y[fit])

            def mse(rows):  # the network's squared error in standardised z
                z = est.marginal_.pseudo_response(y[rows])
                out = est._predict_output((X[rows] - est.x_mean_) / est.x_scale_)
                return float(np.mean((z - out) ** 2)) / est.y_scale_ ** 2

            held, fresh = float(np.min(est.validation_curve_)), mse(val)
            print(f"| {split} | {name} | {est.best_epoch_} | {held:.4f} | {mse(fit):.4f} | {fresh:.4f} "
                  f"| {fresh / held:.1f} | {est.variance_scale_:.2f} |", flush=True)


if __name__ == "__main__":
    main()
