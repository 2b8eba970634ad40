"""Per-step overhead of dubito's training loops on one CPU thread (issue 21): an epoch of an
estimator at its defaults against a bare torch loop doing the same arithmetic, measured in one run.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/step_overhead.py [--quick] [--out FILE]

Data: kin8nm-sized synthetic rows (7,373 x 8). ``MCDropoutRegressor`` at its defaults (MLP
8-100-50-10-1, ReLU, dropout 0.05 after each hidden layer, MSE, Adam lr 2.5e-4 with weight decay
2e-6, batch 32) against the same network as ``nn.Sequential`` with ``nn.Dropout`` and the same
optimiser over a fresh permutation per epoch; ``DeterministicRegressor`` (the same net without
dropout) likewise; ``DeepEnsembleRegressor`` (5 members of 8-128-64-32 with mean and variance
heads, Gaussian NLL, Adam lr 1e-3, batch 64, members batched with ``baddbmm``) against the same
batched arithmetic written by hand. Both sides train without a held-out share; seconds per epoch
are the difference of a 2E- and an E-epoch fit over E (E = ``--epochs``), so what is done once
(standardisation, the noise estimate or Bayesian correction after training) cancels. Prints them
and the ratio; issue 21's target: within 1.3x. Medians of ``--repeats``. A benchmark, not a
timed test.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # for _common, also when imported by path
from _common import Printer, header, median_seconds, one_thread_env, torch_one_thread  # noqa: E402

one_thread_env()


def _bare(X, y, epochs: int, dropout: float, seed: int = 0) -> None:
    import torch
    from torch import nn

    torch.manual_seed(seed)
    layers, widths = [], (X.shape[1], 100, 50, 10)
    for a, b in zip(widths[:-1], widths[1:]):
        layers += [nn.Linear(a, b), nn.ReLU()] + ([nn.Dropout(dropout)] if dropout > 0 else [])
    net = nn.Sequential(*layers, nn.Linear(widths[-1], 1))
    opt = torch.optim.Adam(net.parameters(), lr=2.5e-4, weight_decay=2e-6)
    Xt, yt = torch.as_tensor(X, dtype=torch.float32), torch.as_tensor(y, dtype=torch.float32)
    n = Xt.shape[0]
    net.train()
    for _ in range(epochs):
        perm = torch.randperm(n)
        for start in range(0, n, 32):
            idx = perm[start:start + 32]
            loss = ((net(Xt[idx])[:, 0] - yt[idx]) ** 2).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()


def _bare_ensemble(X, y, epochs: int, members: int = 5, seed: int = 0) -> None:
    """The ensemble's arithmetic by hand: (L, in, out) weights, baddbmm, softplus variance, the
    Gaussian NLL summed over members, one Adam; each member its own permutation."""
    import torch
    import torch.nn.functional as F

    torch.manual_seed(seed)
    widths = (X.shape[1], 128, 64, 32)
    params = []
    for a, b in zip(widths[:-1], widths[1:]):
        params += [torch.nn.Parameter(torch.randn(members, a, b) / a**0.5), torch.nn.Parameter(torch.zeros(members, 1, b))]
    heads = [torch.nn.Parameter(torch.randn(members, widths[-1], 2) / widths[-1] ** 0.5),
             torch.nn.Parameter(torch.zeros(members, 1, 2))]
    opt = torch.optim.Adam(params + heads, lr=1e-3)
    Xt, yt = torch.as_tensor(X, dtype=torch.float32), torch.as_tensor(y, dtype=torch.float32)
    n = Xt.shape[0]
    for _ in range(epochs):
        perms = torch.stack([torch.randperm(n) for _ in range(members)])
        for start in range(0, n, 64):
            idx = perms[:, start:start + 64]
            h = Xt[idx]
            for w, b in zip(params[::2], params[1::2]):
                h = torch.relu(torch.baddbmm(b, h, w))
            out = torch.baddbmm(heads[1], h, heads[0])
            mean, var = out[..., 0], F.softplus(out[..., 1]) + 1e-6
            loss = (0.5 * ((yt[idx] - mean) ** 2 / var + torch.log(var)).mean(dim=-1)).sum()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()


def main(argv=None) -> None:
    import numpy as np

    from dubito.regression import (
        DeepEnsembleRegressor,
        DeterministicRegressor,
        MCDropoutRegressor,
    )

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="1 epoch, 1 repeat")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=None, help="also write the table to this file")
    args = ap.parse_args(argv)
    torch = torch_one_thread()
    epochs, repeats = (1, 1) if args.quick else (args.epochs, args.repeats)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(7373, 8))
    y = np.sin(X[:, 0]) + X[:, 1:] @ rng.normal(size=7) * 0.3 + 0.1 * rng.normal(size=7373)
    out = Printer(args.out)
    out(header(torch))
    out(f"one CPU thread, 7373 x 8 rows, batch 32 ({-(-7373 // 32)} steps per epoch), {epochs} epochs, "
        f"median of {repeats}")
    out("| estimator | dubito s / epoch | bare torch s / epoch | ratio |")
    out("|---|---:|---:|---:|")
    def per_epoch(fit) -> float:
        """Seconds per epoch: the difference of fits of 2E and E epochs over E (fixed costs,
        e.g. standardisation and what follows training, cancel)."""
        return (median_seconds(lambda: fit(2 * epochs), repeats, warmup=True)
                - median_seconds(lambda: fit(epochs), repeats)) / epochs

    fits = (
        ("MCDropoutRegressor",
         lambda e: MCDropoutRegressor(epochs=e, validation_fraction=0.0, n_samples=10, progress=False,
                                      random_state=0).fit(X, y),
         lambda e: _bare(X, y, e, 0.05)),
        ("DeterministicRegressor",
         lambda e: DeterministicRegressor(epochs=e, validation_fraction=0.0, progress=False, random_state=0).fit(X, y),
         lambda e: _bare(X, y, e, 0.0)),
        ("DeepEnsembleRegressor (5 members, 128-64-32, batch 64)",
         lambda e: DeepEnsembleRegressor(epochs=e, validation_fraction=0.0, progress=False, random_state=0).fit(X, y),
         lambda e: _bare_ensemble(X, y, e)),
    )
    for name, ours_fit, bare_fit in fits:
        ours, bare = per_epoch(ours_fit), per_epoch(bare_fit)
        out(f"| {name} | {ours:.3f} | {bare:.3f} | {ours / bare:.2f} |")

if __name__ == "__main__":
    main()
