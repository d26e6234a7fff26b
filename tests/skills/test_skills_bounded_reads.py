"""Issue 11 §6 (skills): skill files are read within bounds, FIFOs and devices are named.

The 1 GiB files here are sparse (a few KiB on disk): only a bounded read of them can pass the
memory check, which uses ``tracemalloc`` (no timing).
"""

from __future__ import annotations

import os
import re
import stat
import tracemalloc
from pathlib import Path

import pytest

from plait.paths import PathEscapeError
from plait.skills import (
    BackendSource,
    DiscoveryProblem,
    FilesystemSource,
    MemorySource,
    PromptFormat,
    SkillCatalog,
    SkillFileNotFound,
)
from plait.skills.disclosure.read_file import read_skill_file
from plait.skills.disclosure.snapshot import SkillSnapshot, take_snapshot
from plait.skills.errors import SkillFileTooLarge, SkillFileUnreadable
from plait.skills.managed.scripts import materialize
from plait.skills.sources.reading import read_line_page, read_regular

GIB = 1024**3
MD = "---\nname: big\ndescription: Has big files.\n---\n# big\n"


def _skill(root: Path) -> Path:
    folder = root / "skills" / "big"
    (folder / "references").mkdir(parents=True)
    (folder / "SKILL.md").write_text(MD)
    return folder


def _sparse(path: Path, head: bytes, size: int = GIB) -> None:
    with path.open("wb") as handle:
        handle.write(head)
        handle.truncate(size)


async def _snapshot(catalog: SkillCatalog) -> SkillSnapshot:
    await catalog.load()
    return take_snapshot(catalog, format=PromptFormat.MARKDOWN, budget=None, instructions=None)


async def test_read_file_limit_1_on_a_1_gib_file_reads_one_line(tmp_path: Path) -> None:
    folder = _skill(tmp_path)
    lines = b"".join(b"line %d of the log\n" % i for i in range(2000))
    _sparse(folder / "references" / "huge.log", lines)
    catalog = SkillCatalog([FilesystemSource(tmp_path / "skills")])
    snapshot = await _snapshot(catalog)
    path = str(folder / "references" / "huge.log")
    tracemalloc.start()
    try:
        first = await read_skill_file(catalog, snapshot, path, 0, 1)
        paged = await read_skill_file(catalog, snapshot, path, 1500, 2)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert first == f"[{path}: lines 1-1 of ?; next offset 1]\nline 0 of the log\n"
    assert paged.endswith("line 1500 of the log\nline 1501 of the log\n")
    assert peak < 16 * 1024 * 1024  # the file is 1 GiB; a whole read needs over 1 GiB


async def test_read_file_of_a_whole_small_file_is_verbatim(tmp_path: Path) -> None:
    folder = _skill(tmp_path)
    (folder / "references" / "a.md").write_text("one\ntwo")
    catalog = SkillCatalog([FilesystemSource(tmp_path / "skills")])
    snapshot = await _snapshot(catalog)
    text = await read_skill_file(catalog, snapshot, str(folder / "references" / "a.md"))
    assert text == "one\ntwo"
    page = await read_skill_file(catalog, snapshot, str(folder / "references" / "a.md"), 1, 5)
    assert page == f"[{folder / 'references' / 'a.md'}: lines 2-2 of 2; end of file]\ntwo"


async def test_source_read_refuses_a_file_over_max_file_bytes(tmp_path: Path) -> None:
    folder = _skill(tmp_path)
    _sparse(folder / "references" / "huge.bin", b"x", GIB)
    (folder / "references" / "ok.txt").write_bytes(b"y" * 2000)
    source = FilesystemSource(tmp_path / "skills", max_file_bytes=1000)
    with pytest.raises(SkillFileTooLarge, match="over the 1000-byte limit") as caught:
        await source.read("big", "references/huge.bin")
    assert "max_file_bytes" in str(caught.value)
    with pytest.raises(SkillFileTooLarge):
        await source.read("big", "references/ok.txt")
    assert len(await FilesystemSource(tmp_path / "skills").read("big", "references/ok.txt")) == 2000


def test_a_file_longer_than_its_stat_size_is_read_whole_and_still_capped() -> None:
    # procfs reports size 0 for a file that holds more: the case of a file grown since its stat
    status = Path("/proc/self/status")
    assert status.stat().st_size == 0
    data = read_regular(status, "status", 1_000_000)
    assert data.startswith(b"Name:") and b"\nPid:" in data
    with pytest.raises(SkillFileTooLarge, match="is larger than the 50-byte limit") as caught:
        read_regular(status, "status", 50)
    # read only to the cap: its size is unknown, not the 51 bytes read (the message said so)
    assert caught.value.size is None


