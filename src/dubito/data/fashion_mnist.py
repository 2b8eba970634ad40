"""Fashion-MNIST (Xiao, Rasul & Vollgraf 2017): 70,000 28x28 grey article images in 10 classes.

``load_fashion_mnist()`` (registry name ``"fashion-mnist"``) returns an `ImageDataset`: ``X``
float32 ``(70000, 784)`` in [0, 1] (the 8-bit pixels / 255, flattened channel-first, i.e. row-major
28x28 with one channel), ``y`` int64 in 0..9, the standard split (the 60,000 training images, then
the 10,000 test images) and ``meta["image_shape"] == (1, 28, 28)``, ``meta["class_names"]``.

Where the four IDX files (``train-images-idx3-ubyte``, ``train-labels-idx1-ubyte``,
``t10k-images-idx3-ubyte``, ``t10k-labels-idx1-ubyte``, each optionally ``.gz``) are looked for:

1. ``data_dir`` when given (then nothing else is tried), else ``$DUBITO_DATA/fashion-mnist``;
2. the Debian package ``dataset-fashion-mnist`` (``apt-get install dataset-fashion-mnist``; its files
   are in ``/usr/share/datasets/fashion-mnist``; `DEBIAN_DIR`);
3. the user cache ``<cache>/fashion-mnist`` (``<cache>`` as for the UCI data: ``$DUBITO_CACHE``,
   ``$XDG_CACHE_HOME/dubito`` or ``~/.cache/dubito``);
4. a download into that cache from ``$DUBITO_FASHION_MNIST_URL`` (default `DEFAULT_URL`, the raw
   files of the ``zalandoresearch/fashion-mnist`` repository).

Every file is checked, wherever it comes from, against the SHA-256 of its *decompressed* IDX
bytes (`SHA256`; measured on the Debian package 0.0~git20200523.55506a9-1, whose ``.gz`` files
differ from Zalando's only in the gzip header, so the published MD5s of the ``.gz`` files do not
apply to them). A download is verified before it is moved into the cache; nothing unverified is
ever kept. Licence: MIT (Zalando SE).
"""

from __future__ import annotations

import gzip
import hashlib
import http.client
import os
import urllib.error
import urllib.request
from functools import lru_cache
from numbers import Integral
from pathlib import Path
from typing import Any

import numpy as np

from dubito.io import atomic_write_bytes

from .dataset import ImageDataset
from .uci import DownloadError, cache_dir

__all__ = [
    "DEBIAN_DIR",
    "DEFAULT_URL",
    "FASHION_CLASSES",
    "FILES",
    "SHA256",
    "ImageDataset",
    "fashion_mnist_available",
    "fashion_mnist_path",
    "load_fashion_mnist",
    "read_idx",
]

DEBIAN_DIR = Path("/usr/share/datasets/fashion-mnist")
DEFAULT_URL = "https://raw.githubusercontent.com/zalandoresearch/fashion-mnist/master/data/fashion"
DOWNLOAD_TIMEOUT_S = 60.0
_N_TRAIN, _N_TEST = 60000, 10000

FASHION_CLASSES = (
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot",
)
FILES = {
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "test_images": "t10k-images-idx3-ubyte",
    "test_labels": "t10k-labels-idx1-ubyte",
}
# SHA-256 of the decompressed IDX files, and their sizes in bytes (Debian dataset-fashion-mnist
# 0.0~git20200523.55506a9-1). The .gz files of that package hash to (SHA-256)
# train-images b0564c3e..., train-labels 0ae29f65..., t10k-images cc1d090a..., t10k-labels 8d3605d1...
SHA256 = {
    "train-images-idx3-ubyte": "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888",
    "train-labels-idx1-ubyte": "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9",
    "t10k-images-idx3-ubyte": "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b",
    "t10k-labels-idx1-ubyte": "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34",
}
SIZES = {
    "train-images-idx3-ubyte": 47_040_016,
    "train-labels-idx1-ubyte": 60_008,
    "t10k-images-idx3-ubyte": 7_840_016,
    "t10k-labels-idx1-ubyte": 10_008,
}
CITATION = (
    "H. Xiao, K. Rasul and R. Vollgraf (2017), Fashion-MNIST: a novel image dataset for benchmarking "
    "machine learning algorithms, arXiv:1708.07747"
)
LICENCE = "MIT (Copyright 2017 Zalando SE)"


# ----------------------------------------------------------------------------------- IDX


_IDX_TYPES = {0x08: np.dtype("u1"), 0x09: np.dtype("i1"), 0x0B: np.dtype(">i2"), 0x0C: np.dtype(">i4"),
              0x0D: np.dtype(">f4"), 0x0E: np.dtype(">f8")}


def _maybe_gunzip(data: bytes, label: str) -> bytes:
    if data[:2] == b"\x1f\x8b":
        try:
            return gzip.decompress(data)
        except (OSError, EOFError) as exc:
            raise ValueError(f"{label}: corrupt gzip stream ({exc})") from None
    return data


