"""Config validation: every mistake is refused before any resource exists, naming the key and value."""

import json

import pytest

from config.errors import ConfigError
from config.stack import parse_stack_config
from tests.helpers import config, run_failing


def problems(**sections: object) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_stack_config(config(**sections))  # type: ignore[arg-type]
    return [str(p) for p in caught.value.problems]


def test_defaults_fill_a_minimal_config() -> None:
    parsed = parse_stack_config(config(cluster={"name": "ml-test"}))
    assert parsed.region == "us-west-2"
    assert parsed.partition == "aws"
    assert parsed.cluster.kubernetes_version == "1.35"
    assert parsed.cluster.system_nodes.min_size == 2
    assert parsed.network.nat_gateways == "single"
    assert parsed.network.availability_zones == 3


@pytest.mark.parametrize(
    ("region", "partition"), [("us-west-2", "aws"), ("cn-north-1", "aws-cn"), ("us-gov-west-1", "aws-us-gov")]
)
def test_partition_follows_region(region: str, partition: str) -> None:
    assert parse_stack_config(config(region=region)).partition == partition


@pytest.mark.parametrize(
    ("sections", "expected"),
    [
        # unknown key
        (
            {"cluster": {"name": "a", "kubernetesVersoin": "1.35"}},
            "gpu-eks:cluster.kubernetesVersoin = '1.35': unknown key, did you mean kubernetesVersion? "
            "Accepted keys: name, kubernetesVersion",
        ),
        # wrong type
        (
            {"cluster": {"name": "a", "systemNodes": {"minSize": "two"}}},
            "gpu-eks:cluster.systemNodes.minSize = 'two': must be a whole number",
        ),
        # out of range
        (
            {"cluster": {"name": "a", "systemNodes": {"minSize": 1}}},
            "gpu-eks:cluster.systemNodes.minSize = 1: must be greater than or equal to 2",
        ),
        (
            {"network": {"availabilityZones": 4}},
            "gpu-eks:network.availabilityZones = 4: must be less than or equal to 3",
        ),
        # not a supported version (and the YAML float trap)
        (
            {"cluster": {"name": "a", "kubernetesVersion": 1.3}},
            "gpu-eks:cluster.kubernetesVersion = 1.3: must be one of 1.33, 1.34, 1.35, 1.36",
        ),
        # enum
        (
            {"network": {"natGateways": "double"}},
            "gpu-eks:network.natGateways = 'double': must be 'single' or 'perAz'",
        ),
        # malformed CIDR
        (
            {"network": {"cidr": "10.20.0.0/33"}},
            "gpu-eks:network.cidr = '10.20.0.0/33': must be an IPv4 network in CIDR form",
        ),
        (
            {"network": {"cidr": "10.0.0.0/8"}},
            "gpu-eks:network.cidr = '10.0.0.0/8': must be a VPC CIDR from /16",
        ),
        # contradictory settings
        (
            {"cluster": {"name": "a", "systemNodes": {"minSize": 3, "desiredSize": 2}}},
            "gpu-eks:cluster.systemNodes: sizes must satisfy minSize <= desiredSize <= maxSize",
        ),
        (
            {"cluster": {"name": "a", "endpoint": {"publicAccess": False, "privateAccess": False}}},
            "gpu-eks:cluster.endpoint: publicAccess and privateAccess are both false",
        ),
        (
            {"cluster": {"name": "a", "systemNodes": {"instanceTypes": ["m7g.large"]}}},
            "gpu-eks:cluster.systemNodes: instance types m7g.large do not match amiType "
            "AL2023_x86_64_STANDARD",
        ),
        (
            {
                "network": {
                    "cidr": "10.1.0.0/16",
                    "existing": {
                        "vpcId": "vpc-0123456789abcdef0",
                        "privateSubnetIds": ["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"],
                    },
                }
            },
            "gpu-eks:network: cidr describe a new VPC but `existing` names one to use",
        ),
        # malformed ids and ARNs
        (
            {"cluster": {"name": "a", "adminRoleArns": ["arn:aws:iam::1234:user/bob"]}},
            "gpu-eks:cluster.adminRoleArns[0] = 'arn:aws:iam::1234:user/bob': must be an IAM role ARN",
        ),
        ({"cluster": {"name": "9lives"}}, "gpu-eks:cluster.name = '9lives': must start with a letter"),
        ({"cluster": {}}, "gpu-eks:cluster.name: is required but not set"),
    ],
)
def test_each_mistake_names_key_value_and_what_is_accepted(
    sections: dict[str, object], expected: str
) -> None:
    found = problems(**sections)
    assert len(found) == 1, found
    assert found[0].startswith(expected), found[0]


