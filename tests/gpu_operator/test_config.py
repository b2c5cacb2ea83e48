"""`gpu-eks:gpuOperator` config section: defaults, accepted forms, errors located by config key."""

from typing import Any

import pytest
from pydantic import ValidationError

from config.errors import ConfigError
from config.gpu_operator import (
    CHART_NAME,
    CHART_REPOSITORY,
    DEFAULT_VERSION,
    GpuOperatorConfig,
)
from config.stack import parse_stack_config
from tests.helpers import config as stack_config


def _error_locations(raw: dict[str, Any]) -> list[tuple[str | int, ...]]:
    with pytest.raises(ValidationError) as info:
        GpuOperatorConfig.model_validate(raw)
    return [tuple(e["loc"]) for e in info.value.errors()]


def test_defaults() -> None:
    config = GpuOperatorConfig()
    assert (CHART_NAME, CHART_REPOSITORY, DEFAULT_VERSION) == (
        "gpu-operator",
        "https://helm.ngc.nvidia.com/nvidia",
        "v26.7.0",
    )
    assert config.version == "v26.7.0"
    assert config.namespace == "gpu-operator"
    assert config.driver_mode == "auto"
    assert config.dcgm_exporter.enabled is True
    assert config.dcgm_exporter.service_monitor is None  # follows observability.backend
    assert config.mig.strategy == "single"
    assert config.mig.config is None
    assert config.extra_values == {}
    assert config.timeout_seconds == 900


def test_camel_case_keys() -> None:
    config = GpuOperatorConfig.model_validate(
        {
            "version": "v26.7.1",
            "namespace": "nvidia",
            "driverMode": "preinstalled",
            "dcgmExporter": {"enabled": True, "serviceMonitor": True},
            "mig": {
                "strategy": "mixed",
                "config": {
                    "split-half": [
                        {"devices": [0, 1, 2, 3], "mig-enabled": True, "mig-devices": {"1g.10gb": 7}},
                        {"devices": [4, 5, 6, 7], "mig-enabled": False},
                    ]
                },
            },
            "extraValues": {"gfd": {"enabled": False}},
            "timeoutSeconds": 1200,
        }
    )
    assert config.driver_mode == "preinstalled"
    assert config.dcgm_exporter.service_monitor is True
    assert config.mig.config is not None
    first = config.mig.config["split-half"][0]
    assert first.devices == (0, 1, 2, 3)
    assert first.mig_devices == {"1g.10gb": 7}
    assert config.extra_values == {"gfd": {"enabled": False}}
    assert config.timeout_seconds == 1200


@pytest.mark.parametrize("version", ["26.7.0", "v26.7", "v26.7.0-rc1", "latest", "V26.7.0"])
def test_bad_version(version: str) -> None:
    assert _error_locations({"version": version}) == [("version",)]


@pytest.mark.parametrize("version", ["v26.7.0", "v26.7.4"])
def test_versions_of_the_supported_series_are_accepted(version: str) -> None:
    assert parse_stack_config(stack_config(gpuOperator={"version": version})).gpu_operator.version == version


@pytest.mark.parametrize("version", ["v26.8.0", "v26.3.3", "v27.7.0"])
def test_a_version_of_another_series_is_refused_by_the_stack(version: str) -> None:
    """The model accepts any vX.Y.Z; the values are only built for v26.7, so the stack refuses the rest."""
    with pytest.raises(ConfigError) as caught:
        parse_stack_config(stack_config(gpuOperator={"version": version}))
    (problem,) = caught.value.problems
    assert problem.key == "gpu-eks:gpuOperator.version"
    assert str(problem).startswith(f"gpu-eks:gpuOperator.version = {version!r}: ")
    assert "v26.7 series" in problem.message


@pytest.mark.parametrize("strategy", ["none", "Single", "all"])
def test_bad_mig_strategy(strategy: str) -> None:
    assert _error_locations({"mig": {"strategy": strategy}}) == [("mig", "strategy")]


@pytest.mark.parametrize("mode", ["host", "Auto", ""])
def test_bad_driver_mode(mode: str) -> None:
    assert _error_locations({"driverMode": mode}) == [("driverMode",)]


@pytest.mark.parametrize("extra", [["gfd"], "gfd.enabled=false", 3])
def test_extra_values_must_be_a_mapping(extra: object) -> None:
    assert _error_locations({"extraValues": extra}) == [("extraValues",)]


def test_unknown_keys_are_refused_with_their_alias() -> None:
    assert _error_locations({"driverMod": "auto"}) == [("driverMod",)]
    assert _error_locations({"dcgmExporter": {"servicemonitor": True}}) == [
        ("dcgmExporter", "servicemonitor")
    ]


def test_snake_case_field_names_are_accepted_but_errors_use_the_alias() -> None:
    assert GpuOperatorConfig.model_validate({"driver_mode": "preinstalled"}).driver_mode == "preinstalled"
    assert _error_locations({"timeoutSeconds": 5}) == [("timeoutSeconds",)]


def test_service_monitor_needs_the_exporter() -> None:
    with pytest.raises(ValidationError, match="nothing to scrape") as info:
        GpuOperatorConfig.model_validate({"dcgmExporter": {"enabled": False, "serviceMonitor": True}})
    assert info.value.errors()[0]["loc"] == ("dcgmExporter",)


@pytest.mark.parametrize(
    ("mig", "location", "message"),
    [
        ({"config": {}}, ("mig", "config"), "at least one config"),
        ({"config": {"Bad Name": [{"mig-enabled": False}]}}, ("mig", "config"), "label value"),
        ({"config": {"x": []}}, ("mig", "config"), "no device groups"),
        (
            {"config": {"x": [{"mig-enabled": True, "mig-devices": {"1g10gb": 7}}]}},
            ("mig", "config", "x", 0, "mig-devices"),
            "not a MIG profile",
        ),
        (
            {"config": {"x": [{"mig-enabled": True, "mig-devices": {"1g.10gb": 0}}]}},
            ("mig", "config", "x", 0, "mig-devices"),
            "at least 1",
        ),
        (
            {"config": {"x": [{"mig-enabled": False, "mig-devices": {"1g.10gb": 7}}]}},
            ("mig", "config", "x", 0),
            "mig-enabled is false",
        ),
        (
            {"config": {"x": [{"mig-enabled": True, "migDevices": {"1g.10gb": 7}}]}},
            ("mig", "config", "x", 0, "migDevices"),
            "Extra inputs",
        ),
        (
            {"config": {"x": [{"devices": [], "mig-enabled": False}]}},
            ("mig", "config", "x", 0, "devices"),
            "indexes",
        ),
    ],
)
def test_bad_custom_mig_config(mig: dict[str, Any], location: tuple[str | int, ...], message: str) -> None:
    with pytest.raises(ValidationError, match=message) as info:
        GpuOperatorConfig.model_validate({"mig": mig})
    assert tuple(info.value.errors()[0]["loc"]) == location


def test_frozen() -> None:
    config = GpuOperatorConfig()
    with pytest.raises(ValidationError):
        config.namespace = "other"  # type: ignore[misc]
