"""``plait threads …``: list, show, export and delete what ``plait run`` / ``plait chat`` kept.

Every command that takes a thread id takes a unique prefix of it too
(:mod:`plait.cli.thread_choice`); ids are printed in lowercase."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Coroutine
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.text import Text

from plait.cli.config import load_settings
from plait.cli.console import fail, report_note, short
from plait.cli.db import (
    STORE_HELP,
    aclose_store,
    is_postgres_url,
    open_backend,
    open_thread_store,
    store_target,
)
from plait.cli.run import THREAD_INFO_KEY
from plait.cli.thread_choice import (
    ThreadChoiceError,
    UnknownThread,
    resolve_thread_id,
    shown_id,
)
from plait.cli.threads_resume import resume
from plait.errors import PlaitError
from plait.messages import AssistantMessage, Message, ToolMessage, UserMessage
from plait.parts import FilePart, ImagePart, part_label

if TYPE_CHECKING:
    from plait.stores.base import ThreadSnapshot

threads_app = typer.Typer(
    help="List, show, export and delete stored conversations.", no_args_is_help=True
)

StoreOption = Annotated[str | None, typer.Option("--store", help=STORE_HELP)]
ThreadArgument = Annotated[
    str,
    typer.Argument(help="The thread id, or a unique prefix of it (see plait threads list)."),
]


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
    fail(str(UnknownThread(thread_id)), 2)


def _run(console: Console, work: Coroutine[Any, Any, T], *close: Any) -> T:
    """Run ``work``, then close ``close`` in the same event loop; an unknown or ambiguous thread
    id is a message and exit 2, a damaged, foreign or unopenable store a message and exit 1."""

    async def within() -> T:
        try:
            return await work
        finally:
            for resource in close:
                await aclose_store(resource)

    try:
        return asyncio.run(within())
    except ThreadChoiceError as exc:
        fail(str(exc), 2)
    except PlaitError as exc:
        fail(str(exc), 1)


SHOW_TEXT_CHARS = 160
"""How much of a message's text ``threads show`` prints on its line (``--full``: all of it)."""

SHOW_DATA_CHARS = 100
"""How much of a tool result ``threads show`` prints on its line (``--full``: all of it)."""


def _clip(value: object, limit: int, full: bool) -> str:
    if not full:
        return short(value, limit)
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def _line(message: Message, full: bool = False) -> str:
    parts = message.parts if isinstance(message, ToolMessage) else message.content
    labels = " ".join(part_label(p) for p in parts if isinstance(p, ImagePart | FilePart))
    if isinstance(message, ToolMessage):
        mark = "error" if message.is_error else "result"
        data = escape(_clip(message.data, SHOW_DATA_CHARS, full))
        text = f"[dim]{escape(message.name)} {mark}:[/dim] {data}"
    else:
        text = escape(_clip(message.text, SHOW_TEXT_CHARS, full)) if message.text else ""
    if labels:
        text = f"{text} [dim]{escape(labels)}[/dim]".strip()
    if isinstance(message, AssistantMessage) and message.tool_calls:
        if full:
            calls = ", ".join(
                f"{c.name}({json.dumps(c.args, ensure_ascii=False)})" for c in message.tool_calls
            )
        else:
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
        turns = _turns(row.turns)
        head = Text(shown_id(row.thread_id), style="bold")
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


async def _load(threads: Any, thread_id: str) -> ThreadSnapshot:
    """The thread ``thread_id`` (a whole id or a unique prefix) names."""
    snapshot: ThreadSnapshot = await threads.load(await resolve_thread_id(threads, thread_id))
    return snapshot


def _loaded(store: str | None, console: Console, thread_id: str) -> ThreadSnapshot:
    threads = _store(store, console, thread_id)
    snapshot = _run(console, _load(threads, thread_id), threads)
    if not snapshot.messages:
        _no_thread(console, thread_id)
    return snapshot


@threads_app.command("show")
def show_thread(
    thread_id: ThreadArgument,
    store: StoreOption = None,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="The thread as one JSON document: messages, state, version; images and files "
            "by reference (type, media_type, size, sha256), not their bytes.",
        ),
    ] = False,
    full: Annotated[
        bool, typer.Option("--full", help="Whole texts, tool results and arguments (no clipping).")
    ] = False,
) -> None:
    """Every message of a thread, one line each (clipped unless --full), or --json."""
    console = Console(highlight=False, emoji=False)
    snapshot = _loaded(store, console, thread_id)
    if as_json:
        from plait.cli.thread_export import thread_json

        typer.echo(json.dumps(thread_json(snapshot, by_reference=True), ensure_ascii=False))
        return
    console.print(Text(f"thread {shown_id(snapshot.thread_id)}", style="bold"), soft_wrap=True)
    for message in snapshot.messages:
        console.print(f"[bold]{message.role:>9}[/bold]  {_line(message, full)}", soft_wrap=full)
    console.print(
        f"[dim]version {snapshot.version}; state keys: "
        f"{escape(', '.join(sorted(snapshot.state)) or '-')}[/dim]"
    )


class ExportFormat(StrEnum):
    json = "json"
    markdown = "markdown"


@threads_app.command("export")
def export_thread(
    thread_id: ThreadArgument,
    store: StoreOption = None,
    form: Annotated[
        ExportFormat,
        typer.Option(
            "--format",
            help="json: every message, state and blob, lossless (bytes as base64); markdown: a "
            "transcript to read.",
        ),
    ] = ExportFormat.json,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Write to this file (default: standard output)."),
    ] = None,
) -> None:
    """Write a thread out: as JSON (lossless) or as a Markdown transcript."""
    from plait.cli.thread_export import thread_json, thread_markdown

    console = Console(highlight=False, emoji=False)
    if output is not None and not output.parent.is_dir():
        fail(f"Cannot write {output}: the folder {output.parent} does not exist.", 2)
    snapshot = _loaded(store, console, thread_id)
    if form is ExportFormat.json:
        text = json.dumps(thread_json(snapshot), ensure_ascii=False, indent=2) + "\n"
    else:
        row = thread_row(snapshot)
        text = thread_markdown(snapshot, f"{row.model} · {row.when} · {_turns(row.turns)}")
    if output is None:
        typer.echo(text, nl=False)
        return
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as exc:
        fail(f"Cannot write {output}: {exc.strerror or exc}", 1)
    report_note(f"Wrote thread {shown_id(snapshot.thread_id)} to {output}")


def _turns(count: int) -> str:
    return f"{count} turn{'s' if count != 1 else ''}"


@threads_app.command("delete")
def delete_thread(
    thread_id: ThreadArgument,
    store: StoreOption = None,
) -> None:
    """Delete a thread and what it offloaded (evicted results, summarized history)."""
    console = Console(highlight=False, emoji=False)
    threads = _store(store, console, thread_id)
    target = store_target(_configured(store))
    backend = open_backend(threads, target)

    has_blobs = is_postgres_url(target) or Path(backend.path).exists()

    async def delete() -> tuple[str, bool, list[str]]:
        from plait.context import purge_thread  # the context battery, for this command only

        found = await resolve_thread_id(threads, thread_id)
        if not await threads.delete(found):
            return found, False, []
        if has_blobs:
            return found, True, list(await purge_thread(backend, found))
        return found, True, []

    found, existed, removed = _run(console, delete(), backend, threads)
    if not existed:
        _no_thread(console, thread_id)
    console.print(
        f"Deleted thread {escape(shown_id(found))} and {len(removed)} offloaded file(s).",
        soft_wrap=True,
    )


threads_app.command("resume")(resume)
