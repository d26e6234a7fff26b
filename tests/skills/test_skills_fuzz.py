"""Arbitrary input as SKILL.md only ever yields diagnostics, never an untyped exception.

Examples per test: ``PLAIT_FUZZ_EXAMPLES`` (default 100, a few seconds in CI); run longer with
``PLAIT_FUZZ_EXAMPLES=20000 python -m pytest tests/skills/test_skills_fuzz.py``.
"""

from __future__ import annotations

import json
import os
import signal
import tempfile
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plait.skills import (
    Diagnostic,
    DiscoveryProblem,
    FilesystemSource,
    SkillEntry,
    SkillMeta,
    ValidationMode,
    check_skill_md,
)
from plait.skills.render import render_markdown, render_xml
from plait.skills.sources import assess_skill_md

EXAMPLES = int(os.environ.get("PLAIT_FUZZ_EXAMPLES", "100"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

_fragments = st.sampled_from(
    [
        "---",
        "--- ",
        "name: x",
        "name:",
        "description: Use when: y",
        "description: |",
        "  line",
        "\tname: t",
        "metadata:",
        "  a: b",
        "  - c",
        "allowed-tools: [a, b",
        "&a x",
        "*a",
        "!!python/object:os.system x",
        "? [a]",
        ": v",
        "'unclosed",
        '"\\q"',
        "\ufeff",
        "\r",
        "...",
        "%YAML 1.1",
        "key: 2024-13-45",
        "{",
        "[" * 40,
        "- " * 50,
        "\x00",
    ]
)
_skill_text = st.lists(st.one_of(_fragments, st.text(max_size=30)), max_size=20).map("\n".join)


def _assert_only_diagnostics(data: bytes | str, folder: str | None) -> None:
    for mode in ValidationMode:
        check = check_skill_md(data, folder_name=folder, file="f/SKILL.md", mode=mode)
        assert all(isinstance(d, Diagnostic) for d in check.diagnostics)
        assert isinstance(check.body, str)
        if check.meta is None:
            assert any(d.is_error for d in check.diagnostics)
        else:
            assert isinstance(check.meta, SkillMeta)
            assert check.meta.name.strip() and check.meta.description.strip()


@FUZZ
@given(data=st.binary(max_size=2000), folder=st.one_of(st.none(), st.text(max_size=20)))
def test_arbitrary_bytes_yield_only_diagnostics(data: bytes, folder: str | None) -> None:
    _assert_only_diagnostics(data, folder)


@FUZZ
@given(text=_skill_text, folder=st.sampled_from(["x", "my-skill", ""]))
def test_skill_shaped_text_yields_only_diagnostics(text: str, folder: str) -> None:
    _assert_only_diagnostics(text, folder)
    _assert_only_diagnostics("---\n" + text + "\n---\nbody", folder)


@FUZZ
@given(text=_skill_text)
def test_discovery_of_any_file_gives_an_entry_or_a_problem_and_renders(text: str) -> None:
    data = ("---\n" + text + "\n---\n").encode("utf-8", errors="replace")
    item = assess_skill_md(
        data, source_id="s", skill_id="x", folder_name="x", location="/skills/x/SKILL.md"
    )
    assert isinstance(item, (SkillEntry, DiscoveryProblem))
    if isinstance(item, SkillEntry):
        assert "\n" not in render_markdown([item])
        assert render_xml([item]).startswith("<available_skills>\n<skill>")
    else:
        assert any(d.is_error for d in item.diagnostics)


# --- mutated real SKILL.md files: typed diagnostics only, bounded time and memory -------------

_EXAMPLES_DIR = Path(__file__).parents[2] / "examples" / "skills"
_SEEDS = [
    *sorted(p.read_bytes() for p in _EXAMPLES_DIR.glob("*/SKILL.md")),
    b"---\nname: pdf\ndescription: Fill PDF forms. Use when: the user sends a PDF\n"
    b"license: MIT\nmetadata:\n  author: a\n  version: '1.0'\nallowed-tools: Bash(git:*) Read\n"
    b"---\n# PDF\n\nSteps.\n",
    b"# No frontmatter\n\n[![badge](x.svg)](y)\n\n---\n\nProse paragraph here.\n",
]

_PEAK_BYTES = 64 * 1024 * 1024
"""Peak Python memory one example may allocate (the 1 GB bombs of issue 11 are far above)."""
_WATCHDOG_SECONDS = 20
"""A hang guard, not a performance check: each example takes milliseconds."""


def _insert(data: bytes, at: int, piece: bytes) -> bytes:
    at = at % (len(data) + 1)
    return data[:at] + piece + data[at:]


def _frontmatter_end(data: bytes) -> int:
    end = data.find(b"\n---", 3)
    return end if end > 0 else len(data)


_MUTATIONS: dict[str, Callable[[bytes, int], bytes]] = {
    "truncate": lambda d, n: d[: n % (len(d) + 1)],
    "invalid-utf8": lambda d, n: _insert(d, n, b"\xff\xfe\xc3"),
    "nul": lambda d, n: _insert(d, n, b"\x00"),
    "bom": lambda d, n: b"\xef\xbb\xbf" + d,
    "crlf": lambda d, n: d.replace(b"\n", b"\r\n"),
    "cr": lambda d, n: d.replace(b"\n", b"\r"),
    "tabs": lambda d, n: d.replace(b"\n  ", b"\n\t"),
    "fence-extra": lambda d, n: _insert(d, n, b"\n---\n"),
    "fence-odd": lambda d, n: d.replace(b"---", [b"----", b"--- x", b" ---", b"..."][n % 4], 1),
    "fence-drop-close": lambda d, n: d[:3] + d[3:].replace(b"\n---", b"\n", 1),
    "not-mapping": lambda d, n: (
        b"---\n" + [b"- a\n- b", b"just text", b"42", b"[1]"][n % 4] + d[_frontmatter_end(d) :]
    ),
    "tag": lambda d, n: _insert(
        d,
        _frontmatter_end(d),
        [
            b"\nx: !!python/object:os.system a",
            b"\ny: !custom 1",
            b"\nz: !!binary AAA",
            b"\nw: !!timestamp 2024-99-99",
        ][n % 4],
    ),
    "alias": lambda d, n: _insert(
        d, _frontmatter_end(d), b"\nq: &q [" + b",".join([b"*q"] * (1 + n % 3)) + b"]"
    ),
    "bomb": lambda d, n: _insert(
        d,
        _frontmatter_end(d),
        b"\nb0: &b0 [x, y]"
        + b"".join(
            b"\nb%d: &b%d [%s]" % (i, i, b",".join([b"*b%d" % (i - 1)] * 9))
            for i in range(1, 3 + n % 9)
        ),
    ),
    "deep": lambda d, n: _insert(
        d, _frontmatter_end(d), b"\nd: " + b"[" * (10 + n % 3000) + b"]" * (10 + n % 3000)
    ),
    "huge-value": lambda d, n: _insert(d, _frontmatter_end(d), b"\nh: " + b"v" * (n % 400_000)),
    "huge-body": lambda d, n: d + b"\n" + b"word " * (n % 200_000),
    "random-bytes": lambda d, n: _insert(d, n, os.urandom(1 + n % 40)),
}

_mutation = st.tuples(st.sampled_from(sorted(_MUTATIONS)), st.integers(0, 1 << 20))
_mutated = st.tuples(st.sampled_from(_SEEDS), st.lists(_mutation, min_size=1, max_size=4))


@contextmanager
def _bounded() -> Iterator[None]:
    """Fail on a hang (SIGALRM watchdog) or on a peak allocation over :data:`_PEAK_BYTES`."""

    def hang(signum: int, frame: object) -> None:
        raise AssertionError(f"an example ran past the {_WATCHDOG_SECONDS}s hang guard")

    previous = signal.signal(signal.SIGALRM, hang)
    signal.alarm(_WATCHDOG_SECONDS)
    tracemalloc.start()
    try:
        yield
        _, peak = tracemalloc.get_traced_memory()
        assert peak < _PEAK_BYTES, f"peak allocation {peak} bytes"
    finally:
        tracemalloc.stop()
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@FUZZ
@given(case=_mutated)
def test_mutated_real_skill_md_yields_typed_diagnostics_in_bounded_memory(
    case: tuple[bytes, list[tuple[str, int]]],
) -> None:
    data, mutations = case
    for name, n in mutations:
        data = _MUTATIONS[name](data, n)
    with _bounded():
        _assert_only_diagnostics(data, "pdf")
        item = assess_skill_md(
            data, source_id="s", skill_id="pdf", folder_name="pdf", location="pdf/SKILL.md"
        )
        if isinstance(item, SkillEntry):
            json.dumps(item.meta.to_dict(), default=str)  # what `skills list --format json` does
            render_markdown([item])


@FUZZ
@given(case=_mutated)
def test_a_mutated_skill_md_never_hides_its_neighbours(
    case: tuple[bytes, list[tuple[str, int]]],
) -> None:
    data, mutations = case
    for name, n in mutations:
        data = _MUTATIONS[name](data, n)
    with tempfile.TemporaryDirectory() as root:
        for folder, content in (("a-good", _SEEDS[0]), ("pdf", data), ("z-good", _SEEDS[1])):
            os.mkdir(os.path.join(root, folder))
            with open(os.path.join(root, folder, "SKILL.md"), "wb") as handle:
                handle.write(content)
        with _bounded():
            items = FilesystemSource(root).scan()
    loaded = {item.id for item in items if isinstance(item, SkillEntry)}
    assert {"a-good", "z-good"} <= loaded
    assert {item.id for item in items} == {"a-good", "pdf", "z-good"}
