"""The planner's rules on small hand-made states: how inputs compare, which changes replace, in which
order, what cascades, and what is called out. Transitions of the real program are in test_transitions.py."""

import json
from decimal import Decimal
from typing import Any

import pytest

from synth.plan import (
    PoolCap,
    Resource,
    State,
    changed_paths,
    plan,
    pool_caps,
    state_of_run,
    state_of_snapshot,
)
from synth.runner import ProgramRun
from synth.snapshot import render

PROVIDER = "gpu-eks:cluster:Cluster$pulumi:providers:kubernetes::cluster-k8s"


def resource(type_token: str, name: str, inputs: dict[str, Any], **options: Any) -> Resource:
    return Resource(key=f"{type_token}::{name}", type=type_token, name=name, inputs=inputs, **options)


def state(*resources: Resource) -> State:
    return State({r.key: r for r in resources}, "test")


def kubeconfig(server: str, args: list[str]) -> str:
    return json.dumps(
        {
            "clusters": [{"name": "c", "cluster": {"server": server, "certificate-authority-data": "Q0E="}}],
            "contexts": [{"name": "aws", "context": {"cluster": "c", "user": "aws"}}],
            "current-context": "aws",
            "users": [{"name": "aws", "user": {"exec": {"command": "aws", "args": args}}}],
        }
    )


# --- comparing inputs ---------------------------------------------------------------------------


def test_changed_paths_are_leaves() -> None:
    old = {"spec": {"a": 1, "b": [{"x": 1}, {"x": 2}]}, "keep": "same"}
    new = {"spec": {"a": 2, "b": [{"x": 1}, {"x": 3}, {"x": 4}]}, "keep": "same"}
    assert changed_paths(old, new) == ["spec.a", "spec.b[1].x", "spec.b[2].x"]


def test_absent_none_and_empty_are_the_same() -> None:
    assert changed_paths({"a": None, "b": {}, "c": []}, {}) == []
    assert changed_paths({}, {"a": {"b": None}}) == []


def test_a_new_subtree_reports_its_leaves() -> None:
    assert changed_paths({}, {"launchTemplate": {"id": "lt-1", "version": "2"}}) == [
        "launchTemplate.id",
        "launchTemplate.version",
    ]


def test_unordered_lists_ignore_order() -> None:
    old, new = {"subnetIds": ["a", "b"]}, {"subnetIds": ["b", "a"]}
    assert changed_paths(old, new) == ["subnetIds[0]", "subnetIds[1]"]
    assert changed_paths(old, new, unordered=["subnetIds"]) == []
    assert changed_paths(old, {"subnetIds": ["a", "c"]}, unordered=["subnetIds"]) == ["subnetIds"]


# --- update or replace --------------------------------------------------------------------------


def test_aws_force_new_input_replaces_and_other_inputs_update() -> None:
    group = "aws:eks/nodeGroup:NodeGroup"
    before = state(resource(group, "system", {"instanceTypes": ["m7i.large"], "labels": {"a": "b"}}))
    relabelled = plan(
        before, state(resource(group, "system", {"instanceTypes": ["m7i.large"], "labels": {}}))
    )
    assert [(s.op, s.because) for s in relabelled.steps] == [("update", ("labels.a",))]
    resized = plan(
        before, state(resource(group, "system", {"instanceTypes": ["m7i.xlarge"], "labels": {"a": "b"}}))
    )
    assert [(s.op, s.because, s.delete_first) for s in resized.steps] == [
        ("replace", ("instanceTypes[0]",), False)
    ]


def test_ignore_changes_are_left_out() -> None:
    group = "aws:eks/nodeGroup:NodeGroup"
    old = resource(group, "system", {"scalingConfig": {"desiredSize": 2, "maxSize": 4}})
    new = resource(
        group,
        "system",
        {"scalingConfig": {"desiredSize": 3, "maxSize": 4}},
        ignore_changes=("scalingConfig.desiredSize",),
    )
    assert plan(state(old), state(new)).steps == ()


