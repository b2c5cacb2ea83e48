"""Alerts reach a person: the Alertmanager configuration of both backends passes `amtool check-config` and
routes as it should (`amtool config routes test`; Debian's `prometheus-alertmanager` ships amtool and the
Alertmanager that checks the inhibitions, `scripts/setup.sh` installs it), the managed backend's SNS
topic, KMS key and policies let this workspace and nothing else publish, and a production stack without a
receiver is refused before any resource exists."""

import json
import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

import contract
from components import yaml_text
from components.observability.alerts import AGENT_DOWN, WATCHDOG
from components.observability.routing import SECRETS_MOUNT, in_cluster_alertmanager_config
from config.errors import ConfigError
from config.observability import AlertingSettings, ObservabilityConfig
from config.stack import parse_stack_config
from synth.runner import ProgramRun, monitor_for, run_program, stack_config
from tests.gpu_operator.helpers import merged
from tests.helpers import run
from tests.observability.helpers import IN_CLUSTER_POOL, chart_values

AMTOOL = shutil.which("amtool")
SECRET = "alertmanager-receivers"
IN_CLUSTER_ALERTING = {
    "receiverSecret": SECRET,
    "critical": "pagerduty",
    "default": "slack",
    "heartbeatUrl": "https://hc-ping.example.com/0b0c4a4e-5d1e-4c3b-9b7a-2f1e0d9c8b7a",
}


def _amtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    assert AMTOOL, "amtool is missing: run `bash scripts/setup.sh` (Debian's prometheus-alertmanager package)"
    return subprocess.run([AMTOOL, *args], cwd=cwd, capture_output=True, text=True, check=False, timeout=60)


