"""Declared middleware order: pins move to their ends, constraints are checked when the agent is
built, a broken one is a ``ConfigurationError`` naming both middleware and the fix, and
``Agent.describe()`` prints the order that runs."""

from __future__ import annotations

import pytest

from plait import Agent, Middleware, ScriptedModel, TurnContext
from plait.backends import MemoryBackend
from plait.context import (
    OverflowRecoveryMiddleware,
    ResultEvictionMiddleware,
    SummarizationMiddleware,
)
from plait.errors import ConfigurationError
from plait.guards import LimitsMiddleware, RepetitionDetector, ToolCallValidator
from plait.middleware import Next
from plait.middleware.ordering import Placement, resolve_order
from plait.skills.managed import RememberLoadedSkills, allow_all, create_skill_manager
from plait.skills.managed.hooks import SkillsTurnOutput
from plait.skills.sources import MemorySource


class Plain(Middleware):
    def __init__(self, label: str) -> None:
        self.label = label

    @property
    def name(self) -> str:
        return self.label


class Outer(Plain):
    placement = Placement(position="outermost")


class Inner(Plain):
    placement = Placement(position="innermost")


class NeedsPlain(Plain):
    placement = Placement(after=("Plain",), requires=("Outer",))


def names(chain: list[Middleware]) -> list[str]:
    return [m.name for m in chain]


def test_pins_move_to_their_ends_and_keep_their_given_order() -> None:
    chain = [Plain("a"), Inner("i1"), Outer("o1"), Plain("b"), Outer("o2"), Inner("i2")]
    assert names(resolve_order(chain)) == ["o1", "o2", "a", "b", "i1", "i2"]


def test_before_after_are_checked_not_silently_reordered() -> None:
    class First(Plain):
        placement = Placement(before=("Second",))

    class Second(Plain):
        pass

    assert names(resolve_order([First("f"), Second("s")])) == ["f", "s"]
    with pytest.raises(ConfigurationError) as info:
        resolve_order([Second("s"), First("f")])
    message = str(info.value)
    assert "f must run before s" in message and "Move f ahead of s" in message


def test_a_constraint_on_an_absent_kind_is_ignored_but_requires_is_not() -> None:
    class First(Plain):
        placement = Placement(before=("Missing",))

    assert names(resolve_order([First("f")])) == ["f"]
    with pytest.raises(ConfigurationError, match="n requires a Outer in the same agent; add one"):
        resolve_order([NeedsPlain("n")])


def test_kinds_match_base_classes() -> None:
    # NeedsPlain is itself a Plain: "after Plain" is about the *other* Plain ("p").
    with pytest.raises(ConfigurationError, match="n must run after p"):
        resolve_order([Outer("o"), NeedsPlain("n"), Plain("p")])


def test_a_pin_that_breaks_a_constraint_says_it_is_pinned() -> None:
    class AfterOuter(Outer):
        placement = Placement(position="outermost", after=("Limit",))

    class Limit(Plain):
        placement = Placement(position="innermost")

    with pytest.raises(ConfigurationError, match="pinned outermost"):
        resolve_order([Limit("l"), AfterOuter("x")])


def test_summarization_listed_after_eviction_fails_when_the_agent_is_built() -> None:
    backend = MemoryBackend()
    summary = SummarizationMiddleware(1000, backend=backend)
    eviction = ResultEvictionMiddleware(backend=backend)
    with pytest.raises(ConfigurationError) as info:
        Agent(ScriptedModel([]), middleware=[eviction, summary])
    assert "SummarizationMiddleware must run before ResultEvictionMiddleware" in str(info.value)
    Agent(ScriptedModel([]), middleware=[summary, eviction])  # the documented order builds


def test_limits_and_overflow_recovery_are_pinned_first_whatever_the_list() -> None:
    backend = MemoryBackend()
    summary = SummarizationMiddleware(1000, backend=backend)
    eviction = ResultEvictionMiddleware(backend=backend)
    overflow = OverflowRecoveryMiddleware(summarization=summary, eviction=eviction)
    limits = LimitsMiddleware(model_calls_per_turn=3)
    agent = Agent(ScriptedModel([]), middleware=[summary, eviction, limits, overflow])
    assert list(agent.middleware) == [
        *list(agent.middleware)[:2],  # the default guards, pinned outermost
        limits,
        overflow,
        summary,
        eviction,
    ]
    with pytest.raises(ConfigurationError, match="must run after LimitsMiddleware"):
        Agent(ScriptedModel([]), middleware=[overflow, limits])


async def test_the_skill_manager_pins_its_turn_output_head_and_needs_remembering_first() -> None:
    manager = await create_skill_manager(sources=[MemorySource()], gate=allow_all)
    seen: list[str] = []

    class Observer(Middleware):
        async def turn_output(self, ctx: TurnContext, next: Next) -> None:
            seen.append("observer")
            await next()

    agent = Agent(
        ScriptedModel(["ok"]),
        middleware=[Observer(), RememberLoadedSkills(manager), *manager.middleware],
        default_guards=False,
    )
    head, *_ = agent.middleware
    assert isinstance(head, SkillsTurnOutput)
    with pytest.raises(ConfigurationError, match="RememberLoadedSkills must run before"):
        Agent(ScriptedModel([]), middleware=[*manager.middleware, RememberLoadedSkills(manager)])
    with pytest.raises(ConfigurationError, match="requires a SkillsTurnInput"):
        Agent(ScriptedModel([]), middleware=[RememberLoadedSkills(manager)])
    await agent.run("hi")
    assert seen == ["observer"]
    await manager.aclose()


def test_describe_prints_the_resolved_order_with_pins_and_hooks() -> None:
    agent = Agent(ScriptedModel([]), middleware=[LimitsMiddleware(model_calls_per_turn=2)])
    lines = agent.describe().splitlines()
    assert lines[0] == " 1. RepetitionDetector [outermost]: after_model_call"
    assert lines[1] == " 2. ToolCallValidator [outermost]: after_model_call"
    assert lines[2].startswith(" 3. LimitsMiddleware [outermost]: ")
    assert Agent(ScriptedModel([]), default_guards=False).describe() == "(no middleware)"
    first, second, *_ = agent.middleware
    assert isinstance(first, RepetitionDetector) and isinstance(second, ToolCallValidator)


def test_bad_items_are_typed_errors_before_the_order_is_resolved() -> None:
    with pytest.raises(TypeError, match=r"subclass plait\.Middleware"):
        Agent(ScriptedModel([]), middleware=[object()])  # type: ignore[list-item]
    with pytest.raises(ConfigurationError, match="model_hooks takes functions"):
        Agent(ScriptedModel([]), model_hooks=[42])  # type: ignore[list-item]
