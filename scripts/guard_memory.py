"""How much memory the GPU node guard needs: its real listing and decisions over fake GPU Nodes and Karpenter
NodeClaims shaped like real ones, served as the API server serves them (pages of `PAGE_SIZE`).

    .venv/bin/python -m scripts.guard_memory [--nodes 1000] [--mig-share 0.5]

Each measurement runs in a fresh interpreter (`components/gpu_node_guard/guard.py` alone, as in the pod) and
prints the interpreter's resident memory after importing the program, its peak after one full sync (both
lists, `decide`), and the peak the guard's own allocations reach (tracemalloc, in a second run). The
Deployment's memory request and limit (`components/gpu_node_guard/manifests.py`) are sized from these
figures; docs/performance.md keeps the last run. Prints figures; asserts nothing.
"""

import argparse
import json
import re
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

GUARD = Path(__file__).resolve().parent.parent / "components" / "gpu_node_guard" / "guard.py"

_IMAGES = [
    ("nvcr.io/nvidia/k8s-device-plugin", 118_000_000),
    ("nvcr.io/nvidia/cloud-native/gpu-operator-validator", 162_000_000),
    ("nvcr.io/nvidia/k8s/dcgm-exporter", 1_100_000_000),
    ("nvcr.io/nvidia/cloud-native/k8s-mig-manager", 140_000_000),
    ("registry.k8s.io/nfd/node-feature-discovery", 72_000_000),
    ("602401143452.dkr.ecr.us-west-2.amazonaws.com/amazon-k8s-cni", 46_000_000),
    ("602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/kube-proxy", 30_000_000),
    ("602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/pause", 300_000),
    ("nvcr.io/nvidia/pytorch", 9_800_000_000),
]
"""What `status.images` of a busy GPU node lists (each repeated for a few tags below)."""


def fake_node(index: int, pool: str, mig: bool) -> dict[str, Any]:
    """A GPU Node of about the size the API server returns for one (labels from Karpenter, NFD and GFD,
    images, managed fields)."""
    name = f"ip-10-{index // 250}-{index % 250}-{index % 7}.us-west-2.compute.internal"
    labels = {
        "karpenter.sh/nodepool": pool,
        "karpenter.sh/capacity-type": "on-demand",
        "karpenter.sh/initialized": "true",
        "karpenter.k8s.aws/instance-family": "p5",
        "karpenter.k8s.aws/instance-gpu-count": "8",
        "node.kubernetes.io/instance-type": "p5.48xlarge",
        "topology.kubernetes.io/zone": "us-west-2a",
        "kubernetes.io/hostname": name,
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.deploy.device-plugin": "true",
        **{f"feature.node.kubernetes.io/cpu-cpuid.{flag}": "true" for flag in range(40)},
        **{f"nvidia.com/gpu.{key}": f"value-{key}" for key in range(12)},
    }
    if mig:
        labels |= {"nvidia.com/mig.config": "all-1g.10gb", "nvidia.com/mig.config.state": "success"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": f"00000000-0000-0000-0000-{index:012d}",
            "resourceVersion": str(1_000_000 + index),
            "creationTimestamp": "2026-09-01T10:00:00Z",
            "labels": labels,
            "annotations": {
                "alpha.kubernetes.io/provided-node-ip": "10.0.0.1",
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                "karpenter.sh/nodepool-hash": "1234567890",
                "karpenter.k8s.aws/ec2nodeclass-hash": "1234567890",
                "nfd.node.kubernetes.io/feature-labels": ",".join(f"cpu-cpuid.{f}" for f in range(40)),
            },
            "ownerReferences": [
                {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "name": f"{pool}-{index}", "uid": "x"}
            ],
            "managedFields": [
                {
                    "manager": manager,
                    "operation": "Update",
                    "apiVersion": "v1",
                    "time": "2026-09-01T10:00:00Z",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:metadata": {"f:labels": {f"f:{k}": {} for k in labels}}},
                }
                for manager in ("kubelet", "karpenter", "nfd-master", "gpu-operator")
            ],
        },
        "spec": {
            "providerID": f"aws:///us-west-2a/i-{index:017x}",
            "taints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}],
        },
        "status": {
            "capacity": {"cpu": "192", "memory": "2097152Mi", "nvidia.com/gpu": "56", "pods": "737"},
            "allocatable": {"cpu": "191450m", "memory": "2000000Mi", "nvidia.com/gpu": "56", "pods": "737"},
            "conditions": [
                {
                    "type": kind,
                    "status": "True" if kind == "Ready" else "False",
                    "lastHeartbeatTime": "2026-09-01T12:00:00Z",
                    "lastTransitionTime": "2026-09-01T10:05:00Z",
                    "reason": f"Kubelet{kind}",
                    "message": f"kubelet reports {kind}",
                }
                for kind in ("MemoryPressure", "DiskPressure", "PIDPressure", "Ready")
            ],
            "addresses": [
                {"type": "InternalIP", "address": "10.0.0.1"},
                {"type": "InternalDNS", "address": name},
                {"type": "Hostname", "address": name},
            ],
            "nodeInfo": {
                "machineID": "0" * 32,
                "systemUUID": "0" * 36,
                "bootID": "0" * 36,
                "kernelVersion": "6.12.0",
                "osImage": "Amazon Linux 2023",
                "containerRuntimeVersion": "containerd://2.1.0",
                "kubeletVersion": "v1.35.0-eks",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
            "images": [
                {"names": [f"{image}@sha256:{'a' * 64}", f"{image}:v{tag}"], "sizeBytes": size}
                for image, size in _IMAGES
                for tag in range(4)
            ],
        },
    }


