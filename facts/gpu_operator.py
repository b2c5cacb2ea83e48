"""GPU Operator v26.7.0 and MIG manager v0.15.0 facts the program relies on (pure data).

Sources (read at these commits; facts, not code):
- NVIDIA/gpu-operator tag v26.7.0 @ 10ee5b3638b89e11e949412aafa5ba99279c3721 (`controllers/state_manager.go`,
  `controllers/nodelabeling_controller.go`, `controllers/object_controls.go`, `cmd/nvidia-validator/main.go`,
  `assets/`).
- NVIDIA/mig-parted tag v0.15.0 @ e2d5ad1fc72b9d298ea6d04b885cf2d7dbe56941
  (`pkg/mig/reconfigure/reconfigure.go`); v0.15.0 is the `migManager.version` of the v26.7.0 chart."""

DEPLOY_OPERANDS_LABEL = "nvidia.com/gpu.deploy.operands"
"""`false` keeps every operator operand off a node. The operator only reads it (`hasOperandsDisabled`) and
never writes or removes it, unlike the per-operand `nvidia.com/gpu.deploy.<operand>` labels:
`removeAllGPUStateLabels` deletes those from every node without `nvidia.com/gpu.present=true`, i.e. from a new
node NFD has not labelled yet, so a `false` set at registration is gone before it matters
(nodelabeling_controller.go `updateGPUStateLabels`)."""

DEVICE_PLUGIN_DEPLOY_LABEL = "nvidia.com/gpu.deploy.device-plugin"
"""The device plugin's DaemonSet runs only on nodes where this is `true` (its nodeSelector,
assets/state-device-plugin/0500_daemonset.yaml). How the other writers treat it:

- The operator's node labeller (nodelabeling_controller.go `labelGPUNodes`, one reconcile over every node,
  triggered by any GPU node's label change, ClusterPolicy change, ...) deletes it from each node without
  `nvidia.com/gpu.present=true` (`updateGPUStateLabels` -> `removeAllGPUStateLabels`). On the reconcile that
  first sets `gpu.present=true` (NFD's PCI labels have arrived) it sets the label only where it is absent or
  empty: a value already there is kept (state_manager.go `addGPUStateLabels`: "honor it").
- The MIG manager reads it when it starts (`getCurrentNodeLabels`), sets it to `paused-for-mig-change` while
  it reconfigures (`maybeSetPaused`: anything but `false`) and afterwards, on success and on failure alike,
  to `true` (`maybeSetTrue`: anything but `false`), including when it finds the config already applied.

So a value set at registration survives only if no reconcile runs before NFD labels the node, and the MIG
manager's own pause begins only once it runs; a writer that re-sets the pause while a MIG node is not yet
partitioned (the GPU node guard) is what keeps the device plugin off until then."""
DEVICE_PLUGIN_PAUSED = "paused-for-mig-change"
"""The value the MIG manager pauses the device plugin with; anything but `true` keeps the DaemonSet's pod off
the node."""

MIG_MANAGER_DRIVER_READY = "/run/nvidia/validations/driver-ready"
"""The file the operator's validator writes once the driver is validated, as `KEY=value` lines including
`IS_HOST_DRIVER=true` on a node whose driver comes with the AMI (cmd/nvidia-validator/main.go). The MIG
manager's entrypoint (assets/state-mig-manager/0420_configmap.yaml, run as `/bin/sh -c /bin/entrypoint.sh`,
0600_daemonset.yaml) waits for it, sources it with `set -o allexport`, then sets
`WITH_SHUTDOWN_HOST_GPU_CLIENTS=$IS_HOST_DRIVER` and `exec nvidia-mig-manager`: after the container's `env`,
so `migManager.env` cannot change that variable. The chart's `migManager.args` replaces the container's args
(`TransformMIGManager`: "set arguments if specified"), i.e. the script `sh -c` runs."""
MIG_MANAGER_SHUTDOWN_ENV = "WITH_SHUTDOWN_HOST_GPU_CLIENTS"
"""With it true the MIG manager, when a MIG *mode* change is needed, stops the host's GPU client services
listed in the operator's `default-gpu-clients` (nvsm, nv_peer_mem, DCGM; none of them runs on the EKS AL2023
NVIDIA AMI, which enables only nvidia-fabricmanager and nvidia-persistenced of the GPU services:
awslabs/amazon-eks-ami `templates/al2023/provisioners/install-nvidia-driver.sh`) and *also kubelet*
(`HOST_KUBELET_SYSTEMD_SERVICE`, default `kubelet.service`), and restarts them afterwards (mig-parted
`reconfigure.go` `checkMigModeChangeRequired`, `restartHostGPUClients`). On AL2023 nodes of Karpenter that
restart leaves nodes NotReady for good (NVIDIA/gpu-operator#2415, NVIDIA/mig-parted#368). With it false the
MIG manager never touches kubelet: a mode change the held GPUs refuse in place goes the `WITH_REBOOT` way (the
node reboots, kubelet starts afresh with the node), as it does with it true on this AMI anyway."""
MIG_MANAGER_BINARY = "nvidia-mig-manager"

MIG_CONFIG_STATE_LABEL = "nvidia.com/mig.config.state"
"""Set by the MIG manager on the node: `pending` while it works, `rebooting` before a reboot that turns MIG
mode on, then `success` (the selected `nvidia.com/mig.config` is applied and the device plugin restarted) or
`failed`."""
MIG_STATE_SUCCESS = "success"
MIG_STATE_FAILED = "failed"
MIG_STATES = ("pending", "rebooting", MIG_STATE_SUCCESS, MIG_STATE_FAILED)

OPERAND_DAEMONSETS = (
    "gpu-feature-discovery",
    "nvidia-dcgm-exporter",
    "nvidia-device-plugin-daemonset",
    "nvidia-mig-manager",
    "nvidia-operator-validator",
)
"""The operand DaemonSets the operator runs on a node of an AL2023 pool (driver and toolkit off). Each gets
exactly `ClusterPolicy.spec.daemonsets.tolerations` (chart value `daemonsets.tolerations`), replacing its own:
`applyCommonDaemonsetConfig` runs for every DaemonSet of the `transformations` map in object_controls.go and
no per-operand transform sets tolerations. The NFD worker is the chart's subchart and takes
`node-feature-discovery.worker.tolerations` instead."""

RUNTIME_CLASS_HANDLERS = {"nvidia": "nvidia", "nvidia-cdi": "nvidia-cdi", "nvidia-legacy": "nvidia-legacy"}
"""RuntimeClasses the operator creates when `cdi.enabled` (assets/pre-requisites/02*_runtime_class*.yaml; with
CDI off it deletes the last two, object_controls.go `RuntimeClasses`). Operands use only
`operator.runtimeClass` (`nvidia`, `setRuntimeClassName`)."""

HOST_NVIDIA_SMI_PATHS = (
    "/usr/bin/nvidia-smi",
    "/usr/sbin/nvidia-smi",
    "/bin/nvidia-smi",
    "/sbin/nvidia-smi",
    "/usr/lib/wsl/lib/nvidia-smi",
    "/opt/bin/nvidia-smi",
)
"""Where the validator looks for a host driver's nvidia-smi (`hostNvidiaSMISearchPaths`); failing these it
validates a driver container under `hostPaths.driverInstallDir`, searching only `/`, `/usr/bin`, `/usr/sbin`,
`/bin`, `/sbin` there (internal/driver/root.go). Every operand waits for the validator."""
