"""Fashion-MNIST: the IDX reader against hand-built files, the lookup order, the verified
download (local HTTP server, never the internet), and the Debian package's files when installed."""

import gzip
import hashlib
import http.server
import struct
import threading
from pathlib import Path

import numpy as np
import pytest

from dubito.data import fashion_mnist as fm
from dubito.data import load
from dubito.data.dataset import ImageDataset
from dubito.data.fashion_mnist import load_fashion_mnist, read_idx
from dubito.data.uci import DownloadError

DEBIAN_INSTALLED = all((fm.DEBIAN_DIR / f"{s}.gz").is_file() for s in fm.FILES.values())  # not the cache
needs_debian = pytest.mark.skipif(
    not DEBIAN_INSTALLED,
    reason="Debian package dataset-fashion-mnist not installed (`make fashion-mnist` or "
    "`apt-get install dataset-fashion-mnist`)",
)


def _idx_bytes_brute(arr: np.ndarray, code: int) -> bytes:
    """IDX file by hand: 0, 0, type, ndim, big-endian dims, then each value packed one by one."""
    fmt = {0x08: ">B", 0x09: ">b", 0x0B: ">h", 0x0C: ">i", 0x0D: ">f", 0x0E: ">d"}[code]
    out = bytes([0, 0, code, arr.ndim]) + b"".join(struct.pack(">I", d) for d in arr.shape)
    for v in arr.ravel().tolist():
        out += struct.pack(fmt, v)
    return out


@pytest.mark.parametrize("code,dtype", [(0x08, np.uint8), (0x09, np.int8), (0x0B, np.int16), (0x0C, np.int32),
                                        (0x0D, np.float32), (0x0E, np.float64)])
def test_read_idx_matches_hand_packed_file(tmp_path, code, dtype):
    rng = np.random.default_rng(code)
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        arr = rng.integers(info.min, info.max, size=(3, 4, 5), endpoint=True).astype(dtype)
    else:
        arr = rng.standard_normal((3, 4, 5)).astype(dtype)
    raw = _idx_bytes_brute(arr, code)
    (tmp_path / "a.idx").write_bytes(raw)
    (tmp_path / "a.idx.gz").write_bytes(gzip.compress(raw))
    for src in (tmp_path / "a.idx", tmp_path / "a.idx.gz", raw):
        got = read_idx(src)
        assert got.shape == (3, 4, 5) and got.dtype == np.dtype(dtype)
        assert np.array_equal(got, arr)  # exact, element by element


def test_read_idx_one_dimensional_labels():
    labels = np.array([9, 0, 0, 3, 0, 2, 7], dtype=np.uint8)
    assert read_idx(_idx_bytes_brute(labels, 0x08)).tolist() == labels.tolist()


def test_read_idx_rejects_bad_files():
    good = _idx_bytes_brute(np.zeros((2, 2), np.uint8), 0x08)
    with pytest.raises(ValueError, match="magic number"):
        read_idx(b"\x01" + good[1:])
    with pytest.raises(ValueError, match="unknown IDX element type"):
        read_idx(good[:2] + b"\x07" + good[3:])
    with pytest.raises(ValueError, match="holds 3"):
        read_idx(good[:-1])
    with pytest.raises(ValueError, match="corrupt gzip"):
        read_idx(b"\x1f\x8b" + b"garbage")


# ------------------------------------------------------------------------ lookup and download


def _tiny_set(folder: Path) -> dict[str, bytes]:
    """Four small IDX files with the real names (not the real contents)."""
    rng = np.random.default_rng(0)
    files = {
        "train-images-idx3-ubyte": _idx_bytes_brute(rng.integers(0, 256, (6, 28, 28)).astype(np.uint8), 0x08),
        "train-labels-idx1-ubyte": _idx_bytes_brute(np.arange(6, dtype=np.uint8), 0x08),
        "t10k-images-idx3-ubyte": _idx_bytes_brute(rng.integers(0, 256, (2, 28, 28)).astype(np.uint8), 0x08),
        "t10k-labels-idx1-ubyte": _idx_bytes_brute(np.array([9, 1], np.uint8), 0x08),
    }
    folder.mkdir(parents=True, exist_ok=True)
    for name, raw in files.items():
        (folder / f"{name}.gz").write_bytes(gzip.compress(raw))
    return files


