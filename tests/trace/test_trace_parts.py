"""Images, files and reasoning in the trace, over SQLite and Postgres: each blob's bytes are stored
once however many requests carry it (rows and bytes counted), message bodies hold references,
a reasoning part's sealed payload is never stored (only its length), and ``/api/blobs/<sha256>``
serves the bytes exactly, inline only for a real PNG/JPEG/GIF/WebP, everything else (SVG, HTML,
a "PNG" that is HTML) as an attachment that no browser renders."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from postgres_server import fresh_schema, postgres_url
from trace_page import TOKEN
from trace_parts import (
    ENCRYPTED,
    HTML,
    MODEL_CALLS,
    REPORT_PDF,
    SIGNATURE,
    SVG,
    TOOL_PNG,
    USER_PNG,
    record_parts,
)

from plait.errors import ConfigurationError
from plait.stores.sqlite import SQLiteThreadStore
from plait.trace import SQLiteTraceStore, TraceRecorder, TraceStoreError, call_view, create_app
from plait.trace.postgres import PostgresTraceStore
from plait.trace.store import TraceBatch, TraceStore

ALL = (USER_PNG, TOOL_PNG, REPORT_PDF, SVG, HTML)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture(params=["sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[TraceStore]:
    if request.param == "sqlite":
        lite = SQLiteTraceStore(tmp_path / "traces.sqlite3")
        yield lite
        await lite.aclose()
        return
    async with fresh_schema(postgres_url()) as schema:
        pg = PostgresTraceStore(postgres_url(), schema=schema)
        await pg.setup()
        yield pg
        await pg.aclose()


async def _rows(store: TraceStore, query: str) -> list[tuple[Any, ...]]:
    """``query`` over the store's own tables (``{t}`` is the table prefix)."""
    if isinstance(store, SQLiteTraceStore):
        sql = query.format(t="trace_")
        return await store._file.read(lambda conn: conn.execute(sql).fetchall())
    assert isinstance(store, PostgresTraceStore)
    statement = store.db.sql(query.format(t="{s}.plait_trace_"))

    async def select(conn: Any) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in await (await conn.execute(statement)).fetchall()]

    return await store.db.run(select, error=TraceStoreError, single=True)


async def _texts(store: TraceStore) -> str:
    """Every text the trace stored: message bodies, span data and text blobs."""
    found = await _rows(store, "SELECT body FROM {t}messages WHERE body IS NOT NULL")
    found += await _rows(store, "SELECT data FROM {t}spans")
    found += await _rows(store, "SELECT text FROM {t}blobs")
    return "\n".join(str(r[0]) for r in found)


async def test_each_blob_is_stored_once_though_every_request_carried_it(store: TraceStore) -> None:
    await record_parts(store)
    binary = await _rows(store, "SELECT sha256, media_type, size, data FROM {t}binary")
    assert sorted((d, t, n, bytes(b)) for d, t, n, b in binary) == sorted(
        [
            (sha(USER_PNG), "image/png", len(USER_PNG), USER_PNG),
            (sha(TOOL_PNG), "image/png", len(TOOL_PNG), TOOL_PNG),  # returned three times
            (sha(REPORT_PDF), "application/pdf", len(REPORT_PDF), REPORT_PDF),
            (sha(SVG), "image/svg+xml", len(SVG), SVG),
            (sha(HTML), "text/html", len(HTML), HTML),
        ]
    )
    assert sum(len(bytes(r[3])) for r in binary) == sum(map(len, ALL))
    # every one of the turn's requests carried the user's image and PDF, by reference
    (run,) = await store.runs()
    found = await store.run(run["id"])
    assert found is not None
    models = [s for s in found[1] if s["kind"] == "model"]
    assert len(models) == MODEL_CALLS
    for span in models:
        request = await store.request(span["id"])
        assert request is not None
        bodies = await store.messages("parts", request[1])
        first = bodies[request[1][0]]["body"]["content"]
        assert [p["type"] for p in first] == ["text", "image", "file"]
        assert first[1]["source"] == {"sha256": sha(USER_PNG), "size": len(USER_PNG)}
        assert first[2]["source"]["sha256"] == sha(REPORT_PDF)
        assert first[2]["filename"] == "report.pdf"
    texts = await _texts(store)
    for data in ALL:
        assert base64.b64encode(data).decode()[:24] not in texts
    (messages,) = await _rows(store, "SELECT count(*) FROM {t}messages")
    assert messages[0] == 1 + 2 * (MODEL_CALLS - 1)  # the question, each call and its result


