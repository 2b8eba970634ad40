"""The T MC-dropout passes of a torch classifier in one batched forward: `mc_logits` (exported as
``dubito.classification.mc_logits``; `MCDropoutClassifier` predicts with it, and its module docstring
describes the masks: pass t is one sampled network for every input)."""

from __future__ import annotations

import torch
from torch import nn

from dubito.nn.concrete_dropout import MCNoise, dropout_modules, mc_mode

__all__ = ["mc_logits"]


@torch.no_grad()
def mc_logits(model: nn.Module, x: torch.Tensor, n_samples: int, *, batched: bool = True, expand: str = "dropout",
              generator: torch.Generator | None = None, noise: MCNoise | None = None) -> torch.Tensor:
    """T = ``n_samples`` MC-dropout passes of ``model`` at ``x`` (B, ...): logits (T, B, K).

    Inside `mc_mode` (only dropout stochastic, BatchNorm in evaluation mode). ``batched=True``: one
    forward over T·B rows, the input repeated pass-major (row t B + b) at the first dropout layer
    (``expand="dropout"``) or at the input (``expand="input"``); ``batched=False``: a loop of T
    forwards (the reference the batched form equals, and the benchmark's baseline).

    Masks: pass t is one sampled network ω_t for all B inputs (our dropout layers share their noise
    by the rows, `dubito.nn.concrete_dropout.MCNoise`), so the logits of an input do not depend on
    the other rows or their order, and the loop and the batched form see the same masks. ``noise``
    (an ``MCNoise(T)``) keeps the draws for another call: pass the same one for every chunk of the
    inputs to get the masks of one call over all of them; None draws new ones (from ``generator``,
    given to our dropout layers, or torch's global generator). PyTorch's ``nn.Dropout`` layers draw
    a mask per row from the global generator: with them an input's logits depend on the batch.
    """
    t = int(n_samples)
    b = x.shape[0]
    if noise is None:
        noise = MCNoise(t)
    elif noise.n_passes != t:
        raise ValueError(f"noise holds the draws of {noise.n_passes} MC passes, not n_samples = {t}")
    with mc_mode(model, generator, noise):
        if not batched:
            out = []
            try:
                for i in range(t):
                    noise.begin(pass_index=i)
                    out.append(model(x))
            finally:
                noise.begin()
            return torch.stack(out)
        noise.begin()
        if expand == "input":
            out = model(x.repeat(t, *([1] * (x.dim() - 1))))
        else:
            def expand_rows(module, args):
                h = args[0]
                if t > 1 and h.shape[0] == b:
                    return (h.repeat(t, *([1] * (h.dim() - 1))), *args[1:])
                return None

            handles = [m.register_forward_pre_hook(expand_rows) for m in dropout_modules(model)]
            try:
                out = model(x)
            except RuntimeError as exc:
                raise ValueError(
                    f"MC passes expanded at the first dropout layer failed ({exc}); if the model's dropout sits in "
                    "one of several branches, use mc_expand='input' (repeat the input instead)") from None
            finally:
                for h in handles:
                    h.remove()
        if out.shape[0] != t * b:
            raise ValueError(f"the model returned {out.shape[0]} rows for {b} inputs x {t} passes: its output does "
                             "not pass through a dropout layer")
        return out.reshape(t, b, *out.shape[1:])
