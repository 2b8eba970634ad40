"""The closed-form Bayesian correction of Hoffmann & Elster (2021), Theorem 1.

Each member l of a deep ensemble becomes a Gaussian N(theta_l, gamma_l I) over the weights W
of the last linear layer of its mean head, eta = W h_l(x) (eq. 17). Maximising the ELBO (12)
with the members held fixed gives, per member (eqs. 33-36),

    ELBO = (1/L) sum_l ( a_l + b_l gamma_l + c_l log gamma_l )

    a_l = log L - 1/2 { sum_i [ ||y_i - eta_l(x_i)||^2 / sigma_l^2(x_i) + p_y log sigma_l^2(x_i) ]
                        + lam ||W_l||_F^2 - p_y p_h - p_y p_h log lam }            (34)
    b_l = -1/2 ( p_y sum_i ||h_l(x_i)||^2 / sigma_l^2(x_i) + p_y p_h lam )          (35)
    c_l = 1/2 p_y p_h

    gamma_l = -c_l / b_l = p_h / ( sum_i ||h_l(x_i)||^2 / sigma_l^2(x_i) + p_h lam )   (36)

with lam the prior precision of the *sum-form* loss (4) ("lambda_prior"; spec pitfall P2),
h_l the member's own last-hidden-layer features and sigma_l^2 its own variances on the full
training set, in normalised units (P5). Equivalently gamma_l = p_h / tr(H_l) with
H_l = sum_i h_i h_i^T / sigma_i^2 + lam I (the exact last-layer precision), so
0 < gamma_l <= 1/lam, with equality when every feature is zero.

All functions take numpy arrays or torch tensors (member axis first) and return the same kind.
"""

from __future__ import annotations

import math

import numpy as np
import torch

__all__ = ["feature_sums", "gamma_closed_form", "elbo_terms", "elbo", "augment_bias"]


def _is_torch(x) -> bool:
    return hasattr(x, "detach") and hasattr(x, "cpu")


def _log(x):
    if _is_torch(x):

        return torch.log(x)
    return np.log(x)


def augment_bias(h):
    """Append a constant 1 to the features (option ``random_bias``, spec P4): (..., p_h+1)."""
    if _is_torch(h):

        return torch.cat([h, torch.ones_like(h[..., :1])], dim=-1)
    h = np.asarray(h, dtype=np.float64)
    return np.concatenate([h, np.ones_like(h[..., :1])], axis=-1)


def feature_sums(h, sigma2):
    """S_l = sum_i ||h_l(x_i)||^2 / sigma_l^2(x_i); h (L, N, p_h), sigma2 (L, N) -> (L,)."""
    return ((h**2).sum(-1) / sigma2).sum(-1)


def gamma_closed_form(h, sigma2, lam: float):
    """Eq. (36): gamma_l = p_h / (S_l + p_h lam); h (L, N, p_h), sigma2 (L, N) -> (L,).

    ``lam`` is the prior precision lambda_prior of the sum-form loss (eq. 3/4).
    """
    if lam <= 0:
        raise ValueError(f"the prior precision lam must be > 0, got {lam}")
    p_h = h.shape[-1]
    return p_h / (feature_sums(h, sigma2) + p_h * lam)


def elbo_terms(h, sigma2, resid, W, lam: float):
    """(a_l, b_l, c_l) of eqs. (34)-(35), each of shape (L,).

    h: (L, N, p_h) features; sigma2: (L, N) variances; resid: (L, N, p_y) or (L, N) residuals
    y_i - eta_l(x_i); W: (L, p_y, p_h) or (L, p_h) last-layer mean-head weights (the MAP,
    the mixture component's mean); lam: prior precision (sum-form loss). The ensemble size
    L is the leading axis.
    """
    if lam <= 0:
        raise ValueError(f"the prior precision lam must be > 0, got {lam}")
    if resid.ndim == 2:
        resid = resid[..., None]
    if W.ndim == 2:
        W = W[:, None, :]
    L, p_y, p_h = W.shape[0], resid.shape[-1], h.shape[-1]
    fit = ((resid**2).sum(-1) / sigma2 + p_y * _log(sigma2)).sum(-1)
    a = math.log(L) - 0.5 * (fit + lam * (W**2).sum((-2, -1)) - p_y * p_h - p_y * p_h * math.log(lam))
    b = -0.5 * (p_y * feature_sums(h, sigma2) + p_y * p_h * lam)
    c = 0.5 * p_y * p_h + 0.0 * b  # same shape and kind as b
    return a, b, c


def elbo(gamma, a, b, c):
    """Eq. (33): (1/L) sum_l (a_l + b_l gamma_l + c_l log gamma_l)."""
    return (a + b * gamma + c * _log(gamma)).mean()
