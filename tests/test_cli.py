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
