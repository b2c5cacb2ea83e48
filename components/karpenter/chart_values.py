"""Helm values of Karpenter's two charts, `karpenter-crd` and `karpenter`, for release 1.14.1.

Source: `charts/karpenter/values.yaml` of 1.14.1 (vendored as `tests/fixtures/karpenter-1.14.1/
chart-values.yaml`); the tests check that every key path written here exists in that file.

Install both charts from `CHART_REPOSITORY` with the same version: first `karpenter-crd` (the CRDs, upgraded
by Helm on every version bump), then `karpenter` with `skip_crds=True` (`CONTROLLER_SKIP_CRDS`), because
Helm installs a chart's `crds/` only on first install and never upgrades them.
"""

from collections.abc import Mapping, Sequence
from typing import Any, Final

from components.karpenter.iam import IRSA_ROLE_ANNOTATION
from config.karpenter import KARPENTER_VERSION, KarpenterConfig, KarpenterFeatureGates, LogLevel
from facts.partitions import check_cluster_name

CHART_REPOSITORY: Final = "oci://public.ecr.aws/karpenter"
"""OCI repository of both charts."""

CRD_CHART_NAME: Final = "karpenter-crd"
CONTROLLER_CHART_NAME: Final = "karpenter"

DEFAULT_CHART_VERSION: Final = KARPENTER_VERSION
"""`1.14.1`: chart version = app version, without a `v`."""

CONTROLLER_SKIP_CRDS: Final = True
"""Install the controller chart with `skip_crds`: the `karpenter-crd` release owns the CRDs."""

CRITICAL_ADDONS_ONLY_TOLERATION: Final[Mapping[str, str]] = {
    "key": "CriticalAddonsOnly",
    "operator": "Exists",
}
"""The chart's default toleration, kept because a `tolerations` value replaces the chart's list."""

LINUX_NODE_SELECTOR: Final[Mapping[str, str]] = {"kubernetes.io/os": "linux"}
"""The chart's default node selector, kept explicitly (Helm would merge it in anyway)."""


def chart_url(chart: str) -> str:
    """`oci://public.ecr.aws/karpenter/<chart>`, the `chart` argument of a Helm release from OCI."""
    if chart not in (CRD_CHART_NAME, CONTROLLER_CHART_NAME):
        raise ValueError(f"chart must be {CRD_CHART_NAME!r} or {CONTROLLER_CHART_NAME!r}, got {chart!r}")
    return f"{CHART_REPOSITORY}/{chart}"


def crd_chart_values() -> dict[str, Any]:
    """Values of the `karpenter-crd` chart: none.

    Its templates are links to the plain CRDs of `pkg/apis/crds/` (the reference CRDs of 1.14.1 carry no
    template directive), so no value changes what it installs. The `webhook` block older releases had in
    its values.yaml served the v1beta1 conversion webhook; leaving it unset keeps it at its default, off.
    """
    return {}


