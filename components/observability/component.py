"""Observability: the Prometheus Operator CRDs, kube-prometheus-stack, the alert rules and the dashboards, and
for the managed backend the Amazon Managed Service for Prometheus workspace and the identities that use it.

Every value, rule and dashboard comes from the pure modules of this package; this module declares resources.

Order: the CRD release (`prometheus-operator-crds`) comes first, and everything that creates a
ServiceMonitor or a PrometheusRule waits for it: this component's stack release and PrometheusRule, the
Karpenter controller release, the GPU Operator release and the GPU node guard's ServiceMonitor (`crd_release`,
passed to them by `__main__`). On `pulumi destroy` the CRDs therefore go last. With `inCluster` the stack
release also waits for the cluster's gp3-encrypted StorageClass (and through it the EBS CSI driver), so on
destroy it goes, with the Prometheus volume, before them.
"""

import json
from typing import Literal

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components import yaml_text
from components.cluster import SYSTEM_NODE_SELECTOR, Cluster
from components.custom_resources import api_version_aliases
from components.gpu_operator import POD_SECURITY_LABELS
from components.karpenter.iam import pod_identity_trust_policy
from components.observability.alerts import alert_groups
from components.observability.chart_values import (
    GRAFANA_PORT,
    GRAFANA_SERVICE,
    GRAFANA_SERVICE_ACCOUNT,
    PROMETHEUS_PORT,
    PROMETHEUS_SERVICE,
    PROMETHEUS_SERVICE_ACCOUNT,
    RELEASE_NAME,
    datasource_type,
    stack_values,
)
from components.observability.dashboards import (
    DASHBOARD_LABEL,
    DASHBOARD_LABEL_VALUE,
    dashboard_json,
    dashboards,
)
from components.observability.iam import query_policy, remote_write_policy
from components.observability.queries import Targets
from components.observability.routing import amp_alertmanager_config, amp_definition, key_policy, topic_policy
from components.storage import DEFAULT_STORAGE_CLASS
from config.observability import AlertingSettings, ObservabilityConfig
from config.stack import StackConfig
from contract import Monitoring
from facts.prometheus_stack import (
    CHART_REPOSITORY,
    CRD_CHART,
    CRD_CHART_VERSION,
    STACK_CHART,
    STACK_CHART_VERSION,
)
from pools.alerting import pool_alerting

CRD_RELEASE_NAMESPACE = "kube-system"
"""Where the CRD release's record lives, whatever `observability.namespace` says: CRDs are cluster-scoped,
and replacing this release would delete them, and with them every ServiceMonitor and PrometheusRule."""

RULE_NAMESPACE = "gpu-eks"
"""Name of the PrometheusRule (`inCluster`) and of the workspace's rule group namespace (`managed`)."""

CRD_RELEASE_TIMEOUT_SECONDS = 300
RELEASE_MAX_HISTORY = 10


def stack_targets(config: StackConfig, *, gpu_node_guard_job: str, karpenter_job: str) -> Targets:
    """What the alerts and dashboards of a stack select: its GPU pools (with the thresholds
    `pools.alerting` derives from each), and where Karpenter, the GPU Operator and the guard run, with the
    `job` their ServiceMonitors give their series."""
    return Targets(
        pools=tuple(
            pool_alerting(
                pool,
                config.gpu_operator,
                config.gpu_node_guard,
                overlays=config.karpenter.gpu_sharing_overlays,
                scraped=config.observability.enabled,
            )
            for pool in config.gpu_pools
        ),
        cluster=config.cluster.name,
        managed=config.observability.backend == "managed",
        monitoring_namespace=config.observability.namespace,
        gpu_operator_namespace=config.gpu_operator.namespace,
        gpu_node_guard_namespace=config.gpu_node_guard.namespace,
        gpu_node_guard_job=gpu_node_guard_job,
        karpenter_namespace=config.karpenter.namespace,
        karpenter_job=karpenter_job,
        interruption_handling=config.karpenter.interruption_handling,
    )


