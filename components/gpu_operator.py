"""GpuOperator: the NVIDIA GPU Operator's namespace and Helm release, with values derived from the GPU pools.

The values come from `components.gpu_operator_values.gpu_operator_values` (where every decision about them
lives and is tested); this component only wires them to the cluster: its Kubernetes provider, and the
system node group the operator controller and the NFD master run on.
"""

from collections.abc import Sequence

import pulumi
import pulumi_kubernetes as k8s

from components.cluster import SYSTEM_NODE_SELECTOR, Cluster
from components.gpu_operator_values import GpuOperatorValuesError, GpuPoolProfile, gpu_operator_values
from config.gpu_operator import CHART_NAME, CHART_REPOSITORY, GpuOperatorConfig

RELEASE_NAME = CHART_NAME
"""Helm release name. Fixed (not auto-named) so the chart's resource names and `helm -n <ns> status
gpu-operator` are predictable."""

POD_SECURITY_LEVEL = "privileged"
"""Pod Security level of the namespace: the operands (device plugin, DCGM exporter, MIG manager, validator,
NFD worker) mount host paths and run privileged."""
POD_SECURITY_LABELS = {
    f"pod-security.kubernetes.io/{mode}": POD_SECURITY_LEVEL for mode in ("enforce", "audit", "warn")
}
"""Namespace labels for Pod Security admission (audit and warn too, so a cluster-wide stricter default
does not flood audit logs and `kubectl` output with warnings about these pods)."""


class GpuOperator(pulumi.ComponentResource):
    """The NVIDIA GPU Operator (chart `gpu-operator` from NGC) in its own privileged namespace."""

    namespace: pulumi.Output[str]
    """The namespace the operator runs in."""
    release_name: pulumi.Output[str | None]
    release_status: pulumi.Output[str]
    """Helm's status of the release (`deployed` once every workload of the chart is ready)."""
    chart_version: pulumi.Output[str | None]
    release: k8s.helm.v3.Release
    """The Helm release (workloads that need the operator depend on it)."""

    def __init__(
        self,
        name: str,
        *,
        config: GpuOperatorConfig,
        pools: Sequence[GpuPoolProfile],
        kubernetes_version: str,
        cluster: Cluster,
        monitoring_crds: pulumi.Resource | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """`monitoring_crds`: the release of the Prometheus Operator CRDs, when an observability backend
        scrapes the cluster; the DCGM exporter's ServiceMonitor is then created (unless the config opts out)
        and the release waits for the CRDs (the operator cannot create a ServiceMonitor before them)."""
        super().__init__("gpu-eks:gpu_operator:GpuOperator", name, None, opts)
        try:
            values = gpu_operator_values(
                pools,
                kubernetes_version=kubernetes_version,
                config=config,
                system_node_selector=SYSTEM_NODE_SELECTOR,
                scraped=monitoring_crds is not None,
            )
        except GpuOperatorValuesError as exc:
            # The config layer runs the same checks before anything is registered; reaching this is a bug
            # there, but the message still says what is wrong (a RunError prints without a traceback).
            raise pulumi.RunError(f"GpuOperator {name!r}: {exc}") from exc

        namespace = k8s.core.v1.Namespace(
            name,
            metadata=k8s.meta.v1.ObjectMetaArgs(name=config.namespace, labels=POD_SECURITY_LABELS),
            opts=pulumi.ResourceOptions(parent=self, provider=cluster.provider),
        )

        release = k8s.helm.v3.Release(
            name,
            name=RELEASE_NAME,
            chart=CHART_NAME,
            version=config.version,
            repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=CHART_REPOSITORY),
            namespace=namespace.metadata.name,
            create_namespace=False,  # the Namespace above, with its Pod Security labels
            values=values,
            # `gpuOperator.extraValues` may set a key to null to drop a chart default (see `deep_merge`);
            # without this Pulumi strips nulls before Helm sees them.
            allow_null_values=True,
            # Helm's wait (skip_await stays false): the release is ready when the operator, NFD master and
            # gc Deployments and the NFD worker DaemonSet are. All of them fit on the system nodes, so this
            # holds on a cluster without any GPU node yet; the operands the operator deploys later are not
            # part of the release.
            timeout=config.timeout_seconds,
            # The chart's pre-upgrade hook Job (`operator.upgradeCRD`) applies the new ClusterPolicy and
            # NVIDIADriver CRDs; Helm always waits for hooks, this also waits for any plain Job the chart
            # may add. Hooks must stay enabled (no disable_webhooks): skipping that Job leaves old CRDs,
            # whose schema silently prunes new ClusterPolicy fields.
            wait_for_jobs=True,
            # The rendered ClusterPolicy carries the new chart's fields, but Helm validates manifests
            # against the cluster's OpenAPI before the pre-upgrade hook has updated the CRD; NVIDIA's
            # documented upgrade path with the hook is `--disable-openapi-validation`. Our values are checked
            # against the vendored chart's keys by the tests instead.
            disable_openapi_validation=True,
            # A failed upgrade deletes the resources it newly created, leaving the previous revision's
            # objects as they were.
            cleanup_on_fail=True,
            # Not atomic: on a failed upgrade atomic rolls the release back, but the CRDs the hook already
            # upgraded stay upgraded (Helm never rolls CRDs back), so the rollback runs an older operator
            # against newer CRDs, and it deletes the failed revision's pods whose events explain the
            # failure. Pulumi reports the failure either way, and the next `pulumi up` upgrades again.
            atomic=False,
            opts=pulumi.ResourceOptions(
                parent=self,
                provider=cluster.provider,
                # The operator controller and NFD master are pinned to the system node group: without its
                # nodes Helm's wait can only time out. Nothing of Karpenter's is needed: GPU nodes it
                # launches before the operator is ready just wait for the device plugin (Karpenter does not
                # consolidate a node before nvidia.com/gpu is allocatable), so the two install in parallel.
                depends_on=[cluster.system_node_group, *([monitoring_crds] if monitoring_crds else [])],
                # A namespace change replaces the release. The old one owns cluster-scoped objects
                # (ClusterRoles and their bindings, the ClusterPolicy, NodeFeatureRules), which Helm lets no
                # other release install: the old release must be gone first (facts.replacement.CHARTS).
                delete_before_replace=True,
            ),
        )

        self.release = release
        self.namespace = namespace.metadata.name
        self.release_name = release.name
        self.release_status = release.status.apply(lambda status: status.status)
        self.chart_version = release.version
        self.register_outputs(
            {
                "namespace": self.namespace,
                "releaseName": self.release_name,
                "releaseStatus": self.release_status,
                "chartVersion": self.chart_version,
            }
        )
