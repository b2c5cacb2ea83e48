"""The README and docs/ stay true to the code."""

import re
from pathlib import Path

from config.stack import StackConfig
from scripts.config_reference import REFERENCE, field_doc, models, render
from scripts.docs_toc import DOCS, anchor, headings, with_toc

ROOT = Path(__file__).resolve().parent.parent


def test_config_reference_is_generated_from_the_models() -> None:
    current = REFERENCE.read_text()
    assert current == render(current), "run: .venv/bin/python -m scripts.config_reference"


def test_every_config_key_is_documented() -> None:
    undocumented = [
        f"{m.__name__}.{name}"
        for m in models(StackConfig)
        for name in m.model_fields
        if not field_doc(m, name)
    ]
    assert not undocumented, "write a docstring under each of these fields"


def test_readme_commands_are_the_ones_ci_runs() -> None:
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    for command in ("bash scripts/setup.sh", ".venv/bin/python -m pytest"):
        assert f"\n{command}\n" in readme
        assert command in ci


def test_every_requirement_is_pinned_to_one_version() -> None:
    # A fresh clone installs what CI tested: no range, no bare name (a new release of a type-stub package
    # alone can turn the type check red).
    for name in ("requirements.txt", "requirements-dev.txt", "requirements-tools.txt"):
        for line in (ROOT / name).read_text().splitlines():
            requirement = line.split("#")[0].strip()
            if requirement and not requirement.startswith("-r "):
                assert re.fullmatch(r"[A-Za-z0-9._-]+==[A-Za-z0-9.+-]+", requirement), f"{name}: {line}"


def _anchors(path: Path) -> set[str]:
    page = path.read_text()
    return {anchor(h) for level in range(1, 7) for h in headings(page, level)}


def test_every_link_in_the_readme_and_docs_resolves() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    broken = []
    for page in pages:
        text = re.sub(r"(?ms)^```.*?^```", "", page.read_text())
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue  # an external address
            path, _, anchor = target.partition("#")
            resolved = (page.parent / path).resolve() if path else page
            if not resolved.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    assert not broken, "\n".join(broken)


def test_every_docs_page_has_a_current_table_of_contents() -> None:
    stale = [p.name for p in sorted(DOCS.glob("*.md")) if with_toc(p.read_text()) != p.read_text()]
    assert not stale, "run: .venv/bin/python -m scripts.docs_toc"


def test_the_what_it_costs_table_is_generated_from_synth_cost() -> None:
    from scripts.cost_table import README, render

    current = README.read_text()
    assert current == render(current), "run: .venv/bin/python -m scripts.cost_table"
    assert "| prod | **total** | **$544.26/h** |" in current
