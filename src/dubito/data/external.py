"""Loaders for the real data of Hoffmann & Elster (2021, Table 1) that users supply themselves.

None of these files ships with dubito or can be fetched offline; download them from the UCI
Machine Learning Repository (CC BY 4.0) and pass their path, or put them under ``DUBITO_DATA``:

* ``qsar``: ``$DUBITO_DATA/qsar/qsar_aquatic_toxicity.csv``; ``;``-separated, no header,
  8 descriptors then LC50 (546 rows).
* ``blog``: ``$DUBITO_DATA/blog/blogData_train.csv`` and ``blog/blogData_test-*.csv``;
  ``,``-separated, no header, 280 features then the target.
* ``msd``: ``$DUBITO_DATA/msd/YearPredictionMSD.txt``; ``,``-separated, no header, year first
  then 90 timbre features.
"""

from __future__ import annotations

import os
import warnings
from numbers import Integral
from pathlib import Path

import numpy as np

from .dataset import Dataset, n_test_rows, random_splits

__all__ = [
    "load_qsar",
    "load_blog",
    "load_msd",
    "default_path",
    "QSAR_FEATURES",
    "MSD_N_ROWS",
    "MSD_N_TRAIN",
    "MSD_N_TEST",
]

QSAR_FEATURES = ["TPSA", "SAacc", "H050", "MLOGP", "RDCHI", "GATS1p", "nN", "C040"]
QSAR_FILE = "qsar_aquatic_toxicity.csv"
QSAR_URL = "https://archive.ics.uci.edu/dataset/505/qsar+aquatic+toxicity"
BLOG_URL = "https://archive.ics.uci.edu/dataset/304/blogfeedback"
MSD_URL = "https://archive.ics.uci.edu/dataset/203/yearpredictionmsd"
MSD_FILE = "YearPredictionMSD.txt"
BLOG_N_COLUMNS = 281
MSD_N_COLUMNS = 91
#: Official YearPredictionMSD split (UCI description): first 463,715 rows train, last 51,630 test.
MSD_N_ROWS, MSD_N_TRAIN, MSD_N_TEST = 515_345, 463_715, 51_630

_WHERE = {
    "qsar": (Path("qsar") / QSAR_FILE, QSAR_URL),
    "blog": (Path("blog"), BLOG_URL),
    "msd": (Path("msd") / MSD_FILE, MSD_URL),
}


def default_path(name: str) -> Path:
    """Where `load` looks for user-supplied dataset ``name``: ``$DUBITO_DATA/<name>/...``.

    Raises FileNotFoundError, saying where to put the files, when they are absent.
    """
    rel, url = _WHERE[name]
    what = f"{rel}/blogData_train.csv and $DUBITO_DATA/{rel}/blogData_test-*.csv" if name == "blog" else str(rel)
    root = os.environ.get("DUBITO_DATA")
    hint = (
        f"Download {'the files' if name == 'blog' else 'it'} from {url} (CC BY 4.0) and put "
        f"{'them' if name == 'blog' else 'it'} at $DUBITO_DATA/{what} "
        f"(DUBITO_DATA is {'unset' if not root else repr(root)}), or call dubito.data.load_{name}(path)."
    )
    if not root:
        raise FileNotFoundError(f"dataset {name!r} is not bundled and DUBITO_DATA is not set. {hint}")
    path = Path(root).expanduser() / rel
    ok = (path / "blogData_train.csv").is_file() if name == "blog" else path.is_file()
    if not ok:
        expected = f"{path / 'blogData_train.csv'} and {path / 'blogData_test-*.csv'}" if name == "blog" else str(path)
        raise FileNotFoundError(f"dataset {name!r} not found: expected {expected}. {hint}")
    return path


