"""Small helpers for tests that build config and run the program."""

import json
from typing import Any

from synth.mocks import AwsMocks
from synth.runner import ProgramRun, RecordingMonitor, run_program

MINIMAL_CLUSTER = {"name": "ml-test"}


def config(region: str = "us-west-2", **sections: Any) -> dict[str, str]:
    """A config map like Pulumi's: `aws:region` plus `gpu-eks:<section>` as JSON text."""
    values = {"aws:region": region}
    sections.setdefault("cluster", MINIMAL_CLUSTER)
    values.update({f"gpu-eks:{key}": json.dumps(value) for key, value in sections.items()})
    return values


def run(region: str = "us-west-2", **sections: Any) -> ProgramRun:
    """Run the real program with these sections."""
    return run_program(config(region, **sections))


def run_failing(region: str = "us-west-2", **sections: Any) -> tuple[BaseException, RecordingMonitor]:
    """Run the real program expecting it to fail; returns the error and what had been registered."""
    monitor = RecordingMonitor(AwsMocks(region))
    try:
        run_program(config(region, **sections), monitor=monitor)
    except Exception as exc:
        return exc, monitor
    raise AssertionError("the program ran to completion but was expected to fail")
