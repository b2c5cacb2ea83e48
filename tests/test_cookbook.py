"""Every recipe of docs/cookbook.md runs through the real program, and the page shows the plan it produces."""

import re

import pytest

from scripts.cookbook import COOKBOOK, FACTS_BEGIN, FACTS_END, apply_recipe, facts_block, recipe_plan, recipes

PAGE = COOKBOOK.read_text()


def test_the_cookbook_has_the_recipes_the_docs_promise() -> None:
    names = set(recipes(PAGE))
    assert {
        "l4-pool",
        "a10g-pool",
        "h100-pool",
        "h200-pool",
        "time-slicing",
        "mig-single",
        "mig-mixed",
    } <= names
    assert {"efa-training", "reserved", "bottlerocket", "observability", "kubernetes-bump"} <= names


@pytest.mark.parametrize("name", list(recipes(PAGE)))
def test_a_recipe_deploys_and_its_plan_is_the_one_shown(name: str) -> None:
    base, recipe = recipes(PAGE)[name]
    shown = re.search(
        rf"<!-- recipe-plan:begin {name} -->\n```\n\$ [^\n]*\n(.*?)```\n<!-- recipe-plan:end", PAGE, re.S
    )
    assert shown, f"recipe {name} has no plan block: run .venv/bin/python -m scripts.cookbook"
    assert recipe_plan(name, base, recipe) == shown.group(1), "run: .venv/bin/python -m scripts.cookbook"


def test_the_lists_of_versions_and_families_are_generated_from_the_facts() -> None:
    assert f"{FACTS_BEGIN}{facts_block()}{FACTS_END}" in PAGE


def test_a_recipe_pool_is_added_beside_the_stacks_pools_and_a_section_is_merged() -> None:
    base = {
        "gpu-eks:nodePools": '[{"name": "a", "limits": {"cpu": "1"}}]',
        "gpu-eks:cluster": '{"name": "x"}',
    }
    applied = apply_recipe(
        base,
        {
            "gpu-eks:nodePools": [{"name": "a", "limits": {"memory": "1Gi"}}, {"name": "b"}],
            "gpu-eks:cluster": {"kubernetesVersion": "1.36"},
        },
    )
    assert applied == {
        "gpu-eks:nodePools": '[{"name": "a", "limits": {"cpu": "1", "memory": "1Gi"}}, {"name": "b"}]',
        "gpu-eks:cluster": '{"name": "x", "kubernetesVersion": "1.36"}',
    }
