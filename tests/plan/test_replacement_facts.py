"""facts/replacement.py covers every resource type the program declares, names real inputs, and says
where each fact comes from."""

import importlib
import inspect
import re
from functools import cache

import pytest

from facts.replacement import CHARTS, REPLACEMENT, Replacement, chart_of
from synth.runner import ProgramRun, Registration, stacks
from tests.conftest import stack_run
from tests.helpers import run
from tests.observability.helpers import in_cluster_stack

COMING = [
    # Issue 10's other half: API endpoint rules, control-plane log group, EBS CSI storage class.
    "aws:cloudwatch/logGroup:LogGroup",
    "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule",
    "aws:ec2/securityGroupRule:SecurityGroupRule",
    "kubernetes:storage.k8s.io/v1:StorageClass",
    # GPU workloads to come.
    "kubernetes:apps/v1:Deployment",
    "kubernetes:apps/v1:DaemonSet",
    "kubernetes:batch/v1:CronJob",
    "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole",
    "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding",
    "kubernetes:rbac.authorization.k8s.io/v1:Role",
    "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding",
    "kubernetes:core/v1:ServiceAccount",
    "kubernetes:core/v1:ConfigMap",
    "kubernetes:karpenter.sh/v1alpha1:NodeOverlay",
]
"""Types the next changes declare: their facts are here before they are."""


def _variants() -> list[ProgramRun]:
    """Runs beyond the committed stacks that declare other types (IRSA, no interruption, a CPU pool, the
    inCluster observability backend)."""
    return [
        run(karpenter={"identity": "irsa", "interruptionHandling": False}),
        run(nodePools=[{"name": "cpu", "kind": "cpu", "capacityTypes": ["spot"], "limits": {"cpu": "64"}}]),
        in_cluster_stack(),
    ]


@cache
def declared_types() -> frozenset[str]:
    runs = [stack_run(s) for s in stacks()] + _variants()
    return frozenset(
        r.type for program in runs for r in program.resources if not r.type.startswith("gpu-eks:")
    )


def test_every_declared_resource_type_has_replacement_facts() -> None:
    """Whoever adds a resource type adds its facts: without them `synth plan` cannot tell update from
    replace for it."""
    missing = sorted(declared_types() - REPLACEMENT.keys())
    assert missing == [], f"add these types to facts/replacement.py REPLACEMENT: {missing}"


@pytest.mark.parametrize("type_token", COMING)
def test_types_about_to_be_declared_have_facts(type_token: str) -> None:
    assert type_token in REPLACEMENT


@pytest.mark.parametrize("type_token", sorted(REPLACEMENT))
def test_every_fact_names_its_source(type_token: str) -> None:
    source = REPLACEMENT[type_token].source
    assert re.fullmatch(r"[\w.-]+/[\w.-]+", source.repo)
    assert source.path
    assert re.fullmatch(r"[0-9a-f]{40}", source.ref) or (source.ref == "" and source.note), source


# --- the paths name inputs of the resource ------------------------------------------------------


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", r"_\1", name).lower()


def _sdk_class(type_token: str) -> type | None:
    """The Pulumi SDK class of a type token, or `None` for custom resources (no typed class)."""
    package, module, name = type_token.split(":")
    if type_token == "pulumi:providers:kubernetes":
        return importlib.import_module("pulumi_kubernetes").Provider  # type: ignore[no-any-return]
    if package == "eks":
        return importlib.import_module("pulumi_eks").Cluster  # type: ignore[no-any-return]
    if package == "aws":
        return getattr(importlib.import_module(f"pulumi_aws.{module.split('/')[0]}"), name)  # type: ignore[no-any-return]
    group, version = module.split("/")
    if "karpenter" in group or group == "monitoring.coreos.com":
        return None
    sdk_group = "helm" if group == "helm.sh" else group.split(".")[0]
    return getattr(importlib.import_module(f"pulumi_kubernetes.{sdk_group}.{version}"), name)  # type: ignore[no-any-return]


def _paths(facts: Replacement) -> set[str]:
    return {
        *facts.forces_new,
        *facts.unordered,
        *facts.exclusive,
        *facts.forces_new_on_removal,
        *facts.kubeconfig,
        *facts.identity,
        *(r.path for r in facts.refused_updates),
    }


@pytest.mark.parametrize("type_token", sorted(REPLACEMENT))
def test_fact_paths_start_with_an_input_of_the_resource(type_token: str) -> None:
    """A typo in a path would silently never match: each path's first key is an input of the SDK class."""
    cls = _sdk_class(type_token)
    if cls is None:
        pytest.skip("custom resource: no typed SDK class")
    inputs = set(inspect.signature(cls._internal_init).parameters)  # type: ignore[attr-defined]
    for path in _paths(REPLACEMENT[type_token]):
        first = re.split(r"[.\[]", path)[0]
        assert _snake(first) in inputs, f"{type_token}: {path!r} is not an input ({sorted(inputs)})"


# --- Helm releases and what they own outside their namespace ------------------------------------------

NAMESPACED_CHARTS = {"aws-efa-k8s-device-plugin"}
"""Charts that render only namespaced objects (the EFA device plugin: a DaemonSet; see `CHARTS`)."""


@cache
def declared_releases() -> list[tuple[str, Registration]]:
    runs = [stack_run(s) for s in stacks()] + _variants()
    return [
        (chart_of(r.inputs), r) for program in runs for r in program.of_type("kubernetes:helm.sh/v3:Release")
    ]


def test_every_declared_chart_says_what_it_owns_outside_its_namespace() -> None:
    charts = {chart for chart, _ in declared_releases()}
    assert charts - NAMESPACED_CHARTS <= CHARTS.keys(), charts - NAMESPACED_CHARTS - CHARTS.keys()
    for chart, scope in CHARTS.items():
        assert re.fullmatch(r"[\w.-]+/[\w.-]+", scope.source.repo), chart
        assert re.fullmatch(r"[0-9a-f]{40}", scope.source.ref) or scope.source.note, chart


def test_a_release_owning_cluster_scoped_objects_deletes_first_when_replaced() -> None:
    """Helm installs no object another release owns: a create-first replacement (a new namespace) fails.
    CRD releases are the exception: their namespace is fixed, and either order loses every custom object,
    which the plan says instead."""
    for chart, release in declared_releases():
        scope = CHARTS.get(chart)
        if scope is not None and not scope.crds:
            assert release.delete_before_replace, (chart, release.name)
