"""Disclosure mode past its budget: the prompt lists skills chosen by relevance (issue 17)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence

import pytest

from plait import Agent, ScriptedModel, ToolCall
from plait.errors import ConfigurationError
from plait.messages import AssistantMessage, Message, ToolMessage, UserMessage
from plait.skills import (
    Code,
    DiscoveryItem,
    MemorySource,
    SkillEntry,
    SkillProblemFound,
    SkillsMiddleware,
)
from plait.skills.catalog import SkillCatalog
from plait.skills.disclosure.listing import CONTEXT_CHARS, RankedListing, turn_queries
from plait.skills.disclosure.snapshot import take_snapshot
from plait.skills.ranking import LexicalRanker
from plait.skills.render import PromptFormat


def md(name: str, description: str) -> str:
    return f"---\nname: {name}\ndescription: {description}\n---\nBody.\n"


def catalog(count: int = 200, *, flagged: bool = False) -> MemorySource:
    """``count`` filler skills, then three distinct ones that catalog order (sorted by id, as
    MemorySource lists) puts last."""
    skills = {
        f"skill-{i:04d}": {"SKILL.md": md(f"skill-{i:04d}", f"Handles chores of kind {i}.")}
        for i in range(count)
    }
    skills["zebra-care"] = {"SKILL.md": md("zebra-care", "Feeds and grooms zebras at the zoo.")}
    skills["tax-forms"] = {"SKILL.md": md("tax-forms", "Fills yearly tax returns and receipts.")}
    skills["trail-gpx"] = {"SKILL.md": md("trail-gpx", "Plots GPS tracks from hiking trips.")}
    if flagged:  # metadata.always: listed past the budget whatever the request
        text = "---\nname: uv-always\ndescription: House rules.\nmetadata:\n  always: 'true'\n---\n"
        skills["uv-always"] = {"SKILL.md": text}
    return MemorySource(skills)


def listed(prompt: str) -> list[str]:
    return [line.split("**")[1] for line in prompt.splitlines() if line.startswith("- **")]


async def test_the_newest_user_message_picks_the_skills_in_the_prompt() -> None:
    model = ScriptedModel(["ok", "ok"])
    skills = SkillsMiddleware([catalog()], budget=2_000, instructions=None)
    agent = Agent(model, middleware=[skills])
    await agent.run("my zebras need grooming", thread_id="t")
    await agent.run("help with my tax return", thread_id="t")
    first, second = (r.system_prompt for r in model.requests)
    assert len(first) <= 2_000 and len(second) <= 2_000
    assert listed(first)[0] == "zebra-care"
    assert listed(second)[0] == "tax-forms"
    assert "zebra-care" in listed(second)  # recent context comes next
    assert first.endswith(
        "not listed here. Call search_skills(query) with a few keywords to find them.)"
    )


async def test_the_list_changes_at_most_once_per_user_turn() -> None:
    search = ToolCall("c1", "search_skills", {"query": "gps hiking tracks"})
    model = ScriptedModel([search, "done", "ok", "ok"])
    agent = Agent(model, middleware=[SkillsMiddleware([catalog()], budget=2_000)])
    await agent.run("my zebras need grooming", thread_id="t")
    first, within = (r.system_prompt for r in model.requests)
    assert within is first  # same text object: the provider's prompt cache holds
    await agent.run("my zebras need grooming", thread_id="other")
    assert model.requests[2].system_prompt == first  # same input, same list
    await agent.run("gps tracks of my hiking trips", thread_id="t")
    assert model.requests[3].system_prompt != first  # the next user turn may change it


async def test_read_pinned_and_always_listed_skills_stay_in_the_list() -> None:
    read = ToolCall("r1", "read_file", {"path": "/skills/trail-gpx/SKILL.md"})
    model = ScriptedModel([read, "read it", "ok"])
    skills = SkillsMiddleware(
        [catalog(flagged=True)], budget=2_000, instructions=None, always_listed=["skill-0150"]
    )
    agent = Agent(model, middleware=[skills])
    await agent.run("show my hike", thread_id="t")
    await agent.run("now my zebras need grooming", thread_id="t")
    names = listed(model.requests[2].system_prompt)
    assert names[:4] == ["trail-gpx", "skill-0150", "uv-always", "zebra-care"]
    assert names.count("trail-gpx") == 1


async def test_nothing_relevant_keeps_catalog_order() -> None:
    model = ScriptedModel(["ok"])
    skills = SkillsMiddleware([catalog()], budget=2_000)
    await Agent(model, middleware=[skills]).run("hello there", thread_id="t")
    assert listed(model.requests[0].system_prompt)[:2] == ["skill-0000", "skill-0001"]
    assert "zebra-care" not in listed(model.requests[0].system_prompt)
    snapshot = skills.snapshot("t")
    assert snapshot is not None and model.requests[0].system_prompt.endswith(snapshot.section)


class FirstLetterRanker:
    """A toy ranker: skills whose name starts with the query's first letter, in catalog order."""

    def __init__(self) -> None:
        self.entries: list[SkillEntry] = []
        self.updates = 0

    def update(self, entries: Sequence[SkillEntry]) -> None:
        self.entries = list(entries)
        self.updates += 1

    def rank(self, query: str, limit: int) -> list[SkillEntry]:
        first = query.strip()[:1].lower()
        return [e for e in self.entries if first and e.name.startswith(first)][:limit]


