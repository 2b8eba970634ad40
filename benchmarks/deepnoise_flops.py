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
    ap.add_argument("--out", default=None, help="also write the lines to this file")
    args = ap.parse_args(argv)
    torch = torch_one_thread()
    from torch.profiler import ProfilerActivity, profile

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

    flops = step_flops(widths, args.rows, args.draws)
    m = max(1, round(flops / (2 * 50 * 50)))
    a, b = torch.randn(m, 50, generator=gen), torch.randn(50, 50, generator=gen)
    mm_s = median_seconds(lambda: torch.mm(a, b), args.repeats, warmup=True)
    mm_flops = 2 * m * 50 * 50

    with profile(activities=[ProfilerActivity.CPU]) as prof:
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
    out("step time by profiler category: " + ", ".join(f"{k} {100 * v / total:.0f} %" for k, v in by.items()))
    out(f"70,000 steps at this rate: {70_000 * step_s / 3600:.1f} h on one thread")


if __name__ == "__main__":
    main()
