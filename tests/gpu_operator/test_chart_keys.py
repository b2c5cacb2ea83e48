"""Every key the values set exists in the vendored chart (or NFD subchart) and the NFD part fits its schema.

A misspelt key would be silently ignored by Helm; here it fails.
"""

from typing import Any

import jsonschema
import pytest

from components.gpu_operator_values import (
    CHART_DAEMONSETS_TOLERATIONS,
    CHART_NFD_GC_TOLERATIONS,
    CHART_NFD_MASTER_TOLERATIONS,
    CHART_NFD_WORKER_TOLERATIONS,
    CHART_OPERATOR_TOLERATIONS,
)
from tests.gpu_operator.builders import config, pool, taint, values
from tests.gpu_operator.helpers import (
    chart_key_problems,
    chart_values,
    merged,
    nfd_effective_defaults,
    nfd_validator,
    nfd_values,
)


def _scenarios() -> dict[str, dict[str, Any]]:
    custom_mig = {"h100-sevenths": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}]}
    return {
        "single al2023 pool": values([pool("gpu")]),
        "bottlerocket only": values([pool("br", "bottlerocket", startup_taints=(taint("x/init"),))]),
        "everything": values(
            [
                pool("shared", time_slicing_replicas=4, taints=(taint("example.com/team", "ml"),)),
                pool("train", instance_families=("p5",), mig_profile="all-1g.10gb"),
                pool("br", "bottlerocket"),
            ],
            kubernetes_version="1.31",
            operator_config=config(dcgmExporter={"serviceMonitor": True}),
        ),
        "custom MIG": values(
            [pool("train", instance_families=("p5",), mig_profile="h100-sevenths")],
            operator_config=config(mig={"strategy": "mixed", "config": custom_mig}),
        ),
        "no pools": values([]),
    }


SCENARIOS = _scenarios()


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_every_key_exists_in_the_chart(name: str) -> None:
    assert chart_key_problems(SCENARIOS[name]) == []


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_nfd_values_fit_the_subchart_schema(name: str) -> None:
    final = merged(nfd_effective_defaults(), SCENARIOS[name]["node-feature-discovery"])
    nfd_validator().validate(final)


def test_misspelt_keys_are_caught() -> None:
    assert chart_key_problems({"devicePlugin": {"enabeld": True}}) == ["devicePlugin.enabeld"]
    assert chart_key_problems({"dcgmExporter": {"serviceMonitor": {"enable": True}}}) == [
        "dcgmExporter.serviceMonitor.enable"
    ]
    assert chart_key_problems({"node-feature-discovery": {"worker": {"toleration": []}}}) == [
        "node-feature-discovery.worker.toleration"
    ]
    assert chart_key_problems({"mig": {"strategy": {"single": True}}}) == [
        "mig.strategy (a map here, but str in the chart)"
    ]
    # Below map-typed values any key goes.
    assert chart_key_problems({"operator": {"nodeSelector": {"any/label": "x"}}}) == []


def test_schema_rejects_a_malformed_toleration_list() -> None:
    bad = merged(nfd_effective_defaults(), {"worker": {"tolerations": {"key": "x"}}})
    with pytest.raises(jsonschema.ValidationError):
        nfd_validator().validate(bad)


def test_chart_default_tolerations_match_the_vendored_chart() -> None:
    chart, nfd = chart_values(), nfd_values()
    assert [dict(t) for t in CHART_DAEMONSETS_TOLERATIONS] == chart["daemonsets"]["tolerations"]
    assert [dict(t) for t in CHART_OPERATOR_TOLERATIONS] == chart["operator"]["tolerations"]
    assert [dict(t) for t in CHART_NFD_WORKER_TOLERATIONS] == chart["node-feature-discovery"]["worker"][
        "tolerations"
    ]
    assert "tolerations" not in chart["node-feature-discovery"].get("master", {})
    assert [dict(t) for t in CHART_NFD_MASTER_TOLERATIONS] == nfd["master"]["tolerations"]
    assert "tolerations" not in chart["node-feature-discovery"].get("gc", {})
    assert [dict(t) for t in CHART_NFD_GC_TOLERATIONS] == nfd["gc"]["tolerations"]


def test_chart_defaults_these_values_change() -> None:
    """Chart defaults that make setting these keys necessary (a chart bump that changes one shows here)."""
    chart = chart_values()
    assert chart["driver"]["enabled"] is True
    assert chart["toolkit"]["enabled"] is True
    assert chart["cdi"]["enabled"] is True
    assert chart["dcgmExporter"]["serviceMonitor"]["enabled"] is True
    assert chart["nfd"]["enabled"] is True
    assert chart["migManager"]["config"]["default"] == "all-disabled"
    assert chart["devicePlugin"]["config"] == {"create": False, "name": "", "default": "", "data": {}}
