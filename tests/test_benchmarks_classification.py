"""Smoke test of benchmarks/classification.py (MC-dropout passes batched vs looped): the ``--quick``
run finishes and prints both tables with positive timings and loop/batched ratios that equal
the ratio of the printed times. It checks no timing against the 3x target (a benchmark, not a
timed test)."""
import os
import re
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "classification.py"


def test_classification_benchmark_quick_prints_tables(tmp_path):
    out = tmp_path / "classification.md"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    result = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--out", str(out)],
                            capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    text = result.stdout
    assert "not this configuration (--quick)" in text and "2. MCDropoutClassifier.predict_distribution" in text
    rows = re.findall(r"^\| (mlp|cnn) \| (bernoulli|concrete|multidrop) \| \d+ \| \d+ \| ([0-9.]+) \| ([0-9.]+) \| "
                      r"([0-9.]+) \|$", text, re.M)
    assert {(r[0], r[1]) for r in rows} == {(n, d) for n in ("mlp", "cnn") for d in ("bernoulli", "concrete", "multidrop")}
    for _, _, loop, batched, ratio in rows:
        assert float(loop) > 0 and float(batched) > 0
        assert abs(float(ratio) - float(loop) / float(batched)) <= 0.01 * float(ratio) + 0.01
    assert out.read_text() == text  # --out holds exactly the printed tables
