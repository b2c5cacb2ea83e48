"""Bottlerocket NVIDIA variant facts (pure data).

Source: bottlerocket-os/bottlerocket-core-kit @ a10182f9 (core kit v3.1.1):
`packages/kmod-6.1-nvidia/kmod-6.1-nvidia.spec` (where the driver installs) and
`packages/nvidia-container-toolkit/nvidia-container-toolkit-config-k8s` (the runtime config template).
"""

NVIDIA_SMI_PATH = "/usr/libexec/nvidia/tesla/bin/nvidia-smi"
"""Where the Bottlerocket NVIDIA variants install nvidia-smi (`%{_cross_libexecdir}/nvidia/tesla/bin`); the
driver libraries live under `/usr/lib/nvidia/tesla/`. Neither is on the GPU Operator validator's search paths
(`facts.gpu_operator.HOST_NVIDIA_SMI_PATHS`), so the validator, and every operand waiting for it, never
finishes."""

ACCEPTS_VISIBLE_DEVICES_ENVVAR_UNPRIVILEGED = False
"""Bottlerocket renders `accept-nvidia-visible-devices-envvar-when-unprivileged` from
`settings.nvidia-container-runtime.visible-devices-envvar-when-unprivileged`, default `false`: pods that
request no GPU already see none."""
