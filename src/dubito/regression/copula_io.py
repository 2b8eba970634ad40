"""The persistence hooks of `ImplicitCopulaRegressor`: one safetensors file with JSON metadata (no pickle).

`copula_state` / `copula_from_state` are the estimator's ``_state`` / ``_from_state``; the base's
``save`` / ``load`` (`dubito._estimator.DubitoEstimator`) write them through
`dubito.io.save_tensors` (atomic) and read them by `dubito.io.load_tensors`, which reports a
truncated, garbage or foreign file with one ``ValueError``; inconsistent contents of a readable
file are a ``ValueError`` naming it too.

Tensors (float64 unless said): ``marginal.{grid,pdf,cdf,sf}`` (the fitted `KDEMarginal`'s
tables), ``posterior.theta`` (J, dim), ``posterior.theta_by_chain`` (NUTS), ``posterior.q.{mean,
factor,diag}`` (VI: the fitted factor Gaussian, so ``point_estimate`` works), ``train_features``
(n, p), ``dead_features`` (int64; network path: constant units, kept; wrapped path: dropped units), ``loglik_trace`` (NUTS: the chains' mean copula
log-likelihood per draw, for ``diagnostics_``; absent in older files, then NaN there), and for
the network path ``net.*`` (the MLP's state dict), ``x_mean``, ``x_scale``, ``y_mean``, ``y_scale``,
``loss_curve`` and ``validation_curve`` (`_MLPRegressor._network_tensors`; files written before
y_mean / y_scale were tensors hold them in ``fitted``, and they are read from there).

JSON: ``params`` (constructor settings; ``marginal`` as a KDEMarginal configuration or None,
``image_shape`` as a list), ``fitted`` (feature_source, n_features, n_train, n_features_in,
feature_layer; for the wrapped path feature_where, layer_width and constant_feature -- absent in
files written before ``wrap`` dropped units, which load as the layer's output, all units, no
constant unit; for the network path predict_seed, best_epoch and stopped_by -- absent in files written
before validated fitting, which load as stopped by the cap; variance_scale, absent in files written
before the held-out variance scale, which load with c = 1 and ``variance_scaling="none"``), ``marginal``
(`KDEMarginal.to_state`'s settings) and
``posterior`` (prior, inference, p, names, nu, tau2_fixed, diagnostics, settings, intercept -- absent
in files written before the random intercept, which load without one; numpy arrays
are stored as tagged lists and come back as arrays of their dtype).

A wrapped model's torch module is the user's and is not saved: ``load(path, model=m)``
re-attaches it (`attach_model`, after checking that its feature layer is the saved one). Only a `KDEMarginal` (or the default None) marginal can be saved: a
user-supplied object cannot be rebuilt without pickle.
"""

from __future__ import annotations

import math
import numbers

import numpy as np
import torch

from dubito import io
from dubito._estimator import fitted_number
from dubito._validation import check_fitted
from dubito.inference.vi import FactorGaussian
from dubito.nn.feature_layer import find_feature_layer
from dubito.regression.copula_posterior import CopulaPosterior, layout_dim
from dubito.regression.marginal import KDEMarginal

__all__ = ["attach_model", "copula_from_state", "copula_state"]

STATE_VERSION = 1
_ARRAY_TAG = "__ndarray__"
_KDE_PARAMS = ("bandwidth", "grid_size", "bounds", "min_distinct", "clip")


# ---------------------------------------------------------------- JSON of diagnostics and settings
def _to_json(obj):
    """JSON-able copy: arrays and tensors -> {"__ndarray__": list, "dtype": str}, numpy scalars ->
    Python scalars, tuples -> lists; anything else unknown -> its str (diagnostics are informational)."""
    if isinstance(obj, torch.Tensor):
        obj = obj.detach().cpu().numpy()
    if isinstance(obj, np.ndarray):
        return {_ARRAY_TAG: obj.tolist(), "dtype": str(obj.dtype)}
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, numbers.Integral):
        return int(obj)
    if isinstance(obj, numbers.Real):
        return float(obj)
    if obj is None or isinstance(obj, str):
        return obj
    if isinstance(obj, dict):
        return {str(k): _to_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_to_json(v) for v in obj]
    return str(obj)


