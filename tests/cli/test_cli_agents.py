"""The agent ``plait run``/``chat`` assemble, in each skills mode, with a scripted model."""

from __future__ import annotations

from pathlib import Path

import pytest

from plait import ScriptedModel, ToolCall, ToolMessage
from plait.cli.agents import AgentOptions, Mode, NoProviderConfigured, build_agent
from plait.cli.config import Settings
from plait.cli.demo import bundled_skills
from plait.cli.options import model_spec


async def test_disclosure_mode_agent_shows_the_catalog_and_reads_skills(tmp_path: Path) -> None:
    model = ScriptedModel(["ok"])
    options = AgentOptions(model=model, skills=[bundled_skills()], store=tmp_path / "t.sqlite3")
    agent, closers = await build_agent(options)
    await agent.run("hi", thread_id="t")
    assert "**csv-insights**" in model.requests[0].system_prompt
    assert "read_file" in [t.name for t in model.requests[0].tools]
    # drain the history offload, close the workspace's sandbox, the model, the results db and
    # the store
    assert len(closers) == 5
    for close in closers:
        await close()
    assert (tmp_path / "t.sqlite3").exists()  # the blob backend opens on first write


async def test_managed_mode_agent_loads_a_skill_and_closes_the_manager(tmp_path: Path) -> None:
    model = ScriptedModel([ToolCall("c1", "load_skill", {"skill": "csv-insights"}), "loaded"])
    options = AgentOptions(
        model=model, skills=[bundled_skills()], mode=Mode.MANAGED, store=tmp_path / "t.sqlite3"
    )
    agent, closers = await build_agent(options)
    result = await agent.run("load it", thread_id="t")
    loaded = [m for m in result.new_messages if isinstance(m, ToolMessage)]
    assert not loaded[0].is_error and "csv-insights" in loaded[0].text
    assert "load_skill" in [t.name for t in model.requests[0].tools]
    assert len(closers) == 6  # + close the skill manager
    for close in closers:
        await close()


def test_model_spec_without_any_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "PLAIT_MODEL"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(NoProviderConfigured, match="OPENAI_API_KEY or ANTHROPIC_API_KEY"):
        model_spec(Settings())


async def test_a_failed_build_closes_what_it_had_opened(tmp_path: Path) -> None:
    # Before: an agent that could not be built (a bad middleware list) left the stores, the
    # skill manager and the leading middleware open.
    from plait import Middleware
    from plait.errors import ConfigurationError
    from plait.middleware.ordering import Placement

    class Recorder(Middleware):
        closed = False

        async def aclose(self) -> None:
            self.closed = True

    class NeedsMissing(Middleware):
        placement = Placement(requires=("NoSuchMiddleware",))

    leading = Recorder()
    options = AgentOptions(
        model=ScriptedModel(["ok"]),
        skills=[bundled_skills()],
        mode=Mode.MANAGED,
        store=tmp_path / "t.sqlite3",
        leading_middleware=[leading],
        extra_middleware=[NeedsMissing()],
    )
    with pytest.raises(ConfigurationError):
        await build_agent(options)
    assert leading.closed