async def test_a_plugged_in_ranker_chooses_the_list_and_answers_search_skills() -> None:
    ranker = FirstLetterRanker()
    model = ScriptedModel([ToolCall("c1", "search_skills", {"query": "t"}), "ok"])
    skills = SkillsMiddleware([catalog()], budget=2_000, instructions=None, ranker=ranker)
    result = await Agent(model, middleware=[skills]).run("z")
    assert listed(model.requests[0].system_prompt)[0] == "zebra-care"
    found = result.new_messages[2]
    assert isinstance(found, ToolMessage)
    assert found.text.splitlines()[1].startswith("- **tax-forms**")
    assert ranker.updates == 1


async def test_search_skills_ranks_by_relevance_best_first() -> None:
    model = ScriptedModel(
        [ToolCall("c1", "search_skills", {"query": "grooming a zebra", "limit": 2}), "ok"]
    )
    await Agent(model, middleware=[SkillsMiddleware([catalog()], budget=2_000)]).run("go")
    lines = model.requests[1].messages[-1].text.splitlines()
    assert lines[0] == "Best matches for 'grooming a zebra', best first:"
    assert lines[1].startswith("- **zebra-care**: Feeds and grooms zebras")
    assert len(lines) == 2


async def test_a_new_thread_reuses_a_recent_catalog_and_a_reset_reloads_at_once() -> None:
    source = catalog(3)
    model = ScriptedModel(["1", "2", "3"])
    skills = SkillsMiddleware([source], refresh_interval=3_600)
    agent = Agent(model, middleware=[skills])
    await agent.run("go", thread_id="a")
    source.put("new", {"SKILL.md": md("new", "Brand new.")})
    await agent.run("go", thread_id="b")  # within the interval: the shared catalog
    await agent.run("go", thread_id="b", state={"skills_metadata": None})
    assert "**new**" not in model.requests[1].system_prompt
    assert "**new**" in model.requests[2].system_prompt


async def test_a_stale_catalog_serves_new_threads_while_one_background_refresh_runs() -> None:
    source = catalog(3)
    model = ScriptedModel(["1", "2", "3", "4"])
    skills = SkillsMiddleware([source], refresh_interval=1e-9)
    agent = Agent(model, middleware=[skills])
    await agent.run("go", thread_id="a")
    source.put("new", {"SKILL.md": md("new", "Brand new.")})
    await agent.run("go", thread_id="b")  # served at once; the refresh runs behind it
    assert "**new**" not in model.requests[1].system_prompt
    assert await skills.wait_refreshed()
    await agent.run("go", thread_id="c")
    assert "**new**" in model.requests[2].system_prompt
    assert skills.refresh_error is None


