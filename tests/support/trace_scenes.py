"""Runs for the trace tests of pauses, cache breaks and subagents (issues 25, 26, 28), recorded
by :func:`record_scenes` into any trace store:

* thread ``approvals``: a turn holding three gated calls, resumed with an edited approval, a
  rejection with a message and an answer, each decided by a named person;
* thread ``cached``: two turns reporting cache reads; in the second, middleware rewrites the
  first user message, so ``CacheWatch`` reports the prefix broken at message 0;
* thread ``tree``: a parent whose ``researcher`` subagent calls a tool and a ``fetcher``
  subagent of its own (a grandchild), each model call with exact usage.
"""

from __future__ import annotations

from typing import Any

from plait import Agent, ModelRequest, ModelResponse, ScriptedModel, ToolCall, tool
from plait.messages import Usage, UserMessage
from plait.middleware.base import Middleware
from plait.middleware.context import DispatchContext
from plait.runtime import Answer, Approve, Reject
from plait.runtime.cache_watch import CacheWatch
from plait.trace import TraceRecorder, TraceStore

PARENT_USAGE = [Usage(100, 10), Usage(150, 20)]
RESEARCHER_USAGE = [Usage(40, 4), Usage(50, 5), Usage(60, 6)]
FETCHER_USAGE = [Usage(7, 1)]
TREE_INPUT = sum(u.input_tokens for u in PARENT_USAGE + RESEARCHER_USAGE + FETCHER_USAGE)
CACHED = [Usage(1_000, 5, cache_read_tokens=0), Usage(1_200, 5, cache_read_tokens=900)]
EDITED_TEXT = "hello, edited"


@tool(requires_approval=True)
def send(to: str) -> str:
    """Send mail."""
    return f"sent to {to}"


@tool(requires_approval=True)
def delete(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


@tool(requires_approval=True)
def ask(question: str) -> str:
    """Ask the user."""
    return "never runs: answered by a person"


@tool
def lookup(q: str) -> str:
    """Look something up."""
    return f"facts about {q}"


class RewriteFirstMessage(Middleware):
    """From its second model call on, sends the first user message edited (same id)."""

    def __init__(self) -> None:
        self.calls = 0

    async def before_model_call(self, request: ModelRequest, ctx: DispatchContext) -> ModelRequest:
        self.calls += 1
        if self.calls < 2:
            return request
        first = request.messages[0]
        edited = UserMessage(EDITED_TEXT, id=first.id)
        return request.replace(messages=[edited, *request.messages[1:]])


async def record_scenes(store: TraceStore) -> TraceRecorder:
    """Record the three threads (module docstring); the caller drains or closes the recorder."""
    recorder = TraceRecorder(store, agent="scenes")
    gated = Agent(
        ScriptedModel(
            [
                ModelResponse(
                    tool_calls=[
                        ToolCall("s1", "send", {"to": "bo"}),
                        ToolCall("d1", "delete", {"path": "notes.txt"}),
                        ToolCall("a1", "ask", {"question": "which day?"}),
                    ]
                ),
                "done as decided",
            ]
        ),
        tools=[send, delete, ask],
        middleware=[recorder],
    )
    await gated.run("mail bo, delete notes, ask", thread_id="approvals")
    await gated.resume(
        "approvals",
        {
            "s1": Approve(args={"to": "cy"}, by="ana"),
            "d1": Reject(message="keep the notes", by="ana"),
            "a1": Answer(result="Tuesday", by="bo"),
        },
    )
    cached = Agent(
        ScriptedModel(
            [
                ModelResponse(content="hi", usage=CACHED[0]),
                ModelResponse(content="again", usage=CACHED[1]),
            ]
        ),
        middleware=[recorder, RewriteFirstMessage(), CacheWatch()],
    )
    await cached.run("hello", thread_id="cached")
    await cached.run("and again", thread_id="cached")
    fetcher = Agent(ScriptedModel([ModelResponse(content="fetched page", usage=FETCHER_USAGE[0])]))
    researcher = Agent(
        ScriptedModel(
            [
                ModelResponse(
                    tool_calls=[ToolCall("l1", "lookup", {"q": "tides"})], usage=RESEARCHER_USAGE[0]
                ),
                ModelResponse(
                    tool_calls=[ToolCall("f1", "fetcher", {"task": "fetch the tide table"})],
                    usage=RESEARCHER_USAGE[1],
                ),
                ModelResponse(content="tides are high at noon", usage=RESEARCHER_USAGE[2]),
            ]
        ),
        tools=[lookup, fetcher.as_tool("fetcher", "Fetches pages.")],
    )
    parent = Agent(
        ScriptedModel(
            [
                ModelResponse(
                    tool_calls=[ToolCall("r1", "researcher", {"task": "when are the tides high?"})],
                    usage=PARENT_USAGE[0],
                ),
                ModelResponse(content="At noon.", usage=PARENT_USAGE[1]),
            ]
        ),
        tools=[researcher.as_tool("researcher", "Researches a question.")],
        middleware=[recorder],
    )
    result = await parent.run("when are the tides high?", thread_id="tree")
    assert result.usage.input_tokens == TREE_INPUT, result.usage
    return recorder


def spans_of(view: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    """Every span of ``kind`` in a run view, in order."""
    return [s for d in view["dispatches"] for s in d["spans"] if s["kind"] == kind]
