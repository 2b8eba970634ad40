"""Data-test isolation: never touch the internet nor the user's cache.

Every test here gets an empty cache (DUBITO_CACHE) and mirror URLs (UCI, Fashion-MNIST) on a closed local port, so
a load that would otherwise download fails fast and offline. Tests that exercise the download
path override DUBITO_DATA_URL with their own local server.
"""
import socket

import pytest


def closed_port_url() -> str:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"  # nothing listens there any more


@pytest.fixture(autouse=True)
def _offline_isolated(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("DUBITO_CACHE", str(tmp_path_factory.mktemp("dubito-cache")))
    monkeypatch.setenv("DUBITO_DATA_URL", closed_port_url())
    monkeypatch.setenv("DUBITO_FASHION_MNIST_URL", closed_port_url())
