"""The B-DeepNoise model (Zhang, Liu & Kang, arXiv 2206.05643): state, priors and forward maps.

Layers l = 0..L (L hidden layers, eqs. (4)–(5) of [P]; spec §1.1), row-major layout [C]:

    u_0 = x,   v_l = u_l W_l + γ_l + ε_l,  ε_l ~ N(0, diag τ²_l),     l = 0..L
               u_{l+1} = h(v_l) + δ_l,      δ_l ~ N(0, diag σ²_l),     l = 0..L-1,   v_L = y,

with W_l = β_lᵀ of shape (K_{l-1}, K_l) and h piecewise linear (Assumption 1, spec §1.2).
Priors (spec §1.3): β ~ N(0, ρ²) per weight, γ ~ N(0, ξ²), ρ², ξ², τ², σ² ~ IG(shape, scale).

This module holds the dataclasses, the activation encoding and the forward/predictive maps
(spec §3): noiseless DNN g(x, Γ), Monte-Carlo forward sampling, the Rao–Blackwellised
Gaussian last layer, the Theorem 3 / Corollary 4 variance bounds and the Theorem 2 quadrature
(test oracle), and the exact change of units of a state between two standardisations of the data
(`rescale_params`, which starts a chain at an SGD fit). The Gibbs updates live in
:mod:`dubito.regression.deepnoise_gibbs`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

__all__ = [
    "PIECEWISE_ACTIVATIONS",
    "DeepNoiseLatents",
    "DeepNoiseParams",
    "DeepNoisePriors",
    "PiecewiseLinear",
    "corollary4_bound",
    "forward_moments",
    "forward_sample",
    "log_density_recursive",
    "noiseless_forward",
    "piecewise_activation",
    "rescale_params",
    "variance_bound",
]

_SMOOTH = {
    "tanh": "hardtanh",
    "sigmoid": "bounded_relu",
    "hardsigmoid": "bounded_relu",
    "gelu": "relu",
    "silu": "relu",
    "softplus": "relu",
    "elu": "leaky_relu",
}


@dataclass(frozen=True)
class PiecewiseLinear:
    """h(t) = slopes[j]·t + intercepts[j] on [c_{j-1}, c_j), borders = interior c_1 < … < c_{J-1}.

    Encoding of [C] (spec §1.2 table); pieces are J = len(slopes) = len(borders) + 1.
    """

    name: str
    borders: tuple
    slopes: tuple
    intercepts: tuple

    def __post_init__(self):
        if len(self.slopes) != len(self.borders) + 1 or len(self.intercepts) != len(self.slopes):
            raise ValueError(
                f"activation {self.name!r}: need len(slopes) == len(intercepts) == len(borders) + 1, "
                f"got {len(self.slopes)}, {len(self.intercepts)}, {len(self.borders)}"
            )
        if any(b2 <= b1 for b1, b2 in zip(self.borders, self.borders[1:])):
            raise ValueError(f"activation {self.name!r}: borders must increase, got {self.borders}")
        object.__setattr__(self, "_clamp", self._clamp_form())

    def _clamp_form(self):
        """(lo, hi) when h(t) = clamp(t, lo, hi) (constant, identity, constant pieces), else None."""
        sl, ic, c = tuple(map(float, self.slopes)), tuple(map(float, self.intercepts)), self.borders
        if sl == (0.0, 1.0, 0.0) and ic == (float(c[0]), 0.0, float(c[1])):
            return (float(c[0]), float(c[1]))
        if sl == (0.0, 1.0) and ic == (float(c[0]), 0.0):
            return (float(c[0]), None)
        return None

    @property
    def n_pieces(self) -> int:
        return len(self.slopes)

    @property
    def lipschitz(self) -> float:
        """C_h = max_j |b_j| (Theorem 3; 1 for hard tanh, (leaky) ReLU, bounded ReLU)."""
        return float(max(abs(s) for s in self.slopes))

    def lower_edges(self) -> tuple:
        """(c_0, …, c_{J-1}) with c_0 = −inf."""
        return (-math.inf,) + tuple(float(c) for c in self.borders)

    def upper_edges(self) -> tuple:
        """(c_1, …, c_J) with c_J = +inf."""
        return tuple(float(c) for c in self.borders) + (math.inf,)

    def __call__(self, t: torch.Tensor) -> torch.Tensor:
        if self._clamp is not None:  # hard tanh, ReLU, bounded ReLU: one clamp (speed)
            return torch.clamp(t, *self._clamp)
        out = self.slopes[0] * t + self.intercepts[0]
        for c, b, b0 in zip(self.borders, self.slopes[1:], self.intercepts[1:]):
            out = torch.where(t >= c, b * t + b0, out)
        return out


PIECEWISE_ACTIVATIONS = {
    "hardtanh": PiecewiseLinear("hardtanh", (-1.0, 1.0), (0.0, 1.0, 0.0), (-1.0, 0.0, 1.0)),
    "relu": PiecewiseLinear("relu", (0.0,), (0.0, 1.0), (0.0, 0.0)),
    "leaky_relu": PiecewiseLinear("leaky_relu", (0.0,), (0.1, 1.0), (0.0, 0.0)),
    "bounded_relu": PiecewiseLinear("bounded_relu", (0.0, 1.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)),
}


def piecewise_activation(name: str) -> PiecewiseLinear:
    """The piecewise-linear activation called ``name`` (spec §1.2 table; leaky slope 0.1 [C])."""
    if isinstance(name, PiecewiseLinear):
        return name
    if not isinstance(name, str):
        raise TypeError(f"activation must be a string, got {type(name).__name__}")
    key = name.lower().replace("-", "_")
    if key == "hard_tanh":
        key = "hardtanh"
    if key in PIECEWISE_ACTIVATIONS:
        return PIECEWISE_ACTIVATIONS[key]
    if key in _SMOOTH:
        raise ValueError(
            f"activation {name!r} is smooth; the B-DeepNoise Gibbs sampler needs a piecewise-linear "
            f"activation (Assumption 1 of the paper): use {_SMOOTH[key]!r} instead"
        )
    raise ValueError(f"unknown activation {name!r}; choose one of {sorted(PIECEWISE_ACTIVATIONS)}")


def _flatten(obj, names) -> dict:
    out = {}
    for name in names:
        for i, t in enumerate(getattr(obj, name)):
            out[f"{name}.{i}"] = t
    return out


def _unflatten(cls, d: dict, names):
    lists = {}
    for name in names:
        items = []
        i = 0
        while f"{name}.{i}" in d:
            items.append(d[f"{name}.{i}"])
            i += 1
        lists[name] = items
    extra = set(d) - {f"{n}.{i}" for n in names for i in range(len(lists[n]))}
    if extra:
        raise ValueError(f"{cls.__name__}.from_flat: unexpected keys {sorted(extra)}")
    return cls(**lists)


@dataclass
class DeepNoiseParams:
    """One posterior state θ = (W, γ, τ², σ², ρ², ξ²) in standardised units (spec §1).

    W[l]: (K_{l-1}, K_l); gamma[l], tau2[l], xi2[l]: (K_l,) for l = 0..L (tau2[L] = output noise);
    sigma2[l]: (K_l,) for l = 0..L-1 (noise of u_{l+1}); rho2[l] like W[l].
    """

    W: list
    gamma: list
    tau2: list
    sigma2: list
    rho2: list
    xi2: list

    _NAMES = ("W", "gamma", "tau2", "sigma2", "rho2", "xi2")

    def __post_init__(self):
        n = len(self.W)
        if n < 1:
            raise ValueError("DeepNoiseParams needs at least one layer (W is empty)")
        for name, want in (("gamma", n), ("tau2", n), ("rho2", n), ("xi2", n), ("sigma2", n - 1)):
            if len(getattr(self, name)) != want:
                raise ValueError(
                    f"DeepNoiseParams: {name} has {len(getattr(self, name))} tensors, expected {want} "
                    f"(W has {n} layers)"
                )

    @property
    def n_hidden(self) -> int:
        """L, the number of hidden layers."""
        return len(self.W) - 1

    @property
    def widths(self) -> tuple:
        """(P, K_0, …, K_L)."""
        return (int(self.W[0].shape[0]),) + tuple(int(w.shape[1]) for w in self.W)

    def to_flat(self) -> dict:
        return _flatten(self, self._NAMES)

    @classmethod
    def from_flat(cls, d: dict) -> DeepNoiseParams:
        return _unflatten(cls, d, cls._NAMES)

    def clone(self) -> DeepNoiseParams:
        return DeepNoiseParams(**{n: [t.clone() for t in getattr(self, n)] for n in self._NAMES})

    def to(self, device) -> DeepNoiseParams:
        return DeepNoiseParams(**{n: [t.to(device) for t in getattr(self, n)] for n in self._NAMES})


@dataclass
class DeepNoiseLatents:
    """Latents of all N rows: V[l] = v_l (N, K_l) for l = 0..L-1, U[l] = u_{l+1} (N, K_l)."""

    V: list
    U: list

    _NAMES = ("V", "U")

    def __post_init__(self):
        if len(self.V) != len(self.U):
            raise ValueError(f"DeepNoiseLatents: {len(self.V)} V tensors but {len(self.U)} U tensors")

    def to_flat(self) -> dict:
        return _flatten(self, self._NAMES)

    @classmethod
    def from_flat(cls, d: dict) -> DeepNoiseLatents:
        return _unflatten(cls, d, cls._NAMES)

    def clone(self) -> DeepNoiseLatents:
        return DeepNoiseLatents(V=[t.clone() for t in self.V], U=[t.clone() for t in self.U])

    def to(self, device) -> DeepNoiseLatents:
        return DeepNoiseLatents(V=[t.to(device) for t in self.V], U=[t.to(device) for t in self.U])


Hyper = float | Sequence[torch.Tensor]


@dataclass(frozen=True)
class DeepNoisePriors:
    """Inverse-gamma IG(shape a, scale b) priors (density ∝ x^{-a-1} e^{-b/x}; spec §1.3).

    Defaults IG(1e-3, 1e-3) for every variance [P §3.1, C ``init_priors``]. a_pre/b_pre (τ²)
    may be lists of L+1 per-unit tensors and a_post/b_post (σ²) lists of L (the [C]
    ``sgd_centred`` prior, :meth:`sgd_centred`). ``rho2_floor``: lower bound on sampled ρ² and
    ξ² against the near-absorbing collapse of pitfall 5 (spec §8) [R]. ``tie_rho``: "none" (one
    ρ² per weight, [P]), "row" (one per unit) or "layer" (one per layer), pitfall 5's offer.
    """

    a_w: float = 1e-3
    b_w: float = 1e-3
    a_b: float = 1e-3
    b_b: float = 1e-3
    a_pre: Hyper = 1e-3
    b_pre: Hyper = 1e-3
    a_post: Hyper = 1e-3
    b_post: Hyper = 1e-3
    rho2_floor: float = 1e-8
    tie_rho: str = "none"

    @classmethod
    def sgd_centred(cls, params: DeepNoiseParams, n: int, **kwargs) -> DeepNoisePriors:
        """[C] re-centred noise priors: a = n/2, b = ŝ²·a with ŝ² the current τ²/σ² (spec §1.3)."""
        a = float(n) / 2.0
        return cls(
            a_pre=[torch.full_like(t, a) for t in params.tau2],
            b_pre=[t.clone() * a for t in params.tau2],
            a_post=[torch.full_like(s, a) for s in params.sigma2],
            b_post=[s.clone() * a for s in params.sigma2],
            **kwargs,
        )


def _act(act) -> PiecewiseLinear:
    return piecewise_activation(act)


def noiseless_forward(params: DeepNoiseParams, X: torch.Tensor, act) -> torch.Tensor:
    """The deterministic DNN g(x, Γ) with the same weights (Theorem 3): (N,)."""
    h = _act(act)
    u = X
    L = params.n_hidden
    for l in range(L):
        u = h(u @ params.W[l] + params.gamma[l])
    return (u @ params.W[L] + params.gamma[L])[:, 0]


def _propagate_hidden(params, X, h, n_draws, generator, shared: bool = False):
    """Noisy forward pass to h(v_{L-1}) for n_draws independent draws: (n_draws, N, K_{L-1}).

    ``shared``: each draw's noise (n_draws, 1, K_l) is common to all rows, so a row's draws do not
    depend on the other rows or their order (each row still gets n_draws independent draws)."""
    L = params.n_hidden
    u = X.unsqueeze(0).expand(n_draws, *X.shape)
    hv = u
    for l in range(L):
        # layer 0 is the same for every draw: one (N, P) matmul, then broadcast
        if l == 0:
            v = (X @ params.W[0] + params.gamma[0]).expand(n_draws, X.shape[0], params.W[0].shape[1])
        else:
            v = u @ params.W[l] + params.gamma[l]
        shape = (n_draws, 1, v.shape[-1]) if shared else v.shape
        v = v + params.tau2[l].sqrt() * torch.randn(shape, generator=generator, dtype=v.dtype, device=v.device)
        hv = h(v)
        if l < L - 1:
            shape = (n_draws, 1, hv.shape[-1]) if shared else hv.shape
            u = hv + params.sigma2[l].sqrt() * torch.randn(shape, generator=generator, dtype=hv.dtype, device=hv.device)
    return hv


def forward_moments(params: DeepNoiseParams, X: torch.Tensor, act, n_draws: int, generator, *, shared: bool = False):
    """Rao–Blackwellised predictive components (spec §3.2): (mean, var), both (n_draws, N).

    Noise is propagated through layers 0..L-1 (fresh ε, δ per draw; ``shared``: one draw per
    layer common to all rows, `_propagate_hidden`); the last layer is exact:
    y | v_{L-1} ~ N(h(v_{L-1}) W_L + γ_L, τ²_L + Σ_k W_L[k,0]² σ²_{L-1,k}). For L = 0 the
    mean is x W_0 + γ_0 and var = τ²_0. Standardised units.
    """
    h = _act(act)
    L = params.n_hidden
    hv = _propagate_hidden(params, X, h, int(n_draws), generator, shared)
    mean = (hv @ params.W[L] + params.gamma[L])[..., 0]
    var = params.tau2[L][0].clone()
    if L > 0:
        var = var + (params.W[L][:, 0] ** 2 * params.sigma2[L - 1]).sum()
    return mean, var.expand_as(mean).clone()


def forward_sample(params: DeepNoiseParams, X: torch.Tensor, act, n_draws: int, generator) -> torch.Tensor:
    """Full forward sampling of y incl. every noise term (spec §3.1, eqs. (4)–(5)): (n_draws, N)."""
    h = _act(act)
    L = params.n_hidden
    u = None
    for l in range(L + 1):
        if l == 0:  # the same for every draw: one (N, P) matmul, then broadcast
            v = (X @ params.W[0] + params.gamma[0]).expand(int(n_draws), X.shape[0], params.W[0].shape[1])
        else:
            v = u @ params.W[l] + params.gamma[l]
        v = v + params.tau2[l].sqrt() * torch.randn(v.shape, generator=generator, dtype=v.dtype, device=v.device)
        if l < L:
            hv = h(v)
            u = hv + params.sigma2[l].sqrt() * torch.randn(
                hv.shape, generator=generator, dtype=hv.dtype, device=hv.device
            )
    return v[..., 0]


def variance_bound(params: DeepNoiseParams, act) -> float:
    """Theorem 3 [P]: E‖y − g(x,Γ)‖² ≤ Σ_l [d_l² Σ_k σ²_{l-1,k} + Σ_k τ²_{l,k}] ∏_{l'>l} d_{l'}² C_h^{2(L−l)}.

    d_l = ‖β_l‖₂ (spectral norm), σ²_{-1} ≡ 0 (no noise on x), C_h the Lipschitz constant.
    """
    c_h = _act(act).lipschitz
    L = params.n_hidden
    d2 = [float(torch.linalg.matrix_norm(w, ord=2)) ** 2 for w in params.W]
    total = 0.0
    for l in range(L + 1):
        term = float(params.tau2[l].sum())
        if l > 0:
            term += d2[l] * float(params.sigma2[l - 1].sum())
        prod = 1.0
        for lp in range(l + 1, L + 1):
            prod *= d2[lp]
        total += term * prod * c_h ** (2 * (L - l))
    return total


def corollary4_bound(params: DeepNoiseParams) -> float:
    """Corollary 4 [P]: K·L·(d^{2L} + 1)(d² + 1)(σ² + τ²) for C_h = 1 activations.

    K = max_{-1≤l≤L} K_l, d² = max_l ‖β_l‖₂², σ² = max ‖σ²_l‖_∞, τ² = max ‖τ²_l‖_∞. For L = 0
    the printed factor L would give 0 < Theorem 3, so max(L, 1) is used [R].
    """
    L = params.n_hidden
    K = max(params.widths)
    d2 = max(float(torch.linalg.matrix_norm(w, ord=2)) ** 2 for w in params.W)
    s2 = max((float(s.max()) for s in params.sigma2), default=0.0)
    t2 = max(float(t.max()) for t in params.tau2)
    return K * max(L, 1) * (d2**L + 1.0) * (d2 + 1.0) * (s2 + t2)


def log_density_recursive(
    params: DeepNoiseParams, x_scalar, y_grid: torch.Tensor, act, *, n_nodes: int = 40001, width: float = 12.0
) -> torch.Tensor:
    """log f(y | x, θ) for L = 1, K_0 = 1 by 1-D quadrature of Theorem 2 [P] (test oracle).

    f(y|x) = ∫ N(y; γ_1 + β_1 h(v), τ²_1 + β_1² σ²_0) N(v; γ_0 + β_0 x, τ²_0) dv (with the
    covariance β_l Σ_{l-1} β_lᵀ, pitfall 1), by the trapezoid rule on mean ± width·sd.
    """
    if params.n_hidden != 1 or params.W[0].shape[1] != 1 or params.W[1].shape[1] != 1:
        raise ValueError(f"log_density_recursive needs L = 1 and K_0 = K_1 = 1, got widths {params.widths}")
    h = _act(act)
    W0, W1 = params.W
    x = torch.as_tensor(x_scalar, dtype=W0.dtype, device=W0.device).reshape(1, -1)
    m0 = (x @ W0 + params.gamma[0])[0, 0]
    t0 = params.tau2[0][0]
    sd0 = t0.sqrt()
    v = torch.linspace(float(m0 - width * sd0), float(m0 + width * sd0), int(n_nodes), dtype=W0.dtype, device=W0.device)
    log_pv = -0.5 * (v - m0) ** 2 / t0 - 0.5 * torch.log(2 * math.pi * t0)
    mean_y = params.gamma[1][0] + W1[0, 0] * h(v)
    var_y = params.tau2[1][0] + W1[0, 0] ** 2 * params.sigma2[0][0]
    y = torch.as_tensor(y_grid, dtype=W0.dtype, device=W0.device).reshape(-1, 1)
    dv = v[1] - v[0]
    log_w = torch.full_like(v, float(torch.log(dv)))
    log_w[0] = log_w[-1] = float(torch.log(0.5 * dv))
    log_pv = log_pv + log_w
    out = []
    block = max(1, 2_000_000 // int(n_nodes))  # bounded memory: block × n_nodes floats
    for start in range(0, y.shape[0], block):
        yb = y[start : start + block]
        log_py = -0.5 * (yb - mean_y) ** 2 / var_y - 0.5 * torch.log(2 * math.pi * var_y)
        out.append(torch.logsumexp(log_py + log_pv, dim=1))
    return torch.cat(out)


def rescale_params(params: DeepNoiseParams, source, target, rho2_floor: float = 1e-8) -> DeepNoiseParams:
    """Map a state from one standardisation of (x, y) to another (exact affine change).

    ``source``/``target`` = (x_mean, x_scale, y_mean, y_scale). With x_src = x_tgt·a + b
    (a = sx_t/sx_s, b = (mx_t − mx_s)/sx_s) and y_tgt = y_src·c + d (c = sy_s/sy_t,
    d = (my_s − my_t)/sy_t): W_0 ← diag(a) W_0, γ_0 ← γ_0 + b W_0; then W_L ← c W_L,
    γ_L ← c γ_L + d, τ²_L ← c² τ²_L. Hidden noise is unchanged. ρ² = W², ξ² = γ² (floored)
    are recomputed for the changed layers ([C] ρ = |β|, spec §2.3 step 2).
    """
    out = params.clone()
    mx_s, sx_s, my_s, sy_s = source
    mx_t, sx_t, my_t, sy_t = target
    like = out.W[0]
    a = torch.as_tensor(np.asarray(sx_t) / np.asarray(sx_s), dtype=like.dtype, device=like.device)
    b = torch.as_tensor((np.asarray(mx_t) - np.asarray(mx_s)) / np.asarray(sx_s), dtype=like.dtype, device=like.device)
    W0 = out.W[0]
    out.gamma[0] = out.gamma[0] + b @ W0
    out.W[0] = a[:, None] * W0
    c = float(sy_s) / float(sy_t)
    d = (float(my_s) - float(my_t)) / float(sy_t)
    L = out.n_hidden
    out.W[L] = out.W[L] * c
    out.gamma[L] = out.gamma[L] * c + d
    out.tau2[L] = out.tau2[L] * c**2
    for l in {0, L}:
        out.rho2[l] = torch.clamp(out.W[l] ** 2, min=rho2_floor)
        out.xi2[l] = torch.clamp(out.gamma[l] ** 2, min=rho2_floor)
    return out
