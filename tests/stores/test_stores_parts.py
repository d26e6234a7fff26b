"""The ThreadStore contract for content parts: every part kind round-trips exactly (bytes, payload
key order and all) on every store and across a restart; SQLite and Postgres keep each blob's
bytes once, hold them by reference in the message rows, delete them with the last thread that
holds them, and still load threads written before the blob tables."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from images import gif, jpeg, png
from postgres_server import fresh_schema, pgbouncer_url, postgres_url

from plait.messages import (
    AssistantMessage,
    Blob,
    FilePart,
    ImagePart,
    Message,
    ReasoningPart,
    TextPart,
    ToolCall,
    ToolMessage,
    UserMessage,
    dump_messages,
)
from plait.stores import MemoryThreadStore, SQLiteThreadStore, StoreError, ThreadStore

Opener = Callable[[], Awaitable[ThreadStore]]


@asynccontextmanager
async def reopening(kind: str, tmp_path: Path) -> AsyncIterator[Opener]:
    """Opens the store; each call after the first is a new store object on the same database
    (a process restart), except for the memory store, which has no database to reopen."""
    opened: list[Any] = []
    if kind == "memory":
        memory = MemoryThreadStore()

        async def reopen_memory() -> ThreadStore:
            return memory

        yield reopen_memory
    elif kind == "sqlite":

        async def reopen_sqlite() -> ThreadStore:
            store = SQLiteThreadStore(tmp_path / "threads.db")
            opened.append(store)
            return store

        yield reopen_sqlite
    else:
        from plait.stores.postgres import PostgresThreadStore

        async with fresh_schema(postgres_url()) as schema:
            bounced = kind == "postgres-pgbouncer"  # transaction mode, no prepared statements
            url = pgbouncer_url() if bounced else postgres_url()

            async def reopen_postgres() -> ThreadStore:
                store = PostgresThreadStore(
                    url, schema=schema, max_size=2, prepared_statements=not bounced
                )
                await store.setup()
                opened.append(store)
                return store

            try:
                yield reopen_postgres
            finally:
                for store in opened:
                    await store.aclose()
    for store in opened:
        await store.aclose()


@pytest.fixture(params=["memory", "sqlite", "postgres", "postgres-pgbouncer"])
async def opener(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Opener]:
    async with reopening(request.param, tmp_path) as reopen:
        yield reopen


@pytest.fixture(params=["sqlite", "postgres", "postgres-pgbouncer"])
async def sql_opener(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Opener]:
    """The stores with a blob table."""
    async with reopening(request.param, tmp_path) as reopen:
        yield reopen


THINKING = {
    "type": "thinking",
    "thinking": "The user wants the chart; call plot first.",
    "signature": "EqQBCkYIARgCKkBsig+/==",
}
REDACTED = {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"}
OPENAI_ITEM = {
    "type": "reasoning",
    "id": "rs_0123",
    "encrypted_content": "gAAAAABo" + "x" * 64,
    "summary": [{"type": "summary_text", "text": "Plan: plot, then answer."}],
    "zeta_first_key_order": {"b": [1, 2.5, None, True], "a": {"nested": ["ü", "🦜"]}},
}


def every_part_kind() -> list[Message]:
    chart = Blob(png(64, 48, seed=3))
    return [
        UserMessage(
            [
                TextPart("Plot this and read the report."),
                ImagePart(chart),
                ImagePart("https://example.com/photo.jpg", "image/jpeg", detail="low"),
                FilePart(Blob(b"%PDF-1.7\n<</Type /Page>>\n%%EOF"), filename="report.pdf"),
                FilePart("https://example.com/notes.txt", "text/plain", filename="notes.txt"),
            ]
        ),
        AssistantMessage(
            [
                ReasoningPart("anthropic", THINKING["thinking"], dict(THINKING)),
                ReasoningPart("anthropic", "", dict(REDACTED)),
                TextPart("Plotting."),
            ],
            tool_calls=[ToolCall("c1", "plot", {"data": [1, 2]})],
        ),
        ToolMessage(
            "c1",
            "plot",
            "plotted",
            parts=[ImagePart(Blob(jpeg(40, 30))), ImagePart(chart), TextPart("caption")],
        ),
        AssistantMessage(
            [
                ReasoningPart(
                    "openai-responses", "Plan: plot.", json.loads(json.dumps(OPENAI_ITEM))
                ),
                TextPart("Done."),
            ]
        ),
    ]


def fingerprint(messages: list[Message]) -> list[Any]:
    """Everything a replay sends, byte for byte: each part's bytes, URL, media type, name and
    detail, and each reasoning payload's JSON text (key order included)."""
    out: list[Any] = []
    for message in messages:
        parts = message.parts if isinstance(message, ToolMessage) else message.content
        for part in parts:
            if isinstance(part, ImagePart | FilePart):
                source = part.source
                data = source.data if isinstance(source, Blob) else source
                name = part.filename if isinstance(part, FilePart) else part.detail
                out.append((type(part).__name__, data, part.media_type, name))
            elif isinstance(part, ReasoningPart):
                out.append((part.provider, part.text, json.dumps(part.payload)))
            else:
                out.append(part.text)
    return out


