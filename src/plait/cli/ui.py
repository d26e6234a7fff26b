"""``plait ui``: the local trace page, and where the CLI keeps traces.

``plait run``, ``chat`` and ``demo`` record every turn (unless ``--no-trace``) into the trace
store of the thread store (:func:`open_trace_store`): for a SQLite thread store, a SQLite file
beside it (:func:`trace_path`); for a Postgres one, the same database (its ``plait_trace_*``
tables, created by ``plait db upgrade``). They print the page's address for the turn.

``plait ui`` asks for a token (:mod:`plait.trace.access`): a new one per start, or
``$PLAIT_UI_TOKEN``; it prints ``http://127.0.0.1:PORT/?token=...`` and opens it through a
private file (mode 0600, removed when the server stops), so the token never sits on a browser's
command line for other users' ``ps`` to see. ``--no-token`` turns the check off, for a machine
with one user.
"""

from __future__ import annotations

import errno
import importlib
import os
import re
import signal
import socket
import threading
import webbrowser
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from plait.cli.console import fail
from plait.cli.db import data_dir, is_postgres_url, store_target

if TYPE_CHECKING:
    from plait.trace.store import TraceStore

__all__ = ["NoTraceOption", "open_trace_store", "trace_hint", "trace_path", "ui"]

TRACE_POOL_SIZE = 2
"""Connections the CLI's Postgres trace store may hold (its writes are one per turn)."""

NoTraceOption = Annotated[
    bool, typer.Option("--no-trace", help="Do not record this session for plait ui.")
]


def trace_path(store: str | Path | None = None) -> Path:
    """The SQLite trace file for the thread store ``store`` (``--store``, else
    ``$PLAIT_STORE``, else the CLI's default file): beside a SQLite thread store
    (``threads.sqlite3`` → ``threads-traces.sqlite3``); ``traces.sqlite3`` in the user data
    directory for anything else (a Postgres store keeps its traces in Postgres instead: see
    :func:`open_trace_store`)."""
    target = store_target(str(store) if store is not None else None)
    if is_postgres_url(target) or not isinstance(target, Path):
        return data_dir() / "traces.sqlite3"
    return target.with_name(target.stem + "-traces.sqlite3")


def open_trace_store(store: str | Path | None = None) -> TraceStore:
    """The trace store for the thread store ``store`` (as :func:`trace_path` resolves it): the
    same Postgres database for a ``postgresql://`` URL, else the SQLite file beside the
    threads."""
    target = store_target(str(store) if store is not None else None)
    if is_postgres_url(target):
        from plait.trace.postgres import PostgresTraceStore

        return PostgresTraceStore(str(target), max_size=TRACE_POOL_SIZE)
    from plait.trace.store import SQLiteTraceStore

    return SQLiteTraceStore(trace_path(store))


def store_description(store: str | None) -> str:
    """A Postgres store URL without its password (for messages)."""
    return re.sub(r"(//[^:/@]*):[^@/]*@", r"\1:***@", str(store_target(store)))


def trace_hint(run_id: str | None, store: str | Path | None = None) -> str:
    """The line printed after a recorded turn: how to open its trace. A Postgres URL's password
    is never echoed (``***`` stands for it)."""
    from plait.trace.server import DEFAULT_HOST, DEFAULT_PORT

    shown = store_description(str(store)) if store is not None else ""
    where = f" --store {shown}" if shown else ""
    anchor = f"#{run_id}" if run_id else ""
    return f"trace: plait ui{where}  →  http://{DEFAULT_HOST}:{DEFAULT_PORT}/{anchor}"


HostOption = Annotated[str, typer.Option("--host", help="Address to bind (local by default).")]
PortOption = Annotated[int, typer.Option("--port", min=0, max=65535, help="Port (0: any free).")]


def ui(
    store: Annotated[
        str | None,
        typer.Option("--store", help="The thread store whose traces to show (default: the CLI's)."),
    ] = None,
    traces: Annotated[
        Path | None, typer.Option("--traces", help="A trace store file (overrides --store).")
    ] = None,
    host: HostOption = "127.0.0.1",
    port: PortOption = 7600,
    no_browser: Annotated[
        bool, typer.Option("--no-browser", help="Do not open a browser window.")
    ] = False,
    no_token: Annotated[
        bool,
        typer.Option(
            "--no-token",
            help="Serve without a token: any user of this machine can then read the traces "
            "(only for a single-user machine). Default: a new token per start, or "
            "$PLAIT_UI_TOKEN; the address printed carries it.",
        ),
    ] = False,
) -> None:
    """Open the local trace page: runs, waterfalls, context diffs, tokens and costs."""
    if traces is not None:
        _refuse_non_sqlite(traces)
    token = None if no_token else _token()
    _check_extra()
    from plait.trace import SQLiteTraceStore, create_app, serve
    from plait.trace.server import allowed_hosts

    postgres = traces is None and is_postgres_url(store_target(store))
    path = traces or trace_path(store)
    if not postgres and not path.exists():
        fail(f"No traces at {path} yet: run 'plait demo' or 'plait run ...' first.", 2)
    trace_store = open_trace_store(store) if postgres else SQLiteTraceStore(path)
    app = create_app(trace_store, token=token, prices=_prices(), hosts=allowed_hosts(host))
    sock = _bind(host, port)
    port = int(sock.getsockname()[1])
    url = f"http://{host}:{port}/" + (f"?token={token}" if token else "")
    where = f"the traces in {store_description(store)}" if postgres else str(path)
    typer.echo(f"plait ui: serving {where} at {url} (Ctrl-C to stop)")
    if not no_browser and threading.current_thread() is threading.main_thread():
        # uvicorn re-raises the SIGTERM it stopped on: exit through the `finally` below
        signal.signal(signal.SIGTERM, _exit_on_sigterm)
    forward = None if no_browser else _forwarding_page(url)
    try:
        if forward is not None:
            webbrowser.open(forward.as_uri())
        serve(app, host=host, port=port, sock=sock)
    finally:
        sock.close()
        if forward is not None:
            forward.unlink(missing_ok=True)


