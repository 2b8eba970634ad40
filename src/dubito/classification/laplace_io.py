"""Saving and loading a fitted `KFACLaplace` (``save`` / ``load`` through ``_state`` /
``_from_state`` of `dubito._estimator.DubitoClassifier`; no pickle).

``la.save(path)`` writes one ``.safetensors`` file (`dubito.io`, atomically): the factors A and G
of each sampled layer (``A.<i>``, ``G.<i>``, in the order of ``layers_``), the model's weights, and
as JSON metadata the constructor settings and the fitted scalars (layer names, N, s, τ, δ, seeds,
...). ``KFACLaplace.load(path)`` rebuilds the Cholesky factors from A and G exactly as ``fit`` does,
so the loaded posterior predicts bit-identically (same device). A fitted `MCDropoutClassifier`
model is saved whole (its ``_state``, under ``model.``) and rebuilt from the file. A torch module
is not JSON: its ``state_dict`` is saved (``net.*``) with its class name, and ``load(path,
network=module_or_callable)`` needs the architecture back (a copy of the module, or the callable's
result, gets the saved weights; the argument is not changed). A corrupted, truncated or foreign
file raises one ValueError.
"""

from __future__ import annotations

import copy

import numpy as np
import torch
from torch import nn

from dubito import io
from dubito._estimator import fitted_number
from dubito._validation import check_fitted
from dubito.classification.laplace_layers import _Layer
from dubito.classification.mc_dropout import MCDropoutClassifier

__all__ = ["laplace_from_state", "laplace_state", "module_from"]


def laplace_state(est) -> tuple[dict[str, torch.Tensor], dict]:
    """(tensors, settings) of a fitted `KFACLaplace` ``est`` and its model (module docstring). The
    model must be a torch module or an `MCDropoutClassifier`; a module's architecture is not saved
    (`load` needs ``network=``)."""
    check_fitted(est, ["layers_"])
    m = est.model
    if isinstance(m, nn.Module):
        # clone: a module registered twice shares storage, which safetensors refuses
        tensors = {f"net.{k}": v.detach().clone() for k, v in m.state_dict().items()}
        model = {"kind": "module", "class": type(m).__name__}
    elif type(m) is MCDropoutClassifier:
        mt, ms = m._state()
        tensors = {f"model.{k}": v for k, v in mt.items()}
        model = {"kind": "mc_dropout", "settings": ms}
    else:
        raise ValueError(f"KFACLaplace.save supports a torch nn.Module or an MCDropoutClassifier model, got "
                         f"{type(m).__name__}")
    for i, name in enumerate(est.layers_):
        tensors[f"A.{i}"] = est.A_[name]
        tensors[f"G.{i}"] = est.G_[name]
    common = (est._common_fitted() if hasattr(est, "n_features_in_")
              else dict(n_features_in=None, feature_names_in=io.feature_names_json(est)))
    fitted = dict(
        **common,
        layers=list(est.layers_),
        n_fit=int(est.n_fit_),
        n_classes=int(est.n_classes_),
        scale=float(est.scale_),
        damping=float(est.damping_),
        delta=float(est.delta_),
        log_likelihood=None if est.log_likelihood_ is None else float(est.log_likelihood_),
        log_marginal_likelihood=(None if est.log_marginal_likelihood_ is None
                                 else float(est.log_marginal_likelihood_)),
        predict_seed=int(est.predict_seed_),
        image_shape=None if est.image_shape_ is None else [int(d) for d in est.image_shape_],
        dtype=str(est._dtype).removeprefix("torch."),
    )
    return tensors, {"params": io.json_params(est, model=None), "fitted": fitted, "model": model}


