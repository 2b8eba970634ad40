"""Command line: ``dubito run`` (the main job), ``bench`` / ``report`` (experiments),
``datasets``, ``methods``, ``experiments``, ``store export`` / ``store import``; ``dubito --version``.

Boolean options are flags (``--quiet``, not ``--quiet <bool>``): typer's rich help prints a type
for every option, flags included, so the commands and groups here blank the type of flags
(`_FlagsCommand`, `_FlagsGroup`).
"""

from __future__ import annotations

# Each command imports what it needs inside its function (dubito's modules, torch): `dubito --help`,
# `--version` and shell completion then start in about 0.4 s instead of the 5 s torch takes to import.

import os
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table
from typer.core import TyperCommand, TyperGroup


def _blank_flag_types(params):
    """Flags take no value: an empty metavar stops the help from printing ``<bool>`` after them."""
    for param in params:
        if getattr(param, "is_flag", False) and getattr(param, "metavar", None) is None:
            param.metavar = ""
    return params


class _FlagsCommand(TyperCommand):
    def get_params(self, ctx):
        return _blank_flag_types(super().get_params(ctx))


class _FlagsGroup(TyperGroup):
    def get_params(self, ctx):
        return _blank_flag_types(super().get_params(ctx))


app = typer.Typer(add_completion=False, no_args_is_help=True, cls=_FlagsGroup,
                  help="dubito: honest uncertainty for deep networks.")
console = Console()

#: The smoke-test presets, one of which every experiment has: `bench`'s default.
SMOKE_PRESETS = ("quick", "smoke")


def _version(value: bool) -> None:
    if value:
        import dubito

        console.print(f"dubito {dubito.__version__}", highlight=False)
        raise typer.Exit()


#: Set by ``--debug``: a user error shows its traceback instead of one line.
_DEBUG = {"on": False}


@app.callback()
def main(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="print the version of dubito and exit"),
    debug: bool = typer.Option(False, "--debug", help="show the full traceback of an error instead of one line"),
):
    """dubito: honest uncertainty for deep networks."""
    _DEBUG["on"] = bool(debug)


def _fail(exc: BaseException):
    """Print ``error: <message>`` (the message verbatim: brackets such as ``dubito[tabular]`` are not
    rich markup) and exit with status 2; with ``--debug``, raise ``exc`` with its traceback."""
    from rich.text import Text

    if _DEBUG["on"]:
        raise exc
    console.print(Text.assemble(("error:", "red"), " ", str(exc)), soft_wrap=True)
    raise typer.Exit(2)


def _process_setup():
    """One torch thread (small-matrix work on shared cores runs 10-50x slower with more) and freed
    heap memory kept in the process (`dubito.heap`: no page faults on every training step)."""
    import torch

    from dubito.heap import retain_freed_memory

    if "OMP_NUM_THREADS" not in os.environ:
        torch.set_num_threads(1)
    retain_freed_memory()


@app.command(cls=_FlagsCommand)
def run(
    data: str = typer.Option("diabetes", help="data set name (see `dubito datasets`), or a CSV / Parquet file "
                             "with --target (needs pandas and pyarrow: the tabular extra)"),
    target: str = typer.Option(None, help="the response column of the --data file; every other column is a "
                               "numeric feature"),
    method: str = typer.Option("ensemble", help="method name (see `dubito methods`)"),
    out: Path = typer.Option(Path("dubito-report"), help="folder for report.md and its plots"),
    split: int = typer.Option(0, help="which train/test split to use"),
    seed: int = typer.Option(0, help="random seed of the method"),
    device: str = typer.Option("cpu", help="torch device: cpu or cuda"),
    epochs: int = typer.Option(None, help="override the method's number of training epochs"),
    calibrate: str = typer.Option(None, help="recalibrate: conformal or isotonic; holds out a fifth of the training "
                                  "rows and reports before and after side by side"),
    quiet: bool = typer.Option(False, "--quiet", help="no progress bar"),
):
    """Fit a method on one split of a data set or of your own table, print its scores, write a report.

    Your own table: --data my.csv --target price (or .parquet); 20 seeded random 80/20 splits."""
    from dubito.run import TABLE_COLUMNS, run as run_job

    _process_setup()
    overrides = {} if epochs is None else {"epochs": epochs}
    try:
        result = run_job(data, method, out, split=split, seed=seed, device=device, progress=not quiet,
                         print_convergence=False, target=target, calibrate=calibrate, **overrides)
    except (ValueError, FileNotFoundError, ImportError, FloatingPointError) as exc:  # FloatingPointError: diverged
        _fail(exc)
    table = Table(title=f"{method} on {result.data} (split {split}: {result.n_train} train / {result.n_test} test)")
    table.add_column("predictive")
    for _, label in TABLE_COLUMNS:
        table.add_column(label, justify="right")
    for name, summary in result.summaries.items():
        table.add_row(name, *(f"{summary[key]:.4g}" for key, _ in TABLE_COLUMNS))
    console.print(table)
    console.print(f"fit: {result.fit_seconds:.1f} s; report: {result.files[0]}")
    if result.convergence is not None:  # below the table, where it is read
        console.print(result.convergence, style="bold yellow", markup=False, highlight=False, soft_wrap=True)


