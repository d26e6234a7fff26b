"""OpenAIResponsesModel's images and files: what reaches the server (byte-identical), and what
OpenAI's limits refuse before any request is sent (the hostile set), against the strict local
:class:`ResponsesServer` through the official SDK."""

from __future__ import annotations

import base64
import os
from collections.abc import AsyncIterator, Iterator
from typing import Any

import openai
import pytest
from responses_server import ResponsesServer, decode_data_url

from plait.errors import ContentError
from plait.messages import (
    Blob,
    FilePart,
    ImagePart,
    Message,
    TextPart,
    ToolDefinition,
    ToolMessage,
    UserMessage,
)
from plait.models import OpenAIResponsesModel
from plait.models.base import ModelRequest, ModelResponse, collect_stream

MB = 1024 * 1024
PNG = b"\x89PNG\r\n\x1a\n" + os.urandom(2048)
JPEG = b"\xff\xd8\xff\xe0" + os.urandom(2048)
PDF = b"%PDF-1.7\n" + os.urandom(4096)
GIF_FRAME = b"!\xf9\x04\x01\x00\x00\x00\x00,\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00"
GIF = b"GIF89a\x01\x00\x01\x00\x80\x00\x00\xff\xff\xff\x00\x00\x00" + GIF_FRAME + b";"
ANIMATED_GIF = GIF[:-1] + GIF_FRAME + b";"
ADD = ToolDefinition("add", "Add two integers.", {"type": "object", "properties": {}})


@pytest.fixture
def server() -> Iterator[ResponsesServer]:
    with ResponsesServer() as wire:
        yield wire


@pytest.fixture
async def model(server: ResponsesServer) -> AsyncIterator[OpenAIResponsesModel]:
    adapter = OpenAIResponsesModel("gpt-5-mini", api_key="sk-test", base_url=server.url)
    yield adapter
    await adapter.aclose()


async def call(model: OpenAIResponsesModel, messages: list[Message], stream: bool) -> ModelResponse:
    request = ModelRequest(messages=messages, tools=[ADD])
    if stream:
        return await collect_stream(model.stream(request))
    return await model.generate(request)


@pytest.mark.parametrize("stream", [False, True], ids=["generate", "stream"])
async def test_images_and_files_reach_the_server_byte_identical(
    server: ResponsesServer, model: OpenAIResponsesModel, stream: bool
) -> None:
    server.turn(calls=[("add", {"a": 1, "b": 2})])
    server.turn(text="A chart and a report.")
    user = UserMessage(
        [
            TextPart("What is in these?"),
            ImagePart(Blob(PNG), detail="high"),
            ImagePart("https://example.com/cat.gif", media_type="image/gif"),
            ImagePart(Blob(GIF)),
            FilePart(Blob(PDF), filename="report.pdf"),
        ]
    )
    messages: list[Message] = [user]
    response = await call(model, messages, stream)
    tool_call = response.tool_calls[0]
    messages += [
        response.to_message(),
        ToolMessage(tool_call.id, "add", "3", parts=[ImagePart(Blob(JPEG)), FilePart(Blob(PDF))]),
    ]

    await call(model, messages, stream)

    assert server.rejected == []
    items = server.received[-1]["input"]
    content = items[0]["content"]
    assert decode_data_url(content[1]["image_url"]) == PNG and content[1]["detail"] == "high"
    assert content[1]["image_url"].startswith("data:image/png;base64,")
    assert content[2]["image_url"] == "https://example.com/cat.gif"
    assert decode_data_url(content[3]["image_url"]) == GIF
    assert (
        content[4]["filename"] == "report.pdf" and decode_data_url(content[4]["file_data"]) == PDF
    )
    output = items[-1]["output"]
    assert items[-1]["type"] == "function_call_output" and items[-1]["call_id"] == tool_call.id
    assert output[0] == {"type": "input_text", "text": "3"}
    assert decode_data_url(output[1]["image_url"]) == JPEG
    assert decode_data_url(output[2]["file_data"]) == PDF


def image_message(*parts: ImagePart | FilePart) -> ModelRequest:
    return ModelRequest(messages=[UserMessage([TextPart("look"), *parts])])


@pytest.mark.parametrize("stream", [False, True], ids=["generate", "stream"])
async def test_a_40_mb_image_is_refused_before_any_request(
    server: ResponsesServer, model: OpenAIResponsesModel, stream: bool
) -> None:
    big = ImagePart(Blob(b"\x89PNG\r\n\x1a\n" + bytes(40 * MB)))

    with pytest.raises(ContentError, match="20 MB"):
        await call(model, list(image_message(big).messages), stream)

    assert server.received == []


async def test_more_than_500_images_or_50_mb_are_refused_before_any_request(
    server: ResponsesServer, model: OpenAIResponsesModel
) -> None:
    tiny = ImagePart(Blob(PNG))
    model.request_body(image_message(*[tiny] * 500))  # the limit itself is allowed

    with pytest.raises(ContentError, match=r"501 images.*at most 500"):
        await model.generate(image_message(*[tiny] * 501))
    three = [ImagePart(Blob(b"\x89PNG\r\n\x1a\n" + bytes(18 * MB))) for _ in range(3)]
    with pytest.raises(ContentError, match="50 MB"):
        await model.generate(image_message(*three))

    assert server.received == []


async def test_bytes_that_are_not_their_media_type_are_refused(
    server: ResponsesServer, model: OpenAIResponsesModel
) -> None:
    with pytest.raises(ContentError, match="not image/png"):
        ImagePart(Blob(JPEG), media_type="image/png")
    relabelled = ImagePart(Blob(JPEG))
    relabelled.media_type = "image/png"  # changed after the part was checked

    with pytest.raises(ContentError, match="not image/png"):
        await model.generate(image_message(relabelled))
    with pytest.raises(ContentError, match="non-animated GIFs"):
        await model.generate(image_message(ImagePart(Blob(ANIMATED_GIF))))
    with pytest.raises(ContentError, match="PDFs, not text/plain"):
        await model.generate(image_message(FilePart(Blob(b"notes"), "text/plain")))

    assert server.received == []


async def test_the_server_rejects_a_png_data_url_that_is_not_a_png(
    server: ResponsesServer,
) -> None:
    client = openai.AsyncOpenAI(api_key="sk-test", base_url=server.url, max_retries=0)
    bad = "data:image/png;base64," + base64.b64encode(JPEG).decode()

    image: Any = {"role": "user", "content": [{"type": "input_image", "image_url": bad}]}

    with pytest.raises(openai.BadRequestError, match="not a valid image/png"):
        await client.responses.create(model="gpt-5-mini", input=[image])
    with pytest.raises(openai.BadRequestError, match="No tool call found"):
        await client.responses.create(
            model="gpt-5-mini",
            input=[{"type": "function_call_output", "call_id": "call_x", "output": "1"}],
        )
    await client.close()
