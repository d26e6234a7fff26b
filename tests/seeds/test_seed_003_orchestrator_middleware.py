"""Seed 003 (Pleach orchestrator middleware): one test per documented behaviour.

The context-management middlewares of the same seed (eviction, summarization, the backend seam)
are tested in tests/context/.
"""

from __future__ import annotations

from typing import Any

import pytest

from plait import (
    Agent,
    DispatchContext,
    LanguageModelMiddleware,
    Middleware,
    MiddlewareStack,
    ModelRequest,
    ModelResponse,
    ScriptedModel,
    ToolCall,
    ToolMessage,
    ToolResult,
    tool,
    wrap_model,
)
from plait.middleware import ModelHandler, ToolHandler
from plait.middleware.ordering import Placement
from plait.models.base import StreamEvent, TextDelta


@tool
def echo(text: str) -> str:
    """Echo the text back."""
    return text


class Recorder(Middleware):
    """Implements every seam and records (name, hook) in a shared log."""

    def __init__(self, label: str, log: list[tuple[str, str]]) -> None:
        self.label = label
        self.log = log

    @property
    def name(self) -> str:
        return self.label

    async def before_model_call(self, request: ModelRequest, ctx: DispatchContext) -> ModelRequest:
        self.log.append((self.label, "before_model_call"))
        return request

    async def wrap_model_call(
        self, request: ModelRequest, ctx: DispatchContext, call_next: ModelHandler
    ) -> ModelResponse:
        self.log.append((self.label, "wrap_model_call:enter"))
        response = await call_next(request)
        self.log.append((self.label, "wrap_model_call:exit"))
        return response

    async def after_model_call(
        self, response: ModelResponse, request: ModelRequest, ctx: DispatchContext
    ) -> ModelResponse:
        self.log.append((self.label, "after_model_call"))
        return response

    async def before_tool_call(self, call: ToolCall, ctx: DispatchContext) -> ToolCall | None:
        self.log.append((self.label, "before_tool_call"))
        return call

    async def wrap_tool_call(
        self, call: ToolCall, ctx: DispatchContext, call_next: ToolHandler
    ) -> ToolResult:
        self.log.append((self.label, "wrap_tool_call:enter"))
        result = await call_next(call)
        self.log.append((self.label, "wrap_tool_call:exit"))
        return result

    async def after_tool_call(
        self, call: ToolCall, result: ToolResult, ctx: DispatchContext
    ) -> ToolResult:
        self.log.append((self.label, "after_tool_call"))
        return result


def _order(log: list[tuple[str, str]], hook: str) -> list[str]:
    return [label for label, h in log if h == hook]


# The seed's ordering table, extended with the wrappers, over three middlewares.
ORDERING_TABLE = [
    ("before_model_call", ["m1", "m2", "m3"]),  # first → last
    ("after_model_call", ["m3", "m2", "m1"]),  # last → first
    ("before_tool_call", ["m1", "m2", "m3"]),  # first → last
    ("after_tool_call", ["m1", "m2", "m3"]),  # first → last
    ("wrap_model_call:enter", ["m1", "m2", "m3"]),  # first registered is outermost
    ("wrap_model_call:exit", ["m3", "m2", "m1"]),
    ("wrap_tool_call:enter", ["m1", "m2", "m3"]),
    ("wrap_tool_call:exit", ["m3", "m2", "m1"]),
]


@pytest.mark.parametrize(("hook", "expected"), ORDERING_TABLE)
async def test_composing_a_stack_ordering_table(hook: str, expected: list[str]) -> None:
    log: list[tuple[str, str]] = []
    stack = MiddlewareStack().use(Recorder("m1", log)).use(Recorder("m2", log))
    stack.use(Recorder("m3", log))
    model = ScriptedModel([ToolCall("c1", "echo", {"text": "hi"}), "done"])
    await Agent(model, tools=[echo], middleware=stack).run("go")
    per_dispatch = {"before_model_call", "after_model_call"}
    base = hook.split(":")[0]
    runs = 2 if base in per_dispatch or base == "wrap_model_call" else 1
    assert _order(log, hook) == expected * runs


