"""Deciding a paused turn's held calls from the command line.

A :class:`DecisionPolicy` says what scripts decide without asking: ``--approve-all``,
``--approve TOOL`` (repeatable, ``fnmatch`` patterns: ``mcp_*``) and ``--deny-all``. A held call
the flags do not cover is asked about when a person is at the terminal: its tool, its arguments,
the skill it belongs to and why it is held, then ``a`` (approve), ``e`` (edit the arguments as a
JSON object, then approve), ``r`` (reject, then a message for the model; Enter for the default)
or an empty line / the end of input (reject). With nobody to ask (standard input is not a
terminal, or ``--json``) it is rejected, with a message telling the model how the user can
approve it: deny by default.
"""

from __future__ import annotations

import fnmatch
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Protocol

from rich.console import Console
from rich.text import Text

from plait.cli.approval import read_line
from plait.cli.console import short
from plait.runtime.pause import Approve, Decision, PendingCall, Reject

if TYPE_CHECKING:
    from plait.middleware.base import Middleware
    from plait.middleware.context import Event
    from plait.runtime.agent import Agent
    from plait.runtime.turn import RunResult

__all__ = [
    "DecisionPolicy",
    "decide",
    "describe_pending",
    "held_by_flag",
    "person_at",
    "settle_paused_thread",
    "settle_pending",
]

NOBODY_TO_ASK = (
    "Rejected: nobody could be asked to approve this call (a non-interactive run). The user can "
    "approve it with --approve-all or --approve TOOL; tell them what you wanted to do."
)
DECLINED = "The user rejected this tool call; do not retry it as is."


@dataclass(slots=True)
class DecisionPolicy:
    """What is decided without asking. ``deny_all`` wins over the approvals."""

    approve_all: bool = False
    approve: list[str] = field(default_factory=list)
    deny_all: bool = False
    by: str = "cli"

    def decided(self, call: PendingCall) -> Decision | None:
        if self.deny_all:
            return Reject(DECLINED, by=f"{self.by} --deny-all")
        if self.approve_all:
            return Approve(by=f"{self.by} --approve-all")
        if any(fnmatch.fnmatchcase(call.name, p) for p in self.approve):
            return Approve(by=f"{self.by} --approve")
        return None


def describe_pending(call: PendingCall) -> Text:
    """One held call for the terminal: tool, skill, arguments, reason."""
    skill = f" (skill {call.skill})" if call.skill else ""
    args = short(json.dumps(call.args, ensure_ascii=False), 400)
    text = Text()
    text.append(f"{call.name}{skill}", style="bold")
    text.append(f" {args}\n  ", style="")
    text.append(call.reason, style="dim")
    return text


async def _ask(call: PendingCall, console: Console, stdin: IO[str]) -> Decision:
    console.print(Text("Approval needed: ", style="yellow bold") + describe_pending(call))
    while True:
        console.print(Text("[a]pprove, [e]dit, [r]eject (default r): ", style="yellow"), end="")
        answer = (await read_line(stdin)).strip().lower()
        if answer in ("a", "approve", "y", "yes"):
            return Approve(by="terminal")
        if answer == "":
            return Reject(DECLINED, by="terminal")
        if answer in ("r", "reject", "n", "no"):
            console.print(
                Text("message for the model (Enter: the default): ", style="yellow"), end=""
            )
            message = short((await read_line(stdin)).strip(), 2000)
            return Reject(message or DECLINED, by="terminal")
        if answer in ("e", "edit"):
            console.print(Text("arguments as one JSON object: ", style="yellow"), end="")
            line = await read_line(stdin)
            try:
                args = json.loads(line)
            except ValueError:
                args = None
            if isinstance(args, dict):
                return Approve(args=args, by="terminal (edited)")
            console.print(Text("Not a JSON object; asking again.", style="red"))


async def decide(
    pending: Sequence[PendingCall],
    policy: DecisionPolicy,
    *,
    console: Console | None = None,
    stdin: IO[str] | None = None,
) -> dict[str, Decision]:
    """One decision per held call: the policy's, else the person's at ``console`` / ``stdin``
    (both given: someone is at the terminal), else a rejection saying how to approve."""
    decisions: dict[str, Decision] = {}
    for call in pending:
        decision = policy.decided(call)
        if decision is None and console is not None and stdin is not None:
            decision = await _ask(call, console, stdin)
        decisions[call.id] = decision or Reject(NOBODY_TO_ASK, by="nobody (denied by default)")
    return decisions


def person_at(console: Console | None) -> tuple[Console | None, IO[str] | None]:
    """``(console, standard input)`` when someone is at the terminal to decide held calls (a
    console to ask on and a standard input that is a terminal), else ``(None, None)``."""
    if console is None or sys.stdin is None or not sys.stdin.isatty():
        return None, None
    return console, sys.stdin


class _Printer(Protocol):
    def __call__(self, event: Event) -> None: ...

    def finish(self) -> None: ...


async def settle_pending(
    agent: Agent,
    thread_id: str,
    pending: Sequence[PendingCall],
    printer: _Printer,
    policy: DecisionPolicy | None = None,
    *,
    console: Console | None = None,
    stdin: IO[str] | None = None,
) -> RunResult | None:
    """Decide ``pending`` (:func:`decide`) and resume the turn, printing its events, until it
    ends unpaused; returns the last result (``None`` if nothing was pending). ``plait run`` and
    ``plait chat`` call it when a turn pauses, with ``console`` and ``stdin`` when a person is at
    the terminal."""
    result: RunResult | None = None
    while pending:
        decisions = await decide(pending, policy or DecisionPolicy(), console=console, stdin=stdin)
        stream = agent.stream_resume(thread_id, decisions)
        try:
            async for event in stream:
                printer(event)
        finally:
            printer.finish()
        result = stream.result
        pending = result.pending if result is not None else []
    return result


async def settle_paused_thread(
    agent: Agent,
    thread_id: str,
    printer: _Printer,
    policy: DecisionPolicy | None = None,
    *,
    console: Console | None = None,
    stdin: IO[str] | None = None,
) -> RunResult | None:
    """:func:`settle_pending` for the turn ``thread_id`` is paused on, loaded from the store;
    ``None`` (nothing done) when the thread is not paused."""
    from plait.runtime.pause import paused_dispatch

    paused = paused_dispatch((await agent.store.load(thread_id)).state)
    if paused is None:
        return None
    return await settle_pending(
        agent, thread_id, paused.pending, printer, policy, console=console, stdin=stdin
    )


def held_by_flag(patterns: Sequence[str]) -> Middleware:
    """The ``ApprovalMiddleware`` of ``--require-approval PATTERN``: calls of the matched tools
    (MCP tools, skill scripts, the workspace's own) wait for a decision."""
    from plait.runtime.pause import ApprovalMiddleware

    return ApprovalMiddleware(list(patterns), reason="held by --require-approval")
