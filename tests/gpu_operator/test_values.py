"""`gpu_operator_values` and `pool_node_labels`: what the GPU Operator release is told, per pool mix."""

import copy
import functools
import subprocess
from pathlib import Path
from typing import Any

import pytest

from components import yaml_text
from components.gpu_operator_values import (
    DCGM_NODE_RELABELING,
    DEVICE_PLUGIN_CONFIGMAP,
    MIG_MANAGER_ENTRYPOINT,
    GpuOperatorValuesError,
    MigNotSupportedError,
    MigProfileError,
    UnknownInstanceTypeError,
    UnsupportedPoolError,
    deep_merge,
    pool_node_labels,
    validate_gpu_pools,
)
from config.gpu_operator import GpuOperatorConfig
from facts.gpu_operator import MIG_MANAGER_BINARY, MIG_MANAGER_DRIVER_READY, MIG_MANAGER_SHUTDOWN_ENV
from tests.gpu_operator.builders import SYSTEM_SELECTOR, config, pool, taint, values
from tests.gpu_operator.helpers import FIXTURES

# --- operand switches per AMI family -------------------------------------------------------------------


def _switches(v: dict[str, Any]) -> tuple[bool, bool, bool, bool]:
    return (
        v["driver"]["enabled"],
        v["toolkit"]["enabled"],
        v["devicePlugin"]["enabled"],
        v["migManager"]["enabled"],
    )


@pytest.mark.parametrize(
    ("families", "driver_mode", "expected"),
    [
        (("al2023",), "auto", (False, False, True, True)),
        (("al2023", "al2023"), "preinstalled", (False, False, True, True)),
        (("bottlerocket",), "auto", (False, False, False, False)),
        (("bottlerocket", "bottlerocket"), "preinstalled", (False, False, False, False)),
        (("al2023", "bottlerocket"), "auto", (False, False, True, True)),
        ((), "auto", (False, False, True, True)),
    ],
)
def test_operand_switches_per_ami_family(
    families: tuple[str, ...], driver_mode: str, expected: tuple[bool, bool, bool, bool]
) -> None:
    pools = [pool(f"pool-{i}", family) for i, family in enumerate(families)]
    v = values(pools, operator_config=config(driverMode=driver_mode))
    assert _switches(v) == expected
    assert v["nfd"] == {"enabled": True}


def test_bottlerocket_pools_keep_every_operand_off_their_nodes() -> None:
    # The one deploy label the operator never removes (facts.gpu_operator.DEPLOY_OPERANDS_LABEL): the
    # per-operand ones are deleted from a new node before NFD labels it.
    assert pool_node_labels(pool("br", "bottlerocket")) == {"nvidia.com/gpu.deploy.operands": "false"}
    assert pool_node_labels(pool("al", "al2023")) == {}


def test_mixed_families_with_time_slicing_on_al2023() -> None:
    pools = [pool("shared", "al2023", time_slicing_replicas=4), pool("br", "bottlerocket")]
    v = values(pools)
    assert v["devicePlugin"]["enabled"] is True
    assert {"default", "time-slicing-4"} <= set(v["devicePlugin"]["config"]["data"])
    assert pool_node_labels(pools[0]) == {"nvidia.com/device-plugin.config": "time-slicing-4"}
    assert pool_node_labels(pools[1])["nvidia.com/gpu.deploy.operands"] == "false"


def test_time_slicing_on_bottlerocket_is_refused() -> None:
    pools = [pool("shared", "al2023"), pool("br-shared", "bottlerocket", time_slicing_replicas=4)]
    with pytest.raises(UnsupportedPoolError, match=r"'br-shared' \(bottlerocket\) asks for time-slicing"):
        values(pools)
    with pytest.raises(UnsupportedPoolError, match="device-sharing-strategy"):
        pool_node_labels(pools[1])


