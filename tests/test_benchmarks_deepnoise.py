"""Smoke test of benchmarks/deepnoise.py (the B-DeepNoise sweep-time benchmark): the ``--quick``
run finishes and prints its four tables with finite positive timings. It checks no timing
against a target (a benchmark, not a timed test)."""
import os
import re
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "deepnoise.py"


def test_deepnoise_benchmark_quick_prints_tables(tmp_path):
    out = tmp_path / "deepnoise.md"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    result = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--out", str(out)],
                            capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    text = result.stdout
    for header in ("1. seconds per full sweep", "| N | timed sweeps | s / sweep (median) |", "/ target 0.1 s",
                   "linearity: t(1000) / t(250)", "2. scaling with width and depth", "| K (width) | L (depth) |",
                   "3. where a sweep goes", "v-step", "gibbs_sweep, total", "4. 2 chains x 3 sweeps",
                   "serial, one process", "parallel, 2 processes", "start-up alone"):
        assert header in text, header
    assert "not this configuration (--quick)" in text  # the target is stated for 4 x 50 at N = 1k only
    # table 1: one row per N with a positive finite time; its t(N)/t(base) column is 1.00 at the base N
    rows = re.findall(r"^\| (250|1000) \| \d+ \| ([0-9.]+) \|.*\| ([0-9.]+) \| ([0-9.]+) \| - \|$", text, re.M)
    assert [r[0] for r in rows] == ["250", "1000"], rows
    assert all(float(r[1]) > 0 for r in rows) and rows[0][2] == "1.00" and rows[1][3] == "4.00"
    # the parts of table 3 are shares of the total and sum (with the rest) to 100 %
    shares = [int(s) for s in re.findall(r"^\| [^|]+ \| [0-9.]+ \| (\d+)% \|$", text, re.M)]
    assert len(shares) == 7 and shares[-1] == 100 and abs(sum(shares[:-1]) - 100) <= 3
    assert out.read_text() == text  # --out writes the printed tables
