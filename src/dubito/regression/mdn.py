r"""Mixture density network (Bishop 1994), the MDN benchmark of the IC-NLM paper.

Bishop, C. M., "Mixture Density Networks" (Aston NCRG/94/004, 1994); benchmark settings from
Hoffmann & Klein (spec ``shared/specs/icnlm.md`` §3.3 [P/C], §7.13).

An MLP outputs, for each x, K mixture weights (softmax), means and variances
(softplus + ``variance_floor``), `dubito.nn.mdn.MixtureDensityNet`; it is trained on the
standardised y by the mixture negative log-likelihood (logsumexp-stable,
`dubito.nn.mdn.mixture_nll`) with Adam. The predictive is the fitted mixture itself,

    p(y | x) = sum_k pi_k(x) N(y; mu_k(x), sigma_k^2(x))      (user units),

returned as a `GaussianMixture` (subclass `MDNMixture`) whose mean is sum_k pi_k mu_k (the
analytic mean, spec §7.13, not the authors' sampled one).

Variance split: an MDN models the noise distribution only; it has no estimate of its own
model (epistemic) uncertainty. So ``aleatoric_var`` is the whole predictive variance --
including the spread between components, which here is multimodal noise, not disagreement
between models -- and ``epistemic_var`` is None ("not known"). A plain `GaussianMixture`
would report the between-component spread as epistemic, which is wrong for an MDN.

Collapse: the mixture likelihood is unbounded when a component's variance shrinks onto a
single training point. ``variance_floor`` (standardised units, default 1e-4, i.e. component
sd >= 1 % of the target's sd; our choice) bounds that gain to
-1/2 log(2 pi 1e-4) ~ 3.7 nats per point; it also keeps float32 training finite.
"""

from __future__ import annotations

import numpy as np
import torch

from dubito._validation import check_choice, check_float, check_int
from dubito.early_stopping import DEFAULT_PATIENCE, DEFAULT_VALIDATION_FRACTION
from dubito.nn.mdn import MixtureDensityNet, mixture_nll
from dubito.predictive.mixture import GaussianMixture
from dubito.regression.deterministic import _MLPRegressor
from dubito.search_space import Choice, Float
from dubito.training_loop import NAIVE_GAUSSIAN_NLL
from dubito.variance_scale import AUTO_VARIANCE_SCALINGS, fit_variance_scale, scale_mixture, scales_on

__all__ = ["MDNMixture", "MixtureDensityRegressor"]


class MDNMixture(GaussianMixture):
    """A `GaussianMixture` whose whole variance is aleatoric (an MDN's predictive).

    ``aleatoric_var`` = ``var`` (within- plus between-component); ``epistemic_var`` = None.
    Everything else (densities, CDF, quantiles, CRPS, sampling) is the mixture's.
    """

    @property
    def epistemic_var(self):
        return None

    @property
    def aleatoric_var(self) -> np.ndarray:
        return self.var

    def _subset(self, index: np.ndarray) -> MDNMixture:
        sub = super()._subset(index)
        return MDNMixture._from_arrays(sub.weights, sub.means, sub.variances, sub.noise_variances)

    def __repr__(self) -> str:
        return f"MDNMixture(n_inputs={len(self)}, n_components={self.n_components})"


