r"""KFAC Laplace approximation, post hoc on any trained torch classifier ("laplace_cdp", "laplace_mdp").

Spec ``shared/specs/classification-thesis.md`` §2.7 ("the thesis" = Feng 2019 §2.3; [RBB18] =
Ritter, Botev & Barber, "A Scalable Laplace Approximation for Neural Networks", ICLR 2018;
[MG15] = Martens & Grosse, "Optimizing Neural Networks with Kronecker-factored Approximate
Curvature", ICML 2015).

Model. A trained classifier f(x; ω) returning logits, p(y | x, ω) = softmax f(x; ω) (eq. 2.1), at
its MAP weights ω*. Laplace: ω ~ N(ω*, H^{-1}) with H ≈ N F̂ + τ I (eq. 2.34), F̂ the Fisher.

Curvature (eq. 2.37, layer-wise block diagonal, cross-layer blocks dropped). For each chosen
``nn.Linear`` layer s = W a_in + b, with a = [a_in, 1] (the homogeneous 1 when the layer has a
bias) and g = ∂(-log p(y | x)) / ∂s per example,

    A = E_x[a a^T]  ((in+1) x (in+1)),        G = E_x,y[g g^T]  (out x out),
    F̃ = G ⊗ A  for θ = vec_row([W | b])   (torch's row-major flatten of the (out, in+1) matrix,
                                            = the spec's column-stacking of its (in+1) x out W).

For one example this is exact: ∂θ = g ⊗ a, so ∂θ ∂θ^T = (g g^T) ⊗ (a a^T). Over several
examples KFAC replaces E[(g g^T) ⊗ (a a^T)] by E[g g^T] ⊗ E[a a^T] [MG15 §3]; the two agree when
a (or g) is the same for every example, not in general.

The labels y of G (``fisher``):

* ``"sampled"`` (default): the true Fisher, one label y ~ p(y | x, ω*) drawn per input (spec §2.7
  [R], the default of [RBB18]/[MG15]);
* ``"exact"``: the true Fisher with the expectation over y taken exactly,
  G = E_x[Σ_y p(y | x) g_y g_y^T] (K backward passes; spec §2.7: "may use the exact ...");
* ``"empirical"``: the empirical Fisher with the data labels, the thesis's eq. 2.32 (spec §2.7:
  "keep ... behind a flag").

Posterior per layer (eq. 2.39; [RBB18] eq. 8 with N and τ):

    W ~ MN(W*, Ā^{-1}, Ḡ^{-1}),   Ā = √s A + δ I,   Ḡ = √s G + δ I,
    i.e. vec_row(θ) ~ N(vec_row(θ*), (Ḡ ⊗ Ā)^{-1}),

with s = ``scale`` (the "scale of the Kronecker factors", N in eq. 2.39) and δ = √τ
(``damping_mode="sqrt"``, eq. 2.39 read literally, spec §2.7 [R]) or δ = τ (``"direct"``, the
spec's flag), τ = ``damping`` (alias ``prior_precision``: the thesis calls τ a damping, but it
acts as the prior precision, spec pitfall 9). Note (Ḡ ⊗ Ā) ≠ s G ⊗ A + τ I (spec §6.18).

Sampling (spec §2.7): θ_t = θ* + L_G^{-T} E_t L_A^{-1}, E_t an (out, in+1) matrix of i.i.d.
N(0, 1), Ā = L_A L_A^T and Ḡ = L_G L_G^T (Cholesky, jittered if needed; triangular solves,
never an explicit inverse; spec pitfall 15). Then Cov(vec_row θ_t) = Ḡ^{-1} ⊗ Ā^{-1}. Layers
are sampled independently; the T weight samples of one call are shared by all inputs.

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
al., "Scalable Marginal Likelihood Estimation for Model Selection in Deep Learning", ICML 2021;
laplace-torch's ``optimize_prior_precision(method="marglik")``; MacKay 1992). The Laplace evidence
of the sampled layers' weights θ (P numbers, prior N(0, π^{-1} I)) at the MAP θ* is

    log p(D | τ) ≈ (s/N) Σ_n log p(y_n | x_n, θ*) - (π/2) ||θ*||² + (P/2) log π - ½ log det(Ḡ ⊗ Ā),

with π = δ² the prior precision the posterior carries (the constant of its diagonal: τ itself in
"sqrt" mode) and Ḡ ⊗ Ā the precision that is sampled, layer by layer. log det(Ḡ ⊗ Ā) = q log det Ḡ
+ o log det Ā for Ḡ (o x o) and Ā (q x q), and with the eigenvalues a_j of √s A and g_i of √s G
it is Σ_ij log(g_i + δ) + log(a_j + δ) in closed form (laplace-torch's Kronecker log determinant
with ``damping=True``, its form of Ritter et al.'s Ḡ ⊗ Ā; laplace-torch's default is instead
s G ⊗ A + τ I, a posterior this class does not sample). The factor s/N tempers the likelihood as
the curvature s G ⊗ A does (laplace-torch's ``temperature`` = N/s; s = N: the plain likelihood);
the log-likelihood term does not depend on τ. In t = log δ the evidence is strictly concave (-e^{2t}
||θ*||²/2 + P t - ½ Σ log(c + e^t), each term concave), so its maximiser is the one root of the
derivative P - δ² ||θ*||² - ½ Σ_l (q_l Σ_i δ/(g_i+δ) + o_l Σ_j δ/(a_j+δ)), found by Brent's method
(``scipy.optimize.brentq``) on a bracket in δ ∈ [1e-20, 1e20]. ``prior_precision_`` records the
chosen τ (δ = √τ in "sqrt" mode, δ = τ in "direct" mode), ``log_marginal_likelihood_`` its evidence
(None when fit saw no labels: the log-likelihood term needs them, the choice of τ does not) and
``log_marginal_likelihood(tau)`` evaluates it at any τ.

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

Persistence (no pickle): ``la.save(path)`` writes one ``.safetensors`` file (`dubito.io`,
atomically): the factors A and G of each sampled layer (``A.<i>``, ``G.<i>``, in the order of
``layers_``), the model's weights, and as JSON metadata the constructor settings and the fitted
scalars (layer names, N, s, τ, δ, seeds, ...). ``KFACLaplace.load(path)`` rebuilds the Cholesky
factors from A and G exactly as ``fit`` does, so the loaded posterior predicts bit-identically
(same device). A fitted `MCDropoutClassifier` model is saved whole (its ``_state``, under
``model.``) and rebuilt from the file. A torch module is not JSON: its ``state_dict`` is saved
(``net.*``) with its class name, and ``load(path, network=module_or_callable)`` needs the
architecture back (a copy of the module, or the callable's result, gets the saved weights; the
argument is not changed). A corrupted, truncated or foreign file raises one ValueError. The estimator
base is `dubito._estimator.DubitoClassifier` (``save`` / ``load`` through ``_state`` / ``_from_state``).
"""

