"""VPC endpoints over time: adding, reordering and removing them, each judged by the plan `pulumi up` would
carry out (the committed stack run twice, the second time with the change)."""

from tests.plan.test_transitions import Sections, ops, transition

ENDPOINT = "aws:ec2/vpcEndpoint:VpcEndpoint"


def endpoints(sections: Sections) -> dict[str, object]:
    network: dict[str, object] = sections["gpu-eks:network"].setdefault("endpoints", {})
    return network


def test_adding_interface_endpoints_to_dev_creates_them_and_touches_nothing_else() -> None:
    result = transition("dev", lambda s: endpoints(s).update(interface=["sts", "ec2"]))
    assert ops(result, "create") == {
        ("aws:ec2/securityGroup:SecurityGroup", "network-endpoints"),
        ("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule", "network-endpoints-https"),
        (ENDPOINT, "network-sts"),
        (ENDPOINT, "network-ec2"),
    }
    assert [s for s in result.steps if s.op != "create"] == []
    assert result.findings == ()


def test_dropping_the_s3_gateway_endpoint_deletes_it_alone() -> None:
    result = transition("dev", lambda s: endpoints(s).update(s3Gateway=False))
    assert [(s.op, s.type, s.name) for s in result.steps] == [("delete", ENDPOINT, "network-s3")]


def test_removing_one_interface_endpoint_deletes_only_that_one() -> None:
    def drop_ssm(s: Sections) -> None:
        interface = endpoints(s)["interface"]
        assert isinstance(interface, list)
        interface.remove("ssm")

    result = transition("prod", drop_ssm)
    assert [(s.op, s.type, s.name) for s in result.steps] == [("delete", ENDPOINT, "network-ssm")]


def test_reordering_the_interface_endpoints_changes_nothing() -> None:
    def reverse(s: Sections) -> None:
        interface = endpoints(s)["interface"]
        assert isinstance(interface, list)
        interface.reverse()

    assert transition("prod", reverse).steps == ()
