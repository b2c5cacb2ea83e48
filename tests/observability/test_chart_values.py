"""kube-prometheus-stack values against the vendored chart and its Grafana and kube-state-metrics charts."""

from typing import Any

import pytest

from components import yaml_text
from components.cluster import SYSTEM_NODE_SELECTOR
from components.observability.chart_values import (
    AMP_DATASOURCE_TYPE,
    EKS_HIDDEN_RULE_GROUPS,
    EKS_HIDDEN_SCRAPERS,
    stack_values,
)
from components.observability.dashboards import DASHBOARD_LABEL, DASHBOARD_LABEL_VALUE, DATASOURCE_UID
from components.storage import DEFAULT_STORAGE_CLASS
from config.observability import ObservabilityConfig
from facts.prometheus_stack import CRD_CHART_VERSION, OPERATOR_VERSION, STACK_CHART_VERSION
from tests.gpu_operator.helpers import FREE_KEY_MAPS, merged, unknown_keys
from tests.observability.helpers import FIXTURES, chart_values, grafana_values, kube_state_metrics_values

FREE_MAPS = FREE_KEY_MAPS | {
    "externalLabels",
    "resources",
    "storageSpec",
    "persistentVolumeClaimRetentionPolicy",
    "disabled",
}
"""Values that are maps of arbitrary keys (labels, Kubernetes resource lists, a StorageSpec, the default
rules' alerts turned off by name) or Kubernetes objects the chart passes through (a StatefulSet's claim
retention policy: `{}` in the chart, with its two keys in a comment, checked in
`test_claim_retention_keys_are_the_charts`)."""
SUBCHARTS = {"grafana": grafana_values, "kube-state-metrics": kube_state_metrics_values}
ENDPOINT = "https://aps-workspaces.us-west-2.amazonaws.com/workspaces/ws-0123/"


def chart_key_problems(values: dict[str, Any]) -> list[str]:
    """Keys the chart does not have; under a subchart, keys neither the subchart nor the parent's overrides of
    it have (the parent's section also holds keys only the parent's templates read)."""
    parent = {k: v for k, v in values.items() if k not in SUBCHARTS}
    problems = list(unknown_keys(parent, chart_values(), free_maps=FREE_MAPS))
    for name, defaults in SUBCHARTS.items():
        if name in values:
            effective = merged(defaults(), chart_values()[name])
            problems += [f"{name}.{p}" for p in unknown_keys(values[name], effective, free_maps=FREE_MAPS)]
    return problems


def _values(backend: str, **prometheus: Any) -> dict[str, Any]:
    config = ObservabilityConfig.model_validate({"backend": backend, "prometheus": prometheus})
    return stack_values(
        config,
        cluster_name="ml-prod",
        region="us-west-2",
        system_node_selector=SYSTEM_NODE_SELECTOR,
        storage_class=None if backend == "managed" else DEFAULT_STORAGE_CLASS,
        workspace_endpoint=ENDPOINT if backend == "managed" else None,
    )


@pytest.mark.parametrize("backend", ["inCluster", "managed"])
def test_every_key_exists_in_the_chart(backend: str) -> None:
    assert chart_key_problems(_values(backend)) == []


def test_misspelt_keys_are_caught() -> None:
    assert chart_key_problems({"prometheus": {"prometheusSpec": {"retension": "1d"}}}) == [
        "prometheus.prometheusSpec.retension"
    ]
    assert chart_key_problems({"grafana": {"sidecar": {"dashboard": {}}}}) == ["grafana.sidecar.dashboard"]
    assert chart_key_problems({"kube-state-metrics": {"metricLabelsAllowList": []}}) == [
        "kube-state-metrics.metricLabelsAllowList"
    ]
    assert chart_key_problems({"grafana": {"plugins": [], "defaultDashboardsEnabled": False}}) == []


def test_pinned_charts_are_the_vendored_ones() -> None:

    stack = yaml_text.load((FIXTURES / "Chart.yaml").read_text())
    crds = yaml_text.load((FIXTURES / "prometheus-operator-crds" / "Chart.yaml").read_text())
    assert stack["version"] == STACK_CHART_VERSION
    assert crds["version"] == CRD_CHART_VERSION
    # The CRD chart carries the CRDs of the operator the stack runs.
    assert stack["appVersion"] == crds["appVersion"] == OPERATOR_VERSION
    # Both subcharts whose values are vendored are the versions the stack depends on.
    dependencies = {d["name"]: d["version"] for d in stack["dependencies"]}
    for name in SUBCHARTS:
        sub = yaml_text.load((FIXTURES / name / "Chart.yaml").read_text())
        assert dependencies[name] == sub["version"], name


def test_claim_retention_keys_are_the_charts() -> None:
    """The chart documents the policy's keys only in a comment under `prometheusSpec` (Kubernetes'
    StatefulSetPersistentVolumeClaimRetentionPolicy: `whenDeleted`, `whenScaled`)."""
    text = (FIXTURES / "chart-values.yaml").read_text()
    comment = text.split("  prometheusSpec:\n", 1)[1].split("persistentVolumeClaimRetentionPolicy: {}\n", 1)[
        1
    ]
    documented = comment.split("\n\n", 1)[0]
    policy = _values("inCluster")["prometheus"]["prometheusSpec"]["persistentVolumeClaimRetentionPolicy"]
    assert all(f"#  {key}: Retain" in documented for key in policy)


