"""The B-DeepNoise Gibbs sampler: corrected full conditionals (spec §2.1), order (spec §2.2).

Every conditional is vectorised over rows and units (loops only over layers and mixture
pieces), float64 on the device of the inputs, and every random draw comes from the one
``torch.Generator`` passed in (same seed → identical chain, spec §7.14).

(a) v_{l,k} | · ~ Σ_j π_j TN(λ_j, ω_j², c_{j-1}, c_j) with ω_j² = (1/t + b_j²/s)⁻¹,
    λ_j = ω_j²(m/t + b_j(w − b'_j)/s), log π̃_j = log φ(w; b_j m + b'_j, s + b_j² t)
    + log[Φ((c_j − λ_j)/ω_j) − Φ((c_{j-1} − λ_j)/ω_j)]   ([P] Theorem 1 in direct form).
(b) u_l | · ~ N(Λ⁻¹[Σ⁻¹ h(v_{l-1}) + β_lᵀT_l⁻¹(v_l − γ_l)], Λ⁻¹), Λ = β_lᵀT_l⁻¹β_l + Σ_{l-1}⁻¹
    (one Cholesky per layer; NOT eq. (7) of [P], pitfall 1).
(c) (β_{l,k}, γ_{l,k}) | · ~ N(A⁻¹τ⁻²Ūᵀv_k, A⁻¹), A = τ⁻²ŪᵀŪ + D⁻¹ (batched over k; NOT eq. (8)).
(d) τ²_{l,k} ~ IG(a_pre + N/2, b_pre + SS/2), σ²_{l,k} ~ IG(a_post + N/2, b_post + SS/2)
    (labels by variable, not as in eqs. (9)/(10)).
(e) ρ² ~ IG(a_w + ½, b_w + β²/2), ξ² ~ IG(a_b + ½, b_b + γ²/2), floored at priors.rho2_floor;
    ρ² shared per unit or per layer with priors.tie_rho (pitfall 5).

Speed (issue target ≤ 0.1 s per sweep at N = 1000; spec §2.5's NumPy pilot took 0.23 s):
measured 2026-11-23 on the shared 2-core AMD EPYC box, torch 2.13 CPU, one thread, 4×50 hard
tanh, P = 8, full sweeps, best of 5 runs of 10 sweeps (other workers kept the load near 4):

    N = 1000:  0.050–0.063 s CPU per sweep  (wall 0.073–0.094 s)
    N = 4000:  0.18–0.20 s CPU per sweep    (wall 0.27–0.31 s)   → linear in N

Per layer at N = 1000: v-step 6.4 ms (≈130 ns per element: four erfc, one ndtri, two uniforms),
u-step 2.1 ms (one normal per element dominates), weights 1.8 ms (Gram + 50 batched 51×51
Cholesky factorisations), variances ≈1 ms. What made it fast: erfc-based near-side CDFs
instead of ``torch.special.log_ndtr`` (3× slower; ``ndtr`` itself is wrong below −10), log
space only on the far subset, no ``where`` in the reflection, the chosen piece selected by
0/1 masks, shared Gram matrices, triangular solves instead of cholesky_solve, and one K×K
triangular inverse per layer for the u-step.
"""

from __future__ import annotations

import itertools
import math

import torch

from dubito.inference.truncnorm import LOG2, draw_from_cdf2, log_twice_mass
from dubito.regression.deepnoise_model import (
    DeepNoiseLatents,
    DeepNoiseParams,
    DeepNoisePriors,
    PiecewiseLinear,
    forward_moments,
    piecewise_activation,
)

__all__ = [
    "cholesky_jitter",
    "gibbs_sweep",
    "init_latents",
    "random_init",
    "sample_inverse_gamma",
    "sample_noise_variances",
    "sample_prior_variances",
    "sample_u",
    "sample_v",
    "sample_weights",
    "train_log_likelihood",
    "u_conditional",
    "v_conditional",
    "weight_conditional",
]

_LOG_2PI = math.log(2.0 * math.pi)
_SQRT1_2 = math.sqrt(0.5)


# ----------------------------------------------------------------------------------------- utils
def _randn(shape, like: torch.Tensor, generator) -> torch.Tensor:
    return torch.randn(shape, generator=generator, dtype=like.dtype, device=like.device)


