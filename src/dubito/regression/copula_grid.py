"""The tabulated predictive density of `ImplicitCopulaRegressor`: its per-input grid and the density on it.

The predictive of the IC-NLM at an input is the density of Y when Z = Phi^{-1}(F_Y(Y)) follows the
equal-weight Gaussian mixture (1/J) sum_j N(m_j, s_j^2) (module docstring of
`dubito.regression.copula`, step 5); `log_density_z` evaluates it exactly (in log space) and
`tabulate` turns it into a `GridDensity`, one row per input, as follows.

Tabulation (`GridDensity`, ``grid_size`` = G nodes per input), in z, on [-z_cap, z_cap] with
z_cap = -Phi^{-1}(clip) of the marginal (6.36 for the KDE's clip 1e-10: beyond it the KDE's pseudo
responses are clipped) or 8 for a marginal without ``clip``:

* the **core**, [min_j (m_j - 8 s_j), max_j (m_j + 8 s_j)] cut to [-z_cap, z_cap] (the Gaussian mass
  outside is <= Phi(-8) = 6e-16 per component), **equally spaced in z**. It has G - 2 G // 16
  nodes (448 of 512) when it stops short of the cap on both sides, and gets a side's G // 16
  nodes back when it reaches the cap there (a wide conditional: all G nodes, the former grid);
* on each side where the core stops short of the cap, G // 16 sparse **tail nodes** out to the
  cap, so that a response far out in the conditional's tail (a narrow conditional, s << 1, well
  inside the training responses) gets its small but finite density rather than 0 (NLL +inf).
  Their distance from the core's centre a (m for one Gaussian) grows geometrically from the core's
  end to min_j (m_j - 40 s_j) / max_j (m_j + 40 s_j), or the cap if nearer, the last node then
  at the cap: the Gaussian log-density drops by a roughly constant fraction per tail segment,
  and the piecewise-linear reading over-states log p by at most ~11% of |log p| at G = 512
  (ratio (40/8)^(1/31); ~9% measured). Beyond ~38.6 component sds exp(-d^2/2) underflows float64,
  so there (and beyond the cap) the tabulated density is 0 while ``log_density`` stays finite. A
  side whose core stops fewer than G // 16 core spacings short of the cap gets no tail: its core
  is stretched to the cap instead. Every row spans exactly [-z_cap, z_cap], strictly increasing.

The nodes are mapped to y by the marginal's quantile function, y_k = F_Y^{-1}(Phi(z_k)), so they
are dense where the conditional puts its mass (a narrow conditional gets a narrow, fine core; a
peaked marginal a fine grid in its peak). The density is computed at those y_k (with z recomputed
as Phi^{-1}(F_Y(y_k)), the transform the posterior was fitted with) and read piecewise linearly
by `GridDensity`, which normalises each row. Mass beyond z_cap is lost (density 0 there): when
the mixture puts more than 1e-4 there (the conditional lies beyond the marginal's accurately
tabulated range, F_Y < 1e-10), a ``RuntimeWarning`` says so. ``log_density`` gives the exact
pointwise log p(y | x) (no grid), e.g. to check normalisation or for a far-tail log score.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import torch
from scipy.special import ndtr, ndtri

from dubito.predictive.grid import GridDensity

__all__ = ["log_density_z", "plugin_density_on_grid", "tabulate", "z_cap"]

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
_K_SD = 8.0                 # core z-range half-width in component sds (Phi(-8) = 6e-16)
_TAIL_DIVISOR = 16          # grid_size // 16 tail nodes per side (32 of 512), the rest in the core
_TAIL_SD = 40.0             # tail nodes out to 40 component sds (exp(-d^2/2) underflows beyond ~38.6)
_Z_CAP_DEFAULT = 8.0        # for a marginal without ``clip``
_TRUNCATION_WARN = 1e-4     # warn when more mixture mass than this lies beyond z_cap
_BLOCK = 1 << 22            # rows x nodes x components per block of the mixture density


def z_cap(marginal) -> float:
    """The grid's half-width in z: -Phi^{-1}(clip) of the marginal, at most 8 (8 without ``clip``)."""
    clip = getattr(marginal, "clip", None)
    if clip is None:
        return _Z_CAP_DEFAULT
    return float(min(_Z_CAP_DEFAULT, -ndtri(float(clip))))