from __future__ import annotations

import contextlib
import copy
import numbers

import numpy as np
import torch
import torch.nn.functional as F
from scipy.optimize import brentq
from torch import nn

from dubito import io
from dubito._estimator import DubitoClassifier, fitted_number, progress_bar, seeds_from
from dubito._estimator import check_device as _check_device
from dubito._validation import (
    check_bool,
    check_choice,
    check_fitted,
    check_float,
    check_int,
    to_numpy_if_tensor,
)
from dubito.classification.mc_dropout import MCDropoutClassifier, check_labels
from dubito.nn.concrete_dropout import (
    MCNoise,
    StochasticDropout,
    dropout_modules,
    mc_mode,
)
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

#: The bracket of δ searched for the evidence's maximiser (module docstring).
_LOG_DELTA_BOUNDS = (-20.0 * np.log(10.0), 20.0 * np.log(10.0))


def jittered_cholesky(m: torch.Tensor, *, max_tries: int = 8) -> torch.Tensor:
    """Lower Cholesky factor of the symmetric PSD ``m``; on failure adds ε I with ε = 1e-10·mean
    diag, ×100 per try (spec pitfall 15). Raises ValueError after ``max_tries``."""
    m = 0.5 * (m + m.transpose(-1, -2))
    chol, info = torch.linalg.cholesky_ex(m)
    if int(info) == 0:
        return chol
    eye = torch.eye(m.shape[-1], dtype=m.dtype, device=m.device)
    eps = 1e-10 * max(float(torch.diagonal(m).abs().mean()), 1e-300)
    for _ in range(max_tries):
        chol, info = torch.linalg.cholesky_ex(m + eps * eye)
        if int(info) == 0:
            return chol
        eps *= 100.0
    raise ValueError("a Kronecker factor is not positive definite even with jitter; use damping > 0")