def _json_dtype(name) -> np.dtype:
    """The dtype of an array stored as JSON: a plain number type (bool, int, uint, float of at most
    8 bytes, what `_to_json` writes). Anything else, e.g. ``"V1000000000"`` (a crafted file's 1 GB
    record type, issue 22), raises TypeError before numpy allocates it."""
    dtype = np.dtype(str(name))
    if dtype.kind not in "biuf" or dtype.itemsize > 8:
        raise TypeError(f"an array in the file has dtype {str(name)[:40]!r}, not a plain number type")
    return dtype


def _from_json(obj):
    if isinstance(obj, dict):
        if _ARRAY_TAG in obj:
            return np.asarray(obj[_ARRAY_TAG], dtype=_json_dtype(obj["dtype"]))
        return {k: _from_json(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_from_json(v) for v in obj]
    return obj


# ---------------------------------------------------------------- marginal
def _marginal_param(m):
    """The constructor's ``marginal`` setting as JSON: None or a KDEMarginal's configuration."""
    if m is None:
        return None
    if type(m) is not KDEMarginal:
        raise ValueError(
            f"cannot save a model built with marginal={m!r}: only None or a KDEMarginal can be stored without "
            "pickle; refit with marginal=None or a configured KDEMarginal"
        )
    cfg = {k: getattr(m, k) for k in _KDE_PARAMS}
    bw = cfg["bandwidth"]
    cfg["bandwidth"] = bw if isinstance(bw, str) else float(bw)
    if cfg["bounds"] is not None:
        cfg["bounds"] = [None if b is None or math.isinf(float(b)) else float(b) for b in cfg["bounds"]]
    cfg["grid_size"], cfg["min_distinct"], cfg["clip"] = int(cfg["grid_size"]), int(cfg["min_distinct"]), float(cfg["clip"])
    return cfg


def _marginal_from_param(cfg):
    if cfg is None:
        return None
    cfg = dict(cfg)
    if cfg["bounds"] is not None:
        cfg["bounds"] = tuple(cfg["bounds"])
    return KDEMarginal(**cfg)


def _marginal_state(m) -> tuple[dict[str, torch.Tensor], dict]:
    if type(m) is not KDEMarginal or not callable(getattr(m, "to_state", None)):
        raise ValueError(
            f"cannot save the fitted marginal {type(m).__name__}: it is not a KDEMarginal (no to_state(), or a "
            "class that cannot be rebuilt without pickle); fit with marginal=None or a KDEMarginal to save the model"
        )
    arrays, settings = m.to_state()
    return {f"marginal.{k}": torch.from_numpy(np.ascontiguousarray(v, dtype=np.float64)) for k, v in arrays.items()}, settings


# ---------------------------------------------------------------- posterior
def _posterior_state(post: CopulaPosterior) -> tuple[dict[str, torch.Tensor], dict]:
    t = {"posterior.theta": post.theta.detach().cpu().clone()}
    if post.theta_by_chain is not None:
        t["posterior.theta_by_chain"] = post.theta_by_chain.detach().cpu().clone()
    if post.q is not None:
        t.update({f"posterior.q.{k}": v.detach().cpu().clone() for k, v in post.q.to_dict().items()})
    meta = dict(prior=post.prior, inference=post.inference, p=int(post.p), names=list(post.names),
                nu=float(post.nu), tau2_fixed=None if post.tau2_fixed is None else float(post.tau2_fixed),
                diagnostics=_to_json(post.diagnostics), settings=_to_json(post.settings),
                intercept=bool(post.intercept))
    return t, meta


def _posterior_from_state(t: dict, meta: dict, device) -> CopulaPosterior:
    dev = torch.device(device)
    theta = t["posterior.theta"].to(dev, torch.float64)
    by_chain = t.get("posterior.theta_by_chain")
    q = None
    if "posterior.q.mean" in t:
        q = FactorGaussian(*(t[f"posterior.q.{k}"].to(dev, torch.float64) for k in ("mean", "factor", "diag")))
    post = CopulaPosterior(
        prior=str(meta["prior"]), inference=str(meta["inference"]), p=int(meta["p"]), names=list(meta["names"]),
        theta=theta, theta_by_chain=None if by_chain is None else by_chain.to(dev, torch.float64), q=q,
        nu=float(meta["nu"]), tau2_fixed=None if meta["tau2_fixed"] is None else float(meta["tau2_fixed"]),
        diagnostics=_from_json(meta["diagnostics"]), settings=_from_json(meta["settings"]),
        intercept=bool(meta.get("intercept", False)),  # files written before the random intercept: none
    )
    dim = len(post.names)
    ok = (theta.dim() == 2 and theta.shape[1] == dim and post.prior in ("ridge", "horseshoe")
          and dim == layout_dim(post.prior, post.p, post.intercept, post.tau2_fixed))
    if by_chain is not None:
        ok = ok and by_chain.dim() == 3 and by_chain.shape[0] * by_chain.shape[1] == theta.shape[0]
    if q is not None:
        ok = ok and q.mean.shape == (dim,) and q.factor.dim() == 2 and q.factor.shape[0] == dim and q.diag.shape == (dim,)
    if not ok:
        raise ValueError("posterior tensors do not match its parameter names")
    return post


# ---------------------------------------------------------------- the estimator
def copula_state(est) -> tuple[dict[str, torch.Tensor], dict]:
    """(tensors, settings) of a fitted `ImplicitCopulaRegressor` (its ``_state``; see the module docstring)."""
    check_fitted(est, ["posterior_"])
    params = io.json_params(est, marginal=_marginal_param(est.marginal))
    tensors, marginal_settings = _marginal_state(est.marginal_)
    post_t, post_meta = _posterior_state(est.posterior_)
    tensors.update(post_t)
    tensors["train_features"] = torch.from_numpy(np.ascontiguousarray(est.train_features_, dtype=np.float64))
    source = est.feature_source_
    fitted = dict(version=STATE_VERSION, feature_source=source, n_features=int(est.n_features_),
                  n_train=int(est.n_train_), n_features_in=None, feature_names_in=io.feature_names_json(est),
                  variance_scale=float(est.variance_scale_))
    if hasattr(est, "n_features_in_"):  # not for a wrapped model: its input has no fixed width
        fitted.update(est._common_fitted())
    if source == "wrapped":
        fitted.update(feature_layer=str(est.feature_layer_), feature_where=str(est.feature_where_),
                      layer_width=int(est.layer_width_), constant_feature=float(est.constant_feature_))
    if source == "network":
        fitted.update(predict_seed=int(est.predict_seed_), **est._training_fitted(), **est._budget_fitted())
        tensors.update(est._network_tensors())
    if getattr(est, "loglik_trace_", None) is not None:
        tensors["loglik_trace"] = torch.from_numpy(np.ascontiguousarray(est.loglik_trace_, dtype=np.float64))
    if getattr(est, "dead_features_", None) is not None:
        tensors["dead_features"] = torch.as_tensor(np.asarray(est.dead_features_, dtype=np.int64))
    return tensors, {"params": params, "fitted": fitted, "marginal": marginal_settings, "posterior": post_meta}


def _restore_wrapped(est, tensors: dict, fitted: dict) -> None:
    """The wrapped path's layer, dropped units and constant unit. Files written before ``wrap``
    found the layer itself and dropped units hold only ``feature_layer`` (its output, all units,
    no constant unit) and load as such."""
    p = est.n_features_
    est.feature_layer_ = str(fitted["feature_layer"])
    est.feature_where_ = str(fitted.get("feature_where", "output"))
    est.constant_feature_ = float(fitted.get("constant_feature", 0.0))
    est.layer_width_ = int(fitted.get("layer_width", p))
    if not hasattr(est, "dead_features_"):
        est.dead_features_ = np.zeros(0, dtype=np.intp)
    dead = est.dead_features_
    ok = (est.feature_where_ in ("input", "output") and math.isfinite(est.constant_feature_)
          and est.constant_feature_ >= 0 and est.layer_width_ - dead.size + (est.constant_feature_ > 0) == p
          and (dead.size == 0 or (dead.min() >= 0 and dead.max() < est.layer_width_ and np.unique(dead).size == dead.size)))
    if not ok:
        raise ValueError("the wrapped model's feature layer, dropped units and constant unit do not match n_features")


def copula_from_state(cls, tensors: dict, settings: dict, *, device=None, where: str = ""):
    """The estimator rebuilt from `copula_state`'s output (without re-attaching a wrapped model);
    contents that do not fit together raise one ``ValueError`` naming ``where`` (the file)."""
    # fresh (aligned) copies: BLAS results can depend on a buffer's alignment, and predictions
    # after loading must be bit-identical to the saved model's
    tensors = {k: v.clone() for k, v in tensors.items()}
    with io.rebuilding(where, cls.__name__, errors=(KeyError, TypeError, ValueError, RuntimeError, AttributeError)):
        fitted = settings["fitted"]
        if fitted.get("version") != STATE_VERSION:
            raise ValueError(f"unknown {cls.__name__} state version {fitted.get('version')!r}")
        params = io.params_from_json(settings["params"], device=device)
        params["marginal"] = _marginal_from_param(params["marginal"])
        # files written before the random intercept hold the paper's model, without one
        params.setdefault("intercept", bool(settings["posterior"].get("intercept", False)))
        # files written before the held-out variance scale: none (c = 1)
        params.setdefault("variance_scaling", "none")
        est = cls(**params)
        s = est._settings()
        est.marginal_ = KDEMarginal.from_state(
            {k[len("marginal."):]: v for k, v in tensors.items() if k.startswith("marginal.")}, settings["marginal"])
        est.posterior_ = _posterior_from_state(tensors, settings["posterior"], s["device"])
        if est.posterior_.intercept is not bool(est.intercept):
            raise ValueError("the posterior's intercept does not match the intercept setting")
        est.feature_source_ = str(fitted["feature_source"])
        est.n_features_ = int(fitted["n_features"])
        if fitted.get("n_features_in") is not None:
            est._restore_common(fitted)
        else:
            est.n_train_ = int(fitted["n_train"])
            io.set_feature_names(est, fitted.get("feature_names_in"))
        est.train_features_ = tensors["train_features"].double().numpy()
        est.variance_scale_ = fitted_number(fitted, "variance_scale", default=1.0, positive=True)
        if "dead_features" in tensors:
            est.dead_features_ = tensors["dead_features"].numpy().astype(np.intp)
        if est.feature_source_ == "wrapped":
            _restore_wrapped(est, tensors, fitted)
        elif est.feature_source_ == "network":
            # scaling, loss and held-out curves, best epoch and stopped_by (a file written before
            # validated fitting: no held-out curve, stopped by the cap)
            est._restore_network(tensors, fitted, s, int(fitted["n_features_in"]))
            est.predict_seed_ = int(fitted["predict_seed"])
        elif est.feature_source_ != "features":
            raise ValueError(f"unknown feature_source {est.feature_source_!r}")
        if est.train_features_.shape != (est.n_train_, est.n_features_) or est.posterior_.p != est.n_features_:
            raise ValueError("train_features / posterior do not match n_train and n_features")
        ll = tensors.get("loglik_trace")
        est.loglik_trace_ = None if ll is None else ll.double().numpy()
        by_chain = est.posterior_.theta_by_chain
        if ll is not None and (by_chain is None or tuple(ll.shape) != tuple(by_chain.shape[:2])):
            raise ValueError("loglik_trace does not match the posterior's chains and draws")
        est.diagnostics_ = est._diagnostics()
    return est


def _attach_layer(model, name: str, where: str):
    """``model`` after checking that its feature layer is the saved one: the submodule ``name``
    (where = "output") or, for the default layer (where = "input"), its last ``nn.Linear``."""
    found = find_feature_layer(model, None if where == "input" else name)[0]
    if found != name:
        raise ValueError(f"the model's last nn.Linear is {found!r}, but the saved model was wrapped at the input "
                         f"of {name!r}: pass the same architecture")
    return model


def attach_model(est, model, where: str) -> None:
    """Give a loaded wrapped model its torch module ``model`` again (``model_``); ``model`` must be
    None for the other feature sources. A wrapped model without one is a ValueError naming ``where``."""
    if est.feature_source_ == "wrapped":
        if model is None:
            raise ValueError(
                f"{where} holds a wrapped model (feature layer {est.feature_layer_!r}); its torch module is not "
                "saved: pass it as load(path, model=your_model)"
            )
        est.model_ = _attach_layer(model, est.feature_layer_, est.feature_where_)
    elif model is not None:
        raise ValueError(
            f"{where} holds a model with feature source {est.feature_source_!r}, not a wrapped one: "
            "do not pass model="
        )
