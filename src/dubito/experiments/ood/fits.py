"""Method -> fitted predictors (HyVI / MFVI, MC dropout, the ensemble, NUTS) behind one protocol."""

from __future__ import annotations

import inspect
import math
import shutil
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from dubito._estimator import seeds_from
from dubito.experiments.ood.data import _Data
from dubito.experiments.ood.formulas import mc_dropout_weight_decay
from dubito.experiments.ood.vocab import HYVI, VARIANT
from dubito.methods import build, get_method
from dubito.nn.flat_mlp import FlatMLP

# ---------------------------------------------------------------------------------- fitted methods


@dataclass
class _Fit:
    """A fitted method seen through its predictors (standardised units).

    predictors(n, seed) -> f(X) -> (n', N): one fixed set of n predictors (n' = n, or the
    ensemble's members / the HMC draws available), each shared by all rows of X.
    params(n, seed) -> (n', d) parameter samples or None (MC dropout)."""

    predictors: Callable[[int, int], Callable[[np.ndarray], np.ndarray]]
    params: Callable[[int, int], np.ndarray | None]
    lpp_kind: str          # "mixture" | "gaussian"
    seconds: float
    epochs: float
    info: dict


def _curve(a, n: int = 200) -> list[float]:
    a = np.asarray(a, dtype=np.float64).ravel()
    if a.size > n:
        a = a[np.round(np.linspace(0, a.size - 1, n)).astype(int)]
    return np.round(a, 6).tolist()


