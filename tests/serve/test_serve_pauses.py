"""Paused turns over HTTP (a real ``plait serve`` process): frontend tools that run on the
AG-UI client, approvals as AG-UI interrupts, and the threads/runs ``resume``."""

from __future__ import annotations

import json
from typing import Any

import httpx
from ag_ui.core import (
    BaseEvent,
    Event,
    EventType,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    ToolCallArgsEvent,
    ToolCallResultEvent,
)
from pydantic import TypeAdapter
from serve_process import ServeProcess

EVENTS: TypeAdapter[BaseEvent] = TypeAdapter(Event)
CONFIRM = {
    "name": "confirm",
    "description": "Ask the user a yes/no question.",
    "parameters": {"type": "object", "properties": {"question": {"type": "string"}}},
}


def agui_body(thread: str, run: str, messages: list[dict[str, Any]], **extra: Any) -> Any:
    return {
        "threadId": thread,
        "runId": run,
        "messages": messages,
        "tools": extra.pop("tools", []),
        "context": [],
        "state": {},
        "forwardedProps": {},
        **extra,
    }


def post(server: ServeProcess, body: Any) -> list[BaseEvent]:
    events: list[BaseEvent] = []
    with httpx.stream(
        "POST", server.url + "/agui", json=body, headers=server.headers(), timeout=30
    ) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if line.startswith("data: "):
                events.append(EVENTS.validate_python(json.loads(line[6:])))
    return events


def stored(server: ServeProcess, thread: str) -> list[dict[str, Any]]:
    got = httpx.get(f"{server.url}/threads/{thread}", headers=server.headers())
    messages: list[dict[str, Any]] = got.json()["messages"]
    return messages


def test_a_frontend_tool_call_ends_the_run_and_the_clients_result_continues_it(
    server: ServeProcess,
) -> None:
    user = {"id": "u1", "role": "user", "content": "client confirm"}
    first = post(server, agui_body("fe-1", "r1", [user], tools=[CONFIRM]))
    kinds = [e.type for e in first]
    assert EventType.TOOL_CALL_START in kinds and EventType.TOOL_CALL_END in kinds
    assert EventType.TOOL_CALL_RESULT not in kinds  # the server did not run it
    args = next(e for e in first if isinstance(e, ToolCallArgsEvent))
    assert json.loads(args.delta) == {"question": "ok?"}
    finished = first[-1]
    assert isinstance(finished, RunFinishedEvent)
    assert isinstance(finished.outcome, RunFinishedSuccessOutcome)
    (call_id,) = finished.outcome.pending_tool_call_ids or []
    # The thread holds no half of the dispatch while the client runs the tool.
    assert [m["role"] for m in stored(server, "fe-1")] == ["user"]

    history: list[dict[str, Any]] = [
        user,
        {
            "id": "a1",
            "role": "assistant",
            "toolCalls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": "confirm", "arguments": args.delta},
                }
            ],
        },
        {"id": "t1", "role": "tool", "toolCallId": call_id, "content": "yes"},
    ]
    second = post(server, agui_body("fe-1", "r2", history, tools=[CONFIRM]))
    results = [e for e in second if isinstance(e, ToolCallResultEvent)]
    assert [(r.tool_call_id, r.content) for r in results] == [(call_id, "yes")]
    assert isinstance(second[-1], RunFinishedEvent) and second[-1].result == "got: yes"
    assert [m["role"] for m in stored(server, "fe-1")] == ["user", "assistant", "tool", "assistant"]


def test_bad_client_tools_are_a_typed_400_saying_what_to_change(server: ServeProcess) -> None:
    user = [{"id": "u", "role": "user", "content": "hi"}]
    cases = [
        ({**CONFIRM, "name": "add"}, "clashes with one of the agent's own tools"),
        ({**CONFIRM, "name": "no spaces"}, "letters, digits"),
        ({**CONFIRM, "parameters": {"type": "string"}}, "type 'object'"),
        ({**CONFIRM, "parameters": {"type": "object", "x": "y" * 20000}}, "simplify it"),
    ]
    for tool, says in cases:
        answer = httpx.post(
            server.url + "/agui",
            json=agui_body("fe-bad", "r", user, tools=[tool]),
            headers=server.headers(),
        )
        assert answer.status_code == 400
        error = answer.json()["error"]
        assert error["type"] == "invalid_client_tools" and says in error["message"]


