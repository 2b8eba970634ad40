r"""Training steps replayed as one CUDA graph (issue 21: on a GPU the small-batch loops were bound
by per-step launch overhead, not arithmetic).

`GraphedSteps(step, device=..., generators=...)` wraps ``step(idx) -> loss``, one full optimiser
step (zero the gradients, forward on rows ``idx``, backward, ``optimizer.step()``) that returns
the detached loss tensor. Calls ``runner(idx)``:

* on the CPU, or with ``DUBITO_CUDA_GRAPHS=0`` in the environment: ``step(idx)`` as it is;
* on CUDA: the first ``WARMUP`` full batches run eagerly on a side stream (PyTorch's recipe for
  whole-network capture: lazy initialisation, the optimiser's state), the next one is captured
  into a `torch.cuda.CUDAGraph` with ``idx`` copied into a static index tensor, and every later
  batch of the same shape is that copy plus one ``replay()``. A batch of another shape (an
  epoch's last, partial one) runs eagerly. The returned loss of a replay is the graph's static
  output: consume it (e.g. ``total += loss``) before the next call, as the loops do.

Every step still runs: warm-up and capture steps are real training steps, so the number of
optimiser updates is the same as without graphs. What a captured step needs, and the
callers give: an optimiser whose state lives on the device (`prepare_optimizer` sets Adam's
``capturable`` and makes the learning rate a device tensor, so `set_learning_rate` changes it
in place instead of baking a stale value into the graph); random numbers from the default CUDA
generator or from ``generators`` registered with the graph; no host synchronisation in the step.
If capture fails, the error is reported once as a warning and training goes on eagerly.

Measured: benchmarks/gpu.py prints eager against graphed fits on one run of the same machine.
"""

from __future__ import annotations

import os
import warnings
from typing import Callable, Sequence

import torch

__all__ = ["GraphedSteps", "graphs_enabled", "prepare_optimizer", "reset_optimizer_state", "set_learning_rate"]

#: Eager full-batch steps before the capture (PyTorch's whole-network capture example uses 3).
WARMUP = 3


def graphs_enabled(device) -> bool:
    """True on a CUDA device unless ``DUBITO_CUDA_GRAPHS=0`` (the benchmark's eager baseline)."""
    return torch.device(device).type == "cuda" and os.environ.get("DUBITO_CUDA_GRAPHS", "1") != "0"


def prepare_optimizer(optimizer: torch.optim.Optimizer, device) -> torch.optim.Optimizer:
    """Make ``optimizer`` capturable before its first step where graphs are used: Adam's step
    counter on the device (``capturable=True``) and its learning rate a device tensor of the
    parameters' dtype.

    On every device, a group that left ``foreach`` unset gets the multi-tensor implementation
    (PyTorch picks it on CUDA only): the same arithmetic as the per-tensor loop it replaces on
    the CPU, without its Python overhead per parameter (session 21: a yacht ensemble fit
    25.7 -> 19.0 s, the same 1,911 epochs and test NLL)."""
    for group in optimizer.param_groups:
        if group.get("foreach", False) is None and not group.get("fused"):
            group["foreach"] = True
    if not graphs_enabled(device):
        return optimizer
    for group in optimizer.param_groups:
        if "capturable" in group:
            group["capturable"] = True
            if not torch.is_tensor(group["lr"]):
                dtype = group["params"][0].dtype if group["params"] else torch.float32
                group["lr"] = torch.tensor(float(group["lr"]), dtype=dtype, device=device)
    return optimizer


def set_learning_rate(optimizer: torch.optim.Optimizer, lr: float) -> None:
    """Set every group's learning rate, in place where it is a tensor (a captured graph reads it)."""
    for group in optimizer.param_groups:
        if torch.is_tensor(group["lr"]):
            group["lr"].fill_(float(lr))
        else:
            group["lr"] = float(lr)


def reset_optimizer_state(optimizer: torch.optim.Optimizer) -> None:
    """Zero every state tensor in place (Adam: the step count and both moments), so the next step
    is a fresh optimiser's first; in place, so a captured graph keeps reading the same tensors."""
    with torch.no_grad():
        for state in optimizer.state.values():
            for value in state.values():
                if torch.is_tensor(value):
                    value.zero_()


class GraphedSteps:
    """``runner(idx)`` runs ``step(idx)``, by CUDA-graph replay where it can (module docstring)."""

    def __init__(self, step: Callable[[torch.Tensor], torch.Tensor], *, device,
                 generators: Sequence[torch.Generator] = ()):
        self._step = step
        self._enabled = graphs_enabled(device)
        self._generators = tuple(g for g in generators if g is not None and g.device.type == "cuda")
        self._shape = None  # shape of the full batch's index, fixed by the first call
        self._eager_left = WARMUP
        self._graph = None
        self._static_idx = None
        self._static_loss = None
        self._stream = None

    @property
    def captured(self) -> bool:
        """Whether the full-batch step is now a CUDA graph."""
        return self._graph is not None

    def __call__(self, idx: torch.Tensor) -> torch.Tensor:
        if not self._enabled:
            return self._step(idx)
        if self._shape is None:
            self._shape = tuple(idx.shape)
        if tuple(idx.shape) != self._shape:
            return self._step(idx)
        if self._graph is not None:
            self._static_idx.copy_(idx)
            self._graph.replay()
            return self._static_loss
        if self._eager_left > 0:
            self._eager_left -= 1
            return self._side_stream(lambda: self._step(idx))
        return self._capture(idx)

    def _side_stream(self, fn):
        if self._stream is None:
            self._stream = torch.cuda.Stream()
        self._stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self._stream):
            out = fn()
        torch.cuda.current_stream().wait_stream(self._stream)
        return out

    def _capture(self, idx: torch.Tensor) -> torch.Tensor:
        """Capture one step on ``idx`` (it runs as the graph's first replay)."""
        self._static_idx = idx.clone()
        graph = torch.cuda.CUDAGraph()
        try:
            for g in self._generators:
                register = getattr(graph, "register_generator_state", None)
                if register is None:
                    raise RuntimeError("this torch cannot capture a user generator in a CUDA graph")
                register(g)
            with torch.cuda.graph(graph):
                self._static_loss = self._step(self._static_idx)
        except Exception as err:  # noqa: BLE001 - any capture failure: report it once, run eagerly
            warnings.warn(f"CUDA graph capture of the training step failed ({type(err).__name__}: {err}); "
                          "training goes on without graphs", RuntimeWarning, stacklevel=3)
            self._enabled = False
            self._static_loss = None
            return self._step(idx)
        self._graph = graph
        graph.replay()
        return self._static_loss
