"""Cluster: control-plane settings, system node group, add-ons, access entries, the Kubernetes provider."""

import json

from components.cluster import SYSTEM_NODE_SELECTOR
from components.network import DISCOVERY_TAG
from synth.runner import ProgramRun
from synth.snapshot import short
from tests.helpers import run


def test_control_plane_settings(dev: ProgramRun) -> None:
    cluster = dev.one("eks:index:Cluster")
    inputs = cluster.inputs
    assert inputs["name"] == "ml-dev"
    assert inputs["version"] == "1.35"
    assert inputs["authenticationMode"] == "API"
    assert inputs["skipDefaultNodeGroup"] is True
    assert inputs["skipDefaultSecurityGroups"] is True
    assert inputs["createOidcProvider"] is True
    assert inputs["endpointPublicAccess"] is True
    assert inputs["endpointPrivateAccess"] is True
    assert inputs["enabledClusterLogTypes"] == [
        "api",
        "audit",
        "authenticator",
        "controllerManager",
        "scheduler",
    ]
    assert inputs["corednsAddonOptions"]["enabled"] is False
    assert cluster.parent is not None
    assert cluster.parent.endswith("gpu-eks:cluster:Cluster::cluster")


def test_prod_endpoint_is_private_and_cluster_protected(prod: ProgramRun) -> None:
    cluster = prod.one("eks:index:Cluster")
    assert cluster.inputs["endpointPublicAccess"] is False
    assert cluster.inputs["endpointPrivateAccess"] is True
    assert "publicAccessCidrs" not in cluster.inputs
    assert cluster.inputs["deletionProtection"] is True
    assert cluster.protect is True


def test_dev_cluster_is_not_protected(dev: ProgramRun) -> None:
    assert dev.one("eks:index:Cluster").protect is False


def test_cluster_security_group_is_tagged_for_karpenter_discovery(dev: ProgramRun) -> None:
    cluster = dev.one("eks:index:Cluster")
    tag = dev.one("aws:ec2/tag:Tag", "cluster-sg-discovery")
    assert tag.inputs["resourceId"] == cluster.outputs["clusterSecurityGroupId"]
    assert (tag.inputs["key"], tag.inputs["value"]) == (DISCOVERY_TAG, "ml-dev")


def test_system_node_group(prod: ProgramRun) -> None:
    group = prod.one("aws:eks/nodeGroup:NodeGroup").inputs
    assert group["clusterName"] == "ml-prod"
    assert group["capacityType"] == "ON_DEMAND"
    assert group["instanceTypes"] == ["m7i.xlarge", "m6i.xlarge"]
    assert group["scalingConfig"] == {"minSize": 3, "desiredSize": 3, "maxSize": 6}
    assert group["labels"] == SYSTEM_NODE_SELECTOR
    private = [r.id for r in prod.of_type("aws:ec2/subnet:Subnet") if "-private-" in r.name]
    assert sorted(group["subnetIds"]) == sorted(private)
    assert len(private) == 3


def test_system_node_group_spans_the_private_subnets_only(dev: ProgramRun) -> None:
    group = dev.one("aws:eks/nodeGroup:NodeGroup")
    private = {r.urn for r in dev.of_type("aws:ec2/subnet:Subnet") if "-private-" in r.name}
    public = {r.urn for r in dev.of_type("aws:ec2/subnet:Subnet") if "-public-" in r.name}
    assert private <= set(group.property_dependencies["subnetIds"])
    assert not public & set(group.property_dependencies["subnetIds"])


def test_system_node_role_has_exactly_the_node_policies(dev: ProgramRun) -> None:
    role = dev.one("aws:iam/role:Role", "cluster-system-nodes")
    trust = json.loads(role.inputs["assumeRolePolicy"])
    assert trust["Statement"][0]["Principal"] == {"Service": "ec2.amazonaws.com"}
    attached = sorted(
        r.inputs["policyArn"]
        for r in dev.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
        if r.name.startswith("cluster-system-nodes-")
    )
    assert attached == [
        "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryPullOnly",
        "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
        "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy",
    ]
    group = dev.one("aws:eks/nodeGroup:NodeGroup")
    attachment_urns = {
        r.urn
        for r in dev.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
        if "system-nodes" in r.name
    }
    assert attachment_urns <= set(group.dependencies)  # nodes only start once they may join


def test_node_group_ignores_desired_size_drift(dev: ProgramRun) -> None:
    assert dev.one("aws:eks/nodeGroup:NodeGroup").ignore_changes == ["scalingConfig.desiredSize"]


