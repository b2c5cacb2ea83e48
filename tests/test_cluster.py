"""Cluster: control-plane settings and logs, system node group, add-ons and their versions, access entries,
the Kubernetes provider."""

import json

import pytest

from components.cluster import (
    ADDONS,
    SYSTEM_NODE_SELECTOR,
    AccessGrant,
    access_grants,
    adopted_log_group,
    kubeconfig_with_profile,
    pulumi_eks_child_urn,
)
from components.network import DISCOVERY_TAG
from config.cluster import ClusterConfig
from config.errors import ConfigError
from facts.eks import ADDON_VERSION, LOG_RETENTION_DAYS
from synth.mocks import AwsMocks, default_addon_version
from synth.runner import ProgramRun, RecordingMonitor, run_program
from synth.snapshot import short
from tests.conftest import stack_run
from tests.helpers import config, run, run_failing

ADDON = "aws:eks/addon:Addon"
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
LOG_GROUP = "aws:cloudwatch/logGroup:LogGroup"


def addons(result: ProgramRun) -> dict[str, dict[str, object]]:
    return {r.inputs["addonName"]: r.inputs for r in result.of_type(ADDON)}


# --- Control plane ------------------------------------------------------------------------------


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
    # dev keeps the security-relevant logs only, for cost (prod: every type).
    assert inputs["enabledClusterLogTypes"] == ["audit", "authenticator"]
    assert inputs["upgradePolicy"] == {"supportType": "STANDARD"}
    assert cluster.parent is not None
    assert cluster.parent.endswith("gpu-eks:cluster:Cluster::cluster")


def test_pulumi_eks_manages_no_add_on() -> None:
    """pulumi-eks would resolve vpc-cni and kube-proxy to the newest build on every `up`; it is told to leave
    all three to the cluster component (nodejs/eks/cluster/cluster.ts @ccf53f17: `useDefaultVpcCni` skips
    its VpcCniAddon, `kubeProxyAddonOptions.enabled: false` its kube-proxy Addon)."""
    inputs = run().one("eks:index:Cluster").inputs
    assert inputs["useDefaultVpcCni"] is True
    assert inputs["kubeProxyAddonOptions"]["enabled"] is False
    assert inputs["corednsAddonOptions"]["enabled"] is False


def test_prod_bootstraps_through_a_restricted_public_endpoint_and_is_protected(prod: ProgramRun) -> None:
    cluster = prod.one("eks:index:Cluster")
    assert cluster.inputs["endpointPublicAccess"] is True
    assert cluster.inputs["publicAccessCidrs"] == ["203.0.113.10/32"]
    assert cluster.inputs["endpointPrivateAccess"] is True
    assert cluster.inputs["deletionProtection"] is True
    assert cluster.protect is True


def test_dev_cluster_is_not_protected(dev: ProgramRun) -> None:
    assert dev.one("eks:index:Cluster").protect is False


def test_extended_support_is_opt_in() -> None:
    result = run(cluster={"name": "ml-old", "upgradePolicy": "EXTENDED"})
    assert result.one("eks:index:Cluster").inputs["upgradePolicy"] == {"supportType": "EXTENDED"}


def test_cluster_security_group_is_tagged_for_karpenter_discovery(dev: ProgramRun) -> None:
    cluster = dev.one("eks:index:Cluster")
    tag = dev.one("aws:ec2/tag:Tag", "cluster-sg-discovery")
    assert tag.inputs["resourceId"] == cluster.outputs["clusterSecurityGroupId"]
    assert (tag.inputs["key"], tag.inputs["value"]) == (DISCOVERY_TAG, "ml-dev")


# --- Control-plane logs -------------------------------------------------------------------------


@pytest.mark.parametrize(("stack", "days"), [("dev", 7), ("prod", 365)])
def test_control_plane_logs_go_to_a_log_group_created_first(stack: str, days: int) -> None:
    result = stack_run(stack)
    group = result.one(LOG_GROUP)
    name = result.one("eks:index:Cluster").inputs["name"]
    assert group.inputs["name"] == f"/aws/eks/{name}/cluster"  # where EKS writes them
    assert group.inputs["retentionInDays"] == days
    assert group.urn in result.one("eks:index:Cluster").dependencies
    assert group.protect is (stack == "prod")


