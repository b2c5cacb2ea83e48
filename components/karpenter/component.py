"""Karpenter: the AWS side (node role and its access entry, controller role and its identity binding,
interruption queue and rules) and the chart side (`karpenter-crd`, then `karpenter`) as one component.

Every document, name and value comes from the pure functions of this package (`iam`, `interruption`,
`chart_values`); this module only declares resources and wires them together, so that one `pulumi up`
converges: the controller chart is installed only once everything it needs exists.

Names versus the cluster: IAM role and policy names, the queue name and the controller policies' documents
are derived from the *configured* cluster name (`cluster_name`). They identify or scope things, they do not
need the control plane, so they are known in `pulumi preview` (reviewers see real names and documents) and
IAM and SQS are created while the control plane comes up. Everything addressed *to* the cluster (access
entry, Pod Identity association, IRSA trust, the chart's `settings.clusterName`) uses the `Cluster`
component's outputs and therefore waits for it.
"""

import json
from collections.abc import Sequence
from functools import partial
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.cluster import SYSTEM_NODE_SELECTOR, Cluster
from components.iam_document import PolicyDocument
from components.karpenter.chart_values import (
    CONTROLLER_CHART_NAME,
    CONTROLLER_SKIP_CRDS,
    CRD_CHART_NAME,
    chart_url,
    controller_values_from_config,
    crd_chart_values,
)
from components.karpenter.iam import (
    NODE_ACCESS_ENTRY_TYPE,
    NODE_ROLE_MANAGED_POLICIES,
    ControllerPolicy,
    controller_policies,
    controller_policy_name,
    controller_policy_names,
    controller_role_name,
    irsa_trust_policy,
    node_role_managed_policy_arns,
    node_role_name,
    node_role_trust_policy,
    pod_identity_trust_policy,
)
from components.karpenter.interruption import (
    INTERRUPTION_RULES,
    TARGET_ID,
    queue_name,
    queue_policy,
    queue_properties,
)
from config.karpenter import KarpenterConfig
from facts.partitions import check_partition, check_region

CRD_RELEASE_NAMESPACE = "kube-system"
"""Where the `karpenter-crd` release record lives, whatever `karpenter.namespace` says.

CRDs are cluster-scoped; the namespace only holds Helm's release record. Pinning it means changing
`karpenter.namespace` never replaces this release: a replacement would either fail (the new release cannot
adopt CRDs the old one owns) or, deleting first, delete the CRDs and with them every NodePool and NodeClaim,
so Karpenter would terminate the whole GPU fleet."""

CRD_RELEASE_TIMEOUT_SECONDS = 300
"""CRDs are established within seconds; Helm's default timeout is plenty."""

CONTROLLER_RELEASE_TIMEOUT_SECONDS = 600
"""The controller release waits until its Deployment is available. On a first `pulumi up` the system nodes
have only just joined and pull the image cold; twice Helm's default leaves room for that without hiding a
controller that never becomes ready (e.g. wrong IAM: it crash-loops and the release fails)."""

RELEASE_MAX_HISTORY = 10
"""Helm revisions kept per release (each one a Secret in the release namespace), as the Helm CLI does."""


def _policy_json(documents: dict[ControllerPolicy, PolicyDocument], policy: ControllerPolicy) -> str:
    return json.dumps(documents[policy])


