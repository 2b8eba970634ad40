r"""B-DeepNoise (Zhang, Liu & Kang, arXiv 2206.05643): the user-facing estimator.

`DeepNoiseRegressor` runs several independent Gibbs chains of the B-DeepNoise posterior
(model: :mod:`dubito.regression.deepnoise_model`; sweep: :mod:`dubito.regression.deepnoise_gibbs`;
spec §1–§2) on the standardised data, keeps every ``thin``-th state after ``n_burnin`` sweeps,
and predicts with the Monte-Carlo predictive of spec §3.1–3.2: for each kept state θ_m and
r = 1..R, noise is pushed through the hidden layers and the last layer is exact, giving the
equal-weight Gaussian mixture

    p̂(y | x) = (1/MR) Σ_{m,r} N(y; μ_{m,r}(x), s²_{m,r})   (original y units: μ·sd_y + mean_y, s²·sd_y²).

Its variance splits by the law of total variance over posterior states (spec §3.3 [R]):
aleatoric = E_m[Var(y | x, θ_m)] (all latent and output noise), epistemic = Var_m[E(y | x, θ_m)].

Chains: chain c draws everything from its own ``torch.Generator``, seeded by child c of
``SeedSequence(random_state)``, so chains are independent, results do not depend on
``n_jobs`` (chains run in ``n_jobs`` spawned processes, one torch/BLAS thread each — spec §2.5:
a multithreaded BLAS is far slower on small matrices) and a checkpointed chain resumes to the
same numbers (`dubito.regression.deepnoise_checkpoint`).

Initialisation (spec §2.3): ``init="sgd"`` trains one `DeepNoiseSGDRegressor` per chain on
the training rows outside fold (c mod 5) of a 5-fold split ([C]), maps its state into this
estimator's standardised units and starts the chain there (ρ = |β|, ξ = |γ|);
``init="random"`` uses ``random_init`` (W ~ N(0, 1/K_in), noise variances 0.1, [P]
Algorithm 1 / [R]). The latents start from a noisy forward pass and one down-up v/u sweep.

Diagnostics (spec §2.4, pitfall 6): split R-hat and bulk ESS (dubito.inference.diagnostics)
of the predictive mean E(y | x, θ_m) at up to 20 monitoring rows of the training X and of the
train log-likelihood (1/N) Σ_i log p(y_i | x_i, θ_m), never of raw weights (permutation
symmetry). Both are Monte-Carlo estimates with ``TRACE_DRAWS`` noise draws from a stream
seeded by (chain seed, sweep), so they do not perturb the chain. ``diagnostics_`` follows the
shared schema of `dubito.inference.convergence` (``converged``: max split R-hat of the predictive
mean <= 1.1); the ConvergenceWarning uses the stricter `RHAT_THRESHOLD` / `ESS_THRESHOLD` over
both functionals (``within_thresholds``).
"""

from __future__ import annotations

import concurrent.futures as cf
import math
import multiprocessing
import os
import queue as queue_mod
import time
import warnings
from dataclasses import dataclass

import numpy as np
import torch
from sklearn.model_selection import KFold
from threadpoolctl import threadpool_limits

from dubito import io
from dubito._estimator import DubitoRegressor, progress_bar, seed_base, seeds_from
from dubito._parallel import init_worker, terminate_pool
from dubito._validation import (
    check_bool,
    check_choice,
    check_fitted,
    check_float,
    check_int,
    check_widths,
)
from dubito.inference.convergence import diagnostics_dict
from dubito.inference.diagnostics import ConvergenceWarning, ess_bulk, split_rhat
from dubito.predictive.mixture import GaussianMixture
from dubito.regression.deepnoise_checkpoint import (
    ChainState,
    checkpoint_path,
    data_digest,
    load_checkpoint,
    save_checkpoint,
)
from dubito.regression.deepnoise_gibbs import (
    TIE_RHO,
    gibbs_sweep,
    init_latents,
    random_init,
    train_log_likelihood,
)
from dubito.regression.deepnoise_model import (
    DeepNoiseParams,
    DeepNoisePriors,
    forward_moments,
    piecewise_activation,
)
from dubito.regression.deepnoise_sgd import DeepNoiseSGDRegressor
from dubito.search_space import Choice, Float

__all__ = [
    "DeepNoiseRegressor",
    "StateMixture",
    "PAPER_CODE_SETTINGS",
    "RHAT_THRESHOLD",
    "ESS_THRESHOLD",
    "rescale_params",
]

#: The [C] run-script protocol (spec §2.4, pitfall 3): 5 chains, one per SGD model of a 5-fold
#: split, no burn-in, 100 states per chain unthinned, latent mini-batches of 16 rows,
#: noise priors re-centred at the SGD estimates, R = 20 realisations per state (UCI).
#: [C] trains the SGD models for up to 10,000 epochs; ``sgd_epochs`` is left at our default.
PAPER_CODE_SETTINGS = dict(
    n_chains=5,
    init="sgd",
    n_burnin=0,
    n_keep=100,
    thin=1,
    latent_batch_size=16,
    noise_prior="sgd_centred",
    n_realizations=20,
)

