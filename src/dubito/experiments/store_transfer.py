"""A results store's finished cells as JSON Lines text, and back.

A store is a SQLite file on a local disk: a machine that is replaced takes it, and every CPU
hour in it, along. The JSON Lines file is the durable, diffable form that can be committed
beside a report: the first line a header (``application``, ``format``, ``schema_version``),
then one finished cell per line with every column of `StoredCell` (metrics, artefacts,
settings, and the provenance: version, commit, runner, host, device, finish time), sorted by
key. `export_cells` writes it atomically; `import_cells` adds the cells a store lacks, keeping
their provenance, and never replaces a finished cell (first result wins, as in the store).
A path ending in ".gz" is written gzipped, and a gzipped file is read as such (a results page's
cells over `GZIP_OVER_BYTES`).
"""

from __future__ import annotations

import gzip
import json
import math
from dataclasses import asdict, fields
from datetime import datetime
from pathlib import Path

from dubito.experiments.store import APPLICATION, ResultsStore, StoredCell
from dubito.io import atomic_write_bytes

__all__ = ["export_cells", "import_cells", "FORMAT"]

FORMAT = "dubito-cells-jsonl"
_FIELDS = {f.name for f in fields(StoredCell)}
_REQUIRED = _FIELDS - {"runner_id", "host", "device"}  # the fields without a default
_STR, _OPT_STR = (str,), (str, type(None))
#: the JSON type each field must have (bool is refused where a number is expected)
_TYPES = {
    "experiment": _STR, "preset": _STR, "dataset": _STR, "method": _STR, "split": (int,), "seed": (int,),
    "status": _STR, "variants": (dict,), "artefacts": (dict,), "info": (dict,), "settings": (dict,),
    "seconds": (int, float), "version": _STR, "commit": _OPT_STR, "error": _OPT_STR, "finished_at": _STR,
    "runner_id": _STR, "host": _STR, "device": _OPT_STR,
}
assert _TYPES.keys() == _FIELDS, "keep _TYPES in step with StoredCell"


def _wrong_types(row: dict) -> list[str]:
    """The fields of ``row`` whose value has the wrong JSON type, as 'name (got type)'."""
    return [
        f"{name} ({type(value).__name__})" for name, value in row.items()
        if isinstance(value, bool) or not isinstance(value, _TYPES[name])
    ]


_INT64 = 2**63


def _wrong_values(row: dict) -> list[str]:
    """The fields of ``row`` (types already checked) whose value a finished cell cannot have."""
    bad = [f"{name} is empty" for name in ("experiment", "preset", "dataset", "method") if not row[name].strip()]
    if not 0 <= row["split"] < _INT64:
        bad.append(f"split {row['split']} (a split is an index >= 0)")
    if not -_INT64 <= row["seed"] < _INT64:
        bad.append(f"seed {row['seed']} (outside 64-bit integers)")
    seconds = float(row["seconds"])
    if not (math.isfinite(seconds) and seconds >= 0):
        bad.append(f"seconds {row['seconds']} (a duration is finite and >= 0)")
    if not row["variants"]:
        bad.append("variants is empty (a finished cell has at least one)")
    try:
        datetime.fromisoformat(row["finished_at"])
    except ValueError:
        bad.append(f"finished_at {row['finished_at']!r} (not an ISO 8601 time)")
    return bad


def _header() -> dict:
    return {"application": APPLICATION, "format": FORMAT, "schema_version": ResultsStore.SCHEMA_VERSION}


#: A results page's cells file larger than this is written gzipped (``cells-<preset>.jsonl.gz``), so
#: the repository does not carry megabytes of text; `import_cells` reads either.
GZIP_OVER_BYTES = 1 << 20
_GZIP_MAGIC = b"\x1f\x8b"


