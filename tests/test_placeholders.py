"""Documentation placeholders (an allow-list address in a documentation range, a role in an AWS
documentation account): `pulumi preview` warns about each, naming the key; `pulumi up` refuses them
before any resource, in the same list as every other refusal. The offline synth stands for a preview."""

import json
from pathlib import Path
from typing import Any

import pulumi
import pytest

from config.errors import ConfigError
from config.operation import OFFLINE_OPERATION, current_operation
from facts.placeholders import DOCUMENTATION_ACCOUNTS, documentation_account
from synth.__main__ import main as synth_main
from synth.mocks import AwsMocks
from synth.runner import RecordingMonitor, run_program, stack_config
from tests.conftest import stack_run
from tests.helpers import config

PROD_PLACEHOLDERS = [
    "gpu-eks:cluster.endpoint.publicAccessCidrs[0]",
    "gpu-eks:cluster.adminRoleArns[0]",
    "gpu-eks:cluster.adminRoleArns[1]",
    "gpu-eks:cluster.automation.previewRoleArn",
    "gpu-eks:teams[0].roleArns[0]",
    "gpu-eks:teams[1].roleArns[0]",
    "gpu-eks:observability.alerting.emailSubscriptions[0]",
    "gpu-eks:observability.alerting.heartbeatUrl",
]
OWN_ACCOUNT = "302263040123"  # any account that is not a documentation example


def keys_of_warnings(warnings: list[str]) -> list[str]:
    return [w.split(" = ", 1)[0] for w in warnings]


def test_a_preview_of_the_committed_prod_warns_of_each_placeholder_by_key() -> None:
    result = stack_run("prod")
    assert keys_of_warnings(result.warnings) == PROD_PLACEHOLDERS
    assert "put your runner's egress address there before pulumi up" in result.warnings[0]
    for warning in result.warnings[1:6]:
        assert "is a role of account 111122223333, an example account of the AWS documentation" in warning
    for warning in result.warnings[6:]:
        assert "lies under example.com, a domain reserved for examples" in warning
    assert result.of_type("eks:index:Cluster")


@pytest.mark.parametrize(
    ("stack", "expected"),
    [
        ("prod", PROD_PLACEHOLDERS),
        (
            "dev",
            [
                "gpu-eks:cluster.adminRoleArns[0]",
                "gpu-eks:cluster.automation.previewRoleArn",
                "gpu-eks:teams[0].roleArns[0]",
            ],
        ),
    ],
)
def test_the_same_configuration_is_refused_as_an_up_before_any_resource(
    stack: str, expected: list[str]
) -> None:
    monitor = RecordingMonitor(AwsMocks("us-west-2"))
    with pytest.raises(ConfigError) as refused:
        run_program(stack_config(stack), stack=stack, monitor=monitor, operation="up")
    assert [p.key for p in refused.value.problems] == expected
    for problem in refused.value.problems:
        assert str(problem).endswith("; pulumi preview only warns, pulumi up refuses it")
    assert monitor.registrations == []


def test_an_up_with_real_values_goes_ahead() -> None:
    values = stack_config("prod")
    cluster = json.loads(values["gpu-eks:cluster"])
    cluster["endpoint"]["publicAccessCidrs"] = ["34.210.12.7/32"]
    cluster["adminRoleArns"] = [f"arn:aws:iam::{OWN_ACCOUNT}:role/platform-admin"]
    cluster["automation"] = {"previewRoleArn": f"arn:aws:iam::{OWN_ACCOUNT}:role/gpu-eks-prod-preview"}
    observability = json.loads(values["gpu-eks:observability"])
    observability["alerting"] |= {
        "emailSubscriptions": ["ml-oncall@corp.acme.io"],
        "heartbeatUrl": "https://hc-ping.com/3f1c2b7e-8d4a-4e6b-9a0f-5c2d1e7b8a90",
    }
    teams = json.loads(values["gpu-eks:teams"])
    for team in teams:
        team["roleArns"] = [arn.replace("111122223333", OWN_ACCOUNT) for arn in team["roleArns"]]
    changed = {
        "gpu-eks:cluster": json.dumps(cluster),
        "gpu-eks:observability": json.dumps(observability),
        "gpu-eks:teams": json.dumps(teams),
    }
    result = run_program({**values, **changed}, stack="prod", operation="up")
    assert result.warnings == []
    assert result.of_type("eks:index:Cluster")


def test_a_placeholder_is_refused_alongside_every_other_problem() -> None:
    raw = config(
        cluster={
            "name": "ml-test",
            "adminRoleArns": ["arn:aws:iam::123456789012:role/admin"],
            "automation": {"deployRoleArn": f"arn:aws:iam::{OWN_ACCOUNT}:role/deploy"},
        },
        karpenter={"replicas": 9},
    )
    with pytest.raises(ConfigError) as refused:
        run_program(raw, operation="up")
    assert [p.key for p in refused.value.problems] == [
        "gpu-eks:karpenter.replicas",
        "gpu-eks:cluster.adminRoleArns[0]",
    ]


@pytest.mark.parametrize("account", sorted(DOCUMENTATION_ACCOUNTS))
def test_every_documentation_account_is_a_placeholder_in_every_role_key(account: str) -> None:
    cluster: dict[str, Any] = {
        "name": "ml-test",
        "adminRoleArns": [f"arn:aws:iam::{account}:role/admin"],
        "automation": {
            "previewRoleArn": f"arn:aws:iam::{account}:role/preview",
            "deployRoleArn": f"arn:aws:iam::{account}:role/deploy",
        },
    }
    teams = [{"name": "research", "roleArns": [f"arn:aws:iam::{account}:role/research"]}]
    with pytest.raises(ConfigError) as refused:
        run_program(config(cluster=cluster, teams=teams), operation="up")
    assert [p.key for p in refused.value.problems] == [
        "gpu-eks:cluster.adminRoleArns[0]",
        "gpu-eks:cluster.automation.previewRoleArn",
        "gpu-eks:cluster.automation.deployRoleArn",
        "gpu-eks:teams[0].roleArns[0]",
    ]
    assert documentation_account(f"arn:aws-cn:iam::{account}:role/x") == account
    assert documentation_account(f"arn:aws:iam::{OWN_ACCOUNT}:role/x") is None


# --- which operation the program runs for -------------------------------------------------------------


@pytest.mark.parametrize(("dry_run", "expected"), [(True, "preview"), (False, "up")])
def test_under_the_engine_the_operation_is_the_engines(dry_run: bool, expected: str) -> None:
    """`pulumi preview` (and the preview phase of `pulumi up`) runs the program with dry_run set."""
    assert OFFLINE_OPERATION.get() is None
    pulumi.runtime.settings.reset_options(preview=dry_run)
    try:
        assert current_operation() == expected
    finally:
        pulumi.runtime.settings.reset_options()


def test_the_offline_runner_stands_for_a_preview_though_its_mocks_run_as_an_update() -> None:
    seen: list[tuple[str, bool]] = []

    def program() -> None:
        seen.append((current_operation(), pulumi.runtime.is_dry_run()))

    run_program(config(), program=program)
    run_program(config(), program=program, operation="up")
    assert seen == [("preview", False), ("up", False)]
    assert OFFLINE_OPERATION.get() is None  # reset after each run


def test_the_synth_command_is_a_preview_it_warns_and_writes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert synth_main(["prod", "--out", str(tmp_path)]) == 0
    errors = capsys.readouterr().err
    for key in PROD_PLACEHOLDERS:
        assert f"    warning: {key} = " in errors
    assert "error:" not in errors
    assert (tmp_path / "resources.yaml").is_file()
