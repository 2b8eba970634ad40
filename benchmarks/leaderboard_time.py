"""Fit + predict seconds of a leaderboard cell against bde's, on one thread (issue 19's time target).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/leaderboard_time.py [--methods ensemble]
        [--datasets wine boston concrete energy yacht kin8nm] [--splits 1] [--out FILE]

Issue 19's second target: fit + predict per split no more than scikit-learn-contrib's `bde` (MILE)
takes on one thread here, about 20-25 s for the small sets, 40-55 s for kin8nm, power and naval and
210 s for protein (the issue's measurements; bde is not installed here, so its side is those
numbers, not a run). The leaderboard's own cells record their seconds, but they ran two to five at
a time on the two cores, so those are upper bounds. This script times exactly what a cell does
(`dubito.experiments.leaderboard.run_cell`: the `dubito.methods` estimator with the row's overrides,
fit on the split's training rows, `predict_distribution` and `regression_summary` on its test rows)
for the first ``--splits`` standard splits, one after another in this process, and prints the
machine line first: run it with nothing else on the machine for numbers that compare. A benchmark,
not a timed test.
"""

from __future__ import annotations

import argparse
import os
import sys
from types import SimpleNamespace

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import Printer, header, one_thread_env, progress, torch_one_thread  # noqa: E402

one_thread_env()


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--methods", nargs="*", default=["ensemble"], help="leaderboard rows")
    ap.add_argument("--datasets", nargs="*", default=["wine", "boston", "concrete", "energy", "yacht", "kin8nm"])
    ap.add_argument("--splits", type=int, default=1, help="first standard splits per set")
    ap.add_argument("--out", default=None, help="also write the lines to this file")
    args = ap.parse_args(argv)
    torch = torch_one_thread()
    from dubito.experiments.leaderboard import BDE_SECONDS, run_cell
    from dubito.heap import retain_freed_memory

    retain_freed_memory()  # as `dubito bench` runs the cells
    out = Printer(args.out)
    out(header(torch, "cpu"))
    out("| row | data set | split | fit s | predict + score s | total s | bde s | total / bde (high) | NLL |")
    out("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for method in args.methods:
        for name in args.datasets:
            low, high = BDE_SECONDS[name]
            for split in range(args.splits):
                progress(f"{method} {name} split {split}")
                cell = SimpleNamespace(method=method, dataset=name, split=split, seed=0, settings={})
                m = run_cell(cell).variants[method]
                total = m["fit_seconds"] + m["predict_seconds"]
                bde = f"{low:.0f}-{high:.0f}" if low != high else f"{high:.0f}"
                out(f"| {method} | {name} | {split} | {m['fit_seconds']:.1f} | {m['predict_seconds']:.1f} "
                    f"| {total:.1f} | {bde} | {total / high:.2f} | {m['nll']:.3f} |")


if __name__ == "__main__":
    main()
