"""Threads and runs, in the shape of the Agent Protocol.

=============================================  ================================================
route                                          what
=============================================  ================================================
``POST /threads``                              create (``{"thread_id"?, "metadata"?}``); 409
                                               if it exists
``GET /threads``                               list (newest written first, at most
                                               ``max_threads_listed``)
``GET /threads/{t}``                           its messages (role and text) and metadata
``DELETE /threads/{t}``                        delete (204; 404 if unknown)
``POST /threads/{t}/runs``                     start a run (``{"input": str, "agent"?}``):
                                               202 with the run; it runs in the background
``GET /threads/{t}/runs/{r}``                  the run: status, output, error
``GET /threads/{t}/runs/{r}/stream``           its plait events as SSE (replayed from the
                                               start); leaving does not cancel it
``GET /threads/{t}/runs/{r}/wait``             waits (at most ``run_timeout``) and answers
                                               the run
``POST /threads/{t}/runs/{r}/cancel``          cancel; answers once the turn has settled
``POST /threads/{t}/runs/{r}/resume``          decide a paused run's calls (``{"decisions":
                                               {call id: decision}}``): 202 with the new run
=============================================  ================================================

A run whose turn paused has ``status: "paused"`` and its waiting calls in ``pending`` (``id``,
``name``, ``args``, ``reason``, ``client``); a new run on a paused thread answers 409
``thread_paused`` until it is resumed.

A worker keeps the runs it runs (the last :data:`~plait.serve.runs.MAX_RUNS_KEPT`; the last
:data:`~plait.serve.runs.REPLAYS_KEPT` to finish keep their events for ``/stream``, an older
one streams only its final ``run`` event); on Postgres it shares them
(:mod:`plait.serve.run_board`), so any worker reads, waits for, cancels and resumes them (a
stream from another worker carries only the final ``run`` event).
Threads live in the store and any worker serves them.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Any

from plait.messages import UserMessage
from plait.serve.errors import ServeError
from plait.serve.pauses import decision, pending_of, waiting_message
from plait.serve.requests import read_json

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    from plait.serve.app import ServeState
    from plait.serve.runs import Run

__all__ = ["routes"]

META_KEY = "serve_thread"
"""The thread-state key holding a thread's ``created_at`` and ``metadata``."""


def _state(request: Request) -> ServeState:
    state: ServeState = request.app.state.plait
    return state


async def create_thread(request: Request) -> Response:
    from starlette.responses import JSONResponse

    from plait.errors import ThreadConflictError
    from plait.messages import new_id

    state = _state(request)
    body = await read_json(request, state.limits.max_body_bytes)
    thread_id = body.get("thread_id") or f"thread_{new_id()}"
    metadata = body.get("metadata") or {}
    if not isinstance(thread_id, str) or not isinstance(metadata, dict):
        raise ServeError(400, "invalid_request", "'thread_id' is a string, 'metadata' an object.")
    meta = {"created_at": time.time(), "metadata": metadata}
    try:
        await state.store.append(thread_id, [], expected_version=0, state={META_KEY: meta})
    except ThreadConflictError:
        raise ServeError(409, "thread_exists", f"Thread {thread_id!r} exists already.") from None
    return JSONResponse({"thread_id": thread_id, **meta}, status_code=201)


async def list_threads(request: Request) -> Response:
    from starlette.responses import JSONResponse

    state = _state(request)
    ids = (await state.store.list_threads())[: state.limits.max_threads_listed]
    return JSONResponse({"threads": [{"thread_id": t} for t in ids]})


async def get_thread(request: Request) -> Response:
    from starlette.responses import JSONResponse

    state = _state(request)
    thread_id = request.path_params["thread"]
    snapshot = await state.store.load(thread_id)
    if snapshot.version == 0:
        raise ServeError(404, "not_found", f"No thread {thread_id!r}; POST /threads creates one.")
    messages = [
        {
            "id": m.id,
            "role": m.role,
            "content": getattr(m, "text", "")
            if m.role != "tool"
            else json.dumps(getattr(m, "data", None), default=str),
        }
        for m in snapshot.messages
    ]
    meta = snapshot.state.get(META_KEY, {})
    return JSONResponse(
        {"thread_id": thread_id, "version": snapshot.version, **meta, "messages": messages}
    )


async def delete_thread(request: Request) -> Response:
    from starlette.responses import Response

    state = _state(request)
    thread_id = request.path_params["thread"]
    if not await state.store.delete(thread_id):
        raise ServeError(404, "not_found", f"No thread {thread_id!r}.")
    return Response(status_code=204)


async def start_run(request: Request) -> Response:
    from starlette.responses import JSONResponse

    state = _state(request)
    body = await read_json(request, state.limits.max_body_bytes)
    text = body.get("input")
    if not isinstance(text, str) or not text:
        raise ServeError(
            400, "invalid_request", "'input' must be the user's message, a non-empty string."
        )
    name, agent = state.agent(body.get("agent"))
    thread_id = request.path_params["thread"]
    pending = pending_of((await state.store.load(thread_id)).state)
    if pending:
        raise ServeError(
            409,
            "thread_paused",
            f"Thread {thread_id!r} is paused; it waits for {waiting_message(pending)}. "
            "POST /threads/{t}/runs/{r}/resume with the decisions first.",
        )
    run = state.runs.start(agent, name, thread_id, [UserMessage(text)])
    await state.runs.published(run)  # any worker finds the run by the id answered
    return JSONResponse(run.view(), status_code=202)