def cholesky_jitter(A: torch.Tensor) -> torch.Tensor:
    """Lower Cholesky factor of (a batch of) SPD matrices; on failure add 1e-10·tr(A)·I,
    ×10 per retry (spec §8 pitfall 7)."""
    C, info = torch.linalg.cholesky_ex(A)
    if not bool((info > 0).any()):
        return C
    eye = torch.eye(A.shape[-1], dtype=A.dtype, device=A.device)
    scale = 1e-10 * torch.diagonal(A, dim1=-2, dim2=-1).sum(-1).abs().clamp_min(1e-300)
    for _ in range(8):
        C, info = torch.linalg.cholesky_ex(A + scale[..., None, None] * eye)
        if not bool((info > 0).any()):
            return C
        scale = scale * 10.0
    raise ValueError("Cholesky failed even with a 1e-3·trace jitter: the matrix is not positive definite")


def sample_inverse_gamma(shape: torch.Tensor, scale: torch.Tensor, generator) -> torch.Tensor:
    """IG(shape a, scale b) = b / Gamma(a, 1) (spec §1.3; [C] samples it the same way)."""
    shape, scale = torch.broadcast_tensors(torch.as_tensor(shape), torch.as_tensor(scale))
    g = torch._standard_gamma(shape.contiguous(), generator=generator)
    return scale / g


def _hyper(value, l: int, like: torch.Tensor) -> torch.Tensor:
    """A prior hyper-parameter for layer l: float or the l-th of a list of per-unit tensors."""
    if isinstance(value, (list, tuple)):
        return torch.as_tensor(value[l], dtype=like.dtype, device=like.device)
    return torch.as_tensor(float(value), dtype=like.dtype, device=like.device)


# ------------------------------------------------------------------------------- (a) v-conditional
def _v_pieces(m, t, s, w, h: PiecewiseLinear):
    """Per piece j of h: (logit_j, lam_j, om_j, fa2_j, fb2_j) for p(v | m, t, s, w).

    logit_j = log C_j + log P_j (unnormalised log weight, spec §2.1a), lam_j/om_j the mean/sd
    of the Gaussian factor N(v; λ_j, ω_j²), om_j signed: negative where the piece interval was
    reflected to the near side, so that v = λ_j + om_j·z with z ~ N(0,1) truncated to the
    near-side interval [a', b'] and fa2_j = 2Φ(a'), fb2_j = 2Φ(b') (doubled CDFs, erfc without
    its factor ½; see dubito.inference.truncnorm). Slope-0 pieces reuse λ = m, ω² = t.
    Shapes broadcast between (N, K) and (K,). Written for few passes over (N, K) arrays: the
    near side of [a, b] is a' = min(a, −b), b' = a' + (b − a), so no ``where`` is needed.
    """
    inv_t = 1.0 / t
    inv_s = 1.0 / s
    out = []
    for b, b0, lo, hi in zip(h.slopes, h.intercepts, h.lower_edges(), h.upper_edges()):
        wc = w if b0 == 0.0 else w - b0  # w − b'_j
        if b == 0.0:  # C_j = φ(w; b'_j, s), λ = m, ω² = t
            om = t.sqrt()
            lam = m
            log_c = wc.square().mul_(-0.5 * inv_s)
            const = 0.5 * (torch.log(s) + _LOG_2PI) + LOG2  # + log 2: the CDFs below are doubled
        else:  # C_j = φ(w; b m + b'_j, s + b² t), λ = ω²(m/t + b(w − b'_j)/s)
            om2 = 1.0 / (inv_t + (b * b) * inv_s)
            om = om2.sqrt()
            lam = torch.addcmul(m * (inv_t * om2), wc, b * inv_s * om2)
            var_w = s + (b * b) * t
            log_c = (wc - m if b == 1.0 else wc - b * m).square_().mul_(-0.5 / var_w)
            const = 0.5 * (torch.log(var_w) + _LOG_2PI) + LOG2
        k = _SQRT1_2 / om  # standardised, divided by √2: erfc(−z/√2) = 2Φ(z)
        if math.isinf(lo) and math.isinf(hi):  # a linear piece on the whole line
            fa2, fb2, om_s = 0.0, 2.0, om
            logit = log_c - (const - LOG2)
        elif math.isinf(lo):  # (−inf, hi): already on the near side, b' = (hi − λ)/ω
            fa2, om_s = 0.0, om
            fb2 = torch.special.erfc((lam - hi) * k)
            log_p = log_twice_mass(fa2, fb2, lambda mk, lam=lam, om=om, hi=hi: _far_outer(lam, om, hi, mk, 1.0))
            logit = (log_c + log_p).sub_(const)
        elif math.isinf(hi):  # (lo, inf): reflected to (−inf, (λ − lo)/ω)
            fa2, om_s = 0.0, -om
            fb2 = torch.special.erfc((lo - lam) * k)
            log_p = log_twice_mass(fa2, fb2, lambda mk, lam=lam, om=om, lo=lo: _far_outer(lam, om, lo, mk, -1.0))
            logit = (log_c + log_p).sub_(const)
        else:  # a = (lo − λ)/ω, b = a + width; near side a' = min(a, −b) = −q√2
            width = (hi - lo) * k  # (b − a)/√2
            na = (lam - lo) * k  # −a/√2
            nb = width - na  # b/√2
            q = torch.maximum(na, nb)  # −a'/√2 ≥ 0
            fa2 = torch.special.erfc(q)
            fb2 = torch.special.erfc(q - width)
            om_s = torch.copysign(om, na - nb)  # negative (reflected) ⇔ a + b > 0

            def bounds(mk, q=q, width=width):
                qa = q[mk] if q.dim() else q
                wb = width.expand_as(q)[mk]
                return -qa / _SQRT1_2, (wb - qa) / _SQRT1_2

            log_p = log_twice_mass(fa2, fb2, bounds)
            logit = (log_c + log_p).sub_(const)
        out.append((logit, lam, om_s, fa2, fb2))
    return out


