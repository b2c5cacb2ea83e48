"""Every class of costly or never-working configuration, through the real program.

Each case runs `__main__.py` under the mocks and expects one refusal line that names the full key and shows
the value, with nothing registered and a message free of Python vocabulary (a `RunError`, so `pulumi up`
prints it without a traceback).
"""

import json
import re
from typing import Any

import pulumi
import pytest

from config.errors import ConfigError
from synth.runner import monitor_for, run_program
from tests.helpers import config

GPU_POOL: dict[str, Any] = {
    "name": "gpu-inference",
    "instanceFamilies": ["g5", "g6"],
    "limits": {"cpu": "256", "memory": "1Ti", "nvidia.com/gpu": "16"},
    "terminationGracePeriod": "1h",  # an expiring pool without it is warned about
}
CPU_POOL: dict[str, Any] = {"name": "burst", "kind": "cpu", "limits": {"cpu": "64"}}
PYTHON_WORDS = re.compile(
    r"\b(tuple|dict|dictionary|list\[|instance of|after validation|pydantic|str|int|float|bool|NoneType|"
    r"pattern|Input should|Value error)\b|\^|\$'"
)


def gpu(**changes: Any) -> dict[str, Any]:
    return {**GPU_POOL, **changes}


def budget(**fields: Any) -> dict[str, Any]:
    return gpu(disruption={"consolidateAfter": "5m", "budgets": [{"nodes": "0", **fields}]})


def refusal(raw: dict[str, str]) -> str:
    """The single problem line the program refuses `raw` with; asserts nothing was registered."""
    monitor = monitor_for(raw)
    with pytest.raises(ConfigError) as caught:
        run_program(raw, monitor=monitor)
    assert monitor.registrations == []
    error = caught.value
    assert isinstance(error, pulumi.RunError)
    assert "Traceback" not in str(error)
    assert len(error.problems) == 1, str(error)
    line = str(error.problems[0])
    assert not PYTHON_WORDS.search(line), line
    return line


def refused(region: str = "us-west-2", **sections: Any) -> str:
    return refusal(config(region, **sections))


# --- keys the program never reads -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        (
            "gpu_eks:nodePools",
            [GPU_POOL],
            ": is never read: gpu-eks reads gpu-eks:<section>, the AWS provider's aws:<setting> and the "
            "engine's pulumi:<setting>; did you mean gpu-eks:nodePools?",
        ),
        ("gpueks:network", {"cidr": "10.1.0.0/16"}, "did you mean gpu-eks:network?"),
        ("gpu-eks:nodepools", [GPU_POOL], "is no section of gpu-eks (sections: aws:profile, aws:region,"),
        (
            "gpu-eks:cluster.name",
            "ml-other",
            "gpu-eks:cluster.name = 'ml-other': is a key of its own, never read: gpu-eks:cluster is one "
            "structured value, so write name nested under it (gpu-eks:cluster: {...})",
        ),
        (
            "kubernetes:kubeconfig",
            "~/.kube/config",
            "kubernetes:kubeconfig = '~/.kube/config': is never read: gpu-eks reaches the cluster through "
            "Kubernetes providers built from the new cluster's own kubeconfig",
        ),
        (
            "aws:regoin",
            "us-east-1",
            "aws:regoin = 'us-east-1': is not a setting of the AWS provider (pulumi-aws), so nothing would "
            "read it; did you mean aws:region?",
        ),
        (
            "pulumi:disable-default-providers",
            ["aws"],
            "pulumi:disable-default-providers = '[\"aws\"]': disables the default AWS provider",
        ),
    ],
)
def test_keys_nothing_reads_are_refused_with_the_nearest_known_key(
    key: str, value: Any, expected: str
) -> None:
    shown = value if isinstance(value, str) else json.dumps(value)
    line = refusal({**config(), key: shown})
    assert line.startswith(f"{key} = {shown!r}"[:60]), line
    assert expected in line, line


def test_keys_the_aws_provider_and_the_engine_read_are_accepted() -> None:
    raw = {
        **config(),
        "aws:profile": "platform",
        "aws:defaultTags": json.dumps({"tags": {"team": "ml"}}),
        "pulumi:tags": json.dumps({"pulumi:template": "gpu-eks"}),
    }
    assert run_program(raw).resources


# --- budget schedules and durations ------------------------------------------------------------


SCHEDULE = "gpu-eks:nodePools[0].disruption.budgets[0].schedule"
DURATION = "gpu-eks:nodePools[0].disruption.budgets[0].duration"


