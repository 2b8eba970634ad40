"""Performance of the experiment engine and of batched ensemble training, as ratios measured
in one run (so the machine's speed cancels out).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/performance.py [--device cpu|cuda] [--quick]

Prints:

1. Runner overhead per cell: ``run_grid`` over a grid of trivial cells (in-process executor,
   fresh store: expansion, claim, submit, write, progress) minus calling ``run_cell``
   directly, per cell, and as a fraction of a typical cell (one cell of the ``uci`` paper
   preset on yacht where the UCI files are found, else the same fit on yacht-sized
   synthetic data). Also the process pool (2 workers, including its start-up).
2. Store cost per row: ``ResultsStore.claim`` and ``ResultsStore.write`` of a realistic row,
   each its own transaction, and as a fraction of a typical cell.
3. Batched ensemble training (``DeepEnsembleRegressor``: all members in one batched
   computation) against a Python loop over members each trained alone (``n_members=1`` fits,
   same settings, seeds 0..M-1), at M = 5 and 10 on yacht-sized (246 x 6) and kin8nm-sized
   (7373 x 8) synthetic data, with the uci experiment's settings (one hidden layer of 50,
   batch 100, Adam lr 0.01) and few epochs.

Timings are medians of repeats after a warm-up. This is a benchmark, not a timed test.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # workers import this file as module "performance"; and _common
    sys.path.insert(0, str(HERE))
_SHARED_UCI = HERE.parents[1] / "shared" / "data" / "uci"  # as in tests/conftest.py
if _SHARED_UCI.is_dir():
    os.environ.setdefault("DUBITO_DATA", str(_SHARED_UCI))

from _common import Printer, header, median_seconds, torch_one_thread

from dubito.experiments.base import CellResult, Experiment, MetricSpec, Preset

N_TRIVIAL = 200  # cells of the trivial grid

# ----------------------------------------------------------------------------- trivial experiment
def trivial_run_cell(cell, device="cpu", progress=False) -> CellResult:
    """A cell that does (almost) nothing: a few numbers from its key."""
    x = (cell.seed * 7919 + len(cell.dataset)) % 1000 / 1000.0
    return CellResult(variants={"A": {"rmse": x, "nll": 1.0 - x}}, artefacts={}, info={"n": cell.seed})


EXPERIMENT = Experiment(
    name="trivial",
    title="trivial cells (runner overhead benchmark)",
    paper="-",
    presets={
        "grid": Preset("grid", f"{N_TRIVIAL} trivial cells", datasets=("d0", "d1", "d2", "d3"),
                       methods={"m": {"x": 1}}, seeds=tuple(range(N_TRIVIAL // 4)), splits=(0,)),
    },
    metrics=(MetricSpec("rmse", "RMSE"),),
    paper_numbers=(),
    run_cell=trivial_run_cell,
    n_splits=lambda dataset: 1,
)

UCI_SETTINGS = dict(hidden=(50,), batch_size=100, lr=0.01, weight_decay=1e-8, lr_drop="none", validation_fraction=0.0)


def _quiet_console(terminal=False):
    from rich.console import Console

    return Console(file=io.StringIO(), force_terminal=terminal, width=100)


# ----------------------------------------------------------------------------- 1. runner overhead
def runner_overhead(tmp: Path, repeats: int) -> dict:
    import dubito.experiments as experiments
    from dubito.experiments.runner import run_grid

    experiments._MODULES["trivial"] = "performance"
    cells = EXPERIMENT.cells("grid")
    n = len(cells)

    def direct():
        for cell in cells:
            trivial_run_cell(cell)

    counter = iter(range(10**6))

    def grid(terminal=False, **kw):
        def go():
            summary = run_grid("trivial", preset="grid", store=tmp / f"trivial-{next(counter)}.sqlite",
                               console=_quiet_console(terminal), **kw)
            assert summary.done == (n // 4 if kw.get("datasets") else n), summary
        return go

    direct()
    grid(progress=False)()  # warm-up (imports, git commit lookup)
    t_direct = median_seconds(direct, repeats)
    t_grid = median_seconds(grid(progress=False), repeats)
    t_bar = median_seconds(grid(progress=True, terminal=True), repeats)
    t_skip = median_seconds(lambda: run_grid("trivial", preset="grid", store=tmp / "trivial-0.sqlite",
                                           progress=False, console=_quiet_console()), repeats)
    # process pool: the whole grid and a quarter of it give start-up and marginal cost per cell
    t_pool = median_seconds(grid(progress=False, executor="process", workers=2), 1)
    t_pool_quarter = median_seconds(grid(progress=False, executor="process", workers=2, datasets=["d0"]), 1)
    marginal = (t_pool - t_pool_quarter) / (n - n // 4)
    return {
        "n": n,
        "direct_per_cell": t_direct / n,
        "local_per_cell": (t_grid - t_direct) / n,
        "local_bar_per_cell": (t_bar - t_direct) / n,
        "skip_per_cell": t_skip / n,
        "pool_per_cell": (t_pool - t_direct) / n,
        "pool_marginal_per_cell": marginal - t_direct / n,
        "pool_startup": t_pool - n * marginal,
    }


# ----------------------------------------------------------------------------- 2. store cost
def store_cost(tmp: Path, n_rows: int) -> dict:
    import random

    from dubito.experiments.base import Cell
    from dubito.experiments.store import ResultsStore

    rng = random.Random(0)
    metrics = ("rmse", "nll", "crps", "cover50", "cover90", "cover95", "width95", "calib_err")
    result = CellResult(
        variants={v: {m: rng.random() for m in metrics} for v in ("DE", "EXT")},
        artefacts={"pit": {v: [rng.random() for _ in range(50)] for v in ("DE", "EXT")}},
        info={"n_train": 277, "n_test": 31, "gammas": [rng.random() for _ in range(5)], "fit_seconds": 1.0},
    )
    settings = dict(n_members=5, hidden=[50], epochs=40, batch_size=100, lr=0.01)
    cells = [Cell("bench", "p", "yacht", "ensemble", i % 20, i // 20, settings) for i in range(n_rows)]
    path = tmp / "store-cost.sqlite"
    with ResultsStore(path) as store:
        store.commit  # computed once per run, not per row
        start = time.perf_counter()
        for cell in cells:
            store.claim(cell, "bench")
        t_claim = time.perf_counter() - start
        start = time.perf_counter()
        for cell in cells:
            store.write(cell, result, status="done", seconds=1.0, runner_id="bench")
        t_write = time.perf_counter() - start
        start = time.perf_counter()
        rows = store.rows("bench")
        t_read = time.perf_counter() - start
    assert len(rows) == n_rows
    size = path.stat().st_size + sum(p.stat().st_size for p in tmp.glob("store-cost.sqlite-*"))
    return {"n": n_rows, "claim": t_claim / n_rows, "write": t_write / n_rows, "read": t_read / n_rows,
            "bytes_per_row": size / n_rows}


# ----------------------------------------------------------------------------- typical cell
def typical_cell(device: str) -> tuple[str, float]:
    """Seconds of one typical cell: a uci paper-preset cell on yacht, else the same fit on
    yacht-sized synthetic data."""
    try:
        import dubito.experiments as experiments

        exp = experiments.get("uci")
        missing = exp.unavailable(exp.preset("paper")).get("yacht")
        if missing:
            raise FileNotFoundError(missing)
        cell = next(c for c in exp.cells("paper", datasets=["yacht"]) if c.split == 0)
        exp.run_cell(cell, device=device, progress=False)  # warm-up (and data load)
        start = time.perf_counter()
        exp.run_cell(cell, device=device, progress=False)
        return f"uci/paper cell ({cell.dataset}, split 0, {cell.settings.get('epochs')} epochs, M={cell.settings.get('n_members')})", time.perf_counter() - start
    except Exception as exc:  # no UCI files here, or the uci experiment changed
        from dubito.regression import DeepEnsembleRegressor

        X, y = _data(246, 6)
        est = DeepEnsembleRegressor(n_members=5, epochs=40, device=device, random_state=0, progress=False, **UCI_SETTINGS)
        est.fit(X, y)
        start = time.perf_counter()
        est.fit(X, y).predict_distribution(X)
        return f"synthetic yacht-sized fit, M=5, 40 epochs (uci cell unavailable: {type(exc).__name__}: {exc})", time.perf_counter() - start


# ----------------------------------------------------------------------------- 3. batched vs loop
def _data(n: int, d: int, seed: int = 0):
    import numpy as np

    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.sin(X[:, 0]) + X[:, 1:] @ rng.normal(size=d - 1) * 0.3 + 0.1 * rng.normal(size=n)
    return X, y


def batched_vs_loop(device: str, quick: bool) -> list[dict]:
    from dubito.regression import DeepEnsembleRegressor

    out = []
    sizes = (("yacht-sized", 246, 6, 40, 3), ("kin8nm-sized", 7373, 8, 10, 2))
    for label, n, d, epochs, repeats in sizes:
        if quick:
            epochs, repeats = max(2, epochs // 5), 1
        X, y = _data(n, d)

        def fit(m, seed):
            return DeepEnsembleRegressor(n_members=m, epochs=epochs, device=device, random_state=seed,
                                         progress=False, **UCI_SETTINGS).fit(X, y)

        fit(2, 0)  # warm-up
        for M in (5, 10):
            t_batched = median_seconds(lambda: fit(M, 0), repeats)
            t_loop = median_seconds(lambda: [fit(1, seed) for seed in range(M)], repeats)
            out.append({"data": f"{label} ({n}x{d})", "epochs": epochs, "M": M,
                        "batched": t_batched, "loop": t_loop, "speedup": t_loop / t_batched})
    return out


# ----------------------------------------------------------------------------- main
def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu", help="torch device for the ensemble fits")
    parser.add_argument("--quick", action="store_true", help="fewer epochs and repeats (smoke test)")
    parser.add_argument("--out", default=None, help="also write the printed tables to this file")
    args = parser.parse_args(argv)
    out = Printer(args.out)
    out(header(torch_one_thread(force=False), args.device))
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        repeats = 1 if args.quick else 3
        over = runner_overhead(tmp, repeats)
        cost = store_cost(tmp, 100 if args.quick else 500)
    cell_label, cell_s = typical_cell(args.device)
    ens = batched_vs_loop(args.device, args.quick)

    ms = 1e3
    out(f"\ntypical cell: {cell_label}: {cell_s:.2f} s\n")
    out(f"1. runner overhead per cell (grid of {over['n']} trivial cells minus calling run_cell directly,"
        f" {over['direct_per_cell'] * 1e6:.1f} us/cell)")
    out("| executor | overhead per cell | / typical cell |")
    out("|---|---:|---:|")
    for label, key in (("local (in-process), no progress bar", "local_per_cell"),
                       ("local, with progress bar (terminal)", "local_bar_per_cell"),
                       (f"process pool, 2 workers: {over['n']} cells incl. start-up", "pool_per_cell"),
                       ("process pool, 2 workers: marginal cell (start-up excluded)", "pool_marginal_per_cell")):
        out(f"| {label} | {over[key] * ms:.2f} ms | {over[key] / cell_s:.2e} |")
    out(f"| process pool start-up (2 spawned workers importing torch), once per run | {over['pool_startup']:.2f} s | "
        f"{over['pool_startup'] / cell_s:.2f} |")
    out(f"| skipping a stored cell (re-run of a finished grid) | {over['skip_per_cell'] * ms:.3f} ms | "
        f"{over['skip_per_cell'] / cell_s:.2e} |")
    out(f"\n2. store cost per row ({cost['n']} rows, one transaction each; {cost['bytes_per_row']:.0f} bytes/row on disk)")
    out("| operation | per row | / typical cell |")
    out("|---|---:|---:|")
    for label, key in (("claim (BEGIN IMMEDIATE)", "claim"), ("write (row + release claim)", "write"),
                       ("read back (rows())", "read")):
        out(f"| {label} | {cost[key] * ms:.3f} ms | {cost[key] / cell_s:.2e} |")
    out("\n3. batched ensemble training vs a loop over members (n_members=1 fits), same settings")
    out("| data | epochs | M | batched | loop | loop / batched |")
    out("|---|---:|---:|---:|---:|---:|")
    for r in ens:
        out(f"| {r['data']} | {r['epochs']} | {r['M']} | {r['batched']:.2f} s | {r['loop']:.2f} s | {r['speedup']:.1f}x |")
    out(f"\ntotal benchmark time: {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