def test_mig_on_bottlerocket_is_refused() -> None:
    br = pool("br-mig", "bottlerocket", instance_families=("p5",), mig_profile="all-1g.10gb")
    with pytest.raises(
        UnsupportedPoolError, match=r"'br-mig' \(bottlerocket\) asks for MIG profile 'all-1g.10gb'"
    ):
        values([br])


def test_errors_are_value_errors() -> None:
    for error in (UnsupportedPoolError, MigProfileError, MigNotSupportedError, UnknownInstanceTypeError):
        assert issubclass(error, ValueError)
    assert issubclass(UnsupportedPoolError, GpuOperatorValuesError)
    assert issubclass(MigProfileError, GpuOperatorValuesError)


# --- CDI, DCGM exporter ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "cdi"),
    [("1.30", False), ("1.31", False), ("1.32", True), ("1.33", True), ("1.35", True), ("1.36", True)],
)
def test_cdi_follows_the_kubernetes_version_on_al2023(version: str, cdi: bool) -> None:
    assert values([pool("al", "al2023")], kubernetes_version=version)["cdi"] == {"enabled": cdi}


def test_cdi_is_off_when_only_bottlerocket_pools_exist() -> None:
    # Bottlerocket's own device plugin decides how it injects devices; the operator's CDI setting reaches
    # none of its nodes.
    assert values([pool("br", "bottlerocket")], kubernetes_version="1.35")["cdi"] == {"enabled": False}
    assert values([pool("al"), pool("br", "bottlerocket")], kubernetes_version="1.35")["cdi"] == {
        "enabled": True
    }


@pytest.mark.parametrize("version", ["1", "v1.35", "1.35.2", ""])
def test_bad_kubernetes_version(version: str) -> None:
    with pytest.raises(GpuOperatorValuesError, match=r"minor version such as 1\.35"):
        values([pool("al")], kubernetes_version=version)


SCRAPED = {"enabled": True, "relabelings": [dict(DCGM_NODE_RELABELING)]}


@pytest.mark.parametrize(
    ("dcgm", "scraped", "expected"),
    [
        ({}, False, {"enabled": True, "serviceMonitor": {"enabled": False}}),
        ({}, True, {"enabled": True, "serviceMonitor": SCRAPED}),
        ({"serviceMonitor": False}, True, {"enabled": True, "serviceMonitor": {"enabled": False}}),
        ({"serviceMonitor": True}, True, {"enabled": True, "serviceMonitor": SCRAPED}),
        ({"enabled": False}, True, {"enabled": False, "serviceMonitor": {"enabled": False}}),
    ],
)
def test_dcgm_exporter_and_service_monitor(
    dcgm: dict[str, bool], scraped: bool, expected: dict[str, Any]
) -> None:
    """The ServiceMonitor follows the observability backend unless the config says otherwise, and labels every
    series with its node (the dashboards and alerts join DCGM series to pools on it)."""
    values_ = values([pool("al")], operator_config=config(dcgmExporter=dcgm), scraped=scraped)
    assert values_["dcgmExporter"] == expected


# --- placement of the controllers ------------------------------------------------------------------------

CONTROL_PLANE = {
    "key": "node-role.kubernetes.io/control-plane",
    "operator": "Equal",
    "value": "",
    "effect": "NoSchedule",
}
CRITICAL = {"key": "CriticalAddonsOnly", "operator": "Exists"}


def test_controllers_run_on_the_system_node_group() -> None:
    v = values([pool("al")])
    nfd = v["node-feature-discovery"]
    assert v["operator"]["nodeSelector"] == SYSTEM_SELECTOR
    assert nfd["master"]["nodeSelector"] == SYSTEM_SELECTOR
    assert nfd["gc"]["nodeSelector"] == SYSTEM_SELECTOR
    assert v["operator"]["tolerations"] == [CONTROL_PLANE, CRITICAL]
    assert nfd["master"]["tolerations"] == [CONTROL_PLANE, CRITICAL]
    assert nfd["gc"]["tolerations"] == [CRITICAL]