async def test_a_source_failing_in_a_background_refresh_is_reported_to_the_next_thread() -> None:
    class Flaky(MemorySource):
        failing = False

        async def discover(self) -> AsyncIterator[DiscoveryItem]:
            if self.failing:
                raise OSError("disk unplugged")
            async for item in super().discover():
                yield item

    source = Flaky({"a": {"SKILL.md": md("a", "A.")}})
    skills = SkillsMiddleware([source], refresh_interval=1e-9)
    agent = Agent(ScriptedModel(["1", "2", "3"]), middleware=[skills])
    await agent.run("go", thread_id="a")
    source.failing = True
    await agent.run("go", thread_id="b")
    assert await skills.wait_refreshed()
    result = await agent.run("go", thread_id="c")
    problems = [e for e in result.events if isinstance(e, SkillProblemFound)]
    assert [p.diagnostic.code for p in problems] == [Code.SOURCE_UNAVAILABLE]
    assert "disk unplugged" in problems[0].diagnostic.message


async def test_a_problem_is_reported_once_per_process_and_again_on_a_reset() -> None:
    source = MemorySource({"ok": {"SKILL.md": md("ok", "Fine.")}, "bad": {"SKILL.md": "no"}})
    agent = Agent(ScriptedModel(["1", "2", "3"]), middleware=[SkillsMiddleware([source])])

    async def problems(thread: str, state: dict[str, object] | None = None) -> list[str | None]:
        result = await agent.run("go", thread_id=thread, state=state)
        return [e.skill for e in result.events if isinstance(e, SkillProblemFound)]

    assert await problems("a") == ["bad"]
    assert await problems("b") == []  # a new thread: already reported in this process
    assert await problems("b", {"skills_metadata": None}) == ["bad"]  # a reset reports again


async def test_refresh_interval_zero_refreshes_before_every_new_thread() -> None:
    source = catalog(3)
    model = ScriptedModel(["1", "2"])
    agent = Agent(model, middleware=[SkillsMiddleware([source], refresh_interval=0)])
    await agent.run("go", thread_id="a")
    source.put("new", {"SKILL.md": md("new", "Brand new.")})
    await agent.run("go", thread_id="b")
    assert "**new**" in model.requests[1].system_prompt


def test_a_catalog_within_its_budget_never_imports_the_ranker() -> None:
    code = (
        "import asyncio, sys\n"
        "from plait import Agent, ScriptedModel\n"
        "from plait.skills import MemorySource, SkillsMiddleware\n"
        "source = MemorySource({'a': {'SKILL.md': '---\\nname: a\\ndescription: A.\\n---\\n'}})\n"
        "agent = Agent(ScriptedModel(['ok']), middleware=[SkillsMiddleware([source])])\n"
        "asyncio.run(agent.run('go'))\n"
        "print(sorted(m for m in sys.modules if 'ranking' in m or 'snowball' in m))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_default_ranker_is_the_lexical_one() -> None:
    skills = SkillsMiddleware([catalog(1)], budget=100)
    assert isinstance(skills.ranker, LexicalRanker)


def test_turn_queries_are_the_newest_user_text_then_recent_context() -> None:
    pinned = UserMessage("pinned body", metadata={"source": "pinned_skill"})
    messages: list[Message] = [
        UserMessage("oldest"),
        UserMessage("one"),
        AssistantMessage("earlier answer"),
        UserMessage("two"),
        UserMessage("three"),
        AssistantMessage("latest answer"),
        UserMessage("newest"),
        pinned,
    ]
    assert turn_queries(messages) == ("newest", "latest answer\nthree\ntwo\none")
    assert turn_queries([]) == ("", "")
    long = UserMessage("x" * 10_000)
    newest, context = turn_queries([long, long])
    assert len(newest) == len(context) == CONTEXT_CHARS


async def test_the_order_puts_relevant_skills_first_and_keeps_every_other_once() -> None:
    skills = SkillCatalog([catalog(50, flagged=True)])
    await skills.load()
    snapshot = take_snapshot(skills, format=PromptFormat.MARKDOWN, budget=500, instructions=None)
    listing = RankedListing(LexicalRanker(), always_listed=["skill-0007"])
    order = listing.order(snapshot, [UserMessage("zebra grooming")], ())
    assert order is not None
    names = [e.name for e in order]
    assert names[:3] == ["skill-0007", "uv-always", "zebra-care"]  # always, then relevant
    assert sorted(names) == sorted(e.name for e in snapshot.listed)
    assert len(order) == len(snapshot.listed) == 54
    assert order[2].name == "zebra-care" and [e.name for e in order[:2]] == names[:2]
    assert listing.order(snapshot, [UserMessage("hello")], ()) is not None  # always-listed
    plain = SkillCatalog([catalog(50)])
    await plain.load()
    bare = take_snapshot(plain, format=PromptFormat.MARKDOWN, budget=500, instructions=None)
    assert RankedListing(LexicalRanker()).order(bare, [UserMessage("hello")], ()) is None


async def test_the_ranked_list_keeps_the_xml_format_and_its_overflow_element() -> None:
    model = ScriptedModel(["ok"])
    skills = SkillsMiddleware([catalog()], budget=2_000, format=PromptFormat.XML, instructions=None)
    await Agent(model, middleware=[skills]).run("my zebras need grooming")
    prompt = model.requests[0].system_prompt
    assert prompt.startswith("<available_skills>\n<skill>\n<name>\nzebra-care\n</name>")
    assert '<more_skills count="' in prompt and prompt.endswith("</available_skills>")
    assert len(prompt) <= 2_000


def test_a_ranker_without_the_protocol_methods_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match=r"update\(entries\) and rank\(query, limit\)"):
        SkillsMiddleware([catalog(1)], ranker=object())  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="refresh_interval >= 0"):
        SkillsMiddleware([catalog(1)], refresh_interval=-1)
    with pytest.raises(ConfigurationError, match="not one string"):
        SkillsMiddleware([catalog(1)], always_listed="pdf")