#: ConvergenceWarning when the largest split R-hat exceeds this [R]. Vehtari et al. (2021)
#: recommend 1.01 for long runs of rank-normalised R-hat; the chains here keep 125 thinned
#: states each and the monitored functionals carry Monte-Carlo noise, so we flag only clear
#: failures (1.05, between their 1.01 and the classic 1.1 of Gelman & Rubin / BDA3).
RHAT_THRESHOLD = 1.05
#: ConvergenceWarning when the smallest bulk ESS (all chains together) is below this [R]:
#: Vehtari et al. (2021) ask for ~100 per chain before trusting R-hat; 100 in total flags only
#: runs whose kept states are nearly all autocorrelated copies.
ESS_THRESHOLD = 100.0
#: Noise draws per kept state for the diagnostic traces (R = 20 as in [C] UCI, spec §2.4).
TRACE_DRAWS = 20
#: Monitoring rows for the predictive-mean diagnostics (spec §2.4).
N_MONITOR = 20
#: Folds of the [C] SGD initialisation (spec §2.3 step 1).
SGD_FOLDS = 5
#: Minimum training rows: 5 for the 5-fold SGD split (and the target's sd).
MIN_SAMPLES = 5
#: (realisations x rows x width) elements per prediction chunk (2**24 float64 = 128 MB).
_CHUNK_ELEMENTS = 1 << 24


# ---------------------------------------------------------------------- units
def rescale_params(params: DeepNoiseParams, source, target, rho2_floor: float = 1e-8) -> DeepNoiseParams:
    """Map a state from one standardisation of (x, y) to another (exact affine change).

    ``source``/``target`` = (x_mean, x_scale, y_mean, y_scale). With x_src = x_tgt·a + b
    (a = sx_t/sx_s, b = (mx_t − mx_s)/sx_s) and y_tgt = y_src·c + d (c = sy_s/sy_t,
    d = (my_s − my_t)/sy_t): W_0 ← diag(a) W_0, γ_0 ← γ_0 + b W_0; then W_L ← c W_L,
    γ_L ← c γ_L + d, τ²_L ← c² τ²_L. Hidden noise is unchanged. ρ² = W², ξ² = γ² (floored)
    are recomputed for the changed layers ([C] ρ = |β|, spec §2.3 step 2).
    """
    out = params.clone()
    mx_s, sx_s, my_s, sy_s = source
    mx_t, sx_t, my_t, sy_t = target
    like = out.W[0]
    a = torch.as_tensor(np.asarray(sx_t) / np.asarray(sx_s), dtype=like.dtype, device=like.device)
    b = torch.as_tensor((np.asarray(mx_t) - np.asarray(mx_s)) / np.asarray(sx_s), dtype=like.dtype, device=like.device)
    W0 = out.W[0]
    out.gamma[0] = out.gamma[0] + b @ W0
    out.W[0] = a[:, None] * W0
    c = float(sy_s) / float(sy_t)
    d = (float(my_s) - float(my_t)) / float(sy_t)
    L = out.n_hidden
    out.W[L] = out.W[L] * c
    out.gamma[L] = out.gamma[L] * c + d
    out.tau2[L] = out.tau2[L] * c**2
    for l in {0, L}:
        out.rho2[l] = torch.clamp(out.W[l] ** 2, min=rho2_floor)
        out.xi2[l] = torch.clamp(out.gamma[l] ** 2, min=rho2_floor)
    return out


