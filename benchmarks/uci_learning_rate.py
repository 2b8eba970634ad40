"""The uci experiment's learning rate, chosen on validation rows (issue 24).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/uci_learning_rate.py [--datasets boston energy yacht naval]
        [--splits 3] [--lrs 0.001 0.003 0.01 0.1] [--out FILE]

The uci experiment trains its 5-member ensembles at one fixed Adam rate for all nine sets. The
rate 0.01 was picked on the first splits' *test* rows (its LR_NOTE). This script repeats the
choice on validation data only: for each standard split, the experiment's own settings
(`dubito.experiments.uci.SETTINGS`: 5 members, 40 epochs, batch 100, its hidden width) are fitted
on the first 80 % of the split's training rows (in a seeded random order) and scored by the mean
NLL of the mixture on the other 20 %. It prints the mean validation NLL per (set, rate) and the
rate each set would pick. A check, not a timed test; about 10 min on one thread.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # for _common, also when imported by path
from _common import (  # noqa: E402
    Printer,
    header,
    one_thread_env,
    progress,
    torch_one_thread,
    validation_rows,
)

one_thread_env()


def main(argv=None) -> None:
    import numpy as np

    from dubito.data import load
    from dubito.experiments.common import network_seed
    from dubito.experiments.uci import LARGE, SETTINGS
    from dubito.metrics import nll
    from dubito.regression import DeepEnsembleRegressor

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", nargs="*", default=["boston", "energy", "yacht", "naval"])
    ap.add_argument("--splits", type=int, default=3, help="first standard splits per set")
    ap.add_argument("--lrs", type=float, nargs="*", default=[0.001, 0.003, 0.01, 0.1])
    ap.add_argument("--out", default=None, help="also write the table to this file")
    args = ap.parse_args(argv)
    torch = torch_one_thread()
    out = Printer(args.out)
    out(header(torch, "cpu"))
    out(f"validation NLL (mean over the first {args.splits} standard splits; 20 % of each split's training "
        "rows held out, the test rows unused)")
    out("| data set | " + " | ".join(f"lr {lr:g}" for lr in args.lrs) + " | chosen |")
    out("|---|" + "---:|" * len(args.lrs) + "---|")
    for name in args.datasets:
        ds = load(name)
        hidden = int(SETTINGS["hidden_large"] if name in LARGE else SETTINGS["hidden"])
        scores = {lr: [] for lr in args.lrs}
        for split in range(args.splits):
            X, y, _, _ = ds.split(split)
            fit_rows, val_rows = validation_rows(len(y), split)
            for lr in args.lrs:
                progress(f"{name} split {split} lr {lr:g}")
                est = DeepEnsembleRegressor(
                    n_members=int(SETTINGS["n_members"]), hidden=(hidden,), activation="relu", lr=lr,
                    weight_decay=float(SETTINGS["weight_decay"]), batch_size=int(SETTINGS["batch_size"]),
                    epochs=int(SETTINGS["epochs"]), lr_drop=str(SETTINGS["lr_drop"]), validation_fraction=0.0,
                    random_state=network_seed(0, split), progress=False)
                try:
                    est.fit(X[fit_rows], y[fit_rows])
                    score = float(np.mean(nll(est.predict_distribution(X[val_rows]), y[val_rows])))
                except FloatingPointError:  # the divergence check: this rate does not train
                    score = float("inf")
                scores[lr].append(score)
        means = {lr: float(np.mean(v)) for lr, v in scores.items()}
        best = min(means, key=means.get)
        out(f"| {name} | " + " | ".join(f"{means[lr]:.3f}" for lr in args.lrs) + f" | {best:g} |")


if __name__ == "__main__":
    main()
