"""Scoring a million inputs in bounded memory (issue 21): `regression_summary_in_blocks` against
`regression_summary` of one predictive of every row, each in its own process so that each peak is
its own.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/streaming.py [--rows 1000000] [--components 50]

A `GaussianMixture` predictive with M components per row (standing in for an ensemble or a
mixture density network; ``--components``) is built row block by row block from a seeded
generator, scored against y, and the process's peak resident memory (``ru_maxrss``) and seconds
are printed for: the whole predictive at once (`regression_summary`), and blocks of 10,000 rows
(`regression_summary_in_blocks`, whose ``predict`` builds each block's mixture on demand). The
two summaries must agree (the largest relative difference is printed). A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import Printer, header, one_thread_env  # noqa: E402

one_thread_env()


def _mixture(rows, m: int):
    """The predictive of input rows ``rows`` (an int array): seeded by the row numbers alone."""
    import numpy as np

    from dubito.predictive import GaussianMixture

    rng = np.random.default_rng(rows[0] if rows.size else 0)
    n = rows.size
    centre = np.sin(rows / 1000.0)
    means = centre[:, None] + 0.1 * rng.normal(size=(n, m))
    return GaussianMixture(np.full((n, m), 1.0 / m), means, np.full((n, m), 0.04))


def _child(mode: str, n: int, m: int, block: int) -> None:
    import resource

    import numpy as np

    from dubito.metrics import regression_summary, regression_summary_in_blocks

    rows = np.arange(n)
    y = np.sin(rows / 1000.0) + 0.2 * np.random.default_rng(1).normal(size=n)
    start = time.perf_counter()
    if mode == "whole":
        pred = _concatenate([_mixture(rows[a : a + block], m) for a in range(0, n, block)])
        summary = regression_summary(pred, y)
    else:
        summary = regression_summary_in_blocks(lambda r: _mixture(r, m), rows, y, block_rows=block)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(json.dumps({"seconds": seconds, "peak_mb": peak, "summary": summary}))


def _concatenate(parts):
    import numpy as np

    from dubito.predictive import GaussianMixture

    return GaussianMixture(np.concatenate([p.weights for p in parts]), np.concatenate([p.means for p in parts]),
                           np.concatenate([p.variances for p in parts]))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--components", type=int, default=50)
    ap.add_argument("--block", type=int, default=10_000)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--out", default=None, help="also write the lines to this file")
    args = ap.parse_args(argv)
    if args.child:
        _child(args.child, args.rows, args.components, args.block)
        return
    out = Printer(args.out)
    out(header())
    results = {}
    for mode in ("blocks", "whole"):
        proc = subprocess.run([sys.executable, __file__, "--child", mode, "--rows", str(args.rows), "--components",
                               str(args.components), "--block", str(args.block)], capture_output=True, text=True)
        if proc.returncode != 0:
            out(f"{mode}: failed (exit {proc.returncode}): {proc.stderr.strip().splitlines()[-1:]}")
            continue
        results[mode] = json.loads(proc.stdout.strip().splitlines()[-1])
        r = results[mode]
        out(f"{mode}: {args.rows:,} rows x {args.components} components, {r['seconds']:.1f} s, "
            f"peak resident memory {r['peak_mb']:.0f} MB")
    if len(results) == 2:
        a, b = results["blocks"]["summary"], results["whole"]["summary"]
        worst = max(abs(a[k] - b[k]) / max(abs(b[k]), 1e-300) for k in b)
        out(f"peak memory whole / blocks: {results['whole']['peak_mb'] / results['blocks']['peak_mb']:.1f}; "
            f"largest relative difference between the two summaries: {worst:.1e}")


if __name__ == "__main__":
    main()
