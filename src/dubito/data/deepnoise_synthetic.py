"""The three synthetic regression problems of B-DeepNoise (Zhang, Liu & Kang 2022, [P] §3.1).

The exact form is that of the authors' ``examples/synthesize.py`` ([C]); spec
``deepnoise.md`` §4.1 and pitfall 12. Every law has the median

    f(x) = x + 1  (x <= -0.5),   -x  (-0.5 < x <= 0),   x  (x > 0)       (a continuous zigzag)

and y = f(x) + eps(x, U) with U ~ Uniform(0, 1) and eps(x, 1/2) = 0:

* ``heteroscedastic``: eps = s(x) (2U - 1), uniform on (-s(x), s(x)); s(x) = 0.5 on the three
  bands (-0.85, -0.65], (-0.35, -0.15], (0.30, 0.70] and 0.1 elsewhere.
* ``skewed``: e = 2U - 1, times 8 where e > 0; eps = 0.1 sgn(x) e with sgn = +1 on (-0.5, 0]
  and -1 elsewhere (so on (-0.5, 0] the law is U(-0.1, 0) w.p. 1/2 and U(0, 0.8) w.p. 1/2).
* ``multimodal``: for |x| < 0.5, e = U - 1/2 is mapped to e + 1.7 (e >= 0.2), e - 1.7
  (e <= -0.2) or 8.5 e (|e| < 0.2), eps = 0.25 e: mass 0.3 on [0.475, 0.55), 0.4 on
  (-0.425, 0.425), 0.3 on (-0.55, -0.475]. For |x| >= 0.5, eps ~ U(-0.125, 0.125).

Band boundaries ([C] uses strict inequalities on both sides, which leaves the scale undefined
at an exact boundary; no grid point hits one): here every band is half-open, (a, b], so every
real x gets a law (pitfall 12, "use <= consistently").

Protocol ([P] §3.1, [C]): x is the deterministic grid ``X_GRID = linspace(-1, 1, 1000)``; the
law at each x is represented by 500 quantiles at U_i = i/501, i = 1..500, so the pool is the
1000 x 500 = 500k (x, y) pairs; a training set is n pairs drawn *without replacement* from
the pool; the test set is the next repeat's training draws thinned x10 ([C]); the densities
are evaluated at the 100 grid points ``EVAL_INDEX = round(linspace(0, 1, 100) * 999)``.
[C] stores the pool rounded to 3 decimals; ``decimals=3`` reproduces that (default: exact).
"""

from __future__ import annotations

from numbers import Integral

import numpy as np

__all__ = [
    "EVAL_INDEX",
    "KINDS",
    "N_QUANTILES",
    "U_LEVELS",
    "X_GRID",
    "eval_points",
    "median_function",
    "noise",
    "pool",
    "test_set",
    "training_set",
    "true_quantiles",
]

#: The three noise laws, in the order of [P] Table 1.
KINDS = ("heteroscedastic", "skewed", "multimodal")
#: The x design: 1000 equally spaced points on [-1, 1] ("uniform" in [C]; a grid, not draws).
X_GRID = np.linspace(-1.0, 1.0, 1000)
#: Quantiles per grid point ([C]).
N_QUANTILES = 500
#: Their levels U_i = i / 501, i = 1..500 ([C]).
U_LEVELS = np.arange(1, N_QUANTILES + 1) / (N_QUANTILES + 1)
#: The 100 grid points where predictive densities are scored ([C]).
EVAL_INDEX = np.round(np.linspace(0.0, 1.0, 100) * (len(X_GRID) - 1)).astype(np.int64)
#: Test rows are every TEST_THIN-th row of the next repeat's training draws ([C]).
TEST_THIN = 10

# heteroscedastic scale: upper band ends and the scale on (previous end, end]
_HET_ENDS = np.array([-0.85, -0.65, -0.35, -0.15, 0.30, 0.70])
_HET_SCALES = np.array([0.1, 0.5, 0.1, 0.5, 0.1, 0.5, 0.1])


def _kind(kind) -> str:
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {list(KINDS)}, got {kind!r}")
    return kind


def _x(x, name="x") -> np.ndarray:
    arr = np.asarray(x, dtype=np.float64)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains non-finite values")
    return arr


def median_function(x) -> np.ndarray:
    """f(x): x + 1 on x <= -0.5, -x on (-0.5, 0], x on x > 0 (spec §4.1); any shape."""
    x = _x(x)
    return np.where(x <= -0.5, x + 1.0, np.where(x <= 0.0, -x, x))


def heteroscedastic_scale(x) -> np.ndarray:
    """s(x) of the heteroscedastic law: 0.5 on (-0.85, -0.65], (-0.35, -0.15], (0.30, 0.70],
    0.1 elsewhere (bands half-open, pitfall 12)."""
    x = _x(x)
    return _HET_SCALES[np.searchsorted(_HET_ENDS, x, side="left")]


