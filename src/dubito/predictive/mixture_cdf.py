r"""The CDF of many-component Gaussian mixtures at many points, by box-wise Hermite expansions.

F(t) = sum_i w_i Phi((t - mu_i) / s_i) costs one normal CDF per (point, component) evaluated
directly. When the components crowd together (MC dropout's masks, posterior draws, a kernel
density of samples) they are grouped into boxes: components whose variance lies in one class
[v0 r^j, v0 r^(j+1)) (v0 the row's smallest, r = ``VARIANCE_RATIO``) share a box variance v_b, the
midpoint of the class, and are binned by mean into intervals of width s_b = sqrt(v_b) with
centres c_b. The CDF
G(t; mu, v) = Phi((t - mu) / sqrt(v)) solves the heat equation dG/dv = (1/2) d^2G/dt^2 and
dG/dmu = -dG/dt, so with delta = mu_i - c_b and eta = v_i - v_b, Taylor's theorem in both gives

    Phi((t - mu_i) / s_i) = sum_n T_in Phi^(n)(u),  u = (t - c_b) / s_b,
    T_in = sum_{k + 2l = n} a^k / k! * e^l / l!,  a = -delta / s_b,  e = eta / (2 v_b),
    Phi^(n)(u) = (-1)^(n-1) He_(n-1)(u) phi(u)  (n >= 1; He the probabilists' Hermite polynomials),

the expansion of the fast Gauss transform (Greengard & Strain 1991) carried to the CDF. T_n is
the coefficient of x^n in exp(a x + e x^2), so (n + 1) T_(n+1) = a T_n + 2 e T_(n-1): O(order) per
component. Each box keeps the moments m_bn = sum_{i in b} w_i T_in (n <= the order), and F(t) =
sum_b sum_n m_bn Phi^(n)(u_b), summed by Clenshaw's recurrence: O(M order) per input to build,
O(B order) per point instead of O(M) normal CDFs.

Error bound. Cramer's inequality |He_n(u)| exp(-u^2 / 4) <= 1.0865 sqrt(n!) bounds the dropped term
(k, l) of one unit of weight by |a|^k / k! |e|^l / l! 0.434 sqrt((k + 2l - 1)!), with |a| =
|mu_i - c_b| / s_b <= 1/2 (``BIN_WIDTH``) and |e| = |v_i - v_b| / (2 v_b) <= (r - 1) / (2 (r + 1)) =
0.1 (r = 1.5). Summed over every k + 2l above the order, this is 3.8e-11 absolute in F with
``ORDER_MIXED`` = 32 (boxes holding several variances), and 3.4e-12 with ``ORDER`` = 14 where every
box holds one variance (e = 0: location terms only). Measured against the direct sum on the test
cases: at most 7e-14 (tests/predictive/test_mixture_cdf.py). Chosen with the time of
benchmarks/scoring.py: variance classes a factor 1.1 apart with order 18 (the first version) made
15 classes of a factor-4 spread of variances, and each point paid for every one of their boxes;
classes a factor 1.5 apart with order 32 cost a third of that on 4,000 components with sds 0.3-0.6
for a smaller bound. Wider classes need orders whose Clenshaw steps cost more than the boxes they
save (r = 2 needs order 44 for 1.5e-10).
"""

from __future__ import annotations

import numpy as np
from scipy.special import ndtr

__all__ = ["BoxExpansion", "direct_cdf_pdf_pairs", "expansion_for", "mixture_cdf"]

#: highest derivative of Phi kept per box where every box holds one variance (the module's bound)
ORDER = 14
#: the same where boxes hold several variances (a variance class each)
ORDER_MIXED = 32
#: width of the mean bins in units of the box sd: |mu_i - c_b| <= s_b / 2
BIN_WIDTH = 1.0
#: ratio of the variance classes: a box variance is within (1.5 - 1) / (1.5 + 1) = 20 % of its members'
VARIANCE_RATIO = 1.5
#: u beyond which phi(u) underflows to 0 and Phi(u) is 0 or 1 in float64
_U_CLIP = 40.0
#: a row is expanded when its boxes times this are fewer than its components: one box at one point
#: costs the order's Clenshaw steps plus a normal CDF and an exp, measured on one thread as 2.8
#: normal CDFs' time at ``ORDER`` and 5.5 at ``ORDER_MIXED`` (`BoxExpansion.box_cost`)
BOX_COST = 3
BOX_COST_MIXED = 6
#: points per row from which building the expansion (about 10 points' worth of direct sums with one
#: variance per box, 20 with several) pays
MIN_POINTS = 24
#: F below which ``mixture_cdf`` sums the tail point directly again (relative accuracy in the tail)
TAIL = 1e-4
#: rows whose mean range spans more than this many of their smallest sds are left to the direct sum
_MAX_SPAN = 1e12
#: (row, point, box) or (row, component, term) elements per temporary block: 16 MB of float64
_BLOCK = 1 << 21

