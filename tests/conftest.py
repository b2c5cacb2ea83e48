"""Shared fixtures: each committed stack is run once per test session (runs are deterministic)."""

from functools import cache

import pytest

from synth.runner import ProgramRun, run_stack, stacks

STACKS = stacks()


@cache
def stack_run(stack: str) -> ProgramRun:
    """The resources and outputs the real program declares for `Pulumi.<stack>.yaml`."""
    return run_stack(stack)


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
