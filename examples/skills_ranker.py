"""Plug your own ranker into disclosure mode: a toy "embedding" ranker over letter trigrams.

A real one would embed with your own model; anything with ``update(entries)`` and
``rank(query, limit)`` (the ``plait.skills.ranking.SkillRanker`` protocol) works. With more skills
than the prompt's budget holds, the ranker picks which ones the prompt lists for each user turn
and answers ``search_skills``. Run: python examples/skills_ranker.py
"""

import asyncio
import math
from collections import Counter
from collections.abc import Sequence

from plait import Agent, ModelRequest, ScriptedModel, ToolCall
from plait.skills import MemorySource, SkillEntry, SkillsMiddleware


def vector(text: str) -> Counter[str]:
    """A bag of letter trigrams: a stand-in for an embedding model."""
    text = f"  {text.lower()}  "
    return Counter(text[i : i + 3] for i in range(len(text) - 2))


def cosine(a: Counter[str], b: Counter[str]) -> float:
    dot = sum(count * b[gram] for gram, count in a.items())
    return dot / (math.sqrt(sum(v * v for v in a.values()) * sum(v * v for v in b.values())) or 1)


class TrigramRanker:
    """Ranks skills by cosine similarity of trigram vectors; re-embeds only changed skills."""

    def __init__(self) -> None:
        self.vectors: dict[tuple[str, str], tuple[SkillEntry, Counter[str]]] = {}
        self.embedded = 0

    def update(self, entries: Sequence[SkillEntry]) -> None:
        fresh = {}
        for entry in entries:
            key = (str(entry.ref), entry.version)
            found = self.vectors.get(key)
            if found is None:
                found = (entry, vector(f"{entry.name} {entry.description}"))
                self.embedded += 1
            fresh[key] = found
        self.vectors = fresh

    def rank(self, query: str, limit: int) -> list[SkillEntry]:
        wanted = vector(query)
        scored = [(cosine(wanted, vec), i, e) for i, (e, vec) in enumerate(self.vectors.values())]
        best = sorted((s for s in scored if s[0] > 0.1), key=lambda s: (-s[0], s[1]))
        return [entry for _, _, entry in best[:limit]]


def md(name: str, description: str) -> str:
    return f"---\nname: {name}\ndescription: {description}\n---\nSteps.\n"


async def main() -> None:
    skills = {
        f"chore-{i:03d}": md(f"chore-{i:03d}", f"Household chore number {i}.") for i in range(60)
    }
    skills["invoice-reminders"] = md("invoice-reminders", "Sends reminders for unpaid invoices.")
    skills["photo-albums"] = md("photo-albums", "Sorts holiday photos into albums.")
    source = MemorySource({name: {"SKILL.md": text} for name, text in skills.items()})
    ranker = TrigramRanker()
    middleware = SkillsMiddleware([source], budget=1_500, instructions=None, ranker=ranker)
    search = ToolCall("s1", "search_skills", {"query": "unpaid invoice", "limit": 1})
    model = ScriptedModel(["Sorted.", search, "Found it."])
    agent = Agent(model, middleware=[middleware])
    await agent.run("please organise my holiday photographs", thread_id="t")
    await agent.run("who still owes me money?", thread_id="t")
    listed = first_listed(model.requests[0])
    print(f"first skill listed for the photo request: {listed}")
    print(f"search_skills answered: {model.requests[2].messages[-1].text.splitlines()[1]}")
    print(f"skills embedded: {ranker.embedded}")


def first_listed(request: ModelRequest) -> str:
    line = next(line for line in request.system_prompt.splitlines() if line.startswith("- **"))
    return line.split("**")[1]


if __name__ == "__main__":
    asyncio.run(main())
