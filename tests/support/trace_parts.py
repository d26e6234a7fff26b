"""A turn whose messages hold images, files and reasoning, for the tests of parts in the trace
(``tests/trace``): :func:`record_parts` and the bytes it records."""

from __future__ import annotations

import json
from typing import Any

from images import png

from plait import Agent, ModelRequest, ModelResponse, ToolCall
from plait.messages import TextPart, ToolMessage, UserMessage
from plait.models.scripted import FunctionModel
from plait.parts import Blob, FilePart, ImagePart, ReasoningPart
from plait.stores.base import ThreadStore
from plait.tools import tool
from plait.trace import TraceRecorder, TraceStore
from plait.trace.store import RequestRow, TraceBatch

USER_PNG = png(64, 48, seed=1)
"""The image in the user's message of :func:`record_parts` (a real PNG: Chromium decodes it)."""
TOOL_PNG = png(40, 30, seed=2)
"""The image the ``screenshot`` tool returns on every call."""
REPORT_PDF = b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n"
SVG = b'<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"><script>alert(2)</script></svg>'
HTML = b"<!doctype html><script>document.title = 'pwned'</script>"
SIGNATURE = "EqQBCkYIARgCIkDm" * 40
"""The Anthropic thinking signature of the first answer (recorded by its length only)."""
ENCRYPTED = "gAAAAABo" * 60
MODEL_CALLS = 5


@tool
def screenshot(window: int) -> list[Any]:
    """Capture a window (each the same picture)."""
    return ["the screen, captured", ImagePart(Blob(TOOL_PNG))]


@tool
def attachments() -> list[Any]:
    """Files of types a browser would run."""
    return [
        "two attachments",
        FilePart(Blob(SVG), "image/svg+xml", "drawing.svg"),
        FilePart(Blob(HTML), "text/html", "page.html"),
    ]


def _answer(request: ModelRequest) -> ModelResponse:
    last = max(i for i, m in enumerate(request.messages) if isinstance(m, UserMessage))
    calls = sum(isinstance(m, ToolMessage) for m in request.messages[last:])
    if calls == 0:
        thinking = {
            "type": "thinking",
            "thinking": "Look at the screen first.",
            "signature": SIGNATURE,
        }
        return ModelResponse(
            reasoning=[ReasoningPart("anthropic", "Look at the screen first.", thinking)],
            tool_calls=[ToolCall("c0", "screenshot", {"window": 0})],
        )
    if calls < MODEL_CALLS - 2:
        return ModelResponse(tool_calls=[ToolCall(f"c{calls}", "screenshot", {"window": calls})])
    if calls == MODEL_CALLS - 2:
        return ModelResponse(tool_calls=[ToolCall(f"c{calls}", "attachments", {})])
    sealed = {"type": "redacted_thinking", "data": ENCRYPTED}
    return ModelResponse(
        content="The report is fine.", reasoning=[ReasoningPart("anthropic", "", sealed)]
    )


def parts_question() -> UserMessage:
    """The user's message: text, an image and a PDF."""
    return UserMessage(
        [
            TextPart("Here is my screen and the report."),
            ImagePart(Blob(USER_PNG)),
            FilePart(Blob(REPORT_PDF), "application/pdf", "report.pdf"),
        ]
    )


async def record_parts(
    store: TraceStore,
    threads: ThreadStore | None = None,
    recorder: TraceRecorder | None = None,
    **options: Any,
) -> TraceRecorder:
    """One turn of :data:`MODEL_CALLS` model calls, each request carrying the user's image and
    PDF, the tool's image returned three times, an SVG and an HTML file, and reasoning on the
    first and last answers; recorded by ``recorder`` or a new one (``options`` are its own) into
    ``store`` (written when this returns), on thread ``parts`` of ``threads`` (default: in
    memory)."""
    if recorder is None:
        recorder = TraceRecorder(store, agent="parts", background=False, **options)
    model = FunctionModel(_answer, name="vision")
    tools = [screenshot, attachments]
    agent = Agent(model, tools=tools, middleware=[recorder], store=threads)
    await agent.run(parts_question(), thread_id="parts")
    assert len(model.requests) == MODEL_CALLS
    await recorder.drain()
    return recorder


SVG_AS_IMAGE = SVG.replace(b"alert(1)", b"alert(3)")
"""An SVG recorded as an image part (a trace edited by hand: the recorder refuses the type)."""
HTML_AS_PNG = HTML + b"<!-- recorded as image/png -->"
"""HTML recorded as an image/png part."""


async def write_hostile(store: TraceStore) -> str:
    """Write a run by hand whose one model call's request is a user message with an "image"
    of type ``image/svg+xml``, an image/png part whose bytes are HTML and one whose bytes were
    not kept (over the cap); its run id."""
    import hashlib

    def ref(data: bytes, media_type: str) -> dict[str, Any]:
        digest = hashlib.sha256(data).hexdigest()
        return {
            "type": "image",
            "media_type": media_type,
            "detail": None,
            "source": {"sha256": digest, "size": len(data)},
        }

    body = {
        "role": "user",
        "id": "hostile-1",
        "metadata": {},
        "content": [
            {"type": "text", "text": "hostile images"},
            ref(SVG_AS_IMAGE, "image/svg+xml"),
            ref(HTML_AS_PNG, "image/png"),
            ref(USER_PNG[:-1], "image/png"),  # over the recorder's max_blob_bytes
        ],
    }
    run = {
        "id": "hostile",
        "thread_id": "hostile",
        "agent": "edited",
        "started": 1.0,
        "finished": 2.0,
        "status": "ok",
        "error": None,
        "input": "hostile images",
        "output": "done",
    }
    span = {
        "id": "hostile-call",
        "run_id": "hostile",
        "kind": "model",
        "name": "edited",
        "dispatch": 0,
        "started": 1.0,
        "finished": 2.0,
        "data": {"model": "edited"},
    }
    request = RequestRow(
        "hostile-call", "hostile", 0, True, [], [(0, "hostile-1:k")], "none", "none", "none"
    )
    message = ("hostile", "hostile-1:k", "user", 10, "user", json.dumps(body))
    binary: dict[str, tuple[str, int, bytes | None]] = {
        hashlib.sha256(d).hexdigest(): (t, len(d), d)
        for d, t in ((SVG_AS_IMAGE, "image/svg+xml"), (HTML_AS_PNG, "image/png"))
    }
    binary[hashlib.sha256(USER_PNG[:-1]).hexdigest()] = ("image/png", len(USER_PNG) - 1, None)
    await store.write(
        TraceBatch(runs=[run], spans=[span], requests=[request], messages=[message], binary=binary)
    )
    return "hostile"
