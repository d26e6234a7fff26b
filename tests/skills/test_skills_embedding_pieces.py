"""EmbeddingRanker's pieces: skill clauses, query windows, the two stages and their options, with
the deterministic trigram embedding of test_skills_embedding.py (no model, no torch)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from trigram_embedding import SKILLS, entry, names, trigrams

from plait.errors import ConfigurationError
from plait.skills import EmbeddingRanker, SkillEntry
from plait.skills.embedding import query_pieces, skill_clauses
from plait.skills.ranking import LexicalRanker

# Near twins: one action and object, four contexts; each context only in its own clause.
TWINS = [
    entry(
        f"sheets-convert-{slug}",
        f"Convert spreadsheets to other formats {where}. Handles large files, keeps the "
        f"original. Keywords: excel, xlsx, workbooks; export, conversion; {keywords}.",
    )
    for slug, where, keywords in [
        ("aws", "in the cloud", "amazon web services, s3 buckets, lambda"),
        ("azure", "in the cloud", "microsoft azure, blob storage, functions"),
        ("windows", "on the desktop", "windows pcs, powershell, explorer"),
        ("linux", "on the desktop", "linux servers, bash, ubuntu"),
    ]
]


class Batches:
    """The trigram embedding, keeping each batch it was asked for."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []

    def __call__(self, texts: list[str]) -> list[list[float]]:
        self.batches.append(list(texts))
        return trigrams(texts)


def test_skill_clauses_are_the_name_then_sentences_and_semicolon_groups_up_to_the_limit() -> None:
    description = "Plot tracks on a map. Use for hikes! Keywords: gpx, kml; trails;  ; trails."
    assert skill_clauses("gpx_trails-map", description, 8) == [
        "gpx trails map",
        "Plot tracks on a map",
        "Use for hikes",
        "Keywords: gpx, kml",
        "trails",  # empty group skipped, the repeated one too
    ]
    assert skill_clauses("gpx-trails", description, 2) == ["gpx trails", "Plot tracks on a map"]
    assert skill_clauses("x", "", 8) == ["x"]


def test_query_pieces_are_word_windows_spread_over_a_long_query_and_bounded() -> None:
    assert query_pieces("convert my excel sheets", 3, 16) == [
        "convert my excel",
        "my excel sheets",
    ]
    assert query_pieces("convert sheets", 3, 16) == []  # short: the whole query is enough
    long = " ".join(f"w{i}" for i in range(100))
    pieces = query_pieces(long, 3, 5)
    assert len(pieces) == 5
    assert pieces[0] == "w0 w1 w2" and pieces[-1] == "w97 w98 w99"
    assert query_pieces(long, 3, 1) == ["w0 w1 w2"] and query_pieces(long, 3, 0) == []


def test_each_skill_embeds_at_most_clauses_pieces_and_a_query_at_most_query_pieces() -> None:
    embed = Batches()
    ranker = EmbeddingRanker(embed, clauses=2, query_pieces=3)
    ranker.update(TWINS)
    skill_texts = {t for batch in embed.batches for t in batch}
    # each: the whole text, the name, the first sentence (two twins share it: embedded once)
    assert len(skill_texts) == 4 + 4 + 2
    assert "sheets convert aws" in skill_texts and "Handles large files" not in skill_texts
    embed.batches.clear()
    ranker.rank("please convert all of my excel workbooks to csv on ubuntu linux", 2)
    assert len(embed.batches) == 1 and len(embed.batches[0]) == 1 + 3


def test_a_near_twin_named_by_its_one_distinct_clause_ranks_first() -> None:
    for options in ({}, {"fuse": False}, {"fusion": "rank"}):
        ranker = EmbeddingRanker(trigrams, **options)
        ranker.update(TWINS)
        found = names(ranker.rank("convert the excel workbooks on our ubuntu linux servers", 4))
        assert found[0] == "sheets-convert-linux", options
        assert sorted(found) == sorted(e.name for e in TWINS)


def test_without_clauses_windows_or_second_stage_every_stage_still_ranks() -> None:
    query = "convert the excel workbooks in microsoft azure blob storage"
    for options in (
        {"clauses": 0},
        {"query_pieces": 0},
        {"rescore": 0},
        {"clauses": 0, "query_pieces": 0, "rescore": 0, "fusion": "rank"},
    ):
        ranker = EmbeddingRanker(trigrams, **options)
        ranker.update(TWINS)
        assert names(ranker.rank(query, 1)) == ["sheets-convert-azure"], options


def test_past_the_rescored_skills_the_first_stage_order_follows_without_repeats() -> None:
    ranker = EmbeddingRanker(trigrams, rescore=1)
    ranker.update(TWINS)
    found = names(ranker.rank("convert excel workbooks with powershell on windows pcs", 4))
    assert found[0] == "sheets-convert-windows"
    assert sorted(found) == sorted(e.name for e in TWINS)


class PlainRanker:
    """A ranker with ``rank`` only (no scores): the skills whose name holds a query word."""

    def __init__(self) -> None:
        self.entries: list[SkillEntry] = []

    def update(self, entries: Sequence[SkillEntry]) -> None:
        self.entries = list(entries)

    def rank(self, query: str, limit: int) -> list[SkillEntry]:
        words = query.lower().split()
        return [e for e in self.entries if any(w in e.name for w in words)][:limit]


def test_a_lexical_ranker_without_scores_counts_by_its_reciprocal_ranks() -> None:
    ranker = EmbeddingRanker(trigrams, lexical=PlainRanker())
    ranker.update(SKILLS)
    assert names(ranker.rank("mail merge letters", 1)) == ["mail-merge"]


def test_a_cache_file_written_before_skills_had_clauses_is_ignored(tmp_path: Path) -> None:
    import numpy as np

    path = tmp_path / "vectors.npz"
    key = EmbeddingRanker(trigrams)._key
    texts = [f"{e.name}: {e.description}" for e in SKILLS]
    np.savez(  # format 1: no "format" entry
        path,
        model=np.array("default"),
        keys=np.array([key(t) for t in texts]),
        vectors=np.array(trigrams(texts), dtype=np.float32),
    )
    ranker = EmbeddingRanker(trigrams, cache_path=path)
    ranker.update(SKILLS)
    assert ranker.embedded == 9  # nothing taken from the old file
    again = EmbeddingRanker(trigrams, cache_path=path)
    again.update(SKILLS)
    assert again.embedded == 0  # rewritten in the current format


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"fusion": "mean"}, "fusion is 'score' or 'rank'"),
        ({"weight": 1.5}, "0 <= weight <= 1"),
        ({"clauses": -1}, "clauses, query_pieces and rescore >= 0"),
        ({"rescore": -1}, "clauses, query_pieces and rescore >= 0"),
        ({"query_window": 0}, "query_window >= 1"),
    ],
)
def test_bad_options_are_configuration_errors(options: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        EmbeddingRanker(trigrams, **options)  # type: ignore[arg-type]


def test_lexical_scored_is_rank_with_its_positive_scores_best_first() -> None:
    lexical = LexicalRanker()
    lexical.update(TWINS)
    scored = lexical.scored("convert excel on linux with bash", 3)
    assert [e for e, _ in scored] == lexical.rank("convert excel on linux with bash", 3)
    assert scored[0][0].name == "sheets-convert-linux"
    scores = [s for _, s in scored]
    assert scores == sorted(scores, reverse=True) and scores[-1] > 0
    assert lexical.scored("convert", 0) == []