def test_chart_defaults_these_values_change() -> None:
    """Defaults that make the values necessary (a chart bump that changes one shows here)."""
    chart = chart_values()
    assert chart["crds"]["enabled"] is True
    assert chart["prometheus"]["prometheusSpec"]["serviceMonitorSelectorNilUsesHelmValues"] is True
    assert chart["prometheus"]["prometheusSpec"]["ruleSelectorNilUsesHelmValues"] is True
    assert chart["grafana"]["sidecar"]["dashboards"]["label"] == DASHBOARD_LABEL
    assert all(chart[s]["enabled"] is True for s in EKS_HIDDEN_SCRAPERS)
    assert all(chart["defaultRules"]["rules"][g] is True for g in EKS_HIDDEN_RULE_GROUPS)
    assert kube_state_metrics_values()["metricLabelsAllowlist"] == []


def test_in_cluster_prometheus_keeps_its_data_on_the_encrypted_gp3_volume() -> None:
    values = _values("inCluster", storageGib=200, retention="30d")
    spec = values["prometheus"]["prometheusSpec"]
    claim = spec["storageSpec"]["volumeClaimTemplate"]["spec"]
    assert claim == {
        "storageClassName": DEFAULT_STORAGE_CLASS,
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "200Gi"}},
    }
    # The claim goes with the StatefulSet: a claim left behind keeps an EBS volume billing after destroy.
    assert spec["persistentVolumeClaimRetentionPolicy"] == {"whenDeleted": "Delete", "whenScaled": "Retain"}
    assert spec["retention"] == "30d"
    assert spec["retentionSize"] == "180GiB"  # the oldest blocks go before the volume fills
    assert values["prometheus"]["agentMode"] is False
    assert "remoteWrite" not in spec
    assert values["alertmanager"]["enabled"] is True
    assert values["defaultRules"]["create"] is True
    assert values["grafana"]["defaultDashboardsEnabled"] is True
    assert "additionalDataSources" not in values["grafana"]


def test_managed_prometheus_is_an_agent_writing_to_the_workspace_with_sigv4() -> None:
    values = _values("managed")
    spec = values["prometheus"]["prometheusSpec"]
    assert values["prometheus"]["agentMode"] is True
    assert spec["remoteWrite"] == [
        {"url": f"{ENDPOINT}api/v1/remote_write", "sigv4": {"region": "us-west-2"}}
    ]
    assert "storageSpec" not in spec
    assert "retention" not in spec
    # Nothing in the cluster evaluates rules: the workspace does.
    assert values["alertmanager"] == {"enabled": False}
    assert values["defaultRules"]["create"] is False
    grafana = values["grafana"]
    (datasource,) = grafana["additionalDataSources"]
    assert datasource["type"] == AMP_DATASOURCE_TYPE
    assert datasource["uid"] == DATASOURCE_UID
    assert datasource["url"] == ENDPOINT
    assert datasource["jsonData"]["sigV4Auth"] is True
    assert datasource["jsonData"]["sigV4AuthType"] == "default"  # the Pod Identity role's credentials
    assert grafana["sidecar"]["datasources"]["defaultDatasourceEnabled"] is False
    assert grafana["plugins"] == ["grafana-amazonprometheus-datasource@3.3.5"]


@pytest.mark.parametrize("backend", ["inCluster", "managed"])
def test_everything_runs_on_the_system_nodes_and_sees_every_service_monitor(backend: str) -> None:
    values = _values(backend)
    spec = values["prometheus"]["prometheusSpec"]
    for placed in (
        spec,
        values["grafana"],
        values["kube-state-metrics"],
        values["prometheusOperator"],
        values["prometheusOperator"]["admissionWebhooks"]["patch"],
    ):
        assert placed["nodeSelector"] == SYSTEM_NODE_SELECTOR
    for selector in ("serviceMonitor", "podMonitor", "rule", "probe", "scrapeConfig"):
        assert spec[f"{selector}SelectorNilUsesHelmValues"] is False
    assert values["crds"] == {"enabled": False}
    assert spec["externalLabels"] == {"cluster": "ml-prod"}
    assert values["kube-state-metrics"]["metricLabelsAllowlist"] == [
        "nodes=[karpenter.sh/nodepool,karpenter.sh/capacity-type,node.kubernetes.io/instance-type]"
    ]
    sidecar = values["grafana"]["sidecar"]["dashboards"]
    assert (sidecar["label"], sidecar["labelValue"]) == (DASHBOARD_LABEL, DASHBOARD_LABEL_VALUE)
    assert all(values[s] == {"enabled": False} for s in EKS_HIDDEN_SCRAPERS)


def test_refused_inputs() -> None:
    config = ObservabilityConfig.model_validate({"backend": "managed"})
    kwargs: dict[str, Any] = {
        "cluster_name": "c",
        "region": "us-west-2",
        "system_node_selector": SYSTEM_NODE_SELECTOR,
    }
    with pytest.raises(ValueError, match="workspace_endpoint is required"):
        stack_values(config, **kwargs)
    with pytest.raises(ValueError, match="must end with '/'"):
        stack_values(config, **kwargs, workspace_endpoint=ENDPOINT.rstrip("/"))
    with pytest.raises(ValueError, match="backend is none"):
        stack_values(ObservabilityConfig(), **kwargs)
    with pytest.raises(ValueError, match="system_node_selector is empty"):
        stack_values(
            config, cluster_name="c", region="r", system_node_selector={}, workspace_endpoint=ENDPOINT
        )
    in_cluster = ObservabilityConfig.model_validate({"backend": "inCluster"})
    with pytest.raises(ValueError, match="storage_class is required for the inCluster backend"):
        stack_values(in_cluster, **kwargs)
    with pytest.raises(ValueError, match="storage_class is required for the inCluster backend and only"):
        stack_values(config, **kwargs, storage_class=DEFAULT_STORAGE_CLASS, workspace_endpoint=ENDPOINT)
