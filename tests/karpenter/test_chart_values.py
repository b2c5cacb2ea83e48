"""Helm values against the vendored `values.yaml` and `Chart.yaml` of the karpenter 1.14.1 chart."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from components import yaml_text
from components.karpenter.chart_values import (
    CHART_REPOSITORY,
    CONTROLLER_CHART_NAME,
    CONTROLLER_SKIP_CRDS,
    CRD_CHART_NAME,
    DEFAULT_CHART_VERSION,
    chart_url,
    controller_values,
    controller_values_from_config,
    crd_chart_values,
)
from config.karpenter import KarpenterConfig, KarpenterFeatureGates

FIXTURES = Path(__file__).parent.parent / "fixtures" / "karpenter-1.14.1"
CHART_VALUES: dict[str, Any] = yaml_text.load((FIXTURES / "chart-values.yaml").read_text(encoding="utf-8"))
CHART: dict[str, Any] = yaml_text.load((FIXTURES / "Chart.yaml").read_text(encoding="utf-8"))

FREE_FORM_MAPS = frozenset({"nodeSelector"})
"""Map-typed values whose default is not empty; keys under them are the user's (label keys)."""

ROLE_ARN = "arn:aws:iam::123456789012:role/karpenter-controller"


def unknown_paths(values: dict[str, Any], chart: dict[str, Any], prefix: str = "") -> Iterator[str]:
    """Key paths of `values` that the chart does not have, or whose kind (map or not) differs from it.

    Under a map-typed value (an empty map in the chart, such as `serviceAccount.annotations` or
    `controller.resources`, or one of `FREE_FORM_MAPS`) any key is allowed. Lists are leaves.
    """
    for key, value in values.items():
        path = f"{prefix}{key}"
        if key not in chart:
            yield f"{path} (not in the chart)"
            continue
        default = chart[key]
        if isinstance(value, dict) != isinstance(default, dict):
            yield f"{path} (the chart's value is {type(default).__name__}, not {type(value).__name__})"
        elif isinstance(value, dict) and default and path not in FREE_FORM_MAPS:
            yield from unknown_paths(value, default, f"{path}.")


def _full_values() -> dict[str, Any]:
    """Values with every optional input set, so every key the program can write is present."""
    return controller_values(
        cluster_name="gpu-eks-prod",
        queue_name="gpu-eks-prod",
        cluster_endpoint="https://EXAMPLE.gr7.us-west-2.eks.amazonaws.com",
        replicas=3,
        service_account_name="karpenter",
        irsa_role_arn=ROLE_ARN,
        node_selector={"node-role.gpu-eks/system": "true"},
        tolerations=[{"key": "node-role.gpu-eks/system", "operator": "Exists", "effect": "NoSchedule"}],
        cpu="2",
        memory="2Gi",
        log_level="debug",
        feature_gates=KarpenterFeatureGates(node_repair=True, spot_to_spot_consolidation=True),
        zonal_shift=True,
        service_monitor=True,
    )


def test_chart_coordinates() -> None:
    assert CHART["name"] == CONTROLLER_CHART_NAME == "karpenter"
    assert CHART["version"] == CHART["appVersion"] == DEFAULT_CHART_VERSION == "1.14.1"
    assert CHART_REPOSITORY == "oci://public.ecr.aws/karpenter"
    assert chart_url(CONTROLLER_CHART_NAME) == "oci://public.ecr.aws/karpenter/karpenter"
    assert chart_url(CRD_CHART_NAME) == "oci://public.ecr.aws/karpenter/karpenter-crd"
    assert CONTROLLER_SKIP_CRDS is True
    with pytest.raises(ValueError, match="chart must be"):
        chart_url("karpenter-crds")


def test_crd_chart_takes_no_values() -> None:
    assert crd_chart_values() == {}