def _far_outer(lam, om, edge, mask, sign):
    """Near-side bounds (−inf, b') of an outer piece on the far subset: b' = sign·(edge − λ)/ω."""
    lm = lam.expand(mask.shape)[mask]
    o = om.expand(mask.shape)[mask]
    b = sign * (edge - lm) / o
    return torch.full_like(b, -math.inf), b


def v_conditional(m: torch.Tensor, t: torch.Tensor, s: torch.Tensor, w: torch.Tensor, act):
    """Mixture form of p(v | m, t, s, w) ∝ N(v; m, t)·N(w; h(v), s) (spec §2.1a).

    m, w: (..., K); t, s: (K,). Returns (log_weights, lam, omega2, lo, hi) with a trailing
    piece axis J (lo/hi of shape (J,)); log_weights are normalised (logsumexp = 0).
    """
    h = piecewise_activation(act)
    t, s = torch.as_tensor(t, dtype=m.dtype), torch.as_tensor(s, dtype=m.dtype)
    pieces = _v_pieces(m, t, s, w, h)
    shape = torch.broadcast_shapes(m.shape, w.shape)
    logits = torch.stack([p[0].expand(shape) for p in pieces], dim=-1)
    logits = logits - torch.logsumexp(logits, dim=-1, keepdim=True)
    lam = torch.stack([p[1].expand(shape) for p in pieces], dim=-1)
    omega2 = torch.stack([torch.as_tensor(p[2]).square().expand(shape) for p in pieces], dim=-1)
    kw = {"dtype": m.dtype, "device": m.device}
    return logits, lam, omega2, torch.tensor(h.lower_edges(), **kw), torch.tensor(h.upper_edges(), **kw)


def _select(is_piece, values):
    """Σ_j values[j]·is_piece[j] with exclusive 0/1 float masks: the value of the chosen piece.

    Exact (x·1 + y·0 = x for finite y) and cheaper than chained ``where``; zero floats skipped.
    """
    out = None
    for mask, v in zip(is_piece, values):
        if isinstance(v, float):
            if v == 0.0:
                continue
            term = mask * v
            out = term if out is None else out.add_(term)
        else:
            out = v * mask if out is None else torch.addcmul(out, v, mask)
    return out if out is not None else torch.zeros_like(is_piece[0])


