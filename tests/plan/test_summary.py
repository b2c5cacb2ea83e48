"""`synth.summary`: what changed in a resource's inputs, said by meaning, on the values the real program
declares (its committed snapshots, which `python -m synth --check` keeps equal to it) and the changes a team
makes to them. The same changes through the whole program are in test_readable_plans.py."""

import copy
import json
from typing import Any

import pytest
import yaml

from components import yaml_text
from synth.plan import changed_paths
from synth.runner import ROOT
from synth.summary import Item, compact, condense, summarise

SNAPSHOTS = ROOT / "snapshots"


def snapshot(path: str) -> Any:
    return yaml_text.load((SNAPSHOTS / path).read_text())


def lines(old: Any, new: Any, paths: list[str] | None = None) -> list[str]:
    """The description of a change, with the changed paths the planner finds (or the ones given)."""
    found = changed_paths(old, new) if paths is None else paths
    return [str(i) for i in summarise(old, new, found)]


GPU_OPERATOR = snapshot("prod/helm/gpu-operator.yaml")["values"]
TRAINING_POOL = snapshot("prod/manifests/NodePool-gpu-training.yaml")
GUARD = snapshot("prod/manifests/Deployment-gpu-node-guard-gpu-node-guard.yaml")
MIG_TOLERATION = {
    "key": "gpu-eks.io/mig-pending",
    "operator": "Equal",
    "value": "true",
    "effect": "NoSchedule",
}


def with_mig_pool(values: dict[str, Any]) -> dict[str, Any]:
    """The GPU Operator's values once prod has a MIG pool: its startup taint is tolerated after the GPU taint
    in both lists (as the program declares them, see test_readable_plans.py)."""
    changed = copy.deepcopy(values)
    for tolerations in (
        changed["daemonsets"]["tolerations"],
        changed["node-feature-discovery"]["worker"]["tolerations"],
    ):
        gpu = next(i for i, t in enumerate(tolerations) if t["key"] == "nvidia.com/gpu")
        tolerations.insert(gpu + 1, MIG_TOLERATION)
    return changed


def test_an_added_mig_pool_is_one_toleration_in_each_list_not_twelve_paths() -> None:
    new = with_mig_pool(GPU_OPERATOR)
    paths = changed_paths(GPU_OPERATOR, new)
    assert len(paths) == 12  # what the plan used to list: tolerations[1].key, [2].operator, ...
    assert "daemonsets.tolerations[2].operator" in paths
    assert lines(GPU_OPERATOR, new) == [
        "daemonsets.tolerations: + gpu-eks.io/mig-pending=true:NoSchedule",
        "node-feature-discovery.worker.tolerations: + gpu-eks.io/mig-pending=true:NoSchedule",
    ]


def test_time_slicing_entries_added_are_counted_with_the_first_and_last() -> None:
    """Before every count had an entry (bed2f00), dev's device-plugin config held the one its pool used."""
    data = GPU_OPERATOR["devicePlugin"]["config"]["data"]
    before = {k: v for k, v in data.items() if k in ("default", "time-slicing-4")}
    assert len(changed_paths(before, data)) == 62
    assert lines({"data": before}, {"data": data}) == [
        "data: 62 entries added (time-slicing-2 ... time-slicing-64)"
    ]
    assert lines({"data": {"default": data["default"]}}, {"data": data}) == [
        "data: 63 entries added (time-slicing-2 ... time-slicing-64)"
    ]
    assert lines({"data": data}, {"data": before}) == [
        "data: 62 entries removed (time-slicing-2 ... time-slicing-64)"
    ]


def test_entries_changed_alike_are_one_line_with_what_changed_in_each() -> None:
    """`gpuOperator.mig.strategy: mixed`: every device-plugin config (YAML text) says so."""
    data = GPU_OPERATOR["devicePlugin"]["config"]["data"]
    mixed = {k: v.replace("migStrategy: single", "migStrategy: mixed") for k, v in data.items()}
    assert lines({"data": data}, {"data": mixed}) == [
        "data: 64 entries changed (default ... time-slicing-64): flags.migStrategy: single -> mixed"
    ]


