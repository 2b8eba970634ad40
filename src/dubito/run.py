"""The main job: fit one method on the first split of a data set, score it, write a report.

``dubito run --data diabetes --method ensemble --out DIR`` (or ``--data my.csv --target y``, the
user's own CSV or Parquet table, `dubito.data.user_table`) prints a table of RMSE, NLL,
CRPS, coverage@95 and calibration error, and writes ``DIR/report.md`` with PNG plots
(calibration curve, coverage, PIT histogram, predictions with intervals). For a deep
ensemble the Bayesian correction is post-hoc, so both the standard ("DE") and the corrected
("DE+Bayes", Hoffmann & Elster eq. 36) predictive come from one fit and are reported side
by side.

Methods that sample or run variational inference expose ``diagnostics_`` (the schema of
`dubito.inference.convergence`). When it says the fit did not converge (max split R-hat of the
predictive mean above 1.1, or an optimiser stopped at its cap), ``run`` prints one line saying so
and what to change, and report.md gets a "## Convergence" section with the numbers; a converged
fit gets a one-line section.
"""

from __future__ import annotations

import platform
import time
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib.pyplot as plt
from rich.console import Console

import dubito
from dubito import data as datasets
from dubito import metrics, plots
from dubito.data.dataset import ImageDataset
from dubito.data.user_table import is_table_path
from dubito.inference.convergence import convergence_line, convergence_section
from dubito.io import atomic_write_text, check_output_folder
from dubito.methods import get_method
from dubito.recalibrate import CAL_FRACTION, Recalibrator, calibration_split
from dubito.regression.held_out_choice import AUTO_CHOICES

#: `Recalibrator` methods `run` offers (``--calibrate``)
RECALIBRATIONS = ("conformal", "isotonic")

TABLE_COLUMNS = [
    ("rmse", "RMSE"),
    ("nll", "NLL"),
    ("crps", "CRPS"),
    ("coverage_95", "cover@95"),
    ("width_95", "width@95"),
    ("calibration_error", "calib. err"),
]


@dataclass
class RunResult:
    data: str
    method: str
    split: int
    n_train: int
    n_test: int
    fit_seconds: float
    summaries: dict[str, dict[str, float]]
    files: list[Path] = field(default_factory=list)
    #: seconds of predict_distribution, recalibration and the metrics on the test rows
    scoring_seconds: float | None = None
    #: the model's ``diagnostics_`` (None for methods without one) and the console line when it
    #: did not converge (else None)
    diagnostics: dict | None = None
    convergence: str | None = None
    #: where the data came from, for a user's file (``Dataset.meta["title"]``); None for a named set
    source: str | None = None
    #: how the training rows were shared between fit and recalibration (None without --calibrate)
    calibration: str | None = None


def convergence_hint(model) -> str:
    """What to change when ``model`` did not converge: its settings that lengthen the run."""
    params = model.get_params()
    for keys in (("n_burnin", "n_keep"), ("num_warmup", "num_samples"), ("nuts_warmup", "nuts_samples"),
                 ("n_warmup", "n_draws")):
        if all(k in params for k in keys) and (keys[0] != "nuts_warmup" or params.get("inference") == "nuts"):
            return f"run longer ({' / '.join(keys)})"
    for key in ("vi_max_iter", "max_epochs", "epochs"):
        if key in params:
            return f"raise the iteration cap ({key})"
    return "run longer"


def _variants(model, X_test, method: str):
    """Predictives to report: both corrections for ensembles (one fit), else the method's own."""
    # ensemble-hmc has no correction setting: its draws replace the closed form
    if method.startswith("ensemble") and "correction" in model.get_params():
        return {
            "DE": model.predict_distribution(X_test, correction="none"),
            "DE+Bayes": model.predict_distribution(X_test, correction="bayes"),
        }
    return {method: model.predict_distribution(X_test)}


