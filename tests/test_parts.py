"""Content parts: construction checks (the hostile set), the lossless round trip, tool results
with parts, and what the context strategies do with them."""

from __future__ import annotations

import gc
from typing import Any

import pytest

from plait import Agent, ScriptedModel, ToolCall, tool
from plait.backends import MemoryBackend
from plait.context import ResultEvictionMiddleware
from plait.context.events import ResultEvicted
from plait.context.offload import READ_TOOL_NAME
from plait.context.summarizers import render_entry
from plait.errors import ContentError
from plait.messages import (
    AssistantMessage,
    Blob,
    FilePart,
    ImagePart,
    Message,
    ReasoningPart,
    TextPart,
    ToolMessage,
    UserMessage,
    dump_messages,
    load_messages,
    split_tool_output,
)
from plait.parts import BLOBS_BY_REFERENCE, MAX_PART_BYTES, part_label, sniff_media_type

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + b"\x00" * 40
JPEG = b"\xff\xd8\xff\xe0" + b"\x00" * 40
GIF = b"GIF89a" + b"\x00" * 40
WEBP = b"RIFF\x10\x00\x00\x00WEBPVP8 " + b"\x00" * 40
PDF = b"%PDF-1.7\n" + b"x" * 40


@pytest.mark.parametrize(
    ("data", "media_type"),
    [(PNG, "image/png"), (JPEG, "image/jpeg"), (GIF, "image/gif"), (WEBP, "image/webp")],
)
def test_image_media_type_is_sniffed_from_the_bytes(data: bytes, media_type: str) -> None:
    assert sniff_media_type(data) == media_type
    assert ImagePart(Blob(data)).media_type == media_type


@pytest.mark.parametrize(
    ("source", "media_type", "says"),
    [
        (b"this is not a png at all", "image/png", "not image/png"),
        (JPEG, "image/png", "signature says image/jpeg"),
        (b"plain text", None, "not PNG, JPEG, GIF or WebP"),
        (PNG, "image/tiff", "not one of"),
        ("file:///etc/passwd", None, "must be http"),
        ("ftp://example.com/a.png", None, "must be http"),
        ("/etc/passwd", None, "a bare path"),
        ("data:image/png,notbase64", None, "must be base64"),
        ("data:image/png;base64,!!!!", None, "not valid base64"),
    ],
)
def test_a_bad_image_is_a_content_error_naming_the_problem(
    source: bytes | str, media_type: str | None, says: str
) -> None:
    with pytest.raises(ContentError, match=says):
        ImagePart(source if isinstance(source, str) else Blob(source), media_type)


def test_a_part_over_the_size_limit_is_refused_before_anything_is_sent() -> None:
    with pytest.raises(ContentError, match="MAX_PART_BYTES"):
        Blob(b"\x00" * (MAX_PART_BYTES + 1))


def test_a_pdf_that_is_not_a_pdf_is_refused() -> None:
    with pytest.raises(ContentError, match="not a PDF"):
        FilePart(Blob(b"<html>"), "application/pdf")
    with pytest.raises(ContentError, match="needs a media type"):
        FilePart(Blob(b"\x00\x01"))
    assert FilePart(Blob(PDF)).media_type == "application/pdf"


def test_a_data_url_becomes_a_blob_with_its_media_type() -> None:
    part = ImagePart("data:image/png;base64," + Blob(PNG).base64())
    assert part.blob == Blob(PNG)
    assert part.media_type == "image/png"
    assert part.url is None


def test_a_blob_hashes_and_encodes_once() -> None:
    blob = Blob(PNG)
    assert blob.base64() is blob.base64()
    assert blob.sha256 is blob.sha256
    assert blob.ref == f"sha256:{blob.sha256}"