def test_addons_pod_identity_before_nodes_and_coredns_after(dev: ProgramRun) -> None:
    addons = {r.inputs["addonName"]: r for r in dev.of_type("aws:eks/addon:Addon")}
    assert set(addons) == {"eks-pod-identity-agent", "coredns"}
    node_group = dev.one("aws:eks/nodeGroup:NodeGroup")
    assert node_group.urn in addons["coredns"].dependencies
    assert node_group.urn not in addons["eks-pod-identity-agent"].dependencies
    for addon in addons.values():
        assert addon.inputs["clusterName"] == "ml-dev"
        assert addon.inputs["resolveConflictsOnCreate"] == "OVERWRITE"


def test_admin_access_entries(prod: ProgramRun) -> None:
    entries = [
        e for e in prod.of_type("aws:eks/accessEntry:AccessEntry") if e.name.startswith("cluster-admin-")
    ]
    # By name, not registration order: entries register once the cluster name resolves, in no set order.
    # Named after the principal (not its position in the list), with the position-named alias of old.
    assert {e.name: (e.inputs["principalArn"], [short(a) for a in e.aliases]) for e in entries} == {
        "cluster-admin-111122223333-platform-admin": (
            "arn:aws:iam::111122223333:role/platform-admin",
            ["aws:eks/accessEntry:AccessEntry::cluster-admin-0"],
        ),
        "cluster-admin-111122223333-platform-break-glass": (
            "arn:aws:iam::111122223333:role/platform-break-glass",
            ["aws:eks/accessEntry:AccessEntry::cluster-admin-1"],
        ),
    }
    assert {e.inputs["type"] for e in entries} == {"STANDARD"}
    associations = prod.of_type("aws:eks/accessPolicyAssociation:AccessPolicyAssociation")
    assert len(associations) == 2
    for association in associations:
        assert association.inputs["policyArn"] == (
            "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"
        )
        assert association.inputs["accessScope"] == {"type": "cluster"}


def test_access_policy_arn_follows_the_partition() -> None:
    result = run(
        region="cn-north-1",
        cluster={"name": "ml-cn", "adminRoleArns": ["arn:aws-cn:iam::111122223333:role/admin"]},
    )
    association = result.one("aws:eks/accessPolicyAssociation:AccessPolicyAssociation")
    assert association.inputs["policyArn"].startswith("arn:aws-cn:eks::aws:cluster-access-policy/")
    policies = {
        r.inputs["policyArn"]
        for r in result.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
        if r.name.startswith("cluster-")
    }
    assert policies
    assert all(p.startswith("arn:aws-cn:iam::aws:policy/") for p in policies)
    trust = json.loads(result.one("aws:iam/role:Role", "cluster-system-nodes").inputs["assumeRolePolicy"])
    assert trust["Statement"][0]["Principal"] == {"Service": "ec2.amazonaws.com.cn"}


def test_kubernetes_provider_is_built_from_the_cluster_kubeconfig(dev: ProgramRun) -> None:
    cluster = dev.one("eks:index:Cluster")
    provider = dev.one("pulumi:providers:kubernetes")
    assert provider.inputs["kubeconfig"] == cluster.outputs["kubeconfigJson"]
    assert cluster.urn in provider.dependencies
    assert provider.parent is not None
    assert provider.parent.endswith("gpu-eks:cluster:Cluster::cluster")


def test_every_kubernetes_resource_uses_the_cluster_provider(any_stack: ProgramRun) -> None:
    provider = any_stack.one("pulumi:providers:kubernetes")
    kubernetes = [r for r in any_stack.resources if r.type.startswith("kubernetes:")]
    for resource in kubernetes:
        assert resource.provider == provider.urn.split("::")[-2] or resource.provider == provider.name, (
            resource.name
        )


def test_outputs_come_from_the_cluster(dev: ProgramRun) -> None:
    cluster = dev.one("eks:index:Cluster").outputs
    assert dev.outputs["clusterName"] == "ml-dev"
    assert dev.outputs["clusterEndpoint"] == cluster["kubeconfig"]["clusters"][0]["cluster"]["server"]
    assert dev.outputs["oidcProviderArn"] == cluster["oidcProviderArn"]
    assert "kubeconfig" in dev.secret_outputs
    assert "clusterEndpoint" not in dev.secret_outputs


def test_every_stack_runs_to_completion(any_stack: ProgramRun) -> None:
    types = {r.type for r in any_stack.resources}
    assert {
        "aws:ec2/vpc:Vpc",
        "aws:ec2/natGateway:NatGateway",
        "eks:index:Cluster",
        "aws:eks/nodeGroup:NodeGroup",
        "aws:eks/addon:Addon",
        "aws:eks/accessEntry:AccessEntry",
        "pulumi:providers:kubernetes",
    } <= types
    # Every resource except the components themselves hangs under a gpu-eks component.
    for resource in any_stack.resources:
        if not resource.type.startswith("gpu-eks:"):
            assert resource.parent is not None
            assert "gpu-eks:" in resource.parent, resource.name
