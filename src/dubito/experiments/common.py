"""Helpers the paper experiments share: which UCI sets can be read now, and the seed of a
cell's networks."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from dubito.data.uci import uci_path

__all__ = ["network_seed", "uci_unavailable"]

#: (data set, DUBITO_DATA) -> None (readable) or why not; one download attempt per process
_availability: dict[tuple[str, str], str | None] = {}


def uci_unavailable(names: Iterable[str]) -> dict[str, str]:
    """UCI sets among ``names`` that are neither local (DUBITO_DATA, cache) nor downloadable
    now, with the reason.

    One download attempt per data set and process (results are cached), so an offline machine
    without the files learns it once instead of in every cell.
    """
    out = {}
    for name in names:
        key = (name, os.environ.get("DUBITO_DATA", ""))
        if key not in _availability:
            try:
                uci_path(name, download=False)
                _availability[key] = None
            except FileNotFoundError:
                try:
                    uci_path(name, timeout=10.0)
                    _availability[key] = None
                except (OSError, ValueError) as exc:
                    _availability[key] = f"not in DUBITO_DATA or the cache, and the download failed: {exc}"
        if _availability[key]:
            out[name] = _availability[key]
    return out


def network_seed(seed: int, split: int, *stream: int) -> int:
    """The seed of a cell's networks: SeedSequence([seed, split, *stream]), 31 bits. ``stream``
    keeps an experiment's networks apart from another's on the same (seed, split) (ood: 6)."""
    entropy = [int(seed), int(split), *(int(s) for s in stream)]
    return int(np.random.SeedSequence(entropy).generate_state(1, np.uint32)[0] >> 1)


@dataclass
class SplitArrays:
    """One cell's train / test split as arrays, in the units its methods fit in; each experiment's
    split adds what its evaluation needs (deepnoise: the true quantiles, ood: sigma_l and the OOD
    box, icnlm: the thresholds and subsamples). A `dubito.data.Dataset` holds every split of a set;
    this is the one a cell uses, after the experiment's own scaling."""

    X_tr: np.ndarray
    y_tr: np.ndarray
    X_te: np.ndarray
    y_te: np.ndarray