def controller_values(
    *,
    cluster_name: str,
    queue_name: str | None,
    cluster_endpoint: str | None = None,
    replicas: int = 2,
    service_account_name: str = "karpenter",
    irsa_role_arn: str | None = None,
    node_selector: Mapping[str, str] | None = None,
    tolerations: Sequence[Mapping[str, str]] = (),
    cpu: str = "1",
    memory: str = "1Gi",
    log_level: LogLevel = "info",
    feature_gates: KarpenterFeatureGates | None = None,
    zonal_shift: bool = False,
    service_monitor: bool = False,
) -> dict[str, Any]:
    """Values of the `karpenter` chart.

    - `cluster_name` -> `settings.clusterName` (the chart's only required value).
    - `queue_name`: the interruption queue's NAME (not URL or ARN) -> `settings.interruptionQueue`; `None`
      when interruption handling is off, which writes `""` (the controller then handles no interruptions).
    - `cluster_endpoint` -> `settings.clusterEndpoint` when given (else the controller discovers it with
      `eks:DescribeCluster`).
    - `service_account_name` -> `serviceAccount.name`; `irsa_role_arn` -> the service account's
      `eks.amazonaws.com/role-arn` annotation (IRSA only; leave `None` under Pod Identity).
    - `node_selector`, `tolerations`: place the controller on the system node group. The node selector is
      added to `kubernetes.io/os: linux`; the tolerations to the chart's `CriticalAddonsOnly` one. The chart's
      affinity already keeps the controller off nodes Karpenter manages.
    - `cpu`, `memory` -> `controller.resources`, requests equal to limits.
    - `feature_gates` -> `settings.featureGates`, every gate written (defaults: the chart's).
    - `zonal_shift` -> `settings.enableZonalShift`.
    - `service_monitor` -> `serviceMonitor.enabled`: a ServiceMonitor for the controller's metrics. The
      chart renders it only when the cluster serves `monitoring.coreos.com/v1` at install time (it checks
      `.Capabilities.APIVersions`), so the release must wait for the Prometheus Operator CRDs.
    """
    check_cluster_name(cluster_name)
    if queue_name is not None and (not queue_name or any(c in queue_name for c in ":/")):
        raise ValueError(f"queue_name must be the queue's name, not its URL or ARN: {queue_name!r}")
    if cluster_endpoint is not None and not cluster_endpoint.startswith("https://"):
        raise ValueError(f"cluster_endpoint must be the API server's https:// URL, got {cluster_endpoint!r}")
    if replicas < 1:
        raise ValueError(f"replicas must be at least 1, got {replicas}")
    if not service_account_name:
        raise ValueError("service_account_name must not be empty")
    if irsa_role_arn is not None and ":role/" not in irsa_role_arn:
        raise ValueError(f"irsa_role_arn must be an IAM role ARN, got {irsa_role_arn!r}")

    gates = feature_gates if feature_gates is not None else KarpenterFeatureGates()
    settings: dict[str, Any] = {
        "clusterName": cluster_name,
        "interruptionQueue": queue_name or "",
        "enableZonalShift": zonal_shift,
        "featureGates": gates.model_dump(by_alias=True),
    }
    if cluster_endpoint is not None:
        settings["clusterEndpoint"] = cluster_endpoint

    service_account: dict[str, Any] = {"create": True, "name": service_account_name}
    if irsa_role_arn is not None:
        service_account["annotations"] = {IRSA_ROLE_ANNOTATION: irsa_role_arn}

    all_tolerations = [dict(CRITICAL_ADDONS_ONLY_TOLERATION)]
    for toleration in tolerations:
        if dict(toleration) not in all_tolerations:
            all_tolerations.append(dict(toleration))

    resources = {"cpu": cpu, "memory": memory}
    return {
        "settings": settings,
        "replicas": replicas,
        "serviceAccount": service_account,
        "nodeSelector": {**LINUX_NODE_SELECTOR, **(node_selector or {})},
        "tolerations": all_tolerations,
        "logLevel": log_level,
        "controller": {"resources": {"requests": dict(resources), "limits": dict(resources)}},
        "serviceMonitor": {"enabled": service_monitor},
    }


def controller_values_from_config(
    config: KarpenterConfig,
    *,
    cluster_name: str,
    queue_name: str | None,
    cluster_endpoint: str | None = None,
    irsa_role_arn: str | None = None,
    node_selector: Mapping[str, str] | None = None,
    tolerations: Sequence[Mapping[str, str]] = (),
    service_monitor: bool = False,
) -> dict[str, Any]:
    """`controller_values` with everything the `gpu-eks:karpenter` section decides taken from `config`.

    Refuses (`ValueError`) a queue without interruption handling or the reverse, and an IRSA role ARN
    without `identity: irsa` or the reverse.
    """
    if config.interruption_handling and queue_name is None:
        raise ValueError("interruption handling is on but no interruption queue name was given")
    if not config.interruption_handling and queue_name is not None:
        raise ValueError(f"interruption handling is off but an interruption queue was given: {queue_name!r}")
    if config.identity == "irsa" and irsa_role_arn is None:
        raise ValueError("identity is irsa but no role ARN was given for the service-account annotation")
    if config.identity != "irsa" and irsa_role_arn is not None:
        raise ValueError(f"identity is {config.identity} but an IRSA role ARN was given: {irsa_role_arn!r}")
    return controller_values(
        cluster_name=cluster_name,
        queue_name=queue_name,
        cluster_endpoint=cluster_endpoint,
        replicas=config.replicas,
        service_account_name=config.service_account_name,
        irsa_role_arn=irsa_role_arn,
        node_selector=node_selector,
        tolerations=tolerations,
        cpu=config.controller_resources.cpu,
        memory=config.controller_resources.memory,
        log_level=config.log_level,
        feature_gates=config.feature_gates,
        zonal_shift=config.zonal_shift,
        service_monitor=service_monitor,
    )
