"""Pool config -> Karpenter v1 objects: pure translation, checked against the real CRDs and CEL rules."""

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest

from components import yaml_text
from components.karpenter_api import to_manifest
from components.network import DISCOVERY_TAG
from components.node_pools import POOL_LABEL, pool_contract, pool_objects, requirements, startup_labels
from config.errors import ConfigError
from config.gpu_operator import GpuOperatorConfig
from config.node_pools import NodePoolConfig
from config.stack import parse_stack_config
from facts.bottlerocket import ACCEPTS_VISIBLE_DEVICES_ENVVAR_UNPRIVILEGED
from facts.gpu_operator import DEVICE_PLUGIN_DEPLOY_LABEL, DEVICE_PLUGIN_PAUSED
from synth.runner import stack_config
from tests.helpers import closure, config, run
from tests.support.crd_check import validate

INFERENCE: dict[str, Any] = {
    "name": "gpu-inference",
    "instanceFamilies": ["g5", "g6"],
    "capacityTypes": ["spot", "on-demand"],
    "limits": {"cpu": "256", "memory": "1Ti", "nvidia.com/gpu": "16"},
    "timeSlicing": {"replicas": 4},
}
TRAINING: dict[str, Any] = {
    "name": "gpu-training",
    "instanceFamilies": ["p4d", "p5"],
    "efa": True,
    "zone": "us-west-2b",
    "placementGroup": True,
    "limits": {"nvidia.com/gpu": "64"},
    "disruption": {
        "consolidationPolicy": "WhenEmpty",
        "consolidateAfter": "1h",
        "budgets": [{"nodes": "0", "schedule": "0 8 * * mon-fri", "duration": "10h", "reasons": ["Drifted"]}],
    },
    "terminationGracePeriod": "24h",
    "rootVolume": {"sizeGib": 500},
    "kubelet": {"imageGCHighThresholdPercent": 80, "imageGCLowThresholdPercent": 60},
}
BOTTLEROCKET: dict[str, Any] = {
    "name": "gpu-br",
    "instanceTypes": ["g6.xlarge", "g6.2xlarge"],
    "ami": "bottlerocket@v1.40.0",
    "limits": {"nvidia.com/gpu": "4"},
}
MIG: dict[str, Any] = {
    "name": "gpu-mig",
    "instanceFamilies": ["p5"],
    "limits": {"nvidia.com/gpu": "56"},
    "mig": {"profile": "all-1g.10gb"},
    # Repeating the gate is accepted (it is the one startup taint gpu-eks removes); it is not doubled.
    "startupTaints": [{"key": "gpu-eks.io/mig-pending", "value": "true"}],
}
RESERVED: dict[str, Any] = {
    "name": "gpu-reserved",
    "instanceTypes": ["p5.48xlarge"],
    "capacityTypes": ["reserved", "on-demand"],
    "capacityReservations": [{"id": "cr-0123456789abcdef0"}],
    "limits": {"nvidia.com/gpu": "8"},
    "weight": 50,
}
CPU: dict[str, Any] = {
    "name": "cpu-burst",
    "kind": "cpu",
    "capacityTypes": ["spot"],
    "limits": {"cpu": "128"},
}
ALL = [INFERENCE, TRAINING, BOTTLEROCKET, RESERVED, CPU, MIG]


def pools(*raw: dict[str, Any]) -> list[NodePoolConfig]:
    return list(parse_stack_config(config(nodePools=list(raw))).node_pools)


def manifests(*raw: dict[str, Any]) -> list[dict[str, Any]]:
    result = []
    for item in pool_objects(pools(*raw), cluster_name="ml-dev", tags={"team": "ml"}):
        result += [to_manifest(item.node_class), to_manifest(item.node_pool)]
    return result


@pytest.mark.parametrize("raw", ALL, ids=[p["name"] for p in ALL])
def test_every_object_passes_the_api_server_schema_and_cel_rules(raw: dict[str, Any]) -> None:
    for manifest in manifests(raw):
        assert validate(manifest) == [], manifest


def _requirement(pool: dict[str, Any], key: str) -> list[dict[str, Any]]:
    (node_pool,) = [m for m in manifests(pool) if m["kind"] == "NodePool"]
    return [r for r in node_pool["spec"]["template"]["spec"]["requirements"] if r["key"] == key]


