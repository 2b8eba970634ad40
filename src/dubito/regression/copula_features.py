"""The features psi of `ImplicitCopulaRegressor`: their checks, and reading them from a wrapped model.

`check_features` / `check_response` turn what the user passes (arrays, tensors) into float64 arrays
with one clear error per problem (no intercept, no standardisation: psi is used as given, spec
§2.3). `network_dead_units` finds the feature network's constant units. `wrap_arguments`,
`wrapped_training_features`, `kept_units`, `with_constant` and `wrapped_features` are the ``wrap``
path's: its two argument orders, and psi of a trained torch model read by a hook at its feature
layer (`dubito.nn.feature_layer`), without the units constant on the training inputs (found and
reported) and with the constant unit (below).

Wrapped features. ``wrap`` drops the units that are constant on its X (dead ReLUs; warned,
``dead_features_``, and dropped again at prediction) and, for the model without the random
intercept (``intercept=False``), appends one constant unit c = sqrt(mean_i ||psi_i||^2) by default
(``constant_feature``; the spec's §7.11 optional constant column, a deviation from the paper). With
the random intercept (the estimator's default) the unit is left out: beta_0 plays the same part with
its own learnt variance kappa in place of tau^2 c^2 (`dubito.regression.copula_posterior`). Why: with z_i = s_i (psi_i' beta + eps_i), s_i = (1 + tau^2 ||psi_i||^2)^(-1/2)
(ridge), a sharp predictive (tau^2 ||psi||^2 >> 1) has the mean psi_i' beta / (tau ||psi_i||): it sees
only the direction of psi, so the norm of ReLU features (which varies 4-20x, docs/results/icnlm.md)
is lost to the mean; the network's own head w'psi + b uses both. The constant unit keeps ||psi||
from varying much and plays the head's bias. Chosen on validation rows (a plain 2 x 50 ReLU MLP
trained by MSE on 80 % of the training rows of UCI split 0, scored on the other 20 %; the test
splits not used): the wrapped model's RMSE fell on all four sets tried (concrete 5.77 -> 5.23,
energy 1.54 -> 1.08, boston 3.86 -> 3.40, yacht 2.65 -> 2.14); its NLL fell on energy and yacht
and rose on concrete and boston, where the spread learnt from the training rows was too small
either way (95 % coverage 0.74 -> 0.65 on boston). Fitted on rows the network had not seen (16 %
held out from its training), the constant unit gave the lower RMSE and NLL on all four sets
(NLL concrete 3.40 -> 3.30, energy 1.70 -> 1.36, boston 2.88 -> 2.76, yacht 2.36 -> 1.91). Hence:
wrap on held-out rows where you can. Standardising psi (per unit) was worse on three of the four
sets and is not offered. Two limits remain: the KDE marginal (F_Y^-1(Phi(.)) of a least-squares fit
of z on psi already has RMSE 1.58 against the network's 0.57 on yacht), and the fit on the
network's own training rows, whose residuals are smaller than a new input's.
"""

from __future__ import annotations

import warnings

import numpy as np
import torch

from dubito.nn.feature_layer import features_and_targets, layer_features
from dubito.regression.deterministic import MIN_SAMPLES

__all__ = [
    "check_features",
    "check_response",
    "kept_units",
    "network_dead_units",
    "with_constant",
    "wrap_arguments",
    "wrapped_features",
    "wrapped_training_features",
]

_WRAP_BATCH = 1024          # rows per forward pass of a wrapped model