def _chunk_rows(n_predictors: int, width: int, budget: int = 1 << 23) -> int:
    return max(1, budget // max(1, n_predictors * width))


def _fit_hyvi(method: str, d: _Data, s: dict, device: str, progress: bool, random_state: int) -> _Fit:

    family, space = HYVI[method]
    patience = int(s["patience"]) * int(s.get("patience_factor", 1))
    est = build(
        "hyvi", space=space, family=family, noise_std=d.sigma_l, prior_sd=float(s["prior_sd"]),
        hidden=int(s["hidden"]),
        activation=s["activation"], latent_dim=int(s["latent_dim"]), generator_hidden=tuple(s["generator_hidden"]),
        n_ll_samples=int(s["n_ll_samples"]), n_kl_samples=int(s["n_kl_samples"]), n_ood_points=int(s["n_points"]),
        lr=float(s["lr"]), lr_factor=float(s["lr_factor"]), lr_patience=patience, min_lr=float(s["min_lr"]),
        max_epochs=int(s["max_epochs"]), batch_size=int(s["batch_size"]), n_predictors=int(s["n_predictors"]),
        ood_box=d.box, standardize=False, validation_fraction=0.0, device=device, random_state=random_state,
        progress=progress, checkpoint_dir=s.get("_checkpoint"))
    t0 = time.perf_counter()
    resumed = est.checkpoint_dir is not None and (Path(est.checkpoint_dir) / "hyper_vi.safetensors").is_file()
    try:
        est.fit(d.X_tr, d.y_tr, resume=est.checkpoint_dir is not None)
    except ValueError as exc:  # a checkpoint of other settings or code (a data error recurs below)
        if not resumed:
            raise
        warnings.warn(f"{method}: checkpoint in {est.checkpoint_dir} not resumable ({exc}); starting afresh",
                      RuntimeWarning, stacklevel=2)
        shutil.rmtree(est.checkpoint_dir, ignore_errors=True)
        resumed = False
        est.fit(d.X_tr, d.y_tr)
    seconds = time.perf_counter() - t0
    if resumed:  # count the interrupted runs' training too (the checkpoint keeps it)
        seconds = max(seconds, est.train_seconds_)
    net = FlatMLP(d.X_tr.shape[1], hidden=int(s["hidden"]), activation=s["activation"])

    def predictors(n, seed):
        theta = torch.as_tensor(est.sample_parameters(n, random_state=seed), dtype=torch.float32)
        rows = _chunk_rows(theta.shape[0], int(s["hidden"]))

        def f(X):
            X = np.asarray(X, dtype=np.float64)
            out = []
            with torch.no_grad():
                for r0 in range(0, X.shape[0], rows):
                    out.append(net(theta, torch.as_tensor(X[r0:r0 + rows], dtype=torch.float32)).double().numpy())
            return np.concatenate(out, axis=1)
        return f

    info = dict(loss_curve=_curve(est.loss_curve_), lr_curve=_curve(est.lr_curve_),
                min_knn_distance=_curve(getattr(est, "min_knn_distance_", [])), n_params=int(est.n_params_),
                patience=patience, family=family, space=space, resumed=bool(resumed))
    return _Fit(predictors, lambda n, seed: np.asarray(est.sample_parameters(n, random_state=seed)), "mixture",
                seconds, float(est.n_epochs_), info)


def _fit_mc_dropout(d: _Data, s: dict, device: str, progress: bool, random_state: int) -> _Fit:

    n = len(d.y_tr)
    batch = n if s.get("full_batch") else int(s["batch_size"])
    # the estimator re-standardises y internally: sigma_l in its units is sigma_l / sd(y_tr)
    sigma_internal = d.sigma_l / float(np.std(d.y_tr))
    wd = mc_dropout_weight_decay(sigma_internal, n, batch)
    est = build("mc-dropout", dropout=float(s["dropout"]), n_samples=int(s["n_predictors"]), noise=float(d.sigma_l),
                hidden=(int(s["hidden"]),), activation=s["activation"], lr=float(s["lr"]), weight_decay=wd,
                batch_size=batch, epochs=int(s["epochs"]), validation_fraction=0.0, device=device,
                random_state=random_state, progress=progress)
    t0 = time.perf_counter()
    est.fit(d.X_tr, d.y_tr)
    seconds = time.perf_counter() - t0

    def predictors(n_pred, seed):
        masks = est.sample_masks(n_pred, random_state=seed)  # one mask = one network, shared by all rows
        return lambda X: est.predict_draws(X, masks=masks)

    info = dict(loss_curve=_curve(est.loss_curve_), weight_decay=wd, batch_size=batch, mask_mode="shared",
                weight_decay_C=0.1 / math.sqrt(math.floor(10 * n / 9)))
    return _Fit(predictors, lambda n_, seed: None, "gaussian", seconds, float(s["epochs"]), info)


def _flat_params(net) -> np.ndarray:

    return torch.cat([p.detach().double().flatten() for p in net.parameters()]).cpu().numpy()


def _fit_ensemble(d: _Data, s: dict, device: str, progress: bool, random_state: int) -> _Fit:

    sgd = "optimizer" in inspect.signature(get_method("deterministic").estimator).parameters and s["optimizer"] == "sgd"
    opt = dict(optimizer="sgd", momentum=float(s["momentum"])) if sgd else {}
    members = []
    t0 = time.perf_counter()
    for seed in seeds_from(random_state, int(s["n_members"])):
        members.append(build("deterministic", hidden=(int(s["hidden"]),), activation=s["activation"],
                             lr=float(s["lr"] if sgd else s["adam_lr"]), batch_size=int(s["batch_size"]),
                             epochs=int(s["epochs"]), validation_fraction=0.0, device=device, random_state=seed,
                             progress=progress, **opt).fit(d.X_tr, d.y_tr))
    seconds = time.perf_counter() - t0

    def predictors(n, seed):
        return lambda X: np.stack([m.predict(X) for m in members])

    def params(n, seed):
        # member weights in each member's internal standardised units (= ours up to float rounding: our
        # data are already standardised with the same statistics; not so on ood-wave)
        return np.stack([_flat_params(m.net_) for m in members])

    info = dict(optimizer="sgd" if sgd else "adam", final_losses=[float(m.loss_curve_[-1]) for m in members],
                n_members=len(members))
    return _Fit(predictors, params, "gaussian", seconds, float(s["epochs"]), info)


def _fit_hmc(d: _Data, s: dict, device: str, progress: bool, random_state: int) -> _Fit:

    est = build("nuts", hidden=(int(s["hidden"]),), activation=s["activation"], num_warmup=int(s["num_warmup"]),
                num_samples=int(s["num_samples"]), num_chains=int(s["num_chains"]), prior_sd=float(s["prior_sd"]),
                noise_sd=float(d.sigma_l), target_accept_prob=float(s["target_accept_prob"]),
                max_tree_depth=int(s["max_tree_depth"]), random_state=random_state, device=device,
                progress=progress)
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est.fit(d.X_tr, d.y_tr)
    seconds = time.perf_counter() - t0
    theta = est.samples_.reshape(-1, est.samples_.shape[-1])[:, :est.n_weights_].cpu().numpy()
    S = theta.shape[0]

    def pick(n, seed):
        if n >= S:
            return np.arange(S)
        return np.sort(np.random.default_rng(seed).choice(S, size=n, replace=False))

    def predictors(n, seed):
        idx = pick(n, seed)
        return lambda X: est.sample_functions(X)[idx]

    g = est.diagnostics_
    info = dict(draws=S, max_rhat=float(g["max_rhat"]), min_ess=float(g["min_ess"]),
                divergences=int(np.sum(g["divergences"])), step_size=np.asarray(g["step_size"]).ravel().tolist(),
                nuts_seconds=float(np.sum(g["seconds"])) if np.ndim(g["seconds"]) else float(g["seconds"]),
                warnings=sorted({str(w.message).split("\n")[0][:200] for w in caught}))
    return _Fit(predictors, lambda n, seed: theta[pick(n, seed)], "mixture", seconds,
                float(int(s["num_warmup"]) + int(s["num_samples"])), info)


def _fit(method: str, d: _Data, s: dict, device: str, progress: bool, random_state: int) -> _Fit:
    if method in HYVI:
        return _fit_hyvi(method, d, s, device, progress, random_state)
    if method == "mc-dropout":
        return _fit_mc_dropout(d, s, device, progress, random_state)
    if method == "deterministic-ensemble":
        return _fit_ensemble(d, s, device, progress, random_state)
    if method == "nuts":
        return _fit_hmc(d, s, device, progress, random_state)
    raise ValueError(f"unknown method {method!r} for ood; available: {', '.join(VARIANT)}")
