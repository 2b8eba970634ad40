r"""B-DeepNoise (Zhang, Liu & Kang, arXiv 2206.05643): the user-facing estimator.

`DeepNoiseRegressor` runs several independent Gibbs chains of the B-DeepNoise posterior
(model: :mod:`dubito.regression.deepnoise_model`; sweep: :mod:`dubito.regression.deepnoise_gibbs`;
spec §1–§2) on the standardised data, keeps every ``thin``-th state after ``n_burnin`` sweeps,
and predicts with the Monte-Carlo predictive of spec §3.1–3.2: for each kept state θ_m and
r = 1..R, noise is pushed through the hidden layers and the last layer is exact, giving the
equal-weight Gaussian mixture

    p̂(y | x) = (1/MR) Σ_{m,r} N(y; μ_{m,r}(x), s²_{m,r})   (original y units: μ·sd_y + mean_y, s²·sd_y²).

Its variance splits by the law of total variance over posterior states (spec §3.3 [R]):
aleatoric = E_m[Var(y | x, θ_m)] (all latent and output noise), epistemic = Var_m[E(y | x, θ_m)]
(`StateMixture`, `dubito.regression.deepnoise_predictive`).

Chains: chain c draws everything from its own ``torch.Generator``, seeded by child c of
``SeedSequence(random_state)``, so chains are independent, results do not depend on
``n_jobs`` (chains run in ``n_jobs`` spawned processes, one torch/BLAS thread each — spec §2.5:
a multithreaded BLAS is far slower on small matrices; `dubito.regression.deepnoise_pool`) and a checkpointed chain resumes to the
same numbers (`dubito.regression.deepnoise_checkpoint`).

Initialisation (spec §2.3): ``init="sgd"`` trains one `DeepNoiseSGDRegressor` per chain on
the training rows outside fold (c mod 5) of a 5-fold split ([C]), maps its state into this
estimator's standardised units and starts the chain there (ρ = |β|, ξ = |γ|);
``init="random"`` uses ``random_init`` (W ~ N(0, 1/K_in), noise variances 0.1, [P]
Algorithm 1 / [R]). The latents start from a noisy forward pass and one down-up v/u sweep.

Diagnostics (spec §2.4, pitfall 6; `dubito.regression.deepnoise_diagnostics`): split R-hat and
bulk ESS of the predictive mean at up to 20 monitoring rows of the training X and of the train
log-likelihood, never of raw weights (permutation symmetry). Both are Monte-Carlo estimates with
``TRACE_DRAWS`` noise draws from a stream seeded by (chain seed, sweep), so they do not perturb the
chain.
"""

from __future__ import annotations

import math
import os
import time

import numpy as np
import torch
from sklearn.model_selection import KFold
from threadpoolctl import threadpool_limits

from dubito import io
from dubito._estimator import DubitoRegressor, seed_base, seeds_from
from dubito._validation import (
    check_bool,
    check_choice,
    check_fitted,
    check_float,
    check_int,
    check_widths,
)
from dubito.regression.deepnoise_checkpoint import (
    ChainState,
    checkpoint_path,
    data_digest,
    load_checkpoint,
    save_checkpoint,
)
from dubito.regression.deepnoise_diagnostics import (
    ESS_THRESHOLD,
    RHAT_THRESHOLD,
    chain_diagnostics,
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
    rescale_params,
)
from dubito.regression.deepnoise_pool import ChainJob, queue_report, run_chains
from dubito.regression.deepnoise_predictive import StateMixture, state_components
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

#: Noise draws per kept state for the diagnostic traces (R = 20 as in [C] UCI, spec §2.4).
TRACE_DRAWS = 20
#: Monitoring rows for the predictive-mean diagnostics (spec §2.4).
N_MONITOR = 20
#: Folds of the [C] SGD initialisation (spec §2.3 step 1).
SGD_FOLDS = 5
#: Minimum training rows: 5 for the 5-fold SGD split (and the target's sd).
MIN_SAMPLES = 5


# ---------------------------------------------------------------------- one chain
def _state_seed(seed: int, sweep: int) -> int:
    return int(np.random.SeedSequence([seed, sweep]).generate_state(1, np.uint64)[0] >> np.uint64(1))


def _init_chain(job: ChainJob, Xs, ys, act, gen, device):
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


def _run_chain(job: ChainJob, report=None) -> dict:
    """Run (or resume) one chain to n_burnin + n_keep sweeps; numpy results for pickling."""

    report = report or queue_report
    s = job.settings
    device = torch.device(s["device"])
    n_threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with threadpool_limits(1):
            return _run_chain_pinned(job, report, device)
    finally:
        torch.set_num_threads(n_threads)


def _run_chain_pinned(job: ChainJob, report, device) -> dict:
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
            jobs.append(ChainJob(
                chain=c, seed=seeds[c], X=X, y=y, units=units, settings=s,
                sgd_rows=folds[c % SGD_FOLDS][0] if s["init"] == "sgd" else None,
                monitor_rows=monitor,
                checkpoint=None if self.checkpoint_dir is None else str(checkpoint_path(self.checkpoint_dir, c)),
                resume=bool(resume), fingerprint=fp,
            ))
        results = run_chains(_run_chain, jobs, sweeps=s["n_burnin"] + s["n_keep"], n_jobs=s["n_jobs"],
                             progress=bool(self.progress))
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

    # ------------------------------------------------------------------ diagnostics
    def _diagnostics(self, warn: bool) -> dict:
        """``diagnostics_`` (`dubito.regression.deepnoise_diagnostics`); ``warn``: a ConvergenceWarning
        (at ``fit``'s caller) when the chains fail `RHAT_THRESHOLD` / `ESS_THRESHOLD`."""
        return chain_diagnostics(self.loglik_trace_, self.monitor_trace_, self.monitor_rows_, self.chain_seconds_,
                                 sweeps=self.n_burnin + self.n_keep, warn=warn)

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
        seeds = [_state_seed(self._predict_seed, k) for k in range(self.n_states_)]
        means, variances = state_components(self.states(), Xs, act, R, seeds, width)
        mean = means.numpy() * self.y_scale_ + self.y_mean_
        var = variances.numpy() * self.y_scale_**2
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


