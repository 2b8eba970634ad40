"""Domain-gap transforms and views: shapes, ranges, seeds, identities, and scipy.ndimage oracles."""

import numpy as np
import pytest
from scipy import ndimage

from dubito.data import image_shift as S
from dubito.data.image_shift import Camera, domain_gap, make_views, view_angles

RNG = np.random.default_rng(0)
X28 = RNG.random((7, 784)).astype(np.float32)  # 7 random 28x28 "images"
X_RGB = RNG.random((4, 3, 10, 12))  # multi-channel, non-square


def _affine_oracle(img: np.ndarray, angle: float, scale: float, shift) -> np.ndarray:
    """scipy.ndimage.affine_transform of one 2-D image with the module's convention:
    input = R(-angle) (out - c - t) / scale + c, zeros outside blended at the edge (grid-constant)."""
    th = np.deg2rad(angle)
    M = np.array([[np.cos(th), np.sin(th)], [-np.sin(th), np.cos(th)]]) / scale
    c = (np.array(img.shape, dtype=float) - 1) / 2
    offset = c - M @ (c + np.asarray(shift, dtype=float))
    return ndimage.affine_transform(img, M, offset=offset, order=1, mode="grid-constant", cval=0.0)


def test_rotation_by_quarter_turns_equals_rot90_exactly():
    imgs = X28.reshape(7, 28, 28)
    for k in (1, 2, 3, -1):
        got = S.rotate(X28, 90 * k).reshape(7, 28, 28)
        assert np.array_equal(got, np.rot90(imgs, k, axes=(1, 2)))
    odd = RNG.random((3, 9, 9))  # odd side: the centre is a pixel
    assert np.array_equal(S.rotate(odd, 90), np.rot90(odd, 1, axes=(1, 2)))


@pytest.mark.parametrize("angle,scale,shift", [(30.0, 1.0, (0, 0)), (-77.0, 1.0, (0, 0)), (0.0, 1.35, (0, 0)),
                                               (0.0, 0.7, (0, 0)), (0.0, 1.0, (1.5, -2.25)),
                                               (20.0, 1.2, (0.5, 1.0))])
def test_affine_matches_scipy_ndimage(angle, scale, shift):
    got = S.affine(X_RGB, angle=angle, scale=scale, shift=shift)
    ref = np.stack([[_affine_oracle(ch, angle, scale, shift) for ch in im] for im in X_RGB])
    assert np.abs(got - np.clip(ref, 0, 1)).max() < 1e-12  # float64 in, float64 arithmetic both ways
    if shift == (0, 0) and scale == 1.0:  # and scipy's own rotate
        ref2 = ndimage.rotate(X_RGB, angle, axes=(2, 3), reshape=False, order=1, mode="grid-constant")
        assert np.abs(got - np.clip(ref2, 0, 1)).max() < 1e-10


def test_per_image_parameters_equal_one_by_one():
    angles = np.array([0.0, 10.0, -35.0, 90.0, 200.0, 5.0, 1.0])
    scales = np.linspace(0.8, 1.2, 7)
    shifts = RNG.uniform(-2, 2, (7, 2))
    both = S.affine(X28, angle=angles, scale=scales, shift=shifts)
    for i in range(7):
        one = S.affine(X28[i:i + 1], angle=angles[i], scale=scales[i], shift=shifts[i])
        assert np.allclose(both[i], one[0], atol=1e-6)


def test_identity_at_neutral_parameters_and_strength_zero():
    for out in (S.rotate(X28, 0.0), S.rescale(X28, 1.0), S.translate(X28, (0, 0)), S.blur(X28, 0.0),
                S.adjust_gamma(X28, 1.0), S.adjust_contrast(X28, 1.0), S.adjust_brightness(X28, 0.0),
                S.add_noise(X28, 0.0), S.dilate(X28, 2, prob=0.0), Camera().apply(X28, seed=3),
                domain_gap(0.0).apply(X28, seed=3), domain_gap(0.7).at_strength(0.0).apply(X28, seed=1)):
        assert out.shape == X28.shape and out.dtype == X28.dtype and np.array_equal(out, X28)
        assert out is not X28


@pytest.mark.parametrize("layout", ["flat", "hw", "chw"])
def test_transforms_preserve_shape_dtype_range(layout):
    x = {"flat": X28, "hw": X28.reshape(7, 28, 28), "chw": X28.reshape(7, 1, 28, 28)}[layout]
    outs = [S.rotate(x, 33.0), S.rescale(x, 1.4), S.translate(x, (3, -1)), S.blur(x, 1.5), S.dilate(x, 3),
            S.adjust_gamma(x, 2.0), S.adjust_contrast(x, 1.8), S.adjust_brightness(x, 0.3),
            S.add_noise(x, 0.5, seed=1), domain_gap(1.0).apply(x, seed=0)]
    for out in outs:
        assert out.shape == x.shape and out.dtype == np.float32
        assert out.min() >= 0.0 and out.max() <= 1.0


