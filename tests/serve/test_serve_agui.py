"""An AG-UI client built from the ``ag-ui-protocol`` types, reading ``plait serve``'s SSE."""

from __future__ import annotations

import json

import httpx
from ag_ui.core import (
    BaseEvent,
    Event,
    EventType,
    RunAgentInput,
    RunFinishedEvent,
    TextMessageContentEvent,
    ToolCallArgsEvent,
    ToolCallResultEvent,
    UserMessage,
)
from pydantic import TypeAdapter
from serve_process import ServeProcess

EVENTS: TypeAdapter[BaseEvent] = TypeAdapter(Event)


def run(server: ServeProcess, thread: str, text: str, run_id: str) -> list[BaseEvent]:
    """POST a RunAgentInput and parse every SSE ``data:`` line as an AG-UI event."""
    body = RunAgentInput(
        thread_id=thread,
        run_id=run_id,
        messages=[UserMessage(id=f"u-{run_id}", role="user", content=text)],
        tools=[],
        context=[],
        state={},
        forwarded_props={},
    )
    events: list[BaseEvent] = []
    with httpx.stream(
        "POST",
        server.url + "/agui",
        content=body.model_dump_json(by_alias=True),
        headers={
            **server.headers(),
            "Accept": "text/event-stream",
            "Content-Type": "application/json",
        },
        timeout=30,
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if line.startswith("data: "):
                events.append(EVENTS.validate_python(json.loads(line[6:])))
    return events


def test_a_run_streams_the_agui_lifecycle(server: ServeProcess) -> None:
    events = run(server, "agui-1", "hello there", "r1")
    kinds = [e.type for e in events]
    assert kinds[0] == EventType.RUN_STARTED
    assert kinds[1] == EventType.STATE_SNAPSHOT
    assert kinds[-1] == EventType.RUN_FINISHED
    start, end = kinds.index(EventType.TEXT_MESSAGE_START), kinds.index(EventType.TEXT_MESSAGE_END)
    assert start < end
    text = "".join(e.delta for e in events if isinstance(e, TextMessageContentEvent))
    assert text == "echo: hello there"
    assert isinstance(events[-1], RunFinishedEvent)
    assert events[-1].result == "echo: hello there"


def test_tool_calls_and_their_results_are_events(server: ServeProcess) -> None:
    events = run(server, "agui-2", "add 4 5", "r2")
    kinds = [e.type for e in events]
    for kind in (EventType.TOOL_CALL_START, EventType.TOOL_CALL_ARGS, EventType.TOOL_CALL_END):
        assert kind in kinds
    results = [e for e in events if isinstance(e, ToolCallResultEvent)]
    assert [r.content for r in results] == ["9"]
    assert kinds.index(EventType.TOOL_CALL_END) < kinds.index(EventType.TOOL_CALL_RESULT)
    args = next(e for e in events if isinstance(e, ToolCallArgsEvent))
    assert json.loads(args.delta) == {"a": 4, "b": 5}


def test_reasoning_streams_as_reasoning_events(server: ServeProcess) -> None:
    kinds = [e.type for e in run(server, "agui-3", "think hard", "r3")]
    expected = [
        EventType.REASONING_START,
        EventType.REASONING_MESSAGE_START,
        EventType.REASONING_MESSAGE_CONTENT,
        EventType.REASONING_MESSAGE_END,
        EventType.REASONING_END,
        EventType.TEXT_MESSAGE_START,
    ]
    positions = [kinds.index(k) for k in expected]
    assert positions == sorted(positions)


def test_a_second_run_continues_the_thread(server: ServeProcess) -> None:
    run(server, "agui-4", "first", "r4a")
    run(server, "agui-4", "second", "r4b")
    stored = httpx.get(server.url + "/threads/agui-4", headers=server.headers()).json()
    assert [m["content"] for m in stored["messages"]] == [
        "first",
        "echo: first",
        "second",
        "echo: second",
    ]