def test_a_new_account_gets_the_log_group_created() -> None:
    assert stack_run("dev").one(LOG_GROUP).import_id is None


def test_a_log_group_left_by_a_deleted_cluster_is_adopted_with_this_stacks_settings() -> None:
    """After `pulumi destroy` EKS has recreated the group to write the last logs: the next `up` imports it
    (creating it would fail: it exists) and then gives it the stack's retention and tags."""
    leftover = "/aws/eks/ml-test/cluster"
    monitor = RecordingMonitor(AwsMocks("us-west-2", existing_log_groups=(leftover, f"{leftover}-archive")))
    result = run_program(config(cluster={"name": "ml-test"}), monitor=monitor)
    group = result.one(LOG_GROUP)
    assert group.import_id == leftover
    assert group.inputs["name"] == leftover
    assert group.inputs["retentionInDays"] == 90
    assert group.inputs["tags"]["gpu-eks/cluster"] == "ml-test"
    assert group.urn in result.one("eks:index:Cluster").dependencies


def test_only_the_clusters_own_group_is_adopted() -> None:
    name = "/aws/eks/ml-test/cluster"
    assert adopted_log_group(name, [name]) == name
    assert adopted_log_group(name, [f"{name}-archive", "/aws/eks/ml-test/clusterx"]) is None
    assert adopted_log_group(name, []) is None


def test_no_log_types_no_log_group() -> None:
    result = run(cluster={"name": "ml-quiet", "logTypes": []})
    assert result.of_type(LOG_GROUP) == []
    assert result.one("eks:index:Cluster").inputs["enabledClusterLogTypes"] == []


def test_log_retention_must_be_a_period_cloudwatch_accepts() -> None:
    error, monitor = run_failing(cluster={"name": "ml-test", "logRetentionDays": 100})
    assert isinstance(error, ConfigError)
    assert str(error.problems[0]).startswith(
        "gpu-eks:cluster.logRetentionDays = 100: must be one of the periods CloudWatch Logs accepts: 1, 3, 5"
    )
    assert monitor.registrations == []
    assert 0 not in LOG_RETENTION_DAYS  # never-expiring logs are what the log group is there to avoid


# --- System node group --------------------------------------------------------------------------


def test_system_node_group(prod: ProgramRun) -> None:
    group = prod.one(NODE_GROUP).inputs
    assert group["clusterName"] == "ml-prod"
    assert group["version"] == "1.35"
    assert group["capacityType"] == "ON_DEMAND"
    assert group["instanceTypes"] == ["m7i.xlarge", "m6i.xlarge"]
    assert group["scalingConfig"] == {"minSize": 3, "desiredSize": 3, "maxSize": 6}
    assert group["labels"] == SYSTEM_NODE_SELECTOR
    private = [r.id for r in prod.of_type("aws:ec2/subnet:Subnet") if "-private-" in r.name]
    assert sorted(group["subnetIds"]) == sorted(private)
    assert len(private) == 3


def test_system_node_group_spans_the_private_subnets_only(dev: ProgramRun) -> None:
    group = dev.one(NODE_GROUP)
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
    group = dev.one(NODE_GROUP)
    attachment_urns = {
        r.urn
        for r in dev.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
        if "system-nodes" in r.name
    }
    assert attachment_urns <= set(group.dependencies)  # nodes only start once they may join


def test_node_group_ignores_desired_size_drift(dev: ProgramRun) -> None:
    assert dev.one(NODE_GROUP).ignore_changes == ["scalingConfig.desiredSize"]


# --- Add-ons and versions -----------------------------------------------------------------------


def test_every_add_on_is_pinned_to_the_default_build_of_the_cluster_version(any_stack: ProgramRun) -> None:
    found = addons(any_stack)
    assert set(found) == {a.name for a in ADDONS} | {"aws-ebs-csi-driver"}
    for name, inputs in found.items():
        version = str(inputs["addonVersion"])
        assert ADDON_VERSION.fullmatch(version), name
        # What `get_addon_version(most_recent=False)` answers for 1.35 (see synth/mocks.py).
        assert version == default_addon_version(name, "1.35"), name
        assert inputs["resolveConflictsOnCreate"] == "OVERWRITE"
        assert inputs["resolveConflictsOnUpdate"] == "OVERWRITE"