def sample_v(m: torch.Tensor, t: torch.Tensor, s: torch.Tensor, w: torch.Tensor, act, generator) -> torch.Tensor:
    """Draw v ~ p(v | m, t, s, w) (spec §2.1a): piece j ~ π (one uniform, inverse CDF over the
    pieces), then TN(λ_j, ω_j², c_{j-1}, c_j) by the near-side inverse CDF (one uniform).

    The draw is not clipped to [c_{j-1}, c_j] afterwards: Φ⁻¹ is monotone, so it lies there
    up to the ndtr/ndtri round trip (about 1e-15 relative), which h's continuity makes harmless.
    """
    h = piecewise_activation(act)
    t = torch.as_tensor(t, dtype=m.dtype, device=m.device)
    s = torch.as_tensor(s, dtype=m.dtype, device=m.device)
    pieces = _v_pieces(m, t, s, w, h)
    logits = [p[0] for p in pieces]
    top = logits[0]
    for lg in logits[1:]:
        top = torch.maximum(top, lg)
    cum = list(itertools.accumulate(torch.exp(lg - top) for lg in logits))
    u = torch.rand(top.shape, generator=generator, dtype=top.dtype, device=top.device)
    r = u * cum[-1]
    below = [r < c for c in cum[:-1]]  # cumulative: chosen piece index ≤ j
    if below:
        is_piece = below[:1] + [b & ~a for a, b in itertools.pairwise(below)] + [~below[-1]]
    else:
        is_piece = [torch.ones_like(top, dtype=torch.bool)]
    is_piece = [mk.to(top.dtype) for mk in is_piece]
    lam = _select(is_piece, [p[1] for p in pieces])
    om_s = _select(is_piece, [p[2] for p in pieces])
    fa2 = _select(is_piece, [p[3] for p in pieces])
    fb2 = _select(is_piece, [p[4] for p in pieces])
    kw = {"dtype": top.dtype, "device": top.device}

    def bounds(mask):  # standardised near-side bounds of the chosen piece, far subset only
        j = sum((~b[mask]).to(torch.int64) for b in below) if below else torch.zeros_like(top[mask], dtype=torch.int64)
        lo_tab = torch.tensor(h.lower_edges(), **kw)
        hi_tab = torch.tensor(h.upper_edges(), **kw)
        lm, om = lam[mask], om_s[mask]
        e1, e2 = (lo_tab[j] - lm) / om, (hi_tab[j] - lm) / om
        return torch.minimum(e1, e2), torch.maximum(e1, e2)

    u2 = torch.rand(top.shape, generator=generator, dtype=top.dtype, device=top.device)
    z = draw_from_cdf2(fa2, fb2, u2, bounds)
    return lam + om_s * z


# ------------------------------------------------------------------------------- (b) u-conditional
def u_conditional(hv: torch.Tensor, sigma2: torch.Tensor, W: torch.Tensor, gamma: torch.Tensor, tau2: torch.Tensor, V_next: torch.Tensor):
    """Gaussian p(u_l | h(v_{l-1}), v_l) (spec §2.1b), u_l of width K = W.shape[0].

    hv (N, K) = h(v_{l-1}); sigma2 (K,) = σ²_{l-1}; W (K, K') = β_lᵀ; gamma, tau2 (K',);
    V_next (N, K') = v_l. Returns (mean (N, K), C) with Λ = C Cᵀ, Λ = W T⁻¹ Wᵀ + Σ⁻¹.
    """
    Wt = W / tau2  # W diag(1/τ²)
    prec = Wt @ W.T + torch.diag(1.0 / sigma2)
    C = cholesky_jitter(prec)
    r = hv / sigma2 + (V_next - gamma) @ Wt.T
    mean = torch.cholesky_solve(r.T, C).T
    return mean, C


def sample_u(hv, sigma2, W, gamma, tau2, V_next, generator) -> torch.Tensor:
    """Draw u_l (N, K) from spec §2.1b: u = C⁻ᵀ(C⁻¹r + z) with Λ = C Cᵀ, z ~ N(0, I).

    Row form u_row = (r_row C⁻ᵀ + z_row) C⁻¹, with the K×K triangular inverse formed once
    (two (N, K)×(K, K) matmuls are faster than two triangular solves with N right-hand sides).
    """
    Wt = W / tau2
    prec = Wt @ W.T + torch.diag(1.0 / sigma2)
    C = cholesky_jitter(prec)
    C_inv = torch.linalg.solve_triangular(C, torch.eye(C.shape[0], dtype=C.dtype, device=C.device), upper=False)
    r = torch.addmm(hv / sigma2, V_next - gamma, Wt.T)
    y = torch.addmm(_randn(r.shape, r, generator), r, C_inv.T)
    return y @ C_inv


