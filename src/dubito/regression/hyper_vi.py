r"""Variational inference in parameter or predictor space with k-NN KL estimates (Pequignot et
al., "Implicit variational inference: the parameter and the predictor space"; spec
``shared/specs/ood-predictor-entropy.md``).

Model (spec §1, §2.1, §2.7), in standardised units (``standardize=True``: X and y z-scored with
the training mean and sd, ddof 0; a constant column is centred only):

    y = f_θ(x) + ε,  ε ~ N(0, σ_l²),  θ ~ P = N(0, prior_sd² I),

f_θ the one-hidden-layer MLP of `dubito.nn.flat_mlp.FlatMLP` (d = (D+1)H + H + 1 parameters).
σ_l = ``noise_std`` is FIXED when given (the paper: spec §2.8 lists its values per data set);
by default (``noise_std=None``) it is a point estimate learned with q, one log-scale that
maximises the same ELBO (type-II maximum likelihood, as `MeanFieldVIRegressor`'s noise), started
at the sd of the training targets (1 in standardised units). The paper fixes σ_l per data set from
a grid; a user has no such table, and a wrong fixed σ_l miscalibrates every interval, so the
default learns it (diabetes, 80/20 splits 0-2, all defaults: 95 % coverage 0.93 / 0.99 / 0.94,
test NLL 5.49 / 5.52 / 5.47).

Methods, by ``space`` × ``family`` (spec §2.5, §3):

=============  =============  ===========================================================
``family``      ``space``      KL term in the loss
=============  =============  ===========================================================
hypernet        parameter      NN-HyVI: KL̂_1(θ_i, π_j), θ_i = h_λ(ε_i) ~ q, π_j ~ P (Eq. 7)
hypernet        function       FuNN-HyVI: KL̂_1(f_θi^𝒳, f_πj^𝒳), 𝒳 ~ ν^T (Eq. 8)
mean-field      parameter      MFVI: (1/S_KL) Σ_j [ln q(θ_j) − ln p(θ_j)] (analytic densities)
mean-field      function       FuNN-MFVI: the FuNN k-NN KL with a mean-field q
=============  =============  ===========================================================

Loss per minibatch B ⊆ D (spec §2.5; no temperature, no β):

    LL   = (1/S_LL) Σ_s Σ_{(x,y)∈B} ln N(y; f_θs(x), σ_l²)           (θ_s ~ q fresh each step)
    loss = −LL + (|B| / |D|) · KL,

so the minibatch losses of one epoch sum to the full negative ELBO (`_run_epoch`; spec test 8).
The S_KL = ``n_kl_samples`` q draws of the KL are separate from the S_LL = ``n_ll_samples``
likelihood draws (one family forward pass makes both), the S_KL prior draws π_j are fresh each
step, and in function space one fresh 𝒳 of T = ``n_ood_points`` inputs from ν per step. ν is
the uniform box of the standardised training inputs ([C]; spec §1), or ``ood_box`` (given in the
user's input units). The k-NN estimators are `dubito.metrics.entropy.knn_kl` /
``function_kl`` (k = 1, distances clamped at float32 eps).

Optimisation (spec §2.9, [C]): Adam, lr 0.005; ``ReduceLROnPlateau`` on the epoch loss (the
example-weighted mean of the minibatch losses) with factor 0.7, ``lr_patience`` epochs (the
spec's "patience"), relative threshold 1e-4 and floor ``min_lr`` = 1e-4; the schedule ends
training after the first epoch run at lr ≤ ``min_lr`` (≥ 341 epochs at the defaults). Rows are
reshuffled each epoch. The spec's lr patience is 30 (small sets) / 10 (large) and doubled for
MFVI (60 / 20): pass it. Training runs in float32 (as [C]); predictions are computed in float64.

Validated fitting (`dubito.early_stopping`): a share ``validation_fraction`` (default 0.1,
scikit-learn's ``MLPRegressor``) of the training rows is held out, drawn by `holdout_split`
from a seed stream of its own (the initialisation, row order and Monte Carlo streams are those of
a fit without it); the standardisation and ν's box use the other rows. After each epoch the
held-out rows are scored by the NLL of the posterior predictive mixture,
−(1/m) Σ_j ln[(1/M) Σ_m N(y_j; f_θm(x_j), σ_l²)] (standardised units), with M =
`VALIDATION_PREDICTORS` = 200 draws θ_m ~ q from a generator reseeded to one fixed seed every
epoch, so the criterion moves only with q and σ_l (common random numbers), not with fresh Monte
Carlo noise. Cost: 200 forward passes of each held-out row per epoch, small beside an epoch's
S_LL = 100 draws per training row and the KL term; measured on diabetes (360 training + 40
held-out rows, defaults, one thread): 4.4 ms per held-out score against 0.73 s per epoch in
function space (0.6 %) and 0.45 s in parameter space (1.0 %). Training ends at the first of:
``patience`` (default 20, `dubito.early_stopping.DEFAULT_PATIENCE`) epochs without a better
held-out NLL (``stopped_by_ = "patience"``), the schedule's end (``"min_lr"``), or ``max_epochs``
(``"cap"``; 2000, spec §2.9, kept: the schedule alone ends a run after ≥ 341 epochs, and on
diabetes, splits 0-2, the held-out rule ended the defaults' runs at 30-42 epochs). With a
held-out share q and σ_l are restored to their best epoch whichever rule ended the run.
``validation_fraction=0`` is the paper's protocol (`dubito.experiments.ood` passes it).

Collapse monitor (spec pitfall 8): ``min_knn_distance_[e]`` is the smallest nearest-neighbour
distance among the q draws of the KL term (θ in parameter space, f_θ^𝒳 in function space) at
the last step of epoch e. At the float32-eps clamp the k-NN gradient vanishes silently, so fit
warns when it ends at or below 10·eps.

Predictions: n_predictors θ ~ q (1000, spec §2.9) shared by all rows of X. `predict_distribution`
is the equal-weight mixture (1/M) Σ_m N(y; f_θm(x), σ_l²) in user units (`Samples`); its
log-density at one test point is the spec's LPP term ln[(1/M) Σ_m N(y; f_m, σ_l²)] − ln s_y
(logsumexp). `ood_score` is U(x) = ½ ln(2πe σ²(x)) of the standardised predictions (spec §1).
Entropies (spec §4 "Posterior entropies", Table 2): `parameter_entropy` = Ĥ_1 of n θ draws;
`predictor_entropy` = mean over n_draws 𝒳 ~ ν^T of ``function_entropy`` of the
(n_predictors, T) prediction matrix, fresh predictors per 𝒳.

Diagnostics: ``diagnostics_`` (`dubito.inference.convergence`; no chain, no R-hat) has
``stopped_by_cap`` = ``stopped_by_ == "cap"``: ``max_epochs`` came before both rules.

Persistence (`dubito._estimator.DubitoEstimator`: ``_state`` / ``_from_state``, in
`dubito.regression.hyper_vi_io`): q's state dict, the scaling, the curves and ν's box as
safetensors, the settings as JSON. Files written before validated fitting load with
``validation_fraction=0``, their ``patience`` read as ``lr_patience``, and ``stopped_by_``
"min_lr" or "cap" from their lr curve.

Measured speed: ``benchmarks/ood.py`` (seconds per epoch, one thread).
"""

