"""Small helpers for tests that build config and run the program."""

import json
import subprocess
from pathlib import Path
from typing import Any

from synth.runner import ProgramRun, RecordingMonitor, Registration, monitor_for, run_program

MINIMAL_CLUSTER = {"name": "ml-test"}


def config(region: str = "us-west-2", **sections: Any) -> dict[str, str]:
    """A config map like Pulumi's: `aws:region` plus `gpu-eks:<section>` as JSON text."""
    values = {"aws:region": region}
    sections.setdefault("cluster", MINIMAL_CLUSTER)
    values.update({f"gpu-eks:{key}": json.dumps(value) for key, value in sections.items()})
    return values


def closure(run: ProgramRun, urn: str) -> set[str]:
    """Everything `urn` depends on, directly or through other resources (the declared graph, where a
    resource's explicit provider counts as a dependency, as the engine orders it)."""
    by_urn = {r.urn: r for r in run.resources}

    def edges(resource: Registration) -> list[str]:
        return [*resource.dependencies, *([resource.provider_urn] if resource.provider_urn else [])]

    seen: set[str] = set()
    todo = edges(by_urn[urn])
    while todo:
        current = todo.pop()
        if current in seen or current not in by_urn:
            continue
        seen.add(current)
        todo += edges(by_urn[current])
    return seen


def run(region: str = "us-west-2", **sections: Any) -> ProgramRun:
    """Run the real program with these sections."""
    return run_program(config(region, **sections))


def run_failing(region: str = "us-west-2", **sections: Any) -> tuple[BaseException, RecordingMonitor]:
    """Run the real program expecting it to fail; returns the error and what had been registered."""
    raw = config(region, **sections)
    monitor = monitor_for(raw)
    try:
        run_program(raw, monitor=monitor)
    except Exception as exc:
        return exc, monitor
    raise AssertionError("the program ran to completion but was expected to fail")


def stand_in(directory: Path, name: str, script: str) -> Path:
    """An executable `name` in `directory` that runs the shell `script`: put `directory` first on PATH to
    replace a tool in a script under test."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(f"#!/bin/sh\n{script}")
    path.chmod(0o755)
    return path


def run_captured(
    args: list[str], *, env: dict[str, str], cwd: Path | None = None, timeout: int = 30
) -> subprocess.CompletedProcess[str]:
    """Run a command with exactly `env` (no inherited environment), its output captured as text; the caller
    judges the exit status."""
    return subprocess.run(
        args, cwd=cwd, capture_output=True, text=True, env=env, timeout=timeout, check=False
    )