def test_system_tolerations_are_not_duplicated() -> None:
    v = values([pool("al")], system_tolerations=[CONTROL_PLANE, CRITICAL, CRITICAL])
    assert v["operator"]["tolerations"] == [CONTROL_PLANE, CRITICAL]
    assert v["node-feature-discovery"]["gc"]["tolerations"] == [CONTROL_PLANE, CRITICAL]


def test_empty_system_node_selector_is_refused() -> None:
    with pytest.raises(GpuOperatorValuesError, match="system_node_selector is empty"):
        values([pool("al")], system_node_selector={})


# --- time-slicing ----------------------------------------------------------------------------------------


@functools.cache
def _reference_keys() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml_text.load((FIXTURES / "device-plugin-config-v1.reference.yaml").read_text())
    return loaded


def _keys_outside(document: Any, reference: Any, path: str = "") -> list[str]:
    """Keys of a device-plugin config that the v1 reference format does not have (lists: compare items)."""
    if isinstance(document, dict) and isinstance(reference, dict):
        out = []
        for key, value in document.items():
            if key not in reference:
                out.append(f"{path}.{key}")
            else:
                out += _keys_outside(value, reference[key], f"{path}.{key}")
        return out
    if isinstance(document, list) and isinstance(reference, list) and reference:
        return [p for item in document for p in _keys_outside(item, reference[0], f"{path}[]")]
    return []


def test_time_slicing_entries_and_labels() -> None:
    pools = [
        pool("four-a", time_slicing_replicas=4),
        pool("plain"),
        pool("eight", time_slicing_replicas=8),
        pool("four-b", time_slicing_replicas=4),
    ]
    plugin = values(pools)["devicePlugin"]
    assert plugin["enabled"] is True
    plugin_config = plugin["config"]
    assert {k: plugin_config[k] for k in ("create", "name", "default")} == {
        "create": True,
        "name": DEVICE_PLUGIN_CONFIGMAP,
        "default": "default",
    }
    # Every replica count a pool may ask for has its entry, whatever the pools ask for now.
    assert list(plugin_config["data"]) == ["default"] + [f"time-slicing-{n}" for n in range(2, 65)]
    parsed = {name: yaml_text.load(text) for name, text in plugin_config["data"].items()}
    assert parsed["default"] == {"version": "v1", "flags": {"migStrategy": "single"}}
    for replicas in (4, 8):
        entry = parsed[f"time-slicing-{replicas}"]
        assert entry["version"] == "v1"
        assert entry["sharing"]["timeSlicing"]["resources"] == [
            {"name": "nvidia.com/gpu", "replicas": replicas}
        ]
        # Resources keep their name (no renameByDefault): Karpenter waits for nvidia.com/gpu allocatable.
        assert "renameByDefault" not in entry["sharing"]["timeSlicing"]
    for name, document in parsed.items():
        assert _keys_outside(document, _reference_keys()) == [], name

    labels = {p.name: pool_node_labels(p) for p in pools}
    assert labels == {
        "four-a": {"nvidia.com/device-plugin.config": "time-slicing-4"},
        "plain": {},
        "eight": {"nvidia.com/device-plugin.config": "time-slicing-8"},
        "four-b": {"nvidia.com/device-plugin.config": "time-slicing-4"},
    }
    # Every label value names an entry of the ConfigMap (a missing one crashes the config-manager).
    assert {lbl["nvidia.com/device-plugin.config"] for lbl in labels.values() if lbl} <= set(
        plugin_config["data"]
    )


def test_device_plugin_config_does_not_depend_on_the_pools() -> None:
    # Removing timeSlicing from the last pool (or changing its replicas) must not remove an entry that
    # nodes launched before the change still select.
    sliced = values([pool("shared", time_slicing_replicas=4)])["devicePlugin"]
    assert values([pool("plain")])["devicePlugin"] == sliced
    assert values([])["devicePlugin"] == sliced
    assert "config" not in values([pool("br", "bottlerocket")])["devicePlugin"]


