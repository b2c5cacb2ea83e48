"""The realistic GPU node class and pool: exact manifests, accepted by the offline API server, stable."""

import json
from typing import Any

import pytest
from pydantic import BaseModel

from components.karpenter_api import (
    AMISelectorTerm,
    EC2NodeClass,
    EC2NodeClassSpec,
    NodeClaimTemplate,
    NodeClaimTemplateSpec,
    NodePool,
    NodePoolSpec,
    NodeSelectorRequirement,
    ObjectMeta,
    SecurityGroupSelectorTerm,
    SubnetSelectorTerm,
    to_manifest,
)
from tests.karpenter_api.examples import gpu_node_class, gpu_node_pool
from tests.support.crd_check import apply_defaults, validate

DISCOVERY = {"karpenter.sh/discovery": "gpu-eks-dev"}

EXPECTED_NODE_CLASS = {
    "apiVersion": "karpenter.k8s.aws/v1",
    "kind": "EC2NodeClass",
    "metadata": {"labels": {"app.kubernetes.io/part-of": "gpu-eks"}, "name": "gpu"},
    "spec": {
        "amiSelectorTerms": [{"alias": "al2023@v20260714"}],
        "blockDeviceMappings": [
            {
                "deviceName": "/dev/xvda",
                "ebs": {
                    "deleteOnTermination": True,
                    "encrypted": True,
                    "volumeSize": "200Gi",
                    "volumeType": "gp3",
                },
                "rootVolume": True,
            }
        ],
        "metadataOptions": {
            "httpEndpoint": "enabled",
            "httpPutResponseHopLimit": 1,
            "httpTokens": "required",
        },
        "role": "KarpenterNodeRole-gpu-eks-dev",
        "securityGroupSelectorTerms": [{"tags": DISCOVERY}],
        "subnetSelectorTerms": [{"tags": DISCOVERY}],
        "tags": {"cluster": "gpu-eks-dev", "team": "ml-platform"},
    },
}

