"""``create_app(agents)``: the ASGI app (Starlette) serving plait agents over HTTP.

========================================  =====================================================
route                                     what
========================================  =====================================================
``GET /healthz``                          ``{"ok": true}`` (no token needed)
``GET /v1/models``                        the agents, as OpenAI models
``POST /v1/chat/completions``             OpenAI-compatible chat (:mod:`.openai_compat`)
``POST /agui``, ``POST /agents/{a}/agui`` AG-UI: ``RunAgentInput`` in, SSE events out
                                          (:mod:`.agui`)
``/threads``, ``/threads/{t}/runs/...``   threads and runs, Agent Protocol-shaped
                                          (:mod:`.threads`)
========================================  =====================================================

Safe by default: with a ``token``, every route but ``/healthz`` needs ``Authorization: Bearer``
(:mod:`.access`); bodies, runs and waits are bounded (:class:`~.limits.ServeLimits`); CORS is
off unless ``cors_origins`` are given; every error is ``{"error": {"type", "message"}}``, never
a traceback; one JSON access-log line per request. Each request is an OpenTelemetry span (when
``opentelemetry-api`` is installed; an incoming ``traceparent`` is its parent) and the turn's
GenAI spans (:mod:`plait.telemetry`) are its children.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from plait.errors import ConfigurationError
from plait.serve.access import AccessLog, BearerGate
from plait.serve.errors import ServeError
from plait.serve.limits import ServeLimits
from plait.serve.openai_compat import ToolCallDisplay
from plait.serve.run_board import board_of
from plait.serve.runs import Run, RunManager
from plait.serve.telemetry import RequestSpan

if TYPE_CHECKING:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response

    from plait.runtime.agent import Agent
    from plait.stores.base import ThreadStore

__all__ = ["DEFAULT_AGENT_NAME", "ServeState", "create_app"]

DEFAULT_AGENT_NAME = "plait"
"""The name of an agent passed alone (``create_app(agent)``)."""

logger = logging.getLogger("plait.serve")


@dataclass(slots=True)
class ServeState:
    """What the handlers share: the agents by name, the thread store, the runs, the limits."""

    agents: dict[str, Agent]
    store: ThreadStore
    runs: RunManager
    limits: ServeLimits
    tool_calls: ToolCallDisplay
    started: float

    def agent(self, name: object) -> tuple[str, Agent]:
        """The agent called ``name``; the only one when ``name`` is empty; 404 otherwise."""
        if (name is None or name == "") and len(self.agents) == 1:
            return next(iter(self.agents.items()))
        if isinstance(name, str) and name in self.agents:
            return name, self.agents[name]
        if name is None and DEFAULT_AGENT_NAME in self.agents:
            return DEFAULT_AGENT_NAME, self.agents[DEFAULT_AGENT_NAME]
        raise ServeError(
            404,
            "model_not_found",
            f"No agent {name!r} here; GET /v1/models lists them: {', '.join(self.agents)}.",
        )

    @contextlib.asynccontextmanager
    async def owned(self, run: Run) -> AsyncIterator[Run]:
        """A run the request owns, held (:meth:`Run.hold`: its events, result and error stay
        while the block reads them); leaving the block early (the client went away, an error)
        cancels it and waits until its turn has settled."""
        run.hold()
        try:
            yield run
        finally:
            try:
                if not run.done:
                    await self.runs.cancel(run)
            finally:
                run.release()

    def sse(
        self,
        request: Request,
        run: Run,
        body: AsyncIterator[str],
        headers: Mapping[str, str],
        media_type: str = "text/event-stream",
    ) -> Response:
        """A Server-Sent Events answer streaming ``body``, with a keep-alive comment every
        ``keepalive_interval`` seconds without data; ``run`` is held while it streams and the
        client's disconnect cancels it (:class:`~plait.serve.run_response.RunResponse`)."""
        from plait.serve.run_response import RunResponse

        interval = self.limits.keepalive_interval

        async def stream() -> AsyncGenerator[str, None]:
            iterator = aiter(body)
            pending: asyncio.Task[str] | None = None
            try:
                while True:
                    pending = pending or asyncio.ensure_future(anext(iterator))
                    done, _ = await asyncio.wait({pending}, timeout=interval)
                    if not done:
                        yield ": keep-alive\n\n"
                        continue
                    try:
                        piece = pending.result()
                    except StopAsyncIteration:
                        return
                    pending = None
                    yield piece
            finally:
                if pending is not None and not pending.done():
                    pending.cancel()

        return RunResponse(
            run,
            stream(),
            settle=self.runs.cancel,
            media_type=media_type,
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no", **headers},
        )


