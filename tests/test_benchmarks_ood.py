"""Smoke test of benchmarks/ood.py (HyVI seconds per epoch, k-NN entropy time and memory): the
``--quick`` run finishes and prints both tables with positive timings, the paper's parameter
counts d (spec §2.1: boston 751, power 601) and the k-NN rows for d = 200 and 2000. Needs the UCI
copies (DUBITO_DATA); checks no timing against the 1 s target."""
import os
import re
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "ood.py"


def test_ood_benchmark_quick_prints_tables(tmp_path, uci_dir):
    out = tmp_path / "ood.md"
    env = dict(os.environ, OMP_NUM_THREADS="1", DUBITO_DATA=str(uci_dir))
    result = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--out", str(out)],
                            capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    text = result.stdout
    epochs = re.findall(r"^\| (boston|power) \| ([A-Za-z-]+) \| \d+ \| (\d+) \| \d+ \| ([0-9.]+) \| ([0-9.]+) \|", text, re.M)
    assert {(d, m) for d, m, *_ in epochs} >= {("boston", "FuNN-HyVI"), ("boston", "NN-HyVI"), ("power", "FuNN-HyVI")}
    assert {d: int(p) for d, _, p, _, _ in epochs} == {"boston": 751, "power": 601}
    assert all(float(w) > 0 and float(c) > 0 for *_, w, c in epochs)
    knn = re.findall(r"^\| (numpy float64|torch float32, fwd \+ bwd) \| 1000 \| (200|2000) \| ([0-9.]+) \| ([0-9.]+) \|",
                     text, re.M)
    assert len(knn) == 4 and all(float(s) > 0 and float(m) > 0 for *_, s, m in knn)
    assert out.read_text() == text
