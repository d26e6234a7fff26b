"""``Agent.aclose()`` / ``async with Agent(...)``: the agent closes what it created, not what it
was given."""

from __future__ import annotations

from pathlib import Path

from plait import Agent, ScriptedModel
from plait.models.openai import OpenAIChatModel
from plait.stores.memory import MemoryThreadStore
from plait.stores.sqlite import SQLiteThreadStore


async def test_async_with_closes_the_model_it_resolved_from_a_spec_string() -> None:
    async with Agent("openai-compatible:m@http://127.0.0.1:9/v1") as agent:
        model = agent.model
        assert isinstance(model, OpenAIChatModel)
        client = model._client
        assert not client.is_closed()
    assert client.is_closed()


async def test_a_model_and_store_passed_in_stay_open_and_usable(tmp_path: Path) -> None:
    store = SQLiteThreadStore(tmp_path / "t.db")
    model = ScriptedModel(["one", "two"])
    async with Agent(model, store=store) as agent:
        await agent.run("hi", thread_id="t")
    # Still the caller's: a second agent on the same objects runs and reads the first turn.
    result = await Agent(model, store=store).run("again", thread_id="t")
    assert result.output == "two"
    assert len((await store.load("t")).messages) == 4
    await store.aclose()


async def test_aclose_is_idempotent_and_the_default_store_is_owned() -> None:
    agent = Agent(ScriptedModel(["ok"]))
    assert isinstance(agent.store, MemoryThreadStore)
    assert agent._owned == [agent.store]
    await agent.aclose()
    await agent.aclose()
    assert agent._owned == []