@pytest.fixture
def tiny_manifest(monkeypatch, tmp_path):
    """A tiny stand-in for the four files, with the module's checksums and shapes patched to it."""
    files = _tiny_set(tmp_path / "src")
    monkeypatch.setattr(fm, "SHA256", {k: hashlib.sha256(v).hexdigest() for k, v in files.items()})
    monkeypatch.setattr(fm, "SIZES", {k: len(v) for k, v in files.items()})
    monkeypatch.setattr(fm, "DEBIAN_DIR", tmp_path / "no-debian")
    monkeypatch.setattr(fm, "_N_TRAIN", 6)
    monkeypatch.setattr(fm, "_N_TEST", 2)
    monkeypatch.setenv("DUBITO_FASHION_MNIST_URL", "http://127.0.0.1:9")  # discard port: refused at once
    monkeypatch.delenv("DUBITO_DATA", raising=False)
    fm._arrays.cache_clear()
    yield tmp_path / "src", files
    fm._arrays.cache_clear()


def test_data_dir_and_dubito_data_are_read_and_verified(tiny_manifest, monkeypatch, tmp_path):
    src, files = tiny_manifest
    ds = load_fashion_mnist(data_dir=src)
    assert isinstance(ds, ImageDataset) and ds.X.shape == (8, 784) and ds.X.dtype == np.float32
    assert ds.y.tolist() == [0, 1, 2, 3, 4, 5, 9, 1] and ds.y.dtype == np.int64
    expected = read_idx(files["train-images-idx3-ubyte"]).reshape(6, 784) / 255.0
    assert np.allclose(ds.X[:6], expected, atol=1e-7)
    tr, te = ds.splits[0]
    assert tr.tolist() == list(range(6)) and te.tolist() == [6, 7]
    monkeypatch.setenv("DUBITO_DATA", str(src.parent))
    (src.parent / "fashion-mnist").symlink_to(src)
    assert load("fashion-mnist").meta["path"] == str(src.parent / "fashion-mnist")


def test_tampered_file_fails_its_checksum(tiny_manifest, tmp_path):
    src, files = tiny_manifest
    raw = bytearray(files["t10k-labels-idx1-ubyte"])
    raw[-1] ^= 1
    (src / "t10k-labels-idx1-ubyte.gz").write_bytes(gzip.compress(bytes(raw)))
    with pytest.raises(ValueError, match="failed its SHA-256 check"):
        load_fashion_mnist(data_dir=src)


def test_offline_without_files_gives_clear_errors(tiny_manifest):
    assert not fm.fashion_mnist_available()
    assert fm.fashion_mnist_available(data_dir=tiny_manifest[0])
    with pytest.raises(FileNotFoundError, match="apt-get install dataset-fashion-mnist"):
        load_fashion_mnist(download=False)
    with pytest.raises(DownloadError, match="could not download Fashion-MNIST"):
        load_fashion_mnist()
    with pytest.raises(FileNotFoundError, match="four IDX files"):
        load_fashion_mnist(data_dir="/nonexistent")


class _Handler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # quiet
        pass


