r"""KFAC Laplace approximation, post hoc on any trained torch classifier ("laplace_cdp", "laplace_mdp").

Spec ``shared/specs/classification-thesis.md`` §2.7 ("the thesis" = Feng 2019 §2.3; [RBB18] =
Ritter, Botev & Barber, "A Scalable Laplace Approximation for Neural Networks", ICLR 2018;
[MG15] = Martens & Grosse, "Optimizing Neural Networks with Kronecker-factored Approximate
Curvature", ICML 2015).

Model. A trained classifier f(x; ω) returning logits, p(y | x, ω) = softmax f(x; ω) (eq. 2.1), at
its MAP weights ω*. Laplace: ω ~ N(ω*, H^{-1}) with H ≈ N F̂ + τ I (eq. 2.34), F̂ the Fisher.

The curvature and the posterior (`dubito.classification.kfac`, where the formulas are): for each
chosen ``nn.Linear`` layer the Kronecker factors A = E[a a^T] of its inputs and G = E[g g^T] of the
gradients at its outputs, with the labels of G from the model (``fisher="sampled"``, default, or
``"exact"``) or the data (``"empirical"``), and the matrix-normal posterior
vec_row(θ) ~ N(vec_row(θ*), (Ḡ ⊗ Ā)^{-1}), Ā = √s A + δ I, Ḡ = √s G + δ I, with s = ``scale`` and
δ = √τ (``damping_mode="sqrt"``, eq. 2.39) or δ = τ (``"direct"``), τ = ``damping`` (alias
``prior_precision``). Weights are sampled through Cholesky factors of Ā and Ḡ, layer by layer; the
T weight samples of one call are shared by all inputs.

Prediction: T = ``n_samples`` forward passes with sampled weights, p̄ = (1/T) Σ_t softmax f(x;
ω_t) (`ClassPredictive.from_logits`). The passes are **batched**: each input is repeated T times
along the batch (pass-major, row t B + b) at the first sampled layer (or dropout layer), so the
deterministic part before it (e.g. a convolutional backbone) runs once, and each sampled layer
applies its T weight samples in one batched matmul. The model's parameters are never written:
the sampled layers' ``forward`` is overridden for the call and removed afterwards (also on
error), with every module's train/eval mode restored.

Dropout (spec §2.7 [R]): off (evaluation mode) while computing A and G, always. At prediction
off by default (inverted-dropout weights are the mean network); ``mc_dropout=True`` keeps the
dropout layers stochastic (ours and ``nn.Dropout``; `dubito.nn.concrete_dropout.mc_mode`),
BatchNorm in evaluation mode, one dropout mask per pass and input.

Prior precision by the marginal likelihood (``prior_precision="marglik"``, the default; Immer et
al., ICML 2021; laplace-torch's ``optimize_prior_precision(method="marglik")``; MacKay 1992): τ
maximises the Laplace evidence of the sampled layers' weights (`dubito.classification.kfac`).
``prior_precision_`` records the chosen τ (δ = √τ in "sqrt" mode, δ = τ in "direct" mode),
``log_marginal_likelihood_`` its evidence (None when fit saw no labels: the log-likelihood term
needs them, the choice of τ does not) and ``log_marginal_likelihood(tau)`` evaluates it at any τ.

Defaults and sources. laplace-torch's (Daxberger et al., "Laplace Redux", NeurIPS 2021): the last
``nn.Linear`` only (``layers="last"``, its ``subset_of_weights="last_layer"``), the untempered
likelihood (``scale="n"``: s = N, the number of examples seen by ``fit``) and τ by the marginal
likelihood (``prior_precision="marglik"``). Measured on sklearn's digits (1200 training / 597 test
rows, a 64-64-64-10 ReLU MLP, Adam, batch 32, 3 seeds, T = 50; ECE with 15 bins): trained 100 epochs
with weight decay 1e-4, the plain network has ECE 0.019 (NLL 0.113), these defaults 0.019 (NLL
0.111; τ = 3.4-3.6), the former defaults (every layer, s = 1, τ = 15) 0.21 (NLL 0.33), every layer
with s = N and τ by the evidence 0.17 (NLL 0.29), and every layer with s = 1 and τ by the evidence
fails (accuracy 0.32: the evidence of a likelihood tempered to one example's worth picks a
prior-dominated posterior; on the last layer alone s = 1 gives ECE 0.040). Trained 10 epochs
without weight decay the plain network is underconfident (ECE 0.064, mean confidence 0.89 at
accuracy 0.95) and the defaults keep it so (0.068; τ = 7.3-7.5; the former defaults: 0.43): a
Laplace posterior adds spread, it cannot sharpen. The thesis's
values (§4.2.4, chosen over a grid on validation): every head FC layer (``layers=4`` for
`build_network`'s "cnn", spec §2.7 [R]), ``scale`` = 1, ``damping`` = 15; spec §2.7 gives the grid s ∈
{1, 10, 100, 1e3, N}, d ∈ {0.1, 1, 5, 10, 15, 20, 50, 100}; the thesis experiment passes them all
explicitly. T = 50 (spec §2.7 [R]). ``layers=None`` takes every ``nn.Linear``, ``layers=k`` the
last k. ``nn.Conv2d`` and other layer types are refused: the spec puts Laplace on the head's FC
layers only.

Scale of the factors (what s = 1 means). Here A and G are means over the examples, so s = 1 makes
the precision that of about one example: with τ = 15 every weight of a wide layer gets a prior-like
standard deviation of about 15^{-1/2} ≈ 0.26 (measured: on a Fashion-MNIST CNN's 4 head layers,
1568 -> 256 -> 256 -> 256 -> 10, accuracy falls from 0.71 to 0.12; on the last layer alone, or on
an 8x8-digits MLP, little changes). [C] The KFAC of DLR-RM/curvature (``KFAC.update``, a library
co-written by the thesis's author; the thesis does not name its code) instead *adds* each batch's
mean factor, so its factors are ≈ n_batches · A and n_batches · G: its s corresponds to
s · n_batches² here. Tune s on validation data (spec §2.7's grid includes s = N: ``scale="n"``).

Persistence (no pickle): ``la.save(path)`` writes one ``.safetensors`` file and
``KFACLaplace.load(path)`` rebuilds the posterior from it, predicting bit-identically; a posterior
over a torch module needs ``load(path, network=module_or_callable)``
(`dubito.classification.laplace_io`). The estimator base is `dubito._estimator.DubitoClassifier`
(``save`` / ``load`` through ``_state`` / ``_from_state``).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from dubito._estimator import DubitoClassifier, seeds_from
from dubito._estimator import check_device as _check_device
from dubito._validation import (
    check_bool,
    check_choice,
    check_fitted,
    check_float,
    check_int,
)
from dubito.classification.kfac import (
    jittered_cholesky,
    kron_evidence,
    kronecker_factors,
    sample_matrix_normal,
)
from dubito.classification.laplace_inputs import (
    _is_array_like,
    _is_estimator,
    batches,
    n_batches,
)
from dubito.classification.laplace_io import laplace_from_state, laplace_state
from dubito.classification.laplace_layers import _Layer, sampled, select_layers
from dubito.nn.concrete_dropout import MCNoise, dropout_modules
from dubito.nn.pilotnet import check_image_shape
from dubito.predictive.classes import ClassPredictive

__all__ = ["KFACLaplace", "jittered_cholesky", "sample_matrix_normal"]

FISHERS = ("sampled", "exact", "empirical")
DAMPING_MODES = ("sqrt", "direct")
EXPANDS = ("layer", "input")

#: τ, the thesis's "damping" (§4.2.4): the old default, now passed explicitly by the thesis experiment.
DEFAULT_DAMPING = 15.0

#: ``prior_precision`` (or ``damping``) = this: τ by the marginal likelihood (module docstring); the default.
MARGLIK = "marglik"


class KFACLaplace(DubitoClassifier):
    r"""KFAC Laplace approximation post hoc on a trained classifier (module docstring).

    Parameters (sources in the module docstring)
    ----------
    model : torch nn.Module returning logits (B, K), or a fitted `MCDropoutClassifier`
        Used in place, never copied; its parameters are never changed (``fit`` moves it to
        ``device``). An `MCDropoutClassifier` brings its network (``net_``) and its input
        standardisation and ``image_shape``.
    layers : "last" (default, laplace-torch's), None, int k, or a list of module names
        The ``nn.Linear`` layers that get a posterior: the last one, all (None), the last k, or by
        name (``dict(model.named_modules())``; a dropout layer of ours wrapping an ``nn.Linear``
        stands for it). Other layer types (``nn.Conv2d``, ...) raise ValueError.
    prior_precision : "marglik" (default) or float >= 0
        τ. "marglik": chosen by the Laplace evidence (module docstring; Immer et al. 2021, as
        laplace-torch's ``optimize_prior_precision(method="marglik")``).
    damping : None (default) or float >= 0 (or "marglik")
        The thesis's name for τ (§4.2.4 uses 15, the old default); when set it is τ, in place of
        ``prior_precision``'s default (a different number in both raises ValueError).
    scale : float > 0 or "n", default "n" (the number of examples seen by fit: the untempered likelihood,
        laplace-torch's temperature 1); the thesis's is 1 (§4.2.4).
    damping_mode : "sqrt" (δ = √τ, eq. 2.39, default) or "direct" (δ = τ).
    fisher : "sampled" (default), "exact" or "empirical" (the thesis's eq. 2.32).
    n_samples : int, default 50
        T, weight samples per prediction.
    mc_dropout : bool, default False
        Keep dropout stochastic at prediction (never while computing the factors).
    image_shape : (C, H, W), optional
        Reshape the rows of X (flattened channel-first images) before the model.
    batch_size, predict_batch_size : 256, 256. Rows per fit forward; rows of X per prediction
        forward (each becomes T rows).
    expand : "layer" (default: repeat the rows at the first sampled or dropout layer) or "input"
        (repeat the input; for models whose sampled layers sit in one of several branches).
    device : "cpu" or a CUDA device; random_state : seed (None, int); progress : rich bar in fit.

    Fitted attributes: ``layers_`` (names), ``A_``, ``G_`` (dicts of float64 factors E[a a^T],
    E[g g^T]), ``n_fit_`` (examples seen), ``scale_``, ``damping_`` = ``prior_precision_`` (τ, given
    or chosen), ``delta_`` (what is added to the diagonals), ``log_likelihood_`` (Σ log p(y | x, θ*)
    over the fit data, None without labels), ``log_marginal_likelihood_`` (the evidence at τ, None
    without labels), ``classes_``, ``n_classes_``, ``n_features_in_``, ``predict_seed_``.
    """

    def __init__(self, model=None, layers="last", prior_precision=MARGLIK, scale="n", damping=None, damping_mode="sqrt",
                 fisher="sampled", n_samples=50, mc_dropout=False, image_shape=None, batch_size=256,
                 predict_batch_size=256, expand="layer", device="cpu", random_state=None, progress=False):
        self.model = model
        self.layers = layers
        self.prior_precision = prior_precision
        self.scale = scale
        self.damping = damping
        self.damping_mode = damping_mode
        self.fisher = fisher
        self.n_samples = n_samples
        self.mc_dropout = mc_dropout
        self.image_shape = image_shape
        self.batch_size = batch_size
        self.predict_batch_size = predict_batch_size
        self.expand = expand
        self.device = device
        self.random_state = random_state
        self.progress = progress

    # ------------------------------------------------------------------ settings
    def _settings(self) -> dict:
        for name in ("mc_dropout", "progress"):
            check_bool(getattr(self, name), name)
        taus = {}
        for name in ("prior_precision", "damping"):
            v = getattr(self, name)
            if isinstance(v, str):
                if v != MARGLIK:
                    raise ValueError(f"{name} must be a number >= 0 or {MARGLIK!r} (by the marginal likelihood), "
                                     f"got {v!r}")
                taus[name] = v
            elif v is not None:
                taus[name] = check_float(v, name, min_value=0.0)
        if isinstance(taus.get("damping"), float) and isinstance(taus.get("prior_precision"), float) and \
                taus["damping"] != taus["prior_precision"]:
            raise ValueError(f"damping ({self.damping}) and prior_precision ({self.prior_precision}) are two names "
                             "for the same τ of eq. 2.39; set one of them")
        tau = taus.get("damping", taus.get("prior_precision", MARGLIK))
        if isinstance(self.scale, str):
            if self.scale.lower() != "n":
                raise ValueError(f"scale must be a positive number or 'n' (the number of fit examples), "
                                 f"got {self.scale!r}")
            scale = "n"
        else:
            scale = check_float(self.scale, "scale", strictly_positive=True)
        return {
            "tau": tau, "scale": scale,
            "damping_mode": check_choice(self.damping_mode, "damping_mode", DAMPING_MODES),
            "fisher": check_choice(self.fisher, "fisher", FISHERS),
            "n_samples": check_int(self.n_samples, "n_samples", min_value=1),
            "batch_size": check_int(self.batch_size, "batch_size", min_value=1),
            "predict_batch_size": check_int(self.predict_batch_size, "predict_batch_size", min_value=1),
            "expand": check_choice(self.expand, "expand", EXPANDS),
            "device": _check_device(self.device),
            "image_shape": None if self.image_shape is None else check_image_shape(self.image_shape),
        }

    def _network(self) -> nn.Module:
        m = self.model
        if isinstance(m, nn.Module):
            return m
        if _is_estimator(m):
            return m.net_
        if m is not None and hasattr(m, "get_params") and not hasattr(m, "net_"):
            raise ValueError(f"model {type(m).__name__} is not fitted (it has no net_); fit it first")
        raise ValueError(f"model must be a torch nn.Module returning logits or a fitted MCDropoutClassifier, "
                         f"got {type(m).__name__}")

    # ------------------------------------------------------------------ fit
    def fit(self, X, y=None):
        """Accumulate A and G of every chosen layer over the data (`kronecker_factors`) and factor the
        damped factors. X: (n, p) with labels y (0..K-1), or an iterable of batches (x, y) (y may be
        left out unless ``fisher="empirical"``). Dropout is off; the model's parameters and modes are
        unchanged afterwards."""
        s = self._settings()
        net = self._network()
        layers = select_layers(net, self.layers)
        if self.mc_dropout and not dropout_modules(net):
            raise ValueError(f"mc_dropout=True but the model ({type(net).__name__}) has no dropout layers "
                             "(nn.Dropout, ConcreteDropout, MultiDrop, BernoulliDropout)")
        if y is None and _is_array_like(X):
            raise ValueError("fit(X, y) needs the labels y with an array X (pass an iterable of (x, y) batches "
                             "otherwise)")
        dev = s["device"]
        for attr in ("n_features_in_", "feature_names_in_"):
            if hasattr(self, attr):
                delattr(self, attr)
        net.to(dev)
        params = list(net.parameters())
        if not params:
            raise ValueError("the model has no parameters")
        self._dtype = params[0].dtype
        self.image_shape_ = s["image_shape"]
        fit_seed, self.predict_seed_ = seeds_from(self.random_state, 2)
        gen = torch.Generator(device=dev).manual_seed(fit_seed % (2**63))
        factors, n_seen, k, loglik = kronecker_factors(net, params, layers, batches(self, X, y, s, fit=True),
                                                       s["fisher"], gen, dev, progress=self.progress,
                                                       total=n_batches(X, y, s))
        self.n_fit_ = n_seen
        self.classes_ = np.arange(k)
        self.n_classes_ = k
        self.scale_ = float(n_seen) if s["scale"] == "n" else s["scale"]
        self.log_likelihood_ = loglik
        self._evidence = kron_evidence(factors, layers, self.scale_, loglik, n_seen)
        sqrt_mode = s["damping_mode"] == "sqrt"
        if s["tau"] == MARGLIK:
            self.delta_ = self._evidence.argmax()
            tau = self.delta_**2 if sqrt_mode else self.delta_
        else:
            tau = s["tau"]
            self.delta_ = float(np.sqrt(tau)) if sqrt_mode else tau
        self.damping_ = self.prior_precision_ = float(tau)
        self.log_marginal_likelihood_ = (self._evidence(self.delta_) if loglik is not None and self.delta_ > 0
                                         else None)
        self._set_factors(layers, factors)
        return self

    # ------------------------------------------------------------------ marginal likelihood
    def log_marginal_likelihood(self, prior_precision: float | None = None) -> float:
        r"""The Laplace evidence log p(D | τ) (`dubito.classification.kfac`) at ``prior_precision`` =
        τ > 0 (None: the fitted τ), with the fitted factors, scale, damping_mode and MAP weights.
        Needs the labels at fit (the log-likelihood term)."""
        check_fitted(self, ["layers_"])
        if self.log_likelihood_ is None:
            raise ValueError("fit saw no labels, so the log-likelihood term of the evidence is unknown; fit on (x, y) "
                             "batches or pass y")
        tau = self.damping_ if prior_precision is None else check_float(prior_precision, "prior_precision",
                                                                         strictly_positive=True)
        if tau <= 0:
            raise ValueError("the evidence needs a prior precision > 0 (τ = 0 is an improper prior)")
        sqrt_mode = check_choice(self.damping_mode, "damping_mode", DAMPING_MODES) == "sqrt"
        delta = float(np.sqrt(tau)) if sqrt_mode else float(tau)
        if getattr(self, "_evidence", None) is None:
            factors = [(self.A_[lay.name], self.G_[lay.name]) for lay in self._layers]
            self._evidence = kron_evidence(factors, self._layers, self.scale_, self.log_likelihood_, self.n_fit_)
        return self._evidence(delta)

    def _set_factors(self, layers: list[_Layer], factors: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
        """``A_``, ``G_``, ``layers_`` and each layer's Cholesky factors of Ā = √s A + δ I and
        Ḡ = √s G + δ I (module docstring); ``scale_`` and ``delta_`` must be set. Shared by
        ``fit`` and ``load``, so a loaded posterior has the same factors."""
        self.A_, self.G_ = {}, {}
        self._layers = layers
        root = np.sqrt(self.scale_)
        for lay, (a, g) in zip(layers, factors):
            self.A_[lay.name], self.G_[lay.name] = a, g
            eye_a = torch.eye(a.shape[0], dtype=a.dtype, device=a.device)
            eye_g = torch.eye(g.shape[0], dtype=g.dtype, device=g.device)
            lay.chol_a = jittered_cholesky(root * a + self.delta_ * eye_a)
            lay.chol_g = jittered_cholesky(root * g + self.delta_ * eye_g)
        self.layers_ = [lay.name for lay in layers]
        self._draw_cache = None

    # ------------------------------------------------------------------ posterior
    def posterior_precision(self, layer: str | None = None) -> torch.Tensor:
        """The dense precision Ḡ ⊗ Ā of one layer (default: the only/last one) over vec_row([W | b]);
        for tests and small layers ((out·(in+1))² entries)."""
        lay = self._layer(layer)
        a = lay.chol_a @ lay.chol_a.T
        g = lay.chol_g @ lay.chol_g.T
        return torch.kron(g, a)

    def _layer(self, name):
        check_fitted(self, ["layers_"])
        if name is None:
            return self._layers[-1]
        for lay in self._layers:
            if lay.name == name:
                return lay
        raise ValueError(f"no sampled layer named {name!r}; the sampled layers are {self.layers_}")

    def sample_weights(self, n_samples: int | None = None, *, random_state=None) -> dict[str, torch.Tensor]:
        """T draws of each sampled layer's [W | b] (T, out, in+1) (`sample_matrix_normal`), by layer name."""
        check_fitted(self, ["layers_"])
        t = check_int(self.n_samples if n_samples is None else n_samples, "n_samples", min_value=1)
        seed = self.predict_seed_ if random_state is None else seeds_from(random_state, 1)[0]
        dev = self._layers[0].chol_a.device
        gen = torch.Generator(device=dev).manual_seed(seed % (2**63))
        return {lay.name: sample_matrix_normal(lay.theta, lay.chol_g, lay.chol_a, t, generator=gen)
                for lay in self._layers}

    # ------------------------------------------------------------------ predict
    def sample_logits(self, X, *, n_samples: int | None = None, random_state=None, batched: bool = True) -> np.ndarray:
        """Logits of the T weight samples at X, (T, N, K) in the model's dtype (module docstring).

        X: (n, p) rows or an iterable of batches (x or (x, y)). ``batched=False`` runs a loop of T
        forwards with the same weight draws and dropout noise source (the reference of the batched
        form). Seeded by ``random_state`` (None -> ``predict_seed_``), so repeated calls agree. The
        draws of the last (T, seed) are kept, so repeated calls (e.g. one object at a time) do not
        redraw them: drawing costs O(T·out·(in+1)²) per layer (e.g. ~0.07 s per sample for a
        1569 x 256 layer on one CPU thread), which would dominate small queries."""
        check_fitted(self, ["layers_"])
        s = self._settings()
        t = check_int(self.n_samples if n_samples is None else n_samples, "n_samples", min_value=1)
        seed = self.predict_seed_ if random_state is None else seeds_from(random_state, 1)[0]
        w_seed, d_seed = seeds_from(seed, 2)
        key = (t, w_seed)
        cache = getattr(self, "_draw_cache", None)
        if cache is not None and cache[0] == key:
            thetas = cache[1]
        else:
            thetas = self.sample_weights(t, random_state=w_seed)
            self._draw_cache = (key, thetas)
        net = self._network()
        dev = self._layers[0].chol_a.device
        dgen = torch.Generator(device=dev).manual_seed(d_seed % (2**63))
        # with mc_dropout: pass t's dropout masks are drawn once and shared by every row and chunk, so
        # a row's logits do not depend on the rest of X (PyTorch's nn.Dropout still draws per row)
        noise = MCNoise(t) if self.mc_dropout else None
        out = []
        devices = [dev.index or 0] if dev.type == "cuda" else []
        with torch.random.fork_rng(devices=devices), torch.no_grad():
            torch.manual_seed(d_seed % (2**63))  # PyTorch's nn.Dropout uses the global generator
            for xb, _ in batches(self, X, None, s, fit=False):
                b = xb.shape[0]
                if batched:
                    with sampled(net, self._layers, thetas, t, b, s["expand"], dgen, noise, mc_dropout=self.mc_dropout):
                        if noise is not None:
                            noise.begin()
                        x_in = xb.repeat(t, *([1] * (xb.dim() - 1))) if s["expand"] == "input" else xb
                        logits = net(x_in)
                    if logits.shape[0] != t * b:
                        raise ValueError(f"the model returned {logits.shape[0]} rows for {b} inputs x {t} samples: "
                                         "its output does not pass through a sampled layer")
                    out.append(logits.reshape(t, b, -1).cpu())
                else:
                    rows = []
                    for i in range(t):
                        one = {name: th[i : i + 1] for name, th in thetas.items()}
                        with sampled(net, self._layers, one, 1, b, "layer", dgen, noise, mc_dropout=self.mc_dropout):
                            if noise is not None:
                                noise.begin(pass_index=i)
                            rows.append(net(xb))
                    out.append(torch.stack(rows).cpu())
        if not out:
            return np.zeros((t, 0, self.n_classes_), dtype=np.float32)
        return torch.cat(out, dim=1).numpy()

    def predict_distribution(self, X, *, n_samples: int | None = None, random_state=None) -> ClassPredictive:
        """`ClassPredictive` from the T weight samples at X (module docstring)."""
        return ClassPredictive.from_logits(self.sample_logits(X, n_samples=n_samples, random_state=random_state))

    def predict_proba(self, X) -> np.ndarray:
        """p̄(y | x), (N, K): the mean of the T samples' softmax."""
        return self.predict_distribution(X).probs

    def map_logits(self, X) -> np.ndarray:
        """Logits of the model at its MAP weights (evaluation mode), (N, K)."""
        check_fitted(self, ["layers_"])
        s = self._settings()
        net = self._network()
        modes = {m: m.training for m in net.modules()}
        out = []
        try:
            net.eval()
            with torch.no_grad():
                for xb, _ in batches(self, X, None, s, fit=False):
                    out.append(net(xb).cpu())
        finally:
            for m, md in modes.items():
                m.training = md
        return torch.cat(out).numpy() if out else np.zeros((0, self.n_classes_), dtype=np.float32)

    # ------------------------------------------------------------------ persistence
    def _state(self) -> tuple[dict[str, torch.Tensor], dict]:
        """(tensors, settings) of the fitted posterior and its model (`laplace_state`)."""
        return laplace_state(self)

    @classmethod
    def _from_state(cls, tensors: dict, settings: dict, *, device=None, where: str = "",
                    network=None) -> KFACLaplace:
        """The posterior rebuilt from `_state`'s output (`load`; `laplace_from_state`). ``network``
        (an nn.Module or a callable returning one) is needed for a file whose model was a torch module."""
        return laplace_from_state(cls, tensors, settings, device=device, where=where, network=network)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = False  # seeded: repeated calls agree
        return tags
