"""``plait ui``: serves a trace store on 127.0.0.1; says what to do when there is none."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from plait.trace.server import free_port

DEMO_TRACES = "threads-traces.sqlite3"


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
    env.update({"COLUMNS": "200", "NO_COLOR": "1", "PLAIT_HOME": str(home)})
    return env


def test_ui_without_traces_says_how_to_make_some(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "plait", "ui", "--no-browser"],
        capture_output=True,
        text=True,
        env=_env(tmp_path),
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert "plait demo" in result.stdout + result.stderr


def _start_ui(
    env: dict[str, str], *flags: str, browser: bool = False
) -> tuple[subprocess.Popen[str], str]:
    """``plait ui --no-browser`` (unless ``browser``) on a free port, and the address it
    printed (its first line, checked for the store it names when ``PLAIT_STORE`` is a
    Postgres URL)."""
    port = free_port()
    no_browser = [] if browser else ["--no-browser"]
    server = subprocess.Popen(
        [sys.executable, "-m", "plait", "ui", *no_browser, "--port", str(port), *flags],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None
    first = server.stdout.readline()
    found = re.search(rf"http://127\.0\.0\.1:{port}/\S*", first)
    postgres = env.get("PLAIT_STORE", "").startswith("postgresql://")
    if found is None or (postgres and "the traces in postgresql://" not in first):
        server.terminate()
        server.wait(timeout=20)
        raise AssertionError(first)
    return server, found.group()


def test_ui_serves_the_demo_trace_locally_to_the_address_it_printed(tmp_path: Path) -> None:
    env = _env(tmp_path)
    demo = subprocess.run(
        [sys.executable, "-m", "plait", "demo"], env=env, capture_output=True, timeout=120
    )
    assert demo.returncode == 0 and (tmp_path / DEMO_TRACES).is_file()
    server, url = _start_ui(env)
    try:
        base, _, token = url.partition("?token=")
        assert len(token) == 43  # secrets.token_urlsafe(32), new at each start
        runs = _get_with_retry(f"{base}api/runs?token={token}")
        assert [r["input"] for r in runs][-1] == "What is in sales.csv?"
        assert all(r["agent"] == "plait demo" and r["status"] == "ok" for r in runs)
        for path in (f"{base}api/runs", f"{base}api/runs?token={token[::-1]}", base):
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(path, timeout=5)
            assert refused.value.code in (401, 403)
    finally:
        server.terminate()
        server.wait(timeout=20)


def test_ui_takes_a_fixed_token_from_the_environment_or_none_with_no_token(
    tmp_path: Path,
) -> None:
    (tmp_path / DEMO_TRACES).write_bytes(b"")  # an empty file is a new SQLite database
    fixed = "a-fixed-token-for-this-box"
    server, url = _start_ui({**_env(tmp_path), "PLAIT_UI_TOKEN": fixed})
    try:
        assert url.endswith(f"/?token={fixed}")
        assert _get_with_retry(url.replace("/?", "/api/runs?")) == []
    finally:
        server.terminate()
        server.wait(timeout=20)
    server, url = _start_ui({**_env(tmp_path), "PLAIT_UI_TOKEN": fixed}, "--no-token")
    try:
        assert "token" not in url
        assert _get_with_retry(url + "api/runs") == []
    finally:
        server.terminate()
        server.wait(timeout=20)


def test_ui_opens_the_browser_on_a_private_page_keeping_the_token_off_its_command_line(
    tmp_path: Path,
) -> None:
    # A browser started with the token'd address shows the token to every local user (ps).
    (tmp_path / DEMO_TRACES).write_bytes(b"")
    seen = tmp_path / "browser-saw.txt"
    recorder = tmp_path / "browser.py"
    recorder.write_text(
        "import pathlib, stat, sys, urllib.parse\n"
        "page = pathlib.Path(urllib.parse.urlparse(sys.argv[1]).path)\n"
        "mode = oct(stat.S_IMODE(page.stat().st_mode))\n"
        f"pathlib.Path({str(seen)!r}).write_text(sys.argv[1] + '\\n' + mode + '\\n'"
        " + page.read_text())\n"
    )
    env = {**_env(tmp_path), "BROWSER": f"{sys.executable} {recorder} %s"}
    server, url = _start_ui(env, browser=True)
    try:
        deadline = time.monotonic() + 20
        while not seen.exists():
            assert time.monotonic() < deadline, "the browser was not started within 20 s"
            time.sleep(0.05)
        argument, mode, page = seen.read_text().split("\n", 2)
        assert argument.startswith("file://") and "token" not in argument
        assert mode == "0o600" and f'url={url}"' in page
    finally:
        server.terminate()
        server.wait(timeout=20)
    assert not Path(argument.removeprefix("file://")).exists()  # removed when the server stops


def test_ui_refuses_a_fixed_token_too_short_to_guard_anything(tmp_path: Path) -> None:
    (tmp_path / DEMO_TRACES).write_bytes(b"")
    result = subprocess.run(
        [sys.executable, "-m", "plait", "ui", "--no-browser"],
        capture_output=True,
        text=True,
        env={**_env(tmp_path), "PLAIT_UI_TOKEN": "1234"},
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert "$PLAIT_UI_TOKEN must be at least 16 characters" in result.stdout + result.stderr


def _get_with_retry(url: str) -> list[dict[str, object]]:
    """uvicorn prints nothing when ready: retry the first request for up to 20 s."""
    last: OSError | None = None
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                return list(json.loads(response.read()))
        except urllib.error.HTTPError:
            raise
        except OSError as exc:
            last = exc
            time.sleep(0.1)
    raise AssertionError(f"plait ui did not answer within 20 s: {last}")


def test_no_trace_records_nothing(tmp_path: Path) -> None:
    demo = subprocess.run(
        [sys.executable, "-m", "plait", "demo", "--no-trace"],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert demo.returncode == 0, demo.stdout + demo.stderr
    assert not (tmp_path / DEMO_TRACES).exists()
    assert "trace: plait ui" not in demo.stdout


def test_ui_refuses_a_traces_file_that_is_not_sqlite(tmp_path: Path) -> None:
    # Before: it started serving anyway and every page failed.
    notes = tmp_path / "notes.txt"
    notes.write_text("not a database\n")
    folder = tmp_path / "a-folder"
    folder.mkdir()
    for target, what in ((notes, "not a SQLite database"), (folder, "a folder")):
        result = subprocess.run(
            [sys.executable, "-m", "plait", "ui", "--no-browser", "--traces", str(target)],
            capture_output=True,
            text=True,
            env=_env(tmp_path),
            timeout=30,
            check=False,
        )
        output = result.stdout + result.stderr
        assert result.returncode == 2, output
        assert str(target) in " ".join(output.split()) and what in output


def test_the_trace_hint_names_a_postgres_store_without_its_password() -> None:
    from plait.cli.ui import trace_hint

    hint = trace_hint("r1", "postgresql://ann:s3cret@db.local:5432/app")
    assert "--store postgresql://ann:***@db.local:5432/app" in hint and "s3cret" not in hint
    assert hint.endswith("/#r1")


def _traces_file(tmp_path: Path) -> Path:
    """An empty trace store file (SQLite makes an empty file a new database)."""
    path = tmp_path / "t-traces.sqlite3"
    path.touch()
    return path


def test_ui_on_a_busy_port_suggests_another_with_port(tmp_path: Path) -> None:
    # Before: uvicorn logged "address already in use" and exited 1, with no hint.
    import socket

    from cli_inprocess import run_plait

    traces = _traces_file(tmp_path)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = run_plait(
            "ui",
            "--traces",
            str(traces),
            "--port",
            str(port),
            "--no-browser",
            "--no-token",
            home=tmp_path,
        )
    assert result.returncode == 2, result.stdout + result.stderr
    message = " ".join(result.stderr.split())
    assert f"Port {port} on 127.0.0.1 is in use" in message
    assert "--port" in message and "Traceback" not in message
    assert "serving" not in result.stdout


@pytest.mark.parametrize("missing", ["starlette", "uvicorn"])
def test_ui_without_its_extra_is_one_line_with_the_install_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, missing: str
) -> None:
    # Before: without Starlette, create_app's ConfigurationError ended in a traceback.
    from cli_inprocess import run_plait

    traces = _traces_file(tmp_path)
    for name in [m for m in sys.modules if m == missing or m.startswith(missing + ".")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, missing, None)  # what an environment without it sees
    result = run_plait("ui", "--traces", str(traces), "--port", "0", "--no-browser", home=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "pip install 'plait[ui]'" in lines[0], result.stderr
    assert "serving" not in result.stdout
