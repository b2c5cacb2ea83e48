"""The README stays true to the code."""

from pathlib import Path

from scripts.config_reference import README, render

ROOT = Path(__file__).resolve().parent.parent


def test_config_reference_is_generated_from_the_models() -> None:
    current = README.read_text()
    assert current == render(current), "run: .venv/bin/python -m scripts.config_reference"


def test_readme_commands_are_the_ones_ci_runs() -> None:
    readme = README.read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    for command in ("bash scripts/setup.sh", ".venv/bin/python -m pytest"):
        assert f"\n{command}\n" in readme
        assert command in ci
