r"""Implicit copula neural linear model (IC-NLM) of Hoffmann & Klein (2023) as an estimator.

Hoffmann, L. & Klein, N., "Marginally Calibrated Response Distributions for End-to-End
Learning in Autonomous Driving", Ann. Appl. Stat. 17 (2023); spec ``shared/specs/icnlm.md``.

`ImplicitCopulaRegressor` strings together the committed pieces (spec §2, Algorithm 1 as
reconstructed there):

1. `KDEMarginal` on the training y: p_Y, F_Y (step 1, §2.1);
2. pseudo responses z_i = Phi^{-1}(F_Y(y_i)) (§2.2) and an MLP trained on z by MSE and Adam
   (the `_MLPRegressor` trainer of the baselines; inputs standardised internally, z too --
   z is already ~N(0, 1), so that is near the identity), stopped early on the MSE of a held-out
   share of the rows (``validation_fraction``; the marginal and the copula use every row);
3. the features psi(x) in R^p = the output of the network's **last hidden layer after its
   activation** (ReLU by default, as the paper's code [C]: PilotNet's "Dense 10 ReLU");
   p = ``n_features`` = 10 by default (paper). The network's output layer is discarded
   (§2.3). ReLU features are non-negative, so the ridge scale s_i = (1 + tau^2 ||psi_i||^2)^{-1/2}
   depends on x only through ||psi||^2 (spec §7.11). **No feature standardisation** (spec §2.3,
   §7.11: centring or scaling psi changes s_i and hence the model), on every path (fit,
   from_features, wrap);
4. `fit_copula_posterior(psi, z, prior, inference, intercept)` (ridge/horseshoe, VI/NUTS; §2.4-2.8)
   with, by default, a random intercept that the paper does not have (``intercept=True``: s_i =
   (1 + kappa + tau^2 ||psi_i||^2)^{-1/2}, the class docstring says why; ``intercept=False`` is
   the paper's model);
5. prediction (§2.9): Z_0 | x_0 is an equal-weight Gaussian mixture (1/J) sum_j N(m_j, s_j^2)
   (``predictive="plugin"``: J = 1, the paper's estimator; ``"mixture"``: the posterior
   predictive over J = ``n_draws`` draws). Changing variables z = Phi^{-1}(F_Y(y)),
   dz/dy = p_Y(y) / phi(z), gives

       p(y | x_0) = p_Y(y) * [(1/J) sum_j phi((z - m_j) / s_j) / s_j] / phi(z)

   (spec §2.9; the factor is 1/s_j inside the sum, 1/phi(z) outside). It is evaluated in log
   space, log p_Y(y) - log phi(z) + logsumexp_j(log phi((z - m_j)/s_j) - log s_j) - log J,
   so the 0/0 of p_Y / phi(z) in the tails never occurs (spec §7.10).

Tabulation: ``predict_distribution`` reads p(y | x) piecewise linearly (`GridDensity`) on a per-input
y-grid of ``grid_size`` nodes, the images y_k = F_Y^{-1}(Phi(z_k)) of a z-grid over [-z_cap, z_cap]: an
equally spaced core over the conditional's m +- 8 s and sparse tail nodes out to the marginal's
accurate range, so a narrow conditional's far tail keeps a finite density (`dubito.regression.copula_grid`
describes the grid and its accuracy; a ``RuntimeWarning`` when mass beyond z_cap is lost).
``log_density`` gives the exact pointwise log p(y | x) (no grid), e.g. to check normalisation or for
a far-tail log score.

Three ways to get psi (``feature_source_``):

* ``fit(X, y)``: the MLP above ("network"); ``predict_distribution(X)``.
* ``ImplicitCopulaRegressor.from_features(psi, y, **settings)``: the post-hoc path on features
  you computed ("features"); predict with ``predict_distribution(features=psi_new)``.
* ``ImplicitCopulaRegressor.wrap(model, feature_layer=None, X=..., y=..., **settings)``: the
  features of any trained torch model ("wrapped"), read by a hook (`dubito.nn.feature_layer`):
  by default the input of its last ``nn.Linear``, else the output of a named submodule;
  ``predict_distribution(X)`` runs the model (eval mode, no grad). X: arrays, tensors (any
  device) or DataLoaders. The features must be 2-D (batch, p): hook a layer after the flatten.

Wrapped features: ``wrap`` drops the units that are constant on its X (dead ReLUs; warned,
``dead_features_``, and dropped again at prediction); without the random intercept
(``intercept=False``) it appends one constant unit by default (``constant_feature``, the spec's §7.11
optional constant column, a deviation from the paper), which the intercept supersedes;
`dubito.regression.copula_features` gives the reasons and the measurements. Wrap on held-out rows
where you can.

Every path also accepts ``predict_distribution(features=psi)``; ``features(X)`` returns psi for
new inputs (network and wrapped paths), e.g. to fit several posterior variants on one trained
network: ``ImplicitCopulaRegressor.from_features(est.train_features_, y, prior="horseshoe")``
then ``predict_distribution(features=est.features(X_new))`` (identical to fitting the variant
directly with the same ``random_state`` and ``variance_scaling="none"``).

Diagnostics: ``diagnostics_`` follows the shared schema of `dubito.inference.convergence`
(`dubito.regression.copula_diagnostics`). VI: no R-hat; ``stopped_by_cap`` when the ELBO stopping
rule was not met by ``vi_max_iter``. NUTS: split R-hat and bulk ESS of the predictive mean per draw
at up to 20 training rows and of the mean copula log-likelihood per draw; divergences, acceptance.

Persistence: ``save(path)`` / ``load(path, model=None)``, one safetensors file with JSON
metadata (no pickle; `dubito.regression.copula_io`). A wrapped model's torch module is not
saved: pass it again as ``load(path, model=m)``. Only the default or a `KDEMarginal` marginal
can be saved.
"""

