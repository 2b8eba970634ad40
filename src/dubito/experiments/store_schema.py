"""The results store's tables and row: the SQL of `dubito.experiments.store` and `StoredCell`.

See `dubito.experiments.store` for what the tables hold and what the store guarantees.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["APPLICATION", "COLUMNS", "KEY_COLUMNS", "KEY_WHERE", "SCHEMA", "StoredCell", "UPSERT"]

APPLICATION = "dubito-results"
KEY_COLUMNS = ("experiment", "preset", "dataset", "method", "split", "seed")
KEY_WHERE = " AND ".join(f"{c} = ?" for c in KEY_COLUMNS)
COLUMNS = (
    *KEY_COLUMNS, "status", "variants", "artefacts", "info", "settings", "seconds", "version",
    "git_commit", "error", "runner_id", "host", "device", "finished_at",
)
#: insert a row; a 'failed' row is replaced, a 'done' row never (first result wins)
UPSERT = (
    f"INSERT INTO cells ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))}) "
    f"ON CONFLICT ({', '.join(KEY_COLUMNS)}) DO UPDATE SET "
    + ", ".join(f"{c} = excluded.{c}" for c in COLUMNS[len(KEY_COLUMNS):])
    + " WHERE cells.status != 'done'"
)

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS cells (
    experiment TEXT NOT NULL, preset TEXT NOT NULL, dataset TEXT NOT NULL,
    method TEXT NOT NULL, split INTEGER NOT NULL, seed INTEGER NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('done', 'failed')),
    variants TEXT NOT NULL, artefacts TEXT NOT NULL, info TEXT NOT NULL, settings TEXT NOT NULL,
    seconds REAL NOT NULL, version TEXT NOT NULL, git_commit TEXT, error TEXT,
    runner_id TEXT NOT NULL, host TEXT NOT NULL, device TEXT, finished_at TEXT NOT NULL,
    PRIMARY KEY (experiment, preset, dataset, method, split, seed)
);
CREATE TABLE IF NOT EXISTS claims (
    experiment TEXT NOT NULL, preset TEXT NOT NULL, dataset TEXT NOT NULL,
    method TEXT NOT NULL, split INTEGER NOT NULL, seed INTEGER NOT NULL,
    runner_id TEXT NOT NULL, host TEXT NOT NULL, pid INTEGER NOT NULL, claimed_at REAL NOT NULL,
    PRIMARY KEY (experiment, preset, dataset, method, split, seed)
);
CREATE INDEX IF NOT EXISTS claims_runner ON claims (runner_id);
"""


@dataclass
class StoredCell:
    """One row of the store, JSON columns decoded."""

    experiment: str
    preset: str
    dataset: str
    method: str
    split: int
    seed: int
    status: str
    variants: dict
    artefacts: dict
    info: dict
    settings: dict
    seconds: float
    version: str
    commit: str | None
    error: str | None
    finished_at: str  # ISO 8601 UTC
    runner_id: str = ""
    host: str = ""
    device: str | None = None

    @property
    def key(self) -> tuple[str, str, str, str, int, int]:
        return (self.experiment, self.preset, self.dataset, self.method, self.split, self.seed)