@pytest.mark.parametrize(("size", "refused"), [(999, False), (1000, False), (1001, True)])
def test_the_cap_is_exact_a_file_of_max_file_bytes_reads(
    tmp_path: Path, size: int, refused: bool
) -> None:
    folder = tmp_path / "skills" / "edge"
    folder.mkdir(parents=True)
    head = b"---\nname: edge\ndescription: At the cap.\n---\n"
    (folder / "SKILL.md").write_bytes(head + b"x" * (size - len(head)))
    assert len(read_regular(folder / "SKILL.md", "SKILL.md", size)) == size
    (item,) = FilesystemSource(tmp_path / "skills", max_file_bytes=1000).scan()
    assert isinstance(item, DiscoveryProblem) is refused
    if refused:
        assert f"SKILL.md is {size} bytes, over the 1000-byte limit" in str(item.diagnostics[0])


async def test_a_fifo_is_refused_by_name_and_not_listed(tmp_path: Path) -> None:
    folder = _skill(tmp_path)
    os.mkfifo(folder / "pipe")
    (folder / "notes.md").write_text("n")
    source = FilesystemSource(tmp_path / "skills")
    with pytest.raises(SkillFileUnreadable, match="'pipe' is a FIFO"):
        await source.read("big", "pipe")
    assert await source.list("big") == ["notes.md"]
    catalog = SkillCatalog([source])
    snapshot = await _snapshot(catalog)
    with pytest.raises(SkillFileUnreadable, match="not a regular file"):
        await read_skill_file(catalog, snapshot, str(folder / "pipe"))


async def test_a_device_is_refused_by_name(tmp_path: Path) -> None:
    folder = _skill(tmp_path)
    # CI runs as root (mknod of a character device needs CAP_MKNOD); /dev/zero's numbers
    os.mknod(folder / "zero", stat.S_IFCHR | 0o600, os.makedev(1, 5))
    source = FilesystemSource(tmp_path / "skills")
    with pytest.raises(SkillFileUnreadable, match="'zero' is a device"):
        await source.read("big", "zero")
    assert await source.list("big") == []


async def test_links_leaving_the_folder_or_dangling_are_refused(tmp_path: Path) -> None:
    folder = _skill(tmp_path)
    (folder / "dev").symlink_to("/dev/zero")
    os.symlink(folder / "notes", folder / "dangling")
    source = FilesystemSource(tmp_path / "skills")
    with pytest.raises(SkillFileNotFound):
        await source.read("big", "dangling")
    with pytest.raises(PathEscapeError):
        await source.read("big", "dev")


def test_a_skill_md_over_the_cap_is_a_diagnostic_not_a_read(tmp_path: Path) -> None:
    folder = tmp_path / "skills" / "huge"
    folder.mkdir(parents=True)
    _sparse(folder / "SKILL.md", MD.encode(), GIB)
    items = FilesystemSource(tmp_path / "skills").scan()
    (problem,) = items
    assert problem.diagnostics[0].code.value == "file-too-large"


def test_line_pages_count_lines_only_for_files_up_to_64_mib(tmp_path: Path) -> None:
    small = tmp_path / "small.txt"
    small.write_bytes(b"a\nb\nc")
    page = read_line_page(small, 0, 1, 100)
    assert (page.lines, page.total, page.cut) == (("a\n",), 3, False)
    long_line = tmp_path / "long.txt"
    long_line.write_bytes(b"x" * 1000 + b"\nend\n")
    page = read_line_page(long_line, 0, None, 100)
    assert page.cut and page.total == 2 and page.lines[0].startswith("x" * 100)
    binary = tmp_path / "b.bin"
    binary.write_bytes(b"\x00\x01")
    assert read_line_page(binary, 0, None, 100).binary


async def test_script_workspace_copy_is_bounded_in_total(tmp_path: Path) -> None:
    parent = tmp_path / "workspaces"
    parent.mkdir()
    files: dict[str, str | bytes] = {"scripts/a.py": b"a" * 600, "scripts/b.py": b"b" * 600}
    source = MemorySource({"tools": {"SKILL.md": MD.replace("big", "tools"), **files}})
    await SkillCatalog([source]).load()
    with pytest.raises(SkillFileTooLarge, match="the files of skill 'tools'"):
        await materialize(source, "tools", list(files), "tools", str(parent), max_bytes=1000)
    assert not os.listdir(parent)  # the partial copy was removed
    workspace = await materialize(source, "tools", list(files), "tools", str(parent))
    assert (workspace.root / "scripts" / "b.py").read_bytes() == b"b" * 600
    workspace.dispose()


