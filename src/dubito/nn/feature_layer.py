r"""The features of a user's trained torch network, for the post-hoc ``wrap`` estimators.

A post-hoc method (an implicit copula, a last-layer Laplace, MC dropout) needs the features
psi(x) in R^p of a trained network f: the output of one of its layers, or the input of its last
linear layer, f(x) = W psi(x) + b ("the last hidden layer", the features a last-layer method
uses: Kristiadi, Hein & Hennig 2020; laplace-torch's ``LLLaplace`` takes the input of the last
``nn.Linear`` in the same way).

* `find_feature_layer(model, layer=None)` -> (name, module, where): ``layer=None`` takes the
  **input** of the model's last ``nn.Linear`` in ``model.named_modules()`` order (registration
  order, the execution order of a ``Sequential`` and of most models; where = "input"); a name
  from ``model.named_modules()`` or a submodule itself takes that module's **output**
  (where = "output").
* `layer_features(model, layer, X)` -> (N, p) float64 CPU tensor: psi at X, read by a forward
  hook (a pre-hook for "input") in evaluation mode without gradients, in batches; the modules'
  training flags are restored afterwards. X: a numpy array, a torch tensor on any device, or a
  ``DataLoader`` yielding x or (x, y, ...) batches (in a fixed order: a shuffling loader is
  refused, its rows would not match the caller's).
* `features_and_targets(model, layer, data, y=None)`: psi and y in one pass, so that a
  shuffling ``DataLoader`` of (x, y) keeps its rows paired (what a ``wrap`` fits on).
* `loader_arrays(data, y=None)` -> (X, y) numpy: from arrays, tensors (any device) or a
  ``DataLoader`` of (x, y) batches.
* `input_batches(model, X)`: the inputs as tensors ready for the model, batch by batch (for a
  wrapped model's predictions).

Inputs are cast to the model's floating dtype when they are floating point (numpy's float64 to a
float32 model); integer inputs (token ids) are passed as they are. They go to ``device`` (None:
the device of the model's first parameter or buffer, else the CPU); the model is not moved.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, RandomSampler

__all__ = ["features_and_targets", "find_feature_layer", "input_batches", "layer_features", "loader_arrays"]

#: Rows per forward pass for array and tensor inputs (a DataLoader keeps its own batches).
DEFAULT_BATCH_SIZE = 1024
_N_NAMES = 12  # names listed in an error


def _module_names(model: nn.Module) -> list[str]:
    return [n for n, _ in model.named_modules() if n]


def _few(names: list[str]) -> str:
    if not names:
        return "(none: the model has no submodules)"
    more = f", ... ({len(names) - _N_NAMES} more)" if len(names) > _N_NAMES else ""
    return ", ".join(names[:_N_NAMES]) + more


def _check_model(model) -> None:
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")


def find_feature_layer(model: nn.Module, layer: str | nn.Module | None = None) -> tuple[str, nn.Module, str]:
    """(name, module, where) of the feature layer of ``model`` (module docstring).

    ``layer`` None: the last ``nn.Linear`` of ``model.named_modules()``, where = "input" (its input
    is the last hidden layer's output). A str: the submodule of that name, where = "output". An
    ``nn.Module``: that submodule (found by identity), where = "output". ValueError for an unknown
    name (a few valid ones are listed), a module that is not inside the model (or the model
    itself, whose output is the prediction) and, for None, a model without ``nn.Linear``.
    """
    _check_model(model)
    modules = dict(model.named_modules())
    if layer is None:
        linear = [(n, m) for n, m in model.named_modules() if isinstance(m, nn.Linear)]
        if not linear:
            raise ValueError(
                f"the model ({type(model).__name__}) has no nn.Linear layer, so there is no default feature layer "
                f"(the input of its last nn.Linear); name one: layer=<a name from model.named_modules()>, e.g. "
                f"{_few(_module_names(model))}")
        name, module = linear[-1]
        return name, module, "input"
    if isinstance(layer, str):
        if layer == "" or layer not in modules:
            raise ValueError(
                f"layer {layer!r} is not a submodule of the model; available names: {_few(_module_names(model))}")
        return layer, modules[layer], "output"
    if isinstance(layer, nn.Module):
        if layer is model:
            raise ValueError("layer is the model itself, whose output is the prediction: pass one of its hidden "
                             f"layers (a name or a submodule), e.g. {_few(_module_names(model))}, or None for the "
                             "input of its last nn.Linear")
        for name, m in model.named_modules():
            if m is layer and name:
                return name, m, "output"
        raise ValueError(f"layer ({type(layer).__name__}) is not a submodule of the model: pass a module of "
                         f"model.named_modules() (by name: {_few(_module_names(model))})")
    raise ValueError(f"layer must be None, a submodule's name (str) or an nn.Module, got {type(layer).__name__}")


def _model_place(model: nn.Module, device) -> tuple[torch.device, torch.dtype | None]:
    """(device, floating dtype) the inputs are given: ``device`` or the model's first parameter's
    (or buffer's), else the CPU; the dtype of its first floating parameter or buffer (None: keep)."""
    tensors = [*model.parameters(), *model.buffers()]
    dev = torch.device(device) if device is not None else (tensors[0].device if tensors else torch.device("cpu"))
    dtype = next((t.dtype for t in tensors if t.is_floating_point()), None)
    return dev, dtype


def _as_input(x, dev: torch.device, dtype: torch.dtype | None, what: str) -> torch.Tensor:
    if isinstance(x, (np.ndarray, list, tuple)):
        try:
            x = torch.as_tensor(np.asarray(x))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{what} must be numeric: {exc}") from None
    if not isinstance(x, torch.Tensor):
        raise ValueError(f"{what} must be a numpy array, a torch tensor or a DataLoader, got {type(x).__name__}")
    if x.is_floating_point() and dtype is not None:
        x = x.to(dtype)
    return x.to(dev)


def _batch_parts(batch, *, where: str):
    """(x, y or None) of one DataLoader batch: a tensor/array is x; a tuple/list is (x, y, ...)."""
    if isinstance(batch, (tuple, list)):
        if len(batch) == 0:
            raise ValueError(f"{where} yielded an empty batch")
        return batch[0], (batch[1] if len(batch) > 1 else None)
    if isinstance(batch, (torch.Tensor, np.ndarray)):
        return batch, None
    raise ValueError(f"{where} must yield x or (x, y) batches of tensors or arrays, got a {type(batch).__name__}")


def _batches(X, batch_size: int, dev, dtype) -> Iterator[tuple[torch.Tensor, object]]:
    """(x, y or None) per batch. A DataLoader's iterator is made here, eagerly: it draws its base
    seed from torch's global generator, which must happen before a caller seeds its own draws."""
    if isinstance(X, DataLoader):
        it = iter(X)
        return ((_as_input(x, dev, dtype, "a DataLoader batch"), yb)
                for x, yb in (_batch_parts(batch, where="the DataLoader") for batch in it))
    if X is None:
        raise ValueError("X must be the inputs (N, ...): a numpy array, a torch tensor or a DataLoader, got None")
    if not isinstance(X, torch.Tensor):
        X = _as_input(X, torch.device("cpu"), None, "X")
    if X.dim() == 0:
        raise ValueError("X must have a batch dimension (N, ...), got a scalar")
    return ((_as_input(X[start:start + batch_size], dev, dtype, "X"), None) for start in range(0, X.shape[0], batch_size))


def _check_batch_size(batch_size) -> int:
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    return int(batch_size)


def _refuse_shuffling(X) -> None:
    if isinstance(X, DataLoader) and isinstance(X.sampler, RandomSampler):
        raise ValueError("the DataLoader shuffles (shuffle=True): its rows come in a new order on every pass, so "
                         "the results would not match your inputs; pass a DataLoader with shuffle=False")


def input_batches(model: nn.Module, X, *, batch_size: int = DEFAULT_BATCH_SIZE, device=None) -> Iterator[torch.Tensor]:
    """The inputs X (array, tensor on any device, or a non-shuffling ``DataLoader`` of x or (x, y,
    ...) batches) as tensors ready for ``model``: ``batch_size`` rows at a time (a DataLoader keeps
    its batches), floating ones in the model's dtype, on ``device`` (None: the model's)."""
    _check_model(model)
    _refuse_shuffling(X)
    dev, dtype = _model_place(model, device)
    return (x for x, _ in _batches(X, _check_batch_size(batch_size), dev, dtype))


def _run(model, layer, X, batch_size, device, *, collect_targets: bool):
    name, module, where = find_feature_layer(model, layer)
    batch_size = _check_batch_size(batch_size)
    dev, dtype = _model_place(model, device)
    captured: list = []
    if where == "input":
        def hook(mod, args):
            captured.append(args[0] if args else None)
        handle = module.register_forward_pre_hook(hook)
    else:
        def hook(mod, args, output):
            captured.append(output)
        handle = module.register_forward_hook(hook)
    mode = {m: m.training for m in model.modules()}
    model.eval()
    out, targets = [], []
    what = f"the input of layer {name!r}" if where == "input" else f"layer {name!r}"
    try:
        with torch.no_grad():
            for x, yb in _batches(X, int(batch_size), dev, dtype):
                captured.clear()
                model(x)
                if len(captured) != 1 or not isinstance(captured[0], torch.Tensor):
                    raise ValueError(
                        f"{what} was seen {len(captured)} times (or was not a tensor) in one forward pass; choose a "
                        "layer that is called once per forward and takes/returns one tensor (layer=<name>)")
                h = captured[0]
                if h.dim() != 2 or h.shape[0] != x.shape[0]:
                    raise ValueError(
                        f"{what} {'has' if where == 'input' else 'outputs'} shape {tuple(h.shape)} for a batch of "
                        f"{x.shape[0]} inputs, but the features must "
                        "be 2-D (batch, p): choose a layer after flattening (e.g. an nn.Flatten() or the first "
                        "nn.Linear after it), or add nn.Flatten() after this layer")
                out.append(h.detach().to("cpu", torch.float64))
                if collect_targets:
                    targets.append(yb)
    finally:
        handle.remove()
        for m, training in mode.items():
            m.training = training
    if not out:
        raise ValueError("X holds no rows: the features of an empty input are undefined")
    return torch.cat(out), targets


def layer_features(model: nn.Module, layer: str | nn.Module | None = None, X=None, *,
                   batch_size: int = DEFAULT_BATCH_SIZE, device=None) -> torch.Tensor:
    """psi(X), the (N, p) float64 CPU tensor of the feature layer (module docstring).

    ``layer`` as `find_feature_layer`; X a numpy array, a torch tensor (any device) or a
    ``DataLoader`` of x or (x, y, ...) batches in a fixed order; ``batch_size`` rows per forward
    (arrays and tensors); ``device`` where the inputs go (None: the model's).
    """
    _refuse_shuffling(X)
    return _run(model, layer, X, batch_size, device, collect_targets=False)[0]


def features_and_targets(model: nn.Module, layer: str | nn.Module | None, data, y=None, *,
                         batch_size: int = DEFAULT_BATCH_SIZE, device=None) -> tuple[torch.Tensor, np.ndarray]:
    """(psi, y): the features of ``data`` (`layer_features`) and the targets as a float64 numpy
    array, from ``y`` (array or tensor, for array / tensor ``data``) or from a ``DataLoader``'s
    (x, y) batches, read in the same pass (a shuffling loader keeps its pairs)."""
    if isinstance(data, DataLoader):
        if y is not None:
            raise ValueError("data is a DataLoader, which yields (x, y) batches: do not pass y as well")
        psi, parts = _run(model, layer, data, batch_size, device, collect_targets=True)
        if any(p is None for p in parts):
            raise ValueError("the DataLoader yields x only: it must yield (x, y) batches to fit on")
        targets = _to_numpy(parts, "y")
    else:
        if y is None:
            raise ValueError("y must be given (the targets of X), got None")
        psi = _run(model, layer, data, batch_size, device, collect_targets=False)[0]
        targets = _to_numpy(y, "y")
    if targets.shape[0] != psi.shape[0]:
        raise ValueError(f"y has {targets.shape[0]} rows but X has {psi.shape[0]}")
    return psi, targets


def _to_numpy(v, what: str) -> np.ndarray:
    """A tensor (any device), array, list or a list of batch parts -> numpy (concatenated along rows)."""
    if isinstance(v, list) and v and all(isinstance(p, (torch.Tensor, np.ndarray)) for p in v):
        return np.concatenate([_to_numpy(p, what) for p in v])
    if isinstance(v, torch.Tensor):
        return v.detach().cpu().numpy()
    if isinstance(v, (str, bytes, dict)) or v is None:
        raise ValueError(f"{what} must be a numpy array, a torch tensor or a DataLoader, got {type(v).__name__}")
    try:
        out = np.asarray(v)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{what} must be numeric: {exc}") from None
    if out.dtype == object:
        raise ValueError(f"{what} must be a numeric array or tensor, got an object array ({type(v).__name__})")
    return out


def loader_arrays(data, y=None) -> tuple[np.ndarray, np.ndarray | None]:
    """(X, y) as numpy arrays from numpy arrays, torch tensors (any device, detached) or a
    ``DataLoader`` yielding x or (x, y) batches (then y must be None; y is None for x-only
    batches). ValueError for mismatched lengths and unsupported types."""
    if isinstance(data, DataLoader):
        if y is not None:
            raise ValueError("data is a DataLoader, which yields (x, y) batches: do not pass y as well")
        xs, ys = [], []
        for batch in data:
            x, yb = _batch_parts(batch, where="the DataLoader")
            xs.append(_to_numpy(x, "a DataLoader batch"))
            ys.append(yb)
        if not xs:
            raise ValueError("the DataLoader yielded no batches")
        X = np.concatenate(xs)
        if all(p is None for p in ys):
            return X, None
        if any(p is None for p in ys):
            raise ValueError("the DataLoader yields (x, y) in some batches and x alone in others")
        Y = _to_numpy(ys, "a DataLoader batch's y")
    else:
        X = _to_numpy(data, "X")
        if y is None:
            return X, None
        Y = _to_numpy(y, "y")
    if X.ndim == 0 or Y.ndim == 0 or X.shape[0] != Y.shape[0]:
        raise ValueError(f"X and y must have the same number of rows, got X {X.shape} and y {Y.shape}")
    return X, Y
