"""The main job end to end: `dubito run` prints the table and writes the report."""
import re

import numpy as np
import pytest
from typer.testing import CliRunner

from dubito.cli import app

runner = CliRunner()


def test_run_writes_table_and_report(tmp_path):
    out = tmp_path / "report"
    result = runner.invoke(
        app, ["run", "--data", "diabetes", "--method", "ensemble", "--out", str(out), "--epochs", "3", "--quiet"]
    )
    assert result.exit_code == 0, result.output
    for column in ("RMSE", "NLL", "CRPS", "cover@95", "calib. err"):
        assert column in result.output
    assert "DE+Bayes" in result.output and "| DE | DE+Bayes |" in (out / "report.md").read_text()
    report = (out / "report.md").read_text()
    assert "| rmse |" in report and "![calibration](calibration.png)" in report
    assert "## Convergence" not in report  # no diagnostics_: no section
    c = re.search(r"Held-out variance scale \(`variance_scaling='heldout'`, `dubito.variance_scale`\): c = ([0-9.]+), "
                  r"fitted on the held-out rows; what c multiplies: `DeepEnsembleRegressor`'s", report)
    assert c and float(c.group(1)) != 1.0
    kept = re.search(r"Chosen on the held-out rows \(`input_encoding='auto'`, the one-standard-error rule\): "
                     r"'(none|piecewise_linear)' \(held-out NLL per row 'none': [-0-9.e]+, 'piecewise_linear': ",
                     report)
    assert kept
    assert re.search(r"Fit took \d+\.\d s, prediction and scoring \d+\.\d s\.", report)
    for png in ("calibration.png", "pit.png", "predictions.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    "args, message",
    [
        (["--data", "nosuchdata"], "unknown"),
        (["--method", "nosuchmethod"], "unknown method"),
        (["--split", "99"], "out of range"),
    ],
)
def test_run_bad_arguments_exit_2_with_message(tmp_path, args, message):
    result = runner.invoke(app, ["run", "--out", str(tmp_path / "r"), "--quiet", "--epochs", "1", *args])
    assert result.exit_code == 2
    assert message in result.output.lower()


def test_run_reports_the_dropout_rate_mc_dropout_kept(tmp_path):
    out = tmp_path / "report"
    result = runner.invoke(
        app, ["run", "--data", "diabetes", "--method", "mc-dropout", "--out", str(out), "--epochs", "3", "--quiet"])
    assert result.exit_code == 0, result.output
    report = (out / "report.md").read_text()
    kept = re.search(r"Chosen on the held-out rows \(`dropout='auto'`, the one-standard-error rule\): (0\.05|0\.01) "
                     r"\(held-out NLL per row 0\.05: ([0-9.]+), 0\.01: ([0-9.]+)\)", report)
    assert kept and "`dropout='auto'`" in report


def test_listings():
    assert "diabetes" in runner.invoke(app, ["datasets"]).output
    out = runner.invoke(app, ["methods"]).output
    assert "ensemble" in out and "Hoffmann & Elster" in out
    regression, classification = out.split("Classification")
    assert "concrete-dropout" in classification and "concrete-dropout" not in regression


# ---------------------------------------------------------------------- convergence reaches the user
def _report(out):
    return (out / "report.md").read_text()


def test_run_says_when_chains_have_not_mixed(tmp_path, capsys):
    """B-DeepNoise, 2 chains of 8 sweeps from random starts with no burn-in: the chains disagree
    (the run's own diagnostics say so); the console line and the report carry its numbers."""
    from dubito.run import run

    out = tmp_path / "dn"
    with pytest.warns(Warning):  # the estimator's own ConvergenceWarning
        res = run("diabetes", "deepnoise", out, progress=False, hidden=(3,), init="random", n_burnin=0, n_keep=8, thin=1,
                  n_realizations=2)
    d = res.diagnostics
    assert d is not None and d["converged"] is False and d["rhat_mean"] > 1.1
    printed = capsys.readouterr().out
    line = [s for s in printed.splitlines() if s.startswith("Convergence:")]
    assert len(line) == 1 and line[0] == res.convergence
    assert f"max R-hat of the predictive mean {d['rhat_mean']:.2f} > 1.1" in line[0]
    assert f"bulk ESS {d['ess_mean']:.0f}" in line[0] and "run longer (n_burnin / n_keep)" in line[0]
    report = _report(out)
    assert "## Convergence" in report and "**Not converged.**" in report
    assert f"| rhat_mean | {d['rhat_mean']:.3f} |" in report and f"| rhat_loglik | {d['rhat_loglik']:.3f} |" in report


