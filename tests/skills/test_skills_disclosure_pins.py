"""Disclosure mode's pinned skills: shape, order, persistence, errors."""

from __future__ import annotations

import pytest

from plait import (
    Agent,
    ConfigurationError,
    ScriptedModel,
    SystemMessage,
    ToolCall,
    ToolContext,
    TurnContext,
    UserMessage,
    tool,
)
from plait.middleware import Middleware, Next
from plait.skills import MemorySource, PinnedSkillNotFound, SkillPinned, SkillsMiddleware


def md(name: str, body: str, extra: str = "") -> str:
    return f"---\nname: {name}\ndescription: The {name} skill.\n{extra}---\n\n{body}\n\n"


def source() -> MemorySource:
    return MemorySource(
        {
            "crm": {"SKILL.md": md("crm", "File it.")},
            "style": {"SKILL.md": md("style", "Be terse & <clear>.")},
            "admin": {"SKILL.md": md("admin", "Admin only.", "disable-model-invocation: true\n")},
        }
    )


def pinned(message: object) -> str | None:
    if isinstance(message, UserMessage) and message.metadata.get("source") == "pinned_skill":
        skill = message.metadata["skill"]
        assert isinstance(skill, dict)
        name = skill["name"]
        assert isinstance(name, str)
        return name
    return None


async def test_unknown_pin_fails_the_call_before_anything_is_pinned() -> None:
    model = ScriptedModel(["never"])
    agent = Agent(model, middleware=[SkillsMiddleware(sources=[source()])])
    with pytest.raises(PinnedSkillNotFound) as info:
        await agent.run("go", thread_id="t", state={"pinned_skills": ["crm", "ghost"]})
    assert str(info.value).startswith(
        "Skill 'ghost' not found in the thread's skills (pinned_skills). "
        "Known skills: admin, crm, style."
    )
    assert model.requests == []
    stored = await agent.store.load("t")
    assert [pinned(m) for m in stored.messages] == [None]  # all or nothing
    # the failed pin is consumed, not stuck to the thread: the next run works
    assert "pinned_skills" not in stored.state
    agent.model = ScriptedModel(["fine"])
    assert (await agent.run("again", thread_id="t")).output == "fine"


async def test_pins_dedupe_keep_order_escape_attributes_and_hidden_skills_can_be_pinned() -> None:
    model = ScriptedModel(["ok"])
    agent = Agent(model, middleware=[SkillsMiddleware(sources=[source()])])
    result = await agent.run("go", state={"pinned_skills": ["style", "admin", "style"]})
    sent = model.requests[0].messages
    assert [pinned(m) for m in sent] == [None, "style", "admin"]
    assert sent[1].text == (
        '<skill name="style" path="/skills/style/SKILL.md">\nBe terse & <clear>.\n</skill>'
    )
    assert "admin" not in model.requests[0].system_prompt  # hidden from the catalog, pinnable
    events = [(e.name, e.path) for e in result.events if isinstance(e, SkillPinned)]
    assert events == [("style", "/skills/style/SKILL.md"), ("admin", "/skills/admin/SKILL.md")]


async def test_a_single_name_is_accepted_an_empty_list_is_consumed_other_values_refused() -> None:
    model = ScriptedModel(["one", "two"])
    agent = Agent(model, middleware=[SkillsMiddleware(sources=[source()])])
    await agent.run("go", thread_id="t", state={"pinned_skills": "crm"})
    assert [pinned(m) for m in model.requests[0].messages] == [None, "crm"]
    await agent.run("go", thread_id="t", state={"pinned_skills": []})
    assert "pinned_skills" not in (await agent.store.load("t")).state
    with pytest.raises(ConfigurationError, match="must be a list of skill names"):
        await agent.run("go", thread_id="t", state={"pinned_skills": [1]})


async def test_a_tool_can_pin_mid_run_and_the_next_model_call_gets_the_skill() -> None:
    @tool
    def use_skill(name: str, ctx: ToolContext) -> str:
        """Ask for a skill to be pinned."""
        ctx.state["pinned_skills"] = [name]
        return "pinned"

    model = ScriptedModel([ToolCall("c1", "use_skill", {"name": "crm"}), "done"])
    agent = Agent(model, tools=[use_skill], middleware=[SkillsMiddleware(sources=[source()])])
    await agent.run("go", thread_id="t")
    assert [m.role for m in model.requests[1].messages] == ["user", "assistant", "tool", "user"]
    assert pinned(model.requests[1].messages[-1]) == "crm"
    stored = await agent.store.load("t")
    assert [m.role for m in stored.messages] == ["user", "assistant", "tool", "user", "assistant"]
    assert pinned(stored.messages[3]) == "crm"


async def test_pins_go_before_projected_messages_and_pinning_again_adds_a_copy() -> None:
    class Project(Middleware):
        async def turn_input(self, ctx: TurnContext, next: Next) -> None:
            ctx.ephemeral.append(SystemMessage("projected"))
            await next()

    model = ScriptedModel(["one", "two"])
    agent = Agent(model, middleware=[Project(), SkillsMiddleware(sources=[source()])])
    await agent.run("go", thread_id="t", state={"pinned_skills": ["crm"]})
    assert [m.text for m in model.requests[0].messages][2] == "projected"
    assert pinned(model.requests[0].messages[1]) == "crm"
    await agent.run("go", thread_id="t", state={"pinned_skills": ["crm"]})
    roles = [pinned(m) for m in model.requests[1].messages]
    assert roles == [None, "crm", None, None, "crm", None]


def test_a_bad_pinned_skills_value_is_quoted_within_a_bound() -> None:
    from plait.skills.disclosure.pins import pinned_names

    with pytest.raises(ConfigurationError, match="must be a list of skill names") as caught:
        pinned_names(["x" * 1000] * 10_000 + [1])
    assert len(str(caught.value)) < 500


async def test_a_pin_survives_a_failed_model_call_and_is_made_on_the_next_run() -> None:
    # Before: the pin was consumed before the model call; when that call failed, the pinned
    # message was lost with the dispatch and the state saved without pinned_skills: the
    # user's pin vanished without a word.
    from plait import FunctionModel, ModelRequest
    from plait.errors import ProviderError
    from plait.stores.memory import MemoryThreadStore

    requests: list[ModelRequest] = []

    def flaky(request: ModelRequest) -> str:
        requests.append(request)
        if len(requests) == 1:
            raise ProviderError("server down", provider="test", status=503)
        return "done"

    store = MemoryThreadStore()
    agent = Agent(FunctionModel(flaky), middleware=[SkillsMiddleware([source()])], store=store)
    with pytest.raises(ProviderError):
        await agent.run("go", thread_id="t", state={"pinned_skills": ["crm"]})
    assert (await store.load("t")).state["pinned_skills"] == ["crm"]
    await agent.run("again", thread_id="t")
    assert [pinned(m) for m in requests[1].messages if pinned(m)] == ["crm"]
    after = await store.load("t")
    assert "pinned_skills" not in after.state
    assert [pinned(m) for m in after.messages if pinned(m)] == ["crm"]