def test_malformed_region_is_refused() -> None:
    found = problems(region="us-westish")
    assert found == [
        "aws:region = 'us-westish': must be an AWS region such as us-west-2 (not one the AWS provider "
        "knows); did you mean us-west-2?"
    ]


def test_missing_region_and_cluster_are_both_reported() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_stack_config({})
    assert [str(p) for p in caught.value.problems] == [
        "aws:region: is required but not set",
        "gpu-eks:cluster: is required but not set",
    ]


def test_unknown_section_is_refused() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_stack_config({**config(), "gpu-eks:clustr": json.dumps({"name": "x"})})
    assert str(caught.value.problems[0]) == (
        """gpu-eks:clustr = '{"name": "x"}': is no section of gpu-eks (sections: aws:profile, aws:region, """
        "gpu-eks:cluster, gpu-eks:cost, gpu-eks:efaDevicePlugin, gpu-eks:gpuNodeGuard, gpu-eks:gpuOperator, "
        "gpu-eks:karpenter, gpu-eks:network, gpu-eks:nodePools, gpu-eks:observability, gpu-eks:smokeTest, "
        "gpu-eks:teams); "
        "did you mean "
        "gpu-eks:cluster?"
    )


def test_a_section_given_as_plain_text_is_refused() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_stack_config({**config(), "gpu-eks:network": "10.0.0.0/16"})
    assert str(caught.value.problems[0]) == (
        "gpu-eks:network: must be a structured value (a YAML mapping or list), not a string"
    )


def test_every_problem_is_reported_at_once() -> None:
    found = problems(cluster={"name": "a", "systemNodes": {"maxSize": 1}}, network={"natGateways": "x"})
    assert [p.split(" ")[0] for p in found] == [
        "gpu-eks:cluster.systemNodes.maxSize",
        "gpu-eks:network.natGateways",
    ]


def test_secret_values_are_never_printed() -> None:
    raw = config(cluster={"name": "a", "adminRoleArns": ["not-an-arn"]})
    with pytest.raises(ConfigError) as caught:
        parse_stack_config(raw, frozenset({"gpu-eks:cluster"}))
    assert "not-an-arn" not in str(caught.value)
    assert "gpu-eks:cluster.adminRoleArns[0] = '[secret]'" in str(caught.value)


def test_the_error_reads_as_one_message_without_a_traceback() -> None:
    import pulumi

    with pytest.raises(ConfigError) as caught:
        parse_stack_config(config(network={"natGateways": "x", "cidr": "nope"}))
    assert isinstance(caught.value, pulumi.RunError)  # the CLI prints a RunError's message alone
    assert str(caught.value).splitlines()[0] == "Invalid stack configuration (2 problems):"


@pytest.mark.parametrize(
    "sections",
    [
        {"cluster": {"name": "a", "kubernetesVersion": "1.29"}},
        {"network": {"cidr": "300.1.0.0/16"}},
        {"cluster": {"name": "a"}, "nodePoolz": []},
    ],
)
def test_the_program_registers_nothing_when_config_is_wrong(sections: dict[str, object]) -> None:
    error, monitor = run_failing(**sections)
    assert isinstance(error, ConfigError)
    assert monitor.registrations == []
