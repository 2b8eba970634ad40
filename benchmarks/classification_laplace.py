"""KFAC Laplace benchmark (issue 7): seconds to fit the Kronecker factors of a small CNN's head on
Fashion-MNIST, and seconds to sample T weight draws and predict with them, measured in one run
(so the machine's speed cancels out of the ratios).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/classification_laplace.py [--quick] [--out FILE]

Model: `dubito.classification.MCDropoutClassifier` with ``dropout="none"`` (the thesis's "ori"),
``network="cnn"`` (2 x [conv 3x3, BatchNorm, ReLU, max-pool 2], then the head FC 256-256-256-K
of spec §5.2), float32, trained for ``--epochs`` epochs on the first ``--train`` training images
(the fit and sampling costs do not depend on how well it is trained; the accuracies are printed
as a sanity check only). Data: Fashion-MNIST (28 x 28, head input 32·7·7 = 1568) when
`dubito.data.fashion_mnist.fashion_mnist_available()` (no download), else scikit-learn's 8x8
digits (head input 32·2·2 = 128; N capped at the 1,797 images, repeated where N asks for more).

`dubito.classification.laplace.KFACLaplace` with the thesis's settings (scale 1, damping 15; spec
§2.7) on the 4 head FC layers (``layers=None``: the CNN's only nn.Linear layers), T = 50:

1. Fit time (forward through the CNN, one backward from the logits to the head's pre-activations,
   A and G accumulated in float64, 4 + 4 Cholesky factorisations) against N, beside one MAP
   forward over the same N images (``map_logits``) as the unit of cost; the "exact" Fisher
   (K = 10 backward passes), the empirical Fisher and the last layer alone at one N.
2. Cholesky factorisations alone (the factor sizes of the head).
3. Sampling per T: drawing T weight samples of the head (``sample_weights``: T·out·q normals and
   two triangular solves per layer, O(T·out·q²)) and ``predict_distribution`` on ``--predict``
   test images, batched (rows repeated T times at the first head layer, so the convolutions run
   once), with new draws per call and with the draws kept from the previous call (what repeated
   calls with the default seed do); at T = 50, a loop of T forwards with the same draws, and
   queries of one image. Accuracy and NLL beside them, and for the last layer alone and s = N,
   1e6 (sanity: with the thesis's s = 1 the 4 sampled head layers of this CNN lose most of the
   accuracy; see `KFACLaplace`'s notes).

Seconds are medians of ``--repeats`` timed runs after one warm-up (one run at N >= 10k). One
torch thread (``torch.set_num_threads(1)``; spec pitfall 16). A benchmark, not a timed test.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # for _common, also when imported by path
from _common import (
    Printer,
    header,
    median_seconds,
    one_thread_env,
    progress,
    torch_one_thread,
)

one_thread_env()

T = 50                      # weight samples (spec §2.7 [R])
TS = (1, 10, 50, 100)       # T of table 3


def load_data(n_train: int, n_test: int):
    """(X_train, y_train, X_test, y_test, image_shape, name): Fashion-MNIST if installed, else digits."""
    import numpy as np

    from dubito.data.fashion_mnist import fashion_mnist_available, load_fashion_mnist

    if fashion_mnist_available():
        ds = load_fashion_mnist(download=False, n_train=n_train, n_test=n_test)
        return ds.X[:n_train], ds.y[:n_train], ds.X[n_train:], ds.y[n_train:], (1, 28, 28), "Fashion-MNIST"
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    X = (X / 16.0).astype(np.float32)
    idx = np.random.default_rng(0).permutation(len(X))
    tr = np.resize(idx[:1400], n_train)
    te = np.resize(idx[1400:], n_test)
    return X[tr], y[tr], X[te], y[te], (1, 8, 8), "sklearn digits 8x8 (Fashion-MNIST not installed)"


def timed(fn, repeats: int) -> float:
    """Median seconds of ``repeats`` runs after one warm-up (no warm-up when repeats == 1)."""
    return median_seconds(fn, repeats, warmup=repeats > 1)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small N, 1 repeat (smoke test: the tables, not the numbers)")
    parser.add_argument("--out", default=None, help="also write the printed tables to this file")
    parser.add_argument("--sizes", type=int, nargs="*", default=None, help="N of table 1 (default 1000 10000 60000)")
    parser.add_argument("--train", type=int, default=5000, help="training images of the MAP model")
    parser.add_argument("--epochs", type=int, default=2, help="training epochs of the MAP model")
    parser.add_argument("--predict", type=int, default=1000, help="test images of table 3")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs below N = 10k (after one warm-up)")
    args = parser.parse_args(argv)
    sizes = args.sizes or ([500, 2000] if args.quick else [1000, 10_000, 60_000])
    n_train = max(sizes + [args.train])
    n_pred = 200 if args.quick else args.predict
    repeats = 1 if args.quick else args.repeats
    ts = (1, 10) if args.quick else TS

    torch = torch_one_thread()

    from dubito.classification import MCDropoutClassifier
    from dubito.classification.laplace import KFACLaplace, jittered_cholesky
    from dubito.metrics.classification import accuracy, nll
    from dubito.predictive.classes import ClassPredictive

    out = Printer(args.out)
    out(header(torch))
    started = time.perf_counter()
    progress("data")
    X, y, Xte, yte, shape, name = load_data(n_train, n_pred)
    progress("MAP model")
    n_fit = min(args.train, len(X))
    est = MCDropoutClassifier(dropout="none", network="cnn", image_shape=shape, epochs=args.epochs,
                              early_stopping=False, random_state=0).fit(X[:n_fit], y[:n_fit])
    heads = [m for m in est.net_.modules() if isinstance(m, torch.nn.Linear)]
    out(f"data: {name}; MAP model: 'ori' CNN, trained {args.epochs} epochs on {n_fit} images; head "
        + " -> ".join(str(m.in_features) for m in heads) + f" -> {heads[-1].out_features}; float32, CPU")

    def make(**kw):
        return KFACLaplace(est, n_samples=T, random_state=0, **kw)

    out(f"\n1. KFAC fit time, 4 head FC layers, scale 1, damping 15 (median of {repeats} runs below N = 10k, "
        "else 1); MAP forward = one evaluation-mode pass over the same images")
    out("| N | Fisher | layers | fit s | fit s per 1k images | MAP forward s | fit / forward |")
    out("|---:|---|---|---:|---:|---:|---:|")
    rows = [(n, "sampled", None) for n in sizes]
    mid = sizes[min(1, len(sizes) - 1)]
    rows += [(mid, "exact", None), (mid, "empirical", None), (mid, "sampled", "last")]
    for n, fisher, layers in rows:
        progress(f"fit N={n} {fisher} {layers}")
        reps = repeats if n < 10_000 else 1
        Xn, yn = X[:n], y[:n]
        fit = timed(lambda f=fisher, lay=layers, a=Xn, b=yn: make(fisher=f, layers=lay).fit(a, b), reps)
        la = make().fit(X[:50], y[:50])
        fwd = timed(lambda la=la, a=Xn: la.map_logits(a), reps)
        out(f"| {n} | {fisher} | {'4 head' if layers is None else layers} | {fit:.3f} | {1e3 * fit / n:.4f} | "
            f"{fwd:.3f} | {fit / fwd:.2f} |")

    out("\n2. Cholesky factorisations of the damped factors (float64), median of 5")
    out("| factor | size | s |")
    out("|---|---:|---:|")
    la = make().fit(X[: sizes[0]], y[: sizes[0]])
    total = 0.0
    for lname in la.layers_:
        for fac, mats in (("A", la.A_), ("G", la.G_)):
            m = mats[lname] + la.delta_ * torch.eye(mats[lname].shape[0], dtype=torch.float64)
            sec = timed(lambda m=m: jittered_cholesky(m), 5)
            total += sec
            out(f"| {fac} of {lname} | {m.shape[0]} | {sec:.4f} |")
    out(f"| all | | {total:.4f} |")

    progress("sampling")
    la = make().fit(X[: sizes[0]], y[: sizes[0]])
    map_pred = ClassPredictive.from_logits(la.map_logits(Xte))
    out(f"\n3. sampling per T (4 head layers): drawing T weight samples, and predict_distribution on {len(Xte)} test "
        f"images, batched, with new draws (a new random_state per call) and with the draws kept from the previous "
        f"call (the default random_state); median of {repeats}")
    out("| T | draw s | draw s per sample | predict s, new draws | predict s, kept draws | kept: s per 1k images "
        "per sample | accuracy | NLL |")
    out("|---:|---:|---:|---:|---:|---:|---:|---:|")
    seeds = itertools.count(1)
    for t in ts:
        progress(f"T={t}")
        draw = timed(lambda t=t: la.sample_weights(t), repeats)
        fresh = timed(lambda t=t: la.predict_distribution(Xte, n_samples=t, random_state=next(seeds)), repeats)
        pred = la.predict_distribution(Xte, n_samples=t)
        kept = timed(lambda t=t: la.predict_distribution(Xte, n_samples=t), repeats)
        out(f"| {t} | {draw:.3f} | {draw / t:.4f} | {fresh:.3f} | {kept:.3f} | {1e3 * kept / (len(Xte) * t):.4f} | "
            f"{accuracy(pred, yte):.4f} | {nll(pred, yte):.4f} |")
    out(f"   MAP (no sampling): accuracy {accuracy(map_pred, yte):.4f}, NLL {nll(map_pred, yte):.4f}")
    t = ts[-1] if args.quick else T
    progress(f"loop T={t}")
    la.sample_logits(Xte[:1], n_samples=t)  # keep the draws: both forms below use them
    loop = timed(lambda: la.sample_logits(Xte, n_samples=t, batched=False), repeats)
    batched = timed(lambda: la.sample_logits(Xte, n_samples=t), repeats)
    one = timed(lambda: [la.sample_logits(Xte[i : i + 1], n_samples=t) for i in range(20)], repeats) / 20
    out(f"   T = {t}, kept draws: batched {batched:.3f} s vs a loop of T forwards {loop:.3f} s: loop / batched = "
        f"{loop / batched:.2f}; one image per call: {1e3 * one:.1f} ms per image")
    progress("last layer")
    last = make(layers="last").fit(X[: sizes[0]], y[: sizes[0]])
    sec = timed(lambda: last.predict_distribution(Xte), repeats)
    pred = last.predict_distribution(Xte)
    out(f"   last layer only ({heads[-1].in_features + 1} x {heads[-1].out_features}), T = {T}: predict "
        f"{sec:.3f} s ({1e3 * sec / len(Xte):.3f} ms per image); accuracy {accuracy(pred, yte):.4f}, "
        f"NLL {nll(pred, yte):.4f}")
    for scale in ("n", 1e6):
        pred = make(scale=scale).fit(X[: sizes[0]], y[: sizes[0]]).predict_distribution(Xte)
        out(f"   4 head layers, scale {scale!r} (N = {sizes[0]} fitted), damping 15, T = {T}: accuracy "
            f"{accuracy(pred, yte):.4f}, NLL {nll(pred, yte):.4f}")
    out(f"\ntotal benchmark time: {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
