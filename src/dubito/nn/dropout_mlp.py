r"""A plain MLP with (optional) dropout after every hidden layer, and batched MC-dropout passes.

`MLP` maps (n, p) -> (n, out): hidden layers ``act(W h + b)``, each followed by dropout with
probability ``dropout``, then a linear output layer (no activation, no dropout). This is the
dense part of the networks of the IC-NLM benchmarks (spec ``icnlm.md`` §3.3 [C]: "dropout
after every dense layer"; the last hidden layer is followed by dropout too, the output is not).

Dropout is inverted dropout: a kept unit is scaled by 1/(1 - p), so the network without
dropout (``eval()``, no masks) is the weight-scaling approximation of the MC mean
(Srivastava et al. 2014).

* Training (``train()`` mode, no ``masks``): an independent Bernoulli mask per row and unit,
  drawn from the ``generator`` passed to ``forward`` (so a seed fixes training).
* Monte Carlo dropout (Gal & Ghahramani 2016, eq. 8): ``sample_masks(T, generator)`` draws T
  masks, one (T, width) tensor per hidden layer; ``forward(x, masks)`` evaluates all T
  thinned networks in **one** pass, (n, p) -> (T, n, out). Mask t is one draw of the
  weights omega_t ~ q(omega), shared by every input row (row i of pass t sees the same
  network as row j), so a prediction does not depend on which other rows are in the batch
  and joint draws over inputs come from one sampled function.

``features(x)`` is psi(x), the last hidden layer's output after its activation with dropout off
(the IC-NLM's features; `dubito.nn.pilotnet.PilotNet` has the same method).

Initialisation: PyTorch's ``nn.Linear`` default, U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for
weights and biases, drawn from an optional CPU ``torch.Generator`` (as in `dubito.nn.batched`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

from dubito.nn.batched import ACTIVATIONS

__all__ = ["MLP", "init_uniform_"]


def init_uniform_(layer: nn.Linear | nn.Conv2d, generator: torch.Generator | None = None) -> None:
    """PyTorch's default ``nn.Linear`` / ``nn.Conv2d`` init U(-1/sqrt(fan_in), 1/sqrt(fan_in))
    for weight and bias, drawn from ``generator``; fan_in = in_features (linear) or
    in_channels * kernel_h * kernel_w (convolution)."""
    fan_in = math.prod(layer.weight.shape[1:])
    bound = 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0
    with torch.no_grad():
        for p in (layer.weight, layer.bias):
            draw = torch.rand(p.shape, generator=generator, dtype=torch.float64) * 2.0 - 1.0
            p.copy_((draw * bound).to(dtype=p.dtype, device=p.device))


class MLP(nn.Module):
    """MLP n_features -> hidden... -> out_features with dropout after each hidden layer.

    ``forward(x, masks=None, generator=None)``:

    * ``masks`` given (a list with one (T, width) tensor per hidden layer, entries 0 or
      1/(1-p), e.g. from `sample_masks`): x is (n, p) or (T, n, p); returns (T, n, out);
    * else, in training mode with ``dropout > 0``: per-row masks from ``generator``;
      returns (n, out);
    * else (evaluation): no dropout; returns (n, out).
    """

    def __init__(self, n_features: int, hidden: Sequence[int] = (100, 50, 10), out_features: int = 1,
                 activation: str = "relu", dropout: float = 0.0, *, generator=None,
                 dtype=torch.float32, device="cpu"):
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
        if not 0.0 <= float(dropout) < 1.0:
            raise ValueError(f"dropout must lie in [0, 1), got {dropout!r}")
        self.n_features = int(n_features)
        self.hidden = tuple(int(h) for h in hidden)
        self.out_features = int(out_features)
        self.activation = activation
        self.dropout = float(dropout)
        widths = (self.n_features, *self.hidden, self.out_features)
        self.layers = nn.ModuleList()
        for i in range(len(widths) - 1):
            layer = nn.Linear(widths[i], widths[i + 1], dtype=dtype, device=device)
            init_uniform_(layer, generator)
            self.layers.append(layer)

    def sample_masks(self, n_masks: int, generator: torch.Generator | None = None,
                     dtype=torch.float64) -> list[torch.Tensor]:
        """T = ``n_masks`` dropout masks: one (T, width) CPU tensor per hidden layer, entries
        0 (dropped, probability p) or 1/(1-p) (kept). Drawn layer by layer from ``generator``."""
        keep = 1.0 - self.dropout
        return [
            (torch.rand((int(n_masks), w), generator=generator, dtype=torch.float64) >= self.dropout)
            .to(dtype) / keep
            for w in self.hidden
        ]

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """psi(x), (n, hidden[-1]): the last hidden layer's output after its activation, with
        dropout off whatever the mode (x itself when there is no hidden layer)."""
        act = ACTIVATIONS[self.activation]
        h = x
        for layer in self.layers[:-1]:
            h = act(layer(h))
        return h

    def forward(self, x: torch.Tensor, masks: Sequence[torch.Tensor] | None = None,
                generator: torch.Generator | None = None) -> torch.Tensor:
        act = ACTIVATIONS[self.activation]
        if masks is not None and (not self.hidden or len(masks) != len(self.hidden)):
            raise ValueError(
                f"need one mask per hidden layer ({len(self.hidden)}; MC dropout needs at least one), "
                f"got {len(masks)}"
            )
        if masks is not None:
            return self._forward_masked(x, masks)
        h = x
        for layer in self.layers[:-1]:
            h = act(layer(h))
            if self.training and self.dropout > 0:
                # 0/1 in h's dtype in place: no bool mask to convert forward and back (the same values)
                kept = torch.rand(h.shape, generator=generator, dtype=h.dtype, device=h.device).ge_(self.dropout)
                h = h * kept / (1.0 - self.dropout)
        return self.layers[-1](h)

    def _forward_masked(self, x: torch.Tensor, masks: Sequence[torch.Tensor]) -> torch.Tensor:
        """All T thinned networks at once: (n, p) or (T, n, p) -> (T, n, out).

        Each hidden layer is one ``baddbmm`` over the T stacked passes, so pass t is computed
        by the same (n x in) @ (in x out) product whatever T is, and the output layer is an
        elementwise product summed over the last hidden units: the T passes equal, bit for
        bit, T separate single-mask calls (a flattened (T n) x in GEMM, or a GEMV for the
        1-unit output, would not guarantee that). The output step holds T n p_h out numbers,
        so it suits a small ``out_features`` (1 for regression).
        """
        act = ACTIVATIONS[self.activation]
        h = x if x.dim() == 3 else x.unsqueeze(0).expand(masks[0].shape[0], *x.shape)
        T = h.shape[0]  # a 3-D x (as from PilotNet's trunk) may come with no dense masks
        for i, layer in enumerate(self.layers[:-1]):
            w = layer.weight.t().unsqueeze(0).expand(T, -1, -1)
            h = torch.baddbmm(layer.bias.view(1, 1, -1).expand(T, 1, -1), h, w)
            h = act(h) * masks[i].unsqueeze(-2)  # (T, 1, w): pass t's mask for every row
        last = self.layers[-1]
        # Output layer as a product and a sum over the last hidden units: a 1-column GEMM goes
        # through a GEMV whose rounding depends on the batch shape; the sum's does not.
        return (h.unsqueeze(-1) * last.weight.t()).sum(-2) + last.bias

    def extra_repr(self) -> str:
        return f"hidden={self.hidden}, activation={self.activation!r}, dropout={self.dropout}"
