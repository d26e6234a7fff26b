"""OpenAI-compatible ``POST /v1/chat/completions`` and ``GET /v1/models``.

The ``model`` field names the agent (``GET /v1/models`` lists them). The thread is, first found:
the ``X-Plait-Thread`` header, ``metadata.thread_id``, ``user`` (scoped to the principal:
``<principal>:<user>``), else :func:`~plait.serve.requests.derived_thread_id`. The client sends
the whole history each time; what is new for the thread is taken by
:func:`~plait.serve.requests.new_input`. The thread id used comes back in the
``X-Plait-Thread`` answer header, percent-encoded (UTF-8) where it holds a character a header
cannot carry or a ``%`` (:func:`thread_header`: a ``user`` of ``"用户"`` is a valid thread);
an ``X-Plait-Thread`` request header is percent-decoded, so the value read from one answer
names the same thread in the next request.

The agent's own tool calls are not the client's: with ``tool_calls="hidden"`` (the default)
they are left out; with ``"text"`` each appears in the content as a line
``[tool name(args) → result]``. ``stream: true`` answers Server-Sent Events of
``chat.completion.chunk`` objects ending with ``data: [DONE]``, as the OpenAI SDK reads them; a
client that disconnects cancels the turn (it settles; what it persisted stays).
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import quote, unquote

from plait.messages import AssistantMessage, Message, SystemMessage, UserMessage
from plait.runtime.events import TextDeltaReceived, ToolCallFinished
from plait.serve.errors import ServeError
from plait.serve.pauses import waiting_message
from plait.serve.requests import derived_thread_id, new_input, read_json

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

    from plait.serve.app import ServeState

__all__ = ["ToolCallDisplay", "chat_completions", "models"]

ToolCallDisplay = Literal["hidden", "text"]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(p.get("text", ""))
            for p in content
            if isinstance(p, dict) and p.get("type") == "text"
        )
    return ""


def _messages(raw: Any) -> list[Message]:
    if not isinstance(raw, list) or not raw:
        raise ServeError(400, "invalid_request", "'messages' must be a non-empty list.")
    out: list[Message] = []
    for item in raw:
        if not isinstance(item, dict):
            raise ServeError(400, "invalid_request", "Each message must be an object.")
        role, text = item.get("role"), _text(item.get("content"))
        if role in ("system", "developer"):
            out.append(SystemMessage(text))
        elif role == "user":
            out.append(UserMessage(text))
        elif role == "assistant":
            out.append(AssistantMessage(text))
        # tool messages answer the client's own tools, which this server does not run
    return out


_HEADER_SAFE = "".join(chr(c) for c in range(0x21, 0x7F) if chr(c) != "%")
"""What a thread id keeps as it is in a header: printable ASCII less ``%`` (and space)."""


def thread_header(thread_id: str) -> str:
    """``thread_id`` as an ``X-Plait-Thread`` header value: percent-encoded UTF-8 for every
    character outside printable ASCII, a space or a ``%`` (a header carries latin-1 only, and a
    thread named by the OpenAI ``user`` field may hold anything); other ids are unchanged.
    :func:`thread_of` decodes the request header, so the value round-trips."""
    return quote(thread_id, safe=_HEADER_SAFE)


def thread_of(request: Request, body: dict[str, Any], agent: str, messages: list[Message]) -> str:
    principal = str(request.scope.get("state", {}).get("principal", "anonymous"))
    header = request.headers.get("x-plait-thread")
    if header:
        return unquote(header)
    metadata = body.get("metadata")
    if isinstance(metadata, dict) and isinstance(metadata.get("thread_id"), str):
        return str(metadata["thread_id"])
    user = body.get("user")
    if isinstance(user, str) and user:
        return f"user-{principal}:{user}"
    return derived_thread_id(principal, agent, messages)


async def models(request: Request) -> Response:
    from starlette.responses import JSONResponse

    state: ServeState = request.app.state.plait
    created = int(state.started)
    data = [
        {"id": name, "object": "model", "created": created, "owned_by": "plait"}
        for name in state.agents
    ]
    return JSONResponse({"object": "list", "data": data})


async def chat_completions(request: Request) -> Response:
    from starlette.responses import JSONResponse

    state: ServeState = request.app.state.plait
    body = await read_json(request, state.limits.max_body_bytes)
    name, agent = state.agent(body.get("model"))
    messages = _messages(body.get("messages"))
    thread_id = thread_of(request, body, name, messages)
    # What is new depends on the stored thread only when the client sent earlier answers
    # (a full history): a request of new messages alone needs no read of the thread.
    stored: list[Message] = []
    if any(isinstance(m, AssistantMessage) for m in messages):
        stored = (await agent.store.load(thread_id)).messages
    # The OpenAI wire has no way to answer a held call: a new message rejects what waited.
    # A streamed answer names its run (X-Plait-Run) before the run ends, so another worker
    # must find it from the start; a whole answer names it only once it has ended.
    streamed = bool(body.get("stream"))
    run = state.runs.start(
        agent,
        name,
        thread_id,
        new_input(stored, messages),
        on_paused="reject",
        announce=streamed,
    )
    completion_id = f"chatcmpl-{run.run_id}"
    headers = {"X-Plait-Thread": thread_header(thread_id), "X-Plait-Run": run.run_id}
    if streamed:
        return state.sse(request, run, _chunks(state, run, name, completion_id), headers)
    async with state.owned(run):  # held: no later run compacts it before it is read here
        await run.ended()  # one wake-up at the end, not one an event
        parts = [t async for t in _pieces(state, run)]
        await state.runs.published(run, ended=True)  # any worker finds the run it names
        error, result = run.error, run.result
    if error is not None:
        failure = error if isinstance(error, ServeError) else _failed(error)
        raise ServeError(failure.status, failure.type, failure.message, headers)
    usage = result.usage if result is not None else None
    answer = {
        "id": completion_id,
        "object": "chat.completion",
        "created": int(run.created_at),
        "model": name,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "".join(parts)},
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": usage.input_tokens if usage else 0,
            "completion_tokens": usage.output_tokens if usage else 0,
            "total_tokens": (usage.input_tokens + usage.output_tokens) if usage else 0,
        },
    }
    return JSONResponse(answer, headers=headers)


def _failed(error: BaseException) -> ServeError:
    return ServeError(502, "agent_error", f"The turn failed: {type(error).__name__}: {error}")


async def _pieces(state: ServeState, run: Any) -> AsyncIterator[str]:
    """The content the client sees, piece by piece: the answer's text deltas, and with
    ``tool_calls="text"`` a line per tool call."""
    async for event in run.stream():
        if isinstance(event, TextDeltaReceived):
            yield event.text
        elif isinstance(event, ToolCallFinished) and state.tool_calls == "text":
            args = json.dumps(event.call.args, ensure_ascii=False)
            result = json.dumps(event.result.data, ensure_ascii=False, default=str)[:500]
            yield f"\n[tool {event.call.name}({args}) → {result}]\n"
    if run.status == "paused" and run.result is not None:
        yield paused_note(run)


def paused_note(run: Any) -> str:
    """What an OpenAI client reads when the turn paused: what waits, and the two ways on."""
    return (
        f"\n[paused: {waiting_message(run.result.pending)}. Decide with POST "
        f"/threads/{run.thread_id}/runs/{run.run_id}/resume, or send a new message to reject "
        "what waits and go on.]"
    )


async def _chunks(state: ServeState, run: Any, name: str, completion_id: str) -> AsyncIterator[str]:
    created = int(time.time())

    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        payload = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": name,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return f"data: {json.dumps(payload, ensure_ascii=False)}\n\n"

    yield chunk({"role": "assistant", "content": ""})
    async for piece in _pieces(state, run):
        yield chunk({"content": piece})
    if run.error is not None:
        error = run.error if isinstance(run.error, ServeError) else _failed(run.error)
        yield f"data: {json.dumps(error.body())}\n\n"
        return
    yield chunk({}, "stop")
    yield "data: [DONE]\n\n"
