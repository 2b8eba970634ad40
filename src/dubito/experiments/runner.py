"""The grid runner behind ``dubito bench``: expand, skip what is stored, run the rest.

``run_grid`` expands an experiment's preset into cells, skips the cells the results store
already holds as 'done', and runs the others on an executor (`executors.py`) through the
``concurrent.futures.Executor`` interface only. For each cell it first takes a *claim* in the
store (so two runners on one store never run a cell twice), keeps at most
``parallelism(executor)`` cells in flight, and writes each result from the main process as
its future completes (workers never open the store): the row and the release of the claim
are one transaction. A cell that raises is stored as 'failed' with its traceback and the grid
goes on; the next run retries it.

Interrupting (SIGINT / SIGTERM, when ``run_grid`` runs in the main thread):

* first signal: no new cell starts; the cells in flight (at most one per worker) finish and
  are stored; the run ends with a message saying how many cells remain;
* second signal: the cells in flight are abandoned (process-pool workers terminated, Dask
  tasks cancelled, an in-process cell interrupted) and their claims released.

Either way every completed row stays, and running the same command again finishes the grid
without recomputing them. (A SIGKILL cannot be handled: SQLite's transactions still leave no
partial row, and the dead runner's claims are taken over as stale by the next run.)
A background thread renews this runner's claims so that a long cell is not mistaken for a
dead runner's by runners on other hosts (see ``ResultsStore.lease_seconds``).
"""

from __future__ import annotations

import importlib
import os
import signal
import socket
import threading
import time
import traceback
import uuid
from collections import deque
from concurrent.futures import FIRST_COMPLETED, CancelledError, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

import dubito.experiments as experiments
from dubito._estimator import check_device
from dubito.experiments.base import Cell, CellResult
from dubito.experiments.executors import KINDS, make_executor, parallelism
from dubito.experiments.store import ResultsStore
from dubito.io import check_store_path

__all__ = ["GridSummary", "run_grid", "execute_cell"]

#: seconds between heartbeats that renew this runner's claims
HEARTBEAT_SECONDS = 60.0


@dataclass
class GridSummary:
    """What a `run_grid` call did.

    done / failed: cells run now and stored as such; skipped: cells already done in the store;
    busy: cells claimed by another live runner (left to it); remaining: cells not run because
    the run was interrupted; interrupted: the signal number that stopped it, or None.
    """

    done: int
    skipped: int
    failed: int
    unavailable: dict[str, str]
    seconds: float
    busy: int = 0
    remaining: int = 0
    interrupted: int | None = None
    store: str = ""
    failures: list[str] = field(default_factory=list)

    def line(self) -> str:
        text = f"done {self.done}, skipped {self.skipped}, failed {self.failed} in {self.seconds:.1f} s"
        if self.busy:
            text += f"; {self.busy} claimed by another runner"
        return text


class _Abandon(BaseException):
    """Raised by the second SIGINT/SIGTERM: stop now, leaving cells in flight."""