def test_a_requirement_gained_is_one_line_in_the_form_karpenter_documents() -> None:
    """Prod's training pool gaining its zone (4507cef): the requirement went in before the instance types,
    so every later index moved."""
    requirements = TRAINING_POOL["spec"]["template"]["spec"]["requirements"]
    before = [r for r in requirements if r["key"] != "topology.kubernetes.io/zone"]
    old, new = {"requirements": before}, {"requirements": requirements}
    assert "requirements[6].key" in changed_paths(old, new)
    assert lines(old, new) == ["requirements: + topology.kubernetes.io/zone In [us-west-2a]"]
    assert lines(new, old) == ["requirements: - topology.kubernetes.io/zone In [us-west-2a]"]


def test_a_requirement_changed_shows_its_key_once() -> None:
    requirements = TRAINING_POOL["spec"]["template"]["spec"]["requirements"]
    wider = copy.deepcopy(requirements)
    family = next(r for r in wider if r["key"] == "karpenter.k8s.aws/instance-family")
    family["values"].append("p5en")
    count = next(r for r in wider if r["key"] == "karpenter.k8s.aws/instance-gpu-count")
    count["values"] = ["3"]
    assert lines({"r": {"requirements": requirements}}, {"r": {"requirements": wider}}) == [
        "r.requirements: ~ karpenter.k8s.aws/instance-gpu-count Gt 7 -> Gt 3",
        "r.requirements: ~ karpenter.k8s.aws/instance-family In [p4d, p5] -> In [p4d, p5, p5en]",
    ]


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        # The time-slicing ratio of dev's pool (4 -> 2): the label its nodes select their config by.
        (
            {"labels": {"nvidia.com/device-plugin.config": "time-slicing-4"}},
            {"labels": {"nvidia.com/device-plugin.config": "time-slicing-2"}},
            ["labels.nvidia.com/device-plugin.config: time-slicing-4 -> time-slicing-2"],
        ),
        # Strings YAML would read as something else are quoted, as in the stack file.
        (
            {"capacity": {"nvidia.com/gpu": "4"}},
            {"capacity": {"nvidia.com/gpu": "2"}},
            ['capacity.nvidia.com/gpu: "4" -> "2"'],
        ),
        ({"enabled": False}, {"enabled": True}, ["enabled: false -> true"]),
        ({}, {"replicas": 2}, ["+ replicas: 2"]),
        ({"replicas": 2}, {}, ["- replicas: 2"]),
        # An empty map, an empty list, None and absent are all "no value", as the providers see them.
        ({"tags": {}}, {"tags": None}, []),
        ({"a": []}, {}, []),
        # A map gained whole is shown on one line, nested maps by their size.
        (
            {"spec": {"role": "KarpenterNodeRole-ml-prod"}},
            {
                "spec": {
                    "role": "KarpenterNodeRole-ml-prod",
                    "placementGroupSelector": {"name": "ml-prod-gpu-training"},
                }
            },
            ["spec: + placementGroupSelector: {name: ml-prod-gpu-training}"],
        ),
        # A set of names: on one line.
        (
            {"enabledClusterLogTypes": ["api", "audit", "authenticator", "controllerManager", "scheduler"]},
            {"enabledClusterLogTypes": ["audit", "authenticator"]},
            ["enabledClusterLogTypes: - api, - controllerManager, - scheduler"],
        ),
        ({"ids": ["a", "b"]}, {"ids": ["b", "a"]}, ["ids: reordered"]),
        # Unnamed items: by position.
        (
            {"budgets": [{"nodes": "1"}]},
            {"budgets": [{"nodes": "2"}, {"nodes": "0"}]},
            ['budgets[0].nodes: "1" -> "2"', 'budgets: + {nodes: "0"}'],
        ),
        # Taints as kubectl writes them; a toleration of any value is `key:effect`.
        (
            {"taints": []},
            {"taints": [{"key": "gpu-eks.io/workload", "value": "training", "effect": "NoSchedule"}]},
            ["+ taints: [gpu-eks.io/workload=training:NoSchedule]"],
        ),
        (
            {"taints": [{"key": "a", "effect": "NoSchedule"}]},
            {
                "taints": [
                    {"key": "a", "effect": "NoSchedule"},
                    {"key": "b", "value": "1", "effect": "NoExecute"},
                ]
            },
            ["taints: + b=1:NoExecute"],
        ),
        (
            {"tolerations": []},
            {"tolerations": [{"operator": "Exists"}]},
            ["+ tolerations: [*]"],
        ),
        (
            {"tolerations": [{"key": "x", "operator": "Exists", "effect": "NoSchedule"}]},
            {
                "tolerations": [
                    {"key": "x", "operator": "Exists", "effect": "NoSchedule"},
                    {"operator": "Exists"},
                ]
            },
            ["tolerations: + *"],
        ),
        # Environment variables by name.
        (
            {"env": [{"name": "A", "value": "1"}, {"name": "B", "value": "x"}]},
            {
                "env": [
                    {"name": "A", "value": "2"},
                    {"name": "C", "valueFrom": {"fieldRef": {"fieldPath": "x"}}},
                ]
            },
            ['env: ~ A="1" -> A="2"', "env: + C from {fieldRef: {fieldPath: x}}", "env: - B=x"],
        ),
    ],
)
def test_each_kind_of_value_is_said_by_meaning(old: Any, new: Any, expected: list[str]) -> None:
    assert lines(old, new) == expected


