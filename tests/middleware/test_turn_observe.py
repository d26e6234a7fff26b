"""``TurnContext.observe``: observers see every event emitted after they registered, in
registration order and before the turn's own sink; an unobserved turn keeps its sink as is."""

from __future__ import annotations

from plait import Agent, ScriptedModel, ToolCall, TurnContext
from plait.middleware import Next
from plait.middleware.base import Middleware
from plait.middleware.context import Event
from plait.tools import tool


@tool
def echo(text: str) -> str:
    """Return the text."""
    return text


class Observes(Middleware):
    def __init__(self, name: str, seen: list[tuple[str, str]]) -> None:
        self.label = name
        self.seen = seen

    async def turn_input(self, ctx: TurnContext, next: Next) -> None:
        ctx.observe(lambda event: self.seen.append((self.label, event.type)))
        await next()


async def test_observers_see_each_event_in_order_before_the_sink() -> None:
    seen: list[tuple[str, str]] = []
    agent = Agent(
        ScriptedModel([ToolCall("c1", "echo", {"text": "a"}), "done"]),
        tools=[echo],
        middleware=[Observes("a", seen), Observes("b", seen)],
    )
    stream = agent.stream("hi", thread_id="t")
    async for event in stream:
        seen.append(("sink", event.type))
    finished = [who for who, kind in seen if kind == "tool_call_finished"]
    assert finished == ["a", "b", "sink"]
    # Events before the observers registered (turn_started) reach the sink only.
    assert [who for who, kind in seen if kind == "turn_started"] == ["sink"]
    assert [kind for who, kind in seen if who == "a"] == [kind for who, kind in seen if who == "b"]


def test_an_unobserved_turn_keeps_its_sink_and_the_first_observer_wraps_it_once() -> None:
    received: list[str] = []

    def sink(event: Event) -> None:
        received.append(event.type)

    ctx = TurnContext("t", None, None, [], {}, emit=sink)  # type: ignore[arg-type]
    assert ctx.emit is sink
    ctx.observe(lambda e: received.append("first:" + e.type))
    wrapped = ctx.emit
    ctx.observe(lambda e: received.append("second:" + e.type))
    assert ctx.emit is wrapped
    ctx.emit(Event(type="x"))
    assert received == ["first:x", "second:x", "x"]
