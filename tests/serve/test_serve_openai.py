"""The official ``openai`` SDK against ``plait serve``'s ``/v1/chat/completions``."""

from __future__ import annotations

import httpx
import openai
import pytest
from serve_process import ServeProcess


def client(server: ServeProcess) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url + "/v1", api_key=server.token or "none", max_retries=0)


def test_models_lists_the_agent(server: ServeProcess) -> None:
    assert [m.id for m in client(server).models.list()] == ["plait"]


def test_a_completion_answers_and_keeps_the_thread(server: ServeProcess) -> None:
    sdk = client(server)
    thread = {"X-Plait-Thread": "oai-nonstream"}
    first = sdk.chat.completions.create(
        model="plait", messages=[{"role": "user", "content": "hello"}], extra_headers=thread
    )
    assert first.choices[0].message.content == "echo: hello"
    assert first.choices[0].finish_reason == "stop"
    history = [
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": "echo: hello"},
        {"role": "user", "content": "again"},
    ]
    second = sdk.chat.completions.create(model="plait", messages=history, extra_headers=thread)  # type: ignore[arg-type]
    assert second.choices[0].message.content == "echo: again"
    stored = httpx.get(server.url + "/threads/oai-nonstream", headers=server.headers()).json()
    assert [(m["role"], m["content"]) for m in stored["messages"]] == [
        ("user", "hello"),
        ("assistant", "echo: hello"),
        ("user", "again"),
        ("assistant", "echo: again"),
    ]


def test_a_stream_arrives_in_chunks_the_sdk_reads(server: ServeProcess) -> None:
    stream = client(server).chat.completions.create(
        model="plait",
        messages=[{"role": "user", "content": "one two three"}],
        stream=True,
        user="streamer",
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "echo: one two three"
    assert len(chunks) > 3
    assert chunks[-1].choices[0].finish_reason == "stop"


def test_the_agent_tool_calls_are_hidden_by_default(server: ServeProcess) -> None:
    answer = client(server).chat.completions.create(
        model="plait", messages=[{"role": "user", "content": "add 2 3"}], user="adder"
    )
    assert answer.choices[0].message.content == "sum: 5"


def test_a_derived_thread_is_one_per_conversation_start(server: ServeProcess) -> None:
    sdk = client(server)
    first = sdk.chat.completions.with_raw_response.create(
        model="plait", messages=[{"role": "user", "content": "derive me"}]
    )
    history = [
        {"role": "user", "content": "derive me"},
        {"role": "assistant", "content": "echo: derive me"},
        {"role": "user", "content": "next"},
    ]
    second = sdk.chat.completions.with_raw_response.create(model="plait", messages=history)  # type: ignore[arg-type]
    assert first.headers["x-plait-thread"] == second.headers["x-plait-thread"]
    assert first.headers["x-plait-thread"].startswith("oai-")
    assert second.parse().choices[0].message.content == "echo: next"


def test_an_unknown_model_is_a_json_error(server: ServeProcess) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        client(server).chat.completions.create(
            model="nope", messages=[{"role": "user", "content": "hi"}]
        )
    body = caught.value.body
    assert isinstance(body, dict) and body["type"] == "model_not_found"


def stored_pairs(server: ServeProcess, thread: str) -> list[tuple[str, str]]:
    got = httpx.get(f"{server.url}/threads/{thread}", headers=server.headers()).json()
    return [(m["role"], m["content"]) for m in got["messages"]]


def test_new_messages_alone_continue_a_named_thread(server: ServeProcess) -> None:
    sdk = client(server)
    thread = {"X-Plait-Thread": "oai-one-at-a-time"}
    for text in ("one", "two"):
        sdk.chat.completions.create(
            model="plait", messages=[{"role": "user", "content": text}], extra_headers=thread
        )
    assert stored_pairs(server, "oai-one-at-a-time") == [
        ("user", "one"),
        ("assistant", "echo: one"),
        ("user", "two"),
        ("assistant", "echo: two"),
    ]


def test_a_full_history_on_a_new_thread_is_taken_whole(server: ServeProcess) -> None:
    history = [
        {"role": "system", "content": "ignored: the agent has its own prompt"},
        {"role": "user", "content": "earlier"},
        {"role": "assistant", "content": "an answer from elsewhere"},
        {"role": "user", "content": "now"},
    ]
    answer = client(server).chat.completions.create(
        model="plait",
        messages=history,  # type: ignore[arg-type]
        extra_headers={"X-Plait-Thread": "oai-imported"},
    )
    assert answer.choices[0].message.content == "echo: now"
    assert stored_pairs(server, "oai-imported") == [
        ("user", "earlier"),
        ("assistant", "an answer from elsewhere"),
        ("user", "now"),
        ("assistant", "echo: now"),
    ]


def test_a_thread_id_no_header_can_carry_comes_back_percent_encoded(
    server: ServeProcess,
) -> None:
    # A `user` outside latin-1 is a valid thread; its id goes back percent-encoded, and that
    # value sent as X-Plait-Thread names the same thread (before, the answer was a 500 after
    # the turn had run).
    sdk = client(server)
    first = sdk.chat.completions.with_raw_response.create(
        model="plait", messages=[{"role": "user", "content": "hi"}], user="用户 50%"
    )
    assert first.parse().choices[0].message.content == "echo: hi"
    header = first.headers["x-plait-thread"]
    assert header.isascii() and header.endswith(":%E7%94%A8%E6%88%B7%2050%25")
    stream = sdk.chat.completions.create(
        model="plait",
        messages=[{"role": "user", "content": "again"}],
        stream=True,
        extra_headers={"X-Plait-Thread": header},
    )
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == "echo: again"
    thread = httpx.get(f"{server.url}/threads/{header}", headers=server.headers())
    assert thread.status_code == 200
    assert [m["content"] for m in thread.json()["messages"]] == [
        "hi",
        "echo: hi",
        "again",
        "echo: again",
    ]
