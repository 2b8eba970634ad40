"""The report of an experiment: Markdown with our numbers beside the paper's, and PNG plots.

``dubito report <experiment>`` calls `write_report`, which reads the finished cells of one
preset from the results store (`store.py`) and writes

* ``out_dir/<experiment>.md``: a header saying how to reproduce the page (the bench and
  report commands), which commits and dubito versions produced the rows (``-dirty`` flagged),
  how many cells and how much compute; the experiment's notes; the datasets that could not run
  and why; the failed cells with the first line of their error; then per dataset a table of
  mean ± standard error (n) over the stored cells (splits × seeds) for every (method, variant)
  and metric, and a table of ours beside the paper's `PaperNumber` s with the difference
  flagged ⚠ where it exceeds the paper's spread (or the stated tolerance where the paper
  gives no spread);
* ``out_dir/<experiment>/*.png``: per dataset, calibration curves, PIT histograms and
  interval coverage from the pooled ``"pit"`` artefacts, for 1-D toys the data with the
  predictive intervals from the ``"curve_1d"`` artefact, and the curves averaged over cells of
  the layouts in `report_plots.CURVE_LAYOUTS` (marginal calibration, coverage at given levels,
  error against variance) where cells stored them (layouts in `report_plots`).

An experiment's ``report_sections(rows, preset) -> list[str]`` hook (a field of `Experiment`):
Markdown that the report puts after the notes (e.g. the paper's claims evaluated from the stored
rows).

Every file is written atomically; PNGs of an earlier report that this one no longer draws
are removed, so the folder matches the Markdown.
"""

from __future__ import annotations

import math
import os
import shlex
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

import dubito
from dubito.experiments import get
from dubito.experiments.base import Experiment, PaperNumber
from dubito.experiments.provenance import git_commit
from dubito.experiments.report_figures import _plots
from dubito.experiments.report_rows import (
    DOT,
    FLAG,
    _Dataset,
    _group,
    _match_paper,
)
from dubito.experiments.store import ResultsStore
from dubito.experiments.store_transfer import GZIP_OVER_BYTES, export_cells
from dubito.io import atomic_write_text

__all__ = ["write_report", "Stat", "summarize", "fmt", "flag_exceeds", "DIRTY_SUFFIX"]

DIRTY_SUFFIX = "-dirty"


# ---------------------------------------------------------------------------------- numbers


@dataclass(frozen=True)
class Stat:
    """Mean and standard error (sd with ddof=1 over sqrt(n)) of the finite values; ``n_bad``
    counts the non-finite values left out."""

    mean: float
    se: float | None
    n: int
    n_bad: int = 0


def summarize(values: Iterable[float]) -> Stat:
    a = np.asarray([np.nan if v is None else v for v in values], dtype=float)
    good = a[np.isfinite(a)]
    n_bad = int(a.size - good.size)
    if good.size == 0:
        return Stat(float("nan"), None, 0, n_bad)
    se = float(np.std(good, ddof=1) / math.sqrt(good.size)) if good.size > 1 else None
    return Stat(float(good.mean()), se, int(good.size), n_bad)


def fmt(x: float | None, sig: int = 4, signed: bool = False) -> str:
    """``sig`` significant digits; scientific notation below 1e-3 and from 1e5 in magnitude."""
    if x is None:
        return "—"
    x = float(x)
    if not math.isfinite(x):
        return str(x)
    sign = "+" if signed and x > 0 else ""
    if x == 0:
        return "0"
    a = abs(x)
    if a < 1e-3 or a >= 1e5:
        return f"{x:{sign}.{sig - 1}e}"
    decimals = max(0, sig - 1 - math.floor(math.log10(a)))
    return f"{x:{sign}.{decimals}f}"


def _fmt_stat(s: Stat | None) -> str:
    if s is None:
        return "—"
    if s.n == 0:
        return f"— (0; {s.n_bad} non-finite)" if s.n_bad else "—"
    text = fmt(s.mean) + ("" if s.se is None else f" ± {fmt(s.se, 2)}")
    bad = f"; {s.n_bad} non-finite" if s.n_bad else ""
    return f"{text} ({s.n}{bad})"


def _fmt_paper_value(x: float) -> str:
    """The paper's numbers as printed (shortest form), not padded to false precision."""
    return f"{x:.6g}"


def flag_exceeds(ours: float, pn: PaperNumber) -> tuple[float, bool]:
    """(ours − paper, flagged): flagged when |difference| > spread, or > tolerance when the
    paper gives no spread; never when neither is given or ours is not finite."""
    diff = float(ours) - float(pn.value)
    limit = pn.spread if pn.spread is not None else pn.tolerance
    return diff, bool(limit is not None and math.isfinite(diff) and abs(diff) > limit)


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.2f} h"


