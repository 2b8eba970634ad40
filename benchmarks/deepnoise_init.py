"""How much of B-DeepNoise's Table 1 gap is the SGD initialisation's budget: W1 x 1000 of the
frequentist DeepNoise net (the chains' starting point, spec §2.3 step 1) against Adam steps.

    OMP_NUM_THREADS=1 DUBITO_DATA=... .venv/bin/python benchmarks/deepnoise_init.py \
        [--dataset het-4000] [--steps 250,500,1000,2000,4000,8000]

Why: in the `paper` preset B-DeepNoise's W1 stays near 70 at N = 1000, 2000 and 4000, where the
paper's falls 72 -> 38 -> 26. The preset starts each chain from 1,000 Adam steps ([C] trains
10,000 epochs, about 70,000 steps at N = 4000 with its synthetic batch of 500), and the sampler's 1,500 sweeps move W1 little
(pilots in the experiment's NOTES: 74 after 600 sweeps, 70 after 1,500). If the init's W1 keeps
falling with more steps, the gap is the init budget, not the sampler.

What it runs: the experiment's data for the dataset (repeat 0), the rows of chain 0's init
(fold 0 of the estimator's 5-fold split: 4/5 of the training rows), the init's settings
(`DeepNoiseSGDRegressor` defaults: 4 x 50 hard tanh, 100 noise draws per row, Adam lr 1e-3,
batch 1000) and the same loss (`DeepNoiseNet.mixture_nll`), trained once; at each milestone the
net's predictive (1,000 noise draws per input) is scored at the 100 evaluation inputs by the
experiment's W1 (50,000 draws per input). One torch thread. This is a measurement, not a test;
its het-4000 output (commit 336d701) is recorded in the deepnoise experiment's NOTES.
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import header, one_thread_env, torch_one_thread

one_thread_env()


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="het-4000", help="a synthetic set of the deepnoise experiment")
    ap.add_argument("--steps", default="250,500,1000,2000,4000,8000", help="milestones (Adam steps)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    torch = torch_one_thread()
    import numpy as np
    from sklearn.model_selection import KFold

    from dubito.experiments.deepnoise.data import _load
    from dubito.experiments.deepnoise.evaluate import _w1
    from dubito.regression.deepnoise import SGD_FOLDS
    from dubito.regression.deepnoise_sgd import DeepNoiseSGDRegressor, train_epoch

    milestones = sorted(int(s) for s in args.steps.split(","))
    d = _load(args.dataset, 0)
    if d.x_eval is None:
        raise SystemExit(f"{args.dataset} is not a synthetic set (W1 needs the true quantiles)")
    rows = next(iter(KFold(SGD_FOLDS, shuffle=True, random_state=args.seed).split(d.X_tr)))[0]
    X, y = d.X_tr[rows], d.y_tr[rows]
    # one epoch only to set the scalers and build the net; training continues below
    est = DeepNoiseSGDRegressor(epochs=1, validation_fraction=0.0, random_state=args.seed, progress=False).fit(X, y)
    s = est._settings()
    net = est.net_.float()
    Xt = torch.as_tensor((X - est.x_mean_) / est.x_scale_, dtype=torch.float32)
    yt = torch.as_tensor((y - est.y_mean_) / est.y_scale_, dtype=torch.float32)
    opt = torch.optim.Adam(net.parameters(), lr=s["lr"])
    gen = torch.Generator().manual_seed(args.seed)
    n, batch = len(yt), min(s["batch_size"], len(yt))
    print(header(torch))
    print(f"{args.dataset}: {n} init rows, batch {batch}, {s['n_noise_samples']} noise draws, lr {s['lr']}")
    print("| Adam steps | epochs | train NLL (last epoch) | W1 x 1000 | s / step |")
    print("|---:|---:|---:|---:|---:|", flush=True)
    # the scaler fit trained one epoch (ceil(n / batch) steps); its time is not counted
    steps, epochs, t_train, last = -(-n // batch), 1, 0.0, float("nan")
    steps0 = steps
    for milestone in milestones:
        t0 = time.perf_counter()
        while steps < milestone:
            last = train_epoch(net, opt, Xt, yt, batch, s["n_noise_samples"], gen)
            steps += -(-n // batch)
            epochs += 1
        t_train += time.perf_counter() - t0
        est.net_ = copy.deepcopy(net).double()
        pred = est.predict_distribution(d.x_eval, n_samples=1000)
        w1, _ = _w1(pred, d.q_eval, np.random.default_rng([args.seed, milestone]), 50_000)
        print(f"| {steps} | {epochs} | {last:.4f} | {w1:.1f} | {t_train / max(1, steps - steps0):.3f} |", flush=True)


if __name__ == "__main__":
    main()
