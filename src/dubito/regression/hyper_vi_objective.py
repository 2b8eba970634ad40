"""The training objective of `HyperVIRegressor`: the minibatch negative ELBO and one epoch of it.

`_Objective` is the loss of the module docstring of `dubito.regression.hyper_vi` ("Loss per
minibatch"): −LL + (|B| / |D|) · KL for one (family, space), with the likelihood noise σ_l fixed
(``noise_std``, checked by `check_noise_std`) or learned (the log-scale of a `NoiseScale`); its
k-NN KL estimates are `dubito.metrics.entropy.knn_kl` / ``function_kl``, the mean-field
parameter-space KL is analytic. `_run_epoch` is one pass over the rows in minibatches, with an Adam
step each. `min_nn_distance` is the collapse monitor's nearest-neighbour distance among q's draws.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from dubito._validation import check_float
from dubito.data.ood_box import UniformBox
from dubito.metrics.entropy import function_kl, knn_kl
from dubito.nn.flat_mlp import FlatMLP
from dubito.regression.variational_family import normal_log_prob

__all__ = ["MIN_NOISE_STD", "NoiseScale", "check_noise_std", "min_nn_distance"]

_LOG_2PI = math.log(2.0 * math.pi)


def min_nn_distance(samples: torch.Tensor) -> float:
    """min_i min_{j≠i} ‖s_i − s_j‖ of the rows of ``samples`` (n, d) (no grad; row blocks)."""
    best = math.inf
    with torch.no_grad():
        s = samples.detach()
        n = s.shape[0]
        for start in range(0, n, 512):
            block = torch.cdist(s[start:start + 512], s)
            idx = torch.arange(start, min(start + 512, n), device=s.device)
            block[idx - start, idx] = math.inf
            best = min(best, float(block.min()))
    return best


class _Objective:
    """The minibatch negative ELBO of the module docstring of `dubito.regression.hyper_vi`, for one
    (family, space)."""

    def __init__(self, family, net: FlatMLP, *, noise_std: float | None, prior_sd: float, space: str,
                 box: UniformBox, n_ll: int, n_kl: int, n_ood: int, n_train: int, analytic_kl: bool,
                 log_noise: torch.Tensor | None = None):
        self.family, self.net = family, net
        self.noise_std, self.prior_sd, self.space, self.box = noise_std, prior_sd, space, box
        self.log_noise = log_noise  # the learned ln σ_l (a parameter), or None: σ_l = noise_std fixed
        self.n_ll, self.n_kl, self.n_ood, self.n_train = n_ll, n_kl, n_ood, n_train
        self.analytic_kl = analytic_kl
        self.last_q = None  # the detached q draws of the last KL term (collapse monitor)

    def log_likelihood(self, theta: torch.Tensor, xb: torch.Tensor, yb: torch.Tensor) -> torch.Tensor:
        """(1/S) Σ_s Σ_b ln N(y_b; f_θs(x_b), σ_l²), θ (S, d)."""
        if self.log_noise is not None:
            r = (yb - self.net(theta, xb)) * torch.exp(-self.log_noise)
            return -0.5 * (r * r).sum() / theta.shape[0] - xb.shape[0] * (0.5 * _LOG_2PI + self.log_noise)
        r = (yb - self.net(theta, xb)) / self.noise_std  # (S, B)
        return -0.5 * (r * r).sum() / theta.shape[0] - xb.shape[0] * (0.5 * _LOG_2PI + math.log(self.noise_std))

    def current_noise_std(self) -> float:
        """σ_l now: the fixed ``noise_std`` or exp of the learned log-scale."""
        return float(self.noise_std) if self.log_noise is None else float(torch.exp(self.log_noise.detach()))

    def kl(self, theta_q: torch.Tensor, generator) -> torch.Tensor:
        """The KL estimate of `dubito.regression.hyper_vi`'s module docstring from the q draws θ_q (S_KL, d)."""
        if self.analytic_kl:  # MFVI: mean of ln q − ln p over the draws (spec §3)
            self.last_q = theta_q.detach()
            return (self.family.log_prob(theta_q) - normal_log_prob(theta_q, self.prior_sd)).mean()
        prior = torch.randn((self.n_kl, theta_q.shape[1]), generator=generator, dtype=theta_q.dtype,
                            device=theta_q.device) * self.prior_sd
        if self.space == "parameter":
            self.last_q = theta_q.detach()
            return knn_kl(theta_q, prior)
        X = self.box.sample(self.n_ood, generator, dtype=theta_q.dtype, device=theta_q.device)
        fq = self.net(theta_q, X)
        with torch.no_grad():
            fp = self.net(prior, X)
        self.last_q = fq.detach()
        return function_kl(fq, fp)

    def batch_loss(self, xb: torch.Tensor, yb: torch.Tensor, generator) -> torch.Tensor:
        """−LL + (|B|/|D|)·KL with S_LL + S_KL fresh q draws (one family pass, split in two)."""
        theta = self.family.sample(self.n_ll + self.n_kl, generator)
        ll = self.log_likelihood(theta[:self.n_ll], xb, yb)
        kl = self.kl(theta[self.n_ll:], generator)
        return -ll + (xb.shape[0] / self.n_train) * kl


def _run_epoch(objective: _Objective, optimizer, X: torch.Tensor, y: torch.Tensor, batch_size: int,
               order: torch.Generator, noise: torch.Generator) -> list[tuple[int, float]]:
    """One pass over a fresh permutation of the rows; an Adam step per minibatch when
    ``optimizer`` is given. Returns [(|B|, loss_B)] per minibatch."""
    n = X.shape[0]
    perm = torch.randperm(n, generator=order).to(X.device)
    out = []
    for start in range(0, n, batch_size):
        idx = perm[start:start + batch_size]
        if optimizer is None:
            with torch.no_grad():
                loss = objective.batch_loss(X[idx], y[idx], noise)
        else:
            loss = objective.batch_loss(X[idx], y[idx], noise)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        value = float(loss.detach())
        if not math.isfinite(value):
            raise FloatingPointError(f"the minibatch loss is {value}; training diverged (try a smaller lr)")
        out.append((int(idx.shape[0]), value))
    return out


class NoiseScale(nn.Module):
    """The learned likelihood noise σ_l = exp(log_sd): one parameter, in q's dtype."""

    def __init__(self, sd: float, dtype=torch.float32, device="cpu"):
        super().__init__()
        self.log_sd = nn.Parameter(torch.tensor(math.log(sd), dtype=dtype, device=device))


#: Smallest fixed noise sd, standardised target units: the float32 training cannot resolve a
#: smaller one (float32's eps is 1.2e-7), and 1e-300 overflowed its residuals (issue 22).
MIN_NOISE_STD = 1e-6


def check_noise_std(value) -> float:
    """The fixed σ_l ``noise_std``: a float >= `MIN_NOISE_STD`."""
    value = check_float(value, "noise_std", strictly_positive=True)
    if value < MIN_NOISE_STD:
        raise ValueError(f"noise_std must be >= {MIN_NOISE_STD:g} (in standardised target units, raw ones with "
                         f"standardize=False: the float32 training cannot resolve a smaller noise), got {value:g}")
    return value
