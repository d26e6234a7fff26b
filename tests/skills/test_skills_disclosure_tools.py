"""Disclosure mode's skill tools: the message scan, resolvers, registry upkeep and events."""

from __future__ import annotations

from typing import Any

import pytest

from plait import (
    Agent,
    AssistantMessage,
    ConfigurationError,
    DispatchContext,
    Message,
    ScriptedModel,
    Tool,
    ToolCall,
    ToolMessage,
    UserMessage,
    tool,
)
from plait.skills import (
    MemorySource,
    SkillsMiddleware,
    SkillToolsDisclosed,
    SkillToolsWithdrawn,
    SkillToolUnresolved,
)
from plait.skills.disclosure.scan import DisclosureScan


def tool_data(message: Message) -> Any:
    """The data of a tool result, failing the test if ``message`` is not one."""
    assert isinstance(message, ToolMessage), message
    return message.data


def md(name: str, include_tools: str = "") -> str:
    meta = f"metadata:\n  include_tools: {include_tools}\n" if include_tools else ""
    return f"---\nname: {name}\ndescription: The {name} skill.\n{meta}---\nBody of {name}.\n"


def read(call_id: str, name: str, key: str = "path") -> ToolCall:
    return ToolCall(call_id, "read_file", {key: f"/skills/{name}/SKILL.md"})


def names(request: Any) -> list[str]:
    return [t.name for t in request.tools]


@tool
def alpha() -> str:
    """Alpha."""
    return "a"


@tool
def beta() -> str:
    """Beta."""
    return "b"


# --- the scan -----------------------------------------------------------------------------------


def test_scan_counts_successful_reads_and_pins_in_first_disclosed_order() -> None:
    pin = UserMessage("<skill>", metadata={"source": "pinned_skill", "skill": {"path": "/s/p"}})
    messages: list[Message] = [
        UserMessage("go"),
        AssistantMessage(tool_calls=[read("c1", "a"), read("c2", "b", "file_path")]),
        ToolMessage("c1", "read_file", "ok"),
        ToolMessage("c2", "read_file", "boom", is_error=True),  # a failed read discloses nothing
        pin,
        AssistantMessage(
            tool_calls=[ToolCall("c3", "read_file", {"path": "//skills/./c/SKILL.md"})]
        ),
        ToolMessage("c3", "read_file", "ok"),
        AssistantMessage(tool_calls=[ToolCall("c4", "other", {"path": "/skills/d/SKILL.md"})]),
        ToolMessage("c4", "other", "ok"),  # not read_file
        AssistantMessage(tool_calls=[read("c5", "e")]),  # no result yet
    ]
    scan = DisclosureScan()
    assert scan.update(messages) == ("/skills/a/SKILL.md", "/s/p", "/skills/c/SKILL.md")


def test_scan_reads_only_new_messages_while_the_head_is_unchanged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    scanned: list[str] = []
    original = DisclosureScan._scan

    def counting(self: DisclosureScan, message: Any) -> None:
        scanned.append(message.id)
        original(self, message)

    monkeypatch.setattr(DisclosureScan, "_scan", counting)
    history: list[Any] = [UserMessage("go"), AssistantMessage(tool_calls=[read("c1", "a")])]
    history.append(ToolMessage("c1", "read_file", "ok"))
    scan = DisclosureScan()
    assert scan.update(history) == ("/skills/a/SKILL.md",)
    assert len(scanned) == 3
    history += [AssistantMessage("more"), UserMessage("again")]
    assert scan.update(history) == ("/skills/a/SKILL.md",)
    assert len(scanned) == 5  # only the two new messages
    compacted = [UserMessage("summary"), *history[3:]]  # the read is gone
    assert scan.update(compacted) == ()
    assert len(scanned) == 8  # a new head: one full pass


# --- resolvers and registry upkeep -------------------------------------------------------------


