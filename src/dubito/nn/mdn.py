r"""Mixture density network (Bishop 1994): an MLP whose output parametrises a Gaussian mixture.

For K components the trunk (`dubito.nn.dropout_mlp.MLP`, no dropout; or any ``body`` module,
e.g. `dubito.nn.pilotnet.PilotNet` for images) ends in a linear layer of width 3K, split into

* logits a_k(x)   -> weights   pi_k(x) = softmax(a(x))_k      (returned as log pi, log_softmax)
* means  mu_k(x)  (identity link)
* raw    r_k(x)   -> variances sigma_k^2(x) = softplus(r_k(x)) + variance_floor

and the loss is the mixture negative log-likelihood per row,

    -log p(y | x) = -logsumexp_k [ log pi_k(x) - 1/2 log(2 pi sigma_k^2(x))
                                   - (y - mu_k(x))^2 / (2 sigma_k^2(x)) ],

evaluated with ``torch.logsumexp`` (no exp of large negatives, no log of a sum that
underflows), so it stays finite when every component is far from y.

Collapse guard: ``variance_floor`` bounds each component's density by
1/sqrt(2 pi floor), so a component that shrinks onto a single training point gains a bounded
likelihood instead of an unbounded one (the degenerate maximum of mixture likelihoods;
Bishop 2006, §9.2.1). keras-mdn-layer (the benchmark's implementation, spec §3.3 [C]) uses
sigma = ELU(r) + 1 + 1e-7 instead; softplus + floor is ours (the link of our ensembles,
`dubito.nn.batched`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn
from torch.nn import functional as F

from dubito.nn.dropout_mlp import MLP

__all__ = ["MixtureDensityNet", "mixture_nll"]

_LOG_2PI = math.log(2.0 * math.pi)


class MixtureDensityNet(nn.Module):
    """``forward(x)`` -> ``(log_weights, means, variances)``, each (n, K).

    ``body``: the trunk, a module x -> (n, 3K). None (default) builds
    ``MLP(n_features, hidden, 3K, activation)``; for images pass e.g.
    ``PilotNet(image_shape, hidden, 3 * n_components, activation)`` (`dubito.nn.pilotnet`;
    ``n_features``, ``hidden``, ``activation``, ``generator``, ``dtype`` and ``device`` are then
    unused).
    """

    def __init__(self, n_features: int, hidden: Sequence[int] = (100, 50, 10), n_components: int = 50,
                 activation: str = "relu", variance_floor: float = 1e-4, *, generator=None,
                 dtype=torch.float32, device="cpu", body: nn.Module | None = None):
        super().__init__()
        if not variance_floor > 0:
            raise ValueError(f"variance_floor must be > 0, got {variance_floor!r}")
        self.n_components = int(n_components)
        self.variance_floor = float(variance_floor)
        if body is None:
            body = MLP(n_features, hidden, 3 * self.n_components, activation, 0.0,
                       generator=generator, dtype=dtype, device=device)
        elif getattr(body, "out_features", 3 * self.n_components) != 3 * self.n_components:
            raise ValueError(f"body must output 3 * n_components = {3 * self.n_components} values, "
                             f"it has out_features = {body.out_features}")
        self.body = body

    def forward(self, x: torch.Tensor):
        logits, means, raw = self.body(x).split(self.n_components, dim=-1)
        return F.log_softmax(logits, dim=-1), means, F.softplus(raw) + self.variance_floor


def mixture_nll(log_weights: torch.Tensor, means: torch.Tensor, variances: torch.Tensor,
                y: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    """Mixture NLL -log sum_k pi_k N(y; mu_k, sigma_k^2) with logsumexp; params (n, K), y (n,).

    ``reduction``: "mean" (a scalar) or "none" (per row, (n,)). Includes the log(2 pi) constant,
    so it is the exact negative log density.
    """
    z2 = (y.unsqueeze(-1) - means) ** 2 / variances
    per_row = -torch.logsumexp(log_weights - 0.5 * (torch.log(variances) + _LOG_2PI + z2), dim=-1)
    return per_row.mean() if reduction == "mean" else per_row
