"""A tiny deterministic experiment for the runner, store and executor tests.

Registered as "fake" by the ``fake`` fixture (monkeypatching ``dubito.experiments._MODULES``)
and, for ``python -m dubito.cli`` subprocesses, through
``DUBITO_EXTRA_EXPERIMENTS=fake=tests.experiments.fake_experiment`` with the repo root on
``PYTHONPATH``.

Numbers are a function of (dataset, method, split, seed) only, so any executor, process or
re-run gives the same ones. Environment knobs (read in the worker):

* ``DUBITO_FAKE_LOG``   file to which every run of a cell appends one line ``dataset method split seed``
* ``DUBITO_FAKE_SLEEP`` seconds each cell sleeps (overrides the preset's ``sleep`` setting)
* ``DUBITO_FAKE_FAIL``  when set, method "flaky" raises (so a later run can succeed)

Method "explode" always raises. Dataset "missing" is always unavailable.
"""

from __future__ import annotations

import os
import random
import time

from dubito.experiments.base import CellResult, Experiment, MetricSpec, Preset

PRESETS = {
    "quick": Preset(
        "quick", "16 instant cells; one unavailable data set",
        datasets=("alpha", "beta", "missing"),
        methods={"good": {"width": 8}, "other": {"width": 16}},
        seeds=(0, 1), splits=(0, 1),
    ),
    "faulty": Preset(
        "faulty", "a method that always fails and one that fails while DUBITO_FAKE_FAIL is set",
        datasets=("alpha",),
        methods={"good": {}, "explode": {}, "flaky": {}},
        seeds=(0,), splits=(0, 1),
    ),
    "slow": Preset(
        "slow", "16 cells of 0.25 s each, for interrupting",
        datasets=("alpha", "beta"),
        methods={"good": {"sleep": 0.25}},
        seeds=(0, 1), splits=None,
    ),
}


def numbers(dataset: str, method: str, split: int, seed: int) -> dict[str, dict[str, float]]:
    """The cell's metrics: deterministic in its key (string seeding of `random` is stable)."""
    rng = random.Random(f"{dataset}/{method}/{split}/{seed}")
    return {variant: {"rmse": rng.random(), "nll": rng.gauss(0.0, 1.0)} for variant in ("A", "B")}


def run_cell(cell, device="cpu", progress=False) -> CellResult:
    log = os.environ.get("DUBITO_FAKE_LOG")
    if log:
        with open(log, "a") as fh:
            fh.write(f"{cell.dataset} {cell.method} {cell.split} {cell.seed}\n")
    time.sleep(float(os.environ.get("DUBITO_FAKE_SLEEP", cell.settings.get("sleep", 0.0))))
    if cell.method == "explode":
        raise RuntimeError(f"boom in {cell.dataset} split {cell.split}")
    if cell.method == "flaky" and os.environ.get("DUBITO_FAKE_FAIL"):
        raise ValueError("flaky failure")
    variants = numbers(cell.dataset, cell.method, cell.split, cell.seed)
    rng = random.Random(f"pit/{cell.dataset}/{cell.split}/{cell.seed}")
    return CellResult(
        variants=variants,
        artefacts={"pit": {"A": [rng.random() for _ in range(5)]}},
        info={"device": device, "n_train": 10 + cell.split, "settings_seen": dict(cell.settings)},
    )


def n_splits(dataset: str) -> int:
    return 4


def unavailable(preset: Preset) -> dict[str, str]:
    return {"missing": "no data file (fake)"} if "missing" in preset.datasets else {}


EXPERIMENT = Experiment(
    name="fake",
    title="Fake experiment",
    paper="nobody (tests)",
    presets=PRESETS,
    metrics=(MetricSpec("rmse", "RMSE"), MetricSpec("nll", "NLL")),
    paper_numbers=(),
    run_cell=run_cell,
    n_splits=n_splits,
    unavailable=unavailable,
)


def torch_threads() -> int:
    """Threads torch uses in this process (the process-pool test runs it in a worker)."""
    import torch

    return torch.get_num_threads()
