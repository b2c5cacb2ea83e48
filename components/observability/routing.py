"""Where alerts go (pure): the Alertmanager configuration of either backend, and the policies of the managed
backend's SNS topics and their KMS key.

One route tree for both backends: the Watchdog to the heartbeat (every `HEARTBEAT_REPEAT`), `severity: none`
nowhere, `severity: critical` to the `critical` receiver and everything else to `default`; inhibitions where
one failure raises several alerts. `tests/observability/test_alerting.py` checks every rendered configuration
with `amtool check-config` and its routing with `amtool config routes test`.

- `inCluster`: the chart renders `alertmanager.config` into the Alertmanager's configuration Secret. Receivers
  read their credential from a file: the operator's Secret (`alerting.receiverSecret`), which the Alertmanager
  pod mounts at `/etc/alertmanager/secrets/<name>/` (`alertmanagerSpec.secrets`, Prometheus Operator v0.93.1).
- `managed`: an Amazon Managed Service for Prometheus alert manager definition (`alertmanager_config: |` and
  the configuration as a block, AWS AMP user guide "Create an alert manager configuration"), whose only
  receiver kind is SNS (`sns_configs` with `sigv4.region`; `api_url` and `http_config` are refused). The
  topic's policy lets only this workspace publish (`aws:SourceArn`, `aws:SourceAccount`, AMP user guide
  "Giving Amazon Managed Service for Prometheus permission to send alert messages to your Amazon SNS
  topic"), and its KMS key lets `aps.amazonaws.com` `kms:GenerateDataKey*` and `kms:Decrypt` (same page,
  for SSE topics) for messages of the stack's topics only (SNS's encryption context `aws:sns:topicArn`).
"""

import textwrap
from typing import Any, Final

from components import yaml_text
from components.iam_document import PolicyDocument, policy_document
from components.observability.alerts import AGENT_DOWN, GROUP_WAIT_SECONDS, WATCHDOG
from config.observability import AlertingSettings, ReceiverKind

SUBJECT: Final = "[{{ .Status | toUpper }}] {{ .CommonLabels.alertname }} ({{ .CommonLabels.cluster }})"
"""The title of a notification: firing or resolved, which alert, which cluster (SNS subjects are at most 100
characters; Alertmanager's default subject, every label, is longer)."""
SECRETS_MOUNT: Final = "/etc/alertmanager/secrets"
"""Where the Alertmanager pod mounts each Secret of `alertmanagerSpec.secrets` (`<mount>/<secret>/<key>`)."""
NULL_RECEIVER: Final = "null"
HEARTBEAT_REPEAT: Final = "5m"
"""How often the Watchdog reaches the heartbeat service: well within the shortest period such services take
(healthchecks.io and Dead Man's Snitch start at a few minutes), so one lost ping does not page."""
CRITICAL_REPEAT: Final = "4h"
DEFAULT_REPEAT: Final = "12h"
"""How often a still-firing alert is sent again: a page every few hours, a warning twice a day (AMP caps this
at five days)."""

INHIBIT_RULES: Final[tuple[dict[str, Any], ...]] = (
    # kube-prometheus-stack's own (its default `alertmanager.config`), for the chart's default rules that
    # inCluster installs: a critical alert hides the warning and info of the same name and namespace, and
    # InfoInhibitor hides info alerts that stand alone.
    {
        "source_matchers": ['severity="critical"'],
        "target_matchers": ['severity=~"warning|info"'],
        "equal": ["namespace", "alertname"],
    },
    {
        "source_matchers": ['severity="warning"'],
        "target_matchers": ['severity="info"'],
        "equal": ["namespace", "alertname"],
    },
    {
        "source_matchers": ['alertname="InfoInhibitor"'],
        "target_matchers": ['severity="info"'],
        "equal": ["namespace"],
    },
    {"target_matchers": ['alertname="InfoInhibitor"']},
    # A GPU that needs replacing also reports the cleanup XIDs of the jobs that died, sits idle, and may
    # take its exporter down: one page, for the node.
    {
        "source_matchers": ['alertname="GpuFatalXidError"'],
        "target_matchers": ['alertname=~"GpuXidError|GpuAllocatedButIdle|DcgmExporterDown"'],
        "equal": ["cluster", "node"],
    },
    # Without the agent nothing reaches the workspace: every target looks absent.
    {
        "source_matchers": [f'alertname="{AGENT_DOWN}"'],
        "target_matchers": ['alertname=~"KarpenterControllerDown|GpuNodeGuardDown"'],
        "equal": ["cluster"],
    },
    # Without Karpenter nothing launches: pods wait because of it.
    {
        "source_matchers": ['alertname="KarpenterControllerDown"'],
        "target_matchers": ['alertname="GpuPodsUnschedulable"'],
        "equal": ["cluster"],
    },
)


def route_tree(*, heartbeat: bool) -> dict[str, Any]:
    """The routes of both backends; `heartbeat`: a `heartbeat` receiver exists for the Watchdog."""
    return {
        "receiver": "default",
        "group_by": ["cluster", "alertname", "nodepool"],
        "group_wait": f"{GROUP_WAIT_SECONDS}s",
        "group_interval": "5m",
        "repeat_interval": DEFAULT_REPEAT,
        "routes": [
            {
                "matchers": [f'alertname="{WATCHDOG}"'],
                "receiver": "heartbeat" if heartbeat else NULL_RECEIVER,
                "group_wait": "0s",
                "group_interval": "1m",
                "repeat_interval": HEARTBEAT_REPEAT,
            },
            {"matchers": ['severity="none"'], "receiver": NULL_RECEIVER},
            {"matchers": ['severity="critical"'], "receiver": "critical", "repeat_interval": CRITICAL_REPEAT},
        ],
    }