def thread() -> list[Message]:
    return [
        UserMessage(
            [TextPart("what is this?"), ImagePart(Blob(PNG)), FilePart(Blob(PDF), filename="r.pdf")]
        ),
        AssistantMessage(
            [
                ReasoningPart(
                    "anthropic",
                    "look",
                    {"type": "thinking", "thinking": "look", "signature": "c2ln"},
                ),
                TextPart("Let me zoom."),
            ],
            tool_calls=[ToolCall("c1", "zoom", {})],
        ),
        ToolMessage("c1", "zoom", "zoomed", parts=[ImagePart("https://example.com/z.png")]),
    ]


def test_every_part_kind_round_trips_exactly() -> None:
    messages = thread()
    again = load_messages(dump_messages(messages))
    assert again == messages
    first = again[0]
    assert isinstance(first, UserMessage)
    image = first.content[1]
    assert isinstance(image, ImagePart) and image.blob is not None
    assert image.blob.data == PNG


def test_blobs_serialize_by_reference_and_resolve_on_load() -> None:
    from plait.messages import _messages_adapter

    messages = thread()
    adapter = _messages_adapter()
    by_ref = adapter.dump_json(messages, context={BLOBS_BY_REFERENCE: True}).decode()
    assert Blob(PNG).base64() not in by_ref
    blobs = {Blob(b).sha256: b for b in (PNG, PDF)}
    again = adapter.validate_json(by_ref, context={BLOBS_BY_REFERENCE: blobs.__getitem__})
    assert again == messages
    # while a loaded blob is alive, a later load reuses it: no second hash or base64 encoding
    asked: list[str] = []

    def resolve(digest: str) -> bytes:
        asked.append(digest)
        return blobs[digest]

    twice = adapter.validate_json(by_ref, context={BLOBS_BY_REFERENCE: resolve})
    first, second = again[0], twice[0]
    assert isinstance(first, UserMessage) and isinstance(second, UserMessage)
    assert second.content[1].source is first.content[1].source  # type: ignore[union-attr]
    assert asked == []
    del again, twice, first, second
    gc.collect()
    with pytest.raises(ValueError, match="no blob resolver"):
        adapter.validate_json(by_ref)


def test_a_blob_whose_bytes_do_not_match_its_address_is_refused() -> None:
    text = dump_messages([UserMessage([ImagePart(Blob(PNG))])])
    tampered = text.replace(Blob(PNG).base64(), Blob(PNG[:-1] + b"\x01").base64())
    with pytest.raises(ValueError, match="does not match its address"):
        load_messages(tampered)


def test_a_stored_file_url_is_refused_on_load() -> None:
    row = (
        '[{"role":"user","content":[{"type":"image","source":"file:///x"}],"metadata":{},"id":"a"}]'
    )
    with pytest.raises(ValueError, match="must be http"):
        load_messages(row)


def test_split_tool_output_separates_text_from_images_and_files() -> None:
    image = ImagePart(Blob(PNG))
    assert split_tool_output(image) == ("", [image])
    assert split_tool_output(["chart:", image, TextPart("done"), {"n": 1}]) == (
        'chart:\ndone\n{"n":1}',
        [image],
    )
    assert split_tool_output(["a", "b"]) == (["a", "b"], [])
    assert split_tool_output({"k": 1}) == ({"k": 1}, [])


async def test_a_tool_returning_an_image_stores_it_as_a_part_of_its_result() -> None:
    @tool
    def screenshot() -> list[object]:
        """Take a screenshot."""
        return ["the page", ImagePart(Blob(PNG))]

    model = ScriptedModel([ToolCall("c1", "screenshot", {}), "I see it."])
    agent = Agent(model, tools=[screenshot])
    result = await agent.run("look", thread_id="t")
    stored = next(m for m in result.new_messages if isinstance(m, ToolMessage))
    assert stored.data == "the page"
    assert stored.parts == [ImagePart(Blob(PNG))]
    request = model.requests[1]
    sent = next(m for m in request.messages if isinstance(m, ToolMessage))
    assert sent.parts == [ImagePart(Blob(PNG))]
    model.assert_complete()


def pdf_of(size: int) -> bytes:
    return b"%PDF-1.7\n" + b"x" * size


