"""Shared test set-up: one torch/BLAS thread (2 shared cores run small work 10-50x slower
with two), and DUBITO_DATA pointing at the shared UCI copies when they exist."""
import os
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)

SHARED_UCI = Path(__file__).resolve().parents[2] / "shared" / "data" / "uci"
if SHARED_UCI.is_dir():
    os.environ.setdefault("DUBITO_DATA", str(SHARED_UCI))


@pytest.fixture
def uci_dir() -> Path:
    """The folder of UCI copies (DUBITO_DATA); tests that need it skip where it is absent."""
    path = Path(os.environ.get("DUBITO_DATA", SHARED_UCI))
    if not (path / "yacht" / "data.txt").is_file():
        pytest.skip(f"UCI copies not found at {path} (set DUBITO_DATA)")
    return path
