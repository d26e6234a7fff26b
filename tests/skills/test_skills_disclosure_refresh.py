"""Disclosure mode's catalog freshness (``plait.skills.disclosure.refresh``): ``refresh_error``."""

from __future__ import annotations

import pytest

from plait import Agent, ScriptedModel
from plait.skills import MemorySource, SkillsMiddleware


def md(name: str) -> str:
    return f"---\nname: {name}\ndescription: Skill {name}.\n---\nBody.\n"


class Flaky(MemorySource):
    """A source whose ``id`` raises while ``failing``: an error the catalog does not turn into a
    diagnostic (a failing ``discover()`` would be one), so the refresh itself fails."""

    failing = False

    @property
    def id(self) -> str:
        if self.failing:
            raise RuntimeError("index corrupted")
        return super().id


async def failed_in_background() -> tuple[Flaky, SkillsMiddleware, Agent]:
    """A middleware whose last background refresh failed (``refresh_error`` set)."""
    source = Flaky({"a": {"SKILL.md": md("a")}})
    skills = SkillsMiddleware([source], refresh_interval=1e-9)
    agent = Agent(ScriptedModel([str(n) for n in range(5)]), middleware=[skills])
    await agent.run("go", thread_id="a")
    source.failing = True
    await agent.run("go", thread_id="b")  # starts the background refresh, which fails
    assert await skills.wait_refreshed()
    assert isinstance(skills.refresh_error, RuntimeError)
    source.failing = False
    return source, skills, agent


async def test_a_reset_that_refreshes_clears_the_background_refresh_error() -> None:
    _, skills, agent = await failed_in_background()
    skills.refresh_interval = 3_600  # no background refresh could clear it meanwhile
    await agent.run("go", thread_id="b", state={"skills_metadata": None})
    assert skills.refresh_error is None


async def test_a_strict_refresh_clears_the_background_refresh_error() -> None:
    _, skills, agent = await failed_in_background()
    skills.refresh_interval = 0
    await agent.run("go", thread_id="c")  # strict: refreshes before the call, in the turn
    assert skills.refresh_error is None
    assert skills.refresh_interval == 0


async def test_a_background_refresh_that_succeeds_clears_its_error() -> None:
    _, skills, agent = await failed_in_background()
    await agent.run("go", thread_id="c")
    assert await skills.wait_refreshed()
    assert skills.refresh_error is None


async def test_a_failing_foreground_refresh_raises_and_keeps_the_last_error() -> None:
    source, skills, agent = await failed_in_background()
    background = skills.refresh_error
    source.failing = True
    with pytest.raises(RuntimeError, match="index corrupted"):
        await agent.run("go", thread_id="b", state={"skills_metadata": None})
    assert skills.refresh_error is background