def _cell(text: Any) -> str:
    """Text safe inside a Markdown table cell."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def _open_store(store, experiment: str, preset: str):
    """A ResultsStore from a path (must exist) or an already open store; and its display path."""
    if hasattr(store, "rows"):
        path = getattr(store, "path", None)
        return store, (str(path) if path is not None else "dubito-results.sqlite")

    path = Path(store)
    bench = f"dubito bench {experiment} --preset {preset} --store {shlex.quote(str(path))}"
    if not path.is_file():
        raise FileNotFoundError(f"no results store at {path}; run `{bench}` first (or pass --store)")
    try:
        return ResultsStore(path, create=False), str(path)
    except FileNotFoundError:
        raise FileNotFoundError(f"no results store at {path}; run `{bench}` first (or pass --store)") from None


def _display_path(path: str | Path) -> str:
    """A path relative to the working directory where it lies below it (portable commands)."""
    p = Path(path)
    try:
        return str(p.resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return str(p)


def _git_commit() -> str | None:
    """The commit of the dubito checkout writing the report (``-dirty`` with local changes)."""

    return git_commit(Path(dubito.__file__).resolve().parent)


def _fmt_commit(commit: str | None) -> str:
    if not commit:
        return "unknown (not run from a git checkout)"
    if commit.endswith(DIRTY_SUFFIX):
        return f"`{commit}` {FLAG} uncommitted changes"
    return f"`{commit}`"


def _first_line(text: str | None) -> str:
    """The error's first line; for a bare traceback, its last line (the exception itself)."""
    lines = [line.strip() for line in (text or "").strip().splitlines() if line.strip()]
    if not lines:
        return "(no error message)"
    line = lines[-1] if lines[0].startswith("Traceback (most recent call last)") else lines[0]
    return line.replace("`", "'")


# ---------------------------------------------------------------------------------- grouping


def _extra_sections(exp: Experiment, rows, preset) -> list[str]:
    """Markdown from the experiment's ``report_sections(rows, preset)`` hook, if it has one
    (sections computed from the stored rows, e.g. claims checked; after the notes)."""
    return list(exp.report_sections(rows, preset)) if exp.report_sections is not None else []


# ---------------------------------------------------------------------------------- report


def _metric_table(d: _Dataset, exp: Experiment) -> list[str]:
    metrics = exp.metrics
    lines = [
        "| method · variant | " + " | ".join(_cell(ms.label) for ms in metrics) + " |",
        "|---|" + "---:|" * len(metrics),
    ]
    for m, v in d.pairs():
        cells = [_fmt_stat(summarize(d.values(m, v, ms.key))) if d.values(m, v, ms.key) else "—" for ms in metrics]
        lines.append(f"| {_cell(d.label(m, v))} | " + " | ".join(cells) + " |")
    return lines


def _paper_table(d: _Dataset, exp: Experiment, numbers: list[PaperNumber]) -> tuple[list[str], int, int]:
    labels = {ms.key: ms.label for ms in exp.metrics}
    with_note = any(pn.note for pn in numbers)
    head = "| metric | variant | ours | paper | source | difference | flag |" + (" note |" if with_note else "")
    lines = [head, "|---|---|---:|---:|---|---:|:-:|" + ("---|" if with_note else "")]
    n_flagged = n_compared = n_unjudged = 0
    for pn in numbers:
        paper = _fmt_paper_value(pn.value)
        if pn.spread is not None:
            paper += f" ± {_fmt_paper_value(pn.spread)}"
        elif pn.tolerance is not None:
            paper += f" (tolerance ± {_fmt_paper_value(pn.tolerance)})"
        hits = _match_paper(d, pn) or [(None, None)]
        for m, v in hits:
            values = d.values(m, v, pn.metric) if m is not None else []
            stat = summarize(values) if values else None
            if stat is None or stat.n == 0:
                ours, diff_text, flag = (_fmt_stat(stat) if stat else "— (not run)"), "—", ""
            else:
                diff, flagged = flag_exceeds(stat.mean, pn)
                if pn.spread is None and pn.tolerance is None:
                    n_unjudged += 1  # shown beside the paper's, but no spread says what agreeing means
                else:
                    n_compared += 1
                    n_flagged += flagged
                ours, diff_text, flag = _fmt_stat(stat), fmt(diff, 3, signed=True), FLAG if flagged else ""
            if m is None:
                variant = pn.variant
            elif pn.variant in (v, d.label(m, v)):
                variant = d.label(m, v)
            else:
                variant = f"{pn.variant} → {d.label(m, v)}"
            row = [labels.get(pn.metric, pn.metric), variant, ours, paper, pn.source, diff_text, flag]
            if with_note:
                row.append(pn.note)
            lines.append("| " + " | ".join(_cell(x) for x in row) + " |")
    return lines, n_flagged, n_compared, n_unjudged