@pytest.mark.parametrize(
    ("pool", "expected"),
    [
        (budget(schedule="0 25 * * *", duration="1h"), f"{SCHEDULE} = '0 25 * * *': must be a cron schedule"),
        (budget(schedule="0 8 * * mon-fry", duration="1h"), "day of week 'fry' is not a number or a name"),
        (
            budget(schedule="@every 1h", duration="1h"),
            "@every is not accepted by Karpenter's NodePool schema",
        ),
        (budget(schedule="0 8 * *", duration="1h"), "needs five fields"),
        (budget(schedule="TZ=Europe/Berlin 0 8 * * *", duration="1h"), "time zones are not supported"),
        (budget(schedule="0 0 30 2 *", duration="1h"), "never fires"),
        (
            budget(schedule="0 8 * * *", duration="90s"),
            f"{DURATION} = '90s': must be whole hours and minutes",
        ),
        (budget(schedule="0 8 * * *", duration="1.5h"), "write whole numbers (1h30m, not 1.5h)"),
        (budget(schedule="0 8 * * *", duration="0m"), f"{DURATION} = '0m': must be longer than zero"),
        (gpu(expireAfter="14d"), "gpu-eks:nodePools[0].expireAfter = '14d': must be a duration"),
        (
            gpu(disruption={"consolidateAfter": "99999999h"}),
            "gpu-eks:nodePools[0].disruption.consolidateAfter = '99999999h': must be a duration",
        ),
    ],
)
def test_schedules_and_durations_karpenter_cannot_read_are_refused(
    pool: dict[str, Any], expected: str
) -> None:
    line = refused(nodePools=[pool])
    assert expected in line, line


@pytest.mark.parametrize(
    ("schedule", "duration"),
    [
        ("0 7 * * mon-fri", "12h"),
        ("@daily", "1h30m"),
        ("*/15 9-17 * * 1-5", "10h0m0s"),
        ("0 0 29 2 *", "90m"),
        ("0 22 * * SAT,sun", "8h"),
        ("5/15 * ? * *", "30m"),
    ],
)
def test_schedules_karpenter_reads_are_declared_as_written(schedule: str, duration: str) -> None:
    run = run_program(config(nodePools=[budget(schedule=schedule, duration=duration)]))
    (pool,) = run.of_type("kubernetes:karpenter.sh/v1:NodePool")
    assert pool.inputs["spec"]["disruption"]["budgets"] == [
        {"nodes": "0", "schedule": schedule, "duration": duration}
    ]


# --- pools that can never launch -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("pool", "expected"),
    [
        (gpu(limits={"cpu": "0", "nvidia.com/gpu": "16"}), "limits.cpu = '0': must be above zero"),
        (gpu(limits={"nvidia.com/gpu": 0}), "limits.nvidia.com/gpu = 0: must be above zero"),
        (gpu(limits={"memory": "-1Gi", "nvidia.com/gpu": "4"}), "limits.memory = '-1Gi': must be above zero"),
        (
            gpu(limits={"cpu": "2", "nvidia.com/gpu": "16"}),
            "gpu-eks:nodePools[0].limits.cpu = '2': is below what the smallest instance this pool may launch "
            "brings (g5.xlarge: 4 vCPUs), so the pool could never launch a node; raise it to at least 4",
        ),
        (
            gpu(limits={"memory": "8Gi", "nvidia.com/gpu": "16"}),
            "limits.memory = '8Gi': is below what the smallest instance this pool may launch brings "
            "(g5.xlarge: 14.8Gi of memory)",
        ),
        # Karpenter weighs the memory it estimates before launch, 16 GiB less 7.5 % (14.8Gi), not the
        # node's allocatable (13.8Gi): 14Gi, between the two, launches nothing either.
        (
            gpu(limits={"memory": "14Gi", "nvidia.com/gpu": "16"}),
            "limits.memory = '14Gi': is below what the smallest instance this pool may launch brings "
            "(g5.xlarge: 14.8Gi of memory), so the pool could never launch a node; raise it to at least 15Gi",
        ),
        (
            gpu(instanceFamilies=["p5"], gpuCount={"min": 8}, limits={"nvidia.com/gpu": "4"}),
            "limits.nvidia.com/gpu = '4': is below what the smallest instance this pool may launch brings "
            "(p5.48xlarge: 8 GPUs)",
        ),
        (
            {**CPU_POOL, "instanceFamilies": ["m7j"]},
            "gpu-eks:nodePools[0].instanceFamilies[0] = 'm7j': is no EC2 instance family; did you mean m7i?",
        ),
        (
            {**CPU_POOL, "instanceTypes": ["c7i.xlarg"]},
            "gpu-eks:nodePools[0].instanceTypes[0] = 'c7i.xlarg': is no EC2 instance type; did you mean "
            "c7i.xlarge?",
        ),
        (
            {**CPU_POOL, "instanceFamilies": ["g5"]},
            "gpu-eks:nodePools[0].instanceFamilies[0] = 'g5': has NVIDIA GPUs",
        ),
        (
            {**CPU_POOL, "instanceFamilies": ["m7i"], "instanceTypes": ["c7i.large"]},
            "gpu-eks:nodePools[0]: these requirements match no amd64 instance type without GPUs",
        ),
        (
            {**CPU_POOL, "architecture": "arm64", "instanceFamilies": ["m7i"]},
            "gpu-eks:nodePools[0]: these requirements match no arm64 instance type without GPUs",
        ),
        (gpu(instanceTypes=["g6.xlarg"]), "g6.xlarg: no such instance type, did you mean g6.xlarge?"),
    ],
)
def test_pools_that_can_never_launch_are_refused(pool: dict[str, Any], expected: str) -> None:
    line = refused(nodePools=[pool])
    assert expected in line, line


