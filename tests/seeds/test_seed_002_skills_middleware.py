"""Seed 002 (deepagents ``createSkillsMiddleware``): one test per paragraph, named after it.

Every test drives a real ``Agent`` with a scripted model and asserts on the exact requests the
model received (system prompt, tool list, messages) and on the persisted thread. The rest of
disclosure mode is tested in tests/skills/test_skills_disclosure_*.py.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from unittest.mock import ANY

import pytest

import plait.skills.disclosure as disclosure
from plait import (
    Agent,
    DispatchContext,
    FunctionModel,
    Message,
    Middleware,
    ModelRequest,
    ModelResponse,
    ScriptedModel,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolResolutionError,
    UserMessage,
    tool,
)
from plait.backends.memory import MemoryBackend
from plait.context import SummarizationMiddleware
from plait.models.scripted import ScriptEntry
from plait.skills import (
    BackendSource,
    FilesystemSource,
    MemorySource,
    PinnedSkillNotFound,
    SkillCatalogLoaded,
    SkillsMiddleware,
    SkillSource,
    SkillToolsWithdrawn,
)
from plait.skills.model import DiscoveryItem


def tool_data(message: Message) -> Any:
    """The data of a tool result, failing the test if ``message`` is not one."""
    assert isinstance(message, ToolMessage), message
    return message.data


def skill_md(name: str, description: str, body: str = "", *, include_tools: str = "") -> str:
    meta = f"metadata:\n  include_tools: {include_tools}\n" if include_tools else ""
    text = body or f"# {name}\n\nFollow the {name} procedure step by step."
    return f"---\nname: {name}\ndescription: {description}\n{meta}---\n{text}\n"


CRM = skill_md(
    "crm",
    "File and list customer requests. Use when a customer asks for something.",
    include_tools="create_customer_request list_customer_requests",
)
CRM_PATH = "/skills/crm/SKILL.md"
ran: list[str] = []


@tool
def create_customer_request(title: str) -> str:
    """Create a customer request."""
    ran.append(f"create:{title}")
    return f"created {title}"


@tool
def list_customer_requests() -> list[str]:
    """List open customer requests."""
    ran.append("list")
    return ["r1"]


def names(request: ModelRequest) -> list[str]:
    return [t.name for t in request.tools]


def read(call_id: str, path: str = CRM_PATH) -> ToolCall:
    return ToolCall(call_id, "read_file", {"path": path})


@pytest.fixture(autouse=True)
def _reset_ran() -> None:
    ran.clear()


# --- "Create backend-agnostic middleware for loading and exposing agent skills." -------------


async def test_backend_agnostic_middleware_loads_skills_from_any_source(tmp_path: Path) -> None:
    text = skill_md("pdf", "Fill PDF forms. Use for .pdf files.")
    folder = tmp_path / "skills" / "pdf"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(text)
    sources: list[tuple[str, SkillSource]] = [
        ("/skills/pdf/SKILL.md", MemorySource({"pdf": {"SKILL.md": text}})),
        (str(folder / "SKILL.md"), FilesystemSource(tmp_path / "skills")),
        ("/skills/pdf/SKILL.md", BackendSource(MemoryBackend({"skills/pdf/SKILL.md": text}))),
    ]
    for path, source in sources:
        model = ScriptedModel([read("c1", path), "ok"])
        agent = Agent(model, middleware=[SkillsMiddleware(sources=[source])])
        result = await agent.run("fill the form")
        line = f"- **pdf**: Fill PDF forms. Use for .pdf files. — path: {path}"
        assert line in model.requests[0].system_prompt
        assert names(model.requests[0]) == ["read_file"]
        assert tool_data(result.new_messages[2]) == text


# --- "loads skills from configurable backend sources and injects skill metadata into the
#      system prompt ... progressive disclosure" -------------------------------------------


async def test_progressive_disclosure_metadata_in_prompt_full_skill_md_read_when_needed() -> None:
    body = "# CRM\n\n" + "\n".join(f"{i}. Step {i} of filing." for i in range(1, 301))
    text = skill_md("crm", "File customer requests.", body)
    model = ScriptedModel([read("c1"), "filed"])
    agent = Agent(
        model,
        middleware=[SkillsMiddleware(sources=[MemorySource({"crm": {"SKILL.md": text}})])],
        system_prompt="You are a support agent.",
    )
    result = await agent.run("file a request", thread_id="t")
    prompt = model.requests[0].system_prompt
    assert prompt.startswith("You are a support agent.\n\n## Skills\n")
    assert prompt.endswith("- **crm**: File customer requests. — path: /skills/crm/SKILL.md")
    assert "Step 1 of filing" not in prompt
    assert tool_data(result.new_messages[2]) == text  # the whole file: all 300 steps, no cut
    assert "300. Step 300 of filing." in tool_data(model.requests[1].messages[-1])
    stored = await agent.store.load("t")
    assert [m.role for m in stored.messages] == ["user", "assistant", "tool", "assistant"]


# --- "Skills are loaded once per thread and stored in state. To pick up skills added, edited,
#      or deleted since then, set skillsMetadata to null; the next model call reloads" ------


class CountingSource(MemorySource):
    discoveries = 0

    async def discover(self) -> AsyncIterator[DiscoveryItem]:
        self.discoveries += 1
        async for item in super().discover():
            yield item


async def test_skills_loaded_once_per_thread_in_state_reset_to_none_reloads_every_source() -> None:
    style = skill_md("style", "House style.")
    source = CountingSource({"crm": {"SKILL.md": CRM}, "style": {"SKILL.md": style}})
    model = ScriptedModel(["one", "two", "three"])
    agent = Agent(model, middleware=[SkillsMiddleware(sources=[source])])
    first = await agent.run("hi", thread_id="t")
    source.put("pdf", {"SKILL.md": skill_md("pdf", "Fill PDF forms.")})  # added,
    source.put("style", {"SKILL.md": skill_md("style", "Edited style.")})  # edited,
    source.remove("crm")  # and deleted since the thread loaded
    await agent.run("again", thread_id="t")
    assert source.discoveries == 1  # once per thread: the second run did not rescan
    assert "**crm**" in model.requests[1].system_prompt
    assert "**pdf**" not in model.requests[1].system_prompt
    assert [e.reason for e in first.events if isinstance(e, SkillCatalogLoaded)] == ["first"]

    third = await agent.run("reload", thread_id="t", state={"skills_metadata": None})
    assert source.discoveries == 2
    prompt = model.requests[2].system_prompt
    assert "**pdf**" in prompt and "- **style**: Edited style." in prompt and "crm" not in prompt
    loaded = [
        (e.reason, e.added, e.removed, e.changed)
        for e in third.events
        if isinstance(e, SkillCatalogLoaded)
    ]
    assert loaded == [("reset", ["pdf"], ["crm"], ["style"])]
    state = (await agent.store.load("t")).state
    assert state == {"skills_metadata": {"count": 2, "skipped": 0, "digest": ANY}}


# --- "Loading happens in beforeModel, so the reload is served by the next model call rather
#      than the next run ... invalidate from any hook, including mid-run, from afterModel" ---


async def test_reload_in_before_model_is_served_by_next_model_call_even_from_after_model() -> None:
    source = MemorySource({"crm": {"SKILL.md": CRM}})

    class Invalidate(Middleware):
        async def after_model_call(
            self, response: ModelResponse, request: ModelRequest, ctx: DispatchContext
        ) -> ModelResponse:
            if ctx.index == 0:
                source.put("pdf", {"SKILL.md": skill_md("pdf", "Fill PDF forms.")})
                ctx.state["skills_metadata"] = None
            return response

    model = ScriptedModel([ToolCall("c1", "read_file", {"path": CRM_PATH}), "done"])
    agent = Agent(model, middleware=[Invalidate(), SkillsMiddleware(sources=[source])])
    result = await agent.run("go", thread_id="t")
    assert "**pdf**" not in model.requests[0].system_prompt
    assert "- **pdf**: Fill PDF forms. — path: /skills/pdf/SKILL.md" in (
        model.requests[1].system_prompt
    )
    reasons = [e.reason for e in result.events if isinstance(e, SkillCatalogLoaded)]
    assert reasons == ["first", "reset"]
    stored = await agent.store.load("t")
    assert stored.state["skills_metadata"]["count"] == 2


# --- "pass its name in pinnedSkills. Before the next model call, each named skill's SKILL.md,
#      without its frontmatter, is appended ... as its own HumanMessage" ------------------


async def test_pinned_skills_appended_as_own_user_messages_with_pinned_skill_metadata() -> None:
    source = MemorySource(
        {
            "write-tests": {"SKILL.md": skill_md("write-tests", "Write tests.", "Use pytest.")},
            "house-style": {"SKILL.md": skill_md("house-style", "Our style.", "Be terse.")},
        }
    )
    model = ScriptedModel(["ok"])
    agent = Agent(model, middleware=[SkillsMiddleware(sources=[source])])
    await agent.run(
        "/write-tests /house-style for auth.py",
        thread_id="t",
        state={"pinned_skills": ["write-tests", "house-style"]},
    )
    sent = model.requests[0].messages
    assert [m.role for m in sent] == ["user", "user", "user"]
    for message, (name, body, description) in zip(
        sent[1:],
        [
            ("write-tests", "Use pytest.", "Write tests."),
            ("house-style", "Be terse.", "Our style."),
        ],
        strict=True,
    ):
        path = f"/skills/{name}/SKILL.md"
        assert isinstance(message, UserMessage)
        assert message.text == f'<skill name="{name}" path="{path}">\n{body}\n</skill>'
        assert message.metadata == {
            "source": "pinned_skill",
            "skill": {"name": name, "path": path, "description": description},
        }
    stored = await agent.store.load("t")
    assert [m.text for m in stored.messages[1:3]] == [m.text for m in sent[1:]]
    assert [m.metadata for m in stored.messages[1:3]] == [m.metadata for m in sent[1:]]
    assert "pinned_skills" not in stored.state  # consumed once pinned


# --- "Pins resolve against the skills loaded for the thread, so reset skillsMetadata in the
#      same input to pin a skill added since." ---------------------------------------------


async def test_pins_resolve_against_thread_skills_reset_in_same_input_to_pin_new_skill() -> None:
    source = MemorySource({"crm": {"SKILL.md": CRM}})
    model = ScriptedModel(["one", "pinned"])
    agent = Agent(model, middleware=[SkillsMiddleware(sources=[source])])
    await agent.run("hi", thread_id="t")
    source.put("pdf", {"SKILL.md": skill_md("pdf", "Fill PDF forms.", "Use pdftk.")})
    with pytest.raises(PinnedSkillNotFound) as info:
        await agent.run("pin it", thread_id="t", state={"pinned_skills": ["pdf"]})
    assert "Skill 'pdf' not found" in str(info.value)
    assert "Known skills: crm" in str(info.value)
    assert "'skills_metadata': None" in str(info.value)

    await agent.run(
        "pin it", thread_id="t", state={"skills_metadata": None, "pinned_skills": ["pdf"]}
    )
    pinned = model.requests[1].messages[-1]
    assert pinned.text == '<skill name="pdf" path="/skills/pdf/SKILL.md">\nUse pdftk.\n</skill>'
    stored = await agent.store.load("t")
    assert "pinned_skills" not in stored.state


# --- "Skill tools: A skill can list the tools its instructions use, separated by spaces, under
#      metadata.include_tools in its SKILL.md frontmatter" ------------------------------------


async def test_skill_tools_listed_space_separated_under_metadata_include_tools() -> None:
    middleware = SkillsMiddleware(
        sources=[MemorySource({"crm": {"SKILL.md": CRM}})],
        tools=[create_customer_request, list_customer_requests],
    )
    model = ScriptedModel([read("c1"), "done"])
    await Agent(model, middleware=[middleware]).run("go", thread_id="t")
    snapshot = middleware.snapshot("t")
    assert snapshot is not None
    assert dict(snapshot.tools_by_location) == {
        CRM_PATH: ("create_customer_request", "list_customer_requests")
    }
    assert names(model.requests[0]) == ["read_file"]
    assert names(model.requests[1]) == [
        "read_file",
        "create_customer_request",
        "list_customer_requests",
    ]


# --- "Pass those tools as tools, either as an array or as a ToolNameResolver that looks them
#      up by name when a skill is read or pinned, so one name can stand for a family" ------


async def test_tools_as_array_or_resolver_called_by_name_on_read_one_name_a_family() -> None:
    calls: list[str] = []

    def resolver(name: str, ctx: DispatchContext) -> list[Any] | None:
        calls.append(name)
        if name == "crm":  # a family whose real names are only known at run time
            return [create_customer_request, list_customer_requests]
        return None

    text = skill_md("crm", "File customer requests.", include_tools="crm")
    model = ScriptedModel(["first", read("c1"), ToolCall("c2", "list_customer_requests"), "ok"])
    agent = Agent(
        model,
        middleware=[
            SkillsMiddleware(
                sources=[MemorySource({"crm": {"SKILL.md": text}})],
                tools=resolver,
            )
        ],
    )
    await agent.run("hi", thread_id="t")
    assert calls == []  # nothing read or pinned yet: the resolver is not called
    await agent.run("list requests", thread_id="t")
    assert calls == ["crm"]
    assert names(model.requests[2]) == [
        "read_file",
        "create_customer_request",
        "list_customer_requests",
    ]
    assert ran == ["list"]


# --- "The model sees a skill tool only after it reads ... or the skill is pinned, and only
#      while that read or pin stays in the conversation it is sent; compaction that drops the
#      read or pin withdraws the tool." --------------------------------------------------------


@tool
def fetch_logs() -> str:
    """Fetch the service logs."""
    return "log line\n" * 600


async def test_skill_tool_visible_only_while_read_in_context_compaction_withdraws_it() -> None:
    script: list[ScriptEntry] = [
        "nothing yet",
        read("c1"),
        ToolCall("c2", "create_customer_request", {"title": "refund"}),
        ToolCall("c3", "fetch_logs"),
        ToolCall("c4", "create_customer_request", {"title": "again"}),
        "done",
    ]
    model = ScriptedModel(script)
    summarization = SummarizationMiddleware(1_500, keep_messages=2, trigger_ratio=0.5)
    skills = SkillsMiddleware(
        sources=[MemorySource({"crm": {"SKILL.md": CRM}})],
        tools=[create_customer_request, list_customer_requests],
    )
    agent = Agent(model, tools=[fetch_logs], middleware=[summarization, skills])
    await agent.run("hello", thread_id="t")
    result = await agent.run("file a refund", thread_id="t")
    requests = model.requests
    gated = ["create_customer_request", "list_customer_requests"]
    assert names(requests[0]) == ["fetch_logs", "read_file"]  # hidden before the read
    assert names(requests[1]) == ["fetch_logs", "read_file"]
    assert names(requests[2]) == ["fetch_logs", "read_file", *gated]  # read is in context
    assert names(requests[3]) == ["fetch_logs", "read_file", *gated]
    compacted = requests[4]  # the summary replaced the read: the tools are withdrawn
    assert isinstance(compacted.messages[0], SystemMessage)
    assert not any(isinstance(m, ToolMessage) and m.name == "read_file" for m in compacted.messages)
    assert names(compacted) == ["fetch_logs", "read_file"]
    assert ran == ["create:refund"]  # the call after compaction did not run
    rejected = requests[5].messages[-1]
    assert isinstance(rejected, ToolMessage) and rejected.is_error
    assert rejected.data.startswith("Unknown tool 'create_customer_request'.")
    withdrawn = [e for e in result.events if isinstance(e, SkillToolsWithdrawn)]
    assert [e.tools for e in withdrawn] == [gated]
    stored = await agent.store.load("t")  # the store keeps the raw history, read included
    assert any(isinstance(m, ToolMessage) and m.name == "read_file" for m in stored.messages)


async def test_skill_tool_visible_after_pin_while_pin_stays_in_conversation() -> None:
    model = ScriptedModel([ToolCall("c1", "list_customer_requests"), "done"])
    skills = SkillsMiddleware(
        sources=[MemorySource({"crm": {"SKILL.md": CRM}})],
        tools=[create_customer_request, list_customer_requests],
    )
    await Agent(model, middleware=[skills]).run("go", state={"pinned_skills": ["crm"]})
    gated = ["create_customer_request", "list_customer_requests"]
    assert names(model.requests[0]) == ["read_file", *gated]
    assert ran == ["list"]


# --- "Until then, calling the tool fails with the standard invalid-tool error and the tool
#      doesn't run." -----------------------------------------------------------------------


@pytest.mark.parametrize("default_guards", [True, False])
async def test_until_then_calling_the_tool_fails_with_unknown_tool_error_and_does_not_run(
    default_guards: bool,
) -> None:
    model = ScriptedModel([ToolCall("c1", "create_customer_request", {"title": "x"}), "ok"])
    skills = SkillsMiddleware(
        sources=[MemorySource({"crm": {"SKILL.md": CRM}})],
        tools=[create_customer_request, list_customer_requests],
    )
    agent = Agent(model, middleware=[skills], default_guards=default_guards)
    result = await agent.run("go", thread_id="t")
    error = result.new_messages[2]
    assert isinstance(error, ToolMessage) and error.is_error
    # with or without the validator: the standard unknown-tool error, and the tool never ran
    assert error.data == str(ToolResolutionError("create_customer_request", ["read_file"]))
    assert ran == []


# --- "This controls what is in the model's context; it is not a security boundary, since the
#      model can read any SKILL.md at any time." -------------------------------------------


async def test_not_a_security_boundary_model_can_read_any_skill_md_at_any_time() -> None:
    hidden = (
        "---\nname: admin\ndescription: Admin tasks.\ndisable-model-invocation: true\n"
        "metadata:\n  include_tools: create_customer_request\n---\nAdmin only.\n"
    )
    source = MemorySource({"admin": {"SKILL.md": hidden}, "crm": {"SKILL.md": CRM}})
    model = ScriptedModel([read("c1", "/skills/admin/SKILL.md"), "ok"])
    skills = SkillsMiddleware(sources=[source], tools=[create_customer_request])
    await Agent(model, middleware=[skills]).run("go")
    assert "admin" not in model.requests[0].system_prompt  # not listed ...
    assert names(model.requests[1]) == ["read_file", "create_customer_request"]  # ... yet read
    readme = Path(disclosure.__file__).with_name("README.md").read_text()
    for docs in (disclosure.__doc__ or "", readme):
        assert "not a security boundary" in docs.lower()


# --- "include_tools can also name a tool passed to the agent rather than to this middleware.
#      That tool wins over a skill tool of the same name." -----------------------------------


@tool(name="create_customer_request")
def agent_create(title: str) -> str:
    """The agent's own request tool."""
    ran.append(f"agent:{title}")
    return "agent"


