"""Models that need no network: for tests, demos and examples. Public API, not test helpers.

* :class:`ScriptedModel` answers from a list, one entry per call, and records every request.
* :class:`FunctionModel` answers with a Python function of the request.

Both stream: text is split into word-sized :class:`~plait.models.base.TextDelta` events and tool
call arguments into several :class:`~plait.models.base.ToolCallDelta` fragments, exactly as a
provider would, followed by the :class:`~plait.models.base.ResponseComplete`.

Script entries may be a :class:`ModelResponse`, a string (a text answer), a :class:`ToolCall`
(a response that calls one tool) or a list of :class:`ToolCall` (parallel calls)::

    model = ScriptedModel([
        ToolCall("c1", "get_weather", {"city": "Paris"}),
        "It is sunny in Paris.",
    ])
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from typing import TypeAlias

from plait.errors import PlaitError
from plait.messages import ToolCall
from plait.models.base import (
    ModelRequest,
    ModelResponse,
    ResponseComplete,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
)

__all__ = [
    "FunctionModel",
    "InvalidScriptEntry",
    "ScriptEntry",
    "ScriptExhausted",
    "ScriptIncomplete",
    "ScriptedModel",
    "stream_response",
]

ScriptEntry: TypeAlias = ModelResponse | str | ToolCall | Sequence[ToolCall]


class ScriptExhausted(PlaitError):
    """A :class:`ScriptedModel` was called more times than it has entries."""


class ScriptIncomplete(PlaitError, AssertionError):
    """:meth:`ScriptedModel.assert_complete` found script entries the agent never asked for; the
    message says how many, and shows the first one. An ``AssertionError``, so a test fails."""


class InvalidScriptEntry(PlaitError, TypeError):
    """A script entry or a :class:`FunctionModel`'s return value is not a response; the message
    names the model, which entry or call, and what it was."""


_ENTRY_FORMS = "a ModelResponse, a str, a ToolCall or a list of ToolCall"


def as_response(entry: ScriptEntry, where: str = "a script entry") -> ModelResponse:
    """Normalise a script entry to a :class:`ModelResponse`.

    Raises :class:`InvalidScriptEntry` (``where`` names the model and entry) for anything else:
    ``None``, a number, a dict, a list holding something other than :class:`ToolCall`, or a
    :class:`ModelResponse` whose ``content`` is not a ``str`` or whose ``tool_calls`` are not
    :class:`ToolCall` objects.
    """
    if isinstance(entry, ModelResponse):
        if isinstance(entry.content, str) and _tool_calls(entry.tool_calls) is not None:
            return entry
        raise InvalidScriptEntry(
            f"{where} is a ModelResponse with content of type {type(entry.content).__name__} "
            "and tool_calls that are not all ToolCall objects; content must be a str and "
            "tool_calls a list of ToolCall."
        )
    if isinstance(entry, str):
        return ModelResponse(content=entry, finish_reason="stop")
    if isinstance(entry, ToolCall):
        return ModelResponse(tool_calls=[entry], finish_reason="tool_calls")
    calls = _tool_calls(entry)
    if calls is None:
        shown = repr(entry)
        shown = shown if len(shown) <= 200 else shown[:200] + "…"
        raise InvalidScriptEntry(
            f"{where} is {type(entry).__name__} {shown}, not a response; use {_ENTRY_FORMS}."
        )
    return ModelResponse(tool_calls=calls, finish_reason="tool_calls")


def _tool_calls(value: object) -> list[ToolCall] | None:
    """``value`` as a list of tool calls, or ``None`` if it is not a list/tuple of them."""
    if not isinstance(value, list | tuple):
        return None
    calls = [c for c in value if isinstance(c, ToolCall)]
    return calls if len(calls) == len(value) else None


_WORDS = re.compile(r"\S+\s*|\s+")


async def stream_response(response: ModelResponse) -> AsyncIterator[StreamEvent]:
    """Replay ``response`` as a provider-like stream of deltas, then the completed response."""
    for chunk in _WORDS.findall(response.content):
        yield TextDelta(chunk)
    for index, call in enumerate(response.tool_calls):
        text = call.raw_args if call.raw_args is not None else json.dumps(call.args)
        third = max(1, len(text) // 3)
        yield ToolCallDelta(index, id=call.id, name=call.name, args_fragment=text[:third])
        for start in range(third, len(text), third):
            yield ToolCallDelta(index, args_fragment=text[start : start + third])
    yield ResponseComplete(response)


class ScriptedModel:
    """Answers call *n* with script entry *n*; ``requests`` records what it was sent.

    Calling it once more than the script allows raises :class:`ScriptExhausted`, which names how
    many calls the script covered, so a test sees at once that the agent looped.
    """

    def __init__(self, script: Iterable[ScriptEntry], *, name: str = "scripted") -> None:
        self._script = [
            as_response(e, f"entry {i} of ScriptedModel {name!r}") for i, e in enumerate(script)
        ]
        self._name = name
        self.requests: list[ModelRequest] = []

    @property
    def name(self) -> str:
        return self._name

    @property
    def remaining(self) -> int:
        return len(self._script) - len(self.requests)

    def assert_complete(self) -> None:
        """Raise :class:`ScriptIncomplete` unless every script entry was answered.

        Call it at the end of a test whose agent should have used the whole script: a step left
        over means the agent stopped early (an error, a guard, a missed tool call). Calling more
        times than the script allows already raises :class:`ScriptExhausted` during the run.
        """
        if self.remaining <= 0:
            return
        first = self._script[len(self.requests)]
        shown = repr(first.tool_calls) if first.tool_calls else repr(first.content)
        shown = shown if len(shown) <= 200 else shown[:200] + "…"
        raise ScriptIncomplete(
            f"ScriptedModel {self._name!r} answered {len(self.requests)} of {len(self._script)} "
            f"script entries; {self.remaining} never used, the next being {shown}. The agent "
            "stopped early (look for an error or a guard in its events), or remove the extra "
            "entries from the script."
        )

    def _next(self, request: ModelRequest) -> ModelResponse:
        index = len(self.requests)
        if index >= len(self._script):
            raise ScriptExhausted(
                f"ScriptedModel {self._name!r} has {len(self._script)} responses and was called "
                f"{index + 1} times; add responses to the script or check the agent for a loop."
            )
        self.requests.append(request)
        return self._script[index]

    async def generate(self, request: ModelRequest) -> ModelResponse:
        return self._next(request)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        async for event in stream_response(self._next(request)):
            yield event

    async def aclose(self) -> None:
        """Nothing to release."""


ModelFunction: TypeAlias = Callable[[ModelRequest], ScriptEntry | Awaitable[ScriptEntry]]


class FunctionModel:
    """Answers with ``fn(request)``; ``fn`` may be sync or async and may return any script entry.

    Use it to write a model whose answer depends on what it was sent (e.g. call a tool only if it
    is advertised). ``requests`` records every request.
    """

    def __init__(self, fn: ModelFunction, *, name: str = "function") -> None:
        self._fn = fn
        self._name = name
        self.requests: list[ModelRequest] = []

    @property
    def name(self) -> str:
        return self._name

    async def generate(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        result = self._fn(request)
        if inspect.isawaitable(result):
            result = await result
        call = len(self.requests)
        return as_response(result, f"what FunctionModel {self._name!r} returned for call {call}")

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        response = await self.generate(request)
        async for event in stream_response(response):
            yield event

    async def aclose(self) -> None:
        """Nothing to release."""