def write_report(experiment: str, store, out_dir="docs/results", preset: str = "paper") -> Path:
    """Write ``out_dir/<experiment>.md`` and its plots in ``out_dir/<experiment>/``; return the
    Markdown's path.

    ``store``: path of the SQLite results store (or an open `ResultsStore`). Raises ValueError
    for an unknown experiment or preset and when the store holds no finished cell of this
    experiment and preset; FileNotFoundError when the store does not exist.
    """
    exp = get(experiment)
    p = exp.preset(preset)
    store_obj, store_path = _open_store(store, experiment, preset)
    store_shown = _display_path(store_path)
    out_dir = Path(out_dir)
    data_env = os.environ.get("DUBITO_DATA")  # where the UCI copies came from, so the command is complete
    bench_cmd = (f"DUBITO_DATA={shlex.quote(_display_path(Path(data_env)))} " if data_env else "") + (
        f"dubito bench {experiment} --preset {preset} --store {shlex.quote(store_shown)}"
    )
    report_cmd = (
        f"dubito report {experiment} --preset {preset} --store {shlex.quote(store_shown)} "
        f"--out {shlex.quote(_display_path(out_dir))}"
    )

    rows = store_obj.rows(experiment, preset, status="done")
    failed = store_obj.rows(experiment, preset, status="failed")
    if not rows:
        extra = f" ({len(failed)} cells failed; first error: {_first_line(failed[0].error)})" if failed else ""
        raise ValueError(
            f"the store {store_path} holds no finished cells of {experiment!r} preset {preset!r}{extra}; "
            f"run `{bench_cmd}` first"
        )
    datasets = _group(rows, exp, p)
    # datasets missing here but with results (run where the files were) are reported normally
    unavailable = {ds: why for ds, why in (exp.unavailable(p) or {}).items() if ds not in {d.name for d in datasets}}

    commits = sorted({r.commit for r in rows}, key=lambda c: (c is None, c or ""))
    versions = sorted({str(r.version) for r in rows})
    seconds = sum(float(r.seconds or 0) for r in rows)
    finished = sorted(str(r.finished_at) for r in rows if r.finished_at)
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")

    # the finished cells as text beside the page: a store is a local file, this is what a commit keeps
    cells_file = out_dir / experiment / f"cells-{preset}.jsonl"
    export_cells(store_obj, cells_file, experiment, preset)
    packed = cells_file.with_name(cells_file.name + ".gz")
    if cells_file.stat().st_size > GZIP_OVER_BYTES:  # a large file travels gzipped
        export_cells(store_obj, packed, experiment, preset)
        cells_file.unlink()
        cells_file = packed
    else:
        packed.unlink(missing_ok=True)
    import_cmd = f"dubito store import {shlex.quote(_display_path(cells_file))} --store {shlex.quote(store_shown)}"

    lines = [
        f"# {exp.title}",
        "",
        f"**Paper:** {exp.paper}  ",
        f"**Experiment:** `{experiment}`, preset `{p.name}` ({p.description})",
        "",
        "Reproduce this page (the first command fills the results store, skipping cells it already "
        "holds; `--executor process` or `--executor dask` spread it over workers without changing the numbers):",
        "",
        "```sh",
        bench_cmd,
        report_cmd,
        "```",
        "",
        f"The finished cells behind this page, with their provenance, are in `{cells_file.name}` beside its "
        f"plots; `{import_cmd}` loads them into a store, so the page can be rebuilt, or the grid "
        "resumed, without re-running them.",
        "",
        f"- Results: {len(rows)} cells over {len(datasets)} dataset(s), total compute {_duration(seconds)} "
        f"(sum of cell wall times){f'; {len(failed)} failed cell(s), listed below' if failed else ''}.",
        "- Code that produced the results: " + ("commit " if len(commits) == 1 else "commits ")
        + ", ".join(_fmt_commit(c) for c in commits)
        + "; dubito " + ", ".join(f"`{v}`" for v in versions) + ".",
    ]
    if len(commits) > 1 or len(versions) > 1:
        lines.append(f"- {FLAG} The rows come from more than one commit or version of dubito.")
    hosts = sorted({str(getattr(r, "host", "") or "") for r in rows} - {""})
    devices = sorted({str(getattr(r, "device", "") or "") for r in rows} - {""})
    runners = {getattr(r, "runner_id", "") for r in rows} - {""}
    if hosts or devices or runners:
        lines.append(
            f"- Run by {len(runners)} runner(s)"
            + (f" on host(s) {', '.join(f'`{h}`' for h in hosts)}" if hosts else "")
            + (f", device(s) {', '.join(f'`{d}`' for d in devices)}" if devices else "")
            + "."
        )
    if finished:
        lines.append(f"- Cells finished between {finished[0]} and {finished[-1]}.")
    lines += [
        f"- Report written {now} by dubito `{dubito.__version__}` at commit {_fmt_commit(_git_commit())}.",
        "",
    ]
    summary_at = len(lines)

    if exp.notes:
        lines += ["## Notes", "", exp.notes.strip(), ""]
    lines += _extra_sections(exp, rows, p)

    lines += ["## Metrics", ""]
    for ms in exp.metrics:
        note = f" {ms.note}" if ms.note else ""
        lines.append(f"- **{ms.label}** (`{ms.key}`): {ms.better} is better.{note}")
    lines += [
        "",
        "Each cell of the tables is mean ± standard error (sd with ddof 1 over √n) and, in brackets, "
        "n, the number of stored cells (splits × seeds). Beside the paper, "
        f"{FLAG} marks a difference larger than the paper's spread (or, where the paper gives no "
        "spread, than the stated tolerance).",
        "",
    ]

    run_names = {d.name for d in datasets}
    missing = [ds for ds in p.datasets if ds not in run_names and ds not in unavailable]
    if unavailable or missing:
        lines += ["## Datasets not reported", ""]
        for ds, reason in unavailable.items():
            lines.append(f"- **{ds}**: unavailable here: {reason}")
        for ds in missing:
            lines.append(f"- **{ds}**: no finished cells in the store (run `{bench_cmd} --datasets {ds}`).")
        lines.append("")

    if failed:
        lines += ["## Failed cells", ""]
        for r in sorted(failed, key=lambda r: (r.dataset, r.method, r.split, r.seed)):
            lines.append(
                f"- {r.dataset}{DOT}{r.method}{DOT}split {r.split}{DOT}seed {r.seed}: `{_first_line(r.error)}`"
            )
        lines.append("")

    settings = defaultdict(list)
    for r in rows:
        s = dict(r.settings or {})
        if s not in settings[r.method]:
            settings[r.method].append(s)
    if settings:
        lines += ["## Method settings", ""]
        for m, all_s in settings.items():
            for s in all_s:
                lines.append(f"- **{m}**: " + (", ".join(f"`{k}={v!r}`" for k, v in sorted(s.items())) or "defaults"))
        lines.append("")

    plot_dir = out_dir / experiment
    written: set[Path] = set()
    total_flagged = total_compared = total_unjudged = 0
    for d in datasets:
        splits = sorted({r.split for r in d.rows})
        seeds = sorted({r.seed for r in d.rows})
        lines += [
            f"## {d.name}",
            "",
            f"{len(d.rows)} cells: {len(splits)} split(s) × {len(seeds)} seed(s) over {len(d.methods)} method(s); "
            f"compute {_duration(sum(float(r.seconds or 0) for r in d.rows))}.",
            "",
        ]
        lines += _metric_table(d, exp)
        lines.append("")
        numbers = [pn for pn in exp.paper_numbers if pn.dataset == d.name]
        if numbers:
            table, n_flagged, n_compared, n_unjudged = _paper_table(d, exp, numbers)
            total_flagged += n_flagged
            total_compared += n_compared
            total_unjudged += n_unjudged
            lines += ["### Beside the paper", "", *table, ""]
        plot_lines, files = _plots(d, experiment, plot_dir, out_dir)
        written |= files
        if plot_lines:
            lines += ["### Plots", "", *plot_lines]

    if total_compared or total_unjudged:
        summary = (
            f"**Against the paper:** {total_flagged} of {total_compared} numbers with a spread or tolerance "
            f"differ by more than it {FLAG}."
        )
        if total_unjudged:
            summary += (f" {total_unjudged} more are shown beside the paper's without one: not judged, "
                        "neither agreement nor disagreement.")
        lines[summary_at:summary_at] = [summary, ""]

    if plot_dir.is_dir():
        for old in plot_dir.glob("*.png"):
            if old not in written:
                old.unlink()
    path = out_dir / f"{experiment}.md"
    atomic_write_text(path, "\n".join(lines).rstrip() + "\n")
    return path
