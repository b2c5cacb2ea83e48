"""The output contract of a gpu-eks stack: the names, types and meaning of what other stacks may read.

Consumers read these through `pulumi.StackReference(...).require_output("<name>")` (`get_output` for
`OPTIONAL_OUTPUTS`, which a stack without the part does not have) and may validate what they get with these
models (`StackOutputs.model_validate(values)`, `GpuPool.model_validate(pool)`). The
program exports exactly these names (a test enforces it); renaming or removing one is a breaking change.
"""

from collections.abc import Mapping
from typing import Any, Literal

import pulumi
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel


class _Contract(BaseModel):
    """Optional fields default to None: Pulumi drops null values from stack outputs."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)


class Toleration(_Contract):
    """A pod toleration in the Kubernetes API shape."""

    key: str
    operator: Literal["Equal", "Exists"]
    value: str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


class Taint(_Contract):
    """A node taint in the Kubernetes API shape."""

    key: str
    value: str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


class GpuPool(_Contract):
    """One Karpenter pool a workload can target."""

    name: str
    """NodePool name; `nodeSelector` below selects it."""
    kind: Literal["gpu", "cpu"]
    capacity_types: list[Literal["spot", "on-demand", "reserved"]]
    """What the pool may launch; a `spot` pool's pods must tolerate interruption."""
    taints: list[Taint]
    """Taints of the pool's nodes."""
    tolerations: list[Toleration]
    """Tolerations a pod needs to be scheduled on the pool (one per taint)."""
    node_selector: dict[str, str]
    """Node selector that pins a pod to this pool (`karpenter.sh/nodepool: <name>`)."""
    labels: dict[str, str]
    """Labels every node of the pool carries (besides Karpenter's and the GPU Operator's own)."""
    gpu_limit: str | None = None
    """The pool's GPU cap (`limits.nvidia.com/gpu`), in units of `gpuResource`: whole GPUs, time-slices or MIG
    devices, so with `slicesPerGpu` 4 a cap of 16 is 4 physical GPUs. In physical GPUs where `gpuResource` is
    None (several MIG resources). None for CPU pools."""
    gpu_resource: str | None = None
    """The extended resource a pod requests for one GPU on this pool (`nvidia.com/gpu`, or a MIG resource)."""
    slices_per_gpu: int | None = None
    """How many `gpuResource` one physical GPU of the pool provides: 1 for whole GPUs, the time-slicing
    replicas, or the MIG devices per GPU. None for CPU pools, for pools with several MIG resources, and for
    MIG pools whose GPU models partition differently (A100 40GB and H100 under `all-1g.10gb`: 4 and 7)."""
    time_slicing_replicas: int | None = None
    """Pods per physical GPU when the pool time-slices, else None."""
    mig_profile: str | None = None
    """MIG configuration of the pool's GPUs, else None."""


class Monitoring(_Contract):
    """Where the stack's metrics and dashboards are (present when `observability.backend` is not `none`)."""

    backend: Literal["inCluster", "managed"]
    namespace: str
    """Namespace of the monitoring stack."""
    grafana_service: str
    """Grafana's Service as `<namespace>/<name>:<port>` (ClusterIP: reach it with `grafana_port_forward`)."""
    grafana_port_forward: str
    """The command that opens Grafana on http://localhost:3000 (admin password: see the README)."""
    prometheus_url: str | None = None
    """In-cluster URL of the Prometheus server (`inCluster`)."""
    amp_workspace_id: str | None = None
    """The Amazon Managed Service for Prometheus workspace (`managed`)."""
    amp_query_endpoint: str | None = None
    """The workspace's Prometheus query API (`managed`): SigV4-signed requests with `aps:QueryMetrics`."""
    alert_topic_arn: str | None = None
    """The SNS topic the workspace's alerts go to (`managed` with `alerting`): subscribe a pager to it;
    messages carry a `severity` attribute (`critical`, `warning`)."""


class Team(_Contract):
    """An ML team's namespace and who may work in it (`gpu-eks:teams`)."""

    name: str
    namespace: str
    """The team's namespace (its name): its roles' access ends at it."""
    role_arns: list[str]
    """IAM roles with an EKS access entry scoped to the namespace."""
    access: Literal["view", "edit", "admin"]
    """The roles' access policy there: AmazonEKSViewPolicy, AmazonEKSEditPolicy or AmazonEKSAdminPolicy."""
    gpu_quota: int | None = None
    """At most this many `nvidia.com/gpu` requested at once in the namespace (in the pool's units: slices on
    a time-sliced pool); None without a quota."""
    pod_security: Literal["privileged", "baseline", "restricted"]
    """The Pod Security Standard the namespace enforces."""


class StackOutputs(_Contract):
    """Every output of a gpu-eks stack."""

    region: str
    """AWS region of the cluster."""
    cluster_name: str
    cluster_endpoint: str
    """Kubernetes API server URL."""
    cluster_certificate_authority: str
    """Base64 CA bundle of the API server."""
    kubeconfig: dict[str, Any] | str
    """Kubeconfig authenticating with `aws eks get-token` (a secret output)."""
    oidc_provider_arn: str
    """IAM OIDC provider of the cluster, for IRSA roles of other stacks."""
    oidc_provider_url: str
    """OIDC issuer without `https://`, for IRSA trust conditions."""
    vpc_id: str
    private_subnet_ids: list[str]
    karpenter_node_role_name: str
    """IAM role of Karpenter's nodes (e.g. for extra EC2NodeClasses of other stacks)."""
    karpenter_node_role_arn: str
    karpenter_controller_role_arn: str
    karpenter_interruption_queue_name: str | None = None
    """SQS queue for interruption events, None when interruption handling is off."""
    karpenter_namespace: str
    gpu_pools: list[GpuPool] = Field(default_factory=list)
    """The pools workloads can target."""
    gpu_toleration: Toleration
    """The toleration a GPU workload needs for the default GPU taint (`nvidia.com/gpu`, any value)."""
    gpu_operator_namespace: str
    monitoring: Monitoring | None = None
    """Metrics and dashboards, None without an observability backend."""
    teams: list[Team] = Field(default_factory=list)
    """The ML teams' namespaces, in config order."""


OUTPUT_NAMES: tuple[str, ...] = tuple(f.alias or n for n, f in StackOutputs.model_fields.items())
"""The exported names, in contract order."""

OPTIONAL_OUTPUTS: frozenset[str] = frozenset(
    f.alias or n for n, f in StackOutputs.model_fields.items() if not f.is_required() and f.default is None
)
"""Outputs a stack may not have: the SDK drops a None output when it registers the stack's outputs, so a
StackReference has no such name (`require_output` fails on it; `get_output` gives None)."""

SECRET_OUTPUTS = frozenset({"kubeconfig"})
"""Outputs exported as Pulumi secrets."""

GPU_TOLERATION = Toleration(key="nvidia.com/gpu", operator="Exists", effect="NoSchedule")
"""Tolerates the default GPU taint whatever its value."""


def export(values: Mapping[str, Any]) -> None:
    """Export exactly the contract's outputs (secrets as secrets); refuses a missing or unknown name."""
    missing = [n for n in OUTPUT_NAMES if n not in values]
    unknown = sorted(set(values) - set(OUTPUT_NAMES))
    if missing or unknown:
        raise ValueError(f"stack outputs differ from the contract: missing {missing}, not in it {unknown}")
    for name in OUTPUT_NAMES:
        value = values[name]
        pulumi.export(name, pulumi.Output.secret(value) if name in SECRET_OUTPUTS else value)