def run(
    data: str = "diabetes",
    method: str = "ensemble",
    out: str | Path = "dubito-report",
    split: int = 0,
    seed: int = 0,
    device: str = "cpu",
    progress: bool = True,
    print_convergence: bool = True,
    target: str | None = None,
    calibrate: str | None = None,
    calibration_fraction: float = CAL_FRACTION,
    **overrides,
) -> RunResult:
    """Fit ``method`` on split ``split`` of ``data``, score it on the test part, write the report.

    ``data``: a data set name, or a CSV / Parquet file with its response column ``target``
    (`dubito.data.user_table`: 20 seeded random 80/20 splits). ``print_convergence``: print the
    convergence line here (the CLI prints it below its table). ``calibrate``: "conformal" or
    "isotonic" holds out ``calibration_fraction`` of the training rows (`dubito.recalibrate`), fits
    on the rest and reports every predictive before and after `Recalibrator` side by side."""
    if calibrate is not None and calibrate not in RECALIBRATIONS:
        raise ValueError(f"unknown recalibration {calibrate!r}; choose one of: {', '.join(RECALIBRATIONS)}")
    if is_table_path(data):
        dataset = datasets.load(data, target=target)
    elif target is not None:
        raise ValueError(f"--target names the response column of a CSV or Parquet file given to --data; "
                         f"{data!r} is a data set with its own response (see `dubito datasets`)")
    else:
        dataset = datasets.load(data)
    if isinstance(dataset, ImageDataset):  # issue 22: a regression used to be fitted on its class labels
        raise ValueError(f"{dataset.name!r} is a classification data set (labels of {len(dataset.class_names)} "
                         "classes); `dubito run` fits regression methods. Use dubito.classification (e.g. "
                         "MCDropoutClassifier) or `dubito bench thesis`")
    if not 0 <= split < dataset.n_splits:
        raise ValueError(f"split {split} out of range: {dataset.name} has {dataset.n_splits} splits")
    X_tr, y_tr, X_te, y_te = dataset.split(split)
    if calibrate is not None:
        fit_rows, cal_rows = calibration_split(len(y_tr), calibration_fraction, seed=[int(seed), int(split)])
        X_tr, y_tr, X_cal, y_cal = X_tr[fit_rows], y_tr[fit_rows], X_tr[cal_rows], y_tr[cal_rows]
    model = get_method(method).make(random_state=seed, device=device, progress=progress, **overrides)
    check_output_folder(out, "report folder (--out)")  # before the fit, not after it
    start = time.perf_counter()
    model.fit(X_tr, y_tr)
    fit_seconds = time.perf_counter() - start
    start = time.perf_counter()
    preds = _variants(model, X_te, method)
    if calibrate is not None:
        cal_preds = _variants(model, X_cal, method)
        for name in list(preds):
            recal = Recalibrator(method=calibrate).fit(cal_preds[name], y_cal)
            preds[f"{name} + {calibrate}"] = recal.transform(preds[name])
    summaries = {name: metrics.regression_summary(pred, y_te) for name, pred in preds.items()}
    result = RunResult(dataset.name, method, split, len(y_tr), len(y_te), fit_seconds, summaries,
                       scoring_seconds=time.perf_counter() - start)
    if calibrate is not None:
        result.calibration = (f"{len(y_cal)} of the {len(y_tr) + len(y_cal)} training rows held out for the "
                              f"{calibrate} recalibration (`dubito.recalibrate`); the model is fitted on the other "
                              f"{len(y_tr)}, and \"+ {calibrate}\" columns are its predictives recalibrated on them")
    if is_table_path(data):
        result.source = (f"{dataset.meta['source']}, target {target!r}: {dataset.n_features} features, "
                         f"{dataset.n_samples} rows; {dataset.n_splits} seeded random 80/20 splits")
    diag = getattr(model, "diagnostics_", None)
    if isinstance(diag, dict):
        result.diagnostics = diag
        result.convergence = convergence_line(diag, convergence_hint(model))
        if result.convergence is not None and print_convergence:

            Console().print(result.convergence, style="bold yellow", markup=False, highlight=False, soft_wrap=True)
    result.files = write_report(result, preds, X_te, y_te, Path(out), model)
    return result


def _variance_scale_lines(model) -> list[str]:
    """report.md's line on the held-out variance scale c (`dubito.variance_scale`), for a model that
    fits one: its value, where the estimator says what c multiplies, and how to turn it off."""
    c = getattr(model, "variance_scale_", None)
    if c is None:
        return []
    setting = getattr(model, "variance_scaling", None)
    what = ("c = 1 (not fitted: no held-out rows, too few for the setting, or none asked)" if c == 1.0
            else f"c = {c:.3g}, fitted on the held-out rows")
    return [f"Held-out variance scale (`variance_scaling={setting!r}`, `dubito.variance_scale`): {what}; what c "
            f"multiplies: `{type(model).__name__}`'s `variance_scaling`; `variance_scaling='none'` keeps c = 1.", ""]


