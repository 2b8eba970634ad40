"""Where cells run: every engine is a ``concurrent.futures.Executor``.

The runner only calls ``submit`` and waits on the futures, so another engine (Ray, a batch
queue) is an adapter that returns an ``Executor``, not a change to the runner.

``make_executor(kind, workers=None, scheduler=None)`` is a context manager yielding:

``"local"``   `InProcessExecutor`: runs each call *at submit*, in the calling thread, and
              returns an already-finished future (no threads, no pickling; exceptions end up
              in the future, except ``BaseException`` s such as ``KeyboardInterrupt``, which
              propagate so Ctrl-C stops the work at once).
``"process"`` ``ProcessPoolExecutor`` of ``workers`` processes (default: the CPU count),
              started with "spawn" (safe with torch, OpenMP and CUDA, unlike "fork"); each
              worker pins torch to one thread and ignores SIGINT in its initializer, so a
              Ctrl-C in the terminal reaches only the runner, which decides what stops.
``"dask"``    ``distributed.Client(scheduler).get_executor(pure=False)``: a Dask cluster; needs
              ``pip install dubito[distributed]`` and a scheduler address.

On an exception inside the ``with`` block (an abandoned run) the executor is shut down
without waiting: queued calls are cancelled and process-pool workers are terminated.
`parallelism(executor)` says how many calls can run at once (the runner keeps that many in
flight, so that claims are only taken for cells about to run).
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import multiprocessing
import os
import threading

from dubito._parallel import init_worker, terminate_pool

__all__ = ["KINDS", "ExecutorUnavailable", "InProcessExecutor", "make_executor", "parallelism"]

KINDS = ("local", "process", "dask")


class ExecutorUnavailable(ValueError):
    """The requested executor cannot be made here (missing extra, no or unreachable scheduler)."""


class InProcessExecutor(cf.Executor):
    """Synchronous executor: ``submit`` runs the call now and returns a finished future."""

    def __init__(self):
        self._shutdown = False
        self._lock = threading.Lock()

    def submit(self, fn, /, *args, **kwargs):
        with self._lock:
            if self._shutdown:
                raise RuntimeError("cannot schedule new futures after shutdown")
        future = cf.Future()
        future.set_running_or_notify_cancel()
        try:
            result = fn(*args, **kwargs)
        except Exception as exc:
            future.set_exception(exc)
        else:
            future.set_result(result)
        return future

    def shutdown(self, wait=True, *, cancel_futures=False):
        with self._lock:
            self._shutdown = True


def _dask_client(scheduler):
    try:
        import distributed
    except ImportError:
        raise ExecutorUnavailable(
            "--executor dask needs Dask's distributed scheduler: pip install dubito[distributed]"
        ) from None
    if not scheduler:
        raise ExecutorUnavailable(
            "--executor dask needs --scheduler ADDRESS (e.g. tcp://127.0.0.1:8786; "
            "start one with `dask scheduler` and `dask worker ADDRESS`)"
        )
    if isinstance(scheduler, str) or not hasattr(scheduler, "scheduler_address"):
        try:
            return distributed.Client(scheduler, set_as_default=False)  # timeout: distributed.comm.timeouts.connect
        except (OSError, TimeoutError, ValueError) as exc:
            raise ExecutorUnavailable(f"cannot reach the Dask scheduler at {scheduler}: {exc}") from None
    return distributed.Client(scheduler, set_as_default=False)  # a LocalCluster object


@contextlib.contextmanager
def make_executor(kind: str = "local", workers: int | None = None, scheduler=None):
    """Context manager yielding a ``concurrent.futures.Executor`` of ``kind`` (see module doc).

    ``workers``: processes for "process" (default ``os.cpu_count()``); ignored otherwise.
    ``scheduler``: Dask scheduler address (or a ``distributed`` cluster object) for "dask".
    """
    if kind not in KINDS:
        raise ValueError(f"unknown executor {kind!r}; available: {', '.join(KINDS)}")
    if workers is not None and (isinstance(workers, bool) or int(workers) != workers or workers < 1):
        raise ValueError(f"workers must be a positive integer, got {workers!r}")
    if kind == "local":
        executor = InProcessExecutor()
        try:
            yield executor
        finally:
            executor.shutdown()
    elif kind == "process":

        pool = cf.ProcessPoolExecutor(
            max_workers=workers or os.cpu_count() or 1,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=init_worker,
        )
        try:
            yield pool
        except BaseException:
            terminate_pool(pool)
            raise
        else:
            pool.shutdown(wait=True)
    else:
        client = _dask_client(scheduler)
        executor = client.get_executor(pure=False)
        executor._dubito_client = client
        try:
            yield executor
        except BaseException:
            with contextlib.suppress(Exception):
                executor.shutdown(wait=False)
            raise
        else:
            executor.shutdown(wait=True)
        finally:
            with contextlib.suppress(Exception):
                client.close()


def parallelism(executor: cf.Executor) -> int:
    """How many calls ``executor`` runs at once (1 for anything unknown)."""
    if isinstance(executor, InProcessExecutor):
        return 1
    if isinstance(executor, cf.ProcessPoolExecutor):
        return int(getattr(executor, "_max_workers", 1) or 1)
    if isinstance(executor, cf.ThreadPoolExecutor):
        return int(getattr(executor, "_max_workers", 1) or 1)
    client = getattr(executor, "_client", None)
    if client is not None and hasattr(client, "nthreads"):
        try:
            return max(1, sum(client.nthreads().values()))
        except Exception:
            return 1
    return 1
