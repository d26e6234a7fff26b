"""Issue 11 §4: one bad SKILL.md never hides anything else.

Recursive aliases, deep nesting and alias bombs are refused with a ``yaml-too-large`` error in
every path (strict, lenient, discovery, CLI JSON), and the rest of the source loads.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from plait.cli.app import app
from plait.skills import (
    Code,
    FilesystemSource,
    SkillCatalog,
    ValidationMode,
    check_skill_md,
)
from plait.skills.yaml_bounds import YamlLimits, _plainly_within, _walk, yaml_bound_problem

runner = CliRunner()
SkillWriter = Callable[..., Path]


def _skill(*lines: str) -> bytes:
    return ("---\nname: x\ndescription: y\n" + "\n".join(lines) + "\n---\nbody\n").encode()


def _bomb(levels: int, leaf: str, fanout: int = 10) -> bytes:
    """An alias bomb: each level lists the previous one ``fanout`` times."""
    lines = [f"a0: &a0 [{leaf}, {leaf}]"]
    for level in range(1, levels + 1):
        refs = ", ".join([f"*a{level - 1}"] * fanout)
        lines.append(f"a{level}: &a{level} [{refs}]")
    return _skill(*lines)


HOSTILE = {
    "recursive sequence": _skill("x: &a [*a]"),
    "recursive mapping value": _skill("x: &a {k: *a}"),
    "recursive mapping key": _skill("x: &a {? *a : 1}"),
    "recursive block mapping": _skill("x: &a", "  k: *a"),
    "flow nesting 500 deep": _skill("x: " + "{a: " * 500 + "1" + "}" * 500),
    "sequence nesting 5000 deep": _skill("x: " + "[" * 5000 + "]" * 5000),
    "block nesting 200 deep": _skill(
        "x:", *(" " * (2 * i) + "k:" for i in range(1, 200)), " " * 400 + "k: 1"
    ),
    "bomb with unconstructible leaves": _bomb(7, "!!timestamp 2024-13-45"),
    "lol bomb": _bomb(9, '"lol"', fanout=9),
    "alias repeating a long string": _skill(
        "s: &s " + "x" * 5000,
        "l: &l [" + ", ".join(["*s"] * 100) + "]",
        "m: [" + ", ".join(["*l"] * 10) + "]",
    ),
}


@pytest.mark.parametrize("data", HOSTILE.values(), ids=HOSTILE.keys())
@pytest.mark.parametrize("mode", list(ValidationMode))
def test_hostile_yaml_is_one_typed_error_in_both_modes(data: bytes, mode: ValidationMode) -> None:
    check = check_skill_md(data, folder_name="x", file="x/SKILL.md", mode=mode)
    assert check.meta is None
    assert [d.code for d in check.diagnostics if d.is_error] == [Code.YAML_TOO_LARGE]


def test_the_issue_reproducer_no_longer_raises() -> None:
    check = check_skill_md(
        b"---\nname: x\ndescription: y\nx: &a [*a]\n---\nbody\n", folder_name="x"
    )
    (error,) = [d for d in check.diagnostics if d.is_error]
    assert error.code is Code.YAML_TOO_LARGE
    assert "recursive alias" in error.message
    assert error.line == 4


def test_anchors_within_the_bounds_still_load() -> None:
    check = check_skill_md(_skill("base: &b {k: v}", "copy: *b", "list: [*b, *b]"), folder_name="x")
    assert check.meta is not None
    assert check.meta.extra["copy"] == {"k": "v"}
    assert check.meta.extra["list"] == [{"k": "v"}, {"k": "v"}]


def test_each_bound_is_configurable() -> None:
    nested = "a: [[[1]]]\n"
    assert yaml_bound_problem(nested) is None
    deep = yaml_bound_problem(nested, YamlLimits(max_depth=3))
    assert deep is not None and "nested more than 3" in deep.message
    many = yaml_bound_problem("a: [1, 2, 3]\n", YamlLimits(max_nodes=3))
    assert many is not None and "more than 3 values" in many.message
    chars = yaml_bound_problem("a: &s xxxx\nb: [*s, *s]\n", YamlLimits(max_chars=10))
    assert chars is not None and "10 characters" in chars.message


def test_yaml_that_does_not_parse_is_left_to_the_composer() -> None:
    assert yaml_bound_problem("a: [1,\n") is None


@pytest.mark.parametrize("data", HOSTILE.values(), ids=HOSTILE.keys())
def test_a_hostile_skill_beside_two_good_ones_hides_nothing(
    data: bytes, write_skill: SkillWriter, tmp_path: Path
) -> None:
    write_skill("alpha")
    write_skill("bravo")
    write_skill("x", data)
    catalog = SkillCatalog([FilesystemSource(tmp_path / "skills")])
    asyncio.run(catalog.load())
    assert sorted(e.name for e in catalog.entries()) == ["alpha", "bravo"]
    assert [p.id for p in catalog.problems()] == ["x"]
    assert not catalog.diagnostics(code=Code.SOURCE_UNAVAILABLE)


def test_cli_list_json_on_a_lol_bomb_reports_it(write_skill: SkillWriter, tmp_path: Path) -> None:
    write_skill("alpha")
    write_skill("x", HOSTILE["lol bomb"])
    result = runner.invoke(app, ["skills", "list", str(tmp_path / "skills"), "--format", "json"])
    assert result.exit_code == 0, result.output
    rows = {row["id"]: row for row in json.loads(result.output)}
    assert rows["alpha"]["status"] == "active"
    assert rows["x"]["status"] == "rejected"
    assert rows["x"]["diagnostics"][0]["code"] == "yaml-too-large"


_YAML_PIECES = st.sampled_from(
    ["- ", "? ", ": ", "a", "b: ", "[", "]", "{", "}", ", ", "\n", "  ", "\t", "'q'", "|", "#"]
)


@settings(max_examples=300, deadline=None)
@given(text=st.lists(_YAML_PIECES, max_size=200).map("".join))
def test_the_cheap_pre_check_never_passes_what_the_event_walk_refuses(text: str) -> None:
    small = YamlLimits(max_depth=6, max_nodes=10_000, max_chars=100_000)
    if _plainly_within(text, small):
        assert _walk_problem(text, small) is None


def _walk_problem(text: str, limits: YamlLimits) -> object:
    loader = yaml.SafeLoader(text)
    try:
        return _walk(loader, limits)
    except yaml.YAMLError:
        return None
    finally:
        loader.dispose()
