"""Shared fixtures: each configuration is run once per test process (runs are deterministic).

The offline fast path is on before anything imports a provider SDK (synth/fast_imports.py; GPU_EKS_FAST_PATH=0
runs the suite on Python's own imports and the SDK's thread pool), and the real program runs once per
configuration, stack and project: `run(...)`, `run_program(config)` and `run_stack(stack)` hand out copies of
a shared run (synth/runner.py `share_runs`). A test that changes what the program does by other means than
its config (patching a component) runs it with its own monitor, which is never shared:
`run_program(config, monitor=monitor_for(config))`.
"""

import gc
import os
import shutil
import tempfile
from functools import cache
from pathlib import Path

from synth import fast_imports

fast_imports.install()

import pytest  # noqa: E402

from synth.runner import ProgramRun, run_stack, share_runs, stacks  # noqa: E402

STACKS = stacks()
SHARED_RUNS = "GPU_EKS_SHARED_RUNS"
"""Where the test processes of one session share their program runs: made by the first process of the
session (pytest itself, or xdist's controller before it starts its workers, which inherit the variable) and
removed by it at the end."""


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput") and SHARED_RUNS not in os.environ:
        os.environ[SHARED_RUNS] = tempfile.mkdtemp(prefix="gpu-eks-runs-")
        config.add_cleanup(lambda: shutil.rmtree(os.environ.pop(SHARED_RUNS), ignore_errors=True))
    share_runs(Path(os.environ[SHARED_RUNS]) if SHARED_RUNS in os.environ else None)


# The suite runs the program hundreds of times in one process, and each full collection walks every object the
# provider SDKs made on import (about a million, alive until exit): collect less often, and once a stack has
# run (the SDK modules are loaded by then), take what is alive out of the collector's sight.
gc.set_threshold(10_000, 10, 10)


@cache
def stack_run(stack: str) -> ProgramRun:
    """The resources and outputs the real program declares for `Pulumi.<stack>.yaml` (one object for every
    test that asks: these fixtures are read, never changed)."""
    run = run_stack(stack)
    gc.collect()
    gc.freeze()
    return run


@pytest.fixture(params=STACKS)
def any_stack(request: pytest.FixtureRequest) -> ProgramRun:
    """Each committed stack in turn."""
    return stack_run(request.param)


@pytest.fixture
def dev() -> ProgramRun:
    return stack_run("dev")


@pytest.fixture
def prod() -> ProgramRun:
    return stack_run("prod")
