"""The README and docs/ stay true to the code."""

import importlib.util
import re
from pathlib import Path

from pydantic import BaseModel

from config.stack import StackConfig
from scripts.config_reference import REFERENCE, field_doc, models, models_in, render
from scripts.docs_toc import DOCS, anchor, headings, with_toc, without_code
from synth.stack_files import stacks

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]


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
    return {anchor(text) for _, text in headings(path.read_text())}


def test_every_link_in_the_readme_and_docs_resolves() -> None:
    broken = []
    for page in PAGES:
        text = without_code(page.read_text())
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
    # The last column: a drained set and its replacements, each within the limits (tests/test_synth_cost.py).
    assert "(8 x p4d.24xlarge) | $880.64/h for <= 24h |" in current


# --- what the pages name exists -------------------------------------------------------------------------

SECTION_NAMES = "|".join(
    f.alias or n for n, f in StackConfig.model_fields.items() if n not in ("region", "profile")
)
CONFIG_KEY = re.compile(
    rf"gpu-eks:(?P<a>[\w.\[\]/-]+)"
    # A key written without its namespace, but not a Kubernetes label or API group (`karpenter.sh/nodepool`).
    rf"|`(?!karpenter\.(?:sh|k8s\.aws)/)(?P<b>(?:{SECTION_NAMES})(?:\[\d*\])?\.[\w.\[\]/-]+)`"
)
MODULE = re.compile(r"python -m (?P<module>[\w.]+)(?: (?P<sub>[a-z][\w-]*))?")


def _model_key(model: type[BaseModel], path: str) -> bool:
    """Whether `path` (aliases joined by dots, `[i]` or `[]` for list items) names a field below `model`;
    aliases may hold dots themselves (`limits.nvidia.com/gpu`)."""
    path = re.sub(r"\[\d*\]", "", path).rstrip(".")
    if not path:
        return True
    fields = {f.alias or n: f for n, f in model.model_fields.items()}
    for alias in sorted(fields, key=len, reverse=True):
        if path == alias or path.startswith(f"{alias}."):
            rest = path[len(alias) + 1 :]
            inner = list(models_in(fields[alias].annotation))
            return not rest or any(_model_key(m, rest) for m in inner) or not inner
    return False


def test_every_config_key_the_pages_name_exists() -> None:
    unknown = []
    for page in PAGES:
        text = without_code(page.read_text()) if page.name == "configuration.md" else page.read_text()
        for match in CONFIG_KEY.finditer(text):
            key = (match["a"] or match["b"]).rstrip(".")
            while key.count("]") > key.count("["):  # the key as a link's text: `[gpu-eks:cluster](...)`
                key = key[:-1]
            if not _model_key(StackConfig, key):
                unknown.append(f"{page.relative_to(ROOT)}: {key}")
    assert not unknown, "\n".join(unknown)


def test_every_command_the_pages_show_exists() -> None:
    subcommands = {"synth": {"plan", "cost", *stacks()}}
    missing = []
    for page in PAGES:
        for match in MODULE.finditer(page.read_text()):
            module, sub = match["module"], match["sub"]
            if importlib.util.find_spec(module) is None:
                missing.append(f"{page.relative_to(ROOT)}: python -m {module}")
            elif sub and module in subcommands and sub not in subcommands[module]:
                missing.append(f"{page.relative_to(ROOT)}: python -m {module} {sub}")
    assert not missing, "\n".join(missing)