def laplace_from_state(cls, tensors: dict, settings: dict, *, device=None, where: str = "", network=None):
    """The `KFACLaplace` (``cls``) rebuilt from `laplace_state`'s output (`load`): the Cholesky
    factors are recomputed from A and G exactly as ``fit`` does. ``network`` (an nn.Module or a callable
    returning one) is needed for a file whose model was a torch module (and passed on to
    `MCDropoutClassifier.load` for one with a user network)."""
    with io.rebuilding(where, cls.__name__):
        params = io.params_from_json(settings["params"], device=device)
        fitted, saved = settings["fitted"], settings["model"]
        if saved["kind"] == "mc_dropout":
            mt = {k[len("model."):]: v for k, v in tensors.items() if k.startswith("model.")}
            model = MCDropoutClassifier._from_state(mt, saved["settings"], device=device, network=network,
                                                    where=f"{where} (model)")
            net = model.net_
        elif saved["kind"] == "module":
            net = model = module_from(network, saved["class"], where)
            state = {k[len("net."):]: v for k, v in tensors.items() if k.startswith("net.")}
            own = net.state_dict()
            wrong = [k for k, v in state.items() if k in own and own[k].dtype != v.dtype]
            if wrong:
                raise ValueError(f"{where} holds {wrong[0]} as {state[wrong[0]].dtype} but the network passed has "
                                 f"{own[wrong[0]].dtype}: pass the architecture in the dtype it was fitted in")
            net.load_state_dict(state, strict=True)
        else:
            raise ValueError(f"{where} is a {cls.__name__} file with an unknown model kind {saved['kind']!r}")
        est = cls(**dict(params, model=model))
        s = est._settings()
        dev = s["device"]
        net.to(dev)
        est._dtype = next(net.parameters()).dtype
        if str(est._dtype).removeprefix("torch.") != fitted["dtype"]:
            raise ValueError(f"{where}: the model was fitted in {fitted['dtype']} but rebuilds in {est._dtype}")
        named = dict(net.named_modules())
        layers, factors = [], []
        for i, name in enumerate(fitted["layers"]):
            module = named.get(name)
            if not isinstance(module, nn.Linear):
                raise ValueError(f"{where}: sampled layer {name!r} is not an nn.Linear of the rebuilt model")
            lay = _Layer(name, module)
            # clone: the loaded tensors may map the file, which a later write must not change
            a = tensors[f"A.{i}"].to(device=dev, dtype=torch.float64).clone()
            g = tensors[f"G.{i}"].to(device=dev, dtype=torch.float64).clone()
            q = module.in_features + int(lay.bias)
            if a.shape != (q, q) or g.shape != (module.out_features,) * 2:
                raise ValueError(f"{where} is a {cls.__name__} file with inconsistent tensor shapes (corrupted?): "
                                 f"layer {name!r} needs A {(q, q)} and G {(module.out_features,) * 2}, got "
                                 f"{tuple(a.shape)} and {tuple(g.shape)}")
            layers.append(lay)
            factors.append((a, g))
        if not layers or len([k for k in tensors if k.startswith("A.")]) != len(layers):
            raise ValueError(f"{where} is a {cls.__name__} file whose factors do not match its layers (corrupted?)")
        est.n_fit_ = int(fitted["n_fit"])
        k = int(fitted["n_classes"])
        est.classes_ = np.arange(k)
        est.n_classes_ = k
        est.scale_ = fitted_number(fitted, "scale", positive=True)
        est.damping_ = est.prior_precision_ = fitted_number(fitted, "damping", nonnegative=True)
        est.delta_ = fitted_number(fitted, "delta")
        # files written before the marginal likelihood have neither
        est.log_likelihood_ = fitted.get("log_likelihood")
        est.log_marginal_likelihood_ = fitted.get("log_marginal_likelihood")
        est._evidence = None
        est.predict_seed_ = int(fitted["predict_seed"])
        est.image_shape_ = None if fitted["image_shape"] is None else tuple(int(d) for d in fitted["image_shape"])
        if fitted["n_features_in"] is not None:
            est._restore_common(fitted)
        else:
            io.set_feature_names(est, fitted.get("feature_names_in"))
        est._set_factors(layers, factors)
    return est


def module_from(network, class_name: str, where: str) -> nn.Module:
    """A copy of the module ``network`` (or the module the callable returns) to load weights into."""
    if network is None:
        raise ValueError(f"{where} holds a KFAC posterior over a torch module ({class_name}), whose architecture a "
                         f"file cannot rebuild: pass it, KFACLaplace.load(path, network=<the {class_name} module "
                         "or a callable returning one>)")
    if isinstance(network, nn.Module):
        return copy.deepcopy(network)
    if callable(network) and not isinstance(network, str):
        net = network()
        if isinstance(net, nn.Module):
            return net
        raise ValueError(f"network callable must return a torch nn.Module, got {type(net).__name__}")
    raise ValueError(f"network must be a torch nn.Module or a callable returning one, got {network!r}")
