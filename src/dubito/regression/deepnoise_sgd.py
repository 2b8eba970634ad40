r"""Frequentist DeepNoise ("DeepNoise-SGD"): the B-DeepNoise network fitted by a Monte-Carlo
mixture likelihood and Adam (spec §2.3 step 1 [C]; pitfall 15).

The model is the one of :mod:`dubito.regression.deepnoise_model` (spec §1.1): for l = 0..L,
v_l = u_l W_l + γ_l + ε_l, ε_l ~ N(0, diag τ²_l), u_{l+1} = h(v_l) + δ_l, δ_l ~ N(0, diag σ²_l),
y = v_L. Here W, γ and the log-scales log τ_l, log σ_l are point estimates. The loss of a
mini-batch is the Monte-Carlo mixture negative log-likelihood

    −(1/B) Σ_i log (1/S) Σ_s N(y_i; h(v^{(s)}_{L-1,i}) W_L + γ_L, τ²_L + Σ_k W_L[k]² σ²_{L-1,k}),

with S noise draws propagated up to h(v_{L-1}) and the last layer (ε_L and δ_{L-1}) integrated
exactly, computed with logsumexp (spec §2.3 step 1, §3.2). It is the estimator that starts the
chains of `DeepNoiseRegressor` (``init="sgd"``) and a cheap standalone method.

Initialisation [R]: W_l ~ N(0, 1/K_{l-1}) and γ_l = 0 as in ``random_init`` (spec §2.3 [R]);
σ_l = exp(N(0, 1)) per unit as in [C] (spec §2.3 step 1), τ_l likewise for the hidden layers,
τ_L = 1 (the standardised target's sd). Training runs in float32 (as the other MLP baselines),
prediction and `params_` in float64. Inputs and target are standardised with the training mean
and (population) sd; a constant input column gets sd := 1 ([C] standardize). No early stopping:
[C]'s stopping rule is inert for regression and it trains to the last epoch (spec §2.3).
"""

from __future__ import annotations

import math

import numpy as np
import torch
from sklearn.base import BaseEstimator, RegressorMixin

from dubito import io
from dubito._standardise import standardise_fit
from dubito._validation import (
    check_bool,
    check_choice,
    check_fitted,
    check_float,
    check_int,
    check_widths,
    validate_fit_data,
    validate_predict_data,
)
from dubito.early_stopping import (
    DEFAULT_VALIDATION_FRACTION,
    STOPPED_BY,
    EarlyStopping,
    best_copy,
    check_patience,
    check_training_target,
    check_validation_fraction,
    copy_best_members,
    holdout_split,
)
from dubito.predictive.mixture import GaussianMixture
from dubito.regression.deepnoise_model import (
    DeepNoiseParams,
    DeepNoisePriors,
    piecewise_activation,
)
from dubito.regression.ensemble import _check_device, member_generators

__all__ = ["DeepNoiseNet", "DeepNoiseSGDRegressor", "train_epoch"]

#: Minimum number of training rows (the target is standardised by its sd).
MIN_SAMPLES = 2

#: (draws x rows x width) elements per prediction chunk: 2**24 float64 = 128 MB.
_CHUNK_ELEMENTS = 1 << 24

_LOG_2PI = math.log(2.0 * math.pi)


def _hardtanh(t):
    return torch.clamp(t, -1.0, 1.0)


def _bounded_relu(t):
    return torch.clamp(t, 0.0, 1.0)


def _leaky_relu(t):
    return torch.nn.functional.leaky_relu(t, 0.1)


def _native(act):
    """The same function as ``act`` through one fused torch op where there is one (training
    speed: the generic piecewise form builds J full-size temporaries per call). Module-level
    functions, not lambdas, so a fitted network pickles (scikit-learn's clone and joblib)."""
    native = {"hardtanh": _hardtanh, "bounded_relu": _bounded_relu, "relu": torch.relu, "leaky_relu": _leaky_relu}
    fn = native.get(act.name)
    if fn is None or act != piecewise_activation(act.name):
        return act
    return fn