def sample_matrix_normal(mean: torch.Tensor, chol_g: torch.Tensor, chol_a: torch.Tensor, n_samples: int, *,
                         generator: torch.Generator | None = None) -> torch.Tensor:
    r"""T = ``n_samples`` draws of θ (out, q) with vec_row(θ) ~ N(vec_row(mean), (Ḡ ⊗ Ā)^{-1}).

    θ_t = mean + L_G^{-T} E_t L_A^{-1} with Ḡ = L_G L_G^T (out x out), Ā = L_A L_A^T (q x q) and E_t
    i.i.d. N(0, 1) (spec §2.7): Cov = (L_G^{-T} L_G^{-1}) ⊗ (L_A^{-T} L_A^{-1}) = Ḡ^{-1} ⊗ Ā^{-1}.
    Triangular solves in the factors' dtype; returns (T, out, q) in ``mean``'s dtype.
    """
    out, q = mean.shape
    e = torch.randn((n_samples, out, q), generator=generator, dtype=chol_g.dtype, device=chol_g.device)
    x = torch.linalg.solve_triangular(chol_g.transpose(0, 1), e, upper=True, left=True)   # L_G^{-T} E
    x = torch.linalg.solve_triangular(chol_a, x, upper=False, left=False)                 # ... L_A^{-1}
    return mean.unsqueeze(0) + x.to(mean.dtype)


class _KronEvidence:
    r"""The Laplace evidence of the module docstring as a function of δ, from the eigenvalues of
    √s A and √s G of each sampled layer, ||θ*||², P and the tempered log-likelihood (or None)."""

    def __init__(self, eigs: list[tuple[np.ndarray, np.ndarray]], theta_sq: float, loglik: float | None):
        self.eigs = [(np.clip(a, 0.0, None), np.clip(g, 0.0, None)) for a, g in eigs]
        self.theta_sq = float(theta_sq)
        self.n_params = int(sum(a.size * g.size for a, g in eigs))
        self.loglik = loglik

    def __call__(self, delta: float) -> float:
        """log p(D | δ); without the log-likelihood term when it is None."""
        logdet = sum(a.size * np.sum(np.log(g + delta)) + g.size * np.sum(np.log(a + delta)) for a, g in self.eigs)
        value = -0.5 * delta**2 * self.theta_sq + self.n_params * np.log(delta) - 0.5 * logdet
        return float(value + (self.loglik or 0.0))

    def slope(self, t: float) -> float:
        """d/dt log p(D | δ = e^t): P - δ² ||θ*||² - ½ Σ_l (q Σ_i δ/(g_i+δ) + o Σ_j δ/(a_j+δ)); decreasing."""
        d = np.exp(t)
        frac = sum(a.size * np.sum(d / (g + d)) + g.size * np.sum(d / (a + d)) for a, g in self.eigs)
        return float(self.n_params - d * d * self.theta_sq - 0.5 * frac)

    def argmax(self) -> float:
        """The δ maximising the (strictly concave in log δ) evidence: the root of `slope`."""

        lo, hi = _LOG_DELTA_BOUNDS
        if self.theta_sq <= 0.0:
            raise ValueError("the sampled layers' weights are all zero: the marginal likelihood grows without bound "
                             "in the prior precision; pass a number (prior_precision=...)")
        if self.slope(lo) <= 0.0:
            return float(np.exp(lo))
        if self.slope(hi) >= 0.0:
            return float(np.exp(hi))
        return float(np.exp(brentq(self.slope, lo, hi, xtol=1e-14, rtol=4 * np.finfo(float).eps, maxiter=500)))


def _is_estimator(model) -> bool:
    return not isinstance(model, nn.Module) and hasattr(model, "net_") and isinstance(model.net_, nn.Module)


def _is_array_like(X) -> bool:
    return isinstance(X, (np.ndarray, list, tuple)) or (hasattr(X, "detach") and hasattr(X, "cpu")) or \
        hasattr(X, "iloc") or hasattr(X, "__array__")


