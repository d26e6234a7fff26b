"""``TurnContext.finalizers``: run once when the turn ends, however it ends, last first."""

from __future__ import annotations

import pytest

from plait import Agent, FunctionModel, Middleware, ModelRequest, ScriptedModel, TurnContext
from plait.errors import ProviderError
from plait.middleware import Next
from plait.runtime import ErrorOccurred


class Registers(Middleware):
    def __init__(self, seen: list[tuple[str, str | None]], raising: bool = False) -> None:
        self.seen = seen
        self.raising = raising

    async def turn_input(self, ctx: TurnContext, next: Next) -> None:
        def first(error: BaseException | None) -> None:
            self.seen.append(("first", type(error).__name__ if error else None))

        def second(error: BaseException | None) -> None:
            self.seen.append(("second", type(error).__name__ if error else None))
            if self.raising:
                raise RuntimeError("finalizer broke")

        ctx.finalizers.extend([first, second])
        await next()


async def test_finalizers_run_last_first_after_a_successful_turn() -> None:
    seen: list[tuple[str, str | None]] = []
    await Agent(ScriptedModel(["ok"]), middleware=[Registers(seen)]).run("hi")
    assert seen == [("second", None), ("first", None)]


async def test_finalizers_get_the_error_of_a_failed_turn() -> None:
    def fail(request: ModelRequest) -> str:
        raise ProviderError("down", provider="fake", status=500)

    seen: list[tuple[str, str | None]] = []
    with pytest.raises(ProviderError):
        await Agent(FunctionModel(fail), middleware=[Registers(seen)]).run("hi")
    assert seen == [("second", "ProviderError"), ("first", "ProviderError")]


async def test_a_raising_finalizer_is_reported_and_the_others_still_run() -> None:
    seen: list[tuple[str, str | None]] = []
    result = await Agent(ScriptedModel(["ok"]), middleware=[Registers(seen, True)]).run("hi")
    assert result.output == "ok"
    assert seen == [("second", None), ("first", None)]
    [error] = [e for e in result.events if isinstance(e, ErrorOccurred)]
    assert error.where == "finalizer" and str(error.error) == "finalizer broke"