def create_app(
    agents: Agent | Mapping[str, Agent],
    *,
    store: ThreadStore | None = None,
    token: str | None = None,
    limits: ServeLimits | None = None,
    cors_origins: Sequence[str] = (),
    tool_calls: ToolCallDisplay = "hidden",
    tracer_provider: Any = None,
) -> Starlette:
    """The ASGI app serving ``agents`` (one, named :data:`DEFAULT_AGENT_NAME`, or a mapping
    name → agent) on ``store`` (default: the first agent's store; every agent should share it).

    ``token``: the bearer token every request but ``/healthz`` must carry (``None``: none; only
    for a loopback bind, which ``plait serve`` enforces). ``limits``: :class:`ServeLimits`.
    ``cors_origins``: origins allowed by CORS (none by default: CORS off). ``tool_calls``: how
    the OpenAI-compatible route shows the agent's own tool calls (``"hidden"`` or ``"text"``).
    ``tracer_provider``: the OpenTelemetry provider of the request spans (default: the global
    one; give the same one as the agent's ``GenAITelemetry``).

    Each agent gets :class:`~plait.serve.pauses.ClientTools` appended to its middleware (once),
    so the tools an AG-UI frontend defines are offered and their calls held for the client.
    """
    try:
        from starlette.applications import Starlette
        from starlette.exceptions import HTTPException
        from starlette.middleware import Middleware
        from starlette.responses import JSONResponse
        from starlette.routing import Route
    except ImportError as exc:
        raise ConfigurationError("plait serve needs its extra: pip install 'plait[serve]'") from exc
    from plait.serve import agui, openai_compat, pauses, threads

    named = {DEFAULT_AGENT_NAME: agents} if not isinstance(agents, Mapping) else dict(agents)
    if not named:
        raise ConfigurationError("create_app needs at least one agent.")
    if tool_calls not in ("hidden", "text"):
        raise ConfigurationError("tool_calls must be 'hidden' or 'text'.")
    for agent in named.values():
        pauses.install(agent)  # frontend tools: registered per turn, their calls held
    chosen = limits or ServeLimits()
    thread_store = store or next(iter(named.values())).store
    state = ServeState(
        named,
        thread_store,
        RunManager(chosen, board_of(thread_store)),
        chosen,
        tool_calls,
        time.time(),
    )

    async def healthz(request: Request) -> Response:
        return JSONResponse({"ok": True})

    async def refused(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, ServeError)
        return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers or None)

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        kind = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        message = (
            "No such route; see the routes in plait.serve's README."
            if exc.status_code == 404
            else str(exc.detail)
        )
        return JSONResponse(
            {"error": {"type": kind, "message": message}}, status_code=exc.status_code
        )

    async def crashed(request: Request, exc: Exception) -> Response:
        logger.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
        body = {
            "error": {
                "type": "internal_error",
                "message": f"The server failed: {type(exc).__name__}; see its log.",
            }
        }
        return JSONResponse(body, status_code=500)

    middleware = [
        Middleware(AccessLog),
        Middleware(RequestSpan, tracer_provider=tracer_provider),
        Middleware(BearerGate, token=token),
    ]
    if cors_origins:
        from starlette.middleware.cors import CORSMiddleware

        middleware.insert(
            1,
            Middleware(
                CORSMiddleware,
                allow_origins=list(cors_origins),
                allow_methods=["GET", "POST", "DELETE", "OPTIONS"],
                allow_headers=["authorization", "content-type", "x-plait-thread"],
                expose_headers=["x-plait-thread", "x-plait-run", "x-request-id"],
            ),
        )
    app = Starlette(
        routes=[
            Route("/healthz", healthz),
            Route("/v1/models", openai_compat.models),
            Route("/v1/chat/completions", openai_compat.chat_completions, methods=["POST"]),
            Route("/agui", agui.run_agent, methods=["POST"]),
            Route("/agents/{agent}/agui", agui.run_agent, methods=["POST"]),
            *threads.routes(),
        ],
        middleware=middleware,
        exception_handlers={ServeError: refused, HTTPException: http_error, Exception: crashed},
    )
    app.state.plait = state
    return app
