"""The B-DeepNoise initialiser's Adam step against what one torch matrix product reaches on the
same thread (issue 21: "the achieved floating-point rate of an init step at least 40 % of what one
torch matrix product of the same total size reaches").

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/deepnoise_flops.py [--rows 1000] [--draws 100] [--repeats 5]

The step: `DeepNoiseSGDRegressor`'s defaults (4 x 50 hard tanh, S = 100 noise draws per row, one
input column as in the paper's synthetic sets, batch 1000), `dubito.regression.deepnoise_sgd.
training_step` on a fixed batch, float32, one thread. Its matrix arithmetic: layer 0's map is shared
by the draws (2 N p K flops), the other layers act on S N rows (2 S N K_l K_{l+1} each, the output
layer K_L = 1); the backward pass is counted as twice the forward (the gradients with respect to
the inputs and to the weights), layer 0's input gradient excepted. The reference: one
``torch.mm`` of (M, 50) x (50, 50) with M chosen so that it does the same number of flops. Printed:
seconds, GFLOP/s of each, their ratio, the split of the step's time by profiler category (matrix
products, random draws, the rest), and the wall time a 70,000-step initialisation would take at
this rate ([C]'s budget, about 10,000 epochs at N = 4000 with its batch of 500; spec §2.3).
The step is then timed again after `dubito.heap.retain_freed_memory` (what the ``dubito``
command and its workers set up): glibc otherwise gives the step's freed temporaries back to the OS
and faults them in again, zeroed, on the next step.

The Gibbs sweep (``--sweep-rows``, default 4000; 0 skips it; timed after the init, so with freed
memory retained where that took effect): one `gibbs_sweep` of the sampler
(float64 as it runs, every latent row refreshed: the estimator's default) on the same widths,
from a random state after `init_latents`. Its matrix products per layer (K_in -> K_out, N rows):
the pre-activation mean and the residual (2 N K_in K_out each), the u-update's three (N, K) x
(K, K) products, and the weight update's Gram matrices (2 N K_in (K_in + K_out)); the reference
is a float64 ``torch.mm`` of the same flops. The sweep is dominated by the element-wise draws of
the v-conditional (erfc and logs of every unit on each activation piece), so its rate is also
compared with a bare ``torch.special.erfc`` over the latent units times the pieces, and the special
functions and random draws that no sweep avoids (`UNAVOIDABLE`) are timed alone: the ratio the sweep
could reach if everything else were free and its matrix products ran at the reference's rate is
printed as a ceiling.
A benchmark, not a timed test.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import Printer, header, median_seconds, one_thread_env, torch_one_thread  # noqa: E402

one_thread_env()


def step_flops(widths: tuple[int, ...], n: int, s: int) -> int:
    """Flops of one forward + backward pass of the DeepNoise net's matrix products (docstring)."""
    forward = 2 * n * widths[0] * widths[1]  # layer 0: shared by the draws
    backward = 2 * n * widths[0] * widths[1]  # its weight gradient (its input needs none)
    for k_in, k_out in zip(widths[1:-1], widths[2:]):
        forward += 2 * s * n * k_in * k_out
        backward += 2 * 2 * s * n * k_in * k_out
    return forward + backward


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1000, help="batch rows (the init's batch: 1000)")
    ap.add_argument("--draws", type=int, default=100, help="noise draws per row (the init's S: 100)")
    ap.add_argument("--features", type=int, default=1, help="input columns (the synthetic sets: 1)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--sweep-rows", type=int, default=4000, help="rows of the Gibbs sweep (0: skip it)")
    ap.add_argument("--out", default=None, help="also write the lines to this file")
    args = ap.parse_args(argv)
    torch = torch_one_thread()
    from torch.profiler import ProfilerActivity, profile

    from dubito.heap import retain_freed_memory
    from dubito.regression.deepnoise_sgd import DeepNoiseNet, training_step

    out = Printer(args.out)
    out(header(torch, "cpu"))
    widths = (args.features, 50, 50, 50, 50, 1)
    gen = torch.Generator().manual_seed(0)
    net = DeepNoiseNet(widths, "hardtanh", torch.Generator().manual_seed(1), dtype=torch.float32)
    X = torch.randn(args.rows, args.features, generator=gen)
    y = torch.randn(args.rows, generator=gen)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    run_step = training_step(net, opt, X, y, args.draws, gen)
    idx = torch.arange(args.rows)
    step_s = median_seconds(lambda: run_step(idx), args.repeats, warmup=True)
    # the same step once freed heap stays in the process, as the `dubito` command sets it up
    retained = retain_freed_memory()
    retained_s = median_seconds(lambda: run_step(idx), args.repeats, warmup=True) if retained else float("nan")

    flops = step_flops(widths, args.rows, args.draws)
    m = max(1, round(flops / (2 * 50 * 50)))
    a, b = torch.randn(m, 50, generator=gen), torch.randn(50, 50, generator=gen)
    mm_s = median_seconds(lambda: torch.mm(a, b), args.repeats, warmup=True)
    mm_flops = 2 * m * 50 * 50

    with profile(activities=[ProfilerActivity.CPU]) as prof:  # (memory retained from here on)
        run_step(idx)
    total = sum(e.self_cpu_time_total for e in prof.key_averages())
    by = {"matrix products": 0.0, "random draws": 0.0}
    for e in prof.key_averages():
        if any(k in e.key for k in ("mm", "matmul", "addmm", "linear")):
            by["matrix products"] += e.self_cpu_time_total
        elif any(k in e.key for k in ("normal", "randn", "rand")):
            by["random draws"] += e.self_cpu_time_total
    by["the rest (elementwise, Adam, autograd)"] = total - sum(by.values())

    rate, ref = flops / step_s / 1e9, mm_flops / mm_s / 1e9
    out(f"init step: {args.rows} rows x {args.draws} draws, widths {widths}: {step_s * 1e3:.1f} ms, "
        f"{flops / 1e9:.2f} GFLOP of matrix products -> {rate:.1f} GFLOP/s")
    out(f"one torch.mm ({m} x 50) @ (50 x 50), the same flops: {mm_s * 1e3:.1f} ms -> {ref:.1f} GFLOP/s")
    out(f"ratio (step / mm): {rate / ref:.2f} (issue 21's target: >= 0.40)")
    out(f"with freed memory retained (dubito.heap, as the dubito command runs): {retained_s * 1e3:.1f} ms, "
        f"ratio {flops / retained_s / 1e9 / ref:.2f}")
    out("step time by profiler category: " + ", ".join(f"{k} {100 * v / total:.0f} %" for k, v in by.items()))
    out(f"70,000 steps at this rate: {70_000 * step_s / 3600:.1f} h on one thread "
        f"({70_000 * retained_s / 3600:.1f} h with freed memory retained)")
    if args.sweep_rows > 0:
        sweep(torch, out, widths, args.sweep_rows, args.repeats)


