"""The offline API-server check itself: it refuses what the API server refuses, accepts what it accepts."""

import copy
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import ValidationError

from components.karpenter_api import EC2NodeClass, to_manifest
from tests.karpenter_api.examples import gpu_node_class, gpu_node_pool
from tests.support.crd_check import (
    SUPPORTED_FUNCTIONS,
    check,
    functions_called,
    rules,
    served,
    unsupported_functions,
    validate,
)

NODE_POOL = to_manifest(gpu_node_pool())
NODE_CLASS = to_manifest(gpu_node_class())


def _pool(change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    manifest = copy.deepcopy(NODE_POOL)
    change(manifest)
    return manifest


def _node_class(change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    manifest = copy.deepcopy(NODE_CLASS)
    change(manifest)
    return manifest


def _template(manifest: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = manifest["spec"]["template"]["spec"]
    return spec


def test_serves_the_kinds_we_write() -> None:
    assert {
        ("karpenter.sh/v1", "NodePool"),
        ("karpenter.k8s.aws/v1", "EC2NodeClass"),
        ("karpenter.sh/v1alpha1", "NodeOverlay"),
    } <= set(served())


def test_unknown_kind_is_refused() -> None:
    assert validate({"apiVersion": "karpenter.sh/v1beta1", "kind": "NodePool", "spec": {}}) == [
        "apiVersion: no vendored CRD serves kind 'NodePool' in 'karpenter.sh/v1beta1'"
    ]


@pytest.mark.parametrize(("api_version", "kind"), served())
def test_every_function_the_rules_call_is_implemented(api_version: str, kind: str) -> None:
    """A CRD bump that brings a new CEL function fails here instead of being evaluated wrongly."""
    if api_version.startswith("monitoring.coreos.com/"):
        assert rules(api_version, kind) == []  # the Prometheus Operator's CRDs have none (yet)
    else:
        assert rules(api_version, kind), "each served Karpenter CRD has rules"
    assert unsupported_functions(api_version, kind) == {}


def test_a_function_outside_the_supported_set_is_detected() -> None:
    called = functions_called("self.all(x, x.lowerAscii().startsWith(self.split('/')[0]))")
    assert called == {"all", "lowerAscii", "startsWith", "split"}
    assert called - SUPPORTED_FUNCTIONS == {"lowerAscii"}


def test_counts_the_rules_of_the_crds() -> None:
    node_pool, node_class, node_overlay = (
        rules("karpenter.sh/v1", "NodePool"),
        rules("karpenter.k8s.aws/v1", "EC2NodeClass"),
        rules("karpenter.sh/v1alpha1", "NodeOverlay"),
    )
    assert (len(node_pool), len(node_class), len(node_overlay)) == (20, 54, 8)
    assert not any(r.transition for r in node_overlay)
    assert [r.schema_path for r in node_pool if r.transition] == [
        "spec",
        "spec.template.spec.nodeClassRef",
        "spec.template.spec.nodeClassRef",
    ]
    assert not any(r.transition for r in node_class)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        pytest.param(
            lambda m: m["spec"].update(weight="10"),
            "spec.weight: must be of type integer, got string '10'",
            id="type",
        ),
        pytest.param(
            lambda m: m["spec"]["disruption"].update(consolidationPolicy="Sometimes"),
            "spec.disruption.consolidationPolicy: unsupported value 'Sometimes': must be one of "
            "'WhenEmpty', 'WhenEmptyOrUnderutilized', 'Balanced'",
            id="enum",
        ),
        pytest.param(
            lambda m: m["spec"]["disruption"]["budgets"][0].update(nodes="10 %"),
            "spec.disruption.budgets[0].nodes: '10 %' does not match the pattern "
            "'^((100|[0-9]{1,2})%|[0-9]+)$'",
            id="pattern",
        ),
        pytest.param(
            lambda m: m["spec"].update(weight=101),
            "spec.weight: 101 is greater than the maximum 100",
            id="maximum",
        ),
        pytest.param(
            lambda m: m["spec"]["disruption"].update(budgets=[{"nodes": "1"}] * 51),
            "spec.disruption.budgets: has 51 items, more than the maximum 50",
            id="maxItems",
        ),
        pytest.param(
            lambda m: m["spec"]["disruption"].pop("consolidateAfter"),
            "spec.disruption.consolidateAfter: required value is missing",
            id="required",
        ),
        pytest.param(
            lambda m: m["spec"].update(consolidationPolicy="WhenEmpty"),
            "spec.consolidationPolicy: unknown field (not in the CRD schema)",
            id="unknown-field",
        ),
        pytest.param(
            lambda m: m["spec"]["limits"].update({"nvidia.com/gpu": "lots"}),
            "spec.limits[nvidia.com/gpu]: 'lots' does not match the pattern",
            id="int-or-string-pattern",
        ),
        pytest.param(
            lambda m: m["spec"]["limits"].update({"nvidia.com/gpu": 1.5}),
            "spec.limits[nvidia.com/gpu]: must be of type integer or string, got number 1.5",
            id="int-or-string-type",
        ),
        pytest.param(
            lambda m: m["spec"]["disruption"]["budgets"][1].update(reasons=["Empty", "Empty"]),
            "spec.disruption.budgets[1].reasons[1]: duplicate value 'Empty' in a list of type set",
            id="list-type-set",
        ),
        pytest.param(
            lambda m: _template(m)["taints"][0].update(timeAdded="yesterday"),
            "spec.template.spec.taints[0].timeAdded: 'yesterday' is not an RFC 3339 date-time",
            id="date-time",
        ),
        pytest.param(
            lambda m: m["metadata"].update(name="GPU_pool"),
            "metadata.name: 'GPU_pool' is not a DNS-1123 subdomain",
            id="metadata-name",
        ),
        pytest.param(
            lambda m: m["spec"]["template"]["metadata"]["labels"].update({"gpu-eks/pool": "-gpu"}),
            "spec.template.metadata.labels[gpu-eks/pool]: '-gpu' does not match the pattern",
            id="label-value",
        ),
    ],
)
def test_schema_violations_are_reported_with_their_path(
    change: Callable[[dict[str, Any]], None], expected: str
) -> None:
    problems = validate(_pool(change))
    assert any(problem.startswith(expected) for problem in problems), problems


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        pytest.param(
            lambda m: m["spec"]["amiSelectorTerms"].clear(),
            "spec.amiSelectorTerms: has 0 item(s), fewer than the minimum 1",
            id="minItems",
        ),
        pytest.param(
            lambda m: m["spec"]["amiSelectorTerms"][0].update(alias="al2023@v20260714-with-a-long-suffix"),
            "spec.amiSelectorTerms[0].alias: 'al2023@v20260714-with-a-long-suffix' is longer than 30 "
            "characters",
            id="maxLength",
        ),
        pytest.param(
            lambda m: m["spec"]["metadataOptions"].update(httpPutResponseHopLimit=0),
            "spec.metadataOptions.httpPutResponseHopLimit: 0 is less than the minimum 1",
            id="minimum",
        ),
        pytest.param(
            lambda m: m["spec"]["subnetSelectorTerms"][0].update(tags={f"k{i}": "v" for i in range(21)}),
            "spec.subnetSelectorTerms[0].tags: has 21 entries, more than the maximum 20",
            id="maxProperties",
        ),
    ],
)
def test_schema_violations_of_the_node_class(change: Callable[[dict[str, Any]], None], expected: str) -> None:
    problems = validate(_node_class(change))
    assert expected in problems, problems


