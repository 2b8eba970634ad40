r"""Gaussian last-layer Laplace for regression: exact Bayesian linear regression on a network's features.

For a network whose output is linear in its last hidden layer, f(x) = w^T phi(x) + b, the
Laplace approximation of the posterior of the last layer (w, b) with the rest of the network
fixed is exact for a Gaussian likelihood: it is Bayesian linear regression on the features
(Kristiadi, Hein & Hennig 2020; Daxberger et al. 2021, laplace-torch's ``LLLaplace`` for
regression). With Phi = [phi(x_i)^T, 1] the (N, M) design (the features and a bias column),

    prior  w ~ N(0, alpha^{-1} I_M),        y | w ~ N(Phi w, sigma^2 I_N),

    posterior precision  A = Phi^T Phi / sigma^2 + alpha I,   mean  m = A^{-1} Phi^T y / sigma^2,
    predictive  y* | x* ~ N(phi*^T m, phi*^T A^{-1} phi* + sigma^2)

(Bishop, PRML 2006, eqs. 3.53-3.54 and 3.58-3.59), with ``epistemic_var`` = phi*^T A^{-1} phi*
and ``aleatoric_var`` = sigma^2.

Hyper-parameters by the evidence (MacKay 1992; Bishop, PRML §3.5, eq. 3.86),

    log p(y | alpha, sigma^2) = M/2 log alpha - N/2 log sigma^2 - E(m) - 1/2 log|A| - N/2 log 2 pi,
    E(m) = ||y - Phi m||^2 / (2 sigma^2) + alpha/2 m^T m,

which equals log N(y; 0, sigma^2 I + Phi Phi^T / alpha). How the maximiser is found
(`maximise_evidence`): with beta = 1/sigma^2 and the ridge ratio rho = alpha / beta, m depends on
rho only and the evidence is maximised over beta in closed form, beta* = N / (||y - Phi m||^2 +
rho m^T m), so the two-dimensional problem is the one-dimensional profile over log rho. That
profile is evaluated on a grid of 20 points per decade over 24 decades around the mean eigenvalue
of Phi^T Phi, and the best grid cell is refined by Brent's root (``scipy.optimize.brentq``) of the
profile's slope, d/d log rho = (gamma - alpha m^T m) / 2 with gamma = sum_i beta s_i^2 / (alpha +
beta s_i^2) (the envelope theorem; its root is MacKay's fixed point alpha = gamma / m^T m, PRML eq.
3.92), or by bounded Brent on the evidence where the slope does not change sign in the cell; the
result is never worse than the best grid point. A grid first, not the fixed-point iteration alone:
the evidence need not be unimodal, and the grid finds the best mode. One hyper-parameter fixed by
the user: the same search over the other one (slope in log beta: (N - gamma - beta ||y - Phi
m||^2) / 2, PRML eq. 3.95). Every
evaluation uses the thin SVD of Phi (O(M) per point, no cancellation in the residual). A maximum
at the edge of the range (features that explain nothing: alpha -> infinity) is returned at the
edge with a warning.

What is standardised (float64 throughout). ``fit``: X by the training rows' mean and sd per
column (the network's input, `DubitoRegressor._fit_scaling`) and y by its training mean and sd;
``wrap``: y only (the user's model takes its own inputs). The features phi are the network's own
(not standardised: the prior is on the weights of the network's last layer as they act on its
features, as in laplace-torch). alpha is the prior precision of those weights on the standardised
y scale; ``noise_var_`` = sigma^2 is reported in the user's units (y_scale^2 times the
standardised sigma^2); ``log_marginal_likelihood_`` is that of the standardised targets (add -N
log y_scale_ for the user's units).

The mean. laplace-torch keeps the network's MAP head as the predictive mean and uses the Laplace
only for the covariance. Here the last layer is re-fitted exactly: the mean is the BLR posterior
mean m on the features under the evidence-chosen prior (the issue's "exact Bayesian linear
regression on the features"); the network's own head is not used (``net_`` keeps it, trained).

``fit`` trains the MLP baseline's network (`dubito.regression.deterministic`: MSE, Adam, early
stopping on the held-out share, the same defaults) and then does the BLR on the features of ALL
the training rows, held-out ones included (the BLR is a new fit of the last layer; the held-out
rows' features were not fitted to, which keeps sigma^2 honest). ``wrap`` does the BLR on the
features of a user's trained torch model (`dubito.nn.feature_layer`: by default the input of its
last ``nn.Linear``). Constant feature columns (dead ReLU units) are dropped with a warning.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import torch
from scipy.linalg import cho_solve, solve_triangular
from scipy.optimize import brentq, minimize_scalar

from dubito import io
from dubito._estimator import fitted_number
from dubito._validation import check_fitted, check_float, check_int
from dubito.early_stopping import DEFAULT_PATIENCE, DEFAULT_VALIDATION_FRACTION
from dubito.nn.feature_layer import (
    features_and_targets,
    find_feature_layer,
    layer_features,
)
from dubito.predictive.normal import Normal
from dubito.regression.deterministic import MIN_SAMPLES, _MLPRegressor
from dubito.search_space import Choice, Float

__all__ = ["LastLayerLaplaceRegressor", "blr_log_evidence", "blr_posterior", "maximise_evidence"]

MARGLIK = "marglik"

#: The evidence search: points per decade and decades on each side of the centre (module docstring).
_PER_DECADE = 20
_DECADES = 12
_XATOL = 1e-10
_LOG_2PI = math.log(2.0 * math.pi)


# ---------------------------------------------------------------------- closed forms
def _check_design(Phi, y) -> tuple[np.ndarray, np.ndarray]:
    Phi = np.asarray(Phi, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if Phi.ndim != 2 or y.ndim != 1 or Phi.shape[0] != y.shape[0] or Phi.shape[0] < 1 or Phi.shape[1] < 1:
        raise ValueError(f"Phi must be (N, M) and y (N,) with N, M >= 1, got {Phi.shape} and {y.shape}")
    if not (np.all(np.isfinite(Phi)) and np.all(np.isfinite(y))):
        raise ValueError("Phi and y must be finite (found NaN/inf)")
    return Phi, y


def _check_hyper(alpha, sigma2) -> tuple[float, float]:
    return (check_float(alpha, "prior_precision", strictly_positive=True),
            check_float(sigma2, "noise_var", strictly_positive=True))


def blr_posterior(Phi, y, prior_precision: float, noise_var: float) -> tuple[np.ndarray, np.ndarray]:
    r"""(m, A): the posterior mean and precision of w in y ~ N(Phi w, sigma^2 I), w ~ N(0, alpha^{-1} I):
    A = Phi^T Phi / sigma^2 + alpha I, m = A^{-1} Phi^T y / sigma^2 (PRML eqs. 3.53-3.54; Cholesky)."""
    Phi, y = _check_design(Phi, y)
    alpha, sigma2 = _check_hyper(prior_precision, noise_var)
    A = Phi.T @ Phi / sigma2 + alpha * np.eye(Phi.shape[1])
    chol = _cholesky(A)
    m = cho_solve((chol, True), Phi.T @ y / sigma2)
    return m, A


def blr_log_evidence(Phi, y, prior_precision: float, noise_var: float) -> float:
    r"""log p(y | alpha, sigma^2) = M/2 log alpha - N/2 log sigma^2 - E(m) - 1/2 log|A| - N/2 log 2 pi
    (PRML eq. 3.86; = log N(y; 0, sigma^2 I + Phi Phi^T / alpha))."""
    Phi, y = _check_design(Phi, y)
    alpha, sigma2 = _check_hyper(prior_precision, noise_var)
    n, k = Phi.shape
    m, A = blr_posterior(Phi, y, alpha, sigma2)
    r = y - Phi @ m
    energy = r @ r / (2.0 * sigma2) + 0.5 * alpha * (m @ m)
    logdet = 2.0 * np.sum(np.log(np.diag(_cholesky(A))))
    return float(0.5 * k * math.log(alpha) - 0.5 * n * math.log(sigma2) - energy - 0.5 * logdet - 0.5 * n * _LOG_2PI)


def _cholesky(A: np.ndarray) -> np.ndarray:
    try:
        return np.linalg.cholesky(0.5 * (A + A.T))
    except np.linalg.LinAlgError:
        raise ValueError("the posterior precision is not positive definite (prior_precision too small for the "
                         "features' scale?)") from None


class _Evidence:
    """log p(y | alpha, beta) from the thin SVD Phi = U S V^T, O(M) per evaluation (module docstring)."""

    def __init__(self, Phi: np.ndarray, y: np.ndarray):
        self.n, self.k = Phi.shape
        u, s, _ = np.linalg.svd(Phi, full_matrices=False)
        keep = s > s.max() * max(self.n, self.k) * np.finfo(float).eps if s.size and s.max() > 0 else s > 0
        u, s = u[:, keep], s[keep]
        self.s2 = s * s
        self.c2 = (u.T @ y) ** 2
        self.e2 = float(np.sum((y - u @ (u.T @ y)) ** 2))  # the part of y outside the span of Phi
        self.r = int(s.size)
        self.center = float(np.sum(self.s2) / self.k) if self.r else 1.0

    def __call__(self, alpha: float, beta: float) -> float:
        d = alpha + beta * self.s2
        fit = self.e2 + np.sum(self.c2 * (alpha / d) ** 2)
        mm = np.sum(beta * beta * self.s2 * self.c2 / (d * d))
        logdet = np.sum(np.log(d)) + (self.k - self.r) * math.log(alpha)
        return float(0.5 * self.k * math.log(alpha) + 0.5 * self.n * math.log(beta) - 0.5 * beta * fit
                     - 0.5 * alpha * mm - 0.5 * logdet - 0.5 * self.n * _LOG_2PI)

    def _gamma_mm_fit(self, alpha: float, beta: float) -> tuple[float, float, float]:
        """(gamma, m^T m, ||y - Phi m||^2): gamma = sum_i beta s_i^2 / (alpha + beta s_i^2), the
        effective number of parameters (PRML eq. 3.91)."""
        d = alpha + beta * self.s2
        gamma = float(np.sum(beta * self.s2 / d))
        mm = float(np.sum(beta * beta * self.s2 * self.c2 / (d * d)))
        fit = float(self.e2 + np.sum(self.c2 * (alpha / d) ** 2))
        return gamma, mm, fit

    def slope_alpha(self, alpha: float, beta: float) -> float:
        """d log p / d log alpha = (gamma - alpha m^T m) / 2 (PRML eq. 3.92 at its root)."""
        gamma, mm, _ = self._gamma_mm_fit(alpha, beta)
        return 0.5 * (gamma - alpha * mm)

    def slope_beta(self, alpha: float, beta: float) -> float:
        """d log p / d log beta = (N - gamma - beta ||y - Phi m||^2) / 2 (PRML eq. 3.95 at its root)."""
        gamma, _, fit = self._gamma_mm_fit(alpha, beta)
        return 0.5 * (self.n - gamma - beta * fit)

    def best_beta(self, rho: float) -> float:
        """argmax_beta at alpha = rho beta: N / (||y - Phi m||^2 + rho m^T m)."""
        d = rho + self.s2
        total = self.e2 + np.sum(self.c2 * (rho / d) ** 2) + rho * np.sum(self.s2 * self.c2 / (d * d))
        return self.n / max(float(total), np.finfo(float).tiny)


def _maximise_1d(f, slope, center: float, what: str) -> tuple[float, float]:
    """(x, f(x)): the maximiser of f over log x on the grid of ``_DECADES`` decades each side of
    ``center`` (``_PER_DECADE`` points per decade), refined in the best cell: Brent's root of
    ``slope(x)`` = d f / d log x where it changes sign there (the stationarity conditions of
    MacKay's updates, to machine precision), else bounded Brent on f. Never worse than the grid."""
    grid = math.log(center) + math.log(10.0) * np.linspace(-_DECADES, _DECADES, 2 * _DECADES * _PER_DECADE + 1)
    values = np.array([f(math.exp(t)) for t in grid])
    values[~np.isfinite(values)] = -np.inf
    i = int(np.argmax(values))
    if i in (0, grid.size - 1):
        warnings.warn(f"the evidence is largest at the edge of the search range ({what} = {math.exp(grid[i]):.3g}): "
                      "the features explain (almost) nothing or (almost) everything; that value is used",
                      RuntimeWarning, stacklevel=3)
        return math.exp(grid[i]), float(values[i])
    lo, hi = grid[i - 1], grid[i + 1]
    if slope(math.exp(lo)) > 0 > slope(math.exp(hi)):
        t = brentq(lambda t: slope(math.exp(t)), lo, hi, xtol=1e-15, rtol=4 * np.finfo(float).eps, maxiter=500)
    else:
        t = minimize_scalar(lambda t: -f(math.exp(t)), bounds=(lo, hi), method="bounded",
                            options={"xatol": _XATOL}).x
    value = f(math.exp(t))
    if np.isfinite(value) and value >= values[i]:
        return math.exp(float(t)), float(value)
    return math.exp(grid[i]), float(values[i])


def maximise_evidence(Phi, y, prior_precision=MARGLIK, noise_var=MARGLIK) -> tuple[float, float, float]:
    r"""(alpha, sigma^2, log evidence) maximising `blr_log_evidence` over the hyper-parameters given as
    "marglik" (the others fixed at the numbers given), by the profile and grid-and-Brent search of
    the module docstring. The log evidence returned is recomputed by `blr_log_evidence`."""
    Phi, y = _check_design(Phi, y)
    fix_a = None if _is_marglik(prior_precision, "prior_precision") else \
        check_float(prior_precision, "prior_precision", strictly_positive=True)
    fix_s = None if _is_marglik(noise_var, "noise_var") else check_float(noise_var, "noise_var", strictly_positive=True)
    ev = _Evidence(Phi, y)
    if fix_a is None and fix_s is None:
        # the profile over rho = alpha / beta; its slope in log rho is d/d log alpha at beta* (envelope)
        rho, _ = _maximise_1d(lambda r: ev(r * ev.best_beta(r), ev.best_beta(r)),
                              lambda r: ev.slope_alpha(r * ev.best_beta(r), ev.best_beta(r)), ev.center, "alpha / beta")
        beta = ev.best_beta(rho)
        alpha, sigma2 = rho * beta, 1.0 / beta
    elif fix_a is None:
        beta = 1.0 / fix_s
        alpha, _ = _maximise_1d(lambda a: ev(a, beta), lambda a: ev.slope_alpha(a, beta), ev.center * beta,
                                "prior_precision")
        sigma2 = fix_s
    elif fix_s is None:
        beta, _ = _maximise_1d(lambda b: ev(fix_a, b), lambda b: ev.slope_beta(fix_a, b),
                               1.0 / max(float(np.var(y)), 1e-300), "1 / noise_var")
        alpha, sigma2 = fix_a, 1.0 / beta
    else:
        alpha, sigma2 = fix_a, fix_s
    return alpha, sigma2, blr_log_evidence(Phi, y, alpha, sigma2)


def _is_marglik(value, name: str) -> bool:
    if isinstance(value, str):
        if value != MARGLIK:
            raise ValueError(f"{name} must be a positive number or {MARGLIK!r} (chosen by the evidence), got {value!r}")
        return True
    return False


# ---------------------------------------------------------------------- the estimator
class LastLayerLaplaceRegressor(_MLPRegressor):
    r"""Last-layer Laplace for regression: Bayesian linear regression on a network's last hidden layer.

    Predictive (module docstring; PRML eqs. 3.58-3.59): y* | x* ~ N(phi*^T m, phi*^T A^{-1} phi* +
    sigma^2) with phi* = [phi(x*), 1], ``epistemic_var`` = phi*^T A^{-1} phi* and ``aleatoric_var`` =
    sigma^2, in the user's units; alpha and sigma^2 by the evidence (PRML §3.5) unless given.

    ``fit(X, y)`` trains the network of `DeterministicRegressor` (MSE, validated early stopping;
    the same defaults, listed there with their sources) and does the BLR on its last hidden layer
    over all training rows. ``LastLayerLaplaceRegressor.wrap(model, X, y)`` does the BLR on the
    features of a user's trained torch model instead (no training).

    Parameters
    ----------
    prior_precision : "marglik" or float > 0, default "marglik"
        alpha, the precision of the last layer's weights (standardised y scale); "marglik": by the
        evidence (MacKay 1992), as laplace-torch's ``optimize_prior_precision(method="marglik")``.
    noise_var : "marglik" or float > 0, default "marglik"
        sigma^2 in the user's units; "marglik": by the evidence, jointly with alpha.
    hidden, activation, lr, weight_decay, batch_size, epochs, device, random_state, progress,
    network, image_shape, validation_fraction, patience
        The network and its training, as `DeterministicRegressor` (same defaults and sources).

    Fitted attributes
    -----------------
    prior_precision_ : float (alpha); noise_var_ : float (sigma^2, user units);
    log_marginal_likelihood_ : float (standardised targets); coef_ : (M,) posterior mean m over the
    kept features then the bias (standardised y); posterior_precision_ : (M, M) A;
    feature_mask_ : (p,) bool, the feature units kept; dead_features_ : indices of the constant
    ones (dropped); n_features_ : p; feature_source_ : "network" or "wrapped"; net_ (``fit``) or
    model_ and feature_layer_ (``wrap``); y_mean_, y_scale_, n_train_; with ``fit`` also the
    network's x_mean_, x_scale_, loss_curve_, validation_curve_, best_epoch_, stopped_by_.
    """

    _description = "last-layer Laplace MLP"

    #: What `dubito.tune` searches: the network's training, as `DeterministicRegressor` (alpha and
    #: sigma^2 are chosen by the evidence, not searched).
    search_space = {
        "lr": Float(1e-4, 1e-2, log=True),
        "weight_decay": Float(1e-7, 1e-2, log=True),
        "hidden": Choice([(50,), (100,), (100, 50, 10)]),
    }

    def __init__(self, prior_precision=MARGLIK, noise_var=MARGLIK, hidden=(100, 50, 10), activation="relu",
                 lr=2.5e-4, weight_decay=0.0, batch_size=32, epochs=60, device="cpu", random_state=None,
                 progress=True, network="mlp", image_shape=None, validation_fraction=DEFAULT_VALIDATION_FRACTION,
                 patience=DEFAULT_PATIENCE):
        self.prior_precision = prior_precision
        self.noise_var = noise_var
        self.hidden = hidden
        self.activation = activation
        self.lr = lr
        self.weight_decay = weight_decay
        self.batch_size = batch_size
        self.epochs = epochs
        self.device = device
        self.random_state = random_state
        self.progress = progress
        self.network = network
        self.image_shape = image_shape
        self.validation_fraction = validation_fraction
        self.patience = patience

    # -------------------------------------------------------------- settings
    def _hyper(self) -> tuple:
        """(prior_precision, noise_var) checked: "marglik" or a positive float each."""
        out = []
        for name in ("prior_precision", "noise_var"):
            v = getattr(self, name)
            out.append(v if _is_marglik(v, name) else check_float(v, name, strictly_positive=True))
        return tuple(out)

    def _extra_settings(self) -> dict:
        alpha, noise = self._hyper()
        return {"prior_precision": alpha, "noise_var": noise}

    # -------------------------------------------------------------- the network (`_MLPRegressor` hooks)
    def _build_net(self, s, n_features, generator=None, dtype=torch.float32):
        return self._make_net(s, n_features, 1, 0.0, generator, dtype)

    def _loss(self, net, xb, yb, generator):
        return ((net(xb)[:, 0] - yb) ** 2).mean()

    def _validate_fit(self, X, y, **kwargs):
        X, y = super()._validate_fit(X, y, **kwargs)
        self._fit_rows = (X, y)  # the BLR uses every row (module docstring); `fit` takes them back
        return X, y

    # -------------------------------------------------------------- fit
    def fit(self, X, y):
        """Train the network on (X, y) (MSE, early stopping), then the BLR on its last hidden layer
        over all rows with alpha and sigma^2 by the evidence. X (n, p), y (n,) numeric, n >= 2,
        y not constant, no NaN/inf. Returns self."""
        self._hyper()
        for attr in ("model_", "feature_layer_", "_feature_layer_arg"):
            self.__dict__.pop(attr, None)
        try:
            self._fit_net(X, y)
            X, y = self._fit_rows
        finally:
            self.__dict__.pop("_fit_rows", None)
        self.n_train_ = int(X.shape[0])
        phi = self._network_features((X - self.x_mean_) / self.x_scale_)
        self.feature_source_ = "network"
        return self._fit_blr(phi, (y - self.y_mean_) / self.y_scale_)

    @torch.no_grad()
    def _network_features(self, Xs: np.ndarray) -> np.ndarray:
        """phi(x) of the trained network (its last hidden layer, float64, eval mode), (N, p)."""
        return torch.cat([self.net_.features(chunk).cpu() for chunk in self._chunks(Xs)]).numpy()

    @classmethod
    def wrap(cls, model: torch.nn.Module, X, y=None, feature_layer=None, *, batch_size: int = 1024,
             **settings) -> LastLayerLaplaceRegressor:
        """Last-layer Laplace on a user's trained torch ``model``: the BLR on its features at X.

        ``feature_layer``: None (the input of the last ``nn.Linear``), a submodule's name or the
        submodule (its output) (`dubito.nn.feature_layer.find_feature_layer`). X: a numpy array,
        a torch tensor (any device) or a ``DataLoader`` of (x, y) batches (then y is None); y (n,)
        the targets in the user's units. The model runs on its own device, in evaluation mode and
        without gradients, ``batch_size`` rows at a time; it is kept by reference (``model_``).
        ``settings``: prior_precision, noise_var (the network settings are unused). Only y is
        standardised."""

        est = cls(**settings)
        est._hyper()
        batch_size = check_int(batch_size, "batch_size", min_value=1)
        if not isinstance(model, torch.nn.Module):
            raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__}")
        name, _, _ = find_feature_layer(model, feature_layer)
        arg = None if feature_layer is None else name
        _check_finite_input(X)
        phi, targets = features_and_targets(model, arg, X, y, batch_size=batch_size)
        y = _check_targets(targets, phi.shape[0])
        est.model_, est.feature_layer_, est._feature_layer_arg = model, name, arg
        est._wrap_batch = batch_size
        est.feature_source_ = "wrapped"
        est.y_mean_, est.y_scale_ = float(y.mean()), float(y.std())
        est.n_train_ = int(y.shape[0])
        return est._fit_blr(phi.numpy(), (y - est.y_mean_) / est.y_scale_)

    def _fit_blr(self, phi: np.ndarray, z: np.ndarray):
        """Drop constant feature columns (warning), add the bias column, choose alpha and sigma^2 by
        the evidence on the standardised targets z and set the posterior (module docstring)."""
        if not np.all(np.isfinite(phi)):
            raise ValueError("the features are not finite (NaN/inf): the network diverged or X holds extreme values")
        p = phi.shape[1]
        if p < 1:
            raise ValueError("the feature layer has no units (p = 0)")
        dead = np.flatnonzero(np.ptp(phi, axis=0) == 0)
        if dead.size == p:
            raise ValueError(f"all {p} feature units are constant on the training data (dead ReLUs): the last layer "
                             "has no features; change random_state, lower lr or use activation='gelu'")
        if dead.size:
            warnings.warn(f"{dead.size} of {p} feature units are constant on the training data (dead ReLUs: indices "
                          f"{dead.tolist()}); they are dropped from the last-layer Laplace", RuntimeWarning,
                          stacklevel=3)
        self.n_features_ = int(p)
        self.dead_features_ = dead
        self.feature_mask_ = np.ones(p, dtype=bool)
        self.feature_mask_[dead] = False
        design = self._design(phi)
        alpha_set, noise_set = self._hyper()
        noise_std = noise_set if isinstance(noise_set, str) else noise_set / self.y_scale_**2
        alpha, sigma2, logev = maximise_evidence(design, z, alpha_set, noise_std)
        self.prior_precision_ = float(alpha)
        self.noise_var_ = float(sigma2 * self.y_scale_**2)
        self._noise_std = float(sigma2)
        self.log_marginal_likelihood_ = float(logev)
        self.coef_, self.posterior_precision_ = blr_posterior(design, z, alpha, sigma2)
        self._chol = _cholesky(self.posterior_precision_)
        return self

    def _design(self, phi: np.ndarray) -> np.ndarray:
        """[phi[:, kept], 1], (N, M)."""
        phi = phi[:, self.feature_mask_]
        return np.concatenate([phi, np.ones((phi.shape[0], 1))], axis=1)

    # -------------------------------------------------------------- predict
    def features(self, X) -> np.ndarray:
        """phi(X) (N, p) of the network (standardised X) or of the wrapped model's feature layer."""
        check_fitted(self, ["coef_"])
        if self.feature_source_ == "wrapped":

            _check_finite_input(X)
            phi = layer_features(self.model_, self._feature_layer_arg, X, batch_size=self._wrap_batch).numpy()
            if phi.shape[1] != self.n_features_:
                raise ValueError(f"the feature layer gives {phi.shape[1]} units at X, but the model was wrapped with "
                                 f"{self.n_features_}")
            if not np.all(np.isfinite(phi)):
                raise ValueError("the features at X are not finite (NaN/inf)")
            return phi
        return self._network_features(self._standardise(X))

    def predict_distribution(self, X) -> Normal:
        """N(y_mean + y_scale phi^T m, y_scale^2 (phi^T A^{-1} phi + sigma^2)) per input, user units;
        epistemic_var = y_scale^2 phi^T A^{-1} phi, aleatoric_var = noise_var_."""
        design = self._design(self.features(X))
        mean = design @ self.coef_ * self.y_scale_ + self.y_mean_
        v = solve_triangular(self._chol, design.T, lower=True)
        epistemic = np.sum(v * v, axis=0) * self.y_scale_**2
        aleatoric = np.full(mean.shape, self.noise_var_)
        return Normal(mean, epistemic + aleatoric, epistemic_var=epistemic, aleatoric_var=aleatoric)

    # -------------------------------------------------------------- persistence
    def _blr_tensors(self) -> dict[str, torch.Tensor]:
        return {"blr.coef": torch.as_tensor(self.coef_), "blr.precision": torch.as_tensor(self.posterior_precision_),
                "blr.feature_mask": torch.as_tensor(self.feature_mask_.astype(np.int64))}

    def _blr_fitted(self) -> dict:
        return dict(feature_source=self.feature_source_, prior_precision=self.prior_precision_,
                    noise_var=self.noise_var_, noise_var_standardised=self._noise_std,
                    log_marginal_likelihood=self.log_marginal_likelihood_, n_features=self.n_features_)

    def _restore_blr(self, tensors: dict, fitted: dict) -> None:
        self.coef_ = tensors["blr.coef"].double().numpy().copy()
        self.posterior_precision_ = tensors["blr.precision"].double().numpy().copy()
        self.feature_mask_ = tensors["blr.feature_mask"].numpy().astype(bool)
        self.n_features_ = int(fitted["n_features"])
        self.dead_features_ = np.flatnonzero(~self.feature_mask_)
        m = int(self.feature_mask_.sum()) + 1
        if self.feature_mask_.shape != (self.n_features_,) or self.coef_.shape != (m,) or \
                self.posterior_precision_.shape != (m, m):
            raise RuntimeError(f"inconsistent tensor shapes: {self.n_features_} features, mask "
                               f"{self.feature_mask_.shape}, coef {self.coef_.shape}, precision "
                               f"{self.posterior_precision_.shape}")
        self.prior_precision_ = fitted_number(fitted, "prior_precision", positive=True)
        self.noise_var_ = fitted_number(fitted, "noise_var", positive=True)
        self._noise_std = fitted_number(fitted, "noise_var_standardised", positive=True)
        self.log_marginal_likelihood_ = fitted_number(fitted, "log_marginal_likelihood")
        self._chol = _cholesky(self.posterior_precision_)

    def _network_tensors(self) -> dict[str, torch.Tensor]:
        return {**super()._network_tensors(), **self._blr_tensors()}

    def _fitted_scalars(self) -> dict:
        return self._blr_fitted()

    def _restore_network(self, tensors, fitted, s, n_features):
        super()._restore_network(tensors, fitted, s, n_features)
        self._restore_blr(tensors, fitted)

    def _state(self) -> tuple[dict[str, torch.Tensor], dict]:
        """The network's state (`_MLPRegressor._state`) and the BLR posterior (``blr.*``); for a
        wrapped model, the BLR posterior and y's scaling only: its torch module is not written
        (``load(path, model=...)`` takes it back)."""
        check_fitted(self, ["coef_"])
        if self.feature_source_ != "wrapped":
            return super()._state()
        tensors = self._blr_tensors()
        tensors.update({k: torch.as_tensor(np.float64(getattr(self, k + "_"))) for k in ("y_mean", "y_scale")})
        fitted = dict(**self._blr_fitted(), feature_layer=self.feature_layer_, feature_layer_arg=self._feature_layer_arg,
                      batch_size=int(self._wrap_batch), n_train=int(self.n_train_))
        return tensors, {"params": io.json_params(self), "fitted": fitted}

    @classmethod
    def load(cls, path, *, device=None, model=None) -> LastLayerLaplaceRegressor:
        """`DubitoEstimator.load`; a wrapped model needs its torch module again: ``load(path, model=m)``."""
        if model is not None and not isinstance(model, torch.nn.Module):
            raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__}")
        return super().load(path, device=device, model=model)

    @classmethod
    def _from_state(cls, tensors: dict, settings: dict, *, device=None, where: str = "", model=None):
        fitted = settings["fitted"]
        source = fitted.get("feature_source", "network")
        if source != "wrapped":
            if model is not None:
                raise ValueError(f"{where} holds a network trained by fit, not a wrapped model: do not pass model=")
            est = super()._from_state(tensors, settings, device=device, where=where)
            est.feature_source_ = "network"
            return est
        if model is None:
            raise ValueError(f"{where} holds a wrapped model (feature layer {fitted['feature_layer']!r}); its torch "
                             "module is not saved: pass it as load(path, model=your_model)")

        est = cls(**io.params_from_json(settings["params"], device=device))
        name, _, _ = find_feature_layer(model, fitted["feature_layer_arg"])
        if name != fitted["feature_layer"]:
            raise ValueError(f"{where} was wrapped on feature layer {fitted['feature_layer']!r}, but the model passed "
                             f"resolves it to {name!r}: pass the same architecture")
        est.model_, est.feature_layer_, est._feature_layer_arg = model, name, fitted["feature_layer_arg"]
        est._wrap_batch = int(fitted["batch_size"])
        est.feature_source_ = "wrapped"
        est.y_mean_, est.y_scale_ = float(tensors["y_mean"]), float(tensors["y_scale"])
        est.n_train_ = int(fitted["n_train"])
        est._restore_blr(tensors, fitted)
        return est


