r"""Hoffmann & Klein (2023): the IC-NLM against its benchmarks (Table 1, Figs. 7-8), reproduced.

Spec ``shared/specs/icnlm.md`` §3 (experiments, metrics), §4 (Table 1, claims 1-9), §5 (C1-C7).
The paper's data (comma2k19 frames, steering-wheel degrees) cannot be had here; the image task
is ``driving`` (`dubito.data.driving`: CarRacing-v3 frames, road-wheel degrees, 30,000 frames,
seed 0, the episode-wise split 0) with the CNN networks (``network="cnn"``), and a few UCI
regression sets (standard splits) with MLPs serve as further data.

Methods (one cell per (dataset, method, split); interruption safety is per cell, so a GPU
command of 10 minutes holds at least one):

* ``icnlm``: ONE network trained on the pseudo responses z (`ImplicitCopulaRegressor`, ridge,
  VI), then the four posteriors on its features as in the paper (spec §3.2):
  ``IC-NLM {ridge, horseshoe} {VI, NUTS}``, the others by ``from_features`` on the same
  training features. Feature units that are constant on the training rows (dead ReLUs) are
  dropped for all four (``from_features`` refuses constant columns; the network fit keeps
  them, so the ridge-VI variant is refitted on the live columns when there are any). Plus the
  paper's point prediction "DNN on z, mapped back (No Bayes)": yhat = F_Y^{-1}(Phi(zhat(x)))
  with zhat the network's own output (point metrics only).
* ``mc-dropout``: one dropout network (p = 0.05, 1,000 masks: spec §3.3), two variants from
  the same draws: ``MC dropout`` (the authors' code: a KDE of the draws, no noise term) and
  ``MC dropout + noise`` (the draws plus the residual noise, `MCDropoutRegressor`'s default).
* ``mdn`` (50 components), ``deterministic`` (N(f(x), residual variance)), ``naive`` (always
  0 on driving, as the paper; the training mean on UCI).

Metrics per variant (test set, the response's units; `_evaluate`): ``mae``, ``mse`` of the
predictive mean; ``acc_I`` / ``acc_II``, accuracy within the paper's thresholds mapped to the
data (`dubito.metrics.matched_thresholds`: the thresholds at which the naive learner reaches
the paper's naive 93.21 % / 65.12 % on the training responses), and on driving also
``acc_6`` / ``acc_2`` at the raw 6 and 2 degrees; ``nll``; ``crps`` and interval widths on a
fixed subsample of at most `EXPENSIVE_POINTS` test points (the same for every method of a
split: a 1,000-draw MC-dropout mixture costs O(S^2) per point for the CRPS); coverage of the
equal-tailed central intervals at the paper's 11 levels (from the PIT values, which is the
same for a continuous predictive) and ``coverage_error`` (mean |coverage - level| over them);
``calibration_error`` (PIT); ``marginal_calibration_gap`` (sup_t |mean_i F_i(t) - G_n(t)| on
the test set) and ``train_marginal_gap`` (the same in-sample, on at most `TRAIN_POINTS`
training rows: C2); ``var_ratio`` = MSE / mean predictive variance (> 1: overconfident);
``ev_spearman``, the rank correlation of predictive variance and squared error (error-variance
relation, Fig. 8b, as one number); ``fit_seconds``.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import math
import os
import time
from typing import Any

import numpy as np

import dubito.regression as reg
from dubito.data import load
from dubito.experiments.base import (
    CellResult,
    Experiment,
    MetricSpec,
    PaperNumber,
    Preset,
)
from dubito.experiments.claims import (
    CellTable,
    claim_block,
    missing_lines,
    section,
    verdict,
)
from dubito.experiments.claims import fmt as _f
from dubito.experiments.common import network_seed, uci_unavailable
from dubito.metrics import (
    PAPER_THRESHOLDS,
    accuracy,
    calibration_error,
    crps,
    error_variance_curve,
    level_key,
    marginal_calibration,
    matched_thresholds,
    nll,
    pit,
    width,
)
from dubito.predictive.samples import Samples
from dubito.regression import (
    ImplicitCopulaRegressor,
    MCDropoutRegressor,
    NaiveRegressor,
)

__all__ = ["EXPERIMENT", "run_cell", "LEVELS", "ICNLM_VARIANTS", "report_sections", "data_kind"]

PAPER = (
    "L. Hoffmann and N. Klein (2023), Marginally calibrated response distributions for end-to-end learning "
    "in autonomous driving, Ann. Appl. Stat. 17, 1740-1763 (arXiv:2110.01050), Table 1, Figs. 5-8"
)

#: The paper's 11 interval levels (spec §3.4 [C]).
LEVELS = (0.05, 0.15, 0.25, 0.35, 0.45, 0.55, 0.65, 0.75, 0.85, 0.95, 0.99)
ICNLM_VARIANTS = ("IC-NLM ridge VI", "IC-NLM ridge NUTS", "IC-NLM horseshoe VI", "IC-NLM horseshoe NUTS")
NO_BAYES = "DNN on z (No Bayes)"
#: "icnlm-tanh": the same model with tanh features (psi in (-1, 1)^p) instead of the paper's ReLU, ours:
#: ReLU features' ||psi||^2, which sets both the copula's mean and its spread (s_i), varied 4.5-21x over
#: the rows, and the IC-NLM predicted worse than its own network (see the notes).
TANH = " · tanh ψ"
MC_PAPER, MC_NOISE = "MC dropout", "MC dropout + noise"
VARIANTS = {
    "icnlm": (*ICNLM_VARIANTS, NO_BAYES),
    "icnlm-tanh": tuple(v + TANH for v in (*ICNLM_VARIANTS, NO_BAYES)),
    "mc-dropout": (MC_PAPER, MC_NOISE),
    "mdn": ("MDN",),
    "deterministic": ("Deterministic",),
    "naive": ("Naive",),
}

#: Driving data sets: name -> frames recorded (seed 0, default recording settings).
DRIVING = {"driving": 30_000, "driving-1k": 1_000}
UCI = ("yacht", "energy", "concrete", "boston")
UCI_SPLITS = (0, 1)

EXPENSIVE_POINTS = 1000   # test points for CRPS, widths and the average density
TRAIN_POINTS = 2000       # training rows for the in-sample marginal calibration (C2)
PIT_POINTS = 1000         # PIT values kept per variant (the same subsample)
GRID_POINTS = 301         # y-grid of the marginal calibration plots
HIST_BINS = 40
NU_POINTS = 101           # variance thresholds of the error-variance curve
SHARES = tuple(np.round(np.linspace(0.05, 1.0, 20), 2))

TABULAR_NOTE = (
    "Tabular networks: Adam lr 1e-3, batch 32, max(60, ceil(3000 / batches per epoch)) epochs, i.e. at least "
    "3,000 Adam steps. The paper's 2.5e-4 x 60 epochs of batch 32 are 82,000 steps on its 43,736 images but "
    "only 540 on yacht's 277 rows; measured on splits 0-1 (deterministic net, test RMSE): yacht 3.1/4.0 at the "
    "paper's settings against 0.75/0.77 at lr 1e-3 with 3,000 steps, energy 1.86/2.06 against 0.47/0.59, "
    "concrete 6.4/5.7 against 5.0/4.9; boston 2.3/2.9 against 2.8/2.7 (no gain). Twice the steps changed "
    "little (yacht 0.71/0.83, energy 0.37/0.58). The same step budget serves all networks (the paper: "
    "MDN up to 150 epochs, the rest 60, stopped by eye)."
)

_TABULAR = dict(lr=1e-3, batch_size=32, min_steps=3000, min_epochs=60)
_IMAGES = dict(network="cnn", lr=2.5e-4, batch_size=32, epochs=60)  # spec §2.2 [C]
# The paper preset's image networks: 10 epochs for every network (the paper 60, MDN 150), MC dropout
# with 50 masks (spec §5: "reduce to <= 200 masks" on a CPU), NUTS 200 + 200, and the posteriors
# fitted on the CPU (small, sequential work) even when the networks train on a GPU: what fits the
# one CPU core per process this reproduction had (IMAGES_NOTE).
_IMAGES_PAPER = dict(_IMAGES, epochs=10)
IMAGES_NOTE = (
    "Driving settings are cut to the compute at hand (one shared CPU core per process; our GPU time ran out "
    "before a driving cell finished: horseshoe NUTS at n = 24,000 costs about 0.6 s per iteration here): "
    "every image network trains 10 epochs of batch 32 (7,500 Adam steps at lr 2.5e-4; the paper 60 epochs, "
    "MDN up to 150), MC dropout uses 50 masks (the paper 1,000; spec §5 suggests <= 200 on a CPU), NUTS "
    "200 warm-up + 200 draws x 2 chains."
)
_POSTERIOR = dict(vi_max_iter=14_000, vi_min_iter=10_000, vi_draws=50, vi_rank=3, nuts_samples=1000,
                  nuts_warmup=1000, nuts_chains=2, grid_size=512, n_draws=1000)


def _methods(tab: dict, img: dict, post_tab: dict, post_img: dict, mc_samples: int, mdn_components: int,
             mdn_img_epochs: int, mc_samples_images: int | None = None) -> dict[str, dict]:
    mc_samples_images = mc_samples if mc_samples_images is None else mc_samples_images
    return {
        "icnlm": {"tabular": dict(tab), "images": dict(img), "posterior_tabular": dict(post_tab),
                  "posterior_images": dict(post_img), "n_features": 10},
        "icnlm-tanh": {"tabular": dict(tab, activation="tanh"), "images": dict(img, activation="tanh"),
                       "posterior_tabular": dict(post_tab), "posterior_images": dict(post_img), "n_features": 10},
        "mc-dropout": {"tabular": dict(tab), "images": dict(img), "dropout": 0.05, "n_samples": mc_samples,
                       "n_samples_images": mc_samples_images},
        "mdn": {"tabular": dict(tab), "images": dict(img, epochs=mdn_img_epochs), "n_components": mdn_components},
        "deterministic": {"tabular": dict(tab), "images": dict(img)},
        "naive": {},
    }


PAPER_METHODS = _methods(_TABULAR, _IMAGES_PAPER, dict(_POSTERIOR, nuts_samples=300, nuts_warmup=300),
                         dict(_POSTERIOR, nuts_samples=200, nuts_warmup=200, device="cpu"),
                         mc_samples=1000, mdn_components=50, mdn_img_epochs=10, mc_samples_images=50)
_SMOKE_POSTERIOR = dict(_POSTERIOR, vi_max_iter=800, vi_min_iter=400, nuts_samples=40, nuts_warmup=40,
                        grid_size=128, n_draws=100)
# the smoke presets leave out icnlm-tanh (the icnlm path with another activation; tested on its own)
SMOKE_METHODS = {k: v for k, v in _methods(
    dict(lr=1e-3, batch_size=32, min_steps=60, min_epochs=2), dict(_IMAGES, epochs=2), _SMOKE_POSTERIOR,
    _SMOKE_POSTERIOR, mc_samples=50, mdn_components=5, mdn_img_epochs=2).items() if k != "icnlm-tanh"}


def data_kind(dataset: str) -> str:
    """"images" for the driving sets, "tabular" otherwise."""
    return "images" if dataset in DRIVING else "tabular"


def _n_splits(dataset: str) -> int:
    """Splits a preset with ``splits=None`` runs: driving's one episode-wise split, UCI's first
    ``len(UCI_SPLITS)`` standard splits (the paper preset's budget, see the notes)."""
    return 1 if dataset in DRIVING else len(UCI_SPLITS)


def _unavailable(preset: Preset) -> dict[str, str]:
    """UCI sets that are neither local nor downloadable; driving sets when gymnasium or Box2D
    (the recorder, also needed to read its cache: the key holds their versions) is missing."""
    out = uci_unavailable(d for d in preset.datasets if d not in DRIVING)
    for name in preset.datasets:
        if name in DRIVING:
            missing = [m for m in ("gymnasium", "Box2D") if importlib.util.find_spec(m) is None]
            if missing:
                out[name] = f"{' and '.join(missing)} not installed (pip install 'dubito[driving]')"
    return out


# ---------------------------------------------------------------------------------- data


@dataclasses.dataclass
class _Data:
    """One split and what every method of it is evaluated with (identical across methods)."""

    X_tr: np.ndarray
    y_tr: np.ndarray
    X_te: np.ndarray
    y_te: np.ndarray
    kind: str
    image_shape: tuple | None
    center: float                 # the naive learner's constant
    thresholds: np.ndarray        # (t_I, t_II), mapped
    raw: bool                     # also the paper's raw 6 / 2 degrees
    sub: np.ndarray               # test subsample for the expensive metrics and artefacts
    train_sub: np.ndarray         # training subsample for the in-sample marginal calibration
    grid: np.ndarray              # y-grid of the marginal calibration plots
    edges: np.ndarray             # histogram bins of the test responses
    nu: np.ndarray                # variance thresholds of the error-variance curve
    facts: dict


def _load(dataset: str, split: int, seed: int) -> _Data:

    if dataset in DRIVING:
        ds = load("driving", n_frames=DRIVING[dataset], seed=0, progress=False)
        image_shape = tuple(int(v) for v in ds.meta["frame_shape"])
        center = 0.0
    else:
        ds = load(dataset)
        image_shape = None
    X_tr, y_tr, X_te, y_te = ds.split(int(split))
    if dataset not in DRIVING:
        center = float(y_tr.mean())
    rng = np.random.default_rng([int(seed), int(split), 7])
    sub = np.sort(rng.choice(len(y_te), size=min(EXPENSIVE_POINTS, len(y_te)), replace=False))
    train_sub = np.sort(rng.choice(len(y_tr), size=min(TRAIN_POINTS, len(y_tr)), replace=False))
    lo, hi = float(ds.y.min()), float(ds.y.max())  # the whole data set: the same grid for every split
    pad = 0.1 * (hi - lo)
    grid = np.linspace(lo - pad, hi + pad, GRID_POINTS)
    edges = np.linspace(lo - pad, hi + pad, HIST_BINS + 1)
    nu = np.linspace(0.0, 2.0 * float(np.var(ds.y)), NU_POINTS)
    thresholds = matched_thresholds(y_tr, center)
    facts = dict(n_train=int(len(y_tr)), n_test=int(len(y_te)), n_features=int(X_tr.shape[1]),
                 naive_center=center, thresholds_mapped=[float(t) for t in thresholds],
                 expensive_points=int(len(sub)), train_points=int(len(train_sub)),
                 splits=str(ds.meta.get("splits", "")))
    if dataset in DRIVING:
        facts.update(frames=DRIVING[dataset], frame_shape=list(image_shape), recording_seed=0)
    return _Data(X_tr, y_tr, X_te, y_te, data_kind(dataset), image_shape, center, thresholds, dataset in DRIVING,
                 sub, train_sub, grid, edges, nu, facts)


# ---------------------------------------------------------------------------------- evaluation


def _r(a, digits: int = 6) -> list:
    return np.round(np.asarray(a, dtype=np.float64), digits).tolist()


def _point_metrics(point: np.ndarray, d: _Data) -> dict[str, float]:

    err = d.y_te - point
    out = {"mae": float(np.mean(np.abs(err))), "mse": float(np.mean(err**2))}
    out["acc_I"], out["acc_II"] = (float(a) for a in accuracy(point, d.y_te, d.thresholds))
    if d.raw:
        out["acc_6"], out["acc_2"] = (float(a) for a in accuracy(point, d.y_te, PAPER_THRESHOLDS))
    return out


def _evaluate(pred, d: _Data, pred_train=None) -> tuple[dict[str, float], dict[str, Any]]:
    """Metrics of one variant and its artefact pieces (see the module docstring)."""
    from scipy.stats import spearmanr

    y = d.y_te
    mean, var = np.asarray(pred.mean, dtype=np.float64), np.asarray(pred.var, dtype=np.float64)
    out = _point_metrics(mean, d)
    out["nll"] = float(np.mean(nll(pred, y)))
    small = pred if len(d.sub) == len(y) else pred[d.sub]
    out["crps"] = float(np.mean(crps(small, y[d.sub])))
    u = pit(pred, y)
    lv = np.asarray(LEVELS)
    cov = ((u[None, :] >= (1 - lv[:, None]) / 2) & (u[None, :] <= (1 + lv[:, None]) / 2)).mean(axis=1)
    wid = width(small, lv)
    for level, c, w in zip(LEVELS, cov, wid):
        out[f"coverage_{level_key(level)}"] = float(c)
        out[f"width_{level_key(level)}"] = float(w)
    out["coverage_error"] = float(np.mean(np.abs(cov - lv)))
    out["coverage_error_max"] = float(np.max(np.abs(cov - lv)))
    out["calibration_error"] = float(calibration_error(pred, y))
    out["marginal_calibration_gap"] = float(marginal_calibration(pred, y).max_gap)
    if pred_train is not None:
        out["train_marginal_gap"] = float(marginal_calibration(pred_train, d.y_tr[d.train_sub]).max_gap)
    out["mean_var"] = float(np.mean(var))
    out["var_ratio"] = out["mse"] / float(np.mean(var))
    sq = (y - mean) ** 2
    if np.ptp(var) > 0:
        out["ev_spearman"] = float(spearmanr(var, sq).statistic)

    curve = error_variance_curve(pred, y, d.nu)
    share = error_variance_curve(pred, y, np.quantile(var, SHARES))
    mc = marginal_calibration(pred, y, grid=d.grid[:: max(1, len(d.grid) // 100)])
    density = np.asarray(small.pdf(d.grid[None, :]), dtype=np.float64).mean(axis=0)
    art = {
        "pit": _r(u[d.sub[:PIT_POINTS]], 5),
        "density": _r(density),
        "cdf_gap": _r(mc.forecast - mc.empirical),
        "coverage": _r(cov), "width": _r(wid),
        "mse_nu": _r(curve.mse), "kept_nu": _r(curve.kept, 5), "mse_share": _r(share.mse),
    }
    return out, art


def _artefacts(d: _Data, pieces: dict[str, dict]) -> dict[str, Any]:
    """The cell's artefacts in the layouts of `report_plots` from each variant's pieces."""
    counts, _ = np.histogram(d.y_te, bins=d.edges)
    stride = max(1, len(d.grid) // 100)
    return {
        "pit": {v: p["pit"] for v, p in pieces.items()},
        "marginal_density": {"grid": _r(d.grid), "hist_edges": _r(d.edges), "hist_counts": counts.tolist(),
                             "variants": {v: p["density"] for v, p in pieces.items()}},
        "marginal_cdf_gap": {"grid": _r(d.grid[::stride]), "variants": {v: p["cdf_gap"] for v, p in pieces.items()}},
        "coverage_levels": {"levels": list(LEVELS),
                            "variants": {v: {"coverage": p["coverage"], "width": p["width"]} for v, p in pieces.items()}},
        "error_variance": {"nu": _r(d.nu), "share": list(SHARES),
                           "variants": {v: {"mse_nu": p["mse_nu"], "kept_nu": p["kept_nu"],
                                            "mse_share": p["mse_share"]} for v, p in pieces.items()}},
    }


# ---------------------------------------------------------------------------------- methods


def _net_kwargs(s: dict, d: _Data) -> dict:
    """Training settings of a network estimator for this data (tabular: epochs from min_steps)."""
    k = dict(s[d.kind])
    if d.kind == "images":
        k["image_shape"] = d.image_shape
        return k
    steps, min_epochs = int(k.pop("min_steps")), int(k.pop("min_epochs"))
    per_epoch = math.ceil(len(d.y_tr) / int(k["batch_size"]))
    k["epochs"] = max(min_epochs, math.ceil(steps / per_epoch))
    return k


def _run_icnlm(d: _Data, s: dict, device: str, progress: bool, random_state: int):
    import warnings

    post = dict(s[f"posterior_{d.kind}"])
    post_device = post.pop("device", device)  # posteriors may run on the CPU beside a GPU network
    net = _net_kwargs(s, d)
    common = dict(post, device=device, random_state=random_state, progress=progress)
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # validation_fraction=0: the paper's protocol trains the network on every training row
        est = ImplicitCopulaRegressor(prior="ridge", inference="vi", n_features=int(s["n_features"]),
                                      validation_fraction=0.0, **net, **common).fit(d.X_tr, d.y_tr)
    fit_wall = time.perf_counter() - t0
    net_seconds = fit_wall - float(est.posterior_.diagnostics.get("seconds", 0.0))
    psi_tr = est.train_features_
    psi_te = est.features(d.X_te)
    dead = np.asarray(est.dead_features_, dtype=int)
    live = np.setdiff1d(np.arange(psi_tr.shape[1]), dead)

    variants, pieces, diag, posterior = {}, {}, {}, {}
    for name in ICNLM_VARIANTS:
        _, prior, inference = name.split()
        inference = inference.lower()
        t1 = time.perf_counter()
        if prior == "ridge" and inference == "vi" and dead.size == 0:
            model, seconds = est, float(est.posterior_.diagnostics.get("seconds", 0.0))
        else:
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                model = ImplicitCopulaRegressor.from_features(psi_tr[:, live], d.y_tr, prior=prior,
                                                              inference=inference,
                                                              **dict(common, device=post_device))
            caught.extend(w)
            seconds = time.perf_counter() - t1
        pred = model.predict_distribution(features=psi_te[:, live])
        pred_tr = model.predict_distribution(features=psi_tr[d.train_sub][:, live])
        variants[name], pieces[name] = _evaluate(pred, d, pred_tr)
        variants[name]["fit_seconds"] = net_seconds + seconds
        variants[name]["posterior_seconds"] = seconds
        pq = model.posterior_
        if pq.q is not None:
            m, sd = pq.q.mean, pq.q.variance().sqrt()
            mean, sd = m.detach().cpu().numpy(), sd.detach().cpu().numpy()
        else:
            summ = pq.summary()
            mean = np.array([summ[k]["mean"] for k in pq.names])
            sd = np.array([summ[k]["sd"] for k in pq.names])
        posterior[name] = {"names": list(pq.names), "mean": _r(mean), "sd": _r(sd)}
        g = pq.diagnostics
        if inference == "vi":
            diag[name] = dict(iterations=int(g["iterations"]), converged=bool(g["converged"]),
                              seconds=float(g["seconds"]))
        else:
            diag[name] = dict(rhat_max=float(np.max(g["rhat"])), ess_bulk_min=float(np.min(g["ess_bulk"])),
                              divergences=int(np.sum(g["divergences"])), seconds=float(g["seconds"]),
                              draws=int(pq.theta.shape[0]))

    # the paper's "DNN on z, mapped back (No Bayes)": F_Y^{-1}(Phi(zhat)), zhat the net's own output
    no_bayes_note = None
    try:
        zhat = est._predict_output(est._standardise(d.X_te))
        point = np.asarray(est.marginal_.inverse_pseudo_response(zhat), dtype=np.float64)
        variants[NO_BAYES] = _point_metrics(point, d)
        variants[NO_BAYES]["fit_seconds"] = net_seconds
    except (AttributeError, NotImplementedError, TypeError, ValueError) as exc:  # a network without that head
        no_bayes_note = f"not computed: {type(exc).__name__}: {exc}"
    info = dict(
        network={**{k: (list(v) if isinstance(v, tuple) else v) for k, v in net.items()},
                 "n_features": int(s["n_features"])},
        posterior_settings=post, net_seconds=net_seconds, dead_features=dead.tolist(),
        final_train_loss=float(est.loss_curve_[-1]), diagnostics=diag, posterior=posterior,
        warnings=sorted({str(w.message).split("\n")[0][:200] for w in caught}),
    )
    if no_bayes_note:
        info["no_bayes"] = no_bayes_note
    return variants, pieces, info


def _run_icnlm_tanh(d: _Data, s: dict, device: str, progress: bool, random_state: int):
    """The IC-NLM cell with tanh features (``s`` carries activation="tanh"); variants get TANH appended."""
    variants, pieces, info = _run_icnlm(d, s, device, progress, random_state)
    info["diagnostics"] = {k + TANH: v for k, v in info["diagnostics"].items()}
    info["posterior"] = {k + TANH: v for k, v in info["posterior"].items()}
    return {k + TANH: v for k, v in variants.items()}, {k + TANH: v for k, v in pieces.items()}, info


def _run_mc_dropout(d: _Data, s: dict, device: str, progress: bool, random_state: int):

    net = _net_kwargs(s, d)
    t0 = time.perf_counter()
    n_samples = int(s.get("n_samples_images", s["n_samples"]) if d.kind == "images" else s["n_samples"])
    est = MCDropoutRegressor(dropout=float(s["dropout"]), n_samples=n_samples, noise="residual", **net,
                             validation_fraction=0.0, device=device, random_state=random_state, progress=progress).fit(d.X_tr, d.y_tr)
    fit = time.perf_counter() - t0
    masks = est.sample_masks()
    draws = est.predict_draws(d.X_te, masks=masks)
    draws_tr = est.predict_draws(d.X_tr[d.train_sub], masks=masks)
    sigma = math.sqrt(est.noise_var_)
    variants, pieces = {}, {}
    for name, kw in ((MC_PAPER, {}), (MC_NOISE, {"noise_std": sigma})):
        variants[name], pieces[name] = _evaluate(Samples(draws, **kw), d, Samples(draws_tr, **kw))
        variants[name]["fit_seconds"] = fit
    info = dict(network={k: (list(v) if isinstance(v, tuple) else v) for k, v in net.items()},
                n_masks=int(draws.shape[0]), dropout=float(s["dropout"]), noise_sd=sigma,
                final_train_loss=float(est.loss_curve_[-1]))
    return variants, pieces, info


def _run_network(cls_name: str, variant: str, extra: dict):
    def run(d: _Data, s: dict, device: str, progress: bool, random_state: int):

        net = _net_kwargs(s, d)
        kw = {k: s[k] for k in extra if k in s}
        t0 = time.perf_counter()
        est = getattr(reg, cls_name)(**kw, **net, validation_fraction=0.0, device=device, random_state=random_state,
                                     progress=progress).fit(d.X_tr, d.y_tr)
        fit = time.perf_counter() - t0
        m, art = _evaluate(est.predict_distribution(d.X_te), d, est.predict_distribution(d.X_tr[d.train_sub]))
        m["fit_seconds"] = fit
        info = dict(network={k: (list(v) if isinstance(v, tuple) else v) for k, v in {**net, **kw}.items()},
                    final_train_loss=float(est.loss_curve_[-1]))
        return {variant: m}, {variant: art}, info
    return run


def _run_naive(d: _Data, s: dict, device: str, progress: bool, random_state: int):

    t0 = time.perf_counter()
    est = NaiveRegressor(strategy="constant", constant=d.center).fit(d.X_tr, d.y_tr)
    fit = time.perf_counter() - t0
    m, art = _evaluate(est.predict_distribution(d.X_te), d, est.predict_distribution(d.X_tr[d.train_sub]))
    m["fit_seconds"] = fit
    return {"Naive": m}, {"Naive": art}, dict(center=d.center, noise_var=float(est.noise_var_))


_RUNNERS = {
    "icnlm": _run_icnlm,
    "icnlm-tanh": _run_icnlm_tanh,
    "mc-dropout": _run_mc_dropout,
    "mdn": _run_network("MixtureDensityRegressor", "MDN", ("n_components",)),
    "deterministic": _run_network("DeterministicRegressor", "Deterministic", ()),
    "naive": _run_naive,
}


def run_cell(cell, device: str = "cpu", progress: bool = False) -> CellResult:
    """One (dataset, method, split): fit, evaluate every variant on the test set (module docstring)."""
    import torch

    if cell.method not in _RUNNERS:
        raise ValueError(f"unknown method {cell.method!r} for icnlm; available: {', '.join(_RUNNERS)}")
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1") or 1))
    t0 = time.perf_counter()
    d = _load(cell.dataset, cell.split, cell.seed)
    t1 = time.perf_counter()
    random_state = network_seed(cell.seed, cell.split)
    variants, pieces, info = _RUNNERS[cell.method](d, dict(cell.settings), device, progress, random_state)
    t2 = time.perf_counter()
    info = {**d.facts, **info, "random_state": random_state, "seconds": dict(load=t1 - t0, fit_and_evaluate=t2 - t1)}
    return CellResult(variants=variants, artefacts=_artefacts(d, pieces), info=info)


# ---------------------------------------------------------------------------------- paper

#: Table 1 (small comma2k19 validation set, n = 10,472): MAE, MSE, Accuracy I, II (%).
TABLE1 = {
    "Naive": (2.16, 14.61, 93.21, 65.12),
    "Deterministic": (1.42, 6.43, 98.19, 79.61),
    "IC-NLM ridge NUTS": (1.34, 6.28, 98.08, 82.22),
    "IC-NLM ridge VI": (1.34, 6.28, 98.08, 82.21),
    "IC-NLM horseshoe NUTS": (1.29, 5.67, 98.21, 82.75),
    "IC-NLM horseshoe VI": (1.29, 5.66, 98.21, 82.73),
    "MC dropout": (1.41, 6.35, 98.37, 80.08),
    "MDN": (1.36, 6.63, 98.16, 81.91),
}
TABLE1_NOTE = "not comparable (comma2k19 wheel degrees vs CarRacing road-wheel degrees; spec §5); no tolerance"


def _paper_numbers() -> tuple[PaperNumber, ...]:
    out = []
    for variant, (mae, mse, acc1, acc2) in TABLE1.items():
        src = "Table 1" + (" (HMC)" if "NUTS" in variant else "")
        for metric, value in (("mae", mae), ("mse", mse), ("acc_I", acc1 / 100), ("acc_II", acc2 / 100)):
            note = TABLE1_NOTE
            if metric.startswith("acc"):
                note = f"paper: {value * 100:.2f} % at {'6' if metric == 'acc_I' else '2'} deg, ours at the mapped " \
                       f"threshold; {TABLE1_NOTE}"
            out.append(PaperNumber("driving", variant, metric, value, None, None, src, note))
    return tuple(out)


METRICS = (
    MetricSpec("mae", "MAE", "lower"),
    MetricSpec("mse", "MSE", "lower"),
    MetricSpec("acc_I", "Accuracy I (mapped t_I)", "higher", "share of |error| <= t_I (see the notes)"),
    MetricSpec("acc_II", "Accuracy II (mapped t_II)", "higher", "share of |error| <= t_II"),
    MetricSpec("acc_6", "Accuracy at 6 deg (raw)", "higher", "driving only"),
    MetricSpec("acc_2", "Accuracy at 2 deg (raw)", "higher", "driving only"),
    MetricSpec("nll", "NLL", "lower", "not reported by the paper"),
    MetricSpec("crps", "CRPS", "lower", "not reported by the paper; on <= 1,000 test points"),
    MetricSpec("marginal_calibration_gap", "marginal calibration gap (test)", "lower",
               "sup_t |mean_i F_i(t) - G_n(t)| (claim 4)"),
    MetricSpec("train_marginal_gap", "marginal calibration gap (train)", "lower", "in-sample (C2)"),
    MetricSpec("calibration_error", "PIT calibration error", "lower", "mean |PIT ECDF - p| (claim 5)"),
    MetricSpec("coverage_error", "coverage error (11 levels)", "lower", "mean |coverage - level| (claim 6)"),
    MetricSpec("coverage_95", "coverage 95 %", "closer to 0.95"),
    MetricSpec("width_95", "width 95 %", "lower", "read with coverage; on <= 1,000 test points"),
    MetricSpec("var_ratio", "MSE / mean variance", "closer to 1", "> 1: overconfident (claim 7)"),
    MetricSpec("ev_spearman", "rank corr(variance, squared error)", "higher", "error-variance relation (claim 7)"),
    MetricSpec("fit_seconds", "fit seconds", "lower", "network + posterior"),
)


NOTES = f"""\
What is compared (spec §3-§5). The paper's comma2k19 data cannot be had here; `driving` is the
CarRacing-v3 substitute (`dubito.data.driving`, 30,000 frames, seed 0, episode-wise split 0: whole
episodes in train or test), the image task of spec §5; `yacht`, `energy`, `concrete`, `boston`
(standard splits 0 and 1; skewed or multimodal responses, where a nonparametric marginal matters)
add tabular evidence with MLPs. One network per method and cell; the four IC-NLM posteriors share
the network trained on z (spec §3.2).

Thresholds. The paper's Accuracy I/II count |y - yhat| <= 6 and <= 2 steering-wheel degrees of
comma2k19 (the code's inclusive <=; the text says < 6, spec §7.12). Our units differ (road-wheel
degrees on driving, the data's own units on UCI), so t_I, t_II are mapped per split: the smallest
thresholds at which the naive learner reaches the paper's naive accuracies (93.21 %, 65.12 %) on
the training responses (`dubito.metrics.matched_thresholds`; the naive learner predicts 0 on
driving, as the paper, and the training mean on UCI). On driving the raw 6 and 2 degrees are
reported too (acc_6, acc_2): our road-wheel angle lies within +-22.9 deg, a steering wheel turns
about 15 times as far, so 6 road-wheel degrees is a much looser tolerance than the paper's.
The mapped thresholds of each split are in the cells' info (thresholds_mapped).

Settings. Images: the paper's Adam 2.5e-4 and batch 32 (spec §2.2/§3.3 [C]). {IMAGES_NOTE}
VI the paper's k = 3, M = 50, at least 10,000 and at most 14,000 iterations with the ELBO stopping rule
(the authors ran a fixed 12,000-19,000; our rule alone stopped at 2,600-9,600). {TABULAR_NOTE} NUTS 300 warm-up + 300 draws x 2
chains on UCI: the horseshoe's funnel makes NUTS the cost of the UCI part (yacht split 0 at 500 +
500: 377 s for the horseshoe with 59 divergences, 99 s for ridge, VI 27 s and 39 s, the network
11 s, on a shared 2-core machine), and the budget of the UCI part is 40 CPU minutes. NUTS stands in for the
paper's HMC (fixed step, unit mass); it adapts its step and a dense mass matrix. MC dropout: 1,000
masks, p = 0.05 (spec §3.3); "MC dropout" is the paper's predictive (a KDE of the draws, no noise
term), "MC dropout + noise" adds the residual noise variance. The deterministic net is N(f(x),
residual variance); the paper gives it no distribution, so only its point metrics are the paper's.

Metrics not in the paper: NLL and CRPS. CRPS and interval widths are computed on a fixed random
subsample of at most {EXPENSIVE_POINTS} test points per split (the same for every method; the exact
CRPS of a 1,000-draw mixture costs O(S^2) per point); coverage is read from the PIT values on all
test points (the same as interval coverage for a continuous predictive). The marginal calibration
plot averages the predictive densities of that subsample; the in-sample gap (C2) uses at most
{TRAIN_POINTS} training rows.

Table 1 is shown beside our driving numbers without tolerances or flags: the absolute numbers need
comma2k19 and the authors' PilotNet (spec §5, "not checkable"). The claims of the paper are checked
below from the stored numbers.

How the rows were made. All on the CPU of a shared 2-core machine, one torch thread per process
(load average 2-5 from other work), with `DUBITO_DATA=../shared/data/uci OMP_NUM_THREADS=1 dubito
bench icnlm --preset paper` and the cells listed below:
- IC-NLM, both feature kinds (`--methods icnlm,icnlm-tanh`, 18 cells): commit 13862a1, 5.4 h of cell
  wall time (driving 72 and 69 min, a UCI cell 2-60 min by the load).
- UCI baselines (MC dropout, MDN, deterministic, naive; 32 cells): commit 3bc8dce (the baselines'
  code is the same as at 13862a1).
- Driving baselines (4 cells): commit 64f2c50, 40 min.
No GPU was used (none was left when the driving cells ran); the driving settings are cut as above.

Findings (one driving split, two splits per UCI set; read with the claims below).
- **With the paper's ReLU features the IC-NLM predicts worse than its own network.** Driving: MAE
  1.69-1.71 and MSE 5.43-5.63 for all four posteriors, against 0.99 / 2.05 for the same network's
  output mapped back ("DNN on z (No Bayes)") and 0.94-0.98 / 1.91-2.06 for the deterministic net, MC
  dropout and MDN; the paper has the IC-NLM best (Table 1). The same holds on every UCI set (energy:
  MSE 2.4-3.4 against 0.29). Not the inference (VI and NUTS agree), not the discarded head: least
  squares of z on the features without an intercept fits as well as the network (training R^2 of
  split 0: energy 0.998 / 0.998, concrete 0.963 / 0.961, boston 0.984 / 0.984 for psi / network).
  The cause is the model: z_i = s_i (psi_i' beta + eps_i) with s_i = (1 + psi_i' P^-1 psi_i)^(-1/2)
  (spec §2.4) ties the conditional mean and spread to ||psi_i|| (spec §7.11), and ReLU features'
  ||psi||^2 varies 4.5-21x between its 5 % and 95 % quantiles (energy 9.5-42.5, concrete 2.1-21.4,
  boston 2.6-56), so the posterior trades the fit of the mean for the spread.
- **tanh features (`icnlm-tanh`, ours; bounded and signed, so ||psi|| varies less) almost close the
  gap.** MAE of the four posteriors against the tanh network's own output mapped back, with the ReLU
  IC-NLM in brackets: driving 1.03-1.05 vs 1.00 (1.69-1.71); yacht 0.28-0.29 vs 0.25 (1.01-1.39);
  energy 0.41-0.53 vs 0.34 (1.04-1.37); concrete 4.18-4.30 vs 3.63 (5.53-5.74); boston 1.95-1.97 vs
  1.80 (3.57-3.79). The paper's PilotNet, trained 60 epochs, may have had features of nearly constant
  norm; our driving CNN trained 10 epochs and has 4 of its 10 ReLU feature units dead.
- **The price of tanh features is overconfidence on UCI.** MSE / mean predictive variance is 1.9
  (concrete), 2.35-2.39 (boston), 1.6-9.3 (yacht; NUTS 6.5-9.3) and about 1 on energy, against
  0.7-1.55 with ReLU features; on driving the predictive stays too wide (0.46-0.61). A test response
  more than 8 conditional sds from the predictive lay outside the grid these rows were tabulated on
  and got density 0, so the NLL column shows non-finite cells: driving (horseshoe) and one or both
  splits of yacht, energy and boston (the estimator's exact `log_density` is finite there). Since
  commit 38c3c5c, after these rows, the grid has sparse tail nodes out to 40 conditional sds
  (module docstring of `dubito.regression.copula`), so a re-run gives finite NLLs for such points.
- **Marginal calibration (claim 4) does not reproduce with ReLU features**: on driving the MDN has the
  smallest test gap (0.033) and the IC-NLM 0.098; only the paper's MC dropout (no noise term, 0.158)
  is worse. On UCI the ReLU IC-NLM is behind MDN everywhere except energy's horseshoe (0.065 against
  0.067). **With tanh features the IC-NLM has the smallest gap on yacht (0.060-0.073 against MDN
  0.087) and boston (0.058-0.061 against 0.078)**, and 0.042-0.063 on driving. Part of the gap is the
  KDE marginal itself on the small skewed UCI sets: sup |F_KDE - G_n| on the training responses of
  split 0 is 0.19 (yacht), 0.08 (energy), 0.04 (boston), 0.02 (concrete), and 0.01 on the 30,000
  driving angles (normal-reference bandwidth, spec §2.1).
- **Probabilistic calibration (claim 5)** holds on all four UCI sets (both VI variants below MC dropout
  and MDN) but not on driving, where MDN (0.018) beats the IC-NLM (0.060-0.064; with tanh features
  0.022). MC dropout without a noise term is the worst calibrated and the most overconfident method on
  driving (95 % intervals cover 0.48; MSE / variance 6.0), as the paper says (claims 6, 7); with the
  residual noise added it is among the better ones.
- **Error against variance (claim 7)**: ranked by the MSE of the 20 % most confident test points
  relative to all, MDN is best and the horseshoe IC-NLM second, then ridge, then MC dropout, on driving
  (0.16, 0.42, 0.53, 0.76), concrete and energy, as the paper; not on boston and yacht.
- **VI against NUTS (claim 1, C1).** On driving, after the 10,000-iteration minimum, the beta means
  differ by at most 0.09 NUTS sd (ridge: C1 holds) and 0.20 (horseshoe), with VI sd / NUTS sd
  0.93-1.0 and predictive metrics within 0.1 %; with the old minimum of 1,000 iterations (VI stopped
  near 3,000) they differed by 1.09 and 1.64 sds. On UCI the ridge means agree within 0.07 sd on
  boston and concrete but not on energy (0.78) and yacht (1.78), and VI's sds are up to 2-7x too small
  (ratio 0.14-0.46 at the worst coordinate); yacht's VI had already run 11,600-14,000 iterations, so
  there the rank-3 family on collinear ReLU features is the cause, not the stopping rule. The UCI
  horseshoe comparisons (0.35-5.9 sd) are limited by NUTS itself: 69-241 divergent transitions and
  R-hat up to 1.54 with 300 + 300 draws.
- **Runtime (claim 2, C5).** VI is faster than NUTS on every UCI set (NUTS / VI wall time 1.2-6.1x
  ridge, 4.4-5.6x horseshoe) but slower on driving: 639 s and 832 s for 10,000 VI iterations against
  247 s and 330 s for NUTS (200 + 200 draws x 2 chains). Each VI iteration evaluates 50 gradients over
  all n = 24,000 rows on one core (500,000 in all, against NUTS's 35,000-57,000 with an adapted dense
  mass matrix), while the paper compared against fixed-step, unit-mass HMC. On a GPU the VI iteration
  is cheap and the order reverses (docs/results/performance.md). C5 does not hold for this NUTS on a CPU.
"""


# ---------------------------------------------------------------------------------- claims
# The report (`dubito.experiments.report`) calls `report_sections(rows, preset)` after the notes:
# each claim of the paper (spec §4: 1-9) and each check of spec §5 (C1-C7) is evaluated from the
# stored numbers, per data set, as "holds", "does not hold", "partly" or "not checkable here".

_IC_VI = ("IC-NLM ridge VI", "IC-NLM horseshoe VI")
_BENCH = (MC_PAPER, MC_NOISE, "MDN", "Deterministic")


class _Table(CellTable):
    """Means over the stored cells of each (dataset, variant, metric), driving first; cell infos per method."""

    def __init__(self, rows):
        rows = list(rows)
        super().__init__(rows, dict.fromkeys(r.dataset for r in sorted(rows, key=lambda r: (r.dataset not in DRIVING, r.dataset))))

    def share_ratio(self, dataset: str, variant: str, share: float = 0.2) -> float | None:
        """MSE of the ``share`` of test points with the smallest predictive variance over the MSE of
        all, from the "error_variance" artefacts, averaged over cells (lower: the variance ranks the
        errors better; 1: uninformative)."""
        vals = []
        for r in self.rows:
            ev = (r.artefacts or {}).get("error_variance") if r.dataset == dataset else None
            if not ev or variant not in ev.get("variants", {}):
                continue
            shares = np.asarray(ev["share"], dtype=float)
            mse = np.asarray(ev["variants"][variant]["mse_share"], dtype=float)
            k = int(np.argmin(np.abs(shares - share)))
            if np.isfinite(mse[k]) and np.isfinite(mse[-1]) and mse[-1] > 0:
                vals.append(mse[k] / mse[-1])
        return float(np.mean(vals)) if vals else None

    def infos(self, dataset: str, method: str) -> list[dict]:
        return [r.info or {} for r in self.rows if r.dataset == dataset and r.method == method]

    def have(self, dataset: str, variants, metric: str) -> bool:
        return all(self.mean(dataset, v, metric) is not None for v in variants)


def _verdict(flags: list[bool]) -> str:
    return verdict(flags, empty="not checkable here (no cells)")


def _order(t: _Table, ds: str, variants, metric: str, reverse: bool = False) -> str:
    vals = [(v, t.mean(ds, v, metric)) for v in variants if t.mean(ds, v, metric) is not None]
    vals.sort(key=lambda kv: kv[1], reverse=reverse)
    return " < ".join(f"{v} {_f(m)}" for v, m in vals) if not reverse else " > ".join(f"{v} {_f(m)}" for v, m in vals)


def _claim_vi_nuts(t: _Table) -> list[str]:
    """Claim 1 / C1: posterior means (and sds) of VI and NUTS, predictive MAE/MSE."""
    out = []
    for ds in t.datasets:
        parts = []
        for prior in ("ridge", "horseshoe"):
            vi, nuts = f"IC-NLM {prior} VI", f"IC-NLM {prior} NUTS"
            dz, ratios, flags, rhat, div = [], [], [], [], 0
            for info in t.infos(ds, "icnlm"):
                post = info.get("posterior", {})
                if vi not in post or nuts not in post:
                    continue
                names = post[vi]["names"]
                beta = [i for i, n in enumerate(names) if n.startswith("beta")] or list(range(len(names)))
                mv, sv = np.asarray(post[vi]["mean"]), np.asarray(post[vi]["sd"])
                mn, sn = np.asarray(post[nuts]["mean"]), np.asarray(post[nuts]["sd"])
                dz.append(float(np.max(np.abs(mv[beta] - mn[beta]) / np.maximum(sn[beta], 1e-12))))
                ratios.extend((sv[beta] / np.maximum(sn[beta], 1e-12)).tolist())
                d = info.get("diagnostics", {}).get(nuts, {})
                rhat.append(d.get("rhat_max", np.nan))
                div += int(d.get("divergences", 0))
            if not dz:
                continue
            rel = []
            for metric in ("mae", "mse"):
                a, b = t.mean(ds, vi, metric), t.mean(ds, nuts, metric)
                if a is not None and b is not None:
                    rel.append(abs(a - b) / abs(b))
            lo, hi = (min(ratios), max(ratios)) if ratios else (np.nan, np.nan)
            sd_ok = 0.7 <= lo and hi <= 1.4
            flags = [max(dz) <= 0.1, bool(rel) and max(rel) < 0.01]
            parts.append(
                f"{prior}: max over beta of |mean VI - mean NUTS| / sd NUTS = {_f(max(dz))} (C1: <= 0.1), "
                f"sd ratio VI/NUTS {_f(lo, 2)}-{_f(hi, 2)} ({'within' if sd_ok else 'outside'} [0.7, 1.4]), "
                f"predictive MAE/MSE differ by at most {_f(100 * max(rel) if rel else np.nan, 2)} % (C1: < 1 %); "
                f"NUTS max R-hat {_f(np.nanmax(rhat), 4)}, {div} divergent transitions -> **{_verdict(flags)}**")
        if parts:
            out.append(f"  - {ds}: " + "; ".join(parts) + ".")
    return out


def _claim_runtime(t: _Table) -> tuple[list[str], list[str]]:
    """Claim 2 (VI quick; HMC autocorrelated under the horseshoe) and C5 (VI's advantage vs n)."""
    c2, c5 = [], []
    for ds in t.datasets:
        infos = t.infos(ds, "icnlm")
        if not infos:
            continue
        per = {}
        for prior in ("ridge", "horseshoe"):
            vs = [i["diagnostics"][f"IC-NLM {prior} VI"]["seconds"] for i in infos
                  if f"IC-NLM {prior} VI" in i.get("diagnostics", {})]
            ns = [i["diagnostics"][f"IC-NLM {prior} NUTS"] for i in infos
                  if f"IC-NLM {prior} NUTS" in i.get("diagnostics", {})]
            its = [i["diagnostics"][f"IC-NLM {prior} VI"]["iterations"] for i in infos
                   if f"IC-NLM {prior} VI" in i.get("diagnostics", {})]
            if vs and ns:
                per[prior] = dict(vi=float(np.mean(vs)), nuts=float(np.mean([n["seconds"] for n in ns])),
                                  it=float(np.mean(its)),
                                  ess=float(np.mean([n["ess_bulk_min"] / max(n.get("draws", 1), 1) for n in ns])))
        if len(per) < 2:
            continue
        n = int(np.mean([i.get("n_train", 0) for i in infos]))
        faster = all(p["vi"] < p["nuts"] for p in per.values())
        autocorr = per["horseshoe"]["ess"] < per["ridge"]["ess"]
        c2.append(
            f"  - {ds} (n = {n}): VI {_f(per['ridge']['vi'])} s / {per['ridge']['it']:.0f} iterations (ridge), "
            f"{_f(per['horseshoe']['vi'])} s / {per['horseshoe']['it']:.0f} (horseshoe) against NUTS "
            f"{_f(per['ridge']['nuts'])} s and {_f(per['horseshoe']['nuts'])} s; NUTS min bulk ESS per draw "
            f"{_f(per['ridge']['ess'], 2)} (ridge) vs {_f(per['horseshoe']['ess'], 2)} (horseshoe) -> "
            f"VI faster: **{'holds' if faster else 'does not hold'}**; horseshoe chains more autocorrelated: "
            f"**{'holds' if autocorr else 'does not hold'}**.")
        c5.append((n, ds, per["ridge"]["nuts"] / per["ridge"]["vi"], per["horseshoe"]["nuts"] / per["horseshoe"]["vi"]))
    lines5 = []
    if c5:
        c5.sort()
        lines5.append("  - NUTS / VI wall-time ratio by n (ridge, horseshoe): " + "; ".join(
            f"{ds} n = {n}: {_f(r)}x, {_f(h)}x" for n, ds, r, h in c5) + ".")
        if len({n for n, *_ in c5}) >= 3:
            from scipy.stats import spearmanr

            rho = spearmanr([n for n, *_ in c5], [r for _, _, r, _ in c5]).statistic
            larger = np.mean([h > r for _, _, r, h in c5])
            grows = bool(rho > 0)
            lines5.append(f"  - Rank correlation of n and the ridge ratio {_f(rho, 2)}; the horseshoe ratio is the "
                          f"larger in {larger:.0%} of the data sets -> VI's advantage grows with n: "
                          f"**{'holds' if grows else 'does not hold'}** (different data sets, not one set at "
                          "several n: indicative only; NUTS is not the paper's fixed-step HMC, and the UCI "
                          "NUTS runs are half as long as the driving ones).")
        else:
            lines5.append("  - Fewer than three sizes n: **not checkable here**.")
    return c2, lines5


def _claim_compare(t: _Table, metric: str, better_than=(MC_PAPER, "MDN"), ic=ICNLM_VARIANTS) -> list[str]:
    """Claims 4, 5: every IC-NLM variant better (lower) than each benchmark in ``better_than``."""
    out = []
    for ds in t.datasets:
        ics = [v for v in ic if t.mean(ds, v, metric) is not None]
        bench = [v for v in better_than if t.mean(ds, v, metric) is not None]
        if not ics or not bench:
            continue
        worst_ic = max(t.mean(ds, v, metric) for v in ics)
        flags = [worst_ic < t.mean(ds, b, metric) for b in bench]
        order = _order(t, ds, [*ics, *[v for v in _BENCH if t.mean(ds, v, metric) is not None]], metric)
        out.append(f"  - {ds}: {order} -> **{_verdict(flags)}**"
                   + ("" if len(bench) == len(better_than) else f" (only {', '.join(bench)} run)") + ".")
    return out


def _claim_accuracy(t: _Table) -> list[str]:
    """Claim 3 / C4: horseshoe beats ridge on MAE and MSE (VI and NUTS)."""
    out = []
    for ds in t.datasets:
        flags, parts = [], []
        for inf in ("VI", "NUTS"):
            r, h = f"IC-NLM ridge {inf}", f"IC-NLM horseshoe {inf}"
            for metric in ("mae", "mse"):
                a, b = t.mean(ds, r, metric), t.mean(ds, h, metric)
                if a is None or b is None:
                    continue
                flags.append(b < a)
                parts.append(f"{metric.upper()} {inf} {_f(a)} (ridge) vs {_f(b)} (horseshoe)")
        if parts:
            out.append(f"  - {ds}: " + ", ".join(parts) + f" -> **{_verdict(flags)}**.")
    return out


def _claim_coverage(t: _Table) -> list[str]:
    """Claim 6: coverage error ridge < MDN < horseshoe; MC dropout the worst."""
    out = []
    for ds in t.datasets:
        r, h, m, mc = "IC-NLM ridge VI", "IC-NLM horseshoe VI", "MDN", MC_PAPER
        if not t.have(ds, (r, h, m, mc), "coverage_error"):
            continue
        e = {v: t.mean(ds, v, "coverage_error") for v in (r, h, m, mc, MC_NOISE, "Deterministic")
             if t.mean(ds, v, "coverage_error") is not None}
        flags = [e[r] < e[m], e[m] < e[h], e[mc] == max(e[v] for v in (r, h, m, mc))]
        out.append(f"  - {ds}: mean |coverage - level| " + ", ".join(f"{v} {_f(x)}" for v, x in sorted(e.items(), key=lambda kv: kv[1]))
                   + f" -> ridge < MDN: {flags[0]}, MDN < horseshoe: {flags[1]}, MC dropout worst of the four: "
                   f"{flags[2]} -> **{_verdict(flags)}**.")
    return out


def _claim_error_variance(t: _Table) -> list[str]:
    """Claim 7: MDN best on error-variance, horseshoe second; MC dropout and ridge overconfident.

    "Best" is read off the sparsification curve (the right panel of the error-variance plot): the
    MSE of the 20 % of test points with the smallest predictive variance relative to the MSE of all
    (`_Table.share_ratio`; lower is better). Overconfident: MSE / mean predictive variance > 1."""
    out = []
    for ds in t.datasets:
        cand = ("MDN", "IC-NLM horseshoe VI", "IC-NLM ridge VI", MC_PAPER)
        ratio = {v: t.share_ratio(ds, v) for v in cand}
        if any(x is None for x in ratio.values()) or not t.have(ds, cand, "var_ratio"):
            continue
        rank = sorted(cand, key=lambda v: ratio[v])
        flags = [rank[0] == "MDN", rank[1] == "IC-NLM horseshoe VI",
                 t.mean(ds, MC_PAPER, "var_ratio") > 1.0, t.mean(ds, "IC-NLM ridge VI", "var_ratio") > 1.0]
        spear = ", ".join(f"{v} {_f(t.mean(ds, v, 'ev_spearman'))}" for v in cand if t.mean(ds, v, "ev_spearman") is not None)
        out.append(f"  - {ds}: MSE of the 20 % most confident points / MSE of all "
                   + " < ".join(f"{v} {_f(ratio[v])}" for v in rank)
                   + "; MSE / mean variance " + ", ".join(f"{v} {_f(t.mean(ds, v, 'var_ratio'))}" for v in cand)
                   + f" (rank correlation of variance and squared error: {spear}) -> MDN best: {flags[0]}, "
                   f"horseshoe second: {flags[1]}, MC dropout overconfident (> 1): {flags[2]}, ridge overconfident: "
                   f"{flags[3]} -> **{_verdict(flags)}**.")
    return out


def _claim_in_sample(t: _Table) -> list[str]:
    """C2: in-sample marginal calibration of the IC-NLM small (< 0.02) and better than MDN, MC dropout."""
    out = []
    for ds in t.datasets:
        ics = [v for v in ICNLM_VARIANTS if t.mean(ds, v, "train_marginal_gap") is not None]
        if not ics:
            continue
        worst = max(t.mean(ds, v, "train_marginal_gap") for v in ics)
        others = {v: t.mean(ds, v, "train_marginal_gap") for v in (MC_PAPER, "MDN") if t.mean(ds, v, "train_marginal_gap") is not None}
        flags = [worst < 0.02] + [worst < x for x in others.values()]
        out.append(f"  - {ds}: IC-NLM in-sample gap at most {_f(worst)} (C2 example: < 0.02); "
                   + ", ".join(f"{v} {_f(x)}" for v, x in others.items()) + f" -> **{_verdict(flags)}**.")
    return out


def _claim_c3(t: _Table) -> list[str]:
    out = []
    for ds in t.datasets:
        vals = {v: t.mean(ds, v, "coverage_error_max") for v in ICNLM_VARIANTS if t.mean(ds, v, "coverage_error_max") is not None}
        if vals:
            flags = [x <= 0.03 for x in vals.values()]
            out.append(f"  - {ds}: max over the 11 levels of |coverage - level| " + ", ".join(
                f"{v} {_f(x)}" for v, x in vals.items()) + f" -> **{_verdict(flags)}** (C3's 0.03 is meant for "
                "well-specified synthetic data; on a test set of n points the sampling sd of a coverage is "
                "about sqrt(c(1-c)/n)).")
    return out


def _missing(rows, preset) -> list[str]:
    return missing_lines(EXPERIMENT, rows, preset, "claims below use only the stored ones",
                         bench_flags=lambda ds: " --device cuda" if ds in DRIVING else "")


def _thresholds_table(rows) -> list[str]:
    """The mapped Accuracy I/II thresholds of every stored (dataset, split), from the cells' info."""
    seen = {}
    for r in sorted(rows, key=lambda r: (r.dataset not in DRIVING, r.dataset, r.split, r.seed)):
        t = (r.info or {}).get("thresholds_mapped")
        if t and (r.dataset, r.split, r.seed) not in seen:
            seen[(r.dataset, r.split, r.seed)] = (t, (r.info or {}).get("naive_center"), (r.info or {}).get("n_train"))
    if not seen:
        return []
    table = ["| dataset | split | n train | naive c | t_I (paper: 6 deg) | t_II (paper: 2 deg) |", "|---|---:|---:|---:|---:|---:|"]
    for (ds, split, _seed), (t, c, n) in seen.items():
        table.append(f"| {ds} | {split} | {n} | {_f(c, 4)} | {_f(t[0], 4)} | {_f(t[1], 4)} |")
    return section("Accuracy thresholds",
                   "The paper's 6 and 2 degrees mapped to each split (`matched_thresholds`): the smallest t_I, t_II at "
                   "which the naive learner's constant c reaches 93.21 % and 65.12 % on the training responses, in the "
                   "data's units.", table)


def report_sections(rows, preset) -> list[str]:
    """Markdown after the notes: missing cells, then the paper's claims (spec §4: 1-9) and the
    spec's checks (§5: C1-C7), each evaluated from the stored numbers per data set."""
    t = _Table(rows)
    c2, c5 = _claim_runtime(t)
    nc = "not checkable here (no cells stored yet)"

    def block(title: str, lines: list[str], how: str = "") -> list[str]:
        return claim_block(title, lines, how, empty=nc)

    out = ["## Cells", "", *_missing(rows, preset), "", *_thresholds_table(rows), "## The paper's claims, checked", "",
           "Each claim (spec §4) and check (spec §5) is evaluated per data set from the means over the stored "
           "cells (splits); driving is the paper's kind of task, the UCI sets are further evidence. "
           "\"partly\": some of the claim's parts (or data sets' splits) hold, others not.", ""]
    out += block("Claim 1 / C1 — VI and HMC give near-identical posterior means; predictive metrics unaffected.",
                 _claim_vi_nuts(t), "(VI against NUTS on the same features)")
    out += block("Claim 2 — VI converges quickly; HMC is autocorrelated under the horseshoe.", c2)
    out += block("Claim 3 / C4 — the horseshoe beats ridge on point accuracy.", _claim_accuracy(t))
    out += block("Claim 4 / C6 — the IC-NLM has the best marginal calibration; MC dropout and MDN are not "
                 "marginally calibrated.", _claim_compare(t, "marginal_calibration_gap"),
                 "(test-set gap sup_t |mean F_i(t) - G_n(t)|; holds when every IC-NLM variant is below MC dropout "
                 "and MDN)")
    out += block("Claim 5 — the IC-NLM has the best probabilistic calibration (both priors).",
                 _claim_compare(t, "calibration_error", ic=_IC_VI),
                 "(PIT calibration error; holds when both VI variants are below MC dropout and MDN, the paper's "
                 "benchmarks; our extra variants are listed for comparison)")
    out += block("Claim 6 — coverage is most accurate for IC-NLM ridge, then MDN, then IC-NLM horseshoe; MC dropout "
                 "is unreliable.", _claim_coverage(t))
    out += block("Claim 7 / C6 — on error vs variance MDN is best and IC-NLM horseshoe second; MC dropout and "
                 "IC-NLM ridge are overconfident.", _claim_error_variance(t),
                 "(best: the lowest MSE of the 20 % of points with the smallest predictive variance relative to "
                 "the MSE of all, from the error-variance curve; MSE / mean variance > 1 read as overconfident)")
    out += ["- **Claim 8 / C7 — only the IC-NLM puts mass on the second branch at a road fork.** Not checkable "
            "here: CarRacing tracks are closed loops without forks or junctions, so no frame has a bimodal "
            "steering conditional of that kind.",
            "- **Claim 9 — large-data results are similar.** Not checkable here: Appendix C is missing from the "
            "text and we run one driving size (30,000 frames); the spec's large-data numbers come from the "
            "authors' notebooks, on comma2k19."]
    out += block("C2 — in-sample marginal calibration is small and better than MDN and MC dropout.",
                 _claim_in_sample(t))
    out += block("C3 — coverage error <= 0.03 at all 11 levels.", _claim_c3(t))
    out += block("C5 — VI's advantage over HMC grows with n.", c5)
    out.append("")
    return out


EXPERIMENT = Experiment(
    name="icnlm",
    title="IC-NLM (Hoffmann & Klein): marginally calibrated steering predictions against MC dropout, MDN and "
    "a deterministic net",
    paper=PAPER,
    presets={
        "smoke": Preset(
            name="smoke",
            description="test of the pipeline (about a minute): yacht split 0, tiny networks and posteriors",
            datasets=("yacht",),
            methods=SMOKE_METHODS,
            seeds=(0,),
            splits=(0,),
        ),
        "smoke-driving": Preset(
            name="smoke-driving",
            description="test of the image path: 1,000 driving frames (4 episodes), 2 epochs, tiny posteriors",
            datasets=("driving-1k",),
            methods=SMOKE_METHODS,
            seeds=(0,),
            splits=(0,),
        ),
        "paper": Preset(
            name="paper",
            description="driving (30,000 CarRacing frames, CNNs, episode-wise split 0) and UCI yacht, energy, "
            "concrete, boston (splits 0-1, MLPs); IC-NLM x {ridge, horseshoe} x {VI, NUTS} with the paper's ReLU "
            "features and with tanh features (ours), MC dropout, MDN, deterministic, naive",
            datasets=("driving", *UCI),
            methods=PAPER_METHODS,
            seeds=(0,),
            splits=None,  # driving: split 0; UCI: splits 0-1 (_n_splits)
        ),
    },
    metrics=METRICS,
    paper_numbers=_paper_numbers(),
    run_cell=run_cell,
    n_splits=_n_splits,
    unavailable=_unavailable,
    notes=NOTES,
    report_sections=report_sections,
)