class Observability(pulumi.ComponentResource):
    """Metrics, dashboards and alerts of the GPU pools and Karpenter, for the `inCluster` or `managed` "
    "backend."""

    crd_release: k8s.helm.v3.Release
    """The Prometheus Operator CRDs: whatever creates a ServiceMonitor or PrometheusRule depends on it."""
    release: k8s.helm.v3.Release
    """The `kube-prometheus-stack` release."""
    backend: Literal["inCluster", "managed"]
    namespace: str
    grafana_service: str
    """`<namespace>/<service>:<port>` of Grafana."""
    prometheus_url: str | None
    """In-cluster URL of the Prometheus server (`inCluster`); None for `managed` (an agent serves no "
    "queries)."""
    workspace_id: pulumi.Output[str] | None
    query_endpoint: pulumi.Output[str] | None
    """The workspace's Prometheus-compatible query API (`.../api/v1/query`), for `managed`."""
    alert_topic_arn: pulumi.Output[str] | None
    """The SNS topic the workspace's alert manager publishes to (`managed` with `alerting`)."""

    def __init__(
        self,
        name: str,
        *,
        config: ObservabilityConfig,
        cluster: Cluster,
        cluster_name: str,
        region: str,
        targets: Targets,
        protect: bool,
        tags: dict[str, str],
        storage_class: k8s.storage.v1.StorageClass,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """`targets`: the GPU pools and the scraped components the alerts and dashboards select.
        `storage_class`: the cluster's encrypted gp3 StorageClass (`BlockStorage.storage_class`). With
        `inCluster` the Prometheus volume is of that class and the release waits for it (and its EBS CSI
        driver); on `pulumi destroy` the release, whose StatefulSet owns the volume claim, goes first.
        `protect`: protect the workspace, which holds the metrics."""
        super().__init__("gpu-eks:observability:Observability", name, None, opts)
        if not config.enabled:
            raise pulumi.RunError(
                f"Observability {name!r}: backend is none; declare the component only with one"
            )
        on_cluster = pulumi.ResourceOptions(parent=self, provider=cluster.provider)
        managed = config.backend == "managed"
        self.backend = "managed" if managed else "inCluster"
        self.namespace = config.namespace

        namespace = k8s.core.v1.Namespace(
            name,
            # node-exporter mounts host paths and uses the host network and PID namespace.
            metadata=k8s.meta.v1.ObjectMetaArgs(name=config.namespace, labels=POD_SECURITY_LABELS),
            opts=on_cluster,
        )
        self.crd_release = k8s.helm.v3.Release(
            f"{name}-crds",
            name=CRD_CHART,
            chart=CRD_CHART,
            version=CRD_CHART_VERSION,
            repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=CHART_REPOSITORY),
            namespace=CRD_RELEASE_NAMESPACE,
            atomic=True,
            cleanup_on_fail=True,
            timeout=CRD_RELEASE_TIMEOUT_SECONDS,
            max_history=RELEASE_MAX_HISTORY,
            opts=on_cluster,
        )

        groups = alert_groups(targets)
        release_needs: list[pulumi.Resource] = [self.crd_release, namespace, cluster.system_node_group]
        self.workspace_id = None
        self.query_endpoint = None
        self.alert_topic_arn = None
        workspace_endpoint: pulumi.Output[str] | None = None
        if managed:
            workspace = aws.amp.Workspace(
                name,
                alias=cluster_name,
                tags=tags,
                opts=pulumi.ResourceOptions(parent=self, protect=protect),
            )
            aws.amp.RuleGroupNamespace(
                name,
                name=RULE_NAMESPACE,
                workspace_id=workspace.id,
                data=yaml_text.dump({"groups": groups}, sort_keys=False),
                tags=tags,
                opts=pulumi.ResourceOptions(parent=self),
            )
            for service_account, role_suffix, policy in (
                (PROMETHEUS_SERVICE_ACCOUNT, "prometheus", remote_write_policy),
                (GRAFANA_SERVICE_ACCOUNT, "grafana", query_policy),
            ):
                release_needs += self._pod_identity(
                    f"{name}-{role_suffix}",
                    role_name=f"{cluster_name}-monitoring-{role_suffix}",
                    policy=workspace.arn.apply(lambda arn, p=policy: json.dumps(p(arn))),  # type: ignore[misc]
                    cluster=cluster,
                    namespace=config.namespace,
                    service_account=service_account,
                    tags=tags,
                )
            if config.alerting is not None:
                self.alert_topic_arn = self._amp_alerting(
                    name,
                    alerting=config.alerting,
                    workspace=workspace,
                    cluster_name=cluster_name,
                    region=region,
                    tags=tags,
                )
            workspace_endpoint = workspace.prometheus_endpoint
            self.workspace_id = workspace.id
            self.query_endpoint = workspace.prometheus_endpoint.apply(lambda url: f"{url}api/v1/query")
        else:
            k8s.apiextensions.CustomResource(
                f"{name}-rules",
                api_version="monitoring.coreos.com/v1",
                kind="PrometheusRule",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=RULE_NAMESPACE, namespace=namespace.metadata.name),
                spec={"groups": groups},
                opts=pulumi.ResourceOptions(
                    parent=self,
                    provider=cluster.provider,
                    depends_on=[self.crd_release],
                    delete_before_replace=True,
                    aliases=api_version_aliases("monitoring.coreos.com/v1", "PrometheusRule"),
                ),
            )
            release_needs.append(storage_class)

        for dashboard_name, dashboard in dashboards(targets, datasource_type=datasource_type(config)).items():
            k8s.core.v1.ConfigMap(
                f"{name}-{dashboard_name}",
                metadata=k8s.meta.v1.ObjectMetaArgs(
                    name=dashboard_name,
                    namespace=namespace.metadata.name,
                    labels={DASHBOARD_LABEL: DASHBOARD_LABEL_VALUE},
                ),
                data={f"{dashboard_name}.json": dashboard_json(dashboard)},
                opts=on_cluster,
            )

        values = pulumi.Output.from_input(workspace_endpoint).apply(
            lambda endpoint: stack_values(
                config,
                cluster_name=cluster_name,
                region=region,
                system_node_selector=SYSTEM_NODE_SELECTOR,
                storage_class=None if managed else DEFAULT_STORAGE_CLASS,
                workspace_endpoint=endpoint,
            )
        )
        self.release = k8s.helm.v3.Release(
            name,
            name=RELEASE_NAME,
            chart=STACK_CHART,
            version=STACK_CHART_VERSION,
            repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=CHART_REPOSITORY),
            namespace=namespace.metadata.name,
            create_namespace=False,
            skip_crds=True,  # the CRD release owns them
            values=values,
            atomic=True,
            cleanup_on_fail=True,
            timeout=config.timeout_seconds,
            max_history=RELEASE_MAX_HISTORY,
            opts=pulumi.ResourceOptions(
                parent=self,
                provider=cluster.provider,
                depends_on=release_needs,
                # A namespace change replaces the release; its cluster-scoped objects (ClusterRoles, webhook
                # configurations) can only be re-created once the old release is gone.
                delete_before_replace=True,
            ),
        )
        self.grafana_service = f"{config.namespace}/{GRAFANA_SERVICE}:{GRAFANA_PORT}"
        self.prometheus_url = (
            None if managed else f"http://{PROMETHEUS_SERVICE}.{config.namespace}.svc:{PROMETHEUS_PORT}"
        )
        self.register_outputs(
            {
                "backend": config.backend,
                "grafanaService": self.grafana_service,
                "queryEndpoint": self.query_endpoint,
            }
        )

    def contract(self) -> pulumi.Output[dict[str, object]]:
        """The `monitoring` stack output (`contract.Monitoring`)."""
        port_forward = f"kubectl -n {self.namespace} port-forward svc/{GRAFANA_SERVICE} 3000:{GRAFANA_PORT}"
        return pulumi.Output.all(self.workspace_id, self.query_endpoint, self.alert_topic_arn).apply(
            lambda resolved: Monitoring(
                backend=self.backend,
                namespace=self.namespace,
                grafana_service=self.grafana_service,
                grafana_port_forward=port_forward,
                prometheus_url=self.prometheus_url,
                amp_workspace_id=resolved[0],
                amp_query_endpoint=resolved[1],
                alert_topic_arn=resolved[2],
            ).model_dump(mode="json", by_alias=True, exclude_none=True)
        )

    def _amp_alerting(
        self,
        name: str,
        *,
        alerting: AlertingSettings,
        workspace: aws.amp.Workspace,
        cluster_name: str,
        region: str,
        tags: dict[str, str],
    ) -> pulumi.Output[str]:
        """The workspace's alert manager definition, and the SNS topics it publishes to that the stack owns
        (KMS-encrypted, publishable by this workspace only) with their subscriptions. Returns the alert
        topic's ARN."""
        child = pulumi.ResourceOptions(parent=self)
        owned = {"alerts": f"{cluster_name}-alerts"} if alerting.sns_topic == "create" else {}
        if alerting.heartbeat_url:
            owned["heartbeat"] = f"{cluster_name}-alert-heartbeat"
        # The topics' ARNs are known from their names, so the key's policy can name them before they exist.
        arn_parts = workspace.arn.apply(lambda arn: arn.split(":"))
        planned = arn_parts.apply(
            lambda parts: [f"arn:{parts[1]}:sns:{region}:{parts[4]}:{topic}" for topic in owned.values()]
        )
        topics: dict[str, aws.sns.Topic] = {}
        policies: list[pulumi.Resource] = []
        if owned:
            key = aws.kms.Key(
                f"{name}-alerts",
                description=f"SNS topics of the {cluster_name} cluster's alerts",
                enable_key_rotation=True,
                deletion_window_in_days=30,
                policy=pulumi.Output.all(arn_parts, planned).apply(
                    lambda resolved: json.dumps(
                        key_policy(partition=resolved[0][1], account=resolved[0][4], topic_arns=resolved[1])
                    )
                ),
                tags=tags,
                opts=child,
            )
            for role, topic_name in owned.items():
                topic = aws.sns.Topic(
                    f"{name}-{role}", name=topic_name, kms_master_key_id=key.arn, tags=tags, opts=child
                )
                policies.append(
                    aws.sns.TopicPolicy(
                        f"{name}-{role}",
                        arn=topic.arn,
                        policy=pulumi.Output.all(topic.arn, workspace.arn).apply(
                            lambda arns: json.dumps(topic_policy(arns[0], arns[1]))
                        ),
                        opts=child,
                    )
                )
                topics[role] = topic
        for address in alerting.email_subscriptions:
            aws.sns.TopicSubscription(
                f"{name}-alerts-{address}",
                topic=topics["alerts"].arn,
                protocol="email",
                endpoint=address,
                opts=child,
            )
        if "heartbeat" in topics:
            aws.sns.TopicSubscription(
                f"{name}-heartbeat",
                topic=topics["heartbeat"].arn,
                protocol="https",
                endpoint=alerting.heartbeat_url,
                opts=child,
            )
        topic_arn: pulumi.Output[str] = (
            topics["alerts"].arn if "alerts" in topics else pulumi.Output.from_input(str(alerting.sns_topic))
        )
        heartbeat_arn = topics["heartbeat"].arn if "heartbeat" in topics else None
        aws.amp.AlertManagerDefinition(
            name,
            workspace_id=workspace.id,
            definition=pulumi.Output.all(topic_arn, heartbeat_arn).apply(
                lambda arns: amp_definition(
                    amp_alertmanager_config(topic_arn=arns[0], heartbeat_topic_arn=arns[1], region=region)
                )
            ),
            # AMP publishes from the first alert on: the topics must let it.
            opts=pulumi.ResourceOptions(parent=self, depends_on=policies),
        )
        return topic_arn

    def _pod_identity(
        self,
        name: str,
        *,
        role_name: str,
        policy: pulumi.Input[str],
        cluster: Cluster,
        namespace: str,
        service_account: str,
        tags: dict[str, str],
    ) -> list[pulumi.Resource]:
        """A role for one service account, its inline policy and the Pod Identity association binding them."""
        child = pulumi.ResourceOptions(parent=self)
        role = aws.iam.Role(
            name,
            name=role_name,
            assume_role_policy=json.dumps(pod_identity_trust_policy()),
            tags=tags,
            opts=child,
        )
        role_policy = aws.iam.RolePolicy(name, role=role.name, policy=policy, opts=child)
        association = aws.eks.PodIdentityAssociation(
            name,
            cluster_name=cluster.name,
            namespace=namespace,
            service_account=service_account,
            role_arn=role.arn,
            tags=tags,
            # The agent add-on exchanges the pods' tokens; without it the association grants nothing.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[cluster.pod_identity_agent]),
        )
        return [role_policy, association]
