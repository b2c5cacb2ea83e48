"""Shared fixtures: each committed stack is run once per test session (runs are deterministic).

The offline fast path is on before anything imports a provider SDK (synth/fast_imports.py; GPU_EKS_FAST_PATH=0
runs the suite on Python's own imports and the SDK's thread pool).
"""

import gc
from functools import cache

from synth import fast_imports

fast_imports.install()

import pytest  # noqa: E402

from synth.runner import ProgramRun, run_stack, stacks  # noqa: E402

STACKS = stacks()

# The suite runs the program hundreds of times in one process, and each full collection walks every object the
# provider SDKs made on import (about a million, alive until exit): collect less often, and once a stack has
# run (the SDK modules are loaded by then), take what is alive out of the collector's sight.
gc.set_threshold(10_000, 10, 10)


@cache
def stack_run(stack: str) -> ProgramRun:
    """The resources and outputs the real program declares for `Pulumi.<stack>.yaml`."""
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