def _serve(folder: Path):
    handler = lambda *a, **k: _Handler(*a, directory=str(folder), **k)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_download_verifies_then_caches(tiny_manifest, monkeypatch, tmp_path):
    src, files = tiny_manifest
    server = _serve(src)
    try:
        monkeypatch.setenv("DUBITO_FASHION_MNIST_URL", f"http://127.0.0.1:{server.server_address[1]}/")
        ds = load_fashion_mnist()
        root = fm.cache_dir()
        cache = root / "fashion-mnist"
        assert ds.meta["path"] == str(cache) and sorted(p.name for p in cache.iterdir()) == sorted(
            f"{k}.gz" for k in files)
        # a mirror serving a wrong file: rejected, and nothing unverified reaches the cache
        bad = tmp_path / "bad"
        _tiny_set(bad)
        (bad / "train-labels-idx1-ubyte.gz").write_bytes(gzip.compress(b"\x00\x00\x08\x01\x00\x00\x00\x01\x07"))
        bad_server = _serve(bad)
        try:
            monkeypatch.setenv("DUBITO_CACHE", str(tmp_path / "cache2"))
            monkeypatch.setenv("DUBITO_FASHION_MNIST_URL", f"http://127.0.0.1:{bad_server.server_address[1]}")
            with pytest.raises(ValueError, match="SHA-256"):
                load_fashion_mnist()
            left = sorted(p.name for p in (tmp_path / "cache2" / "fashion-mnist").iterdir())
            assert "train-labels-idx1-ubyte.gz" not in left
        finally:
            bad_server.shutdown()
    finally:
        server.shutdown()
    # the cache now answers offline
    monkeypatch.setenv("DUBITO_FASHION_MNIST_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("DUBITO_CACHE", str(root))
    assert load_fashion_mnist(download=False).X.shape == (8, 784)


def test_bad_options_raise(tiny_manifest):
    src, _ = tiny_manifest
    with pytest.raises(ValueError, match="n_train must be an int in 1..6"):
        load_fashion_mnist(data_dir=src, n_train=0)
    with pytest.raises(ValueError, match="n_test"):
        load_fashion_mnist(data_dir=src, n_test=3)
    with pytest.raises(TypeError, match="unexpected option"):
        load("fashion-mnist", colour=True)


def test_image_dataset_validates():
    meta = {"image_shape": (1, 2, 2), "class_names": ["a", "b"], "source": "t", "licence": "t", "citation": "t"}
    X = np.full((3, 4), 0.5)
    ok = ImageDataset("t", X, np.array([0, 1, 1]), [], [([0, 1], [2])], meta)
    assert ok.X.dtype == np.float32 and ok.y.dtype == np.int64 and ok.images().shape == (3, 1, 2, 2)
    assert ok.with_splits([([0], [1, 2])]).splits[0][1].tolist() == [1, 2]
    with pytest.raises(ValueError, match="labels must lie in 0..1"):
        ImageDataset("t", X, np.array([0, 1, 2]), [], [([0, 1], [2])], meta)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        ImageDataset("t", X * 3, np.array([0, 1, 1]), [], [([0, 1], [2])], meta)
    with pytest.raises(ValueError, match="X must be"):
        ImageDataset("t", np.zeros((3, 5)), np.array([0, 1, 1]), [], [([0, 1], [2])], meta)
    with pytest.raises(ValueError, match="integer class labels"):
        ImageDataset("t", X, np.array([0.5, 1, 1]), [], [([0, 1], [2])], meta)


# ----------------------------------------------------------------------- the real (Debian) files


@needs_debian
def test_debian_files_checksums_shapes_and_labels():
    for stem, digest in fm.SHA256.items():
        raw = gzip.decompress((fm.DEBIAN_DIR / f"{stem}.gz").read_bytes())
        assert len(raw) == fm.SIZES[stem] and hashlib.sha256(raw).hexdigest() == digest
    ds = load("fashion-mnist")
    assert ds.X.shape == (70000, 784) and ds.X.dtype == np.float32 and ds.y.dtype == np.int64
    assert 0.0 == ds.X.min() and ds.X.max() == 1.0
    assert ds.meta["image_shape"] == (1, 28, 28) and ds.meta["class_names"][6] == "Shirt"
    assert "Debian" in ds.meta["source"] and all(ds.meta[k] for k in ("source", "licence", "citation"))
    tr, te = ds.splits[0]
    assert (tr.size, te.size) == (60000, 10000)
    assert np.bincount(ds.y[tr]).tolist() == [6000] * 10 and np.bincount(ds.y[te]).tolist() == [1000] * 10
    assert ds.y[:10].tolist() == [9, 0, 0, 3, 0, 2, 7, 2, 5, 5]  # the published first training labels
    assert ds.y[60000:60005].tolist() == [9, 2, 1, 1, 6]  # and the first test labels
    # pixel scaling: X * 255 gives back the file's bytes exactly
    raw = read_idx(fm.DEBIAN_DIR / "t10k-images-idx3-ubyte.gz")
    assert np.array_equal(np.rint(ds.X[60000:] * 255).astype(np.uint8), raw.reshape(10000, 784))
    small = load("fashion-mnist", n_train=50, n_test=20)
    assert small.X.shape == (70, 784) and np.array_equal(small.X[50:], ds.X[60000:60020])