class _Slow(MemorySource):
    """A source whose discovery takes a while, so a background refresh is still running when
    the turn that started it ends."""

    async def discover(self) -> AsyncIterator[DiscoveryItem]:
        await asyncio.sleep(0.05)
        async for item in super().discover():
            yield item


def test_run_sync_turns_in_fresh_event_loops_still_pick_up_new_skills() -> None:
    source = _Slow({"a": {"SKILL.md": md("a", "A.")}})
    model = ScriptedModel(["1", "2", "3", "4"])
    skills = SkillsMiddleware([source], refresh_interval=1e-9)
    agent = Agent(model, middleware=[skills])
    agent.run_sync("go", thread_id="a")
    source.put("new", {"SKILL.md": md("new", "Brand new.")})
    agent.run_sync("go", thread_id="b")  # its loop ends before the background refresh does
    agent.run_sync("go", thread_id="c")
    assert "**new**" in model.requests[2].system_prompt


def test_a_reset_waiting_on_a_background_refresh_works_in_a_later_event_loop() -> None:
    source = _Slow({"a": {"SKILL.md": md("a", "A.")}})
    skills = SkillsMiddleware([source], refresh_interval=1e-9)
    agent = Agent(ScriptedModel([str(n) for n in range(6)]), middleware=[skills])

    async def new_thread_then_reset(thread: str) -> None:
        await agent.run("go", thread_id=thread)  # starts a background refresh (after the first)
        await agent.run("go", thread_id=thread, state={"skills_metadata": None})  # waits for it

    for thread in ("a", "b", "c"):  # each in its own event loop, as run_sync does
        asyncio.run(new_thread_then_reset(thread))
    assert skills.snapshot("c") is not None


def test_a_refresh_left_in_a_closed_event_loop_neither_blocks_nor_stales_the_catalog() -> None:
    source = _Slow({"a": {"SKILL.md": md("a", "A.")}})
    model = ScriptedModel(["1", "2", "3"])
    skills = SkillsMiddleware([source], refresh_interval=1e-9)
    agent = Agent(model, middleware=[skills])
    agent.run_sync("go", thread_id="a")
    source.put("new", {"SKILL.md": md("new", "Brand new.")})
    loop = asyncio.new_event_loop()
    loop.run_until_complete(agent.run("go", thread_id="b"))  # starts a background refresh...
    loop.run_until_complete(asyncio.sleep(0.01))  # (now inside the source's discovery)
    loop.close()  # ...that this loop, closed without cancelling it, never finishes

    async def later() -> bool:
        await agent.run("go", thread_id="c")
        return await skills.wait_refreshed(deadline=5)

    assert asyncio.run(later())
    assert "**new**" in model.requests[2].system_prompt
