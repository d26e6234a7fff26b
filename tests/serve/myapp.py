"""The agent the serve tests (and ``bench/serve_load.py``) serve: ``plait serve myapp:agent``.

A fake model, copied into a temporary folder as ``myapp.py``:

- ``add A B`` calls the ``add`` tool, then answers ``sum: A+B``;
- ``think ...`` streams a line of reasoning before its answer;
- ``delete NAME`` calls ``delete`` (``requires_approval``: the turn pauses), then answers
  ``got: RESULT``;
- ``client TOOL`` calls the client (AG-UI frontend) tool ``TOOL`` with ``{"question": "ok?"}``
  if the request offers it, then answers ``got: RESULT``;
- ``slow ...`` streams its answer a word every 0.2 s (a turn to disconnect from);
- anything else is echoed back as ``echo: TEXT``.

``$PLAIT_FAKE_LATENCY`` (seconds, default 0) is waited before each answer (the bench's fixed
model latency); ``$PLAIT_TEST_SERVE_STORE`` is a SQLite file or a Postgres URL
(``$PLAIT_TEST_SERVE_SCHEMA`` its schema).
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import AsyncIterator

from plait import Agent, ModelRequest, ModelResponse, ToolCall, UserMessage, tool
from plait.messages import ToolMessage
from plait.models.base import ReasoningDelta, ResponseComplete, StreamEvent
from plait.models.scripted import stream_response
from plait.stores.base import ThreadStore

LATENCY = float(os.environ.get("PLAIT_FAKE_LATENCY", "0"))


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool(requires_approval=True)
def delete(name: str) -> str:
    """Delete a file (needs approval)."""
    return f"deleted {name}"


class FakeModel:
    """The model described in the module docstring."""

    name = "fake"

    def _answer(self, request: ModelRequest) -> tuple[ModelResponse, str]:
        last = request.messages[-1]
        if isinstance(last, ToolMessage):
            said = "sum" if last.name == "add" else "got"
            return ModelResponse(content=f"{said}: {last.data}", finish_reason="stop"), ""
        text = last.text if isinstance(last, UserMessage) else ""
        asked = re.fullmatch(r"(delete|client) (\S+)", text.strip())
        offered = {t.name for t in request.tools}
        if asked and (asked[1] == "delete" or asked[2] in offered):
            name, args = (
                ("delete", {"name": asked[2]})
                if asked[1] == "delete"
                else (
                    asked[2],
                    {"question": "ok?"},
                )
            )
            call = ToolCall(f"call_{name}", name, args)
            return ModelResponse(tool_calls=[call], finish_reason="tool_calls"), ""
        found = re.fullmatch(r"add (-?\d+) (-?\d+)", text.strip())
        if found:
            call = ToolCall("call_add", "add", {"a": int(found[1]), "b": int(found[2])})
            return ModelResponse(tool_calls=[call], finish_reason="tool_calls"), ""
        thought = "The user wants an echo." if text.startswith("think") else ""
        return ModelResponse(content=f"echo: {text}", finish_reason="stop"), thought

    async def generate(self, request: ModelRequest) -> ModelResponse:
        if LATENCY:
            await asyncio.sleep(LATENCY)
        return self._answer(request)[0]

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        if LATENCY:
            await asyncio.sleep(LATENCY)
        response, thought = self._answer(request)
        if thought:
            yield ReasoningDelta(thought)
        slow = response.content.startswith("echo: slow")
        async for event in stream_response(response):
            if slow and not isinstance(event, ResponseComplete):
                await asyncio.sleep(0.2)
            yield event

    async def aclose(self) -> None:
        """Nothing to release."""


def _store() -> ThreadStore:
    where = os.environ.get("PLAIT_TEST_SERVE_STORE", "threads.sqlite3")
    if where.startswith(("postgresql://", "postgres://")):
        from plait.stores.postgres import PostgresThreadStore

        return PostgresThreadStore(
            where, schema=os.environ.get("PLAIT_TEST_SERVE_SCHEMA", "public")
        )
    from plait.stores.sqlite import SQLiteThreadStore

    return SQLiteThreadStore(where)


agent = Agent(FakeModel(), tools=[add, delete], store=_store(), system_prompt="Be brief.")
