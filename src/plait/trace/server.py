"""The ``plait ui`` web app: one inline page and a small JSON API over a trace store.

Needs the ``ui`` extra (``pip install 'plait[ui]'``: Starlette and uvicorn). Nothing is fetched
from anywhere but the server itself: the page's CSS and JavaScript are inline, with no fonts or
CDN links; the only images are the recorded ones, from ``/api/blobs/``.

====================================  ===================================================
route                                 answers
====================================  ===================================================
``GET /``                             the page (``page.html``)
``GET /api/runs?q=``                  runs newest first, filtered by ``q``
``GET /api/runs/{run_id}``            :func:`~plait.trace.views.run_view`
``GET /api/calls/{span_id}``          :func:`~plait.trace.views.call_view`
``GET /api/blobs/{digest}``           a stored text (a full tool output), ``text/plain``
``GET /api/blobs/{sha256}?name=``     an image's or file's bytes (64 hex digits; see below)
``GET /api/prices``                   the default price table (USD per million tokens)
====================================  ===================================================

An image or file is answered with its bytes as recorded: inline only for a PNG, JPEG, GIF or
WebP whose bytes carry that format's signature; anything else as ``Content-Disposition:
attachment``, under its recorded media type only for passive types and
``application/octet-stream`` otherwise (an ``image/svg+xml`` or ``text/html`` part is never
rendered by the browser), with ``Content-Security-Policy: sandbox``
(:func:`~plait.trace.parts.blob_answer`; ``name`` is the file name it is saved under, kept to
safe characters). A digest that is neither 16 nor 64 lowercase hex digits answers 404 without
reading the store, as does a blob over the recorder's ``max_blob_bytes`` (its reference only
was kept; the answer says so).

Unknown ids answer 404 with a JSON ``{"error": ...}`` saying what to do. A request whose
``Host`` is not one of the app's ``allowed_hosts`` (by default the loopback names,
:data:`LOCAL_HOSTS`) answers 400: a web page the user visits cannot read the traces through DNS
rebinding (a name of its own resolving to 127.0.0.1). With a ``token`` (what ``plait ui`` does
unless ``--no-token``), every route answers only a request carrying it: 401 without, 403 with a
wrong one (:mod:`plait.trace.access`: the URL's ``?token=``, the cookie it sets, or
``Authorization: Bearer``). Every answer carries a Content-Security-Policy allowing only the
page's own inline script and style (by hash), ``X-Frame-Options: DENY``,
``X-Content-Type-Options: nosniff``, ``Referrer-Policy: no-referrer`` and
``Cache-Control: no-store``.
"""

from __future__ import annotations

import contextlib
import ipaddress
import re
import socket
from collections.abc import Mapping, Sequence
from importlib import resources
from typing import TYPE_CHECKING, Any

from plait.errors import ConfigurationError
from plait.trace.access import SecurityHeaders, TokenGate, check_token, page_policy
from plait.trace.parts import blob_answer, is_sha256
from plait.trace.store import TraceStore, TraceStoreError
from plait.trace.views import call_view, run_view

if TYPE_CHECKING:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "LOCAL_HOSTS",
    "allowed_hosts",
    "create_app",
    "free_port",
    "serve",
]

DEFAULT_HOST = "127.0.0.1"
"""``plait ui`` binds here unless told otherwise: the page is for this machine only."""

DEFAULT_PORT = 7600
"""``plait ui``'s default port."""

LOCAL_HOSTS = ("127.0.0.1", "localhost")
"""The ``Host`` names the page answers by default (the page itself uses relative URLs)."""

_TEXT_DIGEST = re.compile(r"[0-9a-f]{16}")

MAX_QUERY_CHARS = 200
"""Longest search text accepted by ``/api/runs`` (longer ones are cut)."""


def _starlette() -> Any:
    try:
        import starlette.applications
    except ImportError as exc:
        raise ConfigurationError(
            "plait ui needs Starlette and uvicorn: pip install 'plait[ui]'"
        ) from exc
    return starlette.applications


def page_html() -> str:
    """The page, with its inline CSS and JavaScript."""
    return resources.files("plait.trace").joinpath("page.html").read_text(encoding="utf-8")


def allowed_hosts(host: str) -> list[str]:
    """The ``Host`` names to accept when serving on ``host``: the loopback names (and ``host``
    itself) for a loopback address, any for another address (the user chose to expose the
    page to the network: ``plait ui --host 0.0.0.0``)."""
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    if not loopback:
        return ["*"]
    return list(LOCAL_HOSTS) if host in LOCAL_HOSTS else [*LOCAL_HOSTS, host]