def fake_nodeclaim(index: int, pool: str) -> dict[str, Any]:
    """A Karpenter NodeClaim of about the size the API server returns for one."""
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {
            "name": f"{pool}-{index}",
            "uid": f"10000000-0000-0000-0000-{index:012d}",
            "resourceVersion": str(2_000_000 + index),
            "labels": {
                "karpenter.sh/nodepool": pool,
                "karpenter.sh/capacity-type": "on-demand",
                "node.kubernetes.io/instance-type": "p5.48xlarge",
                "topology.kubernetes.io/zone": "us-west-2a",
            },
            "annotations": {"karpenter.sh/nodepool-hash": "1234567890"},
            "finalizers": ["karpenter.sh/termination"],
            "ownerReferences": [
                {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "name": pool, "uid": "p"}
            ],
        },
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": pool},
            "requirements": [
                {"key": f"karpenter.k8s.aws/instance-{k}", "operator": "In", "values": ["a", "b", "c"]}
                for k in range(12)
            ],
            "resources": {"requests": {"cpu": "96", "memory": "512Gi", "nvidia.com/gpu": "8", "pods": "9"}},
            "taints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}],
            "expireAfter": "720h",
        },
        "status": {
            "providerID": f"aws:///us-west-2a/i-{index:017x}",
            "nodeName": f"ip-10-{index}",
            "imageID": "ami-0123456789abcdef0",
            "capacity": {"cpu": "192", "memory": "2097152Mi", "nvidia.com/gpu": "56"},
            "allocatable": {"cpu": "191450m", "memory": "2000000Mi", "nvidia.com/gpu": "56"},
            "conditions": [
                {
                    "type": kind,
                    "status": "True",
                    "reason": kind,
                    "message": "",
                    "lastTransitionTime": "2026-09-01T10:05:00Z",
                    "observedGeneration": 1,
                }
                for kind in ("Launched", "Registered", "Initialized", "Ready", "Drifted", "Consolidatable")
            ],
        },
    }


