"""Faults: a real `python -m dubito.cli bench` killed mid-grid (SIGTERM, SIGINT, twice, SIGKILL),
two runner processes on one store, an incompatible store through the CLI."""
from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter

import pytest
from typer.testing import CliRunner

from dubito.experiments.runner import run_grid
from dubito.experiments.store import ResultsStore
from tests.experiments import fake_experiment
from tests.experiments.conftest import REPO, runs, subprocess_env

N_SLOW = 16  # cells of the "slow" preset


def _start(store, log, **env):
    return subprocess.Popen(
        [sys.executable, "-m", "dubito.cli", "bench", "fake", "--preset", "slow", "--store", str(store), "--quiet"],
        cwd=REPO, env=subprocess_env(DUBITO_FAKE_LOG=str(log), **env),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )


def _raw_rows(store):
    """key -> the row's stored text exactly as in the file (metrics, artefacts, info, finished_at)."""
    if not store.exists():
        return {}
    conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=30)
    try:
        rows = conn.execute(
            "SELECT dataset, method, split, seed, status, variants, artefacts, info, finished_at FROM cells"
        ).fetchall()
    except sqlite3.OperationalError:  # tables not created yet
        return {}
    finally:
        conn.close()
    return {r[:4]: r[4:] for r in rows}


def _wait_for_rows(proc, store, n, timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"runner ended early ({proc.returncode}): {proc.stdout.read()}")
        if len(_raw_rows(store)) >= n:
            return
        time.sleep(0.05)
    proc.kill()
    pytest.fail("runner stored too few cells in time")


def _finish_and_check(store, log, before):
    """Re-run in this process: the grid completes; rows stored before are byte-identical."""
    summary = run_grid("fake", preset="slow", store=store, progress=False)
    after = _raw_rows(store)
    assert (summary.done, summary.skipped, summary.failed) == (N_SLOW - len(before), len(before), 0)
    assert len(after) == N_SLOW and all(row[0] == "done" for row in after.values())
    for key, row in before.items():
        assert after[key] == row  # metrics and finished_at: not recomputed, not rewritten
    for (dataset, method, split, seed), row in after.items():
        assert row[1] == json.dumps(fake_experiment.numbers(dataset, method, split, seed))
    with ResultsStore(store) as st:
        assert st.claims() == []
    return summary


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_mid_grid_then_rerun_completes(fake, tmp_path, monkeypatch, sig):
    store = tmp_path / "r.sqlite"
    proc = _start(store, fake)
    _wait_for_rows(proc, store, 2)
    proc.send_signal(sig)
    output, _ = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig, output
    before = _raw_rows(store)
    assert 2 <= len(before) < N_SLOW, output
    remain = N_SLOW - len(before)
    assert f"interrupted by {sig.name}: {remain} cell(s) remain" in output
    assert f"done {len(before)}, skipped 0, failed 0" in output
    with ResultsStore(store) as st:
        assert st.claims() == []  # released on the way out
    # graceful: the cell running at the signal finished and was stored, nothing ran twice
    assert sorted(Counter(runs(fake)).values()) == [1] * len(before)
    monkeypatch.setenv("DUBITO_FAKE_SLEEP", "0")
    _finish_and_check(store, fake, before)
    assert sorted(Counter(runs(fake)).values()) == [1] * N_SLOW


def test_second_signal_abandons_the_running_cell(fake, tmp_path, monkeypatch):
    store = tmp_path / "r.sqlite"
    proc = _start(store, fake, DUBITO_FAKE_SLEEP="0.5")  # both signals land inside one cell
    _wait_for_rows(proc, store, 2)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, output
    assert "abandoning the running cells" in output
    before = _raw_rows(store)
    with ResultsStore(store) as st:
        assert st.claims() == []
    monkeypatch.setenv("DUBITO_FAKE_SLEEP", "0")
    _finish_and_check(store, fake, before)


def test_sigkill_leaves_no_partial_rows_and_stale_claims_are_reclaimed(fake, tmp_path, monkeypatch):
    store = tmp_path / "r.sqlite"
    proc = _start(store, fake)
    _wait_for_rows(proc, store, 2)
    proc.kill()
    proc.wait(timeout=30)
    before = _raw_rows(store)
    conn = sqlite3.connect(store)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    nulls = conn.execute(
        "SELECT count(*) FROM cells WHERE variants IS NULL OR finished_at IS NULL OR version IS NULL OR status != 'done'"
    ).fetchone()[0]
    conn.close()
    assert nulls == 0 and all(row[1].startswith("{") for row in before.values())
    with ResultsStore(store) as st:
        claims = st.claims()
    assert len(claims) <= 1 and all(c["pid"] == proc.pid for c in claims)  # the cell it was running
    monkeypatch.setenv("DUBITO_FAKE_SLEEP", "0")
    summary = _finish_and_check(store, fake, before)
    assert summary.busy == 0  # the dead runner's claim was taken over


def test_two_runner_processes_on_one_store(fake, tmp_path):
    store = tmp_path / "r.sqlite"
    ResultsStore(store).close()
    procs = [_start(store, fake, DUBITO_FAKE_SLEEP="0.1") for _ in range(2)]
    outputs = [p.communicate(timeout=120)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    assert sorted(Counter(runs(fake)).values()) == [1] * N_SLOW  # no cell ran twice
    rows = _raw_rows(store)
    assert len(rows) == N_SLOW and all(r[0] == "done" for r in rows.values())
    with ResultsStore(store) as st:
        assert st.claims() == []


def test_cli_refuses_incompatible_store_unchanged(fake, tmp_path):
    from dubito.cli import app

    store = tmp_path / "old.sqlite"
    run_grid("fake", store=store, methods=["good"], progress=False)
    conn = sqlite3.connect(store)
    with conn:
        conn.execute("UPDATE meta SET value = '0' WHERE key = 'schema_version'")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    before = store.read_bytes()
    result = CliRunner().invoke(app, ["bench", "fake", "--store", str(store), "--quiet"])
    assert result.exit_code == 2
    text = " ".join(result.output.split())
    assert "schema version 0" in text and "schema version 1" in text and "unchanged" in text
    assert store.read_bytes() == before
    assert len(runs(fake)) == 8  # nothing ran on the refused store
