r"""Per-input density tabulated on a y-grid: p(y | x_i) given by its values at grid nodes.

What the implicit copula neural linear model (Hoffmann & Klein 2023, IC-NLM spec §2.9)
returns: its predictive density is known pointwise on a y-grid, and every other quantity
follows from that table. The table is read as a **piecewise-linear density** on each
input's grid (the linear interpolant of the nodes), and every method is the exact answer
for that piecewise-linear density:

* normalisation: the density is divided by its trapezoid integral, so the table
  integrates to exactly 1 on its grid; **mass outside the grid is taken as 0** (tabulate
  far enough into the tails that this is true to the accuracy you need);
* F(y) = C_j + d_j t + s_j t^2 / 2 on segment j (t = y - x_j, s_j = (d_{j+1} - d_j) / h_j,
  C_j the cumulative trapezoid at node j): the exact integral of the linear interpolant,
  0 below the grid and 1 above it;
* F^{-1}(q): the exact root of that quadratic, t = 2r / (d_j + sqrt(d_j^2 + 2 s_j r)),
  r = q - C_j (the cancellation-free form), in the first segment with C_j < q <= C_{j+1};
* log p(y): the log of the linear interpolant; -inf outside the grid and where it is 0;
* mean and variance: exact integrals of the piecewise-linear density, per segment
  int y p = h/6 [(2a + b) p_a + (a + 2b) p_b] and int (y - mu)^2 p =
  h/12 [p_a (3A^2 + 2AB + B^2) + p_b (A^2 + 2AB + 3B^2)], A = a - mu, B = b - mu (the
  central form, so no cancellation when |mu| >> sd);
* sampling: inverse CDF of uniforms from the given generator;
* CRPS (registered with :func:`dubito.metrics.crps`): exact, int F^2 below y plus
  int (1 - F)^2 above y, each a closed-form quintic per segment.

Everything is vectorised over inputs; searches in per-input grids are a vectorised binary
search (log2 G steps), so N = 10 000 inputs x G = 512 nodes take milliseconds per call.
"""

from __future__ import annotations

import numpy as np

from dubito.predictive.base import StoredMoments, as_numpy
from dubito.predictive.normal import (
    _first_bad,
    _frozen,
    _per_input,
    _require_finite,
    _require_nonnegative,
)

__all__ = ["GridDensity"]


# ---------------------------------------------------------------------- helpers
def _row_search(table: np.ndarray, values: np.ndarray, side: str) -> np.ndarray:
    """``np.searchsorted`` row by row: ``table`` (G,) shared or (N, G), ``values`` (N, k).

    Rows of ``table`` must be non-decreasing. A per-row table is searched by a vectorised
    binary search (ceil(log2(G + 1)) steps over all (N, k) values at once). NaN values
    land at index 0 (callers propagate NaN themselves).
    """
    if table.ndim == 1:
        return np.searchsorted(table, values, side=side)
    n, g = table.shape
    rows = np.arange(n)[:, None]
    lo = np.zeros(values.shape, dtype=np.intp)
    hi = np.full(values.shape, g, dtype=np.intp)
    for _ in range(int(np.ceil(np.log2(g + 1))) + 1):
        active = lo < hi
        if not active.any():
            break
        mid = (lo + hi) // 2
        t = table[rows, np.minimum(mid, g - 1)]
        right = (t < values) if side == "left" else (t <= values)
        lo = np.where(active & right, mid + 1, lo)
        hi = np.where(active & ~right, mid, hi)
    return lo


def _sq_integral(c0, c1, c2, u):
    """int_0^u (c0 + c1 t + c2 t^2)^2 dt, elementwise (exact polynomial)."""
    return u * (
        c0 * c0
        + u * (c0 * c1 + u * ((c1 * c1 + 2.0 * c0 * c2) / 3.0 + u * (c1 * c2 / 2.0 + u * (c2 * c2 / 5.0))))
    )


_BLOCK = 1 << 18  # elements per row block of temporaries (2 MB of float64 each)