def test_an_implausibly_large_cap_is_declared_with_a_warning_stating_the_worst_case() -> None:
    run = run_program(config(nodePools=[gpu(limits={"cpu": "100000", "nvidia.com/gpu": 2000})]))
    assert run.of_type("kubernetes:karpenter.sh/v1:NodePool")
    assert run.warnings == [
        "gpu-eks:nodePools[0].limits: pool gpu-inference: at its limits it may run up to 2000 instances and "
        "2000 GPUs at once (limits.nvidia.com/gpu over its smallest instance, g5.xlarge); check these caps "
        "are meant (more than 100 instances or 256 GPUs is unusual)"
    ]


# A pool that shares its GPUs caps them in what its pods request (pools/sharing.py), and its
# NodeOverlays make Karpenter count each candidate in those units too: the checks count so as well.
SLICED = gpu(instanceFamilies=["g6"], limits={"nvidia.com/gpu": "2"}, timeSlicing={"replicas": 4})
# 8 H100 per node, 7 MIG devices each.
P5_MIG = gpu(
    instanceFamilies=["p5"],
    gpuCount={"min": 8},
    limits={"nvidia.com/gpu": "8"},
    mig={"profile": "all-1g.10gb"},
)


@pytest.mark.parametrize(
    ("pool", "sections", "expected"),
    [
        (
            SLICED,
            {},
            "gpu-eks:nodePools[0].limits.nvidia.com/gpu = '2': is below what the smallest instance this pool "
            "may launch brings (g6.xlarge: 4 time-slices), so the pool could never launch a node; raise it "
            "to at least 4",
        ),
        (
            P5_MIG,
            {"gpuOperator": {"mig": {"strategy": "single"}}},
            "limits.nvidia.com/gpu = '8': is below what the smallest instance this pool may launch brings "
            "(p5.48xlarge: 56 MIG devices)",
        ),
        (
            P5_MIG,
            {"gpuOperator": {"mig": {"strategy": "mixed"}}},
            "(p5.48xlarge: 56 MIG devices)",
        ),
    ],
)
def test_a_gpu_cap_below_one_node_counts_in_the_pools_units(
    pool: dict[str, Any], sections: dict[str, Any], expected: str
) -> None:
    line = refused(nodePools=[pool], **sections)
    assert expected in line, line


@pytest.mark.parametrize(
    ("limit", "sections"),
    [
        ("4", {}),  # one g6.xlarge sliced 4 ways: exactly one node
        # Without NodeOverlays Karpenter counts the g6.xlarge's one GPU against the cap.
        ("2", {"karpenter": {"gpuSharingOverlays": False}}),
    ],
)
def test_a_gpu_cap_that_fits_one_node_in_karpenters_units_is_declared(
    limit: str, sections: dict[str, Any]
) -> None:
    run = run_program(config(nodePools=[{**SLICED, "limits": {"nvidia.com/gpu": limit}}], **sections))
    (pool,) = run.of_type("kubernetes:karpenter.sh/v1:NodePool")
    assert pool.inputs["spec"]["limits"] == {"nvidia.com/gpu": limit}


def test_the_worst_case_of_a_sliced_pool_counts_physical_gpus() -> None:
    """1000 time-slices, 4 per GPU: at most 250 GPUs (not 1000), on 250 one-GPU nodes."""
    pool = {**SLICED, "limits": {"nvidia.com/gpu": "1000"}}
    run = run_program(config(nodePools=[pool]))
    assert run.warnings == [
        "gpu-eks:nodePools[0].limits: pool gpu-inference: at its limits it may run up to 250 instances and "
        "250 GPUs (1000 time-slices) at once (limits.nvidia.com/gpu over its smallest instance, g6.xlarge); "
        "check these caps are meant (more than 100 instances or 256 GPUs is unusual)"
    ]
    assert run_program(config(nodePools=[{**SLICED, "limits": {"nvidia.com/gpu": "400"}}])).warnings == []


def test_committed_stacks_get_no_warning_but_their_placeholders(any_stack: Any) -> None:
    # Pulumi.prod.yaml is committed in its bootstrap state, with a documentation address where the
    # deployer's runner address goes (docs/private-production.md); both stacks name roles of an AWS
    # documentation account (tests/test_placeholders.py); prod's alert address and heartbeat URL lie under
    # example.com.
    placeholder = [w for w in any_stack.warnings if "a range reserved for documentation" in w]
    roles = [w for w in any_stack.warnings if "an example account of the AWS documentation" in w]
    alerting = [w for w in any_stack.warnings if "a domain reserved for examples" in w]
    assert any_stack.warnings == placeholder + roles + alerting
    assert len(alerting) == 2 * len(any_stack.of_type("aws:amp/workspace:Workspace"))
    allowed = any_stack.one("eks:index:Cluster").inputs.get("publicAccessCidrs", [])
    assert len(placeholder) == ("203.0.113.10/32" in allowed)