def test_run_says_when_an_optimiser_stopped_at_its_cap_and_when_it_converged(tmp_path, capsys):
    """Mean-field VI: 3 epochs of a 2-layer net are still improving (stopped by the cap); the
    linear model trained full-batch to its optimum is converged: a one-line section, no console line."""
    from dubito.run import run

    res = run("diabetes", "mfvi", tmp_path / "capped", progress=False, epochs=3, n_samples=20)
    assert res.diagnostics["stopped_by_cap"] is True and res.diagnostics["converged"] is False
    assert "hit its iteration cap" in res.convergence and "raise the iteration cap (epochs)" in res.convergence
    assert res.convergence in capsys.readouterr().out
    assert "| stopped_by_cap | True |" in _report(tmp_path / "capped")
    res = run("diabetes", "mfvi", tmp_path / "ok", progress=False, hidden=(), epochs=1500, lr=3e-2, batch_size=400,
              n_samples=20)
    assert res.diagnostics["converged"] is True and res.convergence is None
    assert "Convergence:" not in capsys.readouterr().out
    report = _report(tmp_path / "ok")
    section = report[report.index("## Convergence"):].split("\n\n")
    assert section[1].startswith("Converged: no chains") and "\n" not in section[1]  # one line
    assert "| stopped_by_cap |" not in report


# ---------------------------------------------------------------------- the user's own table (--data FILE)
def _table(n=40, seed=0):
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(seed)
    x1, x2 = rng.normal(size=n), rng.uniform(size=n)
    return pd.DataFrame({"x1": x1, "x2": x2, "flag": x1 > 0, "price": 2.0 * x1 + x2 + 0.1 * rng.normal(size=n)})


def _run_file(tmp_path, path, *extra):
    return runner.invoke(app, ["run", "--data", str(path), "--method", "naive", "--out", str(tmp_path / "r"),
                               "--quiet", *extra])


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_run_on_a_csv_or_parquet_file(tmp_path, suffix):
    frame = _table()
    path = tmp_path / f"houses{suffix}"
    if suffix == ".csv":
        frame.to_csv(path, index=False)
    else:
        pytest.importorskip("pyarrow")
        frame.to_parquet(path, index=False)
    result = _run_file(tmp_path, path, "--target", "price", "--split", "3")
    assert result.exit_code == 0, result.output
    assert f"naive on houses{suffix} (split 3: 32 train / 8 test)" in " ".join(result.output.split())
    report = (tmp_path / "r" / "report.md").read_text()
    assert "target 'price': 3 features, 40 rows; 20 seeded random 80/20 splits" in report
    # the numbers: the naive learner predicts N(0, mean(y_train^2)) whatever x is; split 3 of the standard splits
    from dubito.data import load, random_splits

    ds = load(str(path), target="price")
    assert ds.feature_names == ["x1", "x2", "flag"] and ds.X[:, 2].tolist() == frame["flag"].astype(float).tolist()
    train, test = random_splits(40, 20, 0.2, 0)[3]
    np.testing.assert_array_equal(ds.splits[3][1], test)
    y = frame["price"].to_numpy()
    rmse = np.sqrt(np.mean(y[test] ** 2))
    assert f"| rmse | {rmse:.4g} |" in report


def _write(tmp_path, frame, name="t.csv"):
    path = tmp_path / name
    frame.to_csv(path, index=False)
    return path


