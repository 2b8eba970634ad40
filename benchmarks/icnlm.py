"""IC-NLM (Hoffmann & Klein 2023) performance: VI against NUTS, and predictive-density
throughput, as numbers and ratios measured in one run (so the machine's speed cancels out).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/icnlm.py [--device cpu|cuda] [--quick] [--out FILE]

Data (spec shared/specs/icnlm.md §5, "feature-level synthetic"): psi = ReLU(A x + b) in R^10,
x ~ N(0, I_8), fixed A, b, beta* (sparse: 6 of 10 non-zero) and tau*^2 = 1; the latent
z_i = s_i (psi_i' beta* + eps_i), s_i = (1 + tau*^2 ||psi_i||^2)^{-1/2} (the copula model, eq. 3-5),
with beta* projected and scaled so that z has mean 0 and variance 1 (the copula's marginal);
y = G^{-1}(Phi(z)) with the spec's steering-like marginal G = 0.8 Laplace(0, 1) + 0.2 * 8 t_3,
truncated to [-50, 50]. The same data serve both priors; the sizes are the paper's
(n = 10k, 44k and 300k, p = 10). A held-out set of 10,000 inputs (another seed) gives the
predictive comparison and the throughput inputs.

Prints:

1. Posterior fits, ``ImplicitCopulaRegressor.from_features`` with the estimator's defaults:
   VI (rank 3, 50 draws per iteration, ADADELTA, 10,000 to 14,000 iterations with the ELBO
   stopping rule) and NUTS (2 chains, 1000 warm-up, 1000 draws, dense mass). Wall time (the whole
   ``from_features``: KDE marginal and posterior), VI iterations and seconds per iteration,
   gradient evaluations (one per draw: log-posterior gradients counted at ``CopulaModel``, a
   machine-independent cost), NUTS bulk ESS (min and median over the coordinates) and ESS per
   second. Convention for VI: its 1000 draws from q are independent, so its "ESS" is the number
   of draws and ESS/s = 1000 / wall time (draws from q cost nothing once q is fitted; the
   comparison that matters is the wall time to a posterior of equal predictive accuracy, table 2).
   For n above ``--reduce-above`` the settings are reduced (printed in the table).
2. Predictive agreement on the held-out inputs (plug-in predictive, the paper's): max |VI - NUTS|
   of the predictive mean and of the 90% interval bounds, relative to the held-out response sd;
   MAE, MSE and 90% coverage of both against the held-out y, and of the true conditional mean.
3. Predictive-density throughput, ``predict_distribution(features=psi)`` on the 512-point grid,
   one call per row, inputs per second (median of repeats after a warm-up), with a breakdown
   of the plug-in call by function (cProfile cumulative times).

This is a benchmark, not a timed test. Targets (issue 4): VI at least 10x faster than NUTS at
n = 44k for the same predictive accuracy; 10,000 predictive densities in under 1 s on one core.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import math
import os
import pstats
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # for _common, also when imported by path
from _common import Printer, header, median_seconds, progress, torch_one_thread

P = 10            # features (the paper's last hidden layer)
D_IN = 8          # inputs x of the synthetic feature map
TAU2_TRUE = 1.0   # tau*^2 of the data-generating copula
BETA_DIRECTION = np.array([1.5, -1.0, 0.8, 0.5, 0.0, 0.0, 0.0, -0.6, 0.0, 0.3])  # sparse beta* (before scaling)
DATA_SEED, TRAIN_SEED, TEST_SEED = 20231740, 1, 2
N_TEST = 10_000
GRID_SIZE = 512   # the estimator's default grid


# ----------------------------------------------------------------------------- synthetic data
def steering_marginal(n_grid: int = 2**18) -> tuple[np.ndarray, np.ndarray]:
    """Tabulated CDF of G = 0.8 Laplace(0, 1) + 0.2 * 8 t_3 truncated to [-50, 50] (spec §5)."""
    from scipy import stats

    y = np.linspace(-50.0, 50.0, n_grid)
    F = 0.8 * stats.laplace.cdf(y, scale=1.0) + 0.2 * stats.t.cdf(y / 8.0, df=3)
    return y, (F - F[0]) / (F[-1] - F[0])


class Synthetic:
    """The data-generating copula: features, beta* (projected so E[z] = 0, scaled so Var z = 1,
    on a 200k-draw calibration sample) and the marginal G."""

    def __init__(self):
        rng = np.random.default_rng(DATA_SEED)
        self.A = rng.normal(size=(P, D_IN)) / math.sqrt(D_IN)
        self.b = rng.normal(scale=0.5, size=P)
        psi = self.features(rng.normal(size=(200_000, D_IN)))
        s = self.scales(psi)
        support = BETA_DIRECTION != 0
        m = (s[:, None] * psi).mean(0)[support]          # E[s psi] on the support of beta*
        beta = BETA_DIRECTION.copy()
        beta[support] -= (m @ beta[support]) / (m @ m) * m  # E[z] = E[s psi'beta] = 0
        # Var z = E[s^2 (c^2 (psi'beta)^2 + 1)] = 1
        c2 = (1.0 - (s**2).mean()) / (s**2 * (psi @ beta) ** 2).mean()
        self.beta = math.sqrt(c2) * beta
        self.y_grid, self.G = steering_marginal()

    def features(self, x):
        return np.maximum(x @ self.A.T + self.b, 0.0)

    def scales(self, psi):
        return 1.0 / np.sqrt(1.0 + TAU2_TRUE * (psi**2).sum(1))

    def quantile(self, u):
        return np.interp(u, self.G, self.y_grid)

    def sample(self, n: int, seed: int):
        """(psi (n, P), y (n,), true conditional mean E[y | psi] (n,))."""
        from scipy.special import ndtr

        rng = np.random.default_rng(seed)
        psi = self.features(rng.normal(size=(n, D_IN)))
        s = self.scales(psi)
        loc = s * (psi @ self.beta)
        z = loc + s * rng.normal(size=n)
        y = self.quantile(ndtr(z))
        nodes, weights = np.polynomial.hermite_e.hermegauss(96)   # E[G^{-1}(Phi(Z))], Z ~ N(loc, s^2)
        mean = (self.quantile(ndtr(loc[:, None] + s[:, None] * nodes)) @ weights) / weights.sum()
        return psi, y, mean


# ----------------------------------------------------------------------------- gradient counter
_GRADS = {"draws": 0}


def _count_gradients() -> None:
    """Count log-posterior gradient evaluations (one per draw) at CopulaModel, for this process."""
    from dubito.regression.copula_posterior import CopulaModel

    if getattr(CopulaModel.log_prob_and_grad, "_counted", False):
        return
    original = CopulaModel.log_prob_and_grad

    def counted(self, theta):
        value, grad = original(self, theta)
        _GRADS["draws"] += 1 if value.dim() == 0 else int(value.shape[0])
        return value, grad

    counted._counted = True
    CopulaModel.log_prob_and_grad = counted


# ----------------------------------------------------------------------------- 1. fits
def fit(psi, y, prior: str, inference: str, settings: dict, device: str, seed: int) -> dict:
    from dubito.inference.diagnostics import ConvergenceWarning
    from dubito.regression import ImplicitCopulaRegressor

    _GRADS["draws"] = 0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        start = time.perf_counter()
        est = ImplicitCopulaRegressor.from_features(psi, y, prior=prior, inference=inference, device=device,
                                                    random_state=seed, progress=False, **settings)
        wall = time.perf_counter() - start
    d = est.posterior_.diagnostics
    row = {"prior": prior, "n": len(y), "method": inference, "est": est, "wall": wall, "grads": _GRADS["draws"],
           "warnings": [str(w.message) for w in caught if issubclass(w.category, ConvergenceWarning)]}
    if inference == "vi":
        row.update(iterations=int(d["iterations"]), converged=bool(d["converged"]),
                   per_iter=d["seconds"] / max(1, int(d["iterations"])), ess_min=est.n_draws, ess_med=est.n_draws,
                   settings=f"max {settings['vi_max_iter']} it" + ("" if settings["vi_min_iter"] < settings["vi_max_iter"]
                                                                    else " (fixed)"))
    else:
        ess = np.atleast_1d(np.asarray(d["ess_bulk"], dtype=float))
        row.update(ess_min=float(ess.min()), ess_med=float(np.median(ess)),
                   rhat=float(np.max(d["rhat"])), divergences=int(np.sum(d["divergences"])),
                   settings=f"{est.nuts_chains}x({settings['nuts_warmup']}+{settings['nuts_samples']})")
    row["ess_per_s"] = row["ess_min"] / wall
    return row


def fit_settings(n: int, args) -> dict:
    from dubito.regression import ImplicitCopulaRegressor

    defaults = ImplicitCopulaRegressor().get_params()  # read, not copied: the benchmark follows the estimator
    s = {k: defaults[k] for k in ("vi_max_iter", "vi_min_iter", "nuts_warmup", "nuts_samples")}
    if args.quick:
        s.update(vi_max_iter=200, vi_min_iter=200, nuts_warmup=50, nuts_samples=50)
    elif n > args.reduce_above:
        s.update(vi_max_iter=args.reduced_vi_iter, vi_min_iter=args.reduced_vi_iter,
                 nuts_warmup=args.reduced_nuts, nuts_samples=args.reduced_nuts)
    return s


def fit_row(r: dict) -> str:
    if r["method"] == "vi":
        it = f"{r['iterations']}{'' if r['converged'] else ' (not converged)'}"
        per_iter = f"{r['per_iter'] * 1e3:.1f} ms"
        ess = f"{r['ess_min']:.0f} iid draws"
        note = ""
    else:
        it, per_iter = "-", "-"
        ess = f"{r['ess_min']:.0f} / {r['ess_med']:.0f}"
        note = f"R-hat max {r['rhat']:.3f}, {r['divergences']} div."
    return (f"| {r['prior']} | {r['n']} | {r['method'].upper()} | {r['settings']} | {r['wall']:.1f} s | {it} | "
            f"{per_iter} | {r['grads']:.3g} | {ess} | {r['ess_per_s']:.1f} | {note} |")


# ----------------------------------------------------------------------------- 2. agreement
def agreement(vi: dict, nuts: dict, psi_test, y_test, true_mean) -> dict:
    sd = float(np.std(y_test))
    out = {"prior": vi["prior"], "n": vi["n"], "capped": not vi["converged"]}
    preds = {}
    for key, r in (("vi", vi), ("nuts", nuts)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            gd = r["est"].predict_distribution(features=psi_test)
        lo, hi = gd.interval(0.9)
        preds[key] = (gd.mean, lo, hi)
        out[f"mae_{key}"] = float(np.mean(np.abs(gd.mean - y_test)))
        out[f"mse_{key}"] = float(np.mean((gd.mean - y_test) ** 2))
        out[f"cover_{key}"] = float(np.mean((lo <= y_test) & (y_test <= hi)))
    for j, name in enumerate(("mean", "lo", "hi")):
        out[f"d_{name}"] = float(np.max(np.abs(preds["vi"][j] - preds["nuts"][j]))) / sd
    out["mae_true"] = float(np.mean(np.abs(true_mean - y_test)))
    out["mse_true"] = float(np.mean((true_mean - y_test) ** 2))
    return out


# ----------------------------------------------------------------------------- 3. throughput
@contextlib.contextmanager
def _predictive(est, kind: str):
    old = est.predictive
    est.predictive = kind
    try:
        yield est
    finally:
        est.predictive = old


BREAKDOWN = (  # (label, file suffix, function name) of the plug-in call (the one-table-search fast path), cProfile cumulative
    ("posterior.predict_z (latent N(m, s^2) per input)", "copula_posterior.py", "predict_z"),
    ("_z_grid (per-input z-grid: 8-sd core + tail nodes)", "copula.py", "_z_grid"),
    ("_plugin_density_on_grid (y-grid, p_Y and the density, one table search)", "copula.py", "_plugin_density_on_grid"),
    ("  marginal.inverse_pseudo_response_and_pdf (y = F_Y^-1(Phi(z)) and p_Y(y))", "marginal.py",
     "inverse_pseudo_response_and_pdf"),
    ("GridDensity(...) (validation, cumulative trapezoid, moments)", "grid.py", "__init__"),
)


def throughput(fits: dict, psi_test, quick: bool) -> tuple[list[dict], dict]:
    n_plugin = 1_000 if quick else min(N_TEST, len(psi_test))
    n_mix = 50 if quick else 1_000
    repeats = 1 if quick else 3
    rows = []
    # one fit per method: the ridge fits (else horseshoe) at the largest n
    prior = "ridge" if any(k[0] == "ridge" for k in fits) else "horseshoe"
    key_n = max(n for (pr, n, method) in fits if pr == prior)
    for method in ("vi", "nuts"):
        r = fits.get((prior, key_n, method))
        if r is None:
            continue
        est = r["est"]
        J = est.posterior_.theta.shape[0]
        for kind, N in (("plugin", n_plugin), ("mixture", n_mix)):
            psi = psi_test[:N]
            with _predictive(est, kind), warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                est.predict_distribution(features=psi)  # warm-up
                t = median_seconds(lambda: est.predict_distribution(features=psi), repeats)
            label = {"plugin": "plug-in" + (" (paper's HMC formula over J draws)" if method == "nuts" else ""),
                     "mixture": "posterior mixture over J draws"}[kind]
            rows.append({"fit": f"{prior}, n={key_n}, {method.upper()}", "kind": label, "J": 1 if (kind == "plugin" and method == "vi") else J,
                         "N": N, "seconds": t, "per_s": N / t})
    # breakdown of the VI plug-in call
    est = fits[(prior, key_n, "vi")]["est"]
    psi = psi_test[:n_plugin]
    prof = cProfile.Profile()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        prof.enable()
        est.predict_distribution(features=psi)
        prof.disable()
    stats = pstats.Stats(prof).stats
    total = max(v[3] for (f, _, name), v in stats.items() if name == "predict_distribution")
    parts = {}
    for label, suffix, name in BREAKDOWN:
        parts[label] = sum(v[3] for (f, _, fn), v in stats.items() if fn == name and f.endswith(suffix))
    return rows, {"N": n_plugin, "total": total, "parts": parts}


# ----------------------------------------------------------------------------- main
def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu", help="torch device of the posterior fits and predict_z (cpu|cuda)")
    parser.add_argument("--quick", action="store_true",
                        help="ridge at n = 2000 only, few iterations, 1000 held-out inputs (smoke test)")
    parser.add_argument("--out", default=None, help="also write the printed tables to this file")
    parser.add_argument("--sizes", type=int, nargs="*", default=[10_000, 44_000, 300_000],
                        help="n with the ridge prior (none: horseshoe only)")
    parser.add_argument("--horseshoe-sizes", type=int, nargs="*", default=[10_000, 44_000],
                        help="n with the horseshoe prior (none: ridge only)")
    parser.add_argument("--reduce-above", type=int, default=None,
                        help="n above this get the reduced settings below (default: 100000 on cpu, no reduction on cuda)")
    parser.add_argument("--reduced-vi-iter", type=int, default=200, help="VI iterations (fixed, no stopping rule) when reduced")
    parser.add_argument("--reduced-nuts", type=int, default=500, help="NUTS warm-up and draws per chain when reduced")
    parser.add_argument("--seed", type=int, default=0, help="random_state of the fits")
    args = parser.parse_args(argv)
    if args.reduce_above is None:
        args.reduce_above = 100_000 if args.device == "cpu" else 10**12
    if args.quick:
        args.sizes, args.horseshoe_sizes = [2_000], []
    n_test = 1_000 if args.quick else N_TEST

    torch = torch_one_thread(force=False)
    _count_gradients()
    out = Printer(args.out)
    out(header(torch, args.device))
    started = time.perf_counter()
    data = Synthetic()
    psi_test, y_test, true_mean = data.sample(n_test, TEST_SEED)
    out(f"data: spec §5 feature-level synthetic, p = {P}, tau*^2 = {TAU2_TRUE}, beta* = "
        f"[{', '.join(f'{b:.2f}' for b in data.beta)}]; held-out N = {n_test}, sd(y) = {np.std(y_test):.2f}")

    out("\n1. posterior fits (ImplicitCopulaRegressor.from_features; VI 'ESS' = its 1000 iid draws from q)")
    out("| prior | n | method | settings | wall | VI iterations | s / iteration | gradient evals | "
        "ESS (NUTS: min / median bulk) | ESS/s (min) | notes |")
    out("|---|---:|---|---|---:|---:|---:|---:|---:|---:|---|")
    fits, agree = {}, []
    jobs = [("ridge", n) for n in args.sizes] + [("horseshoe", n) for n in args.horseshoe_sizes]
    jobs.sort(key=lambda j: (j[1], j[0] != "ridge"))
    for prior, n in jobs:
        psi, y, _ = data.sample(n, TRAIN_SEED)
        settings = fit_settings(n, args)
        for method in ("vi", "nuts"):
            progress(f"fitting {prior} n={n} {method} {settings}")
            r = fit(psi, y, prior, method, settings, args.device, args.seed)
            fits[(prior, n, method)] = r
            out(fit_row(r))
        progress(f"predictive agreement {prior} n={n}")
        agree.append(agreement(fits[(prior, n, "vi")], fits[(prior, n, "nuts")], psi_test, y_test, true_mean))

    out("\n   wall time NUTS / VI (same n, prior; > 1: VI faster) and gradient evaluations NUTS / VI")
    out("| prior | n | VI | NUTS | NUTS / VI time | NUTS / VI gradient evals |")
    out("|---|---:|---:|---:|---:|---:|")
    for prior, n in jobs:
        v, s = fits[(prior, n, "vi")], fits[(prior, n, "nuts")]
        out(f"| {prior} | {n} | {v['wall']:.1f} s | {s['wall']:.1f} s | {s['wall'] / v['wall']:.2f}x | "
            f"{s['grads'] / v['grads']:.2f}x |")

    out(f"\n2. predictive agreement VI vs NUTS (plug-in predictive, {n_test} held-out inputs; "
        "differences relative to sd(y))")
    out("| prior | n | max abs diff mean | max abs diff q05 | max abs diff q95 | MAE VI / NUTS / truth | "
        "MSE VI / NUTS / truth | 90% coverage VI / NUTS |")
    out("|---|---:|---:|---:|---:|---:|---:|---:|")
    for a in agree:
        flag = " (VI capped)" if a["capped"] else ""
        out(f"| {a['prior']} | {a['n']}{flag} | {a['d_mean']:.2e} | {a['d_lo']:.2e} | {a['d_hi']:.2e} | "
            f"{a['mae_vi']:.4f} / {a['mae_nuts']:.4f} / {a['mae_true']:.4f} | "
            f"{a['mse_vi']:.3f} / {a['mse_nuts']:.3f} / {a['mse_true']:.3f} | {a['cover_vi']:.3f} / {a['cover_nuts']:.3f} |")

    progress("throughput")
    rows, br = throughput(fits, psi_test, args.quick)
    out(f"\n3. predictive-density throughput: predict_distribution(features=psi), grid_size {GRID_SIZE}, "
        "one call, median of repeats")
    out("| fit | predictive | J | inputs N | seconds | inputs / s |")
    out("|---|---|---:|---:|---:|---:|")
    for r in rows:
        out(f"| {r['fit']} | {r['kind']} | {r['J']} | {r['N']} | {r['seconds']:.3f} | {r['per_s']:.0f} |")
    out(f"\n   breakdown of one VI plug-in call, N = {br['N']} (cProfile, cumulative; nested rows overlap)")
    out("| part | seconds | share |")
    out("|---|---:|---:|")
    for label, t in br["parts"].items():
        out(f"| {label} | {t:.3f} | {t / br['total']:.0%} |")
    out(f"| predict_distribution, total (under the profiler) | {br['total']:.3f} | 100% |")

    n44 = 44_000 if ("ridge", 44_000, "vi") in fits else None
    if n44:
        v, s = fits[("ridge", n44, "vi")], fits[("ridge", n44, "nuts")]
        out(f"\ntarget 1 (VI >= 10x faster than NUTS at n = 44k, ridge): NUTS / VI = {s['wall'] / v['wall']:.2f}x")
    plug = next((r for r in rows if r["J"] == 1), None)
    if plug:
        out(f"target 2 (10,000 densities < 1 s, one core): {N_TEST / plug['per_s']:.2f} s per 10,000 "
            f"({plug['per_s']:.0f} inputs/s, VI plug-in)")
    out(f"\ntotal benchmark time: {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