@pytest.mark.parametrize(
    ("endpoint", "expected"),
    [
        (
            {"publicAccessCidrs": ["198.51.100.0/28", "52.1.2.3/32"]},
            ["gpu-eks:cluster.endpoint.publicAccessCidrs[0] = '198.51.100.0/28': lies in 198.51.100.0/24"],
        ),
        (
            {"publicAccess": False, "privateAccessCidrs": ["10.1.0.0/16", "192.0.2.8/29"]},
            ["gpu-eks:cluster.endpoint.privateAccessCidrs[1] = '192.0.2.8/29': lies in 192.0.2.0/24"],
        ),
        (
            {"publicAccessCidrs": ["2001:db8::/48"]},
            ["publicAccessCidrs[0] = '2001:db8::/48': lies in 2001:db8::/32"],
        ),
        ({"publicAccessCidrs": ["203.0.114.0/24"]}, []),
    ],
)
def test_a_documentation_address_in_an_api_allow_list_is_warned_of(
    endpoint: dict[str, Any], expected: list[str]
) -> None:
    run = run_program(config(cluster={"name": "ml-test", "endpoint": endpoint}))
    assert run.of_type("eks:index:Cluster")
    assert len(run.warnings) == len(expected)
    for warning, start in zip(run.warnings, expected, strict=True):
        assert start in warning
        assert "no runner sends from" in warning
        assert "docs/private-production.md" in warning


def test_quantities_accept_unquoted_numbers_as_kubernetes_does() -> None:
    pool = gpu(limits={"cpu": 256, "memory": "1Ti", "nvidia.com/gpu": 16})
    pool["disruption"] = {"consolidateAfter": "5m", "budgets": [{"nodes": 1}]}
    (node_pool,) = run_program(config(nodePools=[pool])).of_type("kubernetes:karpenter.sh/v1:NodePool")
    assert node_pool.inputs["spec"]["limits"] == {"cpu": "256", "memory": "1Ti", "nvidia.com/gpu": "16"}
    assert node_pool.inputs["spec"]["disruption"]["budgets"] == [{"nodes": "1"}]


# --- what AWS (or Karpenter) would refuse mid-deploy -------------------------------------------------


@pytest.mark.parametrize(
    ("sections", "expected"),
    [
        (
            {"cluster": {"name": "a", "tags": {"aws:owner": "ml"}}},
            "gpu-eks:cluster.tags: tag key 'aws:owner': the aws: prefix is reserved for AWS",
        ),
        ({"cluster": {"name": "a", "tags": {"team": "ml#1"}}}, "tag value 'ml#1' contains '#'"),
        ({"cluster": {"name": "a", "tags": {"k" * 129: "v"}}}, "must have 1 to 128 characters, it has 129"),
        ({"cluster": {"name": "a", "tags": {"team": "x" * 257}}}, "values have at most 256 characters"),
        ({"cluster": {"name": "a", "tags": {f"t{i}": "v" for i in range(45)}}}, "has 45 tags"),
        (
            {"cluster": {"name": "a", "tags": {"cost": 1234}}},
            "gpu-eks:cluster.tags.cost = 1234: must be text",
        ),
        (
            {"cluster": {"name": "a", "tags": {"karpenter.sh/discovery": "x"}}},
            "marks the subnets and security group Karpenter launches nodes into",
        ),
        (
            {"cluster": {"name": "a", "endpoint": {"publicAccessCidrs": ["10.0.0.0/8"]}}},
            "gpu-eks:cluster.endpoint.publicAccessCidrs[0] = '10.0.0.0/8': must be a public range",
        ),
        (
            {
                "cluster": {
                    "name": "a",
                    "endpoint": {"publicAccessCidrs": ["198.51.100.0/24", "192.168.4.0/24"]},
                }
            },
            "gpu-eks:cluster.endpoint.publicAccessCidrs[1] = '192.168.4.0/24': must be a public range",
        ),
        (
            {"cluster": {"name": "a", "endpoint": {"publicAccessCidrs": ["100.64.0.0/10"]}}},
            "is private or reserved address space (100.64.0.0/10)",
        ),
        (
            {"nodePools": [gpu(ami="al2023@v1.2.3")]},
            "gpu-eks:nodePools[0].ami = 'al2023@v1.2.3': must be an AMI",
        ),
        (
            {"nodePools": [gpu(ami="bottlerocket@v20260714")]},
            "ami = 'bottlerocket@v20260714': must be an AMI",
        ),
        ({"nodePools": [gpu(ami="al2023@v20261399")]}, "20261399 is not a date"),
        ({"nodePools": [gpu(ami="al2023@20260714")]}, "ami = 'al2023@20260714': must be an AMI alias"),
        (
            {"nodePools": [gpu()], "gpuOperator": {"driverMode": "operator"}},
            "gpu-eks:gpuOperator.driverMode = 'operator': operator is not supported: GPU pools select their "
            "AMI by alias only",
        ),
        (
            {"nodePools": [gpu(ami="bottlerocket@1.40.0")], "gpuOperator": {"driverMode": "operator"}},
            "gpu-eks:gpuOperator.driverMode = 'operator': operator is not supported",
        ),
    ],
)
def test_what_aws_or_karpenter_would_refuse_mid_deploy_is_refused(
    sections: dict[str, Any], expected: str
) -> None:
    line = refused(**sections)
    assert expected in line, line


@pytest.mark.parametrize(
    ("region", "expected"),
    [
        ("us-west-3", "aws:region = 'us-west-3': must be an AWS region such as us-west-2"),
        ("cn-west-1", "aws:region = 'cn-west-1': must be an AWS region"),
        ("us-iso-east-1", "aws:region = 'us-iso-east-1': is a region of the aws-iso partition"),
        ("mars-1", "aws:region = 'mars-1': must be an AWS region such as us-west-2"),
    ],
)
def test_regions_that_do_not_exist_in_a_supported_partition_are_refused(region: str, expected: str) -> None:
    assert refused(region).startswith(expected)