def test_run_file_bad_inputs(tmp_path):
    frame = _table()
    path = _write(tmp_path, frame)
    cases = []
    # the target column is missing: the columns are listed
    cases.append((["--target", "cost"], path, "column 'cost' is not in t.csv; its columns are: x1, x2, flag, price"))
    cases.append(([], path, "pass --target column"))
    # non-numeric features, named with their dtype
    bad = frame.assign(city=["a", "b"] * 20, zone=["1.5"] * 39 + ["n/a?"])
    cases.append((["--target", "price"], _write(tmp_path, bad, "cat.csv"),
                   "non-numeric feature column(s) 'city' (text, e.g. 'a'), 'zone' (text, e.g. 'n/a?')"))
    cases.append((["--target", "city"], _write(tmp_path, bad, "cat2.csv"), "target column 'city' is not numeric"))
    # missing values: which columns, how many rows each, how many rows in all
    holes = frame.copy()
    holes.loc[[1, 2], "x1"] = np.nan
    holes.loc[[2, 7], "price"] = np.nan
    cases.append((["--target", "price"], _write(tmp_path, holes, "na.csv"),
                  "missing values in column(s) 'x1' (2 rows), 'price' (2 rows); 3 rows of 40 in all"))
    # --target for a named data set; a file of another format; no file
    cases.append((["--target", "y"], "diabetes", "--target names the response column of a csv or parquet file"))
    other = tmp_path / "t.txt"
    other.write_text("a,b\n1,2\n")
    cases.append((["--target", "b"], other, "t.txt: unknown table format; dubito reads CSV and Parquet files"))
    cases.append((["--target", "y"], tmp_path / "absent.csv", "no file at"))
    for extra, where, message in cases:
        result = _run_file(tmp_path, where, *extra)
        assert result.exit_code == 2, (where, result.output)
        assert message.lower() in " ".join(result.output.split()).lower(), (message, result.output)


def test_run_file_without_pandas_or_pyarrow_says_what_to_install(tmp_path, monkeypatch):
    import sys

    frame = _table()
    csv = _write(tmp_path, frame)
    parquet = tmp_path / "t.parquet"
    pytest.importorskip("pyarrow")
    frame.to_parquet(parquet)
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow -> ImportError
    result = _run_file(tmp_path, parquet, "--target", "price")
    assert result.exit_code == 2 and 'needs pyarrow: pip install "dubito[tabular]"' in result.output
    monkeypatch.setitem(sys.modules, "pandas", None)
    result = _run_file(tmp_path, csv, "--target", "price")
    assert result.exit_code == 2 and 'needs pandas: pip install "dubito[tabular]"' in result.output


# ---------------------------------------------------------------------- --version, bench presets, flags
def test_version():
    import dubito

    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output.strip() == f"dubito {dubito.__version__}"


def test_every_experiment_has_the_default_bench_preset(monkeypatch):
    import dubito.experiments as ex
    import dubito.experiments.runner as runner_module
    from dubito.cli import default_preset

    for name in ex.available():
        assert default_preset(name) in ex.get(name).presets, name
    seen = {}

    def fake_run_grid(experiment, preset, **kwargs):
        seen[experiment] = preset
        raise ValueError("stop here")

    monkeypatch.setattr(runner_module, "run_grid", fake_run_grid)
    for name in ("deepnoise", "uci"):
        result = runner.invoke(app, ["bench", name, "--quiet"])
        assert result.exit_code == 2 and "stop here" in result.output
    assert seen == {"deepnoise": "smoke", "uci": "quick"}  # deepnoise has no `quick`
    result = runner.invoke(app, ["bench", "deepnoise", "--preset", "paper", "--quiet"])
    assert seen["deepnoise"] == "paper"
    out = runner.invoke(app, ["experiments"]).output
    assert "smoke (default)" in out and "quick (default)" in out


@pytest.mark.parametrize("command", [[], ["run"], ["bench"], ["report"], ["store", "export"], ["store"]])
def test_help_shows_booleans_as_flags(command):
    result = runner.invoke(app, [*command, "--help"])
    assert result.exit_code == 0, result.output
    assert "<bool>" not in result.output
    assert "--help" in result.output
    if command in (["run"], ["bench"]):
        assert "--quiet" in result.output and "[default: quick]" not in result.output
    if not command:
        assert "--version" in result.output


