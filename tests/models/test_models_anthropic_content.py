"""Images and documents through the real ``anthropic`` SDK to the strict local Messages server:
they arrive byte-identical (after base64 decoding) from user messages, system messages and tool
results, and content over the API's limits is a ContentError before any request is sent."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from anthropic_server import AnthropicServer

from plait.errors import ContentError
from plait.messages import (
    AssistantMessage,
    FilePart,
    ImagePart,
    Part,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from plait.models.anthropic import AnthropicModel, to_anthropic_request
from plait.models.anthropic_content import MAX_IMAGES, count_pdf_pages
from plait.models.base import ModelRequest
from plait.parts import Blob

PNG = b"\x89PNG\r\n\x1a\n" + os.urandom(2000)
JPEG = b"\xff\xd8\xff\xe0" + os.urandom(1500)
PDF = b"%PDF-1.7\n" + b"".join(
    b"%d 0 obj << /Type /Page /Parent 1 0 R >> endobj\n" % n for n in range(2, 5)
)


def answer(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"type": "text", "text": "Seen."}]


@pytest.fixture
def server() -> Iterator[AnthropicServer]:
    with AnthropicServer(answer) as wire:
        yield wire


@pytest.fixture
async def model(server: AnthropicServer) -> AsyncIterator[AnthropicModel]:
    adapter = AnthropicModel(
        "claude-sonnet-4-6", api_key="sk-ant-test", base_url=server.url, cache=None
    )
    yield adapter
    await adapter.aclose()


def user(*parts: Part) -> ModelRequest:
    return ModelRequest(messages=[UserMessage(list(parts))])


async def test_images_and_documents_in_a_user_message_arrive_byte_identical(
    server: AnthropicServer, model: AnthropicModel
) -> None:
    request = user(
        TextPart("What is in these?"),
        ImagePart(Blob(PNG)),
        ImagePart(Blob(JPEG), "image/jpeg"),
        ImagePart("https://example.com/cat.webp"),
        FilePart(Blob(PDF), filename="report.pdf"),
        FilePart("https://example.com/paper.pdf", "application/pdf"),
        FilePart(Blob(b"plain notes\n"), "text/plain", "notes.txt"),
    )

    response = await model.generate(request)

    assert response.content == "Seen."
    [sent] = server.received
    assert sent.refused is None
    assert sent.media == [
        ("image/png", PNG),
        ("image/jpeg", JPEG),
        ("application/pdf", PDF),
        ("text/plain", b"plain notes\n"),
    ]
    blocks = sent.body["messages"][0]["content"]
    assert [b["type"] for b in blocks] == ["text", "image", "image", "image", *["document"] * 3]
    assert blocks[3]["source"] == {"type": "url", "url": "https://example.com/cat.webp"}
    assert blocks[4]["title"] == "report.pdf"
    assert blocks[5]["source"] == {"type": "url", "url": "https://example.com/paper.pdf"}


async def test_tool_results_carry_images_and_documents(
    server: AnthropicServer, model: AnthropicModel
) -> None:
    shot = ImagePart(Blob(PNG))
    request = ModelRequest(
        messages=[
            UserMessage("Take a screenshot."),
            AssistantMessage(tool_calls=[ToolCall("toolu_1", "screenshot", {})]),
            ToolMessage("toolu_1", "screenshot", "Here it is.", parts=[shot, FilePart(Blob(PDF))]),
        ]
    )

    await model.generate(request)

    [sent] = server.received
    assert sent.refused is None
    [result] = sent.body["messages"][2]["content"]
    assert result["type"] == "tool_result"
    assert [b["type"] for b in result["content"]] == ["text", "image", "document"]
    assert result["content"][0]["text"] == "Here it is."
    assert sent.media == [("image/png", PNG), ("application/pdf", PDF)]


async def test_a_system_message_image_goes_user_side(
    server: AnthropicServer, model: AnthropicModel
) -> None:
    request = ModelRequest(
        messages=[
            SystemMessage([TextPart("Use this logo."), ImagePart(Blob(PNG))]),
            UserMessage("Hi"),
        ],
        system_prompt="Be brief.",
    )

    await model.generate(request)

    [sent] = server.received
    assert sent.refused is None
    assert sent.body["system"] == [
        {"type": "text", "text": "Be brief."},
        {"type": "text", "text": "Use this logo."},
    ]
    [turn] = sent.body["messages"]
    assert turn["role"] == "user"
    assert [b["type"] for b in turn["content"]] == ["image", "text"]
    assert sent.media == [("image/png", PNG)]


def test_base64_is_encoded_once_per_blob_not_per_request() -> None:
    blob = Blob(PNG)
    request = user(ImagePart(blob))

    first, _ = to_anthropic_request(request, model="m")
    second, _ = to_anthropic_request(request, model="m")

    def sent_data(params: Any) -> str:
        data: str = params["messages"][0]["content"][0]["source"]["data"]
        return data

    assert sent_data(first) is sent_data(second) is blob.base64()


# --- hostile content: refused before any request ---------------------------------------------


async def test_a_40_mb_image_is_refused_before_sending(
    server: AnthropicServer, model: AnthropicModel
) -> None:
    huge = ImagePart(Blob(b"\x89PNG\r\n\x1a\n" + bytes(40 * 1024 * 1024)))

    with pytest.raises(ContentError, match="5 MiB"):
        await model.generate(user(huge))

    assert server.received == []


async def test_a_png_that_is_not_a_png_is_refused_before_sending(
    server: AnthropicServer, model: AnthropicModel
) -> None:
    with pytest.raises(ContentError, match="not image/png"):
        ImagePart(Blob(b"GIF89a" + bytes(100)), "image/png")
    forged = ImagePart(Blob(PNG))
    forged.source = Blob(b"<html>not an image</html>")  # past the part's own check

    with pytest.raises(ContentError, match="not image/png"):
        await model.generate(user(forged))

    assert server.received == []


async def test_500_images_in_one_message_are_refused_before_sending(
    server: AnthropicServer, model: AnthropicModel
) -> None:
    image = ImagePart(Blob(PNG))

    with pytest.raises(ContentError, match=f"more than {MAX_IMAGES} images"):
        await model.generate(user(*[image] * 500))

    assert server.received == []


async def test_images_are_counted_across_the_whole_request(
    server: AnthropicServer, model: AnthropicModel
) -> None:
    image = ImagePart(Blob(PNG))
    request = ModelRequest(
        messages=[
            UserMessage([image] * 60),
            AssistantMessage(tool_calls=[ToolCall("toolu_1", "look", {})]),
            ToolMessage("toolu_1", "look", "more", parts=[image] * 41),
        ]
    )

    with pytest.raises(ContentError, match="100 images"):
        await model.generate(request)

    assert server.received == []


@pytest.mark.parametrize(
    ("part", "message"),
    [
        (FilePart(Blob(b"RIFF....WAVE"), "audio/wav"), "not 'audio/wav'"),
        (FilePart("https://example.com/notes.txt", "text/plain"), "PDF URLs only"),
        (FilePart(Blob(b"\xff\xfe\x00bad"), "text/plain"), "not UTF-8"),
        (FilePart(Blob(b"%PDF-1.7\n" + b"<< /Type /Page >>\n" * 101)), "100 pages"),
    ],
)
async def test_documents_the_api_refuses_are_content_errors_before_sending(
    server: AnthropicServer, model: AnthropicModel, part: FilePart, message: str
) -> None:
    with pytest.raises(ContentError, match=message):
        await model.generate(user(TextPart("Read this."), part))

    assert server.received == []


def test_pdf_pages_are_counted_from_page_objects_or_the_page_tree() -> None:
    assert count_pdf_pages(PDF) == 3
    tree = b"%PDF-1.7\n1 0 obj << /Type /Pages /Kids [2 0 R] /Count 250 >> endobj\n"
    assert count_pdf_pages(tree) == 250  # page objects hidden in compressed streams
    many = b"%PDF-1.7\n" + b"<< /Type /Page >>\n" * 10_000
    assert count_pdf_pages(many, limit=100) == 101  # stops once over the limit