def _jsonable(value: Any) -> Any:
    """Plain-Python copy of ``value`` (numpy scalars/arrays and tuples become floats/lists)."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (str, bool, int, float)) or value is None:
        return value
    if hasattr(value, "tolist"):  # numpy / torch arrays and scalars
        return _jsonable(value.tolist())
    raise TypeError(f"{type(value).__name__} is not JSON-serialisable")


def execute_cell(cell: Cell, device: str = "cpu", module: str | None = None) -> dict:
    """Run one cell (in a worker): JSON-able ``{"status", "variants", "artefacts", "info",
    "seconds", "error"}``; any exception becomes status 'failed' with its traceback.

    The experiment is looked up by ``cell.experiment`` in the registry, or imported from
    ``module`` (a module defining ``EXPERIMENT``) when given: the runner passes the module it
    resolved, so experiments registered at run time work in fresh worker processes too.
    """

    start = time.perf_counter()
    try:
        exp = importlib.import_module(module).EXPERIMENT if module else experiments.get(cell.experiment)
        result = exp.run_cell(cell, device=device, progress=False)
        if not isinstance(result, CellResult):
            raise TypeError(f"run_cell returned {type(result).__name__}, not a CellResult")
        out = {
            "status": "done",
            "variants": _jsonable(result.variants),
            "artefacts": _jsonable(result.artefacts),
            "info": _jsonable(result.info),
            "error": None,
        }
    except Exception:
        out = {"status": "failed", "variants": {}, "artefacts": {}, "info": {}, "error": traceback.format_exc()}
    out["seconds"] = time.perf_counter() - start
    return out


class _Signals:
    """SIGINT/SIGTERM handling for one run (installed only in the main thread)."""

    def __init__(self):
        self.signum: int | None = None
        self.count = 0
        self.quiet = False
        self._old: dict[int, Any] = {}

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._old[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc):
        for sig, old in self._old.items():
            signal.signal(sig, old)

    @property
    def stopping(self) -> bool:
        return self.signum is not None

    def _handle(self, signum, frame):
        if self.quiet:
            self.signum = self.signum or signum
            return
        self.count += 1
        name = signal.Signals(signum).name
        if self.count == 1:
            self.signum = signum
            os.write(2, f"\n{name}: no new cells start; the running ones finish and are stored "
                        f"(send {name} again to abandon them)\n".encode())
        elif self.count == 2:
            os.write(2, f"\n{name} again: abandoning the running cells\n".encode())
            raise _Abandon(signum)


def _heartbeat(store: ResultsStore, runner_id: str, stop: threading.Event, every: float) -> None:
    while not stop.wait(every):
        try:
            store.renew(runner_id)
        except Exception:  # the store is busy or closed: the next beat tries again
            pass


def run_grid(
    experiment: str,
    preset: str = "quick",
    store="dubito-results.sqlite",
    executor: str = "local",
    workers: int | None = None,
    scheduler=None,
    datasets=None,
    methods=None,
    device: str = "cpu",
    progress: bool = True,
    console: Console | None = None,
) -> GridSummary:
    """Run the cells of ``experiment``/``preset`` that ``store`` does not hold yet.

    ``executor``: "local" (in-process), "process" (``workers`` processes) or "dask"
    (``scheduler`` address); ``datasets`` / ``methods`` restrict the grid (unknown names
    raise ``ValueError`` listing the valid ones); ``device`` is passed to every cell.
    Returns a `GridSummary`; prints the unavailable data sets, a progress bar with ETA
    (``progress``) and the summary line ``done N, skipped N, failed N in T s``.
    """

    console = console or Console()
    start = time.perf_counter()
    exp = experiments.get(experiment)
    cells = exp.cells(preset, datasets, methods)
    if executor not in KINDS:  # before the store is created
        raise ValueError(f"unknown executor {executor!r}; available: {', '.join(KINDS)}")

    check_device(device)  # 'cuda' without CUDA: one error now, not every cell stored as failed
    check_store_path(store)
    missing = exp.unavailable(exp.preset(preset))
    unavailable = {d: why for d, why in missing.items() if not datasets or d in datasets}
    for dataset, why in unavailable.items():
        console.print(f"[yellow]unavailable:[/yellow] {dataset}: {why}", soft_wrap=True)
    module = experiments._MODULES.get(experiment)
    runner_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"

    with ResultsStore(store) as st:
        done_keys = st.done_keys(exp.name, preset)
        todo = [c for c in cells if c.key not in done_keys]
        summary = GridSummary(0, len(cells) - len(todo), 0, unavailable, 0.0, store=str(Path(store)))
        if todo:
            _run(st, todo, summary, runner_id, module, executor, workers, scheduler, device, progress, console)
    summary.seconds = time.perf_counter() - start
    console.print(summary.line(), soft_wrap=True)
    if summary.interrupted is not None:
        name = signal.Signals(summary.interrupted).name
        console.print(
            f"[yellow]interrupted by {name}:[/yellow] {summary.remaining} cell(s) remain; "
            "run the same command again to finish the grid (stored cells are not recomputed)",
            soft_wrap=True,
        )
    elif summary.busy:
        console.print(f"{summary.busy} cell(s) are being run by another runner on this store")
    return summary


def _run(st, todo, summary, runner_id, module, kind, workers, scheduler, device, progress, console):
    pending: deque[Cell] = deque(todo)
    skipped_before = summary.skipped
    inflight: dict = {}
    bar = Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("ETA"),
        TimeRemainingColumn(), TextColumn("elapsed"), TimeElapsedColumn(),
        console=console, disable=not progress, transient=False,
    )
    task = bar.add_task(f"{todo[0].experiment}/{todo[0].preset}", total=len(todo))
    beat_stop = threading.Event()
    beat = threading.Thread(
        target=_heartbeat, args=(st, runner_id, beat_stop, HEARTBEAT_SECONDS), daemon=True, name="dubito-heartbeat"
    )

    def record(future, cell):
        try:
            out = future.result()
        except CancelledError:
            st.release(cell, runner_id)
            return
        except Exception as exc:  # the executor failed (worker died, lost connection)
            if signals.stopping:
                st.release(cell, runner_id)
                return
            out = {"status": "failed", "error": f"executor error: {type(exc).__name__}: {exc}", "seconds": 0.0}
        if out["status"] == "done":
            result = CellResult(out["variants"], out["artefacts"], out["info"])
            st.write(cell, result, status="done", seconds=out["seconds"], runner_id=runner_id, device=device)
            summary.done += 1
        else:
            st.write(cell, None, status="failed", seconds=out["seconds"], runner_id=runner_id,
                     error=out["error"], device=device)
            summary.failed += 1
            summary.failures.append(str(cell))
            last_line = (out["error"] or "").strip().splitlines()[-1:] or [""]
            console.print(f"[red]failed:[/red] {cell}: {last_line[0]}", soft_wrap=True)
        bar.advance(task)

    with _Signals() as signals:
        try:
            with bar, make_executor(kind, workers=workers, scheduler=scheduler) as ex:
                beat.start()
                capacity, checked = parallelism(ex), time.monotonic()
                while True:
                    if kind == "dask" and time.monotonic() - checked > 5.0:  # the cluster may scale
                        capacity, checked = parallelism(ex), time.monotonic()
                    while pending and not signals.stopping and len(inflight) < capacity:
                        cell = pending.popleft()
                        if not st.claim(cell, runner_id):
                            if st.status(cell) == "done":
                                summary.skipped += 1
                            else:
                                summary.busy += 1
                            bar.update(task, total=bar.tasks[0].total - 1)
                            continue
                        try:
                            future = ex.submit(execute_cell, cell, device, module)
                        except Exception:
                            st.release(cell, runner_id)
                            raise
                        inflight[future] = cell
                    if not inflight:
                        break
                    finished, _ = wait(list(inflight), timeout=1.0, return_when=FIRST_COMPLETED)
                    for future in finished:
                        record(future, inflight.pop(future))
        except _Abandon as stop:
            summary.interrupted = stop.args[0]
        finally:
            signals.quiet = True  # a signal during clean-up must not interrupt it
            beat_stop.set()
            if beat.is_alive():
                beat.join(timeout=5)
            st.release_all(runner_id)
        if signals.stopping and summary.interrupted is None:
            summary.interrupted = signals.signum
    # every cell to do was run now (done/failed), found done or busy, or is left
    summary.remaining = len(todo) - summary.done - summary.failed - (summary.skipped - skipped_before) - summary.busy