def _read_table(path: Path, delimiter: str, ncol: int, what: str) -> np.ndarray:
    path = Path(path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"{what}: no file at {path}")
    try:
        arr = np.loadtxt(path, delimiter=delimiter, dtype=np.float64, ndmin=2)
    except ValueError as exc:
        raise ValueError(f"{what}: cannot parse {path} as a {delimiter!r}-separated numeric table without header: {exc}") from None
    if arr.shape[0] == 0:
        raise ValueError(f"{what}: {path} holds no rows")
    if arr.shape[1] != ncol:
        raise ValueError(f"{what}: {path} has {arr.shape[1]} columns, expected {ncol}")
    if not np.all(np.isfinite(arr)):
        row = int(np.flatnonzero(~np.isfinite(arr).all(axis=1))[0])
        raise ValueError(f"{what}: {path} has a non-finite value in row {row}")
    return arr


def load_qsar(path) -> Dataset:
    """QSAR aquatic toxicity (Cassotti et al. 2014): 8 molecular descriptors -> LC50 (Daphnia magna).

    ``path``: ``qsar_aquatic_toxicity.csv`` from UCI, ``;``-separated, no header, 9 columns
    (TPSA, SAacc, H-050, MLOGP, RDCHI, GATS1p, nN, C-040, LC50 in -log(mol/L)); 546 rows.
    Standard splits: 20 random 80/20 splits with seed 0 (our choice; the paper's seeds are not
    given); 546 rows give 437/109 as in the paper. Licence: CC BY 4.0 (UCI).
    """
    arr = _read_table(path, ";", 9, "QSAR aquatic toxicity")
    n = arr.shape[0]
    meta = {
        "title": "QSAR aquatic toxicity (Daphnia magna LC50)",
        "source": "UCI Machine Learning Repository",
        "url": QSAR_URL,
        "licence": "CC BY 4.0 (UCI Machine Learning Repository)",
        "citation": "M. Cassotti, D. Ballabio, V. Consonni, A. Mauri, I. V. Tetko and R. Todeschini (2014), "
        "Prediction of acute aquatic toxicity toward Daphnia magna using GA-kNN method, ATLA 42:31-41",
        "target_name": "LC50 (-log(mol/L))",
        "path": str(Path(path).expanduser()),
        "splits": "standard: 20 seeded (seed 0) random 80/20 splits, test size round(0.2 n)",
    }
    return Dataset("qsar", arr[:, :8], arr[:, 8], QSAR_FEATURES, random_splits(n, 20, 0.2, 0), meta)


def load_blog(path, *, drop_constant: bool = True) -> Dataset:
    """BlogFeedback (Buza 2014): 280 features -> number of comments in the next 24 hours.

    ``path``: the folder holding ``blogData_train.csv`` (52,397 rows) and the 60
    ``blogData_test-*.csv`` files (7,624 rows in all), each ``,``-separated, no header, 281
    columns (280 features then the target). One split: the train file, then all test files
    concatenated in file-name (date) order. With ``drop_constant`` (default, as Hoffmann & Elster
    P14), feature columns constant on the train file are dropped from both; their 0-based indices
    are in ``meta["dropped_columns"]`` (the paper's input dim 276 implies 4 such columns), and
    ``feature_names`` keep the original column index (``x<i>``). No target transform is applied.
    Licence: CC BY 4.0 (UCI).
    """
    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise FileNotFoundError(f"BlogFeedback: {folder} is not a folder (expected blogData_train.csv and blogData_test-*.csv in it)")
    train_file = folder / "blogData_train.csv"
    test_files = sorted(folder.glob("blogData_test-*.csv"))
    if not train_file.is_file():
        raise FileNotFoundError(f"BlogFeedback: {train_file} not found (download from {BLOG_URL})")
    if not test_files:
        raise FileNotFoundError(f"BlogFeedback: no blogData_test-*.csv files in {folder} (download from {BLOG_URL})")
    train = _read_table(train_file, ",", BLOG_N_COLUMNS, "BlogFeedback")
    tests = [_read_table(f, ",", BLOG_N_COLUMNS, "BlogFeedback") for f in test_files]
    test = np.concatenate(tests, axis=0)
    X = np.concatenate([train[:, :-1], test[:, :-1]], axis=0)
    y = np.concatenate([train[:, -1], test[:, -1]])
    n_tr = train.shape[0]
    if n_tr < 2:
        raise ValueError(f"BlogFeedback: {train_file} has {n_tr} row(s); need at least 2")
    dropped = np.flatnonzero(np.ptp(train[:, :-1], axis=0) == 0).tolist() if drop_constant else []
    keep = np.setdiff1d(np.arange(X.shape[1]), dropped)
    if keep.size == 0:
        raise ValueError(f"BlogFeedback: every feature of {train_file} is constant")
    meta = {
        "title": "BlogFeedback",
        "source": "UCI Machine Learning Repository",
        "url": BLOG_URL,
        "licence": "CC BY 4.0 (UCI Machine Learning Repository)",
        "citation": "K. Buza (2014), Feedback prediction for blogs, in Data Analysis, Machine Learning and "
        "Knowledge Discovery, Springer, 145-152",
        "target_name": "number of comments in the next 24 hours",
        "path": str(folder),
        "test_files": [f.name for f in test_files],
        "dropped_columns": dropped,
        "splits": f"official: train file ({n_tr} rows) / {len(test_files)} test files ({test.shape[0]} rows)",
    }
    splits = [(np.arange(n_tr), np.arange(n_tr, X.shape[0]))]
    return Dataset("blog", X[:, keep], y, [f"x{i}" for i in keep], splits, meta)


