"""A real provider: set OPENAI_API_KEY (or change the spec) and run
``python examples/openai_agent.py``. Needs ``pip install 'plait[openai]'``.

Any OpenAI-compatible server works too: ``openai-compatible:llama3.1@http://localhost:11434/v1``.
"""

import asyncio
import sys

from plait import Agent, tool
from plait.runtime import TextDeltaReceived


@tool
def word_count(text: str) -> int:
    """Count the words in a text."""
    return len(text.split())


async def main(spec: str) -> None:
    # The agent resolved the model from the spec, so it closes it (its HTTP client) on exit.
    async with Agent(spec, tools=[word_count], system_prompt="Use tools when they help.") as agent:
        async for event in agent.stream("How many words are in 'the quick brown fox'?"):
            if isinstance(event, TextDeltaReceived):
                print(event.text, end="", flush=True)
    print()


asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "openai:gpt-4.1-mini"))
