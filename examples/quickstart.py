"""The smallest plait agent: one typed tool and a scripted model (no key, no network).

Run: python examples/quickstart.py
"""

from plait import Agent, ScriptedModel, ToolCall, tool


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


model = ScriptedModel([ToolCall("c1", "add", {"a": 2, "b": 3}), "2 + 3 = 5"])
agent = Agent(model, tools=[add], system_prompt="You are a calculator.")
result = agent.run_sync("What is 2 + 3?", thread_id="demo")
print(result.output)
for message in result.new_messages:
    calls = ", ".join(f"{c.name}({c.args})" for c in getattr(message, "tool_calls", []))
    print(f"  {message.role:>9}: {message.text or calls}")