def noise(kind: str, x, u) -> np.ndarray:
    """eps(x, u): the noise for U = u in (0, 1) (spec §4.1); x and u broadcast.

    Increasing in u (so the u-quantile of the noise) except for ``skewed`` where sgn(x) = -1,
    which is decreasing (the mirror image: the (1 - u)-quantile).
    """
    kind = _kind(kind)
    x, u = np.broadcast_arrays(_x(x), _x(u, "u"))
    if np.any((u <= 0) | (u >= 1)):
        raise ValueError("quantile levels u must lie strictly between 0 and 1")
    if kind == "heteroscedastic":
        return heteroscedastic_scale(x) * (2.0 * u - 1.0)
    if kind == "skewed":
        e = 2.0 * u - 1.0
        e = np.where(e > 0, 8.0 * e, e)
        sgn = np.where((x > -0.5) & (x <= 0.0), 1.0, -1.0)
        return 0.1 * sgn * e
    e = u - 0.5
    tri = np.where(e >= 0.2, e + 1.7, np.where(e <= -0.2, e - 1.7, 8.5 * e))
    return 0.25 * np.where(np.abs(x) < 0.5, tri, e)


def true_quantiles(kind: str, x=None) -> np.ndarray:
    """The 500 true quantiles per input, (len(x), 500), each row sorted ascending.

    Row j holds the values f(x_j) + eps(x_j, i/501), i = 1..500, sorted; because the level set
    {i/501} is symmetric, they are the quantiles of y | x_j at the levels U_i = i/501 also where
    eps decreases in u (the mirrored ``skewed`` law). ``x`` defaults to ``X_GRID``.
    """
    x = X_GRID if x is None else np.atleast_1d(_x(x))
    if x.ndim != 1:
        raise ValueError(f"x must be 1-D, got shape {x.shape}")
    return np.sort(median_function(x)[:, None] + noise(kind, x[:, None], U_LEVELS[None, :]), axis=1)


def _decimals(decimals):
    if decimals is not None and (isinstance(decimals, bool) or not isinstance(decimals, Integral)):
        raise ValueError(f"decimals must be None or an int, got {decimals!r}")
    return decimals


def pool(kind: str, *, decimals: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """All 1000 x 500 (x, y) pairs, x-major: x (500000,), y (500000,).

    ``decimals=3`` rounds y as [C] stores it; None (default) keeps the exact values.
    """
    decimals = _decimals(decimals)
    y = true_quantiles(kind).ravel()
    if decimals is not None:
        y = np.round(y, decimals)
    return np.repeat(X_GRID, N_QUANTILES), y


def _seed(kind: str, n: int, repeat: int) -> np.random.SeedSequence:
    return np.random.SeedSequence([KINDS.index(kind), n, repeat])


def _check_nr(n, repeat) -> tuple[int, int]:
    if isinstance(n, bool) or not isinstance(n, Integral) or not 1 <= n <= len(X_GRID) * N_QUANTILES:
        raise ValueError(f"n must be an int in [1, {len(X_GRID) * N_QUANTILES}], got {n!r}")
    if isinstance(repeat, bool) or not isinstance(repeat, Integral) or repeat < 0:
        raise ValueError(f"repeat must be a non-negative int, got {repeat!r}")
    return int(n), int(repeat)


def training_set(kind: str, n: int, repeat: int, *, decimals: int | None = None
                 ) -> tuple[np.ndarray, np.ndarray]:
    """n pairs drawn without replacement from ``pool(kind)`` ([C]); X (n, 1), y (n,).

    The draw depends only on (kind, n, repeat): ``numpy.random.default_rng(SeedSequence(
    [KINDS.index(kind), n, repeat]))``.
    """
    kind = _kind(kind)
    n, repeat = _check_nr(n, repeat)
    x, y = pool(kind, decimals=decimals)
    idx = np.random.default_rng(_seed(kind, n, repeat)).choice(x.shape[0], size=n, replace=False)
    return x[idx, None], y[idx]


def test_set(kind: str, n: int, repeat: int, *, decimals: int | None = None
             ) -> tuple[np.ndarray, np.ndarray]:
    """The test set of repeat ``repeat`` ([C]): ``training_set(kind, n, repeat + 1)`` thinned
    to every 10th row; X (ceil(n/10), 1), y. Only for the RMSE/NLL side metrics."""
    X, y = training_set(kind, n, int(repeat) + 1 if isinstance(repeat, Integral) else repeat,
                        decimals=decimals)
    return X[::TEST_THIN], y[::TEST_THIN]


test_set.__test__ = False  # not a pytest test despite the name


def eval_points(kind: str) -> tuple[np.ndarray, np.ndarray]:
    """The 100 evaluation inputs ``X_GRID[EVAL_INDEX]`` (100,) and their 500 true quantiles (100, 500)."""
    x = X_GRID[EVAL_INDEX]
    return x, true_quantiles(kind, x)
