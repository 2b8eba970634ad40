"""Saving and loading a fitted `MCDropoutClassifier` (``save`` / ``load`` through ``_state`` /
``_from_state`` of `dubito._estimator.DubitoClassifier`; no pickle). `DeepEnsembleClassifier` and
`KFACLaplace` store their models with the same two functions, under a prefix.

``est.save(path)`` writes one ``.safetensors`` file (`dubito.io`): the network's ``state_dict``
(``net.*``), the input scaling, loss / validation curves and rate history as tensors, the
constructor settings and fitted scalars (K, seeds, rates, best epoch, stopped by, ...) as JSON
metadata (files written before validated fitting load with their ``val_nll_curve`` as
``validation_curve_`` and ``stopped_by_ = "cap"``); ``MCDropoutClassifier.load(path)`` rebuilds
the network from the settings and loads the weights, so the loaded model predicts bit-identically
(same ``random_state``, same device). A user network (an nn.Module or callable) is not JSON:
``save`` stores its weights and class name, and ``load`` needs the architecture back,
``load(path, network=module_or_callable)`` (the same module or callable that was passed at
construction; its weights are replaced by the saved ones, the argument itself is not changed);
loading such a file without ``network`` raises ValueError.
"""

from __future__ import annotations

import numpy as np
import torch

from dubito import io
from dubito._estimator import check_stored_size
from dubito._validation import check_fitted
from dubito.classification.networks import _is_module_network

__all__ = ["mc_dropout_from_state", "mc_dropout_state"]

_FITTED_TENSORS = ("x_mean_", "x_scale_", "loss_curve_", "validation_curve_", "rate_history_")


def mc_dropout_state(est) -> tuple[dict[str, torch.Tensor], dict]:
    """(tensors, settings) of a fitted `MCDropoutClassifier` ``est``: what `save` writes (also used
    by `DeepEnsembleClassifier` and `KFACLaplace`, under a prefix). A user network's weights are
    saved with its class name; `load` then needs ``network=`` (module docstring)."""
    check_fitted(est, ["net_"])
    if getattr(est, "wrapped_", False):
        raise ValueError("this model was made by MCDropoutClassifier.wrap and not fitted: it is your torch module as "
                         "is, so save that (torch.save(model.state_dict())) and wrap it again after loading "
                         "(wrapping trains nothing); or fit it first, then save")
    # clone: a module registered twice (a wrapped head) shares storage, which safetensors refuses
    tensors = {f"net.{k}": v.detach().clone() for k, v in est.net_.state_dict().items()}
    for name in _FITTED_TENSORS:
        tensors[name.rstrip("_")] = torch.as_tensor(np.asarray(getattr(est, name), dtype=np.float64))
    user = _is_module_network(est.network)
    fitted = dict(
        **est._common_fitted(),
        **est._training_fitted(),
        n_classes=int(est.n_classes_),
        classes=[int(c) for c in est.classes_],
        image_shape=None if est.image_shape_ is None else [int(d) for d in est.image_shape_],
        predict_seed=int(est.predict_seed_),
        dropout_rates=[float(r) for r in est.dropout_rates_],
        user_network=type(est.network).__name__ if user else None,
    )
    return tensors, {"params": est._json_params(), "fitted": fitted}


def mc_dropout_from_state(cls, tensors: dict, settings: dict, *, device=None, where: str = "", network=None):
    """The `MCDropoutClassifier` (``cls``) rebuilt from `mc_dropout_state`'s output (`load`).
    ``network`` is required for (and only accepted with) a model saved with a user network: the same
    nn.Module or callable as at construction (the saved weights replace its own in a copy)."""
    with io.rebuilding(where, cls.__name__):
        params = io.params_from_json(settings["params"], device=device)
        fitted = settings["fitted"]
        user_name = fitted.get("user_network")
        if user_name is not None:
            if network is None:
                raise ValueError(
                    f"{where} holds a model with a user network ({user_name}), which a file cannot rebuild: pass the "
                    f"architecture, {cls.__name__}.load(path, network=<the {user_name} module or callable>)")
            if not _is_module_network(network):
                raise ValueError(f"network must be a torch nn.Module or a callable returning one, got {network!r}")
            params["network"] = network
        elif network is not None:
            raise ValueError(f"{where} holds a built-in {params.get('network')!r} network; load it without network=")
        est = cls(**params)
        s = est._settings()
        p, k = est._restore_common(fitted), int(fitted["n_classes"])
        if user_name is None:  # a built-in network (`build_network`): its head, and an MLP's feature layer
            head = (*s["hidden"], k) if s["hidden"] else (1, k)
            check_stored_size(tensors, "net.", (p, s["features"], *head) if s["network"] == "mlp" else head)
        elif k > sum(int(t.numel()) for name, t in tensors.items() if name.startswith("net.")):
            raise RuntimeError(f"the settings claim {k} classes, more than the numbers the file's network holds")
        classes = fitted.get("classes")  # files before scikit-learn's labels: 0..K-1
        est.classes_ = np.arange(k) if classes is None else np.asarray(classes, dtype=np.int64)
        if est.classes_.shape != (k,) or (k > 1 and np.any(np.diff(est.classes_) <= 0)):
            raise RuntimeError(f"the saved classes are not {k} distinct sorted labels")
        est.n_classes_ = k
        est.image_shape_ = None if fitted["image_shape"] is None else tuple(int(d) for d in fitted["image_shape"])
        if "validation_curve" not in tensors and "val_nll_curve" in tensors:  # a file from before issue 19
            tensors = dict(tensors, validation_curve=tensors["val_nll_curve"])
        for name in _FITTED_TENSORS:
            if name != "validation_curve_":
                setattr(est, name, tensors[name.rstrip("_")].double().numpy())
        if est.x_mean_.shape != (p,) or est.x_scale_.shape != (p,):
            raise ValueError(f"{where} is a {cls.__name__} file with inconsistent tensor shapes (corrupted?)")
        # files written before validated fitting do not say why training ended: "cap"
        est._restore_training(fitted, tensors, len(est.loss_curve_))
        est.predict_seed_ = int(fitted["predict_seed"])
        est.dropout_rates_ = [float(r) for r in fitted["dropout_rates"]]
        with cls._rng(0, torch.device("cpu")):  # the init is overwritten; keep the caller's RNG as it was
            net = est._build(s, p, k)
        # one forward as at fit (sets the dropout layers' lazily found unit counts)
        est._check_output(net, np.zeros((2, p)), k, dict(s, device=torch.device("cpu")))
        state = {name[len("net."):]: v for name, v in tensors.items() if name.startswith("net.")}
        net.load_state_dict(state, strict=True)
        est.net_ = net.to(s["device"]).eval()
    return est
