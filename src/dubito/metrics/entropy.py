"""k-nearest-neighbour entropy and KL estimators (Pequignot et al.; spec §2.2-2.4) and the
Gaussian spread entropy U(x) used as the OOD score (spec §1).

* :func:`knn_entropy` - Kozachenko-Leonenko / Singh et al. (2003), Eq. 4 of [P]:
  Ĥ_k(Q) = ln N - ψ(k) + ln V_d + (d/N) Σ_i ln r_k(q_i).
* :func:`knn_kl` - Wang, Kulkarni & Verdú (2009), Eq. 3 of [P]:
  KL̂_k(Q, P) = ln(M/(N-1)) + (d/N) Σ_i ln(s_k(q_i) / r_k(q_i)).
* :func:`function_entropy`, :func:`function_kl` - the same on predictions at T points drawn
  from ν, with the metric of L2(ν) (spec §2.4; the entropy constant is -(T/2) ln T, not the
  paper's misprinted -½ ln T).
* :func:`spread_entropy` - U(x) = ½ ln(2πe σ²(x)), σ² the ddof=1 variance of the draws.
* :func:`log_unit_ball_volume` - ln V_d = (d/2) ln π - lnΓ(d/2 + 1).

r_k(q_i) is the distance from q_i to its k-th nearest neighbour in Q \\ {q_i} (the diagonal of the
distance matrix is masked with +inf, spec §8 pitfall 8); s_k(q_i) the distance to its k-th nearest
neighbour in P. Distances are clamped at float32 eps = 1.1920929e-07 before the log ([C]); exact
duplicates (distance 0) also raise a ``RuntimeWarning`` with a constant message, so Python's default
filter shows it once per call site. Distances in (0, eps) are clamped silently.

**Inputs.** numpy arrays (or array-likes) are computed in float64 and give a python float. torch
tensors give a 0-dim tensor in the input's dtype and device, differentiable through the selected
distances: the neighbours are chosen under ``torch.no_grad`` (``torch.cdist`` in row blocks of at
most ~4M distances, on centred copies for accuracy), then the chosen pairs' distances are recomputed
with grad. The selection is piecewise constant and carries no gradient. No (N, N, d) array is ever
built; memory is O(4M + N d). In :func:`knn_kl` the torch path is taken when ``q_samples`` is a
tensor (``p_samples`` is then moved to its dtype and device); a tensor ``p_samples`` with a numpy
``q_samples`` is converted to numpy.

Bad input (not 2-D, no rows or columns, NaN/inf, k < 1, k >= N, k > M, dimensions differing between
q and p, non-numeric) raises ``ValueError`` naming the problem.
"""

from __future__ import annotations

import math
import sys
import warnings

import numpy as np
import torch
from scipy.special import digamma

from dubito._validation import check_int

__all__ = [
    "DUPLICATE_WARNING",
    "FLOAT32_EPS",
    "function_entropy",
    "function_kl",
    "knn_entropy",
    "knn_kl",
    "log_unit_ball_volume",
    "spread_entropy",
]

FLOAT32_EPS = 1.1920929e-07
"""Lower clamp on k-NN distances before the log: float32 machine epsilon, as in [C]."""

DUPLICATE_WARNING = (
    "k-NN estimator: some samples coincide (nearest-neighbour distance 0); those distances were "
    "clamped to float32 eps = 1.19e-07 before the log, so the estimate is biased low and carries "
    "no gradient through them"
)
"""The constant message of the ``RuntimeWarning`` for zero k-NN distances."""

_MAX_BLOCK_DISTANCES = 4_000_000
"""At most this many pairwise distances are held at once in the neighbour search (row blocks)."""


# ------------------------------------------------------------------------------- helpers


def _is_tensor(x) -> bool:
    torch = sys.modules.get("torch")  # a tensor exists only if torch was imported
    return torch is not None and isinstance(x, torch.Tensor)


def _check_numpy(x, name: str) -> np.ndarray:
    if _is_tensor(x):
        if x.is_complex():
            raise ValueError(f"{name} must be real-valued, got dtype {x.dtype}")
        x = x.detach().cpu().double().numpy()
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"{name} must be a numeric array, got {type(x).__name__}: {exc}"
        ) from None
    _check_shape(arr.shape, name)
    if not np.isfinite(arr).all():
        raise ValueError(
            f"{name} holds {int(np.count_nonzero(~np.isfinite(arr)))} NaN or infinite value(s)"
        )
    return arr


def _check_tensor(x, name: str, *, like=None):

    if like is not None:
        if not _is_tensor(x):
            try:
                x = np.asarray(x, dtype=np.float64)
            except (TypeError, ValueError) as exc:
                raise ValueError(
                    f"{name} must be a numeric array, got {type(x).__name__}: {exc}"
                ) from None
        x = torch.as_tensor(x).to(dtype=like.dtype, device=like.device)
    if not x.is_floating_point():
        raise ValueError(
            f"{name} must be a floating-point tensor (the result keeps its dtype), got {x.dtype}"
        )
    _check_shape(tuple(x.shape), name)
    finite = torch.isfinite(x.detach())
    if not bool(finite.all()):
        raise ValueError(
            f"{name} holds {int((~finite).sum())} NaN or infinite value(s)"
        )
    return x