def _check(config: dict[str, Any], tmp_path: Path) -> None:
    (tmp_path / "alertmanager.yaml").write_text(yaml.safe_dump(config))
    result = _amtool("check-config", "alertmanager.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def _receiver(tmp_path: Path, **labels: str) -> str:
    """The receiver amtool routes an alert with these labels to."""
    pairs = [f"{key}={value}" for key, value in labels.items()]
    result = _amtool("config", "routes", "test", "--config.file=alertmanager.yaml", *pairs, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout.strip()


def _routes(config: dict[str, Any], tmp_path: Path) -> None:
    """Both backends route alike: pages, warnings, the heartbeat, and nothing for `severity: none`."""
    _check(config, tmp_path)
    heartbeat = "heartbeat" if any(r["name"] == "heartbeat" for r in config["receivers"]) else "null"
    cases = {
        ("GpuFatalXidError", "critical"): "critical",
        ("KarpenterControllerDown", "critical"): "critical",
        ("GpuPoolAtLimitWithPendingPods", "warning"): "default",
        ("KubePodCrashLooping", "warning"): "default",  # a chart default rule (inCluster)
        ("CPUThrottlingHigh", "info"): "default",  # info alerts stand alone only behind InfoInhibitor
        (WATCHDOG, "none"): heartbeat,
        ("InfoInhibitor", "none"): "null",
    }
    for (name, severity), receiver in cases.items():
        assert _receiver(tmp_path, alertname=name, severity=severity, cluster="ml-prod") == receiver, name


def _definition(stack: ProgramRun) -> dict[str, Any]:
    (definition,) = stack.of_type("aws:amp/alertManagerDefinition:AlertManagerDefinition")
    document = yaml_text.load(definition.inputs["definition"])
    assert set(document) == {"alertmanager_config"}  # AMP's format: the configuration as a block
    config: dict[str, Any] = yaml_text.load(document["alertmanager_config"])
    return config


def test_prod_routes_alerts_to_its_encrypted_topic(prod: ProgramRun, tmp_path: Path) -> None:
    workspace = prod.one("aws:amp/workspace:Workspace")
    (definition,) = prod.of_type("aws:amp/alertManagerDefinition:AlertManagerDefinition")
    assert definition.inputs["workspaceId"] == workspace.id
    config = _definition(prod)
    _routes(config, tmp_path)
    topic = prod.one("aws:sns/topic:Topic", "observability-alerts")
    assert topic.inputs["name"] == "ml-prod-alerts"
    heartbeat = prod.one("aws:sns/topic:Topic", "observability-heartbeat")
    receivers = {r["name"]: r for r in config["receivers"]}
    for name, severity in (("critical", "critical"), ("default", "warning")):
        (sns,) = receivers[name]["sns_configs"]
        assert sns["topic_arn"] == topic.outputs["arn"]
        assert sns["sigv4"] == {"region": "us-west-2"}  # AMP requires the region
        assert sns["attributes"] == {"severity": severity}
        assert "api_url" not in sns  # AMP refuses it
        assert "http_config" not in sns  # and this
    # prod names who reads the topic and where the Watchdog goes (placeholders `pulumi up` refuses).
    assert set(receivers) == {"null", "critical", "default", "heartbeat"}
    assert _receiver(tmp_path, alertname=WATCHDOG, severity="none") == "heartbeat"
    assert _receiver(tmp_path, alertname="KarpenterControllerDown", severity="critical") == "critical"
    subscriptions = {
        s.inputs["protocol"]: s.inputs["topic"]
        for s in prod.of_type("aws:sns/topicSubscription:TopicSubscription")
    }
    assert subscriptions["email"] == topic.outputs["arn"]
    assert set(subscriptions) == {"email", "https"}
    # The topic is encrypted with a key of its own that rotates and lets AMP encrypt for this topic only.
    key = prod.one("aws:kms/key:Key")
    assert topic.inputs["kmsMasterKeyId"] == key.outputs["arn"]
    assert key.inputs["enableKeyRotation"] is True
    statements = {s["Sid"]: s for s in json.loads(key.inputs["policy"])["Statement"]}
    aps = statements["AllowManagedPrometheusToPublishEncrypted"]
    assert aps["Principal"] == {"Service": "aps.amazonaws.com"}
    assert sorted(aps["Action"]) == ["kms:Decrypt", "kms:GenerateDataKey*"]
    assert aps["Condition"] == {
        "StringEquals": {
            "kms:EncryptionContext:aws:sns:topicArn": [topic.outputs["arn"], heartbeat.outputs["arn"]]
        }
    }
    assert statements["EnableIamPolicies"]["Principal"] == {"AWS": "arn:aws:iam::111122223333:root"}
    # Only this workspace, of this account, may publish.
    policy = prod.one("aws:sns/topicPolicy:TopicPolicy", "observability-alerts")
    assert policy.inputs["arn"] == topic.outputs["arn"]
    (statement,) = json.loads(policy.inputs["policy"])["Statement"]
    assert statement["Principal"] == {"Service": "aps.amazonaws.com"}
    assert statement["Resource"] == topic.outputs["arn"]
    assert statement["Condition"] == {
        "ArnEquals": {"aws:SourceArn": workspace.outputs["arn"]},
        "StringEquals": {"aws:SourceAccount": "111122223333"},
    }
    assert policy.urn in definition.dependencies
    outputs = contract.StackOutputs.model_validate(prod.outputs).monitoring
    assert outputs is not None
    assert outputs.alert_topic_arn == topic.outputs["arn"]


def test_managed_heartbeat_and_e_mail_go_through_topics_of_the_stack(tmp_path: Path) -> None:
    stack = run(
        observability={
            "backend": "managed",
            "alerting": {
                "snsTopic": "create",
                "emailSubscriptions": ["oncall@example.com"],
                "heartbeatUrl": IN_CLUSTER_ALERTING["heartbeatUrl"],
            },
        },
        nodePools=[IN_CLUSTER_POOL],
    )
    topics = {t.inputs["name"]: t for t in stack.of_type("aws:sns/topic:Topic")}
    assert set(topics) == {"ml-test-alerts", "ml-test-alert-heartbeat"}
    subscriptions = {
        (s.inputs["protocol"], s.inputs["endpoint"]): s.inputs["topic"]
        for s in stack.of_type("aws:sns/topicSubscription:TopicSubscription")
    }
    assert subscriptions == {
        ("email", "oncall@example.com"): topics["ml-test-alerts"].outputs["arn"],
        ("https", IN_CLUSTER_ALERTING["heartbeatUrl"]): topics["ml-test-alert-heartbeat"].outputs["arn"],
    }
    assert len(stack.of_type("aws:sns/topicPolicy:TopicPolicy")) == 2
    config = _definition(stack)
    (heartbeat,) = [r for r in config["receivers"] if r["name"] == "heartbeat"]
    assert heartbeat["sns_configs"][0]["topic_arn"] == topics["ml-test-alert-heartbeat"].outputs["arn"]
    _routes(config, tmp_path)


def test_an_existing_topic_is_used_as_it_is(tmp_path: Path) -> None:
    arn = "arn:aws:sns:us-west-2:111122223333:platform-pager"
    stack = run(
        observability={"backend": "managed", "alerting": {"snsTopic": arn}}, nodePools=[IN_CLUSTER_POOL]
    )
    assert stack.of_type("aws:sns/topic:Topic") == []
    assert stack.of_type("aws:kms/key:Key") == []
    assert stack.of_type("aws:sns/topicPolicy:TopicPolicy") == []  # its owner's policy is left alone
    config = _definition(stack)
    assert {r["sns_configs"][0]["topic_arn"] for r in config["receivers"] if "sns_configs" in r} == {arn}
    _check(config, tmp_path)


@pytest.mark.parametrize(
    ("critical", "default"), [("pagerduty", "slack"), ("opsgenie", None), ("slack", "opsgenie")]
)
def test_in_cluster_receivers_read_the_operators_secret(
    critical: str, default: str | None, tmp_path: Path
) -> None:
    alerting = {**IN_CLUSTER_ALERTING, "critical": critical, "default": default}
    settings = AlertingSettings.model_validate({k: v for k, v in alerting.items() if v is not None})
    config = in_cluster_alertmanager_config(settings)
    # What the chart renders: its default `alertmanager.config` with these values merged over it.
    rendered = merged(chart_values()["alertmanager"]["config"], config)
    assert rendered == config, "a chart default would survive Helm's merge"
    _routes(rendered, tmp_path)
    files = [
        value
        for receiver in rendered["receivers"]
        for configs in receiver.values()
        if isinstance(configs, list)
        for item in configs
        for key, value in item.items()
        if key.endswith("_file")
    ]
    assert files
    assert all(path.startswith(f"{SECRETS_MOUNT}/{SECRET}/") for path in files)
    assert f"{SECRETS_MOUNT}/{SECRET}/{'default' if default else 'critical'}" in files


def test_in_cluster_stack_mounts_the_secret_and_never_holds_a_credential(tmp_path: Path) -> None:
    stack = run(
        nodePools=[IN_CLUSTER_POOL], observability={"backend": "inCluster", "alerting": IN_CLUSTER_ALERTING}
    )
    values = stack.one("kubernetes:helm.sh/v3:Release", "observability").inputs["values"]
    alertmanager = values["alertmanager"]
    assert alertmanager["alertmanagerSpec"]["secrets"] == [SECRET]
    assert values["defaultRules"]["disabled"] == {"Watchdog": True}  # the stack's own Watchdog is routed
    _routes(merged(chart_values()["alertmanager"]["config"], alertmanager["config"]), tmp_path)
    assert stack.of_type("kubernetes:core/v1:Secret") == []


def test_inhibitions_hold_back_what_one_failure_causes() -> None:
    settings = AlertingSettings.model_validate(IN_CLUSTER_ALERTING)
    rules = in_cluster_alertmanager_config(settings)["inhibit_rules"]
    by_source = {tuple(r.get("source_matchers", ())): r for r in rules}
    fatal = by_source[('alertname="GpuFatalXidError"',)]
    assert "GpuXidError" in fatal["target_matchers"][0]
    assert fatal["equal"] == ["cluster", "node"]
    agent = by_source[(f'alertname="{AGENT_DOWN}"',)]
    assert "KarpenterControllerDown" in agent["target_matchers"][0]
    assert "GpuNodeGuardDown" in agent["target_matchers"][0]


def _without_alerting(stack: str) -> dict[str, str]:
    raw = stack_config(stack)
    observability = json.loads(raw["gpu-eks:observability"])
    observability.pop("alerting")
    return {**raw, "gpu-eks:observability": json.dumps(observability)}


def test_a_production_stack_without_a_receiver_is_refused_before_any_resource() -> None:
    raw = _without_alerting("prod")
    with pytest.raises(ConfigError) as refused:
        parse_stack_config(raw, production=True)
    (problem,) = refused.value.problems
    assert problem.key == "gpu-eks:observability.alerting"
    assert "production stack" in problem.message
    assert parse_stack_config(raw, production=False).observability.alerting is None
    # The program decides from the stack's name and policy/policy-config.json productionStacks.
    with pytest.raises(ConfigError, match=r"gpu-eks:observability\.alerting"):
        run_program(raw, stack="prod")
    # Without any backend, the backend is the key to set.
    no_backend = {**raw, "gpu-eks:observability": json.dumps({"backend": "none"})}
    with pytest.raises(ConfigError) as refused:
        parse_stack_config(no_backend, production=True)
    assert [p.key for p in refused.value.problems] == ["gpu-eks:observability.backend"]


def _prod_with(alerting: dict[str, Any], backend: str = "managed") -> dict[str, str]:
    raw = stack_config("prod")
    return {**raw, "gpu-eks:observability": json.dumps({"backend": backend, "alerting": alerting})}


@pytest.mark.parametrize(
    ("alerting", "backend", "expected"),
    [
        # prod as it was: a topic nobody subscribes to, the Watchdog to the null receiver; both listed.
        (
            {"snsTopic": "create"},
            "managed",
            [
                "gpu-eks:observability.alerting.snsTopic = 'create': has no subscriber this stack knows "
                "of, so its alerts may reach nobody: this is a production stack (policy/policy-config.json "
                "productionStacks). Set alerting.emailSubscriptions (addresses subscribed by this stack) or "
                "alerting.subscribedBy",
                "gpu-eks:observability.alerting.heartbeatUrl = null: is required on a production stack",
            ],
        ),
        (
            {
                "snsTopic": "arn:aws:sns:us-west-2:111122223333:pager",
                "heartbeatUrl": IN_CLUSTER_ALERTING["heartbeatUrl"],
            },
            "managed",
            [
                "gpu-eks:observability.alerting.snsTopic = 'arn:aws:sns:us-west-2:111122223333:pager': "
                "has no subscriber this stack knows of, so its alerts may reach nobody: this is a "
                "production stack (policy/policy-config.json productionStacks). Set alerting.subscribedBy "
                "(who receives them"
            ],
        ),
        (
            {k: v for k, v in IN_CLUSTER_ALERTING.items() if k != "heartbeatUrl"},
            "inCluster",
            ["gpu-eks:observability.alerting.heartbeatUrl = null: is required on a production stack"],
        ),
    ],
)
def test_a_production_stack_must_show_its_alerts_reach_a_person_and_their_absence_is_noticed(
    alerting: dict[str, Any], backend: str, expected: list[str]
) -> None:
    raw = _prod_with(alerting, backend)
    monitor = monitor_for(raw)
    with pytest.raises(ConfigError) as refused:
        run_program(raw, stack="prod", monitor=monitor)
    assert monitor.registrations == []
    lines = [str(p) for p in refused.value.problems]
    assert len(lines) == len(expected), lines
    for line, start in zip(lines, expected, strict=True):
        assert line.startswith(start), line
    # Not a production stack: accepted as before.
    assert parse_stack_config(raw).observability.alerting is not None


@pytest.mark.parametrize(
    "alerting",
    [
        {"snsTopic": "create", "emailSubscriptions": ["oncall@corp.acme.io"]},
        {"snsTopic": "create", "subscribedBy": "PagerDuty service ml-platform via its SNS integration"},
        {"snsTopic": "arn:aws:sns:us-west-2:302263040123:pager", "subscribedBy": "Opsgenie team ml via SNS"},
    ],
)
def test_a_production_topic_with_a_known_subscriber_and_a_heartbeat_is_accepted(
    alerting: dict[str, Any], tmp_path: Path
) -> None:
    raw = _prod_with({**alerting, "heartbeatUrl": "https://hc-ping.com/3f1c2b7e-8d4a-4e6b-9a0f-5c2d1e7b8a90"})
    config = _definition(run_program(raw, stack="prod"))
    _check(config, tmp_path)
    assert _receiver(tmp_path, alertname=WATCHDOG, severity="none") == "heartbeat"
    assert _receiver(tmp_path, alertname="GpuFatalXidError", severity="critical") == "critical"


def test_a_subscriber_statement_says_something() -> None:
    with pytest.raises(ConfigError) as refused:
        parse_stack_config(_prod_with({"snsTopic": "create", "subscribedBy": " "}), production=True)
    assert [str(p) for p in refused.value.problems] == [
        "gpu-eks:observability.alerting.subscribedBy = ' ': must be a sentence naming who receives the "
        "alerts, not empty"
    ]


@pytest.mark.parametrize(
    ("observability", "key", "says"),
    [
        ({"backend": "managed", "alerting": {}}, ("alerting", "snsTopic"), "required with backend managed"),
        (
            {"backend": "inCluster", "alerting": {"critical": "slack"}},
            ("alerting", "receiverSecret"),
            "Secret",
        ),
        (
            {"backend": "inCluster", "alerting": {"snsTopic": "create"}},
            ("alerting", "snsTopic"),
            "managed backend only",
        ),
        (
            {
                "backend": "managed",
                "alerting": {
                    "snsTopic": "arn:aws:sns:us-west-2:111122223333:x",
                    "emailSubscriptions": ["a@example.com"],
                },
            },
            ("alerting", "emailSubscriptions"),
            "own topic only",
        ),
        ({"backend": "none", "alerting": {"snsTopic": "create"}}, ("alerting",), "needs a backend"),
    ],
)
def test_alerting_mistakes_name_the_key(
    observability: dict[str, Any], key: tuple[str, ...], says: str
) -> None:
    problems = ObservabilityConfig.model_validate(observability).problems()
    assert any(path == key and says in message for path, message, _ in problems), problems


def test_credentials_and_urls_are_checked_for_form() -> None:
    with pytest.raises(ValueError, match="https:// URL"):
        AlertingSettings.model_validate({"heartbeatUrl": "http://hc-ping.example.com/x"})
    with pytest.raises(ValueError, match="SNS topic ARN"):
        AlertingSettings.model_validate({"snsTopic": "my-topic"})
    with pytest.raises(ValueError, match="pagerduty"):
        AlertingSettings.model_validate({"critical": "email"})


def test_an_existing_topic_must_be_in_the_stacks_region() -> None:
    raw = stack_config("prod")
    observability = json.loads(raw["gpu-eks:observability"])
    observability["alerting"]["snsTopic"] = "arn:aws:sns:eu-west-1:111122223333:pager"
    observability["alerting"].pop("emailSubscriptions")  # the stack's own topic only
    with pytest.raises(ConfigError) as refused:
        parse_stack_config({**raw, "gpu-eks:observability": json.dumps(observability)})
    (problem,) = refused.value.problems
    assert problem.key == "gpu-eks:observability.alerting.snsTopic"
    assert "us-west-2" in problem.message


ALERTMANAGER = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_real_alertmanager_holds_back_what_one_failure_causes(tmp_path: Path) -> None:
    """Debian's Alertmanager, on the loopback, with the stack's routes and inhibitions (receivers emptied, so
    nothing is sent anywhere): which of the alerts one broken GPU and one dead agent raise it holds back."""
    assert ALERTMANAGER, "prometheus-alertmanager is missing: run `bash scripts/setup.sh`"
    config = in_cluster_alertmanager_config(AlertingSettings.model_validate(IN_CLUSTER_ALERTING))
    config["receivers"] = [{"name": r["name"]} for r in config["receivers"]]
    (tmp_path / "alertmanager.yaml").write_text(yaml.safe_dump(config))
    port = _free_port()
    url = f"http://127.0.0.1:{port}/api/v2/alerts"
    server = subprocess.Popen(
        [
            ALERTMANAGER,
            "--config.file=alertmanager.yaml",
            f"--storage.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--cluster.listen-address=",
        ],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        node, other = "ip-10-30-1-10.us-west-2.compute.internal", "ip-10-30-2-11.us-west-2.compute.internal"
        alerts = [
            {"alertname": "GpuFatalXidError", "severity": "critical", "node": node, "gpu": "0"},
            {"alertname": "GpuXidError", "severity": "warning", "node": node, "gpu": "1"},
            {"alertname": "GpuXidError", "severity": "warning", "node": other, "gpu": "0"},
            {"alertname": AGENT_DOWN, "severity": "critical"},
            {"alertname": "KarpenterControllerDown", "severity": "critical"},
        ]
        body = json.dumps([{"labels": {**a, "cluster": "ml-prod"}} for a in alerts]).encode()
        deadline = time.monotonic() + 20
        while True:
            try:
                request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
                urllib.request.urlopen(request, timeout=2).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "Alertmanager did not start"
                time.sleep(0.2)
        deadline = time.monotonic() + 20
        while True:
            with urllib.request.urlopen(url, timeout=2) as response:
                active = json.load(response)
            held = {
                (a["labels"]["alertname"], a["labels"].get("node", "")): bool(a["status"]["inhibitedBy"])
                for a in active
            }
            if (len(held) == len(alerts) and any(held.values())) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert held == {
        ("GpuFatalXidError", node): False,
        ("GpuXidError", node): True,  # the broken GPU's node: held back
        ("GpuXidError", other): False,  # another node: sent
        (AGENT_DOWN, ""): False,
        ("KarpenterControllerDown", ""): True,  # looks down only because nothing reaches the workspace
    }
