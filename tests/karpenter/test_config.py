"""The `gpu-eks:karpenter` config section: defaults, camelCase keys, and what it refuses."""

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from components import yaml_text
from config.karpenter import KARPENTER_VERSION, ControllerResources, KarpenterConfig, KarpenterFeatureGates
from scripts.config_reference import field_doc

FIXTURES = Path(__file__).parent.parent / "fixtures" / "karpenter-1.14.1"


def _error(data: dict[str, Any]) -> tuple[tuple[int | str, ...], str]:
    """Location and message of the single error `data` raises."""
    with pytest.raises(ValidationError) as caught:
        KarpenterConfig.model_validate(data)
    errors = caught.value.errors()
    assert len(errors) == 1, errors
    return errors[0]["loc"], errors[0]["msg"]


def test_defaults() -> None:
    config = KarpenterConfig()
    assert config.version == "1.14.1" == KARPENTER_VERSION
    assert config.namespace == "kube-system"
    assert config.identity == "podIdentity"
    assert config.service_account_name == "karpenter"
    assert config.replicas == 2
    assert config.interruption_handling is True
    assert config.zonal_shift is False
    assert config.log_level == "info"
    assert config.controller_resources == ControllerResources(cpu="1", memory="1Gi")
    assert config.feature_gates == KarpenterFeatureGates()
    assert config.feature_gates.reserved_capacity is True
    assert config.feature_gates.spot_to_spot_consolidation is False


def test_defaults_match_the_chart() -> None:
    chart = yaml_text.load((FIXTURES / "chart-values.yaml").read_text(encoding="utf-8"))
    chart_yaml = yaml_text.load((FIXTURES / "Chart.yaml").read_text(encoding="utf-8"))
    config = KarpenterConfig()

    assert config.version == chart_yaml["version"] == chart_yaml["appVersion"]
    assert config.replicas == chart["replicas"]
    assert config.log_level == chart["logLevel"]
    assert config.zonal_shift is chart["settings"]["enableZonalShift"]
    # Exactly the chart's gates, with its defaults: a gate added or dropped upstream fails here.
    assert config.feature_gates.model_dump(by_alias=True) == chart["settings"]["featureGates"]


def test_camel_case_keys() -> None:
    config = KarpenterConfig.model_validate(
        {
            "version": "1.14.2",
            "namespace": "karpenter",
            "identity": "irsa",
            "serviceAccountName": "karpenter-controller",
            "replicas": 3,
            "interruptionHandling": False,
            "zonalShift": True,
            "logLevel": "debug",
            "featureGates": {"spotToSpotConsolidation": True, "nodeRepair": True},
            "controllerResources": {"cpu": "500m", "memory": "2Gi"},
        }
    )
    assert config.version == "1.14.2"
    assert config.identity == "irsa"
    assert config.service_account_name == "karpenter-controller"
    assert config.replicas == 3
    assert config.interruption_handling is False
    assert config.zonal_shift is True
    assert config.feature_gates.spot_to_spot_consolidation is True
    assert config.feature_gates.node_repair is True
    assert config.feature_gates.reserved_capacity is True  # unset gates keep the chart's default
    assert config.controller_resources.cpu == "500m"
    assert config.controller_resources.memory == "2Gi"


def test_unknown_identity_mode() -> None:
    loc, msg = _error({"identity": "oidc"})
    assert loc == ("identity",)
    assert msg == "Input should be 'podIdentity' or 'irsa'"


@pytest.mark.parametrize("version", ["v1.14.1", "1.14", "1.14.1-rc.1", "latest"])
def test_version_not_x_y_z(version: str) -> None:
    loc, msg = _error({"version": version})
    assert loc == ("version",)
    assert msg == "Value error, must be a version X.Y.Z without a 'v' prefix, such as 1.14.1"


@pytest.mark.parametrize("version", ["1.13.3", "1.15.0", "2.14.1"])
def test_version_of_another_minor(version: str) -> None:
    loc, msg = _error({"version": version})
    assert loc == ("version",)
    assert msg.startswith(f"Value error, Karpenter {version} is not supported")
    assert "choose a 1.14.x release" in msg


@pytest.mark.parametrize("replicas", [0, -1])
def test_replicas_below_one(replicas: int) -> None:
    loc, msg = _error({"replicas": replicas})
    assert loc == ("replicas",)
    assert msg == "Input should be greater than or equal to 1"


def test_unknown_key() -> None:
    loc, msg = _error({"replica": 3})
    assert loc == ("replica",)
    assert msg == "Extra inputs are not permitted"


def test_locations_are_the_camel_case_keys() -> None:
    loc, _ = _error({"interruptionHandling": "sometimes"})
    assert loc == ("interruptionHandling",)
    loc, _ = _error({"logLevel": "warn"})
    assert loc == ("logLevel",)


def test_unknown_feature_gate() -> None:
    loc, msg = _error({"featureGates": {"drift": True}})
    assert loc == ("featureGates", "drift")
    assert msg == "Extra inputs are not permitted"


@pytest.mark.parametrize(
    ("resources", "field"),
    [
        ({"cpu": "0"}, "cpu"),
        ({"memory": "0Gi"}, "memory"),
        ({"cpu": "-1"}, "cpu"),
        ({"memory": "lots"}, "memory"),
    ],
)
def test_controller_resources_must_be_positive_quantities(resources: dict[str, str], field: str) -> None:
    loc, _ = _error({"controllerResources": resources})
    assert loc == ("controllerResources", field)


def test_namespace_must_be_a_dns_label() -> None:
    loc, _ = _error({"namespace": "Kube_System"})
    assert loc == ("namespace",)


def test_frozen() -> None:
    config = KarpenterConfig()
    with pytest.raises(ValidationError, match="Instance is frozen"):
        config.replicas = 3  # type: ignore[misc]


def test_every_field_is_documented() -> None:
    for model in (KarpenterConfig, KarpenterFeatureGates, ControllerResources):
        for name in model.model_fields:
            assert field_doc(model, name), f"{model.__name__}.{name} has no docstring"
