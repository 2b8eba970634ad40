"""Smoke test of benchmarks/icnlm.py (the IC-NLM VI vs NUTS and throughput benchmark): the
``--quick`` run finishes and prints its three tables. It checks no timing (a benchmark, not a
timed test)."""
import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "icnlm.py"


def test_icnlm_benchmark_quick_prints_tables(tmp_path):
    out = tmp_path / "icnlm.md"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    result = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--out", str(out)],
                            capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    for header in ("1. posterior fits", "| prior | n | method | settings | wall |", "NUTS / VI time",
                   "2. predictive agreement", "max abs diff mean", "3. predictive-density throughput",
                   "| fit | predictive | J | inputs N | seconds | inputs / s |", "breakdown", "target 2"):
        assert header in result.stdout, header
    assert "| ridge | 2000 | VI |" in result.stdout and "| ridge | 2000 | NUTS |" in result.stdout
    assert out.read_text() == result.stdout  # --out writes the printed tables