async def test_reasoning_is_kept_readable_and_its_sealed_payload_only_by_length(
    store: TraceStore,
) -> None:
    await record_parts(store)
    texts = await _texts(store)
    assert SIGNATURE[:32] not in texts and ENCRYPTED[:32] not in texts
    (run,) = await store.runs()
    found = await store.run(run["id"])
    assert found is not None
    models = [s for s in found[1] if s["kind"] == "model"]
    (first_answer,) = models[0]["data"]["reasoning"]
    assert first_answer["text"] == "Look at the screen first."
    assert first_answer["sealed"] == {"signature": len(SIGNATURE)}
    assert first_answer["payload_type"] == "thinking"
    (last_answer,) = models[-1]["data"]["reasoning"]
    assert (last_answer["text"], last_answer["sealed"]) == ("", {"data": len(ENCRYPTED)})
    view = await call_view(store, models[-1]["id"])
    assert view is not None
    assistant = view["messages"][1]["body"]["content"]
    assert [p["type"] for p in assistant] == ["reasoning"]
    assert "payload" not in assistant[0] and len(assistant[0]["payload_sha256"]) == 16
    # the tool spans keep their images and files by reference, marked kept
    tools = [s for s in found[1] if s["kind"] == "tool"]
    assert [s["name"] for s in tools] == ["screenshot"] * 3 + ["attachments"]
    assert tools[0]["data"]["parts"] == [
        {
            "type": "image",
            "media_type": "image/png",
            "source": {"sha256": sha(TOOL_PNG), "size": 219},
        }
    ]


def _client(store: TraceStore, token: str | None = None) -> httpx.AsyncClient:
    app = create_app(store, token=token)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1")


async def test_the_api_serves_each_blob_exactly_and_never_renders_active_content(
    store: TraceStore,
) -> None:
    await record_parts(store)
    svg_as_image = SVG.replace(b"alert(1)", b"alert(3)")
    html_as_png = HTML + b"<!-- as a PNG -->"
    await store.write(
        TraceBatch(  # a trace edited by hand: image types the recorder would refuse
            binary={
                sha(svg_as_image): ("image/svg+xml", len(svg_as_image), svg_as_image),
                sha(html_as_png): ("image/png", len(html_as_png), html_as_png),
            }
        )
    )
    expected = {
        USER_PNG: ("image/png", "inline"),
        TOOL_PNG: ("image/png", "inline"),
        REPORT_PDF: ("application/pdf", f'attachment; filename="{sha(REPORT_PDF)[:12]}.pdf"'),
        SVG: ("application/octet-stream", f'attachment; filename="{sha(SVG)[:12]}"'),
        HTML: ("application/octet-stream", f'attachment; filename="{sha(HTML)[:12]}"'),
        svg_as_image: (
            "application/octet-stream",
            f'attachment; filename="{sha(svg_as_image)[:12]}"',
        ),
        html_as_png: (
            "application/octet-stream",
            f'attachment; filename="{sha(html_as_png)[:12]}"',
        ),
    }
    async with _client(store) as client:
        for data, (kind, disposition) in expected.items():
            answer = await client.get(f"/api/blobs/{sha(data)}")
            assert answer.status_code == 200
            assert answer.content == data
            assert answer.headers["content-type"] == kind
            assert answer.headers["content-disposition"] == disposition
            assert answer.headers["x-content-type-options"] == "nosniff"
            policies = answer.headers.get_list("content-security-policy")
            assert "sandbox; default-src 'none'" in policies  # beside the page's own
        for wrong in (
            sha(USER_PNG)[:63],
            sha(USER_PNG) + "0",
            sha(USER_PNG).upper(),
            "g" * 64,
            "0" * 64,  # well formed, unknown
        ):
            answer = await client.get(f"/api/blobs/{wrong}")
            assert answer.status_code == 404, wrong
            assert "pick one from the run list" in answer.json()["error"]
        assert (await client.get("/api/blobs/" + "..%2F" * 13)).status_code == 404