def test_kubernetes_name_or_namespace_replaces_and_named_objects_delete_first() -> None:
    release = "kubernetes:helm.sh/v3:Release"
    pool = "kubernetes:karpenter.sh/v1:NodePool"
    before = state(
        resource(release, "controller", {"name": "karpenter", "namespace": "kube-system"}),
        resource(pool, "p", {"metadata": {"name": "p"}, "spec": {"weight": 1}}),
    )
    after = state(
        resource(
            release, "controller", {"name": "karpenter", "namespace": "karpenter"}, delete_before_replace=True
        ),
        resource(pool, "p", {"metadata": {"name": "p2"}, "spec": {"weight": 1}}),
    )
    steps = {s.name: s for s in plan(before, after).steps}
    assert (steps["controller"].op, steps["controller"].delete_first) == ("replace", True)  # the option
    # A new name: pulumi-kubernetes creates the new object first (both can exist).
    assert (steps["p"].op, steps["p"].because, steps["p"].delete_first) == (
        "replace",
        ("metadata.name",),
        False,
    )


def test_kubernetes_force_new_table_and_named_delete_first() -> None:
    job = "kubernetes:batch/v1:Job"
    before = state(resource(job, "smoke", {"metadata": {"name": "smoke"}, "spec": {"template": {"a": 1}}}))
    after = state(resource(job, "smoke", {"metadata": {"name": "smoke"}, "spec": {"template": {"a": 2}}}))
    [step] = plan(before, after).steps
    assert (step.op, step.delete_first) == ("replace", True)


def test_provider_replaced_only_when_the_active_cluster_changes() -> None:
    provider = "pulumi:providers:kubernetes"
    old = resource(provider, "k8s", {"kubeconfig": kubeconfig("https://a", ["eks", "get-token"])})
    profile = resource(
        provider, "k8s", {"kubeconfig": kubeconfig("https://a", ["--profile", "ml", "eks", "get-token"])}
    )
    moved = resource(provider, "k8s", {"kubeconfig": kubeconfig("https://b", ["eks", "get-token"])})
    assert [s.op for s in plan(state(old), state(profile)).steps] == ["update"]
    assert [(s.op, s.because) for s in plan(state(old), state(moved)).steps] == [
        ("replace", ("kubeconfig (active cluster)",))
    ]


def test_switching_the_source_kind_of_an_ingress_rule_replaces() -> None:
    rule = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
    old = resource(rule, "r", {"securityGroupId": "sg-1", "cidrIpv4": "10.0.0.0/16", "fromPort": 443})
    wider = resource(rule, "r", {"securityGroupId": "sg-1", "cidrIpv4": "10.0.0.0/8", "fromPort": 443})
    by_group = resource(
        rule, "r", {"securityGroupId": "sg-1", "referencedSecurityGroupId": "sg-2", "fromPort": 443}
    )
    assert [s.op for s in plan(state(old), state(wider)).steps] == ["update"]
    assert [s.op for s in plan(state(old), state(by_group)).steps] == ["replace"]


def test_removal_only_force_new() -> None:
    cluster = "eks:index:Cluster"
    plain = resource(cluster, "c", {"name": "ml"})
    encrypted = resource(cluster, "c", {"name": "ml", "encryptionConfigKeyArn": "arn:aws:kms:::key/1"})
    assert [s.op for s in plan(state(plain), state(encrypted)).steps] == ["update"]
    assert [s.op for s in plan(state(encrypted), state(plain)).steps] == ["replace"]


# --- cascades -----------------------------------------------------------------------------------


def test_replacement_cascades_through_inputs_and_providers() -> None:
    cluster = resource("eks:index:Cluster", "cluster", {"name": "ml"})
    k8s = resource(
        "pulumi:providers:kubernetes",
        "k8s",
        {"kubeconfig": kubeconfig("https://a", [])},
        property_dependencies={"kubeconfig": ("eks:index:Cluster::cluster",)},
    )
    entry = resource(
        "aws:eks/accessEntry:AccessEntry",
        "admin",
        {"clusterName": "ml", "principalArn": "arn:aws:iam::1:role/a", "tags": {"t": "1"}},
        property_dependencies={"clusterName": ("eks:index:Cluster::cluster",)},
    )
    tag = resource(
        "aws:ec2/tag:Tag",
        "t",
        {"resourceId": "sg-1", "key": "k", "value": "ml"},
        property_dependencies={"value": ("eks:index:Cluster::cluster",)},
    )
    namespace = resource("kubernetes:core/v1:Namespace", "ns", {"metadata": {"name": "x"}}, provider=k8s.key)
    before = state(cluster, k8s, entry, tag, namespace)
    after = state(
        resource("eks:index:Cluster", "cluster", {"name": "ml", "ipFamily": "ipv6"}),
        k8s,
        entry,
        tag,
        namespace,
    )
    result = plan(before, after)
    ops = {s.name: (s.op, s.cascaded) for s in result.steps}
    assert ops == {
        "cluster": ("replace", False),
        "k8s": ("replace", True),  # its kubeconfig is computed again
        "admin": ("replace", True),  # clusterName is force-new
        "t": ("update", True),  # value is not
        "ns": ("replace", True),  # its provider is replaced
    }
    # The cluster keeps its name and is created first: it collides with itself. The cascaded replacements
    # keeping their names land in the new cluster: no collision claimed for them.
    collisions = [f.message.split(" creates")[0] for f in result.findings if "collides" in f.message]
    assert collisions == ["replace eks:index:Cluster cluster"]


