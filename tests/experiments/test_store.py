"""ResultsStore: rows as JSON, done/failed semantics, atomic claims, refusing foreign files."""
from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone

import pytest

import dubito
from dubito.experiments.base import Cell, CellResult
from dubito.experiments.provenance import git_commit
from dubito.experiments.store import ResultsStore, StoredCell

CELL = Cell("exp", "quick", "yacht", "de", 0, 1, {"epochs": 3, "hidden": [8]})
OTHER = Cell("exp", "quick", "yacht", "de", 1, 1, {"epochs": 3})
RESULT = CellResult(
    variants={"DE": {"rmse": 1.5, "nll": float("nan")}, "EXT": {"rmse": 1.25, "nll": 2.0}},
    artefacts={"pit": {"DE": [0.1, 0.9]}},
    info={"n_train": 200, "gammas": [0.1, 0.2]},
)


def test_round_trip_all_fields(tmp_path):
    path = tmp_path / "r.sqlite"
    with ResultsStore(path) as store:
        assert store.claim(CELL, "r1")
        store.write(CELL, RESULT, status="done", seconds=2.5, runner_id="r1", device="cpu")
        assert store.claims() == []  # the write released the claim
    with ResultsStore(path, create=False) as store:
        [row] = store.rows("exp")
    assert isinstance(row, StoredCell)
    assert row.key == CELL.key and row.status == "done" and row.error is None
    assert row.variants["DE"]["rmse"] == 1.5 and row.variants["EXT"] == {"rmse": 1.25, "nll": 2.0}
    assert row.variants["DE"]["nll"] != row.variants["DE"]["nll"]  # NaN survives
    assert list(row.variants) == ["DE", "EXT"]  # order kept
    assert row.artefacts == RESULT.artefacts and row.info == RESULT.info
    assert row.settings == {"epochs": 3, "hidden": [8]}
    assert row.seconds == 2.5 and row.version == dubito.__version__ and row.device == "cpu"
    assert row.commit == git_commit()
    finished = datetime.fromisoformat(row.finished_at)
    assert finished.tzinfo is not None and finished.utcoffset().total_seconds() == 0
    assert abs((datetime.now(timezone.utc) - finished).total_seconds()) < 60


def test_wal_mode_and_json_text_columns(tmp_path):
    path = tmp_path / "r.sqlite"
    with ResultsStore(path) as store:
        store.write(CELL, RESULT, status="done", seconds=1.0, runner_id="r1")
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    raw = conn.execute("SELECT variants, artefacts, info, settings FROM cells").fetchone()
    conn.close()
    assert all(isinstance(v, str) for v in raw)
    assert json.loads(raw[1]) == RESULT.artefacts  # plain JSON text, not pickle


def test_git_commit_none_outside_a_checkout(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert git_commit() is None
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=dubito.__file__.rsplit("/src/", 1)[0],
                          capture_output=True, text=True)
    if head.returncode == 0:  # the cache forgotten first: HEAD may have moved since this process asked
        from dubito.experiments.provenance import _git_commit_of

        _git_commit_of.cache_clear()
        assert git_commit(dubito.__file__.rsplit("/src/", 1)[0]).startswith(head.stdout.strip())


def test_done_keys_failed_rows_and_replacement(tmp_path):
    with ResultsStore(tmp_path / "r.sqlite") as store:
        store.write(CELL, None, status="failed", seconds=0.1, runner_id="r1", error="Traceback: boom")
        assert store.done_keys("exp", "quick") == set()
        [failed] = store.rows("exp", status="failed")
        assert failed.error == "Traceback: boom" and failed.variants == {}
        # a failed row is replaced by a later successful run
        store.write(CELL, RESULT, status="done", seconds=1.0, runner_id="r2")
        assert store.done_keys("exp", "quick") == {CELL.key}
        assert store.rows("exp", status="failed") == []
        first = store.rows("exp")[0]
        # a done row is never replaced: neither by a failure nor by another result
        store.write(CELL, None, status="failed", seconds=0.1, runner_id="r3", error="late")
        store.write(CELL, CellResult({"DE": {"rmse": 99.0}}), status="done", seconds=1.0, runner_id="r3")
        assert store.rows("exp", status=None) == [first]
        # filters
        store.write(OTHER, RESULT, status="done", seconds=1.0, runner_id="r1")
        assert store.done_keys("exp", "quick") == {CELL.key, OTHER.key}
        assert store.done_keys("exp", "paper") == set() and store.rows("nope") == []
        assert len(store.rows("exp", preset="quick")) == 2 and store.rows("exp", preset="paper") == []


def test_write_refuses_bad_status_and_non_json(tmp_path):
    with ResultsStore(tmp_path / "r.sqlite") as store:
        with pytest.raises(ValueError, match="status"):
            store.write(CELL, RESULT, status="ok", seconds=1.0, runner_id="r1")
        with pytest.raises(ValueError, match="CellResult"):
            store.write(CELL, None, status="done", seconds=1.0, runner_id="r1")
        with pytest.raises(TypeError, match="JSON"):
            store.write(CELL, CellResult({"DE": {"rmse": object()}}), status="done", seconds=1.0, runner_id="r1")
        assert store.rows("exp", status=None) == []