def default_preset(experiment: str) -> str:
    """``bench``'s default preset of ``experiment``: its smoke test, the one of `SMOKE_PRESETS` it has."""
    from dubito import experiments as ex

    presets = ex.get(experiment).presets
    for name in SMOKE_PRESETS:
        if name in presets:
            return name
    raise ValueError(f"experiment {experiment!r} has no smoke-test preset ({' or '.join(SMOKE_PRESETS)}); "
                     f"pass --preset, one of: {', '.join(presets)}")


def _names(value: str | None) -> list[str] | None:
    return [v.strip() for v in value.split(",") if v.strip()] if value else None


@app.command(cls=_FlagsCommand)
def bench(
    experiment: str = typer.Argument(..., help="experiment name (see `dubito experiments`)"),
    preset: str = typer.Option(None, help="which of the experiment's presets to run; default: its smoke test "
                               "(quick or smoke, minutes); `dubito experiments` lists every experiment's presets "
                               "(paper: the paper's protocol)"),
    store: Path = typer.Option(Path("dubito-results.sqlite"), help="SQLite results store (created if absent)"),
    executor: str = typer.Option("local", help="local (in-process), process (local pool) or dask"),
    workers: int = typer.Option(None, help="worker processes for --executor process"),
    scheduler: str = typer.Option(None, help="Dask scheduler address for --executor dask, e.g. tcp://127.0.0.1:8786"),
    datasets: str = typer.Option(None, help="comma-separated subset of the preset's datasets"),
    methods: str = typer.Option(None, help="comma-separated subset of the preset's methods"),
    device: str = typer.Option("cpu", help="torch device for the cells: cpu or cuda"),
    quiet: bool = typer.Option(False, "--quiet", help="no progress bar"),
):
    """Run an experiment's grid into the results store; cells already stored are skipped."""
    from dubito.experiments.runner import run_grid

    _process_setup()
    try:
        preset = default_preset(experiment) if preset is None else preset
        summary = run_grid(
            experiment, preset=preset, store=store, executor=executor, workers=workers, scheduler=scheduler,
            datasets=_names(datasets), methods=_names(methods), device=device, progress=not quiet,
        )
    except (ValueError, FileNotFoundError) as exc:
        _fail(exc)
    if summary.interrupted:
        raise typer.Exit(128 + summary.interrupted)  # 130 SIGINT, 143 SIGTERM
    if summary.failed:
        raise typer.Exit(1)


@app.command(cls=_FlagsCommand)
def report(
    experiment: str = typer.Argument(..., help="experiment name (see `dubito experiments`)"),
    preset: str = typer.Option("paper", help="which preset's results to report"),
    store: Path = typer.Option(Path("dubito-results.sqlite"), help="SQLite results store to read"),
    out: Path = typer.Option(Path("docs/results"), help="folder for <experiment>.md and its plots"),
):
    """Write the Markdown report of an experiment (ours beside the paper's numbers) with plots."""
    from dubito.experiments.report import write_report
    from dubito.io import check_output_folder

    try:
        check_output_folder(out, "--out")
        path = write_report(experiment, store=store, out_dir=out, preset=preset)
    except (ValueError, FileNotFoundError) as exc:
        _fail(exc)
    console.print(f"report: {path}")


