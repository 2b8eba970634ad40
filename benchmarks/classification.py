"""Classification benchmarks (issue 7). Part 1 (this file so far): MC-dropout prediction with the
T passes batched against a Python loop over T, as seconds and ratios measured in one run (so the
machine's speed cancels out).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/classification.py [--quick] [--out FILE]

Networks: `dubito.classification.build_network` at the spec's §5.2 widths (feature block, then
4 dropout sites on the inputs of FC 256-256-256-K), float32, randomly initialised (prediction
cost does not depend on training):

* "mlp": 64 inputs (the 8x8 digits), feature block FC 64 -> 256;
* "cnn": 1 x 28 x 28 images (Fashion-MNIST), 2 x [conv 3x3, BatchNorm, ReLU, max-pool 2].

For each network and dropout (Bernoulli, concrete, Multi-Drop), queries of ``n`` inputs (1: one
object at a time, as a robot asks; 16; 256: large batches) get T = 50 MC passes with
`dubito.classification.mc_logits`:

* loop: T forwards of the query (``batched=False``), the naive implementation;
* batched: as `MCDropoutClassifier` runs it, the query in chunks of max(1, 1024 // T) = 20
  inputs, each repeated T times at the first dropout layer (so the deterministic feature block runs
  once per chunk) and evaluated in one forward.

Seconds (per 1,000 inputs) are the median of ``--repeats`` timed runs after one warm-up; ratio =
loop / batched. Expected: the CNN gains most (its convolutions run once instead of T times); an
MLP whose every layer after the first is stochastic does the same arithmetic either way, so its
gain comes from fewer, larger calls and is large for small queries only.
One torch thread (``torch.set_num_threads(1)``; spec pitfall 16). Target (issue 7): batched at
least 3x faster than the loop at T = 50. This is a benchmark, not a timed test.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # for _common, also when imported by path
from _common import Printer, header, one_thread_env, progress, torch_one_thread

one_thread_env()

T = 50            # MC passes (spec §2.3 [R])
TARGET = 3.0      # batched at least 3x faster than the loop (issue 7)
QUERIES = {1: 32, 16: 256, 256: 1024}   # inputs per query -> inputs timed (fewer where the loop is slow)
NETWORKS = {"mlp": dict(n_features=64, image_shape=None), "cnn": dict(n_features=784, image_shape=(1, 28, 28))}
DROPOUTS = ("bernoulli", "concrete", "multidrop")


def time_mc(network: str, dropout: str, query: int, n: int, t: int, repeats: int, seed: int = 0) -> dict:
    """Median seconds of the loop and the batched passes over n inputs in queries of ``query``."""
    torch = torch_one_thread()
    from dubito.classification import build_network, mc_logits

    cfg = NETWORKS[network]
    torch.manual_seed(seed)
    net = build_network(network, cfg["n_features"], 10, dropout=dropout, p=0.1, image_shape=cfg["image_shape"]).eval()
    x = torch.rand(n, cfg["n_features"])
    if cfg["image_shape"] is not None:
        x = x.view(n, *cfg["image_shape"])
    gen = torch.Generator().manual_seed(seed)
    chunk = max(1, 1024 // t)

    def loop(q):
        return mc_logits(net, q, t, batched=False, generator=gen)

    def batched(q):
        return [mc_logits(net, q[a : a + chunk], t, generator=gen) for a in range(0, q.shape[0], chunk)]

    out = {}
    for name, fn in (("loop", loop), ("batched", batched)):
        times = []
        for rep in range(repeats + 1):
            start = time.perf_counter()
            for a in range(0, n, query):
                fn(x[a : a + query])
            if rep:  # the first run warms up
                times.append(time.perf_counter() - start)
        out[name] = statistics.median(times)
    return out


def time_estimator(n: int, t: int, repeats: int) -> float:
    """Seconds of MCDropoutClassifier.predict_distribution (concrete, MLP, trained 1 epoch on noise)."""
    import numpy as np

    from dubito.classification import MCDropoutClassifier

    rng = np.random.default_rng(0)
    X, y = rng.random((512, 64)), rng.integers(0, 10, 512)
    est = MCDropoutClassifier(dropout="concrete", n_samples=t, epochs=1, random_state=0).fit(X, y)
    Xp = rng.random((n, 64))
    est.predict_distribution(Xp[:64])
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        est.predict_distribution(Xp)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small N, T = 10 and 1 repeat (smoke test)")
    parser.add_argument("--out", default=None, help="also write the printed tables to this file")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per configuration (after one warm-up)")
    args = parser.parse_args(argv)
    t = 10 if args.quick else T
    repeats = 1 if args.quick else args.repeats
    queries = {1: 8, 16: 32, 256: 256} if args.quick else QUERIES
    out = Printer(args.out)
    out(header(torch_one_thread()))
    started = time.perf_counter()
    out(f"\n1. MC-dropout prediction, T = {t} passes: loop over T vs batched (float32, CPU; batched in chunks of "
        f"{max(1, 1024 // t)} inputs; seconds per 1,000 inputs, median of {repeats} timed runs after a warm-up)")
    out("| network | dropout | inputs per query | inputs timed | loop s / 1k | batched s / 1k | loop / batched |")
    out("|---|---|---:|---:|---:|---:|---:|")
    ratios = {}
    for network in NETWORKS:
        for dropout in DROPOUTS:
            for query, n in queries.items():
                n = n if network == "mlp" or query == 1 else max(query, n // 4)
                progress(f"{network} {dropout} query {query}")
                r = time_mc(network, dropout, query, n, t, repeats)
                ratio = r["loop"] / r["batched"]
                ratios[(network, dropout, query)] = ratio
                out(f"| {network} | {dropout} | {query} | {n} | {1e3 * r['loop'] / n:.3f} | "
                    f"{1e3 * r['batched'] / n:.3f} | {ratio:.2f} |")
    out(f"   target (batched >= {TARGET:.0f}x faster than the loop at T = {T}):"
        + ("" if t == T else " not this configuration (--quick);"))
    for network in NETWORKS:
        for query in queries:
            rs = [ratios[(network, d, query)] for d in DROPOUTS]
            ok = "met" if min(rs) >= TARGET else "NOT met"
            out(f"   - {network}, queries of {query}: {min(rs):.2f}x - {max(rs):.2f}x" + (f" ({ok})" if t == T else ""))
    progress("estimator")
    n_est = 256 if args.quick else 1024
    sec = time_estimator(n_est, t, repeats)
    out(f"\n2. MCDropoutClassifier.predict_distribution (concrete, MLP, T = {t}), N = {n_est}: {sec:.3f} s "
        f"({1e3 * sec / n_est:.3f} ms per input, {1e6 * sec / (n_est * t):.2f} us per input and pass)")
    out(f"\ntotal benchmark time: {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
