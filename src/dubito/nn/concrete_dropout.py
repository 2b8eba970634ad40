r"""Dropout layers for MC-dropout classifiers: fixed-rate Bernoulli and concrete dropout, and the
machinery that keeps them (and only them) stochastic at prediction time.

Spec ``shared/specs/classification-thesis.md`` (Feng 2019, "the thesis") §2.3-2.5; Gal & Ghahramani
2016 (MC dropout), Gal, Hron & Kendall 2017 ([GHK17], concrete dropout).

Conventions (spec §2.1). ``p`` / ``p_drop`` is the probability of *dropping* a unit and
``p_keep = 1 - p_drop``. Dropout is inverted: a kept unit is scaled by 1/p_keep, so the layer in
evaluation mode (no dropout) is the mean network. In training a mask is drawn independently per
example, per unit and per step (spec §2.3). "Units" are the entries of dimension 1 of the input
((B, D) for dense layers; (B, C, ...) for feature maps, where each entry still gets its own mask).

Every layer here may *wrap* the layer it feeds (``ConcreteDropout(nn.Linear(256, 256))``), as in
Gal's reference code: ``forward(x) = layer(dropout(x))``. The wrapped layer's weight W̃ (the
inverted-dropout parameterisation, the mean network's weight) enters the regulariser
(`ConcreteDropout.regularization`):

    R = λ_w ||W̃||² / p_keep  +  λ_w ||b||²  -  β D H_b(p_drop)                      (spec §2.4 [R])

with D the number of dropped units (the wrapped layer's inputs), H_b(p) = -p log p - (1-p) log(1-p)
the binary entropy, λ_w = ``weight_regularizer`` (default 3.5e-6, the thesis's L2 coefficient,
§3.2 [T]) and β = ``dropout_regularizer`` (default 1/N_train, the KL-consistent scaling for a *mean*
minibatch cross-entropy: the thesis's KL of eq. 2.21 divided by N, spec §2.4 and pitfall 4; set by
the estimator, or pass ``n_train`` to ``regularization``). The weight term is p_keep ||M||² with
M = W̃/p_keep the weight of the non-inverted parameterisation (eq. 2.21, spec §2.4). The bias is
the row of the homogeneous coordinate (eq. 2.35), a constant 1 that is never dropped, so it gets
the plain λ_w ||b||² (Gal's code divides it by p_keep too; the difference is tiny and documented).

Stochastic when ``self.training`` **or** ``self.mc`` is set. `mc_mode(model)` puts a whole model
in evaluation mode (BatchNorm uses and keeps its running statistics, pitfall 5) and switches on
only the dropout layers: ours through ``mc`` and PyTorch's own ``nn.Dropout`` family by putting
those modules alone in training mode.

Noise: every layer draws U(0, 1) noise u of the input's shape from ``generator`` (None = torch's
global generator); ``noise`` (a tensor of the input's shape) replaces the draw, and
``record_noise = True`` keeps the last draw in ``last_noise`` (tests compare batched passes with a
loop over the same masks this way).

MC prediction with shared masks (`MCNoise`, used by `mc_mode(model, noise=...)` and
``dubito.classification.mc_logits``): one mask = one sampled network ω_t applied to every input
(Gal & Ghahramani 2016, eq. 8: p(y | x) ≈ (1/T) Σ_t p(y | x, ω_t), ω_t ~ q(ω)). Each call of a
dropout layer draws u of shape (T, 1, *unit shape) once and broadcasts u[t] over the rows of pass
t, so an input's T passes do not depend on the other rows of the batch, their order, or how the
inputs are chunked into forwards. Without ``noise`` (training, or `mc_mode` alone) the draw is per
row, as above. PyTorch's ``nn.Dropout`` layers are not ours: they always draw per row from the
global generator, so with them a prediction depends on the batch around it (replace them by
`BernoulliDropout` for batch-invariant predictions).
"""

from __future__ import annotations

import contextlib
import math

import torch
from torch import nn

__all__ = [
    "EPS",
    "TORCH_DROPOUT",
    "BernoulliDropout",
    "ConcreteDropout",
    "MCNoise",
    "StochasticDropout",
    "binary_entropy",
    "dropout_modules",
    "dropout_rates",
    "has_dropout",
    "mc_mode",
    "regularization",
    "regularized_parameters",
]

#: Added inside the logs of the relaxed Bernoulli (spec §2.4).
EPS = 1e-7