class DeepNoiseNet(torch.nn.Module):
    """Point-estimate DeepNoise network: W_l, γ_l, log τ_l (l = 0..L), log σ_l (l = 0..L-1)."""

    def __init__(self, widths, activation, generator: torch.Generator, *, dtype=torch.float32, device="cpu"):
        super().__init__()
        self.widths = tuple(int(w) for w in widths)
        self.act = piecewise_activation(activation)
        self._h = _native(self.act)
        L = len(self.widths) - 2
        kw = dict(generator=generator, dtype=torch.float64)
        W, g, lt, ls = [], [], [], []
        for l in range(L + 1):
            k_in, k_out = self.widths[l], self.widths[l + 1]
            W.append(torch.randn(k_in, k_out, **kw) / math.sqrt(k_in))
            g.append(torch.zeros(k_out, dtype=torch.float64))
            lt.append(torch.randn(k_out, **kw) if l < L else torch.zeros(k_out, dtype=torch.float64))
            if l < L:
                ls.append(torch.randn(k_out, **kw))
        P = torch.nn.Parameter
        self.W = torch.nn.ParameterList([P(t) for t in W])
        self.gamma = torch.nn.ParameterList([P(t) for t in g])
        self.log_tau = torch.nn.ParameterList([P(t) for t in lt])
        self.log_sigma = torch.nn.ParameterList([P(t) for t in ls])
        self.to(dtype=dtype, device=device)

    @property
    def n_hidden(self) -> int:
        return len(self.W) - 1

    def moments(self, X: torch.Tensor, n_draws: int, generator: torch.Generator, *, shared: bool = False):
        """(mean (S, N), var ()) of y given S noise draws up to h(v_{L-1}) (spec §3.2).

        Draw order per hidden layer l: ε_l (S, N, K_l), then δ_l for l < L-1 (δ_{L-1} is
        integrated out in the exact last layer). ``shared``: one draw (S, 1, K_l) for every row
        (common random numbers), so a row's S components do not depend on the other rows or
        their order; each row's mixture is still an MC estimate over S independent draws."""
        L = self.n_hidden
        S, N = int(n_draws), X.shape[0]
        rows = 1 if shared else N
        u = X  # (N, P): layer 0's affine map is shared by all draws, computed once
        for l in range(L):
            v = u @ self.W[l] + self.gamma[l]
            eps = torch.randn((S, rows, v.shape[-1]), generator=generator, dtype=v.dtype, device=v.device)
            u = self._h(torch.addcmul(v, torch.exp(self.log_tau[l]), eps))  # (S, N, K_l)
            if l < L - 1:
                delta = torch.randn((S, rows, u.shape[-1]), generator=generator, dtype=u.dtype, device=u.device)
                u = torch.addcmul(u, torch.exp(self.log_sigma[l]), delta)
        mean = (u @ self.W[L] + self.gamma[L])[..., 0].expand(S, N)
        var = torch.exp(2.0 * self.log_tau[L][0])
        if L > 0:
            var = var + (self.W[L][:, 0] ** 2 * torch.exp(2.0 * self.log_sigma[L - 1])).sum()
        return mean, var

    def mixture_nll(self, X: torch.Tensor, y: torch.Tensor, n_draws: int, generator) -> torch.Tensor:
        """−mean_i log (1/S) Σ_s N(y_i; mean_si, var) (spec §2.3 step 1), logsumexp over s."""
        mean, var = self.moments(X, n_draws, generator)
        logp = -0.5 * ((y - mean) ** 2 / var + torch.log(var) + _LOG_2PI)
        return -(torch.logsumexp(logp, dim=0) - math.log(mean.shape[0])).mean()

    @torch.no_grad()
    def to_params(self, rho2_floor: float) -> DeepNoiseParams:
        """The state in `DeepNoiseParams` form (float64, standardised units): τ² = exp(2 log τ),
        σ² = exp(2 log σ), ρ² = max(W², floor), ξ² = max(γ², floor) (ρ = |β|, ξ = |γ| [C],
        spec §2.3 step 2)."""
        d = lambda t: t.detach().to(torch.float64).clone()  # noqa: E731
        W = [d(w) for w in self.W]
        gamma = [d(g) for g in self.gamma]
        return DeepNoiseParams(
            W=W,
            gamma=gamma,
            tau2=[torch.exp(2.0 * d(t)) for t in self.log_tau],
            sigma2=[torch.exp(2.0 * d(s)) for s in self.log_sigma],
            rho2=[torch.clamp(w**2, min=rho2_floor) for w in W],
            xi2=[torch.clamp(g**2, min=rho2_floor) for g in gamma],
        )