from __future__ import annotations

import copy

import numpy as np
import torch

from dubito._validation import (
    check_bool,
    check_choice,
    check_fitted,
    check_float,
    check_int,
)
from dubito.early_stopping import DEFAULT_PATIENCE, DEFAULT_VALIDATION_FRACTION
from dubito.nn.feature_layer import find_feature_layer
from dubito.predictive.grid import GridDensity
from dubito.regression.copula_diagnostics import (
    copula_diagnostics,
    loglik_trace,
    monitor_mean_trace,
)
from dubito.regression.copula_features import (
    check_features,
    check_response,
    kept_units,
    network_dead_units,
    with_constant,
    wrap_arguments,
    wrapped_features,
    wrapped_training_features,
)
from dubito.regression.copula_grid import log_density_z, tabulate, z_cap
from dubito.regression.copula_inference import fit_copula_posterior
from dubito.regression.copula_io import attach_model, copula_from_state, copula_state
from dubito.regression.copula_posterior import (
    INFERENCES,
    NU_DEFAULT,
    PRIORS,
)
from dubito.regression.deterministic import (
    MIN_SAMPLES,
    _MLPRegressor,
    seeds_from,
)
from dubito.regression.marginal import KDEMarginal
from dubito.search_space import Choice, Float
from dubito.variance_scale import VARIANCE_SCALINGS, fit_variance_scale

__all__ = ["ImplicitCopulaRegressor"]

#: ``wrap``'s default for ``constant_feature``: None, a constant unit only for the model without the random
#: intercept (`dubito.regression.copula_features`, "Wrapped features"), which the intercept supersedes.
WRAP_CONSTANT_FEATURE = None