def _held_out_choice_lines(model) -> list[str]:
    """report.md's line on what an "auto" setting kept on the held-out rows (the ensemble's input
    encoding, MC dropout's rate) and each candidate's held-out NLL per row."""
    lines = []
    for setting, attr, scores_attr in AUTO_CHOICES:
        scores = getattr(model, scores_attr, None)
        if getattr(model, setting, None) != "auto" or not scores or None in scores.values():
            continue
        shown = ", ".join(f"{k!r}: {v:.4g}" for k, v in scores.items())
        lines += [f"Chosen on the held-out rows (`{setting}='auto'`, the one-standard-error rule): "
                  f"{getattr(model, attr)!r} (held-out NLL per row {shown}).", ""]
    return lines


def write_report(result: RunResult, preds, X_test, y_test, out: Path, model) -> list[Path]:
    """Markdown report and its PNG plots under ``out``; every file written atomically."""
    out.mkdir(parents=True, exist_ok=True)
    files = []
    fig, axes = plt.subplots(1, 2, figsize=(9, 4))
    plots.plot_calibration(preds, y_test, ax=axes[0])
    plots.plot_coverage(preds, y_test, ax=axes[1])
    files.append(plots.save_figure(fig, out / "calibration.png"))
    fig, axes = plt.subplots(1, len(preds), figsize=(4.5 * len(preds), 4), squeeze=False)
    for ax, (name, pred) in zip(axes[0], preds.items()):
        plots.plot_pit(pred, y_test, ax=ax, title=f"PIT: {name}")
    files.append(plots.save_figure(fig, out / "pit.png"))
    fig, axes = plt.subplots(1, len(preds), figsize=(6 * len(preds), 4.5), squeeze=False)
    x = X_test if X_test.shape[1] == 1 else None
    for ax, (name, pred) in zip(axes[0], preds.items()):
        plots.plot_predictions(pred, y_test, x=x, ax=ax, title=name)
    files.append(plots.save_figure(fig, out / "predictions.png"))

    keys = list(next(iter(result.summaries.values())))
    lines = [
        f"# dubito run: {result.method} on {result.data}",
        "",
        f"Split {result.split}: {result.n_train} training rows, {result.n_test} test rows. "
        f"Fit took {result.fit_seconds:.1f} s"
        + (f", prediction and scoring {result.scoring_seconds:.1f} s" if result.scoring_seconds is not None else "")
        + f". dubito {dubito.__version__}, Python {platform.python_version()}.",
        "",
        *([f"Data: {result.source}.", ""] if result.source else []),
        *([f"Calibration: {result.calibration}.", ""] if result.calibration else []),
        "Settings: " + ", ".join(f"`{k}={v!r}`" for k, v in sorted(model.get_params().items())),
        "",
        *_held_out_choice_lines(model),
        *_variance_scale_lines(model),
        "| metric | " + " | ".join(result.summaries) + " |",
        "|---|" + "---|" * len(result.summaries),
    ]
    for key in keys:
        # a recalibrated predictive has no epistemic / aleatoric split: "—" there
        lines.append(f"| {key} | " + " | ".join(f"{s[key]:.4g}" if key in s else "—"
                                                for s in result.summaries.values()) + " |")
    lines += [
        "",
        "Metrics are on the test split in the data's own units: NLL and CRPS are means per point; "
        "coverage is the fraction of test responses inside the equal-tailed central interval; "
        "calibration error as defined in `dubito.metrics.calibration_error`.",
        "",
    ]
    if result.diagnostics is not None:
        lines += convergence_section(result.diagnostics, convergence_hint(model))
    lines += [
        "![calibration](calibration.png)",
        "",
        "![PIT](pit.png)",
        "",
        "![predictions](predictions.png)",
        "",
    ]
    report = out / "report.md"
    atomic_write_text(report, "\n".join(lines))
    return [report, *files]
