"""A thin wrapper over Pyro's NUTS (Hoffman & Gelman 2014) for a potential function or a Pyro
model: several chains run one after another in this process (each its own MCMC with its own
seed, so results do not depend on multiprocessing), warm-up adapts the step size (dual
averaging, target acceptance 0.8) and a diagonal (or, with ``full_mass``, dense) mass matrix;
draws come back per chain with split R-hat, bulk ESS, divergences and acceptance rates.

A ConvergenceWarning is raised when any R-hat exceeds ``rhat_threshold`` (1.01, Vehtari et al.
2021) or when any post-warm-up transition diverged.

Reproducibility: the chains' seeds derive from ``seed`` (numpy SeedSequence); the global
``random``/numpy/torch RNG states that Pyro seeds are restored afterwards.
"""
from __future__ import annotations

import contextlib
import random
import time
import warnings
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pyro
import torch
from pyro.infer import MCMC, NUTS

from dubito.inference.diagnostics import ConvergenceWarning, ess_bulk, rhat

__all__ = ["NUTSResult", "run_nuts"]


@dataclass
class NUTSResult:
    """``samples``: site name -> tensor (chains, draws, *shape) (the potential-function site is
    "theta"); per chain ``divergences`` (count after warm-up), ``acceptance_rate`` (mean acceptance
    probability after warm-up) and adapted
    ``step_size``; per site ``rhat`` and ``ess_bulk``; wall-clock ``seconds`` (all chains)."""

    samples: dict[str, torch.Tensor]
    divergences: np.ndarray
    acceptance_rate: np.ndarray
    step_size: np.ndarray
    rhat: dict[str, np.ndarray | float]
    ess_bulk: dict[str, np.ndarray | float]
    seconds: float
    settings: dict = field(default_factory=dict)

    @property
    def draws(self) -> torch.Tensor:
        """The samples of the only site, (chains, draws, *shape)."""
        if len(self.samples) != 1:
            raise ValueError(f"several sites {sorted(self.samples)}: use .samples[name]")
        return next(iter(self.samples.values()))

    def flat(self, name: str | None = None) -> torch.Tensor:
        """Draws of a site with the chains concatenated: (chains * draws, *shape)."""
        x = self.draws if name is None else self.samples[name]
        return x.reshape(-1, *x.shape[2:])

    @property
    def max_rhat(self) -> float:
        vals = [np.max(v) for v in self.rhat.values()]
        return float(max(vals)) if vals else float("nan")


@contextlib.contextmanager
def _preserve_global_rng():
    py, npst = random.getstate(), np.random.get_state()
    with torch.random.fork_rng(devices=[]):
        try:
            yield
        finally:
            random.setstate(py)
            np.random.set_state(npst)


