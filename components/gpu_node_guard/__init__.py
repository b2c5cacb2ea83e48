"""GpuNodeGuard: the controller that gates MIG nodes until their GPUs are partitioned and deletes GPU
NodeClaims that never initialize (`guard.py`), deployed on the system nodes (leader and standby).

The objects come from `manifests.manifests` (pure, tested); this component registers them with the cluster's
provider, after the Karpenter CRDs (the guard lists NodeClaims), so `pulumi destroy` removes it before them.
With an observability backend its ServiceMonitor comes after the Prometheus Operator CRDs.
"""

import functools
from collections.abc import Sequence
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.cluster import SYSTEM_NODE_SELECTOR
from components.custom_resources import api_version_aliases
from components.gpu_node_guard.manifests import logical_name, manifests
from config.gpu_node_guard import GpuNodeGuardConfig
from config.node_pools import NodePoolConfig

_RESOURCES: dict[str, Any] = {
    "Namespace": k8s.core.v1.Namespace,
    "ServiceAccount": k8s.core.v1.ServiceAccount,
    "ClusterRole": k8s.rbac.v1.ClusterRole,
    "ClusterRoleBinding": k8s.rbac.v1.ClusterRoleBinding,
    "Role": k8s.rbac.v1.Role,
    "RoleBinding": k8s.rbac.v1.RoleBinding,
    "ConfigMap": k8s.core.v1.ConfigMap,
    "NetworkPolicy": k8s.networking.v1.NetworkPolicy,
    "Deployment": k8s.apps.v1.Deployment,
    "PodDisruptionBudget": k8s.policy.v1.PodDisruptionBudget,
    "Service": k8s.core.v1.Service,
    "ServiceMonitor": functools.partial(
        k8s.apiextensions.CustomResource, api_version="monitoring.coreos.com/v1", kind="ServiceMonitor"
    ),
}
_CUSTOM = frozenset({"ServiceMonitor"})
"""Kinds declared as custom resources (the SDK aliases the built-in kinds' other API versions itself)."""
_ARGUMENTS = {
    "immutable": "immutable",
    "metadata": "metadata",
    "spec": "spec",
    "rules": "rules",
    "data": "data",
    "subjects": "subjects",
    "roleRef": "role_ref",
}


class GpuNodeGuard(pulumi.ComponentResource):
    """Namespace, RBAC, ConfigMap, NetworkPolicy, Deployment, PodDisruptionBudget, metrics Service and
    ServiceMonitor of the GPU node guard."""

    deployment: k8s.apps.v1.Deployment

    def __init__(
        self,
        name: str,
        *,
        config: GpuNodeGuardConfig,
        pools: Sequence[NodePoolConfig],
        provider: k8s.Provider,
        karpenter_namespace: str,
        depends_on: Sequence[pulumi.Resource],
        monitoring_crds: pulumi.Resource | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """`karpenter_namespace`: where Karpenter's leader Lease is (the guard reads it).
        `depends_on`: the Karpenter CRD release (NodeClaims must be an API before the guard lists them).
        `monitoring_crds`: the release of the Prometheus Operator CRDs when an observability backend scrapes
        the cluster; the guard's ServiceMonitor is then declared after it."""
        super().__init__("gpu-eks:gpu_node_guard:GpuNodeGuard", name, None, opts)
        created: list[pulumi.Resource] = []
        namespace: pulumi.Output[str] | None = None
        for manifest in manifests(
            pools,
            config,
            system_node_selector=SYSTEM_NODE_SELECTOR,
            karpenter_namespace=karpenter_namespace,
            scraped=monitoring_crds is not None,
        ):
            kind = manifest["kind"]
            arguments = {_ARGUMENTS[k]: v for k, v in manifest.items() if k in _ARGUMENTS}
            if namespace is not None and manifest["metadata"].get("namespace") == config.namespace:
                # Through the Namespace's Output: created after it, deleted before it.
                arguments["metadata"] = {**manifest["metadata"], "namespace": namespace}
            needs = list(depends_on)
            if kind == "Deployment":
                needs += created  # starts after everything it uses (RBAC, ConfigMap) and the CRDs exist
            if kind == "ServiceMonitor" and monitoring_crds is not None:
                needs.append(monitoring_crds)
            resource = _RESOURCES[kind](
                f"{name}-{logical_name(manifest)}",
                **arguments,
                opts=pulumi.ResourceOptions(
                    parent=self,
                    provider=provider,
                    depends_on=needs,
                    # Named objects: a replacement (new namespace, selector, roleRef) must delete the old one
                    # first. The ConfigMap is named after its content, so it is created before the old goes.
                    delete_before_replace=kind != "ConfigMap",
                    aliases=api_version_aliases(manifest["apiVersion"], kind) if kind in _CUSTOM else None,
                ),
            )
            if kind == "Namespace":
                namespace = resource.metadata.name
            created.append(resource)
            if kind == "Deployment":
                self.deployment = resource
        self.register_outputs({"namespace": namespace})