def sweep_flops(widths: tuple[int, ...], n: int) -> int:
    """Matrix-product flops of one Gibbs sweep (the module docstring)."""
    flops = 0
    layers = list(zip(widths[:-1], widths[1:]))
    for l, (k_in, k_out) in enumerate(layers):
        flops += 2 * 2 * n * k_in * k_out  # mean of v_l (or of y) and the residual
        flops += 2 * n * k_in * (k_in + k_out)  # U'U and U'V of the weight update
        if l < len(layers) - 1:
            k_next = layers[l + 1][1]
            flops += 2 * n * k_out * k_next + 2 * 2 * n * k_out * k_out  # the u-update
    return flops


def sweep(torch, out, widths, n, repeats) -> None:
    from torch.profiler import ProfilerActivity, profile

    from dubito.regression.deepnoise_gibbs import gibbs_sweep, init_latents, random_init
    from dubito.regression.deepnoise_model import DeepNoisePriors

    gen = torch.Generator().manual_seed(0)
    X = torch.randn(n, widths[0], generator=gen, dtype=torch.float64)
    y = torch.sin(3 * X[:, 0]) + 0.1 * torch.randn(n, generator=gen, dtype=torch.float64)
    params = random_init(widths, gen)
    latents = init_latents(params, X, y, "hardtanh", gen)
    priors = DeepNoisePriors()
    run = lambda: gibbs_sweep(params, latents, X, y, priors, "hardtanh", gen)  # noqa: E731
    sweep_s = median_seconds(run, repeats, warmup=True)
    flops = sweep_flops(widths, n)
    m = max(1, round(flops / (2 * 50 * 50)))
    a = torch.randn(m, 50, generator=gen, dtype=torch.float64)
    b = torch.randn(50, 50, generator=gen, dtype=torch.float64)
    mm_s = median_seconds(lambda: torch.mm(a, b), repeats, warmup=True)
    units = n * sum(widths[1:-1])
    pieces = 3  # hard tanh's linear pieces
    e = torch.randn(units * pieces, generator=gen, dtype=torch.float64)
    erfc_s = median_seconds(lambda: torch.special.erfc(e), repeats, warmup=True)
    floor_s = unavoidable_seconds(torch, widths, n, gen, repeats)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        run()
    total = sum(ev.self_cpu_time_total for ev in prof.key_averages())
    by = {"matrix products": 0.0, "special functions (erfc, log, exp, ndtri)": 0.0, "random draws": 0.0}
    for ev in prof.key_averages():
        if any(k in ev.key for k in ("mm", "matmul", "linear", "cholesky", "triangular")):
            by["matrix products"] += ev.self_cpu_time_total
        elif any(k in ev.key for k in ("erf", "log", "exp", "ndtri", "sqrt")):
            by["special functions (erfc, log, exp, ndtri)"] += ev.self_cpu_time_total
        elif any(k in ev.key for k in ("normal", "randn", "rand", "gamma")):
            by["random draws"] += ev.self_cpu_time_total
    by["the rest (element-wise arithmetic, indexing)"] = total - sum(by.values())
    rate, ref = flops / sweep_s / 1e9, 2 * m * 50 * 50 / mm_s / 1e9
    out(f"Gibbs sweep: {n} rows, widths {widths}, float64: {sweep_s * 1e3:.1f} ms, "
        f"{flops / 1e9:.3f} GFLOP of matrix products -> {rate:.2f} GFLOP/s")
    out(f"one float64 torch.mm ({m} x 50) @ (50 x 50), the same flops: {mm_s * 1e3:.1f} ms -> {ref:.1f} GFLOP/s; "
        f"ratio (sweep / mm): {rate / ref:.2f}")
    out(f"one torch.special.erfc over the {units} latent units x {pieces} pieces: {erfc_s * 1e3:.1f} ms "
        f"= {erfc_s / sweep_s:.2f} of the sweep")
    out("sweep time by profiler category: " + ", ".join(f"{k} {100 * v / total:.0f} %" for k, v in by.items()))
    out(f"special functions and draws no sweep avoids ({UNAVOIDABLE} per latent unit of each hidden layer): "
        f"{floor_s * 1e3:.1f} ms; with all else free and the matrix products at the mm's rate the ratio is at "
        f"most mm / (those + mm) = {mm_s / (floor_s + mm_s):.2f}")


