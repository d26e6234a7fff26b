"""RememberLoadedSkills: a conversation that outlives its process keeps its loaded skills."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, cast

import pytest

from plait import Agent, RunResult, ScriptedModel, ToolCall
from plait.errors import ConfigurationError
from plait.models.scripted import ScriptEntry
from plait.skills import MemorySource
from plait.skills.managed import (
    RememberLoadedSkills,
    SkillRestoreFailed,
    allow_all,
    create_skill_manager,
)
from plait.skills.managed.persistence import LOADED_STATE_KEY
from plait.stores import SQLiteThreadStore

if TYPE_CHECKING:
    from plait.skills.managed.manager import SkillManager

PDF = "---\nname: pdf\ndescription: Work with PDFs. Use for PDFs.\n---\nPDF-BODY\n"
CSV = "---\nname: csv\ndescription: Work with CSVs. Use for CSVs.\n---\nCSV-BODY\n"


async def process(
    store_path: Path, script: list[ScriptEntry], skills: dict[str, str]
) -> tuple[RunResult, ScriptedModel, list[str]]:
    """One 'process': a fresh manager and agent over the same thread store."""
    source = MemorySource({name: {"SKILL.md": text} for name, text in skills.items()})
    manager = await create_skill_manager(sources=[source], gate=allow_all)
    model = ScriptedModel(script)
    store = SQLiteThreadStore(store_path)
    agent = Agent(
        model, middleware=[RememberLoadedSkills(manager), *manager.middleware], store=store
    )
    result = await agent.run("go", thread_id="t")
    loaded = manager.loaded()
    await manager.aclose()
    await store.aclose()
    return result, model, loaded


async def test_loaded_skills_are_restored_in_a_new_process(tmp_path: Path) -> None:
    db = tmp_path / "threads.sqlite3"
    skills = {"pdf": PDF, "csv": CSV}
    _, _, loaded = await process(
        db, [ToolCall("c1", "load_skill", {"skill": "pdf"}), "loaded"], skills
    )
    assert loaded == ["pdf"]
    _, model, loaded = await process(db, ["still here"], skills)
    assert loaded == ["pdf"]  # restored before the first model call
    first_request = model.requests[0]
    assert any("pdf" in m.text for m in first_request.messages if m.role == "system")
    store = SQLiteThreadStore(db)
    state = (await store.load("t")).state
    await store.aclose()
    assert state[LOADED_STATE_KEY] == ["pdf"]
    assert "PDF-BODY" not in str(state)  # names only, never a body


async def test_a_skill_that_no_longer_loads_is_reported_and_skipped(tmp_path: Path) -> None:
    db = tmp_path / "threads.sqlite3"
    await process(db, [ToolCall("c1", "load_skill", {"skill": "pdf"}), "ok"], {"pdf": PDF})
    result, _, loaded = await process(db, ["fine"], {"csv": CSV})  # pdf is gone
    assert loaded == [] and result.output == "fine"
    failed = [e for e in result.events if isinstance(e, SkillRestoreFailed)]
    assert [e.skill for e in failed] == ["pdf"]


async def test_the_restored_table_is_bounded_least_recently_used_first() -> None:
    source = MemorySource({"pdf": {"SKILL.md": PDF}})
    manager = await create_skill_manager(sources=[source], gate=allow_all)
    remember = RememberLoadedSkills(manager, max_threads=2)
    agent = Agent(
        ScriptedModel(["a", "b", "c", "d"]),
        middleware=[remember, *manager.middleware],
    )
    for thread in ("t1", "t2", "t1", "t3"):
        await agent.run("go", thread_id=thread)
    await manager.aclose()
    assert list(remember._restored) == ["t1", "t3"]  # t2 was the least recently used


def test_max_threads_below_one_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="max_threads"):
        RememberLoadedSkills(cast("SkillManager", object()), max_threads=0)
