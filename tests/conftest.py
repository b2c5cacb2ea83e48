"""Shared fixtures: each committed stack is run once per test session (runs are deterministic)."""

import gc
from functools import cache

import pytest

from synth.runner import ProgramRun, run_stack, stacks

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