class ImplicitCopulaRegressor(_MLPRegressor):
    r"""Implicit copula neural linear model (Hoffmann & Klein 2023); predictive `GridDensity`.

    See the module docstring for the model, the features, the prediction formula and the grid
    (`dubito.regression.copula_grid`).

    Parameters (defaults and their sources)
    ----------
    prior : {"ridge", "horseshoe"}, default "ridge"  (spec §2.5 [P])
    inference : {"vi", "nuts"}, default "vi"  (the paper's main method)
    network : {"mlp", "cnn"}, default "mlp"
        The feature network of ``fit``: an MLP for tabular X, or "cnn", the PilotNet-style trunk of
        `dubito.nn.pilotnet` before the same dense tail, for flattened images (needs ``image_shape``;
        one scalar input standardisation). For any other torch model use `wrap`.
    image_shape : None or (C, H, W), default None
        (C, H, W) (or (H, W)) of flattened image inputs, for network="cnn" (stored as given, checked
        by fit).
    hidden : tuple of int, default (100, 50)
        Hidden widths *before* the feature layer; the network is hidden + (n_features,) -> 1,
        i.e. PilotNet's dense tail (100, 50, 10) by default (spec §2.2 [C]).
    n_features : int, default 10
        p, the width of the last hidden layer (the paper's 10).
    activation : default "relu" (paper [P/C]; psi is taken after it).
    lr, weight_decay, batch_size, epochs : Adam settings, defaults 2.5e-4, 0, 32, 60 (spec §2.2 [C]);
        ``epochs`` is the cap of validated fitting.
    validation_fraction : float in [0, 0.5), default 0.1
        Share of the training rows held out from the feature network's training to stop it early on
        their MSE of z (`dubito.early_stopping.DEFAULT_VALIDATION_FRACTION`: scikit-learn's
        ``MLPRegressor(validation_fraction=0.1)``); the network keeps the weights of its best epoch.
        The held-out MSE on z is the early-stopping criterion of the MLP baselines
        (`_MLPRegressor._validation_loss`): for a Gaussian fit of z it is a monotone function of
        the held-out NLL, so both stop at the same epoch. The marginal F_Y and the copula
        posterior are fitted on **all** training rows: the marginal is needed first, to compute
        z for the network (also of its held-out rows), and the copula is a linear model on
        p = ``n_features`` features with a shrinkage prior and no epochs to stop -- the held-out
        rows only choose the network's stopping epoch, and leaving them out of the copula would
        cost it 10 % of its data for nothing. 0: the network trains on every row for ``epochs``
        epochs (the paper's protocol; `dubito.experiments.icnlm` passes it).
    patience : int, default 20
        Epochs without a better held-out MSE before the network stops
        (`dubito.early_stopping.DEFAULT_PATIENCE`, where its source is given).
    variance_scaling : {"heldout", "none"}, default "heldout"  (not in the paper)
        "heldout": every latent component variance s_j^2 becomes c s_j^2, c the MAP value on the feature
        network's held-out rows under the log-normal prior of `dubito.variance_scale` (sigma scaling in z,
        exact for the density of y), since the copula learns its spread from residuals of rows the network
        fits closely. c = 1 without held-out rows (``validation_fraction=0``, `from_features`, `wrap`) or
        with "none" (the paper; `dubito.experiments.icnlm` trains without held-out rows).
        Chosen on validation rows (benchmarks/icnlm_variance_scale.py, docs/results/icnlm/variance-scale.md;
        first 3 standard splits): coverage@95 boston 0.963 -> 0.945, concrete 0.885 -> 0.923, energy 0.911 ->
        0.944, yacht 0.970 -> 0.933, kin8nm 0.909 -> 0.944; NLL +0.019, -0.030, +0.026, -0.016, -0.035 (kin8nm
        +-0.008): neutral where c comes from 22-74 held-out rows, lower where 590 rows pin it down.
    nu : ridge hyperprior scale, 2.5 (paper).
    intercept : bool, default True  (not the paper's model, which has none: §3.3; False reproduces it)
        A random intercept in the latent model, z~ = psi'beta + beta_0 + eps with beta_0 ~ N(0, kappa)
        and kappa ~ the ridge's Weibull(1/2, nu) (horseshoe: its own lambda), so that the latent
        noise variance s^2 = 1 / (1 + kappa + tau^2 ||psi||^2) need not come from the norm of the
        features alone (`dubito.regression.copula_posterior`, "Random intercept"). Without it the
        predictive is over-dispersed in z wherever ||psi|| varies between inputs (ReLU features):
        benchmarks/icnlm_intercept.py measures the in-sample marginal calibration gap and the
        validation NLL of both on a skewed synthetic case and UCI splits (docs/results/icnlm/intercept.md).
        With NUTS on data that need no intercept (kappa near 0) the centred beta_0 forms a funnel: 2 and
        3 divergent transitions in two chains of 200 + 500 on the paper model's synthetic data of
        tests/regression/test_copula_inference.py, counted in ``diagnostics_``.
    n_draws : posterior draws kept (VI: from q), default 1000 (the mixture's J).
    vi_max_iter, vi_min_iter, vi_draws, vi_rank : VI (at most 14,000 iterations, M = 50, k = 3: the
        paper's small-data settings; the authors' code ran 12,000-19,000 fixed iterations). The ELBO
        stopping rule may end the run only after ``vi_min_iter`` = 10,000: with 1,000 it stopped near
        3,000 iterations on UCI features while the iterates still drifted, leaving beta means 0.35-1.8
        NUTS posterior sd from NUTS'; after 10,000-12,000 they were within 0.02 sd.
    nuts_samples, nuts_warmup, nuts_chains : NUTS, default 1000, 1000, 2.
    predictive : {"plugin", "mixture"}, default "plugin"  (named so as not to shadow ``predict``)
        "plugin": the paper's estimator (J = 1; the spec §2.9 default). "mixture": the exact
        posterior predictive over the J = n_draws draws (spec §2.9 [D]); it costs N x grid_size
        x J Gaussian terms: 9 s per 1,000 inputs at J = 1000 on one CPU thread (0.3 s plug-in).
    theta_point : {"median", "mean"}, default "median" (VI plug-in, spec §7.6).
    grid_size : int, default 512  (y-grid nodes per input, >= 16)
        Per input: an equally spaced core over m +- 8 s in z with G - 2 (G // 16) nodes (448), and
        G // 16 (32) geometric tail nodes per side out to z_cap; a side whose core reaches the
        cap gives its tail nodes to the core (`dubito.regression.copula_grid`).
    marginal : None or an object, default None
        None: ``KDEMarginal()`` (defaults). An object with a ``fit`` method (e.g. a configured
        `KDEMarginal`) is copied and fitted on y; an object without one is used as given
        (already fitted or exact), it must provide ``pseudo_response``,
        ``inverse_pseudo_response`` and ``log_pdf`` (e.g. an exact Phi marginal in tests).
    device : str, default "cpu"  (network and posterior)
    random_state : None or int; progress : bool, default True.

    Fitted attributes
    -----------------
    marginal_ : the fitted marginal; posterior_ : `CopulaPosterior`; n_features_ : p; variance_scale_ : c
    (1: unscaled); feature_source_ : "network" | "features" | "wrapped"; train_features_ : (n, p) psi of the
    training rows (all of them, also the network's held-out rows); n_train_ : the rows of the
    marginal and the copula (all training rows); net_ (network path); model_, feature_layer_
    (its name), feature_where_ ("input": of the last nn.Linear; "output": of the named module),
    layer_width_ (its units), constant_feature_ (c, 0 for none) (wrapped path); loss_curve_ : (epochs run,) the network's epoch-mean training MSE on
    standardised z; validation_curve_ : (epochs run,) its held-out MSE (empty with
    ``validation_fraction=0``); best_epoch_ : the epoch (from 1) whose weights are kept;
    stopped_by_ : "patience" (the rule) or "cap" (network path; files written before validated
    fitting load as "cap" with no curve);
    dead_features_ : indices of constant feature columns on the training rows (network path:
    kept, a zero column contributes nothing; wrapped path: dropped, see the module docstring); loglik_trace_ : (chains,
    draws) mean copula log-likelihood per NUTS draw (None for VI); diagnostics_ : dict (module
    docstring, `dubito.inference.convergence`).
    """

    _description = "IC-NLM feature network"

    #: What `dubito.tune` searches: the feature network's training and shape, as for the MLP
    #: baselines (the copula's own prior settings are the paper's and stay fixed).
    search_space = {
        # Adam's rate around the benchmark's 2.5e-4 (spec §2.2 [C]) up to the 1e-2 of fast small-data fits
        "lr": Float(1e-4, 1e-2, log=True),
        # coupled L2 from none (the paper) to strong: it shapes the features psi the copula sees
        "weight_decay": Float(1e-7, 1e-2, log=True),
        # p: fewer features than the paper's 10 for small n (p <= n), more for large data sets
        "n_features": Choice([5, 10, 20]),
        # widths before the feature layer: one layer of 50 or 100, or PilotNet's dense tail (the default)
        "hidden": Choice([(50,), (100,), (100, 50)]),
    }

    def __init__(self, prior="ridge", inference="vi", network="mlp", image_shape=None, hidden=(100, 50),
                 n_features=10, activation="relu", lr=2.5e-4, weight_decay=0.0, batch_size=32, epochs=60,
                 nu=NU_DEFAULT, intercept=True, n_draws=1000, vi_max_iter=14_000, vi_min_iter=10_000, vi_draws=50, vi_rank=3,
                 nuts_samples=1000, nuts_warmup=1000, nuts_chains=2, predictive="plugin", theta_point="median",
                 grid_size=512, marginal=None, device="cpu", random_state=None, progress=True,
                 validation_fraction=DEFAULT_VALIDATION_FRACTION, patience=DEFAULT_PATIENCE,
                 variance_scaling="heldout"):
        self.prior = prior
        self.inference = inference
        self.network = network
        self.image_shape = image_shape
        self.hidden = hidden
        self.n_features = n_features
        self.activation = activation
        self.lr = lr
        self.weight_decay = weight_decay
        self.batch_size = batch_size
        self.epochs = epochs
        self.nu = nu
        self.intercept = intercept
        self.n_draws = n_draws
        self.vi_max_iter = vi_max_iter
        self.vi_min_iter = vi_min_iter
        self.vi_draws = vi_draws
        self.vi_rank = vi_rank
        self.nuts_samples = nuts_samples
        self.nuts_warmup = nuts_warmup
        self.nuts_chains = nuts_chains
        self.predictive = predictive
        self.theta_point = theta_point
        self.grid_size = grid_size
        self.marginal = marginal
        self.device = device
        self.random_state = random_state
        self.progress = progress
        self.validation_fraction = validation_fraction
        self.patience = patience
        self.variance_scaling = variance_scaling

    # -------------------------------------------------------------- settings
    def _copula_settings(self) -> dict:
        check_bool(self.progress, "progress")
        return dict(
            prior=check_choice(self.prior, "prior", PRIORS),
            inference=check_choice(self.inference, "inference", INFERENCES),
            nu=check_float(self.nu, "nu", strictly_positive=True),
            intercept=check_bool(self.intercept, "intercept"),
            n_draws=check_int(self.n_draws, "n_draws", min_value=1),
            vi_max_iter=check_int(self.vi_max_iter, "vi_max_iter", min_value=1),
            vi_min_iter=check_int(self.vi_min_iter, "vi_min_iter", min_value=1),
            vi_draws=check_int(self.vi_draws, "vi_draws", min_value=1),
            vi_rank=check_int(self.vi_rank, "vi_rank", min_value=1),
            nuts_samples=check_int(self.nuts_samples, "nuts_samples", min_value=1),
            nuts_warmup=check_int(self.nuts_warmup, "nuts_warmup", min_value=0),
            nuts_chains=check_int(self.nuts_chains, "nuts_chains", min_value=1),
            predictive=check_choice(self.predictive, "predictive", ("mixture", "plugin")),
            theta_point=check_choice(self.theta_point, "theta_point", ("median", "mean")),
            grid_size=check_int(self.grid_size, "grid_size", min_value=16),
            variance_scaling=check_choice(self.variance_scaling, "variance_scaling", VARIANCE_SCALINGS),
        )

    def _extra_settings(self) -> dict:
        check_choice(self.network, "network", ("mlp", "cnn"))
        return dict(n_features=check_int(self.n_features, "n_features", min_value=1))

    def _settings_hidden(self) -> tuple[int, ...]:
        return (*super()._settings_hidden(), int(self.n_features))

    # -------------------------------------------------------------- network (step 2)
    def _build_net(self, s, n_features, generator=None, dtype=torch.float32):
        # The paper's head: a linear output with bias ("Dense 1 linear", spec §2.2 [C]), discarded
        # after training. A bias-free head (so that psi'w alone fits z) changed nothing measurable
        # (in-sample marginal-calibration gap 0.070/0.058/0.071 vs 0.068/0.051/0.072, seeds 0-2,
        # the end-to-end test's data), and on energy split 0 it was worse (IC-NLM MAE 1.30 against
        # 0.98; docs/results/icnlm.md notes), so the paper's is kept.
        # Widths hidden + (n_features,) come from _settings_hidden; "cnn" puts PilotNet's trunk first.
        return self._make_net(s, n_features, 1, 0.0, generator=generator, dtype=dtype)

    def _loss(self, net, xb, yb, generator):
        return ((net(xb)[:, 0] - yb) ** 2).mean()

    @torch.no_grad()
    def _network_features(self, Xs: np.ndarray) -> np.ndarray:
        out = [self.net_.features(chunk).cpu() for chunk in self._chunks(Xs)]
        return torch.cat(out).numpy().astype(np.float64)

    # -------------------------------------------------------------- fitting
    def fit(self, X, y):
        """IC-NLM on tabular X: KDE marginal of y, MLP on z, features psi, copula posterior.

        X: (n, d) numeric; y: (n,) numeric with at least ``min_distinct`` (10) distinct values.
        """
        cs = self._copula_settings()
        self._settings()
        X, y = self._validate_fit(X, y, min_samples=MIN_SAMPLES)
        p = check_int(self.n_features, "n_features", min_value=1)
        if p > X.shape[0]:
            raise ValueError(
                f"n_features = {p} exceeds the n = {X.shape[0]} training rows (p > n): the linear copula model is "
                "not identified; lower n_features or use more data"
            )
        marginal = self._fit_marginal(y)  # on every training row (class docstring, validation_fraction)
        z = marginal.pseudo_response(y)
        # sets net_, x_mean_, x_scale_, loss_curve_, validation_curve_, best_epoch_, stopped_by_:
        # trained on the standardised z of the rows not held out, stopped early on the held-out ones
        names = getattr(self, "feature_names_in_", None)
        self._fit_net(X, z)  # validates the numpy X again, which drops the names of a DataFrame's columns
        if names is not None:
            self.feature_names_in_ = names
        self.n_train_ = int(X.shape[0])  # the marginal's and the copula's rows: all of them
        psi = self._network_features((X - self.x_mean_) / self.x_scale_)
        self.dead_features_ = network_dead_units(psi, p)
        self.feature_source_ = "network"
        self._fit_posterior(psi, z, marginal, cs)
        held_out = self.__dict__.pop("_held_out", None)
        if cs["variance_scaling"] == "heldout" and held_out is not None:  # c (class docstring), from Z | x
            zp, _ = self._z_prediction(self._network_features(held_out[0]))
            self.variance_scale_ = fit_variance_scale(zp.as_mixture(), held_out[1])
        return self

    def _after_training(self, Xs: np.ndarray, z: np.ndarray) -> None:
        # the network's held-out rows (standardised inputs, their z), kept until the copula is fitted
        self._held_out = (Xs, z) if len(self.validation_curve_) else None

    @classmethod
    def from_features(cls, psi, y, **settings) -> ImplicitCopulaRegressor:
        """Post-hoc IC-NLM on given training features psi (n, p) and responses y (n,).

        Fits the marginal and the copula posterior only (no network; the network settings are
        ignored). Predict with ``predict_distribution(features=psi_new)``. psi is used as given
        (no intercept, no standardisation); NaN/inf or constant columns and p > n are errors.
        """
        est = cls(**settings)
        return est._fit_from_features(psi, y, "features")

    @classmethod
    def wrap(cls, model: torch.nn.Module, feature_layer=None, X=None, y=None, *,
             constant_feature: bool | None = WRAP_CONSTANT_FEATURE, **settings) -> ImplicitCopulaRegressor:
        """IC-NLM on the features of a trained torch ``model`` (the "wrapped" source).

        Also callable with the data first, ``wrap(model, X, y)`` / ``wrap(model, X, y, feature_layer)``
        (the order of `LastLayerLaplaceRegressor.wrap`).

        ``feature_layer`` (`dubito.nn.feature_layer.find_feature_layer`): None (default) = the input
        of the model's last ``nn.Linear``, its last hidden layer; a name from
        ``model.named_modules()`` (e.g. "trunk.5") or a submodule = that module's output. psi is
        read by a hook with the model in eval mode, without gradients, and must be (batch, p).
        X: a numpy array, a torch tensor (any device) or a ``DataLoader`` of (x, y) batches (then
        y is None); floating inputs are cast to the model's dtype and moved to its device.

        Constant feature units on X (dead ReLUs) are dropped with a ``RuntimeWarning``: they tell
        nothing about y, and a unit dead on X but alive on a new input would meet a coefficient no
        data informed (the paper's model has no constant column, spec §2.3; the one constant unit
        below is a deliberate choice). Their indices are ``dead_features_``; the same units are
        dropped at prediction and after `load`.

        ``constant_feature`` (default None: True when ``intercept=False``, else False): append one
        constant unit c = the training rows' root-mean-square ||psi|| to psi (``constant_feature_`` =
        c, 0 without), the bias unit of the network's own head f(x) = w'psi + b; a deviation from the
        paper, which the spec allows as an option (§7.11). See `dubito.regression.copula_features`,
        "Wrapped features", for why and the measurements. The random intercept (``intercept=True``,
        the default) does the same with its own learnt variance instead of tau^2 c^2, so the
        constant unit is left out beside it.

        Fit on rows the network was **not** trained on (e.g. its validation rows) where you can:
        the spread of the copula is learnt from the residuals on X, and those of the training rows
        are too small for a network that fits them closely (`dubito.regression.copula_features`).

        The model is kept by reference (``model_``) and run again by ``predict_distribution(X)``;
        its own head is not used (IC-NLM trains the network on z, spec §2.2; a network trained on
        y gives features that work too, a post-hoc use the paper does not study).
        """
        feature_layer, X, y = wrap_arguments(feature_layer, X, y)
        name, _, where = find_feature_layer(model, feature_layer)
        est = cls(**settings)
        cs = est._copula_settings()  # bad settings fail before the forward passes
        constant = not cs["intercept"] if constant_feature is None else check_bool(constant_feature, "constant_feature")
        psi, y, dead = wrapped_training_features(model, feature_layer, name, X, y)
        est.model_ = model
        est.feature_layer_ = name
        est.feature_where_ = where
        est.layer_width_ = int(psi.shape[1])
        est.dead_features_ = dead.astype(np.intp)
        psi = psi[:, kept_units(est.layer_width_, est.dead_features_)]
        est.constant_feature_ = float(np.sqrt(np.mean(np.sum(psi * psi, axis=1)))) if constant else 0.0
        return est._fit_from_features(with_constant(psi, est.constant_feature_), y, "wrapped")

    def _fit_from_features(self, psi, y, source: str):
        cs = self._copula_settings()
        constant = getattr(self, "constant_feature_", 0.0) != 0 and source == "wrapped"
        psi = np.concatenate([check_features(psi[:, :-1], "psi", training=True), psi[:, -1:]], axis=1) if constant \
            else check_features(psi, "psi", training=True)
        y = check_response(y, psi.shape[0])
        marginal = self._fit_marginal(y)
        z = marginal.pseudo_response(y)
        if source == "features":  # X is psi here; a wrapped model's input has no fixed width
            self.n_features_in_ = int(psi.shape[1])
        self.feature_source_ = source
        self.n_train_ = int(psi.shape[0])
        return self._fit_posterior(psi, z, marginal, cs)

    def _fit_marginal(self, y: np.ndarray):
        m = self.marginal
        if m is None:
            m = KDEMarginal()
        elif hasattr(m, "fit"):
            m = copy.deepcopy(m)
        else:
            for attr in ("pseudo_response", "inverse_pseudo_response", "log_pdf"):
                if not callable(getattr(m, attr, None)):
                    raise ValueError(f"marginal must be None, a KDEMarginal or an object with {attr}(); got {m!r}")
            return m
        return m.fit(y)  # a response with too few distinct values raises here (KDEMarginal's message)

    def _fit_posterior(self, psi, z, marginal, cs):
        seed = seeds_from(self.random_state, 5)[4]
        self.variance_scale_ = 1.0  # fit's network path then fits it on the held-out rows
        self.marginal_ = marginal
        self.train_features_ = psi
        self.n_features_ = int(psi.shape[1])
        # fresh C-contiguous torch copies: the posterior must not depend, to the last bit, on the caller's
        # array layout (BLAS rounding depends on strides and alignment)
        dev = torch.device(self.device)
        psi_t = torch.tensor(np.ascontiguousarray(psi), dtype=torch.float64, device=dev)
        z_t = torch.tensor(np.ascontiguousarray(z), dtype=torch.float64, device=dev)
        self.posterior_ = fit_copula_posterior(
            psi_t, z_t, prior=cs["prior"], inference=cs["inference"], nu=cs["nu"], intercept=cs["intercept"],
            n_draws=cs["n_draws"],
            rank=cs["vi_rank"], vi_draws=cs["vi_draws"], max_iter=cs["vi_max_iter"],
            min_iter=min(cs["vi_min_iter"], cs["vi_max_iter"]), num_samples=cs["nuts_samples"],
            warmup_steps=cs["nuts_warmup"], num_chains=cs["nuts_chains"], seed=seed, device=self.device,
            progress=self.progress,
        )
        self.loglik_trace_ = loglik_trace(self.posterior_, psi_t, z_t, dev)  # None for VI
        self.diagnostics_ = self._diagnostics()
        return self

    # -------------------------------------------------------------- diagnostics
    def _monitor_mean_trace(self):
        """(rows, trace): up to 20 training rows and E[Y | x, theta_j] there per NUTS draw, (chains,
        draws, rows), in y units; (rows, None) for VI (`copula_diagnostics.monitor_mean_trace`)."""
        return monitor_mean_trace(self.posterior_, self.train_features_, self.marginal_)

    def _diagnostics(self) -> dict:
        """``diagnostics_`` (`dubito.regression.copula_diagnostics`)."""
        return copula_diagnostics(self.posterior_, *self._monitor_mean_trace(), getattr(self, "loglik_trace_", None))

    # -------------------------------------------------------------- features at prediction
    def features(self, X) -> np.ndarray:
        """psi(x), the (N, p) float64 features of inputs X: the feature network's last hidden layer
        (``fit``) or the hooked layer of the wrapped model (``wrap``). A model fitted by
        ``from_features`` has no network: ValueError."""
        check_fitted(self, ["posterior_"])
        if self.feature_source_ == "features":
            raise ValueError(
                "this model was fitted from features (from_features), it has no network to compute them: "
                "compute psi with your own feature extractor"
            )
        if X is None:
            raise ValueError("X must be the inputs (n, ...) whose features to compute, got None")
        if self.feature_source_ == "wrapped":
            return check_features(wrapped_features(self, X), "features", p=self.n_features_)
        return self._network_features(self._standardise(X))

    def _features(self, X, features) -> np.ndarray:
        check_fitted(self, ["posterior_"])
        if (X is None) == (features is None):
            raise ValueError("pass exactly one of X (inputs) or features= (psi, shape (N, p))")
        if features is not None:
            return check_features(features, "features", p=self.n_features_)
        if self.feature_source_ == "features":
            raise ValueError(
                "this model was fitted from features (from_features), it has no network to compute them: "
                "pass features=psi_new"
            )
        return self.features(X)

    # -------------------------------------------------------------- prediction
    def _z_prediction(self, psi):
        cs = self._copula_settings()
        # a fresh C-contiguous torch copy: BLAS rounding depends on strides and alignment, and the same
        # psi must give bit-identical predictions whether it came from X, features= or a loaded file
        psi_t = torch.tensor(np.ascontiguousarray(psi), dtype=torch.float64, device=self.posterior_.theta.device)
        zp = self.posterior_.predict_z(psi_t, kind=cs["predictive"], theta_point=cs["theta_point"])
        return (zp if self.variance_scale_ == 1.0 else zp.scaled(self.variance_scale_)), cs

    def _z_cap(self) -> float:
        """The grid's half-width in z for the fitted marginal (`copula_grid.z_cap`)."""
        return z_cap(self.marginal_)

    def log_density(self, y, X=None, *, features=None) -> np.ndarray:
        """Exact log p(y | x) (no grid) at y of shape (N,) or (N, K) for N inputs; -inf where
        p_Y(y) = 0 (outside the marginal's support)."""
        psi = self._features(X, features)
        zp, _ = self._z_prediction(psi)
        y = np.asarray(y, dtype=np.float64)
        one = y.ndim == 1
        y2 = y[:, None] if one else y
        if y2.shape[0] != psi.shape[0]:
            raise ValueError(f"y has {y2.shape[0]} rows but there are {psi.shape[0]} inputs")
        with np.errstate(divide="ignore"):
            out = log_density_z(self.marginal_, y2, zp.loc, zp.scale, self.device)
        return out[:, 0] if one else out

    def predict_distribution(self, X=None, *, features=None) -> GridDensity:
        """The predictive density p(y | x) per input, tabulated on a per-input y-grid.

        Pass X (network / wrapped models) or ``features=psi`` (N, p) (any model). See the module
        docstring for the formula, and `dubito.regression.copula_grid` for the grid.
        """
        psi = self._features(X, features)
        zp, cs = self._z_prediction(psi)
        return tabulate(self.marginal_, zp.loc, zp.scale, cs["grid_size"], self.device)

    def predict(self, X=None, *, features=None) -> np.ndarray:
        """The predictive mean E[Y | x] (of the tabulated density), shape (N,)."""
        return self.predict_distribution(X, features=features).mean

    # -------------------------------------------------------------- persistence
    def _state(self) -> tuple[dict[str, torch.Tensor], dict]:
        """(tensors, settings) for `DubitoEstimator.save` (`dubito.regression.copula_io`). A
        wrapped model's torch module is not written; a marginal other than None / `KDEMarginal`
        cannot be saved (ValueError)."""
        return copula_state(self)

    @classmethod
    def load(cls, path, *, device=None, model=None) -> ImplicitCopulaRegressor:
        """`DubitoEstimator.load` with the wrapped model's torch module (`_from_state`). ``model``
        is checked first, so that a non-Module is a TypeError rather than a "corrupted file"."""
        if model is not None and not isinstance(model, torch.nn.Module):
            raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
        return super().load(path, device=device, model=model)

    @classmethod
    def _from_state(cls, tensors: dict, settings: dict, *, device=None, where: str = "",
                    model=None) -> ImplicitCopulaRegressor:
        """The estimator rebuilt by ``load(path, device=None, model=None)``.

        A model made by `wrap` needs its torch module again: ``load(path, model=m)`` (the saved
        ``feature_layer_`` must name a submodule of m). A corrupted, truncated or foreign file
        raises ``ValueError``.
        """
        est = copula_from_state(cls, tensors, settings, device=device, where=where)
        attach_model(est, model, where)
        return est