# --- messages a person understands -------------------------------------------------------------


@pytest.mark.parametrize(
    ("sections", "expected"),
    [
        ({"nodePools": [gpu(gpuNames="l4")]}, "gpu-eks:nodePools[0].gpuNames = 'l4': must be a list"),
        ({"nodePools": {"name": "x"}}, "gpu-eks:nodePools: must be a list"),
        ({"cluster": {"name": "a", "systemNodes": 5}}, "gpu-eks:cluster.systemNodes = 5: must be a mapping"),
        (
            {"cluster": {"name": "a", "protect": "maybe"}},
            "gpu-eks:cluster.protect = 'maybe': must be true or false",
        ),
        ({"nodePools": [gpu(taints=[{"key": 1}])]}, "gpu-eks:nodePools[0].taints[0].key = 1: must be text"),
        ({"nodePools": [gpu(labels={"team": "ml team"})]}, "must be a Kubernetes label value"),
        ({"nodePools": [gpu(mig={"profile": "All 1g"})]}, "must be a mig-parted config name"),
        ({"gpuOperator": {"version": "26.7.0"}}, "gpu-eks:gpuOperator.version = '26.7.0': must be a chart"),
        (
            {"nodePools": [gpu(capacityTypes=["reserved"], capacityReservations=[{"id": "cr_1"}])]},
            "capacityReservations[0].id = 'cr_1': must be a reservation id such as cr-0123456789abcdef0",
        ),
    ],
)
def test_messages_use_the_words_of_the_stack_file(sections: dict[str, Any], expected: str) -> None:
    line = refused(**sections)
    assert expected in line, line


# --- scalars taken as written: no true for a number, no quoted number, no 1 for true ---------------------


@pytest.mark.parametrize(
    ("sections", "expected"),
    [
        (
            {"cluster": {"name": "a", "logRetentionDays": True}},
            "gpu-eks:cluster.logRetentionDays = true: must be a whole number, not true or false",
        ),
        (
            {"cluster": {"name": "a", "systemNodes": {"minSize": "3"}}},
            """gpu-eks:cluster.systemNodes.minSize = '3': must be a whole number, unquoted (3, not "3")""",
        ),
        (
            {"nodePools": [gpu(rootVolume={"sizeGib": 200.0})]},
            "gpu-eks:nodePools[0].rootVolume.sizeGib = 200.0: must be a whole number, without a decimal "
            "point",
        ),
        (
            {"nodePools": [gpu(timeSlicing={"replicas": "4"})]},
            "gpu-eks:nodePools[0].timeSlicing.replicas = '4': must be a whole number, unquoted "
            '(4, not "4")',
        ),
        (
            {"nodePools": [gpu(kubelet={"maxPods": False})]},
            "gpu-eks:nodePools[0].kubelet.maxPods = false: must be a whole number, not true or false",
        ),
        ({"karpenter": {"replicas": 2.0}}, "gpu-eks:karpenter.replicas = 2.0: must be a whole number"),
        (
            {"gpuOperator": {"mig": {"config": {"custom": [{"devices": ["0"], "mig-enabled": True}]}}}},
            "gpu-eks:gpuOperator.mig.config.custom[0].devices = ['0']: must be all or a non-empty list of "
            "GPU indexes, unquoted",
        ),
        (
            {"gpuOperator": {"mig": {"config": {"custom": [{"device-filter": 5, "mig-enabled": True}]}}}},
            "gpu-eks:gpuOperator.mig.config.custom[0].device-filter = 5: must be a PCI device ID such as "
            "0x233010DE, or a list of them",
        ),
        (
            {"cluster": {"name": "a", "protect": 1}},
            "gpu-eks:cluster.protect = 1: must be true or false, not a number",
        ),
        (
            {"cluster": {"name": "a", "protect": "yes"}},
            "gpu-eks:cluster.protect = 'yes': must be true or false, unquoted",
        ),
        (
            {"cluster": {"name": "a", "endpoint": {"publicAccess": "false"}}},
            "gpu-eks:cluster.endpoint.publicAccess = 'false': must be true or false, unquoted",
        ),
        ({"nodePools": [gpu(efa=0)]}, "gpu-eks:nodePools[0].efa = 0: must be true or false, not a number"),
        (
            {"karpenter": {"featureGates": {"nodeRepair": "on"}}},
            "gpu-eks:karpenter.featureGates.nodeRepair = 'on': must be true or false, unquoted",
        ),
        (
            {"smokeTest": {"enabled": "true"}},
            "gpu-eks:smokeTest.enabled = 'true': must be true or false, unquoted",
        ),
    ],
)
def test_numbers_and_switches_are_taken_as_written(sections: dict[str, Any], expected: str) -> None:
    line = refused(**sections)
    assert line.startswith(expected), line
    assert not re.search(r"\b(True|False|None)\b", line), line


# --- the keys of issue 10 (private access, automation, add-ons, upgrades, logs, profile, node guard) ----


