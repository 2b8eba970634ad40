"""Scoring cost (issue 21): the CRPS of large Gaussian mixtures against their log density, and
the quadrature form of `dubito.metrics.crps_mixture` against its O(M^2) closed form, measured in
one run so the machine's speed cancels out of the ratios.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/scoring.py [--quick] [--out FILE]

Mixtures of N = 200 inputs (``--quick``: 50): MC dropout's shape (1,000 components, spread 0.3,
one sd 1), a kernel density of 4,000 samples (sd 0.2, the B-DeepNoise predictive's size) and
4,000 components whose sds spread over a factor 2 (0.3-0.6, as B-DeepNoise's states' noise
levels differ), where the CDF's box expansion needs variance terms.
Printed: seconds of ``log_prob``, of ``crps`` (method "auto": the quadrature here) and of the
closed form ("pairs", timed on the first 20 inputs and scaled to N), their ratios, and the
largest relative difference of the two CRPS forms on those 20 inputs. Medians of ``--repeats``
runs. Issue 21's target: CRPS within 30x of log_prob at N = 200, M = 4,000.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # for _common, also when imported by path
from _common import Printer, header, median_seconds, one_thread_env  # noqa: E402

one_thread_env()


def main(argv=None) -> None:
    import numpy as np

    from dubito.metrics import crps_mixture
    from dubito.predictive import GaussianMixture

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="N = 50, one repeat")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=None, help="also write the table to this file")
    args = ap.parse_args(argv)
    n, repeats = (50, 1) if args.quick else (200, args.repeats)
    out = Printer(args.out)
    out(header())
    out(f"mixture CRPS, N = {n}; seconds (median of {repeats})")
    out("| mixture | M | log_prob | crps (auto) | pairs (scaled) | crps / log_prob | pairs / auto | max rel. diff |")
    out("|---|---|---|---|---|---|---|---|")
    rng = np.random.default_rng(0)
    for name, m, spread, sd in (("MC dropout", 1000, 0.3, (1.0, 1.0)), ("kernel density", 4000, 1.0, (0.2, 0.2)),
                                ("sds 0.3-0.6", 4000, 1.0, (0.3, 0.6))):
        mu = rng.normal(0.0, spread, (n, m))
        var = rng.uniform(*sd, (n, m)) ** 2
        w = np.full((n, m), 1.0 / m)
        y = rng.normal(0.0, spread + sd[1], n)
        pred = GaussianMixture(w, mu, var)
        t_lp = median_seconds(lambda: pred.log_prob(y), repeats)
        t_auto = median_seconds(lambda: crps_mixture(w, mu, var, y), repeats)
        k = 20
        t_pairs = median_seconds(lambda: crps_mixture(w[:k], mu[:k], var[:k], y[:k], method="pairs"), 1) * n / k
        exact = crps_mixture(w[:k], mu[:k], var[:k], y[:k], method="pairs")
        diff = np.max(np.abs(crps_mixture(w[:k], mu[:k], var[:k], y[:k]) - exact) / exact)
        out(f"| {name} | {m} | {t_lp:.3f} | {t_auto:.2f} | {t_pairs:.1f} | {t_auto / t_lp:.0f} | "
            f"{t_pairs / t_auto:.0f} | {diff:.1e} |")


if __name__ == "__main__":
    main()