@pytest.mark.parametrize("replicas", [0, 1, 65])
def test_time_slicing_replicas_range(replicas: int) -> None:
    with pytest.raises(ValueError, match="time_slicing_replicas"):
        pool("bad", time_slicing_replicas=replicas)


# --- MIG -------------------------------------------------------------------------------------------------


def test_mig_single_profile() -> None:
    p5 = pool("train", instance_families=("p5",), mig_profile="all-1g.10gb")
    v = values([p5, pool("plain", instance_families=("g6",))])
    assert v["mig"] == {"strategy": "single"}
    assert v["migManager"]["enabled"] is True
    assert {"name": "WITH_REBOOT", "value": "true"} in v["migManager"]["env"]
    assert "config" not in v["migManager"]  # the MIG manager generates configs from the hardware
    assert pool_node_labels(p5) == {"nvidia.com/mig.config": "all-1g.10gb"}


def test_the_mig_manager_never_restarts_kubelet(tmp_path: Path) -> None:
    """The MIG manager's script, run with the file the validator writes on a node with the AMI's driver
    (`IS_HOST_DRIVER=true`): it starts the MIG manager with the host's GPU clients (kubelet among them) left
    alone, and the validator's other settings still exported."""
    v = values([pool("train", instance_families=("p5",), mig_profile="all-1g.10gb")])
    (script,) = v["migManager"]["args"]
    assert script == MIG_MANAGER_ENTRYPOINT
    driver_ready = tmp_path / "driver-ready"
    driver_ready.write_text(
        "IS_HOST_DRIVER=true\nNVIDIA_DRIVER_ROOT=/\nDRIVER_ROOT_CTR_PATH=/host\nNVIDIA_DEV_ROOT=/\n"
        "DEV_ROOT_CTR_PATH=/host\n"
    )
    binary = tmp_path / MIG_MANAGER_BINARY
    binary.write_text("#!/bin/sh\nenv\n")
    binary.chmod(0o755)
    run = subprocess.run(
        ["/bin/sh", "-c", script.replace(MIG_MANAGER_DRIVER_READY, str(driver_ready))],
        env={"PATH": f"{tmp_path}:/usr/bin:/bin", MIG_MANAGER_SHUTDOWN_ENV: "true"},
        capture_output=True,
        text=True,
        timeout=10,
        check=True,
    )
    environment = dict(line.split("=", 1) for line in run.stdout.splitlines() if "=" in line)
    assert environment[MIG_MANAGER_SHUTDOWN_ENV] == "false"
    assert environment["IS_HOST_DRIVER"] == "true"
    assert environment["DRIVER_ROOT_CTR_PATH"] == "/host"
    # WITH_REBOOT stays in the container's env: a mode change the GPUs refuse in place reboots the node.
    assert {"name": "WITH_REBOOT", "value": "true"} in v["migManager"]["env"]


def test_no_mig_manager_script_where_the_mig_manager_does_not_run() -> None:
    v = values([pool("br", "bottlerocket")])
    assert v["migManager"] == {"enabled": False}


def test_mig_refused_on_g5() -> None:
    g5 = pool("inference", instance_families=("g5",), mig_profile="all-1g.10gb")
    with pytest.raises(MigNotSupportedError) as info:
        values([g5])
    assert str(info.value).startswith("A10G GPUs (g5) do not support MIG, and GPU pool 'inference' may")
    assert "g5.xlarge (a10g)" in str(info.value)


@pytest.mark.parametrize(
    ("families", "profile"),
    [
        (("p4d",), "all-1g.5gb"),
        (("p4d",), "all-1g.5gb.me"),
        (("p4d", "p5"), "all-1g.10gb"),
        (("p4de", "p5"), "all-3g.40gb"),
        (("p5e", "p5en"), "all-1g.18gb"),
        (("p6-b200",), "all-7g.180gb"),
        (("p6-b300",), "all-1g.34gb"),  # no profile table for b300: name syntax only
        (("p5",), "all-disabled"),
        (("p5",), "all-1g.10gb.me"),
    ],
)
def test_generated_mig_profiles_accepted(families: tuple[str, ...], profile: str) -> None:
    validate_gpu_pools([pool("mig", instance_families=families, mig_profile=profile)], GpuOperatorConfig())


