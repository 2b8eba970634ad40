"""CarRacing-v3 for the driving data set (`dubito.data.driving`, whose docstring describes the
controller, the drivers, the command and the frames): the simulated drivers, the headless
environment (gymnasium with Box2D and pygame, the ``driving`` extra), the frames cut and resized
from its observations, and one episode driven by one driver."""

from __future__ import annotations

import math
import os
from collections import deque
from dataclasses import dataclass
from numbers import Integral
from typing import Any

import numpy as np

from .driving_geometry import (
    MAX_WHEEL_ANGLE,
    REAR_AXLE_Y,
    TRACK_HALF_WIDTH,
    WHEELBASE,
    offset_path,
    path_curvature,
    pure_pursuit_angle,
)

__all__ = ["DRIVER_PRIORS", "Driver", "area_resize_matrix", "draw_drivers"]

ENV_ID = "CarRacing-v3"
FPS = 50  # CarRacing's physics rate (car_racing.FPS)
OBS_SIZE = 96  # car_racing.STATE_W = STATE_H
INDICATOR_ROWS = 12  # the bottom 5/40 of the observation: the indicator bars (they show the steering)
SKIP_STEPS = 50  # 1 s zoom-in at the start of each episode (car_racing: zoom reaches ZOOM at t = 1)
INSTALL_HINT = 'pip install "dubito[driving]"  (gymnasium[box2d]: gymnasium, Box2D, pygame)'

# Per-driver parameter distributions. Units: CarRacing world units (the road is 13.3 wide),
# seconds, radians unless the name says degrees. Chosen (not fitted) so that the recorded
# angle is peaked at 0 with a long left tail from bends, like highway steering: see the
# module's test for the distribution checks and `summary` for the statistics.
DRIVER_PRIORS: dict[str, Any] = {
    "lookahead_min": ("uniform", 6.0, 10.0),  # units
    "lookahead_time": ("uniform", 0.25, 0.45),  # s; l_d = l_min + t * v
    "gain": ("lognormal", 0.0, 0.12),  # multiplies the pure-pursuit angle
    "bias_deg": ("normal", 0.0, 0.3),  # constant steering bias, degrees
    "lag_steps": ("integers", 0, 5),  # reaction lag in 20 ms steps, 0..4
    "offset": ("normal", 0.0, 0.8),  # preferred lateral offset from the centre line, + = left
    "speed": ("uniform", 22.0, 34.0),  # cruise speed, units/s
    "lateral_accel": ("uniform", 20.0, 35.0),  # units/s^2 tolerated in bends (v <= sqrt(a / kappa))
    "noise_deg": ("lognormal", math.log(0.5), 0.4),  # stationary scale of the noise, degrees
    "noise_df": ("uniform", 2.5, 5.0),  # Student-t degrees of freedom of the noise innovations
    "noise_rho": ("uniform", 0.8, 0.95),  # AR(1) coefficient per step
}


def _check_int(what: str, v, lo: int) -> int:
    if isinstance(v, bool) or not isinstance(v, Integral) or v < lo:
        raise ValueError(f"{what} must be an int >= {lo}, got {v!r}")
    return int(v)


def area_resize_matrix(n_in: int, n_out: int) -> np.ndarray:
    """``(n_out, n_in)`` matrix averaging input cells over each output cell's span (box filter);
    rows sum to 1. ``R_h @ image @ R_w.T`` resizes an image by area averaging."""
    n_in, n_out = int(n_in), int(n_out)
    if n_in < 1 or n_out < 1:
        raise ValueError(f"sizes must be positive, got {n_in} -> {n_out}")
    edges = np.linspace(0.0, n_in, n_out + 1)
    lo, hi = edges[:-1, None], edges[1:, None]
    cells = np.arange(n_in)[None, :]
    overlap = np.clip(np.minimum(hi, cells + 1) - np.maximum(lo, cells), 0.0, None)
    return overlap / overlap.sum(axis=1, keepdims=True)


