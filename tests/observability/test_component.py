"""What the stacks declare for observability: prod's managed backend, an inCluster stack, dev without any."""

import json
from typing import Any

import contract
from components import yaml_text
from components.observability.chart_values import GRAFANA_SERVICE_ACCOUNT, PROMETHEUS_SERVICE_ACCOUNT
from components.observability.dashboards import DASHBOARD_LABEL, queries
from synth.runner import ProgramRun
from tests.helpers import closure, run
from tests.observability.helpers import (
    IN_CLUSTER_POOL,
    in_cluster_stack,
    sample_alert_groups,
    selected_metrics,
)

RELEASE = "kubernetes:helm.sh/v3:Release"
CONFIGMAP = "kubernetes:core/v1:ConfigMap"
RULE = "kubernetes:monitoring.coreos.com/v1:PrometheusRule"
FIVE_ALERTS = {
    "GpuXidError",
    "GpuPoolAtLimitWithPendingPods",
    "GpuNodeNotInitialized",
    "KarpenterInterruptionMessagesDelayed",
    "KarpenterControllerDown",
}


def _release(stack: ProgramRun, name: str) -> Any:
    return stack.one(RELEASE, name)


def _rules(groups: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {rule["alert"]: rule for group in groups for rule in group["rules"] if "alert" in rule}


def test_prod_declares_the_managed_backend_both_scrapers_dashboards_and_alerts(prod: ProgramRun) -> None:
    workspace = prod.one("aws:amp/workspace:Workspace")
    assert workspace.inputs["alias"] == "ml-prod"
    assert workspace.protect  # prod protects data-bearing resources
    namespace = prod.one("aws:amp/ruleGroupNamespace:RuleGroupNamespace")
    assert namespace.inputs["workspaceId"] == workspace.id
    groups = yaml_text.load(namespace.inputs["data"])["groups"]
    assert set(_rules(groups)) >= FIVE_ALERTS
    # The program derives each pool's rules from its config (the thresholds `pools.alerting` computes).
    assert groups == sample_alert_groups(gpu_pools=("gpu-inference", "gpu-training"))
    per_pool = {
        (rule["alert"], rule["labels"].get("nodepool"))
        for group in groups
        for rule in group["rules"]
        if "alert" in rule
    }
    for pool in ("gpu-inference", "gpu-training"):
        assert ("GpuPoolAtLimitWithPendingPods", pool) in per_pool
        assert ("GpuNodeNotInitialized", pool) in per_pool
    # Both ServiceMonitors are on.
    assert _release(prod, "karpenter-controller").inputs["values"]["serviceMonitor"] == {"enabled": True}
    assert (
        _release(prod, "gpu-operator").inputs["values"]["dcgmExporter"]["serviceMonitor"]["enabled"] is True
    )
    # One dashboard per GPU pool and the overview, labelled for Grafana's sidecar.
    dashboards = {
        c.inputs["metadata"]["name"]: c
        for c in prod.of_type(CONFIGMAP)
        if DASHBOARD_LABEL in c.inputs["metadata"].get("labels", {})
    }
    assert set(dashboards) == {"gpu-eks-overview", "gpu-eks-pool-gpu-inference", "gpu-eks-pool-gpu-training"}
    for name, config_map in dashboards.items():
        assert config_map.inputs["metadata"]["labels"] == {DASHBOARD_LABEL: "1"}
        assert config_map.inputs["metadata"]["namespace"] == "monitoring"
        dashboard = json.loads(config_map.inputs["data"][f"{name}.json"])
        assert queries(dashboard)
        assert all(panel["description"] for panel in dashboard["panels"])
        assert {p["datasource"]["type"] for p in dashboard["panels"]} == {
            "grafana-amazonprometheus-datasource"
        }


def test_everything_that_creates_service_monitors_waits_for_the_crds(any_stack: ProgramRun) -> None:
    crds = [r for r in any_stack.of_type(RELEASE) if r.name == "observability-crds"]
    dependents = ["karpenter-controller", "gpu-operator", "observability"]
    if not crds:  # no backend: no CRDs and nothing waits for them
        assert not any(r.name.startswith("observability") for r in any_stack.resources)
        assert _release(any_stack, "karpenter-controller").inputs["values"]["serviceMonitor"] == {
            "enabled": False
        }
        return
    (crd,) = crds
    assert crd.inputs["chart"] == "prometheus-operator-crds"
    assert crd.inputs["namespace"] == "kube-system"  # never replaced by a namespace change
    for name in dependents:
        assert crd.urn in _release(any_stack, name).dependencies, name
    stack = _release(any_stack, "observability")
    assert stack.inputs["skipCrds"] is True
    assert stack.inputs["values"]["crds"] == {"enabled": False}


def test_managed_identities_can_only_write_and_read_this_workspace(prod: ProgramRun) -> None:
    workspace = prod.one("aws:amp/workspace:Workspace")
    arn = workspace.outputs["arn"]
    # Action names of the Service Authorization Reference for Amazon Managed Service for Prometheus: the
    # four of AmazonPrometheusQueryAccess, and the rules and alerts API Grafana's alert views call.
    expected = {
        PROMETHEUS_SERVICE_ACCOUNT: ["aps:RemoteWrite"],
        GRAFANA_SERVICE_ACCOUNT: [
            "aps:QueryMetrics",
            "aps:GetLabels",
            "aps:GetSeries",
            "aps:GetMetricMetadata",
            "aps:ListRules",
            "aps:ListAlerts",
        ],
    }
    associations = prod.of_type("aws:eks/podIdentityAssociation:PodIdentityAssociation")
    found = {}
    for association in associations:
        if association.inputs["namespace"] != "monitoring":
            continue
        role = next(
            r for r in prod.of_type("aws:iam/role:Role") if r.outputs["arn"] == association.inputs["roleArn"]
        )
        trust = json.loads(role.inputs["assumeRolePolicy"])
        assert trust["Statement"][0]["Principal"] == {"Service": "pods.eks.amazonaws.com"}
        (policy,) = [
            p
            for p in prod.of_type("aws:iam/rolePolicy:RolePolicy")
            if p.inputs["role"] == role.outputs["name"]
        ]
        (statement,) = json.loads(policy.inputs["policy"])["Statement"]
        assert statement["Resource"] == arn
        found[association.inputs["serviceAccount"]] = statement["Action"]
        # The release waits for the association: a pod started before it gets no credentials.
        assert association.urn in _release(prod, "observability").dependencies
    assert found == expected


def test_in_cluster_backend_rules_and_storage() -> None:
    stack = in_cluster_stack()
    assert stack.of_type("aws:amp/workspace:Workspace") == []
    rule = stack.one(RULE)
    assert rule.inputs["metadata"] == {"name": "gpu-eks", "namespace": "monitoring"}
    crd = _release(stack, "observability-crds")
    assert crd.urn in rule.dependencies
    assert set(_rules(rule.inputs["spec"]["groups"])) >= FIVE_ALERTS
    release = _release(stack, "observability")
    spec = release.inputs["values"]["prometheus"]["prometheusSpec"]
    storage_class = stack.one("kubernetes:storage.k8s.io/v1:StorageClass")
    assert (
        spec["storageSpec"]["volumeClaimTemplate"]["spec"]["storageClassName"]
        == (storage_class.inputs["metadata"]["name"])
    )
    # Created after the StorageClass and its EBS CSI driver; on destroy the release, whose StatefulSet owns
    # the claim, goes first, while the driver can still delete the volume.
    assert storage_class.urn in release.dependencies
    ebs_csi = next(
        a for a in stack.of_type("aws:eks/addon:Addon") if a.inputs["addonName"] == "aws-ebs-csi-driver"
    )
    assert ebs_csi.urn in closure(stack, release.urn)


def test_monitoring_output_tells_how_to_reach_the_dashboards(prod: ProgramRun, dev: ProgramRun) -> None:
    managed = contract.StackOutputs.model_validate(prod.outputs).monitoring
    assert managed is not None
    assert managed.backend == "managed"
    workspace = prod.one("aws:amp/workspace:Workspace")
    assert managed.amp_workspace_id == workspace.id
    assert managed.amp_query_endpoint == f"{workspace.outputs['prometheusEndpoint']}api/v1/query"
    assert managed.grafana_service == "monitoring/kube-prometheus-stack-grafana:80"
    assert (
        managed.grafana_port_forward
        == "kubectl -n monitoring port-forward svc/kube-prometheus-stack-grafana 3000:80"
    )
    assert managed.prometheus_url is None
    local = contract.StackOutputs.model_validate(in_cluster_stack().outputs).monitoring
    assert local is not None
    assert local.backend == "inCluster"
    assert local.prometheus_url == "http://kube-prometheus-stack-prometheus.monitoring.svc:9090"
    assert local.amp_query_endpoint is None
    assert contract.StackOutputs.model_validate(dev.outputs).monitoring is None


def test_a_mig_pool_dashboard_reads_graphics_engine_activity() -> None:
    """The program tells the dashboards which pools set `mig`: DCGM reports no GPU utilisation for MIG
    devices."""
    mig_pool = {
        "name": "gpu-mig",
        "instanceFamilies": ["p4d"],
        "limits": {"nvidia.com/gpu": "56"},
        "mig": {"profile": "all-1g.5gb"},
    }
    stack = run(nodePools=[IN_CLUSTER_POOL, mig_pool], observability={"backend": "inCluster"})
    utilisation = {}
    for pool in ("gpu-a", "gpu-mig"):
        name = f"gpu-eks-pool-{pool}"
        config_map = stack.one(CONFIGMAP, f"observability-{name}")
        dashboard = json.loads(config_map.inputs["data"][f"{name}.json"])
        (panel,) = [p for p in dashboard["panels"] if p["title"] == "GPU utilisation"]
        (target,) = panel["targets"]
        utilisation[pool] = selected_metrics(target["expr"]) - {"kube_node_labels"}
    assert utilisation == {"gpu-a": {"DCGM_FI_DEV_GPU_UTIL"}, "gpu-mig": {"DCGM_FI_PROF_GR_ENGINE_ACTIVE"}}
