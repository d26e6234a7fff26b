"""What ``plait chat`` runs its slash commands against (:class:`AgentHost`, the
:class:`~plait.cli.slash.ChatHost` over the running agent), and how it reads a line.

On a terminal the line is read with prompt_toolkit (:class:`TerminalReader`): a multi-line paste
arrives as one message (bracketed paste), Up/Down recall earlier lines, Ctrl-C clears the line and
Ctrl-D ends the session. Any other standard input is read a line at a time, one message each, as
before (:class:`LineReader`).
"""

from __future__ import annotations

import asyncio
import sys
from typing import TYPE_CHECKING, Any, Protocol

from plait.cli.slash import ChatSession, SkillState
from plait.cli.thread_choice import resolve_thread_id

if TYPE_CHECKING:
    from plait.cli.agents import Closer
    from plait.cli.config import Settings as _Settings
    from plait.cli.decisions import DecisionPolicy
    from plait.cli.display import TurnDisplay
    from plait.cli.options import Flags, Resolved
    from plait.pricing import Price
    from plait.runtime.agent import Agent
    from plait.skills.model import SkillEntry

__all__ = ["PROMPT", "AgentHost", "LineReader", "Reader", "TerminalReader", "reader_for"]

PROMPT = "you> "


class Reader(Protocol):
    """Reads the next message: raises ``EOFError`` at the end, ``KeyboardInterrupt`` on Ctrl-C."""

    def read(self, runner: asyncio.Runner) -> str: ...


class LineReader:
    """``input()``: one line, one message (a pipe, a file, or a terminal without prompt_toolkit's
    needs met)."""

    def read(self, runner: asyncio.Runner) -> str:
        return input(PROMPT)


class TerminalReader:
    """prompt_toolkit's prompt, on the chat's event loop: bracketed paste (a pasted block with
    newlines is one message; Enter sends it), history, Ctrl-C and Ctrl-D as ``input()`` raises
    them. Cursor-position requests are off: the prompt is one line and needs no layout below it,
    and a terminal that does not answer them would make prompt_toolkit print a warning."""

    def __init__(self) -> None:
        from prompt_toolkit import PromptSession
        from prompt_toolkit.history import InMemoryHistory
        from prompt_toolkit.output.vt100 import Vt100_Output

        output = Vt100_Output.from_pty(sys.stdout)
        output.enable_cpr = False
        self._session: Any = PromptSession(history=InMemoryHistory(), output=output)

    def read(self, runner: asyncio.Runner) -> str:
        # Coloured, so the prompt's trailing space is drawn (prompt_toolkit leaves out trailing
        # spaces of the default colours) and the terminal shows "you> " as input() does.
        text: str = runner.run(self._session.prompt_async([("ansigreen bold", PROMPT)]))
        return text


def reader_for(stdin: Any = None, stdout: Any = None) -> Reader:
    """:class:`TerminalReader` when standard input and output are both a terminal, else
    :class:`LineReader`."""
    stdin = sys.stdin if stdin is None else stdin
    stdout = sys.stdout if stdout is None else stdout
    if stdin is not None and stdin.isatty() and stdout is not None and stdout.isatty():
        return TerminalReader()
    return LineReader()


class AgentHost:
    """The slash commands' view of a running chat: ``/model`` builds a model from the merged
    settings (as ``--model`` does) and sets it on the agent, ``/thread`` resolves a prefix in the
    agent's store, ``/skills`` lists the session's skills folders. ``policy`` is what the
    approval flags decide of a paused turn's held calls (:mod:`plait.cli.decisions`)."""

    def __init__(
        self,
        runner: asyncio.Runner,
        agent: Agent,
        session: ChatSession,
        resolved: Resolved,
        flags: Flags,
        display: TurnDisplay,
        policy: DecisionPolicy | None = None,
    ) -> None:
        self.runner, self.agent, self.session = runner, agent, session
        self.resolved, self.flags, self.display = resolved, flags, display
        self.policy = policy  # what --approve-all / --approve / --deny-all decide
        self.closers: list[Closer] = []  # models /model built; closed at the end
        self._settings: _Settings | None = None
        self._entries: list[SkillEntry] | None = None

    def switch_model(self, spec: str) -> tuple[str, Price | None]:
        from plait.cli.options import agent_options, merged_settings

        if self._settings is None:
            self._settings = merged_settings(self.flags)
        self._settings.set("model", spec, "/model")
        built = agent_options(self._settings)
        self.agent.model = built.options.model
        self.closers.append(built.options.model.aclose)
        self.display.price = built.price
        return built.spec, built.price

    def find_thread(self, given: str) -> tuple[str, int]:
        from plait.cli.chat_threads import user_turns

        store = self.agent.store
        hint = "see: plait threads list (or /clear for a new thread)"
        thread_id = self.runner.run(resolve_thread_id(store, given, hint))
        return thread_id, user_turns(self.runner.run(store.load(thread_id)))

    def skills(self) -> list[SkillState]:
        from plait.skills.disclosure.scan import DisclosureScan
        from plait.skills.disclosure.snapshot import normalize_location

        entries = self._catalog()
        snapshot = self.runner.run(self.agent.store.load(self.session.thread_id))
        disclosed = set(DisclosureScan().update(snapshot.messages))
        return [
            SkillState(e.name, e.meta.description, normalize_location(e.location) in disclosed)
            for e in entries
        ]

    def _catalog(self) -> list[SkillEntry]:
        if self._entries is None:
            from plait.skills.catalog import Precedence, SkillCatalog
            from plait.skills.sources.filesystem import FilesystemSource

            folders = self.resolved.folders
            sources = [FilesystemSource(f.path, source_id=f.label) for f in folders]
            catalog = SkillCatalog(sources, precedence=Precedence.FIRST_WINS)
            self.runner.run(catalog.load())
            self._entries = catalog.active()
        return self._entries