class MixtureDensityRegressor(_MLPRegressor):
    r"""Mixture density network with K Gaussian components; predictive `MDNMixture`.

    See the module docstring for the model, the variance split and the collapse guard.

    Parameters (defaults and their sources)
    ----------
    n_components : int, default 50
        K: "50 Gaussian components" (spec §3.3 [P]; keras-mdn-layer ``MDN(1, 50)`` [C]).
    variance_floor : float, default 1e-4
        Added to every component variance (standardised units); collapse guard, our choice.
    hidden : tuple of int, default (100, 50, 10)
        PilotNet's dense tail (spec §2.2 [C]); the benchmark's trunk is PilotNet.
    activation : default "relu"
        The paper's ReLU [P].
    lr : float, default 2.5e-4
        Adam learning rate (spec §3.3 [C]).
    weight_decay : float, default 0.0
        Coupled L2 (torch convention); none is given for this benchmark.
    batch_size : int, default 32
        Spec §2.2 [C]. More rows than are trained on: refused with a held-out share,
        one full batch when validation_fraction=0.
    epochs : int, default 150
        "up to 150 epochs" (spec §3.3 [C]).
    device : str, default "cpu"
    random_state : None, int or numpy RandomState, default None
        Seeds initialisation and mini-batch order.
    progress : bool, default True
    network : {"mlp", "cnn"}, default "mlp"
        "cnn": the mixture head on a PilotNet trunk (``net_.body``) for flattened channel-first
        images (`dubito.regression.deterministic`), as the benchmark's (spec §3.3 [C]).
    image_shape : None, (C, H, W) or (H, W), default None
        Required with "cnn" (C*H*W = X's columns); X is then scaled by one scalar mean and sd.
    validation_fraction : float in [0, 0.5), default 0.1
        Share of the training rows held out to stop training early on their mixture NLL and keep the
        best epoch (`dubito.early_stopping`; 0.1 is scikit-learn's MLPRegressor default); ``epochs``
        is then the cap. 0: every row, ``epochs`` epochs (the paper's protocol;
        its experiments pass it).
    patience : int, default 20
        Epochs without a better held-out mixture NLL before training stops.
    variance_scaling : {"heldout", "auto", "none"}, default "heldout"
        "heldout": after training, every component variance times one c, the MAP value of the
        held-out rows' NLL under the log-normal prior of `dubito.variance_scale` (`scale_mixture`);
        c = 1 without held-out rows (the paper's protocol). "auto": only from
        ``AUTO_MIN_HELDOUT_ROWS`` (100) held-out rows up. "none": c = 1. Chosen on validation rows
        of the first 3 standard splits (benchmarks/heldout_scale.py, docs/results/mdn-variance-scale.md):
        the NLL fell on all eight sets tried (naval -0.153 ± 0.005, kin8nm -0.066 ± 0.026, energy
        -0.045, yacht -0.040, concrete -0.020; boston, power within 0.01) and coverage@95 moved to
        0.954-0.955 on naval and kin8nm (from 0.992 and 0.903); no threshold was needed (yacht's 23
        held-out rows gained on every split).

    The benchmark's PilotNet trunk also had batch norm and dropout (0.5/0.2) on its dense
    layers (spec §3.3 [C]); ours has neither (no dropout: an MDN is not an MC method; no
    batch norm: `dubito.nn.pilotnet`).

    Fitted attributes
    -----------------
    net_ : MixtureDensityNet (float64; its ``body`` an MLP or PilotNet); loss_curve_ : (epochs,) epoch-mean training NLL
    (standardised units, with the log 2 pi constant); variance_scale_ : float (c; 1 unscaled);
    x_mean_, x_scale_, y_mean_, y_scale_; n_train_; n_features_in_ (and feature_names_in_).
    """

    _description = "MDN"
    _naive_loss = NAIVE_GAUSSIAN_NLL  # its loss is the mixture NLL

    #: What `dubito.tune` searches: the deterministic net's space plus K, from one Gaussian
    #: (a heteroscedastic net) to the benchmark's 50.
    search_space = {
        "lr": Float(1e-4, 1e-2, log=True),
        "weight_decay": Float(1e-7, 1e-2, log=True),
        "n_components": Choice([1, 3, 10, 50]),
        "hidden": Choice([(50,), (100,), (100, 50, 10)]),
    }

    def __init__(self, n_components=50, variance_floor=1e-4, hidden=(100, 50, 10), activation="relu", lr=2.5e-4,
                 weight_decay=0.0, batch_size=32, epochs=150, device="cpu", random_state=None, progress=True,
                 network="mlp", image_shape=None,
                 validation_fraction=DEFAULT_VALIDATION_FRACTION, patience=DEFAULT_PATIENCE,
                 variance_scaling="heldout"):
        self.n_components = n_components
        self.variance_floor = variance_floor
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
        self.variance_scaling = variance_scaling

    def _extra_settings(self) -> dict:
        return dict(
            n_components=check_int(self.n_components, "n_components", min_value=1),
            variance_floor=check_float(self.variance_floor, "variance_floor", strictly_positive=True),
            variance_scaling=check_choice(self.variance_scaling, "variance_scaling", AUTO_VARIANCE_SCALINGS),
        )

    def _after_training(self, Xs, y):
        """The held-out variance scale c (``variance_scaling``); Xs, y are the held-out rows when
        there are any."""
        self.variance_scale_ = 1.0
        n_heldout = len(y) if len(self.validation_curve_) > 0 else 0
        if scales_on(self._settings()["variance_scaling"], n_heldout):
            w, mu, var = self._components(Xs)
            self.variance_scale_ = fit_variance_scale(GaussianMixture(w, mu, var), y, scale=scale_mixture)

    def _fitted_scalars(self):
        return {"variance_scale": self.variance_scale_}

    def _restore_scalars(self, fitted):
        self._restore_variance_scale(fitted)

    def _build_net(self, s, n_features, generator=None, dtype=torch.float32):
        body = self._make_net(s, n_features, 3 * s["n_components"], 0.0, generator, dtype)
        return MixtureDensityNet(n_features, s["hidden"], s["n_components"], s["activation"], s["variance_floor"],
                                 body=body)

    def _loss(self, net, xb, yb, generator):
        return mixture_nll(*net(xb), yb)

    def _validation_loss(self, net, X, y):
        """Held-out mixture NLL (standardised units), the early-stopping criterion."""
        return float(mixture_nll(*net(X), y))

    def fit(self, X, y):
        """Train the MDN on (X, y) by the mixture NLL. Returns self.

        X: (n, p) numeric; y: (n,) numeric, not constant; n >= 2. No NaN/inf.
        """
        return self._fit_net(X, y)

    def predict_components(self, X) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(weights, means, variances) of the mixture at X, each (N, K), user units, float64; the
        variances times ``variance_scale_``."""
        w, mu, var = self._components(self._standardise(X))
        return w, mu, self.variance_scale_ * var

    @torch.no_grad()
    def _components(self, Xs) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The unscaled (weights, means, variances) at standardised rows Xs, user units."""
        K = self.net_.n_components
        parts = [[], [], []]
        for chunk in self._chunks(Xs, copies=3 * K):
            log_w, mu, var = self.net_(chunk)
            for store, value in zip(parts, (log_w.exp(), mu, var)):
                store.append(value.cpu())
        w, mu, var = (torch.cat(p).numpy() for p in parts)
        return w, mu * self.y_scale_ + self.y_mean_, var * self.y_scale_**2

    def predict_distribution(self, X) -> MDNMixture:
        """The fitted mixture sum_k pi_k(x) N(mu_k(x), c sigma_k^2(x)) per input, user units, c =
        ``variance_scale_``."""
        w, mu, var = self.predict_components(X)
        return MDNMixture(w, mu, var)

    def predict(self, X) -> np.ndarray:
        """The analytic predictive mean sum_k pi_k(x) mu_k(x), shape (N,)."""
        w, mu, _ = self.predict_components(X)
        return np.einsum("nk,nk->n", w, mu)
