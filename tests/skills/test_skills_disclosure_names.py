"""Disclosure mode past its budget: the names tier after the described skills (issue 17)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plait import Agent, ScriptedModel, ToolCall
from plait.errors import ConfigurationError
from plait.messages import UserMessage
from plait.skills import MemorySource, SkillEntry, SkillsMiddleware
from plait.skills.catalog import SkillCatalog
from plait.skills.disclosure.listing import RankedListing
from plait.skills.disclosure.snapshot import NAMES_INTRO, SkillSnapshot, take_snapshot
from plait.skills.ranking import LexicalRanker
from plait.skills.render import PromptFormat, markdown_line

FILLER = " ".join(["Keeps the shared workspace tidy and the weekly chores on schedule."] * 3)


def md(name: str, description: str) -> str:
    return f"---\nname: {name}\ndescription: {description}\n---\nBody.\n"


def catalog() -> MemorySource:
    """100 filler skills with long descriptions, then 20 zebra skills catalog order puts last."""
    skills = {f"chore-{i:03d}": {"SKILL.md": md(f"chore-{i:03d}", FILLER)} for i in range(100)}
    for i in range(20):
        name = f"zebra-{i:02d}"
        text = f"Feeds and grooms zebras in enclosure {i} of the zoo, with the keeper's notes."
        skills[name] = {"SKILL.md": md(name, text)}
    return MemorySource(skills)


def described(prompt: str) -> list[str]:
    return [line.split("**")[1] for line in prompt.splitlines() if line.startswith("- **")]


def named(prompt: str) -> list[str]:
    intro = f"- {NAMES_INTRO}: "
    lines = [line for line in prompt.splitlines() if line.startswith(intro)]
    return lines[0][len(intro) :].split(", ") if lines else []


def more(prompt: str) -> int:
    last = prompt.splitlines()[-1]
    return int(last.split()[1][1:]) if last.startswith("- (") else 0


async def prompt_for(request: str, **options: object) -> str:
    model = ScriptedModel(["ok"])
    skills = SkillsMiddleware([catalog()], budget=3_000, instructions=None, **options)  # type: ignore[arg-type]
    await Agent(model, middleware=[skills]).run(request)
    return model.requests[0].system_prompt


async def test_the_next_ranked_skills_are_named_without_descriptions_within_the_budget() -> None:
    prompt = await prompt_for("my zebras need feeding and grooming")
    shown, names = described(prompt), named(prompt)
    assert len(prompt) <= 3_000
    assert shown and all(name.startswith("zebra-") for name in shown)
    zebras = [n for n in names if n.startswith("zebra-")]
    assert sorted(shown + zebras) == [f"zebra-{i:02d}" for i in range(20)]  # every one listed
    assert names[: len(zebras)] == zebras  # ranked ones first, then catalog order
    assert names[len(zebras)] == "chore-000"
    assert more(prompt) == 120 - len(shown) - len(names)  # neither described nor named
    assert f"**{names[0]}**" not in prompt  # named, not described
    assert await prompt_for("my zebras need feeding and grooming") == prompt  # deterministic


async def test_names_share_zero_turns_the_tier_off() -> None:
    with_names = await prompt_for("my zebras need feeding and grooming")
    without = await prompt_for("my zebras need feeding and grooming", names_share=0)
    assert named(without) == [] and NAMES_INTRO not in without
    assert len(described(without)) > len(described(with_names))
    assert more(without) == 120 - len(described(without))


async def test_kept_skills_are_described_even_in_the_names_share() -> None:
    kept = [f"chore-{i:03d}" for i in range(10)]  # about 2,500 characters with descriptions
    prompt = await prompt_for("my zebras need feeding and grooming", always_listed=kept)
    assert described(prompt) == kept  # past 3/4 of the budget, yet described
    assert named(prompt)[0] == "zebra-00" and len(prompt) <= 3_000


async def test_nothing_relevant_names_the_next_skills_in_catalog_order() -> None:
    prompt = await prompt_for("hello there")
    assert named(prompt)[0] == f"chore-{len(described(prompt)):03d}"
    assert more(prompt) == 120 - len(described(prompt)) - len(named(prompt))


async def test_the_names_tier_in_xml_is_one_escaped_element() -> None:
    prompt = await prompt_for("my zebras need feeding", format=PromptFormat.XML)
    tier = [line for line in prompt.splitlines() if line.startswith("<skill_names>")]
    assert len(tier) == 1 and tier[0].endswith("</skill_names>")
    assert "(search_skills with a name gives its description and path): zebra-" in tier[0]
    assert len(prompt) <= 3_000 and prompt.endswith("</more_skills>\n</available_skills>")


class FirstLetterRanker:
    """A toy ranker: skills whose name starts with the query's first letter, in catalog order."""

    def __init__(self) -> None:
        self.entries: list[SkillEntry] = []

    def update(self, entries: Sequence[SkillEntry]) -> None:
        self.entries = list(entries)

    def rank(self, query: str, limit: int) -> list[SkillEntry]:
        first = query.strip()[:1].lower()
        return [e for e in self.entries if first and e.name.startswith(first)][:limit]


