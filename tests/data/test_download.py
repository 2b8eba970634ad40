"""Download path against a local mirror (http.server on 127.0.0.1); never the internet."""
import shutil
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from dubito.data import DownloadError, cache_dir, load, load_uci
from dubito.data.uci import manifest

from .conftest import closed_port_url

FOLDERS = ["yacht", "energy"]


class _Handler(SimpleHTTPRequestHandler):
    def __init__(self, *args, log, truncate, **kwargs):
        self._log, self._truncate = log, truncate
        super().__init__(*args, **kwargs)

    def log_message(self, *args):  # keep test output quiet
        pass

    def do_GET(self):
        self._log.append(self.path)
        if self.path in self._truncate:  # promise 1000 bytes, send 10, hang up
            self.send_response(200)
            self.send_header("Content-Length", "1000")
            self.end_headers()
            self.wfile.write(b"0123456789")
            self.wfile.flush()
            self.close_connection = True
            return
        super().do_GET()


class Mirror:
    def __init__(self, root):
        self.root, self.log, self.truncate = root, [], set()
        handler = partial(_Handler, directory=str(root), log=self.log, truncate=self.truncate)
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()
        self.stopped = False

    def stop(self):
        if not self.stopped:
            self.server.shutdown()
            self.server.server_close()
            self.thread.join(5)
            self.stopped = True

    def file(self, folder, name):
        return self.root / folder / "data" / name


@pytest.fixture
def mirror(uci_dir, tmp_path, monkeypatch):
    root = tmp_path / "mirror"
    for folder in FOLDERS:  # the mirror's layout: <folder>/data/<file>
        shutil.copytree(uci_dir / folder, root / folder / "data")
    m = Mirror(root)
    monkeypatch.delenv("DUBITO_DATA", raising=False)
    monkeypatch.setenv("DUBITO_DATA_URL", m.url)
    monkeypatch.setenv("DUBITO_CACHE", str(tmp_path / "cache"))
    yield m
    m.stop()


def _leftovers(folder):
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(".") or p.suffix == ".tmp") if folder.exists() else []


def test_download_verifies_then_reads_cache_offline(mirror, uci_dir, tmp_path):
    ds = load("yacht")
    ref = load_uci("yacht", data_dir=uci_dir)
    np.testing.assert_array_equal(ds.X, ref.X)
    np.testing.assert_array_equal(ds.y, ref.y)
    assert ds.n_splits == 20
    cached = tmp_path / "cache" / "uci" / "yacht"
    assert cache_dir() == tmp_path / "cache"
    assert ds.meta["path"] == str(cached)
    assert sorted(p.name for p in cached.iterdir()) == sorted(manifest()["yacht"])
    assert len(mirror.log) == len(manifest()["yacht"])
    assert all(p.startswith("/yacht/data/") for p in mirror.log)

    mirror.stop()
    again = load("yacht")  # the server is gone: this must come from the cache
    np.testing.assert_array_equal(again.X, ref.X)
    for (a, b), (c, d) in zip(again.splits, ref.splits):
        np.testing.assert_array_equal(a, c)
        np.testing.assert_array_equal(b, d)
    # energy was never downloaded, and now cannot be
    with pytest.raises(DownloadError, match="DUBITO_DATA"):
        load("energy")


def test_corrupted_file_raises_and_leaves_nothing(mirror, uci_dir, tmp_path):
    bad = mirror.file("energy", "index_train_5.txt")
    bad.write_bytes(bad.read_bytes() + b"1\n")
    expected = manifest()["energy"]["index_train_5.txt"]
    with pytest.raises(ValueError, match="index_train_5.txt") as info:
        load("energy")
    msg = str(info.value)
    assert expected in msg and "expected" in msg and "got" in msg
    cached = tmp_path / "cache" / "uci" / "energy"
    assert not (cached / "index_train_5.txt").exists()
    assert _leftovers(cached) == []
    # files verified before the bad one are kept; once the mirror is fixed the download resumes
    n_before = len(mirror.log)
    shutil.copy(uci_dir / "energy" / "index_train_5.txt", bad)
    ds = load("energy")
    assert ds.X.shape == (768, 8)
    assert len(mirror.log) - n_before < len(manifest()["energy"])


def test_truncated_download_leaves_no_partial_file(mirror, tmp_path):
    mirror.truncate.add("/yacht/data/data.txt")
    with pytest.raises(DownloadError, match="yacht/data.txt"):
        load("yacht")
    cached = tmp_path / "cache" / "uci" / "yacht"
    assert not (cached / "data.txt").exists()
    assert _leftovers(cached) == []


def test_missing_file_on_mirror_is_a_clear_error(mirror):
    mirror.file("yacht", "n_splits.txt").unlink()
    with pytest.raises(DownloadError, match=r"yacht/n_splits.txt.*404|404.*n_splits"):
        load("yacht")


def test_unreachable_mirror_mentions_dubito_data(tmp_path, monkeypatch):
    monkeypatch.setenv("DUBITO_DATA", str(tmp_path / "empty"))  # set, but without the data: falls through
    monkeypatch.setenv("DUBITO_CACHE", str(tmp_path / "cache"))
    url = closed_port_url()
    monkeypatch.setenv("DUBITO_DATA_URL", url)
    with pytest.raises(OSError) as info:
        load("yacht")
    assert isinstance(info.value, DownloadError)
    msg = str(info.value)
    assert "DUBITO_DATA" in msg and url in msg and "data.txt" in msg
    assert _leftovers(tmp_path / "cache" / "uci" / "yacht") == []
    assert not (tmp_path / "cache" / "uci" / "yacht" / "data.txt").exists()


def test_no_download_when_disabled(tmp_path, monkeypatch):
    monkeypatch.delenv("DUBITO_DATA", raising=False)
    with pytest.raises(FileNotFoundError, match="DUBITO_DATA"):
        load("yacht", download=False)


def test_dubito_data_wins_and_mirror_layout_is_accepted(mirror, uci_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("DUBITO_DATA", str(mirror.root))  # <folder>/data/<file>
    ds = load("yacht")
    assert ds.meta["path"] == str(mirror.root / "yacht" / "data")
    assert mirror.log == [] and not (tmp_path / "cache").exists()


def test_cache_location_env(tmp_path, monkeypatch):
    monkeypatch.delenv("DUBITO_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "dubito"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / ".cache" / "dubito"
    monkeypatch.setenv("DUBITO_CACHE", str(tmp_path / "c"))
    assert cache_dir() == tmp_path / "c"