def test_every_key_path_exists_in_the_chart() -> None:
    values = _full_values()
    assert list(unknown_paths(values, CHART_VALUES)) == []
    # The walk went everywhere it should: these are the paths the program sets.
    assert sorted(values) == [
        "controller",
        "logLevel",
        "nodeSelector",
        "replicas",
        "serviceAccount",
        "serviceMonitor",
        "settings",
        "tolerations",
    ]
    assert sorted(values["settings"]) == [
        "clusterEndpoint",
        "clusterName",
        "enableZonalShift",
        "featureGates",
        "interruptionQueue",
    ]


def test_key_check_catches_misspellings() -> None:
    misspelt = {
        "settings": {"interuptionQueue": "q", "featureGates": {"spotToSpot": True}},
        "serviceAccount": {"annotations": {"any/key": "allowed"}, "nmae": "x"},
        "nodeSelector": {"any-label": "allowed"},
        "controller": {"resources": {"requests": {"cpu": "1"}}, "resource": {}},
        "replicas": {"count": 2},
        "tolerations": [{"anything": "goes in a list"}],
    }
    assert sorted(unknown_paths(misspelt, CHART_VALUES)) == [
        "controller.resource (not in the chart)",
        "replicas (the chart's value is int, not dict)",
        "serviceAccount.nmae (not in the chart)",
        "settings.featureGates.spotToSpot (not in the chart)",
        "settings.interuptionQueue (not in the chart)",
    ]


def test_values() -> None:
    values = _full_values()
    assert values["settings"]["clusterName"] == "gpu-eks-prod"
    assert values["settings"]["clusterEndpoint"] == "https://EXAMPLE.gr7.us-west-2.eks.amazonaws.com"
    assert values["settings"]["interruptionQueue"] == "gpu-eks-prod"
    assert values["settings"]["enableZonalShift"] is True
    assert values["replicas"] == 3
    assert values["logLevel"] == "debug"
    assert values["serviceAccount"] == {
        "create": True,
        "name": "karpenter",
        "annotations": {"eks.amazonaws.com/role-arn": ROLE_ARN},
    }
    assert values["nodeSelector"] == {"kubernetes.io/os": "linux", "node-role.gpu-eks/system": "true"}
    assert values["tolerations"] == [
        {"key": "CriticalAddonsOnly", "operator": "Exists"},
        {"key": "node-role.gpu-eks/system", "operator": "Exists", "effect": "NoSchedule"},
    ]
    assert values["settings"]["featureGates"] == {
        "nodeRepair": True,
        "nodeOverlay": False,
        "reservedCapacity": True,
        "spotToSpotConsolidation": True,
        "staticCapacity": False,
        "capacityBuffer": False,
    }


def test_requests_equal_limits() -> None:
    resources = _full_values()["controller"]["resources"]
    assert resources["requests"] == resources["limits"] == {"cpu": "2", "memory": "2Gi"}

    defaults = controller_values(cluster_name="c", queue_name="c")["controller"]["resources"]
    assert defaults == {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}


def test_chart_defaults_kept_where_lists_and_maps_would_replace_them() -> None:
    values = controller_values(cluster_name="c", queue_name="c")
    assert values["tolerations"] == CHART_VALUES["tolerations"]
    assert values["nodeSelector"] == CHART_VALUES["nodeSelector"]
    # A toleration given twice, or the chart's own, is written once.
    values = controller_values(
        cluster_name="c",
        queue_name="c",
        tolerations=[{"key": "CriticalAddonsOnly", "operator": "Exists"}, {"key": "a", "operator": "Exists"}]
        * 2,
    )
    assert values["tolerations"] == [
        {"key": "CriticalAddonsOnly", "operator": "Exists"},
        {"key": "a", "operator": "Exists"},
    ]


def test_pod_identity_needs_no_annotation_and_no_endpoint() -> None:
    values = controller_values(cluster_name="gpu-eks-prod", queue_name="gpu-eks-prod")
    assert values["serviceAccount"] == {"create": True, "name": "karpenter"}
    assert "clusterEndpoint" not in values["settings"]
    assert list(unknown_paths(values, CHART_VALUES)) == []


