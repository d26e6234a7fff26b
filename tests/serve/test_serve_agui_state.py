"""AG-UI state and custom events, in this process: the skills state as a snapshot then a JSON
Patch delta; a battery's own event as ``CUSTOM``."""

from __future__ import annotations

import json
from dataclasses import dataclass

import httpx
from ag_ui.core import BaseEvent, CustomEvent, Event, StateDeltaEvent, StateSnapshotEvent
from pydantic import TypeAdapter

from plait import Agent, Middleware, ScriptedModel, TurnContext
from plait.middleware.base import Next
from plait.middleware.context import Event as PlaitEvent
from plait.serve import create_app

EVENTS: TypeAdapter[BaseEvent] = TypeAdapter(Event)


@dataclass(slots=True, kw_only=True)
class SkillNoted(PlaitEvent):
    name: str
    type: str = "skill_noted"


class NoteSkill(Middleware):
    """Records a loaded skill in the thread state and says so with its own event."""

    async def turn_input(self, ctx: TurnContext, next: Next) -> None:
        ctx.state["skills_loaded"] = [*ctx.state.get("skills_loaded", []), "csv"]
        ctx.emit(SkillNoted(name="csv"))
        await next()


async def test_skills_state_and_battery_events_reach_the_client() -> None:
    model = ScriptedModel(["ok"])
    app = create_app(Agent(model, middleware=[NoteSkill()]))
    body = {
        "threadId": "st-1",
        "runId": "r1",
        "messages": [{"id": "u1", "role": "user", "content": "go"}],
        "tools": [],
        "context": [],
        "state": {"skills_pinned": ["pdf"]},
        "forwardedProps": {},
    }
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        answer = await client.post("/agui", json=body)
    events = [
        EVENTS.validate_python(json.loads(line[6:]))
        for line in answer.text.splitlines()
        if line.startswith("data: ")
    ]
    snapshot = next(e for e in events if isinstance(e, StateSnapshotEvent))
    assert snapshot.snapshot == {"skills_pinned": ["pdf"]}
    delta = next(e for e in events if isinstance(e, StateDeltaEvent))
    ops = [op.model_dump(by_alias=True, exclude_none=True) for op in delta.delta]
    assert ops == [{"op": "add", "path": "/skills_loaded", "value": ["csv"]}]
    custom = next(e for e in events if isinstance(e, CustomEvent))
    assert custom.name == "plait.skill_noted" and custom.value["name"] == "csv"
    model.assert_complete()