EXPECTED_NODE_POOL = {
    "apiVersion": "karpenter.sh/v1",
    "kind": "NodePool",
    "metadata": {"name": "gpu"},
    "spec": {
        "disruption": {
            "budgets": [
                {"nodes": "10%"},
                {
                    "duration": "10h",
                    "nodes": "0",
                    "reasons": ["Empty", "Drifted"],
                    "schedule": "0 8 * * mon-fri",
                },
            ],
            "consolidateAfter": "10m",
            "consolidationPolicy": "WhenEmpty",
        },
        "limits": {"cpu": "1000", "memory": "4000Gi", "nvidia.com/gpu": 32},
        "template": {
            "metadata": {"labels": {"gpu-eks/pool": "gpu"}},
            "spec": {
                "expireAfter": "336h",
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "gpu"},
                "requirements": [
                    {"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "Gt", "values": ["0"]},
                    {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["g", "p"]},
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand", "spot"]},
                    {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                ],
                "taints": [{"effect": "NoSchedule", "key": "nvidia.com/gpu", "value": "true"}],
            },
        },
        "weight": 10,
    },
}


def _minimal_pool() -> NodePool:
    return NodePool(
        metadata=ObjectMeta(name="minimal"),
        spec=NodePoolSpec(
            template=NodeClaimTemplate(
                spec=NodeClaimTemplateSpec(
                    node_class_ref=gpu_node_class().node_class_ref(),
                    requirements=[
                        NodeSelectorRequirement(key="kubernetes.io/os", operator="In", values=["linux"])
                    ],
                )
            )
        ),
    )


def _minimal_node_class() -> EC2NodeClass:
    return EC2NodeClass(
        metadata=ObjectMeta(name="minimal"),
        spec=EC2NodeClassSpec(
            ami_selector_terms=[AMISelectorTerm(alias="bottlerocket@latest")],
            role="node-role",
            subnet_selector_terms=[SubnetSelectorTerm(tags=DISCOVERY)],
            security_group_selector_terms=[SecurityGroupSelectorTerm(tags=DISCOVERY)],
        ),
    )


def test_gpu_node_class_manifest_is_exactly_what_we_set() -> None:
    assert to_manifest(gpu_node_class()) == EXPECTED_NODE_CLASS


def test_gpu_node_pool_manifest_is_exactly_what_we_set() -> None:
    assert to_manifest(gpu_node_pool()) == EXPECTED_NODE_POOL


@pytest.mark.parametrize("model", [gpu_node_class(), gpu_node_pool(), _minimal_pool(), _minimal_node_class()])
def test_api_server_accepts_the_manifests(model: BaseModel) -> None:
    assert validate(to_manifest(model)) == []


@pytest.mark.parametrize("model", [gpu_node_class(), gpu_node_pool()])
def test_manifest_round_trips_through_the_model(model: BaseModel) -> None:
    assert type(model).model_validate(to_manifest(model)) == model


def test_node_pool_points_at_the_node_class() -> None:
    node_class = gpu_node_class()
    ref = to_manifest(gpu_node_pool(node_class))["spec"]["template"]["spec"]["nodeClassRef"]
    assert (ref["group"], ref["kind"], ref["name"]) == (
        "karpenter.k8s.aws",
        "EC2NodeClass",
        node_class.metadata.name,
    )
    assert f"{ref['group']}/v1" == to_manifest(node_class)["apiVersion"]


def _keys_sorted(value: Any) -> bool:
    if isinstance(value, dict):
        return list(value) == sorted(value) and all(_keys_sorted(v) for v in value.values())
    if isinstance(value, list):
        return all(_keys_sorted(v) for v in value)
    return True


@pytest.mark.parametrize("model", [gpu_node_class(), gpu_node_pool()])
def test_manifest_keys_are_sorted_at_every_level(model: BaseModel) -> None:
    assert _keys_sorted(to_manifest(model))


def test_insertion_order_of_maps_does_not_change_the_dump() -> None:
    one = to_manifest(gpu_node_class())
    reordered = json.loads(json.dumps(one))
    reordered["spec"]["tags"] = dict(reversed(list(one["spec"]["tags"].items())))
    other = EC2NodeClass.model_validate(reordered)
    assert list(other.spec.tags or {}) != list(one["spec"]["tags"])
    assert json.dumps(to_manifest(other)) == json.dumps(one)


def test_server_defaults_stay_out_of_the_dump_unless_set() -> None:
    pool_spec = to_manifest(_minimal_pool())["spec"]
    assert "disruption" not in pool_spec
    assert "expireAfter" not in pool_spec["template"]["spec"]
    assert "metadataOptions" not in to_manifest(_minimal_node_class())["spec"]
    # ... while the API server fills them in on create, so leaving them out changes nothing in effect:
    stored = apply_defaults(to_manifest(_minimal_pool()))["spec"]
    assert stored["disruption"] == {
        "consolidateAfter": "0s",
        "consolidationPolicy": "WhenEmptyOrUnderutilized",
        "budgets": [{"nodes": "10%"}],
    }
    assert stored["template"]["spec"]["expireAfter"] == "720h"
    assert apply_defaults(to_manifest(_minimal_node_class()))["spec"]["metadataOptions"] == {
        "httpEndpoint": "enabled",
        "httpProtocolIPv6": "disabled",
        "httpPutResponseHopLimit": 1,
        "httpTokens": "required",
    }


def test_explicitly_set_default_values_are_written() -> None:
    """Setting a value equal to the server default is a decision (e.g. IMDSv2 pinned); it must be written."""
    metadata_options = to_manifest(gpu_node_class())["spec"]["metadataOptions"]
    assert metadata_options["httpTokens"] == "required"
    assert metadata_options["httpPutResponseHopLimit"] == 1


def test_models_accept_camel_case_keys_and_snake_case_names_alike() -> None:
    by_alias = SubnetSelectorTerm.model_validate({"id": "subnet-0abc"})
    by_name = NodeSelectorRequirement.model_validate(
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot", "a"], "min_values": 2}
    )
    assert by_alias.id == "subnet-0abc"
    assert to_manifest(by_name)["minValues"] == 2