async def test_every_part_kind_round_trips_exactly_and_after_a_restart(opener: Opener) -> None:
    messages = every_part_kind()
    store = await opener()
    await store.append("t", messages[:2], expected_version=0, state={"k": 1})
    await store.append("t", messages[2:], expected_version=1)
    loaded = (await store.load("t")).messages
    assert loaded == messages
    assert fingerprint(loaded) == fingerprint(messages)
    restarted = await opener()
    again = (await restarted.load("t")).messages
    assert again == messages
    assert fingerprint(again) == fingerprint(messages)
    assert dump_messages(again) == dump_messages(messages)  # the inline form, byte-identical


async def test_mutating_parts_after_append_or_load_does_not_change_the_store(
    opener: Opener,
) -> None:
    store = await opener()
    messages = every_part_kind()
    await store.append("t", messages, expected_version=0)
    user, answer = messages[0], messages[3]
    assert isinstance(user, UserMessage) and isinstance(answer, AssistantMessage)
    image, pdf = user.content[1], user.content[3]
    assert isinstance(image, ImagePart) and isinstance(pdf, FilePart)
    image.detail = "high"
    pdf.filename = "renamed.pdf"
    reasoning = answer.content[0]
    assert isinstance(reasoning, ReasoningPart)
    reasoning.payload["summary"].append({"type": "summary_text", "text": "added"})
    loaded = (await store.load("t")).messages
    assert isinstance(loaded[0], UserMessage)
    first = loaded[0].content[1]
    assert isinstance(first, ImagePart)
    first.detail = "auto"
    assert fingerprint((await store.load("t")).messages) == fingerprint(every_part_kind())


async def blob_table(store: ThreadStore) -> tuple[int, int, list[str]]:
    """Rows and bytes in the store's blob table, and every message row's JSON."""
    if isinstance(store, SQLiteThreadStore):
        with sqlite3.connect(store.path) as conn:
            count, total = conn.execute(
                "SELECT COUNT(*), COALESCE(SUM(LENGTH(data)), 0) FROM message_blobs"
            ).fetchone()
            rows = [str(r[0]) for r in conn.execute("SELECT json FROM messages")]
        conn.close()
        return int(count), int(total), rows
    from plait.stores.postgres import PostgresThreadStore

    assert isinstance(store, PostgresThreadStore)
    async with store.db.connection() as pg:
        cur = await pg.execute(
            store.db.sql(
                "SELECT COUNT(*), COALESCE(SUM(octet_length(data)), 0) FROM {s}.plait_message_blobs"
            )
        )
        count, total = await cur.fetchone()  # type: ignore[misc]
        cur = await pg.execute(store.db.sql("SELECT json FROM {s}.plait_messages"))
        rows = [r[0] for r in await cur.fetchall()]
    return int(count), int(total), rows


async def test_each_blob_is_stored_once_and_rows_hold_only_its_address(
    sql_opener: Opener,
) -> None:
    store = await sql_opener()
    images = [png(20 + i, 10, seed=i) for i in range(10)]
    first = [UserMessage([ImagePart(Blob(data)) for data in images])]
    repeated = [UserMessage([ImagePart(Blob(images[i % 3])) for i in range(30)])]
    await store.append("a", first, expected_version=0)
    await store.append("a", repeated, expected_version=1)
    await store.append("b", repeated, expected_version=0)
    count, total, rows = await blob_table(store)
    assert (count, total) == (10, sum(len(d) for d in images))
    assert all('"base64"' not in row for row in rows)
    assert max(len(row) for row in rows) < 30 * 200  # addresses, not bytes
    assert (await (await sql_opener()).load("b")).messages == repeated


