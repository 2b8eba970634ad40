"""Hamiltonian Monte Carlo with one independent chain per ensemble member ("optimise, then sample").

The members of a trained ensemble sit in different modes of the posterior; a short HMC run from
each explores the mode around it, and the kept draws of all chains form the predictive mixture.
This is the two-stage recipe of Bayesian deep ensembles by MILE (Sommer et al., ICLR 2025, and
scikit-learn-contrib's ``bde``), here with Metropolis-corrected HMC (Neal 2011) instead of the
microcanonical sampler, so every chain targets its posterior exactly.

`batched_hmc` runs L chains at once on parameters stacked along a leading member axis (the layout
of `dubito.nn.batched`): ``potential()`` returns the L energies U_l, whose gradients never mix
members, so one backward pass gives every chain its own gradient. Per iteration and chain:
momentum r ~ N(0, I); ``n_leapfrog`` leapfrog steps of size eps_l (jittered by U[0.8, 1.2]);
accept with probability min(1, exp(H_0 - H_1)), H = U + |r|^2 / 2; a rejected chain keeps its
position exactly. During warm-up each eps_l is adapted by dual averaging towards
``target_accept`` (Hoffman & Gelman 2014, Algorithm 5: gamma 0.05, t0 10, kappa 0.75) and then
frozen at its averaged value.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import NamedTuple

import torch

__all__ = ["HMCResult", "batched_hmc"]

#: Hoffman & Gelman (2014), Sec. 3.2: the dual-averaging constants of NUTS (Stan's defaults).
_GAMMA, _T0, _KAPPA = 0.05, 10.0, 0.75
#: Step-size jitter, U[1 - j, 1 + j] (Neal 2011, Sec. 5.4.2.2): avoids periodic trajectories.
_JITTER = 0.2


class HMCResult(NamedTuple):
    """draws: one tensor per parameter, shape (n_kept, L, ...); acceptance: (L,) mean acceptance
    probability over the sampling iterations; step_size: (L,) the adapted eps_l."""

    draws: list[torch.Tensor]
    acceptance: torch.Tensor
    step_size: torch.Tensor


def _per_member(x: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """(L,) values reshaped to broadcast against a parameter of shape (L, ...)."""
    return x.view((x.shape[0],) + (1,) * (like.dim() - 1)).to(like.dtype)


def _half_square(tensors: Sequence[torch.Tensor], L: int) -> torch.Tensor:
    return sum(0.5 * (t**2).reshape(L, -1).sum(-1) for t in tensors)


def batched_hmc(params: Sequence[torch.nn.Parameter], potential: Callable[[], torch.Tensor], *,
                n_warmup: int, n_samples: int, thin: int = 1, n_leapfrog: int = 10,
                target_accept: float = 0.8, initial_step: float = 1e-3,
                generator: torch.Generator | None = None,
                progress: Callable[[int], None] | None = None) -> HMCResult:
    """L independent HMC chains on ``params`` (each (L, ...); updated in place, left at the last
    draw). ``potential()`` evaluates U_l at the current ``params`` and returns shape (L,).

    Keeps every ``thin``-th of the ``n_samples`` iterations after ``n_warmup``: n_samples // thin
    draws per chain. A non-finite energy rejects the proposal. ``progress(i)`` is called after
    iteration i (0-based), if given.
    """
    if n_warmup < 0 or n_samples < 1 or thin < 1 or n_leapfrog < 1:
        raise ValueError("need n_warmup >= 0, n_samples >= 1, thin >= 1 and n_leapfrog >= 1")
    if not 0.0 < target_accept < 1.0:
        raise ValueError(f"target_accept must lie in (0, 1), got {target_accept}")
    params = list(params)
    L = params[0].shape[0]
    ref = params[0]
    cpu = dict(dtype=torch.float64)

    def energy_and_grad():
        for p in params:
            p.grad = None
        u = potential()
        u.sum().backward()
        return u.detach(), [p.grad.detach().clone() for p in params]

    log_eps = torch.full((L,), math.log(initial_step), **cpu)
    mu = log_eps + math.log(10.0)
    h_bar = torch.zeros(L, **cpu)
    log_eps_bar = torch.zeros(L, **cpu)
    u, grad = energy_and_grad()
    kept: list[list[torch.Tensor]] = [[] for _ in params]
    accept_sum = torch.zeros(L, **cpu)
    for it in range(n_warmup + n_samples):
        jitter = 1.0 - _JITTER + 2 * _JITTER * torch.rand(L, generator=generator, **cpu)
        eps = (torch.exp(log_eps) * jitter).to(ref.device)
        start = [p.detach().clone() for p in params]
        u0, grad0 = u, grad
        momenta = [torch.randn(p.shape, generator=generator, dtype=p.dtype).to(p.device) for p in params]
        h0 = u0 + _half_square(momenta, L)
        with torch.no_grad():
            for r, g, p in zip(momenta, grad, params):
                r -= 0.5 * _per_member(eps, p) * g
        for step in range(n_leapfrog):
            with torch.no_grad():
                for r, p in zip(momenta, params):
                    p += _per_member(eps, p) * r
            u, grad = energy_and_grad()
            factor = 1.0 if step < n_leapfrog - 1 else 0.5
            with torch.no_grad():
                for r, g, p in zip(momenta, grad, params):
                    r -= factor * _per_member(eps, p) * g
        dh = (u + _half_square(momenta, L) - h0).to(torch.float64).cpu()
        dh = torch.where(torch.isfinite(dh), dh, torch.full_like(dh, math.inf))
        accept_prob = torch.exp(-dh.clamp(min=0.0))
        accepted = torch.rand(L, generator=generator, **cpu) < accept_prob
        keep = accepted.to(ref.device)
        with torch.no_grad():
            for p, old in zip(params, start):
                p.copy_(torch.where(_per_member(keep, p).bool(), p, old))
        u = torch.where(keep, u, u0)
        grad = [torch.where(_per_member(keep, p).bool(), g, g0) for p, g, g0 in zip(params, grad, grad0)]
        if it < n_warmup:
            m = it + 1
            h_bar = (1 - 1 / (m + _T0)) * h_bar + (target_accept - accept_prob) / (m + _T0)
            log_eps = mu - math.sqrt(m) / _GAMMA * h_bar
            weight = m**-_KAPPA
            log_eps_bar = weight * log_eps + (1 - weight) * log_eps_bar
            if m == n_warmup:
                log_eps = log_eps_bar.clone()
        else:
            accept_sum += accept_prob
            if (it - n_warmup + 1) % thin == 0:
                for store, p in zip(kept, params):
                    store.append(p.detach().clone())
        if progress is not None:
            progress(it)
    draws = [torch.stack(store) for store in kept]
    return HMCResult(draws, accept_sum / n_samples, torch.exp(log_eps))
