"""Running B-DeepNoise's chains: one after another or in spawned worker processes, with one progress bar.

`run_chains` calls ``run_chain(job, report)`` (`dubito.regression.deepnoise`) for every `ChainJob`,
in this process (``n_jobs`` 1) or in a pool of spawned processes (one torch/BLAS thread each, SIGINT
left to the parent, as the experiment runner's pool: `dubito._parallel`), whose chains report their
sweeps through a queue (`queue_report`). The bar counts all sweeps and shows the rate in sweeps/s.
Chains draw everything from their own seeds, so the results do not depend on ``n_jobs``.
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
import queue as queue_mod
import time
from dataclasses import dataclass

import numpy as np

from dubito._estimator import progress_bar
from dubito._parallel import init_worker, terminate_pool

__all__ = ["ChainJob", "queue_report", "run_chains"]


@dataclass
class ChainJob:
    """What one chain needs: its index and seed, the training data, the estimator's settings, its SGD
    initialisation rows, the monitoring rows, its checkpoint file (None: none) and fingerprint."""

    chain: int
    seed: int
    X: np.ndarray  # original units (the SGD model standardises its own fold)
    y: np.ndarray
    units: tuple  # (x_mean, x_scale, y_mean, y_scale) of the full training set
    settings: dict  # validated estimator settings
    sgd_rows: np.ndarray | None
    monitor_rows: np.ndarray
    checkpoint: str | None
    resume: bool
    fingerprint: dict


_REPORT_QUEUE = None  # set in spawned workers by _init_chain_worker


def _init_chain_worker(queue) -> None:
    init_worker()
    global _REPORT_QUEUE
    _REPORT_QUEUE = queue


def queue_report(chain: int, n: int, resumed: bool = False) -> None:
    """Progress of a chain run in a worker: ``n`` more sweeps of ``chain`` (``resumed``: done before an
    interruption), put on the queue the parent reads; nothing outside a worker."""
    if _REPORT_QUEUE is not None:
        _REPORT_QUEUE.put((chain, n, resumed))


def run_chains(run_chain, jobs: list, *, sweeps: int, n_jobs: int, progress: bool) -> list:
    """``run_chain(job, report)`` for every job (``sweeps`` each), serially or in ``min(n_jobs,
    len(jobs))`` spawned processes; their results in the order of ``jobs``."""
    total = len(jobs) * sweeps
    with progress_bar(progress) as bar:
        task = bar.add_task("B-DeepNoise: initialising chains", total=total)
        clock = {"t0": None, "new": 0}

        def report(chain, k, resumed=False):
            """k more sweeps of ``chain`` (``resumed``: sweeps done before the interruption)."""
            if resumed:
                bar.update(task, advance=k)
                return
            if clock["t0"] is None:  # the rate counts sweeps after the first one
                clock["t0"] = time.perf_counter()
            else:
                clock["new"] += k
            rate = clock["new"] / max(time.perf_counter() - clock["t0"], 1e-9)
            bar.update(task, advance=k, description=f"B-DeepNoise {len(jobs)} chains, {rate:.2f} sweeps/s")

        workers = min(n_jobs, len(jobs))
        if workers == 1:
            return [run_chain(job, report) for job in jobs]
        return _run_parallel(run_chain, jobs, workers, report)


def _run_parallel(run_chain, jobs, workers: int, report) -> list:
    """``run_chain(job)`` for every job in ``workers`` spawned processes (one torch/BLAS thread each,
    SIGINT ignored, as the experiment runner's pool); progress comes back through a queue."""
    ctx = multiprocessing.get_context("spawn")
    q = ctx.Queue()
    pool = cf.ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_init_chain_worker, initargs=(q,))

    def drain(timeout):
        try:
            report(*q.get(timeout=timeout))
            while True:
                report(*q.get_nowait())
        except queue_mod.Empty:
            pass

    try:
        futures = [pool.submit(run_chain, job) for job in jobs]
        while not all(f.done() for f in futures):
            drain(0.2)
        results = [f.result() for f in futures]
        drain(0.05)
    except BaseException:
        terminate_pool(pool)
        raise
    pool.shutdown(wait=True)
    q.close()
    return results
