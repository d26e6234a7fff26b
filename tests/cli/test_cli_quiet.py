"""``-q/--quiet``: a skill warning shows on its first run, and not on later ones; without
``-q`` it shows every time; a new warning still shows once; the memory is bounded; a file that
cannot be read as its JSON object (read by ``plait.jsonfile.read_json_object``) starts empty."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_cli_run import FIXTURES, plait, sse_text
from wire_server import WireServer

from plait.cli.quiet import MAX_REMEMBERED, QuietSkillWarnings


@pytest.fixture
def server() -> Iterator[WireServer]:
    with WireServer(FIXTURES) as s:
        yield s


def skill_with_a_warning(root: Path, folder: str = "greeter") -> Path:
    skill = root / "skills" / folder
    skill.mkdir(parents=True)
    # the name differs from its folder: the spec's warning, the skill still loads
    (skill / "SKILL.md").write_text("---\nname: greet\ndescription: Say hello.\n---\nHello.\n")
    return root / "skills"


def warnings(server: WireServer, home: Path, skills: Path, *flags: str) -> list[str]:
    server._replies.append(sse_text("Hi."))
    model = f"openai-compatible:m@{server.url}/v1"
    result = plait(
        "run", "hi", "--json", "--model", model, "--skills", str(skills), "--no-default-skills",
        *flags, home=home,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    assert events[-2]["output"] == "Hi."
    return [e["diagnostic"]["message"] for e in events if e["type"] == "skill_problem_found"]


def test_quiet_shows_a_skill_warning_once_and_then_no_more(
    server: WireServer, tmp_path: Path
) -> None:
    skills = skill_with_a_warning(tmp_path)
    shown = warnings(server, tmp_path, skills, "-q")
    assert len(shown) == 1 and "greet" in shown[0]
    assert warnings(server, tmp_path, skills, "--quiet") == []
    assert warnings(server, tmp_path, skills) == shown  # without -q: every time
    assert (tmp_path / "skill-warnings-shown.json").is_file()


def test_quiet_still_shows_a_new_warning_once(server: WireServer, tmp_path: Path) -> None:
    skills = skill_with_a_warning(tmp_path)
    assert len(warnings(server, tmp_path, skills, "-q")) == 1
    skill_with_a_warning(tmp_path / "more", "helper")
    second = tmp_path / "more" / "skills"
    assert len(warnings(server, tmp_path, second, "-q")) == 1
    assert warnings(server, tmp_path, second, "-q") == []


def test_the_memory_is_bounded_and_a_broken_file_starts_empty(tmp_path: Path) -> None:
    path = tmp_path / "shown.json"
    path.write_text("{not json")
    assert QuietSkillWarnings(path)._shown == {}
    path.write_text(json.dumps({"shown": [f"k{i}" for i in range(MAX_REMEMBERED + 50)]}))
    kept = QuietSkillWarnings(path)._shown
    assert len(kept) == MAX_REMEMBERED and "k0" not in kept and f"k{MAX_REMEMBERED + 49}" in kept


@pytest.mark.parametrize(
    "content",
    [
        b"{not json",
        b'{"shown": ["\xff"]}',  # not UTF-8
        b"[" * 200_000,  # nests past the parser's depth (raised RecursionError before)
        b'["k1"]',  # not an object
        b'{"shown": "k1"}',
        json.dumps({"shown": ["k1"], "pad": " " * 262_144}).encode(),  # over the bound
        None,  # a folder where the file should be
    ],
    ids=["not-json", "not-utf8", "too-deep", "array", "not-a-list", "too-large", "folder"],
)
def test_a_bad_file_starts_empty(tmp_path: Path, content: bytes | None) -> None:
    path = tmp_path / "shown.json"
    if content is None:
        path.mkdir()
    else:
        path.write_bytes(content)
    assert QuietSkillWarnings(path)._shown == {}


def test_a_file_saved_with_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    path = tmp_path / "shown.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps({"shown": ["k1", 2, "k2"]}).encode())
    assert list(QuietSkillWarnings(path)._shown) == ["k1", "k2"]
