"""Pins of the monitoring charts and what they deploy (pure; no Pulumi).

Source: github.com/prometheus-community/helm-charts, tag `kube-prometheus-stack-88.5.3` (commit
`ea930baeebeba39f56d6b44e351f23b2a072a600`) and tag `prometheus-operator-crds-31.0.1` (commit
`4529d7bb4b4be3b2aa8ef0b4d40152d394213a61`); the Grafana subchart from github.com/grafana-community/
helm-charts tag `grafana-12.11.1` (commit `864f7794683680e5100a38670e103c4fa6e37e29`). Their values files are
vendored in `tests/fixtures/kube-prometheus-stack-88.5.3/`, where the tests check every key the program sets.

The two charts move together: `prometheus-operator-crds` must carry the CRDs of the operator version that
`kube-prometheus-stack` runs (both `appVersion: v0.93.1`); a bump replaces both pins and the fixtures.
"""

from typing import Final

CHART_REPOSITORY: Final = "https://prometheus-community.github.io/helm-charts"
"""Helm repository of both charts."""

STACK_CHART: Final = "kube-prometheus-stack"
STACK_CHART_VERSION: Final = "88.5.3"
"""Prometheus Operator v0.93.1, Prometheus v3.14.0, Grafana 13.2.0 (subchart 12.11.1), kube-state-metrics
v2.20.0 (subchart 8.4.0, client-go v0.36), node-exporter (subchart 4.56.1); `kubeVersion: >=1.25.0-0`."""

CRD_CHART: Final = "prometheus-operator-crds"
CRD_CHART_VERSION: Final = "31.0.1"
"""The Prometheus Operator v0.93.1 CRDs (ServiceMonitor, PodMonitor, PrometheusRule, Prometheus,
PrometheusAgent, Alertmanager, ...) as templates, so that `helm upgrade` upgrades them."""

OPERATOR_VERSION: Final = "v0.93.1"
"""`appVersion` of both charts: the operator whose CRDs the CRD chart carries."""

AMP_DATASOURCE_PLUGIN: Final = "grafana-amazonprometheus-datasource"
AMP_DATASOURCE_PLUGIN_VERSION: Final = "3.3.5"
"""Grafana's Amazon Managed Service for Prometheus data source (grafana.com/grafana/plugins/
grafana-amazonprometheus-datasource). Grafana 13 deprecates SigV4 on the core Prometheus data source in favour
of it; Grafana installs it at start-up (`GF_PLUGINS_PREINSTALL_SYNC`), so Grafana needs egress to
grafana.com."""

VOLUME_NOT_RESIZED: Final = (
    "the operator recreates the Prometheus StatefulSet with the new claim template (orphaning its pod), but "
    "Kubernetes does not expand a StatefulSet's existing PersistentVolumeClaims (prometheus-operator "
    'Documentation/platform/storage.md, "Resizing volumes", and pkg/prometheus/server/operator.go '
    "ForceUpdateStatefulSet, tag v0.93.0 @ f8fafd475f3d, the section unchanged on main since)"
)
"""Why raising the Prometheus storage request leaves its volume at the old size until its claim is patched."""

SCRAPE_INTERVAL_SECONDS: Final = 30
"""How often Prometheus (server or agent) scrapes a ServiceMonitor's targets when neither the endpoint nor
`prometheusSpec.scrapeInterval` sets an interval, as this stack leaves them (Karpenter's chart:
`endpointConfig: {}`): the operator's default, 30s (the chart's values.yaml,
`prometheus.prometheusSpec.scrapeInterval`: "Defaults to 30s")."""

AMP_RULE_EVALUATION_SECONDS: Final = 60
"""How often Amazon Managed Service for Prometheus evaluates a rule group that sets no `interval`, as this
stack's groups do ("The default evaluation interval of rule groups is 60 seconds if the interval property is
not specified", AMP user guide, "Create a rules file"). Each group on its own schedule, so two groups' rules
may see the same change up to this long apart."""
