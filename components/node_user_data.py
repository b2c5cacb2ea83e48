"""User data gpu-eks adds to AL2023 nodes (EC2NodeClass `spec.userData`; pure, no Pulumi).

One shell part in a MIME multi-part archive, the form Karpenter expects for AL2023 custom user data: Karpenter
parses the archive and appends its own NodeConfig part (aws/karpenter-provider-aws v1.14.1
`pkg/providers/amifamily/bootstrap/nodeadm.go`). cloud-init runs the script after nodeadm has written its
configuration and before nodeadm starts containerd and kubelet, so the setting is in place before the first
pod.

What it sets: `accept-nvidia-visible-devices-envvar-when-unprivileged = false` in the NVIDIA container
runtime's config. The AMI makes `nvidia` containerd's default runtime, and with the default `true` that
runtime hands every GPU of the node to any unprivileged container whose image sets
`NVIDIA_VISIBLE_DEVICES=all` (CUDA base images do), even in a pod that requested no `nvidia.com/gpu` but
tolerates the GPU taint. GPU pods keep their GPUs: the device plugin passes them as CDI devices, not through
the variable. See `facts.al2023_nvidia`.

On a node without the NVIDIA runtime (CPU instances get the standard AL2023 variant) the script does nothing.
If the setting cannot be written on a GPU node, a drop-in on kubelet's unit makes every start of kubelet fail
(with the reason in kubelet's journal): the node never joins, and Karpenter deletes the NodeClaim after its
registration timeout, rather than running pods that could see GPUs they did not request. (`systemctl mask`
would not do: the AMI keeps kubelet's unit in `/etc/systemd/system`, where mask refuses to overwrite it.)"""

from facts.al2023_nvidia import (
    ACCEPT_ENVVAR_UNPRIVILEGED_KEY,
    KUBELET_UNIT_DROP_IN_DIR,
    NVIDIA_CONTAINER_RUNTIME,
    NVIDIA_CONTAINER_RUNTIME_CONFIG,
    NVIDIA_CTK,
)

KUBELET_BLOCK_DROP_IN = f"{KUBELET_UNIT_DROP_IN_DIR}/99-gpu-eks-no-gpu-isolation.conf"
"""Written only when the setting could not be made: kubelet's every start fails, without restarts."""

BOUNDARY = "==gpu-eks=="
"""MIME boundary of the archive, fixed so that the rendered user data (and the EC2NodeClass) is stable."""

GPU_ISOLATION_SCRIPT = f"""#!/bin/bash
# gpu-eks: pods that request no nvidia.com/gpu get no GPU from NVIDIA_VISIBLE_DEVICES (unless privileged).
set -euo pipefail
key={ACCEPT_ENVVAR_UNPRIVILEGED_KEY}
config={NVIDIA_CONTAINER_RUNTIME_CONFIG}
if [ ! -x {NVIDIA_CONTAINER_RUNTIME} ]; then
  exit 0  # not the NVIDIA variant: containerd runs runc, which ignores the variable
fi
if {NVIDIA_CTK} config --config-file="$config" --in-place --set "$key=false" \\
    && grep -Eq "^$key *= *false$" "$config"; then
  echo "gpu-eks: $key = false in $config"
else
  reason="gpu-eks: could not set $key = false in $config, so this node does not join"
  echo "$reason" >&2
  mkdir -p {KUBELET_UNIT_DROP_IN_DIR}
  cat > {KUBELET_BLOCK_DROP_IN} <<EOF
[Service]
Restart=no
ExecStartPre=/bin/sh -c "echo '$reason' >&2 && exit 1"
EOF
  systemctl daemon-reload
  exit 1
fi
"""
"""The shell part. `nvidia-ctk config --in-place --set` is NVIDIA Container Toolkit 1.19's way to edit its
config (the AMI ships the toolkit); the grep checks the result rather than trusting the exit code alone. The
drop-in's `ExecStartPre` is added to the unit's own and fails each start, `Restart=no` stops the unit's
restarts, and the daemon-reload before nodeadm starts kubelet makes systemd read it."""


def al2023_user_data() -> str:
    """The MIME multi-part user data of every AL2023 EC2NodeClass: the GPU isolation script."""
    return (
        "MIME-Version: 1.0\n"
        f'Content-Type: multipart/mixed; boundary="{BOUNDARY}"\n'
        "\n"
        f"--{BOUNDARY}\n"
        'Content-Type: text/x-shellscript; charset="us-ascii"\n'
        "\n"
        # The line break before a boundary belongs to the boundary: one more keeps the script's last one.
        f"{GPU_ISOLATION_SCRIPT}\n"
        f"--{BOUNDARY}--\n"
    )