async def _drop_blob_bytes(store: ThreadStore) -> None:
    """Delete every blob's bytes behind the store's back (what a load then still needs, it
    cannot have read from the store)."""
    if isinstance(store, SQLiteThreadStore):
        with sqlite3.connect(store.path) as conn:
            conn.execute("DELETE FROM message_blobs")
        conn.close()
        return
    from plait.stores.postgres import PostgresThreadStore

    assert isinstance(store, PostgresThreadStore)
    async with store.db.connection() as pg:
        await pg.execute(store.db.sql("DELETE FROM {s}.plait_message_blobs"))


async def test_a_load_reads_no_bytes_of_the_blobs_already_in_memory(sql_opener: Opener) -> None:
    import gc

    store = await sql_opener()
    data = png(24, 12, seed=7)
    await store.append("t", [UserMessage([ImagePart(Blob(data))])], expected_version=0)
    first = (await store.load("t")).messages  # its blob is now in memory
    await _drop_blob_bytes(store)
    again = (await (await sql_opener()).load("t")).messages
    assert again == first
    message, earlier = again[0], first[0]
    assert isinstance(message, UserMessage) and isinstance(earlier, UserMessage)
    part, before = message.content[0], earlier.content[0]
    assert isinstance(part, ImagePart) and isinstance(before, ImagePart)
    assert part.blob is before.blob  # the one in memory, not a copy read again
    del first, again, message, earlier, part, before
    gc.collect()
    with pytest.raises(StoreError, match="is missing"):  # not in memory: read, and gone
        await store.load("t")


async def test_deleting_a_thread_removes_only_the_blobs_no_other_thread_holds(
    sql_opener: Opener,
) -> None:
    store = await sql_opener()
    shared, own = Blob(png(5, 5, seed=1)), Blob(gif(7, 3))
    await store.append("a", [UserMessage([ImagePart(shared), ImagePart(own)])], expected_version=0)
    await store.append(
        "b", [ToolMessage("c", "t", "x", parts=[ImagePart(shared)])], expected_version=0
    )
    assert (await blob_table(store))[:2] == (2, shared.size + own.size)
    assert await store.delete("a")
    assert (await blob_table(store))[:2] == (1, shared.size)
    assert (await store.load("b")).messages[0].parts[0].source == shared  # type: ignore[union-attr]
    assert await store.delete("b")
    assert (await blob_table(store))[:2] == (0, 0)
    assert not await store.delete("b")


OLD_SQLITE_SCHEMA = """
CREATE TABLE threads (thread_id TEXT PRIMARY KEY, version INTEGER NOT NULL, state TEXT NOT NULL,
    updated_at REAL NOT NULL);
CREATE INDEX threads_by_recency ON threads (updated_at);
CREATE TABLE messages (thread_id TEXT NOT NULL, seq INTEGER NOT NULL, id TEXT NOT NULL,
    json TEXT NOT NULL, PRIMARY KEY (thread_id, seq));
CREATE TABLE leases (thread_id TEXT PRIMARY KEY, owner TEXT NOT NULL, expires_at REAL NOT NULL);
PRAGMA application_id = 1886151017;
"""


def old_rows(messages: list[Message]) -> list[str]:
    """Message rows as the stores wrote them before the blob tables: blobs inline, base64."""
    rows = [dump_messages([m])[1:-1] for m in messages]
    assert all('"base64"' in row for row in rows if '"sha256"' in row)
    return rows