_INV_SQRT_2PI = 1.0 / np.sqrt(2.0 * np.pi)


def _boxes(mu: np.ndarray, var: np.ndarray):
    """Box of each component: variance class j and mean bin k, the box variance and centre."""
    vmin = var.min(axis=1, keepdims=True)
    j = np.floor(np.log(var / vmin) / np.log(VARIANCE_RATIO))
    # the midpoint of the class's part of the row's range [vmin, vmax]: |v - vb| / vb is at most
    # (r - 1) / (r + 1), and a row of equal variances has vb = v (no variance terms)
    low = vmin * VARIANCE_RATIO**j
    vb = 0.5 * (low + np.minimum(low * VARIANCE_RATIO, var.max(axis=1, keepdims=True)))
    sb = np.sqrt(vb)
    mu0 = mu.min(axis=1, keepdims=True)
    k = np.floor((mu - mu0) / (BIN_WIDTH * sb))
    centre = mu0 + (k + 0.5) * (BIN_WIDTH * sb)
    return j, k, vb, sb, centre


def _safe_rows(mu: np.ndarray, sd: np.ndarray) -> np.ndarray:
    """Rows the expansion may take: positive finite sds, a span of means below ``_MAX_SPAN``
    smallest sds (so the bin indices stay exact in float64)."""
    s_min = sd.min(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        span = (mu.max(axis=1) - mu.min(axis=1)) / s_min
    return (s_min > 0) & (span < _MAX_SPAN) & np.isfinite(sd).all(axis=1)


def mixture_cdf(w: np.ndarray, mu: np.ndarray, sd: np.ndarray, t: np.ndarray, *,
                relative_tail: bool = True) -> np.ndarray:
    """F(t) = sum_m w_m Phi((t - mu_m) / sd_m) for params (N, M) and points t (N, T), clipped to
    [0, 1]: by the box expansion for rows with at least ``MIN_POINTS`` points whose boxes are
    few enough (`BoxExpansion.box_cost` x boxes < components), with positive sds and a span of means below
    ``_MAX_SPAN`` smallest sds; directly for the others.

    The expansion's error is absolute (below 3.8e-11), so with ``relative_tail`` (default) the
    points where it gives F < ``TAIL`` are summed directly again: F then keeps a relative error
    below 3.8e-7 everywhere, as the direct sum's tail does. The CRPS quadrature, whose own bound is
    absolute, passes False."""
    n, n_pts = t.shape
    m = mu.shape[1]
    out = np.empty((n, n_pts))
    expand = _safe_rows(mu, sd) if n_pts >= MIN_POINTS and m >= 2 * BOX_COST else np.zeros(n, dtype=bool)
    if expand.any():
        rows = np.flatnonzero(expand)
        step = max(1, _BLOCK // (m * (ORDER_MIXED + 1)))
        for r0 in range(0, rows.size, step):
            r = rows[r0:r0 + step]
            box = BoxExpansion(w[r], mu[r], sd[r] ** 2)
            cheap = box.box_cost * box.n_boxes < m
            if not cheap.all():
                expand[r[~cheap]] = False
                r = r[cheap]
                if r.size == 0:
                    continue
                box = box.rows(cheap)
            f = box.cdf(t[r])
            if relative_tail:
                tail_rows, tail_pts = np.nonzero(f < TAIL)
                if tail_rows.size:
                    f[tail_rows, tail_pts] = direct_cdf_pdf_pairs(w[r], mu[r], sd[r], tail_rows,
                                                                   t[r][tail_rows, tail_pts])[0]
            out[r] = f
    rest = np.flatnonzero(~expand)
    if rest.size:
        out[rest] = _direct_cdf(w[rest], mu[rest], sd[rest], t[rest])
    return np.clip(out, 0.0, 1.0, out=out)


def direct_cdf_pdf_pairs(w, mu, sd, rows, x):
    """(F, p) at (row, point) pairs (rows[e], x[e]) by the direct sums over the components, from
    one z: F = sum_m w_m Phi(z_em), p = sum_m w_m phi(z_em) / sd_rm (the expansion's
    `BoxExpansion.cdf_pdf_pairs` for the rows it does not take)."""
    f = np.empty(x.shape[0])
    p = np.empty(x.shape[0])
    step = max(1, _BLOCK // max(1, mu.shape[1]))
    for e0 in range(0, x.shape[0], step):
        e = slice(e0, e0 + step)
        r = rows[e]
        s = sd[r]
        z = (x[e, None] - mu[r]) / s
        f[e] = np.einsum("em,em->e", w[r], ndtr(z))
        p[e] = np.einsum("em,em->e", w[r] / s, np.exp(-0.5 * z * z)) * _INV_SQRT_2PI
    return f, p


def _direct_cdf(w, mu, sd, t):
    """sum_m w_m Phi((t - mu_m) / sd_m), one normal CDF per (point, component)."""
    n, n_pts = t.shape
    out = np.empty((n, n_pts))
    step = max(1, _BLOCK // max(1, n_pts * mu.shape[1]))
    with np.errstate(invalid="ignore"):
        for r0 in range(0, n, step):
            b = slice(r0, min(n, r0 + step))
            out[b] = np.einsum("nkm,nm->nk", ndtr((t[b, :, None] - mu[b, None, :]) / sd[b, None, :]), w[b])
    return out


class BoxExpansion:
    """Box moments of the mixtures sum_i w_i N(mu_i, var_i), one per row; ``cdf(t)`` evaluates them.
    A row's order (``row_order``) is ``ORDER`` where each of its boxes holds one variance, else
    ``ORDER_MIXED``; ``order``, the rows' largest, is the length of the shared sums.

    Parameters: w, mu, var of shape (N, M), weights normalised, variances positive.
    """

    def __init__(self, w: np.ndarray, mu: np.ndarray, var: np.ndarray):
        n, m = mu.shape
        j, k, vb, sb, centre = _boxes(mu, var)
        by_box = np.lexsort((k, j), axis=1)
        take = lambda x: np.take_along_axis(x, by_box, 1).ravel()  # noqa: E731  row-major, sorted
        js, ks, vb, sb, centre = take(j), take(k), take(vb), take(sb), take(centre)
        mus, vs, ws = take(mu), take(var), take(w)
        new = np.ones(n * m, dtype=bool)
        new[1:] = (js[1:] != js[:-1]) | (ks[1:] != ks[:-1])
        new[::m] = True  # every row starts a box
        starts = np.flatnonzero(new)
        box_row = starts // m
        n_boxes = np.bincount(box_row, minlength=n)
        width = int(n_boxes.max())
        box_local = np.arange(starts.size) - np.repeat(np.cumsum(n_boxes) - n_boxes, n_boxes)
        self.centre = np.zeros((n, width))
        self.scale = np.ones((n, width))
        self.centre[box_row, box_local] = centre[starts]
        self.scale[box_row, box_local] = sb[starts]
        self.n_boxes = n_boxes
        # moments m_bn = sum_(i in b) w_i T_in by segmented sums over the sorted components
        e = (vs - vb) / (2.0 * vb)
        self.row_order = np.where((e != 0).reshape(n, m).any(axis=1), ORDER_MIXED, ORDER)
        self.order = int(self.row_order.max())
        moments = np.zeros((self.order + 1, n, width))
        for n_, term in enumerate(_terms(ws, -(mus - centre) / sb, e, self.order)):
            moments[n_, box_row, box_local] = np.add.reduceat(term, starts)
        # a row's terms above its own order are dropped (zero moments add exact zeros in the
        # sums), so a row's values do not depend on the other rows built or evaluated with it
        moments[np.arange(self.order + 1)[:, None] > self.row_order[None, :]] = 0.0
        # Clenshaw coefficients g_q = (-1)^q m_(q+1) of sum_q g_q He_q(u) = sum_(n>=1) m_n Phi^(n) / phi
        self._mass = moments[0]
        sign = np.where(np.arange(self.order) % 2 == 0, 1.0, -1.0)
        self._coef = np.moveaxis(moments[1:] * sign[:, None, None], 0, -1)

    @property
    def box_cost(self) -> np.ndarray:
        """One box at one point per row, in normal CDFs' time (``BOX_COST`` or ``BOX_COST_MIXED``)."""
        return np.where(self.row_order == ORDER, BOX_COST, BOX_COST_MIXED)

    def rows(self, keep: np.ndarray) -> "BoxExpansion":
        """The expansion of the rows ``keep`` (a boolean mask) only: each row's boxes and moments are
        its own, so this equals building it from those rows, without redoing the moments."""
        out = object.__new__(BoxExpansion)
        out.row_order = self.row_order[keep]
        out.order = int(out.row_order.max()) if out.row_order.size else ORDER
        out.n_boxes = self.n_boxes[keep]
        width = int(out.n_boxes.max()) if out.n_boxes.size else 0
        out.centre = self.centre[keep, :width]
        out.scale = self.scale[keep, :width]
        out._mass = self._mass[keep, :width]
        out._coef = self._coef[keep, :width, :out.order]
        return out

    def cdf(self, t: np.ndarray) -> np.ndarray:
        """F at points t of shape (N, T), clipped to [0, 1]."""
        n, n_pts = t.shape
        width = self.centre.shape[1]
        out = np.empty((n, n_pts))
        step = max(1, _BLOCK // max(1, n_pts * width))
        for r0 in range(0, n, step):
            sl = slice(r0, min(n, r0 + step))
            u = (t[sl, :, None] - self.centre[sl, None, :]) / self.scale[sl, None, :]
            np.clip(u, -_U_CLIP, _U_CLIP, out=u)
            coef = self._coef[sl, None, :, :]
            b1 = np.zeros_like(u)
            b2 = np.zeros_like(u)
            ub = np.empty_like(u)
            for q in range(self.order - 1, -1, -1):  # b_q = g_q + u b_(q+1) - (q + 1) b_(q+2), in place
                b2 *= -(q + 1)
                b2 += coef[..., q]
                b2 += np.multiply(u, b1, out=ub)
                b1, b2 = b2, b1
            b1 *= np.exp(-0.5 * u * u)
            out[sl] = np.einsum("rtb,rb->rt", ndtr(u), self._mass[sl]) + _INV_SQRT_2PI * b1.sum(axis=-1)
        return np.clip(out, 0.0, 1.0, out=out)

    def cdf_pdf_pairs(self, rows: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(F, p) at (row, point) pairs (rows[e], x[e]): F as ``cdf`` (not clipped) and the density
        p = sum_b phi(u) / s_b sum_q (-1)^q m_bq He_q(u), both from one forward Hermite recurrence."""
        width = self.centre.shape[1]
        f = np.empty(x.shape[0])
        p = np.empty(x.shape[0])
        step = max(1, _BLOCK // max(1, width * self.order))
        for e0 in range(0, x.shape[0], step):
            e = slice(e0, e0 + step)
            r = rows[e]
            u = np.clip((x[e, None] - self.centre[r]) / self.scale[r], -_U_CLIP, _U_CLIP)
            coef, mass = self._coef[r], self._mass[r]
            h_prev, h = np.ones_like(u), u
            s_f = coef[..., 0].copy()
            s_p = mass.copy()
            for q in range(1, self.order + 1):  # h = He_q(u)
                if q < self.order:
                    s_f += coef[..., q] * h
                s_p -= coef[..., q - 1] * h
                h_prev, h = h, u * h - q * h_prev
            phi = np.exp(-0.5 * u * u) * _INV_SQRT_2PI
            f[e] = np.einsum("eb,eb->e", ndtr(u), mass) + np.einsum("eb,eb->e", phi, s_f)
            p[e] = np.einsum("eb,eb->e", phi / self.scale[r], s_p)
        return f, p


def expansion_for(w: np.ndarray, mu: np.ndarray, sd: np.ndarray, n_points: int) -> BoxExpansion | None:
    """The box expansion of these rows if it pays for ``n_points`` evaluations per row in every
    row (as `mixture_cdf` decides), else None."""
    m = mu.shape[1]
    if n_points < MIN_POINTS or m < 2 * BOX_COST or not _safe_rows(mu, sd).all():
        return None
    box = BoxExpansion(w, mu, sd**2)
    return box if np.all(box.box_cost * box.n_boxes < m) else None


def _terms(w: np.ndarray, a: np.ndarray, e: np.ndarray, order: int):
    """Yield w T_n for n = 0..order: T_n = sum_(k + 2l = n) a^k / k! e^l / l!, the coefficients of
    exp(a x + e x^2), by (n + 1) T_(n+1) = a T_n + 2 e T_(n-1) (two arrays alive at a time)."""
    prev, cur = w, w * a
    yield prev
    yield cur
    e2 = 2.0 * e if e.any() else None  # one variance per box: location terms only
    tmp = np.empty_like(cur) if e2 is not None else None
    for n_ in range(1, order):
        nxt = cur * a
        if e2 is not None:
            nxt += np.multiply(e2, prev, out=tmp)
        nxt *= 1.0 / (n_ + 1)
        prev, cur = cur, nxt
        yield cur
