"""Inference for the IC-NLM's (beta, theta): ``fit_copula_posterior`` runs the paper's factor-covariance
Gaussian VI or NUTS on a `CopulaModel` and returns a `CopulaPosterior`
(`dubito.regression.copula_posterior` holds the model, its density and the posterior's predictions).
"""
from __future__ import annotations

import numpy as np
import torch

from dubito._validation import check_choice, check_int
from dubito.inference.nuts import run_nuts
from dubito.inference.vi import fit_vi, make_generator
from dubito.regression.copula_posterior import INFERENCES, NU_DEFAULT, CopulaModel, CopulaPosterior, _as_f64

__all__ = ["fit_copula_posterior"]


def fit_copula_posterior(
    psi,
    z,
    prior: str = "ridge",
    inference: str = "vi",
    *,
    nu: float = NU_DEFAULT,
    tau2: float | None = None,
    intercept: bool = False,
    legacy_lambda_jacobian: bool = False,
    n_draws: int = 1000,
    # VI (defaults: paper / authors' code)
    rank: int = 3,
    vi_draws: int = 50,
    max_iter: int = 14_000,
    min_iter: int = 10_000,  # see ImplicitCopulaRegressor (vi_min_iter)
    window: int = 200,
    rtol: float | None = 1e-5,
    atol: float = 0.01,
    average: float = 0.05,
    entropy_grad: str = "sampled",
    init: str | torch.Tensor = "paper",
    # NUTS (defaults: Stan's; a dense mass matrix because β's posterior is strongly correlated)
    num_samples: int = 1000,
    warmup_steps: int = 1000,
    num_chains: int = 2,
    target_accept_prob: float = 0.8,
    max_tree_depth: int = 10,
    full_mass: bool = True,
    seed=None,
    device="cpu",
    progress: bool = False,
) -> CopulaPosterior:
    """Posterior of the IC-NLM's (β, θ) given features ``psi`` (n, p) and pseudo responses ``z``.

    prior : "ridge" | "horseshoe";  inference : "vi" (paper's main method) | "nuts".
    nu : ridge hyperprior scale (2.5, paper). tau2 : fix τ² (ridge only; conjugate β posterior).
    intercept : add the random intercept β₀ (module docstring; not in the paper).
    n_draws : draws taken from q after VI (NUTS returns num_chains × num_samples).
    rank, vi_draws, max_iter, min_iter, window, rtol, atol, average, entropy_grad : fit_vi
        (k = 3, M = 50, 14,000 iterations, last-5% iterate averaging: the paper's small-data ridge
        settings; our ELBO stopping rule may end it earlier).
    init : "paper" — VI starts from U(0, 1) for μ, B, d (code) and NUTS at β = 0, log-variances 0
        (code) jittered by U(−0.1, 0.1) per chain; "zeros" — VI mean 0, B and d = 0.1; or a (dim,)
        tensor used as VI mean / NUTS start.
    num_samples, warmup_steps, num_chains, target_accept_prob, max_tree_depth, full_mass : run_nuts.
    seed : int, None or torch.Generator; device : torch device; progress : rich / Pyro bars.
    """
    check_choice(inference, "inference", INFERENCES)
    model = CopulaModel(psi, z, prior, nu=nu, tau2=tau2, intercept=intercept,
                        legacy_lambda_jacobian=legacy_lambda_jacobian, device=device)
    n_draws = check_int(n_draws, "n_draws", min_value=1)
    dim = model.dim
    settings = dict(prior=prior, inference=inference, nu=nu, tau2=tau2, intercept=model.intercept,
                    legacy_lambda_jacobian=legacy_lambda_jacobian,
                    seed=seed if not isinstance(seed, torch.Generator) else None)
    init_t = None
    if isinstance(init, str):
        check_choice(init, "init", ("paper", "zeros"))
    else:
        init_t = _as_f64(init, model.device)
        if init_t.shape != (dim,):
            raise ValueError(f"init must be 'paper', 'zeros' or a ({dim},) tensor; got shape {tuple(init_t.shape)}")

    if inference == "vi":
        rank = min(check_int(rank, "rank", min_value=1), dim)
        gen = make_generator(seed)  # a CPU generator: the same draws on a GPU (dubito.inference.vi.draw)
        kw = {}
        if init_t is not None:
            kw["init_mean"] = init_t
        elif init == "zeros":
            kw = dict(init_mean=torch.zeros(dim, dtype=torch.float64, device=model.device),
                      init_factor=torch.full((dim, rank), 0.1, dtype=torch.float64, device=model.device),
                      init_diag=torch.full((dim,), 0.1, dtype=torch.float64, device=model.device))
        res = fit_vi(value_and_grad=model.log_prob_and_grad, dim=dim, rank=rank, n_draws=vi_draws,
                     max_iter=max_iter, min_iter=min_iter, window=window, rtol=rtol, atol=atol, average=average,
                     entropy_grad=entropy_grad, seed=gen, device=model.device, progress=progress,
                     description=f"IC-NLM VI ({prior})", **kw)
        theta = res.q.sample(n_draws, gen)
        h = res.history
        diagnostics = dict(elbo=h.elbo, elbo_ma=h.elbo_ma, iterations=h.iterations, converged=h.converged,
                           averaged_over=h.averaged_over, seconds=h.seconds)
        settings.update(res.settings)
        return CopulaPosterior(prior=prior, inference="vi", p=model.n_features, names=model.names, theta=theta,
                               q=res.q, nu=model.nu, tau2_fixed=model.tau2, diagnostics=diagnostics,
                               settings=settings, intercept=model.intercept)

    if init_t is not None:
        start = init_t.expand(num_chains, -1)
    else:
        g = torch.Generator().manual_seed(int(np.random.SeedSequence(
            seed if isinstance(seed, (int, np.integer)) else None).generate_state(1)[0]))
        start = (0.2 * torch.rand(num_chains, dim, generator=g, dtype=torch.float64) - 0.1).to(model.device)
    nuts_seed = (seed if not isinstance(seed, torch.Generator)
                 else int(torch.randint(0, 2**31 - 1, (1,), generator=seed)))
    res = run_nuts(model.potential, init=start, num_samples=num_samples, warmup_steps=warmup_steps,
                   num_chains=num_chains, target_accept_prob=target_accept_prob, max_tree_depth=max_tree_depth,
                   full_mass=full_mass, seed=nuts_seed, device=model.device, progress=progress)
    draws = res.draws
    diagnostics = dict(rhat=res.rhat["theta"], ess_bulk=res.ess_bulk["theta"], divergences=res.divergences,
                       acceptance_rate=res.acceptance_rate, step_size=res.step_size, seconds=res.seconds)
    settings.update(res.settings)
    return CopulaPosterior(prior=prior, inference="nuts", p=model.n_features, names=model.names,
                           theta=draws.reshape(-1, dim), theta_by_chain=draws, nu=model.nu, tau2_fixed=model.tau2,
                           diagnostics=diagnostics, settings=settings, intercept=model.intercept)
