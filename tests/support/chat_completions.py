"""Chat Completions replies for the wire server: a streamed answer, or a streamed tool call,
with a chosen usage."""

from __future__ import annotations

import json

from wire_server import Reply


def _chunk(
    delta: dict[str, object] | None, finish: str | None = None, usage: object = None
) -> bytes:
    """One ``chat.completion.chunk`` event (a delta, a finish reason, or the usage alone)."""
    choices = [{"index": 0, "delta": delta or {}, "finish_reason": finish}]
    body = {
        "id": "c",
        "object": "chat.completion.chunk",
        "created": 1750000000,
        "model": "test-model",
        "choices": choices if delta is not None or finish else [],
        "usage": usage,
    }
    return b"data: " + json.dumps(body).encode() + b"\n\n"


def sse_answer(text: str, *, prompt: int = 10, completion: int = 3, cached: int = 0) -> Reply:
    """A Chat Completions stream answering ``text`` with the given usage."""
    usage = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached},
    }
    chunks = [
        _chunk({"role": "assistant", "content": text}),
        _chunk(None, "stop"),
        _chunk(None, None, usage),
        b"data: [DONE]\n\n",
    ]
    return Reply(200, chunks, "text/event-stream")


def sse_call(name: str, arguments: dict[str, object], prompt: int = 15, out: int = 4) -> Reply:
    """A Chat Completions stream asking for one tool call (id ``call_1``), with its usage."""
    call = {
        "index": 0,
        "id": "call_1",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }
    usage = {"prompt_tokens": prompt, "completion_tokens": out, "total_tokens": prompt + out}
    chunks = [
        _chunk({"role": "assistant", "tool_calls": [call]}),
        _chunk(None, "tool_calls"),
        _chunk(None, None, usage),
        b"data: [DONE]\n\n",
    ]
    return Reply(200, chunks, "text/event-stream")
