"""The validation-row checks' pages show their committed records: the ``--table`` output of
benchmarks/heldout_scale.py, mfvi_variance_scale.py, icnlm_variance_scale.py, mc_dropout_rate.py and
icnlm_budget.py on each page's records is, line for line, in the page (so a page cannot drift from its
records, and the scripts' table code keeps running). No fit is run."""
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CASES = [
    (["heldout_scale.py", "--method", "mdn"], "docs/results/mdn-variance-scale"),
    (["mfvi_variance_scale.py"], "docs/results/mfvi-variance-scale"),
    (["icnlm_variance_scale.py"], "docs/results/icnlm/variance-scale"),
    (["mc_dropout_rate.py"], "docs/results/mc-dropout-rate"),
    (["icnlm_budget.py"], "docs/results/icnlm-budget"),
]


@pytest.mark.parametrize("command, page", CASES, ids=[c[0][0] for c in CASES])
def test_the_page_shows_the_table_of_its_records(command, page):
    records = ROOT / page / "records.jsonl"
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / command[0]), *command[1:], "--records",
                             str(records), "--table"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    table = [line for line in result.stdout.splitlines() if line.startswith("|")]
    assert len(table) >= 4
    text = (ROOT / f"{page}.md").read_text()
    missing = [line for line in table if line not in text]
    assert not missing, missing