def _secret_receiver(kind: ReceiverKind, path: str, *, critical: bool) -> dict[str, Any]:
    """One receiver whose credential is the file `path` (a key of the operator's Secret)."""
    if kind == "pagerduty":
        return {"pagerduty_configs": [{"routing_key_file": path, "send_resolved": True}]}
    if kind == "opsgenie":
        priority = "P1" if critical else "P3"
        return {"opsgenie_configs": [{"api_key_file": path, "priority": priority, "send_resolved": True}]}
    return {
        "slack_configs": [
            {
                "api_url_file": path,
                "send_resolved": True,
                "title": SUBJECT,
                "text": "{{ range .Alerts }}{{ .Annotations.summary }}\n{{ .Annotations.description }}\n"
                "Runbook: {{ .Annotations.runbook_url }}\n{{ end }}",
            }
        ]
    }


def in_cluster_alertmanager_config(alerting: AlertingSettings) -> dict[str, Any]:
    """The chart's `alertmanager.config` for `inCluster` (every key the chart's default sets, so Helm's merge
    leaves none of its defaults behind)."""
    if alerting.receiver_secret is None or alerting.critical is None:
        raise ValueError("inCluster alerting needs receiverSecret and critical")
    folder = f"{SECRETS_MOUNT}/{alerting.receiver_secret}"
    default_kind = alerting.default or alerting.critical
    default_key = "default" if alerting.default else "critical"
    receivers = [
        {"name": NULL_RECEIVER},
        {"name": "critical", **_secret_receiver(alerting.critical, f"{folder}/critical", critical=True)},
        {"name": "default", **_secret_receiver(default_kind, f"{folder}/{default_key}", critical=False)},
    ]
    if alerting.heartbeat_url:
        receivers.append(
            {
                "name": "heartbeat",
                "webhook_configs": [{"url": alerting.heartbeat_url, "send_resolved": False}],
            }
        )
    return {
        "global": {"resolve_timeout": "5m"},
        "inhibit_rules": [dict(rule) for rule in INHIBIT_RULES],
        "route": route_tree(heartbeat=alerting.heartbeat_url is not None),
        "receivers": receivers,
        "templates": [],
    }


def _sns(topic_arn: str, region: str, severity: str) -> dict[str, Any]:
    return {
        "sns_configs": [
            {
                "topic_arn": topic_arn,
                "sigv4": {"region": region},
                "subject": SUBJECT,
                "attributes": {"severity": severity},
            }
        ]
    }


def amp_alertmanager_config(
    *, topic_arn: str, heartbeat_topic_arn: str | None, region: str
) -> dict[str, Any]:
    """The alert manager configuration of the managed backend: both routes to the alert topic (messages
    carry a `severity` attribute subscribers can filter on), the Watchdog to the heartbeat topic."""
    receivers = [
        {"name": NULL_RECEIVER},
        {"name": "critical", **_sns(topic_arn, region, "critical")},
        {"name": "default", **_sns(topic_arn, region, "warning")},
    ]
    if heartbeat_topic_arn:
        receivers.append({"name": "heartbeat", **_sns(heartbeat_topic_arn, region, "none")})
    return {
        "inhibit_rules": [dict(rule) for rule in INHIBIT_RULES],
        "route": route_tree(heartbeat=heartbeat_topic_arn is not None),
        "receivers": receivers,
    }


def amp_definition(config: dict[str, Any]) -> str:
    """The alert manager definition AMP takes: the configuration as a block under `alertmanager_config`."""
    body = yaml_text.dump(config, sort_keys=False, width=1000)
    return "alertmanager_config: |\n" + textwrap.indent(body, "  ")


def topic_policy(topic_arn: str, workspace_arn: str) -> PolicyDocument:
    """Lets this workspace's alert manager, and nothing else, publish to the topic."""
    account = workspace_arn.split(":")[4]
    return policy_document(
        {
            "Sid": "AllowThisWorkspaceToPublish",
            "Effect": "Allow",
            "Principal": {"Service": "aps.amazonaws.com"},
            "Action": ["sns:Publish", "sns:GetTopicAttributes"],
            "Resource": topic_arn,
            "Condition": {
                "ArnEquals": {"aws:SourceArn": workspace_arn},
                "StringEquals": {"aws:SourceAccount": account},
            },
        }
    )


def key_policy(*, partition: str, account: str, topic_arns: list[str]) -> PolicyDocument:
    """The topics' KMS key: the account administers it through IAM (the default key policy), and
    `aps.amazonaws.com` may encrypt messages for the stack's topics only."""
    return policy_document(
        {
            "Sid": "EnableIamPolicies",
            "Effect": "Allow",
            "Principal": {"AWS": f"arn:{partition}:iam::{account}:root"},
            "Action": "kms:*",
            "Resource": "*",
        },
        {
            "Sid": "AllowManagedPrometheusToPublishEncrypted",
            "Effect": "Allow",
            "Principal": {"Service": "aps.amazonaws.com"},
            "Action": ["kms:GenerateDataKey*", "kms:Decrypt"],
            "Resource": "*",
            "Condition": {"StringEquals": {"kms:EncryptionContext:aws:sns:topicArn": topic_arns}},
        },
    )
