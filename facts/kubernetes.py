"""Kubernetes facts a team namespace is built on: reserved namespaces, quotas on extended resources, Pod
Security levels (pure data)."""

from typing import Final, Literal

SYSTEM_NAMESPACES: Final[tuple[str, ...]] = ("default", "kube-node-lease", "kube-public", "kube-system")
"""The namespaces every cluster starts with (Kubernetes docs, "Namespaces", Initial namespaces:
https://kubernetes.io/docs/concepts/overview/working-with-objects/namespaces/#initial-namespaces)."""

RESERVED_NAMESPACE_PREFIX: Final = "kube-"
""""Avoid creating namespaces with the prefix `kube-`, since it is reserved for Kubernetes system namespaces"
(the same page)."""

GPU_QUOTA_RESOURCE: Final = "requests.nvidia.com/gpu"
"""The quota key that caps the `nvidia.com/gpu` a namespace's pods request. For extended resources
ResourceQuota takes only the `requests.` prefix: "Quota items for extended resources must have the prefix
requests." (a limit equals the request for them, since they cannot be overcommitted; Kubernetes docs,
"Resource Quotas", Resource quota for extended resources:
https://kubernetes.io/docs/concepts/policy/resource-quotas/#resource-quota-for-extended-resources). It counts
what the device plugin advertises as `nvidia.com/gpu`: on a time-sliced pool one replica of a GPU (a slice),
on a MIG `single` pool one MIG device; the `nvidia.com/mig-<profile>` resources of the MIG `mixed` strategy
are other resources and are not counted."""

PodSecurityLevel = Literal["privileged", "baseline", "restricted"]
POD_SECURITY_ENFORCE: Final = "pod-security.kubernetes.io/enforce"
"""The namespace label Pod Security admission enforces a level with (Kubernetes docs, "Pod Security
Admission": https://kubernetes.io/docs/concepts/security/pod-security-admission/).

What GPU and EFA pods need, against the Pod Security Standards
(https://kubernetes.io/docs/concepts/security/pod-security-standards/): extended resources (`nvidia.com/gpu`,
`vpc.amazonaws.com/efa`) and `emptyDir` volumes (`medium: Memory` for a larger `/dev/shm`) pass every level.
`baseline` allows adding only AUDIT_WRITE, CHOWN, DAC_OVERRIDE, FOWNER, FSETID, KILL, MKNOD, NET_BIND_SERVICE,
SETFCAP, SETGID, SETPCAP, SETUID and SYS_CHROOT, so a pod adding `IPC_LOCK` (as NCCL and EFA examples do, to
lock registered memory), `SYS_ADMIN` or `SYS_PTRACE` (profilers), or using host namespaces, host paths or a
privileged container needs `privileged`. `restricted` also requires running as non-root, dropping ALL
capabilities, no privilege escalation and a RuntimeDefault seccomp profile."""