def load_msd(path, *, n_test: int | None = None) -> Dataset:
    """YearPredictionMSD (Bertin-Mahieux et al. 2011): 90 timbre features -> release year.

    ``path``: ``YearPredictionMSD.txt`` from UCI, ``,``-separated, no header, year first then 90
    features. One head/tail split (it keeps songs of one artist on one side). For the full file
    (515,345 rows) this is the official split, first 463,715 train / last 51,630 test. For any
    other row count the official sizes do not apply: the last ``n_test`` rows are the test set,
    and when ``n_test`` is not given it is round(51,630/515,345 * n) (about 10%), with a warning.
    Licence: CC BY 4.0 (UCI).
    """
    arr = _read_table(path, ",", MSD_N_COLUMNS, "YearPredictionMSD")
    n = arr.shape[0]
    if n_test is not None:
        if isinstance(n_test, bool) or not isinstance(n_test, Integral) or not 1 <= n_test <= n - 1:
            raise ValueError(f"YearPredictionMSD: n_test must be an int in [1, {n - 1}], got {n_test!r}")
        n_test = int(n_test)
        how = f"head/tail: last {n_test} rows test (n_test given)"
    elif n == MSD_N_ROWS:
        n_test = MSD_N_TEST
        how = f"official: first {MSD_N_TRAIN} train / last {MSD_N_TEST} test"
    else:
        n_test = n_test_rows(n, MSD_N_TEST / MSD_N_ROWS)
        how = f"head/tail: last {n_test} of {n} rows test (not the official split: the full file has {MSD_N_ROWS} rows)"
        warnings.warn(
            f"YearPredictionMSD file {path} has {n} rows, not {MSD_N_ROWS}: the official split does not apply; "
            f"using the last {n_test} rows (the same ~10% fraction) as the test set. Pass n_test to choose.",
            UserWarning,
            stacklevel=2,
        )
    n_tr = n - n_test
    meta = {
        "title": "YearPredictionMSD (Million Song Dataset subset)",
        "source": "UCI Machine Learning Repository",
        "url": MSD_URL,
        "licence": "CC BY 4.0 (UCI Machine Learning Repository)",
        "citation": "T. Bertin-Mahieux, D. P. W. Ellis, B. Whitman and P. Lamere (2011), The Million Song "
        "Dataset, Proc. ISMIR",
        "target_name": "year",
        "path": str(Path(path).expanduser()),
        "splits": how,
    }
    names = [f"timbre_avg_{i}" for i in range(1, 13)] + [f"timbre_cov_{i}" for i in range(1, 79)]
    splits = [(np.arange(n_tr), np.arange(n_tr, n))]
    return Dataset("msd", arr[:, 1:], arr[:, 0], names, splits, meta)