async def test_composing_a_stack_model_hooks_are_the_outermost_after_model_call() -> None:
    log: list[tuple[str, str]] = []

    def hook(label: str) -> Any:
        def run(response: ModelResponse, ctx: DispatchContext) -> None:
            log.append((label, "after_model_call"))

        run.__name__ = label
        return run

    model = ScriptedModel(["done"])
    middleware = [Recorder("m1", log), Recorder("m2", log), Recorder("m3", log)]
    agent = Agent(model, middleware=middleware, model_hooks=[hook("h1"), hook("h2")])
    await agent.run("go")
    assert _order(log, "after_model_call") == ["m3", "m2", "m1", "h1", "h2"]


async def test_composing_a_stack_pinned_middleware_moves_to_its_end() -> None:
    class Pinned(Recorder):
        placement = Placement(position="outermost")

    log: list[tuple[str, str]] = []
    middleware = [Recorder("m1", log), Recorder("m2", log), Pinned("p", log)]
    await Agent(ScriptedModel(["done"]), middleware=middleware).run("go")
    assert _order(log, "before_model_call") == ["p", "m1", "m2"]


async def test_composing_a_stack_outer_middleware_sees_final_response() -> None:
    class Stamp(Middleware):
        def __init__(self, label: str) -> None:
            self.label = label

        async def after_model_call(
            self, response: ModelResponse, request: ModelRequest, ctx: DispatchContext
        ) -> ModelResponse:
            return response.replace(content=response.content + f"<{self.label}")

    result = await Agent(ScriptedModel(["x"]), middleware=[Stamp("outer"), Stamp("inner")]).run(
        "go"
    )
    assert result.output == "x<inner<outer"


async def test_contract_every_method_is_optional() -> None:
    class Nothing(Middleware):
        pass

    stack = MiddlewareStack([Nothing()])
    assert all(not stack.implementing(h) for h in ("before_model_call", "turn_input"))
    result = await Agent(ScriptedModel(["ok"]), middleware=stack).run("go")
    assert result.output == "ok"


async def test_contract_before_model_call_reshapes_messages_tools_and_system_prompt() -> None:
    class Reshape(Middleware):
        async def before_model_call(
            self, request: ModelRequest, ctx: DispatchContext
        ) -> ModelRequest:
            return request.replace(
                system_prompt="reshaped", tools=[], messages=request.messages[-1:]
            )

    model = ScriptedModel(["ok"])
    await Agent(model, tools=[echo], system_prompt="orig", middleware=[Reshape()]).run("go")
    sent = model.requests[0]
    assert (sent.system_prompt, sent.tools, len(sent.messages)) == ("reshaped", [], 1)


async def test_contract_before_tool_call_modifies_the_call() -> None:
    class Rewrite(Middleware):
        async def before_tool_call(self, call: ToolCall, ctx: DispatchContext) -> ToolCall | None:
            return ToolCall(call.id, call.name, {"text": "rewritten"})

    model = ScriptedModel([ToolCall("c1", "echo", {"text": "hi"}), "done"])
    result = await Agent(model, tools=[echo], middleware=[Rewrite()]).run("go")
    tool_msg = next(m for m in result.new_messages if isinstance(m, ToolMessage))
    assert tool_msg.data == "rewritten"


async def test_contract_before_tool_call_null_skips_the_call() -> None:
    ran: list[str] = []

    @tool
    def side_effect() -> str:
        """Record that it ran."""
        ran.append("ran")
        return "ran"

    log: list[tuple[str, str]] = []

    class Skip(Middleware):
        async def before_tool_call(self, call: ToolCall, ctx: DispatchContext) -> ToolCall | None:
            return None

    stack = MiddlewareStack([Recorder("m1", log), Skip(), Recorder("m3", log)])
    model = ScriptedModel([ToolCall("c1", "side_effect", {}), "done"])
    result = await Agent(model, tools=[side_effect], middleware=stack).run("go")
    assert ran == []
    # later before hooks, the wrappers and the after hooks do not run for a skipped call
    assert _order(log, "before_tool_call") == ["m1"]
    assert _order(log, "after_tool_call") == []
    # the call still has its result message: the pair stays intact
    tool_msgs = [m for m in result.new_messages if isinstance(m, ToolMessage)]
    assert [(m.tool_call_id, m.is_error) for m in tool_msgs] == [("c1", True)]
    assert "skipped by middleware Skip" in tool_msgs[0].data
    # and the model saw the pair on its next call
    second = model.requests[1].messages
    assert isinstance(second[-1], ToolMessage) and second[-1].tool_call_id == "c1"


