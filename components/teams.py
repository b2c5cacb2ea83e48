"""Teams: a namespace per ML team (Pod Security level, optional GPU quota) and EKS access entries that let
the team's IAM roles work in their namespaces only.

Access entries are one per principal (EKS refuses a second), so a role in several teams has one entry and
one policy association per access level, scoped to all those teams' namespaces. A team's namespace outlives
the team: removing the team from the config revokes its access and leaves its workloads and volume claims
running (`retain_on_delete`); deleting them is a deliberate `kubectl delete namespace`.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components import MANAGED_BY
from components.cluster import TEAMS_COMPONENT, Cluster, team_entry_name
from config.teams import TeamConfig
from facts.eks import NAMESPACE_ACCESS_POLICIES, cluster_access_policy_arn
from facts.kubernetes import GPU_QUOTA_RESOURCE, POD_SECURITY_ENFORCE
from facts.partitions import Partition

GPU_QUOTA_NAME = "gpu"
"""The ResourceQuota's name in each team namespace (`kubectl describe quota gpu -n <team>`)."""


@dataclass(frozen=True)
class TeamGrant:
    """One access policy of one role, on the namespaces of every team that gives it that access."""

    principal_arn: str
    access: str
    """`view`, `edit` or `admin` (`facts.eks.NAMESPACE_ACCESS_POLICIES`)."""
    namespaces: tuple[str, ...]
    """Sorted, so adding a team elsewhere in the list never reorders them."""

    @property
    def name(self) -> str:
        """Its policy association's resource name: the role and the access level, never a list position."""
        return f"{team_entry_name(self.principal_arn)}-{self.access}"


def team_roles(teams: Sequence[TeamConfig]) -> list[str]:
    """Every role of the teams once, in the order first listed: one access entry each."""
    return list(dict.fromkeys(arn for team in teams for arn in team.role_arns))


def team_grants(teams: Sequence[TeamConfig]) -> list[TeamGrant]:
    """One grant per (role, access level), its scope every namespace of the role's teams at that level."""
    namespaces: dict[tuple[str, str], set[str]] = {}
    for team in teams:
        for arn in team.role_arns:
            namespaces.setdefault((arn, team.access), set()).add(team.name)
    return [
        TeamGrant(arn, access, tuple(sorted(names)))
        for (arn, access), names in sorted(namespaces.items(), key=lambda item: item[0])
    ]


def team_namespace(team: TeamConfig) -> dict[str, Any]:
    """The team's namespace, enforcing its Pod Security level."""
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": team.name,
            "labels": {**MANAGED_BY, POD_SECURITY_ENFORCE: team.pod_security},
        },
    }


def team_quota(team: TeamConfig) -> dict[str, Any] | None:
    """The cap on `nvidia.com/gpu` the namespace's pods request together, if the team has one."""
    if team.gpu_quota is None:
        return None
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": GPU_QUOTA_NAME, "namespace": team.name, "labels": {**MANAGED_BY}},
        "spec": {"hard": {GPU_QUOTA_RESOURCE: str(team.gpu_quota)}},
    }


def team_contract(team: TeamConfig, namespace: pulumi.Input[str]) -> dict[str, Any]:
    """The team's entry of the `teams` stack output (`contract.Team`)."""
    return {
        "name": team.name,
        "namespace": namespace,
        "roleArns": list(team.role_arns),
        "access": team.access,
        "gpuQuota": team.gpu_quota,
        "podSecurity": team.pod_security,
    }


class Teams(pulumi.ComponentResource):
    """The teams' namespaces, GPU quotas and namespace-scoped access entries."""

    namespaces: dict[str, pulumi.Output[str]]
    """Team name -> its namespace, once created."""

    def __init__(
        self,
        *,
        teams: Sequence[TeamConfig],
        cluster: Cluster,
        partition: Partition,
        tags: dict[str, str],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """Always named `TEAMS_COMPONENT`: the admin entries' aliases name the entries it holds."""
        kind, name = TEAMS_COMPONENT
        super().__init__(kind, name, None, opts)
        on_cluster = pulumi.ResourceOptions(parent=self, provider=cluster.provider)
        self.namespaces = {}
        for team in teams:
            namespace = k8s.core.v1.Namespace(
                f"{name}-{team.name}",
                metadata=team_namespace(team)["metadata"],
                # Removing a team must not delete its workloads and volume claims with it.
                opts=pulumi.ResourceOptions.merge(on_cluster, pulumi.ResourceOptions(retain_on_delete=True)),
            )
            self.namespaces[team.name] = namespace.metadata["name"]
            quota = team_quota(team)
            if quota is not None:
                metadata: Any = {**quota["metadata"], "namespace": namespace.metadata["name"]}
                k8s.core.v1.ResourceQuota(
                    f"{name}-{team.name}-{GPU_QUOTA_NAME}",
                    # Through the Namespace's Output: created after it.
                    metadata=metadata,
                    spec=quota["spec"],
                    opts=on_cluster,
                )
        entries = {
            arn: aws.eks.AccessEntry(
                team_entry_name(arn),
                cluster_name=cluster.name,
                principal_arn=arn,
                type="STANDARD",
                tags=tags,
                # The entry the role had as an admin, if it had one: the same entry, kept.
                opts=pulumi.ResourceOptions(parent=self, aliases=[cluster.admin_entry_alias(arn)]),
            )
            for arn in team_roles(teams)
        }
        for grant in team_grants(teams):
            aws.eks.AccessPolicyAssociation(
                grant.name,
                cluster_name=cluster.name,
                principal_arn=entries[grant.principal_arn].principal_arn,
                policy_arn=cluster_access_policy_arn(partition, NAMESPACE_ACCESS_POLICIES[grant.access]),
                access_scope=aws.eks.AccessPolicyAssociationAccessScopeArgs(
                    type="namespace", namespaces=list(grant.namespaces)
                ),
                # A new scope replaces the association (accessScope is force-new) with the same principal and
                # policy: created first, the old one's delete would then remove the new one's access.
                opts=pulumi.ResourceOptions(parent=self, delete_before_replace=True),
            )
        self.register_outputs({"namespaces": self.namespaces})
