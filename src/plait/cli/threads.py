"""``plait threads …``: list, show and delete what ``plait run`` / ``plait chat`` kept."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from pathlib import Path
from typing import Annotated, Any, NoReturn, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from plait.cli.console import fail, short
from plait.cli.db import (
    STORE_HELP,
    aclose_store,
    is_postgres_url,
    open_backend,
    open_thread_store,
    store_target,
)
from plait.context import purge_thread
from plait.errors import PlaitError
from plait.messages import AssistantMessage, Message, ToolMessage

threads_app = typer.Typer(help="List, show and delete stored conversations.", no_args_is_help=True)

StoreOption = Annotated[str | None, typer.Option("--store", help=STORE_HELP)]


T = TypeVar("T")


def _store(path: str | None, console: Console, thread_id: str | None = None) -> Any:
    """The thread store ``path`` names (``--store``, ``$PLAIT_STORE``, the default file). Without
    its SQLite file there is nothing to list (exit 0) and no ``thread_id`` to show or delete
    (exit 1)."""
    target = store_target(path)
    if isinstance(target, Path) and not target.exists():
        if thread_id is not None:
            _no_thread(console, thread_id)
        console.print(f"No threads yet ({escape(str(target))} does not exist). Run: plait run …")
        raise typer.Exit(0)
    return open_thread_store(target)


def _no_thread(console: Console, thread_id: str) -> NoReturn:
    fail(f"No thread {thread_id}. See: plait threads list", 1)


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


@threads_app.command("list")
def list_threads(store: StoreOption = None) -> None:
    """Threads, most recently written first, with their size and first message."""
    console = Console(highlight=False)
    threads = _store(store, console)

    async def rows() -> list[tuple[str, int, str]]:
        out = []
        for thread_id in await threads.list_threads():
            snapshot = await threads.load(thread_id)
            first = next((m.text for m in snapshot.messages if m.role == "user"), "")
            out.append((thread_id, len(snapshot.messages), short(first, 60)))
        return out

    found = _run(console, rows(), threads)
    table = Table(title="Threads")
    # Ids are what `show`, `delete` and `--thread` take: never wrapped or cut, however narrow.
    table.add_column("thread", no_wrap=True)
    table.add_column("messages")
    table.add_column("first message")
    for thread_id, count, first in found:
        table.add_row(escape(thread_id), str(count), escape(first))
    console.print(table)


@threads_app.command("show")
def show_thread(
    thread_id: Annotated[str, typer.Argument(help="The thread id (see plait threads list).")],
    store: StoreOption = None,
) -> None:
    """Every message of a thread, one line each."""
    console = Console(highlight=False)
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
    console = Console(highlight=False)
    threads = _store(store, console, thread_id)
    target = store_target(store)
    backend = open_backend(threads, target)

    has_blobs = is_postgres_url(target) or Path(backend.path).exists()

    async def delete() -> tuple[bool, list[str]]:
        if not await threads.delete(thread_id):
            return False, []
        if has_blobs:
            return True, list(await purge_thread(backend, thread_id))
        return True, []

    existed, removed = _run(console, delete(), backend, threads)
    if not existed:
        _no_thread(console, thread_id)
    console.print(f"Deleted thread {escape(thread_id)} and {len(removed)} offloaded file(s).")
