"""The user's own table: a CSV or Parquet file with a numeric target column.

``load_table(path, target)`` reads the file with pandas (Parquet through pyarrow; both in the
``tabular`` extra, ``pip install "dubito[tabular]"``) and returns a `Dataset` whose features are
every other column, in the file's order. ``dubito.data.load("my.csv", target="y")`` and
``dubito run --data my.csv --target y`` come here.

Standard splits: 20 seeded (seed 0) random 80/20 splits (``random_splits``; test size
``round(0.2 n)``), as for ``diabetes``. Nothing is encoded or imputed for the user: each of
these is one ``ValueError`` that says what to do,

* a ``target`` that is not a column (the columns are listed);
* non-numeric feature columns (named, with their dtype) or a non-numeric target;
* missing values (the columns and how many rows each, and the rows in all);
* infinite values, fewer than 3 rows, no feature column besides the target.

Booleans are read as 0/1.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from .dataset import Dataset, random_splits

__all__ = ["TABLE_SUFFIXES", "is_table_path", "load_table", "read_table"]

#: File endings read as CSV (pandas infers the compression) and as Parquet.
CSV_SUFFIXES = (".csv", ".csv.gz", ".csv.bz2", ".csv.zip", ".csv.xz", ".csv.zst")
PARQUET_SUFFIXES = (".parquet", ".pq")
TABLE_SUFFIXES = CSV_SUFFIXES + PARQUET_SUFFIXES
#: The standard splits of a user table: as diabetes (`dubito.data.registry`).
N_SPLITS, TEST_FRACTION, SPLIT_SEED = 20, 0.2, 0

_INSTALL = 'pip install "dubito[tabular]"'


def is_table_path(name) -> bool:
    """Whether ``name`` is a file path rather than a data set name: a `Path`, or a string with a
    file ending or a folder separator (no data set name has either). `read_table` then accepts
    `TABLE_SUFFIXES` and refuses other endings by name."""
    if isinstance(name, Path):
        return True
    if not isinstance(name, str):
        return False
    text = name.strip()
    return "/" in text or os.sep in text or Path(text).suffix != ""


def _pandas():
    try:
        import pandas as pd
    except ImportError:
        raise ImportError(f"reading a CSV or Parquet file needs pandas: {_INSTALL}") from None
    return pd


def read_table(path):
    """The file at ``path`` as a pandas DataFrame: CSV (``pandas.read_csv``, comma-separated with a
    header row) or Parquet (``pandas.read_parquet`` with pyarrow)."""
    path = Path(path).expanduser()
    name = path.name.lower()
    if not name.endswith(TABLE_SUFFIXES):
        raise ValueError(f"{path.name}: unknown table format; dubito reads CSV and Parquet files, named "
                         f"{', '.join('*' + x for x in TABLE_SUFFIXES)}")
    if not path.is_file():
        raise FileNotFoundError(f"no file at {path}")
    pd = _pandas()
    if name.endswith(PARQUET_SUFFIXES):
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise ImportError(f"reading a Parquet file needs pyarrow: {_INSTALL}") from None
        try:
            return pd.read_parquet(path, engine="pyarrow")
        except (OSError, ValueError) as exc:
            raise ValueError(f"{path} is not a readable Parquet file: {exc}") from None
    try:
        return pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path} is not a readable CSV file: {exc}") from None


def _rows(n: int) -> str:
    return f"{n} row{'s' if n != 1 else ''}"


def load_table(path, target: str, *, name: str | None = None) -> Dataset:
    """The table at ``path`` as a `Dataset`: y = column ``target``, X = every other column
    (module docstring for the checks and the splits). ``name`` defaults to the file name."""
    path = Path(path).expanduser()
    frame = read_table(path)
    pd = _pandas()
    columns = [str(c) for c in frame.columns]
    frame.columns = columns
    listed = ", ".join(columns) or "(none)"
    if target is None:
        raise ValueError(f"a table needs its response column: pass --target COLUMN (target= in dubito.data.load); "
                         f"the columns of {path.name} are: {listed}")
    if str(target) not in columns:
        raise ValueError(f"column {target!r} is not in {path.name}; its columns are: {listed}")
    target = str(target)
    features = [c for c in columns if c != target]
    if not features:
        raise ValueError(f"{path.name} has no feature column besides the target {target!r}")
    if frame.shape[0] < 3:
        raise ValueError(f"{path.name} has {_rows(frame.shape[0])}; an 80/20 train/test split needs at least 3")

    def numeric(col) -> bool:
        dtype = frame[col].dtype
        return pd.api.types.is_bool_dtype(dtype) or (pd.api.types.is_numeric_dtype(dtype)
                                                    and not pd.api.types.is_complex_dtype(dtype))

    def kind(col) -> str:
        """The column's dtype in words: 'text' for strings whether pandas stores them as object or str."""
        dtype = frame[col].dtype
        return "text" if pd.api.types.is_string_dtype(dtype) else str(dtype)

    if not numeric(target):
        raise ValueError(f"target column {target!r} is not numeric ({kind(target)}); dubito regresses "
                         "a numeric response")
    def example(col) -> str:
        """The first entry of ``col`` that is not a number, e.g. ``'n/a'`` in a column of numbers."""
        values = frame[col]
        odd = values[pd.to_numeric(values, errors="coerce").isna() & values.notna()]
        return f", e.g. {odd.iloc[0]!r}" if len(odd) else ""

    bad = [c for c in features if not numeric(c)]
    if bad:
        listed = ", ".join(f"{c!r} ({kind(c)}{example(c)})" for c in bad)
        raise ValueError(f"non-numeric feature column(s) {listed}: encode them as numbers first (e.g. one-hot "
                         "with pandas.get_dummies) or drop them")
    missing = frame.isna()
    if missing.to_numpy().any():
        per_col = missing.sum()
        listed = ", ".join(f"{c!r} ({_rows(int(per_col[c]))})" for c in columns if per_col[c])
        raise ValueError(f"missing values in column(s) {listed}; {_rows(int(missing.any(axis=1).sum()))} of "
                         f"{frame.shape[0]} in all: drop them (DataFrame.dropna()) or impute them first")
    values = frame.astype(np.float64)
    infinite = ~np.isfinite(values.to_numpy())
    if infinite.any():
        per_col = infinite.sum(axis=0)
        listed = ", ".join(f"{c!r} ({_rows(int(k))})" for c, k in zip(columns, per_col) if k)
        raise ValueError(f"infinite values in column(s) {listed}: drop or replace them first")
    X = values[features].to_numpy()
    y = values[target].to_numpy()
    n = X.shape[0]
    meta = {
        "title": f"{path.name}, target {target!r}",
        "source": f"user-supplied file {path}",
        "licence": "user-supplied",
        "citation": "user-supplied",
        "target_name": target,
        "splits": f"standard: {N_SPLITS} seeded (seed {SPLIT_SEED}) random 80/20 splits, test size "
        f"round({TEST_FRACTION} n) (as diabetes)",
    }
    splits = random_splits(n, N_SPLITS, TEST_FRACTION, SPLIT_SEED)
    return Dataset(name or path.name, X, y, features, splits, meta)
