"""EC2 instance-type facts: which types exist, what each brings, NVIDIA GPUs and MIG (pure; no Pulumi calls).

- `facts/data/accelerated-instance-types.tsv`: a verbatim copy of the Karpenter 1.14.1 reference
  (`website/content/en/v1.14/reference/instance-types.md`, generated from EC2 data; the tests check the copy
  against the reference), with GPU, EFA and allocatable resources of accelerated types.
- `facts/data/instance-types.tsv`: every type of that same reference (1363), with architecture, category,
  generation and what is allocatable (`scripts/instance_types_table.py` extracts it).
- `pulumi_aws.ec2.InstanceType` (pulumi-aws 7.51.1): the provider schema's enum of EC2 instance type
  names, broader than the Karpenter reference (older and region-specific types): whether a name exists.

The Karpenter tables are region-dependent: a type missing from them is reported unknown rather than guessed.
The tables are read with the standard library only (`pulumi_aws` is imported where the enum is read): the
policy pack, in its own virtualenv, reads them through `instance_labels` and `pools.declared`.
"""

import functools
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from enum import Enum
from pathlib import Path

from facts.quantity import parse_quantity

INSTANCE_TYPES_TSV = Path(__file__).parent / "data" / "accelerated-instance-types.tsv"
ALL_INSTANCE_TYPES_TSV = Path(__file__).parent / "data" / "instance-types.tsv"

VM_MEMORY_OVERHEAD_PERCENT = Decimal("0.075")
"""The share of an instance's memory Karpenter subtracts as VM overhead before it has seen a node of the type
(aws/karpenter-provider-aws@c88abbbad455 `pkg/operator/options/options.go`, `VM_MEMORY_OVERHEAD_PERCENT`,
default 0.075; the chart's `settings.vmMemoryOverheadPercent`, which gpu-eks leaves at its default)."""
ARM64_RESERVED_MEMORY_MIB = 64
"""Memory Karpenter leaves out on arm64 (Graviton) types for CMA (`pkg/providers/instancetype/types.go`
`memory()` at the same commit)."""

MIG_CAPABLE_GPUS = frozenset({"a100", "a30", "h100", "h200", "b200", "b300"})
"""Values of `karpenter.k8s.aws/instance-gpu-name` (the TSV's `gpu-name`) whose GPUs support MIG."""


class UnknownInstanceTypeError(ValueError):
    """An instance type, family or GPU name that the instance-type table does not know."""


class MigNotSupportedError(ValueError):
    """A pool asks for MIG but some instance type it may launch has GPUs without MIG."""


@dataclass(frozen=True)
class GpuInstanceType:
    """One EC2 instance type with NVIDIA GPUs (a row of the table with `nvidia.com/gpu` > 0)."""

    name: str
    """`p4d.24xlarge`."""
    family: str
    """`p4d` (the part before the dot, `karpenter.k8s.aws/instance-family`)."""
    arch: str
    """`amd64` or `arm64`."""
    gpu_name: str
    """`a100` (`karpenter.k8s.aws/instance-gpu-name`)."""
    gpu_count: int
    """GPUs per instance, also the `nvidia.com/gpu` capacity Karpenter expects."""
    gpu_memory_mib: int
    """Memory of one GPU in MiB (`karpenter.k8s.aws/instance-gpu-memory`)."""
    efa_interfaces: int = 0
    """EFA interfaces the type supports (`vpc.amazonaws.com/efa` capacity); 0 where it has none."""

    @property
    def mig_capable(self) -> bool:
        return self.gpu_name in MIG_CAPABLE_GPUS


@dataclass(frozen=True)
class InstanceType:
    """One EC2 instance type of the Karpenter reference: what a node of it brings to a pool."""

    name: str
    family: str
    arch: str
    """`amd64` or `arm64` (`kubernetes.io/arch`)."""
    category: str
    """`karpenter.k8s.aws/instance-category` (`m`, `g`, `p`, ...)."""
    generation: int
    gpu_manufacturer: str
    """`nvidia`, `amd` or empty."""
    vcpus: int
    """vCPUs: the instance's `cpu` capacity, which Karpenter compares with what is left of a pool's limit."""
    memory_mib: int
    """The instance's memory in MiB (`karpenter.k8s.aws/instance-memory`, EC2's `MemoryInfo.SizeInMiB`)."""

    @property
    def memory_capacity(self) -> Decimal:
        """The node's `memory` capacity in bytes as Karpenter estimates it before launch, which it compares
        with what is left of a pool's `limits.memory`: the instance's memory (less 64 MiB on arm64) less the
        VM overhead, rounded up to a MiB (`pkg/providers/instancetype/types.go` `memory()`)."""
        mib = self.memory_mib - (ARM64_RESERVED_MEMORY_MIB if self.arch == "arm64" else 0)
        overhead = math.ceil(Decimal(mib) * VM_MEMORY_OVERHEAD_PERCENT)
        return Decimal((mib - overhead) * 1024 * 1024)

    cpu: Decimal
    """Allocatable vCPUs (after the AL2023 overhead)."""
    memory: Decimal
    """Allocatable memory in bytes."""
    max_pods: int
    """Pods a node of the type may run (`pods`: the vpc-cni ENI limit Karpenter computes)."""


