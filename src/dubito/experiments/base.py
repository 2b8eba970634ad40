"""What an experiment is: a grid of cells, how to run one cell, and the paper's own numbers.

An experiment is a module per paper (``ensembles``, ``uci``, ...) that builds one
`Experiment`. The runner (`runner.py`) expands its grid into `Cell` s, skips the cells the
results store (`store.py`) already holds, runs the rest on an executor, and stores each
`CellResult`. The report (`report.py`) reads the store and puts our numbers beside the
paper's `PaperNumber` s.

A cell is (experiment, preset, dataset, method, split, seed). Settings that vary inside one
fit (both corrections of a deep ensemble, the first k members of a nested ensemble) are
*variants* of one cell: ``CellResult.variants`` maps a variant name ("DE", "EXT L=5", ...)
to its metrics, so one training serves all of them. Everything in a `CellResult` is
JSON-serialisable (it goes to the store as JSON, never as pickle).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

__all__ = ["Cell", "CellResult", "Preset", "PaperNumber", "MetricSpec", "Experiment"]


@dataclass(frozen=True)
class Cell:
    """One unit of work. ``settings`` are the method's settings for this cell (JSON-able)."""

    experiment: str
    preset: str
    dataset: str
    method: str
    split: int
    seed: int
    settings: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def key(self) -> tuple[str, str, str, str, int, int]:
        """Identity of the cell in the results store."""
        return (self.experiment, self.preset, self.dataset, self.method, self.split, self.seed)

    def __str__(self) -> str:
        return f"{self.experiment}/{self.preset}: {self.dataset} · {self.method} · split {self.split} · seed {self.seed}"


@dataclass
class CellResult:
    """What a cell produced.

    variants:  variant name -> metric name -> float (e.g. {"DE": {"rmse": ...}, "EXT": {...}}).
    artefacts: JSON-able data for plots, per variant or shared, e.g.
               {"pit": {"DE": [...], "EXT": [...]}, "curve_1d": {...}}. Keep it small
               (PIT values of the test points, a 1-D prediction grid for one seed).
    info:      JSON-able facts about the fit (n_train, gammas, timings of phases, ...).
    """

    variants: dict[str, dict[str, float]]
    artefacts: dict[str, Any] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Preset:
    """A named protocol: which datasets, methods (with settings), splits and seeds to run.

    ``splits``: explicit split indices, or None for all the dataset's splits.
    ``methods``: method name -> settings passed to the experiment's cell function.
    ``method_splits``: method name -> k, run that method on the first k of those splits only
    (a costly method's cells on a subset, as a protocol allows; the report says so).
    ``method_datasets``: method name -> the data sets it runs on (a comparison row kept only where
    a changed default changed the numbers); every one of ``datasets`` otherwise.
    """

    name: str
    description: str
    datasets: tuple[str, ...]
    methods: Mapping[str, Mapping[str, Any]]
    seeds: tuple[int, ...] = (0,)
    splits: tuple[int, ...] | None = None
    method_splits: Mapping[str, int] = field(default_factory=dict)
    method_datasets: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def split_indices(self, n_all: int) -> tuple[int, ...]:
        """The splits this preset runs on a data set with ``n_all`` splits: ``splits``, or all of them."""
        return self.splits if self.splits is not None else tuple(range(n_all))


@dataclass(frozen=True)
class PaperNumber:
    """A number the paper reports, for side-by-side display.

    ``spread``: the paper's own ± (standard error or sd, as ``note`` says), or None when the
    paper gives a single run; then ``tolerance`` (the experiment's stated tolerance, e.g.
    spec P10) decides when a difference is flagged.
    """

    dataset: str
    variant: str
    metric: str
    value: float
    spread: float | None = None
    tolerance: float | None = None
    source: str = ""
    note: str = ""


@dataclass(frozen=True)
class MetricSpec:
    """A metric the report shows: key in the variants' dicts, label, and better direction."""

    key: str
    label: str
    better: str = "lower"  # "lower" | "higher" | "closer to <target>" described in ``note``
    note: str = ""


@dataclass(frozen=True)
class Experiment:
    """A paper's experiment as a grid.

    run_cell(cell, device, progress) -> CellResult does the work of one cell; it must be a
    module-level function (it is shipped to process-pool and Dask workers by reference).
    unavailable(preset) -> {dataset: reason} names datasets of the preset that cannot run
    here (missing files), so the runner skips them and the report says why.
    n_splits(dataset) -> int gives the number of splits when a preset says "all".
    report_sections(rows, preset) -> list of Markdown lines that the report puts after the notes
    (sections computed from the stored rows, e.g. the paper's claims checked), or None.
    builds_on: method -> the `dubito.methods` entry it fits (``CLASSIFIERS`` for the classification
    experiment, ``METHODS`` otherwise), for the methods whose name is not an entry's (a paper's row
    that configures a method: ``icnlm-tanh`` -> ``icnlm``; the thesis's ``cdp`` ->
    ``concrete-dropout``), None for a peer outside dubito; every other method's name is its entry's.
    """

    name: str
    title: str
    paper: str
    presets: Mapping[str, Preset]
    metrics: tuple[MetricSpec, ...]
    paper_numbers: tuple[PaperNumber, ...]
    run_cell: Callable[..., CellResult]
    n_splits: Callable[[str], int]
    unavailable: Callable[[Preset], dict[str, str]] = lambda preset: {}
    notes: str = ""
    report_sections: Callable[[list, Preset], list[str]] | None = None
    builds_on: Mapping[str, str | None] = field(default_factory=dict)

    def preset(self, name: str) -> Preset:
        try:
            return self.presets[name]
        except KeyError:
            raise ValueError(
                f"unknown preset {name!r} for experiment {self.name!r}; available: {', '.join(self.presets)}"
            ) from None

    def cells(self, preset: str, datasets=None, methods=None) -> list[Cell]:
        """Expand the preset's grid (optionally restricted to some datasets / methods)."""
        p = self.preset(preset)
        for label, wanted, valid in (("dataset", datasets, p.datasets), ("method", methods, tuple(p.methods))):
            for name in wanted or ():
                if name not in valid:
                    raise ValueError(
                        f"unknown {label} {name!r} for {self.name}/{p.name}; available: {', '.join(valid)}"
                    )
        missing = self.unavailable(p)
        out = []
        for dataset in p.datasets:
            if (datasets and dataset not in datasets) or dataset in missing:
                continue
            splits = p.split_indices(self.n_splits(dataset))
            for method, settings in p.methods.items():
                if (methods and method not in methods) or dataset not in p.method_datasets.get(method, (dataset,)):
                    continue
                for split in splits[: p.method_splits.get(method, len(splits))]:
                    for seed in p.seeds:
                        out.append(Cell(self.name, p.name, dataset, method, split, seed, dict(settings)))
        return out
