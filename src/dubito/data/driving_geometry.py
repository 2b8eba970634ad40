"""Pure geometry of the driving data set (`dubito.data.driving`): the dimensions of CarRacing's car
and road, and pure-pursuit steering on a path (nearest vertex, look-ahead point, road-wheel angle),
the path shifted sideways and its curvature. No gymnasium needed."""

from __future__ import annotations

import math

import numpy as np

__all__ = [
    "MAX_WHEEL_ANGLE",
    "WHEELBASE",
    "lookahead_point",
    "nearest_index",
    "offset_path",
    "path_curvature",
    "pure_pursuit_angle",
]

SIZE = 0.02  # car_dynamics.SIZE
WHEELBASE = (80 + 82) * SIZE  # front wheels at y=+80, rear at y=-82 (car_dynamics.WHEELPOS): 3.24 units
REAR_AXLE_Y = -82 * SIZE  # rear axle in the hull's frame (forward = +y)
MAX_WHEEL_ANGLE = 0.4  # rad, wheel joint limits (car_dynamics: lowerAngle=-0.4, upperAngle=+0.4)
TRACK_HALF_WIDTH = 40 / 6.0  # car_racing.TRACK_WIDTH (40 / SCALE): the half-width of the road


def _as_path(path) -> np.ndarray:
    P = np.asarray(path, dtype=np.float64)
    if P.ndim != 2 or P.shape[1] != 2 or P.shape[0] < 2:
        raise ValueError(f"path must be an (n >= 2, 2) array of points, got shape {P.shape}")
    return P


def nearest_index(path, position, hint: int | None = None, back: int = 5, ahead: int = 40, closed: bool = True) -> int:
    """Index of the path vertex nearest to ``position``; with ``hint``, only vertices
    ``hint - back .. hint + ahead`` are searched (so a track passing close to itself cannot
    make the car jump to another part of it)."""
    P = _as_path(path)
    p = np.asarray(position, dtype=np.float64)
    n = P.shape[0]
    if hint is None:
        return int(np.argmin(np.sum((P - p) ** 2, axis=1)))
    idx = np.arange(int(hint) - back, int(hint) + ahead + 1)
    idx = idx % n if closed else idx[(idx >= 0) & (idx < n)]
    return int(idx[np.argmin(np.sum((P[idx] - p) ** 2, axis=1))])


def lookahead_point(path, position, lookahead: float, start: int, closed: bool = True) -> np.ndarray:
    """Where the circle of radius ``lookahead`` around ``position`` leaves the path, walking
    forward from vertex ``start`` (segments interpolated linearly). If the whole path ahead
    lies outside the circle (far off the track) the vertex one look-ahead of arc length ahead
    of ``start`` is returned; on an open path that ends inside the circle, its last vertex."""
    P = _as_path(path)
    p = np.asarray(position, dtype=np.float64)
    ld = float(lookahead)
    if not ld > 0:
        raise ValueError(f"lookahead must be positive, got {lookahead!r}")
    n = P.shape[0]
    n_seg = n if closed else n - 1 - int(start)
    for k in range(max(n_seg, 0)):
        a = P[(start + k) % n]
        b = P[(start + k + 1) % n]
        d = b - a
        if np.sum((b - p) ** 2) < ld * ld:
            continue
        qa = float(d @ d)
        if qa == 0.0:
            continue
        f = a - p
        qb = 2.0 * float(d @ f)
        qc = float(f @ f) - ld * ld
        disc = qb * qb - 4.0 * qa * qc
        if disc < 0:
            continue
        u = (-qb + math.sqrt(disc)) / (2.0 * qa)
        if 0.0 <= u <= 1.0 + 1e-12:
            return a + min(u, 1.0) * d
    if not closed:
        if np.sum((P[-1] - p) ** 2) < ld * ld:
            return P[-1].copy()
    # off the path: go one look-ahead of arc length along it
    s, j = 0.0, int(start)
    for _ in range(n if closed else n - 1 - int(start)):
        nxt = (j + 1) % n
        s += float(np.linalg.norm(P[nxt] - P[j]))
        j = nxt
        if s >= ld:
            break
    return P[j].copy()


def pure_pursuit_angle(position, heading: float, path, lookahead: float, wheelbase: float = WHEELBASE, *,
                       start: int | None = None, closed: bool = True) -> tuple[float, int, np.ndarray]:
    """Pure-pursuit road-wheel angle ``delta = arctan(2 L sin(alpha) / l_d)`` (radians, + = left).

    ``position`` is the rear axle, ``heading`` the direction of travel (radians, counter-clockwise
    from +x), ``alpha`` the angle from the heading to the look-ahead point. Returns
    ``(delta, nearest vertex index, look-ahead point)``; ``start`` is a hint for the nearest
    vertex (see `nearest_index`).
    """
    P = _as_path(path)
    p = np.asarray(position, dtype=np.float64)
    i = nearest_index(P, p, start, closed=closed)
    g = lookahead_point(P, p, lookahead, i, closed=closed)
    alpha = math.atan2(g[1] - p[1], g[0] - p[0]) - float(heading)
    alpha = (alpha + math.pi) % (2 * math.pi) - math.pi
    delta = math.atan2(2.0 * float(wheelbase) * math.sin(alpha), float(lookahead))
    return delta, i, g


def offset_path(path, offset: float, closed: bool = True) -> np.ndarray:
    """The path shifted by ``offset`` along its left normal (tangents by central differences)."""
    P = _as_path(path)
    if closed:
        t = np.roll(P, -1, axis=0) - np.roll(P, 1, axis=0)
    else:
        t = np.gradient(P, axis=0)
    t /= np.maximum(np.linalg.norm(t, axis=1, keepdims=True), 1e-12)
    normal = np.stack([-t[:, 1], t[:, 0]], axis=1)
    return P + float(offset) * normal


def path_curvature(path, closed: bool = True) -> np.ndarray:
    """Unsigned curvature at each vertex: turning angle between its two segments / mean length."""
    P = _as_path(path)
    prev = P - np.roll(P, 1, axis=0)
    nxt = np.roll(P, -1, axis=0) - P
    turn = np.arctan2(prev[:, 0] * nxt[:, 1] - prev[:, 1] * nxt[:, 0], np.sum(prev * nxt, axis=1))
    length = 0.5 * (np.linalg.norm(prev, axis=1) + np.linalg.norm(nxt, axis=1))
    kappa = np.abs(turn) / np.maximum(length, 1e-12)
    if not closed:
        kappa[0] = kappa[-1] = 0.0
    return kappa
