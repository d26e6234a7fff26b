"""``plait skills validate | list | show | prompt`` through typer's runner and one subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import skills_ref
from typer.testing import CliRunner

from plait.cli.app import app

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "skills"
runner = CliRunner()


def skill(root: Path, folder: str, text: str) -> Path:
    path = root / folder
    path.mkdir(parents=True)
    (path / "SKILL.md").write_text(text)
    return path


@pytest.fixture
def messy(tmp_path: Path) -> Path:
    """A folder with a valid skill, one that loads with warnings and one that is rejected."""
    root = tmp_path / "messy"
    skill(root, "good", "---\nname: good\ndescription: Good skill.\n---\nBody.\n")
    skill(root, "warned", "---\nname: Warned Name\ndescription: Use when: x\nauthor: me\n---\n")
    skill(root, "broken", "---\nname: broken\ndescription: 'unclosed\n---\n")
    return root


def test_bundled_examples_list_as_a_table() -> None:
    result = runner.invoke(app, ["skills", "list", str(EXAMPLES)])
    assert result.exit_code == 0, result.output
    for name in ("csv-insights", "commit-message", "release-notes", "skill-authoring"):
        assert name in result.output
    assert "4 loaded (4 active, 0 shadowed), 0 rejected." in result.output
    assert "Status" in result.output


def test_bundled_examples_pass_strict_validation() -> None:
    result = runner.invoke(app, ["skills", "validate", "--strict", str(EXAMPLES)])
    assert result.exit_code == 0, result.output
    assert "4 checked (strict): 4 valid, 0 invalid." in result.output


def test_list_shows_active_warned_shadowed_and_rejected(messy: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    skill(other, "good", "---\nname: good\ndescription: Shadowed copy.\n---\n")
    result = runner.invoke(app, ["skills", "list", str(messy), str(other)])
    assert result.exit_code == 0, result.output
    assert "rejected" in result.output
    assert "active, " in result.output and "warnings" in result.output
    assert "shadowed by" in result.output
    assert "3 loaded (2 active, 1 shadowed), 1 rejected." in result.output
    as_json = runner.invoke(app, ["skills", "list", str(messy), str(other), "--format", "json"])
    [shadowed] = [row for row in json.loads(as_json.output) if row["status"] == "shadowed"]
    assert (shadowed["source"], shadowed["shadowed_by"]) == (str(other), f"{messy}:good")


def test_list_json_has_one_row_per_entry_and_problem(messy: Path) -> None:
    result = runner.invoke(app, ["skills", "list", str(messy), "--format", "json"])
    rows = json.loads(result.output)
    assert [(r["id"], r["status"]) for r in rows] == [
        ("good", "active"),
        ("warned", "active"),
        ("broken", "rejected"),
    ]
    assert rows[1]["meta"]["author"] == "me"
    assert {d["code"] for d in rows[1]["diagnostics"]} >= {"yaml-unquoted-colon", "unknown-field"}


def test_list_of_a_missing_folder_fails(tmp_path: Path) -> None:
    result = runner.invoke(app, ["skills", "list", str(tmp_path / "nope")])
    assert result.exit_code == 1
    assert "does not exist" in result.output


def test_validate_lenient_reports_warnings_and_fails_on_the_broken_skill(messy: Path) -> None:
    result = runner.invoke(app, ["skills", "validate", str(messy)])
    assert result.exit_code == 1
    assert f"ok      {messy / 'good'}" in result.output
    assert f"invalid {messy / 'broken'}" in result.output
    assert "warning yaml-unquoted-colon (line 3)" in result.output
    assert "3 checked (lenient): 2 valid, 1 invalid." in result.output


def test_validate_strict_json_matches_skills_ref_messages(messy: Path) -> None:
    result = runner.invoke(app, ["skills", "validate", "--strict", "--format", "json", str(messy)])
    assert result.exit_code == 1
    report = json.loads(result.output)
    assert report["mode"] == "strict" and report["valid"] is False
    for item in report["skills"]:
        messages = [d["message"] for d in item["diagnostics"]]
        assert messages == skills_ref.validate(Path(item["path"]))
        assert item["valid"] is (not messages)


def test_validate_accepts_a_skill_md_path_and_reports_missing_paths(
    messy: Path, tmp_path: Path
) -> None:
    ok = runner.invoke(app, ["skills", "validate", str(messy / "good" / "SKILL.md")])
    assert ok.exit_code == 0, ok.output
    missing = runner.invoke(app, ["skills", "validate", "--strict", str(tmp_path / "nope")])
    assert missing.exit_code == 1
    assert f"Path does not exist: {tmp_path / 'nope'}" in missing.output


def test_show_prints_metadata_resources_and_body() -> None:
    result = runner.invoke(app, ["skills", "show", "csv-insights", "--from", str(EXAMPLES)])
    assert result.exit_code == 0, result.output
    assert "name: csv-insights" in result.output
    assert "scripts: scripts/summarize.py" in result.output
    assert "references: references/REFERENCE.md" in result.output
    assert "# CSV insights" in result.output
    assert "---" not in result.output.split("# CSV insights")[0]


def test_show_unknown_name_lists_the_known_ones() -> None:
    result = runner.invoke(app, ["skills", "show", "nope", "--from", str(EXAMPLES)])
    assert result.exit_code == 1
    assert "Skill 'nope' not found" in result.output
    assert "commit-message, csv-insights, release-notes, skill-authoring" in result.output


def test_show_unknown_name_in_a_large_collection_is_a_bounded_message(tmp_path: Path) -> None:
    # Before: the message named every skill of the collection and the whole name asked for.
    for i in range(60):
        skill(tmp_path, f"s{i:02d}", f"---\nname: s{i:02d}\ndescription: Skill {i}.\n---\nB\n")
    result = runner.invoke(app, ["skills", "show", "n" * 5000, "--from", str(tmp_path)])
    assert result.exit_code == 1
    assert "s00, s01" in result.output and "and 40 more" in result.output
    assert "s59" not in result.output and len(result.output) < 1000


def test_show_a_rejected_skill_explains_why(messy: Path) -> None:
    result = runner.invoke(app, ["skills", "show", "broken", "--from", str(messy)])
    assert result.exit_code == 1
    assert "skill 'broken' could not be loaded" in result.output
    assert "error invalid-yaml" in result.output


def test_prompt_xml_is_identical_to_skills_ref_to_prompt() -> None:
    result = runner.invoke(app, ["skills", "prompt", str(EXAMPLES), "--format", "xml"])
    assert result.exit_code == 0, result.output
    assert (
        result.output
        == skills_ref.to_prompt(sorted(p for p in EXAMPLES.iterdir() if p.is_dir())) + "\n"
    )


def test_prompt_markdown_respects_the_budget() -> None:
    result = runner.invoke(app, ["skills", "prompt", str(EXAMPLES), "--budget", "700"])
    assert result.exit_code == 0, result.output
    text = result.output.rstrip("\n")
    assert len(text) <= 700
    assert text.startswith("- **commit-message**")
    assert "more skills not listed here" in text.splitlines()[-1]


def test_the_installed_command_runs_in_a_subprocess() -> None:
    completed = subprocess.run(
        [
            sys.executable,
            "-c",
            "from plait.cli import main; main()",
            "skills",
            "list",
            str(EXAMPLES),
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert completed.returncode == 0, completed.stderr
    assert sorted(row["name"] for row in json.loads(completed.stdout)) == [
        "commit-message",
        "csv-insights",
        "release-notes",
        "skill-authoring",
    ]