# --- findings -----------------------------------------------------------------------------------


def test_create_first_replacement_keeping_the_name_is_blocking() -> None:
    policy = "aws:iam/policy:Policy"
    before = state(resource(policy, "p", {"name": "ml-controller", "description": "old"}))
    after = state(resource(policy, "p", {"name": "ml-controller", "description": "new"}))
    result = plan(before, after)
    assert [s.op for s in result.steps] == ["replace"]
    assert result.blocking
    assert "same name" in result.findings[0].message


def test_protected_resources_cannot_be_replaced_or_deleted() -> None:
    cluster = "eks:index:Cluster"
    before = state(resource(cluster, "c", {"name": "ml"}, protect=True))
    assert plan(before, state(resource(cluster, "c", {"name": "ml2"}, protect=True))).blocking
    assert plan(before, state()).blocking
    assert not plan(
        before, state(resource(cluster, "c", {"name": "ml", "version": "1.36"}, protect=True))
    ).blocking


def test_updates_the_api_refuses_are_blocking() -> None:
    storage = "kubernetes:storage.k8s.io/v1:StorageClass"
    old = resource(
        storage, "gp3", {"metadata": {"name": "gp3"}, "reclaimPolicy": "Delete", "allowVolumeExpansion": True}
    )
    retain = resource(
        storage, "gp3", {"metadata": {"name": "gp3"}, "reclaimPolicy": "Retain", "allowVolumeExpansion": True}
    )
    expand = resource(
        storage,
        "gp3",
        {"metadata": {"name": "gp3"}, "reclaimPolicy": "Delete", "allowVolumeExpansion": False},
    )
    refused = plan(state(old), state(retain))
    assert [s.op for s in refused.steps] == ["update"]
    assert refused.blocking
    assert not plan(state(old), state(expand)).blocking
    pool = "kubernetes:karpenter.sh/v1:NodePool"
    ref = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "a"}
    spec = lambda r: {"metadata": {"name": "p"}, "spec": {"template": {"spec": {"nodeClassRef": r}}}}  # noqa: E731
    assert not plan(
        state(resource(pool, "p", spec(ref))), state(resource(pool, "p", spec({**ref, "name": "b"})))
    ).blocking
    assert plan(
        state(resource(pool, "p", spec(ref))), state(resource(pool, "p", spec({**ref, "kind": "X"})))
    ).blocking


def test_karpenter_deletions_are_called_out_but_not_blocking() -> None:
    pool = resource("kubernetes:karpenter.sh/v1:NodePool", "p", {"metadata": {"name": "p"}})
    node_class = resource("kubernetes:karpenter.k8s.aws/v1:EC2NodeClass", "c", {"metadata": {"name": "c"}})
    result = plan(state(pool, node_class), state())
    assert [s.op for s in result.steps] == ["delete", "delete"]
    assert len(result.findings) == 2
    assert not result.blocking


# --- states -------------------------------------------------------------------------------------


def test_snapshot_and_run_states_agree(dev: ProgramRun) -> None:
    """The committed-snapshot reader rebuilds the same keys, inputs and options as the run itself."""
    from_run = state_of_run(dev, "run")
    from_snapshot = state_of_snapshot(render(dev)["resources.yaml"], "snapshot")
    assert from_snapshot.resources.keys() == from_run.resources.keys()
    for key, r in from_run.resources.items():
        s = from_snapshot.resources[key]
        assert (s.type, s.name, s.provider, s.protect, s.delete_before_replace) == (
            r.type,
            r.name,
            r.provider,
            r.protect,
            r.delete_before_replace,
        ), key
        assert sorted(s.ignore_changes) == sorted(r.ignore_changes)
        assert s.delete_timeout == r.delete_timeout, key
    assert plan(from_snapshot, from_run).steps == ()