async def test_include_tools_naming_an_agent_tool_agent_tool_wins_over_skill_tool() -> None:
    model = ScriptedModel(
        [read("c1"), ToolCall("c2", "create_customer_request", {"title": "a"}), "ok"]
    )
    skills = SkillsMiddleware(
        sources=[MemorySource({"crm": {"SKILL.md": CRM}})],
        tools=[create_customer_request, list_customer_requests],
    )
    await Agent(model, tools=[agent_create], middleware=[skills]).run("go")
    for request in model.requests:
        found = [t for t in request.tools if t.name == "create_customer_request"]
        assert [t.description for t in found] == ["The agent's own request tool."]
    assert names(model.requests[1]) == [
        "create_customer_request",
        "read_file",
        "list_customer_requests",
    ]
    assert ran == ["agent:a"]


# --- "If it is deferred (defer_loading: true), reading or pinning the skill discloses it
#      early, and it stays deferred and searchable; if it is bound, nothing changes." -------


@tool(deferred=True)
def lookup_order(order_id: str) -> str:
    """Look up an order."""
    ran.append(f"lookup:{order_id}")
    return "shipped"


@tool
def bound_helper() -> str:
    """A bound agent tool."""
    return "ok"


async def test_deferred_agent_tool_disclosed_early_stays_deferred_bound_one_unchanged() -> None:
    text = skill_md("orders", "Order questions.", include_tools="lookup_order bound_helper")
    registries: list[tuple[list[str], bool]] = []

    class Probe(Middleware):
        async def before_model_call(
            self, request: ModelRequest, ctx: DispatchContext
        ) -> ModelRequest:
            registry_tool = ctx.registry.get("lookup_order")
            assert registry_tool is not None
            advertised = [d.name for d in ctx.registry.definitions()]
            registries.append((advertised, registry_tool.deferred))
            return request

    def respond(request: ModelRequest) -> Any:
        step = len(model.requests)
        if step == 1:
            return read("c1", "/skills/orders/SKILL.md")
        if step == 2:
            return ToolCall("c2", "lookup_order", {"order_id": "42"})
        return "done"

    model = FunctionModel(respond)
    skills = SkillsMiddleware(sources=[MemorySource({"orders": {"SKILL.md": text}})])
    agent = Agent(model, tools=[lookup_order, bound_helper], middleware=[skills, Probe()])
    await agent.run("where is order 42?")
    # a deferred agent tool makes the agent offer search_tools (see plait.runtime.tool_search)
    assert names(model.requests[0]) == ["bound_helper", "search_tools", "read_file"]
    assert names(model.requests[1]) == [
        "bound_helper",
        "search_tools",
        "read_file",
        "lookup_order",
    ]
    disclosed = model.requests[1].tools[-1]
    assert "defer_loading" not in disclosed.metadata
    assert disclosed.description == "Look up an order."
    assert ran == ["lookup:42"]
    # In the registry it stays deferred: hidden from plain requests, still there to be found.
    assert registries == [(["bound_helper", "search_tools", "read_file"], True)] * 3
    # ... and searchable: search_tools finds it among the deferred tools
    search = ScriptedModel([ToolCall("s", "search_tools", {"query": "order"}), "ok"])
    found = await Agent(search, tools=[lookup_order, bound_helper]).run("find")
    assert [t["name"] for t in found.new_messages[2].data["tools"]] == ["lookup_order"]  # type: ignore[union-attr]
