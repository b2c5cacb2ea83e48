"""Helm values of `kube-prometheus-stack` 88.5 for the two backends (pure; no Pulumi).

Checked in the tests against the chart's vendored `values.yaml` and those of its Grafana and
kube-state-metrics subcharts (`tests/fixtures/kube-prometheus-stack-88.5.3/`).

Both backends: the chart's CRDs off (the `prometheus-operator-crds` release owns them), every workload on the
system node group, Prometheus selecting every ServiceMonitor, PodMonitor and PrometheusRule in the cluster
(not only the chart's own), kube-state-metrics exporting the node labels the dashboards group by, the EKS
control-plane scrapers off (EKS does not expose etcd, the scheduler or the controller manager, and kube-proxy
serves metrics on 127.0.0.1 only: their targets would be down forever), Grafana's dashboard sidecar on.

- `inCluster`: Prometheus as a server with its TSDB on a PersistentVolumeClaim of the encrypted gp3
  StorageClass (deleted with the release), retention by time and by size (90% of the volume, so it never
  fills), Alertmanager with the stack's routes and the operator's receivers (`alerting`), the chart's default
  rules (but its Watchdog: the stack has its own) and dashboards except those of the control-plane components
  EKS hides.
- `managed`: Prometheus in agent mode (scrapes and remote-writes to the workspace with SigV4, credentials from
  EKS Pod Identity; no TSDB, no rules), no Alertmanager and no default rules or dashboards (they rely on
  recording rules the agent does not evaluate), Grafana with the Amazon Managed Service for Prometheus data
  source plugin reading the workspace.
"""

from collections.abc import Mapping
from typing import Any, Final

from components.observability.dashboards import DASHBOARD_LABEL, DASHBOARD_LABEL_VALUE, DATASOURCE_UID
from components.observability.queries import NODE_LABELS_ALLOWLIST
from components.observability.routing import in_cluster_alertmanager_config
from config.observability import ObservabilityConfig
from facts.metrics import KUBE_STATE_METRICS_OPT_IN
from facts.prometheus_stack import AMP_DATASOURCE_PLUGIN, AMP_DATASOURCE_PLUGIN_VERSION

RELEASE_NAME: Final = "kube-prometheus-stack"
"""Helm release name; with it the chart names the Prometheus Service `kube-prometheus-stack-prometheus` and
the Grafana Service `kube-prometheus-stack-grafana` (the chart's fullname is the release name when it
contains the chart name)."""
PROMETHEUS_SERVICE: Final = f"{RELEASE_NAME}-prometheus"
PROMETHEUS_PORT: Final = 9090
GRAFANA_SERVICE: Final = f"{RELEASE_NAME}-grafana"
GRAFANA_PORT: Final = 80
"""The Grafana Service's port (the subchart's `service.port`); the container listens on 3000."""

PROMETHEUS_SERVICE_ACCOUNT: Final = "prometheus"
GRAFANA_SERVICE_ACCOUNT: Final = "grafana"
"""Service accounts named explicitly: the managed backend's Pod Identity associations bind to them."""

RETENTION_SIZE_SHARE: Final = 0.9
"""Share of the volume Prometheus may fill before it drops the oldest blocks (WAL and compaction need "
"room)."""

AMP_DATASOURCE_TYPE: Final = AMP_DATASOURCE_PLUGIN
PROMETHEUS_DATASOURCE_TYPE: Final = "prometheus"

EKS_HIDDEN_SCRAPERS: Final = ("kubeEtcd", "kubeControllerManager", "kubeScheduler", "kubeProxy")
"""Scrapers of control-plane components that EKS runs out of reach (kube-proxy binds its metrics to
127.0.0.1); with them on, their TargetDown alerts would fire forever."""
EKS_HIDDEN_RULE_GROUPS: Final = (
    "etcd",
    "kubeControllerManager",
    "kubeSchedulerAlerting",
    "kubeSchedulerRecording",
    "kubeProxy",
    "windows",
)
"""Default rule groups about those components (and Windows nodes, which the stack has none of)."""


def datasource_type(config: ObservabilityConfig) -> str:
    """The Grafana data source type the dashboards query for this backend."""
    return AMP_DATASOURCE_TYPE if config.backend == "managed" else PROMETHEUS_DATASOURCE_TYPE


def _resources(config: ObservabilityConfig) -> dict[str, Any]:
    prometheus = config.prometheus
    return {
        "requests": {"cpu": prometheus.cpu, "memory": prometheus.memory},
        "limits": {"memory": prometheus.memory},
    }


def _retention_size(storage_gib: int) -> str:
    return f"{int(storage_gib * RETENTION_SIZE_SHARE)}GiB"


