"""What the charts run on the system nodes when the program sets no resources for it: the requests of their
pods (pure data). The program's own settings (the Karpenter controller's `karpenter.controllerResources`,
Prometheus's `observability.prometheus`) come from the config instead.

Sources: the GPU Operator v26.7.0 chart's `values.yaml` (NVIDIA/gpu-operator @ 10ee5b3638b8,
`operator.resources`) and its NFD 0.19.0 subchart's (`master`, `gc`, `worker` `.resources`), vendored in
`tests/fixtures/gpu-operator-v26.7.0/`, which `tests/test_system_nodes.py` reads them from again. The
kube-prometheus-stack 88.5.3 chart sets no requests for Grafana, the operator, Alertmanager or
kube-state-metrics (`resources: {}`), nor does Karpenter's 1.14.1 chart for its controller.

The EKS add-ons on every node (vpc-cni, kube-proxy, the Pod Identity agent, the EBS CSI node plugin) and
CoreDNS are not listed: their requests are not vendored here, so the checks built on these numbers count
less than runs on a system node, and refuse only what cannot fit even so.
"""

from dataclasses import dataclass
from decimal import Decimal
from typing import Final

from facts.quantity import parse_quantity


@dataclass(frozen=True)
class PodRequests:
    """What one pod of a workload asks the scheduler for."""

    workload: str
    cpu: Decimal
    """Cores."""
    memory: Decimal
    """Bytes."""

    @classmethod
    def of(cls, workload: str, cpu: str, memory: str) -> "PodRequests":
        return cls(workload, parse_quantity(cpu), parse_quantity(memory))


GPU_OPERATOR_CONTROLLER: Final = PodRequests.of("the GPU Operator controller", "200m", "100Mi")
NFD_MASTER: Final = PodRequests.of("the NFD master", "100m", "128Mi")
NFD_GC: Final = PodRequests.of("the NFD garbage collector", "10m", "128Mi")
SYSTEM_DEPLOYMENTS: Final = (GPU_OPERATOR_CONTROLLER, NFD_MASTER, NFD_GC)
"""One replica each, pinned to the system nodes (`components.gpu_operator_values`)."""

NFD_WORKER: Final = PodRequests.of("the NFD worker", "5m", "64Mi")
"""A DaemonSet pod on every node, the system nodes too."""

GPU_NODE_GUARD: Final = PodRequests.of("the GPU node guard", "10m", "64Mi")
"""The program's own controller (`components/gpu_node_guard/manifests.py`), with any GPU pool: per replica
(`GUARD_REPLICAS`)."""
GUARD_REPLICAS: Final = 2
"""Leader and standby (`components.gpu_node_guard.manifests.REPLICAS` is this)."""
