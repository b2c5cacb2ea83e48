"""Safe teardown: `pulumi destroy` deletes in reverse dependency order, so every NodePool, EC2NodeClass,
NodeOverlay and workload must (transitively) depend on the Karpenter controller, its IAM and the node access
entry. Then they are deleted while Karpenter still runs and can terminate every instance it launched. The
controller in turn depends on what it needs while it drains (DNS, pod networking, service routing, Pod
Identity, its nodes' access entry, the discovery tags), and every Kubernetes object on the way to the API
(ingress rules, access entries), so those go last. All of it read from the declared graph."""

import pytest

from components.network import DISCOVERY_TAG
from synth.runner import ProgramRun
from tests.conftest import STACKS, stack_run
from tests.helpers import closure, run

POOL_OBJECTS = (
    "kubernetes:karpenter.sh/v1:NodePool",
    "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass",
    "kubernetes:karpenter.sh/v1alpha1:NodeOverlay",
    "kubernetes:batch/v1:Job",
)


def must_outlive_pools(run: ProgramRun) -> dict[str, str]:
    """URN -> description of everything Karpenter needs to terminate its instances."""
    needed = {
        r.urn: f"{r.type} {r.name}"
        for r in run.resources
        if r.parent
        and "gpu-eks:karpenter:Karpenter" in r.parent
        and r.type
        in (
            "kubernetes:helm.sh/v3:Release",
            "aws:iam/role:Role",
            "aws:iam/policy:Policy",
            "aws:iam/rolePolicyAttachment:RolePolicyAttachment",
            "aws:eks/accessEntry:AccessEntry",
            "aws:eks/podIdentityAssociation:PodIdentityAssociation",
            "aws:sqs/queue:Queue",
        )
    }
    assert len(needed) >= 15, (
        needed
    )  # releases, roles, policies, attachments, access entry, association, queue
    return needed


def test_pools_and_workloads_cannot_outlive_the_controller(any_stack: ProgramRun) -> None:
    needed = must_outlive_pools(any_stack)
    objects = [r for r in any_stack.resources if r.type in POOL_OBJECTS]
    assert objects, "the stack declares no node pools"
    for obj in objects:
        missing = sorted(desc for urn, desc in needed.items() if urn not in closure(any_stack, obj.urn))
        assert not missing, f"{obj.type} {obj.name} could outlive: {missing}"


def test_nothing_karpenter_needs_depends_on_a_pool(any_stack: ProgramRun) -> None:
    objects = {r.urn for r in any_stack.resources if r.type in POOL_OBJECTS}
    for urn in must_outlive_pools(any_stack):
        assert not closure(any_stack, urn) & objects


def test_node_overlays_go_before_the_controller_and_its_crds(dev: ProgramRun) -> None:
    overlays = dev.of_type("kubernetes:karpenter.sh/v1alpha1:NodeOverlay")
    assert overlays, "dev's time-sliced pool has NodeOverlays"
    needed = must_outlive_pools(dev)
    crds = dev.one("kubernetes:helm.sh/v3:Release", "karpenter-crd")
    for overlay in overlays:
        deps = closure(dev, overlay.urn)
        assert crds.urn in deps  # the CRD release serves karpenter.sh/v1alpha1 NodeOverlay
        assert not sorted(desc for urn, desc in needed.items() if urn not in deps)


def test_the_smoke_job_goes_before_its_pool_and_the_gpu_operator(dev: ProgramRun) -> None:
    job = dev.one("kubernetes:batch/v1:Job")
    deps = closure(dev, job.urn)
    pool = next(
        r for r in dev.of_type("kubernetes:karpenter.sh/v1:NodePool") if r.name.endswith("gpu-inference")
    )
    assert pool.urn in deps
    assert dev.one("kubernetes:helm.sh/v3:Release", "gpu-operator").urn in deps


EXISTING_VPC = {
    "existing": {
        "vpcId": "vpc-0123456789abcdef0",
        "privateSubnetIds": ["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"],
    }
}
PRIVATE_API = {
    "publicAccess": False,
    "privateAccess": True,
    "privateAccessCidrs": ["10.100.0.0/16"],
    "privateAccessSecurityGroupIds": ["sg-0123456789abcdef0"],
}


