"""The persistence hooks of `DeepEnsembleRegressor`: what ``save`` writes and ``load`` reads back.

`ensemble_state` / `ensemble_from_state` are the estimator's ``_state`` / ``_from_state``
(`dubito._estimator.DubitoEstimator` writes them as one safetensors file with JSON settings, no
pickle): the members' stacked weights (``net.*``), ``gammas``, the scaling, ``loss_curve`` and
``validation_curve`` as tensors; the constructor settings and the fitted record (the common and
training records, ``lambda_prior``, ``weight_decay``, ``variance_scale``, the resolved ``epochs`` and
``patience``) as JSON. Files of older
versions hold y_mean / y_scale in ``fitted``; before validated fitting they have no held-out record
(every member ran to the cap), before variance scaling no ``variance_scale`` (1), and before
"auto" budgets no resolved ``epochs`` / ``patience`` (the constructor's integers), before the
Student-t components no ``tail_df`` (Gaussian), before ``prior_precision`` none (1: what
``weight_decay=None`` meant then), before ``input_encoding`` none (the raw inputs). A piecewise-linear
input encoding is stored as ``encoding.*`` tensors (`PiecewiseLinearEncoding.to_tensors`).
"""

from __future__ import annotations

import torch

from dubito import io
from dubito._estimator import check_stored_size, fitted_number
from dubito.nn.batched import BatchedGaussianMLP
from dubito.nn.piecewise_linear import PiecewiseLinearEncoding

__all__ = ["ensemble_from_state", "ensemble_state"]


def ensemble_state(est) -> tuple[dict, dict]:
    """(tensors, settings) of a fitted `DeepEnsembleRegressor` (its ``_state``): tensors ``net.*``,
    ``gammas``, the scaling, ``loss_curve``, ``validation_curve``; settings ``params`` and ``fitted``
    (the common and training records, lambda_prior, weight_decay, variance_scale)."""
    fitted = dict(est._common_fitted(), **est._training_fitted(), lambda_prior=est.lambda_prior_,
                  weight_decay=est.weight_decay_, variance_scale=est.variance_scale_, **est._budget_fitted(),
                  input_encoding=est.input_encoding_, encoding_scores=est.encoding_scores_)
    tensors = {f"net.{k}": v for k, v in est.net_.state_dict().items()}
    tensors["gammas"] = torch.as_tensor(est.gammas_, dtype=torch.float64)
    tensors.update(est._scaling_tensors())
    tensors["loss_curve"] = torch.as_tensor(est.loss_curve_, dtype=torch.float64)
    tensors["validation_curve"] = torch.as_tensor(est.validation_curve_, dtype=torch.float64)
    if est.encoding_ is not None:
        tensors.update(est.encoding_.to_tensors("encoding."))
    return tensors, {"params": io.json_params(est), "fitted": fitted}


def ensemble_from_state(cls, tensors, settings, *, device=None):
    """Inverse of `ensemble_state` (the estimator's ``_from_state``, class ``cls``). Files of older versions: y_mean / y_scale in ``fitted``; before
    validated fitting no held-out record (every member ran to the cap). Shapes that do not fit
    together raise RuntimeError (one ValueError from `load`)."""
    fitted = settings["fitted"]
    params = io.params_from_json(settings["params"], device=device)
    params.setdefault("variance_scaling", "none")  # files written before variance scaling
    params.setdefault("tail_df", None)  # files written before the Student-t components: Gaussian
    params.setdefault("prior_precision", 1.0)  # files written before it: weight_decay None meant 1/N
    params.setdefault("input_encoding", "none")  # files written before it: the raw inputs
    est = cls(**params)
    s = est._settings()
    L = s["n_members"]
    stored = L * int(fitted_number(fitted, "draws_per_member", default=1.0, positive=True))  # EnsembleHMCRegressor
    p = est._restore_common(fitted)
    est.input_encoding_ = fitted.get("input_encoding", "none")
    est.encoding_scores_ = fitted.get("encoding_scores", {})
    if est.input_encoding_ not in ("none", "piecewise_linear") or not isinstance(est.encoding_scores_, dict):
        raise RuntimeError(f"input_encoding is {est.input_encoding_!r} (not 'none' or 'piecewise_linear') or its "
                           f"scores are not a mapping ({est.encoding_scores_!r})")
    est.encoding_ = None
    if est.input_encoding_ == "piecewise_linear":
        est.encoding_ = PiecewiseLinearEncoding.from_tensors(tensors, "encoding.")
        if est.encoding_.n_features_in != p:
            raise RuntimeError(f"the input encoding has {est.encoding_.n_features_in} columns, the model {p}")
    p_net = p if est.encoding_ is None else est.encoding_.n_outputs
    check_stored_size(tensors, "net.", (p_net, *s["hidden"], 1), copies=stored)
    gens = [torch.Generator() for _ in range(stored)]  # values overwritten below
    net = BatchedGaussianMLP(stored, p_net, s["hidden"], s["activation"], generators=gens, dtype=torch.float64)
    net.load_state_dict({k[len("net."):]: v for k, v in tensors.items() if k.startswith("net.")}, strict=True)
    est.net_ = net.double().to(s["device"])
    est.gammas_ = tensors["gammas"].double().numpy()
    est._restore_scaling(tensors, fitted, p)
    est.loss_curve_ = tensors["loss_curve"].double().numpy()
    est.lambda_prior_ = fitted_number(fitted, "lambda_prior", nonnegative=True)
    est.weight_decay_ = fitted_number(fitted, "weight_decay", nonnegative=True)
    est.variance_scale_ = fitted_number(fitted, "variance_scale", default=1.0, positive=True)  # files before variance scaling: 1
    est._restore_training(fitted, tensors, len(est.loss_curve_), n_units=L)
    est._restore_budget(fitted, s)
    if not (est.gammas_.shape == (stored,) and est.best_epoch_.shape == (L,)
            and est.validation_curve_.ndim == 2 and est.validation_curve_.shape[1] == L):
        raise RuntimeError("inconsistent tensor shapes")
    return est