#: PyTorch's dropout layers: stochastic only in training mode, so `mc_mode` trains them alone.
TORCH_DROPOUT = (nn.Dropout, nn.Dropout1d, nn.Dropout2d, nn.Dropout3d, nn.AlphaDropout, nn.FeatureAlphaDropout)


def binary_entropy(p: torch.Tensor) -> torch.Tensor:
    """H_b(p) = -p log p - (1-p) log(1-p) in nats, elementwise; 0 log 0 = 0."""
    return -(torch.special.xlogy(p, p) + torch.special.xlogy(1 - p, 1 - p))


def _check_rate(value, name: str, allow_zero: bool = True) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number in [0, 1), got {value!r}") from None
    if isinstance(value, bool) or not math.isfinite(v) or not (0.0 <= v < 1.0) or (v == 0.0 and not allow_zero):
        raise ValueError(f"{name} must lie in {'[0, 1)' if allow_zero else '(0, 1)'}, got {value!r}")
    return v


def _check_nonneg(value, name: str) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}") from None
    if isinstance(value, bool) or not math.isfinite(v) or v < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return v


class MCNoise:
    r"""U(0, 1) noise of T MC-dropout passes shared by all inputs: one mask = one sampled network.

    The k-th call of a dropout layer within a forward gets u_k of shape (T, 1, *s), s = the input's
    shape without its batch dimension, drawn from the layer's generator on first use and reused by
    every later forward (other rows, another order, the next chunk of inputs). A batched forward's
    rows are pass-major (row t·B + b, `dubito.classification.mc_logits`): row t·B + b gets u_k[t];
    with ``begin(pass_index=t)`` every row of the forward is pass t (the loop over the passes,
    which so sees the very same noise). ``begin`` must be called before each forward.
    """

    def __init__(self, n_passes: int):
        if isinstance(n_passes, bool) or int(n_passes) < 1:
            raise ValueError(f"n_passes must be a positive int, got {n_passes!r}")
        self.n_passes = int(n_passes)
        self.pass_index: int | None = None
        self._draws: dict[int, list[torch.Tensor]] = {}
        self._calls: dict[int, int] = {}

    def begin(self, pass_index: int | None = None) -> None:
        """Start a forward: every row is pass ``pass_index``, or (None) rows are pass-major over the T passes."""
        if pass_index is not None and not 0 <= int(pass_index) < self.n_passes:
            raise ValueError(f"pass_index must lie in 0..{self.n_passes - 1}, got {pass_index!r}")
        self.pass_index = None if pass_index is None else int(pass_index)
        self._calls = {}

    def uniform(self, module: nn.Module, x: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        """The noise of ``module``'s current call, expanded to x's shape."""
        key = id(module)
        k = self._calls.get(key, 0)
        self._calls[key] = k + 1
        draws = self._draws.setdefault(key, [])
        row = tuple(x.shape[1:])
        if k == len(draws):
            draws.append(torch.rand((self.n_passes, 1, *row), generator=generator, dtype=x.dtype, device=x.device))
        u = draws[k]
        if tuple(u.shape[2:]) != row:
            raise ValueError(f"{type(module).__name__} got inputs of shape (batch, {', '.join(map(str, row))}) but its "
                             f"shared MC noise was drawn for (batch, {', '.join(map(str, u.shape[2:]))}): the masks of "
                             "one prediction need inputs of one shape")
        u = u.to(dtype=x.dtype, device=x.device)
        if self.pass_index is not None:
            return u[self.pass_index].expand(x.shape)
        t, n = self.n_passes, x.shape[0]
        if n % t:
            raise ValueError(f"{type(module).__name__} got {n} rows, not a multiple of the T = {t} MC passes (rows "
                             "pass-major, t·B + b): repeat the inputs T times before the dropout layers")
        return u.expand(t, n // t, *row).reshape(x.shape)


class StochasticDropout(nn.Module):
    """Base of the dropout layers here: wrapping, MC switch, noise source, weight terms.

    Subclasses implement ``_drop(x, u)`` (u: U(0, 1) noise of x's shape), ``p_drop`` (a tensor,
    scalar or (D,)) and ``regularization``.
    """

    def __init__(self, layer: nn.Module | None = None, *, in_features: int | None = None,
                 weight_regularizer: float = 3.5e-6, dropout_regularizer: float | None = None):
        super().__init__()
        self.layer = layer
        self.weight_regularizer = _check_nonneg(weight_regularizer, "weight_regularizer")
        self.dropout_regularizer = (None if dropout_regularizer is None
                                    else _check_nonneg(dropout_regularizer, "dropout_regularizer"))
        units = in_features
        weight = getattr(layer, "weight", None) if layer is not None else None
        if units is None and weight is not None and weight.dim() >= 2:
            units = int(weight.shape[1])
        if units is not None and (isinstance(units, bool) or int(units) < 1):
            raise ValueError(f"in_features must be a positive int, got {in_features!r}")
        self.in_features = None if units is None else int(units)
        self.mc = False
        self.generator: torch.Generator | None = None
        self.noise: torch.Tensor | None = None
        self.record_noise = False
        self.last_noise: torch.Tensor | None = None
        self.mc_noise: MCNoise | None = None

    @property
    def active(self) -> bool:
        """Dropout is applied in training mode and in MC mode (``mc``)."""
        return self.training or self.mc

    def _uniform(self, x: torch.Tensor) -> torch.Tensor:
        if self.noise is not None:
            if tuple(self.noise.shape) != tuple(x.shape):
                raise ValueError(f"noise has shape {tuple(self.noise.shape)} but the input has {tuple(x.shape)}")
            u = self.noise.to(dtype=x.dtype, device=x.device)
        elif getattr(self, "mc_noise", None) is not None and not self.training:
            u = self.mc_noise.uniform(self, x, self.generator)
        else:
            u = torch.rand(x.shape, generator=self.generator, dtype=x.dtype, device=x.device)
        if self.record_noise:
            self.last_noise = u.detach().clone()
        return u

    def _rate_view(self, rate: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """A scalar rate as is; a (D,) rate shaped to broadcast along dimension 1 of x."""
        if rate.dim() == 0:
            return rate
        if x.dim() < 2 or x.shape[1] != rate.shape[0]:
            raise ValueError(f"{type(self).__name__} has {rate.shape[0]} per-unit rates but the input has shape "
                             f"{tuple(x.shape)} (units along dimension 1)")
        return rate.view(1, -1, *([1] * (x.dim() - 2)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.in_features is None and x.dim() >= 2:
            self.in_features = int(x.shape[1])
        if self.active:
            x = self._drop(x, self._uniform(x))
        return x if self.layer is None else self.layer(x)

    # ------------------------------------------------------------------ rates
    @property
    def p_drop(self) -> torch.Tensor:
        raise NotImplementedError

    @property
    def p_keep(self) -> torch.Tensor:
        return 1.0 - self.p_drop

    def _drop(self, x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    # ------------------------------------------------------------------ regulariser pieces
    def _unit_weight_norms(self) -> torch.Tensor | None:
        """||W̃[k, :]||², the squared weights leaving each dropped unit k, shape (D,); None without
        a wrapped layer that has a weight of >= 2 dimensions (dimension 1 = the dropped units)."""
        w = getattr(self.layer, "weight", None) if self.layer is not None else None
        if w is None or w.dim() < 2:
            return None
        dims = [0, *range(2, w.dim())]
        return w.pow(2).sum(dim=dims)

    def _zero(self) -> torch.Tensor:
        p = next(self.parameters(), None)
        return torch.zeros(()) if p is None else torch.zeros((), dtype=p.dtype, device=p.device)

    def _bias_term(self) -> torch.Tensor:
        b = getattr(self.layer, "bias", None) if self.layer is not None else None
        if b is None:
            return self._zero()
        return self.weight_regularizer * b.pow(2).sum()

    def _beta(self, n_train) -> float | None:
        if self.dropout_regularizer is not None:
            return self.dropout_regularizer
        if n_train is None:
            return None
        if isinstance(n_train, bool) or int(n_train) < 1:
            raise ValueError(f"n_train must be a positive int, got {n_train!r}")
        return 1.0 / int(n_train)

    def _units(self) -> int:
        if self.in_features is None:
            raise ValueError(f"{type(self).__name__} does not know its number of units: wrap a layer with a weight, "
                             "pass in_features, or run one forward pass first")
        return self.in_features

    def regularization(self, n_train: int | None = None) -> torch.Tensor:
        raise NotImplementedError

    def covered_parameters(self) -> list[nn.Parameter]:
        """Parameters whose penalty this layer's ``regularization`` already holds (the wrapped
        layer's weight and bias, and the rate logits); the estimator L2-penalises the rest."""
        own = [p for name, p in self.named_parameters(recurse=False)]
        if self.layer is not None:
            for name in ("weight", "bias"):
                p = getattr(self.layer, name, None)
                if isinstance(p, nn.Parameter):
                    own.append(p)
        return own


class BernoulliDropout(StochasticDropout):
    r"""MC dropout with a fixed rate ``p`` (spec §2.3): mask ~ Bernoulli(p_keep) per example, unit
    and pass, out = x * mask / p_keep (inverted). The mask keeps a unit when u >= p, u ~ U(0, 1).
    ``p = 0`` is the identity, exactly.

    ``regularization()`` = λ_w ||W̃||² / p_keep + λ_w ||b||², the KL of eq. 2.21 with p fixed
    (L2 with λ = l² p_keep / 2 on M, divided by N for a mean loss; spec §2.3); its entropy term is
    a constant and is left out.
    """

    def __init__(self, p: float = 0.1, layer: nn.Module | None = None, *, in_features: int | None = None,
                 weight_regularizer: float = 3.5e-6):
        super().__init__(layer, in_features=in_features, weight_regularizer=weight_regularizer)
        self.p = _check_rate(p, "p")

    @property
    def p_drop(self) -> torch.Tensor:
        return torch.tensor(self.p)

    def _drop(self, x, u):
        if self.p == 0.0:
            return x
        return x * (u >= self.p).to(x.dtype) / (1.0 - self.p)

    def regularization(self, n_train: int | None = None) -> torch.Tensor:
        norms = self._unit_weight_norms()
        weight = self._zero() if norms is None else self.weight_regularizer * norms.sum() / (1.0 - self.p)
        return weight + self._bias_term()

    def extra_repr(self) -> str:
        return f"p={self.p}"


class ConcreteDropout(StochasticDropout):
    r"""Concrete dropout [GHK17] (spec §2.4): one learned rate p_drop = sigmoid(ρ) per layer.

    Relaxed Bernoulli keep mask with temperature t (thesis eq. 2.25, t = 0.1 [T]):

        z̃ = sigmoid( (log p_keep - log p_drop + log(u + ε) - log(1 - u + ε)) / t ),  u ~ U(0, 1),

    and out = x * z̃ / p_keep; log p_keep - log p_drop = -ρ exactly, ε = 1e-7 (spec §2.4). The same
    relaxed sampler runs at training and (in MC mode) at test time, as Gal's code does;
    ``mc_sampler = "hard"`` uses the hard mask 1[u > p_drop] (the t -> 0 limit, i.e. Bernoulli(p_keep))
    at test time instead. ``init_p`` = 0.1 is Gal's default [R] (the thesis gives none).

    ``regularization(n_train)`` = λ_w ||W̃||² / p_keep + λ_w ||b||² - β D H_b(p_drop)  (module
    docstring; β = ``dropout_regularizer`` or 1/n_train). With ``weight_term="plain"`` the first
    term is λ_w ||W̃||² (a plain L2 kernel regulariser, as a Keras L2 on the kernel).
    """

    def __init__(self, layer: nn.Module | None = None, *, init_p: float = 0.1, temperature: float = 0.1,
                 in_features: int | None = None, weight_regularizer: float = 3.5e-6,
                 dropout_regularizer: float | None = None, weight_term: str = "kl", mc_sampler: str = "relaxed"):
        super().__init__(layer, in_features=in_features, weight_regularizer=weight_regularizer,
                         dropout_regularizer=dropout_regularizer)
        init_p = _check_rate(init_p, "init_p")
        t = _check_nonneg(temperature, "temperature")
        if t <= 0:
            raise ValueError(f"temperature must be > 0, got {temperature!r}")
        if weight_term not in ("kl", "plain"):
            raise ValueError(f"weight_term must be 'kl' or 'plain', got {weight_term!r}")
        if mc_sampler not in ("relaxed", "hard"):
            raise ValueError(f"mc_sampler must be 'relaxed' or 'hard', got {mc_sampler!r}")
        self.temperature = t
        self.weight_term = weight_term
        self.mc_sampler = mc_sampler
        self.rho = nn.Parameter(self._init_rho(init_p))

    def _init_rho(self, init_p: float) -> torch.Tensor:
        return torch.tensor(math.log(init_p) - math.log1p(-init_p) if init_p > 0 else -math.inf)

    @property
    def p_drop(self) -> torch.Tensor:
        return torch.sigmoid(self.rho)

    def _drop(self, x, u):
        rho = self._rate_view(self.rho.to(x.dtype), x)
        p_keep = torch.sigmoid(-rho)  # = 1 - sigmoid(rho), without the cancellation near p_drop = 1
        if self.mc and not self.training and self.mc_sampler == "hard":
            z = (u > torch.sigmoid(rho)).to(x.dtype)
        else:
            z = torch.sigmoid((-rho + torch.log(u + EPS) - torch.log(1.0 - u + EPS)) / self.temperature)
        return x * z / p_keep

    def _weight_term(self) -> torch.Tensor:
        norms = self._unit_weight_norms()
        if norms is None:
            return self._zero()
        if self.weight_term == "plain":
            return self.weight_regularizer * norms.sum()
        p_keep = torch.sigmoid(-self.rho)
        return self.weight_regularizer * (norms / p_keep).sum()  # scalar p_keep: ||W̃||²/p_keep

    def _entropy_term(self, n_train) -> torch.Tensor:
        beta = self._beta(n_train)
        if beta is None:
            raise ValueError(f"{type(self).__name__}.regularization needs the entropy weight: pass n_train (beta = "
                             "1/n_train: Gal, Hron & Kendall 2017; Feng 2019, eq. 2.21) or set dropout_regularizer")
        h = binary_entropy(self.p_drop)
        return beta * (self._units() * h if h.dim() == 0 else h.sum())

    def regularization(self, n_train: int | None = None) -> torch.Tensor:
        return self._weight_term() + self._bias_term() - self._entropy_term(n_train)

    def extra_repr(self) -> str:
        return (f"p_drop={self.p_drop.detach().mean().item():.4g}, temperature={self.temperature}, "
                f"weight_term={self.weight_term!r}, mc_sampler={self.mc_sampler!r}")


# ---------------------------------------------------------------------- model-level helpers
def dropout_modules(model: nn.Module) -> list[nn.Module]:
    """The dropout layers of ``model`` (ours and PyTorch's ``nn.Dropout`` family), in
    registration order."""
    return [m for m in model.modules() if isinstance(m, (StochasticDropout, *TORCH_DROPOUT))]


def has_dropout(model: nn.Module) -> bool:
    return bool(dropout_modules(model))


@contextlib.contextmanager
def mc_mode(model: nn.Module, generator: torch.Generator | None = None, noise: MCNoise | None = None):
    """Evaluation mode for everything (BatchNorm uses and keeps its running statistics) with only
    the dropout layers stochastic; restores every module's mode, ``mc`` flag, generator and noise on exit.

    ``generator`` (optional) is given to our dropout layers; PyTorch's ``nn.Dropout`` layers use
    the global generator (seed it, e.g. under ``torch.random.fork_rng``). ``noise`` (an `MCNoise`)
    makes our layers share one mask per pass by all rows (module docstring); None: a mask per row.
    """
    modes = {m: m.training for m in model.modules()}
    ours = [m for m in model.modules() if isinstance(m, StochasticDropout)]
    saved = {m: (m.mc, m.generator, getattr(m, "mc_noise", None)) for m in ours}
    try:
        model.eval()
        for m in ours:
            m.mc = True
            m.mc_noise = noise
            if generator is not None:
                m.generator = generator
        for m in model.modules():
            if isinstance(m, TORCH_DROPOUT):
                m.train()
        yield model
    finally:
        for m, mode in modes.items():
            m.training = mode
        for m, (mc, gen, shared) in saved.items():
            m.mc, m.generator, m.mc_noise = mc, gen, shared


def regularization(model: nn.Module, n_train: int | None = None) -> torch.Tensor:
    """Sum of the regularisers of the dropout layers of ``model`` (``StochasticDropout``)."""
    total = None
    for m in model.modules():
        if isinstance(m, StochasticDropout):
            r = m.regularization(n_train)
            total = r if total is None else total + r.to(total.device)
    if total is None:
        return torch.zeros(())
    return total


def regularized_parameters(model: nn.Module) -> set[int]:
    """ids of the parameters that the dropout layers' regularisers already cover."""
    return {id(p) for m in model.modules() if isinstance(m, StochasticDropout) for p in m.covered_parameters()}


def dropout_rates(model: nn.Module) -> list[float]:
    """Mean p_drop of each dropout layer (ours: the (learned) rate; PyTorch's: ``p``)."""
    rates = []
    for m in dropout_modules(model):
        if isinstance(m, StochasticDropout):
            rates.append(float(m.p_drop.detach().float().mean()))
        else:
            rates.append(float(m.p))
    return rates