@pytest.mark.parametrize(
    ("sections", "expected"),
    [
        (
            {"cluster": {"name": "a", "endpoint": {"privateAccessCidrs": ["10.0.0.1/8"]}}},
            "gpu-eks:cluster.endpoint.privateAccessCidrs[0] = '10.0.0.1/8': must be a CIDR block such as "
            "203.0.113.0/24 (10.0.0.1/8 has host bits set)",
        ),
        (
            {"cluster": {"name": "a", "endpoint": {"privateAccessSecurityGroupIds": ["sg-runner"]}}},
            "gpu-eks:cluster.endpoint.privateAccessSecurityGroupIds[0] = 'sg-runner': must be a security "
            "group id such as sg-0123456789abcdef0",
        ),
        (
            {"cluster": {"name": "a", "endpoint": {"privateAccessSecurityGroupIds": "sg-0123456789abcdef0"}}},
            "gpu-eks:cluster.endpoint.privateAccessSecurityGroupIds = 'sg-0123456789abcdef0': must be a list",
        ),
        (
            {"cluster": {"name": "a", "automation": {"previewRole": "x"}}},
            "gpu-eks:cluster.automation.previewRole = 'x': unknown key, did you mean previewRoleArn?",
        ),
        (
            {"cluster": {"name": "a", "automation": {"deployRoleArn": "arn:aws:iam::111122223333:user/ci"}}},
            "gpu-eks:cluster.automation.deployRoleArn = 'arn:aws:iam::111122223333:user/ci': must be an IAM "
            "role ARN such as arn:aws:iam::111122223333:role/platform-admin",
        ),
        (
            {"cluster": {"name": "a", "addons": {"vpcCni": {"version": "1.19"}}}},
            "gpu-eks:cluster.addons.vpcCni.version = '1.19': must be an EKS add-on build such as "
            "v1.19.2-eksbuild.1",
        ),
        (
            {"cluster": {"name": "a", "addons": {"coredns": {"version": 1.11}}}},
            "gpu-eks:cluster.addons.coredns.version = 1.11: must be text (quote it in YAML",
        ),
        (
            {"cluster": {"name": "a", "addons": {"vpc-cni": {"version": "v1.19.2-eksbuild.1"}}}},
            "gpu-eks:cluster.addons.vpc-cni: unknown key, did you mean vpcCni?",
        ),
        (
            {"cluster": {"name": "a", "upgradePolicy": "standard"}},
            "gpu-eks:cluster.upgradePolicy = 'standard': must be 'STANDARD' or 'EXTENDED'",
        ),
        (
            {"cluster": {"name": "a", "logRetentionDays": 100}},
            "gpu-eks:cluster.logRetentionDays = 100: must be one of the periods CloudWatch Logs accepts: "
            "1, 3,",
        ),
        (
            {"cluster": {"name": "a", "logRetentionDays": "90d"}},
            "gpu-eks:cluster.logRetentionDays = '90d': must be a whole number",
        ),
        (
            {"gpuNodeGuard": {"initializationTimeout": "1.5h"}},
            "gpu-eks:gpuNodeGuard.initializationTimeout = '1.5h': must be a duration such as 30s, 5m or 336h "
            "(units s, m, h), or Never; write whole numbers (1h30m, not 1.5h)",
        ),
        (
            {"gpuNodeGuard": {"initializationTimeout": "5m"}},
            "gpu-eks:gpuNodeGuard.initializationTimeout = '5m': must be at least 15m",
        ),
        (
            {"gpuNodeGuard": {"image": "python:3.13-slim"}},
            "gpu-eks:gpuNodeGuard.image = 'python:3.13-slim': must be an image pinned by digest, such as "
            "registry/repo:tag@sha256:<64 hex digits>",
        ),
        (
            {"gpuNodeGuard": {"syncInterval": 30}},
            "gpu-eks:gpuNodeGuard.syncInterval = 30: unknown key, did you mean syncIntervalSeconds?",
        ),
        (
            {"nodePools": [gpu(initializationTimeout="14d")]},
            "gpu-eks:nodePools[0].initializationTimeout = '14d': must be a duration such as 30s, 5m or 336h "
            "(units s, m, h), or Never; days are not a unit: write hours (14d is 336h)",
        ),
        (
            {"nodePools": [gpu(initializationTimeout=30)]},
            "gpu-eks:nodePools[0].initializationTimeout = 30: must be text",
        ),
        (
            {"karpenter": {"gpuSharingOverlays": 2}},
            "gpu-eks:karpenter.gpuSharingOverlays = 2: must be true or false",
        ),
    ],
)
def test_the_day_2_keys_are_refused_in_the_words_of_the_stack_file(
    sections: dict[str, Any], expected: str
) -> None:
    line = refused(**sections)
    assert line.startswith(expected), line


@pytest.mark.parametrize("profile", ["", "  ", "[ml-platform]"])
def test_an_aws_profile_that_names_no_profile_is_refused(profile: str) -> None:
    line = refusal({**config(), "aws:profile": profile})
    assert line == (
        f"aws:profile = {profile!r}: must be the name of an AWS CLI profile (a [profile <name>] of "
        "~/.aws/config), such as ml-platform; leave aws:profile out to use the default credentials"
    )