def test_a_kubernetes_bump_moves_the_control_plane_node_group_and_every_add_on_together() -> None:
    before = run(cluster={"name": "ml-up", "kubernetesVersion": "1.35"})
    after = run(cluster={"name": "ml-up", "kubernetesVersion": "1.36"})
    assert after.one("eks:index:Cluster").inputs["version"] == "1.36"
    assert after.one(NODE_GROUP).inputs["version"] == "1.36"
    old, new = addons(before), addons(after)
    assert set(old) == set(new)
    for name in new:
        # The default build for the new version (AWS may keep the same build across minors for some).
        assert new[name]["addonVersion"] == default_addon_version(name, "1.36"), name
    assert str(old["kube-proxy"]["addonVersion"]).startswith("v1.35.")
    assert str(new["kube-proxy"]["addonVersion"]).startswith("v1.36.")


def test_the_node_group_and_add_ons_wait_for_the_control_plane(any_stack: ProgramRun) -> None:
    """Addressed to the cluster by a name that resolves once the control plane exists (on an upgrade: runs
    the new version), so they are updated after it."""
    cluster = any_stack.one("eks:index:Cluster").urn
    for resource in [any_stack.one(NODE_GROUP), *any_stack.of_type(ADDON)]:
        assert cluster in resource.property_dependencies["clusterName"], resource.name


def test_add_ons_that_need_nodes_come_after_the_system_nodes(dev: ProgramRun) -> None:
    group = dev.one(NODE_GROUP).urn
    by_name = {r.inputs["addonName"]: r for r in dev.of_type(ADDON)}
    assert {n for n, r in by_name.items() if group in r.dependencies} == {"coredns", "aws-ebs-csi-driver"}
    # vpc-cni and kube-proxy must survive being taken out of the stack: the pods' network depends on them.
    assert {n for n, r in by_name.items() if r.inputs.get("preserve")} == {"vpc-cni", "kube-proxy"}


def test_a_pinned_add_on_keeps_its_build_and_the_others_follow_the_default() -> None:
    result = run(
        cluster={"name": "ml-pin", "addons": {"vpcCni": {"version": "v1.19.6-eksbuild.7"}}},
    )
    found = addons(result)
    assert found["vpc-cni"]["addonVersion"] == "v1.19.6-eksbuild.7"
    assert found["coredns"]["addonVersion"] == default_addon_version("coredns", "1.35")


def test_a_kube_proxy_pin_of_another_minor_is_refused() -> None:
    error, monitor = run_failing(
        cluster={
            "name": "ml-pin",
            "kubernetesVersion": "1.36",
            "addons": {"kubeProxy": {"version": "v1.35.0-eksbuild.2"}},
        }
    )
    assert isinstance(error, ConfigError)
    assert str(error.problems[0]).startswith(
        "gpu-eks:cluster.addons.kubeProxy.version = 'v1.35.0-eksbuild.2': is a kube-proxy build for "
        "Kubernetes 1.35, but kubernetesVersion is 1.36"
    )
    assert monitor.registrations == []


def test_a_malformed_add_on_version_is_refused() -> None:
    error, monitor = run_failing(cluster={"name": "ml-pin", "addons": {"coredns": {"version": "1.11"}}})
    assert isinstance(error, ConfigError)
    assert str(error.problems[0]) == (
        "gpu-eks:cluster.addons.coredns.version = '1.11': must be an EKS add-on build such as "
        "v1.19.2-eksbuild.1"
    )
    assert monitor.registrations == []


def test_taken_over_add_ons_alias_the_resources_pulumi_eks_declared(dev: ProgramRun) -> None:
    """Stacks deployed before the takeover update their add-ons in place instead of failing to create a
    second one (EKS allows one add-on of a name per cluster)."""
    cluster = dev.one("eks:index:Cluster").urn
    aliases = {r.inputs["addonName"]: r.aliases for r in dev.of_type(ADDON)}
    head = cluster.rpartition("::")[0]
    assert aliases["kube-proxy"] == [f"{head}$aws:eks/addon:Addon::cluster-kube-proxy"]
    assert aliases["vpc-cni"] == [f"{head}$eks:index:VpcCniAddon$aws:eks/addon:Addon::cluster-vpc-cni"]
    assert aliases["coredns"] == aliases["eks-pod-identity-agent"] == []


