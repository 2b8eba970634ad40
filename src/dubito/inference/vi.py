"""Reparameterised Gaussian variational inference with a rank-k factor covariance.

The family (Ong, Nott & Smith 2018, "Gaussian variational approximation with a factor
covariance structure", JCGS 27) is

    q_λ(θ) = N(μ, Σ),  Σ = B Bᵀ + D²,  D = diag(d),

with B (dim × k) lower-triangular (entries above the diagonal fixed at 0), λ = (μ, tril(B), d).
The ELBO L(λ) = E_q[log h(θ) − log q_λ(θ)] is maximised by stochastic gradient ascent with
the reparameterisation θ = μ + Bξ + d∘δ, ξ ~ N(0, I_k), δ ~ N(0, I_dim), g = ∇ log h(θ):

    ∇_μ L = E[g]
    ∇_B L = E[(g + Σ⁻¹(Bξ + d∘δ)) ξᵀ]     (lower triangle kept)
    ∇_d L = E[(g + Σ⁻¹(Bξ + d∘δ)) ∘ δ]

(the Σ⁻¹ terms are −∇_θ log q; with ``entropy_grad="analytic"`` they are replaced by their
expectations Σ⁻¹B and diag(Σ⁻¹)∘d, a lower-variance choice of ours; the default "sampled" is
the paper's). Σ⁻¹ and log|Σ| use the Woodbury identity and the matrix determinant lemma, so an
iteration costs O(M·dim·k) plus M evaluations of ∇ log h, batched.

Learning rates are ADADELTA's (Zeiler 2012), element-wise, as in Hoffmann & Klein (2023),
Algorithm 2:  E[g²] ← ρE[g²] + (1−ρ)g²;  Δ = √(E[Δ²] + ε)/√(E[g²] + ε) · g;
E[Δ²] ← ρE[Δ²] + (1−ρ)Δ²;  λ ← λ + Δ.  Defaults ρ = 0.95, ε = 1e-7 and M = 50 draws per
iteration (gradients averaged) come from the authors' code; so does the U(0, 1) initialisation of
μ, B and d, and the final estimate: the average of the iterates over the last 5% of iterations.

Convergence monitoring (our choice; the paper says only "while the ELBO has not converged"):
the ELBO estimate mean(log h − log q) over the same M draws is recorded each iteration; every
``window`` iterations its moving average over the last window is compared with the previous
one, and the run stops once |MA_k − MA_{k−1}| ≤ rtol·|MA_{k−1}| + atol (atol in nats; at least
``min_iter`` iterations done), or at ``max_iter`` (a ConvergenceWarning says so).
"""
from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import torch
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)

from dubito.inference.diagnostics import ConvergenceWarning

__all__ = ["FactorGaussian", "Adadelta", "elbo_estimate_and_gradients", "VIHistory", "VIResult", "fit_vi", "make_generator",
           "draw"]

LOG_2PI = math.log(2.0 * math.pi)


def draw(kind: str, shape, generator: torch.Generator | None, device, dtype=torch.float64) -> torch.Tensor:
    """``torch.randn`` ("normal") or ``torch.rand`` ("uniform") of ``shape`` from ``generator`` on the
    generator's own device, moved to ``device``: a CPU generator gives the same numbers whatever
    the device, so a seed means the same fit on a CPU and a GPU (up to the order of reductions)."""
    fn = torch.randn if kind == "normal" else torch.rand
    where = generator.device if generator is not None else device
    return fn(tuple(shape), generator=generator, dtype=dtype, device=where).to(device)


def make_generator(seed=None, device="cpu") -> torch.Generator:
    """A torch.Generator on ``device`` seeded by an int (or a fresh random seed when None);
    an existing Generator is returned as it is."""
    if isinstance(seed, torch.Generator):
        return seed
    g = torch.Generator(device=device)
    if seed is None:
        g.seed()
    else:
        g.manual_seed(int(seed))
    return g