def check_features(psi, name: str = "psi", *, p: int | None = None, training: bool = False) -> np.ndarray:
    """float64 (n, p) array of features; one clear error per problem."""
    if isinstance(psi, torch.Tensor):
        psi = psi.detach().cpu().numpy()
    try:
        psi = np.asarray(psi, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be a numeric (n, p) array: {exc}") from None
    if psi.ndim != 2:
        raise ValueError(f"{name} must be 2-D (n_samples, p), got shape {psi.shape}; flatten the features first")
    if p is not None and psi.shape[1] != p:
        raise ValueError(f"{name} has {psi.shape[1]} columns but the model was fitted with p = {p} features")
    bad = ~np.isfinite(psi)
    if bad.any():
        cols = np.flatnonzero(bad.any(axis=0))
        raise ValueError(
            f"{name} has NaN/inf values in column(s) {cols.tolist()[:10]}: drop those columns or fix the "
            "feature extractor (features must be finite)"
        )
    if training:
        n, k = psi.shape
        if k < 1 or n < MIN_SAMPLES:
            raise ValueError(f"{name} must have at least {MIN_SAMPLES} rows and 1 column, got shape {psi.shape}")
        if k > n:
            raise ValueError(
                f"{name} has p = {k} features but only n = {n} rows (p > n): the linear copula model is not "
                "identified; use fewer features (a narrower last hidden layer) or more data"
            )
        const = np.flatnonzero(np.ptp(psi, axis=0) == 0)
        if const.size:
            raise ValueError(
                f"{name} column(s) {const.tolist()[:10]} are constant (e.g. dead ReLU units): a constant feature "
                "acts as an intercept, which the implicit copula does not identify (Hoffmann & Klein 2023, §3.3.2); drop those "
                "columns"
            )
    return psi


def check_response(y, n: int) -> np.ndarray:
    """float64 (n,) responses matching n rows of features; finite."""
    if isinstance(y, torch.Tensor):
        y = y.detach().cpu().numpy()
    y = np.asarray(y, dtype=np.float64)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1 or y.shape[0] != n:
        raise ValueError(f"y must have shape ({n},) to match the features, got {y.shape}")
    if not np.all(np.isfinite(y)):
        raise ValueError("y must be finite (found NaN/inf)")
    return y


def wrap_arguments(feature_layer, X, y):
    """(feature_layer, X, y) of ``wrap(model, feature_layer, X, y)`` or of its data-first orders
    ``wrap(model, X, y)`` / ``wrap(model, X, y, feature_layer)`` (the order of
    `LastLayerLaplaceRegressor.wrap`)."""
    if feature_layer is not None and not isinstance(feature_layer, (str, torch.nn.Module)):
        # data second: wrap(model, X, y[, feature_layer]), the order of LastLayerLaplaceRegressor.wrap
        if X is None:
            feature_layer, X = None, feature_layer
        elif y is None or isinstance(y, (str, torch.nn.Module)):
            feature_layer, X, y = y, feature_layer, X
        else:
            raise ValueError("pass wrap(model, X, y), wrap(model, X, y, feature_layer) or wrap(model, feature_layer, "
                             f"X, y); got a {type(feature_layer).__name__} where the feature layer or X goes and "
                             "data for both X and y after it")
    return feature_layer, X, y


def wrapped_training_features(model, feature_layer, name: str, X, y):
    """(psi, y, dead) on the training data of ``wrap``: the hooked layer's (n, width) features, the
    responses, and the indices of the units constant on X (dead ReLUs; a ``RuntimeWarning`` at
    ``wrap``'s caller names them, and all of them constant is a ValueError)."""
    psi, y = features_and_targets(model, feature_layer, X, y, batch_size=_WRAP_BATCH)
    psi = check_features(psi.numpy(), "psi")
    width = psi.shape[1]
    dead = np.flatnonzero(np.ptp(psi, axis=0) == 0) if psi.shape[0] else np.zeros(0, dtype=np.intp)
    if dead.size == width:
        raise ValueError(
            f"all {width} feature units of layer {name!r} are constant on X (dead ReLUs?): there are no features "
            "to fit on; choose another feature_layer")
    if dead.size:
        warnings.warn(
            f"{dead.size} of {width} feature units of layer {name!r} are constant on X (dead ReLUs: indices "
            f"{dead.tolist()[:20]}); they are dropped", RuntimeWarning, stacklevel=3)
    return psi, y, dead


def kept_units(width: int, dead) -> np.ndarray:
    """Indices of the hooked layer's ``width`` units the wrapped model uses (all but ``dead``)."""
    return np.setdiff1d(np.arange(width), np.asarray(dead, dtype=np.intp))


def with_constant(psi: np.ndarray, c: float) -> np.ndarray:
    """psi with the constant unit c appended (none when c is 0)."""
    return psi if c == 0 else np.concatenate([psi, np.full((psi.shape[0], 1), c)], axis=1)


def wrapped_features(est, X) -> np.ndarray:
    """psi of the wrapped model of ``est`` at X: the hooked layer's kept units, and the constant unit."""
    layer = None if est.feature_where_ == "input" else est.feature_layer_
    raw = check_features(layer_features(est.model_, layer, X, batch_size=_WRAP_BATCH).numpy(), "features")
    if raw.shape[1] != est.layer_width_:
        raise ValueError(f"layer {est.feature_layer_!r} now has {raw.shape[1]} units, but the model was wrapped "
                         f"with {est.layer_width_}")
    return with_constant(raw[:, kept_units(est.layer_width_, est.dead_features_)], est.constant_feature_)


def network_dead_units(psi: np.ndarray, p: int) -> np.ndarray:
    """Indices of the feature network's units constant on the training rows (dead ReLUs: kept, a zero
    column contributes nothing; a ``RuntimeWarning`` at ``fit``'s caller names them); NaN/inf
    features or all p units constant are a ValueError."""
    if not np.all(np.isfinite(psi)):
        raise ValueError("the feature network produced NaN/inf features (training diverged?): lower lr")
    dead = np.flatnonzero(np.ptp(psi, axis=0) == 0)
    if dead.size == p:
        raise ValueError(
            f"all {p} feature units are constant on the training data (dead ReLUs): the copula has no "
            "features; change random_state, lower lr or use activation='gelu'"
        )
    if dead.size:
        warnings.warn(
            f"{dead.size} of {p} feature units are constant on the training data (dead ReLUs: indices "
            f"{dead.tolist()}); they contribute nothing to the copula", RuntimeWarning, stacklevel=3)
    return dead