@pytest.mark.parametrize(
    ("families", "profile", "message"),
    [
        (("p5",), "all-1g.5gb", r"p5\.4xlarge has h100 GPUs with 81920 MiB.*all-1g\.10gb"),
        (("p4d", "p5"), "all-1g.5gb", r"p5\.4xlarge has h100"),
        (("p5en",), "all-3g.40gb", r"all-3g\.71gb"),
        (("p5",), "half-and-half", "not a config the MIG manager generates"),
        (("p5",), "all-1c.2g.20gb", "not a config the MIG manager generates"),
        (("p5",), "all-enabled", "without creating any MIG device"),
        (("p5",), "all-balanced", "set gpuOperator.mig.strategy to mixed"),
    ],
)
def test_bad_mig_profiles_refused(families: tuple[str, ...], profile: str, message: str) -> None:
    with pytest.raises(MigProfileError, match=message):
        values([pool("mig", instance_families=families, mig_profile=profile)])


def test_all_balanced_with_mixed_strategy() -> None:
    v = values(
        [pool("mig", instance_families=("p5",), mig_profile="all-balanced")],
        operator_config=config(mig={"strategy": "mixed"}),
    )
    assert v["mig"] == {"strategy": "mixed"}


def test_time_slicing_of_mig_devices_needs_single_strategy() -> None:
    both = pool("mig-shared", instance_families=("p5",), mig_profile="all-1g.10gb", time_slicing_replicas=2)
    assert "time-slicing-2" in values([both])["devicePlugin"]["config"]["data"]
    with pytest.raises(MigProfileError, match=r"needs mig\.strategy single"):
        values([both], operator_config=config(mig={"strategy": "mixed"}))


CUSTOM_MIG = {
    "h100-sevenths": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}],
    "h100-mixed": [
        {"devices": [0, 1, 2, 3], "mig-enabled": True, "mig-devices": {"3g.40gb": 2}},
        {"devices": [4, 5, 6, 7], "mig-enabled": True, "mig-devices": {"1g.10gb": 7}},
    ],
}


def test_custom_mig_configs_rendered() -> None:
    cfg = config(mig={"strategy": "mixed", "config": CUSTOM_MIG})
    v = values([pool("mig", instance_families=("p5",), mig_profile="h100-mixed")], operator_config=cfg)
    mig_config = v["migManager"]["config"]
    assert {k: mig_config[k] for k in ("create", "name", "default")} == {
        "create": True,
        "name": "gpu-eks-mig-parted-config",
        "default": "all-disabled",
    }
    assert list(mig_config["data"]) == ["config.yaml"]
    parsed = yaml_text.load(mig_config["data"]["config.yaml"])
    assert parsed == {
        "version": "v1",
        "mig-configs": {
            "all-disabled": [{"devices": "all", "mig-enabled": False}],
            "h100-mixed": [
                {"devices": [0, 1, 2, 3], "mig-enabled": True, "mig-devices": {"3g.40gb": 2}},
                {"devices": [4, 5, 6, 7], "mig-enabled": True, "mig-devices": {"1g.10gb": 7}},
            ],
            "h100-sevenths": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}],
        },
    }


@pytest.mark.parametrize(
    ("profile", "strategy", "families", "message"),
    [
        ("all-1g.10gb", "mixed", ("p5",), "not one of the custom configs in gpuOperator.mig.config"),
        ("h100-mixed", "single", ("p5",), "mixes MIG profiles"),
        ("h100-mixed", "mixed", ("p4d",), r"uses 3g\.40gb.*p4d\.24xlarge has a100 GPUs with 40960 MiB"),
    ],
)
def test_custom_mig_config_checks(
    profile: str, strategy: str, families: tuple[str, ...], message: str
) -> None:
    cfg = config(mig={"strategy": strategy, "config": CUSTOM_MIG})
    with pytest.raises(MigProfileError, match=message):
        values([pool("mig", instance_families=families, mig_profile=profile)], operator_config=cfg)


