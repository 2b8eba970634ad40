r"""Multi-Drop (thesis §2.2.3, spec §2.5): concrete dropout with one learned rate per input unit.

p_drop^k = sigmoid(ρ_k), k = 1..D, a vector ρ ∈ R^D (D = the wrapped layer's inputs, or
``in_features``). Unit k's relaxed keep mask uses its own rate and is rescaled by its own
1/p_keep^k:

    z̃_k = sigmoid( (-ρ_k + log(u + ε) - log(1 - u + ε)) / t ),   out_k = x_k z̃_k / p_keep^k,

(units along dimension 1 of the input; temperature t = 0.1 [T], ε = 1e-7, init p = 0.1 [R]).

Regulariser (thesis eq. 2.27 with the spec's KL-consistent per-row weight term, §2.5 [R]):

    R = λ_w Σ_k ||W̃[k, :]||² / p_keep^k  +  λ_w ||b||²  -  β Σ_k H_b(p_drop^k),

W̃[k, :] the weights leaving unit k (column k of a torch ``nn.Linear`` weight). The D factor of
concrete dropout is gone because the entropy sum runs over the units. ``weight_term="plain"``
gives λ_w ||W̃||² instead (the thesis writes a plain λ ||M||², spec §2.5: a flag). λ_w and β as in
`dubito.nn.concrete_dropout` (3.5e-6 [T] and 1/N_train [R]).

Invariant (spec §2.5, tested): with all ρ_k equal, Multi-Drop is concrete dropout exactly (the same
noise gives the same output, and the regulariser is the same).
"""

from __future__ import annotations

import torch
from torch import nn

from dubito.nn.concrete_dropout import ConcreteDropout

__all__ = ["MultiDrop"]


class MultiDrop(ConcreteDropout):
    """Concrete dropout with a learned rate per unit; see the module docstring.

    ``MultiDrop(layer)`` wraps a layer whose weight's dimension 1 counts the units (``nn.Linear``:
    in_features); ``MultiDrop(in_features=D)`` is the bare dropout (no weight term). ``p_drop`` is a
    (D,) tensor.
    """

    def __init__(self, layer: nn.Module | None = None, *, init_p: float = 0.1, temperature: float = 0.1,
                 in_features: int | None = None, weight_regularizer: float = 3.5e-6,
                 dropout_regularizer: float | None = None, weight_term: str = "kl", mc_sampler: str = "relaxed"):
        super().__init__(layer, init_p=init_p, temperature=temperature, in_features=in_features,
                         weight_regularizer=weight_regularizer, dropout_regularizer=dropout_regularizer,
                         weight_term=weight_term, mc_sampler=mc_sampler)
        if self.in_features is None:
            raise ValueError("MultiDrop needs its number of units: wrap a layer with a weight (e.g. nn.Linear) "
                             "or pass in_features")
        self.rho = nn.Parameter(self.rho.detach().expand(self.in_features).clone())

    @property
    def p_drop(self) -> torch.Tensor:
        return torch.sigmoid(self.rho)
