"""Hostile model files against every estimator class that saves (issue 22): how many damaged files
end in one clear error, how many load unchanged, how many load and predict something else
without a word (must be 0), and how many crash with anything but a clear error (must be 0).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/reliability.py [--flips 30] [--cuts 10] [--out FILE]

For each class a tiny model is fitted and saved; its predictions on 20 inputs (the predictive
mean, or the class probabilities) are the reference. Categories of damage, each on a fresh copy:

* ``byte flips``: 1 to 20 bytes at random offsets XOR-ed with a random non-zero byte (header,
  metadata, tensor data alike; seeded);
* ``truncation``: the file cut at a random length;
* ``edited values``: settings re-saved through `dubito.io.save_tensors` (so the SHA-256 matches):
  a negative or zero y scale, a string y mean, a fitted scalar (lambda_prior, variance_scale,
  noise_var, noise_sd, noise_std, prior_precision) of NaN, a negative row count, feature names
  of the wrong length, a network of hidden = [6000, 6000] (x 5 members), 10**9 classes, device
  "meta";
  each where the class has that setting.

Beyond model files (``--no-extras`` skips them):

* ``UCI copies``: yacht's files (from ``DUBITO_DATA``) copied to a temporary folder, once as a
  user's folder (``data_dir``) and once as dubito's cache (``DUBITO_CACHE``), then damaged: the
  target x 1000, half the rows of a split's test index removed, an index repeated, a value edited,
  a zero-byte data file, data.txt missing. A user's folder may warn (its numbers are then not
  comparable with published ones: ``warned``); the cache must refuse;
* ``store import``: a cells file exported from a fresh store, one line edited: seconds NaN or
  negative, split 1e30 or -5, an empty experiment name, no variants, a malformed finished_at, a
  cell repeated, JSON nested 100,000 deep;
* ``CLI``: ``dubito run`` / ``bench`` as subprocesses with an --out that is a file, an unknown data
  set, a classification data set, --device cuda on a machine without one, an unknown bench
  preset: exit status 2 and no "Traceback" is a clear error. (Read-only folders are not tried:
  this script runs as root here, whom they do not stop.)

Outcomes: ``clear error`` = a ValueError (or FloatingPointError) raised by ``load`` or by the
first prediction; ``unchanged`` = loads and predicts exactly the reference; ``silent wrong`` =
loads and predicts anything else (NaN included); ``crash`` = any other exception. Also printed:
the largest rise of the process's peak resident memory during one trial's load (a bound on what
a damaged file can make load allocate). A measurement script, not a test; its output is
docs/results/reliability.md.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import tempfile
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import Printer, header, one_thread_env, progress, torch_one_thread  # noqa: E402

one_thread_env()

OUTCOMES = ("clear error", "warned", "unchanged", "silent wrong", "crash")


def _estimators():
    """(class name, unfitted estimator, task) for every estimator class that saves; tiny settings."""
    from dubito.classification import DeepEnsembleClassifier, MCDropoutClassifier
    from dubito.regression import (
        DeepEnsembleRegressor,
        DeepNoiseRegressor,
        DeepNoiseSGDRegressor,
        DeterministicRegressor,
        HyperVIRegressor,
        ImplicitCopulaRegressor,
        LastLayerLaplaceRegressor,
        MCDropoutRegressor,
        MeanFieldVIRegressor,
        MixtureDensityRegressor,
        NaiveRegressor,
        NUTSNetworkRegressor,
    )

    quick = dict(progress=False, random_state=0)
    net = dict(hidden=(8,), epochs=3, batch_size=16, **quick)
    regressors = [
        DeepEnsembleRegressor(n_members=2, **net),
        DeterministicRegressor(**net),
        NaiveRegressor(),
        LastLayerLaplaceRegressor(**net),
        MCDropoutRegressor(n_samples=5, **net),
        MixtureDensityRegressor(n_components=2, **net),
        DeepNoiseSGDRegressor(n_noise_samples=4, **net),
        DeepNoiseRegressor(hidden=(3,), n_chains=2, n_burnin=4, n_keep=6, thin=1, init="random", **quick),
        ImplicitCopulaRegressor(hidden=(8,), n_features=3, activation="tanh", epochs=3, batch_size=16,
                                vi_max_iter=100, vi_min_iter=50, n_draws=20, **quick),
        MeanFieldVIRegressor(hidden=(8,), epochs=3, n_samples=10, **quick),
        NUTSNetworkRegressor(hidden=(), num_warmup=5, num_samples=5, **quick),
        HyperVIRegressor(space="parameter", noise_std=0.3, n_ll_samples=3, n_kl_samples=10, n_ood_points=5,
                         max_epochs=3, n_predictors=20, hidden=4, **quick),
    ]
    cls = dict(dropout="bernoulli", n_samples=3, hidden=(8,), features=8, epochs=3, batch_size=16, random_state=0)
    classifiers = [MCDropoutClassifier(progress=False, **cls),
                   DeepEnsembleClassifier(MCDropoutClassifier(progress=False, **cls), n_members=2, random_state=0)]
    return [(type(e).__name__, e, "regression") for e in regressors] + \
        [(type(e).__name__, e, "classification") for e in classifiers]


def _data(task: str):
    import numpy as np

    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, size=(140, 3))
    if task == "regression":
        y = np.sin(X[:, 0]) + 0.5 * X[:, 1] + 0.1 * rng.normal(size=140)
    else:
        y = (X[:, 0] + X[:, 1] > 0).astype(int) + (X[:, 2] > 1).astype(int)
    return X[:120], y[:120], X[120:]


def _predict(model, X, task: str):
    import numpy as np

    pred = model.predict_distribution(X)
    return np.asarray(pred.mean if task == "regression" else pred.probs, dtype=np.float64)


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _trial(cls, path, X, reference, task: str) -> str:
    """Load ``path`` with ``cls`` and predict: one of OUTCOMES."""
    import numpy as np

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = cls.load(path)
            got = _predict(model, X, task)
    except (ValueError, FloatingPointError):
        return "clear error"
    except Exception:  # noqa: BLE001 - what is measured: anything else escaping is a crash
        return "crash"
    same = got.shape == reference.shape and np.array_equal(got, reference)
    return "unchanged" if same else "silent wrong"


def _edits(settings: dict) -> list[tuple[str, dict]]:
    """(what, new settings) for the digest-valid edits this file's settings allow."""
    import copy

    out = []
    params, fitted = settings.get("params", {}), settings.get("fitted", {})

    def edited(part: str, **change):
        new = copy.deepcopy(settings)
        new[part].update(change)
        return new

    for key, value in (("y_scale", -1.0), ("y_scale", 0.0), ("y_mean", "1e3")):
        if key in fitted:
            out.append((f"{key}={value!r}", edited("fitted", **{key: value})))
    for key in ("lambda_prior", "variance_scale", "noise_var", "noise_sd", "noise_std", "prior_precision"):
        if isinstance(fitted.get(key), (int, float)):
            out.append((f"{key}=NaN", edited("fitted", **{key: float("nan")})))
    if "n_train" in fitted:
        out.append(("n_train=-5", edited("fitted", n_train=-5)))
    if "feature_names_in" in fitted:
        out.append(("feature names of the wrong length", edited("fitted", feature_names_in=["a"])))
    if isinstance(params.get("hidden"), list):
        big = {"hidden": [6000, 6000]} | ({"n_members": 5} if "n_members" in params else {})
        out.append(("hidden=[6000, 6000]" + (" x 5 members" if "n_members" in params else ""), edited("params", **big)))
    if "n_classes" in fitted:
        out.append(("n_classes=10**9", edited("fitted", n_classes=10**9)))
    if "device" in params:
        out.append(("device='meta'", edited("params", device="meta")))
    return out


