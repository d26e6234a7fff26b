"""``plait threads …``: list, show and delete what ``plait run`` / ``plait chat`` kept."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.text import Text

from plait.cli.config import load_settings
from plait.cli.console import fail, short
from plait.cli.db import (
    STORE_HELP,
    aclose_store,
    is_postgres_url,
    open_backend,
    open_thread_store,
    store_target,
)
from plait.cli.run import THREAD_INFO_KEY
from plait.errors import PlaitError, quoted
from plait.messages import AssistantMessage, Message, ToolMessage, UserMessage

if TYPE_CHECKING:
    from plait.stores.base import ThreadSnapshot

threads_app = typer.Typer(help="List, show and delete stored conversations.", no_args_is_help=True)

StoreOption = Annotated[str | None, typer.Option("--store", help=STORE_HELP)]


T = TypeVar("T")


def _configured(path: str | None) -> str | None:
    """``--store`` if given, else the merged configuration's ``store`` (``$PLAIT_STORE``, then
    the config files), else ``None`` (the default file). A bad config file exits 2."""
    if path is not None:
        return path
    try:
        value = load_settings().get("store")
    except PlaitError as exc:
        fail(str(exc), 2)
    return None if value is None else str(value)


def _store(path: str | None, console: Console, thread_id: str | None = None) -> Any:
    """The thread store ``path`` names (:func:`_configured`: ``--store``, ``$PLAIT_STORE``, the
    config files, the default file). Without its SQLite file there is nothing to list (exit 0)
    and no ``thread_id`` to show or delete (exit 1)."""
    target = store_target(_configured(path))
    if isinstance(target, Path) and not target.exists():
        if thread_id is not None:
            _no_thread(console, thread_id)
        console.print(f"No threads yet ({escape(str(target))} does not exist). Run: plait run …")
        raise typer.Exit(0)
    return open_thread_store(target)


def _no_thread(console: Console, thread_id: str) -> NoReturn:
    fail(f"No thread {quoted(thread_id)}. See: plait threads list", 1)


def _run(console: Console, work: Coroutine[Any, Any, T], *close: Any) -> T:
    """Run ``work``, then close ``close`` in the same event loop; a damaged, foreign or
    unopenable store is a message and exit 1."""

    async def within() -> T:
        try:
            return await work
        finally:
            for resource in close:
                await aclose_store(resource)

    try:
        return asyncio.run(within())
    except PlaitError as exc:
        fail(str(exc), 1)


def _line(message: Message) -> str:
    if isinstance(message, ToolMessage):
        mark = "error" if message.is_error else "result"
        return f"[dim]{escape(message.name)} {mark}:[/dim] {escape(short(message.data, 100))}"
    text = escape(short(message.text, 160)) if message.text else ""
    if isinstance(message, AssistantMessage) and message.tool_calls:
        calls = ", ".join(c.name for c in message.tool_calls)
        text = f"{text} [cyan]→ {escape(calls)}[/cyan]".strip()
    return text


DEFAULT_LIST_LIMIT = 50
"""How many threads ``plait threads list`` shows unless ``--limit`` says otherwise."""


@threads_app.command("list")
def list_threads(
    store: StoreOption = None,
    limit: Annotated[
        int,
        typer.Option(
            "--limit",
            min=0,
            help=f"Show the newest N threads (0: all). Default: {DEFAULT_LIST_LIMIT}.",
        ),
    ] = DEFAULT_LIST_LIMIT,
) -> None:
    """Threads, most recently written first: when, which model, how many turns, first words."""
    console = Console(highlight=False, emoji=False)
    threads = _store(store, console)

    async def rows() -> tuple[list[ThreadRow], int]:
        ids = await threads.list_threads()
        shown = ids[:limit] if limit else ids
        # Only the threads shown are loaded: each load reads every message of its thread.
        return [thread_row(await threads.load(thread_id)) for thread_id in shown], len(ids)

    found, total = _run(console, rows(), threads)
    # Two lines a thread rather than a table: ids are what `show`, `delete` and `--thread`
    # take, so they are never wrapped or cut, however narrow the terminal.
    for row in found:
        turns = f"{row.turns} turn{'s' if row.turns != 1 else ''}"
        head = Text(row.thread_id, style="bold")
        head.append(f"  {row.when} · {row.model} · {turns}", style="dim")
        console.print(head, soft_wrap=True)
        console.print(Text(f"  {row.first}"), soft_wrap=True)
    if not found:
        console.print("No threads yet. Run: plait run …")
    elif total > len(found):
        more = total - len(found)
        console.print(Text(f"{more} more thread{'s' if more != 1 else ''} (--limit 0 lists all)"))


@dataclass(frozen=True, slots=True)
class ThreadRow:
    """One line of ``plait threads list``."""

    thread_id: str
    when: str
    model: str
    turns: int
    first: str


def thread_row(snapshot: ThreadSnapshot, now: datetime | None = None) -> ThreadRow:
    """What ``threads list`` shows of ``snapshot``: when its last turn started (local time;
    ``-`` for threads the CLI did not write), the model, the number of user turns and the first
    words of its first user message (at most 60 characters)."""
    info = snapshot.state.get(THREAD_INFO_KEY)
    info = info if isinstance(info, dict) else {}
    return ThreadRow(
        thread_id=snapshot.thread_id,
        when=_when(info.get("updated"), now),
        model=str(info.get("model") or "-"),
        turns=sum(1 for m in snapshot.messages if isinstance(m, UserMessage)),
        first=short(next((m.text for m in snapshot.messages if m.role == "user"), ""), 60),
    )


def _when(value: object, now: datetime | None) -> str:
    if not isinstance(value, str):
        return "-"
    try:
        when = datetime.fromisoformat(value).astimezone()
    except ValueError:
        return "-"
    now = now or datetime.now().astimezone()
    if when.date() == now.date():
        return when.strftime("today %H:%M")
    return when.strftime("%Y-%m-%d %H:%M")


@threads_app.command("show")
def show_thread(
    thread_id: Annotated[str, typer.Argument(help="The thread id (see plait threads list).")],
    store: StoreOption = None,
) -> None:
    """Every message of a thread, one line each."""
    console = Console(highlight=False, emoji=False)
    threads = _store(store, console, thread_id)
    snapshot = _run(console, threads.load(thread_id), threads)
    if not snapshot.messages:
        _no_thread(console, thread_id)
    for message in snapshot.messages:
        console.print(f"[bold]{message.role:>9}[/bold]  {_line(message)}")
    console.print(
        f"[dim]version {snapshot.version}; state keys: "
        f"{escape(', '.join(sorted(snapshot.state)) or '-')}[/dim]"
    )


@threads_app.command("delete")
def delete_thread(
    thread_id: Annotated[str, typer.Argument(help="The thread id (see plait threads list).")],
    store: StoreOption = None,
) -> None:
    """Delete a thread and what it offloaded (evicted results, summarized history)."""
    console = Console(highlight=False, emoji=False)
    threads = _store(store, console, thread_id)
    target = store_target(_configured(store))
    backend = open_backend(threads, target)

    has_blobs = is_postgres_url(target) or Path(backend.path).exists()

    async def delete() -> tuple[bool, list[str]]:
        from plait.context import purge_thread  # the context battery, for this command only

        if not await threads.delete(thread_id):
            return False, []
        if has_blobs:
            return True, list(await purge_thread(backend, thread_id))
        return True, []

    existed, removed = _run(console, delete(), backend, threads)
    if not existed:
        _no_thread(console, thread_id)
    console.print(f"Deleted thread {escape(thread_id)} and {len(removed)} offloaded file(s).")