def test_run_calibrate_reports_before_and_after(tmp_path):
    """--calibrate holds out a fifth of the training rows and puts every predictive beside its
    recalibrated version; the recalibrated column equals Recalibrator applied by hand."""
    import numpy as np

    from dubito import data as datasets
    from dubito.methods import get_method
    from dubito.metrics import regression_summary
    from dubito.recalibrate import Recalibrator, calibration_split
    from dubito.run import run

    result = run("diabetes", "deterministic", tmp_path / "r", progress=False, calibrate="conformal", epochs=20)
    assert list(result.summaries) == ["deterministic", "deterministic + conformal"]
    X_tr, y_tr, X_te, y_te = datasets.load("diabetes").split(0)
    fit, cal = calibration_split(len(y_tr), 0.2, seed=[0, 0])
    assert result.n_train == fit.size
    model = get_method("deterministic").make(random_state=0, progress=False, epochs=20).fit(X_tr[fit], y_tr[fit])
    recal = Recalibrator(method="conformal").fit(model.predict_distribution(X_tr[cal]), y_tr[cal])
    direct = regression_summary(recal.transform(model.predict_distribution(X_te)), y_te)
    got = result.summaries["deterministic + conformal"]
    assert np.isclose(got["coverage_95"], direct["coverage_95"]) and np.isclose(got["crps"], direct["crps"], rtol=1e-9)
    text = (tmp_path / "r" / "report.md").read_text()
    assert "| deterministic | deterministic + conformal |" in text and "held out for the conformal recalibration" in text
    with pytest.raises(ValueError, match="unknown recalibration 'platt'"):
        run("diabetes", "deterministic", tmp_path / "s", progress=False, calibrate="platt")


def test_output_and_store_paths_are_checked_before_any_work(tmp_path, monkeypatch):
    # these used to raise FileExistsError / sqlite3.OperationalError after the fit or the grid, or
    # (--device cuda without CUDA) to store every cell as failed
    import torch

    import dubito.run as run_module

    a_file = tmp_path / "a_file"
    a_file.write_text("x")

    cases = [
        (["run", "--data", "diabetes", "--out", str(a_file), "--quiet"], "is an existing file; give a folder"),
        (["run", "--data", "diabetes", "--out", str(a_file / "sub"), "--quiet"], "cannot write to the report folder"),
        (["bench", "recalibrate", "--store", str(tmp_path / "absent" / "s.sqlite"), "--quiet"], "does not exist"),
        (["bench", "recalibrate", "--store", str(tmp_path), "--quiet"], "is a folder; give the store's file name"),
        (["report", "recalibrate", "--store", str(tmp_path / "s.sqlite"), "--out", str(a_file)], "is an existing file"),
    ]
    if not torch.cuda.is_available():
        cases.append((["bench", "recalibrate", "--store", str(tmp_path / "s.sqlite"), "--device", "cuda", "--quiet"],
                      "CUDA is not available"))
    for args, message in cases:
        if args[0] == "run":
            monkeypatch.setattr(run_module, "time", None)  # the fit's timer: reached only after the check
        result = runner.invoke(app, args)
        monkeypatch.undo()
        assert result.exit_code == 2, (args, result.output)
        assert message in " ".join(result.output.split()), (message, result.output)
    assert not (tmp_path / "s.sqlite").exists()  # no store was created by the refused runs


def test_run_refuses_a_classification_data_set_by_name(tmp_path):
    # issue 22, part 8: `dubito run --data letters` fitted a regression on the class labels
    pytest.importorskip("PIL")
    result = runner.invoke(app, ["run", "--data", "letters", "--out", str(tmp_path / "r"), "--quiet", "--epochs", "1"])
    assert result.exit_code == 2
    assert "'letters' is a classification data set (labels of 52 classes)" in result.output
    assert "Traceback" not in result.output


def test_debug_shows_the_traceback_a_user_error_otherwise_hides(tmp_path):
    # issue 22: every user error is one line and exit code 2; --debug shows where it came from
    args = ["run", "--data", "nosuchdata", "--out", str(tmp_path / "r"), "--quiet"]
    plain = runner.invoke(app, args)
    assert plain.exit_code == 2 and "Traceback" not in plain.output
    debug = runner.invoke(app, ["--debug", *args])
    assert debug.exit_code == 1 and isinstance(debug.exception, ValueError)
    assert "nosuchdata" in str(debug.exception)
    again = runner.invoke(app, args)  # the flag does not stick to later commands
    assert again.exit_code == 2