def read_idx(source) -> np.ndarray:
    """Parse an IDX file (LeCun's MNIST format; gzip-compressed or not) into a numpy array.

    Layout: two zero bytes, a type byte (0x08 uint8, 0x09 int8, 0x0B int16, 0x0C int32, 0x0D
    float32, 0x0E float64; big-endian), the number of dimensions d, d big-endian uint32 sizes, then
    the values in C order. ``source`` is a path or the file's bytes. A wrong magic number, an
    unknown type or a size that does not match the header raises ValueError.
    """
    if isinstance(source, (bytes, bytearray, memoryview)):
        data, label = bytes(source), "IDX data"
    else:
        path = Path(source)
        data, label = path.read_bytes(), str(path)
    data = _maybe_gunzip(data, label)
    if len(data) < 4 or data[0] != 0 or data[1] != 0:
        raise ValueError(f"{label}: not an IDX file (magic number must start with two zero bytes)")
    code, ndim = data[2], data[3]
    if code not in _IDX_TYPES:
        raise ValueError(f"{label}: unknown IDX element type 0x{code:02X}")
    if ndim < 1:
        raise ValueError(f"{label}: IDX file with 0 dimensions")
    header = 4 + 4 * ndim
    if len(data) < header:
        raise ValueError(f"{label}: truncated IDX header")
    dims = tuple(int(d) for d in np.frombuffer(data, dtype=">u4", count=ndim, offset=4))
    dtype = _IDX_TYPES[code]
    expected = int(np.prod(dims, dtype=np.int64)) * dtype.itemsize
    if len(data) - header != expected:
        raise ValueError(f"{label}: IDX header says {dims} x {dtype.itemsize} bytes = {expected} bytes of data, "
                         f"the file holds {len(data) - header}")
    arr = np.frombuffer(data, dtype=dtype, offset=header).reshape(dims)
    return arr.astype(dtype.newbyteorder("="), copy=True)


# ----------------------------------------------------------------------------------- files


def _find(folder: Path, stem: str) -> Path | None:
    for name in (stem + ".gz", stem):
        if (folder / name).is_file():
            return folder / name
    return None


def _complete(folder: Path) -> bool:
    return all(_find(folder, stem) is not None for stem in FILES.values())


def _download(dest: Path, timeout: float) -> None:
    base = (os.environ.get("DUBITO_FASHION_MNIST_URL") or DEFAULT_URL).rstrip("/")
    dest.mkdir(parents=True, exist_ok=True)
    for stem in FILES.values():
        if _find(dest, stem) is not None:
            continue  # placed earlier, only ever after its hash verified
        url = f"{base}/{stem}.gz"
        try:
            with urllib.request.urlopen(url, timeout=timeout) as resp:
                payload = resp.read()
        except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
            reason = (f"HTTP {exc.code} {exc.reason}" if isinstance(exc, urllib.error.HTTPError)
                      else getattr(exc, "reason", None) or f"{type(exc).__name__}: {exc}")
            raise DownloadError(
                f"could not download Fashion-MNIST file {stem}.gz from {url} ({reason}). Offline: install the "
                "Debian package (apt-get install dataset-fashion-mnist), or put the four IDX files in "
                "<dir>/fashion-mnist and set DUBITO_DATA=<dir>, or set DUBITO_FASHION_MNIST_URL to a mirror."
            ) from exc
        _verify(_maybe_gunzip(payload, url), stem, url)
        atomic_write_bytes(dest / f"{stem}.gz", payload)


def _verify(raw: bytes, stem: str, label: str) -> None:
    actual = hashlib.sha256(raw).hexdigest()
    if actual != SHA256[stem]:
        raise ValueError(
            f"{label}: Fashion-MNIST file {stem} failed its SHA-256 check (of the decompressed IDX bytes): "
            f"expected {SHA256[stem]}, got {actual} ({len(raw)} bytes, expected {SIZES[stem]})"
        )


def fashion_mnist_path(*, data_dir=None, download: bool = True, timeout: float = DOWNLOAD_TIMEOUT_S) -> Path:
    """The folder holding the four Fashion-MNIST IDX files; lookup order in the module docstring."""
    if data_dir is not None:
        root = Path(data_dir).expanduser()
        for cand in (root, root / "fashion-mnist"):
            if _complete(cand):
                return cand
        raise FileNotFoundError(
            f"Fashion-MNIST not found under data_dir={str(data_dir)!r}: expected the four IDX files "
            f"({', '.join(FILES.values())}, optionally .gz) in it or in its fashion-mnist/ subfolder"
        )
    env = os.environ.get("DUBITO_DATA")
    if env and _complete(Path(env).expanduser() / "fashion-mnist"):
        return Path(env).expanduser() / "fashion-mnist"
    if _complete(DEBIAN_DIR):
        return DEBIAN_DIR
    cached = cache_dir() / "fashion-mnist"
    if _complete(cached):
        return cached
    if not download:
        raise FileNotFoundError(
            f"Fashion-MNIST not found (DUBITO_DATA={env or 'unset'}, Debian folder {DEBIAN_DIR}, cache {cached}) "
            "and download=False. Install it with `apt-get install dataset-fashion-mnist`, or set DUBITO_DATA "
            "to a folder holding fashion-mnist/<the four IDX files>, or allow the download."
        )
    _download(cached, timeout)
    return cached


