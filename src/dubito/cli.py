"""Command line: ``dubito run`` (the main job), ``bench`` / ``report`` (experiments),
``datasets``, ``methods``, ``experiments``, ``store export`` / ``store import``."""

from __future__ import annotations

import os
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

app = typer.Typer(add_completion=False, no_args_is_help=True, help="dubito: honest uncertainty for deep networks.")
console = Console()


def _one_thread():
    """Small-matrix work on shared cores runs 10-50x slower with more than one thread."""
    import torch

    if "OMP_NUM_THREADS" not in os.environ:
        torch.set_num_threads(1)


@app.command()
def run(
    data: str = typer.Option("diabetes", help="data set name (see `dubito datasets`)"),
    method: str = typer.Option("ensemble", help="method name (see `dubito methods`)"),
    out: Path = typer.Option(Path("dubito-report"), help="folder for report.md and its plots"),
    split: int = typer.Option(0, help="which train/test split to use"),
    seed: int = typer.Option(0, help="random seed of the method"),
    device: str = typer.Option("cpu", help="torch device: cpu or cuda"),
    epochs: int = typer.Option(None, help="override the method's number of training epochs"),
    quiet: bool = typer.Option(False, "--quiet", help="no progress bar"),
):
    """Fit a method on the first split of a data set, print its scores, write a report."""
    from dubito.run import TABLE_COLUMNS, run as run_job

    _one_thread()
    overrides = {} if epochs is None else {"epochs": epochs}
    try:
        result = run_job(data, method, out, split=split, seed=seed, device=device, progress=not quiet,
                         print_convergence=False, **overrides)
    except (ValueError, FileNotFoundError) as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2)
    table = Table(title=f"{method} on {data} (split {split}: {result.n_train} train / {result.n_test} test)")
    table.add_column("predictive")
    for _, label in TABLE_COLUMNS:
        table.add_column(label, justify="right")
    for name, summary in result.summaries.items():
        table.add_row(name, *(f"{summary[key]:.4g}" for key, _ in TABLE_COLUMNS))
    console.print(table)
    console.print(f"fit: {result.fit_seconds:.1f} s; report: {result.files[0]}")
    if result.convergence is not None:  # below the table, where it is read
        console.print(result.convergence, style="bold yellow", markup=False, highlight=False, soft_wrap=True)


def _names(value: str | None) -> list[str] | None:
    return [v.strip() for v in value.split(",") if v.strip()] if value else None


@app.command()
def bench(
    experiment: str = typer.Argument(..., help="experiment name (see `dubito experiments`)"),
    preset: str = typer.Option("quick", help="quick (minutes, smoke test) or paper (the paper's protocol)"),
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

    _one_thread()
    try:
        summary = run_grid(
            experiment, preset=preset, store=store, executor=executor, workers=workers, scheduler=scheduler,
            datasets=_names(datasets), methods=_names(methods), device=device, progress=not quiet,
        )
    except (ValueError, FileNotFoundError) as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2)
    if summary.interrupted:
        raise typer.Exit(128 + summary.interrupted)  # 130 SIGINT, 143 SIGTERM
    if summary.failed:
        raise typer.Exit(1)


@app.command()
def report(
    experiment: str = typer.Argument(..., help="experiment name (see `dubito experiments`)"),
    preset: str = typer.Option("paper", help="which preset's results to report"),
    store: Path = typer.Option(Path("dubito-results.sqlite"), help="SQLite results store to read"),
    out: Path = typer.Option(Path("docs/results"), help="folder for <experiment>.md and its plots"),
):
    """Write the Markdown report of an experiment (ours beside the paper's numbers) with plots."""
    from dubito.experiments.report import write_report

    try:
        path = write_report(experiment, store=store, out_dir=out, preset=preset)
    except (ValueError, FileNotFoundError) as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2)
    console.print(f"report: {path}")


@app.command()
def experiments():
    """List the experiments `dubito bench` accepts, with their presets."""
    from dubito import experiments as ex

    for name in ex.available():
        e = ex.get(name)
        console.print(f"[bold]{name}[/bold]: {e.title} ({e.paper}); presets: {', '.join(e.presets)}")


@app.command()
def datasets():
    """List the data sets `dubito run --data` accepts."""
    from dubito import data as ds

    for name in ds.available():
        console.print(name)


@app.command()
def methods():
    """List the methods `dubito run --method` accepts."""
    from dubito.methods import METHODS

    for m in METHODS.values():
        console.print(f"[bold]{m.name}[/bold]: {m.description} ({m.paper})")


store_app = typer.Typer(no_args_is_help=True, help="Move a results store's finished cells to and from JSON Lines text.")
app.add_typer(store_app, name="store")


@store_app.command("export")
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
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2)
    console.print(f"exported {n} cells to {out}")


@store_app.command("import")
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
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2)
    console.print(f"imported {added} cells into {store} ({kept} already there)")


if __name__ == "__main__":
    app()
