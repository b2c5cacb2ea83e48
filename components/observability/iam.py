"""IAM documents of the managed backend (pure): what the in-cluster Prometheus agent and Grafana may do.

The actions are those of the AWS managed policies `AmazonPrometheusRemoteWriteAccess` (`aps:RemoteWrite`) and
`AmazonPrometheusQueryAccess` (`aps:QueryMetrics`, `aps:GetLabels`, `aps:GetSeries`, `aps:GetMetricMetadata`),
plus `aps:ListRules` and `aps:ListAlerts` for Grafana, but scoped to this stack's workspace: the managed
policies grant them on every workspace of the account.
"""

from typing import Final

from components.iam_document import PolicyDocument, policy_document

REMOTE_WRITE_ACTIONS: Final = ("aps:RemoteWrite",)
QUERY_ACTIONS: Final = (
    "aps:QueryMetrics",
    "aps:GetLabels",
    "aps:GetSeries",
    "aps:GetMetricMetadata",
    # The workspace's Prometheus rules and alerts API (/api/v1/rules, /api/v1/alerts), which Grafana's
    # alert views of the data source call; not in AmazonPrometheusQueryAccess.
    "aps:ListRules",
    "aps:ListAlerts",
)


def _workspace_policy(sid: str, actions: tuple[str, ...], workspace_arn: str) -> PolicyDocument:
    if ":aps:" not in workspace_arn or ":workspace/" not in workspace_arn:
        raise ValueError(
            f"workspace_arn must be an Amazon Managed Service for Prometheus workspace ARN: {workspace_arn!r}"
        )
    return policy_document(
        {"Sid": sid, "Effect": "Allow", "Action": list(actions), "Resource": workspace_arn}
    )


def remote_write_policy(workspace_arn: str) -> PolicyDocument:
    """Lets the Prometheus agent write samples to the workspace, and nothing else."""
    return _workspace_policy("RemoteWriteToWorkspace", REMOTE_WRITE_ACTIONS, workspace_arn)


def query_policy(workspace_arn: str) -> PolicyDocument:
    """Lets Grafana query the workspace and read its rules and firing alerts, and nothing else."""
    return _workspace_policy("QueryWorkspace", QUERY_ACTIONS, workspace_arn)
