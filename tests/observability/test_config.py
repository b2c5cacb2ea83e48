"""The `gpu-eks:observability` section and the ServiceMonitor switch that depends on it."""

from typing import Any

import pytest

from config.errors import ConfigError
from config.observability import ObservabilityConfig
from tests.helpers import run_failing

POOL: dict[str, Any] = {"name": "gpu-a", "instanceFamilies": ["g6"], "limits": {"nvidia.com/gpu": "8"}}


def test_defaults_install_nothing() -> None:
    config = ObservabilityConfig()
    assert config.backend == "none"
    assert config.enabled is False
    assert config.namespace == "monitoring"
    assert (config.prometheus.retention, config.prometheus.storage_gib) == ("15d", 100)


@pytest.mark.parametrize(
    ("section", "message"),
    [
        (
            {"backend": False},
            "gpu-eks:observability.backend = False: must be 'none', 'inCluster' or 'managed' "
            "(an unquoted off in YAML reads as false: write none)",
        ),
        (
            {"backend": "prometheus"},
            "gpu-eks:observability.backend = 'prometheus': must be 'none', 'inCluster' or",
        ),
        (
            {"prometheus": {"retention": "15 days"}},
            "gpu-eks:observability.prometheus.retention = '15 days': must be",
        ),
        (
            {"backend": "managed", "prometheus": {"storageGib": 500}},
            "gpu-eks:observability: prometheus.storageGib apply to the inCluster backend only",
        ),
        (
            {"grafana": True},
            "gpu-eks:observability.grafana = True: unknown key; accepted keys: backend, namespace",
        ),
    ],
)
def test_mistakes_are_refused_before_anything_is_registered(section: dict[str, Any], message: str) -> None:
    error, monitor = run_failing(observability=section)
    assert isinstance(error, ConfigError)
    assert message in str(error)
    assert monitor.registrations == []


def test_a_service_monitor_without_a_backend_is_refused() -> None:
    error, monitor = run_failing(nodePools=[POOL], gpuOperator={"dcgmExporter": {"serviceMonitor": True}})
    assert isinstance(error, ConfigError)
    assert (
        "gpu-eks:gpuOperator.dcgmExporter.serviceMonitor = True: needs the Prometheus Operator CRDs, which "
        "only an observability backend installs" in str(error)
    )
    assert monitor.registrations == []
