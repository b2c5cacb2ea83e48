"""EfaDevicePlugin: the AWS EFA Kubernetes device plugin (chart `aws-efa-k8s-device-plugin`) in kube-system.

Karpenter launches EFA-capable instances for pools with `efa: true` and attaches their EFA interfaces when
pods request `vpc.amazonaws.com/efa`, but the kubelet only advertises that resource once the plugin runs on
the node. Without it, EFA pods stay Pending.

Where the plugin runs follows from the EFA pools (`efa_device_plugin_values`, pure and tested against the
chart's values.yaml); the component only wires the release to the cluster.

What the chart does with the keys set here (its `templates/daemonset.yaml`, as read at aws/eks-charts
`4646a039`: the template was not available at the pinned version's commit; see tests/fixtures/README.md):

* `tolerations` are appended after a fixed `CriticalAddonsOnly` toleration; the default list is empty, so
  nothing of the chart's is lost by setting it.
* `nodeSelector` (default `{}`) is applied as given.
* A required node affinity is always rendered: `supportedInstanceLabels.keys` (default
  `node.kubernetes.io/instance-type`) `In` `supportedInstanceLabels.values` (a list of EFA-capable types).
  The chart's list is older than Karpenter's instance-type data (it lacks e.g. p5.4xlarge, p6-b300 and g7e),
  so a pool could launch an EFA node the plugin would never run on. The list is replaced by exactly the
  types the EFA pools may launch, the same list their NodePools require.
"""

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.cluster import Cluster
from components.gpu_operator_values import tolerates
from components.node_pools import EFA_LABEL
from config.efa_device_plugin import CHART_NAME, CHART_REPOSITORY, EfaDevicePluginConfig
from config.kubernetes import Taint
from config.node_pools import NodePoolConfig

RELEASE_NAME = CHART_NAME
"""Helm release name. Fixed, and equal to the chart name so the chart names the DaemonSet just
`aws-efa-k8s-device-plugin`."""
NAMESPACE = "kube-system"
"""Where the chart's README installs it: a node-level system component (`system-node-critical`)."""

CHART_TOLERATIONS: tuple[Mapping[str, str], ...] = ()
"""Chart default of `tolerations` (the template adds `CriticalAddonsOnly` itself, outside the list)."""
EFA_NODE_SELECTOR = {EFA_LABEL: "true"}
"""The label every node of an `efa: true` pool carries (`components.node_pools.node_labels`)."""


class NoEfaPoolError(ValueError):
    """The plugin was asked for without any pool that has `efa: true`."""


def _all_taints(pools: Iterable[NodePoolConfig]) -> list[Taint]:
    unique = {
        (t.key, t.value, t.effect): t
        for p in pools
        for t in (*p.effective_taints, *p.effective_startup_taints)
    }
    # Taints without value (tolerated with Exists) first, so an Exists toleration covers the valued ones.
    return sorted(unique.values(), key=lambda t: (t.key, t.effect, t.value is not None, t.value or ""))


def efa_tolerations(pools: Iterable[NodePoolConfig]) -> list[dict[str, Any]]:
    """`tolerations`: the chart default, then one toleration per taint or startup taint of the EFA pools
    not already tolerated, sorted by key, effect and value."""
    result = [dict(t) for t in CHART_TOLERATIONS]
    for taint in _all_taints(pools):
        if not tolerates(result, taint):
            result.append(taint.toleration())
    return result


def efa_instance_types(pools: Iterable[NodePoolConfig]) -> list[str]:
    """Every instance type an EFA pool may launch, sorted: the union of the EFA pools'
    `node.kubernetes.io/instance-type In` requirements."""
    return sorted({it.name for p in pools if p.efa for it in p.candidates()})


def efa_device_plugin_values(pools: Sequence[NodePoolConfig]) -> dict[str, Any]:
    """Helm values of the `aws-efa-k8s-device-plugin` chart (v0.5) for the pools with `efa: true`.

    * `nodeSelector`: `gpu-eks.io/efa=true`, so the DaemonSet runs on EFA pool nodes only.
    * `tolerations`: every taint and startup taint of those pools (startup taints too, so the plugin can
      advertise `vpc.amazonaws.com/efa` while they are on the node, whatever removes them may wait for it).
    * `supportedInstanceLabels.values`: the instance types those pools may launch, replacing the chart's
      list (see the module docstring); `supportedInstanceLabels.keys` keeps the chart's default.

    Raises `NoEfaPoolError` when no pool has `efa: true`: the plugin has nothing to serve, and an empty
    instance-type list would render an affinity the API server refuses.
    """
    efa_pools = [p for p in pools if p.efa]
    if not efa_pools:
        raise NoEfaPoolError("no pool has efa: true; the EFA device plugin would have no node to run on")
    return {
        "nodeSelector": dict(EFA_NODE_SELECTOR),
        "tolerations": efa_tolerations(efa_pools),
        "supportedInstanceLabels": {"values": efa_instance_types(efa_pools)},
    }


class EfaDevicePlugin(pulumi.ComponentResource):
    """The AWS EFA Kubernetes device plugin DaemonSet (chart from the EKS charts repository) on EFA nodes."""

    release: k8s.helm.v3.Release
    """The Helm release."""
    release_status: pulumi.Output[str]
    """Helm's status of the release (`deployed` once the DaemonSet is ready)."""

    def __init__(
        self,
        name: str,
        *,
        config: EfaDevicePluginConfig,
        pools: Sequence[NodePoolConfig],
        cluster: Cluster,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpu-eks:efa_device_plugin:EfaDevicePlugin", name, None, opts)
        try:
            values = efa_device_plugin_values(pools)
        except NoEfaPoolError as exc:
            # __main__ declares the component only for a stack with an EFA pool; reaching this is a bug there.
            raise pulumi.RunError(f"EfaDevicePlugin {name!r}: {exc}") from exc

        self.release = k8s.helm.v3.Release(
            name,
            name=RELEASE_NAME,
            chart=CHART_NAME,
            version=config.version,
            repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=CHART_REPOSITORY),
            namespace=NAMESPACE,
            create_namespace=False,  # kube-system always exists
            values=values,
            # Helm's wait (skip_await stays false) is on the DaemonSet: ready at once while no EFA node
            # exists, and after a rollout over the EFA nodes there are.
            # A failed upgrade deletes the resources it newly created.
            cleanup_on_fail=True,
            opts=pulumi.ResourceOptions(
                parent=self,
                provider=cluster.provider,
                # None of its pods run on the system nodes; like the other charts it goes in once the
                # cluster has nodes and its add-ons, and on `pulumi destroy` before the node group.
                depends_on=[cluster.system_node_group],
            ),
        )
        self.release_status = self.release.status.apply(lambda status: status.status)
        self.register_outputs({"releaseStatus": self.release_status})
