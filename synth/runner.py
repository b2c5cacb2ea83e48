"""Run `__main__.py` for a stack in-process under the mocks and record every registration."""

import asyncio
import contextlib
import json
import runpy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
import pulumi.runtime.config as runtime_config
import yaml
from pulumi.runtime import rpc, settings
from pulumi.runtime.mocks import MockMonitor
from pulumi.runtime.stack import run_pulumi_func

from synth.mocks import AwsMocks

ROOT = Path(__file__).resolve().parent.parent
PROJECT = "gpu-eks"
SECRET = "[secret]"


@dataclass
class Registration:
    """One resource as the engine would see it: what was declared, and how it hangs together."""

    urn: str
    id: str
    type: str
    name: str
    parent: str | None
    custom: bool
    inputs: dict[str, Any]
    """Inputs with secrets unwrapped."""
    masked_inputs: dict[str, Any]
    """Inputs with every secret replaced by `[secret]`."""
    dependencies: list[str]
    """URNs this resource depends on: explicit `depends_on` and those carried by input Outputs."""
    property_dependencies: dict[str, list[str]]
    provider: str | None
    provider_urn: str | None
    """The explicit provider's URN: the engine orders a resource after its provider on create, and deletes
    it before its provider on destroy, like a dependency."""
    protect: bool
    ignore_changes: list[str]
    delete_before_replace: bool
    outputs: dict[str, Any] = field(default_factory=dict)
    aliases: list[str] = field(default_factory=list)
    """URNs this resource had before (its `aliases` option): the engine moves their state to it."""


class RecordingMonitor(MockMonitor):
    """The SDK's mock monitor, keeping the full registration request of every resource."""

    def __init__(self, mocks: pulumi.runtime.Mocks) -> None:
        super().__init__(mocks)
        self.registrations: list[Registration] = []
        self._thread_loops: set[asyncio.AbstractEventLoop] = set()

    def _remember_thread_loop(self) -> None:
        """Keep the event loop the SDK's mock monitor created on this (executor) thread.

        `MockMonitor` gives every thread that serves an RPC its own event loop and never closes it. Left
        to the garbage collector, such a loop can be finalised after its self-pipe sockets, and its
        `__del__` then fails ("Invalid file descriptor: -1"), which pytest reports at random.
        """
        with contextlib.suppress(RuntimeError):  # raised when this RPC needed no loop (the Stack's)
            self._thread_loops.add(asyncio.get_event_loop_policy().get_event_loop())

    def close_thread_loops(self) -> None:
        """Close the loops of the RPC threads (call once the program has finished)."""
        for loop in self._thread_loops:
            if not loop.is_running():
                loop.close()
        self._thread_loops.clear()

    def Invoke(self, request: Any) -> Any:
        try:
            return super().Invoke(request)  # type: ignore[no-untyped-call]
        finally:
            self._remember_thread_loop()

    def ReadResource(self, request: Any) -> Any:
        try:
            return super().ReadResource(request)  # type: ignore[no-untyped-call]
        finally:
            self._remember_thread_loop()

    def RegisterResource(self, request: Any) -> Any:
        try:
            response = super().RegisterResource(request)  # type: ignore[no-untyped-call]
        finally:
            self._remember_thread_loop()
        if request.type == "pulumi:pulumi:Stack":
            return response
        raw = rpc.deserialize_properties(request.object)
        self.registrations.append(
            Registration(
                urn=response.urn,
                id=response.id,
                type=request.type,
                name=request.name,
                parent=request.parent or None,
                custom=request.custom,
                inputs=_unwrap(raw, mask=False),
                masked_inputs=_unwrap(raw, mask=True),
                dependencies=sorted(set(request.dependencies)),
                property_dependencies={
                    key: sorted(deps.urns) for key, deps in sorted(request.propertyDependencies.items())
                },
                provider=request.provider.split("::")[-2] if request.provider else None,
                provider_urn=request.provider.rpartition("::")[0] if request.provider else None,
                protect=bool(request.protect),
                ignore_changes=list(request.ignoreChanges),
                delete_before_replace=bool(request.deleteBeforeReplace),
                outputs=_unwrap(rpc.deserialize_properties(response.object), mask=False),
                aliases=_alias_urns(request, response.urn),
            )
        )
        return response


def _alias_urns(request: Any, urn: str) -> list[str]:
    """The URNs of a resource's `aliases` option. The SDK sends alias specs; each is completed from the
    resource itself, as the engine does (a missing name, type, stack, project or parent means its own)."""
    stack, project = urn.removeprefix("urn:pulumi:").split("::")[:2]
    result = []
    for alias in request.aliases:
        # Aliases that only name an older API version of the same type (the SDKs add those to every
        # Kubernetes kind with one) say nothing about this program; keep the ones that move a resource.
        if not (alias.urn or alias.spec.name or alias.spec.parentUrn or alias.spec.noParent):
            continue
        if alias.urn:
            result.append(alias.urn)
            continue
        spec = alias.spec
        parent = "" if spec.noParent else (spec.parentUrn or request.parent)
        # Under the mock monitor the parent URN of a spec keeps the root Stack's type in its type chain;
        # the engine's URNs never have it.
        parent_type = parent.split("::")[2].removeprefix("pulumi:pulumi:Stack$") if parent else ""
        type_token = spec.type or request.type
        qualified = (
            type_token if parent_type in ("", "pulumi:pulumi:Stack") else f"{parent_type}${type_token}"
        )
        where = f"{spec.stack or stack}::{spec.project or project}"
        result.append(f"urn:pulumi:{where}::{qualified}::{spec.name or request.name}")
    return result


