r"""The layers a `KFACLaplace` posterior covers: choosing the ``nn.Linear`` layers, each one's MAP
point and Cholesky factors (`_Layer`), and the network run with T weight draws in one batched pass
(`sampled`: the rows repeated at the first sampled or dropout layer, the sampled layers' ``forward``
overridden for the call and restored afterwards; the Prediction paragraph of
`dubito.classification.laplace`).
"""

from __future__ import annotations

import contextlib
import numbers

import torch
from torch import nn

from dubito.nn.concrete_dropout import StochasticDropout, dropout_modules, mc_mode

__all__ = ["batched_forward", "sampled", "select_layers"]


class _Layer:
    """One sampled layer: its name, module, and (after fit) factors and Cholesky factors."""

    def __init__(self, name: str, module: nn.Linear):
        self.name = name
        self.module = module
        self.bias = module.bias is not None
        self.a_sum = None
        self.g_sum = None

    @property
    def theta(self) -> torch.Tensor:
        """[W | b] (out, in+1), or W (out, in) without a bias: the MAP point (a copy)."""
        w = self.module.weight.detach()
        if self.bias:
            return torch.cat([w, self.module.bias.detach().unsqueeze(1)], dim=1)
        return w.clone()


def select_layers(net: nn.Module, spec) -> list[_Layer]:
    """The `_Layer` of each ``nn.Linear`` that ``spec`` (`KFACLaplace`'s ``layers``) names, in the
    network's order: "last", None (all), the last k, or module names (a dropout layer of ours wrapping
    an ``nn.Linear`` stands for it); other layer types raise ValueError."""
    named = dict(net.named_modules())
    linear = [(n, m) for n, m in named.items() if isinstance(m, nn.Linear) and n]
    if isinstance(net, nn.Linear):
        linear = [("", net)]
    names = [n for n, _ in linear]
    if spec is None or (isinstance(spec, str) and spec == "last") or \
            (isinstance(spec, numbers.Integral) and not isinstance(spec, bool)):
        if not linear:
            others = sorted({type(m).__name__ for m in named.values() if isinstance(m, nn.Conv2d)})
            extra = f" (it has {', '.join(others)}: KFAC here covers nn.Linear only, spec §2.7)" if others else ""
            raise ValueError(f"the model ({type(net).__name__}) has no nn.Linear layer for KFAC Laplace{extra}")
        if spec is None:
            chosen = linear
        elif isinstance(spec, str):
            chosen = linear[-1:]
        else:
            if not 1 <= spec <= len(linear):
                raise ValueError(f"layers={spec} asks for the last {spec} nn.Linear layers, but the model has "
                                 f"{len(linear)}: {names}")
            chosen = linear[-spec:]
        return [_Layer(n, m) for n, m in chosen]
    if isinstance(spec, str) or not hasattr(spec, "__iter__"):
        raise ValueError(f"layers must be None, 'last', an int or a list of module names, got {spec!r}")
    spec = list(spec)
    if not spec:
        raise ValueError("layers is an empty list: name at least one nn.Linear layer")
    chosen, seen = [], set()
    for n in spec:
        if not isinstance(n, str):
            raise ValueError(f"layers must hold module names (str), got {n!r}")
        if n not in named:
            raise ValueError(f"the model has no module named {n!r}; its nn.Linear layers are {names}")
        m = named[n]
        if isinstance(m, StochasticDropout) and isinstance(m.layer, nn.Linear):
            n, m = f"{n}.layer" if n else "layer", m.layer
        if not isinstance(m, nn.Linear):
            raise ValueError(
                f"layer {n!r} is a {type(m).__name__}; KFAC Laplace here covers nn.Linear layers only (Feng 2019, §2.3, "
                f"after Ritter, Botev & Barber 2018, puts it on the head's FC layers; Conv2d is not implemented). The nn.Linear layers are {names}")
        if id(m) in seen:
            raise ValueError(f"layer {n!r} is named twice")
        seen.add(id(m))
        chosen.append((n, m))
    order = {id(m): i for i, (_, m) in enumerate(linear)}
    chosen.sort(key=lambda nm: order.get(id(nm[1]), 0))
    return [_Layer(n, m) for n, m in chosen]


@contextlib.contextmanager
def sampled(net, layers, thetas, t, b, expand, dropout_gen, noise=None, *, mc_dropout: bool):
    """Inside: the sampled ``layers`` (`_Layer`) compute with their T weight draws ``thetas`` (by
    name); rows expanded at the first sampled (or dropout) layer; our dropout layers draw one mask per
    pass shared by all rows from ``noise`` (an `MCNoise`). Restores forwards, hooks and modes on exit
    (also on error)."""
    patched, handles = [], []
    modes = {m: m.training for m in net.modules()}
    ctx = mc_mode(net, dropout_gen, noise) if mc_dropout else contextlib.nullcontext()
    try:
        with ctx:
            if not mc_dropout:
                net.eval()
            for lay in layers:
                lay.module.forward = batched_forward(lay, thetas[lay.name], t)
                patched.append(lay.module)
            if t > 1 and expand == "layer":
                sites = [lay.module for lay in layers]
                if mc_dropout:
                    sites += dropout_modules(net)

                def expand_rows(module, args):
                    h = args[0]
                    if h.shape[0] == b:
                        return (h.repeat(t, *([1] * (h.dim() - 1))), *args[1:])
                    return None

                handles = [m.register_forward_pre_hook(expand_rows) for m in sites]
            yield
    finally:
        for h in handles:
            h.remove()
        for m in patched:
            m.__dict__.pop("forward", None)
        for m, md in modes.items():
            m.training = md


def batched_forward(lay: _Layer, theta: torch.Tensor, t: int):
    """x (t·b, in) pass-major -> (t·b, out) with weight draw t on rows t b .. t b + b - 1."""
    w = theta[:, :, : lay.module.in_features]
    wt = w.transpose(1, 2)
    bias = theta[:, :, -1].unsqueeze(1) if lay.bias else None

    def forward(x):
        if x.dim() != 2 or x.shape[0] % t:
            raise ValueError(f"layer {lay.name!r} got an input of shape {tuple(x.shape)}, not (T·batch, features) "
                             f"with T = {t}; if the sampled layers sit in separate branches, use expand='input'")
        h = x.reshape(t, x.shape[0] // t, x.shape[1])
        out = torch.bmm(h, wt) if bias is None else torch.baddbmm(bias, h, wt)
        return out.reshape(x.shape[0], -1)

    return forward