def test_an_approval_is_an_agui_interrupt_and_a_resume_entry_decides_it(
    server: ServeProcess,
) -> None:
    user = {"id": "u1", "role": "user", "content": "delete notes.txt"}
    first = post(server, agui_body("ap-1", "r1", [user]))
    finished = first[-1]
    assert isinstance(finished, RunFinishedEvent)
    assert isinstance(finished.outcome, RunFinishedInterruptOutcome)
    (interrupt,) = finished.outcome.interrupts
    assert interrupt.reason == "tool_approval" and interrupt.tool_call_id == interrupt.id
    assert interrupt.metadata == {"tool": "delete", "args": {"name": "notes.txt"}, "skill": None}

    # An input that decides nothing is refused, saying what waits.
    again = httpx.post(
        server.url + "/agui",
        json=agui_body("ap-1", "r2", [user, {"id": "u2", "role": "user", "content": "hi"}]),
        headers=server.headers(),
    )
    assert again.status_code == 409 and interrupt.id in again.json()["error"]["message"]

    resume = [{"interruptId": interrupt.id, "status": "resolved", "payload": {"approved": True}}]
    second = post(server, agui_body("ap-1", "r3", [user], resume=resume))
    results = [e for e in second if isinstance(e, ToolCallResultEvent)]
    assert [r.content for r in results] == ["deleted notes.txt"]
    assert (
        isinstance(second[-1], RunFinishedEvent) and second[-1].result == "got: deleted notes.txt"
    )


def test_a_cancelled_resume_entry_rejects_the_call(server: ServeProcess) -> None:
    user = {"id": "u1", "role": "user", "content": "delete secret.txt"}
    first = post(server, agui_body("ap-2", "r1", [user]))
    assert isinstance(first[-1], RunFinishedEvent)
    assert isinstance(first[-1].outcome, RunFinishedInterruptOutcome)
    call_id = first[-1].outcome.interrupts[0].id
    second = post(
        server,
        agui_body("ap-2", "r2", [user], resume=[{"interruptId": call_id, "status": "cancelled"}]),
    )
    assert isinstance(second[-1], RunFinishedEvent)
    assert "rejected" in str(second[-1].result)
    assert "deleted" not in json.dumps(stored(server, "ap-2"))


def test_a_paused_run_reports_its_pending_calls_and_resume_decides_them(
    server: ServeProcess,
) -> None:
    with httpx.Client(base_url=server.url, headers=server.headers(), timeout=60) as c:
        started = c.post("/threads/tr-p/runs", json={"input": "delete a.txt"}).json()
        paused = c.get(f"/threads/tr-p/runs/{started['run_id']}/wait").json()
        assert paused["status"] == "paused"
        (pending,) = paused["pending"]
        assert pending["name"] == "delete" and pending["client"] is False
        busy = c.post("/threads/tr-p/runs", json={"input": "hi"})
        assert busy.status_code == 409 and busy.json()["error"]["type"] == "thread_paused"
        base = f"/threads/tr-p/runs/{started['run_id']}/resume"
        wrong = c.post(base, json={"decisions": {"nope": {"type": "approve"}}})
        assert wrong.status_code == 400 and pending["id"] in wrong.json()["error"]["message"]
        edited = {"type": "approve", "args": {"name": "b.txt"}}
        resumed = c.post(base, json={"decisions": {pending["id"]: edited}})
        assert resumed.status_code == 202
        done = c.get(f"/threads/tr-p/runs/{resumed.json()['run_id']}/wait").json()
        assert done["status"] == "success" and done["output"] == "got: deleted b.txt"
        again = c.post(base, json={"decisions": {pending["id"]: edited}})
        assert again.status_code == 409 and again.json()["error"]["type"] == "not_paused"


def test_the_openai_route_says_what_waits_and_a_new_message_rejects_it(
    server: ServeProcess,
) -> None:
    from openai import OpenAI

    client = OpenAI(base_url=server.url + "/v1", api_key=server.token or "none")
    thread = {"X-Plait-Thread": "oai-p"}
    first = client.chat.completions.create(
        model="plait",
        messages=[{"role": "user", "content": "delete x.txt"}],
        extra_headers=thread,
    )
    content = first.choices[0].message.content or ""
    assert "[paused:" in content and "delete requires approval" in content
    second = client.chat.completions.create(
        model="plait",
        messages=[
            {"role": "user", "content": "delete x.txt"},
            {"role": "assistant", "content": content},
            {"role": "user", "content": "never mind"},
        ],
        extra_headers=thread,
    )
    assert second.choices[0].message.content == "echo: never mind"
    roles = [m["role"] for m in stored(server, "oai-p")]
    assert roles == ["user", "assistant", "tool", "user", "assistant"]


def test_a_client_cannot_write_the_servers_state_keys(server: ServeProcess) -> None:
    user = [{"id": "u", "role": "user", "content": "hi"}]
    for key in ("plait.pending", "plait.serve.client_tools"):
        body = agui_body("fe-state", "r", user, state={key: [{"name": "add"}]})
        answer = httpx.post(server.url + "/agui", json=body, headers=server.headers())
        assert answer.status_code == 400
        error = answer.json()["error"]
        assert error["type"] == "invalid_state" and key in error["message"]
    assert httpx.get(f"{server.url}/threads/fe-state", headers=server.headers()).status_code == 404
