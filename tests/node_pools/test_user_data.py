"""AL2023 node user data: a MIME multi-part archive (as Karpenter expects for AL2023) whose shell part turns
off `accept-nvidia-visible-devices-envvar-when-unprivileged`; parsed as cloud-init would, and run in a
sandbox."""

import email
import email.policy
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from components.node_user_data import GPU_ISOLATION_SCRIPT, KUBELET_BLOCK_DROP_IN, al2023_user_data
from facts.al2023_nvidia import (
    ACCEPT_ENVVAR_UNPRIVILEGED_KEY,
    KUBELET_UNIT_DROP_IN_DIR,
    NVIDIA_CONTAINER_RUNTIME,
    NVIDIA_CONTAINER_RUNTIME_CONFIG,
    NVIDIA_CTK,
)
from synth.runner import ProgramRun
from tests.support.crd_check import validate

NODECLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
KUBELET_UNIT = Path(__file__).parents[1] / "fixtures" / "amazon-eks-ami" / "kubelet.service"
"""The AMI's own kubelet unit (tests/fixtures/README.md)."""


def _parts(user_data: str) -> list[Any]:
    message = email.message_from_string(user_data, policy=email.policy.default)
    assert message.is_multipart()
    assert message.get_content_type() == "multipart/mixed"
    return list(message.iter_parts())


def test_the_user_data_is_one_shell_part_in_a_mime_archive() -> None:
    user_data = al2023_user_data()
    # Karpenter treats user data as MIME only when it starts with one of these headers (nodeadm.go).
    assert user_data.startswith("MIME-Version: 1.0\n")
    (part,) = _parts(user_data)
    assert part.get_content_type() == "text/x-shellscript"
    script = part.get_content()
    assert script == GPU_ISOLATION_SCRIPT
    assert script.startswith("#!/bin/bash\n")
    assert f"key={ACCEPT_ENVVAR_UNPRIVILEGED_KEY}\n" in script
    assert f"config={NVIDIA_CONTAINER_RUNTIME_CONFIG}\n" in script
    assert f'{NVIDIA_CTK} config --config-file="$config" --in-place --set "$key=false"' in script


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_the_script_is_valid_bash() -> None:
    subprocess.run(["bash", "-n"], input=GPU_ISOLATION_SCRIPT, text=True, check=True)


def test_every_al2023_node_class_of_the_stacks_carries_it(any_stack: ProgramRun) -> None:
    classes = any_stack.of_type(NODECLASS)
    assert classes
    for node_class in classes:
        manifest = {k: node_class.inputs[k] for k in ("apiVersion", "kind", "metadata", "spec")}
        assert validate(manifest) == []
        assert node_class.inputs["spec"]["amiSelectorTerms"][0]["alias"].startswith("al2023@")
        (part,) = _parts(node_class.inputs["spec"]["userData"])
        assert part.get_content() == GPU_ISOLATION_SCRIPT


# --- the script, run in a sandbox (absolute paths moved under a temporary directory) --------------------


def _run(tmp_path: Path, *, runtime: bool, ctk: str) -> tuple[subprocess.CompletedProcess[str], Path, Path]:
    root = tmp_path / "root"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    config = root / NVIDIA_CONTAINER_RUNTIME_CONFIG.lstrip("/")
    config.parent.mkdir(parents=True)
    config.write_text(f"{ACCEPT_ENVVAR_UNPRIVILEGED_KEY} = true\n")
    script = GPU_ISOLATION_SCRIPT
    moved = (NVIDIA_CONTAINER_RUNTIME, NVIDIA_CTK, NVIDIA_CONTAINER_RUNTIME_CONFIG, KUBELET_UNIT_DROP_IN_DIR)
    for path in moved:
        script = script.replace(path, f"{root}{path}")
    (root / "usr/bin").mkdir(parents=True)
    if runtime:
        (root / NVIDIA_CONTAINER_RUNTIME.lstrip("/")).write_text("#!/bin/sh\n")
        (root / NVIDIA_CONTAINER_RUNTIME.lstrip("/")).chmod(0o755)
    tool = root / NVIDIA_CTK.lstrip("/")
    tool.write_text(f"#!/bin/bash\n{ctk}\n")
    tool.chmod(0o755)
    calls = tmp_path / "systemctl.calls"
    (bin_dir / "systemctl").write_text(f'#!/bin/sh\necho "$@" >> {calls}\n')
    (bin_dir / "systemctl").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    result = subprocess.run(["bash", "-c", script], env=env, text=True, capture_output=True, check=False)
    return result, config, calls