async def test_contract_after_tool_call_rewrites_the_result() -> None:
    class Upper(Middleware):
        async def after_tool_call(
            self, call: ToolCall, result: ToolResult, ctx: DispatchContext
        ) -> ToolResult:
            return ToolResult(result.tool_call_id, str(result.data).upper())

    model = ScriptedModel([ToolCall("c1", "echo", {"text": "hi"}), "done"])
    result = await Agent(model, tools=[echo], middleware=[Upper()]).run("go")
    assert [m.data for m in result.new_messages if isinstance(m, ToolMessage)] == ["HI"]


async def test_composing_a_stack_with_no_stack_wired_an_empty_one_runs() -> None:
    # The default guards are middleware too; without them, no middleware is an empty stack.
    agent = Agent(ScriptedModel(["ok"]), default_guards=False)
    assert isinstance(agent.middleware, MiddlewareStack) and len(agent.middleware) == 0
    assert (await agent.run("go")).output == "ok"


def test_composing_a_stack_use_chains() -> None:
    a, b = Middleware(), Middleware()
    stack = MiddlewareStack().use(a).use(b)
    assert list(stack) == [a, b]


def test_composing_a_stack_rejects_non_middleware() -> None:
    with pytest.raises(TypeError, match=r"subclass plait\.Middleware"):
        MiddlewareStack().use(object())  # type: ignore[arg-type]


async def test_model_request_carries_the_seed_fields_and_call_class() -> None:
    model = ScriptedModel(["ok"])
    agent = Agent(model, system_prompt="sys", model_name="m-1", temperature=0.3, max_tokens=99)
    result = await agent.run("go")
    r = model.requests[0]
    assert (r.system_prompt, r.model, r.temperature, r.max_tokens, r.call_class) == (
        "sys",
        "m-1",
        0.3,
        99,
        "agent",
    )
    # what the adapters' prompt caching reads (plait.models.prompt_cache), nothing else
    assert r.metadata == {"thread_id": result.thread_id, "projected_messages": 0}


# -- language-model middleware ---------------------------------------------------------------


class Log(LanguageModelMiddleware):
    def __init__(self, label: str, log: list[str]) -> None:
        self.label, self.log = label, log

    async def transform_params(self, request: ModelRequest, kind: Any) -> ModelRequest:
        self.log.append(f"{self.label}:transform:{kind}")
        return request.replace(temperature=(request.temperature or 0) + 1)

    async def wrap_generate(self, do_generate: Any, request: ModelRequest, model: Any) -> Any:
        self.log.append(f"{self.label}:generate:enter")
        response = await do_generate()
        self.log.append(f"{self.label}:generate:exit")
        return response.replace(content=response.content + self.label)

    async def wrap_stream(self, do_stream: Any, request: ModelRequest, model: Any) -> Any:
        self.log.append(f"{self.label}:stream")
        async for event in do_stream():
            yield TextDelta(event.text.upper()) if isinstance(event, TextDelta) else event


async def test_language_model_middleware_transform_params_and_wrap_generate() -> None:
    log: list[str] = []
    inner = ScriptedModel(["x"])
    model = wrap_model(inner, Log("a", log), Log("b", log))
    response = await model.generate(ModelRequest(messages=[]))
    assert log == [
        "a:transform:generate",
        "a:generate:enter",
        "b:transform:generate",
        "b:generate:enter",
        "b:generate:exit",
        "a:generate:exit",
    ]
    assert response.content == "xba"
    assert inner.requests[0].temperature == 2


async def test_language_model_middleware_wrap_stream() -> None:
    log: list[str] = []
    model = wrap_model(ScriptedModel(["hello world"]), Log("a", log))
    events: list[StreamEvent] = [e async for e in model.stream(ModelRequest(messages=[]))]
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text == "HELLO WORLD"
    assert log == ["a:transform:stream", "a:stream"]


async def test_language_model_middleware_wraps_any_model_used_by_an_agent() -> None:
    log: list[str] = []
    agent = Agent(wrap_model(ScriptedModel(["x"]), Log("a", log)))
    assert (await agent.run("go")).output == "xa"