def test_claims(tmp_path):
    with ResultsStore(tmp_path / "r.sqlite") as a, ResultsStore(tmp_path / "r.sqlite") as b:
        assert a.claim(CELL, "ra")
        assert a.claim(CELL, "ra")  # own claim: renewed
        assert not b.claim(CELL, "rb")  # live claim of another runner
        assert b.claim(OTHER, "rb")
        a.release(CELL, "rb")  # not rb's claim: nothing happens
        assert not b.claim(CELL, "rb")
        a.release(CELL, "ra")
        assert b.claim(CELL, "rb")
        b.write(CELL, RESULT, status="done", seconds=1.0, runner_id="rb")
        assert not a.claim(CELL, "ra")  # done cells cannot be claimed
        assert b.renew("rb") == 1 and b.release_all("rb") == 1 and a.claims() == []


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_stale_claims_are_taken_over(tmp_path):
    path = tmp_path / "r.sqlite"
    with ResultsStore(path) as store:
        assert store.claim(CELL, "dead-runner")
        assert store.claim(OTHER, "remote-runner")
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE claims SET pid = ? WHERE runner_id = 'dead-runner'", (_dead_pid(),))
        conn.execute("UPDATE claims SET host = 'elsewhere' WHERE runner_id = 'remote-runner'")
    conn.close()
    with ResultsStore(path, lease_seconds=3600) as store:
        assert store.claim(CELL, "me")  # its process is gone
        assert not store.claim(OTHER, "me")  # another host, lease not expired
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE claims SET claimed_at = ? WHERE runner_id = 'remote-runner'", (time.time() - 7200,))
    conn.close()
    with ResultsStore(path, lease_seconds=3600) as store:
        assert store.claim(OTHER, "me")  # lease expired
        assert {c["runner_id"] for c in store.claims()} == {"me"}


def test_concurrent_claims_one_winner(tmp_path):
    path = tmp_path / "r.sqlite"
    ResultsStore(path).close()
    wins, barrier = [], threading.Barrier(6)

    def contend(i):
        with ResultsStore(path) as store:
            barrier.wait()
            if store.claim(CELL, f"r{i}"):
                wins.append(i)

    threads = [threading.Thread(target=contend, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 1


def test_missing_store_with_create_false(tmp_path):
    with pytest.raises(FileNotFoundError, match="no results store"):
        ResultsStore(tmp_path / "absent.sqlite", create=False)
    assert not (tmp_path / "absent.sqlite").exists()


def _bytes(path):
    return path.read_bytes(), sorted(p.name for p in path.parent.iterdir())


def test_incompatible_schema_version_refused_file_unchanged(tmp_path):
    path = tmp_path / "old.sqlite"
    with ResultsStore(path) as store:
        store.write(CELL, RESULT, status="done", seconds=1.0, runner_id="r1")
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    before = _bytes(path)
    with pytest.raises(ValueError) as info:
        ResultsStore(path)
    message = str(info.value)
    assert str(path) in message and "schema version 99" in message and "schema version 1" in message
    assert "unchanged" in message
    assert _bytes(path) == before


def test_foreign_sqlite_file_refused_unchanged(tmp_path):
    path = tmp_path / "foreign.sqlite"
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("CREATE TABLE cells (x INTEGER)")
        conn.execute("INSERT INTO cells VALUES (1)")
    conn.close()
    before = _bytes(path)
    with pytest.raises(ValueError, match="not a dubito results store") as info:
        ResultsStore(path)
    assert str(path) in str(info.value) and "version 1" in str(info.value)
    assert _bytes(path) == before


def test_non_sqlite_file_refused_unchanged(tmp_path):
    path = tmp_path / "notes.sqlite"
    path.write_bytes(b"these are my notes, not a database\n" * 50)
    before = _bytes(path)
    with pytest.raises(ValueError, match="not a dubito results store") as info:
        ResultsStore(path)
    assert str(path) in str(info.value)
    assert _bytes(path) == before


def test_two_stores_created_at_once(tmp_path):
    path, errors = tmp_path / "new.sqlite", []
    barrier = threading.Barrier(4)

    def create():
        try:
            barrier.wait()
            ResultsStore(path).close()
        except Exception as exc:  # pragma: no cover - the failure we look for
            errors.append(exc)

    threads = [threading.Thread(target=create) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    conn = sqlite3.connect(path)
    assert dict(conn.execute("SELECT key, value FROM meta"))["schema_version"] == "1"
    conn.close()


def test_git_commit_dirty_ignores_generated_reports(tmp_path):
    """A rewritten report under docs/results does not mark the code dirty; any other change does."""
    import subprocess

    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "docs" / "results").mkdir(parents=True)
    (tmp_path / "docs" / "results" / "uci.md").write_text("old")
    (tmp_path / "code.py").write_text("x = 1")
    git("add", "-A")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")
    (tmp_path / "docs" / "results" / "uci.md").write_text("new")
    (tmp_path / "docs" / "results" / "plot.png").write_bytes(b"png")
    clean = git_commit(tmp_path / "docs")  # any folder of the checkout; cached per folder
    assert clean is not None and not clean.endswith("-dirty")
    (tmp_path / "code.py").write_text("x = 2")
    assert git_commit(tmp_path).endswith("-dirty")
