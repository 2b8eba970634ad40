"""The README's Python example runs as printed, and the README opens with the two commands."""
import re
from pathlib import Path

import numpy as np

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_starts_with_the_two_commands():
    text = README.read_text()
    first_block = re.search(r"```bash\n(.*?)```", text, re.S).group(1)
    commands = [line.split("#")[0].strip() for line in first_block.strip().splitlines()]
    assert commands == ["make run", "make test"]
    assert text.index("```bash") < text.index("## ")


def test_readme_example_runs(capsys):
    code = re.search(r"```python\n(.*?)```", README.read_text(), re.S).group(1)
    assert len(code.strip().splitlines()) == 5
    exec(compile(code, "README.md", "exec"), {})
    printed = capsys.readouterr().out.split()
    crps = float(printed[0])
    assert 20 < crps < 60  # diabetes responses span 25-346; a sane model's CRPS is tens


def _blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), re.S)


def test_readme_ood_example_runs(capsys):
    """FuNN-HyVI's spread separates test inputs from uniform draws on the input box."""
    code = _blocks()[1]
    assert "HyperVIRegressor" in code
    exec(compile(code.replace("random_state=0)", "random_state=0, progress=False)"), "README.md", "exec"), {})
    auroc = float(capsys.readouterr().out.split()[0])
    assert auroc > 0.9  # measured 0.994


def test_readme_classification_example_runs(capsys):
    code = _blocks()[2]
    assert "MCDropoutClassifier" in code
    exec(compile(code.replace("random_state=0)", "random_state=0, progress=False)"), "README.md", "exec"), {})
    printed = capsys.readouterr().out.replace("[", " ").replace("]", " ").split()
    accuracy, ece = float(printed[0]), float(printed[1])
    mi = [float(v) for v in printed[2:5]]
    assert accuracy > 0.85 and 0 <= ece < 0.15  # measured 0.931 and 0.041
    assert all(0 <= v <= np.log(10) for v in mi)


def test_readme_tune_example_runs(capsys, tmp_path, monkeypatch):
    """The tuning example runs as printed, keeps its study in tune.db, and a second run of it
    resumes that study (no new trial) to the same choice."""
    code = next(b for b in _blocks() if "from dubito.tune import tune" in b)
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "README.md", "exec"), {})
    first = capsys.readouterr().out
    assert (tmp_path / "tune.db").is_file() and "'lr':" in first
    exec(compile(code, "README.md", "exec"), {})
    assert capsys.readouterr().out == first


def test_readme_own_regression_network_example_runs(capsys):
    """A network trained by hand, wrapped by the last-layer Laplace: calibrated on diabetes."""
    code = next(b for b in _blocks() if "LastLayerLaplaceRegressor.wrap" in b)
    exec(compile(code, "README.md", "exec"), {})
    printed = capsys.readouterr().out.replace("[", " ").replace("]", " ").split()
    coverage, crps, epistemic = float(printed[0]), float(printed[1]), float(printed[2])
    assert 0.88 < coverage <= 1.0 and 20 < crps < 60 and epistemic > 0  # measured 0.966, 30.2


def test_readme_own_classifier_example_runs(capsys):
    """A dropout network trained by hand, wrapped by MC dropout without a fit call."""
    code = next(b for b in _blocks() if "MCDropoutClassifier.wrap" in b)
    exec(compile(code, "README.md", "exec"), {})
    printed = capsys.readouterr().out.replace("[", " ").replace("]", " ").split()
    accuracy, ece = float(printed[0]), float(printed[1])
    assert accuracy > 0.85 and 0 <= ece < 0.1  # measured 0.936 and 0.035


def test_readme_recalibrate_example_runs(capsys):
    """The conformal recalibration example: its 95 % interval covers on diabetes split 0."""
    code = next(b for b in _blocks() if "Recalibrator(" in b)
    exec(compile(code, "README.md", "exec"), {})
    printed = capsys.readouterr().out.replace("[", " ").replace("]", " ").split()
    coverage, calibration_error = float(printed[0]), float(printed[1])
    assert 0.9 <= coverage <= 1.0 and calibration_error < 0.1  # measured 0.966 and 0.030