from __future__ import annotations

import math
import time
import warnings

import numpy as np
import torch
from torch import nn

from dubito._estimator import DubitoRegressor, seeds_from
from dubito._validation import (
    check_bool,
    check_choice,
    check_fitted,
    check_float,
    check_int,
    check_widths,
)
from dubito.data.ood_box import UniformBox
from dubito.early_stopping import (
    DEFAULT_PATIENCE,
    DEFAULT_VALIDATION_FRACTION,
    best_copy,
    check_patience,
    check_validation_fraction,
    regression_holdout,
)
from dubito.inference.convergence import diagnostics_dict
from dubito.metrics.entropy import (
    function_entropy,
    knn_entropy,
    spread_entropy,
)
from dubito.nn.batched import ACTIVATIONS
from dubito.nn.flat_mlp import FlatMLP
from dubito.predictive.samples import Samples
from dubito.regression.hyper_vi_io import hyper_vi_from_state, hyper_vi_state
from dubito.regression.hyper_vi_objective import (
    NoiseScale,
    _Objective,
    _run_epoch,
    check_noise_std,
)
from dubito.regression.hyper_vi_training import train
from dubito.regression.variational_family import HyperNetwork, MeanField
from dubito.search_space import Choice, Float
from dubito.training_checkpoint import check_resume