# ------------------------------------------------------------------------------------ (c) weights
def _gram(U: torch.Tensor, V: torch.Tensor):
    """ŪᵀŪ (d, d) and ŪᵀV (d, K') with Ū = [U, 1], without forming Ū."""
    n = U.shape[0]
    d = U.shape[1] + 1
    G = U.new_empty(d, d)
    G[:-1, :-1] = U.T @ U
    s = U.sum(0)
    G[:-1, -1] = s
    G[-1, :-1] = s
    G[-1, -1] = n
    B = U.new_empty(d, V.shape[1])
    B[:-1] = U.T @ V
    B[-1] = V.sum(0)
    return G, B


def _weight_factor(U, V, tau2, rho2, xi2):
    """(C, rhs): A_k = C_k C_kᵀ = τ_k⁻²ŪᵀŪ + diag(1/ρ²_{:,k}, 1/ξ²_k), rhs_k = τ_k⁻²Ūᵀv_k."""
    G, B = _gram(U, V)
    prior_prec = torch.cat([1.0 / rho2, (1.0 / xi2).unsqueeze(0)], dim=0).T  # (K', d)
    A = G.unsqueeze(0) / tau2[:, None, None] + torch.diag_embed(prior_prec)
    return cholesky_jitter(A), (B / tau2).T.unsqueeze(-1)  # (K', d, d), (K', d, 1)


def weight_conditional(U: torch.Tensor, V: torch.Tensor, tau2: torch.Tensor, rho2: torch.Tensor, xi2: torch.Tensor):
    """Per-row Bayesian linear regression (spec §2.1c), all K' rows batched.

    U (N, K) inputs, V (N, K') targets, tau2 (K',), rho2 (K, K'), xi2 (K',). Returns
    (mean (K', K+1), C (K', K+1, K+1)) with A_k = C_k C_kᵀ = τ_k⁻²ŪᵀŪ + diag(1/ρ²_{:,k}, 1/ξ²_k);
    the last coordinate is the bias γ_k.
    """
    C, rhs = _weight_factor(U, V, tau2, rho2, xi2)
    return torch.cholesky_solve(rhs, C)[..., 0], C


def sample_weights(U, V, tau2, rho2, xi2, generator):
    """Draw (W (K, K'), gamma (K',)) from spec §2.1c: θ_k = A_k⁻¹b_k + C_k⁻ᵀz = C_k⁻ᵀ(C_k⁻¹b_k + z)
    (two batched triangular solves)."""
    C, rhs = _weight_factor(U, V, tau2, rho2, xi2)
    w = torch.linalg.solve_triangular(C, rhs, upper=False)
    w = w + _randn(w.shape, w, generator)
    draw = torch.linalg.solve_triangular(C.mT, w, upper=True)[..., 0]
    return draw[:, :-1].T.contiguous(), draw[:, -1].contiguous()


# ---------------------------------------------------------------------------------- (d), (e) IG
def sample_noise_variances(resid: torch.Tensor, a, b, generator) -> torch.Tensor:
    """σ²_k ~ IG(a + N/2, b + ½ Σ_n resid²_{n,k}) for resid (N, K) (spec §2.1d)."""
    n = resid.shape[0]
    a = torch.as_tensor(a, dtype=resid.dtype, device=resid.device)
    b = torch.as_tensor(b, dtype=resid.dtype, device=resid.device)
    ss = (resid * resid).sum(0)
    return sample_inverse_gamma((a + 0.5 * n).expand_as(ss), b + 0.5 * ss, generator)


#: How the weights' prior variances ρ² are shared (spec pitfall 5): one per weight [P], one per
#: unit (the K_in weights into unit k, spec §2.1c's row β_{l,k}: a column of our (K_in, K_out) W),
#: or one per layer.
TIE_RHO = ("none", "row", "layer")


def sample_prior_variances(values: torch.Tensor, a, b, generator, floor: float = 0.0, tie: str = "none") -> torch.Tensor:
    """ρ² ~ IG(a + ½, b + ½ value²) elementwise (spec §2.1e), floored at ``floor`` (pitfall 5).

    ``tie`` (`TIE_RHO`, for a (K_in, K_out) weight matrix): "row" draws one ρ²_k ~ IG(a + K_in/2,
    b + ½ Σ_j W_jk²) per unit k, "layer" one ρ² ~ IG(a + n/2, b + ½ Σ W²) for the layer's n
    weights (the conjugate updates of a shared variance); the result has ``values``' shape."""
    a = torch.as_tensor(a, dtype=values.dtype, device=values.device)
    b = torch.as_tensor(b, dtype=values.dtype, device=values.device)
    sq = values * values
    if tie == "none":
        out = sample_inverse_gamma((a + 0.5).expand_as(values), b + 0.5 * sq, generator)
    elif tie == "row":
        out = sample_inverse_gamma((a + 0.5 * values.shape[0]).expand(values.shape[1:]), b + 0.5 * sq.sum(0),
                                   generator).expand_as(values).clone()
    elif tie == "layer":
        out = sample_inverse_gamma((a + 0.5 * values.numel()).reshape(1), (b + 0.5 * sq.sum()).reshape(1),
                                   generator).expand_as(values).clone()
    else:
        raise ValueError(f"tie must be one of {TIE_RHO}, got {tie!r}")
    return out.clamp_min(floor) if floor > 0 else out


