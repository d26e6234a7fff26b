"""``plait serve`` with no target: the agent of ``plait.toml`` (a provider through its wire
server on 127.0.0.1), its turns recorded in the trace store ``plait ui`` reads."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest
from chat_completions import sse_answer
from serve_process import serve_process
from wire_server import WireServer

from plait.trace import SQLiteTraceStore
from plait.trace.access import new_token

FIXTURES = Path(__file__).parents[1] / "models" / "fixtures" / "openai"


@pytest.fixture
def wire() -> Iterator[WireServer]:
    with WireServer(FIXTURES) as server:
        yield server


def test_the_config_agent_is_served_and_traced(wire: WireServer, tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    spec = f"openai-compatible:test-model@{wire.url}/v1"
    (project / "plait.toml").write_text(f'model = "{spec}"\n', encoding="utf-8")
    wire._replies.append(sse_answer("Served from the config."))
    home = tmp_path / "home"
    env = {"PLAIT_HOME": str(home), "HOME": str(tmp_path), "OPENAI_API_KEY": "test-key"}
    with serve_process(project, token=new_token(), env=env, target=None) as served:
        sdk = openai.OpenAI(base_url=served.url + "/v1", api_key=served.token or "", max_retries=0)
        answer = sdk.chat.completions.create(
            model="plait", messages=[{"role": "user", "content": "hello"}]
        )
    assert answer.choices[0].message.content == "Served from the config."
    traces = list(home.rglob("*-traces.sqlite3"))
    assert len(traces) == 1, list(home.rglob("*"))

    async def runs() -> list[object]:
        store = SQLiteTraceStore(traces[0])
        try:
            return list(await store.runs(""))
        finally:
            await store.aclose()

    assert len(asyncio.run(runs())) == 1
