"""Set-up of the experiment-engine tests: the fake experiment registered as "fake"."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

import dubito.experiments as experiments

REPO = Path(__file__).resolve().parents[2]
FAKE_MODULE = "tests.experiments.fake_experiment"


@pytest.fixture
def fake(monkeypatch, tmp_path):
    """Register the fake experiment; every cell run is logged to the returned file."""
    monkeypatch.setitem(experiments._MODULES, "fake", FAKE_MODULE)
    log = tmp_path / "runs.log"
    monkeypatch.setenv("DUBITO_FAKE_LOG", str(log))
    monkeypatch.delenv("DUBITO_FAKE_FAIL", raising=False)
    monkeypatch.delenv("DUBITO_FAKE_SLEEP", raising=False)
    return log


def runs(log: Path) -> list[str]:
    """Lines of the run log: one per execution of a cell."""
    return log.read_text().splitlines() if log.exists() else []


def subprocess_env(**extra) -> dict[str, str]:
    """Environment for ``python -m dubito.cli`` subprocesses that know the fake experiment."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env["DUBITO_EXTRA_EXPERIMENTS"] = f"fake={FAKE_MODULE}"
    env["OMP_NUM_THREADS"] = "1"
    env.update(extra)
    return env
