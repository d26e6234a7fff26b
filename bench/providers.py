"""Provider adapter overhead: request and response mapping per call, no network.

Times the pure mapping functions the adapters use (``to_openai_request`` /
``from_openai_completion`` and their Anthropic twins) on a 200-message conversation with tool
calls and results, plus stream assembly of a 100-chunk answer. Prints the median of several
runs; the target is at most 1 ms for request + response mapping.

    .venv/bin/python bench/providers.py [--runs 9] [--check]

``--check`` exits with status 1 when a provider's total is over the target.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from anthropic.types import Message as AnthropicMessage
from anthropic.types import RawMessageStreamEvent
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from pydantic import TypeAdapter

from plait.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from plait.models.anthropic import (
    AnthropicStreamAssembler,
    from_anthropic_message,
    to_anthropic_request,
)
from plait.models.base import ModelRequest
from plait.models.openai import OpenAIStreamAssembler, from_openai_completion, to_openai_request
from plait.tools import ToolDefinition

TARGET_US = 1000.0
MESSAGES = 200
STREAM_CHUNKS = 100


def conversation(size: int = MESSAGES) -> ModelRequest:
    """A ``size``-message agent conversation: user turns, tool calls, dict and text results."""
    messages: list[Message] = [SystemMessage("Summary of earlier turns: " + "x" * 400)]
    turn = 0
    while len(messages) < size:
        turn += 1
        messages.append(UserMessage(f"Question {turn}: what changed in report-{turn}.csv?"))
        calls = [
            ToolCall(f"call_{turn}_a", "read_file", {"path": f"report-{turn}.csv", "limit": 200}),
            ToolCall(f"call_{turn}_b", "search", {"query": f"report {turn}", "top_k": 5}),
        ]
        messages.append(AssistantMessage("Let me look at the file.", tool_calls=calls))
        messages.append(ToolMessage(calls[0].id, "read_file", "a,b,c\n" + "1,2,3\n" * 40))
        messages.append(
            ToolMessage(
                calls[1].id,
                "search",
                {"hits": [{"path": f"doc-{i}.md", "score": 0.9 - i / 10} for i in range(5)]},
            )
        )
        messages.append(AssistantMessage(f"Report {turn} adds a column and 40 rows. " * 3))
    schema = {
        "type": "object",
        "properties": {"path": {"type": "string"}, "limit": {"type": "integer"}},
        "required": ["path"],
    }
    tools = [ToolDefinition(name, f"The {name} tool.", schema) for name in ("read_file", "search")]
    return ModelRequest(
        messages=messages[:size],
        tools=tools,
        system_prompt="You are a careful data analyst. " * 20,
        tool_choice="auto",
        temperature=0.2,
        max_tokens=1024,
    )


def openai_completion() -> ChatCompletion:
    return ChatCompletion.model_validate(
        {
            "id": "chatcmpl-bench",
            "object": "chat.completion",
            "created": 1750000000,
            "model": "gpt-4.1-mini",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "tool_calls",
                    "message": {
                        "role": "assistant",
                        "content": "Checking two files.",
                        "tool_calls": [
                            {
                                "id": f"call_{i}",
                                "type": "function",
                                "function": {
                                    "name": "read_file",
                                    "arguments": f'{{"path": "report-{i}.csv", "limit": 200}}',
                                },
                            }
                            for i in range(2)
                        ],
                    },
                }
            ],
            "usage": {
                "prompt_tokens": 52000,
                "completion_tokens": 60,
                "total_tokens": 52060,
                "prompt_tokens_details": {"cached_tokens": 51200},
            },
        }
    )


def anthropic_message() -> AnthropicMessage:
    return AnthropicMessage.model_validate(
        {
            "id": "msg_bench",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-6",
            "stop_reason": "tool_use",
            "content": [{"type": "text", "text": "Checking two files."}]
            + [
                {
                    "type": "tool_use",
                    "id": f"toolu_{i}",
                    "name": "read_file",
                    "input": {"path": f"report-{i}.csv", "limit": 200},
                }
                for i in range(2)
            ],
            "usage": {"input_tokens": 800, "output_tokens": 60, "cache_read_input_tokens": 51200},
        }
    )


def openai_chunks() -> list[ChatCompletionChunk]:
    base = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4.1-mini"}
    chunks = [
        {**base, "choices": [{"index": 0, "delta": {"content": f"word{i} "}}]}
        for i in range(STREAM_CHUNKS)
    ]
    chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    return [ChatCompletionChunk.model_validate(c) for c in chunks]


def anthropic_events() -> list[RawMessageStreamEvent]:
    adapter: TypeAdapter[RawMessageStreamEvent] = TypeAdapter(RawMessageStreamEvent)
    raw: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": anthropic_message().model_dump() | {"content": [], "stop_reason": None},
        },
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    ]
    raw += [
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": f"word{i} "},
        }
        for i in range(STREAM_CHUNKS)
    ]
    raw.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 9},
        }
    )
    return [adapter.validate_python(event) for event in raw]


def median_us(fn: Callable[[], object], runs: int, loops: int = 200) -> float:
    """Median over ``runs`` of the mean time per call across ``loops`` calls, in microseconds."""
    fn()
    samples = []
    for _ in range(runs):
        start = time.perf_counter_ns()
        for _ in range(loops):
            fn()
        samples.append((time.perf_counter_ns() - start) / loops / 1000)
    return statistics.median(samples)


def run_openai_stream(chunks: list[ChatCompletionChunk]) -> object:
    assembler = OpenAIStreamAssembler()
    for chunk in chunks:
        assembler.feed(chunk)
    return assembler.response()


def run_anthropic_stream(events: list[RawMessageStreamEvent]) -> object:
    assembler = AnthropicStreamAssembler()
    for event in events:
        assembler.feed(event)
    return assembler.response()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--check", action="store_true", help="exit 1 when over the target")
    args = parser.parse_args()

    request = conversation()
    completion, message = openai_completion(), anthropic_message()
    chunks, events = openai_chunks(), anthropic_events()

    rows: list[tuple[str, str, float]] = []
    totals: dict[str, float] = {}
    for provider, to_request, from_response, stream in (
        (
            "openai",
            lambda: to_openai_request(request, model="gpt-4.1-mini"),
            lambda: from_openai_completion(completion),
            lambda: run_openai_stream(chunks),
        ),
        (
            "anthropic",
            lambda: to_anthropic_request(request, model="claude-sonnet-4-6"),
            lambda: from_anthropic_message(message),
            lambda: run_anthropic_stream(events),
        ),
    ):
        request_us = median_us(to_request, args.runs)
        response_us = median_us(from_response, args.runs)
        totals[provider] = request_us + response_us
        rows += [
            (provider, f"request mapping ({MESSAGES} messages)", request_us),
            (provider, "response mapping (text + 2 tool calls)", response_us),
            (provider, "request + response (target <= 1000 us)", totals[provider]),
            (provider, f"stream assembly ({STREAM_CHUNKS} chunks)", median_us(stream, args.runs)),
        ]

    print(f"median of {args.runs} runs, microseconds per call")
    print(f"| {'provider':<9} | {'step':<40} | {'us/call':>8} |")
    print(f"|{'-' * 11}|{'-' * 42}|{'-' * 10}|")
    for provider, step, micros in rows:
        print(f"| {provider:<9} | {step:<40} | {micros:>8.1f} |")
    over = [p for p, total in totals.items() if total > TARGET_US]
    print("target met" if not over else f"OVER TARGET: {', '.join(over)}")
    return 1 if args.check and over else 0


if __name__ == "__main__":
    sys.exit(main())
