"""Skills in disclosure mode with the bundled example skills and a scripted model.

The model sees the catalog in its system prompt, reads csv-insights/SKILL.md with read_file, and
only then gets the skill's csv_rows tool. Run: python examples/skills_disclosure.py
"""

import asyncio
import re
from pathlib import Path

from plait import Agent, FunctionModel, ModelRequest, ModelResponse, ToolCall, ToolMessage, tool
from plait.skills import SkillsMiddleware

SKILLS = Path(__file__).parent / "skills"


@tool
def csv_rows(path: str) -> str:
    """Return the rows of a CSV file (the csv-insights skill lists this tool)."""
    return "region,units\nNorth,12\nSouth,7\n"


def model(request: ModelRequest) -> ModelResponse | str:
    tools = [t.name for t in request.tools]
    last = request.messages[-1]
    print(f"  model sees tools {tools}")
    if not isinstance(last, ToolMessage):
        path = re.search(r"\*\*csv-insights\*\*.*? path: (\S+)", request.system_prompt)
        assert path is not None, "the catalog lists csv-insights"
        return ModelResponse(tool_calls=[ToolCall("r1", "read_file", {"path": path.group(1)})])
    if last.name == "read_file":
        return ModelResponse(tool_calls=[ToolCall("c1", "csv_rows", {"path": "sales.csv"})])
    return f"The table has {last.text.count(chr(10)) - 1} rows."


async def main() -> None:
    skills = SkillsMiddleware(sources=[SKILLS], tools=[csv_rows])
    agent = Agent(FunctionModel(model), middleware=[skills])
    result = await agent.run("What is in sales.csv?")
    print("answer:", result.output)


asyncio.run(main())