def _progress_bar(progress: bool):
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    columns = (
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    return Progress(*columns, console=Console(stderr=True), disable=not progress)


def train_epoch(net: DeepNoiseNet, opt, X: torch.Tensor, y: torch.Tensor, batch: int, n_draws: int,
                generator: torch.Generator) -> float:
    """One epoch of Adam steps on the MC mixture NLL (`DeepNoiseNet.mixture_nll`, ``n_draws``
    noise draws per row) over a random permutation of the rows in batches; returns the epoch's
    row-weighted mean loss."""
    n = X.shape[0]
    perm = torch.randperm(n, generator=generator, device=X.device)
    total = 0.0
    for start in range(0, n, batch):
        idx = perm[start : start + batch]
        loss = net.mixture_nll(X[idx], y[idx], n_draws, generator)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        total += float(loss.detach()) * idx.shape[0]
    return total / n


class DeepNoiseSGDRegressor(RegressorMixin, BaseEstimator):
    r"""Frequentist DeepNoise trained by the Monte-Carlo mixture NLL and Adam (spec §2.3 step 1).

    ``predict_distribution`` returns an equal-weight `GaussianMixture` whose components are
    noise draws: mean h(v^{(s)}_{L-1}) W_L + γ_L and variance τ²_L + Σ_k W_L[k]² σ²_{L-1,k}, in
    the user's units. ``params_()`` gives the fitted state as `DeepNoiseParams` in standardised
    units, to start a Gibbs chain from (spec §2.3 step 2).

    Parameters (defaults and their sources)
    ----------
    hidden : tuple of int, default (50, 50, 50, 50)
        Hidden widths; 4 x 50 in all experiments of [P] (spec §1.1).
    activation : str, default "hardtanh"
        A piecewise-linear activation (spec §1.2): "hardtanh" [P], "relu", "leaky_relu",
        "bounded_relu". Smooth ones are refused (the Gibbs sampler needs piecewise linear).
    n_noise_samples : int, default 100
        S, noise draws per row in the loss and components at prediction; 100 [C].
    lr : float, default 1e-3
        Adam learning rate [C].
    batch_size : int, default 1000
        Mini-batch rows; 1000 for UCI, 500 for the synthetic sets [C]. Capped at the rows trained
        on (so, unlike the other network estimators, a held-out share never refuses it).
    epochs : int, default 1000
        [C] runs up to 10,000 (its early stopping is inert, spec §2.3); 1000 is our CPU-sized
        default [R].
    random_state : None, int or RandomState
        Seeds initialisation, mini-batch order, training noise and prediction noise.
    device : str, default "cpu"
    progress : bool, default True
        Progress bar over epochs (rich, on stderr).
    validation_fraction : float in [0, 0.5), default 0.1
        Share of the training rows held out to stop early on their MC mixture NLL (the loss,
        ``n_noise_samples`` draws from a stream re-seeded every epoch, so epochs compare on the
        same noise) and keep the best epoch (`dubito.early_stopping`; 0.1 is scikit-learn's
        MLPRegressor default); ``epochs`` is then the cap. 0: every row, ``epochs`` epochs (the
        authors' code, whose early stopping is inert; the B-DeepNoise init and the deepnoise
        experiment pass it).
    patience : int, default 100
        Epochs without a better held-out NLL before training stops. Not the package's 20: at the
        default batch an epoch is one Adam step on sets under 1,000 rows, and 20 steps stopped
        the heteroscedastic toy of the tests on a plateau (test NLL 0.29, against 0.09 with 100
        and 0.11 for 300 epochs on every row).

    Fitted attributes
    -----------------
    net_ : DeepNoiseNet (float64); x_mean_, x_scale_ : (p,); y_mean_, y_scale_ : float;
    loss_curve_ : (epochs run,) epoch-mean training loss (standardised units); n_features_in_;
    n_train_ : rows trained on (held-out rows excluded);
    validation_curve_ : (epochs run,) held-out NLL (empty without held-out rows); best_epoch_ :
    the epoch (from 1) whose weights are kept; stopped_by_ : "patience" or "cap".
    """

    def __init__(
        self,
        hidden=(50, 50, 50, 50),
        activation="hardtanh",
        n_noise_samples=100,
        lr=1e-3,
        batch_size=1000,
        epochs=1000,
        random_state=None,
        device="cpu",
        progress=True,
        validation_fraction=DEFAULT_VALIDATION_FRACTION,
        patience=100,
    ):
        self.validation_fraction = validation_fraction
        self.patience = patience
        self.hidden = hidden
        self.activation = activation
        self.n_noise_samples = n_noise_samples
        self.lr = lr
        self.batch_size = batch_size
        self.epochs = epochs
        self.random_state = random_state
        self.device = device
        self.progress = progress

    def _settings(self) -> dict:
        check_bool(self.progress, "progress")
        return dict(
            hidden=check_widths(self.hidden),
            activation=piecewise_activation(self.activation).name,
            n_noise_samples=check_int(self.n_noise_samples, "n_noise_samples", min_value=1),
            lr=check_float(self.lr, "lr", strictly_positive=True),
            batch_size=check_int(self.batch_size, "batch_size", min_value=1),
            epochs=check_int(self.epochs, "epochs", min_value=1),
            device=_check_device(self.device),
            validation_fraction=check_validation_fraction(self.validation_fraction),
            patience=check_patience(self.patience),
        )

    # ------------------------------------------------------------------ fit
    def fit(self, X, y):
        """Train on (X, y): X (n, p), y (n,) finite, y not constant. Returns self."""
        s = self._settings()
        X, y = validate_fit_data(self, X, y, min_samples=MIN_SAMPLES)
        # independent streams: initialisation (CPU), training (order, noise), prediction, held-out rows
        gen_init, gen_train, gen_pred, gen_holdout = member_generators(self.random_state, 4)
        fraction = s["validation_fraction"]
        # no batch check: batch_size is capped at the training rows (its default, [C]'s 1000, exceeds most sets)
        train_rows, val_rows = holdout_split(X.shape[0], fraction, int(gen_holdout.initial_seed()))
        check_training_target(y[train_rows], fraction, MIN_SAMPLES)
        Xf, yf = X[train_rows], y[train_rows]
        self.n_train_ = int(train_rows.size)
        p = X.shape[1]
        self.x_mean_, self.x_scale_, self.y_mean_, self.y_scale_ = standardise_fit(Xf, yf)
        self._predict_seed = int(gen_pred.initial_seed())
        device = s["device"]
        gen = torch.Generator(device=device).manual_seed(int(gen_train.initial_seed()))
        net = DeepNoiseNet((p, *s["hidden"], 1), s["activation"], gen_init, dtype=torch.float32, device=device)

        def tensor(a):
            return torch.as_tensor(a, dtype=torch.float32).to(device)

        validation = None
        if val_rows.size:
            validation = (tensor((X[val_rows] - self.x_mean_) / self.x_scale_),
                          tensor((y[val_rows] - self.y_mean_) / self.y_scale_))
        self.loss_curve_ = self._train(net, tensor((Xf - self.x_mean_) / self.x_scale_),
                                       tensor((yf - self.y_mean_) / self.y_scale_), s, gen, validation,
                                       int(gen_holdout.initial_seed()))
        self.net_ = net.double()
        return self

    def _train(self, net, X, y, s, gen, validation=None, val_seed: int = 0) -> np.ndarray:
        """Epochs of `train_epoch`; with ``validation`` (X_val, y_val), early stopping on the held-out
        mixture NLL (fixed noise: its generator re-seeded by ``val_seed`` every epoch), the best
        epoch's weights restored. Sets validation_curve_, best_epoch_, stopped_by_."""
        n = X.shape[0]
        batch = min(s["batch_size"], n)
        opt = torch.optim.Adam(net.parameters(), lr=s["lr"])
        curve = np.zeros(s["epochs"])
        stopper = None if validation is None else EarlyStopping(s["patience"])
        best = None if validation is None else best_copy(net)
        with _progress_bar(bool(self.progress)) as bar:
            task = bar.add_task("DeepNoise-SGD", total=s["epochs"])
            for epoch in range(s["epochs"]):
                curve[epoch] = train_epoch(net, opt, X, y, batch, s["n_noise_samples"], gen)
                text = f"DeepNoise-SGD nll {curve[epoch]:.3f}"
                if stopper is not None:
                    with torch.no_grad():
                        g = torch.Generator(device=X.device).manual_seed(val_seed)
                        held_out = float(net.mixture_nll(*validation, s["n_noise_samples"], g))
                    copy_best_members(best, net, stopper.update([held_out]))
                    text += f" held-out {held_out:.3f}"
                bar.update(task, advance=1, description=text)
                if stopper is not None and stopper.done:
                    break
        if stopper is None:
            self.validation_curve_, self.best_epoch_, self.stopped_by_ = np.zeros(0), int(s["epochs"]), "cap"
            return curve
        net.load_state_dict(best.state_dict())
        self.validation_curve_ = np.asarray(stopper.curve, dtype=np.float64).reshape(-1)
        self.best_epoch_ = int(stopper.best_epoch[0])
        self.stopped_by_ = "patience" if stopper.done else "cap"
        return curve[: len(stopper.curve)]

    # ------------------------------------------------------------------ predict
    def params_(self) -> DeepNoiseParams:
        """The fitted state as `DeepNoiseParams` (float64, standardised units, on ``device``);
        ρ² = W², ξ² = γ², both floored at ``DeepNoisePriors().rho2_floor`` (spec §2.3 step 2)."""
        check_fitted(self, "net_")
        return self.net_.to_params(DeepNoisePriors().rho2_floor)

    @torch.no_grad()
    def predict_moments(self, X, n_samples=None):
        """Component means (N, S) and the common component variance in user units."""
        X = validate_predict_data(self, X, fitted_attributes="net_")
        S = self.n_noise_samples if n_samples is None else check_int(n_samples, "n_samples", min_value=1)
        dev = self.net_.W[0].device
        Xs = torch.as_tensor((X - self.x_mean_) / self.x_scale_, dtype=torch.float64).to(dev)
        width = max(self.net_.widths)
        step = max(1, _CHUNK_ELEMENTS // max(1, S * width))
        means, var = [], None
        for start in range(0, Xs.shape[0], step):  # the same S draws for every row of every chunk
            gen = torch.Generator(device=dev).manual_seed(self._predict_seed)
            m, var = self.net_.moments(Xs[start : start + step], S, gen, shared=True)
            means.append(m.T.cpu())
        mean = torch.cat(means).numpy() * self.y_scale_ + self.y_mean_
        return mean, float(var) * self.y_scale_**2

    def predict_distribution(self, X, n_samples=None) -> GaussianMixture:
        """Equal-weight mixture over ``n_samples`` (default ``n_noise_samples``) noise draws,
        user units. Deterministic: the prediction noise stream is re-seeded at every call, and
        the S draws are shared by all rows, so a row's predictive does not depend on the others."""
        mean, var = self.predict_moments(X, n_samples)
        M = mean.shape[1]
        return GaussianMixture(np.full(M, 1.0 / M), mean, np.full(mean.shape, var))

    def predict(self, X) -> np.ndarray:
        """Predictive mean (N,), user units (mean of the mixture components)."""
        return self.predict_moments(X)[0].mean(axis=1)

    # ------------------------------------------------------------------ persistence
    def save(self, path) -> None:
        """Write the fitted model (safetensors + JSON settings, atomically; no pickle)."""
        check_fitted(self, "net_")
        params = io.json_params(self)
        fitted = dict(
            n_features_in=int(self.n_features_in_),
            y_mean=self.y_mean_,
            y_scale=self.y_scale_,
            predict_seed=self._predict_seed,
            feature_names_in=io.feature_names_json(self),
            best_epoch=int(self.best_epoch_),
            stopped_by=self.stopped_by_,
            n_train=self.n_train_,
        )
        tensors = {f"net.{k}": v for k, v in self.net_.state_dict().items()}
        tensors["x_mean"] = torch.as_tensor(self.x_mean_, dtype=torch.float64)
        tensors["x_scale"] = torch.as_tensor(self.x_scale_, dtype=torch.float64)
        tensors["loss_curve"] = torch.as_tensor(self.loss_curve_, dtype=torch.float64)
        tensors["validation_curve"] = torch.as_tensor(self.validation_curve_, dtype=torch.float64)
        io.save_tensors(path, tensors, type(self).__name__, {"params": params, "fitted": fitted})

    @classmethod
    def load(cls, path, *, device=None) -> "DeepNoiseSGDRegressor":
        """Read a model written by `save`; a corrupted or foreign file raises ValueError."""
        tensors, settings = io.load_tensors(path, cls.__name__, device="cpu")
        with io.rebuilding(path, cls.__name__):
            fitted = settings["fitted"]
            est = cls(**io.params_from_json(settings["params"], device=device))
            s = est._settings()
            p = int(fitted["n_features_in"])
            net = DeepNoiseNet((p, *s["hidden"], 1), s["activation"], torch.Generator(), dtype=torch.float64)
            net.load_state_dict({k[4:]: v for k, v in tensors.items() if k.startswith("net.")}, strict=True)
            est.net_ = net.to(s["device"])
            est.x_mean_ = tensors["x_mean"].numpy()
            est.x_scale_ = tensors["x_scale"].numpy()
            est.loss_curve_ = tensors["loss_curve"].numpy()
            est.y_mean_ = float(fitted["y_mean"])
            est.y_scale_ = float(fitted["y_scale"])
            est._predict_seed = int(fitted["predict_seed"])
            # files written before validated fitting: no held-out curve, trained to the cap
            est.validation_curve_ = tensors.get("validation_curve", torch.zeros(0)).numpy()
            est.best_epoch_ = int(fitted.get("best_epoch", len(est.loss_curve_)))
            est.n_train_ = int(fitted.get("n_train", -1))  # -1: not recorded by files of older versions
            est.stopped_by_ = check_choice(fitted.get("stopped_by", "cap"), "stopped_by", STOPPED_BY)
            est.n_features_in_ = p
            io.set_feature_names(est, fitted.get("feature_names_in"))
        return est

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        tags.target_tags.single_output = True
        tags.target_tags.multi_output = False
        return tags
