"""The validation-row checks' pages show their committed records: the ``--table`` output of
benchmarks/heldout_scale.py, mfvi_variance_scale.py, icnlm_variance_scale.py, mc_dropout_rate.py,
icnlm_budget.py and heldout_scale_optimism.py on each page's records is, line for line, in the page (so
a page cannot drift from its records, and the scripts' table code keeps running). No fit is run."""
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: (script and arguments, page, records file in the page's folder)
CASES = [
    (["heldout_scale.py", "--method", "mdn"], "docs/results/mdn-variance-scale", "records.jsonl"),
    (["mfvi_variance_scale.py"], "docs/results/mfvi-variance-scale", "records.jsonl"),
    (["icnlm_variance_scale.py"], "docs/results/icnlm/variance-scale", "records.jsonl"),
    (["mc_dropout_rate.py"], "docs/results/mc-dropout-rate", "records.jsonl"),
    (["icnlm_budget.py"], "docs/results/icnlm-budget", "records.jsonl"),
    *[(["heldout_scale_optimism.py", "--method", m], "docs/results/heldout-scale-optimism", f"fresh-{m}.jsonl")
      for m in ("ensemble", "mdn", "mfvi")],
    *[(["heldout_scale_optimism.py", "--method", m, "--separate"], "docs/results/heldout-scale-optimism",
       f"separate-{m}.jsonl") for m in ("ensemble", "mdn")],
    (["heldout_scale_optimism.py", "--method", "ensemble", "--auto"], "docs/results/heldout-scale-optimism",
     "auto-ensemble.jsonl"),
]


@pytest.mark.parametrize("command, page, records", CASES, ids=[f"{c[0][0]}:{c[2]}" for c in CASES])
def test_the_page_shows_the_table_of_its_records(command, page, records):
    records = ROOT / page / records
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / command[0]), *command[1:], "--records",
                             str(records), "--table"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    table = [line for line in result.stdout.splitlines() if line.startswith("|")]
    assert len(table) >= 4
    text = (ROOT / f"{page}.md").read_text()
    missing = [line for line in table if line not in text]
    assert not missing, missing