def test_interruption_off_writes_an_empty_queue() -> None:
    values = controller_values(cluster_name="gpu-eks-prod", queue_name=None)
    assert values["settings"]["interruptionQueue"] == ""
    assert CHART_VALUES["settings"]["interruptionQueue"] == ""  # the chart's "disabled"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"queue_name": "https://sqs.us-west-2.amazonaws.com/123456789012/q"}, "not its URL or ARN"),
        ({"queue_name": "arn:aws:sqs:us-west-2:123456789012:q"}, "not its URL or ARN"),
        ({"queue_name": ""}, "not its URL or ARN"),
        ({"cluster_endpoint": "EXAMPLE.eks.amazonaws.com"}, "https:// URL"),
        ({"replicas": 0}, "replicas must be at least 1"),
        ({"irsa_role_arn": "karpenter"}, "must be an IAM role ARN"),
        ({"cluster_name": ""}, "cluster_name must be"),
    ],
)
def test_controller_values_refuse_wrong_inputs(overrides: dict[str, Any], message: str) -> None:
    arguments: dict[str, Any] = {"cluster_name": "c", "queue_name": "c", **overrides}
    with pytest.raises(ValueError, match=message):
        controller_values(**arguments)


def test_values_from_config() -> None:
    config = KarpenterConfig.model_validate(
        {
            "replicas": 3,
            "logLevel": "error",
            "zonalShift": True,
            "serviceAccountName": "karpenter-ctl",
            "featureGates": {"nodeOverlay": True},
            "controllerResources": {"cpu": "1500m", "memory": "3Gi"},
        }
    )
    values = controller_values_from_config(
        config, cluster_name="gpu-eks-prod", queue_name="gpu-eks-prod", node_selector={"role": "system"}
    )
    assert values == {
        "settings": {
            "clusterName": "gpu-eks-prod",
            "interruptionQueue": "gpu-eks-prod",
            "enableZonalShift": True,
            "featureGates": {
                "nodeRepair": False,
                "nodeOverlay": True,
                "reservedCapacity": True,
                "spotToSpotConsolidation": False,
                "staticCapacity": False,
                "capacityBuffer": False,
            },
        },
        "replicas": 3,
        "serviceAccount": {"create": True, "name": "karpenter-ctl"},
        "nodeSelector": {"kubernetes.io/os": "linux", "role": "system"},
        "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}],
        "logLevel": "error",
        "controller": {
            "resources": {
                "requests": {"cpu": "1500m", "memory": "3Gi"},
                "limits": {"cpu": "1500m", "memory": "3Gi"},
            }
        },
        "serviceMonitor": {"enabled": False},
    }
    monitored = controller_values_from_config(
        config, cluster_name="gpu-eks-prod", queue_name="gpu-eks-prod", service_monitor=True
    )
    assert monitored["serviceMonitor"] == {"enabled": True}


def test_values_from_irsa_config() -> None:
    config = KarpenterConfig.model_validate({"identity": "irsa", "interruptionHandling": False})
    values = controller_values_from_config(config, cluster_name="c", queue_name=None, irsa_role_arn=ROLE_ARN)
    assert values["serviceAccount"]["annotations"] == {"eks.amazonaws.com/role-arn": ROLE_ARN}
    assert values["settings"]["interruptionQueue"] == ""


@pytest.mark.parametrize(
    ("config", "arguments", "message"),
    [
        ({}, {"queue_name": None}, "interruption handling is on but no interruption queue"),
        ({"interruptionHandling": False}, {"queue_name": "c"}, "interruption handling is off but"),
        ({"identity": "irsa"}, {"queue_name": "c"}, "identity is irsa but no role ARN"),
        ({}, {"queue_name": "c", "irsa_role_arn": ROLE_ARN}, "identity is podIdentity but an IRSA role ARN"),
    ],
)
def test_values_from_config_refuse_contradictions(
    config: dict[str, Any], arguments: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        controller_values_from_config(KarpenterConfig.model_validate(config), cluster_name="c", **arguments)
