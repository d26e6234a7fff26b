"""``plait serve``: the agents of ``plait.toml`` or a module over HTTP (:mod:`plait.serve`).

Binds 127.0.0.1 by default. Any other address needs a token (``--token`` or
``$PLAIT_SERVE_TOKEN``, at least 16 URL-safe characters): without one it refuses to start.
``--workers N`` runs N processes behind one port (uvicorn); use a Postgres store for them, so
any worker serves any thread and the store's lease serializes each thread's turns.
"""

from __future__ import annotations

import ipaddress
import os
from typing import Annotated

import typer

from plait.cli.console import fail

__all__ = ["GRACEFUL_SHUTDOWN", "KEEP_ALIVE", "serve"]

KEEP_ALIVE = 30
"""Seconds an idle keep-alive connection stays open (uvicorn's default, 5 s, races clients
that reuse a connection just as the server closes it)."""

GRACEFUL_SHUTDOWN = 30
"""Seconds a stopping worker waits for running requests before it cancels them."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (or ``localhost``)."""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def serve(
    target: Annotated[
        str | None,
        typer.Argument(
            help="module:attribute of an Agent (or a mapping of names to Agents); none: the "
            "agent of plait.toml."
        ),
    ] = None,
    host: Annotated[str, typer.Option("--host", help="Address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="Port.")] = 8000,
    workers: Annotated[int, typer.Option("--workers", min=1, help="Worker processes.")] = 1,
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            envvar="PLAIT_SERVE_TOKEN",
            help="Bearer token every request must carry (required off loopback).",
        ),
    ] = None,
    store: Annotated[
        str | None, typer.Option("--store", help="Thread store for a plait.toml agent.")
    ] = None,
    cors: Annotated[
        list[str] | None, typer.Option("--cors", help="An origin CORS allows (repeatable).")
    ] = None,
    tool_calls: Annotated[
        str, typer.Option("--tool-calls", help="OpenAI route: agent tool calls 'hidden' or 'text'.")
    ] = "hidden",
    no_trace: Annotated[
        bool, typer.Option("--no-trace", help="Do not record turns for plait ui.")
    ] = False,
    max_body_bytes: Annotated[
        int | None, typer.Option("--max-body-bytes", help="Largest request body (default 1 MiB).")
    ] = None,
    max_concurrent_runs: Annotated[
        int | None,
        typer.Option("--max-concurrent-runs", help="Turns at once per worker (default 1000)."),
    ] = None,
    max_waiting_per_thread: Annotated[
        int | None,
        typer.Option("--max-waiting-per-thread", help="Runs queued on one thread (default 8)."),
    ] = None,
    queue_timeout: Annotated[
        float | None,
        typer.Option("--queue-timeout", help="Seconds to get the thread and a slot (default 30)."),
    ] = None,
    run_timeout: Annotated[
        float | None, typer.Option("--run-timeout", help="Seconds a turn may run (default 600).")
    ] = None,
    idle_timeout: Annotated[
        float | None,
        typer.Option("--idle-timeout", help="Seconds a turn may go eventless (default 120)."),
    ] = None,
) -> None:
    """Serve agents over HTTP: AG-UI, OpenAI-compatible chat completions, threads and runs."""
    from plait.trace.access import MIN_TOKEN_CHARS, new_token

    if token:
        if len(token) < MIN_TOKEN_CHARS or not token.isascii() or not token.isprintable():
            fail(
                f"--token / $PLAIT_SERVE_TOKEN must be at least {MIN_TOKEN_CHARS} printable "
                f"ASCII characters; for example {new_token()}",
                2,
            )
    elif not is_loopback(host):
        fail(
            f"Refusing to serve on {host} without a token: anyone who reaches the port could "
            "run the agent. Set $PLAIT_SERVE_TOKEN (or --token), or bind 127.0.0.1.",
            2,
        )
    if tool_calls not in ("hidden", "text"):
        fail("--tool-calls takes 'hidden' or 'text'.", 2)
    limits = {
        name: value
        for name, value in (
            ("max_body_bytes", max_body_bytes),
            ("max_concurrent_runs", max_concurrent_runs),
            ("max_waiting_per_thread", max_waiting_per_thread),
            ("queue_timeout", queue_timeout),
            ("run_timeout", run_timeout),
            ("idle_timeout", idle_timeout),
        )
        if value is not None
    }
    limits_json = _checked_limits(limits)
    try:
        import ag_ui.core  # noqa: F401
        import uvicorn

        import plait.serve.app  # noqa: F401  (checks the extra before workers start)
    except ImportError as exc:
        fail(f"plait serve needs its extra ({exc.name}): pip install 'plait[serve]'", 2)
    os.environ.update(
        PLAIT_SERVE_TARGET=target or "",
        PLAIT_SERVE_TOKEN=token or "",
        PLAIT_SERVE_STORE=store or "",
        PLAIT_SERVE_CORS=",".join(cors or []),
        PLAIT_SERVE_TOOL_CALLS=tool_calls,
        PLAIT_SERVE_TRACE="" if no_trace else "1",
        PLAIT_SERVE_LIMITS=limits_json,
    )
    typer.echo(f"plait serve: http://{host}:{port}/ ({workers} worker(s); Ctrl-C to stop)")
    uvicorn.run(
        "plait.cli.serve_worker:app_from_env",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_keep_alive=KEEP_ALIVE,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN,
    )


def _checked_limits(limits: dict[str, float]) -> str:
    """The limits given by flags as the JSON each worker reads, each checked before workers
    start (``ServeLimits`` says what is wrong, under the flag's name: exit 2)."""
    import json

    from plait.errors import ConfigurationError
    from plait.serve.limits import ServeLimits

    for name, value in limits.items():
        try:
            ServeLimits(**{name: value})  # type: ignore[arg-type]
        except ConfigurationError as exc:
            fail(f"--{name.replace('_', '-')} {value:g}: {exc}", 2)
    return json.dumps(limits)