class Karpenter(pulumi.ComponentResource):
    """Karpenter 1.14 on an EKS cluster: IAM, interruption handling, CRDs and the controller."""

    node_role_name: pulumi.Output[str]
    """Name of the node role; EC2NodeClass `spec.role` takes it (Karpenter creates the instance profiles)."""
    node_role_arn: pulumi.Output[str]
    controller_role_arn: pulumi.Output[str]
    interruption_queue_name: pulumi.Output[str] | None
    """Name of the SQS interruption queue; `None` when interruption handling is off."""
    interruption_queue_url: pulumi.Output[str] | None
    interruption_queue_arn: pulumi.Output[str] | None
    namespace: str
    """Namespace of the controller and its service account."""
    version: str
    """Karpenter release of both charts."""
    crd_release: k8s.helm.v3.Release
    """The `karpenter-crd` release: depend on it before creating NodePools or EC2NodeClasses."""
    controller_release: k8s.helm.v3.Release
    """The `karpenter` release: depend on it too, so that `pulumi destroy` removes NodePools while the
    controller (and its IAM) still exist to terminate the nodes it launched."""

    def __init__(
        self,
        name: str,
        *,
        config: KarpenterConfig,
        cluster: Cluster,
        cluster_name: str,
        region: str,
        partition: str,
        tags: dict[str, str],
        subnet_discovery: Sequence[pulumi.Resource] = (),
        monitoring_crds: pulumi.Resource | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """`cluster_name` is the configured name of `cluster` (see the module docstring for which is used
        where); `region` and `partition` are the stack's; `subnet_discovery` carries the subnets'
        `karpenter.sh/discovery` tags (`Network.discovery`). `monitoring_crds`: the release of the Prometheus
        Operator CRDs when an observability backend scrapes the cluster; the chart's ServiceMonitor is then
        on and the controller release waits for the CRDs (the chart skips the ServiceMonitor without them)."""
        super().__init__("gpu-eks:karpenter:Karpenter", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        aws_partition = check_partition(partition)
        check_region(region, aws_partition)
        self.namespace = config.namespace
        self.version = config.version

        # --- Nodes: the role Karpenter's instances run as, allowed to join through an access entry. ---
        node_role = aws.iam.Role(
            f"{name}-node",
            name=node_role_name(cluster_name),
            assume_role_policy=json.dumps(node_role_trust_policy(aws_partition)),
            tags=tags,
            opts=child,
        )
        node_attachments = [
            aws.iam.RolePolicyAttachment(
                f"{name}-node-{policy}", role=node_role.name, policy_arn=policy_arn, opts=child
            )
            for policy, policy_arn in zip(
                NODE_ROLE_MANAGED_POLICIES, node_role_managed_policy_arns(aws_partition), strict=True
            )
        ]
        node_access_entry = aws.eks.AccessEntry(
            f"{name}-node",
            cluster_name=cluster.name,
            principal_arn=node_role.arn,
            type=NODE_ACCESS_ENTRY_TYPE,
            tags=tags,
            opts=child,
        )
        self.node_role_name = node_role.name
        self.node_role_arn = node_role.arn

        # --- Interruption handling: queue, its policy, and the five rules that feed it. ---
        interruption: list[pulumi.Resource] = []
        queue: aws.sqs.Queue | None = None
        if config.interruption_handling:
            queue = aws.sqs.Queue(
                f"{name}-interruption",
                name=queue_name(cluster_name),
                **queue_properties(),
                tags=tags,
                opts=child,
            )
            interruption.append(
                aws.sqs.QueuePolicy(
                    f"{name}-interruption",
                    queue_url=queue.url,
                    policy=queue.arn.apply(lambda arn: json.dumps(queue_policy(arn))),
                    opts=child,
                )
            )
            for rule in INTERRUPTION_RULES:
                event_rule = aws.cloudwatch.EventRule(
                    f"{name}-{rule.name}",
                    description=rule.description,
                    event_pattern=rule.event_pattern_json(),
                    tags=tags,
                    opts=child,
                )
                target = aws.cloudwatch.EventTarget(
                    f"{name}-{rule.name}",
                    rule=event_rule.name,
                    target_id=TARGET_ID,
                    arn=queue.arn,
                    opts=child,
                )
                interruption += [event_rule, target]
        self.interruption_queue_name = queue.name if queue else None
        self.interruption_queue_url = queue.url if queue else None
        self.interruption_queue_arn = queue.arn if queue else None

        # --- Controller: its role, the six (or fewer) upstream policies, and how its pods assume it. ---
        if config.identity == "podIdentity":
            trust: pulumi.Input[str] = json.dumps(pod_identity_trust_policy())
        else:
            trust = pulumi.Output.all(cluster.oidc_provider_arn, cluster.oidc_issuer).apply(
                lambda provider: json.dumps(
                    irsa_trust_policy(
                        oidc_provider_arn=provider[0],
                        oidc_issuer=provider[1],
                        namespace=config.namespace,
                        service_account=config.service_account_name,
                    )
                )
            )
        controller_role = aws.iam.Role(
            f"{name}-controller",
            name=controller_role_name(cluster_name),
            assume_role_policy=trust,
            tags=tags,
            opts=child,
        )
        self.controller_role_arn = controller_role.arn

        documents = pulumi.Output.all(
            account_id=aws.get_caller_identity_output().account_id,
            node_role_arn=node_role.arn,
            queue_arn=self.interruption_queue_arn,
        ).apply(
            lambda resolved: controller_policies(
                cluster_name=cluster_name,
                region=region,
                account_id=resolved["account_id"],
                partition=aws_partition,
                queue_arn=resolved["queue_arn"],
                node_role_arn=resolved["node_role_arn"],
                zonal_shift=config.zonal_shift,
            )
        )
        controller_attachments = []
        for policy in controller_policy_names(
            interruption=config.interruption_handling, zonal_shift=config.zonal_shift
        ):
            managed_policy = aws.iam.Policy(
                f"{name}-controller-{policy}",
                name=controller_policy_name(policy, cluster_name),
                description=f"Karpenter controller of cluster {cluster_name}: {policy}",
                policy=documents.apply(partial(_policy_json, policy=policy)),
                tags=tags,
                opts=child,
            )
            controller_attachments.append(
                aws.iam.RolePolicyAttachment(
                    f"{name}-controller-{policy}",
                    role=controller_role.name,
                    policy_arn=managed_policy.arn,
                    opts=child,
                )
            )

        identity: pulumi.Resource
        irsa_role_arn: pulumi.Output[str] | None
        if config.identity == "podIdentity":
            identity = aws.eks.PodIdentityAssociation(
                f"{name}-controller",
                cluster_name=cluster.name,
                namespace=config.namespace,
                service_account=config.service_account_name,
                role_arn=controller_role.arn,
                tags=tags,
                # The agent add-on exchanges the pods' tokens; without it the association grants nothing.
                opts=pulumi.ResourceOptions(parent=self, depends_on=[cluster.pod_identity_agent]),
            )
            irsa_role_arn = None
        else:
            identity = controller_role  # IRSA: the annotation in the chart values is the binding.
            irsa_role_arn = controller_role.arn

        # --- Charts: CRDs first, then the controller once everything it needs exists. ---
        # Both releases: `atomic` (Helm waits for readiness and undoes a failed change: a failed upgrade
        # rolls back to the last working controller instead of leaving a half-upgraded one; a failed first
        # install is removed so the next `pulumi up` starts clean) and `cleanup_on_fail` (objects a failed
        # upgrade created are deleted). Pulumi's own await stays on, so a controller that never becomes
        # ready fails `pulumi up` rather than surfacing later as pods nobody provisions for.
        crd_release = k8s.helm.v3.Release(
            f"{name}-crd",
            name=CRD_CHART_NAME,
            chart=chart_url(CRD_CHART_NAME),
            version=config.version,
            namespace=CRD_RELEASE_NAMESPACE,
            values=crd_chart_values(),
            atomic=True,
            cleanup_on_fail=True,
            timeout=CRD_RELEASE_TIMEOUT_SECONDS,
            max_history=RELEASE_MAX_HISTORY,
            opts=pulumi.ResourceOptions(parent=self, provider=cluster.provider),
        )

        values = pulumi.Output.all(
            cluster_name=cluster.name,
            queue_name=self.interruption_queue_name,
            irsa_role_arn=irsa_role_arn,
        ).apply(
            lambda resolved: controller_values_from_config(
                config,
                cluster_name=resolved["cluster_name"],
                queue_name=resolved["queue_name"],
                irsa_role_arn=resolved["irsa_role_arn"],
                node_selector=SYSTEM_NODE_SELECTOR,
                service_monitor=monitoring_crds is not None,
            )
        )
        prerequisites: list[pulumi.Resource] = [
            crd_release,
            *([monitoring_crds] if monitoring_crds else []),
            identity,
            node_access_entry,
            *interruption,
            *controller_attachments,
            *node_attachments,
            cluster.system_node_group,
            # Needed while draining too (DNS and networking to reach EC2, Pod Identity, discovery tags):
            # depending on them keeps them until the controller is gone on `pulumi destroy`.
            *cluster.controller_dependencies,
            *subnet_discovery,
        ]
        controller_release = k8s.helm.v3.Release(
            f"{name}-controller",
            name=CONTROLLER_CHART_NAME,
            chart=chart_url(CONTROLLER_CHART_NAME),
            version=config.version,
            namespace=config.namespace,
            create_namespace=config.namespace != "kube-system",
            skip_crds=CONTROLLER_SKIP_CRDS,
            values=values,
            atomic=True,
            cleanup_on_fail=True,
            timeout=CONTROLLER_RELEASE_TIMEOUT_SECONDS,
            max_history=RELEASE_MAX_HISTORY,
            opts=pulumi.ResourceOptions(
                parent=self,
                provider=cluster.provider,
                depends_on=prerequisites,
                # A namespace change replaces the release; its cluster-scoped objects (ClusterRoles and
                # their bindings) can only be re-created once the old release is gone. NodePools survive:
                # the CRDs belong to the other release.
                delete_before_replace=True,
            ),
        )
        self.crd_release = crd_release
        self.controller_release = controller_release

        outputs: dict[str, Any] = {
            "nodeRoleName": self.node_role_name,
            "nodeRoleArn": self.node_role_arn,
            "controllerRoleArn": self.controller_role_arn,
            "interruptionQueueName": self.interruption_queue_name,
            "interruptionQueueUrl": self.interruption_queue_url,
            "interruptionQueueArn": self.interruption_queue_arn,
            "namespace": self.namespace,
            "version": self.version,
        }
        self.register_outputs(outputs)