def _uci_trials(record) -> None:
    """The ``UCI copies`` category (module docstring); ``record(category, outcome, what)``."""
    from pathlib import Path

    import numpy as np

    from dubito.data.uci import load_uci

    source = Path(os.environ.get("DUBITO_DATA", "")) / "yacht"
    if not (source / "data.txt").is_file():
        progress(f"UCI copies skipped: no yacht files under DUBITO_DATA ({source})")
        return
    reference = load_uci("yacht", data_dir=source.parent)

    def damage(folder: Path, how: str) -> None:
        data = folder / "data.txt"
        if how == "target x 1000":
            rows = np.loadtxt(data)
            rows[:, -1] *= 1000.0
            np.savetxt(data, rows)
        elif how == "half a test index removed":
            idx = folder / "index_test_0.txt"
            lines = idx.read_text().splitlines()
            idx.write_text("\n".join(lines[: len(lines) // 2]) + "\n")
        elif how == "an index repeated":
            idx = folder / "index_test_0.txt"
            lines = idx.read_text().splitlines()
            idx.write_text("\n".join(lines + lines[:1]) + "\n")
        elif how == "a value edited":
            text = data.read_text()
            data.write_text(text.replace(text.split()[3], "9" + text.split()[3], 1))
        elif how == "zero-byte data file":
            data.write_bytes(b"")
        elif how == "data.txt missing":
            data.unlink()

    hows = ("target x 1000", "half a test index removed", "an index repeated", "a value edited",
            "zero-byte data file", "data.txt missing")
    for where in ("user folder", "cache"):
        for how in hows:
            with tempfile.TemporaryDirectory() as tmp:
                root = Path(tmp) / ("uci" if where == "cache" else "data")
                shutil.copytree(source, root / "yacht")
                damage(root / "yacht", how)
                old_cache, old_data = os.environ.get("DUBITO_CACHE"), os.environ.get("DUBITO_DATA")
                try:
                    with warnings.catch_warnings(record=True) as caught:
                        warnings.simplefilter("always")
                        if where == "cache":  # the cache alone: no DUBITO_DATA to find first
                            os.environ["DUBITO_CACHE"] = tmp
                            os.environ.pop("DUBITO_DATA", None)
                            ds = load_uci("yacht", download=False)
                        else:
                            ds = load_uci("yacht", data_dir=root)
                    warned = any(issubclass(w.category, UserWarning) for w in caught)
                    same = (np.array_equal(ds.X, reference.X) and np.array_equal(ds.y, reference.y)
                            and all(np.array_equal(a, b) for pa, pb in zip(ds.splits, reference.splits)
                                    for a, b in zip(pa, pb)))
                    outcome = "unchanged" if same else ("warned" if warned else "silent wrong")
                except (ValueError, FileNotFoundError):
                    outcome = "clear error"
                except Exception:  # noqa: BLE001 - measured
                    outcome = "crash"
                finally:
                    for var, value in (("DUBITO_CACHE", old_cache), ("DUBITO_DATA", old_data)):
                        if value is None:
                            os.environ.pop(var, None)
                        else:
                            os.environ[var] = value
            record("UCI copies", outcome, f"{where}: {how}")


def _store_trials(record) -> None:
    """The ``store import`` category (module docstring)."""
    import json
    from pathlib import Path

    from dubito.experiments.base import Cell, CellResult
    from dubito.experiments.store import ResultsStore
    from dubito.experiments.store_transfer import export_cells, import_cells

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        with ResultsStore(tmp / "a.sqlite") as store:
            for split in (0, 1):
                store.write(Cell("exp", "paper", "data", "m", split, 0), CellResult({"m": {"rmse": 1.0}}),
                            status="done", seconds=1.0, runner_id="r")
            export_cells(store, tmp / "good.jsonl", "exp", "paper")
        header, first, second = (tmp / "good.jsonl").read_text().splitlines()[:3]
        cell = json.loads(first)
        edits = {
            "seconds NaN": {**cell, "seconds": float("nan")}, "seconds -1": {**cell, "seconds": -1.0},
            "split 1e30": {**cell, "split": 1e30}, "split -5": {**cell, "split": -5},
            "empty experiment": {**cell, "experiment": ""}, "no variants": {**cell, "variants": {}},
            "finished_at 'yesterday'": {**cell, "finished_at": "yesterday"},
        }
        bodies = {what: json.dumps(row) for what, row in edits.items()}
        bodies["a cell repeated"] = first + "\n" + first
        bodies["JSON nested 100,000 deep"] = "[" * 100_000 + "]" * 100_000
        for what, body in bodies.items():
            path = tmp / "bad.jsonl"
            path.write_text("\n".join([header, body, second]) + "\n")
            with ResultsStore(tmp / f"b-{abs(hash(what))}.sqlite") as dst:
                try:
                    import_cells(dst, path)
                    outcome = "silent wrong"
                except ValueError:
                    outcome = "clear error" if not dst.rows("exp", status=None) else "silent wrong"
                except Exception:  # noqa: BLE001 - measured
                    outcome = "crash"
            record("store import", outcome, what)


def _cli_trials(record) -> None:
    """The ``CLI`` category (module docstring): subprocesses, exit status 2 and no traceback."""
    import subprocess

    with tempfile.TemporaryDirectory() as tmp:
        a_file = os.path.join(tmp, "a-file")
        open(a_file, "w").close()
        cases = {
            "run --out naming a file": ["run", "--out", a_file, "--epochs", "1", "--quiet"],
            "run --data nosuchdata": ["run", "--data", "nosuchdata", "--out", os.path.join(tmp, "r1"), "--quiet"],
            "run --data letters (classes)": ["run", "--data", "letters", "--out", os.path.join(tmp, "r2"), "--quiet"],
            "run --device cuda without CUDA": ["run", "--device", "cuda", "--out", os.path.join(tmp, "r3"), "--quiet"],
            "bench --preset nosuchpreset": ["bench", "uci", "--preset", "nosuchpreset", "--store",
                                            os.path.join(tmp, "s.sqlite"), "--quiet"],
        }
        for what, args in cases.items():
            proc = subprocess.run([sys.executable, "-m", "dubito.cli", *args], capture_output=True, text=True,
                                  cwd=tmp, timeout=600)
            text = proc.stdout + proc.stderr
            if "Traceback" in text:
                outcome = "crash"
            elif proc.returncode == 2:
                outcome = "clear error"
            else:
                outcome = "silent wrong"
            record("CLI", outcome, what)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--flips", type=int, default=30, help="byte-flip trials per class")
    ap.add_argument("--cuts", type=int, default=10, help="truncation trials per class")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-extras", action="store_true", help="model files only (no UCI, store, CLI trials)")
    ap.add_argument("--out", default=None, help="also write the lines to this file")
    args = ap.parse_args(argv)
    torch = torch_one_thread()
    import numpy as np

    from dubito import io

    out = Printer(args.out)
    out(header(torch, "cpu"))
    rng = np.random.default_rng(args.seed)
    totals = {c: dict.fromkeys(OUTCOMES, 0) for c in ("byte flips", "truncation", "edited values")}
    per_class, worst_rise, notes = [], 0.0, []
    work = tempfile.mkdtemp(prefix="dubito-reliability-")
    try:
        for name, est, task in _estimators():
            progress(f"{name}: fit and save")
            X, y, X_ref = _data(task)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model = est.fit(X, y)
            cls = type(model)
            good = os.path.join(work, f"{name}.safetensors")
            model.save(good)
            reference = _predict(cls.load(good), X_ref, task)
            X_eval = X_ref
            raw = open(good, "rb").read()
            counts = {c: dict.fromkeys(OUTCOMES, 0) for c in totals}
            path = os.path.join(work, "damaged.safetensors")

            def record(category, data=None, settings=None, what=""):
                nonlocal worst_rise
                if data is not None:
                    with open(path, "wb") as fh:
                        fh.write(data)
                else:
                    shutil.copyfile(good, path)
                    tensors, _ = io.load_tensors(good, name)
                    io.save_tensors(path, tensors, name, settings)
                before = _peak_mb()
                outcome = _trial(cls, path, X_eval, reference, task)
                worst_rise = max(worst_rise, _peak_mb() - before)
                counts[category][outcome] += 1
                totals[category][outcome] += 1
                if outcome in ("silent wrong", "crash") or (category == "edited values" and outcome == "unchanged"):
                    notes.append(f"{name}, {category}{f' ({what})' if what else ''}: {outcome}")

            for _ in range(args.flips):
                data = bytearray(raw)
                for pos in rng.integers(0, len(data), size=int(rng.integers(1, 21))):
                    data[pos] ^= int(rng.integers(1, 256))
                record("byte flips", bytes(data))
            for _ in range(args.cuts):
                record("truncation", raw[: int(rng.integers(0, len(raw)))])
            _, settings = io.load_tensors(good, name)
            for what, new in _edits(settings):
                record("edited values", settings=new, what=what)
            per_class.append((name, len(raw), counts))
    finally:
        shutil.rmtree(work, ignore_errors=True)

    def record_extra(category: str, outcome: str, what: str) -> None:
        totals.setdefault(category, dict.fromkeys(OUTCOMES, 0))[outcome] += 1
        if outcome in ("silent wrong", "crash", "warned"):
            notes.append(f"{category} ({what}): {outcome}")

    if not args.no_extras:
        for name, trials in (("UCI copies", _uci_trials), ("store import", _store_trials), ("CLI", _cli_trials)):
            progress(name)
            trials(record_extra)

    out()
    out("| category | tries | clear error | warned | unchanged | silent wrong | crash |")
    out("|---|---:|---:|---:|---:|---:|---:|")
    for cat, c in totals.items():
        out(f"| {cat} | {sum(c.values())} | " + " | ".join(str(c[o]) for o in OUTCOMES) + " |")
    out()
    out("| class | file bytes | flips: clear / unchanged | cuts: clear / unchanged | edits: clear / unchanged |")
    out("|---|---:|---:|---:|---:|")
    for name, size, c in per_class:
        cells = [f"{c[k]['clear error']} / {c[k]['unchanged']}" for k in ("byte flips", "truncation", "edited values")]
        out(f"| {name} | {size} | " + " | ".join(cells) + " |")
    out()
    out(f"largest rise of peak resident memory during one trial: {worst_rise:.0f} MB")
    out("silent wrong results, crashes, warnings, and edits that loaded unchanged (a setting the model does not use):")
    for line in notes or ["none"]:
        out(f"- {line}")


if __name__ == "__main__":
    main()