@app.command(cls=_FlagsCommand)
def experiments():
    """List the experiments `dubito bench` accepts, with their presets."""
    from dubito import experiments as ex

    for name in ex.available():
        e = ex.get(name)
        default = next((p for p in SMOKE_PRESETS if p in e.presets), None)
        presets = ", ".join(f"{p} (default)" if p == default else p for p in e.presets)
        console.print(f"[bold]{name}[/bold]: {e.title} ({e.paper}); presets: {presets}")


@app.command(cls=_FlagsCommand)
def datasets():
    """List the data sets `dubito run --data` accepts (besides your own CSV or Parquet file)."""
    from dubito import data as ds

    for name in ds.available():
        console.print(name)
    console.print("or your own table: --data FILE.csv|FILE.parquet --target COLUMN", highlight=False)


@app.command(cls=_FlagsCommand)
def methods():
    """List the methods `dubito run --method` accepts, then the classifiers (`dubito.methods.CLASSIFIERS`)."""
    from dubito.methods import CLASSIFIERS, METHODS

    for m in METHODS.values():
        console.print(f"[bold]{m.name}[/bold]: {m.description} ({m.paper})")
    console.print("\nClassification (Python: dubito.methods.get_classifier(name).build(...); `dubito bench thesis`):")
    for m in CLASSIFIERS.values():
        console.print(f"[bold]{m.name}[/bold]: {m.description} ({m.paper})")


store_app = typer.Typer(no_args_is_help=True, cls=_FlagsGroup, help="Move a results store's finished cells to and from JSON Lines text.")
app.add_typer(store_app, name="store")


@store_app.command("export", cls=_FlagsCommand)
def store_export(
    experiment: str = typer.Argument(..., help="experiment name (see `dubito experiments`)"),
    out: Path = typer.Argument(..., help="JSON Lines file to write (atomically)"),
    store: Path = typer.Option(Path("dubito-results.sqlite"), help="SQLite results store to read"),
    preset: str = typer.Option(None, help="only this preset's cells (default: all)"),
):
    """Write an experiment's finished cells as JSON Lines: a text copy to commit beside a report."""
    from dubito.experiments.store import ResultsStore
    from dubito.experiments.store_transfer import export_cells

    try:
        with ResultsStore(store, create=False) as s:
            n = export_cells(s, out, experiment, preset)
    except (ValueError, FileNotFoundError) as exc:
        _fail(exc)
    console.print(f"exported {n} cells to {out}")


@store_app.command("import", cls=_FlagsCommand)
def store_import(
    cells: Path = typer.Argument(..., help="JSON Lines file written by `dubito store export`"),
    store: Path = typer.Option(Path("dubito-results.sqlite"), help="SQLite results store (created if absent)"),
):
    """Add the cells of a JSON Lines file that the store lacks; finished cells are never replaced."""
    from dubito.experiments.store import ResultsStore
    from dubito.experiments.store_transfer import import_cells

    try:
        with ResultsStore(store) as s:
            added, kept = import_cells(s, cells)
    except (ValueError, FileNotFoundError) as exc:
        _fail(exc)
    console.print(f"imported {added} cells into {store} ({kept} already there)")


@store_app.command("rename-method", cls=_FlagsCommand)
def store_rename_method(
    experiment: str = typer.Argument(..., help="experiment name (see `dubito experiments`)"),
    old: str = typer.Argument(..., help="the method's name in the stored cells"),
    new: str = typer.Argument(..., help="its new name (as `dubito methods` lists it)"),
    store: Path = typer.Option(Path("dubito-results.sqlite"), help="SQLite results store to change"),
    dataset: list[str] = typer.Option(None, "--dataset", help="only this data set's cells (repeatable)"),
):
    """Rename a method in an experiment's stored cells (and a variant keyed by it), so that a renamed
    method's finished cells still count."""
    from dubito.experiments.store import ResultsStore

    try:
        with ResultsStore(store, create=False) as s:
            n = s.rename_method(experiment, old, new, datasets=dataset or None)
    except (ValueError, FileNotFoundError) as exc:
        _fail(exc)
    console.print(f"renamed {n} {experiment} cells of {old} to {new} in {store}")


if __name__ == "__main__":
    app()