def export_cells(store: ResultsStore, path, experiment: str, preset: str | None = None) -> int:
    """Write the finished cells of ``experiment`` (optionally one ``preset``) to ``path``
    atomically, gzipped when ``path`` ends in ".gz" (no time stamp: the same cells give the same
    bytes); return how many. Raises ValueError when there are none."""
    rows = store.rows(experiment, preset, status="done")
    if not rows:
        which = f"{experiment!r}" + (f" preset {preset!r}" if preset else "")
        raise ValueError(f"the store {store.path} holds no finished cells of {which}: nothing to export")
    lines = [json.dumps(_header(), sort_keys=True)]
    lines += [json.dumps(asdict(r), allow_nan=True) for r in rows]  # key order kept: variants are ordered
    data = ("\n".join(lines) + "\n").encode("utf-8")
    atomic_write_bytes(path, gzip.compress(data, mtime=0) if str(path).endswith(".gz") else data)
    return len(rows)


def _parse(path: Path) -> list[StoredCell]:
    """Every cell of the file, checked; ValueError naming the file and line on anything wrong."""
    if not path.is_file():
        raise FileNotFoundError(f"no cells file at {path}")
    data = path.read_bytes()
    try:
        if data[:2] == _GZIP_MAGIC:
            data = gzip.decompress(data)
        text = data.decode("utf-8").splitlines()
    except (OSError, EOFError):
        raise ValueError(f"{path} is a damaged gzip file, not a {FORMAT} file") from None
    except UnicodeDecodeError:
        raise ValueError(f"{path} is not UTF-8 text, not a {FORMAT} file") from None
    if not text:
        raise ValueError(f"{path} is empty, not a {FORMAT} file")
    try:
        header = json.loads(text[0])
    except (json.JSONDecodeError, RecursionError):
        header = None
    if not isinstance(header, dict) or header.get("format") != FORMAT or header.get("application") != APPLICATION:
        raise ValueError(f"{path} line 1: not a {FORMAT} file (no header line naming the format)")
    if header.get("schema_version") != ResultsStore.SCHEMA_VERSION:
        raise ValueError(
            f"{path}: cells of results-store schema version {header.get('schema_version')}; this dubito reads "
            f"version {ResultsStore.SCHEMA_VERSION}"
        )
    cells = []
    lines_of: dict[tuple, int] = {}  # cell key -> its line
    for number, line in enumerate(text[1:], start=2):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path} line {number}: not JSON ({exc.msg})") from None
        except RecursionError:  # issue 22: "[[[[...": nested deeper than the parser's stack
            raise ValueError(f"{path} line {number}: JSON nested too deeply to be a cell") from None
        if not isinstance(row, dict):
            raise ValueError(f"{path} line {number}: a cell must be a JSON object")
        missing, unknown = sorted(_REQUIRED - row.keys()), sorted(row.keys() - _FIELDS)
        if missing or unknown:
            raise ValueError(f"{path} line {number}: missing fields {missing}, unknown fields {unknown}")
        wrong = _wrong_types(row)
        if wrong:
            raise ValueError(f"{path} line {number}: wrong value types for {', '.join(wrong)}")
        if row["status"] != "done":
            raise ValueError(f"{path} line {number}: status {row['status']!r}; only finished ('done') cells travel")
        bad = _wrong_values(row)
        if bad:
            raise ValueError(f"{path} line {number}: {'; '.join(bad)}")
        cell = StoredCell(**row)
        if cell.key in lines_of:
            raise ValueError(f"{path} line {number}: the same cell {cell.key} as line {lines_of[cell.key]}; "
                             "a file holds each cell once")
        lines_of[cell.key] = number
        cells.append(cell)
    return cells


def import_cells(store: ResultsStore, path) -> tuple[int, int]:
    """Add the cells of ``path`` (written by `export_cells`) that ``store`` does not hold as
    finished; return (added, already there). The whole file is checked before anything is
    written, and all its cells go in one transaction."""
    cells = _parse(Path(path))
    added = store.insert_done(cells)
    return added, len(cells) - added
