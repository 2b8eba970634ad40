"""B-DeepNoise Gibbs sampler performance: seconds per full sweep, its scaling with N, width and
depth, and chains in parallel processes against a serial loop, as numbers and ratios measured
in one run (so the machine's speed cancels out).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/deepnoise.py [--quick] [--out FILE]

Data: X ~ N(0, I_P) with P = 8 inputs (the spec's benchmark, §2.5 [V]) and y drawn from a
random B-DeepNoise net of the benchmarked architecture (`random_init`, one `forward_sample`),
standardised; the chain starts from `random_init` with `init_latents`. One torch thread
(``torch.set_num_threads(1)``; the spec measured 65x slower 1000 x 50 matmuls with two BLAS
threads on 2 cores, pitfall 8).

Prints:

1. Seconds per full sweep (`gibbs_sweep`, all latent rows, hyper-parameters updated) for
   4 x 50 hard tanh at N = 1k, 4k and 41,157 (protein's training size; a couple of sweeps
   only): the median of the timed sweeps after warm-up ones, per 1,000 rows, the ratio to the
   issue's target of 0.1 s at N = 1k, and t(N) / t(1k) against N / 1k (linearity), beside the
   spec's NumPy pilot (§2.5 [V], another implementation on a 2-core machine).
2. Scaling with width K = 25, 50, 100 (L = 4) and depth L = 2, 4, 8 (K = 50) at N = 1k.
3. Where a sweep's time goes at N = 1k (cProfile, cumulative): the v-step (mixture of truncated
   normals), u-step, weight rows, variances.
4. Chains: n chains of S sweeps at N = 1k run serially in this process against n spawned
   processes with one thread each (the estimator's ``n_jobs``); wall times, speed-up and
   efficiency (speed-up / min(n, CPUs)). Process start-up (importing torch) is counted and
   also shown alone.

This is a benchmark, not a timed test. Target (issue 5): at most 0.1 s per sweep at N = 1k and
linear in N.
"""

from __future__ import annotations

import argparse
import cProfile
import multiprocessing as mp
import os
import pstats
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # for _common, also when imported by path
from _common import Printer, header, one_thread_env, progress, torch_one_thread

one_thread_env()

P = 8                    # inputs (spec §2.5)
TARGET = 0.1             # s per sweep at N = 1000, 4 x 50 (issue 5)
N_PROTEIN = 41_157       # protein's training rows per split (spec §4.2)
ACT = "hardtanh"
#: the spec's NumPy pilot (§2.5 [V]): (N, K, L) -> s/sweep
PILOT = {(1000, 50, 4): 0.23, (4000, 50, 4): 0.82, (10_000, 50, 4): 2.1, (N_PROTEIN, 50, 4): 8.3,
         (1000, 100, 4): 0.60, (1000, 50, 8): 0.55}


def make_chain(n: int, width: int, depth: int, seed: int = 0):
    """(params, latents, X, y, priors) of a fresh chain on synthetic data (module docstring)."""
    torch = torch_one_thread()
    from dubito.regression.deepnoise_gibbs import init_latents, random_init
    from dubito.regression.deepnoise_model import DeepNoisePriors, forward_sample

    gen = torch.Generator().manual_seed(seed)
    widths = (P, *([width] * depth), 1)
    X = torch.randn((n, P), generator=gen, dtype=torch.float64)
    truth = random_init(widths, gen)
    y = forward_sample(truth, X, ACT, 1, gen)[0]
    y = (y - y.mean()) / y.std()
    params = random_init(widths, gen)
    latents = init_latents(params, X, y, ACT, gen)
    return params, latents, X, y, DeepNoisePriors(), gen


def time_sweeps(n: int, width: int, depth: int, sweeps: int, warmup: int, seed: int = 0) -> dict:
    """Median seconds per sweep of ``sweeps`` timed sweeps after ``warmup`` untimed ones."""
    from dubito.regression.deepnoise_gibbs import gibbs_sweep

    params, latents, X, y, priors, gen = make_chain(n, width, depth, seed)
    for _ in range(warmup):
        gibbs_sweep(params, latents, X, y, priors, ACT, gen)
    times = []
    for _ in range(sweeps):
        start = time.perf_counter()
        gibbs_sweep(params, latents, X, y, priors, ACT, gen)
        times.append(time.perf_counter() - start)
    return {"n": n, "k": width, "l": depth, "sweeps": sweeps, "median": statistics.median(times),
            "min": min(times), "max": max(times)}