async def test_a_sqlite_file_from_before_the_blob_tables_loads_and_takes_new_writes(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.db"
    messages = every_part_kind()
    with sqlite3.connect(path) as conn:
        conn.executescript(OLD_SQLITE_SCHEMA)
        conn.execute("INSERT INTO threads VALUES ('t', 1, '{\"k\": 1}', 1.0)")
        conn.executemany(
            "INSERT INTO messages VALUES ('t', ?, ?, ?)",
            [
                (i, m.id, row)
                for i, (m, row) in enumerate(zip(messages, old_rows(messages), strict=True))
            ],
        )
    conn.close()
    store = SQLiteThreadStore(path)
    snapshot = await store.load("t")
    assert snapshot.messages == messages
    assert fingerprint(snapshot.messages) == fingerprint(messages)
    assert (snapshot.state, snapshot.version) == ({"k": 1}, 1)
    more = [UserMessage([ImagePart(Blob(png(9, 9)))])]
    await store.append("t", more, expected_version=1)
    assert (await store.load("t")).messages == messages + more
    assert (await blob_table(store))[0] == 1  # the new write's blob, by reference
    await store.aclose()


async def test_a_postgres_schema_from_before_migration_3_loads_after_setup() -> None:
    import psycopg

    from plait.backends.postgres_db import MIGRATIONS
    from plait.stores.postgres import PostgresThreadStore

    messages = every_part_kind()
    async with fresh_schema(postgres_url()) as schema:
        async with await psycopg.AsyncConnection.connect(postgres_url(), autocommit=True) as pg:
            await pg.execute(f'CREATE SCHEMA "{schema}"')
            await pg.execute(f'CREATE TABLE "{schema}".plait_migrations (v integer PRIMARY KEY)')
            for number, statement in enumerate(MIGRATIONS[:2], start=1):
                await pg.execute(statement.replace("{s}", f'"{schema}"'))
                await pg.execute(f'INSERT INTO "{schema}".plait_migrations VALUES ({number})')
            await pg.execute(
                f'INSERT INTO "{schema}".plait_threads (thread_id, version, state, write_token) '
                "VALUES ('t', 1, '{}', 'old')"
            )
            for i, (m, row) in enumerate(zip(messages, old_rows(messages), strict=True)):
                await pg.execute(
                    f'INSERT INTO "{schema}".plait_messages VALUES (%s, %s, %s, %s)',
                    ("t", i, m.id, row),
                )
        store = PostgresThreadStore(postgres_url(), schema=schema, max_size=2)
        assert await store.setup() == list(range(3, len(MIGRATIONS) + 1))
        snapshot = await store.load("t")
        assert snapshot.messages == messages
        assert fingerprint(snapshot.messages) == fingerprint(messages)
        more = [UserMessage([ImagePart(Blob(png(9, 9)))])]
        await store.append("t", more, expected_version=1)
        assert (await store.load("t")).messages == messages + more
        assert (await blob_table(store))[0] == 1
        await store.aclose()


async def test_a_delete_racing_an_append_of_the_same_blob_never_loses_it(
    sql_opener: Opener,
) -> None:
    import asyncio

    store = await sql_opener()
    blob = Blob(png(8, 8, seed=5))
    for n in range(12):
        await store.append(f"old{n}", [UserMessage([ImagePart(blob)])], expected_version=0)
        new = [UserMessage([TextPart(str(n)), ImagePart(blob)])]
        deleted, _ = await asyncio.gather(
            store.delete(f"old{n}"), store.append(f"new{n}", new, expected_version=0)
        )
        assert deleted
        assert (await store.load(f"new{n}")).messages == new
    assert (await blob_table(store))[:2] == (1, blob.size)


async def test_a_postgres_delete_waits_for_an_append_adding_a_hold_on_its_blob() -> None:
    """The race the blob lock closes: an append in flight has found a blob present (so it does
    not write it again) and is adding its hold while a delete of the last other holder runs.
    The delete must wait for it and then keep the blob."""
    import asyncio

    import psycopg

    from plait.stores.postgres import _BLOB_LOCK, PostgresThreadStore

    blob = Blob(png(6, 6, seed=9))
    async with fresh_schema(postgres_url()) as schema:
        store = PostgresThreadStore(postgres_url(), schema=schema, max_size=2)
        await store.setup()
        await store.append("old", [UserMessage([ImagePart(blob)])], expected_version=0)
        async with await psycopg.AsyncConnection.connect(postgres_url()) as append:
            await append.execute("SELECT pg_advisory_xact_lock_shared(%s)", (_BLOB_LOCK,))
            delete = asyncio.create_task(store.delete("old"))
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 30
            waiting = 0
            while not waiting:  # until the delete waits for the lock the "append" holds
                assert not delete.done(), "the delete did not wait for the append's lock"
                assert loop.time() < deadline, "the delete never reached the blob lock"
                cur = await append.execute(
                    "SELECT COUNT(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
                    "AND classid = %s AND objid = %s AND objsubid = 1",
                    (_BLOB_LOCK >> 32, _BLOB_LOCK & 0xFFFFFFFF),
                )
                waiting = (await cur.fetchone() or (0,))[0]
                await asyncio.sleep(0.01)
            await append.execute(
                f'INSERT INTO "{schema}".plait_thread_blobs VALUES (%s, %s)',
                ("new", blob.sha256),
            )
            await append.commit()
        assert await asyncio.wait_for(delete, 30)
        assert (await blob_table(store))[:2] == (1, blob.size)
        await store.aclose()


async def test_a_row_naming_a_blob_the_table_lacks_is_a_store_error(tmp_path: Path) -> None:
    store = SQLiteThreadStore(tmp_path / "t.db")
    blob = Blob(png(4, 4))
    await store.append("t", [UserMessage([ImagePart(blob)])], expected_version=0)
    with sqlite3.connect(store.path) as conn:
        conn.execute("DELETE FROM message_blobs")
    conn.close()
    with pytest.raises(StoreError, match=rf"(?s)sha256:{blob.sha256[:12]} is missing.*restore"):
        await store.load("t")
    await store.aclose()


async def test_a_postgres_row_naming_a_blob_the_table_lacks_is_a_store_error() -> None:
    import psycopg

    from plait.stores import StoreError
    from plait.stores.postgres import PostgresThreadStore

    kept, lost = Blob(png(4, 4)), Blob(png(5, 5))
    async with fresh_schema(postgres_url()) as schema:
        store = PostgresThreadStore(postgres_url(), schema=schema, max_size=2)
        await store.setup()
        message = UserMessage([ImagePart(kept), ImagePart(lost)])
        await store.append("t", [message], expected_version=0)
        async with await psycopg.AsyncConnection.connect(postgres_url(), autocommit=True) as pg:
            await pg.execute(
                f'DELETE FROM "{schema}".plait_message_blobs WHERE sha256 = %s', (lost.sha256,)
            )
        with pytest.raises(StoreError, match=rf"(?s)sha256:{lost.sha256[:12]} is missing.*restore"):
            await store.load("t")
        await store.aclose()


async def test_a_part_holding_text_utf8_cannot_encode_is_refused_by_every_store(
    opener: Opener,
) -> None:
    from plait.stores import ThreadDataError

    store = await opener()
    named = FilePart(Blob(b"%PDF-1.4"), filename="r\udc80.pdf")
    shot = ToolMessage("c", "t", "x", parts=[ImagePart(Blob(png(3, 3))), TextPart("a\ud800")])
    for message in (UserMessage([named]), shot):
        with pytest.raises(ThreadDataError, match="message 0"):
            await store.append("t", [message], expected_version=0)
    assert (await store.load("t")).version == 0


def _changed_after_it_was_built() -> list[Message]:
    """Parts whose fields were changed after their checks passed, each one a row that would
    be written but never read back."""
    local = ImagePart("https://example.com/a.png")
    local.source = "file:///etc/passwd"
    retyped = ImagePart(Blob(png(2, 2)))
    retyped.media_type = "image/jpeg"
    detailed = ImagePart(Blob(png(2, 2)))
    detailed.detail = "ultra"  # type: ignore[assignment]
    named = FilePart(Blob(b"%PDF-1.4"), filename="a.pdf")
    named.filename = 7  # type: ignore[assignment]
    return [
        UserMessage([TextPart("see"), local]),
        UserMessage([retyped]),
        ToolMessage("c", "shot", "x", parts=[detailed]),
        UserMessage([named]),
    ]


async def test_a_part_changed_after_it_was_built_is_refused_by_every_store(
    opener: Opener,
) -> None:
    from plait.stores import ThreadDataError

    store = await opener()
    for message in _changed_after_it_was_built():
        field = "parts" if isinstance(message, ToolMessage) else "content"
        with pytest.raises(ThreadDataError, match=rf"message 0 .*{field}\["):
            await store.append("t", [message], expected_version=0)
    snapshot = await (await opener()).load("t")
    assert snapshot.version == 0 and snapshot.messages == []  # nothing written, still readable


def test_an_image_detail_no_provider_takes_is_refused_when_the_part_is_built() -> None:
    from plait.errors import ContentError

    with pytest.raises(ContentError, match="'auto', 'low' or 'high'"):
        ImagePart(Blob(png(2, 2)), detail="ultra")  # type: ignore[arg-type]