async def test_a_blob_over_the_cap_keeps_its_reference_only(tmp_path: Path) -> None:
    store = SQLiteTraceStore(tmp_path / "traces.sqlite3")
    await record_parts(store, max_blob_bytes=300)  # the user's PNG is 345 bytes, the rest less
    rows = await _rows(store, "SELECT sha256, size, data IS NULL FROM {t}binary")
    assert sorted(rows) == sorted((sha(d), len(d), int(d is USER_PNG)) for d in ALL)
    (run,) = await store.runs()
    found = await store.run(run["id"])
    assert found is not None
    span = next(s for s in found[1] if s["kind"] == "model")
    view = await call_view(store, span["id"])
    assert view is not None
    image, pdf = view["messages"][0]["body"]["content"][1:]
    assert (image["source"]["kept"], pdf["source"]["kept"]) == (False, True)
    async with _client(store) as client:
        answer = await client.get(f"/api/blobs/{sha(USER_PNG)}")
        assert answer.status_code == 404
        assert "max_blob_bytes" in answer.json()["error"] and "345 bytes" in answer.json()["error"]
        assert (await client.get(f"/api/blobs/{sha(TOOL_PNG)}")).content == TOOL_PNG
    # a later recorder with a higher cap fills the bytes in
    await record_parts(store)
    assert await store.binary(sha(USER_PNG)) == ("image/png", len(USER_PNG), USER_PNG)
    await store.aclose()


async def test_blobs_are_token_gated_like_every_route(tmp_path: Path) -> None:
    store = SQLiteTraceStore(tmp_path / "traces.sqlite3")
    await record_parts(store)
    async with _client(store, token=TOKEN) as client:
        assert (await client.get(f"/api/blobs/{sha(USER_PNG)}")).status_code == 401
        wrong = {"Authorization": "Bearer " + "x" * 43}
        assert (await client.get(f"/api/blobs/{sha(USER_PNG)}", headers=wrong)).status_code == 403
        right = {"Authorization": f"Bearer {TOKEN}"}
        answer = await client.get(f"/api/blobs/{sha(USER_PNG)}", headers=right)
        assert answer.status_code == 200 and answer.content == USER_PNG
    await store.aclose()


async def test_a_restarted_recorder_stores_no_blob_again(tmp_path: Path) -> None:
    threads = SQLiteThreadStore(tmp_path / "threads.sqlite3")
    store = SQLiteTraceStore(tmp_path / "traces.sqlite3")
    await record_parts(store, threads=threads)
    before = await _rows(store, "SELECT count(*), sum(length(data)) FROM {t}binary")
    await record_parts(store, threads=threads)  # a new recorder (a new process), same thread
    assert await _rows(store, "SELECT count(*), sum(length(data)) FROM {t}binary") == before
    assert before == [(len(ALL), sum(map(len, ALL)))]
    # the second turn's requests carry two user messages with the same image: one blob row
    (request,) = await _rows(store, "SELECT count(*) FROM {t}requests WHERE seq >= 5")
    assert request[0] == MODEL_CALLS
    bodies = await _rows(store, "SELECT body FROM {t}messages WHERE role = 'user'")
    images = [json.loads(b)["content"][1]["source"]["sha256"] for (b,) in bodies]
    assert images == [sha(USER_PNG)] * 2
    await store.aclose()
    await threads.aclose()


@pytest.mark.parametrize("bad", [-1, True, 1.5, "5"])
def test_max_blob_bytes_must_be_a_whole_number(bad: Any, tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"max_blob_bytes must be an integer >= 0"):
        TraceRecorder(SQLiteTraceStore(tmp_path / "t.sqlite3"), max_blob_bytes=bad)


class FailingOnce(SQLiteTraceStore):
    """A SQLite trace store whose first write fails."""

    failed = False

    async def write(self, batch: TraceBatch) -> None:
        if not self.failed:
            self.failed = True
            raise TraceStoreError("the disk is full (once)")
        await super().write(batch)


async def test_a_blob_whose_write_failed_is_sent_again_by_a_later_request(tmp_path: Path) -> None:
    store = FailingOnce(tmp_path / "traces.sqlite3")
    recorder = await record_parts(store)
    assert recorder.write_error is not None
    assert await store.binary(sha(TOOL_PNG)) is None  # the whole turn's batch was lost
    await record_parts(store, recorder=recorder)  # the same recorder, a new turn
    assert await store.binary(sha(TOOL_PNG)) == ("image/png", len(TOOL_PNG), TOOL_PNG)
    assert await store.binary(sha(USER_PNG)) == ("image/png", len(USER_PNG), USER_PNG)
    await recorder.aclose()