class _Backend:
    """A BackendReadSurface over a dict that records how much each read asked for."""

    def __init__(self, files: dict[str, str]) -> None:
        self.files = files
        self.limits: list[int | None] = []

    async def read(self, path: str, offset: int = 0, limit: int | None = None) -> str:
        self.limits.append(limit)
        text = self.files[path][offset:]
        return text if limit is None else text[:limit]

    async def exists(self, path: str) -> bool:
        return path in self.files

    async def ls(self, prefix: str = "") -> list[str]:
        return sorted(p for p in self.files if p.startswith(prefix))


async def test_backend_source_reads_at_most_max_file_bytes() -> None:
    backend = _Backend(
        {"skills/big/SKILL.md": MD, "skills/big/data.txt": "d" * 5000, "skills/big/ok.txt": "o"}
    )
    source = BackendSource(backend, max_file_bytes=1000)
    with pytest.raises(SkillFileTooLarge, match="larger than the 1000-byte limit"):
        await source.read("big", "data.txt")
    assert await source.read("big", "ok.txt") == b"o"
    assert set(backend.limits) == {1001}


async def test_backend_source_caps_bytes_not_characters() -> None:
    # Before: 600 two-byte characters (1200 bytes) passed a 1000-byte cap.
    backend = _Backend({"skills/big/SKILL.md": MD, "skills/big/wide.txt": "é" * 600})
    source = BackendSource(backend, max_file_bytes=1000)
    with pytest.raises(SkillFileTooLarge, match="larger than the 1000-byte limit"):
        await source.read("big", "wide.txt")
    backend.files["skills/big/fits.txt"] = "é" * 500
    assert await source.read("big", "fits.txt") == ("é" * 500).encode()


async def _page_all(catalog: SkillCatalog, snapshot: SkillSnapshot, path: str) -> str:
    """Follow read_file's headers (next offset, start) from the top; the text read."""
    pieces: list[str] = []
    offset, start = 0, 0
    for _ in range(50):
        page = await read_skill_file(
            catalog, snapshot, path, offset, None, max_chars=100, start=start
        )
        header, _, body = page.partition("\n")
        if "characters" in header:  # one piece of a long line: no newline of its own
            body = body[:-1]
        pieces.append(body)
        found = re.search(r"next offset (\d+)(?:, start (\d+))?", header)
        if found is None:
            return "".join(pieces)
        offset, start = int(found[1]), int(found[2] or 0)
    raise AssertionError("paging did not end")


@pytest.mark.parametrize("kind", ["filesystem", "memory"])
async def test_every_character_of_a_long_line_is_reachable_by_paging(
    tmp_path: Path, kind: str
) -> None:
    # Before: a line longer than max_chars was cut and the rest of it could never be read.
    text = "head\n" + "é" * 130 + "x" * 120 + "\nmiddle\n" + "z" * 205 + "\ntail\n"
    if kind == "filesystem":
        folder = _skill(tmp_path)
        (folder / "long.txt").write_text(text)
        catalog = SkillCatalog([FilesystemSource(tmp_path / "skills")])
        path = str(folder / "long.txt")
    else:
        catalog = SkillCatalog([MemorySource({"big": {"SKILL.md": MD, "long.txt": text}})])
        path = "/skills/big/long.txt"
    snapshot = await _snapshot(catalog)
    assert await _page_all(catalog, snapshot, path) == text
    piece = await read_skill_file(catalog, snapshot, path, 1, None, max_chars=100, start=100)
    assert piece.startswith(f"[{path}: line 2 of 5, characters 101-")


@pytest.mark.parametrize(
    ("text", "start", "rest"),
    [
        ("ab\néx\n", 4, "\n"),  # the chunk read holds the newline and ends inside a character
        ("aéé\nq\n", 4, "\n"),  # an earlier chunk ended inside a character
        ("aéé\nq\n", 2, "é\n"),
        ("aé\nq\n", 5, "\n"),
    ],
)
def test_a_start_within_or_past_the_first_line_never_reads_into_the_next(
    tmp_path: Path, text: str, start: int, rest: str
) -> None:
    target = tmp_path / "notes.md"
    target.write_bytes(text.encode())
    page = read_line_page(target, 0, 1, 100, start=start)
    assert page.lines == (rest,)