def run_nuts(
    potential_fn: Callable[[torch.Tensor], torch.Tensor] | None = None,
    *,
    model: Callable | None = None,
    model_args: tuple = (),
    model_kwargs: dict | None = None,
    init: torch.Tensor | dict | None = None,
    dim: int | None = None,
    num_samples: int = 1000,
    warmup_steps: int = 1000,
    num_chains: int = 2,
    target_accept_prob: float = 0.8,
    max_tree_depth: int = 10,
    full_mass: bool = False,
    step_size: float = 1.0,
    adapt_step_size: bool = True,
    init_radius: float = 2.0,
    seed=None,
    device="cpu",
    progress: bool = False,
    rhat_threshold: float = 1.01,
    warn: bool = True,
) -> NUTSResult:
    """Sample with NUTS.

    potential_fn : θ (dim,) -> scalar −log p(θ) on an unconstrained space; its gradient comes from
        autograd (wrap an analytic gradient in a torch.autograd.Function to use it).
    model, model_args, model_kwargs : a Pyro model instead (Pyro's transforms and init).
    init : starting θ, (dim,) shared or (num_chains, dim); default U(−init_radius, init_radius)
        per coordinate and chain (Stan's rule). For a model, a dict of site values (optional).
    num_samples, warmup_steps, num_chains : per chain; defaults are Stan's (1000 / 1000), 2 chains
        so that R-hat is defined.
    target_accept_prob, max_tree_depth, step_size (initial) : Pyro/Stan defaults;
        adapt_step_size=False keeps ``step_size`` fixed.
    full_mass : adapt a dense mass matrix instead of a diagonal one.
    seed : int or None; chain c uses the c-th seed of numpy.random.SeedSequence(seed).
    """

    if (potential_fn is None) == (model is None):
        raise ValueError("give exactly one of potential_fn and model")
    if num_chains < 1 or num_samples < 1 or warmup_steps < 0:
        raise ValueError("num_chains and num_samples must be positive, warmup_steps non-negative")
    device = torch.device(device)
    seeds = np.random.SeedSequence(seed).generate_state(num_chains)

    inits: list = [None] * num_chains
    if potential_fn is not None:
        if init is not None:
            init_t = torch.as_tensor(init, dtype=torch.float64, device=device)
            if init_t.dim() == 1:
                init_t = init_t.expand(num_chains, -1)
            if init_t.shape[0] != num_chains:
                raise ValueError(f"init must be (dim,) or (num_chains={num_chains}, dim); got {tuple(init_t.shape)}")
        else:
            if dim is None:
                raise ValueError("give dim or init with potential_fn")
            g = torch.Generator().manual_seed(int(seeds[0]))
            init_t = ((2 * torch.rand(num_chains, int(dim), generator=g, dtype=torch.float64) - 1)
                      * init_radius).to(device)
        inits = [{"theta": init_t[c].clone()} for c in range(num_chains)]

        def pyro_potential(params):
            return potential_fn(params["theta"])
    elif isinstance(init, dict):
        inits = [dict(init) for _ in range(num_chains)]

    per_chain: list[dict[str, torch.Tensor]] = []
    div, acc, steps = [], [], []
    start = time.perf_counter()
    with _preserve_global_rng():
        for c in range(num_chains):
            pyro.set_rng_seed(int(seeds[c]))
            last: dict = {}

            def hook(kernel, params, stage, i, last=last):
                # Pyro resets these when the run ends, so read them while it samples
                last["accept"] = float(getattr(kernel, "_mean_accept_prob", float("nan")))
                last["step"] = float(kernel.step_size)
            if potential_fn is not None:
                kernel = NUTS(potential_fn=pyro_potential, target_accept_prob=target_accept_prob,
                              max_tree_depth=max_tree_depth, full_mass=full_mass, step_size=step_size,
                              adapt_step_size=adapt_step_size)
            else:
                kernel = NUTS(model, target_accept_prob=target_accept_prob, max_tree_depth=max_tree_depth,
                              full_mass=full_mass, step_size=step_size,
                              adapt_step_size=adapt_step_size)
            mcmc = MCMC(kernel, num_samples=num_samples, warmup_steps=warmup_steps, initial_params=inits[c],
                        num_chains=1, disable_progbar=not progress, hook_fn=hook)
            mcmc.run(*model_args, **(model_kwargs or {}))
            per_chain.append({k: v.detach() for k, v in mcmc.get_samples().items()})
            diag = mcmc._diagnostics[0] or {}
            div.append(len(diag.get("divergences", [])))
            # mean Metropolis acceptance probability after warm-up (what the step size is adapted
            # to); Pyro's "acceptance rate" diagnostic counts moves instead
            acc.append(last.get("accept", float("nan")))
            steps.append(last.get("step", float("nan")))
    seconds = time.perf_counter() - start

    samples = {k: torch.stack([ch[k] for ch in per_chain]).to(torch.float64) for k in per_chain[0]}
    rh, es = {}, {}
    for k, v in samples.items():
        if num_chains * num_samples >= 8 and num_samples >= 4:
            rh[k] = rhat(v)
            es[k] = ess_bulk(v)
        else:
            rh[k] = es[k] = float("nan")
    res = NUTSResult(samples=samples, divergences=np.asarray(div), acceptance_rate=np.asarray(acc),
                     step_size=np.asarray(steps), rhat=rh, ess_bulk=es, seconds=seconds,
                     settings=dict(num_samples=num_samples, warmup_steps=warmup_steps, num_chains=num_chains,
                                   target_accept_prob=target_accept_prob, max_tree_depth=max_tree_depth,
                                   full_mass=full_mass, seed=seed))
    if warn:
        _warn_if_bad(res, rhat_threshold)
    return res


def _warn_if_bad(res: NUTSResult, threshold: float) -> None:
    n_div = int(res.divergences.sum())
    if n_div:
        warnings.warn(f"NUTS: {n_div} divergent transition(s) after warm-up "
                      f"(per chain {res.divergences.tolist()}); the draws may be biased — "
                      "raise target_accept_prob or reparameterise", ConvergenceWarning, stacklevel=3)
    worst = res.max_rhat
    if not np.isfinite(worst) or worst > threshold:
        warnings.warn(f"NUTS: max R-hat {worst:.4f} > {threshold} — chains have not mixed; "
                      "run longer warm-up / more samples", ConvergenceWarning, stacklevel=3)
