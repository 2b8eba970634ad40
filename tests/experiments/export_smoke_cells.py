"""Write `smoke_cells/<experiment>.jsonl`: each experiment's smallest preset run into a fresh store
on one thread, exported (`dubito store export`). The golden numbers of test_smoke_presets.py.

    OMP_NUM_THREADS=1 DUBITO_DATA=../shared/data/uci python tests/experiments/export_smoke_cells.py [--out DIR]

Run it at the commit whose numbers are to be kept (`make smoke-cells` runs it on the checkout),
on the machine that will run the test: float rounding in training differs between CPUs, and
tuned or sampled cells then take other paths (see test_smoke_presets.py).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import torch

from dubito.experiments.runner import run_grid
from dubito.experiments.store import ResultsStore
from dubito.experiments.store_transfer import export_cells

#: experiment -> its smallest preset
PRESETS = {
    "deepnoise": "smoke", "ensembles": "quick", "icnlm": "smoke", "leaderboard": "quick", "ood": "smoke",
    "recalibrate": "quick", "thesis": "smoke", "uci": "quick",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "smoke_cells")
    parser.add_argument("experiments", nargs="*", default=sorted(PRESETS))
    args = parser.parse_args()
    torch.set_num_threads(1)
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.experiments:
        with tempfile.TemporaryDirectory() as tmp:
            store = Path(tmp) / "store.sqlite"
            summary = run_grid(name, PRESETS[name], store=store, progress=False)
            if summary.failed:
                raise SystemExit(f"{name}: {summary.failed} cells failed: {summary.failures}")
            with ResultsStore(store) as s:
                n = export_cells(s, args.out / f"{name}.jsonl", name, PRESETS[name])
        print(f"{name}/{PRESETS[name]}: {n} cells -> {args.out / f'{name}.jsonl'}", flush=True)


if __name__ == "__main__":
    main()