@pytest.mark.parametrize("raw", [INFERENCE, TRAINING, BOTTLEROCKET, RESERVED, MIG], ids=lambda p: p["name"])
def test_gpu_pools_always_require_gpus_from_nvidia(raw: dict[str, Any]) -> None:
    assert _requirement(raw, "karpenter.k8s.aws/instance-gpu-count") == [
        {"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "Gt", "values": ["0"]}
    ]
    assert _requirement(raw, "karpenter.k8s.aws/instance-gpu-manufacturer")[0]["values"] == ["nvidia"]


def test_gpu_count_range_becomes_gt_and_lt() -> None:
    reqs = [
        (r.key, r.operator, r.values)
        for r in requirements(pools({**INFERENCE, "gpuCount": {"min": 4, "max": 8}})[0])
        if r.key == "karpenter.k8s.aws/instance-gpu-count"
    ]
    assert reqs == [
        ("karpenter.k8s.aws/instance-gpu-count", "Gt", ["3"]),
        ("karpenter.k8s.aws/instance-gpu-count", "Lt", ["9"]),
    ]


def test_selectors_use_the_discovery_tag_and_the_karpenter_node_role() -> None:
    node_class = manifests(INFERENCE)[0]["spec"]
    assert node_class["subnetSelectorTerms"] == [{"tags": {DISCOVERY_TAG: "ml-dev"}}]
    assert node_class["securityGroupSelectorTerms"] == [{"tags": {DISCOVERY_TAG: "ml-dev"}}]
    assert node_class["role"] == "KarpenterNodeRole-ml-dev"
    assert node_class["amiSelectorTerms"] == [{"alias": "al2023@v20260714"}]
    assert node_class["metadataOptions"] == {
        "httpEndpoint": "enabled",
        "httpPutResponseHopLimit": 1,
        "httpTokens": "required",
    }
    assert node_class["tags"] == {"team": "ml", "gpu-eks/pool": "gpu-inference"}


def test_root_volume_is_encrypted_gp3_sized_for_cuda_images() -> None:
    (mapping,) = manifests(INFERENCE)[0]["spec"]["blockDeviceMappings"]
    assert mapping == {
        "deviceName": "/dev/xvda",
        "rootVolume": True,
        "ebs": {
            "deleteOnTermination": True,
            "encrypted": True,
            "iops": 6000,
            "throughput": 500,
            "volumeSize": "200Gi",
            "volumeType": "gp3",
        },
    }


def test_bottlerocket_sizes_the_data_volume() -> None:
    devices = manifests(BOTTLEROCKET)[0]["spec"]["blockDeviceMappings"]
    assert [(d["deviceName"], d["ebs"]["volumeSize"]) for d in devices] == [
        ("/dev/xvda", "4Gi"),
        ("/dev/xvdb", "200Gi"),
    ]
    assert all(d["ebs"]["encrypted"] for d in devices)
    node_pool = manifests(BOTTLEROCKET)[1]
    assert "startupTaints" not in node_pool["spec"]["template"]["spec"]
    # Bottlerocket ships its own device plugin, and the validator cannot finish there: no operand runs.
    assert node_pool["spec"]["template"]["metadata"]["labels"]["nvidia.com/gpu.deploy.operands"] == "false"
    # Bottlerocket already ignores NVIDIA_VISIBLE_DEVICES from unprivileged pods: no user data of ours.
    assert ACCEPTS_VISIBLE_DEVICES_ENVVAR_UNPRIVILEGED is False
    assert "userData" not in manifests(BOTTLEROCKET)[0]["spec"]


def test_mig_pools_start_with_the_mig_gate() -> None:
    node_pool = manifests(MIG)[1]["spec"]["template"]
    assert node_pool["spec"]["startupTaints"] == [
        {"effect": "NoSchedule", "key": "gpu-eks.io/mig-pending", "value": "true"}
    ]
    assert node_pool["metadata"]["labels"]["nvidia.com/mig.config"] == "all-1g.10gb"
    # Pods tolerate the pool's taints, never the gate (consumers get tolerations for taints only).
    assert node_pool["spec"]["taints"] == [{"effect": "NoSchedule", "key": "nvidia.com/gpu", "value": "true"}]
    # The device plugin starts paused: whole GPUs are never advertised before the partitioning. A startup
    # label, not one of the pool's labels consumers learn (it turns true once the GPUs are partitioned).
    assert node_pool["metadata"]["labels"][DEVICE_PLUGIN_DEPLOY_LABEL] == DEVICE_PLUGIN_PAUSED
    (mig,) = pools(MIG)
    assert DEVICE_PLUGIN_DEPLOY_LABEL not in pool_contract(mig, gpu_operator=GpuOperatorConfig()).labels
    for plain in pools(INFERENCE, TRAINING):
        assert startup_labels(plain) == {}


def test_an_efa_pool_keeps_to_one_zone_and_its_placement_group() -> None:
    node_class = manifests(TRAINING)[0]
    assert _requirement(TRAINING, "topology.kubernetes.io/zone") == [
        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-west-2b"]}
    ]
    assert node_class["spec"]["placementGroupSelector"] == {"name": "ml-dev-gpu-training"}
    assert node_class["spec"]["subnetSelectorTerms"] == [{"tags": {"karpenter.sh/discovery": "ml-dev"}}]
    # Without a placement group or a zone, neither.
    assert "placementGroupSelector" not in manifests(INFERENCE)[0]["spec"]
    assert _requirement(INFERENCE, "topology.kubernetes.io/zone") == []


def test_an_efa_pool_of_an_existing_vpc_selects_its_one_subnet() -> None:
    raw = {key: value for key, value in TRAINING.items() if key != "zone"} | {
        "subnetId": "subnet-0aaaaaaaaaaaaaaaa"
    }
    existing = {
        "existing": {
            "vpcId": "vpc-0123456789abcdef0",
            "privateSubnetIds": ["subnet-0aaaaaaaaaaaaaaaa", "subnet-0bbbbbbbbbbbbbbbb"],
        }
    }
    (parsed,) = parse_stack_config(config(nodePools=[raw], network=existing)).node_pools
    (item,) = pool_objects([parsed], cluster_name="ml-dev", tags={})
    manifest = to_manifest(item.node_class)
    assert manifest["spec"]["subnetSelectorTerms"] == [{"id": "subnet-0aaaaaaaaaaaaaaaa"}]
    assert validate(manifest) == []
    assert not [r for r in requirements(parsed) if r.key == "topology.kubernetes.io/zone"]


def test_time_slicing_selects_the_device_plugin_config() -> None:
    labels = manifests(INFERENCE)[1]["spec"]["template"]["metadata"]["labels"]
    assert labels == {POOL_LABEL: "gpu-inference", "nvidia.com/device-plugin.config": "time-slicing-4"}


def test_training_pool_efa_budgets_and_grace_period() -> None:
    node_pool = manifests(TRAINING)[1]["spec"]
    (types,) = _requirement(TRAINING, "node.kubernetes.io/instance-type")
    assert types["values"] == ["p4d.24xlarge", "p5.48xlarge", "p5.4xlarge"]
    assert node_pool["template"]["metadata"]["labels"]["gpu-eks.io/efa"] == "true"
    assert node_pool["disruption"] == {
        "consolidationPolicy": "WhenEmpty",
        "consolidateAfter": "1h",
        "budgets": [{"nodes": "0", "schedule": "0 8 * * mon-fri", "duration": "10h", "reasons": ["Drifted"]}],
    }
    assert node_pool["template"]["spec"]["terminationGracePeriod"] == "24h"
    assert node_pool["limits"] == {"nvidia.com/gpu": "64"}


def test_reserved_capacity_selects_the_reservation() -> None:
    node_class, node_pool = manifests(RESERVED)
    assert node_class["spec"]["capacityReservationSelectorTerms"] == [{"id": "cr-0123456789abcdef0"}]
    assert node_pool["spec"]["weight"] == 50
    assert _requirement(RESERVED, "karpenter.sh/capacity-type")[0]["values"] == ["reserved", "on-demand"]


def test_cpu_pool_has_no_gpu_requirement_or_taint() -> None:
    node_pool = manifests(CPU)[1]["spec"]["template"]["spec"]
    keys = {r["key"] for r in node_pool["requirements"]}
    assert "karpenter.k8s.aws/instance-gpu-count" not in keys
    assert "karpenter.k8s.aws/instance-category" in keys
    assert "taints" not in node_pool


def test_every_pool_has_its_own_node_class_named_after_it() -> None:
    """Even pools with equal node settings: a change to one pool's AMI must not roll the other."""
    other = {**INFERENCE, "name": "gpu-batch", "capacityTypes": ["spot"]}
    objects = pool_objects(pools(INFERENCE, other, TRAINING), cluster_name="ml-dev", tags={})
    assert [(o.node_class.metadata.name, o.node_pool.metadata.name) for o in objects] == [
        ("gpu-inference", "gpu-inference"),
        ("gpu-batch", "gpu-batch"),
        ("gpu-training", "gpu-training"),
    ]
    for item in objects:
        assert item.node_pool.spec.template.spec.node_class_ref.name == item.node_class.metadata.name


@pytest.mark.parametrize(
    "change",
    [
        {"ami": "al2023@v20260801"},
        {"ami": "bottlerocket@v1.40.0"},
        {"rootVolume": {"sizeGib": 400}},
        {"kubelet": {"maxPods": 64}},
    ],
    ids=["ami", "ami-family", "root-volume", "kubelet"],
)
def test_node_class_name_does_not_follow_its_settings(change: dict[str, Any]) -> None:
    before = pool_objects(pools(TRAINING), cluster_name="ml-dev", tags={})[0]
    after = pool_objects(pools({**TRAINING, **change}), cluster_name="ml-dev", tags={})[0]
    assert after.node_class.metadata.name == before.node_class.metadata.name == "gpu-training"
    assert after.node_class.spec != before.node_class.spec
    assert (
        after.node_pool.spec.template.spec.node_class_ref
        == before.node_pool.spec.template.spec.node_class_ref
    )


def test_rendering_is_stable() -> None:
    assert manifests(*ALL) == manifests(*ALL)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"labels": {"karpenter.sh/custom": "x"}}, "gpu-eks:nodePools[0]: "),
        ({"labels": {"kubernetes.io/hostname": "x"}}, "gpu-eks:nodePools[0]: "),
    ],
)
def test_what_the_api_server_would_refuse_is_refused_at_config_time(
    change: dict[str, Any], expected: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_stack_config(config(nodePools=[{**INFERENCE, **change}]))
    (problem,) = caught.value.problems
    assert str(problem).startswith(expected)
    assert "restricted" in problem.message or "label" in problem.message


def test_the_stack_creates_the_placement_group_before_the_class_that_selects_it() -> None:
    result = run(nodePools=[TRAINING, INFERENCE])
    (group,) = result.of_type("aws:ec2/placementGroup:PlacementGroup")
    assert group.name == "node-pools-placement-gpu-training"
    assert group.inputs["name"] == "ml-test-gpu-training"
    assert group.inputs["strategy"] == "cluster"
    assert group.inputs["tags"]["gpu-eks/cluster"] == "ml-test"
    assert group.parent is not None
    assert group.parent.endswith("NodePools::node-pools")
    node_class = result.one("kubernetes:karpenter.k8s.aws/v1:EC2NodeClass", "node-pools-class-gpu-training")
    assert node_class.inputs["spec"]["placementGroupSelector"] == {"name": group.inputs["name"]}
    # Created before it; on `pulumi destroy` deleted after it, once Karpenter has terminated the instances.
    assert group.urn in node_class.dependencies
    other = result.one("kubernetes:karpenter.k8s.aws/v1:EC2NodeClass", "node-pools-class-gpu-inference")
    assert group.urn not in closure(result, other.urn)


def test_the_documented_multi_node_job_fits_prods_training_pool() -> None:
    """The pod spec docs/gpu-pools.md shows for a multi-node EFA job: valid Kubernetes, and what prod's
    training pool asks of its pods (its node selector, a toleration for each of its taints)."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "gpu-pools.md").read_text()
    snippet = text.split("<!-- multi-node-job -->\n```yaml\n", 1)[1].split("```", 1)[0]
    spec = yaml_text.load(snippet)
    kubernetes_validate.validate(
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "pretrain-0"}, "spec": spec},
        "1.35",
        strict=True,
    )
    prod = parse_stack_config(stack_config("prod"))
    (training,) = [p for p in prod.node_pools if p.name == "gpu-training"]
    contract = pool_contract(training, gpu_operator=prod.gpu_operator)
    assert spec["nodeSelector"] == contract.node_selector
    tolerated = {(t["key"], t.get("value"), t["effect"]) for t in spec["tolerations"]}
    assert {(t.key, t.value, t.effect) for t in contract.taints} <= tolerated
    assert (training.efa, training.zone, training.placement_group) == (True, "us-west-2a", True)