# ---------------------------------------------------------------------- predictive
class StateMixture(GaussianMixture):
    """Equal-weight `GaussianMixture` whose M·R components are R noise realisations of each of
    M posterior states (state-major: component m·R + r). Mean, variance, density, CDF,
    quantiles and sampling are the mixture's; the variance split is by state (spec §3.3 [R]):

        epistemic_i = (1/M) Σ_m (μ̄_im − mean_i)²,   μ̄_im = (1/R) Σ_r μ_imr
        aleatoric_i = (1/M) Σ_m [(1/R) Σ_r s²_imr + (1/R) Σ_r (μ_imr − μ̄_im)²]

    so epistemic + aleatoric = var (the plain mixture would count the spread between noise
    realisations of one state as epistemic).
    """

    def __init__(self, means, variances, n_states: int):
        means = np.asarray(means, dtype=np.float64)
        n_states = int(n_states)
        if means.ndim != 2 or n_states < 1 or means.shape[1] % n_states:
            raise ValueError(
                f"means must be (N, n_states * R); got shape {means.shape} with n_states={n_states}"
            )
        M = means.shape[1]
        super().__init__(np.full(M, 1.0 / M), means, variances)
        self._set_states(n_states)

    def _set_states(self, n_states: int) -> None:
        self.n_states = n_states
        N, M = self._mu.shape
        mu = self._mu.reshape(N, n_states, M // n_states)
        var = self._var_c.reshape(N, n_states, M // n_states)
        state_mean = mu.mean(axis=2)
        epi = ((state_mean - self._mean[:, None]) ** 2).mean(axis=1)
        alea = (var.mean(axis=2) + ((mu - state_mean[:, :, None]) ** 2).mean(axis=2)).mean(axis=1)
        for a in (epi, alea):
            a.setflags(write=False)
        self._epistemic, self._aleatoric = epi, alea

    @property
    def n_realizations(self) -> int:
        return self.n_components // self.n_states

    def _subset(self, index):
        sub = super()._subset(index)
        out = StateMixture.__new__(StateMixture)
        out.__dict__.update(sub.__dict__)
        out._set_states(self.n_states)
        return out

    def __repr__(self) -> str:
        return f"StateMixture(n_inputs={len(self)}, n_states={self.n_states}, n_realizations={self.n_realizations})"


# ---------------------------------------------------------------------- one chain
@dataclass
class _ChainJob:
    chain: int
    seed: int
    X: np.ndarray  # original units (the SGD model standardises its own fold)
    y: np.ndarray
    units: tuple  # (x_mean, x_scale, y_mean, y_scale) of the full training set
    settings: dict  # validated estimator settings
    sgd_rows: np.ndarray | None
    monitor_rows: np.ndarray
    checkpoint: str | None
    resume: bool
    fingerprint: dict


_REPORT_QUEUE = None  # set in spawned workers by _init_chain_worker


def _init_chain_worker(queue) -> None:
    init_worker()
    global _REPORT_QUEUE
    _REPORT_QUEUE = queue


def _queue_report(chain: int, n: int, resumed: bool = False) -> None:
    if _REPORT_QUEUE is not None:
        _REPORT_QUEUE.put((chain, n, resumed))


def _state_seed(seed: int, sweep: int) -> int:
    return int(np.random.SeedSequence([seed, sweep]).generate_state(1, np.uint64)[0] >> np.uint64(1))


def _init_chain(job: _ChainJob, Xs, ys, act, gen, device):
    s = job.settings
    widths = (Xs.shape[1], *s["hidden"], 1)
    if s["init"] == "random":
        params = random_init(widths, gen, dtype=torch.float64, device=device)
    else:
        sgd = DeepNoiseSGDRegressor(
            hidden=s["hidden"], activation=s["activation"], epochs=s["sgd_epochs"],
            validation_fraction=0.0,  # the init of [C]: every row, sgd_epochs epochs
            random_state=_state_seed(job.seed, 0), device=device, progress=False,
        ).fit(job.X[job.sgd_rows], job.y[job.sgd_rows])
        source = (sgd.x_mean_, sgd.x_scale_, sgd.y_mean_, sgd.y_scale_)
        params = rescale_params(sgd.params_().to(device), source, job.units)
    kw = dict(a_w=s["prior_shape"], b_w=s["prior_scale"], a_b=s["prior_shape"], b_b=s["prior_scale"],
              tie_rho=s["tie_rho"])
    if s["noise_prior"] == "sgd_centred":
        priors = DeepNoisePriors.sgd_centred(params, Xs.shape[0], **kw)
    else:
        priors = DeepNoisePriors(a_pre=s["prior_shape"], b_pre=s["prior_scale"],
                                 a_post=s["prior_shape"], b_post=s["prior_scale"], **kw)
    latents = init_latents(params, Xs, ys, act, gen)
    return ChainState(sweep=0, params=params, latents=latents, priors=priors, generator_state=gen.get_state())


def _run_chain(job: _ChainJob, report=None) -> dict:
    """Run (or resume) one chain to n_burnin + n_keep sweeps; numpy results for pickling."""

    report = report or _queue_report
    s = job.settings
    device = torch.device(s["device"])
    n_threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with threadpool_limits(1):
            return _run_chain_pinned(job, report, device)
    finally:
        torch.set_num_threads(n_threads)


def _run_chain_pinned(job: _ChainJob, report, device) -> dict:
    s = job.settings
    act = piecewise_activation(s["activation"])
    x_mean, x_scale, y_mean, y_scale = job.units
    Xs = torch.as_tensor((job.X - x_mean) / x_scale, dtype=torch.float64).to(device)
    ys = torch.as_tensor((job.y - y_mean) / y_scale, dtype=torch.float64).to(device)
    Xmon = Xs[torch.as_tensor(job.monitor_rows, device=device)]
    total = s["n_burnin"] + s["n_keep"]
    gen = torch.Generator(device=device).manual_seed(job.seed)
    path = job.checkpoint
    state = None
    if job.resume and path is not None and os.path.exists(path):
        state = load_checkpoint(path, job.fingerprint, device=device)
        if state.sweep > total:
            raise ValueError(
                f"{path} holds {state.sweep} sweeps but this fit asks for n_burnin + n_keep = {total}; "
                "raise n_keep or fit with resume=False"
            )
        gen.set_state(state.generator_state)
        report(job.chain, state.sweep, True)
    t0 = time.perf_counter()
    if state is None:
        state = _init_chain(job, Xs, ys, act, gen, device)
    elapsed0 = state.seconds
    params, latents = state.params, state.latents
    while state.sweep < total:
        gibbs_sweep(params, latents, Xs, ys, state.priors, act, gen, latent_batch_size=s["latent_batch_size"])
        state.sweep += 1
        after = state.sweep - s["n_burnin"]
        if after > 0 and after % s["thin"] == 0:
            g = torch.Generator(device=device).manual_seed(_state_seed(job.seed, state.sweep))
            state.loglik.append(train_log_likelihood(params, Xs, ys, act, TRACE_DRAWS, g))
            state.monitor.append(forward_moments(params, Xmon, act, TRACE_DRAWS, g)[0].mean(0))
            state.kept.append({k: v.clone() for k, v in params.to_flat().items()})
        report(job.chain, 1)
        if path is not None and (state.sweep % s["checkpoint_every"] == 0 or state.sweep == total):
            state.generator_state = gen.get_state()
            state.seconds = elapsed0 + time.perf_counter() - t0
            save_checkpoint(path, state, job.fingerprint)
    state.seconds = elapsed0 + time.perf_counter() - t0
    keys = list(state.kept[0]) if state.kept else []
    return dict(
        kept={k: torch.stack([d[k] for d in state.kept]).cpu().numpy() for k in keys},
        loglik=np.asarray(state.loglik, dtype=np.float64),
        monitor=torch.stack(state.monitor).cpu().numpy() if state.monitor else np.zeros((0, len(job.monitor_rows))),
        seconds=float(state.seconds),
    )


# ---------------------------------------------------------------------- the estimator
class DeepNoiseRegressor(DubitoRegressor):
    r"""Bayesian deep-noise network (B-DeepNoise) fitted by the closed-form Gibbs sampler.

    See the module docstring for the method. After ``fit``: ``predict_distribution`` returns a
    `StateMixture` (a `GaussianMixture` over kept states × noise realisations, original units,
    with the by-state ``epistemic_var``/``aleatoric_var``), ``predict`` (the base's) its mean.

    Parameters (defaults and their sources)
    ----------
    hidden : tuple of int, default (50, 50, 50, 50)
        Hidden widths K_0..K_{L-1}; 4 × 50 in every experiment of [P] (spec §1.1).
    activation : str, default "hardtanh"
        Piecewise-linear h (spec §1.2): "hardtanh" (all experiments [P]), "relu",
        "leaky_relu" (0.1 [C]), "bounded_relu". Smooth activations are refused: the sampler
        needs a piecewise-linear h (Assumption 1).
    n_chains : int, default 4
        Independent chains (spec §2.4 [R]; [C] uses 5, see `PAPER_CODE_SETTINGS`).
    n_burnin : int, default 1000
        Sweeps discarded per chain (spec §2.4 [R]).
    n_keep : int, default 1000
        Sweeps after burn-in per chain, of which every ``thin``-th state is kept (spec §2.4 [R]).
    thin : int, default 8
        1,000 kept sweeps thinned to 125 states per chain, 500 over 4 chains = [P]'s "500
        posterior samples" (spec §2.4 [R]).
    init : {"sgd", "random"}, default "sgd"
        Start of each chain (spec §2.3): a DeepNoise-SGD fit per chain on its 5-fold split
        ([C], [P] §3.1 "gradient descent to initialize") or ``random_init`` ([P] Algorithm 1).
    sgd_epochs : int, default 1000
        Epochs of each SGD initialisation (Adam lr 1e-3, batch 1000, S = 100: the
        `DeepNoiseSGDRegressor` defaults [C]; [C] runs up to 10,000 epochs).
    noise_prior : {"paper", "sgd_centred"}, default "paper"
        "paper": IG(prior_shape, prior_scale) on every τ², σ² [P §3.1]; "sgd_centred": the
        undocumented [C] prior re-centred at the SGD estimate with N/2 pseudo-observations
        (spec §1.3, pitfall 4; needs ``init="sgd"``).
    prior_shape, prior_scale : float, default 1e-3, 1e-3
        IG(shape, scale) of every prior variance (ρ², ξ², and τ², σ² under "paper"):
        IG(0.001, 0.001) [P §3.1, C ``init_priors``].
    tie_rho : {"none", "row", "layer"}, default "none"
        How the weights' prior variances ρ² are shared: one per weight [P], one per unit (its
        K_in incoming weights) or one per layer. Near-improper per-weight IG(0.001, 0.001)
        priors can freeze a weight at 0 (spec pitfall 5); tying pools the evidence.
    latent_batch_size : int or None, default None
        None: full sweeps (spec §2.2 [R]); an int refreshes only that many random latent rows
        per layer and sweep ([C] uses 16).
    n_realizations : int, default 20
        R noise realisations per kept state at prediction: 20 for UCI [C] (100 for the
        synthetic sets in [C]); spec §3.1.
    checkpoint_dir : str or Path or None, default None
        Folder for one checkpoint file per chain (``chain_<c>.safetensors``), written
        atomically every ``checkpoint_every`` sweeps and at the end of the chain.
    checkpoint_every : int, default 100
    n_jobs : int, default 1
        Chains run in this many spawned processes (-1: all CPUs), one torch/BLAS thread each.
        Results do not depend on it.
    random_state : None, int or RandomState
        Seeds the chains, the SGD initialisations, the 5-fold split, the diagnostic traces and
        the prediction noise. ``resume=True`` needs an int.
    device : str, default "cpu"
        torch device of the sampler and of the kept states.
    progress : bool, default True
        Progress bar over all sweeps (rich, on stderr) with sweeps/s.

    Fitted attributes
    -----------------
    samples_ : dict of tensors (``DeepNoiseParams.to_flat`` keys), each (n_chains, n_kept, ...)
        float64 on ``device``, standardised units; `states` yields them as `DeepNoiseParams`.
    loglik_trace_ : (n_chains, n_kept) train log-likelihood per kept state (original units).
    monitor_trace_ : (n_chains, n_kept, n_monitor) E(y | x, θ) at ``monitor_rows_`` (original units).
    monitor_rows_ : (n_monitor,) training row indices; monitor_X_ : their inputs.
    diagnostics_ : dict (see `_diagnostics`); x_mean_, x_scale_, y_mean_, y_scale_;
    chain_seconds_ : (n_chains,) wall-clock seconds per chain; n_features_in_; n_train_.
    """

    #: What `dubito.tune` searches (held-out NLL):
    #: * ``prior_shape`` / ``prior_scale``: [P]'s IG(0.001, 0.001) is nearly improper and can
    #:   freeze weights at 0 (spec pitfall 5); up to IG(1, 1) the priors on the variances become
    #:   proper and weakly informative, so both run from 1e-4 to 1 on the log scale;
    #: * ``tie_rho``: one prior variance per weight [P], per unit or per layer (pooled evidence);
    #: * ``hidden``: [P]'s 4 x 50 or shallower nets of the same width, whose chains mix faster.
    search_space = {
        "prior_shape": Float(1e-4, 1.0, log=True),
        "prior_scale": Float(1e-4, 1.0, log=True),
        "tie_rho": Choice(["none", "row", "layer"]),
        "hidden": Choice([(50,), (50, 50), (50, 50, 50, 50)]),
    }

    def __init__(
        self,
        hidden=(50, 50, 50, 50),
        activation="hardtanh",
        n_chains=4,
        n_burnin=1000,
        n_keep=1000,
        thin=8,
        init="sgd",
        sgd_epochs=1000,
        noise_prior="paper",
        prior_shape=1e-3,
        prior_scale=1e-3,
        tie_rho="none",
        latent_batch_size=None,
        n_realizations=20,
        checkpoint_dir=None,
        checkpoint_every=100,
        n_jobs=1,
        random_state=None,
        device="cpu",
        progress=True,
    ):
        self.hidden = hidden
        self.activation = activation
        self.n_chains = n_chains
        self.n_burnin = n_burnin
        self.n_keep = n_keep
        self.thin = thin
        self.init = init
        self.sgd_epochs = sgd_epochs
        self.noise_prior = noise_prior
        self.prior_shape = prior_shape
        self.prior_scale = prior_scale
        self.tie_rho = tie_rho
        self.latent_batch_size = latent_batch_size
        self.n_realizations = n_realizations
        self.checkpoint_dir = checkpoint_dir
        self.checkpoint_every = checkpoint_every
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.device = device
        self.progress = progress

    # ------------------------------------------------------------------ settings
    def _settings(self) -> dict:
        """Validated settings (scikit-learn validates in fit, not __init__)."""
        check_bool(self.progress, "progress")
        s = dict(
            hidden=check_widths(self.hidden),
            activation=piecewise_activation(self.activation).name,
            n_chains=check_int(self.n_chains, "n_chains", min_value=1),
            n_burnin=check_int(self.n_burnin, "n_burnin", min_value=0),
            n_keep=check_int(self.n_keep, "n_keep", min_value=1),
            thin=check_int(self.thin, "thin", min_value=1),
            init=check_choice(self.init, "init", ("sgd", "random")),
            sgd_epochs=check_int(self.sgd_epochs, "sgd_epochs", min_value=1),
            noise_prior=check_choice(self.noise_prior, "noise_prior", ("paper", "sgd_centred")),
            prior_shape=check_float(self.prior_shape, "prior_shape", strictly_positive=True),
            prior_scale=check_float(self.prior_scale, "prior_scale", strictly_positive=True),
            tie_rho=check_choice(self.tie_rho, "tie_rho", TIE_RHO),
            latent_batch_size=(None if self.latent_batch_size is None
                               else check_int(self.latent_batch_size, "latent_batch_size", min_value=1)),
            n_realizations=check_int(self.n_realizations, "n_realizations", min_value=1),
            checkpoint_every=check_int(self.checkpoint_every, "checkpoint_every", min_value=1),
            device=str(self._device()),
        )
        if s["n_keep"] < s["thin"]:
            raise ValueError(f"n_keep={s['n_keep']} < thin={s['thin']}: no state would be kept")
        if s["noise_prior"] == "sgd_centred" and s["init"] != "sgd":
            raise ValueError("noise_prior='sgd_centred' centres the noise priors at the SGD estimates: it needs init='sgd'")
        n_jobs = self.n_jobs
        if n_jobs is None:
            n_jobs = 1
        elif n_jobs == -1 and not isinstance(n_jobs, bool):
            n_jobs = os.cpu_count() or 1
        s["n_jobs"] = check_int(n_jobs, "n_jobs", min_value=1)
        return s

    # ------------------------------------------------------------------ fit
    def fit(self, X, y, *, resume=False):
        """Run the chains on (X, y) and keep their states. Returns self.

        X: (n, p) finite numbers; y: (n,) finite, not constant; n >= 5. ``resume=True``
        continues every chain from its checkpoint in ``checkpoint_dir`` (a chain without one
        starts afresh) to the same numbers as an uninterrupted run; a checkpoint of another
        model, data, settings or version raises ValueError. Emits ConvergenceWarning when the
        split R-hat or bulk ESS of the monitored functionals fail (see `RHAT_THRESHOLD`).
        """
        s = self._settings()
        if resume and self.checkpoint_dir is None:
            raise ValueError("resume=True needs checkpoint_dir (the folder the interrupted fit wrote)")
        if resume and not (isinstance(self.random_state, (int, np.integer)) and not isinstance(self.random_state, bool)):
            raise ValueError("resume=True needs an integer random_state (the checkpoints are tied to the seed)")
        X, y = self._validate_fit(X, y, min_samples=MIN_SAMPLES)
        n, p = X.shape
        self._fit_scaling(X, y)
        units = (self.x_mean_, self.x_scale_, self.y_mean_, self.y_scale_)
        base = seed_base(self.random_state)
        # chain c's seed depends on (random_state, c) only; prediction noise has its own stream
        seeds = seeds_from(base, s["n_chains"])
        self._predict_seed = _state_seed(base, 2**32 - 1)
        folds = list(KFold(SGD_FOLDS, shuffle=True, random_state=base % 2**32).split(X))
        monitor = np.unique(np.round(np.linspace(0, n - 1, min(N_MONITOR, n))).astype(int))
        digest = data_digest(X, y)
        chain_settings = {k: v for k, v in s.items() if k not in ("n_keep", "n_realizations", "n_jobs",
                                                                  "checkpoint_every", "n_chains")}
        chain_settings["hidden"] = list(chain_settings["hidden"])
        if chain_settings["tie_rho"] == "none":  # absent = "none": checkpoints written before tie_rho still resume
            del chain_settings["tie_rho"]
        jobs = []
        for c in range(s["n_chains"]):
            fp = dict(chain_settings, chain=c, seed=seeds[c], data=digest, n_monitor=int(len(monitor)),
                      trace_draws=TRACE_DRAWS, sgd_folds=SGD_FOLDS)
            jobs.append(_ChainJob(
                chain=c, seed=seeds[c], X=X, y=y, units=units, settings=s,
                sgd_rows=folds[c % SGD_FOLDS][0] if s["init"] == "sgd" else None,
                monitor_rows=monitor,
                checkpoint=None if self.checkpoint_dir is None else str(checkpoint_path(self.checkpoint_dir, c)),
                resume=bool(resume), fingerprint=fp,
            ))
        results = self._run_chains(jobs, s)
        dev = torch.device(s["device"])
        keys = list(results[0]["kept"])
        self.samples_ = {k: torch.as_tensor(np.stack([r["kept"][k] for r in results])).to(dev) for k in keys}
        self.loglik_trace_ = np.stack([r["loglik"] for r in results]) - math.log(self.y_scale_)
        self.monitor_trace_ = np.stack([r["monitor"] for r in results]) * self.y_scale_ + self.y_mean_
        self.chain_seconds_ = np.array([r["seconds"] for r in results])
        self.monitor_rows_ = monitor
        self.monitor_X_ = X[monitor].copy()
        self.diagnostics_ = self._diagnostics(warn=True)
        return self

    def _run_chains(self, jobs, s) -> list:
        total = len(jobs) * (s["n_burnin"] + s["n_keep"])
        with progress_bar(bool(self.progress)) as bar:
            task = bar.add_task("B-DeepNoise: initialising chains", total=total)
            clock = {"t0": None, "new": 0}

            def report(chain, k, resumed=False):
                """k more sweeps of ``chain`` (``resumed``: sweeps done before the interruption)."""
                if resumed:
                    bar.update(task, advance=k)
                    return
                if clock["t0"] is None:  # the rate counts sweeps after the first one
                    clock["t0"] = time.perf_counter()
                else:
                    clock["new"] += k
                rate = clock["new"] / max(time.perf_counter() - clock["t0"], 1e-9)
                bar.update(task, advance=k, description=f"B-DeepNoise {len(jobs)} chains, {rate:.2f} sweeps/s")

            workers = min(s["n_jobs"], len(jobs))
            if workers == 1:
                return [_run_chain(job, report) for job in jobs]
            return _run_parallel(jobs, workers, report)

    # ------------------------------------------------------------------ diagnostics
    def _diagnostics(self, warn: bool) -> dict:
        """The shared schema of `dubito.inference.convergence` (``rhat_mean`` / ``ess_mean``: max
        split R-hat / min bulk ESS of the predictive mean over the monitoring rows; ``rhat_loglik``
        / ``ess_loglik`` of the train log-likelihood; ``converged`` at ``rhat_mean`` <= 1.1) plus
        this estimator's own keys: per-row ``rhat_mean_rows`` / ``ess_mean_rows``, ``max_rhat`` /
        ``min_ess`` over both functionals, and ``within_thresholds`` (max R-hat <= `RHAT_THRESHOLD`
        and min ESS >= `ESS_THRESHOLD`: the stricter rule of the ConvergenceWarning; None with
        fewer than 4 kept states per chain, when nothing is computed and no warning is given)."""
        ll, mon = self.loglik_trace_, self.monitor_trace_
        extra = dict(monitor_rows=self.monitor_rows_, rhat_threshold=RHAT_THRESHOLD, ess_threshold=ESS_THRESHOLD,
                     chain_seconds=self.chain_seconds_,
                     sweeps_per_second=float((self.n_burnin + self.n_keep) / max(self.chain_seconds_.mean(), 1e-12)))
        if ll.shape[1] < 4:
            nan_m = np.full(mon.shape[2], np.nan)
            extra.update(rhat_mean_rows=nan_m, ess_mean_rows=nan_m.copy(), max_rhat=np.nan, min_ess=np.nan,
                         within_thresholds=None)
            return diagnostics_dict(sampler=True, mean_trace=mon, loglik_trace=ll, **extra)
        r_ll, e_ll = float(split_rhat(ll)), float(ess_bulk(ll))
        r_m = np.atleast_1d(split_rhat(mon))
        e_m = np.atleast_1d(ess_bulk(mon))
        max_rhat = float(np.max(np.r_[r_ll, r_m]))
        min_ess = float(np.min(np.r_[e_ll, e_m]))
        strict = bool(np.isfinite(max_rhat) and max_rhat <= RHAT_THRESHOLD and min_ess >= ESS_THRESHOLD)
        extra.update(rhat_mean_rows=r_m, ess_mean_rows=e_m, max_rhat=max_rhat, min_ess=min_ess,
                     within_thresholds=strict)
        out = diagnostics_dict(sampler=True, mean_trace=mon, loglik_trace=ll, **extra)
        if warn and not strict:
            warnings.warn(
                f"B-DeepNoise: max split R-hat {max_rhat:.3f} (threshold {RHAT_THRESHOLD}), min bulk ESS "
                f"{min_ess:.0f} (threshold {ESS_THRESHOLD:.0f}) over the train log-likelihood and the predictive "
                "mean at the monitoring rows: the chains have not mixed; run more sweeps (n_burnin, n_keep) "
                "or chains. See diagnostics_",
                ConvergenceWarning, stacklevel=3,
            )
        return out

    # ------------------------------------------------------------------ posterior states
    @property
    def n_states_(self) -> int:
        check_fitted(self, "samples_")
        w = self.samples_["W.0"]
        return int(w.shape[0] * w.shape[1])

    def states(self):
        """The kept states as `DeepNoiseParams` (chain-major order), standardised units."""
        check_fitted(self, "samples_")
        w = self.samples_["W.0"]
        for c in range(w.shape[0]):
            for k in range(w.shape[1]):
                yield DeepNoiseParams.from_flat({key: v[c, k] for key, v in self.samples_.items()})

    # ------------------------------------------------------------------ predict
    @torch.no_grad()
    def predict_components(self, X, *, n_realizations=None):
        """Component means and variances (N, n_states · R), original units, state-major."""
        Xs = self._standardise(X, fitted_attributes="samples_")
        R = self.n_realizations if n_realizations is None else check_int(n_realizations, "n_realizations", min_value=1)
        dev = self.samples_["W.0"].device
        width = max(check_widths(self.hidden) + (Xs.shape[1], 1))
        Xs = torch.as_tensor(Xs, dtype=torch.float64).to(dev)
        act = piecewise_activation(self.activation)
        step = max(1, _CHUNK_ELEMENTS // max(1, R * width))
        means, variances = [], []
        for k, state in enumerate(self.states()):
            m_parts, v_parts = [], []
            for start in range(0, Xs.shape[0], step):
                # state k's R noise draws: its own seed, common to every row and chunk, so a row's
                # predictive does not depend on the other rows of X or their order
                gen = torch.Generator(device=dev).manual_seed(_state_seed(self._predict_seed, k))
                m, v = forward_moments(state, Xs[start : start + step], act, R, gen, shared=True)
                m_parts.append(m)
                v_parts.append(v)
            means.append(torch.cat(m_parts, dim=1).T.cpu())
            variances.append(torch.cat(v_parts, dim=1).T.cpu())
        mean = torch.cat(means, dim=1).numpy() * self.y_scale_ + self.y_mean_
        var = torch.cat(variances, dim=1).numpy() * self.y_scale_**2
        return mean, var

    def predict_distribution(self, X, *, n_realizations=None) -> StateMixture:
        """The Monte-Carlo predictive (spec §3.1–3.2) as an equal-weight `StateMixture` over
        kept states × ``n_realizations`` (default the setting), original y units. The
        prediction noise is re-seeded at every call, so repeated calls agree, and each state's
        draws are shared by all rows, so a row's predictive does not depend on the others."""
        mean, var = self.predict_components(X, n_realizations=n_realizations)
        return StateMixture(mean, var, self.n_states_)

    # ------------------------------------------------------------------ persistence
    #: Fitted arrays saved as float64 tensors under their attribute names.
    _FITTED_ARRAYS = ("loglik_trace_", "monitor_trace_", "chain_seconds_", "monitor_X_")

    def _state(self) -> tuple[dict, dict]:
        """Tensors ``samples.*`` (the kept states), the traces and the scaling; settings ``params``
        and ``fitted`` (the common record and ``predict_seed``)."""
        tensors = {f"samples.{k}": v for k, v in self.samples_.items()}
        for name in self._FITTED_ARRAYS:
            tensors[name] = torch.as_tensor(np.asarray(getattr(self, name)), dtype=torch.float64)
        tensors["monitor_rows_"] = torch.as_tensor(self.monitor_rows_, dtype=torch.int64)
        tensors.update(self._scaling_tensors())
        fitted = dict(self._common_fitted(), predict_seed=self._predict_seed)
        return tensors, {"params": io.json_params(self), "fitted": fitted}

    @classmethod
    def _from_state(cls, tensors, settings, *, device=None, where="", **kwargs) -> "DeepNoiseRegressor":
        """Inverse of `_state`. Files of older versions hold the input scaling as ``x_mean_`` /
        ``x_scale_`` and y_mean / y_scale in ``fitted``."""
        fitted = settings["fitted"]
        est = cls(**io.params_from_json(settings["params"], device=device))
        s = est._settings()
        dev = torch.device(s["device"])
        est.samples_ = {k[len("samples."):]: v.to(dev) for k, v in tensors.items() if k.startswith("samples.")}
        for name in cls._FITTED_ARRAYS:
            setattr(est, name, tensors[name].numpy())
        est.monitor_rows_ = tensors["monitor_rows_"].numpy()
        est._predict_seed = int(fitted["predict_seed"])
        p = est._restore_common(fitted)
        old_scaling = {k.rstrip("_"): tensors[k] for k in ("x_mean_", "x_scale_") if k in tensors}
        est._restore_scaling({**old_scaling, **tensors}, fitted, p)
        first = DeepNoiseParams.from_flat({k: v[0, 0] for k, v in est.samples_.items()})
        widths = (p, *s["hidden"], 1)  # the settings must describe the stored network (issue 22)
        expected = [(a, b) for a, b in zip(widths[:-1], widths[1:])]
        shapes = [tuple(w.shape) for w in first.W]
        if shapes != expected:
            raise RuntimeError(f"the stored weights have shapes {shapes}, but the settings (hidden={list(s['hidden'])}, "
                               f"{p} features) describe {expected}")
        est.diagnostics_ = est._diagnostics(warn=False)
        return est


def _run_parallel(jobs, workers: int, report) -> list:
    """Chains in ``workers`` spawned processes (one torch/BLAS thread each, SIGINT ignored,
    as the experiment runner's pool); progress comes back through a queue."""
    ctx = multiprocessing.get_context("spawn")
    q = ctx.Queue()
    pool = cf.ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_init_chain_worker, initargs=(q,))

    def drain(timeout):
        try:
            report(*q.get(timeout=timeout))
            while True:
                report(*q.get_nowait())
        except queue_mod.Empty:
            pass

    try:
        futures = [pool.submit(_run_chain, job) for job in jobs]
        while not all(f.done() for f in futures):
            drain(0.2)
        results = [f.result() for f in futures]
        drain(0.05)
    except BaseException:
        terminate_pool(pool)
        raise
    pool.shutdown(wait=True)
    q.close()
    return results
