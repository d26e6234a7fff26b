"""Chat Completions replies for the wire server: a streamed answer with a chosen usage."""

from __future__ import annotations

import json

from wire_server import Reply


def sse_answer(text: str, *, prompt: int = 10, completion: int = 3, cached: int = 0) -> Reply:
    """A Chat Completions stream answering ``text`` with the given usage."""

    def chunk(
        delta: dict[str, object] | None, finish: str | None = None, usage: object = None
    ) -> bytes:
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

    usage = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached},
    }
    chunks = [
        chunk({"role": "assistant", "content": text}),
        chunk(None, "stop"),
        chunk(None, None, usage),
        b"data: [DONE]\n\n",
    ]
    return Reply(200, chunks, "text/event-stream")
