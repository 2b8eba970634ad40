"""Co-occurrence CRF inference time per scene (issue 7 performance: "CRF inference per scene"):
exact enumeration vs top-k pruned enumeration vs loopy belief propagation, scene sizes n = 3..12.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/classification_crf.py [--quick] [--out FILE]

Setting: `dubito.classification.context.CooccurrenceCRF` at its defaults (w = 0.5 with the
(n-1) normalisation, log-conditional Φ, damping 0.5, tol 1e-6, <= 100 sweeps, max_exact 2·10^6,
top_k 5; spec §2.10), Φ from 2,000 synthetic label-only scenes of 5 scene types (each ~0.9 of its
mass on 3 typical classes, spec §5.1.3), unaries Dirichlet(0.5) per object (seeded). One thread
(OMP/MKL/OpenBLAS = 1; spec pitfall 16). K = 3 (every n enumerable: 3^12 = 531,441) and K = 10
(Fashion-MNIST / digits: exact up to n = 6, pruned to 5 labels per node up to n = 9).

Prints one table (`crf_per_scene`): per (K, n) the median seconds per scene of each method over
repeated random scenes (at least 3, until ~0.2 s per cell), loopy BP's median sweeps and share
of converged scenes, and the largest |exact - loopy| and |exact - pruned| marginal differences
over the same scenes (accuracy checks where exact is possible). "-" = refused (more than max_exact configurations). This is a
benchmark, not a timed test; there is no target in the issue.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # for _common, also when imported by path
from _common import Printer, header, one_thread_env, progress

one_thread_env()
import numpy as np


def scene_statistics(k: int, seed: int = 0, n_scenes: int = 2000, n_types: int = 5):
    """Co-occurrence statistics from synthetic typed scenes (module docstring)."""
    from dubito.classification.context import CooccurrenceStatistics

    rng = np.random.default_rng(seed)
    typical = [rng.choice(k, size=min(3, k), replace=False) for _ in range(n_types)]
    corpus = []
    for _ in range(n_scenes):
        t = typical[rng.integers(n_types)]
        n = int(rng.integers(3, 7))
        corpus.append(np.where(rng.random(n) < 0.9, rng.choice(t, size=n), rng.integers(0, k, size=n)))
    return CooccurrenceStatistics.fit(corpus, k)


def _time_cell(crf, k: int, n: int, rng, budget: float, min_reps: int, max_reps: int):
    """Median seconds per scene of crf.refine on fresh random scenes; also the outputs."""
    times, outs, infos = [], [], []
    start = time.perf_counter()
    while len(times) < min_reps or (time.perf_counter() - start < budget and len(times) < max_reps):
        # the methods see the same scene sequence, but may stop after different counts
        p = rng.dirichlet(np.full(k, 0.5), size=n)
        t0 = time.perf_counter()
        outs.append(crf.refine(p))
        times.append(time.perf_counter() - t0)
        infos.append(crf.inference_info_[0])
    return statistics.median(times), outs, infos


def crf_per_scene(out, ks=(3, 10), sizes=range(3, 13), budget=0.2, min_reps=3, max_reps=200, seed=0) -> list[dict]:
    """Seconds per scene of exact / pruned / loopy inference for each K in ``ks`` and n in ``sizes``
    (the table of the module docstring); returns its rows."""
    from dubito.classification.context import DEFAULT_MAX_EXACT, DEFAULT_TOP_K, CooccurrenceCRF

    out(f"\nCRF inference, seconds per scene (median; w = 0.5, log-conditional Φ, max_exact = {DEFAULT_MAX_EXACT:.0e}, "
        f"top_k = {DEFAULT_TOP_K}, loopy: damping 0.5, tol 1e-6, <= 100 sweeps)")
    out("| K | n | K^n | exact s | pruned s | loopy s | exact / loopy | loopy sweeps | loopy converged | "
        "max abs(exact - loopy) | max abs(exact - pruned) |")
    out("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    rows = []
    for k in ks:
        stats = scene_statistics(k, seed)
        for n in sizes:
            progress(f"K={k} n={n}")
            row = {"k": k, "n": n}
            res = {}
            for method in ("exact", "pruned", "loopy"):
                crf = CooccurrenceCRF(stats, inference=method)
                if method == "pruned" and k <= DEFAULT_TOP_K:
                    continue  # pruning keeps every label: the same as exact
                rng = np.random.default_rng(1000 * k + n)  # the same scenes for every method
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        res[method] = _time_cell(crf, k, n, rng, budget, min_reps, max_reps)
                except ValueError:  # above max_exact
                    res[method] = None
            row.update({m: (r[0] if r else None) for m, r in res.items()})
            lo = res["loopy"]
            row["sweeps"] = statistics.median(i["iterations"] for i in lo[2])
            row["converged"] = float(np.mean([i["converged"] for i in lo[2]]))
            ex, pr = res.get("exact"), res.get("pruned")
            if ex:  # the same seeded scenes, in the same order, for every method
                row["err"] = max(float(np.abs(a - b).max()) for a, b in zip(ex[1], lo[1]))
                if pr:
                    row["err_pruned"] = max(float(np.abs(a - b).max()) for a, b in zip(ex[1], pr[1]))
            rows.append(row)

            def f(v):
                return "-" if v is None else f"{v:.2e}"

            ratio = f"{row['exact'] / row['loopy']:.2f}" if row.get("exact") else "-"
            err = f"{row['err']:.1e}" if "err" in row else "-"
            err_pr = f"{row['err_pruned']:.1e}" if "err_pruned" in row else "-"
            out(f"| {k} | {n} | {k ** n:.3g} | {f(row.get('exact'))} | {f(row.get('pruned'))} | {f(row['loopy'])} | "
                f"{ratio} | {row['sweeps']:g} | {row['converged']:.0%} | {err} | {err_pr} |")
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="K = 3, n = 3..5, 3 scenes per cell (smoke test)")
    parser.add_argument("--out", default=None, help="also write the printed table to this file")
    args = parser.parse_args(argv)
    out = Printer(args.out)
    out(header())
    started = time.perf_counter()
    if args.quick:
        crf_per_scene(out, ks=(3,), sizes=range(3, 6), budget=0.0, min_reps=3, max_reps=3)
    else:
        crf_per_scene(out)
    out(f"\ntotal benchmark time: {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