_MEASURE = textwrap.dedent(
    """
    import datetime, gc, json, sys, tracemalloc
    sys.path.insert(0, {directory!r})
    import guard

    def status(field):  # VmRSS: resident now; VmHWM: its peak. (ru_maxrss would carry the parent's peak
        with open("/proc/self/status") as lines:  # across fork and exec on Linux.)
            return next(int(line.split()[1]) for line in lines if line.startswith(field + ":")) / 1024

    files = iter(a for a in sys.argv[1:] if a != "--traced")
    with open(next(files)) as settings:
        config = guard.GuardConfig.from_json(json.load(settings))
    gc.collect()
    imported = status("VmRSS")
    traced = "--traced" in sys.argv
    if traced:
        tracemalloc.start()

    def transport(method, path, body, content_type):  # each page read when asked for, like a response
        with open(next(files), "rb") as page:
            return 200, page.read()

    api = guard.Api(transport, "default")
    nodes = api.list(guard.NODES, config.selector(), guard.project_node)
    claims = api.list(guard.NODECLAIMS, config.selector(), guard.project_nodeclaim)
    now = datetime.datetime(2026, 9, 1, 12, 0, tzinfo=datetime.UTC)
    decisions = guard.decide(nodes, claims, config, now)
    peak = tracemalloc.get_traced_memory()[1] if traced else 0
    print(json.dumps({{
        "imported": imported,
        "peak": status("VmHWM"),
        "traced_peak": peak / 2**20,
        "nodes": len(nodes), "nodeclaims": len(claims), "patches": len(decisions.patches),
    }}))
    """
)


def pages(items: list[dict[str, Any]]) -> list[str]:
    """The API server's answers to the guard's paged list (`guard.PAGE_SIZE` a page), as JSON text."""
    size = page_size()
    chunks = [items[i : i + size] for i in range(0, len(items), size)] or [[]]
    return [
        json.dumps({"items": chunk, "metadata": {"continue": "more"} if i < len(chunks) - 1 else {}})
        for i, chunk in enumerate(chunks)
    ]


def page_size() -> int:
    """The guard's page size, read from the program (which this package does not import: it runs alone)."""
    match = re.search(r"^PAGE_SIZE = ([0-9]+)", GUARD.read_text(), re.MULTILINE)
    assert match, "guard.py defines PAGE_SIZE"
    return int(match.group(1))


def measure(nodes: int, mig_share: float) -> dict[str, Any]:
    """One fresh interpreter running one sync's listing and decisions over `nodes` Nodes and NodeClaims."""
    pools = {"gpu-mig": True, "gpu-training": False}
    mig_nodes = int(nodes * mig_share)
    node_items = [
        fake_node(i, "gpu-mig" if i < mig_nodes else "gpu-training", i < mig_nodes) for i in range(nodes)
    ]
    claim_items = [fake_nodeclaim(i, "gpu-mig" if i < mig_nodes else "gpu-training") for i in range(nodes)]
    settings = {
        "pools": {
            name: {"initializationTimeoutSeconds": 1800, "migGate": gate} for name, gate in pools.items()
        },
        "migTaint": {"key": "gpu-eks.io/mig-pending", "value": "true", "effect": "NoSchedule"},
    }
    with tempfile.TemporaryDirectory() as directory:
        files = [Path(directory) / "settings.json"]
        files[0].write_text(json.dumps(settings))
        served = pages(node_items) + pages(claim_items)
        for index, page in enumerate(served):
            files.append(Path(directory) / f"page-{index}.json")
            files[-1].write_text(page)
        script = _MEASURE.format(directory=str(GUARD.parent))
        runs = [
            json.loads(
                subprocess.run(
                    [sys.executable, "-c", script, *map(str, files), *flag],
                    capture_output=True,
                    text=True,
                    check=True,
                ).stdout
            )
            for flag in ([], ["--traced"])  # tracemalloc's bookkeeping would inflate the resident figures
        ]
    figures: dict[str, Any] = {**runs[0], "traced_peak": runs[1]["traced_peak"]}
    figures["json_mib"] = sum(len(p) for p in served) / 2**20
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1000, help="Nodes, and as many NodeClaims (1000)")
    parser.add_argument("--mig-share", type=float, default=0.5, help="share of them in a MIG pool (0.5)")
    arguments = parser.parse_args()
    print(f"python {sys.version.split()[0]}; {GUARD}")
    print(f"{'objects':>8} {'JSON MiB':>9} {'RSS after import':>17} {'RSS peak':>9} {'guard peak':>11}")
    for count in sorted({0, arguments.nodes // 10, arguments.nodes}):
        f = measure(count, arguments.mig_share)
        print(
            f"{count:>8} {f['json_mib']:>9.1f} {f['imported']:>13.1f} MiB {f['peak']:>5.1f} MiB"
            f" {f['traced_peak']:>7.1f} MiB"
        )


if __name__ == "__main__":
    main()
