"""The trace page in a real headless Chromium over the demo's recorded trace.

Each panel is checked against the figures the JSON API (tested in test_trace_views.py) computes,
and every request the browser makes must go to the local server. With
``PLAIT_UPDATE_SCREENSHOTS=1`` the panels' screenshots are written to ``docs/`` for the README.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from trace_page import DEMO_PRICES, Browser, Served, read, read_json

DOCS = Path(__file__).parents[2] / "docs"


def _get(url: str) -> Any:
    return read_json(url)


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
def page(browser: Browser, served: Served) -> Browser:
    browser.page.goto(served.page_url)
    browser.page.wait_for_selector("body[data-ready='1']")
    return browser


def _open_first_turn(page: Browser) -> None:
    item = page.page.locator(".run-item").last
    item.click()
    page.page.wait_for_selector(f"#waterfall[data-run-id='{item.get_attribute('data-run-id')}']")


def test_run_list_is_newest_first_and_searchable(page: Browser, tmp_path: Path) -> None:
    items = page.page.locator(".run-item .in")
    assert items.all_inner_texts() == [
        "Draft a one-line note for the team about it.",
        "Which region sold the most units?",
        "What is in sales.csv?",
    ]
    assert page.page.locator(".thread").all_inner_texts() == ["THREAD DEMO"]
    _shot(page, "#side", "1-runs", tmp_path)
    page.page.fill("#search", "most units")
    page.page.wait_for_function("() => document.querySelectorAll('.run-item').length === 1")
    assert items.all_inner_texts() == ["Which region sold the most units?"]
    page.page.fill("#search", "")
    page.page.wait_for_function("() => document.querySelectorAll('.run-item').length === 3")


def test_waterfall_badges_sum_their_children(page: Browser, served: Served, tmp_path: Path) -> None:
    _open_first_turn(page)
    run_id = page.page.locator(".run-item").last.get_attribute("data-run-id")
    view = _get(f"{served.url}/api/runs/{run_id}")

    def badge(row: Any, kind: str) -> int:
        return _number(row.locator(f".badge.{kind}").inner_text())

    turn = page.page.locator(".run-row")
    dispatches = page.page.locator(".dispatch-row")
    assert dispatches.count() == len(view["dispatches"]) == 4
    for kind in ("in", "out"):
        total = 0
        for i in range(dispatches.count()):
            row = dispatches.nth(i)
            index = row.get_attribute("data-dispatch")
            models = page.page.locator(".span-row[data-kind=model]").filter(
                has=page.page.locator(".badge")
            )
            own = [
                badge(models.nth(j), kind)
                for j in range(models.count())
                if _dispatch_of(page, models.nth(j)) == index
            ]
            assert badge(row, kind) == sum(own)
            total += badge(row, kind)
        assert badge(turn, kind) == total
    assert badge(turn, "in") == view["usage"]["input"]
    labels = page.page.locator(".span-row .wf-name").all_inner_texts()
    assert "tool · csv_rows" in labels and "result evicted" in labels
    assert "history summarized" in labels and "skill tools disclosed" in labels
    _shot(page, "#waterfall", "2-waterfall", tmp_path)


def _data(page: Browser, selector: str, key: str) -> list[str]:
    return list(page.page.locator(selector).evaluate_all(f"els => els.map(e => e.dataset.{key})"))


def _dispatch_of(page: Browser, row: Any) -> str | None:
    found = row.evaluate(
        "(el) => { let p = el.previousElementSibling;"
        " while (p && !p.classList.contains('dispatch-row')) p = p.previousElementSibling;"
        " return p && p.dataset.dispatch; }"
    )
    return None if found is None else str(found)


def _open_model_call(page: Browser, n: int) -> dict[str, Any]:
    row = page.page.locator(".span-row[data-kind=model]").nth(n)
    span_id = row.get_attribute("data-span-id")
    row.click()
    page.page.wait_for_selector(f"#detail[data-span-id='{span_id}'] #context-diff")
    url = page.page.url.split("#")[0].rstrip("/")
    call: dict[str, Any] = _get(f"{url}/api/calls/{span_id}")
    return call


def test_model_call_reads_as_a_conversation(page: Browser, tmp_path: Path) -> None:
    _open_first_turn(page)
    call = _open_model_call(page, 1)
    messages = page.page.locator("#conversation .msg")
    # the system prompt, each message as sent, and the answer
    assert messages.count() == len(call["messages"]) + 2
    kinds = page.page.locator("#conversation .msg").evaluate_all(
        "els => els.map(e => e.dataset.kind)"
    )
    assert "tool_result" in kinds and kinds[-1] == "answer"
    offered = page.page.locator("#tools-offered .tool-def").evaluate_all(
        "els => els.map(e => e.dataset.tool)"
    )
    assert sorted(offered) == sorted(t["name"] for t in call["tools"])
    assert "csv_rows" in offered
    made = page.page.locator("#calls-made .call").evaluate_all(
        "els => els.map(e => e.dataset.tool)"
    )
    assert made == ["csv_rows"]
    _shot(page, "#detail", "3-conversation", tmp_path)


def _diff_rows(page: Browser) -> list[tuple[str, int]]:
    rows = page.page.locator("#context-diff .diff-item")
    return [
        (
            rows.nth(i).get_attribute("data-change") or "",
            _number(rows.nth(i).locator(".delta").inner_text()),
        )
        for i in range(rows.count())
    ]


def test_context_diff_of_eviction_and_summarization(page: Browser, tmp_path: Path) -> None:
    _open_first_turn(page)
    found: dict[str, int] = {}
    for n in range(4):
        call = _open_model_call(page, n)
        rows = _diff_rows(page)
        assert [(i["change"], i["tokens"]) for i in call["diff"]["items"]] == rows
        if rows:
            net = _number(page.page.locator("#diff-total").inner_text())
            assert net == sum(t for _, t in rows) == call["diff"]["delta"]
        for change, _ in rows:
            found.setdefault(change, n)
    assert {"added", "disclosed", "evicted", "summarized", "withdrawn"} <= set(found)
    step = found["evicted"]
    call = _open_model_call(page, step)
    note = page.page.locator("#context-diff .diff-item[data-change=evicted]").inner_text()
    assert "full text at large_tool_results/demo/" in note
    _shot(page, "#context-diff", "4-context-diff", tmp_path)


def test_where_the_tokens_went(page: Browser, tmp_path: Path) -> None:
    _open_first_turn(page)
    call = _open_model_call(page, 2)
    parts = page.page.locator("#breakdown .part")
    shown = {
        parts.nth(i).get_attribute("data-part"): _number(
            parts.nth(i).locator(".tokens").inner_text()
        )
        for i in range(parts.count())
    }
    assert shown == {p["part"]: p["tokens"] for p in call["breakdown"]}
    assert shown["summaries"] > 0 and shown["skill catalog"] > 0 and shown["tool results"] > 0
    _shot(page, "#breakdown", "5-tokens", tmp_path)


def test_tool_call_with_evicted_result_and_full_text(
    page: Browser, served: Served, tmp_path: Path
) -> None:
    _open_first_turn(page)
    row = page.page.locator(".span-row[data-kind=tool]").nth(1)
    row.click()
    page.page.wait_for_selector(f"#detail[data-span-id='{row.get_attribute('data-span-id')}']")
    page.page.wait_for_selector("#tool-evicted")
    assert json.loads(page.page.locator("#tool-input").inner_text())["path"].endswith("sales.csv")
    assert page.page.locator("#tool-output").inner_text().startswith("date,region,product")
    assert _number(page.page.locator("#tool-evicted").inner_text()) > 9_000
    assert '"_evicted": true' in page.page.locator("#tool-model-saw").inner_text()
    href = page.page.locator("a.full-text").get_attribute("href")
    assert href is not None
    full = read(served.url + href).decode()
    assert full.startswith("date,region") and len(full.splitlines()) == 1_201
    _shot(page, "#detail", "6-tool", tmp_path)


def test_usage_and_cost_with_an_editable_price_table(page: Browser, tmp_path: Path) -> None:
    _open_first_turn(page)
    page.page.wait_for_selector("#usage-table")
    total = page.page.locator("#usage-table .usage-total")
    cells = total.locator("td.num").all_inner_texts()
    tokens_in, tokens_out = _number(cells[0]), _number(cells[1])
    price = DEMO_PRICES["scripted-demo"]
    expected = (tokens_in * price["input"] + tokens_out * price["output"]) / 1e6
    assert total.locator(".cost").inner_text() == f"${expected:.6f}"
    turns = page.page.locator("#usage-table .usage-turn")
    assert turns.count() == 3
    assert sum(_number(turns.nth(i).locator("td.num").first.inner_text()) for i in range(3)) == (
        tokens_in
    )
    _shot(page, "#usage", "7-usage", tmp_path)
    page.page.fill(".price[data-model='scripted-demo'][data-k='input']", "4")
    page.page.locator(".price[data-model='scripted-demo'][data-k='input']").dispatch_event("change")
    doubled = (tokens_in * 4 + tokens_out * price["output"]) / 1e6
    page.page.wait_for_function(
        "(want) => document.querySelector('#usage-table .usage-total .cost').innerText === want",
        arg=f"${doubled:.6f}",
    )
    page.page.fill(".price[data-model='scripted-demo'][data-k='input']", "2")
    page.page.locator(".price[data-model='scripted-demo'][data-k='input']").dispatch_event("change")


def test_two_runs_side_by_side(page: Browser, tmp_path: Path) -> None:
    items = page.page.locator(".run-item")
    items.nth(0).locator(".pick").check()
    items.nth(2).locator(".pick").check()
    page.page.click("#compare-btn")
    page.page.wait_for_selector("#compare-table")
    row = page.page.locator("#compare-table tr[data-row='model calls']")
    assert _number(row.locator(".a").inner_text()) == 1
    assert _number(row.locator(".b").inner_text()) == 4
    tools = page.page.locator("#compare-table tr[data-row='tool calls']")
    assert (
        _number(tools.locator(".a").inner_text()),
        _number(tools.locator(".b").inner_text()),
    ) == (0, 3)
    _shot(page, "#compare", "8-compare", tmp_path)


def test_no_request_leaves_the_local_server(page: Browser, served: Served) -> None:
    assert page.requests, "the browser made no request at all"
    foreign = [u for u in page.requests if not u.startswith(served.url + "/")]
    assert foreign == []
    # and the page ran under its Content-Security-Policy without breaking one of its rules
    assert [m for m in page.console if "Content Security Policy" in m] == []