#: What the v- and u-conditionals must evaluate per latent unit of a hidden layer, hard tanh's three
#: pieces (`dubito.regression.deepnoise_gibbs`): each piece's mass (the two outer pieces one erfc each,
#: the inner one two) and the log of each, the pieces' weights (three exp), the piece and the point
#: within it (two uniforms, one ndtri), and the u-update's normal draw.
UNAVOIDABLE = "4 erfc, 3 log, 3 exp, 1 ndtri, 2 uniform and 1 normal draws"


def unavoidable_seconds(torch, widths, n, gen, repeats) -> float:
    """Seconds of `UNAVOIDABLE` over the sweep's (n, K) latent units, float64, one layer at a time."""
    total = 0.0
    for k in widths[1:-1]:
        x = torch.rand(n, k, generator=gen, dtype=torch.float64) * 0.4 + 1e-3  # probabilities below 1/2
        e = torch.randn(n, k, generator=gen, dtype=torch.float64)

        def run():
            for _ in range(4):
                torch.special.erfc(e)
            for _ in range(3):
                torch.log(x)
                torch.exp(e)
            torch.special.ndtri(x)
            torch.rand(n, k, generator=gen, dtype=torch.float64)
            torch.rand(n, k, generator=gen, dtype=torch.float64)
            torch.randn(n, k, generator=gen, dtype=torch.float64)

        total += median_seconds(run, repeats, warmup=True)
    return total


if __name__ == "__main__":
    main()