def test_pulumi_eks_child_urn() -> None:
    cluster = "urn:pulumi:prod::gpu-eks::gpu-eks:cluster:Cluster$eks:index:Cluster::cluster"
    assert pulumi_eks_child_urn(cluster, "eks:index:VpcCniAddon", "cluster-vpc-cni") == (
        "urn:pulumi:prod::gpu-eks::gpu-eks:cluster:Cluster$eks:index:Cluster$eks:index:VpcCniAddon::"
        "cluster-vpc-cni"
    )


# --- Access entries -----------------------------------------------------------------------------


def test_admin_and_automation_access_entries(prod: ProgramRun) -> None:
    entries = {
        e.name: e
        for e in prod.of_type("aws:eks/accessEntry:AccessEntry")
        if e.name != "karpenter-node" and "gpu-eks:cluster:Cluster$" in e.urn
    }
    # By name, not registration order: entries register once the cluster name resolves, in no set order.
    # Admins are named after the principal (not their position in the list), with the position-named alias
    # of old and the alias of the entry the Teams component has for the role when it is a team's (so the
    # role moves between the two keeping its one entry); the CI roles after their purpose.
    assert {
        name: (e.inputs["principalArn"], [short(a) for a in e.aliases]) for name, e in entries.items()
    } == {
        "cluster-admin-111122223333-platform-admin": (
            "arn:aws:iam::111122223333:role/platform-admin",
            [
                "aws:eks/accessEntry:AccessEntry::cluster-admin-0",
                "aws:eks/accessEntry:AccessEntry::teams-111122223333-platform-admin",
            ],
        ),
        "cluster-admin-111122223333-platform-break-glass": (
            "arn:aws:iam::111122223333:role/platform-break-glass",
            [
                "aws:eks/accessEntry:AccessEntry::cluster-admin-1",
                "aws:eks/accessEntry:AccessEntry::teams-111122223333-platform-break-glass",
            ],
        ),
        "cluster-automation-preview": ("arn:aws:iam::111122223333:role/gpu-eks-prod-preview", []),
    }
    assert {e.inputs["type"] for e in entries.values()} == {"STANDARD"}
    associations = [
        a
        for a in prod.of_type("aws:eks/accessPolicyAssociation:AccessPolicyAssociation")
        if "gpu-eks:cluster:Cluster$" in a.urn
    ]
    assert {a.name for a in associations} == set(entries)
    for association in associations:
        assert association.inputs["policyArn"] == (
            "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"
        )
        assert association.inputs["accessScope"] == {"type": "cluster"}


def test_access_grants_give_both_ci_roles_cluster_admin() -> None:
    config = ClusterConfig.model_validate(
        {
            "name": "ml",
            "adminRoleArns": ["arn:aws:iam::111122223333:role/admin"],
            "automation": {
                "previewRoleArn": "arn:aws:iam::111122223333:role/preview",
                "deployRoleArn": "arn:aws:iam::111122223333:role/deploy",
            },
        }
    )
    assert access_grants(config) == [
        AccessGrant(
            "admin-111122223333-admin",
            "arn:aws:iam::111122223333:role/admin",
            "AmazonEKSClusterAdminPolicy",
            previous_name="admin-0",
            was_team_role=True,
        ),
        AccessGrant(
            "automation-preview", "arn:aws:iam::111122223333:role/preview", "AmazonEKSClusterAdminPolicy"
        ),
        AccessGrant(
            "automation-deploy", "arn:aws:iam::111122223333:role/deploy", "AmazonEKSClusterAdminPolicy"
        ),
    ]


