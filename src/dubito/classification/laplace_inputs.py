"""The inputs of `KFACLaplace`: rows of X or an iterable of (x, y) batches, validated and brought to
the model's device, dtype and input shape (standardised and reshaped as a fitted
`MCDropoutClassifier` model expects)."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from dubito._validation import to_numpy_if_tensor

__all__ = ["batches", "model_input", "n_batches"]


def _is_estimator(model) -> bool:
    return not isinstance(model, nn.Module) and hasattr(model, "net_") and isinstance(model.net_, nn.Module)


def _is_array_like(X) -> bool:
    return isinstance(X, (np.ndarray, list, tuple)) or (hasattr(X, "detach") and hasattr(X, "cpu")) or \
        hasattr(X, "iloc") or hasattr(X, "__array__")


def model_input(est, x: torch.Tensor, dev, dtype) -> torch.Tensor:
    """Rows of X -> the input of ``est.model`` (``est`` a `KFACLaplace`): standardised for an
    MCDropoutClassifier, reshaped to images."""
    if _is_estimator(est.model):
        model = est.model
        mean = torch.as_tensor(model.x_mean_, dtype=torch.float64)
        sd = torch.as_tensor(model.x_scale_, dtype=torch.float64)
        x = (x.double().cpu() - mean) / sd
        shape = getattr(model, "image_shape_", None)
    else:
        shape = est.image_shape_
    x = x.to(device=dev, dtype=dtype)
    if shape is not None and x.dim() == 2:
        x = x.reshape(x.shape[0], *shape)
    return x


def batches(est, X, y, s, *, fit: bool):
    """(x, y or None) batches of a `KFACLaplace` ``est`` on the device: from arrays (validated) or
    from an iterable of batches."""
    dev, dtype = s["device"], est._dtype
    if y is not None or _is_array_like(X):
        if fit:
            Xa, ya = est._validate_fit(X, y, min_samples=1, require_nonconstant_y=False)
        else:
            Xa, ya = est._validate_predict(X, fitted_attributes=["layers_"]), None
        n = Xa.shape[0]
        bs = s["batch_size"] if fit else s["predict_batch_size"]
        xt = torch.from_numpy(np.ascontiguousarray(Xa))
        yt = None if ya is None else torch.from_numpy(np.asarray(ya))
        for a in range(0, n, bs):
            yb = None if yt is None else yt[a : a + bs]
            yield model_input(est, xt[a : a + bs], dev, dtype), yb
        return
    if not hasattr(X, "__iter__"):
        raise ValueError(f"X must be an array (n, p) or an iterable of batches (x, y), got {type(X).__name__}")
    for batch in X:
        if isinstance(batch, (tuple, list)):
            if len(batch) < 1:
                raise ValueError("an empty batch in the iterable")
            xb, yb = batch[0], (batch[1] if len(batch) > 1 else None)
        else:
            xb, yb = batch, None
        xb = torch.as_tensor(to_numpy_if_tensor(xb) if not torch.is_tensor(xb) else xb)
        if xb.dim() < 2 or xb.shape[0] == 0:
            raise ValueError(f"each batch x must have shape (B, ...) with B >= 1, got {tuple(xb.shape)}")
        if not torch.is_floating_point(xb):
            xb = xb.double()
        if not bool(torch.isfinite(xb).all()):
            raise ValueError("a batch x holds NaN or inf")
        if fit and not hasattr(est, "n_features_in_"):
            est.n_features_in_ = int(np.prod(xb.shape[1:]))
        if yb is not None:
            yb = torch.as_tensor(to_numpy_if_tensor(yb)).reshape(-1)
            if yb.shape[0] != xb.shape[0]:
                raise ValueError(f"a batch has {xb.shape[0]} inputs but {yb.shape[0]} labels")
        yield model_input(est, xb, dev, dtype), yb


def n_batches(X, y, s) -> int | None:
    """The number of fit batches, for the progress bar (None when X does not tell its length)."""
    try:
        n = len(X)
    except TypeError:
        return None
    return -(-n // s["batch_size"]) if (y is not None or _is_array_like(X)) else n
