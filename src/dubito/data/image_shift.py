"""Seeded image transforms for a domain gap ("a different camera") and several views of one object.

Images are rows of ``X`` (shape ``(n, C*H*W)``, flattened channel-first as in every dubito image
set, values in [0, 1]) with ``image_shape=(C, H, W)``; a 2-D ``X`` whose width is a square number
is read as ``(1, H, H)`` when ``image_shape`` is not given. ``(n, C, H, W)`` and ``(n, H, W)``
arrays are accepted too; every function returns the shape it was given, in the input's float dtype
(float32 stays float32), clipped to [0, 1]. Everything is vectorised (whole chunks of images per numpy /
``scipy.ndimage`` call), and a transform at its neutral value (angle 0, scale 1, sigma 0, ...) returns
an exact copy of its input.

Conventions
-----------
* Geometry (`affine`, `rotate`, `rescale`, `translate`): one resampling per image about the
  centre ``((H-1)/2, (W-1)/2)``, bilinear (``order=1``, as the spec's pilot, §5.1) with zeros
  outside the frame, blended at the edge (``scipy.ndimage``'s ``mode="grid-constant"``). An output pixel ``p`` (row, col) reads the input at
  ``R(-angle) (p - c - t) / scale + c``; a positive angle turns the picture counter-clockwise, so
  ``rotate(X, 90)`` equals ``np.rot90`` per image exactly (and ``scipy.ndimage.rotate(...,
  reshape=False, order=1, mode="grid-constant")`` in general).
* Photometry: ``gamma``: ``x**g``; ``contrast``: ``m + f (x - m)`` with ``m`` the image's mean
  (as torchvision's ``adjust_contrast``); ``brightness``: ``x + b``; then clip to [0, 1].
* `Camera` is a fixed combination of all of them (the spec's "new camera/lighting", §5.1) with
  per-image seeded jitter of the pose and the sensor noise; `domain_gap` gives the spec's camera at a
  given strength, `make_views` several seeded views (rotation offsets, the "elevations") of the same
  objects.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from numbers import Integral, Real

import numpy as np
from scipy import ndimage

__all__ = [
    "Camera",
    "add_noise",
    "adjust_brightness",
    "adjust_contrast",
    "adjust_gamma",
    "affine",
    "as_images",
    "blur",
    "dilate",
    "domain_gap",
    "make_views",
    "rescale",
    "rotate",
    "translate",
    "view_angles",
]

_CHUNK = 2048  # images per gather: ~6 float64 arrays of 2048 x 784 = 77 MB at 28x28
_RANGE_TOL = 1e-6


# ------------------------------------------------------------------------------------- input


def _check_seed(seed, what: str = "seed"):
    if isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, bool) or not isinstance(seed, Integral) or seed < 0:
        raise ValueError(f"{what} must be a non-negative int or a numpy Generator, got {seed!r}")
    return np.random.default_rng(int(seed))


def _check_image_shape(image_shape) -> tuple[int, int, int]:
    try:
        shape = tuple(int(s) for s in image_shape)
    except (TypeError, ValueError):
        raise ValueError(f"image_shape must be (C, H, W) of positive ints, got {image_shape!r}") from None
    if len(shape) != 3 or min(shape) < 1 or any(
        isinstance(s, bool) or not isinstance(s, Integral) for s in image_shape
    ):
        raise ValueError(f"image_shape must be (C, H, W) of positive ints, got {image_shape!r}")
    return shape


def as_images(X, image_shape=None):
    """``X`` as a float array of shape ``(n, C, H, W)`` plus a function restoring the input layout.

    Accepts ``(n, C*H*W)`` (with ``image_shape``, or square ``H*W`` with one channel),
    ``(n, H, W)`` and ``(n, C, H, W)``; values must be finite and in [0, 1] (tolerance 1e-6).
    """
    arr = np.asarray(X)
    if arr.dtype.kind not in "fiub":
        raise ValueError(f"images must be numeric, got dtype {arr.dtype}")
    if arr.dtype.kind != "f":
        arr = arr.astype(np.float64)
    in_shape = arr.shape
    if arr.ndim == 2:
        n, p = arr.shape
        if image_shape is None:
            side = math.isqrt(p)
            if side * side != p:
                raise ValueError(
                    f"X has {p} columns, not a square number: pass image_shape=(C, H, W) for flattened images"
                )
            image_shape = (1, side, side)
        shape = _check_image_shape(image_shape)
        if shape[0] * shape[1] * shape[2] != p:
            raise ValueError(f"image_shape {shape} has {shape[0] * shape[1] * shape[2]} values but X has {p} columns")
        imgs = arr.reshape(n, *shape)
    elif arr.ndim == 3:
        imgs = arr[:, None]
        if image_shape is not None and _check_image_shape(image_shape) != imgs.shape[1:]:
            raise ValueError(f"image_shape {tuple(image_shape)} does not match images of shape {arr.shape[1:]}")
    elif arr.ndim == 4:
        imgs = arr
        if image_shape is not None and _check_image_shape(image_shape) != imgs.shape[1:]:
            raise ValueError(f"image_shape {tuple(image_shape)} does not match images of shape {arr.shape[1:]}")
    else:
        raise ValueError(f"images must be (n, C*H*W), (n, H, W) or (n, C, H, W); got an array of shape {in_shape}")
    if imgs.shape[0] == 0:
        raise ValueError("no images: X has 0 rows")
    if not np.all(np.isfinite(imgs)):
        raise ValueError("images contain NaN or inf")
    lo, hi = float(imgs.min()), float(imgs.max())
    if lo < -_RANGE_TOL or hi > 1 + _RANGE_TOL:
        raise ValueError(f"image values must lie in [0, 1], got min {lo:.4g}, max {hi:.4g} (scale 8-bit images by 1/255)")

    def restore(out: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(out.reshape(in_shape), dtype=arr.dtype)

    return imgs, restore


def _per_image(value, n: int, what: str) -> np.ndarray:
    """A scalar or a length-n vector -> float64 vector of length n (finite)."""
    v = np.asarray(value, dtype=np.float64)
    if v.ndim == 0:
        v = np.full(n, float(v))
    elif v.shape != (n,):
        raise ValueError(f"{what} must be a number or one value per image ({n}), got shape {v.shape}")
    if not np.all(np.isfinite(v)):
        raise ValueError(f"{what} must be finite")
    return v


def _shift_per_image(shift, n: int) -> np.ndarray:
    s = np.asarray(shift, dtype=np.float64)
    if s.ndim == 0:
        s = np.full((n, 2), float(s))
    elif s.shape == (2,):
        s = np.broadcast_to(s, (n, 2))
    elif s.shape != (n, 2):
        raise ValueError(f"shift must be a number, (dy, dx) or one (dy, dx) per image ({n}, 2); got shape {s.shape}")
    if not np.all(np.isfinite(s)):
        raise ValueError("shift must be finite")
    return np.array(s, dtype=np.float64)


# ---------------------------------------------------------------------------------- geometry


def _snap(v: np.ndarray) -> np.ndarray:
    """Round cos/sin within 1e-12 of -1, 0, 1 to it, so quarter turns land exactly on the grid."""
    r = np.round(v)
    return np.where(np.abs(v - r) < 1e-12, r, v)


def _affine_images(imgs: np.ndarray, angle: np.ndarray, scale: np.ndarray, shift: np.ndarray, order: int) -> np.ndarray:
    """Resample every image at its own affine grid: bilinear (order 1) or nearest (order 0) over the
    image padded with a one-pixel zero border, i.e. zeros outside the frame, blended at the edge
    (``scipy.ndimage``'s ``mode="grid-constant"``). Gathers on flat indices, one chunk at a time."""
    n, C, H, W = imgs.shape
    out = np.empty_like(imgs)
    cy, cx = (H - 1) / 2.0, (W - 1) / 2.0
    rr, cc = np.meshgrid(np.arange(H, dtype=np.float64) - cy, np.arange(W, dtype=np.float64) - cx, indexing="ij")
    theta = np.deg2rad(angle)
    cos, sin = _snap(np.cos(theta)), _snap(np.sin(theta))
    Hp, Wp = H + 2, W + 2
    for start in range(0, n, _CHUNK):
        sl = slice(start, min(n, start + _CHUNK))
        m = sl.stop - sl.start
        padded = np.zeros((m, C, Hp, Wp), dtype=imgs.dtype)
        padded[:, :, 1:-1, 1:-1] = imgs[sl]
        flat = padded.reshape(-1)
        r0 = rr[None] - shift[sl, 0, None, None]
        c0 = cc[None] - shift[sl, 1, None, None]
        inv = 1.0 / scale[sl, None, None]
        c_, s_ = cos[sl, None, None], sin[sl, None, None]
        # R(-angle) in (row, col) coordinates (see the module doc), +1 for the zero border
        rin = np.clip((c_ * r0 + s_ * c0) * inv + (cy + 1.0), 0.0, Hp - 1.0)
        cin = np.clip((-s_ * r0 + c_ * c0) * inv + (cx + 1.0), 0.0, Wp - 1.0)
        # flat index of (image, channel) plane starts, broadcast over the H x W output grid
        plane = (np.arange(m, dtype=np.intp)[:, None] * C + np.arange(C, dtype=np.intp)[None, :]) * (Hp * Wp)
        plane = plane[:, :, None, None]
        if order == 0:
            idx = np.floor(rin + 0.5).astype(np.intp) * Wp + np.floor(cin + 0.5).astype(np.intp)
            res = np.take(flat, plane + idx[:, None])
        else:
            ri = np.minimum(np.floor(rin).astype(np.intp), Hp - 2)
            ci = np.minimum(np.floor(cin).astype(np.intp), Wp - 2)
            wr = (rin - ri).astype(imgs.dtype)[:, None]
            wc = (cin - ci).astype(imgs.dtype)[:, None]
            base = plane + (ri * Wp + ci)[:, None]
            top = np.take(flat, base)
            top += (np.take(flat, base + 1) - top) * wc
            bottom = np.take(flat, base + Wp)
            bottom += (np.take(flat, base + Wp + 1) - bottom) * wc
            res = top + (bottom - top) * wr
        out[sl] = res.reshape(m, C, H, W)
    return out


def affine(X, angle=0.0, scale=1.0, shift=0.0, *, image_shape=None, order: int = 1) -> np.ndarray:
    """Rotate by ``angle`` degrees (counter-clockwise), zoom by ``scale`` (> 1 enlarges) and move by
    ``shift = (dy, dx)`` pixels, about the image centre, in one bilinear resampling (zeros outside).

    Each of ``angle``, ``scale`` may be one number or one per image; ``shift`` a number, a pair or
    ``(n, 2)``. Identity parameters return a copy.
    """
    imgs, restore = as_images(X, image_shape)
    n = imgs.shape[0]
    if isinstance(order, bool) or order not in (0, 1):
        raise ValueError(f"order must be 0 (nearest) or 1 (bilinear), got {order!r}")
    ang = _per_image(angle, n, "angle")
    sc = _per_image(scale, n, "scale")
    if np.any(sc <= 0):
        raise ValueError(f"scale must be > 0, got min {sc.min():.4g}")
    sh = _shift_per_image(shift, n)
    if not np.any(ang) and np.all(sc == 1.0) and not np.any(sh):
        return restore(imgs.copy())
    out = _affine_images(imgs, ang, sc, sh, order)
    return restore(np.clip(out, 0.0, 1.0))


def rotate(X, angle, *, image_shape=None, order: int = 1) -> np.ndarray:
    """Rotate counter-clockwise by ``angle`` degrees about the centre (``np.rot90`` at 90)."""
    return affine(X, angle=angle, image_shape=image_shape, order=order)


def rescale(X, scale, *, image_shape=None, order: int = 1) -> np.ndarray:
    """Zoom by ``scale`` about the centre (> 1 enlarges and crops, < 1 shrinks and pads with 0)."""
    return affine(X, scale=scale, image_shape=image_shape, order=order)


def translate(X, shift, *, image_shape=None, order: int = 1) -> np.ndarray:
    """Move by ``shift = (dy, dx)`` pixels (down, right), zeros coming in."""
    return affine(X, shift=shift, image_shape=image_shape, order=order)


# ------------------------------------------------------------------------------ photometry


def _check_nonneg(v, what: str) -> float:
    if isinstance(v, bool) or not isinstance(v, Real) or not math.isfinite(v) or v < 0:
        raise ValueError(f"{what} must be a finite number >= 0, got {v!r}")
    return float(v)


def blur(X, sigma: float, *, image_shape=None) -> np.ndarray:
    """Gaussian blur with standard deviation ``sigma`` pixels over H and W (not channels, not across
    images), zeros beyond the frame (``scipy.ndimage.gaussian_filter``, truncate 4 sigma)."""
    sigma = _check_nonneg(sigma, "sigma")
    imgs, restore = as_images(X, image_shape)
    if sigma == 0:
        return restore(imgs.copy())
    out = ndimage.gaussian_filter(imgs, sigma=(0, 0, sigma, sigma), mode="constant", cval=0.0)
    return restore(np.clip(out, 0.0, 1.0))


def dilate(X, size: int = 2, *, prob: float = 1.0, seed=0, image_shape=None) -> np.ndarray:
    """Grey dilation with a ``size x size`` square (thicker strokes), applied to each image with
    probability ``prob`` (seeded); the spec's domain gap uses 2x2 with probability 0.5 (§5.1)."""
    if isinstance(size, bool) or not isinstance(size, Integral) or size < 1:
        raise ValueError(f"dilation size must be an int >= 1, got {size!r}")
    prob = _check_nonneg(prob, "dilation prob")
    if prob > 1:
        raise ValueError(f"dilation prob must lie in [0, 1], got {prob}")
    rng = _check_seed(seed)
    imgs, restore = as_images(X, image_shape)
    out = imgs.copy()
    pick = rng.random(imgs.shape[0]) < prob
    if size > 1 and pick.any():
        out[pick] = ndimage.grey_dilation(imgs[pick], size=(1, 1, int(size), int(size)), mode="constant", cval=0.0)
    return restore(out)


def adjust_gamma(X, gamma: float, *, image_shape=None) -> np.ndarray:
    """``x ** gamma`` (gamma > 1 darkens mid-tones)."""
    if isinstance(gamma, bool) or not isinstance(gamma, Real) or not math.isfinite(gamma) or gamma <= 0:
        raise ValueError(f"gamma must be a finite number > 0, got {gamma!r}")
    imgs, restore = as_images(X, image_shape)
    if gamma == 1:
        return restore(imgs.copy())
    return restore(np.clip(np.power(np.clip(imgs, 0, 1), gamma), 0.0, 1.0))


def adjust_contrast(X, factor: float, *, image_shape=None) -> np.ndarray:
    """``m + factor (x - m)``, ``m`` = the image's mean over all its pixels, clipped to [0, 1]."""
    factor = _check_nonneg(factor, "contrast factor")
    imgs, restore = as_images(X, image_shape)
    if factor == 1:
        return restore(imgs.copy())
    m = imgs.mean(axis=(1, 2, 3), keepdims=True)
    return restore(np.clip(m + factor * (imgs - m), 0.0, 1.0))


def adjust_brightness(X, offset: float, *, image_shape=None) -> np.ndarray:
    """``x + offset``, clipped to [0, 1]."""
    if isinstance(offset, bool) or not isinstance(offset, Real) or not math.isfinite(offset):
        raise ValueError(f"brightness offset must be a finite number, got {offset!r}")
    imgs, restore = as_images(X, image_shape)
    if offset == 0:
        return restore(imgs.copy())
    return restore(np.clip(imgs + offset, 0.0, 1.0))


def add_noise(X, sd: float, *, seed=0, image_shape=None) -> np.ndarray:
    """``x + N(0, sd^2)`` per pixel (seeded), clipped to [0, 1]."""
    sd = _check_nonneg(sd, "noise sd")
    rng = _check_seed(seed)
    imgs, restore = as_images(X, image_shape)
    if sd == 0:
        return restore(imgs.copy())
    noise = rng.standard_normal(imgs.shape).astype(imgs.dtype, copy=False)
    return restore(np.clip(imgs + sd * noise, 0.0, 1.0))


# ---------------------------------------------------------------------------------- camera


@dataclass(frozen=True)
class Camera:
    """A fixed combination of transforms: a "camera" with its pose jitter, optics and lighting.

    Applied in this order (the spec's domain gap, §5.1): one affine resampling (rotation
    ``rotation + U(-rotation_jitter, rotation_jitter)`` degrees, zoom ``scale * exp(U(-log(1 +
    scale_jitter), log(1 + scale_jitter)))``, shift ``U(-shift_jitter, shift_jitter)`` pixels per
    axis; all per image), grey dilation (``dilation_size``, per image with ``dilation_prob``),
    Gaussian blur ``blur_sigma``, gamma, contrast, brightness, noise N(0, ``noise_sd``^2), clip to
    [0, 1]. Jitter, dilation and noise are drawn from ``seed``; the rest is fixed.
    The identity camera (all defaults) returns its input unchanged.
    """

    rotation: float = 0.0
    rotation_jitter: float = 0.0
    scale: float = 1.0
    scale_jitter: float = 0.0
    shift_jitter: float = 0.0
    dilation_size: int = 2
    dilation_prob: float = 0.0
    blur_sigma: float = 0.0
    gamma: float = 1.0
    contrast: float = 1.0
    brightness: float = 0.0
    noise_sd: float = 0.0

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, bool) or not isinstance(v, Real) or not math.isfinite(v):
                raise ValueError(f"Camera.{f.name} must be a finite number, got {v!r}")
        for name in ("rotation_jitter", "scale_jitter", "shift_jitter", "blur_sigma", "contrast", "noise_sd"):
            if getattr(self, name) < 0:
                raise ValueError(f"Camera.{name} must be >= 0, got {getattr(self, name)}")
        for name in ("scale", "gamma"):
            if getattr(self, name) <= 0:
                raise ValueError(f"Camera.{name} must be > 0, got {getattr(self, name)}")
        if not 0 <= self.dilation_prob <= 1:
            raise ValueError(f"Camera.dilation_prob must lie in [0, 1], got {self.dilation_prob}")
        if not isinstance(self.dilation_size, Integral) or self.dilation_size < 1:
            raise ValueError(f"Camera.dilation_size must be an int >= 1, got {self.dilation_size!r}")

    def at_strength(self, strength: float) -> Camera:
        """This camera with every parameter moved from its neutral value linearly by ``strength``
        (0: identity, 1: this camera, 2: twice as far; e.g. gamma ``1 + strength (gamma - 1)``,
        dilation probability capped at 1). [R: the spec names strengths but no mapping.]"""
        s = _check_nonneg(strength, "strength")
        return replace(
            self,
            rotation=self.rotation * s,
            rotation_jitter=self.rotation_jitter * s,
            scale=max(1e-3, 1.0 + (self.scale - 1.0) * s),
            scale_jitter=self.scale_jitter * s,
            shift_jitter=self.shift_jitter * s,
            dilation_prob=min(1.0, self.dilation_prob * s),
            blur_sigma=self.blur_sigma * s,
            gamma=max(1e-3, 1.0 + (self.gamma - 1.0) * s),
            contrast=max(0.0, 1.0 + (self.contrast - 1.0) * s),
            brightness=self.brightness * s,
            noise_sd=self.noise_sd * s,
        )

    def apply(self, X, seed=0, *, image_shape=None, rotation_offset=0.0) -> np.ndarray:
        """Photograph the images ``X`` with this camera (seeded jitter and noise).

        ``rotation_offset`` (degrees, one number or one per image) is added to the rotation in the
        same resampling: `make_views` uses it for the view angle.
        """
        rng = _check_seed(seed)
        imgs, restore = as_images(X, image_shape)
        n = imgs.shape[0]
        # every random draw is made whatever the parameters, so one seed gives the same pose for
        # an object whatever the camera's photometry
        u_rot = rng.uniform(-1.0, 1.0, n)
        u_scale = rng.uniform(-1.0, 1.0, n)
        u_shift = rng.uniform(-1.0, 1.0, (n, 2))
        dil_seed, noise_seed = rng.integers(0, 2**63, 2)
        angle = self.rotation + self.rotation_jitter * u_rot + _per_image(rotation_offset, n, "rotation_offset")
        scale = self.scale * np.exp(math.log1p(self.scale_jitter) * u_scale)
        shift = self.shift_jitter * u_shift
        out = imgs
        if np.any(angle) or np.any(scale != 1.0) or np.any(shift):
            out = np.clip(_affine_images(imgs, angle, scale, shift, 1), 0.0, 1.0)
        if self.dilation_prob > 0 and self.dilation_size > 1:
            out = dilate(out, int(self.dilation_size), prob=self.dilation_prob, seed=int(dil_seed))
        out = blur(out, self.blur_sigma)
        out = adjust_gamma(out, self.gamma)
        out = adjust_contrast(out, self.contrast)
        out = adjust_brightness(out, self.brightness)
        out = add_noise(out, self.noise_sd, seed=int(noise_seed))
        if out is imgs:
            out = imgs.copy()
        return restore(out)


