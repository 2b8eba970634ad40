"""Helpers shared by the benchmark scripts: one thread, the machine line, the printer behind
``--out``, progress on stderr, median timings and the validation rows of a standard split. The
scripts import it as ``_common`` (their folder is on ``sys.path`` when run as ``python
benchmarks/x.py``; each also adds it, for imports
by path)."""

from __future__ import annotations

import os
import platform
import statistics
import sys
import time


def one_thread_env() -> None:
    """Default OMP/MKL/OpenBLAS to one thread (spec pitfall 16); call before numpy or torch load."""
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(var, "1")


def torch_one_thread(force: bool = True):
    """Import torch set to one thread (with ``force=False`` only where OMP_NUM_THREADS is unset)."""
    import torch

    if force or "OMP_NUM_THREADS" not in os.environ:
        torch.set_num_threads(1)
    return torch


def validation_rows(n: int, split: int):
    """(fit rows, validation rows) of a standard split's n training rows: a random order seeded by
    (split, 24), its first 80 % and the rest. The choices of the validation benchmarks use these rows,
    never the split's test rows."""
    import numpy as np

    order = np.random.default_rng([split, 24]).permutation(n)
    cut = int(round(0.8 * n))
    return order[:cut], order[cut:]


def header(torch=None, device: str | None = None) -> str:
    """The machine line: versions, CPUs, threads, device, OMP_NUM_THREADS and load average."""
    import numpy as np

    import dubito

    parts = [f"dubito {dubito.__version__}"] + ([f"torch {torch.__version__}"] if torch else [])
    parts += [f"numpy {np.__version__}", f"Python {platform.python_version()}", platform.machine(),
              f"{os.cpu_count()} CPUs"]
    if torch:
        parts.append(f"torch threads {torch.get_num_threads()}")
    if device:
        gpu = torch is not None and device.startswith("cuda") and torch.cuda.is_available()
        parts.append(f"device {device}" + (f" ({torch.cuda.get_device_name()})" if gpu else ""))
    load = ", ".join(f"{v:.1f}" for v in os.getloadavg()) if hasattr(os, "getloadavg") else "n/a"
    return ", ".join(parts) + f", OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}; load average {load}"


class Printer:
    """print(), and keep ``path`` (``--out``) holding every line so far: rewritten atomically (a
    temporary file in the same folder, then os.replace), so a long run leaves its partial tables."""

    def __init__(self, path: str | None = None):
        self.path, self.lines = path, []

    def __call__(self, line: str = "") -> None:
        print(line, flush=True)
        self.lines.append(line)
        if self.path:
            from dubito.io import atomic_write_text

            atomic_write_text(self.path, "\n".join(self.lines) + "\n")


def progress(msg: str) -> None:
    """A time-stamped progress line on stderr (stdout holds only the tables)."""
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def median_seconds(fn, repeats: int, warmup: bool = False) -> float:
    """Median seconds of ``repeats`` calls of ``fn`` (after one untimed call if ``warmup``)."""
    if warmup:
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)
