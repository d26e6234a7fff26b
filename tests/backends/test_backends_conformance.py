"""The Backend contract, run against every backend (fsspec on both memory:// and file://)."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
from postgres_server import fresh_schema, postgres_url

from plait.backends import (
    Backend,
    BackendError,
    BackendReadSurface,
    BackendWriteSurface,
    FsspecBackend,
    LocalBackend,
    MemoryBackend,
    SQLiteBackend,
)
from plait.paths import PathEscapeError

BACKENDS = ["memory", "local", "sqlite", "fsspec-memory", "fsspec-file", "postgres"]
TEN_MB = 10 * 1024 * 1024


@pytest.fixture(params=BACKENDS)
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    kind = request.param
    if kind == "memory":
        yield MemoryBackend()
    elif kind == "local":
        yield LocalBackend(tmp_path / "root")
    elif kind == "sqlite":
        sqlite_backend = SQLiteBackend(tmp_path / "blobs.db")
        yield sqlite_backend
        await sqlite_backend.aclose()
    elif kind == "fsspec-memory":
        root = f"memory://plait-tests/{uuid.uuid4().hex}"
        memory_backend = FsspecBackend(root)
        yield memory_backend
        with contextlib.suppress(FileNotFoundError):
            memory_backend.fs.rm(memory_backend.root, recursive=True)
    elif kind == "fsspec-file":
        (tmp_path / "root").mkdir()
        yield FsspecBackend((tmp_path / "root").as_uri())
    else:
        from plait.backends.postgres import PostgresBackend

        async with fresh_schema(postgres_url()) as schema:
            pg_backend = PostgresBackend(postgres_url(), schema=schema, max_size=4)
            await pg_backend.setup()
            yield pg_backend
            await pg_backend.aclose()


def test_every_backend_implements_both_surfaces(backend: Backend) -> None:
    assert isinstance(backend, Backend)
    assert isinstance(backend, BackendWriteSurface)
    assert isinstance(backend, BackendReadSurface)


async def test_write_then_read_round_trips(backend: Backend) -> None:
    await backend.write("results/abc.txt", "hello\nworld")
    assert await backend.read("results/abc.txt") == "hello\nworld"
    assert await backend.exists("results/abc.txt")


async def test_write_returns_the_normalised_path(backend: Backend) -> None:
    assert await backend.write("/a//./b\\c.txt", "x") == "a/b/c.txt"
    assert await backend.read("a/b/c.txt") == "x"


async def test_overwrite_replaces_the_whole_text(backend: Backend) -> None:
    await backend.write("f", "a much longer first version")
    await backend.write("f", "short")
    assert await backend.read("f") == "short"


async def test_empty_text_is_stored_and_distinct_from_missing(backend: Backend) -> None:
    await backend.write("empty", "")
    assert await backend.exists("empty")
    assert await backend.read("empty") == ""
    assert await backend.read("empty", 5, 5) == ""


async def test_reading_a_missing_path_raises_file_not_found_naming_it(backend: Backend) -> None:
    with pytest.raises(FileNotFoundError, match="nowhere/to/be/found"):
        await backend.read("nowhere/to/be/found")
    assert not await backend.exists("nowhere/to/be/found")


async def test_leading_slash_and_dot_segments_name_the_same_blob(backend: Backend) -> None:
    await backend.write("/dir/./file", "same")
    assert await backend.read("dir/file") == "same"
    assert await backend.exists("/dir/file")
    assert await backend.ls() == ["dir/file"]


@pytest.mark.parametrize(
    "path", ["../x", "a/../../x", "/abs/../..", "a/..", "..", "a\\..\\..\\x", "a\x00b", "", "/"]
)
async def test_escaping_paths_are_refused_by_every_method(backend: Backend, path: str) -> None:
    with pytest.raises(PathEscapeError):
        await backend.write(path, "evil")
    with pytest.raises(PathEscapeError):
        await backend.read(path)
    with pytest.raises(PathEscapeError):
        await backend.exists(path)
    with pytest.raises(PathEscapeError):
        await backend.delete(path)
    assert await backend.ls() == []


@pytest.mark.parametrize("prefix", ["../", "a/../..", "x\x00"])
async def test_escaping_ls_prefixes_are_refused(backend: Backend, prefix: str) -> None:
    with pytest.raises(PathEscapeError):
        await backend.ls(prefix)


async def test_ls_is_recursive_sorted_and_bounded_by_directory(backend: Backend) -> None:
    for path in ("b/z", "a/2", "a/1", "a/sub/deep/x", "ab/1", "a.txt", "top"):
        await backend.write(path, path)
    everything = ["a.txt", "a/1", "a/2", "a/sub/deep/x", "ab/1", "b/z", "top"]
    assert await backend.ls() == everything
    for root in ("", "/", ".", "./"):
        assert await backend.ls(root) == everything
    assert await backend.ls("a") == ["a/1", "a/2", "a/sub/deep/x"]
    assert await backend.ls("/a/") == ["a/1", "a/2", "a/sub/deep/x"]
    assert await backend.ls("a/sub") == ["a/sub/deep/x"]
    assert await backend.ls("top") == ["top"]
    assert await backend.ls("missing") == []


async def test_delete_reports_whether_something_was_there(backend: Backend) -> None:
    await backend.write("d/one", "1")
    await backend.write("d/two", "2")
    assert await backend.delete("d/one") is True
    assert await backend.delete("d/one") is False
    assert await backend.delete("never") is False
    assert not await backend.exists("d/one")
    assert await backend.ls() == ["d/two"]
    with pytest.raises(FileNotFoundError):
        await backend.read("d/one")


async def test_exists_is_false_for_a_directory_prefix(backend: Backend) -> None:
    await backend.write("dir/file", "x")
    assert not await backend.exists("dir")


@pytest.mark.parametrize(
    ("offset", "limit", "expected"),
    [
        (0, None, "0123456789"),
        (0, 3, "012"),
        (3, 4, "3456"),
        (7, None, "789"),
        (8, 100, "89"),
        (10, None, ""),
        (50, 5, ""),
        (4, 0, ""),
    ],
)
async def test_paging_counts_characters(
    backend: Backend, offset: int, limit: int | None, expected: str
) -> None:
    await backend.write("digits", "0123456789")
    assert await backend.read("digits", offset, limit) == expected


async def test_paging_counts_characters_not_bytes(backend: Backend) -> None:
    text = "é🦜東\r\nz" * 3
    await backend.write("u", text)
    assert await backend.read("u", 1, 3) == text[1:4]
    assert await backend.read("u", 6) == text[6:]
    pages = [await backend.read("u", start, 4) for start in range(0, len(text), 4)]
    assert "".join(pages) == text


@pytest.mark.parametrize(("offset", "limit"), [(-1, None), (0, -1)])
async def test_negative_offset_or_limit_is_refused(
    backend: Backend, offset: int, limit: int | None
) -> None:
    await backend.write("f", "text")
    with pytest.raises(BackendError, match="0 or more"):
        await backend.read("f", offset, limit)


@pytest.mark.parametrize(
    "text",
    [
        "naïve café — 東京 😀 \u0301combining",
        "windows\r\nline\rendings\n",
        "nul\x00inside\x00",
        "\ufeffbom first",
        "\U0010ffff last plane",
    ],
)
async def test_unicode_text_round_trips_exactly(backend: Backend, text: str) -> None:
    await backend.write("text", text)
    assert await backend.read("text") == text
    assert await backend.read("text", 2, 5) == text[2:7]


async def test_a_lone_surrogate_is_refused_and_the_old_text_stays(backend: Backend) -> None:
    await backend.write("f", "old")
    with pytest.raises(BackendError, match=r"lone surrogate.*index 3"):
        await backend.write("f", "new\ud800")
    assert await backend.read("f") == "old"


async def test_ten_megabytes_round_trip_and_page_at_the_end(backend: Backend) -> None:
    text = ("0123456789abcdef" * (TEN_MB // 16))[:-1] + "é"
    await backend.write("big", text)
    assert await backend.read("big", len(text) - 5) == text[-5:]
    assert await backend.read("big", 5_000_000, 16) == text[5_000_000:5_000_016]
    assert await backend.read("big") == text


@pytest.mark.parametrize(
    "path",
    [
        "ünïcödé/名前/файл 😀.txt",
        "spaces and (parens) [brackets] {braces} *star ?q #hash %p &amp;=+,;'\"",
        "/".join(f"seg{i}" for i in range(100)),
        "x" * 200,
        ".hidden/.also",
        "trailing.dot.",
    ],
)
async def test_hostile_but_legal_names_work(backend: Backend, path: str) -> None:
    await backend.write(path, "content")
    assert await backend.read(path) == "content"
    assert await backend.ls() == [path]
    assert await backend.delete(path) is True


@pytest.mark.parametrize("path", ["y" * 300, "/".join(["z" * 250] * 20)])
async def test_names_too_long_for_a_filesystem_work_or_give_a_backend_error(
    backend: Backend, path: str
) -> None:
    try:
        await backend.write(path, "content")
    except BackendError as exc:
        assert "shorter names" in str(exc)
        assert await backend.ls() == []
        return
    assert await backend.read(path) == "content"


async def test_glob_characters_are_literal(backend: Backend) -> None:
    await backend.write("keep/a", "a")
    await backend.write("keep/b", "b")
    await backend.write("keep/*", "star")
    assert await backend.delete("keep/*") is True
    assert await backend.ls() == ["keep/a", "keep/b"]
    assert await backend.delete("keep/?") is False
    assert await backend.ls("keep/[ab]") == []


async def test_concurrent_writes_to_one_path_leave_exactly_one_whole_text(
    backend: Backend,
) -> None:
    texts = [letter * 200_000 for letter in "abcdef"]
    await asyncio.gather(*(backend.write("race", text) for text in texts))
    assert await backend.read("race") in texts
    assert await backend.ls() == ["race"]


async def test_readers_never_see_a_partial_write(backend: Backend) -> None:
    old, new = "o" * 1_000_000, "n" * 1_000_000
    await backend.write("f", old)
    seen: set[str] = set()

    async def reader() -> None:
        for _ in range(15):
            seen.add(await backend.read("f"))

    await asyncio.gather(reader(), backend.write("f", new), backend.write("f", old), reader())
    assert seen <= {old, new}


async def test_unicode_paths_round_trip_and_list(backend: Backend) -> None:
    path = "ü/名前/" + "é" * 100 + ".txt"
    await backend.write(path, "données")
    assert await backend.read(path) == "données"
    assert await backend.ls("ü") == [path]
    assert await backend.ls("ü/名") == []  # a prefix is a folder, not a string prefix


async def test_a_lone_surrogate_in_a_path_works_or_is_a_backend_error(backend: Backend) -> None:
    path = "s/\udc80name"
    actions: list[Callable[[], Awaitable[object]]] = [
        lambda: backend.write(path, "v"),
        lambda: backend.read(path),
        lambda: backend.exists(path),
        lambda: backend.delete(path),
        lambda: backend.ls("s/\udc80"),
    ]
    outcomes: list[object] = []
    for action in actions:
        # Typed, or it worked; anything else (a driver's UnicodeEncodeError) fails the test.
        try:
            outcomes.append(await action())
        except (BackendError, FileNotFoundError) as exc:
            outcomes.append(type(exc))
    written, read = outcomes[0], outcomes[1]
    if written is BackendError:
        assert read in (BackendError, FileNotFoundError)
    else:
        assert read == "v"
