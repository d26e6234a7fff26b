"""EmbeddingRanker with a real, small, deterministic embedding: hashed character trigrams."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import pytest
from trigram_embedding import DIMS, SKILLS, entry, names, trigrams

from plait import Agent, ScriptedModel, ToolCall
from plait.errors import ConfigurationError
from plait.skills import EmbeddingRanker, MemorySource, SkillsMiddleware
from plait.skills.ranking import LexicalRanker, SkillRanker


class Counting:
    """The trigram embedding, counting the texts it was asked for."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def __call__(self, texts: list[str]) -> list[list[float]]:
        self.texts += texts
        return trigrams(texts)


def test_a_misspelled_request_is_found_through_the_embedding_where_words_do_not_match() -> None:
    lexical = LexicalRanker()
    lexical.update(SKILLS)
    assert lexical.rank("spredsheat formulaz", 3) == []
    ranker = EmbeddingRanker(trigrams)
    ranker.update(SKILLS)
    assert names(ranker.rank("spredsheat formulaz", 1)) == ["spreadsheet-tools"]
    assert isinstance(ranker, SkillRanker)


def test_fusion_keeps_a_skill_both_orders_agree_on_first() -> None:
    ranker = EmbeddingRanker(trigrams)
    ranker.update(SKILLS)
    assert names(ranker.rank("plot my hiking tracks on a map", 3))[0] == "gpx-trails"
    only = EmbeddingRanker(trigrams, fuse=False)
    only.update(SKILLS)
    assert names(only.rank("plot my hiking tracks on a map", 1)) == ["gpx-trails"]
    assert ranker.rank("   ", 3) == [] and ranker.rank("map", 0) == []


def test_a_query_the_model_maps_to_zero_falls_back_to_the_lexical_order() -> None:
    def zero_for_queries(texts: list[str]) -> list[list[float]]:
        return [
            [0.0] * DIMS if ":" not in t else v for t, v in zip(texts, trigrams(texts), strict=True)
        ]

    ranker = EmbeddingRanker(zero_for_queries)
    ranker.update(SKILLS)
    assert names(ranker.rank("hiking map", 3)) == ["gpx-trails"]  # no embedding order to fuse


def test_a_refresh_embeds_only_new_or_changed_texts() -> None:
    embed = Counting()
    ranker = EmbeddingRanker(embed, batch_size=2)
    ranker.update(SKILLS)
    assert "gpx-trails: Plot hiking tracks on a map." in embed.texts
    assert {"gpx trails", "Plot hiking tracks on a map"} <= set(embed.texts)  # its clauses
    assert ranker.embedded == len(embed.texts) == len(set(embed.texts)) == 9
    changed = entry("gpx-trails", "Plot hiking and cycling tracks on a map.", "v2")
    ranker.update([*SKILLS[:2], changed])
    assert embed.texts[9:] == [  # the name's clause is unchanged: not embedded again
        "gpx-trails: Plot hiking and cycling tracks on a map.",
        "Plot hiking and cycling tracks on a map",
    ]
    ranker.update(SKILLS[:1])
    assert ranker.embedded == 11 and len(ranker) == 1
    assert names(ranker.rank("map tracks", 3)) == ["spreadsheet-tools"]  # the only one left


def test_the_disk_cache_spares_a_new_process_the_embedding_of_unchanged_skills(
    tmp_path: Path,
) -> None:
    path = tmp_path / "cache" / "vectors.npz"
    first = EmbeddingRanker(Counting(), model="trigram-64", cache_path=path)
    first.update(SKILLS)
    assert first.embedded == 9 and path.is_file()
    second = EmbeddingRanker(Counting(), model="trigram-64", cache_path=path)
    second.update(SKILLS)
    assert second.embedded == 0
    assert names(second.rank("spredsheat", 1)) == names(first.rank("spredsheat", 1))
    other_model = EmbeddingRanker(Counting(), model="trigram-v2", cache_path=path)
    other_model.update(SKILLS)
    assert other_model.embedded == 9


def test_an_unreadable_cache_file_is_ignored_and_rewritten(tmp_path: Path) -> None:
    path = tmp_path / "vectors.npz"
    path.write_bytes(b"not a zip file")
    ranker = EmbeddingRanker(trigrams, cache_path=path)
    ranker.update(SKILLS)
    assert ranker.embedded == 9
    again = EmbeddingRanker(trigrams, cache_path=path)
    again.update(SKILLS)
    assert again.embedded == 0


def test_the_cache_keeps_at_most_max_cache_vectors_dropping_skills_no_longer_indexed() -> None:
    ranker = EmbeddingRanker(trigrams, max_cache_vectors=3, clauses=0)  # whole texts only
    ranker.update(SKILLS)
    ranker.update([*SKILLS[:2], entry("new-one", "Something else entirely.")])
    ranker.update(SKILLS)  # gpx-trails was dropped from the cache: embedded again
    assert ranker.embedded == 5


