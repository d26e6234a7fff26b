"""``plait demo``: the README's main job, through the console script, with no key or network."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from cli_inprocess import run_plait


def test_demo_runs_the_whole_lifecycle_labelled_as_scripted(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
    env.update({"COLUMNS": "200", "NO_COLOR": "1", "PLAIT_HOME": str(tmp_path)})
    result = subprocess.run(
        [sys.executable, "-m", "plait", "demo"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "scripted model" in out
    for step in (
        "→ read_file",
        "+ tools unlocked: csv_rows",
        "→ csv_rows",
        "⇣ evicted csv_rows result",
        "→ read_evicted_result",
        "≡ summarized",
        "- tools withdrawn: csv_rows",
        "North sold the most",
    ):
        assert step in out, step
    assert "✗" not in out and out.count("✓ │") == 7
    # recorded for plait ui, beside the CLI's thread store
    assert (tmp_path / "threads-traces.sqlite3").is_file()
    assert "trace: plait ui  →  http://127.0.0.1:7600/#" in out


def test_demo_with_a_missing_skills_folder_is_a_usage_error(tmp_path: Path) -> None:
    result = run_plait("demo", "--skills", str(tmp_path / "nope"), home=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Skills folder not found" in " ".join(result.stderr.split())


def test_demo_checklist_is_honest_about_a_folder_without_csv_insights(tmp_path: Path) -> None:
    # Before: the catalog row showed ✗ although the folder's catalog was in the prompt.
    skills = tmp_path / "skills" / "notes"
    skills.mkdir(parents=True)
    (skills / "SKILL.md").write_text(
        "---\nname: notes\ndescription: Keep notes. Use for notes.\n---\nBody.\n"
    )
    result = run_plait("demo", "--skills", str(tmp_path / "skills"), "--no-trace", home=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    rows = {
        line.split("│")[2].strip(): line.split("│")[1].strip()
        for line in result.stdout.splitlines()
        if line.count("│") == 3
    }
    assert rows["catalog of skills in the system prompt"] == "✓"
    assert rows["csv-insights listed in it"] == "✗"
    assert "no csv-insights skill" in " ".join((result.stdout + result.stderr).split())