def log_density_z(marginal, y, loc, scale, device) -> np.ndarray:
    """log p(y | x) at y (N, G) for mixtures (loc, scale) (N, J), blockwise over rows."""
    m = marginal
    zz = m.pseudo_response(y)
    out = m.log_pdf(y) + 0.5 * zz * zz + _HALF_LOG_2PI
    n, g = y.shape
    jn = loc.shape[1]
    step = max(1, _BLOCK // max(1, g * jn))
    if jn == 1:
        u = (zz - loc) / scale
        lg = -0.5 * u * u - np.log(scale)
    else:  # torch: threaded on CPU, and on the GPU with device="cuda"
        dev = torch.device(device)
        zt = torch.as_tensor(zz, dtype=torch.float64, device=dev)
        lt = torch.as_tensor(loc, dtype=torch.float64, device=dev)
        st = torch.as_tensor(scale, dtype=torch.float64, device=dev)
        ls = torch.log(st)
        lg = np.empty_like(y)
        for start in range(0, n, step):
            sl = slice(start, start + step)
            u = (zt[sl, :, None] - lt[sl, None, :]) / st[sl, None, :]
            lg[sl] = torch.logsumexp(-0.5 * u * u - ls[sl, None, :], dim=-1).cpu().numpy()
    return out + lg - math.log(jn) - _HALF_LOG_2PI


def tabulate(marginal, loc, scale, grid_size: int, device) -> GridDensity:
    """The predictive density of the mixtures (loc, scale) (N, J) on each input's y-grid (module
    docstring); a ``RuntimeWarning`` (at the caller of the estimator's ``predict_distribution``)
    when an input puts more than 1e-4 of its latent mass beyond the cap."""
    cap = z_cap(marginal)
    zg = _z_grid(loc, scale, cap, grid_size)
    outside = (ndtr((zg[:, :1] - loc) / scale) + ndtr((loc - zg[:, -1:]) / scale)).mean(axis=1)
    if outside.max() > _TRUNCATION_WARN:
        warnings.warn(
            f"{int((outside > _TRUNCATION_WARN).sum())} input(s) put more than {_TRUNCATION_WARN:g} of their "
            f"latent mass (max {outside.max():.3g}) beyond |z| = {cap:.2f}, where the marginal F_Y is below "
            "its accurate range; that mass is dropped (the conditional lies far outside the training "
            "responses)", RuntimeWarning, stacklevel=3)
    fast = plugin_density_on_grid(marginal, zg, loc, scale)
    if fast is not None:
        return fast
    yg = _strictly_increasing(np.asarray(marginal.inverse_pseudo_response(zg), dtype=np.float64))
    with np.errstate(divide="ignore", under="ignore"):
        dens = np.exp(log_density_z(marginal, yg, loc, scale, device))
    return GridDensity(yg, dens)


def plugin_density_on_grid(marginal, zg, loc, scale) -> GridDensity | None:
    """The single-Gaussian case (J = 1) with a KDE marginal, in one table search: the y-grid
    and p_Y from ``inverse_pseudo_response_and_pdf``, and the density formula at the z-grid
    itself, p_Y(y) phi((z - m)/s) / (s phi(z)), instead of recomputing z = Phi^{-1}(F_Y(y)) (equal
    up to rounding: the inverse of the piecewise-linear CDF is exact). None (general path)
    for mixtures, other marginals, or a y-grid with ties (flat stretches of F_Y)."""
    m = marginal
    if loc.shape[1] != 1 or not hasattr(m, "inverse_pseudo_response_and_pdf"):
        return None
    yg, pdf = m.inverse_pseudo_response_and_pdf(zg)
    if not np.all(np.diff(yg, axis=1) > 0):
        return None
    with np.errstate(under="ignore", over="ignore"):
        u = (zg - loc) / scale
        dens = pdf * np.exp(0.5 * zg * zg - 0.5 * u * u) / scale
    return GridDensity(yg, dens)


def _z_grid(loc: np.ndarray, scale: np.ndarray, cap: float, grid_size: int) -> np.ndarray:
    """The per-input z-grid (N, grid_size), strictly increasing, from -cap to cap (module docstring,
    "Tabulation"): an equally spaced core over [min_j (m_j - 8 s_j), max_j (m_j + 8 s_j)] (cut to the
    cap) and, on each side where the core stops short of the cap, ``grid_size // 16`` tail nodes,
    geometric in the distance from the core's centre out to 40 component sds, the last at the cap."""
    g = grid_size
    nt = g // _TAIL_DIVISOR
    zlo_u = (loc - _K_SD * scale).min(axis=1)
    zhi_u = (loc + _K_SD * scale).max(axis=1)
    zlo = np.clip(zlo_u, -cap, cap)
    zhi = np.clip(zhi_u, -cap, cap)
    narrow = zhi - zlo < 1e-3  # the whole conditional beyond the cap: a 1e-3 core at the cap
    zlo = np.where(narrow, np.minimum(zlo, cap - 1e-3), zlo)
    zhi = np.where(narrow, np.maximum(zlo + 1e-3, zhi), zhi)
    # A side gets a tail only if the core stops more than nt core spacings short of the cap; otherwise
    # the core is stretched to the cap and keeps that side's nt nodes (its spacing does not grow).
    h = (zhi - zlo) / (g - 1 - 2 * nt)
    lower = zlo + cap > nt * h
    upper = cap - zhi > nt * h
    zlo = np.where(lower, zlo, -cap)
    zhi = np.where(upper, zhi, cap)
    n_lo = np.where(lower, nt, 0)
    n_core = g - n_lo - np.where(upper, nt, 0)           # core nodes, at indices n_lo .. n_lo + n_core - 1
    step = (zhi - zlo) / (n_core - 1)
    zg = (zlo - step * n_lo)[:, None] + step[:, None] * np.arange(g, dtype=np.float64)  # core; tails below
    if nt > 0 and (lower.any() or upper.any()):
        # Tail node j = 1..nt sits at distance (core end - a) * r^j from the anchor a, up to the end
        # point e = m +- 40 s (the farthest over the components), or the cap if nearer: a Gaussian
        # log-density -d^2 / 2 then drops by about the same *fraction* 2 (r - 1) per tail segment,
        # so its piecewise-linear reading has a bounded relative error in log p; beyond ~38.6 sds
        # exp(-d^2 / 2) underflows float64 anyway. When e stops short of the cap the last node goes
        # to the cap (density 0 there and in between). a = the core's centre (m for one Gaussian),
        # kept in the core's middle half when the core was cut at the cap.
        width = zhi - zlo
        a = np.clip(0.5 * (zlo_u + zhi_u), zlo + 0.25 * width, zhi - 0.25 * width)
        j = np.arange(1, nt + 1)
        for side, rows in ((-1.0, np.flatnonzero(lower)), (1.0, np.flatnonzero(upper))):
            if rows.size == 0:
                continue
            lr, sr, ar = loc[rows], scale[rows], a[rows]
            end = (zlo if side < 0 else zhi)[rows]       # the core's end on this side
            far = side * np.minimum(side * (lr + side * _TAIL_SD * sr), cap).max(axis=1)  # 40 sds or the cap
            far = side * np.maximum(side * far, side * end + nt * h[rows])  # strictly beyond the core's end
            cut = cap - side * far > h[rows]               # 40 sds short of the cap: last node at the cap
            far = np.where(cut, far, side * cap)
            n_geo = np.maximum(nt - cut, 1)               # geometric nodes (>= 1: the power stays finite)
            r = ((far - ar) / (end - ar)) ** (1.0 / n_geo)  # > 1: far lies beyond end, both away from a
            tail = ar[:, None] + (end - ar)[:, None] * r[:, None] ** j
            tail[:, -1] = np.where(cut, side * cap, tail[:, -1])
            if side < 0:
                zg[rows, :nt] = tail[:, ::-1]
            else:
                zg[rows, g - nt:] = tail
    zg[:, 0], zg[:, -1] = -cap, cap                       # every row ends exactly at the cap
    return zg


def _strictly_increasing(y: np.ndarray) -> np.ndarray:
    """Rows of y made strictly increasing by a minimal spacing (ties at flat stretches of F_Y)."""
    d = np.diff(y, axis=1)
    if np.all(d > 0):
        return y
    span = np.maximum(y[:, -1:] - y[:, :1], np.abs(y[:, :1]) + 1.0)
    d = np.maximum(d, 1e-12 * span)
    return np.concatenate([y[:, :1], y[:, :1] + np.cumsum(d, axis=1)], axis=1)