async def test_an_oversized_tool_file_is_evicted_and_read_back_as_the_part() -> None:
    big = FilePart(Blob(pdf_of(40_000)), filename="big.pdf")

    @tool
    def fetch() -> list[object]:
        """Fetch the report."""
        return ["report attached", big, ImagePart(Blob(PNG))]

    backend = MemoryBackend()
    model = ScriptedModel([ToolCall("c1", "fetch", {}), "seen"])
    agent = Agent(
        model, tools=[fetch], middleware=[ResultEvictionMiddleware(2000, backend=backend)]
    )
    result = await agent.run("go", thread_id="t")
    evicted = [e for e in result.events if isinstance(e, ResultEvicted)]
    assert len(evicted) == 1 and evicted[0].path.endswith(".part.json")
    stored = next(m for m in result.new_messages if isinstance(m, ToolMessage))
    assert stored.data == "report attached"
    note, image = stored.parts
    assert isinstance(note, TextPart) and evicted[0].path in note.text
    assert "big.pdf" in note.text and READ_TOOL_NAME in note.text
    assert image == ImagePart(Blob(PNG))  # small parts stay

    reader = ScriptedModel([ToolCall("r1", READ_TOOL_NAME, {"path": evicted[0].path}), "ok"])
    agent2 = Agent(
        reader, tools=[fetch], middleware=[ResultEvictionMiddleware(2000, backend=backend)]
    )
    again = await agent2.run("open it", thread_id="t")
    read = next(m for m in again.new_messages if isinstance(m, ToolMessage))
    assert not read.is_error, read.data
    assert read.parts == [big]
    reader.assert_complete()
    model.assert_complete()


async def test_an_evicted_part_is_read_back_as_the_part_whatever_the_path_spelling() -> None:
    big = FilePart(Blob(pdf_of(40_000)), filename="big.pdf")

    @tool
    def fetch() -> list[object]:
        """Fetch the report."""
        return [big]

    backend = MemoryBackend()
    model = ScriptedModel([ToolCall("c1", "fetch", {}), "seen"])
    middleware = [ResultEvictionMiddleware(2000, backend=backend)]
    result = await Agent(model, tools=[fetch], middleware=middleware).run("go", thread_id="t")
    [evicted] = [e for e in result.events if isinstance(e, ResultEvicted)]
    spelled = f"/{evicted.path}/"  # the same file; read as text it would be pages of base64
    reader = ScriptedModel([ToolCall("r1", READ_TOOL_NAME, {"path": spelled}), "ok"])
    again = await Agent(reader, tools=[fetch], middleware=middleware).run("open", thread_id="t")
    read = next(m for m in again.new_messages if isinstance(m, ToolMessage))
    assert read.parts == [big] and not read.is_error, read.data


def test_a_summary_names_the_images_and_files_it_folds() -> None:
    user, _, result = thread()
    assert isinstance(user, UserMessage)
    line = render_entry(user)
    assert part_label(ImagePart(Blob(PNG))) in line
    assert "r.pdf application/pdf" in line
    assert "https://example.com/z.png" in render_entry(result)


@pytest.mark.parametrize(
    "payload",
    [{"type": "thinking", "steps": (1, 2)}, {"type": "thinking", 3: "b"}],
    ids=["tuple", "int-key"],
)
def test_a_reasoning_payload_json_would_change_is_refused(payload: dict[Any, Any]) -> None:
    # JSON writes a tuple as a list and an int key as a string: stored, the payload would come
    # back as another value and be replayed to the provider changed.
    with pytest.raises(ContentError, match=r"not plain JSON.*tuple, or a key"):
        ReasoningPart("anthropic", "x", payload)


def test_a_label_names_a_file_in_at_most_80_characters_on_one_line() -> None:
    named = FilePart(Blob(b"%PDF-1.4"), filename="report\n" + "x" * 1_000_000 + ".pdf")
    label = part_label(named)
    assert "\n" not in label and len(label) < 200 and "[file report x" in label
