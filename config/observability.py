"""The `gpu-eks:observability` section: where GPU and Karpenter metrics go, and the stack that shows them.

Example (Pulumi.<stack>.yaml)::

    gpu-eks:observability:
      backend: managed          # or inCluster; none (the default) installs nothing
      alerting:
        snsTopic: create        # managed: a KMS-encrypted topic of the stack's, or an existing topic's ARN
"""

import re
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from config.base import ConfigModel
from config.types import KubernetesName, Quantity, WholeNumber, described

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


SnsTopicArn = Annotated[
    str,
    described(
        r"arn:aws(-cn|-us-gov)?:sns:[a-z0-9-]+:\d{12}:[A-Za-z0-9_-]{1,256}",
        "create, or an SNS topic ARN such as arn:aws:sns:us-west-2:111122223333:gpu-alerts",
    ),
]
EmailAddress = Annotated[str, described(r"[^@\s]+@[^@\s]+\.[^@\s]+", "an e-mail address")]
HttpsUrl = Annotated[str, described(r"https://[^\s]+", "an https:// URL")]
Statement = Annotated[str, described(r"(?s).*\S.*", "a sentence naming who receives the alerts, not empty")]
ReceiverKind = Literal["pagerduty", "opsgenie", "slack"]
"""Alertmanager receivers whose credential is read from a file (the Secret's key), in every Alertmanager
version the stack runs (v0.34 of the chart) and checks with (Debian's amtool 0.25): PagerDuty Events API v2
(`routing_key_file`: the integration key), Opsgenie (`api_key_file`: an API integration key), Slack
(`api_url_file`: an incoming-webhook URL)."""


class AlertingSettings(ConfigModel):
    """Where firing alerts go: `severity=critical` and the rest on separate routes, the Watchdog to a
    heartbeat service. No credential belongs here: inCluster receivers read theirs from a Kubernetes
    Secret."""

    sns_topic: Literal["create"] | SnsTopicArn | None = None
    """managed: `create` (an SNS topic of the stack's, `<cluster>-alerts`, encrypted with a customer-managed
    KMS key that only Amazon Managed Service for Prometheus and the account may use, with a policy that lets
    only this workspace publish), or the ARN of an existing Standard topic in the same account and region
    (its owner adds the publish statement for the workspace: docs/observability.md). Subscribe your pager to
    it (PagerDuty's or Opsgenie's SNS integration, AWS Chatbot, e-mail); messages carry a `severity`
    attribute to filter on."""
    email_subscriptions: tuple[EmailAddress, ...] = ()
    """managed, with `snsTopic: create`: addresses subscribed to the topic (each confirms by e-mail once)."""
    subscribed_by: Statement | None = None
    """managed: who receives the topic's messages through a subscription made outside this stack, for a
    reviewer to check, e.g. `PagerDuty service ml-platform via its SNS integration`. A production stack needs
    it, or emailSubscriptions, so that its alerts are known to reach a person."""
    receiver_secret: KubernetesName | None = None
    """inCluster: a Secret in the monitoring namespace, created outside the stack (kubectl, External
    Secrets), with the key `critical` and, when `default` is set, `default`: the credential of that
    receiver kind. Alertmanager mounts it and reads the keys at every notification."""
    critical: ReceiverKind | None = None
    """inCluster: the receiver of `severity=critical` alerts: pagerduty, opsgenie or slack."""
    default: ReceiverKind | None = None
    """inCluster: the receiver of every other alert (warnings); unset: the same kind as `critical`, with the
    Secret's `critical` key."""
    heartbeat_url: HttpsUrl | None = None
    """The URL of a heartbeat check (healthchecks.io, Dead Man's Snitch, Better Stack, ...) that the
    always-firing Watchdog alert reaches every 5 minutes, and that pages when it stops; required on a
    production stack. inCluster: an Alertmanager
    webhook; managed: an HTTPS subscription of a second topic of the stack's (SNS sends it one
    SubscriptionConfirmation first: open its SubscribeURL once). It only reports "alive"; if yours embeds a
    token you keep secret, set it with `pulumi config set --secret --path`, which keeps it out of the stack
    file in plain text."""


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
    alerting: AlertingSettings | None = None
    """Where alerts go. Unset: nowhere (they show in Grafana and the rules API only), which production stacks
    refuse."""

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
        problems = self._alerting_problems()
        if self.backend != "managed":
            return problems
        return problems + [
            (
                ("prometheus", PrometheusSettings.model_fields[name].alias or name),
                "applies to the inCluster backend only: with backend managed the workspace keeps the samples "
                "(150 days) and the in-cluster agent only its write-ahead log; remove it",
                getattr(self.prometheus, name),
            )
            for name in ("retention", "storage_gib")
            if name in self.prometheus.model_fields_set
        ]

    def _alerting_problems(self) -> list[tuple[tuple[str, ...], str, Any]]:
        alerting = self.alerting
        if alerting is None:
            return []
        if self.backend == "none":
            return [(("alerting",), "needs a backend (inCluster or managed) that evaluates the rules", "set")]
        path: tuple[str, ...] = ("alerting",)
        only = {
            "inCluster": ("receiver_secret", "critical", "default"),
            "managed": ("sns_topic", "email_subscriptions", "subscribed_by"),
        }
        problems: list[tuple[tuple[str, ...], str, Any]] = []
        for backend, names in only.items():
            if backend == self.backend:
                continue
            for name in names:
                if name in alerting.model_fields_set:
                    key = AlertingSettings.model_fields[name].alias or name
                    problems.append(
                        (
                            (*path, key),
                            f"applies to the {backend} backend only (backend is {self.backend}); remove it",
                            getattr(alerting, name),
                        )
                    )
        if self.backend == "managed" and alerting.sns_topic is None:
            problems.append(
                (
                    (*path, "snsTopic"),
                    "is required with backend managed: create (a topic of the stack's) or the ARN of an "
                    "existing SNS topic",
                    None,
                )
            )
        if alerting.email_subscriptions and alerting.sns_topic not in (None, "create"):
            problems.append(
                (
                    (*path, "emailSubscriptions"),
                    "subscribes to the stack's own topic only (snsTopic: create); subscribe to an existing "
                    "topic where it is managed",
                    list(alerting.email_subscriptions),
                )
            )
        if self.backend == "inCluster":
            for name in ("receiver_secret", "critical"):
                if getattr(alerting, name) is None:
                    key = AlertingSettings.model_fields[name].alias or name
                    problems.append(
                        ((*path, key), "is required with backend inCluster: " + _IN_CLUSTER_NEEDS[name], None)
                    )
        return problems

    @property
    def enabled(self) -> bool:
        """Whether a backend collects metrics (and ServiceMonitors may be created)."""
        return self.backend != "none"


_IN_CLUSTER_NEEDS = {
    "receiver_secret": "the name of a Secret in the monitoring namespace holding the receivers' credentials",
    "critical": "the receiver kind of critical alerts (pagerduty, opsgenie or slack)",
}
