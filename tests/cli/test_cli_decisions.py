"""Deciding held calls on the command line (issue 26): the flags' policy, the prompt's answers
(approve, edit, reject), and deny by default with nobody to ask."""

from __future__ import annotations

import io

from rich.console import Console

from plait import Agent, ScriptedModel, ToolCall, ToolMessage, tool
from plait.cli.decisions import DecisionPolicy, decide, settle_pending
from plait.middleware.context import Event
from plait.runtime import Approve, PendingCall, Reject

HELD = [
    PendingCall("c1", "delete", {"name": "a"}, "delete requires approval"),
    PendingCall("c2", "mcp_send", {"to": "bo"}, "mcp_send: needs approval", "mail"),
]


class Collect:
    def __init__(self) -> None:
        self.events: list[Event] = []
        self.finished = 0

    def __call__(self, event: Event) -> None:
        self.events.append(event)

    def finish(self) -> None:
        self.finished += 1


async def test_the_flags_decide_and_deny_all_wins() -> None:
    chosen = await decide(HELD, DecisionPolicy(approve=["mcp_*"]))
    assert isinstance(chosen["c2"], Approve)
    assert isinstance(chosen["c1"], Reject) and "--approve" in chosen["c1"].message  # nobody
    denied = await decide(HELD, DecisionPolicy(approve_all=True, deny_all=True))
    assert all(isinstance(d, Reject) for d in denied.values())


async def test_the_prompt_asks_each_call_showing_its_tool_args_and_skill() -> None:
    out = io.StringIO()
    console = Console(file=out, width=200)
    answers = io.StringIO('e\n{"to": "al"}\nr\n')
    # c1 is asked first: "e" then the JSON; c2 then gets "r"
    chosen = await decide(HELD, DecisionPolicy(), console=console, stdin=answers)
    assert chosen["c1"] == Approve(args={"to": "al"}, by="terminal (edited)")
    assert isinstance(chosen["c2"], Reject)
    shown = out.getvalue()
    assert "delete" in shown and '"name": "a"' in shown and "mcp_send (skill mail)" in shown


async def test_settle_pending_resumes_until_the_turn_ends() -> None:
    @tool(requires_approval=True)
    def delete(name: str) -> str:
        """Delete."""
        return f"deleted {name}"

    script = [ToolCall("d1", "delete", {"name": "x"}), ToolCall("d2", "delete", {"name": "y"})]
    agent = Agent(ScriptedModel([*script, "both handled"]), tools=[delete])
    first = await agent.run("go", thread_id="t")
    printer = Collect()

    result = await settle_pending(
        agent, "t", first.pending, printer, DecisionPolicy(approve=["delete"])
    )

    assert result is not None and result.output == "both handled"
    assert printer.finished == 2  # paused again on d2, decided again
    data = [m.data for m in (await agent.store.load("t")).messages if isinstance(m, ToolMessage)]
    assert data == ["deleted x", "deleted y"]


async def test_reject_asks_for_a_message_the_model_reads_and_enter_keeps_the_default() -> None:
    out = io.StringIO()
    console = Console(file=out, width=200)
    answers = io.StringIO("r\nuse the archive instead\nr\n\n")
    chosen = await decide(HELD, DecisionPolicy(), console=console, stdin=answers)
    assert chosen["c1"] == Reject("use the archive instead", by="terminal")
    assert isinstance(chosen["c2"], Reject) and "rejected" in chosen["c2"].message
    assert "message for the model" in out.getvalue()


async def test_an_empty_line_or_the_end_of_input_rejects_without_asking_more() -> None:
    answers = io.StringIO("\n")
    chosen = await decide(
        HELD, DecisionPolicy(), console=Console(file=io.StringIO()), stdin=answers
    )
    assert all(isinstance(d, Reject) for d in chosen.values())
    assert answers.read() == ""