class _Layer:
    """One sampled layer: its name, module, and (after fit) factors and Cholesky factors."""

    def __init__(self, name: str, module: nn.Linear):
        self.name = name
        self.module = module
        self.bias = module.bias is not None
        self.a_sum = None
        self.g_sum = None

    @property
    def theta(self) -> torch.Tensor:
        """[W | b] (out, in+1), or W (out, in) without a bias: the MAP point (a copy)."""
        w = self.module.weight.detach()
        if self.bias:
            return torch.cat([w, self.module.bias.detach().unsqueeze(1)], dim=1)
        return w.clone()


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

    def _select_layers(self, net: nn.Module) -> list[_Layer]:
        named = dict(net.named_modules())
        linear = [(n, m) for n, m in named.items() if isinstance(m, nn.Linear) and n]
        if isinstance(net, nn.Linear):
            linear = [("", net)]
        spec = self.layers
        names = [n for n, _ in linear]
        if spec is None or (isinstance(spec, str) and spec == "last") or \
                (isinstance(spec, numbers.Integral) and not isinstance(spec, bool)):
            if not linear:
                others = sorted({type(m).__name__ for m in named.values() if isinstance(m, nn.Conv2d)})
                extra = f" (it has {', '.join(others)}: KFAC here covers nn.Linear only, spec §2.7)" if others else ""
                raise ValueError(f"the model ({type(net).__name__}) has no nn.Linear layer for KFAC Laplace{extra}")
            if spec is None:
                chosen = linear
            elif isinstance(spec, str):
                chosen = linear[-1:]
            else:
                if not 1 <= spec <= len(linear):
                    raise ValueError(f"layers={spec} asks for the last {spec} nn.Linear layers, but the model has "
                                     f"{len(linear)}: {names}")
                chosen = linear[-spec:]
            return [_Layer(n, m) for n, m in chosen]
        if isinstance(spec, str) or not hasattr(spec, "__iter__"):
            raise ValueError(f"layers must be None, 'last', an int or a list of module names, got {spec!r}")
        spec = list(spec)
        if not spec:
            raise ValueError("layers is an empty list: name at least one nn.Linear layer")
        chosen, seen = [], set()
        for n in spec:
            if not isinstance(n, str):
                raise ValueError(f"layers must hold module names (str), got {n!r}")
            if n not in named:
                raise ValueError(f"the model has no module named {n!r}; its nn.Linear layers are {names}")
            m = named[n]
            if isinstance(m, StochasticDropout) and isinstance(m.layer, nn.Linear):
                n, m = f"{n}.layer" if n else "layer", m.layer
            if not isinstance(m, nn.Linear):
                raise ValueError(
                    f"layer {n!r} is a {type(m).__name__}; KFAC Laplace here covers nn.Linear layers only (Feng 2019, §2.3, "
                    f"after Ritter, Botev & Barber 2018, puts it on the head's FC layers; Conv2d is not implemented). The nn.Linear layers are {names}")
            if id(m) in seen:
                raise ValueError(f"layer {n!r} is named twice")
            seen.add(id(m))
            chosen.append((n, m))
        order = {id(m): i for i, (_, m) in enumerate(linear)}
        chosen.sort(key=lambda nm: order.get(id(nm[1]), 0))
        return [_Layer(n, m) for n, m in chosen]

    # ------------------------------------------------------------------ inputs
    def _prep(self, x: torch.Tensor, dev, dtype) -> torch.Tensor:
        """Rows of X -> the model's input (standardised for an MCDropoutClassifier, reshaped to images)."""
        if _is_estimator(self.model):
            est = self.model
            mean = torch.as_tensor(est.x_mean_, dtype=torch.float64)
            sd = torch.as_tensor(est.x_scale_, dtype=torch.float64)
            x = (x.double().cpu() - mean) / sd
            shape = getattr(est, "image_shape_", None)
        else:
            shape = self.image_shape_
        x = x.to(device=dev, dtype=dtype)
        if shape is not None and x.dim() == 2:
            x = x.reshape(x.shape[0], *shape)
        return x

    def _batches(self, X, y, s, *, fit: bool):
        """(x, y or None) batches on the device: from arrays (validated) or from an iterable of batches."""
        dev, dtype = s["device"], self._dtype
        if y is not None or _is_array_like(X):
            if fit:
                Xa, ya = self._validate_fit(X, y, min_samples=1, require_nonconstant_y=False)
            else:
                Xa, ya = self._validate_predict(X, fitted_attributes=["layers_"]), None
            n = Xa.shape[0]
            bs = s["batch_size"] if fit else s["predict_batch_size"]
            xt = torch.from_numpy(np.ascontiguousarray(Xa))
            yt = None if ya is None else torch.from_numpy(np.asarray(ya))
            for a in range(0, n, bs):
                yb = None if yt is None else yt[a : a + bs]
                yield self._prep(xt[a : a + bs], dev, dtype), yb
            return
        if not hasattr(X, "__iter__"):
            raise ValueError(f"X must be an array (n, p) or an iterable of batches (x, y), got {type(X).__name__}")
        for batch in X:
            if isinstance(batch, (tuple, list)):
                if len(batch) < 1:
                    raise ValueError("an empty batch in the iterable")
                xb, yb = batch[0], (batch[1] if len(batch) > 1 else None)
            else:
                xb, yb = batch, None
            xb = torch.as_tensor(to_numpy_if_tensor(xb) if not torch.is_tensor(xb) else xb)
            if xb.dim() < 2 or xb.shape[0] == 0:
                raise ValueError(f"each batch x must have shape (B, ...) with B >= 1, got {tuple(xb.shape)}")
            if not torch.is_floating_point(xb):
                xb = xb.double()
            if not bool(torch.isfinite(xb).all()):
                raise ValueError("a batch x holds NaN or inf")
            if fit and not hasattr(self, "n_features_in_"):
                self.n_features_in_ = int(np.prod(xb.shape[1:]))
            if yb is not None:
                yb = torch.as_tensor(to_numpy_if_tensor(yb)).reshape(-1)
                if yb.shape[0] != xb.shape[0]:
                    raise ValueError(f"a batch has {xb.shape[0]} inputs but {yb.shape[0]} labels")
            yield self._prep(xb, dev, dtype), yb

    # ------------------------------------------------------------------ fit
    def fit(self, X, y=None):
        """Accumulate A and G of every chosen layer over the data (module docstring) and factor the
        damped factors. X: (n, p) with labels y (0..K-1), or an iterable of batches (x, y) (y may be
        left out unless ``fisher="empirical"``). Dropout is off; the model's parameters and modes are
        unchanged afterwards."""
        s = self._settings()
        net = self._network()
        layers = self._select_layers(net)
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

        for lay in layers:
            q = lay.module.in_features + int(lay.bias)
            lay.a_sum = torch.zeros((q, q), dtype=torch.float64, device=dev)
            lay.g_sum = torch.zeros((lay.module.out_features,) * 2, dtype=torch.float64, device=dev)
        acts: dict[int, torch.Tensor] = {}
        outs: dict[int, torch.Tensor] = {}

        def capture(i):
            def hook(module, args, out):
                a = args[0]
                if a.dim() != 2:
                    raise ValueError(f"layer {layers[i].name!r} received an input of shape {tuple(a.shape)}; KFAC here "
                                     "needs (batch, features) inputs to nn.Linear")
                if i in acts:
                    raise ValueError(f"layer {layers[i].name!r} is called more than once per forward pass (shared "
                                     "weights); KFAC here needs one call per layer")
                acts[i] = a.detach()
                if not out.requires_grad:  # nothing before needs a gradient: make s a leaf
                    out = out.detach().requires_grad_(True)
                outs[i] = out
                return out
            return hook

        grad_flags = [p.requires_grad for p in params]
        modes = {m: m.training for m in net.modules()}
        handles = []
        k = None
        n_seen = 0
        loglik = 0.0  # Σ log p(y | x, θ*) over labelled batches; None once a batch has no labels
        try:
            for p in params:
                p.requires_grad_(False)  # the backbone builds no graph; s of the first layer is a leaf
            net.eval()
            handles = [lay.module.register_forward_hook(capture(i)) for i, lay in enumerate(layers)]
            with progress_bar(self.progress) as bar:
                task = bar.add_task("KFAC factors (batches)", total=self._n_batches(X, y, s))
                for xb, yb in self._batches(X, y, s, fit=True):
                    acts.clear()
                    outs.clear()
                    with torch.enable_grad():
                        try:
                            logits = net(xb)
                        except RuntimeError as exc:
                            raise ValueError(f"the model failed on inputs of shape {tuple(xb.shape)} ({exc}); check "
                                             "image_shape and the number of columns of X") from None
                        if logits.dim() != 2 or logits.shape[0] != xb.shape[0] or logits.shape[1] < 2:
                            raise ValueError(f"the model must return logits of shape (batch, K) with K >= 2; for "
                                             f"{xb.shape[0]} inputs it returned {tuple(logits.shape)}")
                        if k is None:
                            k = int(logits.shape[1])
                        elif logits.shape[1] != k:
                            raise ValueError(f"the model returned {logits.shape[1]} classes after {k}")
                        missing = [lay.name for i, lay in enumerate(layers) if i not in outs]
                        if missing:
                            raise ValueError(f"layers {missing} were not used by the model's forward pass")
                        if yb is not None:
                            yl, _ = check_labels(to_numpy_if_tensor(yb), k)
                            yb = torch.as_tensor(yl, device=dev)
                            if loglik is not None:
                                logp = F.log_softmax(logits.detach().double(), dim=1)
                                loglik += float(logp.gather(1, yb.view(-1, 1)).sum())
                        else:
                            loglik = None
                        self._accumulate(layers, acts, outs, logits, yb, s["fisher"], gen)
                    n_seen += int(xb.shape[0])
                    bar.update(task, advance=1)
        finally:
            for h in handles:
                h.remove()
            for p, flag in zip(params, grad_flags):
                p.requires_grad_(flag)
            for m, md in modes.items():
                m.training = md
        if n_seen == 0:
            raise ValueError("fit received no data (an empty iterable of batches)")

        self.n_fit_ = n_seen
        self.classes_ = np.arange(k)
        self.n_classes_ = k
        self.scale_ = float(n_seen) if s["scale"] == "n" else s["scale"]
        self.log_likelihood_ = loglik
        factors = [(lay.a_sum / n_seen, lay.g_sum / n_seen) for lay in layers]
        for lay in layers:
            lay.a_sum = lay.g_sum = None
        self._evidence = _KronEvidence(self._factor_eigenvalues(factors), self._theta_sq(layers),
                                       self._tempered_loglik())
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
    def _factor_eigenvalues(self, factors) -> list[tuple[np.ndarray, np.ndarray]]:
        """Eigenvalues of √s A and √s G per layer (float64, ``torch.linalg.eigvalsh``)."""
        root = np.sqrt(self.scale_)
        return [(root * torch.linalg.eigvalsh(a).cpu().numpy(), root * torch.linalg.eigvalsh(g).cpu().numpy())
                for a, g in factors]

    @staticmethod
    def _theta_sq(layers) -> float:
        """||θ*||² over the sampled layers' [W | b], float64."""
        return float(sum(float((lay.theta.double() ** 2).sum()) for lay in layers))

    def _tempered_loglik(self) -> float | None:
        """(s/N) Σ log p(y | x, θ*) (module docstring), None without labels."""
        ll = self.log_likelihood_
        return None if ll is None else float(self.scale_ / self.n_fit_ * ll)

    def log_marginal_likelihood(self, prior_precision: float | None = None) -> float:
        r"""The Laplace evidence log p(D | τ) of the module docstring at ``prior_precision`` = τ > 0
        (None: the fitted τ), with the fitted factors, scale, damping_mode and MAP weights. Needs
        the labels at fit (the log-likelihood term)."""
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
            self._evidence = _KronEvidence(self._factor_eigenvalues(factors), self._theta_sq(self._layers),
                                           self._tempered_loglik())
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

    @staticmethod
    def _n_batches(X, y, s) -> int | None:
        """The number of fit batches, for the progress bar (None when X does not tell its length)."""
        try:
            n = len(X)
        except TypeError:
            return None
        return -(-n // s["batch_size"]) if (y is not None or _is_array_like(X)) else n

    @staticmethod
    def _accumulate(layers, acts, outs, logits, y, fisher, gen) -> None:
        """Add Σ_b a_b a_b^T and Σ_b g_b g_b^T of this batch (g = ∂(-log p(y|x))/∂s per example).

        The batch's sums are formed in the model's dtype (float32: relative error ~1e-7 sqrt(B)) and
        accumulated over batches in float64."""
        for i, lay in enumerate(layers):
            a = acts[i]
            if lay.bias:
                a = torch.cat([a, torch.ones((a.shape[0], 1), dtype=a.dtype, device=a.device)], dim=1)
            lay.a_sum += (a.T @ a).double()
        logp = F.log_softmax(logits, dim=1)
        s_list = [outs[i] for i in range(len(layers))]
        if fisher == "exact":
            pi = logp.detach().exp()
            k = logits.shape[1]
            for c in range(k):
                loss = -(pi[:, c].sqrt() * logp[:, c]).sum()   # Σ_b √π_bc (-log p(c | x_b))
                grads = torch.autograd.grad(loss, s_list, retain_graph=c < k - 1)
                for lay, g in zip(layers, grads):
                    lay.g_sum += (g.T @ g).double()
            return
        if fisher == "sampled":
            labels = torch.multinomial(logp.detach().exp().double(), 1, generator=gen).squeeze(1)
        else:
            if y is None:
                raise ValueError("fisher='empirical' needs the labels y (the batches carry none)")
            labels = y
        loss = -logp.gather(1, labels.view(-1, 1)).sum()
        grads = torch.autograd.grad(loss, s_list)
        for lay, g in zip(layers, grads):
            lay.g_sum += (g.T @ g).double()

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
        """T draws of each sampled layer's [W | b] (T, out, in+1) (module docstring), by layer name."""
        check_fitted(self, ["layers_"])
        t = check_int(self.n_samples if n_samples is None else n_samples, "n_samples", min_value=1)
        seed = self.predict_seed_ if random_state is None else seeds_from(random_state, 1)[0]
        dev = self._layers[0].chol_a.device
        gen = torch.Generator(device=dev).manual_seed(seed % (2**63))
        return {lay.name: sample_matrix_normal(lay.theta, lay.chol_g, lay.chol_a, t, generator=gen)
                for lay in self._layers}

    # ------------------------------------------------------------------ predict
    @contextlib.contextmanager
    def _sampled(self, net, thetas, t, b, expand, dropout_gen, noise=None):
        """Inside: the sampled layers compute with their T weight draws; rows expanded at the first
        sampled (or dropout) layer; our dropout layers draw one mask per pass shared by all rows
        from ``noise`` (an `MCNoise`). Restores forwards, hooks and modes on exit (also on error)."""
        patched, handles = [], []
        modes = {m: m.training for m in net.modules()}
        ctx = mc_mode(net, dropout_gen, noise) if self.mc_dropout else contextlib.nullcontext()
        try:
            with ctx:
                if not self.mc_dropout:
                    net.eval()
                for lay in self._layers:
                    lay.module.forward = self._batched_forward(lay, thetas[lay.name], t)
                    patched.append(lay.module)
                if t > 1 and expand == "layer":
                    sites = [lay.module for lay in self._layers]
                    if self.mc_dropout:
                        sites += dropout_modules(net)

                    def expand_rows(module, args):
                        h = args[0]
                        if h.shape[0] == b:
                            return (h.repeat(t, *([1] * (h.dim() - 1))), *args[1:])
                        return None

                    handles = [m.register_forward_pre_hook(expand_rows) for m in sites]
                yield
        finally:
            for h in handles:
                h.remove()
            for m in patched:
                m.__dict__.pop("forward", None)
            for m, md in modes.items():
                m.training = md

    @staticmethod
    def _batched_forward(lay: _Layer, theta: torch.Tensor, t: int):
        """x (t·b, in) pass-major -> (t·b, out) with weight draw t on rows t b .. t b + b - 1."""
        w = theta[:, :, : lay.module.in_features]
        wt = w.transpose(1, 2)
        bias = theta[:, :, -1].unsqueeze(1) if lay.bias else None

        def forward(x):
            if x.dim() != 2 or x.shape[0] % t:
                raise ValueError(f"layer {lay.name!r} got an input of shape {tuple(x.shape)}, not (T·batch, features) "
                                 f"with T = {t}; if the sampled layers sit in separate branches, use expand='input'")
            h = x.reshape(t, x.shape[0] // t, x.shape[1])
            out = torch.bmm(h, wt) if bias is None else torch.baddbmm(bias, h, wt)
            return out.reshape(x.shape[0], -1)

        return forward

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
            for xb, _ in self._batches(X, None, s, fit=False):
                b = xb.shape[0]
                if batched:
                    with self._sampled(net, thetas, t, b, s["expand"], dgen, noise):
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
                        with self._sampled(net, one, 1, b, "layer", dgen, noise):
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
                for xb, _ in self._batches(X, None, s, fit=False):
                    out.append(net(xb).cpu())
        finally:
            for m, md in modes.items():
                m.training = md
        return torch.cat(out).numpy() if out else np.zeros((0, self.n_classes_), dtype=np.float32)

    # ------------------------------------------------------------------ persistence
    def _state(self) -> tuple[dict[str, torch.Tensor], dict]:
        """(tensors, settings) of the fitted posterior and its model (module docstring). The model
        must be a torch module or an `MCDropoutClassifier`; a module's architecture is not saved
        (`load` needs ``network=``)."""
        check_fitted(self, ["layers_"])
        m = self.model
        if isinstance(m, nn.Module):
            # clone: a module registered twice shares storage, which safetensors refuses
            tensors = {f"net.{k}": v.detach().clone() for k, v in m.state_dict().items()}
            model = {"kind": "module", "class": type(m).__name__}
        elif type(m) is MCDropoutClassifier:
            mt, ms = m._state()
            tensors = {f"model.{k}": v for k, v in mt.items()}
            model = {"kind": "mc_dropout", "settings": ms}
        else:
            raise ValueError(f"KFACLaplace.save supports a torch nn.Module or an MCDropoutClassifier model, got "
                             f"{type(m).__name__}")
        for i, name in enumerate(self.layers_):
            tensors[f"A.{i}"] = self.A_[name]
            tensors[f"G.{i}"] = self.G_[name]
        common = (self._common_fitted() if hasattr(self, "n_features_in_")
                  else dict(n_features_in=None, feature_names_in=io.feature_names_json(self)))
        fitted = dict(
            **common,
            layers=list(self.layers_),
            n_fit=int(self.n_fit_),
            n_classes=int(self.n_classes_),
            scale=float(self.scale_),
            damping=float(self.damping_),
            delta=float(self.delta_),
            log_likelihood=None if self.log_likelihood_ is None else float(self.log_likelihood_),
            log_marginal_likelihood=(None if self.log_marginal_likelihood_ is None
                                     else float(self.log_marginal_likelihood_)),
            predict_seed=int(self.predict_seed_),
            image_shape=None if self.image_shape_ is None else [int(d) for d in self.image_shape_],
            dtype=str(self._dtype).removeprefix("torch."),
        )
        return tensors, {"params": io.json_params(self, model=None), "fitted": fitted, "model": model}

    @classmethod
    def _from_state(cls, tensors: dict, settings: dict, *, device=None, where: str = "",
                    network=None) -> KFACLaplace:
        """The posterior rebuilt from `_state`'s output (`load`): the Cholesky factors are
        recomputed from A and G exactly as ``fit`` does. ``network`` (an nn.Module or a callable
        returning one) is needed for a file whose model was a torch module (and passed on to
        `MCDropoutClassifier.load` for one with a user network)."""
        with io.rebuilding(where, cls.__name__):
            params = io.params_from_json(settings["params"], device=device)
            fitted, saved = settings["fitted"], settings["model"]
            if saved["kind"] == "mc_dropout":
                mt = {k[len("model."):]: v for k, v in tensors.items() if k.startswith("model.")}
                model = MCDropoutClassifier._from_state(mt, saved["settings"], device=device, network=network,
                                                        where=f"{where} (model)")
                net = model.net_
            elif saved["kind"] == "module":
                net = model = cls._module_from(network, saved["class"], where)
                state = {k[len("net."):]: v for k, v in tensors.items() if k.startswith("net.")}
                own = net.state_dict()
                wrong = [k for k, v in state.items() if k in own and own[k].dtype != v.dtype]
                if wrong:
                    raise ValueError(f"{where} holds {wrong[0]} as {state[wrong[0]].dtype} but the network passed has "
                                     f"{own[wrong[0]].dtype}: pass the architecture in the dtype it was fitted in")
                net.load_state_dict(state, strict=True)
            else:
                raise ValueError(f"{where} is a {cls.__name__} file with an unknown model kind {saved['kind']!r}")
            est = cls(**dict(params, model=model))
            s = est._settings()
            dev = s["device"]
            net.to(dev)
            est._dtype = next(net.parameters()).dtype
            if str(est._dtype).removeprefix("torch.") != fitted["dtype"]:
                raise ValueError(f"{where}: the model was fitted in {fitted['dtype']} but rebuilds in {est._dtype}")
            named = dict(net.named_modules())
            layers, factors = [], []
            for i, name in enumerate(fitted["layers"]):
                module = named.get(name)
                if not isinstance(module, nn.Linear):
                    raise ValueError(f"{where}: sampled layer {name!r} is not an nn.Linear of the rebuilt model")
                lay = _Layer(name, module)
                # clone: the loaded tensors may map the file, which a later write must not change
                a = tensors[f"A.{i}"].to(device=dev, dtype=torch.float64).clone()
                g = tensors[f"G.{i}"].to(device=dev, dtype=torch.float64).clone()
                q = module.in_features + int(lay.bias)
                if a.shape != (q, q) or g.shape != (module.out_features,) * 2:
                    raise ValueError(f"{where} is a {cls.__name__} file with inconsistent tensor shapes (corrupted?): "
                                     f"layer {name!r} needs A {(q, q)} and G {(module.out_features,) * 2}, got "
                                     f"{tuple(a.shape)} and {tuple(g.shape)}")
                layers.append(lay)
                factors.append((a, g))
            if not layers or len([k for k in tensors if k.startswith("A.")]) != len(layers):
                raise ValueError(f"{where} is a {cls.__name__} file whose factors do not match its layers (corrupted?)")
            est.n_fit_ = int(fitted["n_fit"])
            k = int(fitted["n_classes"])
            est.classes_ = np.arange(k)
            est.n_classes_ = k
            est.scale_ = fitted_number(fitted, "scale", positive=True)
            est.damping_ = est.prior_precision_ = fitted_number(fitted, "damping", nonnegative=True)
            est.delta_ = fitted_number(fitted, "delta")
            # files written before the marginal likelihood have neither
            est.log_likelihood_ = fitted.get("log_likelihood")
            est.log_marginal_likelihood_ = fitted.get("log_marginal_likelihood")
            est._evidence = None
            est.predict_seed_ = int(fitted["predict_seed"])
            est.image_shape_ = None if fitted["image_shape"] is None else tuple(int(d) for d in fitted["image_shape"])
            if fitted["n_features_in"] is not None:
                est._restore_common(fitted)
            else:
                io.set_feature_names(est, fitted.get("feature_names_in"))
            est._set_factors(layers, factors)
        return est

    @staticmethod
    def _module_from(network, class_name: str, where: str) -> nn.Module:
        """A copy of the module ``network`` (or the module the callable returns) to load weights into."""
        if network is None:
            raise ValueError(f"{where} holds a KFAC posterior over a torch module ({class_name}), whose architecture a "
                             f"file cannot rebuild: pass it, KFACLaplace.load(path, network=<the {class_name} module "
                             "or a callable returning one>)")
        if isinstance(network, nn.Module):
            return copy.deepcopy(network)
        if callable(network) and not isinstance(network, str):
            net = network()
            if isinstance(net, nn.Module):
                return net
            raise ValueError(f"network callable must return a torch nn.Module, got {type(net).__name__}")
        raise ValueError(f"network must be a torch nn.Module or a callable returning one, got {network!r}")

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = False  # seeded: repeated calls agree
        return tags