@pytest.mark.parametrize(
    ("cluster", "key"),
    [
        ({"adminRoleArns": ["arn:aws:iam::111122223333:role/platform-admin"]}, "adminRoleArns[0]"),
        (
            {"automation": {"previewRoleArn": "arn:aws:iam::111122223333:role/ci"}},
            "automation.previewRoleArn",
        ),
        (
            {"automation": {"deployRoleArn": "arn:aws-us-gov:iam::111122223333:role/ci"}},
            "automation.deployRoleArn",
        ),
    ],
)
def test_a_role_of_another_partition_than_the_region_is_refused(cluster: dict[str, Any], key: str) -> None:
    line = refused("cn-north-1", cluster={"name": "a", **cluster})
    assert line.startswith(f"gpu-eks:cluster.{key} = 'arn:aws"), line
    assert "but aws:region cn-north-1 is in aws-cn: roles never cross partitions" in line
    assert "use a role ARN of the form arn:aws-cn:iam::<account>:role/<name>" in line


# --- the keys of issue 13 (observability) ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("sections", "expected"),
    [
        (
            {"observability": {"backend": False}},
            "gpu-eks:observability.backend = false: must be 'none', 'inCluster' or 'managed' (an unquoted "
            "off in YAML reads as false: write none)",
        ),
        (
            {"observability": {"backend": "prometheus"}},
            "gpu-eks:observability.backend = 'prometheus': must be 'none', 'inCluster' or 'managed'",
        ),
        (
            {"observability": {"prometheus": {"retention": "15 days"}}},
            "gpu-eks:observability.prometheus.retention = '15 days': must be a Prometheus retention such as "
            "12h, 15d or 8w",
        ),
        (
            {"observability": {"prometheus": {"storageGib": "100Gi"}}},
            "gpu-eks:observability.prometheus.storageGib = '100Gi': must be a whole number",
        ),
        (
            {"observability": {"prometheus": {"memory": "4 GB"}}},
            "gpu-eks:observability.prometheus.memory = '4 GB': must be a Kubernetes quantity such as",
        ),
        (
            {"observability": {"backend": "managed", "prometheus": {"storageGib": 500}}},
            "gpu-eks:observability.prometheus.storageGib = 500: applies to the inCluster backend only: with "
            "backend managed the workspace keeps the samples (150 days) and the in-cluster agent only its "
            "write-ahead log; remove it",
        ),
        (
            {"observability": {"backend": "managed", "prometheus": {"retention": "30d"}}},
            "gpu-eks:observability.prometheus.retention = '30d': applies to the inCluster backend only",
        ),
        (
            {"observability": {"grafana": True}},
            "gpu-eks:observability.grafana = true: unknown key; accepted keys: backend, namespace, "
            "prometheus, timeoutSeconds",
        ),
        (
            {"observability": {"timeoutSecond": 900}},
            "gpu-eks:observability.timeoutSecond = 900: unknown key, did you mean timeoutSeconds?",
        ),
        (
            {"observability": {"namespace": "Monitoring"}},
            "gpu-eks:observability.namespace = 'Monitoring': must be a DNS-1123 label",
        ),
        (
            {"observability": "managed"},
            "gpu-eks:observability = 'managed': must be a mapping (key: value) with keys such as backend",
        ),
        (
            {"nodePools": [GPU_POOL], "gpuOperator": {"dcgmExporter": {"serviceMonitor": True}}},
            "gpu-eks:gpuOperator.dcgmExporter.serviceMonitor = true: needs the Prometheus Operator CRDs, "
            "which only an observability backend installs: set gpu-eks:observability.backend to inCluster "
            "or managed, or leave serviceMonitor unset",
        ),
    ],
)
def test_the_observability_keys_are_refused_in_the_words_of_the_stack_file(
    sections: dict[str, Any], expected: str
) -> None:
    line = refused(**sections)
    assert line.startswith(expected), line


def test_a_service_monitor_opt_out_with_a_backend_is_declared() -> None:
    result = run_program(
        config(
            nodePools=[GPU_POOL],
            gpuOperator={"dcgmExporter": {"serviceMonitor": False}},
            observability={"backend": "inCluster"},
        )
    )
    release = result.one("kubernetes:helm.sh/v3:Release", "gpu-operator")
    assert release.inputs["values"]["dcgmExporter"]["serviceMonitor"] == {"enabled": False}


# --- teams ---------------------------------------------------------------------------------------------

TEAM_ROLE = "arn:aws:iam::444455556666:role/ml-research"


def team(**changes: Any) -> dict[str, Any]:
    return {"name": "research", "roleArns": [TEAM_ROLE], **changes}


