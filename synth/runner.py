"""Run `__main__.py` for a stack in-process under the mocks and record every registration."""

import asyncio
import concurrent.futures
import contextlib
import functools
import hashlib
import json
import logging
import os
import pickle
import runpy
import types
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, TypeVarTuple

import pulumi
import pulumi.runtime.config as runtime_config
import pulumi.runtime.resource as runtime_resource
import yaml
from pulumi.runtime import rpc, settings
from pulumi.runtime.mocks import MockMonitor
from pulumi.runtime.proto import source_pb2
from pulumi.runtime.stack import run_pulumi_func

from components import yaml_text
from config.errors import nearest
from config.operation import OFFLINE_OPERATION, Operation
from config.production import ROOT
from config.stack import SECTIONS
from synth.fast_path import fast_path
from synth.mocks import AwsMocks
from synth.stack_files import stacks

__all__ = [
    "PROJECT",
    "ROOT",
    "SECRET",
    "InlineLoop",
    "ProgramRun",
    "RecordingMonitor",
    "Registration",
    "StackFileError",
    "config_map",
    "monitor_for",
    "project_config",
    "run_program",
    "run_stack",
    "share_runs",
    "stack_config",
    "stack_file_config",
    "stacks",
]

PROJECT = "gpu-eks"
_T = TypeVar("_T")
_Ts = TypeVarTuple("_Ts")
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
    retain_on_delete: bool = False
    """Its `retain_on_delete` option: a delete only drops it from the state; the object stays."""
    aliases: list[str] = field(default_factory=list)
    """URNs this resource had before (its `aliases` option): the engine moves their state to it."""
    import_id: str | None = None
    """Its `import_` option: the id of an existing resource the engine adopts instead of creating one."""
    custom_timeouts: dict[str, str] = field(default_factory=dict)
    """Its `custom_timeouts` option (`create`, `update`, `delete`), as the engine records them in the state;
    the delete of a resource the program no longer declares waits by the state's."""


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
                retain_on_delete=bool(request.retainOnDelete),
                outputs=_unwrap(rpc.deserialize_properties(response.object), mask=False),
                aliases=_alias_urns(request, response.urn),
                import_id=request.importId or None,
                custom_timeouts={
                    op: getattr(request.customTimeouts, op)
                    for op in ("create", "update", "delete")
                    if getattr(request.customTimeouts, op)
                },
            )
        )
        return response


def _alias_urns(request: Any, urn: str) -> list[str]:
    """The URNs of a resource's `aliases` option. The SDK sends alias specs; each is completed from the
    resource itself, as the engine does (a missing name, type, stack, project or parent means its own)."""
    stack, project = urn.removeprefix("urn:pulumi:").split("::")[:2]
    result = []
    for alias in request.aliases:
        # Aliases that only name another API version of a built-in Kubernetes kind (the SDK adds those to
        # every kind that had one) say nothing about this program; keep the ones that move a resource, and
        # the API versions the program names for its custom resources.
        moves = alias.urn or alias.spec.name or alias.spec.parentUrn or alias.spec.noParent
        if not moves and not _custom_resource_type(alias.spec.type):
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


def _custom_resource_type(type_token: str) -> bool:
    """A pulumi-kubernetes type token of a custom resource: its API group has a dot and is not under
    `k8s.io`, which Kubernetes keeps for its own APIs (as it does the groups without a dot, `apps`,
    `batch`, the core group); `helm.sh` is pulumi-kubernetes's own."""
    package, _, rest = type_token.partition(":")
    group = rest.partition("/")[0]
    return package == "kubernetes" and "." in group and not group.endswith("k8s.io") and group != "helm.sh"


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
    warnings: list[str] = field(default_factory=list)
    """What the program logged with `pulumi.log.warn` (`pulumi preview` shows these as warnings)."""

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


class StackFileError(Exception):
    """A stack file the Pulumi CLI would refuse to load: YAML syntax, no `config:`, a malformed key."""


