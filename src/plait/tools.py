"""Tools: definitions the model sees, callables the loop runs, and the per-turn registry.

``@tool`` turns a typed function (sync or async) into a :class:`Tool`: the name is the function's,
the description is its docstring, the JSON schema comes from its signature through pydantic. A
parameter annotated :class:`ToolContext` is injected by the loop and left out of the schema::

    @tool
    async def read_report(path: str, max_lines: int = 100) -> str:
        \"\"\"Read a report file and return its first lines.\"\"\"
        ...

Arguments the model sends are validated before the function runs; a mismatch raises
:class:`~plait.errors.ToolArgumentsError`, which the loop turns into an error result the model
can read.

A :class:`ToolRegistry` is built fresh for every turn. What the model is shown is a *snapshot*
(:meth:`ToolRegistry.definitions`) taken when a request is built; resolution
(:meth:`ToolRegistry.resolve`) happens when a call runs, so a tool registered after the snapshot
still resolves, and one unregistered since fails with :class:`~plait.errors.ToolResolutionError`.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, get_type_hints, overload

from plait.errors import (
    ConfigurationError,
    ToolArgumentsError,
    ToolResolutionError,
    clipped,
    quoted,
)
from plait.messages import ToolCall, ToolDefinition

if TYPE_CHECKING:
    from pydantic import BaseModel, ValidationError

    from plait.middleware.context import DispatchContext, TurnContext

__all__ = [
    "FunctionTool",
    "Tool",
    "ToolContext",
    "ToolDefinition",
    "ToolRegistry",
    "tool",
]


@dataclass(slots=True)
class ToolContext:
    """Handed to a tool whose function declares a parameter annotated ``ToolContext``."""

    call: ToolCall
    turn: TurnContext
    dispatch: DispatchContext

    @property
    def state(self) -> dict[str, Any]:
        """The thread's state dict (persisted with the thread)."""
        return self.turn.state