def test_photometric_formulas():
    x = X_RGB
    assert np.allclose(S.adjust_gamma(x, 1.7), x ** 1.7)
    m = x.mean(axis=(1, 2, 3), keepdims=True)
    assert np.allclose(S.adjust_contrast(x, 0.6), m + 0.6 * (x - m))
    assert np.allclose(S.adjust_brightness(x, 0.1), np.clip(x + 0.1, 0, 1))
    ref = np.stack([[ndimage.gaussian_filter(ch, 0.8, mode="constant") for ch in im] for im in x])
    assert np.allclose(S.blur(x, 0.8), np.clip(ref, 0, 1))
    ref = np.stack([[ndimage.grey_dilation(ch, size=(2, 2), mode="constant") for ch in im] for im in x])
    assert np.allclose(S.dilate(x, 2), ref)
    # noise: mean 0 and sd as asked on mid-grey (no clipping): |mean| < 4 SE, sd within 2%
    grey = np.full((50, 784), 0.5)
    noise = S.add_noise(grey, 0.05, seed=0) - 0.5
    assert abs(noise.mean()) < 4 * 0.05 / np.sqrt(noise.size) and abs(noise.std() / 0.05 - 1) < 0.02


def test_seeded_and_deterministic():
    cam = domain_gap(0.5)
    a, b = cam.apply(X28, seed=11), cam.apply(X28, seed=11)
    c = cam.apply(X28, seed=12)
    assert np.array_equal(a, b) and not np.allclose(a, c)
    assert np.array_equal(S.add_noise(X28, 0.1, seed=5), S.add_noise(X28, 0.1, seed=5))
    assert np.array_equal(S.dilate(X28, 2, prob=0.5, seed=5), S.dilate(X28, 2, prob=0.5, seed=5))
    v1, v2 = make_views(X28, 3, seed=4, camera=cam), make_views(X28, 3, seed=4, camera=cam)
    assert np.array_equal(v1, v2)


def test_domain_gap_values_and_strength_scaling():
    half = domain_gap(0.5, image_size=8)  # the spec's values at strength 0.5 (§5.1), 8x8 pixels
    assert (half.rotation_jitter, half.shift_jitter, half.dilation_prob, half.blur_sigma) == (20.0, 0.75, 0.5, 0.3)
    assert (half.gamma, half.contrast, half.brightness, half.noise_sd) == pytest.approx((1.4, 0.8, 0.075, 0.04))
    full = domain_gap(1.0, image_size=28)
    assert full.rotation_jitter == pytest.approx(40.0) and full.blur_sigma == pytest.approx(0.6 * 28 / 8)
    assert full.gamma == pytest.approx(1.8) and full.contrast == pytest.approx(0.6) and full.dilation_prob == 1.0
    # a stronger gap moves object-on-black images further (mean absolute change, same seed)
    r, c = np.mgrid[:28, :28]
    disc = np.where((r - 12) ** 2 + (c - 15) ** 2 < 60, 0.8, 0.0)
    objs = np.stack([disc, disc.T, np.roll(disc, 3, axis=0)]).reshape(3, 784)
    d = [np.abs(domain_gap(s).apply(objs, seed=0) - objs).mean() for s in (0.0, 0.25, 0.5, 1.0)]
    assert d[0] == 0 and d[0] < d[1] < d[2] < d[3]


def test_views_are_rotations_of_the_same_objects_and_differ():
    assert view_angles(3).tolist() == [-15.0, 0.0, 15.0] and view_angles(1).tolist() == [0.0]
    views = make_views(X28, 3, seed=0)  # identity camera: pure rotations
    assert views.shape == (3,) + X28.shape and views.dtype == np.float32
    for v, a in enumerate(view_angles(3)):
        assert np.allclose(views[v], S.rotate(X28, a), atol=1e-6)
    for i in range(3):
        for j in range(i + 1, 3):
            assert np.abs(views[i] - views[j]).mean() > 0.01
    cam_views = make_views(X28.reshape(7, 28, 28), 4, seed=1, camera=domain_gap(0.5), spread=20.0)
    assert cam_views.shape == (4, 7, 28, 28) and cam_views.min() >= 0 and cam_views.max() <= 1
    assert not np.allclose(cam_views[1], cam_views[2])


def test_bad_input_raises():
    with pytest.raises(ValueError, match="in \\[0, 1\\]"):
        S.rotate(X28 * 255, 10)
    with pytest.raises(ValueError, match="NaN"):
        S.blur(np.full((2, 784), np.nan), 1.0)
    with pytest.raises(ValueError, match="not a square number"):
        S.rotate(np.zeros((2, 10)), 10)
    with pytest.raises(ValueError, match="image_shape"):
        S.rotate(np.zeros((2, 10)), 10, image_shape=(1, 3, 3))
    with pytest.raises(ValueError, match="0 rows"):
        S.rotate(np.zeros((0, 784)), 10)
    with pytest.raises(ValueError, match="shape"):
        S.rotate(np.zeros(784), 10)
    with pytest.raises(ValueError, match="one value per image"):
        S.rotate(X28, np.zeros(3))
    with pytest.raises(ValueError, match="scale must be > 0"):
        S.rescale(X28, 0.0)
    with pytest.raises(ValueError, match="order"):
        S.rotate(X28, 10, order=3)
    with pytest.raises(ValueError, match="sigma"):
        S.blur(X28, -1.0)
    with pytest.raises(ValueError, match="gamma"):
        S.adjust_gamma(X28, 0.0)
    with pytest.raises(ValueError, match="seed"):
        S.add_noise(X28, 0.1, seed=-1)
    with pytest.raises(ValueError, match="Camera.noise_sd"):
        Camera(noise_sd=-0.1)
    with pytest.raises(ValueError, match="dilation_prob"):
        Camera(dilation_prob=2.0)
    with pytest.raises(ValueError, match="strength"):
        domain_gap(-1.0)
    with pytest.raises(ValueError, match="n_views"):
        make_views(X28, 0)
    with pytest.raises(ValueError, match="camera"):
        make_views(X28, 2, camera="phone")