@pytest.mark.parametrize(
    ("sections", "expected"),
    [
        (
            {"teams": [team(name="Research")]},
            "gpu-eks:teams[0].name = 'Research': must be a DNS-1123 label: lower-case letters, digits and "
            "'-', letter or digit at both ends",
        ),
        ({"teams": [team(name="a" * 64)]}, "gpu-eks:teams[0].name = 'aaaaaaaa"),
        (
            {"teams": [team(roleArns=[])]},
            "gpu-eks:teams[0].roleArns = []: must list at least one role: a team without one gives nobody "
            "access",
        ),
        (
            {"teams": [team(roleArns=["arn:aws:iam::444455556666:user/ml"])]},
            "gpu-eks:teams[0].roleArns[0] = 'arn:aws:iam::444455556666:user/ml': must be an IAM role ARN "
            "such as arn:aws:iam::111122223333:role/platform-admin",
        ),
        (
            {"teams": [team(roleArns=["arn:aws:iam::444455556666:role/a"] * 2)]},
            "gpu-eks:teams[0].roleArns = ['arn:aws:iam::444455556666:role/a', "
            "'arn:aws:iam::444455556666:role/a']: lists arn:aws:iam::444455556666:role/a more than once",
        ),
        (
            {"teams": [team(access="write")]},
            "gpu-eks:teams[0].access = 'write': must be 'view', 'edit' or 'admin'",
        ),
        (
            {"teams": [team(gpuQuota=-1)]},
            "gpu-eks:teams[0].gpuQuota = -1: must be greater than or equal to 0",
        ),
        (
            {"teams": [team(gpuQuota="8")]},
            "gpu-eks:teams[0].gpuQuota = '8': must be a whole number, unquoted (8, not \"8\")",
        ),
        (
            {"teams": [team(podSecurity="strict")]},
            "gpu-eks:teams[0].podSecurity = 'strict': must be 'privileged', 'baseline' or 'restricted'",
        ),
        (
            {"teams": [team(quota=3)]},
            "gpu-eks:teams[0].quota = 3: unknown key, did you mean gpuQuota? Accepted keys: name, roleArns, "
            "access, gpuQuota, podSecurity",
        ),
        (
            {"teams": [team(), team(access="view")]},
            "gpu-eks:teams[1].name = 'research': is already the name of teams[0]; team names must be unique",
        ),
    ],
)
def test_team_entries_are_refused_in_the_words_of_the_stack_file(
    sections: dict[str, Any], expected: str
) -> None:
    line = refused(**sections)
    assert line.startswith(expected), line


@pytest.mark.parametrize(
    ("name", "sections", "why"),
    [
        ("kube-system", {}, "is a namespace every Kubernetes cluster has"),
        ("default", {}, "is a namespace every Kubernetes cluster has"),
        ("kube-flow", {}, "is a name Kubernetes reserves for its own namespaces (kube-*)"),
        ("gpu-operator", {}, "is the namespace of the GPU Operator (gpu-eks:gpuOperator.namespace)"),
        (
            "ml-gpu",
            {"gpuOperator": {"namespace": "ml-gpu"}},
            "is the namespace of the GPU Operator (gpu-eks:gpuOperator.namespace)",
        ),
        (
            "ml",
            {"karpenter": {"namespace": "ml"}},
            "is the namespace of Karpenter (gpu-eks:karpenter.namespace)",
        ),
        (
            "monitoring",
            {"observability": {"backend": "managed"}},
            "is the namespace of observability (gpu-eks:observability.namespace)",
        ),
        (
            "gpu-node-guard",
            {"nodePools": [GPU_POOL]},
            "is the namespace of the GPU node guard (gpu-eks:gpuNodeGuard.namespace)",
        ),
        (
            "gpu-smoke-test",
            {"nodePools": [GPU_POOL], "smokeTest": {"enabled": True, "nodePool": "gpu-inference"}},
            "is the namespace of the smoke test (gpu-eks:smokeTest.namespace)",
        ),
    ],
)
def test_a_team_cannot_take_a_namespace_the_cluster_or_gpu_eks_uses(
    name: str, sections: dict[str, Any], why: str
) -> None:
    line = refused(**sections, teams=[team(name=name)])
    assert line.startswith(f"gpu-eks:teams[0].name = {name!r}: {why}"), line
    assert line.endswith("; a team's namespace must be its own: choose another name"), line


def test_a_namespace_of_something_not_installed_is_free_for_a_team() -> None:
    # No observability backend, no GPU pool, no smoke test: their namespaces are not used.
    run = run_program(
        config(teams=[team(name=n) for n in ("monitoring", "gpu-node-guard", "gpu-smoke-test")])
    )
    namespaces = {
        r.inputs["metadata"]["name"] for r in run.resources if r.type == "kubernetes:core/v1:Namespace"
    }
    assert {"monitoring", "gpu-node-guard", "gpu-smoke-test"} <= namespaces


@pytest.mark.parametrize(
    ("cluster", "where"),
    [
        ({"adminRoleArns": [TEAM_ROLE]}, "gpu-eks:cluster.adminRoleArns[0]"),
        ({"automation": {"previewRoleArn": TEAM_ROLE}}, "gpu-eks:cluster.automation.previewRoleArn"),
        ({"automation": {"deployRoleArn": TEAM_ROLE}}, "gpu-eks:cluster.automation.deployRoleArn"),
    ],
)
def test_a_team_role_that_is_cluster_admin_already_is_refused(cluster: dict[str, Any], where: str) -> None:
    line = refused(cluster={"name": "a", **cluster}, teams=[team()])
    assert line == (
        f"gpu-eks:teams[0].roleArns[0] = '{TEAM_ROLE}': is also listed as {where}, hence cluster-admin "
        "already, and EKS allows one access entry per role: list it in one place only (in the team, to "
        "narrow its access)"
    )


def test_a_team_role_of_another_partition_than_the_region_is_refused() -> None:
    line = refused("cn-north-1", teams=[team()])
    assert line.startswith(f"gpu-eks:teams[0].roleArns[0] = '{TEAM_ROLE}': is a role of the aws partition"), (
        line
    )
    assert "use a role ARN of the form arn:aws-cn:iam::<account>:role/<name>" in line