async def resume_run(request: Request) -> Response:
    """Continue the thread's paused turn with ``{"decisions": {call id: decision}}`` (one per
    pending call, :func:`~plait.serve.pauses.decision`); 202 with the new run."""
    from starlette.responses import JSONResponse

    state = _state(request)
    body = await read_json(request, state.limits.max_body_bytes)
    thread_id = request.path_params["thread"]
    known = await _view(request)
    name, agent = state.agent(known["agent"])
    pending = pending_of((await state.store.load(thread_id)).state)
    if not pending:
        raise ServeError(
            409, "not_paused", f"Thread {thread_id!r} has no paused turn; start a run instead."
        )
    raw = body.get("decisions")
    ids = {p.id for p in pending}
    if not isinstance(raw, dict) or set(raw) != ids:
        raise ServeError(
            400,
            "invalid_decision",
            f"'decisions' must map each pending call id ({', '.join(sorted(ids))}) to a "
            "decision, and nothing else.",
        )
    decisions = {call_id: decision(call_id, d) for call_id, d in raw.items()}
    run = state.runs.start(agent, name, thread_id, [], decisions=decisions)
    await state.runs.published(run)
    return JSONResponse(run.view(), status_code=202)


def _local(request: Request) -> Run | None:
    run = _state(request).runs.get(request.path_params["run"])
    return run if run is not None and run.thread_id == request.path_params["thread"] else None


async def _view(request: Request) -> dict[str, Any]:
    """The run of the path as this worker knows it, or as its worker shared it (Postgres)."""
    run = _local(request)
    if run is not None:
        return run.view()
    board = _state(request).runs.board
    view = await board.fetch(request.path_params["run"]) if board is not None else None
    if view is None or view.get("thread_id") != request.path_params["thread"]:
        where = "" if board is not None else " on this worker (SQLite: one worker keeps its runs)"
        raise ServeError(404, "not_found", f"No such run{where}.")
    return view


async def _remote_until_done(request: Request, within: float) -> dict[str, Any]:
    """Read another worker's run until it is terminal, at most ``within`` seconds."""
    import asyncio

    from plait.serve.run_board import REMOTE_POLL
    from plait.serve.runs import TERMINAL

    loop = asyncio.get_running_loop()
    ends = loop.time() + within
    view = await _view(request)
    while view["status"] not in TERMINAL and loop.time() < ends:
        await asyncio.sleep(REMOTE_POLL)  # a bounded poll of the shared row
        view = await _view(request)
    return view


async def get_run(request: Request) -> Response:
    from starlette.responses import JSONResponse

    return JSONResponse(await _view(request))


async def wait_run(request: Request) -> Response:
    import asyncio

    from starlette.responses import JSONResponse

    within = _state(request).limits.run_timeout
    run = _local(request)
    if run is None:
        return JSONResponse(await _remote_until_done(request, within))
    if run.task is not None:
        await asyncio.wait({run.task}, timeout=within)
    return JSONResponse(run.view())


async def cancel_run(request: Request) -> Response:
    from starlette.responses import JSONResponse

    from plait.serve.run_board import REMOTE_WAIT

    state = _state(request)
    run = _local(request)
    if run is None:
        view = await _view(request)
        assert state.runs.board is not None  # _view found the run on the board
        await state.runs.board.request_cancel(view["run_id"])
        return JSONResponse(await _remote_until_done(request, REMOTE_WAIT))
    await state.runs.cancel(run)
    return JSONResponse(run.view())


async def stream_run(request: Request) -> Response:
    from plait.serve.agui import _event_value
    from plait.serve.run_response import RunResponse

    run = _local(request)
    await _view(request)  # a 404 before the stream starts
    within = _state(request).limits.run_timeout

    async def events() -> AsyncGenerator[str, None]:
        if run is None:  # another worker's: its events stay there, its end is shared
            view = await _remote_until_done(request, within)
            yield f"event: run\ndata: {json.dumps(view)}\n\n"
            return
        async for event in run.stream():
            yield f"event: {event.type}\ndata: {json.dumps(_event_value(event))}\n\n"
        yield f"event: run\ndata: {json.dumps(run.view())}\n\n"

    # Held from here (a reader, not its owner: leaving does not cancel it), so the events
    # still kept now are streamed whole, however many runs finish while the stream starts.
    return RunResponse(run, events(), headers={"Cache-Control": "no-store"})


def routes() -> list[Route]:
    from starlette.routing import Route

    base = "/threads/{thread}/runs/{run}"
    handlers: list[tuple[str, Any, list[str]]] = [
        ("/threads", create_thread, ["POST"]),
        ("/threads", list_threads, ["GET"]),
        ("/threads/{thread}", get_thread, ["GET"]),
        ("/threads/{thread}", delete_thread, ["DELETE"]),
        ("/threads/{thread}/runs", start_run, ["POST"]),
        (base, get_run, ["GET"]),
        (base + "/stream", stream_run, ["GET"]),
        (base + "/wait", wait_run, ["GET"]),
        (base + "/cancel", cancel_run, ["POST"]),
        (base + "/resume", resume_run, ["POST"]),
    ]
    return [Route(path, handler, methods=methods) for path, handler, methods in handlers]