BREAKDOWN = (  # (label, function name in deepnoise_gibbs)
    ("v-step (mixture of truncated normals), all layers", "_update_v"),
    ("u-step (Gaussian, one Cholesky per layer), all layers", "_update_u"),
    ("weight rows (Gram + batched Cholesky), all layers", "sample_weights"),
    ("noise variances tau2, sigma2 (inverse gamma)", "sample_noise_variances"),
    ("prior variances rho2, xi2 (inverse gamma)", "sample_prior_variances"),
)


def breakdown(n: int, width: int, depth: int, sweeps: int) -> tuple[float, dict[str, float]]:
    """cProfile cumulative seconds per sweep of the parts of `gibbs_sweep`."""
    from dubito.regression.deepnoise_gibbs import gibbs_sweep

    params, latents, X, y, priors, gen = make_chain(n, width, depth, 1)
    gibbs_sweep(params, latents, X, y, priors, ACT, gen)
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(sweeps):
        gibbs_sweep(params, latents, X, y, priors, ACT, gen)
    prof.disable()
    stats = pstats.Stats(prof).stats
    total = sum(v[3] for (f, _, name), v in stats.items() if name == "gibbs_sweep") / sweeps
    parts = {}
    for label, name in BREAKDOWN:
        parts[label] = sum(v[3] for (f, _, fn), v in stats.items()
                           if fn == name and f.endswith("deepnoise_gibbs.py")) / sweeps
    return total, parts


def run_chain(args: tuple) -> float:
    """One chain: build it, run ``sweeps`` sweeps; the seconds of the sweeps (worker entry point)."""
    n, width, depth, sweeps, seed = args
    from dubito.regression.deepnoise_gibbs import gibbs_sweep

    params, latents, X, y, priors, gen = make_chain(n, width, depth, seed)
    start = time.perf_counter()
    for _ in range(sweeps):
        gibbs_sweep(params, latents, X, y, priors, ACT, gen)
    return time.perf_counter() - start


def _noop(_):
    torch_one_thread()
    import dubito.regression.deepnoise_gibbs  # noqa: F401  (the import the workers pay for)
    time.sleep(0.2)  # hold this worker so that every worker gets (and starts on) one task
    return 0.0


def chains(n_chains: int, n: int, width: int, depth: int, sweeps: int) -> dict:
    """Serial loop over chains in this process vs a spawned pool of n_chains processes."""
    from concurrent.futures import ProcessPoolExecutor

    jobs = [(n, width, depth, sweeps, seed) for seed in range(n_chains)]
    start = time.perf_counter()
    serial_sweeps = [run_chain(j) for j in jobs]
    serial = time.perf_counter() - start
    ctx = mp.get_context("spawn")
    start = time.perf_counter()
    with ProcessPoolExecutor(max_workers=n_chains, mp_context=ctx) as pool:
        list(pool.map(_noop, range(n_chains)))  # start the workers (they import torch and dubito)
        startup = time.perf_counter() - start
        start = time.perf_counter()
        par_sweeps = list(pool.map(run_chain, jobs))
        parallel = time.perf_counter() - start
    return {"n_chains": n_chains, "serial": serial, "parallel": parallel, "startup": startup,
            "serial_sweeps": sum(serial_sweeps), "parallel_sweeps_max": max(par_sweeps)}


