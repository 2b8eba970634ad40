"""Process-pool helpers shared by the experiment runner and B-DeepNoise's parallel chains."""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import os
import signal

import torch

from dubito.heap import retain_freed_memory

__all__ = ["init_worker", "terminate_pool"]


def init_worker() -> None:
    """Process-pool worker set-up: one torch/BLAS thread; freed heap memory kept in the process
    (`dubito.heap`: a dubito worker is dubito's own process); SIGINT left to the parent, which
    decides what stops."""
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = "1"
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    torch.set_num_threads(1)
    retain_freed_memory()


def terminate_pool(pool: cf.ProcessPoolExecutor) -> None:
    """Stop a process pool now: cancel queued calls, terminate running workers."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in processes:
        with contextlib.suppress(Exception):
            proc.terminate()
    for proc in processes:
        with contextlib.suppress(Exception):
            proc.join(timeout=5)
