"""The `gpu-eks:observability` section: where GPU and Karpenter metrics go, and the stack that shows them.

Example (Pulumi.<stack>.yaml)::

    gpu-eks:observability:
      backend: managed          # or inCluster; none (the default) installs nothing
"""

import re
from typing import Any, Literal

from pydantic import Field, field_validator

from config.base import ConfigModel
from config.types import KubernetesName, Quantity, WholeNumber

Backend = Literal["none", "inCluster", "managed"]
"""`none`: no monitoring stack. `inCluster`: Prometheus (on an encrypted gp3 volume), Alertmanager and Grafana
in the cluster. `managed`: an Amazon Managed Service for Prometheus workspace that evaluates the alert rules,
fed by an in-cluster Prometheus agent; Grafana in the cluster reads the workspace."""

_RETENTION = re.compile(r"[1-9][0-9]*(h|d|w)")


class PrometheusSettings(ConfigModel):
    """The in-cluster Prometheus (a full server for `inCluster`, an agent for `managed`)."""

    retention: str = "15d"
    """How long `inCluster` keeps samples (`12h`, `15d`, `8w`); data beyond 90% of the volume is dropped
    earlier. Not for `managed` (the workspace keeps 150 days)."""
    storage_gib: WholeNumber = Field(default=100, ge=10, le=16384)
    """Size of the `inCluster` Prometheus volume (encrypted gp3); not for `managed` (the agent keeps only
    its write-ahead log)."""
    cpu: Quantity = "500m"
    """CPU request of the Prometheus container."""
    memory: Quantity = "4Gi"
    """Memory request and limit of the Prometheus container (DCGM exports ~25 series per GPU)."""

    @field_validator("retention")
    @classmethod
    def _retention(cls, value: str) -> str:
        if not _RETENTION.fullmatch(value):
            raise ValueError("must be a Prometheus retention such as 12h, 15d or 8w")
        return value


class ObservabilityConfig(ConfigModel):
    """`gpu-eks:observability`: metrics, dashboards and alerts for the GPU pools and Karpenter."""

    backend: Backend = "none"
    """`none` (nothing installed), `inCluster` (Prometheus, Alertmanager and Grafana on the system nodes,
    Prometheus data on the encrypted gp3 StorageClass `gp3-encrypted`) or `managed` (an Amazon Managed
    Service for Prometheus workspace with the alert rules, written to by an in-cluster Prometheus agent
    through EKS Pod Identity, and Grafana in the cluster reading it). With a backend, the DCGM exporter's and
    Karpenter's ServiceMonitors are turned on, and the GPU node guard gets one."""
    namespace: KubernetesName = "monitoring"
    """Namespace of the monitoring stack and the dashboards."""
    prometheus: PrometheusSettings = PrometheusSettings()
    """The in-cluster Prometheus."""
    timeout_seconds: WholeNumber = Field(default=900, ge=120, le=3600)
    """How long Pulumi waits for the monitoring release to become ready."""

    @field_validator("backend", mode="before")
    @classmethod
    def _yaml_off(cls, value: Any) -> Any:
        if value is False:
            raise ValueError(
                "must be 'none', 'inCluster' or 'managed' "
                "(an unquoted off in YAML reads as false: write none)"
            )
        return value

    def problems(self) -> list[tuple[tuple[str, ...], str, Any]]:
        """Mistakes that span keys of this section, as (path below `observability`, message, value)."""
        if self.backend != "managed":
            return []
        return [
            (
                ("prometheus", PrometheusSettings.model_fields[name].alias or name),
                "applies to the inCluster backend only: with backend managed the workspace keeps the samples "
                "(150 days) and the in-cluster agent only its write-ahead log; remove it",
                getattr(self.prometheus, name),
            )
            for name in ("retention", "storage_gib")
            if name in self.prometheus.model_fields_set
        ]

    @property
    def enabled(self) -> bool:
        """Whether a backend collects metrics (and ServiceMonitors may be created)."""
        return self.backend != "none"
