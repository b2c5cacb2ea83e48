"""Safe teardown: `pulumi destroy` deletes in reverse dependency order, so every NodePool, EC2NodeClass,
NodeOverlay and workload must (transitively) depend on the Karpenter controller, its IAM and the node access
entry. Then they are deleted while Karpenter still runs and can terminate every instance it launched."""

from synth.runner import ProgramRun

POOL_OBJECTS = (
    "kubernetes:karpenter.sh/v1:NodePool",
    "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass",
    "kubernetes:karpenter.sh/v1alpha1:NodeOverlay",
    "kubernetes:batch/v1:Job",
)


def closure(run: ProgramRun, urn: str) -> set[str]:
    """Everything `urn` depends on, directly or through other resources."""
    by_urn = {r.urn: r for r in run.resources}
    seen: set[str] = set()
    todo = list(by_urn[urn].dependencies)
    while todo:
        current = todo.pop()
        if current in seen or current not in by_urn:
            continue
        seen.add(current)
        todo += by_urn[current].dependencies
    return seen


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


def test_production_protects_the_cluster(prod: ProgramRun, dev: ProgramRun) -> None:
    assert prod.one("eks:index:Cluster").protect is True
    assert prod.one("eks:index:Cluster").inputs["deletionProtection"] is True
    assert dev.one("eks:index:Cluster").protect is False