def _shown(path: Path, root: Path) -> str:
    """A file as messages name it: by name in the project's root, else by its path (`--from-config`)."""
    return path.name if path.parent.resolve() == root.resolve() else str(path)


def _load_yaml(path: Path, shown: str | None = None) -> Any:
    text = path.read_text()
    try:
        # libyaml first: the pure-Python parser takes 20 ms for a stack file (every run).
        return yaml_text.load(text)
    except yaml.YAMLError:
        pass  # told below in the pure-Python parser's words, which name the line, column and construct
    try:
        return yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f", line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        started = (
            f" ({exc.context} at line {exc.context_mark.line + 1})"
            if exc.context and exc.context_mark and exc.problem_mark
            else ""
        )
        problem = exc.problem or exc.context
        raise StackFileError(f"{shown or path.name}{where}: not valid YAML: {problem}{started}") from None


def stack_config(stack: str, root: Path = ROOT) -> dict[str, str]:
    """The config map Pulumi would hand the program for `Pulumi.<stack>.yaml` (objects as JSON text): the
    project's config values from `Pulumi.yaml` (such as `pulumi:tags`), overridden by the stack's."""
    return stack_file_config(root / f"Pulumi.{stack}.yaml", root)


def stack_file_config(path: Path, root: Path = ROOT) -> dict[str, str]:
    """The config map of a stack file wherever it is (`synth plan --from-config`), read as Pulumi reads a
    stack file of the project at `root`. Raises `StackFileError` where the CLI would refuse the file."""
    shown = _shown(path, root)
    document = _load_yaml(path, shown)
    if not isinstance(document, dict) or "config" not in document:
        raise StackFileError(
            f"{shown}: has no top-level `config:` mapping, so the stack would get no configuration; "
            "put every setting under `config:` (e.g. `config:` then `  aws:region: us-west-2`)"
        )
    values = document["config"] or {}
    if not isinstance(values, dict):
        raise StackFileError(f"{shown}: `config:` must be a mapping of keys to values")
    keys = {str(key): _stack_key(str(key), shown) for key in values}
    return {**project_config(root), **config_map({keys[str(k)]: v for k, v in values.items()})}


def _stack_key(key: str, shown: str) -> str:
    """A stack-file key as Pulumi parses it (sdk/go/common/resource/config/key.go `ParseKey`): `ns:name`,
    or the old `ns:config:name`; anything else makes the CLI refuse the file."""
    parts = key.split(":")
    if len(parts) == 2 and all(parts):
        return key
    if len(parts) == 3 and parts[1] == "config":
        return f"{parts[0]}:{parts[2]}"
    close = nearest(key, SECTIONS)
    raise StackFileError(
        f"{shown}: {key!r} is not a configuration key: Pulumi expects <namespace>:<name>"
        + (f" (did you mean {close}?)" if close else "")
    )


def project_config(root: Path = ROOT) -> dict[str, str]:
    """Config values that `Pulumi.yaml` sets for every stack (`config: {key: {value: ...}}` or a plain value).
    Keys without a namespace belong to the project, as Pulumi reads project config."""
    document = _load_yaml(root / "Pulumi.yaml") or {}
    values = {}
    for key, entry in (document.get("config") or {}).items():
        value = entry.get("value", entry.get("default")) if isinstance(entry, dict) else entry
        if value is not None:
            values[key if ":" in key else f"{PROJECT}:{key}"] = value
    return config_map(values)


def config_map(values: Mapping[str, Any]) -> dict[str, str]:
    """Config values as the engine passes them: strings as they are, everything else as JSON."""
    return {
        key if ":" in key else f"{PROJECT}:{key}": value if isinstance(value, str) else json.dumps(value)
        for key, value in values.items()
    }