def _row_blocks(n: int, per_row: int):
    """Slices over n rows holding at most ``_BLOCK`` elements of ``per_row`` each."""
    step = max(1, _BLOCK // max(1, per_row))
    for start in range(0, n, step):
        yield slice(start, min(n, start + step))


def _moments(x: np.ndarray, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Exact mean and variance of the piecewise-linear density (x (G,) or (N, G), d (N, G)).

    Per segment [a, b] (h = b - a, end values p_a, p_b): int y p = h/6 [(2a + b) p_a +
    (a + 2b) p_b], and about the mean (A = a - mu, B = b - mu) int (y - mu)^2 p =
    h/12 [p_a (3A^2 + 2AB + B^2) + p_b (A^2 + 2AB + 3B^2)]; both are sums of non-negative
    terms when p >= 0, so the variance cannot cancel to a negative or noisy value.
    """
    n = d.shape[0]
    mean, var = np.empty(n), np.empty(n)
    for blk in _row_blocks(n, d.shape[1]):
        xb = x if x.ndim == 1 else x[blk]
        h = np.diff(xb, axis=-1)
        pa, pb = d[blk, :-1], d[blk, 1:]
        a, b = xb[..., :-1], xb[..., 1:]
        wa, wb = h * (2.0 * a + b), h * (a + 2.0 * b)
        if xb.ndim == 1:
            mu = (pa @ wa + pb @ wb) / 6.0
        else:
            mu = (np.einsum("ij,ij->i", pa, wa) + np.einsum("ij,ij->i", pb, wb)) / 6.0
        u = xb - mu[:, None]
        ua, ub = u[:, :-1], u[:, 1:]
        cross = 2.0 * ua * ub
        sa, sb = ua * ua, ub * ub
        va = h * (3.0 * sa + cross + sb)
        vb = h * (sa + cross + 3.0 * sb)
        mean[blk] = mu
        var[blk] = (np.einsum("ij,ij->i", pa, va) + np.einsum("ij,ij->i", pb, vb)) / 12.0
    return mean, var


# ---------------------------------------------------------------------- the class
class GridDensity(StoredMoments):
    r"""Per-input density tabulated on an increasing y-grid, read as piecewise linear.

    See the module docstring for the formulas (all exact for the piecewise-linear density).

    Parameters
    ----------
    grid : (G,) grid shared by all inputs, or (N, G) one grid per input; each row strictly
        increasing and finite, G >= 2. Non-uniform spacing is fine.
    density : (N, G) non-negative, finite values of the (possibly unnormalised) density at
        the grid nodes. Each row is divided by its trapezoid integral; a row integrating to
        0 is an error. Mass outside the grid is taken as 0.
    epistemic_var, aleatoric_var : optional (N,) (or scalar) non-negative variance parts,
        returned by the properties of the same name (None when not given); carried as
        given, not required to sum to ``var`` (the method that builds the table knows how
        its variance splits).

    The stored arrays are float64 copies and read-only; ``density`` is returned normalised.
    """

    def __init__(self, grid, density, *, epistemic_var=None, aleatoric_var=None):
        density = as_numpy(density, "density")
        if density.ndim != 2 or density.shape[0] < 1:
            hint = " (for one input pass density[None, :])" if density.ndim == 1 else ""
            raise ValueError(
                f"density must have shape (N, G) (N inputs >= 1, G grid nodes), got {density.shape}{hint}"
            )
        n, g = density.shape
        grid = as_numpy(grid, "grid")
        if grid.shape not in ((g,), (n, g)):
            raise ValueError(
                f"grid must have shape ({g},) (shared) or ({n}, {g}) (one per input) to match "
                f"density {density.shape}, got {grid.shape}"
            )
        if g < 2:
            raise ValueError(f"the grid needs at least 2 nodes, got G = {g}")
        _require_finite(grid, "grid")
        bad = grid[..., 1:] <= grid[..., :-1]
        if bad.any():
            raise ValueError(
                f"grid must be strictly increasing along its last axis (found non-increasing steps: "
                f"{_first_bad(bad)})"
            )
        _require_nonnegative(density, "density")
        # cumulative trapezoid per row, in row blocks so temporaries stay small
        cum = np.empty((n, g))
        cum[:, 0] = 0.0
        for blk in _row_blocks(n, g):
            step = np.diff(grid if grid.ndim == 1 else grid[blk], axis=-1)
            mass = 0.5 * step * (density[blk, :-1] + density[blk, 1:])
            np.cumsum(mass, axis=1, out=cum[blk, 1:])
        total = cum[:, -1].copy()
        zero = ~(total > 0)
        if zero.any():
            raise ValueError(
                f"density must have a positive integral over the grid in every row (rows integrating "
                f"to 0: {_first_bad(zero)})"
            )
        if not np.all(np.isfinite(total)):
            raise ValueError("density integrates to inf over the grid (values too large); rescale it")
        parts = {}
        for name, value in (("epistemic_var", epistemic_var), ("aleatoric_var", aleatoric_var)):
            if value is not None:
                value = _per_input(value, name, n)
                _require_nonnegative(value, name)
                value = _frozen(value)
            parts[name] = value
        d = density / total[:, None]
        d.setflags(write=False)
        cum /= total[:, None]
        cum[:, -1] = 1.0
        np.clip(cum, 0.0, 1.0, out=cum)
        cum.setflags(write=False)
        grid = _frozen(grid)
        mean, var = _moments(grid, d)
        self._init(grid, d, cum, _frozen(mean), _frozen(var), parts["epistemic_var"], parts["aleatoric_var"])

    @classmethod
    def _from_arrays(cls, grid, d, cum, mean, var, epi, alea) -> "GridDensity":
        """Trusted constructor: arrays already validated, normalised and read-only."""
        obj = cls.__new__(cls)
        obj._init(grid, d, cum, mean, var, epi, alea)
        return obj

    def _init(self, grid, d, cum, mean, var, epi, alea) -> None:
        self._x, self._d, self._cum = grid, d, cum
        self._mean, self._var, self._std = mean, var, _frozen(np.sqrt(var))
        self._epistemic, self._aleatoric = epi, alea

    # ------------------------------------------------------------------ parameters
    @property
    def grid(self) -> np.ndarray:
        """The y-grid, (G,) if shared by all inputs else (N, G), read-only."""
        return self._x

    @property
    def density(self) -> np.ndarray:
        """Normalised density at the grid nodes, (N, G), read-only (trapezoid integral 1)."""
        return self._d

    @property
    def n_nodes(self) -> int:
        return int(self._d.shape[1])

    # ------------------------------------------------------------------ segment lookup
    def _node(self, a: np.ndarray, j: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """a[:, j] per row for an (N, G) array, or a[j] for the shared (G,) grid."""
        return a[j] if a.ndim == 1 else a[rows, j]

    def _segment(self, y: np.ndarray):
        """Segment index j (clipped to [0, G-2]) of y (N, k) and its end points / densities."""
        g = self._d.shape[1]
        rows = np.arange(self._d.shape[0])[:, None]
        j = np.clip(_row_search(self._x, y, "right") - 1, 0, g - 2)
        xa = self._node(self._x, j, rows)
        xb = self._node(self._x, j + 1, rows)
        return j, rows, xa, xb, self._d[rows, j], self._d[rows, j + 1]

    def _ends(self):
        x = self._x
        return (x[0], x[-1]) if x.ndim == 1 else (x[:, :1], x[:, -1:])

    # ------------------------------------------------------------------ distribution
    def _log_prob(self, y: np.ndarray) -> np.ndarray:
        _j, _rows, xa, xb, pa, pb = self._segment(y)
        h = xb - xa
        w = np.clip((y - xa) / h, 0.0, 1.0)
        p = pa + w * (pb - pa)
        x0, x1 = self._ends()
        p = np.where((y < x0) | (y > x1), 0.0, p)
        with np.errstate(divide="ignore"):
            return np.log(p)  # NaN y stays NaN (w is NaN)

    def _cdf(self, y: np.ndarray) -> np.ndarray:
        j, rows, xa, xb, pa, pb = self._segment(y)
        h = xb - xa
        t = np.clip(y - xa, 0.0, h)
        s = (pb - pa) / h
        c0 = self._cum[rows, j]
        # kept inside [C_j, C_{j+1}] so rounding cannot make F decrease across a node
        f = np.minimum(c0 + t * (pa + 0.5 * s * t), self._cum[rows, j + 1])
        x0, x1 = self._ends()
        f = np.where(y < x0, 0.0, np.where(y >= x1, 1.0, f))
        return np.clip(f, 0.0, 1.0)

    def _quantile(self, q: np.ndarray, tol: float = 0.0, max_iter: int = 0) -> np.ndarray:
        """Exact inverse of the piecewise-quadratic CDF (q = 0 -> grid start, 1 -> the end of
        the last segment with mass; the public ``quantile`` maps 0/1 to -inf/+inf)."""
        g = self._d.shape[1]
        rows = np.arange(self._d.shape[0])[:, None]
        j = np.clip(_row_search(self._cum, q, "left") - 1, 0, g - 2)  # C_j < q <= C_{j+1}
        xa = self._node(self._x, j, rows)
        xb = self._node(self._x, j + 1, rows)
        pa, pb = self._d[rows, j], self._d[rows, j + 1]
        h = xb - xa
        r = np.maximum(q - self._cum[rows, j], 0.0)
        s = (pb - pa) / h
        disc = np.sqrt(np.maximum(pa * pa + 2.0 * s * r, 0.0))
        den = pa + disc
        with np.errstate(divide="ignore", invalid="ignore"):
            t = np.where(den > 0, 2.0 * r / den, 0.0)
        return xa + np.clip(t, 0.0, h)

    def _crps(self, y: np.ndarray) -> np.ndarray:
        """Exact CRPS for (N,) observations: int_{-inf}^y F^2 + int_y^inf (1 - F)^2.

        On segment j, F = C_j + d_j t + (s_j/2) t^2 and 1 - F = S_j - d_j t - (s_j/2) t^2
        (S_j = mass above node j, summed from the top for accuracy near 1); their squares
        integrate in closed form (``_sq_integral``). Below the grid F = 0 and above it
        F = 1, so an observation outside adds its distance to the grid.
        """
        y = np.asarray(y, dtype=np.float64)
        n, g = self._d.shape
        x = self._x
        a, b = x[..., :-1], x[..., 1:]
        h = np.broadcast_to(b - a, (n, g - 1))
        pa, pb = self._d[:, :-1], self._d[:, 1:]
        e = 0.5 * (pb - pa) / h
        mass = 0.5 * h * (pa + pb)
        cum = self._cum[:, :-1]
        upper = np.zeros((n, g))
        upper[:, :-1] = np.cumsum(mass[:, ::-1], axis=1)[:, ::-1]
        upper /= upper[:, :1]  # the total mass is 1 up to rounding
        sur = upper[:, :-1]
        low_seg = _sq_integral(cum, pa, e, h)  # int over segment of F^2
        up_seg = _sq_integral(sur, -pa, -e, h)  # int over segment of (1 - F)^2
        low_cum = np.zeros((n, g))
        np.cumsum(low_seg, axis=1, out=low_cum[:, 1:])  # sum over segments < j
        up_cum = np.zeros((n, g))
        up_cum[:, :-1] = np.cumsum(up_seg[:, ::-1], axis=1)[:, ::-1]  # sum over segments >= j
        yy = y[:, None]
        j, rows, xa, xb, _, _ = self._segment(yy)
        r = rows[:, 0]
        j = j[:, 0]
        xa, xb = xa.reshape(n), xb.reshape(n)
        hj = xb - xa
        tau = np.clip(y - xa, 0.0, hj)
        c0, d0, e0, s0 = cum[r, j], pa[r, j], e[r, j], sur[r, j]
        inside = (
            low_cum[r, j]
            + _sq_integral(c0, d0, e0, tau)
            + (_sq_integral(s0, -d0, -e0, hj) - _sq_integral(s0, -d0, -e0, tau))
            + up_cum[r, j + 1]
        )
        x0, x1 = self._ends()
        x0 = np.broadcast_to(np.asarray(x0).reshape(-1), (n,))
        x1 = np.broadcast_to(np.asarray(x1).reshape(-1), (n,))
        below = (x0 - y) + up_cum[:, 0]
        above = low_cum[:, -1] + (y - x1)
        return np.where(y < x0, below, np.where(y > x1, above, inside))

    def _subset(self, index: np.ndarray) -> "GridDensity":
        def take(arr):
            if arr is None:
                return None
            out = arr[index]
            out.setflags(write=False)
            return out

        grid = self._x if self._x.ndim == 1 else take(self._x)
        return GridDensity._from_arrays(
            grid, take(self._d), take(self._cum), take(self._mean), take(self._var),
            take(self._epistemic), take(self._aleatoric),
        )

    def __repr__(self) -> str:
        shared = "shared" if self._x.ndim == 1 else "per-input"
        return f"GridDensity(n_inputs={len(self)}, n_nodes={self.n_nodes}, grid={shared})"