class _FrameMaker:
    """Observation (96, 96, 3) uint8 -> (C, H, W) uint8: indicator rows cut, area-resized, grey or RGB."""

    def __init__(self, frame_size: tuple[int, int], color: bool):
        self.h, self.w = frame_size
        self.color = color
        self.rh = area_resize_matrix(OBS_SIZE - INDICATOR_ROWS, self.h)
        self.rw = area_resize_matrix(OBS_SIZE, self.w)

    @property
    def shape(self) -> tuple[int, int, int]:
        return (3 if self.color else 1, self.h, self.w)

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        img = np.asarray(obs, dtype=np.float64)[: OBS_SIZE - INDICATOR_ROWS]  # (84, 96, 3)
        if not self.color:
            img = img @ np.array([0.299, 0.587, 0.114])[:, None]  # (84, 96, 1)
        out = self.rh @ np.moveaxis(img, 2, 0) @ self.rw.T  # (C, 84, 96) -> (C, H, W)
        return np.clip(np.rint(out), 0, 255).astype(np.uint8)


@dataclass(frozen=True)
class Driver:
    """One simulated driver's controller settings (see `DRIVER_PRIORS` for units and ranges)."""

    lookahead_min: float
    lookahead_time: float
    gain: float
    bias_deg: float
    lag_steps: int
    offset: float
    speed: float
    lateral_accel: float
    noise_deg: float
    noise_df: float
    noise_rho: float


def _draw(rng: np.random.Generator, spec) -> float | int:
    kind, a, b = spec
    if kind == "uniform":
        return float(rng.uniform(a, b))
    if kind == "normal":
        return float(rng.normal(a, b))
    if kind == "lognormal":
        return float(rng.lognormal(a, b))
    if kind == "integers":
        return int(rng.integers(a, b))
    raise ValueError(f"unknown prior kind {kind!r}")


def draw_drivers(n: int, seed: int = 0) -> list[Driver]:
    """``n`` drivers drawn from `DRIVER_PRIORS` with ``default_rng(SeedSequence([seed, 1]))``;
    driver ``d`` is the same whatever ``n`` is (one draw per driver, in order)."""
    _check_int("drivers", n, 1)
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 1]))
    return [Driver(**{k: _draw(rng, spec) for k, spec in DRIVER_PRIORS.items()}) for _ in range(int(n))]


def _import_gym():
    """gymnasium with Box2D and pygame, headless; a clear ImportError if absent."""
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
    os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
    try:
        import Box2D  # noqa: F401
        import gymnasium
        import pygame  # noqa: F401
    except ImportError as exc:
        raise ImportError(
            f"the 'driving' data set records CarRacing-v3 frames and needs gymnasium with Box2D and pygame "
            f"({exc}); install them with: {INSTALL_HINT}"
        ) from exc
    return gymnasium


def _versions() -> dict[str, str]:
    gym = _import_gym()
    import Box2D  # optional: the 'driving' extra (gymnasium[box2d]), checked by _import_gym above
    import pygame  # optional: the 'driving' extra

    return {"gymnasium": gym.__version__, "Box2D": str(Box2D.__version__), "pygame": str(pygame.version.ver)}


def _episode_seed(seed: int, episode: int) -> int:
    return int(np.random.SeedSequence([int(seed), 2, int(episode)]).generate_state(1)[0])


class _NoRender:
    """Skip CarRacing's per-step rendering while active (the physics does not depend on it)."""

    def __init__(self, env_unwrapped):
        self.u = env_unwrapped
        self.active = False

    def set(self, skip: bool) -> None:
        if skip and not self.active:
            self.u._render = lambda mode: None  # instance attribute shadows the method
            self.active = True
        elif not skip and self.active:
            del self.u._render
            self.active = False