@pytest.mark.parametrize(
    ("automation", "expected"),
    [
        (
            {"previewRoleArn": "arn:aws:iam::111122223333:role/platform-admin"},
            "gpu-eks:cluster.automation.previewRoleArn = 'arn:aws:iam::111122223333:role/platform-admin': "
            "is also listed in adminRoleArns",
        ),
        (
            {
                "previewRoleArn": "arn:aws:iam::111122223333:role/ci",
                "deployRoleArn": "arn:aws:iam::111122223333:role/ci",
            },
            "gpu-eks:cluster.automation.deployRoleArn = 'arn:aws:iam::111122223333:role/ci': is the same "
            "role as previewRoleArn",
        ),
    ],
)
def test_one_access_entry_per_principal(automation: dict[str, str], expected: str) -> None:
    error, monitor = run_failing(
        cluster={
            "name": "ml-test",
            "adminRoleArns": ["arn:aws:iam::111122223333:role/platform-admin"],
            "automation": automation,
        }
    )
    assert isinstance(error, ConfigError)
    assert str(error.problems[0]).startswith(expected)
    assert monitor.registrations == []


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


# --- The Kubernetes provider and the kubeconfig -------------------------------------------------


def test_kubernetes_provider_is_built_from_the_cluster_kubeconfig(dev: ProgramRun) -> None:
    cluster = dev.one("eks:index:Cluster")
    provider = dev.one("pulumi:providers:kubernetes")
    assert provider.inputs["kubeconfig"] == cluster.outputs["kubeconfigJson"]
    assert cluster.urn in provider.dependencies
    assert provider.parent is not None
    assert provider.parent.endswith("gpu-eks:cluster:Cluster::cluster")
    assert "providerCredentialOpts" not in cluster.inputs


def test_an_aws_profile_reaches_the_kubeconfig_the_program_uses_not_the_one_it_exports() -> None:
    """The program's own provider runs `aws eks get-token` under the stack's profile; the exported kubeconfig,
    which other teams' stacks and CI read, with whatever credentials its reader has (no profile of the
    platform team's name there)."""
    result = run_program({**config(), "aws:profile": "ml-platform"})
    cluster = result.one("eks:index:Cluster")
    assert cluster.inputs["providerCredentialOpts"] == {"profileName": "ml-platform"}
    provider = json.loads(result.one("pulumi:providers:kubernetes").inputs["kubeconfig"])
    exported = result.outputs["kubeconfig"]
    token = ["--region", "us-west-2", "eks", "get-token", "--cluster-name", "ml-test"]
    assert provider["users"][0]["user"]["exec"]["args"][:6] == token
    assert provider["users"][0]["user"]["exec"]["args"][-2:] == ["--profile", "ml-platform"]
    assert "--profile" not in exported["users"][0]["user"]["exec"]["args"]
    assert exported["users"][0]["user"]["exec"]["args"][:6] == token
    assert "kubeconfig" in result.secret_outputs


def test_kubeconfig_with_profile_adds_it_once_and_leaves_the_input_alone() -> None:
    kubeconfig = {
        "users": [{"name": "aws", "user": {"exec": {"command": "aws", "args": ["eks", "get-token"]}}}]
    }
    once = kubeconfig_with_profile(kubeconfig, "p")
    assert once["users"][0]["user"]["exec"]["args"] == ["eks", "get-token", "--profile", "p"]
    assert kubeconfig_with_profile(once, "p") == once
    assert kubeconfig["users"][0]["user"]["exec"]["args"] == ["eks", "get-token"]


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
    assert dev.outputs["oidcProviderUrl"] == cluster["oidcIssuer"]
    assert "kubeconfig" in dev.secret_outputs
    assert "clusterEndpoint" not in dev.secret_outputs


def test_every_stack_runs_to_completion(any_stack: ProgramRun) -> None:
    types = {r.type for r in any_stack.resources}
    assert {
        "aws:ec2/vpc:Vpc",
        "aws:ec2/natGateway:NatGateway",
        "eks:index:Cluster",
        NODE_GROUP,
        ADDON,
        LOG_GROUP,
        "aws:eks/accessEntry:AccessEntry",
        "pulumi:providers:kubernetes",
    } <= types
    # Every resource except the components themselves hangs under a gpu-eks component.
    for resource in any_stack.resources:
        if not resource.type.startswith("gpu-eks:"):
            assert resource.parent is not None
            assert "gpu-eks:" in resource.parent, resource.name