def stack_values(
    config: ObservabilityConfig,
    *,
    cluster_name: str,
    region: str,
    system_node_selector: Mapping[str, str],
    storage_class: str | None = None,
    workspace_endpoint: str | None = None,
) -> dict[str, Any]:
    """Values of the `kube-prometheus-stack` release.

    `storage_class`: the StorageClass of the Prometheus volume (`components.storage.DEFAULT_STORAGE_CLASS`,
    encrypted gp3); required for `inCluster`, refused otherwise (an agent keeps no volume).
    `workspace_endpoint`: the managed backend's workspace endpoint (`https://aps-workspaces.<region>.
    amazonaws.com/workspaces/<id>/`); required for `managed`, refused otherwise.
    """
    if config.backend == "none":
        raise ValueError("observability backend is none: there is no monitoring stack to configure")
    managed = config.backend == "managed"
    if managed != (workspace_endpoint is not None):
        raise ValueError("workspace_endpoint is required for the managed backend and only for it")
    if managed == (storage_class is not None):
        raise ValueError("storage_class is required for the inCluster backend and only for it")
    if not system_node_selector:
        raise ValueError("system_node_selector is empty: the monitoring stack would run on GPU nodes")
    if workspace_endpoint is not None and not workspace_endpoint.endswith("/"):
        raise ValueError(f"workspace_endpoint must end with '/', got {workspace_endpoint!r}")
    on_system = {"nodeSelector": dict(system_node_selector)}

    prometheus_spec: dict[str, Any] = {
        **on_system,
        "serviceMonitorSelectorNilUsesHelmValues": False,
        "podMonitorSelectorNilUsesHelmValues": False,
        "ruleSelectorNilUsesHelmValues": False,
        "probeSelectorNilUsesHelmValues": False,
        "scrapeConfigSelectorNilUsesHelmValues": False,
        "externalLabels": {"cluster": cluster_name},
        "resources": _resources(config),
    }
    grafana: dict[str, Any] = {
        **on_system,
        "serviceAccount": {"create": True, "name": GRAFANA_SERVICE_ACCOUNT},
        "defaultDashboardsEnabled": not managed,
        "sidecar": {
            "dashboards": {
                "enabled": True,
                "label": DASHBOARD_LABEL,
                "labelValue": DASHBOARD_LABEL_VALUE,
                "searchNamespace": "ALL",
            },
        },
    }
    if managed:
        prometheus_spec["remoteWrite"] = [
            {"url": f"{workspace_endpoint}api/v1/remote_write", "sigv4": {"region": region}}
        ]
        grafana["plugins"] = [f"{AMP_DATASOURCE_PLUGIN}@{AMP_DATASOURCE_PLUGIN_VERSION}"]
        grafana["sidecar"]["datasources"] = {
            "defaultDatasourceEnabled": False,
            "alertmanager": {"enabled": False},
        }
        grafana["additionalDataSources"] = [
            {
                "name": "Amazon Managed Service for Prometheus",
                "uid": DATASOURCE_UID,
                "type": AMP_DATASOURCE_TYPE,
                "access": "proxy",
                "url": workspace_endpoint,
                "isDefault": True,
                "editable": False,
                # SDK default credentials: the Pod Identity role of Grafana's service account.
                "jsonData": {
                    "httpMethod": "POST",
                    "sigV4Auth": True,
                    "sigV4AuthType": "default",
                    "sigV4Region": region,
                },
            }
        ]
    else:
        prometheus_spec.update(
            retention=config.prometheus.retention,
            retentionSize=_retention_size(config.prometheus.storage_gib),
            storageSpec={
                "volumeClaimTemplate": {
                    "spec": {
                        "storageClassName": storage_class,
                        "accessModes": ["ReadWriteOnce"],
                        "resources": {"requests": {"storage": f"{config.prometheus.storage_gib}Gi"}},
                    }
                }
            },
            # The volume goes with the release (`pulumi destroy`, another backend): a StatefulSet keeps its
            # claims by default, and a claim left behind keeps its EBS volume billing after the cluster is
            # gone. The release is deleted before the StorageClass and the EBS CSI driver, which deletes the
            # volume. A scale-down keeps it.
            persistentVolumeClaimRetentionPolicy={"whenDeleted": "Delete", "whenScaled": "Retain"},
        )

    alertmanager: dict[str, Any] = {"enabled": False}
    if not managed:
        alertmanager = {"enabled": True, "alertmanagerSpec": dict(on_system)}
        if config.alerting is not None:
            # Receivers read their credentials from the operator's Secret, mounted into the pod.
            alertmanager["alertmanagerSpec"]["secrets"] = [config.alerting.receiver_secret]
            alertmanager["config"] = in_cluster_alertmanager_config(config.alerting)
    values: dict[str, Any] = {
        "crds": {"enabled": False},
        "defaultRules": {
            "create": not managed,
            "rules": dict.fromkeys(EKS_HIDDEN_RULE_GROUPS, False),
            # The stack's own Watchdog (components.observability.alerts) is the one routed to the heartbeat.
            "disabled": {"Watchdog": True},
        },
        **{scraper: {"enabled": False} for scraper in EKS_HIDDEN_SCRAPERS},
        "prometheusOperator": {**on_system, "admissionWebhooks": {"patch": on_system}},
        "kube-state-metrics": {
            **on_system,
            "metricLabelsAllowlist": [f"nodes=[{','.join(NODE_LABELS_ALLOWLIST)}]"],
            # The pods' nodeSelectors, by which the alerts tell which pool a waiting GPU pod is for.
            "extraArgs": [f"--metric-opt-in-list={','.join(sorted(KUBE_STATE_METRICS_OPT_IN))}"],
        },
        "prometheus": {
            "agentMode": managed,
            "serviceAccount": {"create": True, "name": PROMETHEUS_SERVICE_ACCOUNT},
            "prometheusSpec": prometheus_spec,
        },
        "alertmanager": alertmanager,
        "grafana": grafana,
    }
    return values
