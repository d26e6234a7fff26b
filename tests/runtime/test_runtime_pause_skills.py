"""``PendingCall.skill`` names the skill a held call's tool belongs to (issue 26): a disclosed
skill's ``include_tools`` (registered by the middleware, or a deferred agent tool it reveals), a
managed skill's script (sandboxed, run after approval), and never a tool the agent has anyway;
and MCP tools of a real server are held by name pattern with ``ApprovalMiddleware``."""

from __future__ import annotations

from mcp_server import STDIO

from plait import Agent, ScriptedModel, ToolCall, ToolMessage, tool
from plait.mcp import McpServer, McpToolset
from plait.runtime import ApprovalMiddleware, Approve, PendingCall
from plait.sandbox import BubblewrapSandbox
from plait.skills import MemorySource, SkillsMiddleware
from plait.skills.managed import ScriptConfig, allow_all, create_skill_manager


def _md(name: str, include_tools: str) -> str:
    meta = f"metadata:\n  include_tools: {include_tools}\n"
    return f"---\nname: {name}\ndescription: The {name} skill.\n{meta}---\nBody of {name}.\n"


@tool(requires_approval=True)
def alpha() -> str:
    """Alpha, registered when a skill lists it."""
    return "a"


@tool(deferred=True)
def beta() -> str:
    """Beta, a deferred agent tool a skill reveals."""
    return "b"


@tool
def gamma() -> str:
    """Gamma, an agent tool visible anyway."""
    return "g"


async def test_a_held_disclosed_skill_tool_names_the_skill_that_lists_it() -> None:
    source = MemorySource(
        {"ops": {"SKILL.md": _md("ops", "alpha beta gamma")}, "x": {"SKILL.md": _md("x", "")}}
    )
    read = ToolCall("r1", "read_file", {"path": "/skills/ops/SKILL.md"})
    calls = [ToolCall("c1", "alpha"), ToolCall("c2", "beta"), ToolCall("c3", "gamma")]
    agent = Agent(
        ScriptedModel([read, calls, "done"]),
        tools=[beta, gamma],
        middleware=[
            SkillsMiddleware(sources=[source], tools=[alpha]),
            ApprovalMiddleware(["beta", "gamma"]),
        ],
    )

    paused = await agent.run("go", thread_id="t")

    assert paused.pending == [
        PendingCall("c1", "alpha", {}, "alpha requires approval", "ops"),
        PendingCall("c2", "beta", {}, "beta: needs approval", "ops"),
        PendingCall("c3", "gamma", {}, "gamma: needs approval", None),  # the agent's own
    ]
    stored = (await agent.store.load("t")).state["plait.pending"]["pending"]
    assert [p["skill"] for p in stored] == ["ops", "ops", None]
    # Resumed by a fresh agent and middleware on the same store, as in another process.
    model = ScriptedModel(["done"])
    again = Agent(
        model,
        tools=[beta, gamma],
        middleware=[SkillsMiddleware(sources=[source], tools=[alpha])],
        store=agent.store,
    )
    result = await again.resume("t", {"c1": Approve(), "c2": Approve(), "c3": Approve()})

    assert result.output == "done"
    data = {m.tool_call_id: m.data for m in result.new_messages if isinstance(m, ToolMessage)}
    assert data == {"c1": "a", "c2": "b", "c3": "g"}
    [request] = model.requests  # the catalog and the disclosed tools are still right
    assert "/skills/ops/SKILL.md" in request.system_prompt
    assert {"alpha", "beta", "gamma"} <= {t.name for t in request.tools}


SKILL_MD = "---\nname: pdf\ndescription: PDF work. Use for PDFs.\n---\nRun the scripts.\n"


async def test_a_held_managed_skill_script_names_its_skill_and_runs_sandboxed_once_approved() -> (
    None
):
    files = {"SKILL.md": SKILL_MD, "scripts/shout.py": "import sys\nprint(sys.argv[1].upper())\n"}
    manager = await create_skill_manager(
        sources=[MemorySource({"pdf": files})],
        gate=allow_all,
        scripts=ScriptConfig(timeout=20, sandbox=BubblewrapSandbox()),
    )
    script: list[ToolCall | str] = [
        ToolCall("c1", "load_skill", {"skill": "pdf"}),
        ToolCall("c2", "run_pdf_shout", {"args": ["hi"]}),
        "shouted",
    ]
    agent = Agent(
        ScriptedModel(script),
        middleware=[*manager.middleware, ApprovalMiddleware(["run_*"])],
    )
    try:
        paused = await agent.run("shout", thread_id="t")
        assert [(p.id, p.name, p.skill) for p in paused.pending] == [("c2", "run_pdf_shout", "pdf")]

        result = await agent.resume("t", {"c2": Approve()})
    finally:
        await manager.aclose()

    assert result.output == "shouted"
    [out] = [m.text for m in result.new_messages if isinstance(m, ToolMessage)]
    assert "exited 0" in out and "sandbox=bubblewrap" in out and out.endswith("HI\n")


async def test_mcp_tools_of_a_real_server_are_held_by_name_pattern() -> None:
    calls = [
        ToolCall("m1", "demo_echo", {"text": "hello"}),
        ToolCall("m2", "demo_count"),
        ToolCall("m3", "demo_weather", {"city": "Rome"}),
    ]
    server = McpServer("demo", command=STDIO, allow=["echo", "count", "weather"])
    async with McpToolset([server]) as mcp:
        gate = ApprovalMiddleware(["demo_e*", "demo_w*"], reason="an MCP tool")
        agent = Agent(ScriptedModel([calls, "done"]), middleware=[mcp, gate])
        paused = await agent.run("go", thread_id="t")

        assert [(p.id, p.reason) for p in paused.pending] == [
            ("m1", "demo_echo: an MCP tool"),
            ("m3", "demo_weather: an MCP tool"),
        ]
        stored = (await agent.store.load("t")).state["plait.pending"]["finished"]
        assert [m["tool_call_id"] for m in stored] == ["m2"]  # the ungated sibling ran

        result = await agent.resume("t", {"m1": Approve(args={"text": "edited"}), "m3": Approve()})

    assert result.output == "done"
    data = {m.tool_call_id: m.text for m in result.new_messages if isinstance(m, ToolMessage)}
    assert "edited" in data["m1"] and data["m2"].startswith("1 in pid")
    assert "Rome" in data["m3"]