def _run_episode(env, episode: int, driver: Driver, *, seed: int, frames: int, stride: int, skip: int,
                 frame_maker: _FrameMaker | None, on_frame=None) -> dict[str, np.ndarray]:
    """Drive one episode; record ``frames`` (frame, command) pairs, fewer if it ends early."""
    u = env.unwrapped
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 3, int(episode)]))
    render = _NoRender(u)
    n_steps = skip + frames * stride

    def recorded(k: int) -> bool:
        return k >= skip and (k - skip) % stride == 0

    out_frames, angle, pursuit, speed, step, offtrack = [], [], [], [], [], []
    try:
        render.set(frame_maker is None or not recorded(0))
        obs, _ = env.reset(seed=_episode_seed(seed, episode))
        centre = np.array([(x, y) for (_, _, x, y) in u.track], dtype=np.float64)
        path = offset_path(centre, driver.offset)
        kappa = path_curvature(path)
        n_path = path.shape[0]
        lag = deque(maxlen=driver.lag_steps + 1)
        noise = 0.0
        noise_scale = math.radians(driver.noise_deg) * math.sqrt(1.0 - driver.noise_rho**2)
        bias = math.radians(driver.bias_deg)
        hint = None
        car = u.car
        for k in range(n_steps):
            hull = car.hull
            rear = np.array(hull.GetWorldPoint((0.0, REAR_AXLE_Y)), dtype=np.float64)
            fwd = hull.GetWorldVector((0.0, 1.0))
            heading = math.atan2(fwd[1], fwd[0])
            vel = hull.linearVelocity
            v = math.hypot(vel[0], vel[1])
            ld = driver.lookahead_min + driver.lookahead_time * v
            delta, hint, _ = pure_pursuit_angle(rear, heading, path, ld, WHEELBASE, start=hint)
            lag.append(delta)
            noise = driver.noise_rho * noise + noise_scale * float(rng.standard_t(driver.noise_df))
            cmd = min(max(driver.gain * lag[0] + bias + noise, -MAX_WHEEL_ANGLE), MAX_WHEEL_ANGLE)
            if recorded(k):
                if frame_maker is not None:
                    out_frames.append(frame_maker(obs))
                angle.append(math.degrees(cmd))
                pursuit.append(math.degrees(delta))
                speed.append(v)
                step.append(k)
                pos = np.array(hull.position, dtype=np.float64)
                offtrack.append(float(np.min(np.sum((centre - pos) ** 2, axis=1))) > TRACK_HALF_WIDTH**2)
                if on_frame is not None:
                    on_frame()
            # speed: cruise, slower where the path ahead bends (v <= sqrt(a_lat / kappa))
            ahead = kappa[(hint + np.arange(0, 10)) % n_path].max()
            v_target = min(driver.speed, math.sqrt(driver.lateral_accel / max(ahead, 1e-6)))
            gas = min(max(0.05 * (v_target - v), 0.0), 0.5)
            brake = min(max(0.08 * (v - v_target - 2.0), 0.0), 0.8)
            if brake > 0:
                gas = 0.0
            render.set(frame_maker is None or not recorded(k + 1))
            obs, _, terminated, truncated, _ = env.step(np.array([-cmd, gas, brake], dtype=np.float64))
            if terminated or truncated:
                break
    finally:
        render.set(False)
    n = len(angle)
    shape = frame_maker.shape if frame_maker is not None else (0, 0, 0)
    return {
        "frames": np.stack(out_frames) if out_frames else np.zeros((0, *shape), dtype=np.uint8),
        "angle": np.asarray(angle, dtype=np.float64),
        "angle_pursuit": np.asarray(pursuit, dtype=np.float64),
        "speed": np.asarray(speed, dtype=np.float64),
        "step": np.asarray(step, dtype=np.int64),
        "offtrack": np.asarray(offtrack, dtype=bool).reshape(n),
    }


def _make_env(max_steps: int):
    gym = _import_gym()
    return gym.make(ENV_ID, render_mode="rgb_array", max_episode_steps=int(max_steps) + 10, disable_env_checker=True)