def _check_extra() -> None:
    """Exit 2 with the install command, in one line, unless Starlette and uvicorn import."""
    try:
        import starlette.applications  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        fail(f"plait ui needs Starlette and uvicorn ({exc.name}): pip install 'plait[ui]'", 2)


def _bind(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` (``0``: any free port) for the page; a port in use, or an
    address this machine does not have, is a message naming the flag to change and exit 2."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
    try:
        sock.bind((host, port))
        sock.listen()  # connections made before uvicorn starts wait instead of being refused
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            fail(
                f"Port {port} on {host} is in use (another plait ui, or another server). "
                "Serve on another port with --port N, or --port 0 for any free one.",
                2,
            )
        fail(
            f"Cannot listen on {host}:{port} ({exc.strerror or exc}). Choose another address "
            "with --host, or another port with --port.",
            2,
        )
    return sock


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def _forwarding_page(url: str) -> Path:
    """A private temporary page (mode 0600) that forwards to ``url``: the browser is opened on
    it, as Jupyter does, since a browser started with the token'd address would show the token
    to every local user (``ps``, ``/proc``). Removed when the server stops."""
    import html
    import tempfile

    fd, name = tempfile.mkstemp(prefix="plait-ui-", suffix=".html")
    target = html.escape(url, quote=True)
    with os.fdopen(fd, "w", encoding="utf-8") as page:
        page.write(
            '<!doctype html><meta charset="utf-8">'
            f'<meta http-equiv="refresh" content="0;url={target}">'
            f'<title>plait ui</title><p><a href="{target}">Open the plait trace page</a></p>\n'
        )
    return Path(name)


def _token() -> str:
    """``$PLAIT_UI_TOKEN`` when set (checked), else a new random token."""
    from plait.errors import ConfigurationError
    from plait.trace.access import TOKEN_ENV, check_token, new_token

    fixed = os.environ.get(TOKEN_ENV)
    if not fixed:
        return new_token()
    try:
        return check_token(fixed)
    except ConfigurationError as exc:
        fail(str(exc), 2)


_RATES = ("input", "output", "cache_read", "cache_write")
_SQLITE_MAGIC = b"SQLite format 3\x00"


def _refuse_non_sqlite(path: Path) -> None:
    """Exit with a usage error when ``path`` exists but is no SQLite file (a folder, another
    kind of file); reads at most its first 16 bytes. A missing or empty file passes: the first
    is reported as "no traces yet", the second is a new SQLite database."""
    if path.is_dir():
        fail(f"--traces {path} is a folder; pass a trace store file such as {trace_path()}.", 2)
    if path.exists() and not path.is_file():  # a FIFO would block the read below
        fail(f"--traces {path} is not a regular file; pass a trace store file.", 2)
    try:
        with path.open("rb") as handle:
            head = handle.read(len(_SQLITE_MAGIC))
    except FileNotFoundError:
        return
    except OSError as err:
        fail(f"--traces {path} cannot be read ({err}); pass a readable trace store file.", 2)
    if head and head != _SQLITE_MAGIC:
        fail(
            f"--traces {path} is not a SQLite database (it starts with {head[:8]!r}); pass a "
            f"trace store file such as {trace_path()}.",
            2,
        )


def _prices() -> dict[str, dict[str, float]]:
    """The page's starting price table: ``plait.pricing.PRICES`` when this plait has it (USD per
    million tokens; a cache rate left unset costs as input), else empty (the user fills it in)."""
    try:
        pricing = importlib.import_module("plait.pricing")
    except ImportError:
        return {}
    table: dict[str, dict[str, float]] = {}
    for name, price in getattr(pricing, "PRICES", {}).items():
        rates = {
            k: getattr(price, k, None) for k in ("input", "output", "cache_read", "cache_write")
        }
        table[str(name)] = {k: float(v) for k, v in rates.items() if v is not None}
    return table