def test_custom_mig_config_keeps_a_user_all_disabled() -> None:
    custom = {"all-disabled": [{"devices": "all", "mig-enabled": False}], **CUSTOM_MIG}
    cfg = config(mig={"config": custom})
    v = values([pool("mig", instance_families=("p5",), mig_profile="h100-sevenths")], operator_config=cfg)
    parsed = yaml_text.load(v["migManager"]["config"]["data"]["config.yaml"])
    assert list(parsed["mig-configs"]) == ["all-disabled", "h100-mixed", "h100-sevenths"]


def test_instance_types_matter_only_for_mig() -> None:
    # The table is region-dependent; a pool without MIG is not refused for a type it does not list.
    validate_gpu_pools([pool("new", instance_families=("p99",))], GpuOperatorConfig())
    with pytest.raises(UnknownInstanceTypeError, match="family p99"):
        values([pool("new", instance_families=("p99",), mig_profile="all-1g.10gb")])


# --- whole-values properties ------------------------------------------------------------------------------


def test_extra_values_deep_merged_last() -> None:
    extra = {
        "devicePlugin": {"resources": {"limits": {"memory": "256Mi"}}},
        "daemonsets": {"tolerations": [{"operator": "Exists"}]},
        "gfd": {"enabled": False},
        "operator": {"nodeSelector": {"team": "platform"}},
        "node-feature-discovery": {"worker": {"nodeSelector": {"kubernetes.io/os": "linux"}}},
    }
    cfg = config(extraValues=extra)
    snapshot = copy.deepcopy(cfg.extra_values)
    v = values([pool("al")], operator_config=cfg)
    assert v["devicePlugin"]["resources"] == {"limits": {"memory": "256Mi"}}
    assert v["devicePlugin"]["enabled"] is True
    assert v["devicePlugin"]["config"]["name"] == DEVICE_PLUGIN_CONFIGMAP
    assert v["daemonsets"]["tolerations"] == [{"operator": "Exists"}]
    assert v["gfd"] == {"enabled": False}
    assert v["operator"]["nodeSelector"] == {**SYSTEM_SELECTOR, "team": "platform"}
    assert v["node-feature-discovery"]["worker"]["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert v["node-feature-discovery"]["worker"]["tolerations"]  # derived list kept beside the extra key
    assert cfg.extra_values == snapshot


def test_deep_merge() -> None:
    base = {"a": {"b": 1, "c": [1, 2]}, "d": 1}
    merged = deep_merge(base, {"a": {"c": [3], "e": None}, "d": {"x": 1}})
    assert merged == {"a": {"b": 1, "c": [3], "e": None}, "d": {"x": 1}}
    assert base == {"a": {"b": 1, "c": [1, 2]}, "d": 1}


def test_only_the_v26_7_series_is_supported() -> None:
    assert values([pool("al")], operator_config=config(version="v26.7.3"))["nfd"] == {"enabled": True}
    with pytest.raises(GpuOperatorValuesError, match=r"v26\.3\.3 is not in the v26\.7 series"):
        values([pool("al")], operator_config=config(version="v26.3.3"))


def test_pool_names_must_be_unique() -> None:
    with pytest.raises(GpuOperatorValuesError, match="unique: dup"):
        values([pool("dup"), pool("dup", "bottlerocket")])


def test_values_do_not_depend_on_pool_order() -> None:
    pools = [
        pool("a", taints=(taint("z.example.com/team", "ml"),), time_slicing_replicas=4),
        pool("b", "bottlerocket", taints=(taint("a.example.com/gpu"),), startup_taints=(taint("x/init"),)),
        pool("c", instance_families=("p5",), mig_profile="all-3g.40gb", time_slicing_replicas=2),
    ]
    assert values(pools) == values(list(reversed(pools)))
