"""EKS AL2023 NVIDIA AMI facts: its container runtime and how user data runs (pure data).

Sources (facts, not code):
- awslabs/amazon-eks-ami @ 81fec2e895854f599974fe4d3d72f61c0a9aaffa:
  `templates/al2023/provisioners/install-nvidia-driver.sh` (installs `nvidia-container-toolkit`),
  `nodeadm/internal/containerd/runtime_config_nvidia.go` (containerd's default runtime is `nvidia` when
  `/usr/bin/nvidia-container-runtime` exists),
  `templates/al2023/runtime/rootfs/etc/systemd/system/nodeadm-{config,run}.service` (nodeadm configures before
  cloud-init and starts containerd and kubelet after `cloud-final`, so user-data scripts run before any pod),
  `templates/al2023/runtime/rootfs/etc/systemd/system/kubelet.service` (kubelet's unit, `Restart=on-failure`).
- NVIDIA/nvidia-container-toolkit tag v1.19.1 @ 09ceee5dde66ba9ce25c7cc69b1ebd5e6e3266fa:
  `api/config/v1/config.go` (the config file and its default
  `accept-nvidia-visible-devices-envvar-when-unprivileged = true`), `cmd/nvidia-ctk/config/config.go`
  (`nvidia-ctk config --in-place --set key=value`).
- aws/karpenter-provider-aws tag v1.14.1 @ bde00654: `pkg/providers/amifamily/bootstrap/nodeadm.go` and
  `.../mime/mime.go` (custom AL2023 user data is a MIME multi-part archive, or one NodeConfig or shell part;
  Karpenter appends its NodeConfig part), `pkg/providers/amifamily/al2023.go` (the `al2023` alias resolves GPU
  types to the `nvidia` variant's SSM parameter)."""

NVIDIA_CONTAINER_RUNTIME = "/usr/bin/nvidia-container-runtime"
"""Present on the NVIDIA variant only; nodeadm then makes `nvidia` containerd's default runtime."""
NVIDIA_CTK = "/usr/bin/nvidia-ctk"
KUBELET_UNIT_DROP_IN_DIR = "/etc/systemd/system/kubelet.service.d"
"""Drop-ins of kubelet's unit. The AMI installs the unit itself in `/etc/systemd/system`, so `systemctl mask`
cannot replace it ("File exists"); a drop-in is how to keep it from starting."""
NVIDIA_CONTAINER_RUNTIME_CONFIG = "/etc/nvidia-container-runtime/config.toml"
ACCEPT_ENVVAR_UNPRIVILEGED_KEY = "accept-nvidia-visible-devices-envvar-when-unprivileged"
"""Top-level key of the runtime config. `true` (the default) lets an unprivileged container that requested no
GPU get every GPU of the node through `NVIDIA_VISIBLE_DEVICES=all` (set by CUDA base images). Privileged
containers (every GPU Operator operand that uses the variable) are not affected; pods that request GPUs get
them through CDI (the device plugin's `cdi-annotations,cdi-cri` list strategy) without the variable."""