# ---------------------------------------------------------------------------------- init / sweep
def random_init(widths, generator, *, dtype=torch.float64, device="cpu") -> DeepNoiseParams:
    """Random state (spec §2.3 [R]): W ~ N(0, 1/K_in), γ = 0, τ² = σ² = 0.1, ρ² = 1/K_in, ξ² = 1.

    widths = (P, K_0, …, K_L) with K_L = 1.
    """
    widths = tuple(int(k) for k in widths)
    if len(widths) < 2 or any(k < 1 for k in widths):
        raise ValueError(f"widths must be (P, K_0, ..., K_L) with positive entries, got {widths}")
    kw = {"dtype": dtype, "device": device}
    W, gamma, tau2, sigma2, rho2, xi2 = [], [], [], [], [], []
    n_layers = len(widths) - 1
    for l in range(n_layers):
        k_in, k_out = widths[l], widths[l + 1]
        W.append(torch.randn((k_in, k_out), generator=generator, **kw) / math.sqrt(k_in))
        gamma.append(torch.zeros(k_out, **kw))
        tau2.append(torch.full((k_out,), 0.1, **kw))
        if l < n_layers - 1:
            sigma2.append(torch.full((k_out,), 0.1, **kw))
        rho2.append(torch.full((k_in, k_out), 1.0 / k_in, **kw))
        xi2.append(torch.ones(k_out, **kw))
    return DeepNoiseParams(W=W, gamma=gamma, tau2=tau2, sigma2=sigma2, rho2=rho2, xi2=xi2)


def _layer_input(X, latents: DeepNoiseLatents, l: int):
    return X if l == 0 else latents.U[l - 1]


def _layer_output(y, latents: DeepNoiseLatents, l: int, L: int):
    return y.unsqueeze(-1) if l == L else latents.V[l]


def _update_v(params, latents, X, l, h, generator, rows=None):
    U_in = _layer_input(X, latents, l)
    w = latents.U[l]
    if rows is not None:
        U_in, w = U_in[rows], w[rows]
    m = U_in @ params.W[l] + params.gamma[l]
    v = sample_v(m, params.tau2[l], params.sigma2[l], w, h, generator)
    if rows is None:
        latents.V[l] = v
    else:
        latents.V[l][rows] = v


def _update_u(params, latents, y, l, h, generator, rows=None):
    """Refresh U[l] = u_{l+1} given v_l and v_{l+1} (or y)."""
    L = params.n_hidden
    v_prev = latents.V[l]
    v_next = _layer_output(y, latents, l + 1, L)
    if rows is not None:
        v_prev, v_next = v_prev[rows], v_next[rows]
    hv = h(v_prev)
    u = sample_u(hv, params.sigma2[l], params.W[l + 1], params.gamma[l + 1], params.tau2[l + 1], v_next, generator)
    if rows is None:
        latents.U[l] = u
    else:
        latents.U[l][rows] = u


def _check_data(params: DeepNoiseParams, X: torch.Tensor, y: torch.Tensor) -> None:
    if X.dim() != 2 or y.dim() != 1 or X.shape[0] != y.shape[0]:
        raise ValueError(f"expected X (N, P) and y (N,), got X {tuple(X.shape)} and y {tuple(y.shape)}")
    if X.shape[1] != params.W[0].shape[0]:
        raise ValueError(f"X has {X.shape[1]} columns but the network expects P = {params.W[0].shape[0]}")
    if params.W[-1].shape[1] != 1:
        raise ValueError(f"the sampler supports one output (Q = 1), got {params.W[-1].shape[1]}")
    if X.dtype != params.W[0].dtype or y.dtype != params.W[0].dtype:
        raise TypeError(f"X, y and the parameters must share a dtype (float64), got {X.dtype}, {y.dtype}, {params.W[0].dtype}")