def _pilot(n, k, l) -> str:
    v = PILOT.get((n, k, l))
    return f"{v:.2f}" if v is not None else "-"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="small sizes and 2 timed sweeps (smoke test: the tables, not the numbers)")
    parser.add_argument("--out", default=None, help="also write the printed tables to this file")
    parser.add_argument("--sizes", type=int, nargs="*", default=None, help="N of table 1 (default 1000 4000 41157)")
    parser.add_argument("--sweeps", type=int, default=10, help="timed sweeps per configuration below 10k rows")
    parser.add_argument("--large-sweeps", type=int, default=2, help="timed sweeps at N >= 10k (after 1 warm-up)")
    parser.add_argument("--chains", type=int, default=2, help="chains of the parallel comparison")
    parser.add_argument("--chain-sweeps", type=int, default=50, help="sweeps per chain in the parallel comparison")
    args = parser.parse_args(argv)
    if args.quick:
        sizes, base_n = args.sizes or [250, 1000], 250
        widths, depths = (10, 20), (1, 2)
        width, depth = 20, 2
        sweeps, warmup, large_sweeps, chain_sweeps, prof_sweeps = 2, 1, 1, 3, 2
    else:
        sizes, base_n = args.sizes or [1000, 4000, N_PROTEIN], 1000
        widths, depths = (25, 50, 100), (2, 4, 8)
        width, depth = 50, 4
        sweeps, warmup, large_sweeps, chain_sweeps, prof_sweeps = args.sweeps, 2, args.large_sweeps, args.chain_sweeps, 10

    out = Printer(args.out)
    out(header(torch_one_thread()))
    out(f"data: X ~ N(0, I_{P}), y from a random {ACT} B-DeepNoise net (standardised); chain from random_init; "
        "float64, CPU")
    started = time.perf_counter()

    def one(n, k, l, note=""):
        many = n < 10_000
        progress(f"N={n} K={k} L={l}")
        return time_sweeps(n, k, l, sweeps if many else large_sweeps, warmup if many else 1)

    out(f"\n1. seconds per full sweep, {depth} x {width} {ACT}, P = {P} (median of the timed sweeps after warm-up)")
    out("| N | timed sweeps | s / sweep (median) | min - max | s per 1,000 rows | / target 0.1 s at N = 1k | "
        "t(N) / t(base) | N / base | spec pilot [V] s/sweep |")
    out("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    rows = [one(n, width, depth) for n in sizes]
    base = next((r for r in rows if r["n"] == base_n), rows[0])
    for r in rows:
        out(f"| {r['n']} | {r['sweeps']} | {r['median']:.4f} | {r['min']:.4f} - {r['max']:.4f} | "
            f"{1000 * r['median'] / r['n']:.4f} | {r['median'] / TARGET:.2f} | {r['median'] / base['median']:.2f} | "
            f"{r['n'] / base['n']:.2f} | {_pilot(r['n'], width, depth)} |")
    at_target = (width, depth, base["n"]) == (50, 4, 1000)
    verdict = ("met" if base["median"] <= TARGET else "NOT met") if at_target else "not this configuration (--quick)"
    out(f"   target (<= 0.1 s per sweep at N = 1k, 4 x 50): {verdict} "
        f"({base['median']:.3f} s at N = {base['n']}); linearity: "
        + "; ".join(f"t({r['n']}) / t({base['n']}) = {r['median'] / base['median']:.2f} vs {r['n'] / base['n']:.2f}"
                    for r in rows if r is not base))

    out(f"\n2. scaling with width and depth at N = {base_n} (median s / sweep)")
    out("| K (width) | L (depth) | s / sweep | / (K=%d, L=%d) | spec pilot [V] |" % (width, depth))
    out("|---:|---:|---:|---:|---:|")
    ref = next((r for r in rows if r["n"] == base_n), None) or one(base_n, width, depth)
    configs = [(k, depth) for k in widths] + [(width, l) for l in depths if l != depth]
    for k, l in configs:
        r = ref if (k, l) == (width, depth) else one(base_n, k, l)
        out(f"| {k} | {l} | {r['median']:.4f} | {r['median'] / ref['median']:.2f} | {_pilot(base_n, k, l)} |")

    progress("breakdown")
    total, parts = breakdown(base_n, width, depth, prof_sweeps)
    out(f"\n3. where a sweep goes, N = {base_n}, {depth} x {width} (cProfile cumulative, per sweep; the profiler "
        "adds overhead)")
    out("| part | s / sweep | share |")
    out("|---|---:|---:|")
    for label, t in parts.items():
        out(f"| {label} | {t:.4f} | {t / total:.0%} |")
    rest = total - sum(parts.values())
    out(f"| rest (residuals, bookkeeping) | {rest:.4f} | {rest / total:.0%} |")
    out(f"| gibbs_sweep, total | {total:.4f} | 100% |")

    progress("chains")
    c = chains(args.chains, base_n, width, depth, chain_sweeps)
    cpus = os.cpu_count() or 1
    speedup = c["serial"] / c["parallel"]
    out(f"\n4. {c['n_chains']} chains x {chain_sweeps} sweeps at N = {base_n}, {depth} x {width}: serial loop vs "
        f"{c['n_chains']} spawned processes (one thread each)")
    out("| run | wall s | sweeps s (sum or slowest chain) | speed-up vs serial | efficiency (speed-up / min(chains, CPUs)) |")
    out("|---|---:|---:|---:|---:|")
    out(f"| serial, one process | {c['serial']:.2f} | {c['serial_sweeps']:.2f} | 1.00 | - |")
    out(f"| parallel, {c['n_chains']} processes, started | {c['parallel']:.2f} | {c['parallel_sweeps_max']:.2f} | "
        f"{speedup:.2f} | {speedup / min(c['n_chains'], cpus):.2f} |")
    with_start = c["serial"] / (c["parallel"] + c["startup"])
    out(f"| parallel, including the start-up of the workers | {c['parallel'] + c['startup']:.2f} | - | "
        f"{with_start:.2f} | {with_start / min(c['n_chains'], cpus):.2f} |")
    out(f"| start-up alone ({c['n_chains']} spawned workers importing torch and dubito; once per fit) | "
        f"{c['startup']:.2f} | - | - | - |")
    out(f"\ntotal benchmark time: {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
