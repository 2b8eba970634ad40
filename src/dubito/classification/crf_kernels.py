r"""Numeric kernels of the co-occurrence CRF (`dubito.classification.context` describes the model,
its inference and its learning): exact enumeration of a scene's configurations, loopy belief
propagation in log space (sum- or max-product, damped messages) and the pseudo-likelihood with its
gradient. Float64 numpy, one scene (or one stack of nodes) at a time.
"""

from __future__ import annotations

import math

import numpy as np

#: Loopy BP builds (senders, n, K, K) score blocks of at most this many float64 (32 MiB).
_BP_BLOCK_ELEMENTS = 2**22
_LOG_TINY = math.log(np.finfo(np.float64).tiny)  # log of a zero probability, ~ -708.4


def _lse(x: np.ndarray, axis=None, keepdims: bool = False):
    """log Σ exp(x) for finite x (every score here is finite: log 0 is floored). A plain numpy
    version: scipy's logsumexp costs ~0.2 ms of overhead per call, more than a small scene."""
    m = np.max(x, axis=axis, keepdims=True)
    out = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    if keepdims:
        return out
    return out.reshape(()) if axis is None else np.squeeze(out, axis=axis)


def _unary_log(probs: np.ndarray, alpha: float) -> np.ndarray:
    """α log p with log 0 := log(tiny) (finite); α = 0 gives 0 (0^0 = 1)."""
    if alpha == 0:
        return np.zeros_like(probs)
    with np.errstate(divide="ignore"):
        lp = np.log(probs)
    return alpha * np.maximum(lp, _LOG_TINY)


def _pair_scale(n: int, weight: float, normalize: bool) -> float:
    """s_n = w/(n-1) (normalize, spec §2.10) or w."""
    return weight / (n - 1) if (normalize and n > 1) else weight


def _log_joint(theta: np.ndarray, psi: np.ndarray, adj: np.ndarray, support: list[np.ndarray]) -> np.ndarray:
    """Normalised log P over the configurations of ``support`` (node i takes labels support[i]):
    a tensor of shape (len(support[0]), ..., len(support[n-1]))."""
    n, k = theta.shape
    shape = tuple(len(s) for s in support)
    full = all(len(s) == k for s in support)
    L = np.zeros(shape)
    for i in range(n):
        view = [1] * n
        view[i] = shape[i]
        L += (theta[i] if full else theta[i, support[i]]).reshape(view)
    for i in range(n):
        for j in range(i + 1, n):
            if adj[i, j]:
                view = [1] * n
                view[i], view[j] = shape[i], shape[j]
                L += (psi if full else psi[np.ix_(support[i], support[j])]).reshape(view)
    L -= _lse(L)
    return L


def _tensor_marginals(L: np.ndarray, support: list[np.ndarray], k: int) -> np.ndarray:
    """Node marginals (n, k) of a normalised log tensor over ``support`` (zeros off the support)."""
    n = L.ndim
    P = np.exp(L)
    out = np.zeros((n, k))
    axes = tuple(range(n))
    for i in range(n):
        m = P.sum(axis=axes[:i] + axes[i + 1:]) if n > 1 else P
        out[i, support[i]] = m / m.sum()
    return out


def _loopy_bp(theta, psi, adj, *, damping, tol, max_iter, mode="sum"):
    """Synchronous loopy BP in log space (module docstring). Returns (log beliefs (n, K), normalised;
    sweeps; converged; last max |Δ message|)."""
    n, k = theta.shape
    A = adj.astype(np.float64)
    if not adj.any():
        beliefs = theta - _lse(theta, axis=1, keepdims=True)
        return beliefs, 0, True, 0.0
    reduce = _lse if mode == "sum" else (lambda t, axis: t.max(axis=axis))
    edge = adj[:, :, None]
    block = max(1, _BP_BLOCK_ELEMENTS // (n * k * k))
    M = np.zeros((n, n, k))  # M[i, j] = log message i -> j (0 off the edges)
    delta, converged, it = np.inf, False, 0
    for it in range(1, max_iter + 1):
        incoming = np.einsum("ij,ijk->jk", A, M)  # Σ_i A_ij m_{i→j}, at node j
        cavity = theta[:, None, :] + incoming[:, None, :] - M.transpose(1, 0, 2)  # [i, j, a]
        new = np.empty_like(M)
        for a in range(0, n, block):  # [i, j, b], in blocks of senders i (bounded memory)
            new[a:a + block] = reduce(cavity[a:a + block, :, :, None] + psi[None, None, :, :], 2)
        new -= reduce(new, 2)[:, :, None]
        if damping > 0:
            new = (1.0 - damping) * new + damping * M
            new -= reduce(new, 2)[:, :, None]
        new = np.where(edge, new, 0.0)
        delta = float(np.abs(new - M).max())
        M = new
        if delta < tol:
            converged = True
            break
    beliefs = theta + np.einsum("ij,ijk->jk", A, M)
    beliefs -= _lse(beliefs, axis=1, keepdims=True) if mode == "sum" else beliefs.max(axis=1, keepdims=True)
    return beliefs, it, converged, delta


def _pl_features(phi: np.ndarray, probs_list, ys, normalize: bool):
    """Stacked per-node features of the pseudo-likelihood (Φ = ``phi``): U = log p̄_i(c) (floored),
    P = (1/(n-1)) Σ_{j≠i} Φ[c, y_j]; labels."""
    us, ps, ts = [], [], []
    for p, y in zip(probs_list, ys):
        n = p.shape[0]
        if n < 2:
            continue  # a lone object has no context: its PL term does not depend on w
        u = _unary_log(p, 1.0)
        rows = phi[:, y].T  # (n, K): Φ[c, y_j] for each object j
        ctx = rows.sum(axis=0)[None, :] - rows  # Σ_{j≠i} Φ[c, y_j]
        us.append(u)
        ps.append(ctx * _pair_scale(n, 1.0, normalize))
        ts.append(y)
    if not us:
        raise ValueError("fit_weight needs at least one scene with two or more objects")
    return np.concatenate(us), np.concatenate(ps), np.concatenate(ts)


def _pl_value(U, P, y, weight, alpha):
    """PL(w, α) and its gradient (∂/∂w, ∂/∂α) from the features of `_pl_features`."""
    Z = alpha * U + weight * P
    lse = _lse(Z, axis=1)
    q = np.exp(Z - lse[:, None])
    idx = np.arange(y.shape[0])
    value = float(np.sum(Z[idx, y] - lse))
    grad = np.array([np.sum(P[idx, y] - (q * P).sum(axis=1)), np.sum(U[idx, y] - (q * U).sum(axis=1))])
    return value, grad