def test_a_setting_in_json_text_is_read_as_what_it_says() -> None:
    """The GPU node guard's settings (an env var holding JSON): prod's new MIG pool is one entry."""
    container = GUARD["spec"]["template"]["spec"]["containers"][0]
    settings = json.loads(container["env"][0]["value"])
    settings["pools"]["gpu-mig"] = {"initializationTimeoutSeconds": 2400, "migGate": True}
    changed = copy.deepcopy(GUARD)
    changed["spec"]["template"]["spec"]["containers"][0]["env"][0]["value"] = json.dumps(
        settings, sort_keys=True
    )
    assert changed_paths(GUARD, changed) == ["spec.template.spec.containers[0].env[0].value"]
    assert lines(GUARD, changed) == [
        "spec.template.spec.containers[guard].env[GPU_NODE_GUARD_SETTINGS].value.pools: "
        "+ gpu-mig: {initializationTimeoutSeconds: 2400, migGate: true}"
    ]


def test_rules_in_yaml_text_are_matched_by_alert_and_pool() -> None:
    """Prometheus rule groups (the managed backend's rule namespace is YAML text): a new pool's alerts are
    counted by name, a changed expression shown where it differs."""
    rule = {
        "alert": "GpuNodeIdle",
        "expr": 'max by (nodepool) (x{nodepool=~"gpu-inference|gpu-training"}) > 0',
    }
    per_pool = [
        {"alert": name, "expr": "1", "labels": {"nodepool": pool}}
        for pool in ("gpu-inference", "gpu-training")
        for name in ("GpuNodeIdle", "GpuNodeNotInitialized", "GpuPodsUnschedulable", "GpuPoolAtLimit")
    ]
    old: dict[str, Any] = {
        "groups": [{"name": "gpus", "rules": [rule]}, {"name": "pools", "rules": per_pool}]
    }
    new = copy.deepcopy(old)
    new["groups"][0]["rules"][0]["expr"] = rule["expr"].replace("gpu-inference|", "gpu-inference|gpu-mig|")
    new["groups"][1]["rules"] += [{**r, "labels": {"nodepool": "gpu-mig"}} for r in per_pool[:4]]
    assert lines({"data": yaml.safe_dump(old)}, {"data": yaml.safe_dump(new)}) == [
        'data.groups[gpus].rules[GpuNodeIdle].expr: …gpu-inference|gpu-training"}) > 0 -> '
        '…gpu-inference|gpu-mig|gpu-training"}) > 0',
        "data.groups[pools].rules: 4 items added (GpuNodeIdle:gpu-mig, GpuNodeNotInitialized:gpu-mig, "
        "GpuPodsUnschedulable:gpu-mig, GpuPoolAtLimit:gpu-mig)",
    ]


def test_only_what_the_plan_found_changed_is_described() -> None:
    """Paths the engine ignores (`ignoreChanges`) are not in the plan's paths: their change is not shown."""
    old = {"scalingConfig": {"desiredSize": 2, "maxSize": 4}, "version": "1.35"}
    new = {"scalingConfig": {"desiredSize": 3, "maxSize": 6}, "version": "1.36"}
    assert lines(old, new, ["scalingConfig.maxSize", "version"]) == [
        "scalingConfig.maxSize: 4 -> 6",
        'version: "1.35" -> "1.36"',  # quoted as the stack file quotes it (YAML would read a number)
    ]