class InlineLoop(asyncio.SelectorEventLoop):
    """An event loop that runs what the SDK hands to its default executor at once, on the loop's thread.

    The SDK sends each engine call (register, invoke, read) through `run_in_executor` because the real engine
    is a gRPC server. The mock monitor answers at once: here the call runs where it is made, without the two
    thread wake-ups per call (about 120 calls in a synth of dev) that a busy machine stretches most. The
    monitor's own `_sync_await` pumps this loop re-entrantly while it runs (pulumi/runtime/sync_await.py)."""

    def run_in_executor(
        self, executor: concurrent.futures.Executor | None, func: Callable[[*_Ts], _T], *args: *_Ts
    ) -> "asyncio.Future[_T]":
        future = self.create_future()
        try:
            future.set_result(func(*args))
        except Exception as exc:  # delivered to whoever awaits, as from a pool thread
            future.set_exception(exc)
        return future


class _Warnings(logging.Handler):
    """Collects what the program logs as warnings through the mock engine."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno == logging.WARNING:
            self.messages.append(record.getMessage())


_RunKey = tuple[tuple[tuple[str, str], ...], str, str, Operation]
_shared_runs: dict[_RunKey, bytes] | None = None
"""Each shared run pickled: unpickling is a copy at a fifth of `copy.deepcopy`'s cost."""
_shared_directory: Path | None = None


def share_runs(directory: Path | None = None) -> None:
    """From now on, run the real program once per configuration in this process and hand out copies.

    For a process that runs the same configurations again and again (the tests: tests/conftest.py). What the
    program declares depends only on its config, stack and project (the mocks answer from the config's
    region) and the operation it stands for, so a run is keyed by exactly those; a run with its own `program`
    or `monitor`, or one that raises, is never shared. A copy, so that a test that changes its run changes no
    other test's. With `directory`, processes that share it share their runs too (the test workers of one
    session): each run is written there once, as a pickle named after its key."""
    global _shared_runs, _shared_directory  # noqa: PLW0603 (one switch for the whole process)
    if _shared_runs is None:
        _shared_runs = {}
    _shared_directory = directory


def _shared_run(key: _RunKey, run: Callable[[], ProgramRun]) -> bytes:
    """The shared run of `key`, pickled: this process's, another's (`_shared_directory`), or `run()`'s."""
    assert _shared_runs is not None
    if key in _shared_runs:
        return _shared_runs[key]
    path = None
    if _shared_directory is not None:
        path = _shared_directory / f"{hashlib.sha256(repr(key).encode()).hexdigest()}.pickle"
        with contextlib.suppress(OSError):  # not there yet: run it here
            _shared_runs[key] = path.read_bytes()
            return _shared_runs[key]
    _shared_runs[key] = pickle.dumps(run(), protocol=pickle.HIGHEST_PROTOCOL)
    if path is not None:
        # Whole or not at all: another process reads it only once it is renamed into place.
        partial = path.with_suffix(f".{os.getpid()}.partial")
        with contextlib.suppress(OSError):
            partial.write_bytes(_shared_runs[key])
            partial.replace(path)
    return _shared_runs[key]


def monitor_for(config: Mapping[str, str]) -> RecordingMonitor:
    """A fresh monitor over mocks of `config`'s region, as a run without a monitor of its own gets."""
    return RecordingMonitor(AwsMocks(config.get("aws:region", "us-west-2")))


def run_program(
    config: Mapping[str, str],
    *,
    stack: str = "test",
    program: Callable[[], None] | None = None,
    monitor: RecordingMonitor | None = None,
    project: str = PROJECT,
    operation: Operation = "preview",
) -> ProgramRun:
    """Run `program` (default: the real `__main__.py`) with `config` under the mocks, in a fresh runtime.

    The run stands for `pulumi preview` (what it records is what a preview shows): the program checks its
    configuration as a preview would, warning about what only `pulumi up` refuses. `operation="up"` checks it
    as `pulumi up` would. The mocks always run with `preview=False`, so that every output resolves.

    Raises whatever the program raises (e.g. `ConfigError`); pass your own `monitor` to see what was
    registered before that.
    """
    if _shared_runs is None or program is not None or monitor is not None:
        return _run_program(config, stack, program, monitor, project=project, operation=operation)
    key = (tuple(sorted(config.items())), stack, project, operation)
    shared = _shared_run(
        key, lambda: _run_program(config, stack, None, None, project=project, operation=operation)
    )
    copied: ProgramRun = pickle.loads(shared)
    return copied