class Tool:
    """Base class of every tool. Subclasses implement :meth:`invoke`.

    ``deferred`` tools are registered (they resolve) but not advertised to the model until
    something discloses them; see the skills battery.
    """

    definition: ToolDefinition
    timeout: float | None = None
    """Seconds a call may run before it is cancelled; ``None`` uses the agent's
    ``Limits.tool_timeout``."""
    idempotent: bool = True
    """Whether running a call twice does no more harm than once. A durable turn
    (:mod:`plait.durable`) re-runs an idempotent call that was in flight when its worker died;
    a call of a tool with ``idempotent=False`` is never run again: it gets an error result."""
    requires_approval: bool | Callable[[dict[str, Any]], bool] = False
    """Whether a call waits for a person's decision before it runs (the turn pauses; see
    :mod:`plait.runtime.pause`): ``True``, or a function of the call's validated arguments."""

    def __init__(self, definition: ToolDefinition) -> None:
        self.definition = definition

    @property
    def name(self) -> str:
        return self.definition.name

    @property
    def deferred(self) -> bool:
        return bool(self.definition.metadata.get("defer_loading", False))

    def validate(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """Return validated arguments or raise :class:`ToolArgumentsError`. Default: accept."""
        return dict(args)

    async def invoke(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        """Run the tool with validated ``args``; return any JSON value."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


def _describe_errors(error: ValidationError) -> list[str]:
    problems = []
    for item in error.errors(include_url=False):
        loc = ".".join(str(p) for p in item["loc"]) or "(arguments)"
        problems.append(f"{loc}: {item['msg']}")
    return problems


class FunctionTool(Tool):
    """A tool backed by a typed Python function, sync or async (built by :func:`tool`).

    A sync function runs on the event loop unless ``blocking=True``, which runs it in a worker
    thread (use it for functions that wait on I/O or compute for long).

    ``timeout`` (seconds, > 0; ``math.inf`` for none) overrides the agent's
    ``Limits.tool_timeout`` for this tool. A timed-out async tool is cancelled; a sync tool in a
    worker thread cannot be stopped (the turn moves on without it, the thread runs to its end);
    a sync tool without ``blocking=True`` holds the event loop, so no timeout can fire while it
    runs.
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        blocking: bool = False,
        timeout: float | None = None,
        idempotent: bool = True,
        requires_approval: bool | Callable[[dict[str, Any]], bool] = False,
    ) -> None:
        self.idempotent = idempotent
        self.requires_approval = requires_approval
        from pydantic import (  # imported with the first tool, not plait
            ConfigDict,
            ValidationError,
            create_model,
        )

        tool_name = _tool_name(fn, name)
        target, bound = _unwrap(fn)
        self.fn = fn
        self.blocking = blocking
        self.timeout = check_timeout(timeout, f"tool {tool_name!r}")
        self._is_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(target)
        hints = _type_hints(target, tool_name)
        fields: dict[str, Any] = {}
        self._context_param: str | None = None
        for pname, param in inspect.signature(fn).parameters.items():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise ConfigurationError(
                    f"Tool function {tool_name} takes *{pname}; tools need named, typed parameters."
                )
            if pname in bound:  # fixed by functools.partial: not the model's to choose
                continue
            annotation = hints.get(pname, Any)
            if annotation is ToolContext:
                self._context_param = pname
                continue
            default = ... if param.default is param.empty else param.default
            fields[pname] = (annotation, default)
        self._model: type[BaseModel] = create_model(
            f"{tool_name}_args", __config__=ConfigDict(extra="forbid"), **fields
        )
        # Resolved once: validate() runs for every call (twice with the default guards), and a
        # `from pydantic import …` there goes through pydantic's lazy module __getattr__.
        self._validation_error: type[ValidationError] = ValidationError
        self._validate_python = self._model.__pydantic_validator__.validate_python
        schema = self._model.model_json_schema()
        schema.pop("title", None)
        doc = description if description is not None else inspect.getdoc(target) or ""
        super().__init__(ToolDefinition(tool_name, doc.strip(), schema, dict(metadata or {})))

    @property
    def runs_on_loop(self) -> bool:
        """Whether a call runs start to end on the event loop without suspending (a sync
        function without ``blocking=True``): no timeout can interrupt it, so none is set."""
        return not self._is_async and not self.blocking

    def validate(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """Validate ``args`` against the function's signature (pydantic, lax mode); returns a
        new dict of the validated values (defaults filled in), or raises
        :class:`ToolArgumentsError` listing each failing field.

        The model's core validator is called directly and the new instance's field dict
        returned (nothing else holds it): about 1 µs, under half of ``model_validate`` plus a
        ``getattr`` per field.
        """
        try:
            model = self._validate_python(args)
        except self._validation_error as exc:
            raise ToolArgumentsError(self.name, _describe_errors(exc)) from None
        validated: dict[str, Any] = model.__dict__
        return validated

    async def invoke(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        if self._context_param is not None:
            args = {**args, self._context_param: ctx}
        if self._is_async:
            return await self.fn(**args)
        if self.blocking:
            return await asyncio.to_thread(_in_thread, self.fn, args)
        return self.fn(**args)


def _in_thread(fn: Callable[..., Any], args: dict[str, Any]) -> Any:
    """``fn(**args)`` in a worker thread. A ``StopIteration`` or ``GeneratorExit`` it raises
    leaves as a ``RuntimeError`` (``from`` it, the way Python carries a ``StopIteration`` out of
    a coroutine, PEP 479): an asyncio future cannot hold a ``StopIteration`` (the call's await
    would never end), and a ``GeneratorExit`` thrown back into the awaiting task closes every
    coroutine on the way instead of reaching the code that turns it into the call's result."""
    try:
        return fn(**args)
    except (StopIteration, GeneratorExit) as exc:
        raise RuntimeError(f"function raised {type(exc).__name__}") from exc


@overload
def tool(fn: Callable[..., Any], /) -> FunctionTool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    deferred: bool = False,
    blocking: bool = False,
    metadata: Mapping[str, Any] | None = None,
    timeout: float | None = None,
    idempotent: bool = True,
    requires_approval: bool | Callable[[dict[str, Any]], bool] = False,
) -> Callable[[Callable[..., Any]], FunctionTool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    deferred: bool = False,
    blocking: bool = False,
    metadata: Mapping[str, Any] | None = None,
    timeout: float | None = None,
    idempotent: bool = True,
    requires_approval: bool | Callable[[dict[str, Any]], bool] = False,
) -> FunctionTool | Callable[[Callable[..., Any]], FunctionTool]:
    """Make a :class:`FunctionTool` from a typed function; usable bare or with options.

    ``blocking=True`` runs a sync function in a worker thread so it cannot stall the loop;
    ``deferred=True`` registers the tool without advertising it (see the skills battery);
    ``timeout`` overrides ``Limits.tool_timeout`` for this tool (see :class:`FunctionTool`);
    ``idempotent=False`` marks a tool that must not run twice (see :attr:`Tool.idempotent`).
    ``requires_approval`` (``True``, or a function of the validated arguments) pauses the turn
    on each call until a person decides (see :mod:`plait.runtime.pause`).
    """

    def build(f: Callable[..., Any]) -> FunctionTool:
        meta = dict(metadata or {})
        if deferred:
            meta["defer_loading"] = True
        return FunctionTool(
            f,
            name=name,
            description=description,
            metadata=meta,
            blocking=blocking,
            timeout=timeout,
            idempotent=idempotent,
            requires_approval=requires_approval,
        )

    return build(fn) if fn is not None else build


_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""Tool names both OpenAI and Anthropic accept."""


def _tool_name(fn: object, name: str | None) -> str:
    """``name``, else ``fn``'s own, checked against what the providers accept (a name they
    reject would fail every request with a 400)."""
    if not callable(fn):
        raise ConfigurationError(
            f"@tool needs a function (or another callable), got {type(fn).__name__} "
            f"{quoted(repr(fn))}."
        )
    found = name if name is not None else getattr(fn, "__name__", None)
    if found is None:
        raise ConfigurationError(
            f"A {type(fn).__name__} object has no __name__; pass name=... "
            "(@tool(name='...') or FunctionTool(fn, name='...'))."
        )
    if not isinstance(found, str) or not _TOOL_NAME.fullmatch(found):
        raise ConfigurationError(
            f"{quoted(found)} is not a valid tool name: use letters, digits, '_' and '-', "
            "at most 64 characters (what OpenAI and Anthropic accept); pass name=... ."
        )
    return found


def _unwrap(fn: Callable[..., Any]) -> tuple[Callable[..., Any], frozenset[str]]:
    """The function whose hints and docstring describe ``fn`` (through ``functools.partial``,
    or a callable object's ``__call__``), and the keyword arguments partials fixed."""
    bound: set[str] = set()
    target: Any = fn
    while isinstance(target, functools.partial):
        bound.update(target.keywords)
        target = target.func
    if not (inspect.isfunction(target) or inspect.ismethod(target)):
        target = getattr(target, "__call__", target)  # noqa: B004 (a callable object)
    return target, frozenset(bound)


def _type_hints(target: Callable[..., Any], tool_name: str) -> dict[str, Any]:
    try:
        return get_type_hints(target)
    except Exception as exc:  # NameError for an annotation imported only for type checking
        raise ConfigurationError(
            f"Could not read the type hints of {tool_name}: {type(exc).__name__}: "
            f"{clipped(str(exc))}. Import every name its annotations use at run time (not only "
            "under TYPE_CHECKING)."
        ) from exc


def check_timeout(timeout: float | None, what: str) -> float | None:
    """``timeout`` validated as a float: ``None`` stays ``None`` (use the default), ``math.inf``
    means no timeout; anything not > 0 (NaN included) raises :class:`ConfigurationError`."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
        raise ConfigurationError(
            f"The timeout of {what} must be a number of seconds > 0 (math.inf for none), "
            f"got {timeout!r}."
        )
    return float(timeout)


class ToolRegistry:
    """The tools callable during one turn, by name.

    Built fresh for each turn from the agent's tools; middleware registers and unregisters
    projected tools on it. Registering a name that is taken replaces the entry only with
    ``replace=True``; unregistering is by identity, so a stale handle cannot remove a newer tool
    of the same name.
    """

    __slots__ = ("_tools", "_version")

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self._version = 0
        for t in tools:
            self.register(t)

    def register(self, tool: Tool, *, replace: bool = False) -> None:
        """Add ``tool``. Raises :class:`ConfigurationError` if its name is taken (unless
        ``replace``)."""
        existing = self._tools.get(tool.name)
        if existing is not None and existing is not tool and not replace:
            raise ConfigurationError(
                f"A tool named {tool.name!r} is already registered; "
                "rename one of them or pass replace=True."
            )
        self._tools[tool.name] = tool
        self._version += 1

    def unregister(self, tool: Tool) -> bool:
        """Remove ``tool`` if this exact object is registered; return whether it was."""
        if self._tools.get(tool.name) is tool:
            del self._tools[tool.name]
            self._version += 1
            return True
        return False

    def resolve(self, name: str) -> Tool:
        """The tool registered under ``name`` now, or :class:`ToolResolutionError`."""
        found = self._tools.get(name)
        if found is None:
            raise ToolResolutionError(name, self.advertised_names())
        return found

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Any:
        return iter(list(self._tools.values()))

    def __len__(self) -> int:
        return len(self._tools)

    @property
    def version(self) -> int:
        """Bumped on every change; lets callers cache derived views."""
        return self._version

    def advertised_names(self) -> list[str]:
        return [n for n, t in self._tools.items() if not t.deferred]

    def definitions(self) -> list[ToolDefinition]:
        """A snapshot of what to advertise: every registered tool that is not deferred."""
        advertised: list[ToolDefinition] = []
        for t in self._tools.values():  # a loop, not a comprehension: runs every model call
            if not t.deferred:
                advertised.append(t.definition)
        return advertised
