"""Report-side helpers shared by the experiments' ``report_sections``: number formatting, means over
the stored cells, the list of cells not yet in the store, and the wording of a claim's verdict.

The experiments judge a paper's claims from the rows the results store holds (`store.py`), each
a finished cell with ``dataset, method, split, seed, variants, artefacts, info``. These helpers
only read such rows; they never run or store anything.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

__all__ = [
    "ALL_STORED",
    "CellTable",
    "DatasetMeans",
    "claim_block",
    "fmt",
    "missing_cells",
    "missing_lines",
    "section",
    "verdict",
]

#: what the "Cells" section says when every runnable cell of the preset is stored
ALL_STORED = "All cells of the preset that can run here are in the store."


def fmt(x: float | None, digits: int = 3, kind: str = "g") -> str:
    """``x`` with ``digits`` significant digits (``kind="g"``) or decimals (``kind="f"``); "n/a" for
    None, nan and ±inf."""
    if x is None or not np.isfinite(x):
        return "n/a"
    return f"{x:.{digits}{kind}}"


def verdict(flags: list[bool], empty: str = "not checkable here") -> str:
    """A claim's verdict from its checks: "holds" (all true), "does not hold" (none), "partly"
    (some), ``empty`` when there is nothing to check."""
    if not flags:
        return empty
    return "holds" if all(flags) else ("does not hold" if not any(flags) else "partly")


def claim_block(title: str, lines: list[str], how: str = "", empty: str = "not checkable here") -> list[str]:
    """A claim as a Markdown list item: the bold title (and ``how`` it is judged), then its evidence
    lines, or one line saying ``empty`` when there are none."""
    return [f"- **{title}**" + (f" {how}" if how else ""), *(lines or [f"  - {empty}."])]


def section(title: str, intro: str, lines: list[str]) -> list[str]:
    """A Markdown section: heading ``## title``, an introductory paragraph, then ``lines``."""
    return [f"## {title}", "", intro, "", *lines, ""]


# ---------------------------------------------------------------------------------- means


def _finite(x: Any) -> bool:
    try:
        return x is not None and bool(np.isfinite(x))
    except (TypeError, ValueError):  # not a number (a string, a list): not a metric value
        return False


def _mean(values: list[float]) -> float | None:
    return float(np.mean(values)) if values else None


def _sd(values: list[float]) -> float | None:
    return float(np.std(values, ddof=1)) if values and len(values) > 1 else None


class CellTable:
    """The finite metric values of the stored cells by (dataset, variant, metric), in row order,
    and their means. ``datasets``: the order in which a report walks the data sets (default: as
    they first appear in ``rows``)."""

    def __init__(self, rows: Iterable, datasets: Iterable[str] | None = None):
        self.rows = list(rows)
        self.index: dict[tuple[str, str, str], list[float]] = {}
        for r in self.rows:
            for variant, metrics in (r.variants or {}).items():
                for metric, x in (metrics or {}).items():
                    if _finite(x):
                        self.index.setdefault((r.dataset, variant, metric), []).append(float(x))
        self.datasets = list(datasets) if datasets is not None else list(dict.fromkeys(r.dataset for r in self.rows))

    def values(self, dataset: str, variant: str, metric: str) -> list[float]:
        return list(self.index.get((dataset, variant, metric), ()))

    def mean(self, dataset: str, variant: str, metric: str) -> float | None:
        """Mean over the stored cells; None when no cell has a finite value."""
        return _mean(self.values(dataset, variant, metric))


class DatasetMeans:
    """Means over the stored cells of one dataset: ``M(variant, metric)``, ``M.sd`` (ddof 1, None
    for fewer than two cells) and ``M.n``; ``M.values`` maps (variant, metric) to the finite values."""

    def __init__(self, rows: Iterable, dataset: str):
        table = CellTable([r for r in rows if r.dataset == dataset])
        self.values = {(v, k): x for (_, v, k), x in table.index.items()}

    def __call__(self, variant: str, metric: str) -> float | None:
        return _mean(self.values.get((variant, metric)))

    def sd(self, variant: str, metric: str) -> float | None:
        return _sd(self.values.get((variant, metric)))

    def n(self, variant: str, metric: str) -> int:
        return len(self.values.get((variant, metric), []))


# ---------------------------------------------------------------------------------- missing cells


def missing_cells(experiment, rows: Iterable, preset) -> tuple[list, list]:
    """(the preset's runnable cells that no stored row covers, all its runnable cells); a row covers
    a cell with the same dataset, method, split and seed."""
    expected = experiment.cells(preset.name)
    done = {(r.dataset, r.method, r.split, r.seed) for r in rows}
    return [c for c in expected if (c.dataset, c.method, c.split, c.seed) not in done], expected


def missing_lines(experiment, rows: Iterable, preset, uses: str,
                  listing: Callable[[list], str] | None = None,
                  bench_flags: Callable[[str], str] = lambda dataset: "") -> list[str]:
    """The "Cells" section's text: `ALL_STORED`, or how many cells are missing ("... (``uses``)")
    and which: inline as ``listing(missing)`` when given, else one item per (dataset, method) with
    its splits and the ``dubito bench`` command that runs them (plus ``bench_flags(dataset)``)."""
    miss, expected = missing_cells(experiment, rows, preset)
    if not miss:
        return [ALL_STORED]
    head = f"{len(miss)} of {len(expected)} cells are not in the store ({uses})"
    if listing is not None:
        return [f"{head}; missing: {listing(miss)}."]
    by: dict[tuple[str, str], list[int]] = {}
    for c in miss:
        by.setdefault((c.dataset, c.method), []).append(c.split)
    return [f"{head}:"] + [
        f"- {ds} · {m} · split(s) {', '.join(map(str, splits))} (`dubito bench {experiment.name} --preset "
        f"{preset.name} --datasets {ds} --methods {m}{bench_flags(ds)} --store ...`)"
        for (ds, m), splits in by.items()
    ]
