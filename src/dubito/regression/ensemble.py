r"""Deep ensembles with the Bayesian correction of Hoffmann & Elster (2021).

Hoffmann, L. & Elster, C., "Deep Ensembles from a Bayesian Perspective" (PTB, 2021); the
implementation-grade spec is ``shared/specs/bayesian-ensembles.md``.

Algorithm 1 of the paper:

1. Train L heteroscedastic networks the usual deep-ensemble way (Lakshminarayanan et al.
   2017, no adversarial training, no bootstrap): member l minimises the sum-form loss (4)
   -L(theta; D) + (lambda/2) ||theta||^2 from its own random initialisation with its own
   mini-batch order. Here all L members are trained *together*: stacked weights
   (L, in, out), ``torch.baddbmm``, one Adam over all parameters, the loss summed over
   members. Adam and coupled L2 act elementwise, so this is exactly L independent trainings
   (`dubito.regression.ensemble_training`).
2. Post-processing: for each member, the closed-form variance (eq. 36)

       gamma_l = p_h / ( sum_i ||h_l(x_i)||^2 / sigma_l^2(x_i) + p_h lambda_prior )

   of an isotropic Gaussian over the last-layer weights of the mean head (Theorem 1), from the
   member's own features h_l and variances sigma_l^2 on the full training set, in normalised
   units (spec P5).

Prediction (Theorem 2, Algorithm 2, spec Sec. 2.5): the posterior predictive is the mixture

    pi(y | x, D) = (1/L) sum_l N(y; eta_l(x), sigma_l^2(x) + gamma_l ||h_l(x)||^2)

so the mean is the ensemble mean (unchanged), the aleatoric variance is (1/L) sum_l sigma_l^2,
and the epistemic variance is the members' spread (1/L normalisation, P1) plus
(1/L) sum_l gamma_l ||h_l(x)||^2. ``correction="none"`` gives the conventional deep ensemble,
eq. (5). Everything is returned in the user's units.

lambda (spec pitfall P2): ``weight_decay`` is lambda_tab of the paper's tables. Under the
default ``lambda_convention="per_sample"`` training minimises mean_i l_i + (lambda_tab/2)
||theta||^2, i.e. ``Adam(weight_decay=lambda_tab)`` (coupled L2, never AdamW, P3) on the
mean loss, and the prior precision in (36) is lambda_prior = N lambda_tab. Under ``"sum"``
the optimiser decay is lambda_tab / N and lambda_prior = lambda_tab. All parameters are
decayed, as prior (3) says.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch

from dubito._estimator import DubitoRegressor, seed_base
from dubito._validation import (
    check_bool,
    check_choice,
    check_float,
    check_int,
    check_widths,
)
from dubito.early_stopping import (
    DEFAULT_VALIDATION_FRACTION,
    EarlyStopping,
    check_epochs,
    check_patience,
    check_validation_fraction,
    regression_holdout,
    resolve_budget,
)
from dubito.metrics.scoring import nll
from dubito.nn.batched import ACTIVATIONS, BatchedGaussianMLP
from dubito.nn.piecewise_linear import PiecewiseLinearEncoding
from dubito.predictive.mixture import GaussianMixture
from dubito.predictive.student import StudentTMixture, check_df
from dubito.regression._gamma import augment_bias, feature_sums
from dubito.regression.ensemble_io import ensemble_from_state, ensemble_state
from dubito.regression.ensemble_sampling import sample_members
from dubito.regression.ensemble_training import (
    LR_DROPS,
    MemberCheckpoint,
    lr_factor,
    member_generators,
    train_members,
)
from dubito.regression.input_encoding import (
    DEFAULT_INPUT_ENCODING,
    INPUT_ENCODINGS,
    choose_encoding,
)
from dubito.search_space import Choice, Float
from dubito.training_checkpoint import check_resume, estimator_settings
from dubito.variance_scale import AUTO_VARIANCE_SCALINGS, fit_variance_scale, scales_on

__all__ = [
    "LR_DROPS",
    "DeepEnsembleRegressor",
    "MemberCheckpoint",
    "MemberComponents",
    "lr_factor",
    "member_generators",
    "train_members",
]

#: Minimum number of training rows: the target is standardised by its standard deviation,
#: which needs at least 2 rows (and 2 distinct values). Fewer is refused at ``fit``.
MIN_SAMPLES = 2

# Rows per forward chunk at prediction / gamma time: keeps (L, rows, width) float64
# activations under ~128 MB.
_CHUNK_ELEMENTS = 1 << 24

#: nu of the Student-t components (``tail_df``; the class docstring says how it was chosen).
DEFAULT_TAIL_DF = 6.0
#: The hidden widths and the prior precision that ``weight_decay=None`` means (the class docstring
#: says how they were chosen); the paper's net is (128, 64, 32) with a precision of 1.
DEFAULT_HIDDEN = (256, 128, 64)
DEFAULT_PRIOR_PRECISION = 10.0


class MemberComponents(NamedTuple):
    """Per-member predictions in the user's units, each (N, k) for the first k members.

    means: eta_l(x); noise_variances: sigma_l^2(x); gamma_terms: gamma_l ||h_l(x)||^2
    (gamma_l (||h_l(x)||^2 + 1) with ``random_bias``); gammas: (k,) gamma_l in normalised
    units (eq. 36).
    """

    means: np.ndarray
    noise_variances: np.ndarray
    gamma_terms: np.ndarray
    gammas: np.ndarray


class DeepEnsembleRegressor(DubitoRegressor):
    r"""Deep ensemble of heteroscedastic MLPs with the Bayesian correction of Hoffmann & Elster.

    See the module docstring for the method. ``fit`` trains the members together and computes
    ``gammas_`` (eq. 36); ``predict`` (the base's) is the ensemble mean; ``predict_distribution`` returns
    a mixture with equal weights 1/L, component means eta_l(x), component variances
    sigma_l^2(x) + gamma_l ||h_l(x)||^2 (``correction="bayes"``) or sigma_l^2(x) (``"none"``)
    and noise variances sigma_l^2(x), so its ``epistemic_var`` / ``aleatoric_var`` are the
    paper's; all in the user's units. The components are Student-t (`StudentTMixture`, see
    ``tail_df``), or Gaussian as in the paper (`GaussianMixture`) with ``tail_df=None``.

    Parameters (defaults and their sources)
    ----------
    n_members : int, default 5
        L. The paper uses L in {5, 10} on real data (Table 2); 10 on the toys.
    hidden : tuple of int, default (256, 128, 64)
        Hidden widths: the paper's architecture (128, 64, 32) (Sec. 4; p_h = 32), each layer twice
        as wide, p_h = 64. Chosen with ``prior_precision`` on validation rows (below).
    activation : {"relu", "tanh", "gelu", "silu"}, default "relu"
        Not stated in the paper; ReLU is the spec's choice (Sec. 3.1).
    lr : float, default 1e-3
        Adam learning rate; Table 1 (QSAR, Yacht) and toy 2 (Fig. 4, left).
    weight_decay : float or None, default None
        lambda_tab (see ``lambda_convention``). None means ``prior_precision`` / N (N = training
        rows), which under the per-sample convention is a N(0, 1 / prior_precision) prior on
        every weight (lambda_prior = prior_precision). Table 1 uses 1e-2 (QSAR), 1e-3 (Yacht),
        1e-5 (Blog), 1e-4 (Year).
    prior_precision : float > 0, default 10.0
        Used only with ``weight_decay=None``: lambda_tab = prior_precision / N. 1 is the paper's
        simulated-data setting "lambda = 1/N" (Sec. 4.1; its toys pass it), a standard-normal
        prior on every weight in standardised units. The default 10 and the doubled widths were chosen
        together on validation rows, never test rows (benchmarks/ensemble_capacity.py,
        docs/results/ensemble-capacity.md; first 3 standard splits): validation NLL against
        (128, 64, 32) with precision 1, energy 0.615 -> 0.492, concrete 3.086 -> 3.013, yacht
        -0.044 -> -0.085, kin8nm -1.320 -> -1.328, boston 2.359 -> 2.358; wine pays 0.887 -> 0.897.
        An exploration with precision 9 also gave naval -8.447 -> -8.480 and protein 2.509 -> 2.414
        (split 0) and power 2.656 -> 2.664. Precision 3 or 5 suit wine and power but gain less
        in all (summed over the five small sets -0.17 and -0.19 against -0.23); the wider net
        alone changes little but on concrete and power. The README example's coverage is unchanged
        (diabetes splits 0-9: 0.92-1.00, mean 0.978).
    lambda_convention : {"per_sample", "sum"}, default "per_sample"
        How lambda_tab maps to the loss (spec P2). "per_sample": Adam(weight_decay=lambda_tab)
        on the mean NLL, lambda_prior = N lambda_tab. "sum": weight decay lambda_tab / N,
        lambda_prior = lambda_tab.
    batch_size : int, default 64
        Mini-batch size; the paper's toys and Blog (Table 1 uses 8-128). With a held-out
        share the training rows must be at least this many; with
        validation_fraction=0 a larger batch is one full batch.
    epochs : int or "auto", default "auto"
        The cap on epochs; with ``validation_fraction > 0`` each member stops earlier, at its
        best held-out NLL. "auto" (`dubito.early_stopping.resolve_budget`): 500 epochs or
        20,000 optimiser steps, whichever is longer, with held-out rows (yacht's standard splits:
        5,000 epochs of 4 steps; kin8nm and larger: 500); 500 without. Chosen on validation rows
        (docs/results/ensemble-budget.md): against a plain 500 epochs and a 20-epoch patience,
        validation NLL yacht 0.65 -> -0.01, energy 1.07 -> 0.95, boston 2.55 -> 2.51 (first 3
        standard splits), unchanged on concrete and wine, which stop within 30 epochs. The paper
        trains a fixed 40-100 epochs (Table 1; its toys and QSAR 60): its experiments pass
        ``epochs``, ``lr_drop`` and ``validation_fraction=0``.
    lr_drop : {"plateau", "halving", "step", "step_cumulative", "none"}, default "plateau"
        "plateau" (with held-out rows; constant without): when every member has gone ``patience``
        epochs without a better held-out NLL, all members get their best weights back and train on
        from a fresh Adam at a tenth of ``lr`` until they stop again (once; `LR_DROPS`). Chosen on
        validation rows (first 3 standard splits, docs/results/ensemble-budget.md): against a
        constant rate, naval NLL -7.12 -> -8.35 (fit 63 -> 144 s: its second stage runs to the
        cap), energy 0.954 -> 0.943, yacht -0.010 -> -0.019, boston 2.512 -> 2.510, concrete 3.116
        -> 3.113; kin8nm, power and wine within 0.005. The first k members are then not a k-member
        ensemble (the drop waits for every member). The other schedules act over the last 5
        epochs of ``epochs`` (P11): "halving" is Table 1's real-data schedule, "step" the toys'
        single x0.1 drop; the paper's experiments pass them with ``validation_fraction=0``.
    correction : {"bayes", "none"}, default "bayes"
        "bayes" adds gamma_l ||h_l(x)||^2 to each component (the paper's EXT); "none" is the
        conventional deep ensemble (DE). ``gammas_`` are computed either way, and
        ``predict_distribution(X, correction=...)`` can override per call.
    random_bias : bool, default False
        Treat the mean head's bias as random too (spec P4): h -> (h, 1), p_h -> p_h + 1.
        The paper's Theorem 1 randomises only the weights.
    device : str, default "cpu"
        torch device for training and prediction ("cuda" where present); tensors stay there.
    random_state : None, int or numpy RandomState, default None
        Seeds initialisation and mini-batch order; member l's stream depends only on
        (random_state, l), so with an int seed and a fixed ``input_encoding`` the first k members
        of an L-member ensemble equal a k-member ensemble ("auto" may choose differently for k).
    progress : bool, default True
        Show a progress bar over epochs (rich, on stderr).
    checkpoint_dir : str or Path or None, default None
        Folder of the training checkpoint (``deep_ensemble.safetensors``: the members' weights,
        Adam's state, their random streams and the loss curve), written atomically every
        ``checkpoint_every`` epochs (default 10, as `HyperVIRegressor`) and after the last;
        ``fit(X, y, resume=True)`` continues from it to the same numbers as an uninterrupted
        fit (`dubito.training_checkpoint`).
    validation_fraction : float in [0, 0.5), default 0.1
        Share of the training rows held out (the same rows for every member, drawn from their
        own stream of ``random_state``) to stop each member early on its held-out NLL and keep
        its best epoch (`dubito.early_stopping`; 0.1 is scikit-learn's MLPRegressor default).
        They are not refitted. 0: train on every row for ``epochs`` epochs (the paper). The
        defaults cover 0.92-1.00 at 95 % on diabetes splits 0-9 (mean 0.978; 0.977 with the
        former nets, 0.969 with Gaussian components), against 0.64-0.84 (mean 0.76) for the
        paper's 60 fixed epochs on every row.
    patience : int or "auto", default "auto"
        Epochs without a better held-out NLL before a member stops (`dubito.early_stopping`).
        "auto": 20 epochs or 1,000 optimiser steps, whichever is longer (on the standard UCI
        splits' training rows less the held-out tenth: yacht 250 epochs, boston 143, energy 100,
        concrete 72, wine 48; kin8nm and larger 20), from the same validation rows.
    variance_scaling : {"heldout", "auto", "none"}, default "heldout"
        "heldout": after training, every component variance (aleatoric and epistemic alike) is
        multiplied by one c fitted on the held-out rows by their NLL with a log-normal prior
        (`dubito.variance_scale`: sigma scaling, Laves et al. 2020; an ensemble of calibrated
        members is under-confident, Rahaman & Thiery 2021); c = 1 without held-out rows. Naval
        split 0: c = 0.082, coverage@95 0.999 -> 0.986, NLL -6.51 -> -7.06. "auto": c only from 100
        held-out rows up (MC dropout's rule; docs/results/heldout-scale-optimism.md).
    tail_df : float > 2 or None, default 6.0
        nu: each component becomes a Student-t with nu degrees of freedom and the component's
        mean and variance (`dubito.predictive.StudentTMixture`), so only the tails change; the
        held-out scale is fitted under that likelihood. None: the paper's Gaussian components
        (its experiments pass None). A t_nu is a Gaussian whose variance is itself uncertain
        (inverse-gamma), and the UCI sets hold rows no Gaussian head expects: on energy one row
        lies 20 predictive sds from an ensemble's mean. Chosen on validation rows, never test
        rows (benchmarks/ensemble_tails.py, docs/results/ensemble-tails.md, first 3 standard
        splits): NLL Gaussian -> t6 boston 2.510 -> 2.359, concrete 3.113 -> 3.086, energy 0.943
        -> 0.615, wine 0.890 -> 0.887, yacht -0.019 -> -0.044, power 2.704 -> 2.656, kin8nm
        -1.326 -> -1.320; coverage@95 0.90-0.97. Of {30, 10, 6, 4, 3}, t4 is 0.03 lower summed
        over the seven sets (energy) but costs kin8nm 0.014 and wine 0.004 and widens their
        intervals (coverage 0.964, 0.976); t6 is the set-by-set compromise.
    input_encoding : {"auto", "none", "piecewise_linear"}, default "auto"
        What the networks see. "none": the standardised inputs. "piecewise_linear": those plus 16
        quantile-bin ramps per column (`dubito.nn.piecewise_linear`; Gorishniy et al. 2022), so a
        network can bend at every edge with one weight, as a tree splits (on power's validation
        rows a plain MLP ensemble reaches RMSE 3.73, gradient-boosted trees 3.21). "auto": train
        the members both ways and keep the encoding only where its held-out NLL beats the raw
        inputs' by more than one standard error of the paired per-row difference
        (`choose_encoding`; twice the training time; "none" without held-out rows). Smooth targets
        (kin8nm, yacht) do better on the raw inputs, step-like ones (power, energy, concrete) on
        the ramps, so neither alone is a default. Chosen on validation rows (first 3 standard
        splits; benchmarks/ensemble_encoding.py, docs/results/ensemble-encoding.md): against the
        raw inputs "auto" lowers the NLL on power 2.655 -> 2.594, energy 0.492 -> 0.216 and
        concrete 3.013 -> 2.918 and keeps the raw inputs on yacht, kin8nm, wine and boston, where
        the encoding alone costs yacht +0.34 and kin8nm +0.08; the plain lower held-out mean took
        the encoding on yacht split 0 (23 held-out rows; +0.60 there).

    Fitted attributes
    -----------------
    net_ : BatchedGaussianMLP (float64, on ``device``); gammas_ : (L,) gamma_l, normalised
    units; lambda_prior_ : float; weight_decay_ : float (lambda_tab used); n_train_ : int;
    x_mean_, x_scale_ : (p,); y_mean_, y_scale_ : float (columns with zero spread get
    scale 1); loss_curve_ : (epochs, L) epoch-mean training NLL; n_features_in_ (and
    feature_names_in_ for DataFrames); validation_curve_ : (epochs run, L) held-out NLL per
    member (standardised units, constants dropped; (0, L) without a held-out share);
    best_epoch_ : (L,) the epoch (from 1) whose weights each member keeps; stopped_by_ :
    "patience" (every member stopped by the rule) or "cap" (``epochs`` came first, or no
    held-out share). ``n_train_`` counts the rows trained on (held-out rows excluded).
    variance_scale_ : float, the c every predictive variance is multiplied by (1: no scaling).
    epochs_, patience_ : int, the cap and the patience in epochs that the fit used ("auto"
    resolved). input_encoding_ : "none" or "piecewise_linear", the encoding kept; encoding_ : its
    `PiecewiseLinearEncoding` (None for "none"); encoding_scores_ : {encoding: held-out NLL per
    row of each encoding trained (None without held-out rows)}.

    Training runs in float32; gamma and all predictions in float64 (spec P13). Inputs and
    targets are standardised internally with the training mean and (population) standard
    deviation; outputs are in the user's units (variances scale by y_scale_^2).
    """

    #: What `dubito.tune` searches (held-out NLL), about the defaults: Adam's rate a factor 3 either side of 1e-3,
    #: the prior precision from the paper's 1 to 100, the encoding (a trial is one training, not "auto"'s two).
    #: The former space (the rate, lambda_tab, four widths) lost to the untuned defaults on all five small sets;
    #: this one gained on validation rows of boston, concrete, wine (docs/results/ensemble-tuning.md; not energy).
    search_space = {
        "lr": Float(3e-4, 3e-3, log=True),
        "prior_precision": Float(1.0, 100.0, log=True),
        "input_encoding": Choice(["none", "piecewise_linear"]),
    }

    def __init__(
        self,
        n_members=5,
        hidden=DEFAULT_HIDDEN,
        activation="relu",
        lr=1e-3,
        weight_decay=None,
        prior_precision=DEFAULT_PRIOR_PRECISION,
        lambda_convention="per_sample",
        batch_size=64,
        epochs="auto",
        lr_drop="plateau",
        correction="bayes",
        random_bias=False,
        device="cpu",
        random_state=None,
        progress=True,
        checkpoint_dir=None,
        checkpoint_every=10,
        validation_fraction=DEFAULT_VALIDATION_FRACTION,
        patience="auto",
        variance_scaling="heldout",
        tail_df=DEFAULT_TAIL_DF,
        input_encoding=DEFAULT_INPUT_ENCODING,
    ):
        self.n_members = n_members
        self.hidden = hidden
        self.activation = activation
        self.lr = lr
        self.weight_decay = weight_decay
        self.prior_precision = prior_precision
        self.lambda_convention = lambda_convention
        self.batch_size = batch_size
        self.epochs = epochs
        self.lr_drop = lr_drop
        self.correction = correction
        self.random_bias = random_bias
        self.device = device
        self.random_state = random_state
        self.progress = progress
        self.checkpoint_dir = checkpoint_dir
        self.checkpoint_every = checkpoint_every
        self.validation_fraction = validation_fraction
        self.patience = patience
        self.variance_scaling = variance_scaling
        self.tail_df = tail_df
        self.input_encoding = input_encoding

    # ------------------------------------------------------------------ settings
    def _settings(self) -> dict:
        """Validated copies of the constructor settings (scikit-learn validates in fit)."""
        hidden = check_widths(self.hidden)
        if self.weight_decay is not None:
            check_float(self.weight_decay, "weight_decay", strictly_positive=True)
        for name in ("random_bias", "progress"):
            check_bool(getattr(self, name), name)
        return dict(
            n_members=check_int(self.n_members, "n_members", min_value=1),
            hidden=hidden,
            activation=check_choice(self.activation, "activation", ACTIVATIONS),
            lr=check_float(self.lr, "lr", strictly_positive=True),
            prior_precision=check_float(self.prior_precision, "prior_precision", strictly_positive=True),
            lambda_convention=check_choice(self.lambda_convention, "lambda_convention", ("per_sample", "sum")),
            batch_size=check_int(self.batch_size, "batch_size", min_value=1),
            epochs=check_epochs(self.epochs, allow_auto=True),
            lr_drop=check_choice(self.lr_drop, "lr_drop", LR_DROPS),
            correction=check_choice(self.correction, "correction", ("bayes", "none")),
            device=self._device(),
            checkpoint_every=check_int(self.checkpoint_every, "checkpoint_every", min_value=1),
            validation_fraction=check_validation_fraction(self.validation_fraction),
            patience=check_patience(self.patience, allow_auto=True),
            variance_scaling=check_choice(self.variance_scaling, "variance_scaling", AUTO_VARIANCE_SCALINGS),
            tail_df=None if self.tail_df is None else check_df(self.tail_df),
            input_encoding=check_choice(self.input_encoding, "input_encoding", INPUT_ENCODINGS),
        )

    # ------------------------------------------------------------------ fit
    def fit(self, X, y, *, resume: bool = False):
        """Train the ensemble on (X, y) and compute gamma_l (eq. 36). Returns self.

        X: (n, p) numeric array-like or tensor; y: (n,) numeric, not constant;
        n >= 2 (`MIN_SAMPLES`). No NaN/inf. ``resume=True`` continues from the checkpoint in
        ``checkpoint_dir`` (none there: a fresh start) to the same numbers as an uninterrupted
        fit; it needs an int ``random_state``, and a checkpoint written with other settings or
        data is refused with a ValueError that lists what differs.
        """
        s = self._settings()
        check_resume(self, resume)
        X, y = self._validate_fit(X, y, min_samples=MIN_SAMPLES)
        seed = seed_base(self.random_state)
        train_rows, val_rows = regression_holdout(y, s["validation_fraction"], seed, min_samples=MIN_SAMPLES,
                                                  batch_size=s["batch_size"])
        encodings = [s["input_encoding"]]
        if encodings == ["auto"]:
            encodings = ["none", "piecewise_linear"] if val_rows.size else ["none"]
        losses, fitted = {}, {}
        for encoding in encodings:
            self._fit_members(X, y, train_rows, val_rows, encoding, s, seed, resume)
            losses[encoding] = nll(self.predict_distribution(X[val_rows]), y[val_rows]) if val_rows.size else None
            fitted[encoding] = {k: v for k, v in vars(self).items() if k.endswith("_") and not k.startswith("_")}
        vars(self).update(fitted[choose_encoding(losses)])
        self.encoding_scores_ = {k: None if v is None else float(v.mean()) for k, v in losses.items()}
        return self

    def _fit_members(self, X, y, train_rows, val_rows, encoding: str, s: dict, seed: int, resume: bool) -> None:
        """Train the members on ``X[train_rows]`` with the inputs encoded by ``encoding`` ("none" or
        "piecewise_linear"), stopping on ``X[val_rows]``; then eq. (36) and the held-out scale."""
        L = s["n_members"]
        device = s["device"]
        X_fit, y_fit = X[train_rows], y[train_rows]
        n = X_fit.shape[0]
        patience, epochs = resolve_budget(s["patience"], s["epochs"], n, s["batch_size"], held_out=bool(val_rows.size))
        self.patience_, self.epochs_ = patience, epochs

        Xs, ys = self._fit_scaling(X_fit, y_fit)
        self.input_encoding_ = encoding
        self.encoding_ = PiecewiseLinearEncoding.fit(Xs) if encoding == "piecewise_linear" else None
        Xs = self._encode(Xs)

        lam_tab = s["prior_precision"] / n if self.weight_decay is None else float(self.weight_decay)
        if s["lambda_convention"] == "per_sample":
            opt_decay, lam_prior = lam_tab, n * lam_tab
        else:
            opt_decay, lam_prior = lam_tab / n, lam_tab

        gens = member_generators(seed, L)
        net = BatchedGaussianMLP(L, Xs.shape[1], s["hidden"], s["activation"], generators=gens,
                                 dtype=torch.float32, device=device)
        X32 = torch.as_tensor(Xs, dtype=torch.float32).to(device)
        y32 = torch.as_tensor(ys, dtype=torch.float32).to(device)
        validation, stopper = None, None
        if val_rows.size:
            X_val = self._encode((X[val_rows] - self.x_mean_) / self.x_scale_)
            validation = (torch.as_tensor(X_val, dtype=torch.float32).to(device),
                          torch.as_tensor((y[val_rows] - self.y_mean_) / self.y_scale_, dtype=torch.float32).to(device))
            stopper = EarlyStopping(patience, L)
        curve = train_members(
            net, X32, y32, generators=gens, lr=s["lr"], weight_decay=opt_decay,
            batch_size=min(s["batch_size"], n), epochs=epochs, lr_drop=s["lr_drop"],
            progress=bool(self.progress), description=f"deep ensemble, {encoding.replace('none', 'raw')} inputs",
            checkpoint=self._checkpoint(X, y, s["checkpoint_every"], resume, encoding),
            validation=validation, stopper=stopper,
        )
        del X32, y32, validation
        if stopper is None:
            self.validation_curve_ = np.zeros((0, L))
            self.best_epoch_ = np.full(L, curve.shape[0])
            self.stopped_by_ = "cap"
        else:
            self.validation_curve_ = np.asarray(stopper.curve, dtype=np.float64).reshape(-1, L)
            self.best_epoch_ = stopper.best_epoch.copy()
            self.stopped_by_ = "patience" if stopper.done else "cap"

        self.net_ = net.double()
        self.weight_decay_ = lam_tab
        self.lambda_prior_ = float(lam_prior)
        self.loss_curve_ = curve
        self.gammas_ = self._compute_gammas(Xs)
        self.variance_scale_ = 1.0
        self._after_training(Xs, ys, seed)
        if scales_on(s["variance_scaling"], val_rows.size):
            self.variance_scale_ = fit_variance_scale(self.predict_distribution(X[val_rows]), y[val_rows])

    def _encode(self, Xs: np.ndarray) -> np.ndarray:
        """Standardised inputs -> the network's inputs (``encoding_``; unchanged without one)."""
        return Xs if getattr(self, "encoding_", None) is None else self.encoding_.transform(Xs)

    def _standardise(self, X, fitted_attributes=None) -> np.ndarray:
        """X checked, standardised by the training scaling and encoded: the network's inputs."""
        return self._encode(super()._standardise(X, fitted_attributes))

    def _after_training(self, Xs: np.ndarray, ys: np.ndarray, seed: int) -> None:
        """A hook between training (and eq. 36) and the held-out variance scale, on the standardised
        training rows: nothing here; `EnsembleHMCRegressor` samples from each member."""

    def _checkpoint(self, X, y, every: int, resume: bool, encoding: str = "none") -> MemberCheckpoint | None:
        """The training checkpoint (None without ``checkpoint_dir``; one file per input encoding);
        resuming needs every constructor setting but the progress bar and the checkpoint's own, and
        the data, to match."""
        if self.checkpoint_dir is None:
            return None
        name = "deep_ensemble.safetensors" if encoding == "none" else f"deep_ensemble-{encoding}.safetensors"
        return MemberCheckpoint(Path(self.checkpoint_dir) / name,
                                estimator_settings(self, X, y), every, resume)

    @torch.no_grad()
    def _compute_gammas(self, Xs: np.ndarray) -> np.ndarray:
        """Eq. (36) from each member's own h_l and sigma_l^2 on all training rows (P5)."""
        net = self.net_
        sums = torch.zeros(net.n_members, dtype=torch.float64, device=_param_device(net))
        for chunk in self._chunks(Xs, net.n_members):
            _, var, h = net(chunk)
            if self.random_bias:
                h = augment_bias(h)
            sums += feature_sums(h, var)
        p_h = net.n_hidden_out + int(bool(self.random_bias))
        return (p_h / (sums + p_h * self.lambda_prior_)).cpu().numpy()

    def _chunks(self, Xs: np.ndarray, k: int):
        net = self.net_
        width = max((net.n_features, *net.hidden))
        step = max(1, _CHUNK_ELEMENTS // max(1, k * width))
        dev = _param_device(net)
        for start in range(0, Xs.shape[0], step):
            yield torch.as_tensor(Xs[start : start + step], dtype=torch.float64).to(dev)

    # ------------------------------------------------------------------ predict
    def _n_members_arg(self, n_members) -> int:
        L = self.net_.n_members
        if n_members is None:
            return L
        k = check_int(n_members, "n_members", min_value=1)
        if k > L:
            raise ValueError(f"n_members={k} but the ensemble has only {L} members")
        return k

    @torch.no_grad()
    def predict_components(self, X, *, n_members=None) -> MemberComponents:
        """Per-member eta_l(x), sigma_l^2(x) and gamma_l ||h_l(x)||^2 in user units, (N, k).

        ``n_members=k`` uses the first k members (nested ensembles, spec P16).
        """
        Xs = self._standardise(X)
        k = self._n_members_arg(n_members)
        members = slice(0, k)
        gam = torch.as_tensor(self.gammas_[:k], dtype=torch.float64).to(_param_device(self.net_))
        means, noise, terms = [], [], []
        for chunk in self._chunks(Xs, k):
            mean, var, h = self.net_(chunk, members)
            hn2 = (h**2).sum(-1) + (1.0 if self.random_bias else 0.0)
            means.append(mean.T.cpu())
            noise.append(var.T.cpu())
            terms.append((gam[:, None] * hn2).T.cpu())
        s2 = self.y_scale_**2 * self.variance_scale_
        return MemberComponents(
            means=torch.cat(means).numpy() * self.y_scale_ + self.y_mean_,
            noise_variances=torch.cat(noise).numpy() * s2,
            gamma_terms=torch.cat(terms).numpy() * s2,
            gammas=self.gammas_[:k].copy(),
        )

    def predict_distribution(self, X, *, n_members=None, correction=None) -> GaussianMixture | StudentTMixture:
        """Posterior predictive pi(y | x, D) as an equal-weight mixture (user units).

        Components: means eta_l(x); variances sigma_l^2(x) + gamma_l ||h_l(x)||^2
        (``correction="bayes"``, Algorithm 2 in closed form) or sigma_l^2(x) (``"none"``,
        eq. 5); noise variances sigma_l^2(x). Gaussian (`GaussianMixture`) with ``tail_df=None``,
        else Student-t with ``tail_df`` degrees of freedom and those variances (`StudentTMixture`).
        ``n_members=k``: the first k members (P16). ``correction``: overrides the estimator's
        setting for this call.
        """
        correction = self.correction if correction is None else correction
        check_choice(correction, "correction", ("bayes", "none"))
        comp = self.predict_components(X, n_members=n_members)
        var = comp.noise_variances + comp.gamma_terms if correction == "bayes" else comp.noise_variances
        weights = np.full(comp.means.shape[1], 1.0 / comp.means.shape[1])
        if self.tail_df is None:
            return GaussianMixture(weights, comp.means, var, noise_variances=comp.noise_variances)
        return StudentTMixture(weights, comp.means, var, self.tail_df, noise_variances=comp.noise_variances)

    @torch.no_grad()
    def sample_posterior(self, X, n_samples, *, target="y", n_members=None, correction=None,
                         random_state=None) -> np.ndarray:
        """Algorithm 2 of the paper: joint draws over the rows of X, shape (n_samples, N).

        Per draw: l ~ U{1..k}; W ~ N(W_l, gamma_l I) (gamma_l = 0 for ``correction="none"``);
        eta(x) = W h_l(x) + b_l for every row x (``target="eta"``); y ~ N(eta(x), sigma_l^2(x))
        (``target="y"``; with ``tail_df``, eta(x) + sigma_l(x) sqrt((nu - 2) / nu) T, T ~ t_nu).
        User units (`dubito.regression.ensemble_sampling`). Memory grows as n_samples x N x p_h: meant for a
        modest number of query points.
        """
        check_choice(target, "target", ("y", "eta"))
        correction = self.correction if correction is None else correction
        check_choice(correction, "correction", ("bayes", "none"))
        n_samples = check_int(n_samples, "n_samples", min_value=1)
        Xs = self._standardise(X)
        k = self._n_members_arg(n_members)
        rng = np.random.default_rng(random_state)
        Xs = torch.as_tensor(Xs, dtype=torch.float64).to(_param_device(self.net_))
        mean, var, h = self.net_(Xs, slice(0, k))
        if self.random_bias:
            h = augment_bias(h)
        mean, var, h = mean.cpu().numpy(), var.cpu().numpy(), h.cpu().numpy()  # (k,N), (k,N), (k,N,p)
        var = var * self.variance_scale_
        sd_w = np.sqrt(self.gammas_[:k] * self.variance_scale_) if correction == "bayes" else np.zeros(k)
        out = sample_members(mean, var, h, sd_w, n_samples, target=target, tail_df=self.tail_df, rng=rng)
        return out * self.y_scale_ + self.y_mean_

    # ------------------------------------------------------------------ persistence
    def _state(self) -> tuple[dict, dict]:
        """(tensors, settings) for `DubitoEstimator.save` (`dubito.regression.ensemble_io`)."""
        return ensemble_state(self)

    @classmethod
    def _from_state(cls, tensors, settings, *, device=None, where="", **kwargs) -> DeepEnsembleRegressor:
        """The estimator rebuilt by `DubitoEstimator.load` (`dubito.regression.ensemble_io`)."""
        return ensemble_from_state(cls, tensors, settings, device=device)


def _param_device(net: torch.nn.Module) -> torch.device:
    return next(net.parameters()).device