def _check_shape(shape: tuple, name: str) -> None:
    if len(shape) != 2:
        raise ValueError(
            f"{name} must be 2-D (n_samples, n_dims), got {len(shape)}-D with shape {tuple(shape)}"
        )
    if shape[0] == 0 or shape[1] == 0:
        raise ValueError(
            f"{name} must have at least one row and one column, got shape {tuple(shape)}"
        )


def _check_k_entropy(k, n: int, name: str) -> int:
    k = check_int(k, "k", min_value=1)
    if k >= n:
        raise ValueError(
            f"k must be < the number of samples N (the k-th neighbour excludes the point itself), "
            f"got k = {k} with N = {n} rows in {name}"
        )
    return k


def _warn_duplicates() -> None:
    warnings.warn(DUPLICATE_WARNING, RuntimeWarning, stacklevel=3)


def _rows_per_block(n_cols: int) -> int:
    return max(1, _MAX_BLOCK_DISTANCES // max(1, n_cols))


# numpy path (float64) -------------------------------------------------------------------


def _kth_index_numpy(
    a: np.ndarray, b: np.ndarray, k: int, exclude_self: bool
) -> np.ndarray:
    """Index into b of the k-th nearest neighbour of each row of a (blocked Gram-matrix search)."""
    center = a.mean(axis=0)
    a = a - center
    b = b - center
    b_sq = np.einsum("ij,ij->i", b, b)
    out = np.empty(a.shape[0], dtype=np.intp)
    step = _rows_per_block(b.shape[0])
    for start in range(0, a.shape[0], step):
        stop = min(start + step, a.shape[0])
        # |a|^2 is constant within a row, so it does not change the ranking
        d2 = b_sq[None, :] - 2.0 * (a[start:stop] @ b.T)
        if exclude_self:
            rows = np.arange(stop - start)
            d2[rows, start + rows] = np.inf
        if k == 1:
            out[start:stop] = np.argmin(d2, axis=1)
        else:
            out[start:stop] = np.argpartition(d2, k - 1, axis=1)[
                :, k - 1
            ]  # k-th smallest
    return out


def _log_dist_numpy(
    a: np.ndarray, b: np.ndarray, idx: np.ndarray
) -> tuple[np.ndarray, bool]:
    """ln max(|a_i - b_idx(i)|, eps) and whether any distance was exactly 0."""
    diff = a - b[idx]
    d2 = np.einsum("ij,ij->i", diff, diff)
    zero = bool((d2 == 0.0).any())
    return 0.5 * np.log(np.maximum(d2, FLOAT32_EPS**2)), zero


# torch path -------------------------------------------------------------------------------


def _kth_index_torch(a, b, k: int, exclude_self: bool):

    with torch.no_grad():
        a = a.detach()
        b = b.detach()
        center = a.mean(dim=0, keepdim=True)
        a = a - center
        b = b - center
        out = torch.empty(a.shape[0], dtype=torch.long, device=a.device)
        step = _rows_per_block(b.shape[0])
        for start in range(0, a.shape[0], step):
            stop = min(start + step, a.shape[0])
            dist = torch.cdist(a[start:stop], b)
            if exclude_self:
                rows = torch.arange(stop - start, device=a.device)
                dist[rows, start + rows] = math.inf
            if k == 1:
                out[start:stop] = dist.argmin(dim=1)
            else:
                out[start:stop] = dist.topk(
                    k, dim=1, largest=False, sorted=True
                ).indices[:, k - 1]
    return out


def _log_dist_torch(a, b, idx):
    diff = a - b[idx]
    d2 = (diff * diff).sum(dim=1)
    zero = bool((d2.detach() == 0).any())
    # ln max(r, eps) = ½ ln max(r², eps²); avoids the infinite derivative of sqrt at 0
    return 0.5 * d2.clamp_min(FLOAT32_EPS**2).log(), zero


def _log_knn(a, b, k: int, exclude_self: bool):
    """(ln max(r_k, eps) for each row of ``a``, any r_k == 0), r_k the distance to its k-th nearest
    row of ``b`` (itself excluded when ``exclude_self``); torch (differentiable) or NumPy."""
    if _is_tensor(a):
        return _log_dist_torch(a, b, _kth_index_torch(a, b, k, exclude_self=exclude_self))
    return _log_dist_numpy(a, b, _kth_index_numpy(a, b, k, exclude_self=exclude_self))


# ------------------------------------------------------------------------------- public API


def log_unit_ball_volume(d: int) -> float:
    """ln V_d = (d/2) ln π - lnΓ(d/2 + 1), the log volume of the unit d-ball (spec §2.2).

    Computed with ``lgamma``, so it is finite for any d (e.g. ln V_751 ≈ -1424.6).
    """
    d = check_int(d, "d", min_value=1)
    return 0.5 * d * math.log(math.pi) - math.lgamma(0.5 * d + 1.0)


def knn_entropy(samples, k: int = 1):
    """k-NN differential entropy estimate (spec §2.2; Eq. 4 of [P]; Singh et al. 2003):

    Ĥ_k = ln N - ψ(k) + ln V_d + (d/N) Σ_i ln max(r_k(q_i), eps),

    with r_k(q_i) the distance from q_i to its k-th nearest neighbour among the other samples.
    k = 1 in [P]/[C]; the leading ln N (not ψ(N)) follows [P]. ``samples`` is (N, d), N > k.
    """
    tensor = _is_tensor(samples)
    x = _check_tensor(samples, "samples") if tensor else _check_numpy(samples, "samples")
    n, d = x.shape
    k = _check_k_entropy(k, n, "samples")
    log_r, zero = _log_knn(x, x, k, exclude_self=True)
    if zero:
        _warn_duplicates()
    est = math.log(n) - float(digamma(k)) + log_unit_ball_volume(d) + d * log_r.mean()
    return est if tensor else float(est)


def _check_kl_shapes(k, n: int, m: int, dq: int, dp: int) -> int:
    if dq != dp:
        raise ValueError(
            f"q_samples and p_samples must have the same number of columns (dimension d), "
            f"got {dq} and {dp}"
        )
    k = _check_k_entropy(k, n, "q_samples")
    if k > m:
        raise ValueError(
            f"k must be <= the number of p_samples M, got k = {k} with M = {m}"
        )
    return k


def knn_kl(q_samples, p_samples, k: int = 1):
    """k-NN estimate of KL(Q ‖ P) (spec §2.3; Eq. 3 of [P]; Wang, Kulkarni & Verdú 2009):

    KL̂_k = ln(M / (N - 1)) + (d/N) Σ_i [ln max(s_k(q_i), eps) - ln max(r_k(q_i), eps)],

    r_k: distance to the k-th nearest neighbour in Q \\ {q_i}; s_k: in P. ``q_samples`` (N, d),
    ``p_samples`` (M, d), k < N, k <= M. Gradients flow through both distances (to ``p_samples`` too
    if it requires grad; detach it to treat prior samples as constants, as in [C]).
    """
    tensor = _is_tensor(q_samples)
    if tensor:
        q = _check_tensor(q_samples, "q_samples")
        p = _check_tensor(p_samples, "p_samples", like=q)
    else:
        q = _check_numpy(q_samples, "q_samples")
        p = _check_numpy(p_samples, "p_samples")
    (n, dq), (m, dp) = q.shape, p.shape
    k = _check_kl_shapes(k, n, m, dq, dp)
    log_r, zero_r = _log_knn(q, q, k, exclude_self=True)
    log_s, zero_s = _log_knn(q, p, k, exclude_self=False)
    if zero_r or zero_s:
        _warn_duplicates()
    est = math.log(m / (n - 1)) + dq * (log_s - log_r).mean()
    return est if tensor else float(est)


def function_entropy(predictions, k: int = 1):
    """Predictor-space entropy in L2(ν) (spec §2.4, Eq. 6 of [P] with the corrected constant):

    Ĥ^ν_k = Ĥ_k(F^𝒳 / √T) = Ĥ_k(F^𝒳) - (T/2) ln T,

    ``predictions`` (N, T): N predictors evaluated at the same T points X_t ~ ν. The paper prints
    -½ ln T; scaling T-vectors by T^{-1/2} shifts the entropy by -(T/2) ln T, as in [C].
    """
    h = knn_entropy(predictions, k=k)
    t = (
        int(predictions.shape[1])
        if hasattr(predictions, "shape")
        else int(np.shape(predictions)[1])
    )
    return h - 0.5 * t * math.log(t)


def function_kl(q_predictions, p_predictions, k: int = 1):
    """Predictor-space KL in L2(ν) (spec §2.4, Eq. 5 of [P]): ``knn_kl`` on (N, T) and (M, T)
    predictions at the same T points; the T^{-1/2} metric factor cancels in the distance ratios."""
    return knn_kl(q_predictions, p_predictions, k=k)


def spread_entropy(draws):
    """Epistemic OOD score U(x) = ½ ln(2πe σ²(x)) (spec §1), σ²(x) the unbiased (ddof=1) variance
    over axis 0 of ``draws`` (S, N): S >= 2 predictions at each of N inputs. Returns (N,);
    numpy in -> float64 numpy out, torch in -> torch out (same dtype/device, differentiable).
    A zero variance gives -inf (no warning)."""
    if _is_tensor(draws):
        x = _check_tensor(draws, "draws")
        if x.shape[0] < 2:
            raise ValueError(
                f"draws needs at least 2 rows (ddof=1 variance), got shape {tuple(x.shape)}"
            )
        return 0.5 * (2.0 * math.pi * math.e * x.var(dim=0, correction=1)).log()
    x = _check_numpy(draws, "draws")
    if x.shape[0] < 2:
        raise ValueError(
            f"draws needs at least 2 rows (ddof=1 variance), got shape {x.shape}"
        )
    with np.errstate(divide="ignore"):
        return 0.5 * np.log(2.0 * np.pi * np.e * x.var(axis=0, ddof=1))
