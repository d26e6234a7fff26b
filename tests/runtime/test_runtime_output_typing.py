"""``Agent[OutputT]`` and ``RunResult[OutputT]`` as the caller sees them: mypy (strict, part of
the normal run over tests/) checks these assignments; running them checks the values agree."""

from __future__ import annotations

from pydantic import BaseModel

from plait import Agent, RunResult, ScriptedModel, ToolCall


class Verdict(BaseModel):
    ok: bool


class Plan(BaseModel):
    steps: list[str]


async def test_output_types_reach_the_caller() -> None:
    text_agent = Agent(ScriptedModel(["hi"]))
    text: str = (await text_agent.run("x")).output  # the default: Agent[str]
    script = [
        ToolCall("c", "final_result", {"ok": True}),
        ToolCall("d", "final_result", {"steps": ["a"]}),
    ]
    typed_agent = Agent(ScriptedModel(script), output_type=Verdict)
    result: RunResult[Verdict] = await typed_agent.run("x")
    verdict: Verdict = result.output
    plan: Plan = (await typed_agent.run("x", output_type=Plan)).output  # a per-run override
    assert text == "hi" and verdict.ok and plan.steps == ["a"]


def test_run_sync_takes_a_per_run_output_type() -> None:
    script: list[ToolCall | str] = [ToolCall("c", "final_result", {"steps": ["a", "b"]}), "plain"]
    agent = Agent(ScriptedModel(script))
    plan: Plan = agent.run_sync("x", output_type=Plan).output
    text: str = agent.run_sync("y").output
    assert plan.steps == ["a", "b"] and text == "plain"
