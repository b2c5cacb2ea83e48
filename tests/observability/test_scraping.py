"""What Prometheus scrapes with a backend, and only then: the DCGM exporter, Karpenter and the GPU node
guard, each ServiceMonitor after the Prometheus Operator CRDs, and the objects the program writes itself
valid for the vendored v0.93.1 CRDs (tests/support/crd_check.py)."""

from typing import Any

import pytest

from components import yaml_text
from components.gpu_node_guard.manifests import METRICS_JOB
from components.observability.alerts import alert_groups
from components.observability.component import stack_targets
from config.stack import parse_stack_config
from synth.runner import ProgramRun, Registration
from tests.helpers import config as stack_config_of
from tests.observability.helpers import IN_CLUSTER_POOL, in_cluster_stack
from tests.support.crd_check import validate

SERVICE_MONITOR = "kubernetes:monitoring.coreos.com/v1:ServiceMonitor"
PROMETHEUS_RULE = "kubernetes:monitoring.coreos.com/v1:PrometheusRule"
RELEASE = "kubernetes:helm.sh/v3:Release"
PROMETHEUS_POD = {"app.kubernetes.io/name": "prometheus"}
"""Labels of a Prometheus pod of kube-prometheus-stack (any would do: the guard admits every scraper)."""


def _guard(stack: ProgramRun, kind: str) -> Registration:
    (found,) = [
        r
        for r in stack.resources
        if r.inputs.get("kind") == kind and r.parent and r.parent.endswith("GpuNodeGuard::gpu-node-guard")
    ]
    return found


def _matches(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    assert set(selector) <= {"matchLabels"}, "only matchLabels is modelled"
    return selector.get("matchLabels", {}).items() <= labels.items()


def admits(policy: dict[str, Any], namespace: str, pod: dict[str, str], port: int) -> bool:
    """Whether a NetworkPolicy lets a TCP connection from a pod (in `namespace`, with labels `pod`) in to
    `port` of the pods it selects (Kubernetes' NetworkPolicy semantics; `matchLabels` selectors only)."""
    spec = policy["spec"]
    if "Ingress" not in spec.get("policyTypes", ["Ingress"]):
        return True
    namespace_labels = {"kubernetes.io/metadata.name": namespace}
    for rule in spec.get("ingress", []):
        ports = rule.get("ports") or [{"port": port}]
        if not any(p["port"] == port and p.get("protocol", "TCP") == "TCP" for p in ports):
            continue
        peers = rule.get("from")
        if not peers:
            return True
        for peer in peers:
            in_namespace = (
                _matches(peer["namespaceSelector"], namespace_labels)
                if "namespaceSelector" in peer
                else namespace == policy["metadata"]["namespace"]
            )
            if in_namespace and _matches(peer.get("podSelector", {}), pod):
                return True
    return False


def test_admits_follows_network_policy_rules() -> None:
    policy = {
        "metadata": {"namespace": "guard"},
        "spec": {
            "policyTypes": ["Ingress"],
            "ingress": [
                {"from": [{"namespaceSelector": {"matchLabels": {"team": "x"}}}], "ports": [{"port": 1}]}
            ],
        },
    }
    assert not admits(policy, "monitoring", PROMETHEUS_POD, 1)
    assert not admits({**policy, "spec": {"policyTypes": ["Ingress"]}}, "monitoring", PROMETHEUS_POD, 1)
    assert admits({**policy, "spec": {"policyTypes": ["Ingress"], "ingress": [{}]}}, "monitoring", {}, 1)


def test_prod_scrapes_the_gpu_node_guard_after_the_crds(prod: ProgramRun) -> None:
    monitor = _guard(prod, "ServiceMonitor")
    service = _guard(prod, "Service").inputs
    deployment = _guard(prod, "Deployment").inputs
    crds = prod.one(RELEASE, "observability-crds")
    assert crds.urn in monitor.dependencies
    spec = monitor.inputs["spec"]
    assert monitor.inputs["metadata"]["namespace"] == service["metadata"]["namespace"]
    assert _matches(spec["selector"], service["metadata"]["labels"])
    assert service["metadata"]["name"] == METRICS_JOB  # the series' job: no jobLabel, so the Service's name
    (endpoint,) = spec["endpoints"]
    (port,) = [p for p in service["spec"]["ports"] if p["name"] == endpoint["port"]]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    (container_port,) = [p for p in container["ports"] if p["name"] == port["targetPort"]]
    # Prometheus (in the observability namespace) may connect to that port of the guard's pod.
    policy = _guard(prod, "NetworkPolicy").inputs
    assert _matches(policy["spec"]["podSelector"], deployment["spec"]["template"]["metadata"]["labels"])
    assert admits(policy, "monitoring", PROMETHEUS_POD, container_port["containerPort"])
    assert not admits(policy, "monitoring", PROMETHEUS_POD, 9090)
    assert validate(monitor.inputs) == []


def test_the_guard_alerts_select_what_its_service_monitor_scrapes(prod: ProgramRun) -> None:
    namespace = prod.one("aws:amp/ruleGroupNamespace:RuleGroupNamespace")
    groups = yaml_text.load(namespace.inputs["data"])["groups"]
    rules = {r["alert"]: r for g in groups for r in g["rules"] if "alert" in r}
    service = _guard(prod, "Service").inputs["metadata"]
    assert f'job="{service["name"]}", namespace="{service["namespace"]}"' in rules["GpuNodeGuardDown"]["expr"]
    assert 'nodepool=~"gpu-inference|gpu-training"' in rules["GpuNodeGuardReplacedNodeClaims"]["expr"]


@pytest.mark.parametrize("stack", ["dev", "in-cluster"])
def test_service_monitors_exist_exactly_with_a_backend(stack: str, dev: ProgramRun) -> None:
    result = dev if stack == "dev" else in_cluster_stack()
    monitors = result.of_type(SERVICE_MONITOR)
    scraped = {
        "karpenter-controller": result.one(RELEASE, "karpenter-controller").inputs["values"][
            "serviceMonitor"
        ],
        "gpu-operator": result.one(RELEASE, "gpu-operator").inputs["values"]["dcgmExporter"][
            "serviceMonitor"
        ],
    }
    if stack == "dev":
        assert monitors == []
        assert all(v == {"enabled": False} for v in scraped.values())
    else:
        assert [m.inputs["metadata"]["name"] for m in monitors] == ["gpu-node-guard"]
        assert all(v["enabled"] is True for v in scraped.values())


def test_the_objects_the_program_writes_are_valid_for_the_operator_crds() -> None:
    stack = in_cluster_stack()
    rule = stack.one(PROMETHEUS_RULE)
    assert validate(rule.inputs) == []
    assert validate(stack.one(SERVICE_MONITOR).inputs) == []
    # The check refuses what the API server (with strict field validation) would.
    bad = {**rule.inputs, "spec": {"groups": [{"name": "g", "rules": [{"alert": "A", "expression": "up"}]}]}}
    assert "spec.groups[0].rules[0].expression: unknown field (not in the CRD schema)" in validate(bad)
    # The rules are those the program derives from the stack's config, built as in the promtool tests.
    config = parse_stack_config(
        stack_config_of(nodePools=[IN_CLUSTER_POOL], observability={"backend": "inCluster"})
    )
    targets = stack_targets(config, gpu_node_guard_job=METRICS_JOB, karpenter_job="karpenter")
    assert not targets.managed
    assert rule.inputs["spec"]["groups"] == alert_groups(targets)
