"""The file tools' work over a real folder: hostile names, links, FIFOs and patterns."""

from __future__ import annotations

from pathlib import Path

import pytest

from plait.workspace.files import glob_files, glob_pattern
from plait.workspace.paths import WorkspaceRoot


@pytest.mark.parametrize(
    ("pattern", "yes", "no"),
    [
        ("**", ["a", "a/b/c"], []),
        ("src/**", ["src/a", "src/a/b"], ["src", "a/src/b"]),
        ("**/t/**/*.py", ["t/a.py", "x/t/y/z/a.py"], ["t.py", "x/a.py"]),
        ("*a*b*c", ["abc", "xaxbxc", "aabbcc"], ["acb", "a/bc"]),
        ("a*b?c*", ["abxc", "aaabbbxcz"], ["abc"]),
        ("*[!a]", ["ab"], ["a/a", "ba"]),
        ("*.tar.gz", ["x.tar.gz"], ["x.tar.gzz", "d/x.tar.gz"]),
    ],
)
def test_glob_patterns_segment_by_segment(pattern: str, yes: list[str], no: list[str]) -> None:
    matcher = glob_pattern(pattern)
    assert [p for p in yes if not matcher.match(p)] == []
    assert [p for p in no if matcher.match(p)] == []


async def test_a_pattern_of_many_stars_does_not_backtrack_forever(tmp_path: Path) -> None:
    # As one backtracking regex this took 37 s at 8 stars over a 60-character name, holding
    # the GIL (the event loop stalled); each star more multiplies it by the name's length.
    (tmp_path / ("a" * 200)).write_text("")
    (tmp_path / ("a" * 20 + "b")).write_text("")
    found = await glob_files(WorkspaceRoot(tmp_path), "*a" * 40 + "*b")
    assert found.splitlines()[1:] == []
    found = await glob_files(WorkspaceRoot(tmp_path), "*a" * 20 + "*b")
    assert found.splitlines()[1:] == ["a" * 20 + "b"]


async def test_a_leading_dot_slash_keeps_a_hidden_folder(tmp_path: Path) -> None:
    (tmp_path / ".github").mkdir()
    (tmp_path / ".github" / "ci.yml").write_text("")
    (tmp_path / "github").mkdir()
    (tmp_path / "github" / "other.yml").write_text("")
    found = await glob_files(WorkspaceRoot(tmp_path), "./.github/*.yml")
    assert found.splitlines()[1:] == [".github/ci.yml"]
