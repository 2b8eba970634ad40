"""Executors: the in-process one, a process pool and a Dask LocalCluster give the same numbers."""
from __future__ import annotations

import socket
import sys

import pytest

from dubito.experiments.executors import ExecutorUnavailable, InProcessExecutor, make_executor, parallelism
from dubito.experiments.runner import run_grid
from dubito.experiments.store import ResultsStore
from tests.experiments import fake_experiment


def _numbers(path, preset="quick"):
    """Everything a cell computed, per key (not timings, host, runner)."""
    with ResultsStore(path, create=False) as store:
        return {r.key: (r.status, r.variants, r.artefacts, r.info, r.settings) for r in store.rows("fake", preset, status=None)}


@pytest.fixture
def local_numbers(fake, tmp_path):
    path = tmp_path / "local.sqlite"
    run_grid("fake", store=path, progress=False)
    run_grid("fake", preset="faulty", store=path, progress=False)
    return {"quick": _numbers(path), "faulty": _numbers(path, "faulty")}


def test_unknown_kind_and_bad_workers():
    with pytest.raises(ValueError, match="unknown executor 'threads'; available: local, process, dask"):
        with make_executor("threads"):
            pass
    with pytest.raises(ValueError, match="positive integer"):
        with make_executor("process", workers=0):
            pass


def test_in_process_executor_runs_at_submit():
    calls = []
    with make_executor("local") as ex:
        assert isinstance(ex, InProcessExecutor) and parallelism(ex) == 1
        future = ex.submit(calls.append, 1)
        assert calls == [1] and future.done() and future.result() is None  # ran at submit
        failing = ex.submit(lambda: 1 / 0)
        assert isinstance(failing.exception(), ZeroDivisionError)
        with pytest.raises(KeyboardInterrupt):  # BaseExceptions (Ctrl-C) are not swallowed
            ex.submit(_raise_keyboard_interrupt)
    with pytest.raises(RuntimeError, match="after shutdown"):
        ex.submit(calls.append, 2)


def _raise_keyboard_interrupt():
    raise KeyboardInterrupt


def test_process_pool_same_numbers_and_one_thread(local_numbers, tmp_path):
    path = tmp_path / "process.sqlite"
    with make_executor("process", workers=1) as ex:
        assert parallelism(ex) == 1
        assert ex.submit(fake_experiment.torch_threads).result(timeout=120) == 1
    summary = run_grid("fake", store=path, executor="process", workers=2, progress=False)
    faulty = run_grid("fake", preset="faulty", store=path, executor="process", workers=2, progress=False)
    assert (summary.done, faulty.done, faulty.failed) == (16, 4, 2)
    assert _numbers(path) == local_numbers["quick"]
    assert _numbers(path, "faulty").keys() == local_numbers["faulty"].keys()
    for key, (status, variants, *_rest) in _numbers(path, "faulty").items():
        assert (status, variants) == local_numbers["faulty"][key][:2]


def test_dask_local_cluster_same_numbers(local_numbers, tmp_path):
    distributed = pytest.importorskip("distributed")
    path = tmp_path / "dask.sqlite"
    with distributed.LocalCluster(
        host="127.0.0.1", protocol="tcp", n_workers=1, threads_per_worker=1, dashboard_address=None, processes=False
    ) as cluster:
        address = cluster.scheduler_address
        assert address.startswith("tcp://127.0.0.1:")
        summary = run_grid("fake", store=path, executor="dask", scheduler=address, progress=False)
        faulty = run_grid("fake", preset="faulty", store=path, executor="dask", scheduler=address, progress=False)
    assert (summary.done, summary.failed, faulty.done, faulty.failed) == (16, 0, 4, 2)
    assert _numbers(path) == local_numbers["quick"]
    for key, (status, variants, *_rest) in _numbers(path, "faulty").items():
        assert (status, variants) == local_numbers["faulty"][key][:2]


def test_dask_errors(monkeypatch):
    pytest.importorskip("distributed")
    import dask

    with pytest.raises(ExecutorUnavailable, match="needs --scheduler"):
        with make_executor("dask"):
            pass
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):
        with pytest.raises(ValueError, match=f"cannot reach the Dask scheduler at tcp://127.0.0.1:{port}"):
            with make_executor("dask", scheduler=f"tcp://127.0.0.1:{port}"):
                pass
    monkeypatch.setitem(sys.modules, "distributed", None)  # as if dask were not installed
    with pytest.raises(ValueError, match=r"pip install dubito\[distributed\]"):
        with make_executor("dask", scheduler="tcp://127.0.0.1:8786"):
            pass
