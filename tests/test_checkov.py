"""The project's own Kubernetes objects pass checkov, the Kubernetes security scanner.

checkov (PyPI, pinned in requirements-tools.txt) runs from .venv-tools, which scripts/setup.sh creates: its
own pins would downgrade packages of .venv. One run scans every manifest every stack declares, plus a
deliberately bad Job that proves the scanner checks something. A finding passes only when it is skipped
next to its object with a reason (`checkov.io/skip1: CKV_K8S_xx=<reason>`).
"""

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import yaml

from synth import snapshot
from tests.conftest import STACKS, stack_run
from tests.observability.helpers import in_cluster_stack

ROOT = Path(__file__).resolve().parent.parent
CHECKOV = ROOT / ".venv-tools" / "bin" / "checkov"
UNSAFE_JOB = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {"name": "unsafe", "namespace": "guard"},
    "spec": {
        "template": {
            "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox:latest"}]}
        }
    },
}


def _scan(directory: Path) -> list[dict[str, Any]]:
    assert CHECKOV.is_file(), "checkov is not installed: run `bash scripts/setup.sh` (it creates .venv-tools)"
    result = subprocess.run(
        [
            str(CHECKOV),
            "-d",
            str(directory),
            "--framework",
            "kubernetes",
            "--quiet",
            "--compact",
            "-o",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        # scripts/setup.sh compiles what checkov imports; whatever a scan imports beyond that, checkov may
        # cache in .venv-tools too.
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": ""},
    )
    assert result.stdout, result.stderr
    report = json.loads(result.stdout)
    return report if isinstance(report, list) else [report]


def test_every_declared_manifest_passes_checkov(tmp_path: Path) -> None:
    # The committed stacks, and the inCluster observability backend, whose PrometheusRule no stack declares.
    runs = {stack: stack_run(stack) for stack in STACKS} | {"in-cluster-observability": in_cluster_stack()}
    for stack, run in runs.items():
        for name, text in snapshot.render(run).items():
            if name.startswith("manifests/"):
                path = tmp_path / stack / name
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text)
    (tmp_path / "guard").mkdir()
    (tmp_path / "guard" / "unsafe-job.yaml").write_text(yaml.safe_dump(UNSAFE_JOB))

    report = _scan(tmp_path)
    results = [r.get("results", {}) for r in report]
    failed = [c for r in results for c in r.get("failed_checks", [])]
    ours = [
        f"{c['file_path']}: {c['check_id']} {c['check_name']}"
        for c in failed
        if "/guard/" not in c["file_path"]
    ]
    assert ours == [], "\n".join(ours)
    assert any("/guard/" in c["file_path"] for c in failed), "checkov reported nothing for an unsafe Job"
    assert sum(r["summary"]["passed"] for r in report) > 50  # --quiet lists failures only
    skipped = [c for r in results for c in r.get("skipped_checks", [])]
    assert all((c.get("suppress_comment") or "").strip() for c in skipped), skipped
