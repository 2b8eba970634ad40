"""The results store: one SQLite file (WAL mode), one row per cell.

Tables (their SQL and the row type `StoredCell` are in `dubito.experiments.store_schema`)
    ``meta``    key/value: ``application`` = "dubito-results", ``schema_version``,
                ``created_by`` (package version that created the file), ``created_at``.
    ``cells``   one row per (experiment, preset, dataset, method, split, seed): status
                ('done' | 'failed'), the metrics (``variants``), ``artefacts``, ``info`` and the
                cell's ``settings`` as JSON text (never pickle), seconds, package version, git
                commit, error text, runner id, host, device, finished_at (ISO 8601 UTC).
    ``claims``  cells some runner is working on now: runner id, host, pid, time of claim
                (renewed by the runner's heartbeat).

Guarantees
    * Every change is one SQLite transaction, so a killed process (even SIGKILL) leaves the
      old state or the new one, never a partial row. `write` stores the row *and* drops the
      claim in the same transaction.
    * `claim` runs under ``BEGIN IMMEDIATE`` (one writer at a time), so two runners on one
      store never both claim a cell; a cell that is done cannot be claimed.
    * A 'done' row is never replaced (first result wins: the numbers of finished cells never
      change); a 'failed' row is replaced by a later run of the cell.
    * A claim is *stale*, and may be taken over, when its process is gone (same host, pid no
      longer alive) or it has not been renewed for ``lease_seconds`` (other hosts).
    * Opening a file of another schema version, a SQLite file that is not a dubito store, or a
      file that is not SQLite raises ``ValueError`` naming the path and both versions; the
      file's bytes are not changed (the check only reads; WAL mode is switched on afterwards).

Stores live on a local disk: SQLite's WAL mode needs shared memory, which network file
systems do not provide. Workers never open the store; the runner's main process writes.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

from dubito.experiments.base import Cell, CellResult
from dubito.experiments.provenance import git_commit, package_version
from dubito.experiments.store_schema import (
    APPLICATION,
    KEY_COLUMNS,
    KEY_WHERE,
    SCHEMA,
    UPSERT,
    StoredCell,
)

__all__ = ["ResultsStore", "StoredCell"]


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    try:  # a killed child nobody has reaped yet is a zombie: dead for our purposes
        with open(f"/proc/{pid}/stat", "rb") as fh:
            state = fh.read().rsplit(b")", 1)[1].split()[0]
        return state not in (b"Z", b"X")
    except (OSError, IndexError):
        return True


def _dumps(value: Any, what: str) -> str:
    try:
        return json.dumps(value, allow_nan=True)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{what} is not JSON-serialisable: {exc}") from None


def _now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


class ResultsStore:
    """SQLite results store of experiment cells (see the module docstring).

    ``path``: the file; ``create``: make it when missing (else ``FileNotFoundError``);
    ``lease_seconds``: a claim not renewed for this long may be taken over by another runner
    (a runner renews its claims while it lives, see `renew`).
    Safe to share between threads of one process (one connection behind a lock); each
    process opens its own.
    """

    SCHEMA_VERSION = 1
    LEASE_SECONDS = 1800.0

    def __init__(self, path, *, create: bool = True, lease_seconds: float | None = None):
        self.path = Path(path)
        self.lease_seconds = float(self.LEASE_SECONDS if lease_seconds is None else lease_seconds)
        self.host = socket.gethostname()
        self.pid = os.getpid()
        self._lock = threading.RLock()
        self._conn = None
        if not self.path.exists():
            if not create:
                raise FileNotFoundError(f"no results store at {self.path}")
            self.path.parent.mkdir(parents=True, exist_ok=True)
        elif self.path.is_dir():
            raise ValueError(f"{self.path} is a directory, not a results store")
        self.version = package_version()
        self._commit: str | None | bool = False  # computed on first write
        conn = sqlite3.connect(str(self.path), timeout=60.0, isolation_level=None, check_same_thread=False)
        try:
            self._open(conn)
        except BaseException:
            conn.close()
            raise
        self._conn = conn

    # ------------------------------------------------------------------ opening
    def _refuse(self, found: str) -> ValueError:
        return ValueError(
            f"{self.path} {found}; this dubito ({package_version()}) reads results-store schema "
            f"version {self.SCHEMA_VERSION}. The file was left unchanged: choose another --store, "
            f"or use the dubito version that wrote it."
        )

    def _read_meta(self, conn) -> dict[str, str] | None:
        """meta as a dict; None for an empty database. Only reads."""
        try:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        except sqlite3.DatabaseError as exc:
            raise self._refuse(f"is not a dubito results store (not a SQLite database: {exc}; found schema version: none)") from None
        if not tables:
            return None
        if "meta" not in tables:
            raise self._refuse("is a SQLite database but not a dubito results store (found schema version: none)")
        try:
            meta = dict(conn.execute("SELECT key, value FROM meta"))
        except sqlite3.DatabaseError:
            raise self._refuse("is a SQLite database but not a dubito results store (found schema version: none)") from None
        if meta.get("application") != APPLICATION:
            raise self._refuse("is a SQLite database but not a dubito results store (found schema version: none)")
        return meta

    def _check(self, meta: dict[str, str]) -> None:
        found = meta.get("schema_version")
        if found != str(self.SCHEMA_VERSION):
            raise self._refuse(
                f"is a dubito results store of schema version {found} (created by dubito {meta.get('created_by', '?')})"
            )

    def _open(self, conn) -> None:
        meta = self._read_meta(conn)
        if meta is not None:
            self._check(meta)  # refuse before anything is written
        # Switching to WAL needs the file to itself, and SQLite does not wait for that (no
        # busy handler), so runners creating one store at the same moment retry.
        deadline = time.monotonic() + 60.0
        while True:
            try:
                if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                    conn.execute("PRAGMA journal_mode = WAL")
                break
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        conn.execute("PRAGMA synchronous = NORMAL")  # durable at checkpoints; atomic always (WAL)
        if meta is None:
            conn.execute("BEGIN IMMEDIATE")
            try:
                for statement in filter(str.strip, SCHEMA.split(";")):
                    conn.execute(statement)
                rows = {
                    "application": APPLICATION,
                    "schema_version": str(self.SCHEMA_VERSION),
                    "created_by": package_version(),
                    "created_at": _now_iso(),
                }
                conn.executemany("INSERT OR IGNORE INTO meta (key, value) VALUES (?, ?)", rows.items())
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            meta = self._read_meta(conn)  # another process may have created it first
            self._check(meta)

    # ------------------------------------------------------------------ helpers
    @property
    def commit(self) -> str | None:
        """Git commit of the working directory, computed once (see `git_commit`)."""
        if self._commit is False:
            self._commit = git_commit()
        return self._commit

    def _tx(self, fn):
        """Run ``fn(conn)`` in one BEGIN IMMEDIATE transaction; roll back on any exception."""
        with self._lock:
            conn = self._conn
            if conn is None:
                raise ValueError(f"results store {self.path} is closed")
            conn.execute("BEGIN IMMEDIATE")
            try:
                out = fn(conn)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return out

    def _query(self, sql: str, params=()) -> list[tuple]:
        with self._lock:
            if self._conn is None:
                raise ValueError(f"results store {self.path} is closed")
            return self._conn.execute(sql, params).fetchall()

    # ------------------------------------------------------------------ reading
    def done_keys(self, experiment: str, preset: str) -> set[tuple]:
        """`Cell.key` of the cells of ``experiment``/``preset`` stored with status 'done'."""
        rows = self._query(
            f"SELECT {', '.join(KEY_COLUMNS)} FROM cells WHERE experiment = ? AND preset = ? AND status = 'done'",
            (experiment, preset),
        )
        return {tuple(r) for r in rows}

    def status(self, cell: Cell) -> str | None:
        """'done', 'failed', or None when the store has no row for ``cell``."""
        rows = self._query(f"SELECT status FROM cells WHERE {KEY_WHERE}", cell.key)
        return rows[0][0] if rows else None

    def rows(self, experiment: str, preset: str | None = None, status: str | None = "done") -> list[StoredCell]:
        """Rows of ``experiment`` (optionally one preset; ``status=None`` for all statuses),
        ordered by preset, dataset, method, split, seed."""
        sql = (
            "SELECT experiment, preset, dataset, method, split, seed, status, variants, artefacts, info, "
            "settings, seconds, version, git_commit, error, finished_at, runner_id, host, device "
            "FROM cells WHERE experiment = ?"
        )
        params: list[Any] = [experiment]
        if preset is not None:
            sql += " AND preset = ?"
            params.append(preset)
        if status is not None:
            sql += " AND status = ?"
            params.append(status)
        sql += " ORDER BY preset, dataset, method, split, seed"
        out = []
        for r in self._query(sql, params):
            out.append(
                StoredCell(
                    *r[:7], json.loads(r[7]), json.loads(r[8]), json.loads(r[9]), json.loads(r[10]), *r[11:]
                )
            )
        return out

    def claims(self) -> list[dict]:
        """Current claims (for diagnostics): key columns, runner_id, host, pid, claimed_at."""
        cols = (*KEY_COLUMNS, "runner_id", "host", "pid", "claimed_at")
        return [dict(zip(cols, r)) for r in self._query(f"SELECT {', '.join(cols)} FROM claims")]

    # ------------------------------------------------------------------ claims
    def _stale(self, host: str, pid: int, claimed_at: float) -> bool:
        if time.time() - claimed_at > self.lease_seconds:
            return True
        return host == self.host and not _pid_alive(pid)

    def claim(self, cell: Cell, runner_id: str) -> bool:
        """Claim ``cell`` for ``runner_id``: True when it is not done and not claimed by
        another live runner (a stale claim is taken over; the runner's own claim is renewed)."""

        def tx(conn):
            if conn.execute(f"SELECT 1 FROM cells WHERE {KEY_WHERE} AND status = 'done'", cell.key).fetchone():
                return False
            row = conn.execute(f"SELECT runner_id, host, pid, claimed_at FROM claims WHERE {KEY_WHERE}", cell.key).fetchone()
            if row is not None and row[0] != runner_id and not self._stale(row[1], row[2], row[3]):
                return False
            conn.execute(
                f"INSERT OR REPLACE INTO claims ({', '.join(KEY_COLUMNS)}, runner_id, host, pid, claimed_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (*cell.key, runner_id, self.host, self.pid, time.time()),
            )
            return True

        return self._tx(tx)

    def release(self, cell: Cell, runner_id: str) -> None:
        """Drop ``runner_id``'s claim on ``cell`` (no-op when it holds none)."""
        self._tx(lambda conn: conn.execute(f"DELETE FROM claims WHERE {KEY_WHERE} AND runner_id = ?", (*cell.key, runner_id)))

    def release_all(self, runner_id: str) -> int:
        """Drop every claim of ``runner_id``; returns how many there were."""
        return self._tx(lambda conn: conn.execute("DELETE FROM claims WHERE runner_id = ?", (runner_id,)).rowcount)

    def renew(self, runner_id: str) -> int:
        """Heartbeat: refresh the time of all of ``runner_id``'s claims; returns their number."""
        return self._tx(
            lambda conn: conn.execute("UPDATE claims SET claimed_at = ? WHERE runner_id = ?", (time.time(), runner_id)).rowcount
        )

    # ------------------------------------------------------------------ writing
    def write(
        self,
        cell: Cell,
        result: CellResult | None,
        *,
        status: str,
        seconds: float,
        runner_id: str,
        error: str | None = None,
        device: str | None = None,
    ) -> None:
        """Store ``cell``'s row and drop ``runner_id``'s claim, in ONE transaction.

        ``status``: 'done' (``result`` required) or 'failed' (``error`` text; ``result`` may
        be None). A 'failed' row is replaced by a later write; a 'done' row is never replaced
        (the write is then a no-op apart from dropping the claim).
        """
        if status not in ("done", "failed"):
            raise ValueError(f"status must be 'done' or 'failed', got {status!r}")
        if status == "done" and result is None:
            raise ValueError("a 'done' cell needs its CellResult")
        result = result or CellResult(variants={})
        values = (
            *cell.key,
            status,
            _dumps(result.variants, "variants"),
            _dumps(result.artefacts, "artefacts"),
            _dumps(result.info, "info"),
            _dumps(dict(cell.settings), "settings"),
            float(seconds),
            self.version,
            self.commit,
            error,
            runner_id,
            self.host,
            device,
            _now_iso(),
        )

        def tx(conn):
            conn.execute(UPSERT, values)
            conn.execute(f"DELETE FROM claims WHERE {KEY_WHERE} AND runner_id = ?", (*cell.key, runner_id))

        self._tx(tx)

    def insert_done(self, cells: list[StoredCell]) -> int:
        """Add finished cells from elsewhere (`dubito.experiments.store_transfer`) with their
        own provenance (version, commit, runner, host, device, finish time), in ONE
        transaction; return how many were added. A cell the store holds as 'done' is kept
        (first result wins); a 'failed' row is replaced."""
        values = []
        for c in cells:
            if c.status != "done":
                raise ValueError(f"only finished cells can be inserted; {c.key} has status {c.status!r}")
            values.append((
                *c.key, c.status, _dumps(c.variants, "variants"), _dumps(c.artefacts, "artefacts"),
                _dumps(c.info, "info"), _dumps(c.settings, "settings"), float(c.seconds), str(c.version),
                c.commit, c.error, c.runner_id, c.host, c.device, c.finished_at,
            ))

        def tx(conn):
            before = conn.total_changes
            for v in values:
                conn.execute(UPSERT, v)
            return conn.total_changes - before

        return self._tx(tx)

    def rename_method(self, experiment: str, old: str, new: str, datasets: Sequence[str] | None = None) -> int:
        """Give ``experiment``'s cells of method ``old`` the name ``new`` (when a method is renamed,
        so that the stored cells keep counting as done); return how many were renamed. Only the cells
        of ``datasets`` when given (a default that changed on some data sets only). A variant
        named ``old`` in those cells (experiments that key their variants by the method, as the
        leaderboard does) is renamed too, in place. Refused while a runner holds a claim on ``old``
        or when a cell of ``new`` has the same key."""
        if not new.strip():
            raise ValueError("the new method name is empty")
        if datasets is not None and not datasets:
            raise ValueError("datasets is empty: name at least one, or pass None for every data set")
        only = "" if datasets is None else f" AND dataset IN ({', '.join('?' * len(datasets))})"
        picked = () if datasets is None else tuple(datasets)

        def tx(conn):
            where = "experiment = ? AND method = ?"
            claimed = conn.execute(f"SELECT 1 FROM claims WHERE {where}{only} LIMIT 1", (experiment, old, *picked))
            if claimed.fetchone():
                raise ValueError(f"a runner is working on {experiment} cells of {old!r}; rename when it has finished")
            clash = conn.execute(
                "SELECT a.preset, a.dataset, a.split, a.seed FROM cells a JOIN cells b USING "
                "(experiment, preset, dataset, split, seed) WHERE a.experiment = ? AND a.method = ? AND b.method = ?"
                + only.replace("dataset", "a.dataset") + " LIMIT 1", (experiment, old, new, *picked)).fetchone()
            if clash:
                raise ValueError(f"the store holds {experiment} cells of both {old!r} and {new!r} "
                                 f"(e.g. preset {clash[0]}, {clash[1]}, split {clash[2]}, seed {clash[3]})")
            keyed = conn.execute(f"SELECT preset, dataset, split, seed, variants FROM cells WHERE {where}{only}",
                                 (experiment, old, *picked)).fetchall()
            for preset, dataset, split, seed, text in keyed:
                variants = json.loads(text)
                if isinstance(variants, dict) and old in variants:
                    renamed = {new if k == old else k: v for k, v in variants.items()}
                    conn.execute(f"UPDATE cells SET variants = ? WHERE {where} AND preset = ? AND dataset = ? "
                                 "AND split = ? AND seed = ?",
                                 (_dumps(renamed, "variants"), experiment, old, preset, dataset, split, seed))
            renamed = conn.execute(f"UPDATE cells SET method = ? WHERE {where}{only}", (new, experiment, old, *picked))
            return renamed.rowcount

        return self._tx(tx)

    # ------------------------------------------------------------------ lifetime
    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> "ResultsStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        return f"ResultsStore({str(self.path)!r})"