def test_secrets_stay_masked() -> None:
    """Snapshots record secrets as `[secret]`: a change of a secret value alone is no change, and a value that
    becomes secret shows only the mask."""
    assert lines({"token": "[secret]"}, {"token": "[secret]"}, ["token"]) == []
    assert lines({"k": {"token": "[secret]", "a": 1}}, {"k": {"token": "[secret]", "a": 2}}) == [
        "k.a: 1 -> 2"
    ]
    assert lines({"password": "hunter2"}, {"password": "[secret]"}) == ['password: hunter2 -> "[secret]"']


def test_long_text_is_shown_where_it_differs() -> None:
    expr = (
        'sum by (nodepool) (karpenter_nodepools_usage{resource_type="nvidia.com/gpu", nodepool=~"a|b"}) / 8'
    )
    assert lines({"expr": expr}, {"expr": expr.replace('"a|b"', '"a|b|c"')}) == [
        'expr: …, nodepool=~"a|b"}) / 8 -> …, nodepool=~"a|b|c"}) / 8'
    ]
    script = "#!/bin/sh\nset -eu\nexec kubelet --max-pods=110\n"
    assert lines({"userData": script}, {"userData": script.replace("110", "64")}) == [
        "userData: line exec kubelet --max-pods=110 -> exec kubelet --max-pods=64"
    ]


def test_many_changes_condense_to_one_line_per_field_with_counts() -> None:
    """A Deployment rewritten in a dozen places (the guard's from an earlier version of the program): unless
    verbose, one line per field it changes, with how many changes each holds."""
    new = copy.deepcopy(GUARD)
    spec = new["spec"]["template"]["spec"]
    container = spec["containers"][0]
    container["image"] = container["image"].replace("sha256:4", "sha256:5")
    container["resources"] = {
        "limits": {"cpu": "1", "memory": "256Mi"},
        "requests": {"cpu": "50m", "memory": "128Mi"},
    }
    container["livenessProbe"]["periodSeconds"] = 10
    container["readinessProbe"]["periodSeconds"] = 10
    container["env"] = [*container["env"][:1], {"name": "LOG_LEVEL", "value": "debug"}]
    spec["terminationGracePeriodSeconds"] = 60
    spec["priorityClassName"] = "system-node-critical"
    new["spec"]["replicas"] = 3
    new["metadata"]["labels"]["team"] = "platform"
    full = summarise(GUARD, new, changed_paths(GUARD, new))
    assert len(full) > 8
    assert [str(i) for i in condense(full)] == [
        "metadata.labels: + team: platform",
        "spec.replicas: 2 -> 3",
        "spec.template.spec.containers[guard]: "
        "11 changes (env, image, livenessProbe, readinessProbe, resources)",
        "spec.template.spec.priorityClassName: system-cluster-critical -> system-node-critical",
        "spec.template.spec.terminationGracePeriodSeconds: 30 -> 60",
    ]
    assert condense(full[:3]) == full[:3]


def test_a_value_too_long_for_a_line_is_abbreviated_by_structure() -> None:
    data = GPU_OPERATOR["devicePlugin"]["config"]
    assert compact(data, 120) == (
        "{create: true, data: {64 entries: default ... time-slicing-64}, default: default, "
        "name: gpu-eks-device-plugin-config}"
    )
    assert compact(data, 40) == "{create, data, default, name}"
    assert compact("x" * 100, 10) == "xxxxxxxxx…"
    assert compact("line one\nline two") == '"line one…" (2 lines)'


def test_an_item_says_where_and_what() -> None:
    assert str(Item(("spec", "containers", "[guard]", "env"), "+ A=1")) == "spec.containers[guard].env: + A=1"
    assert str(Item((), "+ replicas: 2")) == "+ replicas: 2"


def test_no_change_is_no_line() -> None:
    assert summarise(GPU_OPERATOR, copy.deepcopy(GPU_OPERATOR), []) == ()