async def test_async_resolver_failures_and_unknown_names_are_events_and_stay_hidden() -> None:
    seen: list[str] = []

    async def resolver(name: str, ctx: DispatchContext) -> Tool | None:
        seen.append(name)
        if name == "broken":
            raise RuntimeError("registry offline")
        return alpha if name == "alpha" else None

    source = MemorySource({"s": {"SKILL.md": md("s", "alpha broken ghost")}})
    model = ScriptedModel([read("c1", "s"), ToolCall("c2", "alpha"), "done"])
    result = await Agent(
        model, middleware=[SkillsMiddleware(sources=[source], tools=resolver)]
    ).run("go")
    assert seen == ["alpha", "broken", "ghost"]  # once per name, not once per model call
    assert names(model.requests[1]) == ["read_file", "alpha"]
    assert names(model.requests[2]) == ["read_file", "alpha"]
    unresolved = [e for e in result.events if isinstance(e, SkillToolUnresolved)]
    assert [(e.name, e.skills, type(e.error).__name__) for e in unresolved] == [
        ("broken", ["s"], "RuntimeError"),
        ("ghost", ["s"], "NoneType"),
    ]


async def test_a_resolver_returning_something_other_than_tools_is_reported() -> None:
    def resolver(name: str, ctx: DispatchContext) -> Any:
        return ["not a tool"]

    source = MemorySource({"s": {"SKILL.md": md("s", "alpha")}})
    model = ScriptedModel([read("c1", "s"), "done"])
    result = await Agent(
        model, middleware=[SkillsMiddleware(sources=[source], tools=resolver)]
    ).run("go")
    [event] = [e for e in result.events if isinstance(e, SkillToolUnresolved)]
    assert isinstance(event.error, ConfigurationError)
    with pytest.raises(ConfigurationError, match="takes plait tools"):
        SkillsMiddleware(sources=[source], tools=["alpha"])  # type: ignore[list-item]


async def test_tools_stay_visible_across_turns_and_events_fire_once_per_change() -> None:
    source = MemorySource({"s": {"SKILL.md": md("s", "alpha beta")}})
    skills = SkillsMiddleware(sources=[source], tools=[alpha, beta])
    model = ScriptedModel([read("c1", "s"), "one", ToolCall("c2", "beta"), "two", "three"])
    agent = Agent(model, middleware=[skills])
    first = await agent.run("go", thread_id="t")
    second = await agent.run("again", thread_id="t")  # a fresh registry: tools registered again
    assert names(model.requests[2]) == ["read_file", "alpha", "beta"]
    assert tool_data(second.new_messages[2]) == "b"
    assert skills.disclosed_tools("t") == ("alpha", "beta")
    disclosed = [e.tools for e in first.events if isinstance(e, SkillToolsDisclosed)]
    assert disclosed == [["alpha", "beta"]]
    assert not [e for e in second.events if isinstance(e, SkillToolsDisclosed)]
    source.put("s", {"SKILL.md": md("s", "alpha")})  # a reload drops beta from the skill
    third = await agent.run("reload", thread_id="t", state={"skills_metadata": None})
    assert names(model.requests[4]) == ["read_file", "alpha"]
    withdrawn = [e.tools for e in third.events if isinstance(e, SkillToolsWithdrawn)]
    assert withdrawn == [["beta"]]
    stored = await agent.store.load("t")
    assert set(stored.state) == {"skills_metadata"}  # skill tools never reach the store


async def test_a_tool_listed_by_two_skills_stays_while_either_is_disclosed() -> None:
    source = MemorySource(
        {"a": {"SKILL.md": md("a", "alpha")}, "b": {"SKILL.md": md("b", "alpha")}}
    )
    model = ScriptedModel([[read("c1", "a"), read("c2", "b")], "done"])
    await Agent(model, middleware=[SkillsMiddleware(sources=[source], tools=[alpha])]).run("go")
    assert names(model.requests[1]) == ["read_file", "alpha"]


async def test_a_skill_tool_named_like_the_reader_never_replaces_it() -> None:
    @tool(name="read_file")
    def fake_read(path: str) -> str:
        """Not the reader."""
        return "fake"

    source = MemorySource({"s": {"SKILL.md": md("s", "read_file")}})
    model = ScriptedModel([read("c1", "s"), read("c2", "s"), "done"])
    skills = SkillsMiddleware(sources=[source], tools=[fake_read])
    result = await Agent(model, middleware=[skills]).run("go")
    assert names(model.requests[1]) == ["read_file"]
    assert tool_data(result.new_messages[4]) == tool_data(result.new_messages[2]) != "fake"