def _check_finite_input(X) -> None:
    """A numpy array or a floating tensor X with NaN/inf: one ValueError (a DataLoader is checked
    through its features)."""
    if isinstance(X, torch.Tensor) and X.is_floating_point():
        if not bool(torch.isfinite(X).all()):
            raise ValueError("X holds NaN or inf")
    elif isinstance(X, np.ndarray) and np.issubdtype(X.dtype, np.floating) and not np.all(np.isfinite(X)):
        raise ValueError("X holds NaN or inf")


def _check_targets(y: np.ndarray, n: int) -> np.ndarray:
    """y as a float64 (n,) array: finite, not constant, n >= 2."""
    y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1 or y.shape[0] != n:
        raise ValueError(f"y must have shape ({n},) (one target per row of X), got {y.shape}")
    if not (np.issubdtype(y.dtype, np.number) or y.dtype == bool):
        raise ValueError(f"y must be numeric, got dtype {y.dtype}")
    y = y.astype(np.float64)
    if not np.all(np.isfinite(y)):
        raise ValueError("y holds NaN or inf")
    if n < MIN_SAMPLES:
        raise ValueError(f"the last-layer Laplace needs at least {MIN_SAMPLES} rows, got {n}")
    if np.ptp(y) == 0:
        raise ValueError("y is constant: the targets are standardised by their standard deviation")
    return y
