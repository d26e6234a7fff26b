"""Reading a request: a JSON body within the size limit, the new input of a conversation, and
the thread a conversation without an id belongs to."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from plait.messages import AssistantMessage, Message, SystemMessage, UserMessage
from plait.serve.errors import ServeError

if TYPE_CHECKING:
    from starlette.requests import Request

__all__ = ["derived_thread_id", "new_input", "read_json"]


async def read_json(request: Request, limit: int) -> dict[str, Any]:
    """The body as a JSON object, read at most ``limit`` bytes far: 413 ``body_too_large``
    past it (by ``Content-Length`` before reading, or while reading a chunked body), 400
    ``invalid_request`` for anything but a JSON object."""
    declared = request.headers.get("content-length")
    too_large = ServeError(
        413, "body_too_large", f"The request body is over this server's limit of {limit} bytes."
    )
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise too_large
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise too_large
        chunks.append(chunk)
    try:
        body = json.loads(b"".join(chunks) or b"null")
    except (ValueError, UnicodeDecodeError) as exc:
        raise ServeError(400, "invalid_request", f"The body is not JSON: {exc}.") from None
    if not isinstance(body, dict):
        raise ServeError(400, "invalid_request", "The body must be a JSON object.")
    return body


def derived_thread_id(principal: str, agent: str, messages: Sequence[Message]) -> str:
    """The thread of a conversation that names none: a hash of the principal (the token's
    hash, or the request's ``user``), the agent, and the conversation's first system and first
    user message. Two conversations of one principal that open with the same words therefore
    share a thread (name the thread with ``X-Plait-Thread`` to keep them apart); two
    principals never do."""
    first_system = next((m.text for m in messages if isinstance(m, SystemMessage)), "")
    first_user = next((m.text for m in messages if isinstance(m, UserMessage)), "")
    digest = hashlib.sha256(
        json.dumps([principal, agent, first_system, first_user]).encode()
    ).hexdigest()
    return f"oai-{digest[:32]}"


def new_input(stored: Sequence[Message], incoming: Sequence[Message]) -> list[Message]:
    """What of a full history sent by a client (OpenAI, AG-UI) is new for the thread.

    A thread with no messages takes the whole history, less system messages (the agent has
    its own prompt); otherwise the messages after the last assistant message of the request
    (the user's new messages). A request ending with an
    assistant message has nothing new: 400."""
    taken: list[Message]
    if not stored:
        taken = [m for m in incoming if not isinstance(m, SystemMessage)]
    else:
        last = max(
            (i for i, m in enumerate(incoming) if isinstance(m, AssistantMessage)), default=-1
        )
        taken = [m for m in incoming[last + 1 :] if isinstance(m, UserMessage)]
    if not taken or isinstance(taken[-1], AssistantMessage):
        raise ServeError(
            400,
            "invalid_request",
            "The messages hold nothing new for the agent: end them with a user message.",
        )
    return taken