@pytest.mark.parametrize(
    ("query", "found"),
    [("zebra-13", ["zebra-13", "zebra-00", "zebra-01"]), (' "zebra-13" ', ["zebra-13"])],
)
async def test_search_skills_with_a_named_skill_puts_that_skill_first(
    query: str, found: list[str]
) -> None:
    call = ToolCall("c1", "search_skills", {"query": query, "limit": 3})
    model = ScriptedModel([call, "ok"])
    ranker = FirstLetterRanker()  # ranks zebra-00, zebra-01, ... first
    skills = SkillsMiddleware([catalog()], budget=3_000, instructions=None, ranker=ranker)
    await Agent(model, middleware=[skills]).run("my zebras need feeding")
    lines = model.requests[1].messages[-1].text.splitlines()
    assert [line.split("**")[1] for line in lines[1:]] == found  # (the toy ranks '"' nowhere)
    assert lines[1].endswith("path: /skills/zebra-13/SKILL.md")


@pytest.mark.parametrize("share", [-0.1, 1, 1.5, float("nan")])
def test_a_names_share_outside_zero_to_one_is_a_configuration_error(share: float) -> None:
    with pytest.raises(ConfigurationError, match="0 <= names_share < 1"):
        SkillsMiddleware([catalog()], names_share=share)


def _snapshot(budget: int, share: float) -> SkillSnapshot:
    skills = SkillCatalog([catalog()])
    asyncio.run(skills.load())
    return take_snapshot(
        skills, format=PromptFormat.MARKDOWN, budget=budget, instructions=None, names_share=share
    )


_WORDS = ["zebras", "feeding", "grooming", "keeper", "chores", "weekly", "tidy", "zoo", "hello"]


@settings(max_examples=60, deadline=None)
@given(
    budget=st.integers(300, 8_000),
    share=st.sampled_from([0.0, 0.1, 0.25, 0.5, 0.9]),
    kept=st.lists(st.integers(0, 119), max_size=12, unique=True),
    words=st.lists(st.sampled_from(_WORDS), max_size=4),
)
def test_the_ranked_list_with_names_keeps_the_budget_the_kept_and_every_skill_once(
    budget: int, share: float, kept: list[int], words: list[str]
) -> None:
    snapshot = _snapshot(budget, share)
    names = [e.name for e in snapshot.listed]
    always = [names[i] for i in kept]
    listing = RankedListing(LexicalRanker(), always_listed=always)
    messages = [UserMessage(" ".join(words))]

    def render() -> str:
        return listing.render(
            snapshot,
            messages,
            (),
            format=PromptFormat.MARKDOWN,
            budget=budget,
            instructions=None,
            names_share=share,
        )

    text = render()
    assert text == render()  # deterministic
    shown, tier = described(text), named(text)
    if shown or tier:
        assert len(text) <= budget
    assert len(set(shown + tier)) == len(shown) + len(tier)  # every skill at most once
    assert more(text) == len(names) - len(shown) - len(tier)
    assert shown[: len(always)] == always[: len(shown)]  # kept first, in their order
    fits = sum(len(markdown_line(snapshot.by_name[n])) + 1 for n in always) + 100
    if fits <= budget:  # the kept ones fit the whole budget: all described, whatever the share
        assert shown[: len(always)] == always