def create_app(
    store: TraceStore,
    *,
    token: str | None,
    prices: Mapping[str, Mapping[str, float]] | None = None,
    hosts: Sequence[str] = LOCAL_HOSTS,
) -> Starlette:
    """The ASGI app serving ``store``. ``token`` is what every request must carry
    (:class:`~plait.trace.access.TokenGate`; make one with
    :func:`~plait.trace.access.new_token` and give the user
    ``http://HOST:PORT/?token=TOKEN``); ``None`` lets any request that reaches the port read the
    traces, which is only right on a machine with one user. ``prices`` is the default price
    table the page starts from (model name to ``{"input", "output", "cache_read",
    "cache_write"}`` in USD per million tokens); the user edits it in the page (kept in the
    browser's local storage). A store that cannot be read (Postgres down, migrations not run)
    answers 503 with its error's message, which the page shows. ``hosts`` are the ``Host`` names
    answered (``"*"``: any; see :func:`allowed_hosts`); any other answers 400."""
    applications = _starlette()
    from starlette.middleware import Middleware
    from starlette.middleware.trustedhost import TrustedHostMiddleware
    from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
    from starlette.routing import Route

    html = page_html()
    table = {name: dict(price) for name, price in (prices or {}).items()}

    def not_found(what: str) -> Response:
        return JSONResponse(
            {"error": f"No {what} here: pick one from the run list (GET /api/runs)."},
            status_code=404,
        )

    async def index(request: Request) -> Response:
        return HTMLResponse(html)

    async def runs(request: Request) -> Response:
        query = request.query_params.get("q", "")[:MAX_QUERY_CHARS]
        return JSONResponse(await store.runs(query))

    async def run(request: Request) -> Response:
        view = await run_view(store, request.path_params["run_id"])
        return not_found("run") if view is None else JSONResponse(view)

    async def call(request: Request) -> Response:
        view = await call_view(store, request.path_params["span_id"])
        return not_found("model call") if view is None else JSONResponse(view)

    async def blob(request: Request) -> Response:
        digest = request.path_params["digest"]
        if is_sha256(digest):
            return await binary(digest, request.query_params.get("name"))
        text = await store.blob(digest) if _TEXT_DIGEST.fullmatch(digest) else None
        return not_found("stored text") if text is None else PlainTextResponse(text)

    async def binary(digest: str, name: str | None) -> Response:
        found = await store.binary(digest)
        if found is None:
            return not_found("image or file")
        media_type, size, data = found
        if data is None:
            message = (
                f"This {media_type} of {size:,} bytes was over the recorder's max_blob_bytes: "
                "the trace kept its reference (sha256, type, size), not its bytes."
            )
            return JSONResponse({"error": message}, status_code=404)
        content_type, headers = blob_answer(digest, media_type, data, name)
        return Response(data, media_type=content_type, headers=headers)

    async def price_table(request: Request) -> Response:
        return JSONResponse(table)

    async def store_failed(request: Request, exc: Exception) -> Response:
        return JSONResponse({"error": str(exc)}, status_code=503)

    middleware = [
        Middleware(SecurityHeaders, policy=page_policy(html)),
        Middleware(TrustedHostMiddleware, allowed_hosts=list(hosts)),
    ]
    if token is not None:
        middleware.append(Middleware(TokenGate, token=check_token(token, "token")))
    app: Starlette = applications.Starlette(
        exception_handlers={TraceStoreError: store_failed},
        middleware=middleware,
        routes=[
            Route("/", index),
            Route("/api/runs", runs),
            Route("/api/runs/{run_id}", run),
            Route("/api/calls/{span_id}", call),
            Route("/api/blobs/{digest}", blob),
            Route("/api/prices", price_table),
        ],
    )
    return app


def free_port(host: str = DEFAULT_HOST) -> int:
    """A TCP port free on ``host`` right now (for tests and ``--port 0``)."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def serve(
    app: Starlette,
    *,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    sock: socket.socket | None = None,
) -> None:
    """Serve ``app`` with uvicorn until interrupted (Ctrl-C): on ``sock`` when given (a socket
    the caller bound, so a busy port is the caller's to report), else on ``host:port``."""
    try:
        import uvicorn
    except ImportError as exc:
        raise ConfigurationError(
            "plait ui needs Starlette and uvicorn: pip install 'plait[ui]'"
        ) from exc
    if sock is None:
        uvicorn.run(app, host=host, port=port, log_level="warning")
        return
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning"))
    with contextlib.suppress(KeyboardInterrupt):  # as uvicorn.run: Ctrl-C is the way to stop
        server.run(sockets=[sock])
