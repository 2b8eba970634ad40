"""The persistence hooks of `HyperVIRegressor`: what ``save`` writes and ``load`` reads back.

`hyper_vi_state` / `hyper_vi_from_state` are the estimator's ``_state`` / ``_from_state``
(`dubito._estimator.DubitoEstimator` writes them as one safetensors file with JSON settings, no
pickle). Tensors: q's state dict (``family.*``), the scaling, the curves (``loss_curve``,
``lr_curve``, ``min_knn_distance``, ``validation_curve``) and ν's box (``box_low``, ``box_high``,
standardised inputs). JSON: ``params`` (the constructor settings; ``ood_box`` in the user's units)
and ``fitted`` (the common and training records, ``predict_seed``, ``n_epochs``, ``noise_std``).
Files written before validated fitting load with ``validation_fraction=0``, their ``patience``
read as ``lr_patience``, and ``stopped_by_`` "min_lr" or "cap" from their lr curve; files without
``noise_std`` in ``fitted`` take the ``noise_std`` setting.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from dubito import io
from dubito._estimator import fitted_number
from dubito.data.ood_box import UniformBox
from dubito.nn.flat_mlp import FlatMLP

__all__ = ["hyper_vi_from_state", "hyper_vi_state"]


def hyper_vi_state(est) -> tuple[dict[str, torch.Tensor], dict]:
    """(tensors, settings) of a fitted `HyperVIRegressor` (its ``_state``; module docstring)."""
    box = None if est.ood_box is None else est._user_box(est.n_features_in_)
    params = io.json_params(est, generator_hidden=[int(h) for h in est._settings()["generator_hidden"]],
                            ood_box=None if box is None else [box.low.tolist(), box.high.tolist()])
    fitted = dict(est._common_fitted(), **est._training_fitted(), predict_seed=int(est.predict_seed_),
                  n_epochs=int(est.n_epochs_), noise_std=float(est.noise_std_))
    tensors = {f"family.{k}": v for k, v in est.family_.state_dict().items()}
    tensors.update(est._scaling_tensors())
    for key in ("loss_curve", "lr_curve", "min_knn_distance", "validation_curve"):
        tensors[key] = torch.as_tensor(np.asarray(getattr(est, key + "_"), dtype=np.float64))
    tensors["box_low"] = torch.as_tensor(est.ood_box_.low)
    tensors["box_high"] = torch.as_tensor(est.ood_box_.high)
    return tensors, {"params": params, "fitted": fitted}


def hyper_vi_from_state(cls, tensors, settings, *, device=None):
    """The `HyperVIRegressor` (class ``cls``) rebuilt from `hyper_vi_state`'s output (its
    ``_from_state``); ``device`` overrides the saved device setting."""
    fitted, params = settings["fitted"], dict(settings["params"])
    if "validation_fraction" not in params:  # written before validated fitting: fitted on every row, and
        params["lr_patience"] = params.pop("patience", 30)  # "patience" was the plateau schedule's
        params["validation_fraction"] = 0.0
    est = cls(**io.params_from_json(params, tuples=("generator_hidden", "ood_box"), device=device))
    s = est._settings()
    p = est._restore_common(fitted)
    est.net_ = FlatMLP(p, s["hidden"], s["activation"])
    est.n_params_ = est.net_.n_params
    family = est._make_family(s, est.n_params_, None)
    family.load_state_dict({k[len("family."):]: v for k, v in tensors.items() if k.startswith("family.")})
    for q in family.parameters():
        q.requires_grad_(False)
    est.family_ = family.to(s["device"]).eval()
    est._restore_scaling(tensors, fitted, p)
    est.loss_curve_, est.lr_curve_ = tensors["loss_curve"].numpy(), tensors["lr_curve"].numpy()
    est.min_knn_distance_ = tensors["min_knn_distance"].numpy()
    est.ood_box_ = UniformBox(tensors["box_low"].numpy(), tensors["box_high"].numpy())
    if est.ood_box_.n_features != p:
        raise RuntimeError(f"inconsistent tensor shapes: the box has {est.ood_box_.n_features} features, not {p}")
    est.n_epochs_ = int(fitted["n_epochs"])
    est.predict_seed_ = int(fitted["predict_seed"])
    est.noise_std_ = (fitted_number(fitted, "noise_std", positive=True) if "noise_std" in fitted
                      else float(s["noise_std"]))
    stopped_by = fitted.get("stopped_by")
    if stopped_by is None:  # an older file: the schedule or the cap ended it, as its lr curve says
        last_lr = float(est.lr_curve_[-1]) if est.lr_curve_.size else math.inf
        stopped_by = "min_lr" if last_lr <= s["min_lr"] * (1 + 1e-9) else "cap"
    est._restore_training({**fitted, "stopped_by": stopped_by}, tensors, est.n_epochs_)
    est.diagnostics_ = est._diagnostics()
    return est