def test_snapshot_states_carry_the_stacks_outputs(prod: ProgramRun) -> None:
    files = render(prod)
    from_snapshot = state_of_snapshot(files["resources.yaml"], "snapshot", files["outputs.yaml"])
    assert from_snapshot.region == state_of_run(prod, "run").region == "us-west-2"
    assert pool_caps(from_snapshot) == pool_caps(state_of_run(prod, "run"))
    assert any(r.delete_timeout for r in from_snapshot.resources.values())  # the training pool's


@pytest.mark.parametrize("op", ["create", "delete"])
def test_a_stack_without_previous_state_is_all_creates(dev: ProgramRun, op: str) -> None:
    run_state = state_of_run(dev, "run")
    empty = State({}, "nothing")
    result = plan(empty, run_state) if op == "create" else plan(run_state, empty)
    assert {s.op for s in result.steps} == {op}
    assert len(result.steps) == len(run_state.resources)


# --- what `pulumi up` cannot carry out (issue 24) -----------------------------------------------

RELEASE = "kubernetes:helm.sh/v3:Release"


@pytest.mark.parametrize(
    "chart", ["gpu-operator", "oci://public.ecr.aws/karpenter/karpenter", "kube-prometheus-stack"]
)
def test_a_release_owning_cluster_scoped_objects_cannot_be_replaced_create_first(chart: str) -> None:
    before = state(resource(RELEASE, "r", {"chart": chart, "name": "r", "namespace": "a"}))
    moved = {"chart": chart, "name": "r", "namespace": "b"}
    create_first = plan(before, state(resource(RELEASE, "r", moved)))
    assert create_first.blocking
    assert "Helm refuses it, since the old release owns its Cluster" in create_first.findings[0].message
    delete_first = plan(before, state(resource(RELEASE, "r", moved, delete_before_replace=True)))
    assert not delete_first.blocking
    assert "uninstalls the old release first" in delete_first.findings[0].message


def test_a_release_without_cluster_scoped_objects_may_move_create_first() -> None:
    chart = "aws-efa-k8s-device-plugin"
    before = state(resource(RELEASE, "r", {"chart": chart, "name": "r", "namespace": "a"}))
    result = plan(before, state(resource(RELEASE, "r", {"chart": chart, "name": "r", "namespace": "b"})))
    assert [s.op for s in result.steps] == ["replace"]
    assert result.findings == ()


def test_replacing_a_crd_release_delete_first_says_what_goes_with_its_crds() -> None:
    crds = {"chart": "oci://public.ecr.aws/karpenter/karpenter-crd", "name": "karpenter-crd"}
    before = state(resource(RELEASE, "crd", {**crds, "namespace": "kube-system"}))
    after = state(resource(RELEASE, "crd", {**crds, "namespace": "karpenter"}, delete_before_replace=True))
    [finding] = plan(before, after).findings
    assert "deletes its CRDs, and with them every NodePool, NodeClaim, EC2NodeClass" in finding.message


def test_a_cascaded_replacement_keeping_an_identity_that_no_replaced_resource_feeds_collides() -> None:
    """A NAT gateway moved to a new subnet keeps its Elastic IP: the new one cannot take it while the old one
    holds it. Its subnet comes from a replaced subnet; the allocation from an Eip that stays."""
    subnet = "aws:ec2/subnet:Subnet"
    nat = "aws:ec2/natGateway:NatGateway"
    deps = {"subnetId": (f"{subnet}::public",), "allocationId": ("aws:ec2/eip:Eip::nat",)}
    before = state(
        resource(subnet, "public", {"cidrBlock": "10.0.0.0/24"}),
        resource(
            nat, "nat", {"subnetId": "subnet-1", "allocationId": "eipalloc-1"}, property_dependencies=deps
        ),
    )
    after = state(
        resource(subnet, "public", {"cidrBlock": "10.1.0.0/24"}),
        resource(
            nat, "nat", {"subnetId": "subnet-1", "allocationId": "eipalloc-1"}, property_dependencies=deps
        ),
    )
    result = plan(before, after)
    assert {s.name: (s.op, s.cascaded) for s in result.steps} == {
        "public": ("replace", False),
        "nat": ("replace", True),
    }
    [finding] = result.findings
    assert finding.blocking
    assert finding.message.startswith(
        f"replace {nat} nat creates the new one first with the same allocationId"
    )


