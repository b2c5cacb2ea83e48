"""Metrics, dashboards and alerts for the GPU pools and Karpenter (pure builders and the component).

Modules:
- `components.observability.queries`: label names and PromQL building blocks shared by alerts and dashboards.
- `components.observability.alerts`: the alert rule groups (Prometheus rule-file shape), for a PrometheusRule
  (`inCluster`) or an Amazon Managed Service for Prometheus rule group namespace (`managed`).
- `components.observability.dashboards`: the Grafana dashboards (JSON), one per GPU pool and an overview.
- `components.observability.chart_values`: Helm values of `kube-prometheus-stack` for either backend.
- `components.observability.component`: the `Observability` component (`gpu-eks:observability:Observability`);
  import it from there, the pure modules stay importable without the provider SDKs.
"""
