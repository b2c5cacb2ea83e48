"""What runs on the system nodes, read again from the vendored charts and the guard's manifest, and the
check that it fits (config.stack `_system_node_problems`)."""

from pathlib import Path
from typing import Any

import pytest

from components import yaml_text
from components.cluster import SYSTEM_NODE_SELECTOR
from components.gpu_node_guard.manifests import manifests
from config.gpu_node_guard import GpuNodeGuardConfig
from config.node_pools import NodePoolConfig
from config.stack import parse_stack_config
from facts.quantity import parse_quantity
from facts.system_pods import (
    GPU_NODE_GUARD,
    GPU_OPERATOR_CONTROLLER,
    GUARD_REPLICAS,
    NFD_GC,
    NFD_MASTER,
    NFD_WORKER,
    PodRequests,
)
from tests.helpers import config

FIXTURES = Path(__file__).parent / "fixtures" / "gpu-operator-v26.7.0"


def requests(resources: dict[str, Any]) -> tuple[Any, Any]:
    return parse_quantity(resources["requests"]["cpu"]), parse_quantity(resources["requests"]["memory"])


@pytest.mark.parametrize(
    ("pod", "values", "path"),
    [
        (GPU_OPERATOR_CONTROLLER, "chart-values.yaml", ("operator",)),
        (NFD_MASTER, "node-feature-discovery/chart-values.yaml", ("master",)),
        (NFD_GC, "node-feature-discovery/chart-values.yaml", ("gc",)),
        (NFD_WORKER, "node-feature-discovery/chart-values.yaml", ("worker",)),
    ],
)
def test_chart_pods_request_what_their_chart_values_say(
    pod: PodRequests, values: str, path: tuple[str]
) -> None:
    document = yaml_text.load((FIXTURES / values).read_text())
    for key in path:
        document = document[key]
    assert (pod.cpu, pod.memory) == requests(document["resources"])


def test_the_guard_requests_what_its_deployment_asks_for() -> None:
    pool = NodePoolConfig.model_validate(
        {"name": "p", "instanceFamilies": ["g6"], "limits": {"nvidia.com/gpu": "4"}}
    )
    (deployment,) = [
        m
        for m in manifests(
            [pool],
            GpuNodeGuardConfig(),
            system_node_selector=SYSTEM_NODE_SELECTOR,
            karpenter_namespace="kube-system",
            scraped=False,
        )
        if m["kind"] == "Deployment"
    ]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert (GPU_NODE_GUARD.cpu, GPU_NODE_GUARD.memory) == requests(container["resources"])
    assert deployment["spec"]["replicas"] == GUARD_REPLICAS


def test_the_committed_system_nodes_hold_what_must_run_there() -> None:
    """m7i.large (dev) and m7i.xlarge (prod) with the default controller and Prometheus requests."""
    parse_stack_config(config(observability={"backend": "inCluster"}))


def test_a_system_instance_type_outside_the_reference_is_not_checked() -> None:
    nodes = {"instanceTypes": ["i3.metal"]}  # an EC2 type the Karpenter 1.14.1 reference does not list
    parse_stack_config(config(cluster={"name": "ml", "systemNodes": nodes}))