@dataclass
class FactorGaussian:
    """N(mean, factor factorᵀ + diag(diag²)) in float64; ``factor`` is (dim, k)."""

    mean: torch.Tensor
    factor: torch.Tensor
    diag: torch.Tensor

    @property
    def dim(self) -> int:
        return self.mean.shape[0]

    @property
    def rank(self) -> int:
        return self.factor.shape[1]

    def covariance(self) -> torch.Tensor:
        return self.factor @ self.factor.T + torch.diag(self.diag**2)

    def variance(self) -> torch.Tensor:
        """Marginal variances, the diagonal of Σ."""
        return (self.factor**2).sum(dim=1) + self.diag**2

    def _woodbury(self):
        dinv2 = 1.0 / self.diag**2
        bd = self.factor * dinv2[:, None]                                   # D⁻²B
        cap = torch.eye(self.rank, dtype=self.mean.dtype, device=self.mean.device) + self.factor.T @ bd
        chol = torch.linalg.cholesky(cap)
        return dinv2, bd, chol

    def precision_matmul(self, v: torch.Tensor, _w=None) -> torch.Tensor:
        """Σ⁻¹ v for the rows of v (..., dim), by Woodbury."""
        dinv2, bd, chol = _w if _w is not None else self._woodbury()
        inner = torch.cholesky_solve((v @ bd).unsqueeze(-1), chol).squeeze(-1)   # (..., k)
        return v * dinv2 - inner @ bd.T

    def precision_diag(self, _w=None) -> torch.Tensor:
        dinv2, bd, chol = _w if _w is not None else self._woodbury()
        half = torch.linalg.solve_triangular(chol, bd.T, upper=False)            # L⁻¹ BᵀD⁻²
        return dinv2 - (half**2).sum(dim=0)

    def logdet(self, _w=None) -> torch.Tensor:
        dinv2, bd, chol = _w if _w is not None else self._woodbury()
        return torch.log(self.diag**2).sum() + 2.0 * torch.log(torch.diagonal(chol)).sum()

    def log_prob(self, x: torch.Tensor) -> torch.Tensor:
        w = self._woodbury()
        e = x - self.mean
        quad = (e * self.precision_matmul(e, w)).sum(-1)
        return -0.5 * (self.dim * LOG_2PI + self.logdet(w) + quad)

    def entropy(self) -> torch.Tensor:
        return 0.5 * (self.dim * (1.0 + LOG_2PI) + self.logdet())

    def sample(self, n: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """n draws; from ``generator`` on its own device (`draw`), so a CPU generator gives the same
        draws on every device."""
        xi = draw("normal", (n, self.rank), generator, self.mean.device, self.mean.dtype)
        delta = draw("normal", (n, self.dim), generator, self.mean.device, self.mean.dtype)
        return self.mean + xi @ self.factor.T + delta * self.diag

    def to_dict(self) -> dict[str, torch.Tensor]:
        return {"mean": self.mean, "factor": self.factor, "diag": self.diag}


class Adadelta:
    """ADADELTA ascent (Zeiler 2012) on a list of tensors, updated in place by ``step(grads)``.

    Per element: E[g²] ← ρE[g²] + (1−ρ)g²; Δ = √(E[Δ²]+ε)/√(E[g²]+ε)·g; E[Δ²] ← ρE[Δ²] + (1−ρ)Δ²;
    λ ← λ + Δ (ascent: the gradient is the ELBO's). Defaults from the authors' code.
    """

    def __init__(self, params: list[torch.Tensor], rho: float = 0.95, eps: float = 1e-7):
        self.params, self.rho, self.eps = params, float(rho), float(eps)
        self.sq_grad = [torch.zeros_like(p) for p in params]
        self.sq_delta = [torch.zeros_like(p) for p in params]

    def step(self, grads: list[torch.Tensor]) -> None:
        rho, eps = self.rho, self.eps
        for p, g, eg, ed in zip(self.params, grads, self.sq_grad, self.sq_delta):
            eg.mul_(rho).add_((1.0 - rho) * g * g)
            delta = torch.sqrt(ed + eps) / torch.sqrt(eg + eps) * g
            ed.mul_(rho).add_((1.0 - rho) * delta * delta)
            p.add_(delta)


@dataclass
class VIHistory:
    """What happened during fitting: ``elbo`` per iteration (the noisy M-draw estimate),
    ``elbo_ma`` per window (moving average), iterations run, whether the stopping rule was met,
    how many final iterates were averaged, wall-clock seconds."""

    elbo: np.ndarray
    elbo_ma: np.ndarray
    iterations: int
    converged: bool
    averaged_over: int
    seconds: float
    window: int = 0


@dataclass
class VIResult:
    """``q``: the fitted FactorGaussian (iterate average); ``q_last``: the last iterate;
    ``history``: a VIHistory."""

    q: FactorGaussian
    q_last: FactorGaussian
    history: VIHistory
    settings: dict = field(default_factory=dict)


def elbo_estimate_and_gradients(q: FactorGaussian, log_h: torch.Tensor, grad_log_h: torch.Tensor,
                                xi: torch.Tensor, delta: torch.Tensor, entropy_grad: str = "sampled", _w=None):
    """The M-draw ELBO estimate mean(log h − log q) and the reparameterisation gradients
    (∇_μ, ∇_B (lower triangle), ∇_d) of Ong et al. (2018) at θ = μ + ξBᵀ + δ∘d, given
    log h (M,) and ∇ log h (M, dim) at those θ; see the module docstring."""
    w = _w if _w is not None else q._woodbury()
    m, dim = delta.shape
    e = xi @ q.factor.T + delta * q.diag
    prec_e = q.precision_matmul(e, w)
    log_q = -0.5 * (dim * LOG_2PI + q.logdet(w) + (e * prec_e).sum(-1))
    value = float((log_h - log_q).mean())
    if entropy_grad == "sampled":
        ge = grad_log_h + prec_e
        grad_b = (ge.T @ xi) / m
        grad_d = (ge * delta).mean(0)
    elif entropy_grad == "analytic":
        grad_b = (grad_log_h.T @ xi) / m + q.precision_matmul(q.factor.T, w).T
        grad_d = (grad_log_h * delta).mean(0) + q.precision_diag(w) * q.diag
    else:
        raise ValueError(f"entropy_grad must be 'sampled' or 'analytic'; got {entropy_grad!r}")
    return value, (grad_log_h.mean(0), grad_b.tril(), grad_d)


def _autograd_value_and_grad(log_prob):
    def vg(theta):
        with torch.enable_grad():
            t = theta.detach().requires_grad_(True)
            lp = log_prob(t)
            (g,) = torch.autograd.grad(lp.sum(), t)
        return lp.detach(), g.detach()
    return vg


def fit_vi(
    log_prob: Callable[[torch.Tensor], torch.Tensor] | None = None,
    dim: int | None = None,
    *,
    value_and_grad: Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]] | None = None,
    rank: int = 3,
    n_draws: int = 50,
    max_iter: int = 10_000,
    min_iter: int = 1_000,
    window: int = 200,
    rtol: float | None = 1e-5,
    atol: float = 0.01,
    average: float = 0.05,
    rho: float = 0.95,
    eps: float = 1e-7,
    entropy_grad: str = "sampled",
    init_mean: torch.Tensor | None = None,
    init_factor: torch.Tensor | None = None,
    init_diag: torch.Tensor | None = None,
    seed=None,
    device="cpu",
    progress: bool = False,
    description: str = "VI",
) -> VIResult:
    """Fit q = N(μ, BBᵀ + D²) to the unnormalised log density log h by maximising the ELBO.

    log_prob / value_and_grad : log h of a batch θ (M, dim) -> (M,); or a function returning
        (log h (M,), ∇ log h (M, dim)) (analytic gradients); autograd is used with log_prob alone.
    dim : the dimension of θ (taken from init_mean when given).
    rank : k, the number of factors (paper: 3); n_draws : M draws per iteration (paper: 50).
    max_iter, min_iter, window, rtol, atol : stopping rule (module docstring); rtol=None runs max_iter.
    average : fraction of the iterations run whose iterates are averaged into ``q`` (code: 0.05).
    rho, eps : ADADELTA (code: 0.95, 1e-7).  entropy_grad : "sampled" (paper) or "analytic".
    init_mean, init_factor, init_diag : starting values; missing ones are drawn U(0, 1) (code).
    seed : int, None or torch.Generator — all randomness comes from it.
    """
    if value_and_grad is None:
        if log_prob is None:
            raise ValueError("give log_prob or value_and_grad")
        value_and_grad = _autograd_value_and_grad(log_prob)
    if entropy_grad not in ("sampled", "analytic"):
        raise ValueError(f"entropy_grad must be 'sampled' or 'analytic'; got {entropy_grad!r}")
    device = torch.device(device)
    f64 = dict(dtype=torch.float64, device=device)
    if dim is None:
        if init_mean is None:
            raise ValueError("give dim or init_mean")
        dim = int(torch.as_tensor(init_mean).shape[0])
    dim, rank = int(dim), int(rank)
    if not 1 <= rank <= dim:
        raise ValueError(f"rank must be in [1, dim={dim}]; got {rank}")
    if n_draws < 1 or max_iter < 1 or window < 1:
        raise ValueError("n_draws, max_iter and window must be positive")
    gen = make_generator(seed)  # on the CPU whatever the device: the same draws everywhere (`draw`)

    mask = torch.ones(dim, rank, **f64).tril()
    mu = (torch.as_tensor(init_mean, **f64).clone() if init_mean is not None
          else draw("uniform", (dim,), gen, device))
    if init_factor is not None:
        B = torch.as_tensor(init_factor, **f64).clone() * mask
    else:
        while True:  # U(0, 1) lower-triangular, redrawn until of full rank (code)
            B = draw("uniform", (dim, rank), gen, device) * mask
            if torch.linalg.matrix_rank(B) == rank:
                break
    d = (torch.as_tensor(init_diag, **f64).clone() if init_diag is not None
         else draw("uniform", (dim,), gen, device))
    if mu.shape != (dim,) or B.shape != (dim, rank) or d.shape != (dim,):
        raise ValueError("init_mean, init_factor, init_diag must be (dim,), (dim, rank), (dim,)")

    opt = Adadelta([mu, B, d], rho=rho, eps=eps)
    n_avg_max = max(1, math.ceil(average * max_iter))
    ring = torch.empty(n_avg_max, 2 * dim + dim * rank, **f64)
    elbo = np.empty(max_iter)
    ma: list[float] = []
    converged = False
    start = time.perf_counter()

    bar = None
    if progress:
        bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                       TimeElapsedColumn(), TextColumn("{task.fields[status]}"))
        task = bar.add_task(description, total=max_iter, status="")
        bar.start()
    t = 0
    try:
        for t in range(1, max_iter + 1):
            q = FactorGaussian(mu, B, d)
            w = q._woodbury()
            xi = draw("normal", (n_draws, rank), gen, device)
            delta = draw("normal", (n_draws, dim), gen, device)
            theta = mu + xi @ B.T + delta * d
            lh, g = value_and_grad(theta)
            value, grads = elbo_estimate_and_gradients(q, lh, g, xi, delta, entropy_grad, _w=w)
            if not (math.isfinite(value) and bool(torch.isfinite(g).all())):
                raise FloatingPointError(
                    f"VI: non-finite log density or gradient at iteration {t}; "
                    "check the target, or start nearer its mode (init_mean) with a smaller init_diag")
            elbo[t - 1] = value
            opt.step(list(grads))
            ring[(t - 1) % n_avg_max] = torch.cat([mu, B.reshape(-1), d])

            if t % window == 0:
                ma.append(float(elbo[t - window:t].mean()))
                if bar is not None:
                    bar.update(task, completed=t, status=f"ELBO {ma[-1]:.6g}")
                if (rtol is not None and t >= min_iter and len(ma) >= 2
                        and abs(ma[-1] - ma[-2]) <= rtol * abs(ma[-2]) + atol):
                    converged = True
                    break
    finally:
        if bar is not None:
            bar.update(task, completed=t)
            bar.stop()
    seconds = time.perf_counter() - start
    if rtol is not None and not converged:
        warnings.warn(f"{description}: ELBO moving average had not converged (rtol={rtol}) "
                      f"after max_iter={max_iter} iterations", ConvergenceWarning, stacklevel=2)

    n_avg = min(t, n_avg_max, max(1, math.ceil(average * t)))
    idx = [(t - 1 - i) % n_avg_max for i in range(n_avg)]
    lam = ring[idx].mean(0)
    q_avg = FactorGaussian(lam[:dim].clone(), lam[dim:dim + dim * rank].reshape(dim, rank).clone(),
                           lam[dim + dim * rank:].clone())
    history = VIHistory(elbo=elbo[:t].copy(), elbo_ma=np.asarray(ma), iterations=t, converged=converged,
                        averaged_over=n_avg, seconds=seconds, window=window)
    settings = dict(rank=rank, n_draws=n_draws, max_iter=max_iter, min_iter=min_iter, window=window, rtol=rtol, atol=atol,
                    average=average, rho=rho, eps=eps, entropy_grad=entropy_grad)
    return VIResult(q=q_avg, q_last=FactorGaussian(mu.clone(), B.clone(), d.clone()), history=history,
                    settings=settings)
