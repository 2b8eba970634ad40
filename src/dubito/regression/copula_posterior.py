"""Posterior machinery of the implicit copula neural linear model (IC-NLM) of Hoffmann & Klein
(2023), "Marginally calibrated response distributions for end-to-end learning in autonomous
driving", Ann. Appl. Stat. 17; spec: shared/specs/icnlm.md §2.3–2.9.

Given pseudo responses z_i = Φ⁻¹(F̂_Y(y_i)) (n,) and frozen last-layer features Ψ (n, p) with
rows ψ_i, the latent model z̃ = Ψβ + ε (no intercept), β | θ ~ N(0, P(θ)⁻¹), standardised by
S = diag(s_i), s_i = (1 + ψ_iᵀP(θ)⁻¹ψ_i)^{-1/2}, gives the Gaussian implicit copula with
correlation R = S(I + ΨP⁻¹Ψᵀ)S (unit diagonal; eq. 5). Keeping β explicit, the likelihood is

    p(z | β, θ) = φ_n(z; SΨβ, S²)                                                  (6)

evaluated in O(n·p):  log p = −n/2 log 2π − Σ log s_i − ½ Σ r_i²,  r_i = z_i/s_i − ψ_iᵀβ.
(The factor Π p_Y(y_i)/φ₁(z_i) of (6) does not depend on the parameters and is left out.)

Priors on the unconstrained parameters ϑ (densities include every constant and the Jacobian,
so log_prob is the exact log p(z | ϑ) + log p(ϑ) and the VI ELBO bounds log p(z)):

- **ridge**: ϑ = (β, u = log τ²); β_j | τ² ~ N(0, τ²), τ² ~ Weibull(shape ½, scale ν), ν = 2.5
  (Klein & Kneib 2016's scale-dependent prior; p(τ²) = (2ν)⁻¹ (τ²/ν)^{-1/2} exp(−(τ²/ν)^{1/2})).
  With ``tau2`` given, τ² is held fixed and ϑ = β (then the β posterior is conjugate).
- **horseshoe**: ϑ = (β, ω_j = log λ_j², η = log τ); β_j | λ_j ~ N(0, λ_j²),
  λ_j | τ ~ Half-Cauchy(0, τ), τ ~ Half-Cauchy(0, 1). Note (spec §7.3): τ enters only through
  λ's prior, not as β_j ~ N(0, λ_j²τ²). ``legacy_lambda_jacobian=True`` adds the authors'
  code's extra +½Σω_j (an improper-tailed λ prior; off by default).

Log posteriors and analytic gradients (spec §2.6), batched over M draws in O(M·n·p):
  ridge      ∂ℓ/∂β = Ψᵀr − e^{−u}β,
             ∂ℓ/∂u = ½Σ(1−s_i²) − ½Σ r_i z_i (1−s_i²)/s_i + ½e^{−u}βᵀβ − (p−1)/2 − ½(e^u/ν)^{1/2}
  horseshoe  ∂ℓ/∂β = Ψᵀr − β∘e^{−ω},
             ∂ℓ/∂ω_j = ½λ_j² Σ_i ψ_ij²(s_i² − r_i z_i s_i) + ½β_j²e^{−ω_j} − σ(ω_j − 2η),
             ∂ℓ/∂η = 2Σ_j σ(ω_j − 2η) − (p−1) − 2σ(2η)      (σ the logistic function)

Random intercept (``intercept=True``; not in the paper, which has no intercept, §3.3): the latent
model becomes z̃ = Ψβ + β₀ + ε with β₀ | κ ~ N(0, κ) and κ ~ the same Weibull(½, ν) as τ² (ridge;
ϑ = (β, β₀, log τ², log κ)), or one more column with its own λ (horseshoe). It is a column of ones
appended to Ψ, so s_i = (1 + κ + τ²||ψ_i||²)^{-1/2}: the latent noise variance s_i² no longer
has to come from τ²||ψ_i||² alone. Without it the fit ties the noise to the norm of the features,
which an MSE-trained network does not make meaningful (ReLU features' ||ψ||² varies several-fold
between inputs); the posterior then settles on an average s_i² above the residual variance
(0.73 against 0.48 on benchmarks/icnlm_marginal_gap.py's case), the predictive is over-dispersed
in z and not marginally calibrated in y. With the intercept the gradient in log κ is
½κ Σ_i (s_i² − r_i z_i s_i), the log τ² one ½ Σ_i τ²||ψ_i||² (s_i² − r_i z_i s_i) plus the prior's.

Inference: ``fit_copula_posterior`` (`dubito.regression.copula_inference`) runs the
factor-covariance Gaussian VI of the paper (dubito.inference.vi: rank 3, 50 draws, ADADELTA) or
NUTS (dubito.inference.nuts, via Pyro, in place of the paper's fixed-step HMC) and returns a
``CopulaPosterior`` whose ``predict_z``
gives the latent Z₀ | x₀ ~ N(s₀ψ₀ᵀβ, s₀²) for the plug-in estimate or the posterior mixture
(spec §2.9); the estimator turns these into p(y|x) = p_Z(Φ⁻¹(F_Y(y))) p_Y(y)/φ₁(Φ⁻¹(F_Y(y))).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch

from dubito._validation import check_bool, check_choice, check_float
from dubito.inference.vi import FactorGaussian
from dubito.predictive.mixture import GaussianMixture

__all__ = [
    "CopulaModel", "CopulaPosterior", "ZPrediction",
    "correlation_matrix", "conjugate_posterior", "copula_scales", "layout_dim", "with_intercept",
]

PRIORS = ("ridge", "horseshoe")
INFERENCES = ("vi", "nuts")
NU_DEFAULT = 2.5          # Weibull scale of the ridge hyperprior (paper, §2.5)
LOG_2PI = math.log(2.0 * math.pi)
LOG_PI = math.log(math.pi)
# rows per block of the likelihood: (50 draws x 4096 rows) float64 temporaries = 1.6 MB each
_ROW_BLOCK = 4096


def _as_f64(x, device) -> torch.Tensor:
    if isinstance(x, torch.Tensor):
        return x.detach().to(device=device, dtype=torch.float64)
    return torch.as_tensor(np.asarray(x, dtype=np.float64), device=device)


def with_intercept(psi: torch.Tensor, intercept: bool) -> torch.Tensor:
    """ψ (n, p), with a column of ones appended when ``intercept`` (the random intercept's)."""
    if not intercept:
        return psi
    return torch.cat([psi, torch.ones(psi.shape[0], 1, dtype=psi.dtype, device=psi.device)], dim=1)


def layout_dim(prior: str, p: int, intercept: bool, tau2: float | None) -> int:
    """Coordinates of ϑ for p features (`CopulaModel`'s layout): ridge β (p + intercept), log τ²
    unless ``tau2`` is fixed, log κ with an intercept; horseshoe β, log λ² (p + intercept each), log τ."""
    coef = p + int(intercept)
    if prior == "ridge":
        return coef if tau2 is not None else coef + 1 + int(intercept)
    return 2 * coef + 1


def _prior_variances(theta: torch.Tensor, prior: str, p: int, intercept: bool, tau2: float | None) -> torch.Tensor:
    """P(θ)⁻¹'s diagonal per draw (M, p) for the coordinate layout of `CopulaModel` (p counting the
    intercept's column): τ² repeated (and κ last with an intercept), or λ²."""
    if prior == "ridge":
        if tau2 is not None:
            return torch.full((theta.shape[0], p), tau2, dtype=theta.dtype, device=theta.device)
        tau2s = torch.exp(theta[:, p:p + 1]).expand(-1, p - intercept)
        return torch.cat([tau2s, torch.exp(theta[:, p + 1:p + 2])], dim=1) if intercept else tau2s
    return torch.exp(theta[:, p:2 * p])


def _weibull_ridge(beta: torch.Tensor, u: torch.Tensor, nu: float):
    """log N(β; 0, e^u I_k) + log Weibull(e^u; ½, ν) + u (the log-Jacobian), per draw, and its
    gradients in β (M, k) and u (M,): the ridge prior of k coefficients with variance e^u."""
    k = beta.shape[1]
    bb = (beta * beta).sum(-1)
    root = torch.sqrt(torch.exp(u) / nu)
    value = (-0.5 * k * LOG_2PI - 0.5 * k * u - 0.5 * torch.exp(-u) * bb
             - math.log(2.0 * nu) - 0.5 * (u - math.log(nu)) - root + u)
    return value, -beta * torch.exp(-u)[:, None], -0.5 * (k - 1) + 0.5 * torch.exp(-u) * bb - 0.5 * root


def copula_scales(psi: torch.Tensor, prior_var: torch.Tensor) -> torch.Tensor:
    """s = (1 + Σ_j ψ_j² v_j)^{-1/2} for features ψ (..., n, p) or (n, p) and prior variances
    v (M, p) (τ² repeated for ridge, λ² for horseshoe); returns (M, n)."""
    return torch.rsqrt(1.0 + prior_var @ (psi**2).T)


def correlation_matrix(psi, prior_var) -> torch.Tensor:
    """The copula correlation R = S(I + Ψ diag(v) Ψᵀ)S (eq. 5), dense (n, n); for small n and tests.
    prior_var: a scalar τ² (ridge) or (p,) λ² (horseshoe)."""
    psi = _as_f64(psi, "cpu")
    v = _as_f64(prior_var, psi.device).expand(psi.shape[1])
    s = copula_scales(psi, v[None])[0]
    core = torch.eye(psi.shape[0], dtype=torch.float64) + (psi * v) @ psi.T
    return s[:, None] * core * s[None, :]


def conjugate_posterior(psi, z, prior_var) -> tuple[torch.Tensor, torch.Tensor]:
    """With the prior variances fixed, β | z ~ N(Q⁻¹Ψᵀ(z∘s⁻¹), Q⁻¹), Q = ΨᵀΨ + diag(v)⁻¹
    (spec §6.4). Returns (mean (p,), covariance (p, p))."""
    psi = _as_f64(psi, "cpu")
    z = _as_f64(z, psi.device)
    v = _as_f64(prior_var, psi.device).expand(psi.shape[1])
    s = copula_scales(psi, v[None])[0]
    Q = psi.T @ psi + torch.diag(1.0 / v)
    cov = torch.linalg.inv(Q)
    cov = 0.5 * (cov + cov.T)
    return cov @ (psi.T @ (z / s)), cov


class _NegLogProb(torch.autograd.Function):
    """−log posterior of one θ with the analytic gradient as its backward (for Pyro's NUTS)."""

    @staticmethod
    def forward(ctx, theta, model):
        value, grad = model.log_prob_and_grad(theta)
        ctx.save_for_backward(grad)
        return -value

    @staticmethod
    def backward(ctx, grad_out):
        (grad,) = ctx.saved_tensors
        return -grad_out * grad, None


class CopulaModel:
    """The IC-NLM log posterior on unconstrained ϑ (module docstring), for features ``psi``
    (n, p) and pseudo responses ``z`` (n,), float64 on ``device``.

    Coordinates: ridge (β_1..β_p, log τ²) — or β only with ``tau2`` fixed; horseshoe
    (β_1..β_p, log λ_1²..log λ_p², log τ). With ``intercept`` a column of ones is appended to ψ
    (its coefficient β₀ after β_p; ``p`` then counts it): ridge (β, β₀, log τ², log κ), horseshoe
    with one more λ. Methods take θ of shape (dim,) or (M, dim).
    """

    def __init__(self, psi, z, prior: str = "ridge", *, nu: float = NU_DEFAULT, tau2: float | None = None,
                 intercept: bool = False, legacy_lambda_jacobian: bool = False, device="cpu"):
        self.prior = check_choice(prior, "prior", PRIORS)
        self.device = torch.device(device)
        self.psi = _as_f64(psi, self.device)
        self.z = _as_f64(z, self.device)
        if self.psi.dim() != 2:
            raise ValueError(f"psi must be 2-D (n, p); got shape {tuple(self.psi.shape)}")
        if self.z.shape != (self.psi.shape[0],):
            raise ValueError(f"z must be (n,) with n = {self.psi.shape[0]} rows of psi; got {tuple(self.z.shape)}")
        if not (torch.isfinite(self.psi).all() and torch.isfinite(self.z).all()):
            raise ValueError("psi and z must be finite")
        self.intercept = check_bool(intercept, "intercept")
        if tau2 is not None:
            if self.prior != "ridge":
                raise ValueError("tau2 can be fixed only with the ridge prior")
            if self.intercept:
                raise ValueError("tau2 fixes the ridge prior's one variance; it cannot be combined with "
                                 "intercept=True, whose variance kappa is a parameter")
            tau2 = check_float(tau2, "tau2", strictly_positive=True)
        self.tau2 = tau2
        self.n_features = self.psi.shape[1]
        self.psi = with_intercept(self.psi, self.intercept)
        self.n, self.p = self.psi.shape
        self.psi2 = self.psi**2
        self.w = self.psi2[:, :self.n_features].sum(1)     # ||ψ_i||² of the features (not the ones column)
        self.nu = check_float(nu, "nu", strictly_positive=True)
        self.legacy_lambda_jacobian = bool(legacy_lambda_jacobian)
        if self.legacy_lambda_jacobian and self.prior != "horseshoe":
            raise ValueError("legacy_lambda_jacobian applies to the horseshoe prior only")

    # ------------------------------------------------------------------ layout
    @property
    def dim(self) -> int:
        return layout_dim(self.prior, self.n_features, self.intercept, self.tau2)

    @property
    def names(self) -> list[str]:
        cols = [str(j) for j in range(self.n_features)] + (["intercept"] if self.intercept else [])
        b = [f"beta[{j}]" for j in cols]
        if self.prior == "ridge":
            if self.tau2 is not None:
                return b
            return b + ["log_tau2"] + (["log_kappa"] if self.intercept else [])
        return b + [f"log_lambda2[{j}]" for j in cols] + ["log_tau"]

    def _batch(self, theta):
        theta = _as_f64(theta, self.device)
        single = theta.dim() == 1
        theta = theta[None] if single else theta
        if theta.shape[-1] != self.dim:
            raise ValueError(f"theta must have {self.dim} coordinates ({self.prior}); got {theta.shape[-1]}")
        return theta, single

    def prior_variances(self, theta) -> torch.Tensor:
        """P(θ)⁻¹'s diagonal per draw: (M, p) (τ² repeated, or λ²)."""
        theta, _ = self._batch(theta)
        return _prior_variances(theta, self.prior, self.p, self.intercept, self.tau2)

    # ------------------------------------------------------------------ densities
    def log_likelihood(self, theta) -> torch.Tensor:
        """log φ_n(z; SΨβ, S²) per draw (eq. 6), in O(M·n·p)."""
        theta, single = self._batch(theta)
        out = self._loglik(theta, grad=False)[0]
        return out[0] if single else out

    def log_prior(self, theta) -> torch.Tensor:
        """log p(ϑ) per draw (normalised, with the Jacobian of the log transforms)."""
        theta, single = self._batch(theta)
        out = self._logprior(theta, grad=False)[0]
        return out[0] if single else out

    def log_prob(self, theta) -> torch.Tensor:
        return self.log_prob_and_grad(theta)[0]

    def log_prob_and_grad(self, theta) -> tuple[torch.Tensor, torch.Tensor]:
        """(log posterior up to log p(z), its analytic gradient) per draw: (M,), (M, dim)."""
        theta, single = self._batch(theta)
        ll, gl = self._loglik(theta, grad=True)
        lp, gp = self._logprior(theta, grad=True)
        value, grad = ll + lp, gl + gp
        return (value[0], grad[0]) if single else (value, grad)

    def potential(self, theta: torch.Tensor) -> torch.Tensor:
        """−log posterior of one θ (dim,), differentiable by autograd through the analytic gradient."""
        return _NegLogProb.apply(theta, self)

    def _loglik(self, theta, grad: bool):
        """Eq. (6) and its gradient, accumulated over row blocks of at most ``_ROW_BLOCK`` rows:
        the (M, rows) temporaries then stay in cache (M = 50, n = 44k: 197 -> 60 ms per call on
        one CPU thread, equal to 1e-14)."""
        p, m = self.p, theta.shape[0]
        beta = theta[:, :p]
        value = torch.full((m,), -0.5 * self.n * LOG_2PI, dtype=theta.dtype, device=theta.device)
        g = torch.zeros_like(theta) if grad else None
        if self.prior == "ridge":
            t2 = None if self.tau2 is not None else torch.exp(theta[:, p:p + 1])        # (M, 1)
            kappa = torch.exp(theta[:, p + 1:p + 2]) if self.intercept else None        # (M, 1)
        else:
            lam2 = torch.exp(theta[:, p:2 * p])                                        # (M, p)
        for lo in range(0, self.n, _ROW_BLOCK):
            rows = slice(lo, min(self.n, lo + _ROW_BLOCK))
            psi, z = self.psi[rows], self.z[rows]
            if self.prior == "ridge":
                a_tau = (self.tau2 * self.w[rows]).expand(m, -1) if t2 is None else t2 * self.w[rows]
                a = a_tau if kappa is None else a_tau + kappa
            else:
                a = lam2 @ self.psi2[rows].T                                           # (M, rows)
            inv_s = torch.sqrt(1.0 + a)
            r = z * inv_s - beta @ psi.T
            value += 0.5 * torch.log1p(a).sum(-1) - 0.5 * (r * r).sum(-1)
            if not grad:
                continue
            g[:, :p] += r @ psi
            s2 = 1.0 / (1.0 + a)
            if self.prior == "ridge":
                if t2 is not None:
                    # ½Σ(1 − s²) − ½Σ r z (1 − s²)/s, with 1 − s² = a s² and (1 − s²)/s = a s; with an
                    # intercept each variance's share of a: ∂a/∂log τ² = τ²||ψ||², ∂a/∂log κ = κ
                    if kappa is None:   # (this order of operations keeps NUTS's paths bit for bit)
                        g[:, p] += 0.5 * (a * s2).sum(-1) - 0.5 * (r * z * a / inv_s).sum(-1)
                    else:
                        ds = s2 - r * z / inv_s
                        g[:, p] += 0.5 * (a_tau * ds).sum(-1)
                        g[:, p + 1] += 0.5 * (kappa * ds).sum(-1)
            else:
                g[:, p:2 * p] += 0.5 * lam2 * ((s2 - r * z / inv_s) @ self.psi2[rows])
        return value, g

    def _logprior(self, theta, grad: bool):
        p = self.p
        beta = theta[:, :p]
        g = torch.zeros_like(theta) if grad else None
        if self.prior == "ridge":
            if self.tau2 is not None:
                value = -0.5 * p * (LOG_2PI + math.log(self.tau2)) - 0.5 * (beta * beta).sum(-1) / self.tau2
                if grad:
                    g[:, :p] = -beta / self.tau2
                return value, g
            k = self.n_features
            value, gb, gu = _weibull_ridge(beta[:, :k], theta[:, p], self.nu)
            if grad:
                g[:, :k], g[:, p] = gb, gu
            if self.intercept:   # β₀ ~ N(0, κ), κ ~ the same Weibull(½, ν) as τ²
                v0, gb0, gk = _weibull_ridge(beta[:, k:], theta[:, p + 1], self.nu)
                value = value + v0
                if grad:
                    g[:, k:p], g[:, p + 1] = gb0, gk
            return value, g
        omega, eta = theta[:, p:2 * p], theta[:, 2 * p]
        x = omega - 2.0 * eta[:, None]
        value = (-0.5 * p * LOG_2PI - (p + 1) * LOG_PI + math.log(2.0)
                 - 0.5 * (beta * beta * torch.exp(-omega)).sum(-1)
                 - torch.nn.functional.softplus(x).sum(-1) - (p - 1) * eta
                 - torch.nn.functional.softplus(2.0 * eta))
        if self.legacy_lambda_jacobian:
            value = value + 0.5 * omega.sum(-1)
        if grad:
            sig = torch.sigmoid(x)
            g[:, :p] = -beta * torch.exp(-omega)
            g[:, p:2 * p] = 0.5 * beta * beta * torch.exp(-omega) - sig + (0.5 if self.legacy_lambda_jacobian else 0.0)
            g[:, 2 * p] = 2.0 * sig.sum(-1) - (p - 1) - 2.0 * torch.sigmoid(2.0 * eta)
        return value, g

    # ------------------------------------------------------------------ sampling (tests, simulation)
    def sample_prior(self, n: int, generator=None) -> torch.Tensor:
        """n draws of ϑ from the prior: (n, dim)."""
        kw = dict(dtype=torch.float64, device=self.device, generator=generator)
        p = self.p
        if self.prior == "ridge":
            if self.tau2 is not None:
                return math.sqrt(self.tau2) * torch.randn(n, p, **kw)
            # τ ~ Exponential(mean √ν) is τ² ~ Weibull(½, ν); with an intercept √κ likewise
            tau = -math.sqrt(self.nu) * torch.log(torch.rand(n, 1 + self.intercept, **kw))
            scale = torch.cat([tau[:, :1].expand(-1, self.n_features), tau[:, 1:]], dim=1)
            beta = scale * torch.randn(n, p, **kw)
            return torch.cat([beta, 2.0 * torch.log(tau)], dim=1)
        tau = torch.abs(torch.tan(math.pi * (torch.rand(n, **kw) - 0.5)))
        lam = tau[:, None] * torch.abs(torch.tan(math.pi * (torch.rand(n, p, **kw) - 0.5)))
        beta = lam * torch.randn(n, p, **kw)
        return torch.cat([beta, 2.0 * torch.log(lam), torch.log(tau)[:, None]], dim=1)


# ====================================================================== posterior
@dataclass
class ZPrediction:
    """The latent Z₀ | x₀ at N new inputs: ``mean`` and ``var`` (N,) of Z₀, and the Gaussian
    components (``loc``, ``scale`` (N, J), equal weights 1/J) whose average is its density
    (J = 1 for the plug-in estimate). float64 numpy."""

    mean: np.ndarray
    var: np.ndarray
    loc: np.ndarray
    scale: np.ndarray
    kind: str

    def as_mixture(self) -> GaussianMixture:
        """Z | x as an equal-weight `GaussianMixture` of its components."""
        return GaussianMixture(np.full(self.loc.shape, 1.0 / self.loc.shape[1]), self.loc, self.scale**2)

    def scaled(self, c: float) -> ZPrediction:
        """Every component variance times c (`dubito.variance_scale.scale_mixture` in z): scale
        sqrt(c) s_j, the same locations, var = c mean_j s_j^2 + the spread of the locations."""
        scale = math.sqrt(c) * self.scale
        var = (scale**2).mean(1) + ((self.loc - self.mean[:, None]) ** 2).mean(1)
        return ZPrediction(mean=self.mean, var=var, loc=self.loc, scale=scale, kind=self.kind)


@dataclass
class CopulaPosterior:
    """Posterior draws of ϑ for the IC-NLM and what prediction needs.

    theta : (J, dim) draws (from q for VI; all chains concatenated for NUTS), float64 tensor, in
    `CopulaModel`'s layout. p : the number of features ψ; intercept : whether β₀ (and its variance)
    follow them, so that the coefficients are ``n_coef`` = p + intercept.
    theta_by_chain : (chains, draws, dim) for NUTS, else None.  q : the fitted FactorGaussian (VI).
    diagnostics : VI — elbo, elbo_ma, iterations, converged, seconds; NUTS — rhat, ess_bulk (per
    coordinate), divergences, acceptance_rate, step_size per chain, seconds.
    """

    prior: str
    inference: str
    p: int
    names: list[str]
    theta: torch.Tensor
    theta_by_chain: torch.Tensor | None = None
    q: FactorGaussian | None = None
    nu: float = NU_DEFAULT
    tau2_fixed: float | None = None
    diagnostics: dict = field(default_factory=dict)
    settings: dict = field(default_factory=dict)
    intercept: bool = False

    # ---- parameter views
    @property
    def n_coef(self) -> int:
        """Coefficients per draw: the p features' and, with an intercept, β₀'s."""
        return self.p + int(self.intercept)

    def design(self, psi: torch.Tensor) -> torch.Tensor:
        """ψ (n, p) with the intercept's column of ones appended when the model has one."""
        return with_intercept(psi, self.intercept)

    @property
    def beta(self) -> torch.Tensor:
        """(J, n_coef): β (and β₀ last, with an intercept) per draw."""
        return self.theta[:, : self.n_coef]

    def _prior_variances(self, theta: torch.Tensor) -> torch.Tensor:
        return _prior_variances(theta, self.prior, self.n_coef, self.intercept, self.tau2_fixed)

    @property
    def prior_variances(self) -> torch.Tensor:
        """(J, n_coef): τ² (repeated; κ last with an intercept) for ridge, λ_j² for horseshoe, per draw."""
        return self._prior_variances(self.theta)

    @property
    def tau2(self) -> torch.Tensor:
        if self.prior != "ridge":
            raise AttributeError("tau2 belongs to the ridge prior; use tau or lambda2")
        return self.prior_variances[:, 0]

    @property
    def lambda2(self) -> torch.Tensor:
        if self.prior != "horseshoe":
            raise AttributeError("lambda2 belongs to the horseshoe prior")
        return self.prior_variances

    @property
    def tau(self) -> torch.Tensor:
        if self.prior == "horseshoe":
            return torch.exp(self.theta[:, 2 * self.n_coef])
        return self.tau2.sqrt()

    def summary(self) -> dict[str, dict[str, float]]:
        """Per coordinate: posterior mean and sd (and R-hat, bulk ESS for NUTS)."""
        mean, sd = self.theta.mean(0), self.theta.std(0)
        out = {}
        for k, name in enumerate(self.names):
            row = {"mean": float(mean[k]), "sd": float(sd[k])}
            if "rhat" in self.diagnostics:
                row["rhat"] = float(np.atleast_1d(self.diagnostics["rhat"])[k])
                row["ess_bulk"] = float(np.atleast_1d(self.diagnostics["ess_bulk"])[k])
            out[name] = row
        return out

    # ---- plug-in estimates
    def point_estimate(self, theta_point: str = "median") -> tuple[torch.Tensor, torch.Tensor]:
        """(β̂ (p,), v̂ (p,)) for the VI plug-in predictive: β̂ = μ_β and the prior variances
        exp(μ) ("median", the authors' code: the lognormal median of q) or exp(μ + σ²/2)
        ("mean", E_q). Without q (NUTS) the posterior means of β and of the variances."""
        check_choice(theta_point, "theta_point", ("median", "mean"))
        if self.q is None:
            return self.beta.mean(0), self.prior_variances.mean(0)
        mu = self.q.mean
        if theta_point == "median":
            v = self._prior_variances(mu[None])[0]
        else:
            half = 0.5 * self.q.variance()
            v = self._prior_variances((mu + half)[None])[0]
            if self.tau2_fixed is not None:
                v = self._prior_variances(mu[None])[0]
        return mu[: self.n_coef].clone(), v

    # ---- prediction
    def predict_z(self, psi_new, kind: str = "plugin", theta_point: str = "median",
                  chunk_size: int = 4096) -> ZPrediction:
        """The latent Gaussian Z₀ | x₀ at new features ψ₀ (N, p) (spec §2.9).

        kind="plugin" (the paper's): VI — m̂ = ŝ₀ψ₀ᵀβ̂, ŝ₀ = (1 + ψ₀ᵀP(θ̂)⁻¹ψ₀)^{-1/2} with
        (β̂, θ̂) from ``point_estimate(theta_point)``; NUTS — m̂ = ψ₀ᵀ((1/J)Σ_j s₀^{[j]}β^{[j]}),
        ŝ₀ = (1/J)Σ_j s₀^{[j]} (the paper's HMC formula). One Gaussian N(m̂, ŝ₀²).
        kind="mixture": the posterior predictive (1/J)Σ_j N(s₀^{[j]}ψ₀ᵀβ^{[j]}, (s₀^{[j]})²) over
        the draws; mean and variance by the law of total variance.
        """
        check_choice(kind, "kind", ("plugin", "mixture"))
        dev = self.theta.device
        psi_new = _as_f64(psi_new, dev)
        if psi_new.dim() != 2 or psi_new.shape[1] != self.p:
            raise ValueError(f"psi_new must be (N, p={self.p}); got shape {tuple(psi_new.shape)}")
        if not torch.isfinite(psi_new).all():
            raise ValueError("psi_new must be finite")
        psi_new = self.design(psi_new)
        locs, scales = [], []
        if kind == "plugin" and self.inference == "vi":
            beta_hat, v_hat = self.point_estimate(theta_point)
            s0 = copula_scales(psi_new, v_hat[None])[0]
            loc = (s0 * (psi_new @ beta_hat))[:, None]
            scale = s0[:, None]
        else:
            beta, v = self.beta, self.prior_variances
            for start in range(0, psi_new.shape[0], chunk_size):
                ps = psi_new[start:start + chunk_size]
                s = copula_scales(ps, v)                       # (J, N)
                m = s * (beta @ ps.T)                          # (J, N)
                if kind == "plugin":                           # paper's HMC plug-in
                    sbar = (s[:, :, None] * beta[:, None, :]).mean(0)      # (N, p)
                    locs.append((sbar * ps).sum(-1)[:, None])
                    scales.append(s.mean(0)[:, None])
                else:
                    locs.append(m.T)
                    scales.append(s.T)
            loc, scale = torch.cat(locs), torch.cat(scales)
        mean = loc.mean(1)
        var = (scale**2).mean(1) + ((loc - mean[:, None]) ** 2).mean(1)
        np_ = lambda t: t.detach().cpu().numpy().astype(np.float64)
        return ZPrediction(mean=np_(mean), var=np_(var), loc=np_(loc), scale=np_(scale), kind=kind)
