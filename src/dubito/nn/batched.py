"""Batched ensemble layers: L independent networks evaluated as one computation.

Every parameter carries a leading member axis: a linear layer's weight is (L, in, out) and
its bias (L, 1, out), and ``y = baddbmm(bias, x, weight)`` maps (L, n, in) -> (L, n, out) for
all members at once (or ``x @ weight + bias`` with a shared (n, in) input, broadcast over
members). Because the members never mix, a loss *summed* over members has, for member l,
exactly the gradient of member l's own loss, and Adam (with coupled L2) is elementwise, so
one optimiser over the stacked parameters trains L independent networks
(Lakshminarayanan et al. 2017; Hoffmann & Elster 2021, Sec. 2).

`BatchedGaussianMLP` is the heteroscedastic regression network of Hoffmann & Elster (Sec. 4):
a ReLU trunk (128 -> 64 -> 32 in the paper) whose last hidden layer h(x) (p_h = 32) feeds two
linear heads, the mean eta(x) = W h(x) + b and the variance sigma^2(x) =
softplus(V h(x) + c) + 1e-6 (the variance link is not stated in the paper; softplus + 1e-6
follows Lakshminarayanan et al. 2017; spec pitfall P13).

Initialisation is PyTorch's ``nn.Linear`` default, U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for
weights and biases ("framework default", spec Sec. 3.1), drawn for each member from that
member's own ``torch.Generator``, so member l's initial weights depend only on its own seed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn
from torch.nn import functional as F

__all__ = [
    "ACTIVATIONS",
    "VARIANCE_FLOOR",
    "BatchedLinear",
    "BatchedGaussianMLP",
    "gaussian_nll",
    "member_permutations",
]

#: Lower bound added to the softplus variance (Lakshminarayanan et al. 2017; spec P13).
VARIANCE_FLOOR = 1e-6

ACTIVATIONS = {
    "relu": F.relu,
    "tanh": torch.tanh,
    "gelu": F.gelu,
    "silu": F.silu,
    # hard tanh clip(t, -1, 1): the activation of every B-DeepNoise experiment ([P] §3; spec §1.2)
    "hardtanh": F.hardtanh,
}


def _uniform(shape, bound: float, generators, dtype, device) -> torch.Tensor:
    """Stack one U(-bound, bound) draw of ``shape`` per member generator -> (L, *shape)."""
    draws = [
        (torch.rand(shape, generator=g, dtype=torch.float64) * 2.0 - 1.0) * bound
        for g in generators
    ]
    return torch.stack(draws).to(dtype=dtype, device=device)


class BatchedLinear(nn.Module):
    """L independent linear maps: weight (L, in, out), bias (L, 1, out).

    ``forward(x)`` takes x of shape (L, n, in) (one input batch per member; ``baddbmm``) or
    (n, in) (the same inputs for all members; broadcast matmul) and returns (L, n, out).
    ``members`` (a slice) restricts to a subset of members, e.g. ``slice(0, k)``.
    """

    def __init__(self, n_members: int, in_features: int, out_features: int, *, generators=None,
                 dtype=torch.float32, device="cpu"):
        super().__init__()
        self.n_members = int(n_members)
        self.in_features = int(in_features)
        self.out_features = int(out_features)
        if generators is None:
            generators = [None] * self.n_members
        if len(generators) != self.n_members:
            raise ValueError(f"need one generator per member ({self.n_members}), got {len(generators)}")
        bound = 1.0 / math.sqrt(in_features) if in_features > 0 else 0.0
        self.weight = nn.Parameter(
            _uniform((in_features, out_features), bound, generators, dtype, device)
        )
        self.bias = nn.Parameter(_uniform((1, out_features), bound, generators, dtype, device))

    def forward(self, x: torch.Tensor, members: slice | None = None) -> torch.Tensor:
        w, b = self.weight, self.bias
        if members is not None:
            w, b = w[members], b[members]
        if x.dim() == 3:
            return torch.baddbmm(b, x, w)
        return torch.matmul(x, w) + b

    def extra_repr(self) -> str:
        return f"n_members={self.n_members}, in_features={self.in_features}, out_features={self.out_features}"


class BatchedGaussianMLP(nn.Module):
    """L heteroscedastic regression MLPs with a mean head and a variance head on h(x).

    ``forward(x, members=None)`` returns ``(mean, var, h)``: mean and var of shape (L, n)
    (scalar response), h of shape (L, n, p_h) -- the last hidden layer, post-activation,
    which is the feature vector of Theorem 1 (eq. 17: eta = W h).
    """

    def __init__(self, n_members: int, n_features: int, hidden: Sequence[int] = (128, 64, 32),
                 activation: str = "relu", *, generators=None, dtype=torch.float32, device="cpu"):
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
        self.n_members = int(n_members)
        self.n_features = int(n_features)
        self.hidden = tuple(int(h) for h in hidden)
        self.activation = activation
        if generators is None:
            generators = [None] * self.n_members
        widths = (self.n_features, *self.hidden)
        kw = dict(generators=generators, dtype=dtype, device=device)
        self.trunk = nn.ModuleList(
            BatchedLinear(n_members, widths[i], widths[i + 1], **kw) for i in range(len(self.hidden))
        )
        self.mean_head = BatchedLinear(n_members, widths[-1], 1, **kw)
        self.var_head = BatchedLinear(n_members, widths[-1], 1, **kw)

    @property
    def n_hidden_out(self) -> int:
        """p_h: the width of h(x) (the last hidden layer; the input width if there is none)."""
        return self.hidden[-1] if self.hidden else self.n_features

    def features(self, x: torch.Tensor, members: slice | None = None) -> torch.Tensor:
        """h(x): (L, n, p_h). x is (L, n, p) or (n, p) (shared by all members)."""
        act = ACTIVATIONS[self.activation]
        h = x
        for layer in self.trunk:
            h = act(layer(h, members))
        if not self.trunk:  # no hidden layer: h(x) = x for every member
            L = self._n_selected(members)
            h = x if x.dim() == 3 else x.unsqueeze(0).expand(L, *x.shape)
        return h

    def forward(self, x: torch.Tensor, members: slice | None = None):
        h = self.features(x, members)
        mean = self.mean_head(h, members).squeeze(-1)
        var = F.softplus(self.var_head(h, members).squeeze(-1)) + VARIANCE_FLOOR
        return mean, var, h

    def _n_selected(self, members: slice | None) -> int:
        return len(range(self.n_members)[members]) if members is not None else self.n_members


def gaussian_nll(mean: torch.Tensor, var: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Per-member *mean* over rows of l_i = 1/2 [ (y_i - eta_i)^2 / sigma_i^2 + log sigma_i^2 ].

    Hoffmann & Elster eq. (4) per sample, p_y = 1, constants dropped. Written by hand rather
    than ``nn.GaussianNLLLoss`` so that the factor convention is explicit (spec P13).
    mean, var: (L, n); y: (L, n) or (n,). Returns (L,).
    """
    return 0.5 * ((y - mean) ** 2 / var + torch.log(var)).mean(dim=-1)


def member_permutations(n_rows: int, generators, device="cpu") -> torch.Tensor:
    """One random permutation of the rows per member, (L, n_rows), member l from its own
    generator (so a member's mini-batches depend only on its own seed)."""
    return torch.stack([torch.randperm(n_rows, generator=g) for g in generators]).to(device)
