"""The `gpu-eks:observability` section's defaults (its refusals run through the real program in
tests/test_refusals.py)."""

from config.observability import ObservabilityConfig


def test_defaults_install_nothing() -> None:
    config = ObservabilityConfig()
    assert config.backend == "none"
    assert config.enabled is False
    assert config.namespace == "monitoring"
    assert (config.prometheus.retention, config.prometheus.storage_gib) == ("15d", 100)
    assert config.problems() == []


def test_server_settings_with_the_managed_backend_are_named_one_by_one() -> None:
    config = ObservabilityConfig.model_validate(
        {"backend": "managed", "prometheus": {"retention": "30d", "storageGib": 200, "memory": "8Gi"}}
    )
    assert [(path, value) for path, _, value in config.problems()] == [
        (("prometheus", "retention"), "30d"),
        (("prometheus", "storageGib"), 200),
    ]