def test_type_errors_stop_cel_evaluation_like_the_api_server() -> None:
    def change(manifest: dict[str, Any]) -> None:
        manifest["spec"]["weight"] = "10"
        _template(manifest)["nodeClassRef"]["name"] = ""

    manifest = _pool(change)
    problems = check(manifest)
    assert [p.rule for p in problems if p.rule is not None] == []
    assert str(problems[-1]) == (
        "<root>: validation rules (x-kubernetes-validations) not evaluated because of type errors"
    )


def test_nulls_are_dropped_and_then_defaulted() -> None:
    """`disruption: null` is pruned, then defaulted to `{consolidateAfter: 0s}`: the object is valid."""
    assert validate(_pool(lambda m: m["spec"].update(disruption=None))) == []


def test_transition_rules_are_skipped_on_create_and_run_on_update() -> None:
    old = _pool(lambda m: _template(m)["nodeClassRef"].update(group="compute.example.com"))
    assert validate(NODE_POOL) == []
    assert validate(NODE_POOL, old=old) == [
        "spec.template.spec.nodeClassRef: nodeClassRef.group is immutable"
    ]
    assert validate(NODE_POOL, old=NODE_POOL) == []


def test_a_rule_that_cannot_be_evaluated_refuses_the_object() -> None:
    """`In` without `values`: `x.values.size()` has no such key; the API server reports that as invalid."""
    manifest = _pool(
        lambda m: _template(m)["requirements"].append({"key": "kubernetes.io/os", "operator": "In"})
    )
    (problem,) = check(manifest)
    assert problem.path == "spec.template.spec.requirements"
    assert problem.message.startswith("requirements with operator 'In' must have a value defined (rule ")
    assert "failed to evaluate" in problem.message


@pytest.mark.parametrize(
    ("value", "accepted"),
    [("0", True), ("+5", True), ("007", True), (" 5", False), ("1_0", False), ("-1", False), ("1.5", False)],
)
def test_int_conversion_follows_go_parse_int(value: str, accepted: bool) -> None:
    manifest = _pool(lambda m: _template(m)["requirements"][0].update(values=[value]))
    assert (validate(manifest) == []) is accepted


def test_array_level_max_length_on_requirement_values_is_ignored_like_the_api_server_does() -> None:
    """The CRD puts `maxLength: 63` and a pattern on the `values` *array*; both only apply to strings."""
    long_value = "x" * 64 + "-"
    manifest = _pool(lambda m: _template(m)["requirements"][1].update(values=[long_value]))
    assert validate(manifest) == []


def test_integer_formats_are_range_checked_by_both() -> None:
    manifest = _node_class(lambda m: m["spec"].update(kubelet={"maxPods": 2**31}))
    assert validate(manifest) == ["spec.kubelet.maxPods: 2147483648 does not fit in int32"]
    with pytest.raises(ValidationError, match=r"2147483648 does not fit in the CRD's int32"):
        EC2NodeClass.model_validate(manifest)
    assert validate(_node_class(lambda m: m["spec"].update(kubelet={"maxPods": 2**31 - 1}))) == []