def _run_program(
    config: Mapping[str, str],
    stack: str,
    program: Callable[[], None] | None,
    monitor: RecordingMonitor | None,
    *,
    project: str,
    operation: Operation,
) -> ProgramRun:
    monitor = monitor or monitor_for(config)
    warnings = _Warnings()
    logger = logging.getLogger("gpu-eks.synth.engine")
    logger.propagate = False
    logger.addHandler(warnings)
    settings.reset_options(project=project, stack=stack, preview=False)
    runtime_config.set_all_config(dict(config), [])
    loop = InlineLoop() if fast_path() else asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    operation_token = OFFLINE_OPERATION.set(operation)
    try:
        pulumi.runtime.set_mocks(
            monitor.mocks, project=project, stack=stack, preview=False, monitor=monitor, logger=logger
        )
        root = settings.get_root_resource()
        main = program or _run_main
        with _without_stack_traces():
            loop.run_until_complete(run_pulumi_func(main))
        exports: dict[str, Any] = getattr(root, "outputs", {})
        outputs, secret = loop.run_until_complete(_resolve(exports))
    finally:
        OFFLINE_OPERATION.reset(operation_token)
        loop.close()
        asyncio.set_event_loop(None)
        monitor.close_thread_loops()
        settings.reset_options()
        runtime_config.set_all_config({}, [])
        logger.removeHandler(warnings)
    return ProgramRun(list(monitor.registrations), outputs, secret, warnings.messages)


@contextlib.contextmanager
def _without_stack_traces() -> Iterator[None]:
    """Skip the SDK's per-resource stack-trace capture, which only feeds the engine's source positions.

    The mock monitor ignores them and nothing here records them; capturing reads the source of every frame
    (a tenth of a warm run). An empty trace is what the SDK itself sends when it finds no user frame.
    """
    capture = runtime_resource._get_stack_trace
    runtime_resource._get_stack_trace = source_pb2.StackTrace
    try:
        yield
    finally:
        runtime_resource._get_stack_trace = capture


def _as_registered(value: Any) -> Any:
    """A stack output as the engine receives it: the SDK drops every None value of a mapping when it
    serialises the outputs (pulumi/runtime/rpc.py `serialize_properties`: "We treat properties that
    serialize to None as if they don't exist"), so an output or key that is None does not exist for a
    StackReference; list items are kept."""
    if isinstance(value, Mapping):
        return {k: _as_registered(v) for k, v in value.items() if v is not None}
    if isinstance(value, list | tuple):
        return [_as_registered(v) for v in value]
    return value


async def _resolve(exports: Mapping[str, Any]) -> tuple[dict[str, Any], frozenset[str]]:
    values: dict[str, Any] = {}
    secret: set[str] = set()
    for key, value in exports.items():
        output = pulumi.Output.from_input(value)
        resolved = await output.future()
        if resolved is None:
            continue
        values[key] = _as_registered(resolved)
        if await output.is_secret():
            secret.add(key)
    return values, frozenset(secret)


def _run_main() -> None:
    """`runpy.run_path(__main__.py, run_name="__main__")`, as Pulumi's language host runs the program, without
    compiling the file again for every run (a run_path of a file is this call after a compile)."""
    path = ROOT / "__main__.py"
    status = path.stat()
    code = _compiled(path, status.st_mtime_ns, status.st_size)
    runpy._run_module_code(code, None, "__main__", pkg_name="", script_name=str(path))  # type: ignore[attr-defined]


@functools.cache
def _compiled(path: Path, mtime_ns: int, size: int) -> types.CodeType:
    return compile(path.read_bytes(), str(path), "exec", dont_inherit=True)


def run_stack(stack: str, root: Path = ROOT) -> ProgramRun:
    """Run the real program for `Pulumi.<stack>.yaml`."""
    return run_program(stack_config(stack, root), stack=stack)
