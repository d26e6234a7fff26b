"""Images in OpenAI requests: what a 1 MB image (or 100 small ones) in the thread adds to
building one request body, no network.

Times :meth:`OpenAIResponsesModel.request_body` (limits check + Responses mapping) and
:meth:`OpenAIChatModel.request_body` on a 200-message thread: text only, with one 1 MB PNG, and
with 100 PNGs of 10 KB. The blob's base64 is encoded once (cached on the :class:`Blob`), so what
an image adds per request is building its data URL string (one copy of the base64 text), not
an encode. Configurations are interleaved round by round; "added" is the median of the
paired differences with the text-only thread of the same round, in microseconds.

    .venv/bin/python bench/openai_parts.py [--runs 15]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

from plait.messages import (
    AssistantMessage,
    Blob,
    ImagePart,
    Message,
    TextPart,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from plait.models.base import ModelRequest
from plait.models.openai import OpenAIChatModel
from plait.models.openai_responses import OpenAIResponsesModel


def png(size: int) -> ImagePart:
    return ImagePart(Blob(b"\x89PNG\r\n\x1a\n" + os.urandom(size - 8)))


def thread(images: list[ImagePart]) -> ModelRequest:
    messages: list[Message] = [UserMessage([TextPart("Look at these."), *images])]
    for i in range(99):
        call = ToolCall(f"c{i}", "read_file", {"path": f"f{i}.txt"})
        messages.append(AssistantMessage("Reading.", tool_calls=[call]))
        messages.append(ToolMessage(f"c{i}", "read_file", "line\n" * 20))
    return ModelRequest(messages=messages, system_prompt="You are terse.")


def timed_us(build: Callable[[ModelRequest], Any], request: ModelRequest) -> float:
    start = time.perf_counter_ns()
    build(request)
    return (time.perf_counter_ns() - start) / 1000


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    runs = parser.parse_args().runs
    models = {
        "Responses": OpenAIResponsesModel("gpt-5-mini", api_key="sk-bench"),
        "Chat": OpenAIChatModel("gpt-4.1-mini", api_key="sk-bench"),
    }
    cases = {
        "text only": thread([]),
        "one 1 MB image": thread([png(1024 * 1024)]),
        "100 images of 10 KB": thread([png(10 * 1024) for _ in range(100)]),
    }
    times: dict[tuple[str, str], list[float]] = {(m, c): [] for m in models for c in cases}
    added: dict[tuple[str, str], list[float]] = {(m, c): [] for m in models for c in cases}
    for model in models.values():  # warm: each blob's base64 is computed here, once
        for request in cases.values():
            model.request_body(request)
    for _ in range(runs):  # interleaved round by round; added cost paired within a round
        for m, model in models.items():
            text = timed_us(model.request_body, cases["text only"])
            for c, request in cases.items():
                took = text if c == "text only" else timed_us(model.request_body, request)
                times[m, c].append(took)
                added[m, c].append(took - text)
    print(f"{'200-message thread':<22}" + "".join(f"{m + ' µs':>14}{'added':>9}" for m in models))
    for c in cases:
        row = "".join(
            f"{statistics.median(times[m, c]):>14.1f}{statistics.median(added[m, c]):>9.1f}"
            for m in models
        )
        print(f"{c:<22}{row}")
    for model in models.values():
        await model.aclose()


if __name__ == "__main__":
    asyncio.run(main())
