"""A results page rebuilt from its committed cells is the committed page (issue 23's safety net for
refactoring the experiments): `dubito store import` the page's cells-<preset>.jsonl, `dubito report`
it into a temporary folder, and compare the Markdown line by line. Only the provenance lines may
differ (the store path in the commands, when and at which commit the report was written, where a
missing data set was looked for).

Slow (about 30 s of plotting per page on one thread): `make test-slow`."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dubito.experiments.report import write_report
from dubito.experiments.store import ResultsStore
from dubito.experiments.store_transfer import import_cells

pytestmark = pytest.mark.slow

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"

#: (experiment, preset) of the pages whose cells are committed and that no open run is changing
PAGES = [("deepnoise", "paper"), ("ensembles", "paper"), ("leaderboard", "defaults"), ("ood", "budget"),
         ("recalibrate", "paper"), ("thesis", "paper"), ("uci", "paper")]

#: lines that say where and when the page was made, not what it shows (a data set missing on the
#: machine that wrote it names the folder it looked in)
_PROVENANCE = re.compile(r"^(DUBITO_DATA=\S+ )?dubito (bench|report) |^The finished cells behind this page"
                         r"|^- Report written |^- \*\*\w+\*\*: unavailable here: ")


def _content(text: str) -> list[str]:
    return [line for line in text.splitlines() if not _PROVENANCE.search(line)]


@pytest.mark.parametrize("experiment,preset", PAGES)
def test_page_rebuilds_from_its_cells(tmp_path, experiment, preset):
    cells = RESULTS / experiment / f"cells-{preset}.jsonl"
    if not cells.exists():  # a large export is committed gzipped
        cells = cells.with_name(cells.name + ".gz")
    store_path = tmp_path / "store.sqlite"
    with ResultsStore(store_path) as store:
        import_cells(store, cells)
    out = write_report(experiment, store=store_path, out_dir=tmp_path / "out", preset=preset)
    rebuilt = _content(Path(out).read_text(encoding="utf-8"))
    committed = _content((RESULTS / f"{experiment}.md").read_text(encoding="utf-8"))
    assert rebuilt == committed
