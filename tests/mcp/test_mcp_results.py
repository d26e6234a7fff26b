"""MCP tool results as plait results: text as ``data``, images, audio and blob resources as
parts (plait.mcp.results), against the real FastMCP server in tests/support/mcp_server.py."""

from __future__ import annotations

import base64
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from mcp_server import PDF, PNG, STDIO, WAV

from plait import Agent, ScriptedModel, ToolCall, ToolMessage
from plait.mcp import McpContentDropped, McpServer, McpToolset
from plait.mcp.content import BinaryContent, CallOutcome, LinkContent, TextContent
from plait.mcp.results import MAX_RESULT_PARTS, plait_result
from plait.messages import Part
from plait.parts import FilePart, ImagePart
from plait.stores import SQLiteThreadStore

MEDIA_TEXT = (
    "here is everything\n\n"
    "[resource link file:///data/big.csv (big dataset, text/csv); not fetched]"
)


def _outcome(*blocks: Any, structured: dict[str, Any] | None = None) -> CallOutcome:
    return CallOutcome(content=tuple(blocks), structured=structured, is_error=False)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _assert_media_parts(parts: list[Part]) -> None:
    image, audio, pdf, logo = parts
    assert isinstance(image, ImagePart) and image.media_type == "image/png"
    assert image.blob is not None and image.blob.data == PNG
    assert isinstance(audio, FilePart) and audio.media_type == "audio/wav"
    assert audio.blob is not None and audio.blob.data == WAV and audio.filename is None
    assert isinstance(pdf, FilePart) and pdf.media_type == "application/pdf"
    assert pdf.blob is not None and pdf.blob.data == PDF and pdf.filename == "q3 report.pdf"
    assert isinstance(logo, ImagePart) and logo.media_type == "image/png"
    assert logo.blob is not None and logo.blob.data == PNG


async def test_text_image_audio_resources_and_a_link_become_text_and_exact_parts(
    tmp_path: Path,
) -> None:
    model = ScriptedModel([ToolCall("c1", "demo_media"), "seen"])
    store = SQLiteThreadStore(tmp_path / "threads.db")
    server = McpServer("demo", command=STDIO, allow=["media"])
    async with McpToolset([server]) as mcp:
        agent = Agent(model, middleware=[mcp], store=store)
        result = await agent.run("show me", thread_id="t1")
    assert result.output == "seen"
    (stored,) = [m for m in result.new_messages if isinstance(m, ToolMessage)]
    assert stored.data == MEDIA_TEXT and not stored.is_error
    _assert_media_parts(stored.parts)
    # The next request carries the parts, the same objects (no copy, no re-encode).
    (sent,) = [m for m in model.requests[1].messages if isinstance(m, ToolMessage)]
    assert sent.data == MEDIA_TEXT
    assert [p.blob for p in sent.parts] == [p.blob for p in stored.parts]  # type: ignore[union-attr]
    _assert_media_parts(sent.parts)
    await store.aclose()

    # A fresh store on the same file (another process) loads the parts byte for byte, and the
    # PNG that came twice (an image and an embedded resource) is stored once.
    reopened = SQLiteThreadStore(tmp_path / "threads.db")
    snapshot = await reopened.load("t1")
    await reopened.aclose()
    (loaded,) = [m for m in snapshot.messages if isinstance(m, ToolMessage)]
    assert loaded.data == MEDIA_TEXT
    _assert_media_parts(loaded.parts)
    conn = sqlite3.connect(tmp_path / "threads.db")
    try:
        blobs = sorted(bytes(r[0]) for r in conn.execute("SELECT data FROM message_blobs"))
        rows = " ".join(str(r[0]) for r in conn.execute("SELECT json FROM messages"))
    finally:
        conn.close()
    assert blobs == sorted([PNG, WAV, PDF])
    assert _b64(PNG) not in rows and _b64(PDF) not in rows  # rows hold the addresses only

    # A later turn on the reloaded thread sends the loaded parts to the model again.
    again = ScriptedModel(["still seen"])
    second = SQLiteThreadStore(tmp_path / "threads.db")
    await Agent(again, store=second).run("and again?", thread_id="t1")
    await second.aclose()
    (resent,) = [m for m in again.requests[0].messages if isinstance(m, ToolMessage)]
    _assert_media_parts(resent.parts)


async def test_blocks_that_cannot_be_parts_become_notes_and_an_event() -> None:
    model = ScriptedModel([ToolCall("c1", "demo_bad_media"), "ok"])
    async with McpToolset([McpServer("demo", command=STDIO, allow=["bad_media"])]) as mcp:
        result = await Agent(model, middleware=[mcp]).run("go")
    assert result.output == "ok"
    (message,) = [m for m in result.new_messages if isinstance(m, ToolMessage)]
    assert not message.is_error
    (good,) = message.parts  # the one good PNG survives
    assert isinstance(good, ImagePart) and good.blob is not None and good.blob.data == PNG
    lines = message.data.split("\n\n")
    assert lines[0] == "still here"
    assert lines[1] == (
        "[image (image/png, 10 bytes) left out: image bytes are not image/png "
        "(their signature says image/gif)]"
    )
    assert lines[2].startswith("[image (image/png, 13 bytes) left out: content is not valid base64")
    assert lines[3].startswith(
        "[image (image/tiff, 8 bytes) left out: image media type 'image/tiff'"
    )
    assert lines[4] == (
        "[resource file:///fake.pdf (application/pdf, 5 bytes) left out: "
        "file bytes are not a PDF (they do not start with '%PDF-')]"
    )
    assert len(lines) == 5
    (event,) = [e for e in result.events if isinstance(e, McpContentDropped)]
    assert (event.server, event.tool, event.call_id) == ("demo", "demo_bad_media", "c1")
    assert event.notes == lines[1:]
    (sent,) = [m for m in model.requests[1].messages if isinstance(m, ToolMessage)]
    assert sent.data == message.data and sent.parts == [good]