def fashion_mnist_available(*, data_dir=None) -> bool:
    """Whether the four files are on this machine (``data_dir``, ``DUBITO_DATA``, the Debian package
    or the cache), without downloading anything: for tests and benchmarks that skip otherwise."""
    try:
        fashion_mnist_path(data_dir=data_dir, download=False)
    except FileNotFoundError:
        return False
    return True


def _read_verified(folder: Path, stem: str) -> np.ndarray:
    path = _find(folder, stem)
    if path is None:
        raise FileNotFoundError(f"{folder / stem}(.gz) is missing")
    raw = _maybe_gunzip(path.read_bytes(), str(path))
    _verify(raw, stem, str(path))
    return read_idx(raw)


@lru_cache(maxsize=2)
def _arrays(folder: str, stamp: tuple) -> tuple[np.ndarray, ...]:
    """uint8 images (70000, 28, 28) and int64 labels, read and verified once per folder and file
    state (``stamp``: names, sizes, modification times)."""
    f = Path(folder)
    parts = [_read_verified(f, FILES[k]) for k in ("train_images", "train_labels", "test_images", "test_labels")]
    tr_x, tr_y, te_x, te_y = parts
    if (tr_x.shape != (_N_TRAIN, 28, 28) or te_x.shape != (_N_TEST, 28, 28) or tr_y.shape != (_N_TRAIN,)
            or te_y.shape != (_N_TEST,)):
        raise ValueError(f"{folder}: unexpected Fashion-MNIST shapes {[p.shape for p in parts]}")
    images = np.concatenate([tr_x, te_x])
    labels = np.concatenate([tr_y, te_y]).astype(np.int64)
    images.setflags(write=False)
    labels.setflags(write=False)
    return images, labels


def _stamp(folder: Path) -> tuple:
    out = []
    for stem in FILES.values():
        p = _find(folder, stem)
        st = p.stat()
        out.append((p.name, st.st_size, st.st_mtime_ns))
    return tuple(out)


def _check_count(v, what: str, hi: int) -> int | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, Integral) or not 1 <= v <= hi:
        raise ValueError(f"fashion-mnist: {what} must be an int in 1..{hi} or None, got {v!r}")
    return int(v)


def load_fashion_mnist(*, data_dir=None, download: bool = True, timeout: float = DOWNLOAD_TIMEOUT_S,
                       n_train: int | None = None, n_test: int | None = None) -> ImageDataset:
    """Fashion-MNIST as an `ImageDataset` with the standard split (first 60,000 rows = Zalando's
    training set, last 10,000 = its test set). ``n_train`` / ``n_test`` keep only the first rows of
    each part (quick runs; the files' order, which is not sorted by class)."""
    n_tr = _check_count(n_train, "n_train", _N_TRAIN)
    n_te = _check_count(n_test, "n_test", _N_TEST)
    folder = fashion_mnist_path(data_dir=data_dir, download=download, timeout=timeout)
    images, labels = _arrays(str(folder), _stamp(folder))
    tr = np.arange(_N_TRAIN if n_tr is None else n_tr)
    te = _N_TRAIN + np.arange(_N_TEST if n_te is None else n_te)
    rows = np.concatenate([tr, te])
    X = images[rows].reshape(rows.size, 784).astype(np.float32)
    X *= np.float32(1.0 / 255.0)
    y = labels[rows]
    meta: dict[str, Any] = {
        "title": "Fashion-MNIST (Zalando article images, 28x28 grey)",
        "source": ("Debian package dataset-fashion-mnist" if folder == DEBIAN_DIR else "Zalando Research files")
        + f" ({folder})",
        "url": "https://github.com/zalandoresearch/fashion-mnist",
        "licence": LICENCE,
        "citation": CITATION,
        "image_shape": (1, 28, 28),
        "class_names": list(FASHION_CLASSES),
        "path": str(folder),
        "sha256": dict(SHA256),
        "pixel_scale": "X = uint8 / 255, flattened row-major (channel-first, one channel)",
        "splits": f"standard: first {tr.size} rows = the training set, last {te.size} = the test set "
        "(Zalando's 60k/10k" + (", first rows of each" if (n_tr or n_te) else "") + ")",
    }
    n_all = rows.size
    return ImageDataset("fashion-mnist", X, y, [], [(np.arange(tr.size), np.arange(tr.size, n_all))], meta)