def _int(text: str) -> int:
    return int(text) if text.strip() else 0


@functools.cache
def gpu_instance_types() -> Mapping[str, GpuInstanceType]:
    """Every instance type of the table that carries NVIDIA GPUs, by name, in table order."""
    table: dict[str, GpuInstanceType] = {}
    for name, row in _accelerated_rows().items():
        if _int(row["nvidia.com/gpu"]) <= 0:
            continue
        table[name] = GpuInstanceType(
            name=name,
            family=name.split(".", 1)[0],
            arch=row["arch"],
            gpu_name=row["gpu-name"],
            gpu_count=_int(row["gpu-count"]),
            gpu_memory_mib=_int(row["gpu-memory-MiB"]),
            efa_interfaces=_int(row["vpc.amazonaws.com/efa"]),
        )
    return table


def mig_capable_instance_types() -> frozenset[str]:
    """Names of the instance types whose GPUs support MIG (p4d, p4de, p5, p5e, p5en, p6-b200, ...)."""
    return frozenset(name for name, it in gpu_instance_types().items() if it.mig_capable)


def candidate_instance_types(
    instance_types: Iterable[str] = (),
    instance_families: Iterable[str] = (),
    gpu_names: Iterable[str] = (),
) -> tuple[GpuInstanceType, ...]:
    """The NVIDIA GPU instance types a pool may launch, given its requirements.

    Each argument is one NodePool requirement (`node.kubernetes.io/instance-type`,
    `karpenter.k8s.aws/instance-family`, `karpenter.k8s.aws/instance-gpu-name`, all `In`); an empty one
    does not restrict. Karpenter ANDs requirements, so the result is the intersection.
    Raises `UnknownInstanceTypeError` for a name the table does not list with NVIDIA GPUs.
    """
    table = gpu_instance_types()
    types, families, gpus = set(instance_types), set(instance_families), set(gpu_names)
    unknown = sorted(types - table.keys())
    unknown += sorted(f"family {f}" for f in families - {it.family for it in table.values()})
    unknown += sorted(f"GPU {g}" for g in gpus - {it.gpu_name for it in table.values()})
    if unknown:
        raise UnknownInstanceTypeError(
            f"{', '.join(unknown)}: not an instance type with NVIDIA GPUs in the Karpenter 1.14.1 "
            "instance-type table (facts/data/accelerated-instance-types.tsv)"
        )
    return tuple(
        it
        for it in table.values()
        if (not types or it.name in types)
        and (not families or it.family in families)
        and (not gpus or it.gpu_name in gpus)
    )


def check_mig_capable(
    pool_name: str,
    *,
    instance_types: Iterable[str] = (),
    instance_families: Iterable[str] = (),
    gpu_names: Iterable[str] = (),
) -> tuple[GpuInstanceType, ...]:
    """Refuse MIG for a pool unless every instance type it may launch has MIG-capable GPUs.

    For node-pool config validation: pass the pool's instance-type, family and GPU-name requirements.
    A pool without any of them may launch any GPU type (g5, g6, ...), so it is refused too.
    Returns the candidate instance types; raises `MigNotSupportedError` (or `UnknownInstanceTypeError`).
    """
    candidates = candidate_instance_types(instance_types, instance_families, gpu_names)
    if not candidates:
        raise MigNotSupportedError(
            f"GPU pool {pool_name!r} asks for MIG, but its instance-type requirements match no NVIDIA GPU "
            "instance type"
        )
    refused = [it for it in candidates if not it.mig_capable]
    if refused:
        shown = ", ".join(f"{it.name} ({it.gpu_name})" for it in refused[:8])
        more = f" and {len(refused) - 8} more" if len(refused) > 8 else ""
        raise MigNotSupportedError(
            f"{gpus_without_mig(refused)} do not support MIG, and GPU pool {pool_name!r} may launch them: "
            f"{shown}{more}. MIG needs {', '.join(sorted(MIG_CAPABLE_GPUS))} GPUs; restrict the pool "
            "to such instance types or families (e.g. p4d, p5) or drop its MIG profile"
        )
    return candidates