# The spec's domain gap for 8x8 digits at "strength 0.5" (§5.1): rotation +-20 deg, shift +-0.75 px,
# 2x2 grey dilation with probability 0.5, blur sigma 0.3, gamma 1.4, contrast x0.8, offset +0.075,
# noise N(0, 0.04^2). Pixel lengths (shift, blur) scale with the image side / 8. [T-pilot / spec §5.1]
_GAP_HALF_8PX = {
    "rotation_jitter": 20.0,
    "shift_jitter": 0.75,
    "dilation_size": 2,
    "dilation_prob": 0.5,
    "blur_sigma": 0.3,
    "gamma": 1.4,
    "contrast": 0.8,
    "brightness": 0.075,
    "noise_sd": 0.04,
}


def domain_gap(strength: float = 0.5, image_size: int = 28) -> Camera:
    """The spec's "new camera/lighting" (§5.1) at ``strength`` for ``image_size`` x ``image_size``
    images: the listed values are those at strength 0.5 (in the 8x8 pilot this cut accuracy from
    0.96 to about 0.5; strength 1 collapsed it), other strengths scale linearly from identity
    (`Camera.at_strength`). Shift and blur are given in 8x8 pixels and scaled by ``image_size / 8``;
    the dilation stays 2x2 [R]. Strength 0 is the identity camera."""
    strength = _check_nonneg(strength, "strength")
    if isinstance(image_size, bool) or not isinstance(image_size, Integral) or image_size < 2:
        raise ValueError(f"image_size must be an int >= 2, got {image_size!r}")
    k = image_size / 8.0
    half = Camera(**{**_GAP_HALF_8PX, "shift_jitter": 0.75 * k, "blur_sigma": 0.3 * k})
    return half.at_strength(strength / 0.5)


