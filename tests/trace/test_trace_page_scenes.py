"""The trace page in a real headless Chromium over ``trace_scenes.record_scenes``: a paused run
shows what waits (tool, arguments, skill, why) and links the run that resumed it, which shows
who decided what, when, and how long the turn waited; a request whose prompt-cache prefix broke
is marked in the waterfall and its panel names the message and the cause, with its cache hit
share; a subagent's run is drawn under the parent's tool call that started it (a grandchild
under the child's), with its usage and the tree's total."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
from trace_page import Browser, Served, read_json
from trace_scenes import CACHED, EDITED_TEXT, RESEARCHER_USAGE, TREE_INPUT

DOCS = Path(__file__).parents[2] / "docs"


def _number(text: str) -> int:
    found = re.search(r"-?[\d,]+", text)
    assert found is not None, text
    return int(found.group().replace(",", ""))


def _shot(browser: Browser, selector: str, name: str, tmp_path: Path) -> None:
    target = DOCS if os.environ.get("PLAIT_UPDATE_SCREENSHOTS") else tmp_path
    path = target / f"trace-{name}.png"
    browser.page.locator(selector).screenshot(path=str(path))
    assert path.stat().st_size > 1_000


@pytest.fixture(scope="module")
def page(browser: Browser, scenes_served: Served) -> Browser:
    browser.page.goto(scenes_served.page_url)
    browser.page.wait_for_selector("body[data-ready='1']")
    return browser


def _runs(served: Served, thread: str) -> list[dict[str, Any]]:
    """The runs of ``thread``, oldest first."""
    return [r for r in reversed(read_json(f"{served.url}/api/runs")) if r["thread_id"] == thread]


def _open(page: Browser, run_id: str) -> None:
    page.page.locator(f".run-item[data-run-id='{run_id}']").click()
    page.page.wait_for_selector(f"#waterfall[data-run-id='{run_id}']")


def test_a_paused_run_shows_what_waits_and_who_decided(
    page: Browser, scenes_served: Served, tmp_path: Path
) -> None:
    paused, resumed = _runs(scenes_served, "approvals")
    status = page.page.locator(f".run-item[data-run-id='{paused['id']}'] .status-paused")
    assert status.inner_text() == "paused"
    _open(page, paused["id"])
    held = page.page.locator("#pause-held .held-call")
    assert held.evaluate_all("els => els.map(e => e.dataset.callId)") == ["s1", "d1", "a1"]
    first = held.nth(0).locator("td").all_inner_texts()
    assert first == ["send", '{"to":"bo"}', "—", "send requires approval"]
    _shot(page, "#pause-held", "9-paused", tmp_path)
    # the paused run links the run that resumed it …
    page.page.locator("#pause-resumed-by .run-link").click()
    page.page.wait_for_selector(f"#waterfall[data-run-id='{resumed['id']}']")
    decided = page.page.locator("#pause-decisions .decided-call")
    assert decided.evaluate_all("els => els.map(e => e.dataset.decision)") == [
        "approve (edited)",
        "reject",
        "answer",
    ]
    assert decided.locator(".by").all_inner_texts() == ["ana", "ana", "bo"]
    rows = decided.all_inner_texts()
    assert '{"to":"cy"}' in rows[0] and '{"to":"bo"}' in rows[0]  # edited, and what was held
    assert "keep the notes" in rows[1] and "Tuesday" in rows[2]
    heading = page.page.locator("#pause-decisions h2").inner_text()
    assert "decided at" in heading and re.search(r"waited [\d.]+ m?s", heading)
    _shot(page, "#pause-decisions", "10-decisions", tmp_path)
    # … and the resumed run links back to the run it resumed (same thread, same turn)
    page.page.locator("#pause-resumes .run-link").click()
    page.page.wait_for_selector(f"#waterfall[data-run-id='{paused['id']}']")


def test_a_cache_break_is_marked_on_its_request(page: Browser, scenes_served: Served) -> None:
    first, second = _runs(scenes_served, "cached")
    _open(page, first["id"])
    assert page.page.locator(".span-row.cache-broken").count() == 0
    _open(page, second["id"])
    model = page.page.locator(".span-row[data-kind=model]")
    assert "cache-broken" in (model.get_attribute("class") or "")
    assert model.locator(".badge.cache-break").inner_text() == "cache broken at message #0"
    model.click()
    page.page.wait_for_selector(f"#detail[data-span-id='{model.get_attribute('data-span-id')}']")
    note = page.page.locator("#cache-break")
    assert note.get_attribute("data-reason") == "message changed"
    assert "block 1, message #0 (user" in note.inner_text()
    marked = page.page.locator("#conversation .msg.cache-break-at")
    assert marked.count() == 1 and EDITED_TEXT in marked.inner_text()
    share = round(100 * CACHED[1].cache_read_tokens / CACHED[1].input_tokens)
    assert f"hit share {share}%" in page.page.locator("#cache-hit-share").inner_text()


def test_a_subagent_run_is_drawn_under_its_tool_call(
    page: Browser, scenes_served: Served, tmp_path: Path
) -> None:
    (run,) = _runs(scenes_served, "tree")
    _open(page, run["id"])
    rows = page.page.locator("#waterfall .wf-row").evaluate_all(
        "els => els.map(e => [e.className.match(/lvl\\d/)?.[0] || '', e.dataset.kind || '',"
        " e.querySelector('.wf-name').innerText])"
    )
    names = [name for _, _, name in rows]
    tool = names.index("tool · researcher")
    child = [(lvl, kind, name) for lvl, kind, name in rows[tool + 1 : tool + 8]]
    assert child[0][:2] == ("lvl3", "subagent") and child[0][2] == "subagent · researcher"
    assert [(lvl, name) for lvl, _, name in child[1:5]] == [
        ("lvl4", "model call"),
        ("lvl4", "tool · lookup"),
        ("lvl4", "model call"),
        ("lvl4", "tool · fetcher"),
    ]
    assert (child[5][0], child[5][2]) == ("lvl5", "subagent · fetcher")
    assert (child[6][0], child[6][2]) == ("lvl6", "model call")
    researcher = page.page.locator(".subagent-row[data-thread='tree/r1']")
    assert researcher.locator(".sub-meta").inner_text() == "3 model calls · ok"
    assert _number(researcher.locator(".badge.in").inner_text()) == sum(
        u.input_tokens for u in RESEARCHER_USAGE
    )
    assert _number(page.page.locator("#tree-total .badge.in").inner_text()) == TREE_INPUT
    assert page.page.locator("#tree-total .sub-meta").inner_text() == "6 model calls"
    assert page.page.locator(".span-row[data-kind=subagent]").count() == 0
    _shot(page, "#waterfall", "11-subagents", tmp_path)
    assert [m for m in page.console if "Content Security Policy" in m or "error" in m] == []
