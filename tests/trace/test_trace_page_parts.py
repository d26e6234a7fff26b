"""The trace page in a real headless Chromium over a turn with images, files and reasoning
(``trace_parts.record_parts``) and a hand-edited run with hostile "images": recorded images show
as thumbnails the browser decodes, files as download links, reasoning folded with its sealed
payload only as a length, and an SVG or HTML part is never rendered."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import pytest
from trace_page import Browser, Served, read, read_json
from trace_parts import (
    ENCRYPTED,
    HTML_AS_PNG,
    MODEL_CALLS,
    REPORT_PDF,
    SIGNATURE,
    SVG,
    SVG_AS_IMAGE,
    TOOL_PNG,
    USER_PNG,
)

DOCS = Path(__file__).parents[2] / "docs"
DIALOGS: list[str] = []
"""Every alert/confirm the page opened (a script in a recorded SVG or HTML would)."""
ALL_LOADED = (
    "(sel) => { const imgs = [...document.querySelectorAll(sel)];"
    " return imgs.length > 0 && imgs.every((i) => i.complete); }"
)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture(scope="module")
def page(browser: Browser, parts_served: Served) -> Browser:
    def refuse(dialog: Any) -> None:
        DIALOGS.append(dialog.message)
        dialog.dismiss()

    browser.page.on("dialog", refuse)
    browser.page.goto(parts_served.page_url)
    browser.page.wait_for_selector("body[data-ready='1']")
    return browser


def _open_run(page: Browser, served: Served, thread: str) -> str:
    (run,) = [r for r in read_json(f"{served.url}/api/runs") if r["thread_id"] == thread]
    page.page.locator(f".run-item[data-run-id='{run['id']}']").click()
    page.page.wait_for_selector(f"#waterfall[data-run-id='{run['id']}']")
    return str(run["id"])


def _open_span(page: Browser, kind: str, n: int, ready: str) -> None:
    row = page.page.locator(f".span-row[data-kind={kind}]").nth(n)
    span_id = row.get_attribute("data-span-id")
    row.click()
    page.page.wait_for_selector(f"#detail[data-span-id='{span_id}'] {ready}")


def _widths(page: Browser, selector: str) -> list[int]:
    page.page.wait_for_function(ALL_LOADED, arg=selector)
    return list(page.page.locator(selector).evaluate_all("els => els.map(e => e.naturalWidth)"))


def test_images_are_thumbnails_files_are_links_and_reasoning_is_folded(
    page: Browser, parts_served: Served, tmp_path: Path
) -> None:
    _open_run(page, parts_served, "parts")
    _open_span(page, "model", MODEL_CALLS - 1, "#context-diff")
    thumbs = "#conversation img.thumb"
    # the user's image, then the image each of the three screenshots returned
    assert _widths(page, thumbs) == [64, 40, 40, 40]
    sources = page.page.locator(thumbs).evaluate_all("els => els.map(e => e.getAttribute('src'))")
    assert sources == [f"/api/blobs/{sha(USER_PNG)}"] + [f"/api/blobs/{sha(TOOL_PNG)}"] * 3
    links = page.page.locator("#conversation a.file-link")
    assert links.all_inner_texts() == ["report.pdf", "drawing.svg", "page.html"]
    assert [links.nth(i).get_attribute("download") for i in range(3)] == [
        "report.pdf",
        "drawing.svg",
        "page.html",
    ]
    href = links.nth(0).get_attribute("href")
    assert href == f"/api/blobs/{sha(REPORT_PDF)}?name=report.pdf"
    assert read(parts_served.url + href) == REPORT_PDF
    meta = page.page.locator("#conversation .part.file .part-meta").first.inner_text()
    assert meta == f"application/pdf · {len(REPORT_PDF)} bytes"
    # reasoning: folded, its readable text inside, the signature only as a length
    folded = page.page.locator("#conversation .msg[data-kind=assistant] details.reasoning")
    assert folded.count() == 1
    assert folded.evaluate("d => d.open") is False
    assert folded.locator("summary").inner_text() == "thinking · anthropic · 25 characters"
    assert not folded.locator("pre").is_visible()
    sealed = folded.locator(".sealed").text_content()
    assert (
        sealed
        == f"signature: {len(SIGNATURE):,} characters (sent back to anthropic verbatim; not shown)"
    )
    folded.locator("summary").click()
    assert folded.locator("pre").inner_text() == "Look at the screen first."
    answer = page.page.locator("#conversation .msg[data-kind=answer] details.reasoning")
    assert answer.locator("summary").inner_text() == "redacted thinking · anthropic"
    assert answer.locator(".sealed").text_content() == (
        f"data: {len(ENCRYPTED)} characters (sent back to anthropic verbatim; not shown)"
    )
    html = page.page.content()
    assert SIGNATURE[:32] not in html and ENCRYPTED[:32] not in html
    target = DOCS if os.environ.get("PLAIT_UPDATE_SCREENSHOTS") else tmp_path
    page.page.locator("#conversation").screenshot(path=str(target / "trace-9-parts.png"))


def test_a_tool_calls_images_and_files_show_on_its_panel(
    page: Browser, parts_served: Served
) -> None:
    _open_run(page, parts_served, "parts")
    _open_span(page, "tool", 0, "#tool-output")
    assert _widths(page, "#tool-parts img.thumb") == [40]
    assert page.page.locator("#tool-output").inner_text() == "the screen, captured"
    _open_span(page, "tool", 3, "#tool-output")
    assert page.page.locator("#tool-parts img").count() == 0
    assert page.page.locator("#tool-parts a.file-link").all_inner_texts() == [
        "drawing.svg",
        "page.html",
    ]
    with page.page.expect_download() as found:
        page.page.locator("#tool-parts a.file-link").first.click()
    download = found.value
    assert download.suggested_filename == "drawing.svg"
    assert Path(download.path()).read_bytes() == SVG


def test_hostile_image_types_are_never_rendered(page: Browser, parts_served: Served) -> None:
    _open_run(page, parts_served, "hostile")
    _open_span(page, "model", 0, "#context-diff")
    # the "image/svg+xml" image is a download link, never an <img>
    links = page.page.locator("#conversation a.file-link")
    assert links.evaluate_all("els => els.map(e => e.getAttribute('href'))") == [
        f"/api/blobs/{sha(SVG_AS_IMAGE)}"  # no file name recorded: the server names it
    ]
    # the "image/png" whose bytes are HTML is an <img> the server answers as an attachment of
    # application/octet-stream: nothing decodes, nothing runs
    assert _widths(page, "#conversation img.thumb") == [0]
    src = page.page.locator("#conversation img.thumb").get_attribute("src")
    assert src == f"/api/blobs/{sha(HTML_AS_PNG)}"
    not_kept = page.page.locator("#conversation .not-kept").inner_text()
    assert not_kept.startswith(f"image image/png · {len(USER_PNG) - 1} bytes: only its reference")
    assert page.page.title() == "plait traces"
    assert DIALOGS == []


def test_the_parts_page_broke_no_rule_and_stayed_local(
    page: Browser, parts_served: Served, served: Served
) -> None:
    local = (parts_served.url + "/", served.url + "/")
    assert [u for u in page.requests if not u.startswith(local)] == []
    assert any(u.startswith(f"{parts_served.url}/api/blobs/") for u in page.requests)
    assert [m for m in page.console if "Content Security Policy" in m] == []
