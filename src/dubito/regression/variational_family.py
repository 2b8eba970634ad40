r"""Variational families over the flat predictor parameters θ ∈ R^d (spec §2.6, §3).

* `HyperNetwork` (HyVI; spec §2.6, [C]'s "BigGenerator"): θ = h_λ(ε), ε ~ N(0, I_latent),
  h_λ = Linear(latent, 20) → ReLU → Linear(20, 40) → ReLU → Linear(40, d), the last layer
  linear. Initialisation is PyTorch's ``nn.Linear`` default (weights and biases
  U(−1/√fan_in, 1/√fan_in)), drawn from the given generator so a seed fixes it. It has
  latent·20 + 20 + 20·40 + 40 + 41·d parameters (31,751 for boston, d = 751). Its q lives on a
  manifold of dimension ≤ latent, so it has no density: only k-NN objectives apply.
* `MeanField` (MFVI; spec §3): q(θ) = ∏_k N(θ_k; μ_k, σ_k²), σ = softplus(ρ), reparameterised as
  θ = μ + σ ε. Initialisation [C]: μ ~ N(0, 1), σ = 0.001. `MeanField.log_prob` is the
  *correct* log-density Σ_k [−½ ln 2π − ln σ_k − (θ_k − μ_k)²/(2σ_k²)] (spec pitfall 6: [C]
  divides by σ instead of σ² and takes ½ Σ ln σ; test 9 checks it against
  ``torch.distributions.Normal``).
* `normal_log_prob(theta, sd)`: the prior ln N(θ; 0, sd² I) (spec §2.7), per row.

Both families expose ``sample(n, generator) -> (n, d)`` (differentiable in their parameters)
and are ``torch.nn.Module``s so Adam sees ``parameters()``.
"""

from __future__ import annotations

import itertools
import math

import torch
from torch import nn
from torch.nn import functional as F

from dubito._validation import check_float, check_int

__all__ = ["HyperNetwork", "MeanField", "normal_log_prob", "softplus_inv"]

_LOG_2PI = math.log(2.0 * math.pi)


def softplus_inv(x: float) -> float:
    """ρ with softplus(ρ) = x > 0: ρ = x + ln(1 − e^{−x})."""
    return x + math.log(-math.expm1(-x))


def normal_log_prob(theta: torch.Tensor, sd: float) -> torch.Tensor:
    """ln N(θ; 0, sd² I) = Σ_k [−½ ln 2π − ln sd − θ_k²/(2 sd²)] for each row of θ (n, d) -> (n,)."""
    d = theta.shape[-1]
    return -d * (0.5 * _LOG_2PI + math.log(sd)) - (theta * theta).sum(-1) / (2.0 * sd * sd)


def _linear(n_in: int, n_out: int, generator, dtype, device) -> nn.Linear:
    """nn.Linear with PyTorch's default init (kaiming_uniform(a=√5) ⇒ U(±1/√fan_in), bias the
    same bound) drawn from ``generator``."""
    layer = torch.nn.utils.skip_init(nn.Linear, n_in, n_out, dtype=dtype, device=device)  # no global-RNG draw
    bound = 1.0 / math.sqrt(n_in)
    with torch.no_grad():
        layer.weight.copy_((torch.rand((n_out, n_in), generator=generator, dtype=dtype, device=device) * 2 - 1) * bound)
        layer.bias.copy_((torch.rand((n_out,), generator=generator, dtype=dtype, device=device) * 2 - 1) * bound)
    return layer


class HyperNetwork(nn.Module):
    """θ = h_λ(ε), ε ~ N(0, I_latent_dim): the HyVI generator (module docstring).

    Parameters
    ----------
    n_params : int — d, the output size.
    latent_dim : int, default 5 — spec §2.6 (every HyVI call in [C] passes 5).
    hidden : tuple of int, default (20, 40) — [C]'s BigGenerator widths.
    generator : torch.Generator or None — seeds the initialisation.
    """

    def __init__(self, n_params: int, latent_dim: int = 5, hidden=(20, 40), generator=None,
                 dtype=torch.float32, device="cpu"):
        super().__init__()
        self.n_params = check_int(n_params, "n_params", min_value=1)
        self.latent_dim = check_int(latent_dim, "latent_dim", min_value=1)
        widths = (self.latent_dim, *(check_int(h, "generator_hidden widths", min_value=1) for h in hidden),
                  self.n_params)
        layers = []
        for i, (a, b) in enumerate(itertools.pairwise(widths)):
            layers.append(_linear(a, b, generator, dtype, device))
            if i < len(widths) - 2:
                layers.append(nn.ReLU())
        self.net = nn.Sequential(*layers)

    def forward(self, eps: torch.Tensor) -> torch.Tensor:
        """h_λ(ε) for ε (n, latent_dim) -> θ (n, d)."""
        return self.net(eps)

    def sample(self, n: int, generator=None) -> torch.Tensor:
        """n draws θ ~ q, (n, d), differentiable in λ."""
        p = self.net[0].weight
        eps = torch.randn((n, self.latent_dim), generator=generator, dtype=p.dtype, device=p.device)
        return self.net(eps)


class MeanField(nn.Module):
    """q(θ) = N(μ, diag σ²), σ = softplus(ρ) (module docstring).

    Parameters
    ----------
    n_params : int — d.
    init_sd : float, default 0.001 — initial σ ([C]).
    init_mean_sd : float, default 1.0 — μ ~ N(0, init_mean_sd²) at initialisation ([C]: 1).
    generator : torch.Generator or None — seeds μ.
    """

    def __init__(self, n_params: int, init_sd: float = 1e-3, init_mean_sd: float = 1.0, generator=None,
                 dtype=torch.float32, device="cpu"):
        super().__init__()
        self.n_params = check_int(n_params, "n_params", min_value=1)
        init_sd = check_float(init_sd, "init_sd", strictly_positive=True)
        init_mean_sd = check_float(init_mean_sd, "init_mean_sd", min_value=0.0)
        self.mu = nn.Parameter(torch.randn((self.n_params,), generator=generator, dtype=dtype, device=device)
                               * init_mean_sd)
        self.rho = nn.Parameter(torch.full((self.n_params,), softplus_inv(init_sd), dtype=dtype, device=device))

    @property
    def sd(self) -> torch.Tensor:
        return F.softplus(self.rho)

    def sample(self, n: int, generator=None) -> torch.Tensor:
        """n draws θ = μ + σ ε, (n, d), differentiable in (μ, ρ)."""
        eps = torch.randn((n, self.n_params), generator=generator, dtype=self.mu.dtype, device=self.mu.device)
        return self.mu + self.sd * eps

    def log_prob(self, theta: torch.Tensor) -> torch.Tensor:
        """ln q(θ) = Σ_k [−½ ln 2π − ln σ_k − (θ_k − μ_k)²/(2σ_k²)] per row of θ (n, d) -> (n,)."""
        sd = self.sd
        z = (theta - self.mu) / sd
        return -0.5 * (z * z).sum(-1) - torch.log(sd).sum() - 0.5 * self.n_params * _LOG_2PI

    def entropy(self) -> torch.Tensor:
        """H(q) = Σ_k [½ ln(2πe) + ln σ_k] (closed form)."""
        return torch.log(self.sd).sum() + 0.5 * self.n_params * (1.0 + _LOG_2PI)
