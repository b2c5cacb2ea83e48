"""`gpu-eks:karpenter` as part of the stack: wired into StackConfig, checked against the system node group,
and refused by the real program (naming the key) before any resource is registered."""

from typing import Any

import pytest

from config.errors import ConfigError
from config.karpenter import KarpenterConfig
from config.stack import parse_stack_config
from synth.runner import stack_config
from tests.conftest import STACKS
from tests.helpers import config, run_failing


def _problems(**sections: Any) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_stack_config(config(**sections))
    return [str(p) for p in caught.value.problems]


def _nodes(min_size: int, max_size: int) -> dict[str, Any]:
    return {
        "name": "ml-test",
        "systemNodes": {"minSize": min_size, "desiredSize": min_size, "maxSize": max_size},
    }


def test_section_defaults_when_absent() -> None:
    assert parse_stack_config(config()).karpenter == KarpenterConfig()


@pytest.mark.parametrize("stack", STACKS)
def test_committed_stacks_set_the_section_explicitly(stack: str) -> None:
    raw = stack_config(stack)
    assert "gpu-eks:karpenter" in raw
    karpenter = parse_stack_config(raw).karpenter
    assert karpenter.version == "1.14.1"
    assert karpenter.namespace == "kube-system"
    assert karpenter.identity == "podIdentity"
    assert karpenter.replicas == 2
    assert karpenter.interruption_handling is True


def test_replicas_up_to_min_size_are_accepted() -> None:
    parsed = parse_stack_config(config(cluster=_nodes(3, 6), karpenter={"replicas": 3}))
    assert parsed.karpenter.replicas == 3


def test_replicas_above_max_size_are_refused() -> None:
    found = _problems(cluster=_nodes(2, 4), karpenter={"replicas": 5})
    assert len(found) == 1
    assert found[0].startswith("gpu-eks:karpenter.replicas = 5: 5 controller replicas cannot be scheduled")
    assert "gpu-eks:cluster.systemNodes.maxSize" in found[0]


def test_replicas_above_min_size_are_refused() -> None:
    found = _problems(cluster=_nodes(2, 4), karpenter={"replicas": 3})
    assert len(found) == 1
    assert found[0].startswith("gpu-eks:karpenter.replicas = 3: 3 controller replicas need 3 system nodes")
    assert "gpu-eks:cluster.systemNodes.minSize" in found[0]
    assert "lower replicas to at most 2 or raise systemNodes.minSize" in found[0]


@pytest.mark.parametrize(
    ("karpenter", "cluster", "expected"),
    [
        ({"identity": "oidc"}, None, "gpu-eks:karpenter.identity = 'oidc': must be 'podIdentity' or 'irsa'"),
        (
            {"version": "v1.14.1"},
            None,
            "gpu-eks:karpenter.version = 'v1.14.1': must be a version X.Y.Z without a 'v' prefix",
        ),
        ({"replicas": 0}, None, "gpu-eks:karpenter.replicas = 0: must be greater than or equal to 1"),
        ({"replicas": 9}, _nodes(2, 4), "gpu-eks:karpenter.replicas = 9: 9 controller replicas cannot be"),
        ({"replicas": 3}, _nodes(2, 4), "gpu-eks:karpenter.replicas = 3: 3 controller replicas need"),
        (
            {"version": "1.15.0"},
            None,
            "gpu-eks:karpenter.version = '1.15.0': Karpenter 1.15.0 is not supported",
        ),
        (
            {"replica": 2},
            None,
            "gpu-eks:karpenter.replica = 2: unknown key, did you mean replicas? Accepted keys: version,",
        ),
    ],
)
def test_the_program_refuses_bad_karpenter_config_and_registers_nothing(
    karpenter: dict[str, Any], cluster: dict[str, Any] | None, expected: str
) -> None:
    sections: dict[str, Any] = {"karpenter": karpenter}
    if cluster is not None:
        sections["cluster"] = cluster
    error, monitor = run_failing(**sections)
    assert isinstance(error, ConfigError)
    assert len(error.problems) == 1, error
    assert str(error.problems[0]).startswith(expected), error
    assert monitor.registrations == []