__all__ = ["FAMILIES", "SPACES", "VALIDATION_PREDICTORS", "HyperVIRegressor"]

SPACES = ("function", "parameter")
FAMILIES = ("hypernet", "mean-field")
_LOG_2PI = math.log(2.0 * math.pi)
#: float32 eps, the k-NN distance clamp ([C]); fit warns when q's nearest-neighbour distance reaches 10x it.
_EPS32 = float(np.finfo(np.float32).eps)
#: Elements of the (rows, predictors, hidden) activation per chunk at prediction (float64: 128 MB).
_CHUNK_ELEMENTS = 1 << 24
#: θ draws of the held-out NLL that stops training early (module docstring).
VALIDATION_PREDICTORS = 200
MIN_SAMPLES = 2


class HyperVIRegressor(DubitoRegressor):
    """NN-HyVI, FuNN-HyVI, MFVI and FuNN-MFVI (module docstring) for a one-hidden-layer MLP.

    Parameters (defaults: spec §2, [C] unless noted)
    ----------
    space : {"function", "parameter"}, default "function" — where the KL is estimated.
    family : {"hypernet", "mean-field"}, default "hypernet" — q's family (§2.6 / §3).
    noise_std : float or None, default None — σ_l >= 1e-6 (`hyper_vi_objective.MIN_NOISE_STD`), fixed, in
        standardised target units (raw units with ``standardize=False``; spec §2.8 lists the
        paper's values); None learns it with q (ours; module docstring).
    prior_sd : float, default 0.5 — std of the Gaussian weight prior ([C]; spec §2.7).
    hidden : int, default 50; activation : str, default "relu" — the predictor net (§2.1).
    latent_dim : int, default 5; generator_hidden : tuple, default (20, 40) — the hypernetwork.
    n_ll_samples : int, default 100; n_kl_samples : int, default 500 (q and prior draws each);
    n_ood_points : int, default 200 — T (50 for the synthetic set).
    lr : 0.005; lr_factor : 0.7; lr_patience : 30 (the spec's "patience" of the plateau
        schedule); min_lr : 1e-4; max_epochs : 2000 (§2.9).
    batch_size : int, default 50 (500 for the large sets); more than the rows trained on: one full
        batch.
    validation_fraction : float in [0, 0.5), default 0.1 — held-out share of the training rows
        for early stopping (`dubito.early_stopping.DEFAULT_VALIDATION_FRACTION`, scikit-learn's
        ``MLPRegressor``); 0: the paper's protocol, every row trained on.
    patience : int, default 20 — epochs without a better held-out NLL before training stops
        (`dubito.early_stopping.DEFAULT_PATIENCE`).
    n_predictors : int, default 1000 — θ draws for predictions and `ood_score`.
    ood_box : None, UniformBox or (low, high) in the user's input units — ν; None: the box of
        the (standardised) training inputs.
    init_sd : float, default 0.001 — the mean-field family's initial σ ([C]).
    standardize : bool, default True — z-score X and y with the training statistics.
    device : str, default "cpu"; random_state : None or int; progress : bool, default True.
    checkpoint_dir : str or Path or None, default None — folder of the training checkpoint
        (``hyper_vi.safetensors``: q, σ_l, Adam, the plateau schedule, the early-stopping state
        and best q, the random streams and the curves), written atomically every
        ``checkpoint_every`` epochs (default 10) and at the end; ``fit(X, y, resume=True)``
        continues from it to the same numbers as an uninterrupted fit (`dubito.training_checkpoint`).

    Fitted attributes
    -----------------
    family_ (the trained HyperNetwork / MeanField, float32; its best epoch's state with a
    held-out share), net_ (FlatMLP), n_params_ (d), noise_std_ (σ_l, standardised target units:
    ``noise_std`` or the learned value), loss_curve_, lr_curve_, min_knn_distance_ (per epoch),
    validation_curve_ (held-out NLL per epoch, standardised units; empty without a held-out
    share), best_epoch_ (from 1), stopped_by_ ("patience", "min_lr" or "cap"), n_epochs_,
    train_seconds_ (the training loop's wall time, summed over a resumed fit's runs), ood_box_
    (UniformBox, standardised inputs), x_mean_, x_scale_, y_mean_, y_scale_, n_train_ (rows
    trained on), predict_seed_; diagnostics_ (dict, `dubito.inference.convergence`: no R-hat;
    ``stopped_by_cap`` when ``max_epochs`` ended the run before either rule).
    """

    #: What `dubito.tune` searches: Adam's rate around [C]'s 0.005 (a factor 5 down, 4 up); the
    #: prior sd around [C]'s 0.5 (spec §2.7), a factor 5 either way (it sets the KL's pull); the
    #: predictor's width: the paper's 50 (small sets) and 100 (large sets) hidden units (spec §2.1).
    search_space = {
        "lr": Float(1e-3, 2e-2, log=True),
        "prior_sd": Float(0.1, 2.5, log=True),
        "hidden": Choice([50, 100]),
    }

    def __init__(self, space="function", family="hypernet", noise_std=None, prior_sd=0.5, hidden=50,
                 activation="relu", latent_dim=5, generator_hidden=(20, 40), n_ll_samples=100, n_kl_samples=500,
                 n_ood_points=200, lr=0.005, lr_factor=0.7, lr_patience=30, min_lr=1e-4, max_epochs=2000,
                 batch_size=50, validation_fraction=DEFAULT_VALIDATION_FRACTION, patience=DEFAULT_PATIENCE,
                 n_predictors=1000, ood_box=None, init_sd=1e-3, standardize=True, device="cpu",
                 random_state=None, progress=True, checkpoint_dir=None, checkpoint_every=10):
        self.space = space
        self.family = family
        self.noise_std = noise_std
        self.prior_sd = prior_sd
        self.hidden = hidden
        self.activation = activation
        self.latent_dim = latent_dim
        self.generator_hidden = generator_hidden
        self.n_ll_samples = n_ll_samples
        self.n_kl_samples = n_kl_samples
        self.n_ood_points = n_ood_points
        self.lr = lr
        self.lr_factor = lr_factor
        self.lr_patience = lr_patience
        self.min_lr = min_lr
        self.max_epochs = max_epochs
        self.batch_size = batch_size
        self.validation_fraction = validation_fraction
        self.patience = patience
        self.n_predictors = n_predictors
        self.ood_box = ood_box
        self.init_sd = init_sd
        self.standardize = standardize
        self.device = device
        self.random_state = random_state
        self.progress = progress
        self.checkpoint_dir = checkpoint_dir
        self.checkpoint_every = checkpoint_every

    # ------------------------------------------------------------------ settings
    def _settings(self) -> dict:
        for name in ("standardize", "progress"):
            check_bool(getattr(self, name), name)
        generator_hidden = check_widths(self.generator_hidden, "generator_hidden")
        lr_factor = check_float(self.lr_factor, "lr_factor", strictly_positive=True)
        if lr_factor >= 1:
            raise ValueError(f"lr_factor must be in (0, 1), got {lr_factor}")
        return {
            "space": check_choice(self.space, "space", SPACES),
            "family": check_choice(self.family, "family", FAMILIES),
            "noise_std": None if self.noise_std is None else check_noise_std(self.noise_std),
            "prior_sd": check_float(self.prior_sd, "prior_sd", strictly_positive=True),
            "hidden": check_int(self.hidden, "hidden", min_value=1),
            "activation": check_choice(self.activation, "activation", ACTIVATIONS),
            "latent_dim": check_int(self.latent_dim, "latent_dim", min_value=1),
            "generator_hidden": generator_hidden,
            "n_ll": check_int(self.n_ll_samples, "n_ll_samples", min_value=1),
            "n_kl": check_int(self.n_kl_samples, "n_kl_samples", min_value=2),
            "n_ood": check_int(self.n_ood_points, "n_ood_points", min_value=1),
            "lr": check_float(self.lr, "lr", strictly_positive=True),
            "lr_factor": lr_factor,
            "lr_patience": check_int(self.lr_patience, "lr_patience", min_value=0),
            "min_lr": check_float(self.min_lr, "min_lr", min_value=0.0),
            "max_epochs": check_int(self.max_epochs, "max_epochs", min_value=1),
            "batch_size": check_int(self.batch_size, "batch_size", min_value=1),
            "validation_fraction": check_validation_fraction(self.validation_fraction),
            "patience": check_patience(self.patience),
            "n_predictors": check_int(self.n_predictors, "n_predictors", min_value=1),
            "init_sd": check_float(self.init_sd, "init_sd", strictly_positive=True),
            "device": self._device(),
            "checkpoint_every": check_int(self.checkpoint_every, "checkpoint_every", min_value=1),
        }

    def _user_box(self, n_features: int) -> UniformBox | None:
        box = self.ood_box
        if box is None:
            return None
        if not isinstance(box, UniformBox):
            try:
                low, high = box
            except (TypeError, ValueError):
                raise ValueError(f"ood_box must be None, a UniformBox or a (low, high) pair, got {box!r}") from None
            box = UniformBox(low, high)
        if box.n_features != n_features:
            raise ValueError(f"ood_box has {box.n_features} feature(s) but X has {n_features}")
        return box

    def _make_family(self, s: dict, d: int, generator, dtype=torch.float32):
        if s["family"] == "hypernet":
            return HyperNetwork(d, s["latent_dim"], s["generator_hidden"], generator, dtype, s["device"])
        return MeanField(d, s["init_sd"], 1.0, generator, dtype, s["device"])

    # ------------------------------------------------------------------ fit
    def fit(self, X, y, *, resume: bool = False):
        """Minimise the negative ELBO of the module docstring on (X, y), stopping early on the
        held-out rows. Returns self.

        X (n, D) and y (n,) finite, y not constant, n >= 2. ``resume=True`` continues from the
        checkpoint in ``checkpoint_dir`` (none there: a fresh start) to the same numbers as an
        uninterrupted fit; it needs an int ``random_state``, and a checkpoint written with other
        settings or data is refused with a ValueError that lists what differs."""
        check_resume(self, resume)
        state = self._prepare(X, y)
        stopped_by, curves, stopper, t0 = train(self, state, X, y, resume)
        family = state["objective"].family
        self.family_ = family.eval()
        for q in family.parameters():
            q.requires_grad_(False)
        self.noise_std_ = state["objective"].current_noise_std()
        self.loss_curve_ = np.asarray(curves["losses"], dtype=np.float64)
        self.lr_curve_ = np.asarray(curves["lrs"])
        self.min_knn_distance_ = np.asarray(curves["min_r"])
        self.n_epochs_ = len(self.loss_curve_)
        if stopper is None:
            self.validation_curve_, self.best_epoch_ = np.zeros(0), int(self.n_epochs_)
        else:
            self.validation_curve_ = np.asarray(stopper.curve, dtype=np.float64).reshape(-1)
            self.best_epoch_ = int(stopper.best_epoch[0])
        self.stopped_by_ = stopped_by
        self.train_seconds_ = time.perf_counter() - t0
        self.diagnostics_ = self._diagnostics()
        self._warn_collapse()
        return self

    @torch.no_grad()
    def _heldout_nll(self, state: dict) -> float:
        """−(1/m) Σ_j ln[(1/M) Σ_m N(y_j; f_θm(x_j), σ_l²)] on the held-out rows (standardised units),
        M = `VALIDATION_PREDICTORS` draws from a generator reseeded to the same seed every call."""
        Xv, yv = state["validation"]
        objective = state["objective"]
        gen = torch.Generator(device=Xv.device).manual_seed(state["validation_seed"])
        theta = objective.family.sample(VALIDATION_PREDICTORS, gen).double()
        sd = objective.current_noise_std()
        f = self._predict_std(theta, Xv)  # (M, m)
        logp = -0.5 * ((yv - f) / sd) ** 2 - math.log(sd) - 0.5 * _LOG_2PI
        return float((math.log(VALIDATION_PREDICTORS) - torch.logsumexp(logp, dim=0)).mean())

    def _diagnostics(self) -> dict:
        """The shared ``diagnostics_`` (no chain: R-hat and ESS NaN); ``stopped_by_cap`` when
        ``max_epochs`` ended the run (``stopped_by_ == "cap"``), before the held-out rule and the
        schedule's end (the first epoch run at lr <= ``min_lr``)."""
        last_lr = float(self.lr_curve_[-1]) if len(self.lr_curve_) else float("nan")
        return diagnostics_dict(sampler=False, stopped_by_cap=self.stopped_by_ == "cap", n_epochs=int(self.n_epochs_),
                                max_epochs=int(self.max_epochs), best_epoch=int(self.best_epoch_),
                                stopped_by=self.stopped_by_, final_lr=last_lr, min_lr=float(self.min_lr))

    def _prepare(self, X, y) -> dict:
        """Validate, hold out, standardise, seed, build the family, objective, Adam and the plateau
        schedule. Sets the scaling attributes, ``ood_box_``, ``net_``, ``n_params_``, ``predict_seed_``."""
        s = self._settings()
        X, y = self._validate_fit(X, y, min_samples=MIN_SAMPLES)
        user_box = self._user_box(X.shape[1])
        # the first four seeds are those of a fit without held-out rows; the fifth draws them
        init_seed, order_seed, noise_seed, self.predict_seed_, holdout_seed, validation_seed = seeds_from(
            self.random_state, 6)
        fraction = s["validation_fraction"]
        train_rows, val_rows = regression_holdout(y, fraction, holdout_seed, min_samples=MIN_SAMPLES)
        n, p = train_rows.size, X.shape[1]
        if self.standardize:
            Xs, ys = self._fit_scaling(X[train_rows], y[train_rows])
        else:
            self.x_mean_, self.x_scale_ = np.zeros(p), np.ones(p)
            self.y_mean_, self.y_scale_ = 0.0, 1.0
            self.n_train_ = int(n)
            Xs, ys = X[train_rows], y[train_rows]
        self.ood_box_ = (UniformBox.from_data(Xs) if user_box is None else
                         UniformBox((user_box.low - self.x_mean_) / self.x_scale_,
                                    (user_box.high - self.x_mean_) / self.x_scale_))

        dev = s["device"]
        init = torch.Generator(device=dev).manual_seed(init_seed)
        order = torch.Generator().manual_seed(order_seed)
        noise = torch.Generator(device=dev).manual_seed(noise_seed)
        self.net_ = FlatMLP(p, s["hidden"], s["activation"])
        self.n_params_ = self.net_.n_params
        family = self._make_family(s, self.n_params_, init)
        trainable = nn.ModuleDict({"family": family})
        if s["noise_std"] is None:  # learned, from the sd of the training targets
            trainable["noise_scale"] = NoiseScale(float(ys.std()), device=dev)
        log_noise = trainable["noise_scale"].log_sd if "noise_scale" in trainable else None
        objective = _Objective(
            family, self.net_, noise_std=s["noise_std"], prior_sd=s["prior_sd"], space=s["space"], box=self.ood_box_,
            n_ll=s["n_ll"], n_kl=s["n_kl"], n_ood=s["n_ood"], n_train=n,
            analytic_kl=s["family"] == "mean-field" and s["space"] == "parameter", log_noise=log_noise)
        X32 = torch.as_tensor(Xs, dtype=torch.float32, device=dev)
        y32 = torch.as_tensor(ys, dtype=torch.float32, device=dev)
        opt = torch.optim.Adam(trainable.parameters(), lr=s["lr"])
        sched = torch.optim.lr_scheduler.ReduceLROnPlateau(
            opt, mode="min", factor=s["lr_factor"], patience=s["lr_patience"], threshold=1e-4,
            threshold_mode="rel", min_lr=s["min_lr"])
        validation = None
        if val_rows.size:
            validation = (torch.as_tensor((X[val_rows] - self.x_mean_) / self.x_scale_, dtype=torch.float64, device=dev),
                          torch.as_tensor((y[val_rows] - self.y_mean_) / self.y_scale_, dtype=torch.float64, device=dev))
        return dict(settings=s, objective=objective, optimizer=opt, scheduler=sched, X=X32, y=y32,
                    batch=min(s["batch_size"], n), order=order, noise=noise, trainable=trainable,
                    best=None if validation is None else best_copy(trainable), validation=validation,
                    validation_seed=validation_seed)

    @staticmethod
    def _train_epoch(state: dict) -> float:
        """One epoch of Adam steps; returns the example-weighted mean of the minibatch losses."""
        parts = _run_epoch(state["objective"], state["optimizer"], state["X"], state["y"], state["batch"],
                           state["order"], state["noise"])
        return sum(b * v for b, v in parts) / state["X"].shape[0]

    @staticmethod
    def _method_name(s: dict) -> str:
        prefix = "FuNN-" if s["space"] == "function" else ("NN-" if s["family"] == "hypernet" else "")
        return prefix + ("HyVI" if s["family"] == "hypernet" else "MFVI")

    def _warn_collapse(self) -> None:
        if self.n_epochs_ and self.min_knn_distance_[-1] <= 10 * _EPS32:
            warnings.warn(
                f"q collapsed: the nearest-neighbour distance among its draws is {self.min_knn_distance_[-1]:.3g} "
                f"(<= 10 x float32 eps) at the last epoch, where the k-NN entropy estimate has no gradient (its log-distance term is flat when draws coincide)",
                RuntimeWarning, stacklevel=3)

    # ------------------------------------------------------------------ sampling
    def _generator(self, random_state) -> torch.Generator:
        seed = self.predict_seed_ if random_state is None else seeds_from(random_state, 1)[0]
        return torch.Generator(device=self._family_device()).manual_seed(seed)

    def _family_device(self):
        return next(self.family_.parameters()).device

    @torch.no_grad()
    def _theta(self, n: int, generator) -> torch.Tensor:
        return self.family_.sample(n, generator).double()

    @torch.no_grad()
    def _predict_std(self, theta: torch.Tensor, Xs: torch.Tensor) -> torch.Tensor:
        """f_θm(x_n) (M, N) in float64, in row chunks of ≤ _CHUNK_ELEMENTS activations."""
        step = max(1, _CHUNK_ELEMENTS // (theta.shape[0] * self.net_.hidden))
        return torch.cat([self.net_(theta, Xs[i:i + step]) for i in range(0, Xs.shape[0], step)], dim=1)

    def sample_parameters(self, n: int, random_state=None) -> np.ndarray:
        """n draws θ ~ q, float64 (n, d). ``random_state`` None: the fitted predict seed."""
        check_fitted(self, ["family_"])
        n = check_int(n, "n", min_value=1)
        return self._theta(n, self._generator(random_state)).cpu().numpy()

    def sample_predictions(self, X, n: int, random_state=None, standardized_input: bool = False) -> np.ndarray:
        """f_θm(x) for n predictors θ_m ~ q shared by all rows of X: (n, N), standardised
        target units. ``standardized_input``: X is already in standardised input units."""
        check_fitted(self, ["family_"])
        n = check_int(n, "n", min_value=1)
        if standardized_input:
            X = np.asarray(X, dtype=np.float64)
            if X.ndim != 2 or X.shape[1] != self.n_features_in_ or not np.isfinite(X).all():
                raise ValueError(f"X must be a finite 2-D array with {self.n_features_in_} columns, got shape {X.shape}")
            Xs = X
        else:
            Xs = self._standardise(X)
        theta = self._theta(n, self._generator(random_state))
        Xt = torch.as_tensor(Xs, dtype=torch.float64, device=theta.device)
        return self._predict_std(theta, Xt).cpu().numpy()

    def sample_functions(self, X, n_samples=None, *, random_state=None) -> np.ndarray:
        """f_θm(x) of n predictors θ_m ~ q (default ``n_predictors``) at the rows of X, user units,
        (n, N); the same (``n_samples``, ``random_state``) gives the same predictors for any X."""
        n = self._settings()["n_predictors"] if n_samples is None else n_samples
        return self.sample_predictions(X, n, random_state) * self.y_scale_ + self.y_mean_

    # ------------------------------------------------------------------ predict
    def predict_distribution(self, X, random_state=None) -> Samples:
        """(1/M) Σ_m N(y; f_θm(x), σ_l²) in user units, M = n_predictors (`Samples`)."""
        draws = self.sample_predictions(X, self._settings()["n_predictors"], random_state)
        return Samples(draws * self.y_scale_ + self.y_mean_, noise_std=float(self.noise_std_) * self.y_scale_)

    def ood_score(self, X, random_state=None) -> np.ndarray:
        """U(x) = ½ ln(2πe σ²(x)), σ² the ddof-1 variance of the standardised predictions (spec §1), (N,)."""
        n = self._settings()["n_predictors"]
        if n < 2:
            raise ValueError(f"ood_score needs n_predictors >= 2 (a ddof-1 variance), got {n}")
        return spread_entropy(self.sample_predictions(X, n, random_state))

    def parameter_entropy(self, n: int = 1000, random_state=None) -> float:
        """Ĥ_1 (Eq. 4, ln N convention) of n θ ~ q, float64 (spec §4, Table 2)."""
        return float(knn_entropy(self.sample_parameters(n, random_state)))

    def predictor_entropy(self, n_draws: int = 100, n_predictors: int = 1000, n_points: int = 200,
                          random_state=None) -> float:
        """Mean over n_draws 𝒳 ~ ν^T (T = n_points, ν = ``ood_box_``) of ``function_entropy`` of the
        (n_predictors, T) prediction matrix, fresh predictors per 𝒳 (spec §4, Table 2)."""
        check_fitted(self, ["family_"])
        n_draws = check_int(n_draws, "n_draws", min_value=1)
        n_predictors = check_int(n_predictors, "n_predictors", min_value=2)
        n_points = check_int(n_points, "n_points", min_value=1)
        gen = self._generator(random_state)
        values = []
        for _ in range(n_draws):
            X = self.ood_box_.sample(n_points, gen, dtype=torch.float64, device=self._family_device())
            pred = self._predict_std(self._theta(n_predictors, gen), X)
            values.append(float(function_entropy(pred.cpu().numpy())))
        return float(np.mean(values))

    # ------------------------------------------------------------------ persistence
    def _state(self) -> tuple[dict[str, torch.Tensor], dict]:
        """(tensors, settings) for `DubitoEstimator.save` (`dubito.regression.hyper_vi_io`)."""
        return hyper_vi_state(self)

    @classmethod
    def _from_state(cls, tensors, settings, *, device=None, where="", **kwargs) -> HyperVIRegressor:
        """The estimator rebuilt by `DubitoEstimator.load` (`dubito.regression.hyper_vi_io`)."""
        return hyper_vi_from_state(cls, tensors, settings, device=device)
