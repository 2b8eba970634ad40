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
(e) ρ² ~ IG(a_w + ½, b_w + β²/2), ξ² ~ IG(a_b + ½, b_b + γ²/2), floored at priors.rho2_floor.
"""

from __future__ import annotations

import itertools
import math

import torch

from dubito.inference.truncnorm import log_mass_from_cdf, ndtr, near_side, standard_draw_from_cdf
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
    """Per piece j of h: (logit_j, lam_j, om_j, fa_j, fb_j, zlo_j) for p(v | m, t, s, w).

    logit_j = log C_j + log P_j (unnormalised log weight), lam_j/om_j the mean/sd of the
    Gaussian factor N(v; λ_j, ω_j²), signed: om_j < 0 where the piece interval was reflected
    to the near side, so that v = λ_j + om_j·z with z ~ N(0,1) truncated to [a'_j, b'_j] and
    fa_j = Φ(a'_j), fb_j = Φ(b'_j) (see dubito.inference.truncnorm). Slope-0 pieces reuse
    λ = m, ω² = t. Shapes broadcast between (N, K) and (K,).
    """
    inv_t = 1.0 / t
    inv_s = 1.0 / s
    out = []
    for b, b0, lo, hi in zip(h.slopes, h.intercepts, h.lower_edges(), h.upper_edges()):
        if b == 0.0:
            om = t.sqrt()
            lam = m
            log_c = (w - b0).square_().mul_(-0.5 * inv_s) - 0.5 * (torch.log(s) + _LOG_2PI)
        else:
            om2 = 1.0 / (inv_t + (b * b) * inv_s)
            om = om2.sqrt()
            lam = (m * inv_t + (w - b0) * (b * inv_s)) * om2
            var_w = s + (b * b) * t
            log_c = (w - b * m - b0).square_().mul_(-0.5 / var_w) - 0.5 * (torch.log(var_w) + _LOG_2PI)
        if math.isinf(lo) and math.isinf(hi):  # a linear piece on the whole line
            fa, fb, zlo, om_s = 0.0, 1.0, None, om
            log_p = torch.zeros_like(log_c)
        elif math.isinf(lo):  # (−inf, hi): already on the near side
            zhi = (hi - lam) / om
            fa, fb, zlo, om_s = 0.0, ndtr(zhi), None, om
            log_p = log_mass_from_cdf(fa, fb, torch.full_like(zhi, -math.inf), zhi)
        elif math.isinf(hi):  # (lo, inf): reflected to (−inf, −(lo − λ)/ω)
            zhi = (lam - lo) / om
            fa, fb, zlo, om_s = 0.0, ndtr(zhi), None, -om
            log_p = log_mass_from_cdf(fa, fb, torch.full_like(zhi, -math.inf), zhi)
        else:
            za, zb, flip = near_side((lo - lam) / om, (hi - lam) / om)
            fa, fb, zlo = ndtr(za), ndtr(zb), za
            om_s = torch.where(flip, -om, om)
            log_p = log_mass_from_cdf(fa, fb, za, zb)
        out.append((log_c + log_p, lam, om_s, fa, fb, zlo))
    return out


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
    """values[j] where is_piece[j] (exclusive masks), elementwise; values that are the same
    object (e.g. λ = m for every slope-0 piece) share one branch, so fewer ``where`` passes."""
    counts = {}
    for v in values:
        counts[id(v)] = counts.get(id(v), 0) + 1
    default = max(values, key=lambda v: counts[id(v)])
    out = default
    for mask, v in zip(is_piece, values):
        if v is not default:
            out = torch.where(mask, v, out)
    return out


def sample_v(m: torch.Tensor, t: torch.Tensor, s: torch.Tensor, w: torch.Tensor, act, generator) -> torch.Tensor:
    """Draw v ~ p(v | m, t, s, w) (spec §2.1a): piece j ~ π (one uniform, inverse CDF over the
    pieces), then TN(λ_j, ω_j², c_{j-1}, c_j) by the near-side inverse CDF (one uniform).

    The draw is not clipped to [c_{j-1}, c_j] afterwards: Φ⁻¹ is monotone, so it lies there
    up to the ndtr/ndtri round trip (about 1e-15 relative), which h's continuity makes harmless.
    """
    h = piecewise_activation(act)
    pieces = _v_pieces(m, t, s, w, h)
    logits = [p[0] for p in pieces]
    top = logits[0]
    for lg in logits[1:]:
        top = torch.maximum(top, lg)
    cum = list(itertools.accumulate(torch.exp(lg - top) for lg in logits))
    u = torch.rand(top.shape, generator=generator, dtype=top.dtype, device=top.device)
    r = u * cum[-1]
    below = [r < c for c in cum[:-1]]  # cumulative: piece index ≤ j
    is_piece = below[:1] + [b & ~a for a, b in zip(below, below[1:])] + [~below[-1]] if below else [r == r]
    lam = _select(is_piece, [p[1] for p in pieces])
    om_s = _select(is_piece, [p[2] for p in pieces])
    fa = _select(is_piece, [p[3] for p in pieces])
    fb = _select(is_piece, [p[4] for p in pieces])
    kw = {"dtype": top.dtype, "device": top.device}

    def bounds(mask):  # standardised near-side bounds of the chosen piece, far subset only
        j = sum((~b[mask]).to(torch.int64) for b in below) if below else torch.zeros_like(top[mask], dtype=torch.int64)
        lo_tab = torch.tensor(h.lower_edges(), **kw)
        hi_tab = torch.tensor(h.upper_edges(), **kw)
        lm, om = lam.expand_as(top)[mask], om_s.expand_as(top)[mask]
        e1, e2 = (lo_tab[j] - lm) / om, (hi_tab[j] - lm) / om
        return torch.minimum(e1, e2), torch.maximum(e1, e2)

    u2 = torch.rand(top.shape, generator=generator, dtype=top.dtype, device=top.device)
    fa = torch.as_tensor(fa, **kw).expand_as(top)
    fb = torch.as_tensor(fb, **kw).expand_as(top)
    z = standard_draw_from_cdf(fa, fb, u2, bounds)
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
    """Draw u_l (N, K) from spec §2.1b: u = C⁻ᵀ(C⁻¹r + z) with Λ = C Cᵀ, z ~ N(0, I)."""
    Wt = W / tau2
    prec = Wt @ W.T + torch.diag(1.0 / sigma2)
    C = cholesky_jitter(prec)
    r = hv / sigma2 + (V_next - gamma) @ Wt.T
    # row form: u_row = (r_row C⁻ᵀ + z_row) C⁻¹
    y = torch.linalg.solve_triangular(C.T, r, upper=True, left=False)
    y = y + _randn(y.shape, y, generator)
    return torch.linalg.solve_triangular(C, y, upper=False, left=False)


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


def weight_conditional(U: torch.Tensor, V: torch.Tensor, tau2: torch.Tensor, rho2: torch.Tensor, xi2: torch.Tensor):
    """Per-row Bayesian linear regression (spec §2.1c), all K' rows batched.

    U (N, K) inputs, V (N, K') targets, tau2 (K',), rho2 (K, K'), xi2 (K',). Returns
    (mean (K', K+1), C (K', K+1, K+1)) with A_k = C_k C_kᵀ = τ_k⁻²ŪᵀŪ + diag(1/ρ²_{:,k}, 1/ξ²_k);
    the last coordinate is the bias γ_k.
    """
    G, B = _gram(U, V)
    prior_prec = torch.cat([1.0 / rho2, (1.0 / xi2).unsqueeze(0)], dim=0).T  # (K', d)
    A = G.unsqueeze(0) / tau2[:, None, None] + torch.diag_embed(prior_prec)
    C = cholesky_jitter(A)
    rhs = (B / tau2).T.unsqueeze(-1)  # (K', d, 1)
    mean = torch.cholesky_solve(rhs, C)[..., 0]
    return mean, C


def sample_weights(U, V, tau2, rho2, xi2, generator):
    """Draw (W (K, K'), gamma (K',)) from spec §2.1c: θ_k = A_k⁻¹b_k + C_k⁻ᵀ z."""
    mean, C = weight_conditional(U, V, tau2, rho2, xi2)
    z = _randn(mean.shape, mean, generator).unsqueeze(-1)
    draw = mean + torch.linalg.solve_triangular(C.transpose(-1, -2), z, upper=True)[..., 0]
    return draw[:, :-1].T.contiguous(), draw[:, -1].contiguous()


# ---------------------------------------------------------------------------------- (d), (e) IG
def sample_noise_variances(resid: torch.Tensor, a, b, generator) -> torch.Tensor:
    """σ²_k ~ IG(a + N/2, b + ½ Σ_n resid²_{n,k}) for resid (N, K) (spec §2.1d)."""
    n = resid.shape[0]
    a = torch.as_tensor(a, dtype=resid.dtype, device=resid.device)
    b = torch.as_tensor(b, dtype=resid.dtype, device=resid.device)
    ss = (resid * resid).sum(0)
    return sample_inverse_gamma((a + 0.5 * n).expand_as(ss), b + 0.5 * ss, generator)


def sample_prior_variances(values: torch.Tensor, a, b, generator, floor: float = 0.0) -> torch.Tensor:
    """ρ² ~ IG(a + ½, b + ½ value²) elementwise (spec §2.1e), floored at ``floor`` (pitfall 5)."""
    a = torch.as_tensor(a, dtype=values.dtype, device=values.device)
    b = torch.as_tensor(b, dtype=values.dtype, device=values.device)
    out = sample_inverse_gamma((a + 0.5).expand_as(values), b + 0.5 * values * values, generator)
    return out.clamp_min(floor) if floor > 0 else out


# ---------------------------------------------------------------------------------- init / sweep
def random_init(widths, generator, *, dtype=torch.float64, device="cpu") -> DeepNoiseParams:
    """Random state (spec §2.3 [R]): W ~ N(0, 1/K_in), γ = 0, τ² = σ² = 0.1, ρ² = 1/K_in, ξ² = 1.

    widths = (P, K_0, …, K_L) with K_L = 1.
    """
    widths = tuple(int(k) for k in widths)
    if len(widths) < 2 or any(k < 1 for k in widths):
        raise ValueError(f"widths must be (P, K_0, ..., K_L) with positive entries, got {widths}")
    kw = dict(dtype=dtype, device=device)
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
    hv = h(latents.V[l])
    v_next = _layer_output(y, latents, l + 1, L)
    if rows is not None:
        hv, v_next = hv[rows], v_next[rows]
    u = sample_u(hv, params.sigma2[l], params.W[l + 1], params.gamma[l + 1], params.tau2[l + 1], v_next, generator)
    if rows is None:
        latents.U[l] = u
    else:
        latents.U[l][rows] = u


def init_latents(params: DeepNoiseParams, X: torch.Tensor, y: torch.Tensor, act, generator) -> DeepNoiseLatents:
    """Noisy forward pass v = mean + τz, u = h(v) + σz, then one down-then-up sweep of v/u
    updates (spec §2.3 step 3 [C])."""
    h = piecewise_activation(act)
    L = params.n_hidden
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
        params.rho2[l] = sample_prior_variances(W, priors.a_w, priors.b_w, generator, priors.rho2_floor)
        params.xi2[l] = sample_prior_variances(g, priors.a_b, priors.b_b, generator, priors.rho2_floor)


def train_log_likelihood(params: DeepNoiseParams, X: torch.Tensor, y: torch.Tensor, act, n_draws: int, generator) -> float:
    """Mean over rows of the Rao–Blackwellised log p(y | x, θ) (spec §3.2):
    log (1/S) Σ_s N(y; μ_s, s²_s) with (μ, s²) from :func:`forward_moments`."""
    mean, var = forward_moments(params, X, act, n_draws, generator)
    logp = -0.5 * (y - mean) ** 2 / var - 0.5 * (torch.log(var) + _LOG_2PI)
    return float((torch.logsumexp(logp, dim=0) - math.log(mean.shape[0])).mean())
