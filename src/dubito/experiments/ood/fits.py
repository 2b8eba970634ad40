"""Method -> fitted estimator (HyVI / MFVI, MC dropout, the ensemble, NUTS), seen through the
estimators' own ``sample_functions`` and ``sample_parameters``."""

from __future__ import annotations

import inspect
import math
import shutil
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from dubito._estimator import seeds_from
from dubito.experiments.ood.data import _Data
from dubito.experiments.ood.formulas import mc_dropout_weight_decay
from dubito.experiments.ood.vocab import HYVI, VARIANT
from dubito.methods import build, get_method

# ---------------------------------------------------------------------------------- fitted methods


@dataclass
class _Fit:
    """A fitted method: ``model.sample_functions(X, n, random_state=seed)`` gives one fixed set of
    n predictors at the rows of X, (n', N) (n' = n, or the ensemble's members / the NUTS draws
    available), the same set for any X; ``model.sample_parameters(n, random_state=seed)`` their
    weights, (n', d) (none for MC dropout). Units: the split's standardised ones (the estimators'
    internal scaling is the identity there, up to rounding; not on ood-wave, see NOTES)."""

    model: Any
    lpp_kind: str          # "mixture" | "gaussian"
    seconds: float
    epochs: float
    info: dict

    def predictors(self, n: int, seed: int) -> Callable[[np.ndarray], np.ndarray]:
        return lambda X: self.model.sample_functions(X, n, random_state=seed)

    def params(self, n: int, seed: int) -> np.ndarray | None:
        sample = getattr(self.model, "sample_parameters", None)
        return None if sample is None else np.asarray(sample(n, random_state=seed))


class _MemberEnsemble:
    """The paper's "Ensemble": MSE-trained members, each one predictor (``n`` and the seed do not
    choose among them); its parameters are the members' weight vectors in their internal
    standardised units (= ours up to float rounding: our data are standardised already with the
    same statistics; not so on ood-wave)."""

    def __init__(self, members):
        self.members = members

    def sample_functions(self, X, n_samples=None, *, random_state=None) -> np.ndarray:
        return np.stack([m.predict(X) for m in self.members])

    def sample_parameters(self, n_samples=None, *, random_state=None) -> np.ndarray:
        return np.stack([torch.cat([p.detach().double().flatten() for p in m.net_.parameters()]).cpu().numpy()
                         for m in self.members])


def _curve(a, n: int = 200) -> list[float]:
    a = np.asarray(a, dtype=np.float64).ravel()
    if a.size > n:
        a = a[np.round(np.linspace(0, a.size - 1, n)).astype(int)]
    return np.round(a, 6).tolist()


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
    info = dict(loss_curve=_curve(est.loss_curve_), lr_curve=_curve(est.lr_curve_),
                min_knn_distance=_curve(getattr(est, "min_knn_distance_", [])), n_params=int(est.n_params_),
                patience=patience, family=family, space=space, resumed=bool(resumed))
    return _Fit(est, "mixture", seconds, float(est.n_epochs_), info)


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

    info = dict(loss_curve=_curve(est.loss_curve_), weight_decay=wd, batch_size=batch, mask_mode="shared",
                weight_decay_C=0.1 / math.sqrt(math.floor(10 * n / 9)))
    # one mask = one network, shared by all rows: `sample_functions` (mask_mode below)
    return _Fit(est, "gaussian", seconds, float(s["epochs"]), info)


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

    info = dict(optimizer="sgd" if sgd else "adam", final_losses=[float(m.loss_curve_[-1]) for m in members],
                n_members=len(members))
    return _Fit(_MemberEnsemble(members), "gaussian", seconds, float(s["epochs"]), info)


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
    g = est.diagnostics_
    info = dict(draws=int(est.samples_.shape[0] * est.samples_.shape[1]), max_rhat=float(g["max_rhat"]), min_ess=float(g["min_ess"]),
                divergences=int(np.sum(g["divergences"])), step_size=np.asarray(g["step_size"]).ravel().tolist(),
                nuts_seconds=float(np.sum(g["seconds"])) if np.ndim(g["seconds"]) else float(g["seconds"]),
                warnings=sorted({str(w.message).split("\n")[0][:200] for w in caught}))
    return _Fit(est, "mixture", seconds, float(int(s["num_warmup"]) + int(s["num_samples"])), info)


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
