"""The README's Python example runs as printed, and the README opens with the two commands."""
import re
from pathlib import Path

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