@pytest.mark.parametrize(
    ("embed", "message"),
    [
        (lambda texts: [[1.0, 0.0]], "one non-empty vector per text"),
        (lambda texts: [[math.nan] for _ in texts], "NaN or infinite"),
        (lambda texts: [["x"] for _ in texts], "not one vector per text"),
    ],
)
def test_an_embed_function_returning_bad_vectors_is_a_configuration_error(
    embed: object, message: str
) -> None:
    ranker = EmbeddingRanker(embed)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match=message):
        ranker.update(SKILLS)


def test_vectors_of_another_size_later_are_a_configuration_error() -> None:
    sizes = iter([4, 4, 5])
    ranker = EmbeddingRanker(lambda texts: [[1.0] * next(sizes) for _ in texts], batch_size=1)
    with pytest.raises(ConfigurationError, match="5-dimensional vectors after 4"):
        ranker.update(SKILLS)


def test_an_exception_from_embed_propagates_unchanged() -> None:
    def broken(texts: list[str]) -> list[list[float]]:
        raise RuntimeError("model server down")

    with pytest.raises(RuntimeError, match="model server down"):
        EmbeddingRanker(broken).update(SKILLS)


def test_bad_settings_are_configuration_errors() -> None:
    with pytest.raises(ConfigurationError, match="fusion_k"):
        EmbeddingRanker(trigrams, depth=0)
    with pytest.raises(ConfigurationError, match="max_text_chars"):
        EmbeddingRanker(trigrams, max_query_chars=0)


async def test_search_skills_uses_the_embedding_ranker_in_a_turn() -> None:
    skills = {
        f"skill-{i:03d}": {"SKILL.md": f"---\nname: skill-{i:03d}\ndescription: Chore {i}.\n---\n"}
        for i in range(120)
    }
    skills["spreadsheet-tools"] = {
        "SKILL.md": "---\nname: spreadsheet-tools\ndescription: Formulas in spreadsheets.\n---\n"
    }
    search = ToolCall("c1", "search_skills", {"query": "spredsheet formulaz", "limit": 1})
    model = ScriptedModel([search, "ok"])
    middleware = SkillsMiddleware(
        [MemorySource(skills)], budget=1_000, ranker=EmbeddingRanker(trigrams)
    )
    await Agent(model, middleware=[middleware]).run("find it")
    lines = model.requests[1].messages[-1].text.splitlines()
    assert lines[1].startswith("- **spreadsheet-tools**: Formulas in spreadsheets.")


def _saved_cache(path: Path, model: str, embed: Callable[[list[str]], list[list[float]]]) -> bytes:
    EmbeddingRanker(embed, model=model, cache_path=path).update(SKILLS)
    return path.read_bytes()


@pytest.mark.parametrize("damage", ["empty", "zip-magic-only", "cut-in-half"])
def test_a_damaged_cache_file_is_ignored_not_raised(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "vectors.npz"
    whole = _saved_cache(path, "default", trigrams)
    cut = {"empty": b"", "zip-magic-only": b"PK\x03\x04", "cut-in-half": whole[: len(whole) // 2]}
    path.write_bytes(cut[damage])
    ranker = EmbeddingRanker(trigrams, cache_path=path)
    ranker.update(SKILLS)
    assert ranker.embedded == 9
    assert names(ranker.rank("spredsheet", 1)) == ["spreadsheet-tools"]


def test_a_cache_file_of_another_vector_size_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "vectors.npz"
    _saved_cache(path, "default", lambda texts: [v[:32] for v in trigrams(texts)])
    ranker = EmbeddingRanker(trigrams, cache_path=path)  # same model name, 64 dimensions now
    ranker.update(SKILLS)  # nothing to embed: the file's (32-dimensional) vectors are used...
    assert ranker.embedded == 0
    assert names(ranker.rank("spredsheet", 1)) == ["spreadsheet-tools"]
    assert ranker.embedded == 9  # ...until the query's vector shows they were of another size
    ranker.update([*SKILLS, entry("new-one", "Something else entirely.")])
    assert ranker.embedded == 12  # its text and its two clauses


def test_a_cache_file_with_too_many_or_non_finite_vectors_is_ignored(tmp_path: Path) -> None:
    import numpy as np

    path = tmp_path / "vectors.npz"
    _saved_cache(path, "default", trigrams)
    small = EmbeddingRanker(trigrams, cache_path=path, max_cache_vectors=3, clauses=0)
    small.update(SKILLS[:1])  # the file holds 9 vectors: more than this ranker may read
    assert small.embedded == 1
    keys = [EmbeddingRanker(trigrams)._key(f"{e.name}: {e.description}") for e in SKILLS]
    vectors = np.full((3, DIMS), np.nan, dtype=np.float32)
    np.savez(
        path, format=np.array(2), model=np.array("default"), keys=np.array(keys), vectors=vectors
    )
    ranker = EmbeddingRanker(trigrams, cache_path=path, clauses=0)
    ranker.update(SKILLS)
    assert ranker.embedded == 3
    assert names(ranker.rank("spredsheet", 1)) == ["spreadsheet-tools"]