def init_latents(params: DeepNoiseParams, X: torch.Tensor, y: torch.Tensor, act, generator) -> DeepNoiseLatents:
    """Noisy forward pass v = mean + τz, u = h(v) + σz, then one down-then-up sweep of v/u
    updates (spec §2.3 step 3 [C])."""
    h = piecewise_activation(act)
    L = params.n_hidden
    _check_data(params, X, y)
    V, U = [], []
    u = X
    for l in range(L):
        v = u @ params.W[l] + params.gamma[l]
        v = v + params.tau2[l].sqrt() * _randn(v.shape, v, generator)
        u = h(v) + params.sigma2[l].sqrt() * _randn(v.shape, v, generator)
        V.append(v)
        U.append(u)
    latents = DeepNoiseLatents(V=V, U=U)
    for l in reversed(range(L)):
        _update_u(params, latents, y, l, h, generator)
        _update_v(params, latents, X, l, h, generator)
    for l in range(L):
        _update_v(params, latents, X, l, h, generator)
        _update_u(params, latents, y, l, h, generator)
    return latents


def gibbs_sweep(
    params: DeepNoiseParams,
    latents: DeepNoiseLatents,
    X: torch.Tensor,
    y: torch.Tensor,
    priors: DeepNoisePriors,
    act,
    generator,
    *,
    latent_batch_size=None,
    update_hyper: bool = True,
) -> None:
    """One systematic-scan sweep in place, [P] Algorithm 1 order (spec §2.2): for l = 0..L,
    (1) v_l then u_{l+1} (l < L), (2) (β_l, γ_l), (3) τ²_l, σ²_l, ρ²_l, ξ²_l.

    latent_batch_size: refresh only a random mini-batch of latent rows per layer ([C],
    spec §2.2; weights and variances still use all rows). update_hyper=False freezes
    ρ², ξ², τ², σ².
    """
    h = piecewise_activation(act)
    L = params.n_hidden
    _check_data(params, X, y)
    N = X.shape[0]
    if latent_batch_size is not None and int(latent_batch_size) < 1:
        raise ValueError(f"latent_batch_size must be a positive integer or None, got {latent_batch_size}")
    for l in range(L + 1):
        if l < L:
            rows = None
            if latent_batch_size is not None and int(latent_batch_size) < N:
                rows = torch.randperm(N, generator=generator, device=X.device)[: int(latent_batch_size)]
            _update_v(params, latents, X, l, h, generator, rows)
            _update_u(params, latents, y, l, h, generator, rows)
        U_in = _layer_input(X, latents, l)
        V_out = _layer_output(y, latents, l, L)
        W, g = sample_weights(U_in, V_out, params.tau2[l], params.rho2[l], params.xi2[l], generator)
        params.W[l], params.gamma[l] = W, g
        if not update_hyper:
            continue
        resid = V_out - U_in @ W - g
        like = resid
        params.tau2[l] = sample_noise_variances(resid, _hyper(priors.a_pre, l, like), _hyper(priors.b_pre, l, like), generator)
        if l < L:
            resid_u = latents.U[l] - h(latents.V[l])
            params.sigma2[l] = sample_noise_variances(
                resid_u, _hyper(priors.a_post, l, like), _hyper(priors.b_post, l, like), generator
            )
        params.rho2[l] = sample_prior_variances(W, priors.a_w, priors.b_w, generator, priors.rho2_floor,
                                                tie=priors.tie_rho)
        params.xi2[l] = sample_prior_variances(g, priors.a_b, priors.b_b, generator, priors.rho2_floor)


def train_log_likelihood(params: DeepNoiseParams, X: torch.Tensor, y: torch.Tensor, act, n_draws: int, generator) -> float:
    """Mean over rows of the Rao–Blackwellised log p(y | x, θ) (spec §3.2):
    log (1/S) Σ_s N(y; μ_s, s²_s) with (μ, s²) from :func:`forward_moments`."""
    mean, var = forward_moments(params, X, act, n_draws, generator)
    logp = -0.5 * (y - mean) ** 2 / var - 0.5 * (torch.log(var) + _LOG_2PI)
    return float((torch.logsumexp(logp, dim=0) - math.log(mean.shape[0])).mean())
