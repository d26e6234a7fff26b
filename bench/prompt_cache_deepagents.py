"""deepagents, as it ships, on ``bench/prompt_cache.py``'s scripted session (issue 25).

Runs in its own virtual environment, never plait's (deepagents pulls in LangChain and
LangGraph; plait depends on neither). Measured with deepagents 0.7.32, langchain-anthropic
1.7.10, langchain 1.5.2, langgraph 1.2.24, anthropic 2.16.0::

    python3 -m venv /tmp/da-venv
    /tmp/da-venv/bin/pip install deepagents==0.7.32 langchain-anthropic==1.7.10
    /tmp/da-venv/bin/python bench/prompt_cache_deepagents.py --out /tmp/deepagents.json
    .venv/bin/python bench/prompt_cache.py --deepagents /tmp/deepagents.json

``create_deep_agent(ChatAnthropic(...), tools=[read_report], skills=[...], backend=...)``: its
default middleware stack (filesystem tools, the general-purpose ``task`` subagent, LangChain's
``SummarizationMiddleware``, ``AnthropicPromptCachingMiddleware`` with its 5-minute default),
its built-in system prompt, the same 40-skill catalog (``SkillsMiddleware`` over a
``FilesystemBackend``, which is how deepagents reads skills from disk). ``ChatAnthropic`` talks
to the local Anthropic wire server (``tests/support/anthropic_server.py``): the same caching
rule (prefix match at ``cache_control`` breakpoints, 20-block look-back, 1,024-token minimum)
computes the usage of plait's runs and of this one, and the same brain answers (a
``read_report`` call for the turn a user message names, then a short text after the result).
The same 60 user messages in one thread (a ``MemorySaver`` checkpointer). Prints the row and,
with ``--out``, writes it as JSON for ``bench/prompt_cache.py --deepagents``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parents[1] / "tests" / "support"))
sys.path.insert(0, str(Path(__file__).parent))

from anthropic_server import AnthropicServer
from deepagents import __version__ as deepagents_version
from deepagents import create_deep_agent
from deepagents.backends import FilesystemBackend
from langchain_anthropic import ChatAnthropic
from langchain_core.tools import tool
from langgraph.checkpoint.memory import MemorySaver
from prompt_cache_script import FACTS, brain, report_text, skills_folder

MODEL = "claude-sonnet-4-5"


@tool
def read_report(turn: int) -> str:
    """Read the report of one turn."""
    return report_text(turn)


def run(turns: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp, AnthropicServer(brain) as server:
        root = Path(tmp)
        skills_folder(root / "skills")
        model = ChatAnthropic(  # type: ignore[call-arg]
            model=MODEL, api_key="k", base_url=server.url.removesuffix("/v1"), max_tokens=1024
        )
        agent = create_deep_agent(
            model,
            tools=[read_report],
            system_prompt="You read reports.",
            skills=["/skills/"],
            backend=FilesystemBackend(root_dir=root, virtual_mode=True),
            checkpointer=MemorySaver(),
        )
        config: Any = {"configurable": {"thread_id": "deepagents"}, "recursion_limit": 50}
        for turn in range(1, turns + 1):
            message = {"role": "user", "content": f"Read the report of turn #{turn}"}
            agent.invoke({"messages": [message]}, config)
        usage = {"input": 0, "fresh": 0, "writes": 0, "reads": 0}
        refused = [r.refused for r in server.received if r.refused]
        if refused:
            raise SystemExit(f"the wire server refused {len(refused)} request(s): {refused[0]}")
        for counted in server.cache.log:
            usage["fresh"] += counted["input_tokens"]
            usage["writes"] += counted["cache_creation_input_tokens"]
            usage["reads"] += counted["cache_read_input_tokens"]
        usage["input"] = usage["fresh"] + usage["writes"] + usage["reads"]
        last = json.dumps(server.received[-1].body)
        first = server.received[0].body
        tool_chars = len(json.dumps(first.get("tools", [])))
        return {
            "name": f"deepagents {deepagents_version}",
            "calls": len(server.cache.log),
            "tool_schema_chars": tool_chars,
            "facts": sum(1 for fact in FACTS.values() if fact in last),
            **usage,
        }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=60)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    row = run(args.turns)
    print(json.dumps(row, indent=2))
    if args.out is not None:
        args.out.write_text(json.dumps(row))


if __name__ == "__main__":
    main()