def test_an_update_the_api_refuses_is_blocking_when_it_cascades_too() -> None:
    vpc, gateway = "aws:ec2/vpc:Vpc", "aws:ec2/internetGateway:InternetGateway"
    deps = {"vpcId": (f"{vpc}::network",)}
    before = state(
        resource(vpc, "network", {"cidrBlock": "10.0.0.0/16"}),
        resource(gateway, "igw", {"vpcId": "vpc-1"}, property_dependencies=deps),
    )
    after = state(
        resource(vpc, "network", {"cidrBlock": "10.1.0.0/16"}),
        resource(gateway, "igw", {"vpcId": "vpc-1"}, property_dependencies=deps),
    )
    result = plan(before, after)
    step = result.find(gateway, "igw")
    assert step is not None
    assert (step.op, step.cascaded, step.paths) == ("update", True, ("vpcId",))
    assert result.blocking
    assert "Gateway.DependencyViolation" in result.findings[0].message


@pytest.mark.parametrize(
    ("current", "target", "refused"),
    [("1.35", "1.36", False), ("1.35", "1.35", False), ("1.35", "1.34", True), ("1.33", "1.35", True)],
)
def test_control_plane_versions_move_one_minor_up(current: str, target: str, refused: bool) -> None:
    cluster = "eks:index:Cluster"
    before = state(resource(cluster, "c", {"name": "ml", "version": current}))
    result = plan(before, state(resource(cluster, "c", {"name": "ml", "version": target})))
    assert result.blocking == refused
    if refused:
        assert "gpu-eks:cluster.kubernetesVersion" in result.findings[0].message


def test_pool_caps_come_from_the_gpu_pools_output() -> None:
    def pools(*entries: dict[str, Any]) -> State:
        return State({}, "outputs", {"gpuPools": list(entries)})

    shared = {"name": "p", "kind": "gpu", "gpuLimit": "16", "gpuResource": "nvidia.com/gpu"}
    caps = pool_caps(
        pools(
            {**shared, "slicesPerGpu": 4, "timeSlicingReplicas": 4},
            {**shared, "name": "mig", "slicesPerGpu": 7, "migProfile": "all-1g.10gb", "gpuLimit": "56"},
            {
                **shared,
                "name": "mixed",
                "gpuResource": None,
                "slicesPerGpu": None,
                "migProfile": "all-balanced",
            },
            {**shared, "name": "unlike", "slicesPerGpu": None, "migProfile": "all-1g.10gb"},
            {"name": "cpu", "kind": "cpu", "gpuLimit": None},
        )
    )
    assert caps == {
        "p": PoolCap(Decimal(16), "time-slices", 4),
        "mig": PoolCap(Decimal(56), "MIG devices", 7),
        "mixed": PoolCap(Decimal(16), "GPUs", 1),  # several MIG resources: the cap counts GPUs
    }
    assert caps["mig"].gpus == 8


def test_new_subnets_in_the_same_zones_update_the_cluster_and_other_zones_are_refused() -> None:
    def network(*subnets: tuple[str, str]) -> State:
        declared = [resource("aws:ec2/subnet:Subnet", n, {"availabilityZone": z}) for n, z in subnets]
        ids = [f"subnet-{n}" for n, _ in subnets]
        cluster = resource(
            "eks:index:Cluster",
            "c",
            {"name": "c", "privateSubnetIds": ids},
            dependencies=tuple(d.key for d in declared),
        )
        return state(*declared, cluster)

    before = network(("a", "z-1a"), ("b", "z-1b"))
    same_zones = plan(before, network(("a2", "z-1a"), ("b", "z-1b")))
    assert ("update", "c") in {(s.op, s.name) for s in same_zones.steps}
    assert not same_zones.blocking
    other_zones = plan(before, network(("a", "z-1a"), ("c", "z-1c")))
    [refusal] = other_zones.findings
    assert refusal.blocking
    assert "its subnets move from zones z-1a, z-1b to z-1a, z-1c" in refusal.message