def _unwrap(value: Any, *, mask: bool) -> Any:
    if rpc.is_rpc_secret(value):
        return SECRET if mask else _unwrap(rpc.unwrap_rpc_secret(value), mask=mask)
    if isinstance(value, dict):
        return {k: _unwrap(v, mask=mask) for k, v in value.items()}
    if isinstance(value, list):
        return [_unwrap(v, mask=mask) for v in value]
    if isinstance(value, float) and value.is_integer():
        # The wire format carries every number as a double; integers read back as integers.
        return int(value)
    return value


@dataclass
class ProgramRun:
    """Everything one run of the program declared."""

    resources: list[Registration]
    outputs: dict[str, Any]
    secret_outputs: frozenset[str]

    def of_type(self, type_token: str) -> list[Registration]:
        """Every registration of a type token, in registration order."""
        return [r for r in self.resources if r.type == type_token]

    def one(self, type_token: str, name: str | None = None) -> Registration:
        """The single registration of a type (and name); fails loudly if there are none or several."""
        found = [r for r in self.of_type(type_token) if name is None or r.name == name]
        if len(found) != 1:
            names = [r.name for r in self.of_type(type_token)]
            raise LookupError(f"expected one {type_token} named {name!r}, found {len(found)} among {names}")
        return found[0]

    def by_urn(self, urn: str) -> Registration:
        """The registration with this URN."""
        return next(r for r in self.resources if r.urn == urn)


def stacks(root: Path = ROOT) -> list[str]:
    """Every committed stack: the `<stack>` of each `Pulumi.<stack>.yaml`."""
    return sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in root.glob("Pulumi.*.yaml"))


def stack_config(stack: str, root: Path = ROOT) -> dict[str, str]:
    """The config map Pulumi would hand the program for `Pulumi.<stack>.yaml` (objects as JSON text)."""
    return stack_file_config(root / f"Pulumi.{stack}.yaml")


def stack_file_config(path: Path) -> dict[str, str]:
    """The config map of a stack file, wherever it is."""
    document = yaml.safe_load(path.read_text()) or {}
    return config_map(document.get("config") or {})


def config_map(values: Mapping[str, Any]) -> dict[str, str]:
    """Config values as the engine passes them: strings as they are, everything else as JSON."""
    return {
        key if ":" in key else f"{PROJECT}:{key}": value if isinstance(value, str) else json.dumps(value)
        for key, value in values.items()
    }


def run_program(
    config: Mapping[str, str],
    *,
    stack: str = "test",
    program: Callable[[], None] | None = None,
    monitor: RecordingMonitor | None = None,
    project: str = PROJECT,
) -> ProgramRun:
    """Run `program` (default: the real `__main__.py`) with `config` under the mocks, in a fresh runtime.

    Raises whatever the program raises (e.g. `ConfigError`); pass your own `monitor` to see what was
    registered before that.
    """
    monitor = monitor or RecordingMonitor(AwsMocks(config.get("aws:region", "us-west-2")))
    settings.reset_options(project=project, stack=stack, preview=False)
    runtime_config.set_all_config(dict(config), [])
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        pulumi.runtime.set_mocks(monitor.mocks, project=project, stack=stack, preview=False, monitor=monitor)
        root = settings.get_root_resource()
        main = program or _run_main
        loop.run_until_complete(run_pulumi_func(main))
        exports: dict[str, Any] = getattr(root, "outputs", {})
        outputs, secret = loop.run_until_complete(_resolve(exports))
    finally:
        loop.close()
        asyncio.set_event_loop(None)
        monitor.close_thread_loops()
        settings.reset_options()
        runtime_config.set_all_config({}, [])
    return ProgramRun(list(monitor.registrations), outputs, secret)


async def _resolve(exports: Mapping[str, Any]) -> tuple[dict[str, Any], frozenset[str]]:
    values: dict[str, Any] = {}
    secret: set[str] = set()
    for key, value in exports.items():
        output = pulumi.Output.from_input(value)
        values[key] = await output.future()
        if await output.is_secret():
            secret.add(key)
    return values, frozenset(secret)


def _run_main() -> None:
    runpy.run_path(str(ROOT / "__main__.py"), run_name="__main__")


def run_stack(stack: str, root: Path = ROOT) -> ProgramRun:
    """Run the real program for `Pulumi.<stack>.yaml`."""
    return run_program(stack_config(stack, root), stack=stack)