def other_runs() -> dict[str, ProgramRun]:
    """Configurations the committed stacks do not cover: an existing VPC (discovery tags as resources) and a
    private API with CI roles (ingress rules, automation access entries)."""
    return {
        "existing-vpc": run(cluster={"name": "ml-byo"}, network=EXISTING_VPC),
        "private-api": run(
            cluster={
                "name": "ml-private",
                "endpoint": PRIVATE_API,
                "adminRoleArns": ["arn:aws:iam::111122223333:role/admin"],
                "automation": {
                    "previewRoleArn": "arn:aws:iam::111122223333:role/preview",
                    "deployRoleArn": "arn:aws:iam::111122223333:role/deploy",
                },
            },
            network=EXISTING_VPC,
        ),
    }


@pytest.fixture(scope="module", params=[*STACKS, "existing-vpc", "private-api"])
def each_run(request: pytest.FixtureRequest) -> ProgramRun:
    return stack_run(request.param) if request.param in STACKS else other_runs()[request.param]


def needed_while_draining(result: ProgramRun) -> dict[str, str]:
    """URN -> description of what the controller uses while it terminates instances, found by what each
    resource is (not its name)."""
    needed = {}
    for addon in result.of_type("aws:eks/addon:Addon"):
        if addon.inputs["addonName"] in ("coredns", "vpc-cni", "kube-proxy", "eks-pod-identity-agent"):
            needed[addon.urn] = f"add-on {addon.inputs['addonName']}"
    for entry in result.of_type("aws:eks/accessEntry:AccessEntry"):
        if entry.inputs["type"] == "EC2_LINUX":
            needed[entry.urn] = "the node role's access entry"
    for tag in result.of_type("aws:ec2/tag:Tag"):
        if tag.inputs["key"] == DISCOVERY_TAG:
            needed[tag.urn] = f"discovery tag on {tag.inputs['resourceId']}"
    for subnet in result.of_type("aws:ec2/subnet:Subnet"):
        if DISCOVERY_TAG in subnet.inputs.get("tags", {}):
            needed[subnet.urn] = f"discovery-tagged subnet {subnet.name}"
    return needed


def test_what_the_controller_needs_while_draining_outlives_it(each_run: ProgramRun) -> None:
    needed = needed_while_draining(each_run)
    kinds = {d.split(" ")[0] for d in needed.values()}
    assert {"add-on", "the", "discovery"} <= kinds
    assert sum(d.startswith("add-on") for d in needed.values()) == 4
    assert sum(d.startswith("discovery tag on sg-") for d in needed.values()) == 1
    assert sum("subnet" in d for d in needed.values()) >= 2
    controller = each_run.one("kubernetes:helm.sh/v3:Release", "karpenter-controller")
    missing = sorted(d for urn, d in needed.items() if urn not in closure(each_run, controller.urn))
    assert not missing, f"the Karpenter controller could outlive: {missing}"


def test_the_way_to_the_api_outlives_every_kubernetes_object(each_run: ProgramRun) -> None:
    way_in = {
        r.urn: f"{r.type} {r.name}"
        for r in each_run.resources
        if r.type == "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
        or (
            r.type
            in ("aws:eks/accessEntry:AccessEntry", "aws:eks/accessPolicyAssociation:AccessPolicyAssociation")
            and r.parent is not None
            and r.parent.endswith("gpu-eks:cluster:Cluster::cluster")
        )
    }
    objects = [r for r in each_run.resources if r.type.startswith("kubernetes:")]
    assert objects
    for obj in objects:
        missing = sorted(d for urn, d in way_in.items() if urn not in closure(each_run, obj.urn))
        assert not missing, f"{obj.type} {obj.name} could outlive: {missing}"


def test_the_private_api_run_has_a_way_in_to_keep() -> None:
    result = other_runs()["private-api"]
    assert len(result.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")) == 2
    assert len(result.of_type("aws:eks/accessPolicyAssociation:AccessPolicyAssociation")) == 3


def test_production_protects_the_cluster(prod: ProgramRun, dev: ProgramRun) -> None:
    assert prod.one("eks:index:Cluster").protect is True
    assert prod.one("eks:index:Cluster").inputs["deletionProtection"] is True
    assert dev.one("eks:index:Cluster").protect is False