# A stand-in for `nvidia-ctk config --config-file=F --in-place --set K=V` on a one-key file.
CTK_SETS = 'f="${2#--config-file=}"; kv="${5}"; echo "${kv%%=*} = ${kv#*=}" > "$f"'


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_a_gpu_node_gets_the_setting(tmp_path: Path) -> None:
    result, config, calls = _run(tmp_path, runtime=True, ctk=CTK_SETS)
    assert result.returncode == 0, result.stderr
    assert config.read_text() == f"{ACCEPT_ENVVAR_UNPRIVILEGED_KEY} = false\n"
    assert not calls.exists()


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_a_node_without_the_nvidia_runtime_is_left_alone(tmp_path: Path) -> None:
    result, config, calls = _run(tmp_path, runtime=False, ctk="exit 3")
    assert result.returncode == 0, result.stderr
    assert config.read_text() == f"{ACCEPT_ENVVAR_UNPRIVILEGED_KEY} = true\n"
    assert not calls.exists()


def _drop_in(tmp_path: Path) -> Path:
    return tmp_path / "root" / KUBELET_BLOCK_DROP_IN.lstrip("/")


@pytest.mark.parametrize("ctk", ["exit 1", "true"], ids=["nvidia-ctk fails", "nvidia-ctk changes nothing"])
@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_a_gpu_node_that_cannot_get_the_setting_never_joins(tmp_path: Path, ctk: str) -> None:
    result, _, calls = _run(tmp_path, runtime=True, ctk=ctk)
    assert result.returncode == 1
    assert "so this node does not join" in result.stderr
    # The drop-in is in place before systemd rereads its units; nothing is masked (mask fails on the AMI).
    assert _drop_in(tmp_path).is_file()
    assert calls.read_text() == "daemon-reload\n"


@pytest.mark.skipif(
    shutil.which("bash") is None or shutil.which("systemd-analyze") is None, reason="needs bash and systemd"
)
def test_the_drop_in_keeps_the_amis_kubelet_from_starting(tmp_path: Path) -> None:
    """systemd's own parser merges the AMI's kubelet unit with the drop-in the script writes: no restarts, and
    a start command after the unit's own that fails with the reason."""
    _run(tmp_path, runtime=True, ctk="exit 1")
    units = tmp_path / "units"
    (units / "kubelet.service.d").mkdir(parents=True)
    # verify insists that each command exists: the unit's own two are stood in for by /bin/true.
    unit = KUBELET_UNIT.read_text().replace("/sbin/iptables -P FORWARD ACCEPT -w 5", "/bin/true")
    unit = unit.replace("/usr/bin/kubelet", "/bin/true")
    (units / "kubelet.service").write_text(unit)
    shutil.copy(_drop_in(tmp_path), units / "kubelet.service.d")
    verify = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", str(units / "kubelet.service")],
        env={**os.environ, "SYSTEMD_LOG_LEVEL": "debug"},
        text=True,
        capture_output=True,
        check=False,
    )
    assert verify.returncode == 0, verify.stderr
    dump = verify.stdout + verify.stderr
    assert re.search(r"^\s*Restart: no$", dump, re.MULTILINE), dump
    block = dump[dump.index("-> ExecStartPre:") : dump.index("-> ExecStart:")]
    commands = re.findall(r"Command Line: (.*)$", block, re.MULTILINE)
    assert commands[0] == "/bin/true"  # the unit's own (iptables), then the drop-in's
    argv = shlex.split(commands[-1])
    assert argv[:2] == ["/bin/sh", "-c"]
    start = subprocess.run(argv, text=True, capture_output=True, check=False)
    assert start.returncode == 1
    assert f"could not set {ACCEPT_ENVVAR_UNPRIVILEGED_KEY} = false in" in start.stderr
