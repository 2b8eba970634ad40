"""The main job end to end: `dubito run` prints the table and writes the report."""
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


def test_listings():
    assert "diabetes" in runner.invoke(app, ["datasets"]).output
    out = runner.invoke(app, ["methods"]).output
    assert "ensemble" in out and "Hoffmann & Elster" in out


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