def gpus_without_mig(types: Iterable[GpuInstanceType]) -> str:
    """`L4 GPUs (g6)`, `A10G GPUs (g5) and L4 GPUs (g6)`: the GPU models of `types`, each with the families
    that carry it, as a person names them (NVIDIA spells its models in capitals)."""
    families: dict[str, list[str]] = {}
    for it in types:
        if it.family not in families.setdefault(it.gpu_name, []):
            families[it.gpu_name].append(it.family)
    named = [f"{gpu.upper()} GPUs ({', '.join(fams)})" for gpu, fams in sorted(families.items())]
    return named[0] if len(named) == 1 else f"{', '.join(named[:-1])} and {named[-1]}"


def _rows(path: Path) -> list[dict[str, str]]:
    """The rows of a table, by column: plain tab-separated values (no quoting: a test holds the tables to
    that), split directly, which is twice as fast as the csv module on the 1,363 rows every synth reads."""
    header, *lines = (line for line in path.read_text().splitlines() if not line.startswith("#"))
    columns = header.split("\t")
    return [dict(zip(columns, line.split("\t"), strict=True)) for line in lines]


@functools.cache
def instance_types() -> Mapping[str, InstanceType]:
    """Every instance type of the Karpenter 1.14.1 reference, by name."""
    quantity = functools.cache(parse_quantity)  # 296 distinct allocatable figures in 2,726 cells
    return {
        row["instance"]: InstanceType(
            name=row["instance"],
            family=row["instance"].split(".", 1)[0],
            arch=row["arch"],
            category=row["category"],
            generation=_int(row["generation"]),
            gpu_manufacturer=row["gpu-manufacturer"],
            vcpus=_int(row["vcpu"]),
            memory_mib=_int(row["memory-MiB"]),
            cpu=quantity(row["alloc-cpu"]),
            memory=quantity(row["alloc-memory"]),
            max_pods=_int(row["pods"]),
        )
        for row in _rows(ALL_INSTANCE_TYPES_TSV)
    }


@functools.cache
def ec2_instance_type_names() -> frozenset[str]:
    """Every EC2 instance type name pulumi-aws knows (`pulumi_aws.ec2.InstanceType`), plus the reference's."""
    # Imported here: the tables above are read by the policy pack too, whose virtualenv has no pulumi_aws.
    import pulumi_aws

    # Read as plain Enum members: mypy would otherwise spend a second on the value type of 1,400 members.
    members: Iterable[Enum] = pulumi_aws.ec2.InstanceType
    return frozenset(str(member.value) for member in members) | instance_types().keys()


@functools.cache
def ec2_instance_families() -> frozenset[str]:
    """Every instance family (the part before the dot) of `ec2_instance_type_names`."""
    return frozenset(name.split(".", 1)[0] for name in ec2_instance_type_names())


@functools.cache
def _accelerated_rows() -> Mapping[str, Mapping[str, str]]:
    return {row["instance"]: row for row in _rows(INSTANCE_TYPES_TSV)}


def instance_labels(name: str) -> dict[str, str]:
    """The well-known labels Karpenter gives a node of an instance type of the reference (the ones the tables
    carry): what a NodePool's or NodeOverlay's requirements are matched against. Empty for a type the
    reference does not list. Karpenter sets more (hypervisor, network bandwidth, ...); a reader of these
    must decide what a requirement on one of those means."""
    it = instance_types().get(name)
    if it is None:
        return {}
    labels = {
        "node.kubernetes.io/instance-type": name,
        "kubernetes.io/arch": it.arch,
        "kubernetes.io/os": "linux",
        "karpenter.k8s.aws/instance-family": it.family,
        "karpenter.k8s.aws/instance-size": name.split(".", 1)[1],
        "karpenter.k8s.aws/instance-category": it.category,
        "karpenter.k8s.aws/instance-generation": str(it.generation),
        "karpenter.k8s.aws/instance-cpu": str(it.vcpus),
        "karpenter.k8s.aws/instance-memory": str(it.memory_mib),
    }
    accelerated = _accelerated_rows().get(name, {})
    if accelerated.get("gpu-count"):
        labels |= {
            "karpenter.k8s.aws/instance-gpu-name": accelerated["gpu-name"],
            "karpenter.k8s.aws/instance-gpu-count": accelerated["gpu-count"],
            "karpenter.k8s.aws/instance-gpu-memory": accelerated["gpu-memory-MiB"],
            "karpenter.k8s.aws/instance-gpu-manufacturer": it.gpu_manufacturer,
        }
    return labels
