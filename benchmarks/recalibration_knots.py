"""Knots of the isotonic recalibration map (issue 20): mean log score, coverage of the 95 %
interval, calibration error and knot count of `Recalibrator("isotonic")` with a knot at every
calibration point, 100 evenly thinned knots and the default "auto" (tails kept, middle thinned;
`dubito.recalibrate.isotonic`), beside the base predictive.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/recalibration_knots.py [--quick] [--out FILE]

Three problems with x ~ N(0, 1): a biased, too-narrow N(x + 0.3, 0.6^2) for y ~ N(x, 1); an
already calibrated N(x, 1); N(x, 1) for Student-t(3) noise. n calibration points, 4000 test
points, means over ``--repeats`` draws (seed 0). An accuracy benchmark (numbers, not seconds):
the isotonic module's docstring quotes its output.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # for _common, also when imported by path
from _common import Printer, header, one_thread_env  # noqa: E402

one_thread_env()


def _problem(rng, kind: str, n: int):
    import numpy as np

    from dubito.predictive import Normal

    x = rng.normal(size=n)
    if kind == "narrow":
        return Normal(x + 0.3, np.full(n, 0.36)), x + rng.normal(size=n)
    if kind == "calibrated":
        return Normal(x, np.ones(n)), x + rng.normal(size=n)
    return Normal(x, np.ones(n)), x + rng.standard_t(3, size=n)


def main(argv=None) -> None:
    import numpy as np

    from dubito.metrics import regression_summary
    from dubito.recalibrate import Recalibrator

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="2 repeats, n = 200 only")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--out", default=None, help="also write the table to this file")
    args = ap.parse_args(argv)
    out = Printer(args.out)
    repeats, sizes = (2, (200,)) if args.quick else (args.repeats, (90, 200, 400, 2000))
    out(header())
    out(f"isotonic recalibration knots: {repeats} repeats, 4000 test points; "
        "log score / coverage at 95 % / calibration error / knots")
    out("| problem | n | base | every point | 100 knots | auto |")
    out("|---|---|---|---|---|---|")
    rng = np.random.default_rng(0)
    for kind in ("narrow", "calibrated", "heavy"):
        for n in sizes:
            rows = {}
            for _ in range(repeats):
                pred_cal, y_cal = _problem(rng, kind, n)
                pred, y = _problem(rng, kind, 4000)
                s = regression_summary(pred, y)
                rows.setdefault("base", []).append((s["nll"], s["coverage_95"], s["calibration_error"]))
                for name, knots in (("every", None), ("100", 100), ("auto", "auto")):
                    rec = Recalibrator("isotonic", max_knots=knots).fit(pred_cal, y_cal)
                    s = regression_summary(rec.transform(pred), y)
                    rows.setdefault(name, []).append(
                        (s["nll"], s["coverage_95"], s["calibration_error"], rec.knots_u_.size))
            cells = [" / ".join(f"{np.mean([r[j] for r in v]):.3f}" if j < 3 else f"{np.mean([r[j] for r in v]):.0f}"
                                for j in range(len(v[0]))) for v in rows.values()]
            out(f"| {kind} | {n} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
