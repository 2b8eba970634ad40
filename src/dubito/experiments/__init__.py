"""Experiments: one module per paper, run as grids of cells into a SQLite store, reported
beside the paper's numbers. `get(name)` returns an `Experiment`; `available()` lists names."""

from __future__ import annotations

import importlib
import os

from dubito.experiments.base import (
    Cell,
    CellResult,
    Experiment,
    MetricSpec,
    PaperNumber,
    Preset,
)

#: experiment name -> module defining ``EXPERIMENT``
_MODULES = {
    "deepnoise": "dubito.experiments.deepnoise",
    "ensembles": "dubito.experiments.ensembles",
    "icnlm": "dubito.experiments.icnlm",
    "leaderboard": "dubito.experiments.leaderboard",
    "ood": "dubito.experiments.ood",
    "recalibrate": "dubito.experiments.recalibrate",
    "thesis": "dubito.experiments.thesis",
    "uci": "dubito.experiments.uci",
}

# Extra experiments from the environment, "name=package.module[,name=module...]": a module
# outside dubito that defines EXPERIMENT (the tests' fake experiment in `python -m dubito.cli`
# subprocesses; a user's own experiment). Built-in names win.
for _item in filter(None, os.environ.get("DUBITO_EXTRA_EXPERIMENTS", "").split(",")):
    _name, _, _module = _item.partition("=")
    if _name.strip() and _module.strip():
        _MODULES.setdefault(_name.strip(), _module.strip())

__all__ = ["get", "available", "Cell", "CellResult", "Experiment", "MetricSpec", "PaperNumber", "Preset"]


def available() -> list[str]:
    return sorted(_MODULES)


def get(name: str) -> Experiment:
    """The experiment called ``name``; unknown names list the valid ones."""
    if name not in _MODULES:
        raise ValueError(f"unknown experiment {name!r}; available: {', '.join(available())}")
    return importlib.import_module(_MODULES[name]).EXPERIMENT