async def test_an_embedded_text_resource_is_text_with_its_uri() -> None:
    model = ScriptedModel([ToolCall("c1", "demo_picture"), "ok"])
    async with McpToolset([McpServer("demo", command=STDIO, allow=["picture"])]) as mcp:
        result = await Agent(model, middleware=[mcp]).run("go")
    (message,) = [m for m in result.new_messages if isinstance(m, ToolMessage)]
    assert message.data == "a one-pixel picture\n\n[resource file:///notes.txt]\nnotes"
    (image,) = message.parts
    assert isinstance(image, ImagePart) and image.blob is not None and image.blob.data == PNG


def test_text_only_results_are_unchanged_and_structured_content_still_wins() -> None:
    assert plait_result(_outcome(TextContent("a"), TextContent("b")), tool="t", max_chars=99) == (
        "a\n\nb"
    )
    assert plait_result(_outcome(structured={"x": 1}), tool="t", max_chars=99) == {"x": 1}
    # Beside a part the structured value is sent as its JSON text.
    data, image = plait_result(
        _outcome(BinaryContent("image", "image/png", _b64(PNG)), structured={"x": 1}),
        tool="t",
        max_chars=99,
    )
    assert data == '{"x": 1}' and isinstance(image, ImagePart) and image.blob is not None
    assert image.blob.data == PNG


def test_base64_wrapped_in_lines_decodes_and_a_resource_without_mime_type_is_sniffed() -> None:
    wrapped = "\n".join(_b64(PDF)[i : i + 20] for i in range(0, len(_b64(PDF)), 20))
    data, part = plait_result(
        _outcome(BinaryContent("resource", None, wrapped, uri="https://x.test/a/b%2Bc?v=1#top")),
        tool="t",
        max_chars=99,
    )
    assert data == ""
    assert isinstance(part, FilePart) and part.media_type == "application/pdf"
    assert part.blob is not None and part.blob.data == PDF and part.filename == "b+c"


def test_an_image_over_max_part_bytes_is_a_note_not_a_crash(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import plait.parts

    monkeypatch.setattr(plait.parts, "MAX_PART_BYTES", 16)
    notes: list[str] = []
    data = plait_result(
        _outcome(TextContent("t"), BinaryContent("image", "image/png", _b64(PNG))),
        tool="t",
        max_chars=500,
        on_drop=notes.append,
    )
    note = (
        "[image (image/png, 70 bytes) left out: base64 content of 96 characters decodes to more "
        "than plait.parts.MAX_PART_BYTES (16) bytes]"
    )
    assert data == f"t\n\n{note}" and notes == [note]


def test_many_links_and_images_stay_within_the_bounds() -> None:
    # Links are text and cut at max_result_chars; images past MAX_RESULT_PARTS become one note.
    links = [LinkContent(f"file:///{i}", "n" * 1000) for i in range(1000)]
    text = plait_result(_outcome(*links), tool="demo_many", max_chars=5_000)
    assert len(text) < 5_100 and text.endswith("more characters cut]")
    images = [BinaryContent("image", "image/png", _b64(PNG), uri="u" * 100_000)] * 1000
    notes: list[str] = []
    data, *parts = plait_result(
        _outcome(*images), tool="demo_many", max_chars=5_000, on_drop=notes.append
    )
    assert len(parts) == MAX_RESULT_PARTS and all(isinstance(p, ImagePart) for p in parts)
    assert data == notes[0] and notes == [
        f"[{1000 - MAX_RESULT_PARTS} more image, audio or resource blocks left out: a result "
        f"keeps at most {MAX_RESULT_PARTS} (plait.mcp.results.MAX_RESULT_PARTS)]"
    ]


def test_an_error_result_names_its_binary_blocks_without_decoding_them() -> None:
    from plait.errors import ToolError

    outcome = CallOutcome(
        content=(TextContent("boom"), BinaryContent("audio", "audio/wav", "%%%%")),
        structured=None,
        is_error=True,
    )
    with pytest.raises(ToolError, match=r"boom\n\naudio \(audio/wav, 3 bytes\)"):
        plait_result(outcome, tool="t", max_chars=99)


async def test_parts_arrive_the_same_over_streamable_http(http_url: str) -> None:
    async with McpServer("demo", url=http_url, allow=["media"]) as server:
        (media,) = await server.list_tools()
        data, *parts = await server.call(media.remote.name, {}, tool=media.name)
    assert data == MEDIA_TEXT
    _assert_media_parts(parts)
