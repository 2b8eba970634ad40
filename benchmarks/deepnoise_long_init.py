"""B-DeepNoise's Table 1 cell run whole with a longer SGD initialisation.

    OMP_NUM_THREADS=1 DUBITO_DATA=... .venv/bin/python benchmarks/deepnoise_long_init.py \
        [--dataset het-4000] [--steps 4000] [--jobs 2] [--preset paper]

Does the full sampler, started from an init of more Adam steps, close the gap to the paper's W1?

Why: `benchmarks/deepnoise_init.py` shows the init alone falling from W1 80.6 at 1,000 Adam steps
(the `paper` preset's budget) to 23.8 at 4,000 on het-4000 (paper: B-DeepNoise 26). This script
checks that the conclusion holds for the whole estimator, not only its starting point.

What it runs: the preset's (default `paper`) B-DeepNoise cell for the dataset (repeat 0; 2 chains x 1,500
full sweeps, 250 kept states, 40 noise realisations per state) through the experiment's own
`run_cell`, with only ``sgd_steps`` changed (and ``n_jobs``, which changes no number). The cell's
preset name becomes ``<preset>-init<steps>``, so its checkpoints (every 100 sweeps, under
``$DUBITO_CACHE``) never mix with the preset's: run it again after an interruption and the chains
resume. It prints the W1 x 1000, the test metrics, the worst split R-hat of the monitored
predictive means, the wall seconds per chain and the CPU seconds of the run (this process and its
chain workers: meaningful under `nice` or beside other work). A measurement, not a test; its
output is recorded in the deepnoise experiment's NOTES.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from dataclasses import replace

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import header, one_thread_env, torch_one_thread

one_thread_env()


def _cpu_seconds() -> float:
    """User + system CPU seconds of this process and its reaped children (the chain workers)."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="het-4000", help="a synthetic set of the deepnoise experiment")
    ap.add_argument("--steps", type=int, default=4000, help="Adam steps of each chain's SGD init (the paper preset: 1000)")
    ap.add_argument("--jobs", type=int, default=2, help="chains run in this many processes")
    ap.add_argument("--preset", default="paper", help="the deepnoise preset whose cell is run")
    args = ap.parse_args(argv)
    torch = torch_one_thread()

    from dubito.experiments.deepnoise import EXPERIMENT, parse_dataset, run_cell

    try:
        synthetic = parse_dataset(args.dataset).kind == "synthetic"
    except ValueError as exc:
        raise SystemExit(str(exc)) from None
    if not synthetic:
        raise SystemExit(f"{args.dataset!r} is not a synthetic set of the deepnoise experiment (het/skew/multi-N)")
    cells = [c for c in EXPERIMENT.cells(args.preset, datasets=[args.dataset], methods=["deepnoise"]) if c.split == 0]
    if not cells:
        raise SystemExit(f"{args.dataset!r} is not in the deepnoise {args.preset} preset")
    base = cells[0]
    cell = replace(base, preset=f"{args.preset}-init{args.steps}",
                   settings={**base.settings, "sgd_steps": args.steps, "n_jobs": args.jobs})
    print(header(torch))
    preset_init = base.settings.get("sgd_steps") or f"{base.settings.get('sgd_epochs')} epochs"
    print(f"{cell}: sgd_steps {args.steps} (preset {preset_init}), {args.jobs} chain processes",
          flush=True)
    t0, c0 = time.perf_counter(), _cpu_seconds()
    result = run_cell(cell)
    wall, cpu = time.perf_counter() - t0, _cpu_seconds() - c0
    m = next(iter(result.variants.values()))
    diag = result.info.get("diagnostics", {})
    rhat = diag.get("rhat_mean")  # the max over the monitored rows (a per-row list before issue 19)
    rhat = float("nan") if rhat is None else max(rhat) if isinstance(rhat, list) else float(rhat)
    chains = ", ".join(f"{s:.0f}" for s in diag.get("chain_seconds", []))
    print(f"W1 x 1000 {m['w1']:.1f}; test RMSE {m['rmse']:.4f}, NLL {m['nll']:.3f}, WEPI-95 {m['wepi_95']:.3f}, "
          f"coverage {m['coverage_95']:.3f}")
    print(f"max split R-hat of the predictive means {rhat:.3f}, train log-likelihood R-hat "
          f"{diag.get('rhat_loglik', float('nan')):.2f}; SGD epochs {result.info['settings_used']['sgd_epochs']}")
    print(f"wall {wall:.0f} s (chains {chains} s), CPU {cpu:.0f} s")


if __name__ == "__main__":
    main()
