"""The middleware stack's seams: ``next()`` runs the rest of a pipeline once however often a hook
calls it, and a seam that returns the wrong thing fails with a ``ConfigurationError`` naming the
middleware."""

from __future__ import annotations

import pytest

from plait import (
    Agent,
    DispatchContext,
    DispatchRejected,
    Middleware,
    ModelRequest,
    ModelResponse,
    ScriptedModel,
    TurnAborted,
    TurnContext,
)
from plait.errors import ConfigurationError
from plait.middleware import ModelHandler, Next


async def test_a_hook_calling_next_twice_does_not_run_later_hooks_twice() -> None:
    seen: list[int] = []

    class Twice(Middleware):
        async def dispatch_input(self, ctx: DispatchContext, next: Next) -> None:
            await next()
            await next()

    class Counter(Middleware):
        async def dispatch_input(self, ctx: DispatchContext, next: Next) -> None:
            seen.append(ctx.index)
            await next()

    model = ScriptedModel(["never"])
    agent = Agent(model, middleware=[Twice(), Counter()])
    with pytest.raises(DispatchRejected) as info:
        await agent.run("go")
    assert seen == [0]
    assert isinstance(info.value.error, ConfigurationError)
    assert "Twice.dispatch_input called next() more than once" in str(info.value.error)
    assert model.requests == []


async def test_turn_output_next_twice_aborts_instead_of_double_writing() -> None:
    writes: list[str] = []

    class Twice(Middleware):
        async def turn_output(self, ctx: TurnContext, next: Next) -> None:
            await next()
            await next()

    class Writer(Middleware):
        async def turn_output(self, ctx: TurnContext, next: Next) -> None:
            writes.append(ctx.thread_id)
            await next()

    agent = Agent(ScriptedModel(["ok"]), middleware=[Twice(), Writer()])
    with pytest.raises(TurnAborted):
        await agent.run("go", thread_id="t")
    assert writes == ["t"]


class _NoneFromWrap(Middleware):
    async def wrap_model_call(
        self, request: ModelRequest, ctx: DispatchContext, call_next: ModelHandler
    ) -> ModelResponse:
        await call_next(request)
        return None  # type: ignore[return-value]


class _NoneFromBefore(Middleware):
    async def before_model_call(self, request: ModelRequest, ctx: DispatchContext) -> ModelRequest:
        return None  # type: ignore[return-value]


class _NoneFromAfter(Middleware):
    async def after_model_call(
        self, response: ModelResponse, request: ModelRequest, ctx: DispatchContext
    ) -> ModelResponse:
        return None  # type: ignore[return-value]


@pytest.mark.parametrize(
    ("middleware", "hook"),
    [
        (_NoneFromWrap(), "wrap_model_call"),
        (_NoneFromBefore(), "before_model_call"),
        (_NoneFromAfter(), "after_model_call"),
    ],
)
async def test_a_model_seam_returning_none_is_a_configuration_error_naming_it(
    middleware: Middleware, hook: str
) -> None:
    agent = Agent(ScriptedModel(["ok"]), middleware=[middleware], default_guards=False)
    with pytest.raises(ConfigurationError, match=rf"{middleware.name}\.{hook} returned NoneType"):
        await agent.run("go")
