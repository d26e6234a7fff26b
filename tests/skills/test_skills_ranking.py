"""The ranker: tokens for code-ish and non-English text, BM25F order, incremental updates."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from plait.errors import ConfigurationError
from plait.skills import SkillEntry, SkillMeta
from plait.skills.ranking import LexicalRanker, SkillRanker, skill_headings, stemmer, terms


def entry(name: str, description: str, version: str = "v1") -> SkillEntry:
    return SkillEntry(
        "src", name, version, f"/skills/{name}/SKILL.md", SkillMeta(name, description)
    )


def names(found: list[SkillEntry]) -> list[str]:
    return [e.name for e in found]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("pdf-forms", ["pdf", "form"]),
        ("csv_rows", ["csv", "row"]),
        ("fillPdfForm", ["fillpdfform", "fill", "pdf", "form"]),
        ("HTTPServer", ["httpserver", "http", "server"]),
        ("PowerShell on GitHub", ["powershel", "power", "shell", "github", "git", "hub"]),
        ("PDFs and APIs", ["pdf", "api"]),
        ("csv2json", ["csv2json", "csv", "json"]),
        ("k8s on S3 with utf8", ["k8s", "s3", "utf8", "utf"]),
        ("Merging the merged merges", ["merg", "merg", "merg"]),
        ("Créer un résumé", ["creer", "un", "resum"]),
        ("将PDF转换为图片", ["将", "pdf", "转换", "换为", "为图", "图片"]),
        ("the a of to", []),
    ],
)
def test_terms_split_code_words_fold_case_and_accents_and_bigram_cjk(
    text: str, expected: list[str]
) -> None:
    assert terms(text) == expected


def test_a_camel_case_word_in_a_description_matches_the_word_typed_in_lower_case() -> None:
    ranker = LexicalRanker()
    ranker.update(
        [entry("ps-tools", "Scripts for PowerShell."), entry("shell-tools", "Shell one-liners.")]
    )
    assert names(ranker.rank("powershell", 2)) == ["ps-tools"]


def test_terms_read_a_bounded_prefix_of_the_text() -> None:
    assert terms("pdf " * 10 + "zebra", max_chars=20) == ["pdf"] * 5


def test_a_name_match_outranks_the_same_word_in_a_description() -> None:
    ranker = LexicalRanker()
    ranker.update(
        [
            entry("report-writer", "Writes reports; can also fill forms in a pdf."),
            entry("pdf-forms", "Fills fields of documents."),
        ]
    )
    assert names(ranker.rank("fill a pdf", 2)) == ["pdf-forms", "report-writer"]


def test_a_rare_word_weighs_more_than_a_common_one() -> None:
    common = [entry(f"tool-{i}", "Reads csv files.") for i in range(20)]
    ranker = LexicalRanker()
    ranker.update([*common, entry("geo", "Reads shapefiles and csv files.")])
    assert names(ranker.rank("csv shapefiles", 1)) == ["geo"]


def test_ties_keep_catalog_order_and_the_same_input_gives_the_same_list() -> None:
    entries = [entry(f"s{i}", "Converts images.") for i in range(5)]
    ranker = LexicalRanker()
    ranker.update(entries)
    assert names(ranker.rank("convert an image", 3)) == ["s0", "s1", "s2"]
    assert ranker.rank("convert an image", 3) == ranker.rank("convert an image", 3)


def test_nothing_relevant_gives_an_empty_list() -> None:
    ranker = LexicalRanker()
    ranker.update([entry("pdf", "Fills PDF forms.")])
    assert ranker.rank("", 5) == []
    assert ranker.rank("the and of", 5) == []
    assert ranker.rank("kubernetes", 5) == []
    assert ranker.rank("pdf", 0) == []
    assert LexicalRanker().rank("pdf", 5) == []


def test_update_reindexes_only_new_and_changed_skills() -> None:
    entries = [entry(f"s{i}", f"Batch {i:03d}.") for i in range(100)]
    ranker = LexicalRanker()
    ranker.update(entries)
    assert ranker.indexed == 100
    ranker.update(entries)
    assert ranker.indexed == 100
    changed = replace(entries[7], version="v2", meta=SkillMeta("s7", "Now about zebras."))
    ranker.update([*entries[:7], changed, *entries[8:], entry("new", "Zebra care.")])
    assert ranker.indexed == 102
    assert sorted(names(ranker.rank("zebra", 5))) == ["new", "s7"]
    assert names(ranker.rank("007", 1)) == []
    ranker.update(entries[:50])
    assert len(ranker) == 50
    assert names(ranker.rank("070", 5)) == []
    assert names(ranker.rank("049", 5)) == ["s49"]


def test_catalog_order_follows_the_latest_update() -> None:
    a, b = entry("a", "Same words."), entry("b", "Same words.")
    ranker = LexicalRanker()
    ranker.update([a, b])
    ranker.update([b, a])
    assert names(ranker.rank("same words", 2)) == ["b", "a"]


def test_query_bounds_count_only_the_first_terms_and_characters() -> None:
    ranker = LexicalRanker(max_query_terms=2)
    ranker.update([entry("zebra", "Zebras.")])
    assert ranker.rank("alpha beta zebra", 1) == []
    short = LexicalRanker(max_query_chars=10)
    short.update([entry("zebra", "Zebras.")])
    assert short.rank("aaaaaaaaaa zebra", 1) == []


def test_other_languages_stem_with_their_own_stemmer() -> None:
    ranker = LexicalRanker(language="german")
    ranker.update([entry("rechnungen", "Erstellt Rechnungen für Kunden."), entry("x", "Andere.")])
    assert names(ranker.rank("eine Rechnung erstellen", 1)) == ["rechnungen"]
    cjk = LexicalRanker()
    cjk.update([entry("images", "将PDF转换为图片"), entry("other", "处理表格数据")])
    assert names(cjk.rank("把这个PDF转换成图片", 1)) == ["images"]


def test_bad_settings_are_configuration_errors_that_say_what_to_pass() -> None:
    with pytest.raises(ConfigurationError, match=r"use one of .*english"):
        LexicalRanker(language="klingon")
    with pytest.raises(ConfigurationError, match="0 <= b <= 1"):
        LexicalRanker(b=2)
    with pytest.raises(ConfigurationError, match="max_query_terms >= 1"):
        LexicalRanker(max_query_terms=0)
    with pytest.raises(ConfigurationError, match="No Snowball stemmer"):
        stemmer("x" * 500)


def test_the_lexical_ranker_implements_the_protocol() -> None:
    assert isinstance(LexicalRanker(), SkillRanker)


def test_a_refresh_that_changes_one_skill_in_place_reindexes_only_that_one() -> None:
    entries = [entry(f"s{i}", f"Batch {i:03d}.") for i in range(100)]
    ranker = LexicalRanker()
    ranker.update(entries)
    changed = replace(entries[40], version="v2", meta=SkillMeta("s40", "Walrus feeding."))
    same_version = replace(entries[41], meta=SkillMeta("s41", "Batch 041, same file."))
    ranker.update([*entries[:40], changed, same_version, *entries[42:]])
    assert ranker.indexed == 101  # the new version only; an equal version is not re-read
    assert names(ranker.rank("walrus", 5)) == ["s40"]
    assert names(ranker.rank("040", 5)) == []
    assert ranker.rank("041", 1)[0] is same_version  # results are the entries last given
    ranker.update(entries)
    assert names(ranker.rank("040", 5)) == ["s40"] and ranker.rank("walrus", 5) == []


def test_a_repeated_skill_is_indexed_once() -> None:
    twice = entry("pdf", "Fills PDF forms.")
    ranker = LexicalRanker()
    ranker.update([twice, twice, entry("csv", "Reads CSV.")])
    assert len(ranker) == 2
    assert names(ranker.rank("pdf forms", 5)) == ["pdf"]


def test_a_skill_listed_twice_then_changed_at_both_places_is_reindexed() -> None:
    twice = entry("pdf", "Fills PDF forms.")
    ranker = LexicalRanker()
    ranker.update([twice, twice, entry("csv", "Reads CSV.")])
    newer = replace(twice, version="v2", meta=SkillMeta("pdf", "Signs PDF contracts."))
    ranker.update([newer, newer, ranker.rank("csv", 1)[0]])  # was a KeyError (fast path)
    assert len(ranker) == 2
    assert names(ranker.rank("contracts", 5)) == ["pdf"] and ranker.rank("forms", 5) == []


def test_a_common_word_only_reorders_what_a_rarer_word_found() -> None:
    ranker = LexicalRanker()
    common = [entry(f"csv-{i}", "Reads csv files.") for i in range(20)]
    ranker.update(
        [*common, entry("geo", "Reads shapefiles."), entry("geo-csv", "Shapefiles, csv.")]
    )
    assert sorted(names(ranker.rank("csv shapefiles", 5))) == ["geo", "geo-csv"]
    assert len(ranker.rank("csv", 50)) == 21  # alone, a common word still finds its skills


def test_headings_are_an_optional_third_field(tmp_path: Path) -> None:
    skill = tmp_path / "deploy" / "SKILL.md"
    skill.parent.mkdir()
    skill.write_text(
        "---\nname: deploy\ndescription: Ships it.\n# not a heading\n---\n# Rollback\n"
    )
    local = SkillEntry("fs", "deploy", "v1", str(skill), SkillMeta("deploy", "Ships it."))
    virtual = entry("other", "Ships it too.")
    assert skill_headings(local) == "Rollback"
    assert skill_headings(virtual) == ""
    plain, headed = LexicalRanker(), LexicalRanker(extra_text=skill_headings)
    for ranker in (plain, headed):
        ranker.update([local, virtual])
    assert plain.rank("rollback", 5) == []
    assert names(headed.rank("rollback", 5)) == ["deploy"]
    with pytest.raises(ConfigurationError, match="extra_weight > 0"):
        LexicalRanker(extra_weight=0)
