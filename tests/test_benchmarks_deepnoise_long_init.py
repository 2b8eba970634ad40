"""benchmarks/deepnoise_long_init.py changes nothing but the SGD init's Adam steps: run on the
smoke preset's het-200 cell with the preset's own budget (5 epochs = 5 steps: 160 rows, batch
1,000), it must print the W1 of the unmodified cell run by `run_cell`; with another budget it must
report the epochs that budget converts to, and a different W1."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "deepnoise_long_init.py"


def _run(tmp_path, *args):
    env = dict(os.environ, OMP_NUM_THREADS="1", DUBITO_CACHE=str(tmp_path))
    result = subprocess.run([sys.executable, str(SCRIPT), "--preset", "smoke", "--dataset", "het-200", "--jobs", "1", *args],
                            capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    w1 = re.search(r"^W1 x 1000 ([0-9.]+);", result.stdout, re.M)
    epochs = re.search(r"SGD epochs (\d+)$", result.stdout, re.M)
    assert w1 and epochs, result.stdout
    return float(w1.group(1)), int(epochs.group(1))


def test_long_init_changes_only_the_init_budget(tmp_path):
    import torch

    from dubito.experiments.deepnoise import EXPERIMENT, run_cell

    torch.set_num_threads(1)
    (cell,) = [c for c in EXPERIMENT.cells("smoke", datasets=["het-200"], methods=["deepnoise"]) if c.split == 0]
    assert cell.settings["sgd_epochs"] == 5 and "sgd_steps" not in cell.settings
    reference = run_cell(cell).variants["B-DeepNoise"]["w1"]

    same, epochs = _run(tmp_path, "--steps", "5")
    assert epochs == 5
    assert same == pytest.approx(reference, abs=0.051)  # printed with one decimal

    longer, epochs = _run(tmp_path, "--steps", "40")
    assert epochs == 40 and longer != pytest.approx(reference, abs=0.051)


def test_long_init_refuses_a_uci_set(tmp_path):
    result = subprocess.run([sys.executable, str(SCRIPT), "--dataset", "boston"], capture_output=True, text=True,
                            timeout=120, env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert result.returncode != 0 and "'boston' is not a synthetic set" in result.stderr