# ----------------------------------------------------------------------------------- views


def view_angles(n_views: int, spread: float = 15.0) -> np.ndarray:
    """Rotation offsets (degrees) of ``n_views`` views: ``linspace(-spread, spread, n_views)``
    (``[0]`` for one view). The default 3 views give {-15, 0, +15} deg, the spec's "elevations"
    (§5.1: +-15 deg = the adaptation pool, the analogue of 30/60 deg; 0 deg = the final evaluation
    set, the analogue of 45 deg)."""
    if isinstance(n_views, bool) or not isinstance(n_views, Integral) or n_views < 1:
        raise ValueError(f"n_views must be an int >= 1, got {n_views!r}")
    spread = _check_nonneg(spread, "spread")
    if n_views == 1:
        return np.zeros(1)
    return np.linspace(-spread, spread, int(n_views))


def make_views(X, n_views: int = 3, seed=0, *, spread: float = 15.0, camera: Camera | None = None,
               image_shape=None) -> np.ndarray:
    """``n_views`` views of the same objects: view ``v`` of image ``i`` is ``camera`` applied to
    image ``i`` rotated by ``view_angles(n_views, spread)[v]``, with the camera's jitter and noise
    drawn from ``SeedSequence([seed, v])`` (independent across views, reproducible per seed).

    ``camera=None`` means the identity camera (pure rotations). Returns an array of shape
    ``(n_views, *X.shape)``.
    """
    angles = view_angles(n_views, spread)
    if camera is None:
        camera = Camera()
    if not isinstance(camera, Camera):
        raise ValueError(f"camera must be a dubito.data.image_shift.Camera or None, got {type(camera).__name__}")  # noqa: TRY004
    if isinstance(seed, bool) or not isinstance(seed, Integral) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    imgs, _ = as_images(X, image_shape)
    out = np.empty((len(angles),) + np.asarray(X).shape, dtype=imgs.dtype)
    for v, a in enumerate(angles):
        rng = np.random.default_rng([int(seed), v])
        out[v] = camera.apply(imgs, rng, rotation_offset=float(a)).reshape(out.shape[1:])
    return out
