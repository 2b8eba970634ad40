r"""Mean-field Gaussian variational inference for an MLP ("Bayes by backprop", Blundell et al.
2015): the VI baseline of B-DeepNoise ([P] §3 "VI", TyXe/Pyro [77]; spec §4.3).

Model, in standardised units (x and y centred and scaled by the training mean and sd, ddof 0;
constant columns get sd 1, [C] ``standardize``):

    y = g(x; w) + e,   e ~ N(0, s^2),   every weight and bias  w_k ~ N(0, prior_sd^2),

with g an MLP (``hidden`` widths, ``activation``, linear output) and s a point estimate (one
learned log-scale, "learned homoscedastic noise"), or fixed with ``noise_sd``.

Family: q(w) = prod_k N(w_k; mu_k, sd_k^2), sd_k = softplus(rho_k). ``fit`` maximises

    ELBO = sum_i E_q[log N(y_i; g(x_i; w), s^2)] - sum_k KL(N(mu_k, sd_k^2) || N(0, prior_sd^2)),
    KL = log(prior_sd / sd_k) + (sd_k^2 + mu_k^2) / (2 prior_sd^2) - 1/2          (closed form)

by Adam on mini-batches B, each step minimising sum_{i in B} -E_q[log p(y_i | x_i, w)] +
(|B| / N) KL, so the steps of one epoch sum to the full negative ELBO (Blundell et al. §3.4).
The expectation is estimated with the local reparameterisation trick (Kingma, Salimans &
Welling 2015): a hidden pre-activation a = h W + b is drawn as N(h mu_W + mu_b,
h^2 sd_W^2 + sd_b^2) per row; the output layer's weights are integrated out exactly given h,
E[(y - h W - b)^2 | h] = (y - h mu_W - mu_b)^2 + h^2 sd_W^2 + sd_b^2 (a Rao-Blackwellised,
lower-variance estimate of the same ELBO). With ``hidden=()`` the model is linear, the
objective deterministic, and its optimum known in closed form (the tests use it).

Prediction: ``n_samples`` joint weight draws w_s ~ q give the equal-weight Gaussian mixture
(1/S) sum_s N(y; g(x; w_s), s^2), returned in the user's units; its ``noise_variances`` are
s^2, so ``epistemic_var`` is the spread of g(x; w_s) and ``aleatoric_var`` is s^2.

Diagnostics: there is no chain (no R-hat) and no stopping rule: the loop runs ``epochs`` epochs.
``diagnostics_`` (`dubito.inference.convergence`) calls the run ``stopped_by_cap`` when the
-ELBO was still falling at the end (`still_improving`: its mean over the last tenth of the epochs
more than 0.1 % below that over the tenth before), and ``converged`` otherwise.

Persistence: ``save(path)`` / ``load(path, device=None)``: the variational parameters, the
standardisation and the loss curve as safetensors, the settings as JSON (`dubito.io`; no pickle).

Defaults: Adam lr 1e-3, batch 100 and 2000 epochs are [C]'s TyXe settings (spec §4.3);
prior N(0, 1) is TyXe's default ``IIDPrior(Normal(0, 1))``; the initial sd 1e-3 (rho =
softplus^-1(1e-3)) is ours, small as in Blundell et al.; the means start at PyTorch's
``nn.Linear`` default U(-1/sqrt(fan_in), 1/sqrt(fan_in)); hard tanh is [P]'s activation.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils import check_random_state
from torch.nn import functional as F

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
from dubito.inference.convergence import PLATEAU_RTOL, diagnostics_dict, still_improving
from dubito.nn.batched import ACTIVATIONS
from dubito.predictive.mixture import GaussianMixture

__all__ = ["MeanFieldVIRegressor", "kl_normal"]

_LOG_2PI = math.log(2.0 * math.pi)


def kl_normal(mu: torch.Tensor, sd: torch.Tensor, prior_sd: float) -> torch.Tensor:
    """sum_k KL(N(mu_k, sd_k^2) || N(0, prior_sd^2)), closed form."""
    return (math.log(prior_sd) - torch.log(sd) + (sd**2 + mu**2) / (2.0 * prior_sd**2) - 0.5).sum()


def _softplus_inv(x: float) -> float:
    return x + math.log(-math.expm1(-x))


def _seed(random_state) -> int:
    if isinstance(random_state, (int, np.integer)) and not isinstance(random_state, bool):
        return int(random_state)
    return int(check_random_state(random_state).randint(0, 2**31 - 1))


class MeanFieldVIRegressor(RegressorMixin, BaseEstimator):
    """Bayes-by-backprop MLP regression with a learned homoscedastic Gaussian noise.

    Parameters (defaults and their sources: module docstring)
    ----------
    hidden : tuple of int, default (50, 50, 50, 50) — [P]'s 4 x 50 architecture; () is linear.
    activation : str, default "hardtanh" — a key of ``dubito.nn.batched.ACTIVATIONS``.
    prior_sd : float, default 1.0 — N(0, prior_sd^2) on every weight and bias (TyXe default).
    n_samples : int, default 1000 — weight draws (mixture components) at prediction.
    epochs : int, default 2000; lr : float, default 1e-3; batch_size : int, default 100 ([C]).
    noise_sd : float or None, default None — fixed noise sd in y units; None learns it.
    init_sd : float, default 1e-3 — initial posterior sd of every weight (ours).
    random_state : None or int — seeds initialisation, mini-batches and the MC noise.
    device : str, default "cpu" — torch device; all tensors stay there.
    progress : bool, default True — a rich progress bar over epochs (stderr).

    Fitted attributes: ``q_`` (dict of tensors "W_mu.l", "W_sd.l", "b_mu.l", "b_sd.l", layer l,
    W (in, out), standardised units); ``noise_sd_`` (y units); ``x_mean_``, ``x_scale_``,
    ``y_mean_``, ``y_scale_``; ``loss_curve_`` (epochs,) the epoch sums of the mini-batch
    objective, i.e. a one-sample estimate of the negative ELBO (standardised units);
    ``diagnostics_`` (dict, `dubito.inference.convergence`: no R-hat; ``stopped_by_cap`` when
    the -ELBO was still falling at the last epoch).
    """

    def __init__(self, hidden=(50, 50, 50, 50), activation="hardtanh", prior_sd=1.0, n_samples=1000,
                 epochs=2000, lr=1e-3, batch_size=100, noise_sd=None, init_sd=1e-3, random_state=None,
                 device="cpu", progress=True):
        self.hidden = hidden
        self.activation = activation
        self.prior_sd = prior_sd
        self.n_samples = n_samples
        self.epochs = epochs
        self.lr = lr
        self.batch_size = batch_size
        self.noise_sd = noise_sd
        self.init_sd = init_sd
        self.random_state = random_state
        self.device = device
        self.progress = progress

    def _settings(self) -> dict:
        hidden = check_widths(self.hidden)
        if self.noise_sd is not None:
            check_float(self.noise_sd, "noise_sd", strictly_positive=True)
        check_bool(self.progress, "progress")
        try:
            device = torch.device(self.device)
        except (RuntimeError, TypeError) as exc:
            raise ValueError(f"device must be a torch device string such as 'cpu', got {self.device!r}: {exc}") from None
        return dict(
            hidden=hidden,
            activation=check_choice(self.activation, "activation", ACTIVATIONS),
            prior_sd=check_float(self.prior_sd, "prior_sd", strictly_positive=True),
            n_samples=check_int(self.n_samples, "n_samples", min_value=1),
            epochs=check_int(self.epochs, "epochs", min_value=1),
            lr=check_float(self.lr, "lr", strictly_positive=True),
            batch_size=check_int(self.batch_size, "batch_size", min_value=1),
            init_sd=check_float(self.init_sd, "init_sd", strictly_positive=True),
            device=device,
        )

    # ------------------------------------------------------------------ fit
    def fit(self, X, y):
        """Maximise the ELBO on (X, y); X (n, p), y (n,) finite, y not constant. Returns self."""
        s = self._settings()
        X, y = validate_fit_data(self, X, y, min_samples=2)
        n, p = X.shape
        dev = s["device"]
        f64 = dict(dtype=torch.float64, device=dev)
        self.x_mean_, self.x_scale_, self.y_mean_, self.y_scale_ = standardise_fit(X, y)
        Xs = torch.as_tensor((X - self.x_mean_) / self.x_scale_, **f64)
        ys = torch.as_tensor((y - self.y_mean_) / self.y_scale_, **f64)

        gen = torch.Generator(device=dev).manual_seed(_seed(self.random_state))
        widths = (p, *s["hidden"], 1)
        rho0 = _softplus_inv(s["init_sd"])
        layers = []
        for k_in, k_out in zip(widths[:-1], widths[1:]):
            bound = 1.0 / math.sqrt(k_in)
            w_mu = ((torch.rand(k_in, k_out, generator=gen, **f64) * 2 - 1) * bound).requires_grad_()
            b_mu = ((torch.rand(k_out, generator=gen, **f64) * 2 - 1) * bound).requires_grad_()
            w_rho = torch.full((k_in, k_out), rho0, **f64).requires_grad_()
            b_rho = torch.full((k_out,), rho0, **f64).requires_grad_()
            layers.append((w_mu, w_rho, b_mu, b_rho))
        params = [t for layer in layers for t in layer]
        if self.noise_sd is None:
            log_s = torch.zeros((), **f64).requires_grad_()  # s = 1: the sd of standardised y
            params.append(log_s)
        else:
            log_s = torch.tensor(math.log(float(self.noise_sd) / self.y_scale_), **f64)
        act = ACTIVATIONS[s["activation"]]
        prior_sd = s["prior_sd"]
        opt = torch.optim.Adam(params, lr=s["lr"])
        bsz = min(s["batch_size"], n)
        curve = np.zeros(s["epochs"])

        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )
        columns = (TextColumn("[progress.description]{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TimeElapsedColumn(), TimeRemainingColumn())
        with Progress(*columns, console=Console(stderr=True), disable=not self.progress) as bar:
            task = bar.add_task("mean-field VI", total=s["epochs"])
            for epoch in range(s["epochs"]):
                perm = torch.randperm(n, generator=gen, device=dev) if bsz < n else torch.arange(n, device=dev)
                total = 0.0
                for start in range(0, n, bsz):
                    idx = perm[start:start + bsz]
                    loss = self._objective(layers, log_s, Xs[idx], ys[idx], n, act, prior_sd, gen)
                    opt.zero_grad(set_to_none=True)
                    loss.backward()
                    opt.step()
                    total += float(loss.detach())
                curve[epoch] = total
                bar.update(task, advance=1, description=f"mean-field VI -ELBO {total:.4g}")

        q = {}
        with torch.no_grad():
            for l, (w_mu, w_rho, b_mu, b_rho) in enumerate(layers):
                q[f"W_mu.{l}"] = w_mu.detach().clone()
                q[f"W_sd.{l}"] = F.softplus(w_rho).detach().clone()
                q[f"b_mu.{l}"] = b_mu.detach().clone()
                q[f"b_sd.{l}"] = F.softplus(b_rho).detach().clone()
        self.q_ = q
        self.n_layers_ = len(layers)
        self.noise_sd_ = float(torch.exp(log_s.detach())) * self.y_scale_
        self.loss_curve_ = curve
        self.n_train_ = int(n)
        self.diagnostics_ = self._diagnostics()
        return self

    def _diagnostics(self) -> dict:
        """The shared ``diagnostics_`` (no chain: R-hat and ESS NaN) with ``stopped_by_cap`` =
        the -ELBO curve still falling at the end (`still_improving`)."""
        curve = np.asarray(self.loss_curve_)
        return diagnostics_dict(sampler=False, stopped_by_cap=still_improving(curve), n_epochs=int(curve.size),
                                final_loss=float(curve[-1]) if curve.size else float("nan"), plateau_rtol=PLATEAU_RTOL)

    @staticmethod
    def _objective(layers, log_s, xb, yb, n, act, prior_sd, gen):
        """sum_{i in batch} -E_q log p(y_i | x_i, w) + (|batch| / n) KL(q || prior)."""
        h = xb
        for w_mu, w_rho, b_mu, b_rho in layers[:-1]:
            w_sd, b_sd = F.softplus(w_rho), F.softplus(b_rho)
            m = h @ w_mu + b_mu
            v = (h * h) @ (w_sd * w_sd) + b_sd * b_sd
            eps = torch.randn(m.shape, generator=gen, dtype=m.dtype, device=m.device)
            h = act(m + torch.sqrt(v) * eps)
        w_mu, w_rho, b_mu, b_rho = layers[-1]
        w_sd, b_sd = F.softplus(w_rho), F.softplus(b_rho)
        m = (h @ w_mu + b_mu)[:, 0]
        v = ((h * h) @ (w_sd * w_sd) + b_sd * b_sd)[:, 0]
        s2 = torch.exp(2.0 * log_s)
        enll = (0.5 * (_LOG_2PI + 2.0 * log_s) + ((yb - m) ** 2 + v) / (2.0 * s2)).sum()
        kl = sum(kl_normal(w_mu, F.softplus(w_rho), prior_sd) + kl_normal(b_mu, F.softplus(b_rho), prior_sd)
                 for w_mu, w_rho, b_mu, b_rho in layers)
        return enll + (xb.shape[0] / n) * kl

    # ------------------------------------------------------------------ predict
    @torch.no_grad()
    def sample_functions(self, X, n_samples=None, *, random_state=0) -> np.ndarray:
        """g(x; w_s) for S joint weight draws w_s ~ q, in y units: (S, N)."""
        X = validate_predict_data(self, X, fitted_attributes=["q_"])
        S = self.n_samples if n_samples is None else check_int(n_samples, "n_samples", min_value=1)
        dev = self.q_["W_mu.0"].device
        f64 = dict(dtype=torch.float64, device=dev)
        gen = torch.Generator(device=dev).manual_seed(_seed(random_state))
        Xs = torch.as_tensor((X - self.x_mean_) / self.x_scale_, **f64)
        act = ACTIVATIONS[self.activation]
        width = max((Xs.shape[1], *self._settings()["hidden"], 1))
        step = max(1, (1 << 23) // max(1, Xs.shape[0] * width))  # draws per chunk: <= 64 MB activations
        out = []
        for start in range(0, S, step):
            m = min(step, S - start)
            h = Xs.expand(m, *Xs.shape)
            for l in range(self.n_layers_):
                W = self.q_[f"W_mu.{l}"] + self.q_[f"W_sd.{l}"] * torch.randn(m, *self.q_[f"W_mu.{l}"].shape, generator=gen, **f64)
                b = self.q_[f"b_mu.{l}"] + self.q_[f"b_sd.{l}"] * torch.randn(m, 1, self.q_[f"b_mu.{l}"].shape[0], generator=gen, **f64)
                h = torch.baddbmm(b, h, W)
                if l < self.n_layers_ - 1:
                    h = act(h)
            out.append(h[:, :, 0].cpu())
        return torch.cat(out).numpy() * self.y_scale_ + self.y_mean_

    def predict_distribution(self, X, n_samples=None, *, random_state=0) -> GaussianMixture:
        """(1/S) sum_s N(y; g(x; w_s), noise_sd_^2) in y units; ``random_state`` seeds the draws."""
        f = self.sample_functions(X, n_samples, random_state=random_state).T  # (N, S)
        var = np.full(f.shape, self.noise_sd_**2)
        return GaussianMixture(np.full(f.shape[1], 1.0 / f.shape[1]), f, var, noise_variances=var)

    def predict(self, X) -> np.ndarray:
        """Predictive mean (1/S) sum_s g(x; w_s), y units, (N,)."""
        return self.predict_distribution(X).mean

    # ------------------------------------------------------------------ persistence
    def save(self, path) -> None:
        """Write the fitted model to ``path`` (safetensors tensors + JSON settings; atomic; no pickle)."""
        check_fitted(self, ["q_"])
        fitted = dict(n_features_in=int(self.n_features_in_), n_layers=int(self.n_layers_),
                      noise_sd=float(self.noise_sd_), y_mean=float(self.y_mean_), y_scale=float(self.y_scale_),
                      n_train=int(self.n_train_), feature_names_in=io.feature_names_json(self))
        tensors = {f"q.{k}": v for k, v in self.q_.items()}
        for key in ("x_mean", "x_scale", "loss_curve"):
            tensors[key] = torch.as_tensor(np.asarray(getattr(self, key + "_"), dtype=np.float64))
        io.save_tensors(path, tensors, type(self).__name__, {"params": io.json_params(self), "fitted": fitted})

    @classmethod
    def load(cls, path, *, device=None) -> "MeanFieldVIRegressor":
        """Read a model written by `save`; ``device`` overrides the saved device setting.
        A corrupted, truncated or foreign file raises ``ValueError``."""
        tensors, settings = io.load_tensors(path, cls.__name__, device="cpu")
        with io.rebuilding(path, cls.__name__):
            fitted = settings["fitted"]
            est = cls(**io.params_from_json(settings["params"], device=device))
            s = est._settings()
            p = int(fitted["n_features_in"])
            widths = (p, *s["hidden"], 1)
            n_layers = int(fitted["n_layers"])
            q = {k[len("q."):]: v.to(s["device"], torch.float64) for k, v in tensors.items() if k.startswith("q.")}
            expected = {}
            for layer, (k_in, k_out) in enumerate(zip(widths[:-1], widths[1:])):
                expected.update({f"W_mu.{layer}": (k_in, k_out), f"W_sd.{layer}": (k_in, k_out),
                                 f"b_mu.{layer}": (k_out,), f"b_sd.{layer}": (k_out,)})
            est.q_ = q
            est.n_layers_ = n_layers
            est.noise_sd_ = float(fitted["noise_sd"])
            est.y_mean_, est.y_scale_ = float(fitted["y_mean"]), float(fitted["y_scale"])
            est.n_train_ = int(fitted["n_train"])
            est.x_mean_, est.x_scale_ = tensors["x_mean"].double().numpy(), tensors["x_scale"].double().numpy()
            est.loss_curve_ = tensors["loss_curve"].double().numpy()
            est.n_features_in_ = p
            io.set_feature_names(est, fitted.get("feature_names_in"))
            shapes_ok = (n_layers == len(widths) - 1 and set(q) == set(expected)
                         and all(tuple(q[k].shape) == shape for k, shape in expected.items())
                         and est.x_mean_.shape == (p,) and est.x_scale_.shape == (p,) and est.loss_curve_.ndim == 1)
        if not shapes_ok:
            raise ValueError(f"{path} is a {cls.__name__} file with inconsistent tensor shapes (corrupted?)")
        est.diagnostics_ = est._diagnostics()
        return est

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        tags.target_tags.single_output = True
        tags.target_tags.multi_output = False
        return tags
